// ClusterNetSpec: the network part of a scenario's `cluster:` section (CONTRACT §2:
// `intra_node`, `inter_node.topology`, `nics_per_node`, `nic_bandwidth`, `latency`,
// `oversubscription`) and build_cluster(), which dispatches to the builders.
// Defaults are a DGX A100 cluster (CONTRACT §2 example; NVIDIA DGX A100 datasheet:
// 600 GB/s bidirectional NVLink per GPU, 8x 200 Gb/s HDR NICs).
#pragma once

#include <string>
#include <vector>

#include "hw/net/topology.h"

namespace ptsim::hw::net {

struct ClusterNetSpec {
  int num_gpus = 8;
  int gpus_per_node = 8;
  BytesPerSecond intra_bandwidth = 300e9;  // per GPU per direction
  Seconds intra_latency = 1e-6;            // GPU to GPU inside a node
  std::string topology = "fat-tree";       // fat-tree | rail-optimized | torus | graph | single-node
  int nics_per_node = 8;
  BytesPerSecond nic_bandwidth = 25e9;  // per NIC per direction
  Seconds inter_latency = 2e-6;         // NIC to NIC (split over the two NIC cables)
  double oversubscription = 1.0;        // leaf downlink : uplink
  int switch_radix = 64;
  int tiers = 0;                      // fat-tree: 2 or 3; 0 = the fewest that fit
  Seconds hop_latency = 0;            // each switch<->switch (or torus router) cable
  int gpus_per_pcie_switch = 0;       // 0: 2 when that divides evenly (DGX), else all GPUs on one
  BytesPerSecond pcie_bandwidth = 0;  // 0: never the bottleneck
  Seconds pcie_latency = 0;
  std::vector<int> torus_dims;              // torus: 2 or 3 sizes, product = num_gpus / gpus_per_node
  BytesPerSecond torus_link_bandwidth = 0;  // 0 = nic_bandwidth
  std::string graph_file;                   // topology: graph (graph_yaml.h)
  bool nvls = false;                        // NVLink SHARP in the NVSwitch domains (H100+)
  Topology::Routing routing = Topology::Routing::ecmp;  // equal-cost next hop: per-flow hash or by destination
};

// Throws std::invalid_argument naming the bad field and value.
Topology build_cluster(const ClusterNetSpec& spec);

// The topology names build_cluster accepts.
std::vector<std::string> topology_names();

}  // namespace ptsim::hw::net
