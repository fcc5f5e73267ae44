#include "sim/io/gpus_section.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "sim/io/scenario_file.h"
#include "sim/io/scenario_keys.h"

namespace ptsim::sim {
namespace {

const std::vector<std::string> kGpusKeys = keys_of("cluster.gpus");

}  // namespace

hw::GpuSpec catalog_gpu(const hw::StrictReader& r, const YAML::Node& n, const std::string& key) {
  const std::string name = r.string(n, key);
  auto g = hw::find_gpu(name);
  if (!g) {
    std::vector<std::string> names;
    for (const auto& x : hw::gpu_catalog()) names.push_back(x.name);
    r.fail(key, fmt::format("unknown GPU '{}'", name),
           fmt::format("did you mean '{}'? `ptsim list gpus` lists them", closest_match(name, names)));
  }
  return *g;
}

void read_gpus(const hw::StrictReader& r, const YAML::Node& c, ClusterConfig& cc) {
  const YAML::Node list = c["gpus"];
  if (c["gpu"]) r.fail("cluster.gpus", "give cluster.gpu (one GPU type) or cluster.gpus (several), not both");
  if (!list.IsSequence() || list.size() == 0)
    r.fail("cluster.gpus", "expected a non-empty list of node groups",
           "e.g. [{type: a100-sxm-80gb, nodes: 4}, {type: h100-sxm, nodes: 4}]");
  if (c["calibration"])
    r.fail("cluster.calibration", "is for a cluster of one GPU type; with cluster.gpus give each type's table",
           "set cluster.gpus[i].calibration");
  cc.gpus_per_node = 8;  // DGX-style nodes
  if (c["gpus_per_node"])
    cc.gpus_per_node = static_cast<int>(r.int64(c["gpus_per_node"], "cluster.gpus_per_node", 1, kMaxGpus));
  std::int64_t nodes = 0;
  std::vector<GpuGroup> groups;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = hw::item_path("cluster.gpus", i);
    const YAML::Node e = list[i];
    if (!e.IsMap()) r.fail(at, "expected a map {type: GPU, nodes: N}");
    r.check_keys(e, at, kGpusKeys);
    if (!e["type"]) r.fail(at + ".type", "missing", "`ptsim list gpus` lists the catalog");
    if (!e["nodes"]) r.fail(at + ".nodes", "missing: how many nodes hold this GPU type");
    GpuGroup g;
    g.gpu = catalog_gpu(r, e["type"], at + ".type");
    g.nodes = static_cast<int>(r.int64(e["nodes"], at + ".nodes", 1, kMaxGpus));
    g.first_node = static_cast<int>(nodes);
    if (e["calibration"]) g.calibration = r.string(e["calibration"], at + ".calibration");
    nodes += g.nodes;
    if (nodes * cc.gpus_per_node > kMaxGpus)
      r.fail(at + ".nodes", fmt::format("the groups hold more than {} GPUs", kMaxGpus));
    groups.push_back(std::move(g));
  }
  const std::int64_t gpus = nodes * cc.gpus_per_node;
  if (c["num_gpus"]) {
    const std::int64_t given = r.int64(c["num_gpus"], "cluster.num_gpus", 1, kMaxGpus);
    if (given != gpus)
      r.fail("cluster.num_gpus",
             fmt::format("is {} but cluster.gpus holds {} nodes × {} GPUs per node = {}", given, nodes,
                         cc.gpus_per_node, gpus),
             "leave cluster.num_gpus out: it is derived from cluster.gpus");
  }
  cc.num_gpus = static_cast<int>(gpus);
  cc.gpu = groups.front().gpu;
  if (groups.size() == 1) {
    cc.calibration = groups.front().calibration;
    return;
  }
  cc.gpu_groups = std::move(groups);
}

}  // namespace ptsim::sim
