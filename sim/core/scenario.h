// The scenario the simulator consumes (CONTRACT §2): model, cluster and plan, with every
// unit already parsed. Reading and checking it from YAML is sim/io/scenario_file.h.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hw/gpu_catalog.h"
#include "hw/net/nccl_tuning.h"
#include "hw/net/topology.h"
#include "hw/units.h"
#include "models/model_spec.h"
#include "sim/core/framework_profile.h"
#include "sim/core/plan.h"
#include "sim/core/reliability.h"

namespace ptsim::sim {

// One GPU type of a mixed cluster (cluster.gpus, sim/core/mixed_cluster.h): `nodes`
// nodes from `first_node` on hold this GPU.
struct GpuGroup {
  hw::GpuSpec gpu;
  int first_node = 0;
  int nodes = 0;
  std::string calibration;  // cluster.gpus[i].calibration: a cost table measured on this type
};

struct ClusterConfig {
  // The GPU; of a mixed cluster (cluster.gpus) the first group's: network defaults and
  // NCCL's architecture row come from it, costs and capacity per stage from gpu_groups.
  hw::GpuSpec gpu;
  int num_gpus = 0;
  int gpus_per_node = 8;
  std::string intra_fabric = "nvswitch";
  BytesPerSecond intra_bandwidth = 0;  // per GPU, per direction
  Seconds intra_latency = 1e-6;
  std::string topology = "fat-tree";
  int nics_per_node = 8;
  BytesPerSecond nic_bandwidth = 0;  // per NIC, per direction
  Seconds inter_latency = 2e-6;
  double oversubscription = 1.0;
  std::string calibration;  // optional cost table path
  // Network model (README "Network model"; hw/net/cluster.h).
  int switch_radix = 64;        // inter_node.switch_radix: ports per fabric switch
  int tiers = 0;                // inter_node.tiers: fat-tree 2 or 3; 0 = fewest that fit
  std::vector<int> torus_dims;  // inter_node.torus_dims: nodes per torus dimension
  std::string graph_file;       // inter_node.graph_file: topology `user`
  // inter_node.routing: ecmp (per-flow hash, Ethernet / RoCE) or d-mod-k (by
  // destination, InfiniBand fat trees; hw/net/routing.h).
  hw::net::Topology::Routing routing = hw::net::Topology::Routing::ecmp;
  // inter_node.qps_per_connection: network flows per connection, each hashed on its own
  // (NCCL_IB_QPS_PER_CONNECTION; hw/net/collectives.h ExpandOptions::qps).
  int qps_per_connection = 1;
  bool nvls = false;            // intra_node.nvls: NVLink SHARP all-reduce (H100+)
  // inter_node.sharp: in-network reduction on the fabric's switches (InfiniBand SHARP through
  // NCCL's CollNet plugin): NCCL's CollNet algorithms, and NVLS across nodes.
  bool sharp = false;
  bool link_sharing = true;     // cluster.link_sharing: overlapping transfers share links
  // cluster.pxn: NCCL's PXN for all-to-all (hw/net/collectives.h ExpandOptions::pxn);
  // false stands for NCCL_PXN_DISABLE=1.
  bool pxn = true;
  // cluster.host_cpu: the nodes' CPU as NCCL's tuning sees it (hw/net/nccl_tuning.h).
  hw::net::CpuVendor host_cpu = hw::net::CpuVendor::intel;
  // cluster.nccl_version: which NCCL's cost model and algorithms (hw/net/nccl_tuning.h;
  // the default is hw::net::kDefaultNcclVersion).
  std::string nccl_version{hw::net::kDefaultNcclVersion};
  // cluster.collectives: per-kind algorithm override, e.g. {"all_reduce", "ring"}.
  std::vector<std::pair<std::string, std::string>> collective_algorithms;
  // Time-to-train and cost (sim/core/time_to_train.h): cluster.price_per_gpu_hour, a
  // currency-neutral number (absent: no cost figure), and cluster.gpu_power (default gpu.tdp).
  std::optional<double> price_per_gpu_hour;
  Watts gpu_power = 0;
  // cluster.slow (sim/core/straggler.h): compute slowdown factor of every rank, >= 1;
  // empty when the cluster has no slow GPUs.
  std::vector<double> slow_factor;
  // cluster.gpus: a cluster mixing GPU types, node ranges in order (empty: every GPU
  // is `gpu`). Each pipeline stage lies on one type (sim/core/mixed_cluster.h).
  std::vector<GpuGroup> gpu_groups;
  bool mixed() const { return gpu_groups.size() > 1; }

  int num_nodes() const { return num_gpus / gpus_per_node; }
};

// How much training the time-to-train figures are for: training.total_tokens or
// training.train_iters (at most one; neither: no time-to-train figures).
struct TrainingGoal {
  double total_tokens = 0;       // 0 = not given
  std::int64_t train_iters = 0;  // 0 = not given
  bool given() const { return total_tokens > 0 || train_iters > 0; }
};

struct Scenario {
  std::string name;
  std::string file;  // where it came from (for messages)
  models::ModelSpec model;
  ClusterConfig cluster;
  Plan plan;
  std::string optimizer = "adam";
  FrameworkProfile framework;  // training.framework and its overrides
  TrainingGoal goal;
  // Where model.seq_length came from: "model.seq_length", the preset, or the HF config's
  // max_position_embeddings (README "Inputs you already have").
  std::string seq_length_source;
  // Defaults that stood in for something the user probably meant, each "FILE: KEY: what"
  // (README "Warnings"); simulate() copies them into Result::warnings.
  std::vector<std::string> warnings;
  void warn(const std::string& key, const std::string& what) { warnings.push_back(file + ": " + key + ": " + what); }
  std::optional<ReliabilityConfig> reliability;  // the `reliability:` section (sim/core/goodput.h)
  // A mixed cluster's parallel.pipeline_layers were chosen to balance its GPU types
  // (sim/core/mixed_cluster.h), not given.
  bool pipeline_balanced = false;
};

}  // namespace ptsim::sim
