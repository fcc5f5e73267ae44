// cluster.slow: straggler GPUs (sim/core/straggler.h), read into
// ClusterConfig::slow_factor, one factor per rank.
#pragma once
#include <yaml-cpp/yaml.h>

#include "hw/strict_yaml.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// Reads `node` (cluster.slow, a list of entries) into cc.slow_factor; cc.num_gpus and
// cc.gpus_per_node are read. Bad input fails through `r` naming the key.
void read_slow(const hw::StrictReader& r, const YAML::Node& node, ClusterConfig& cc);

}  // namespace ptsim::sim
