// cluster.gpus: a cluster mixing GPU types (sim/core/mixed_cluster.h), read into
// ClusterConfig::gpu_groups, the alternative to cluster.gpu.
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>

#include "hw/strict_yaml.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// The catalog GPU named by the string at `n` (key `key`, e.g. cluster.gpu); an unknown
// name fails through `r` with the closest catalog name.
hw::GpuSpec catalog_gpu(const hw::StrictReader& r, const YAML::Node& n, const std::string& key);

// Reads cluster.gpus (a list of {type, nodes, calibration}) of the cluster section `c`:
// cc.gpu (the first type), cc.gpus_per_node, cc.num_gpus (the nodes' GPUs; a given
// cluster.num_gpus must agree) and, with two or more entries, cc.gpu_groups in node order.
// A single entry is cluster.gpu (and its calibration cluster.calibration). Bad input fails
// through `r` naming the key.
void read_gpus(const hw::StrictReader& r, const YAML::Node& c, ClusterConfig& cc);

}  // namespace ptsim::sim
