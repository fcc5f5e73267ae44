// The scenario file (CONTRACT §2): strict YAML loading, unit parsing at the edge,
// --set overrides, and every constraint checked with a message naming the keys.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "hw/gpu_catalog.h"
#include "hw/strict_yaml.h"
#include "hw/units.h"
#include "models/model_spec.h"
#include "sim/plan.h"

namespace ptsim::sim {

struct ClusterConfig {
  hw::GpuSpec gpu;
  int num_gpus = 0;
  int gpus_per_node = 8;
  std::string intra_fabric = "nvswitch";
  BytesPerSecond intra_bandwidth = 0;  // per GPU, per direction
  Seconds intra_latency = 1e-6;
  std::string topology = "fat-tree";
  int nics_per_node = 8;
  BytesPerSecond nic_bandwidth = 0;    // per NIC, per direction
  Seconds inter_latency = 2e-6;
  double oversubscription = 1.0;
  std::string calibration;             // optional cost table path
  // Network model (README "Network model"; hw/net/cluster.h).
  int switch_radix = 64;               // inter_node.switch_radix: ports per fabric switch
  int tiers = 0;                       // inter_node.tiers: fat-tree 2 or 3; 0 = fewest that fit
  std::vector<int> torus_dims;         // inter_node.torus_dims: nodes per torus dimension
  std::string graph_file;              // inter_node.graph_file: topology `user`
  bool nvls = false;                   // intra_node.nvls: NVLink SHARP all-reduce (H100+)
  bool link_sharing = true;            // cluster.link_sharing: overlapping transfers share links
  // cluster.collectives: per-kind algorithm override, e.g. {"all_reduce", "ring"}.
  std::vector<std::pair<std::string, std::string>> collective_algorithms;

  int num_nodes() const { return num_gpus / gpus_per_node; }
};

struct Scenario {
  std::string name;
  std::string file;  // where it came from (for messages)
  models::ModelSpec model;
  ClusterConfig cluster;
  Plan plan;
  std::string optimizer = "adam";
};

// Loads and validates; throws ScenarioError (file, key path, what, hint).
// `overrides` are "key.path=value" strings applied before validation (--set).
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});
Scenario parse_scenario(const std::string& yaml_text, const std::string& file,
                        const std::vector<std::string>& overrides = {});

// Sets plan.par.num_microbatches = global_batch / (micro_batch × dp) when it divides
// (validate() reports it when it does not).
void derive_microbatches(Scenario& s);

// Checks every cross-key constraint; throws ScenarioError. Also used by the search
// (with file = "<plan>") to reject invalid candidates.
void validate(const Scenario& s);

// The closest of `candidates` to `word` (Levenshtein), for "did you mean" hints.
using hw::closest_match;

}  // namespace ptsim::sim
