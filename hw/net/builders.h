// Topology builders: DGX-style node, multi-tier fat tree, rail-optimized fabric,
// 2D/3D torus. Every parameter is validated; a bad one throws
// std::invalid_argument naming the parameter and its value (SimGrid's
// TorusZone/FatTreeZone habit).
//
// Sources for the shapes:
//  - DGX A100 / H100 node: 8 GPUs on NVSwitch; 4 PCIe switches, each with 2 GPUs and
//    2 compute NICs (NVIDIA DGX A100 User Guide, "Network Ports"; DGX H100 same layout).
//  - Fat tree: Leiserson 1985; k-ary folded Clos as in Al-Fares et al., "A Scalable,
//    Commodity Data Center Network Architecture" (SIGCOMM'08): radix-k switches, leaf
//    k/2 down / k/2 up, pods of k/2 leaves, (k/2)^2 cores, up to k^3/4 endpoints.
//  - Rail-optimized: NVIDIA DGX SuperPOD reference architecture — NIC i of every node
//    on rail switch i, rails joined by spines.
//  - Torus: k-ary n-cube with wrap-around links (as SimGrid's TorusZone).
#pragma once

#include <vector>

#include "hw/net/topology.h"

namespace ptsim::hw::net {

// Routing costs per link type (routing.h): NVLink is preferred to PCIe peer-to-peer,
// and one NVLink hop to the GPU that owns a NIC on the right rail (NCCL PXN) is
// cheaper than crossing the spine.
inline constexpr std::uint8_t kNvlinkCost = 1;
inline constexpr std::uint8_t kPcieCost = 2;
inline constexpr std::uint8_t kFabricCost = 4;

struct NodeParams {
  int gpus_per_node = 8;
  BytesPerSecond nvlink_bandwidth = 300e9;  // per GPU per direction (DGX A100: 12 NVLink3 x 25 GB/s)
  Seconds nvlink_latency = 1e-6;            // GPU to GPU through the NVSwitch (half on each cable)
  int nics_per_node = 8;
  BytesPerSecond nic_bandwidth = 25e9;  // 200 Gb/s HDR InfiniBand
  int gpus_per_pcie_switch = 2;         // DGX: 2 GPUs + 2 NICs per PCIe switch; 1 = a NIC per GPU
  BytesPerSecond pcie_bandwidth = 0;    // per direction; 0: sized to the NICs behind it (never the bottleneck)
  Seconds pcie_latency = 0;
};

struct FabricParams {
  int switch_radix = 64;          // ports per switch
  double oversubscription = 1.0;  // leaf downlink : uplink bandwidth (2 = 2:1)
  int tiers = 0;                  // 2 or 3; 0 = the fewest that fit
  BytesPerSecond link_bandwidth =
      0;                       // spine<->core cable; 0 = the NIC bandwidth (leaf uplinks follow the oversubscription)
  Seconds nic_latency = 1e-6;  // each NIC<->switch cable (NIC-to-NIC = 2x this + hop latencies)
  Seconds hop_latency = 0;     // each switch<->switch cable
};

struct TorusParams {
  std::vector<int> dims;              // 2 or 3 sizes, each >= 2; product = number of nodes
  BytesPerSecond link_bandwidth = 0;  // router<->router cable; 0 = the NIC bandwidth
  Seconds nic_latency = 1e-6;         // NIC<->router cable
  Seconds hop_latency = 0;            // router<->router cable
};

// Throws std::invalid_argument for a bad value.
void validate(const NodeParams& p);
void validate(const FabricParams& p);

// What add_node created for one server.
struct NodeVertices {
  std::vector<VertexId> gpus;
  std::vector<VertexId> nics;
  VertexId nvswitch = kNoVertex;
};
// Adds one DGX-style server (GPUs rank-ordered after those already present).
NodeVertices add_node(Topology& topo, int node, const NodeParams& p);

Topology build_dgx_node(const NodeParams& p);
// NICs in node-major order, radix/2 per leaf; leaf uplinks thinned by the oversubscription.
Topology build_fat_tree(int num_nodes, const NodeParams& node, const FabricParams& fabric);
// NIC r of each node on rail r's leaf (one leaf per rail per radix/2 nodes); every leaf
// connects to every spine.
Topology build_rail_optimized(int num_nodes, const NodeParams& node, const FabricParams& fabric);
// One router per node, its NICs attached to it; routers form the torus.
Topology build_torus(const NodeParams& node, const TorusParams& torus);

}  // namespace ptsim::hw::net
