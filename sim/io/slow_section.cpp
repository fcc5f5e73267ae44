#include "sim/io/slow_section.h"
#include "sim/io/scenario_keys.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "sim/core/straggler.h"

namespace ptsim::sim {
namespace {

const std::vector<std::string> kSlowKeys = keys_of("cluster.slow");
// A GPU 100× slower than its peers is a dead GPU, not a straggler; log-spread sigma
// above 2 (median slowdown ×3.8) likewise.
constexpr double kMaxSlowFactor = 100;
constexpr double kMaxSigma = 2;

// "0-7,12" or [0, 1, 2]: indices below `limit`.
std::vector<int> indices(const hw::StrictReader& r, const YAML::Node& n, const std::string& key, int limit) {
  std::vector<int> out;
  if (n.IsSequence()) {
    if (n.size() == 0) r.fail(key, "is an empty list");
    for (std::size_t i = 0; i < n.size(); ++i)
      out.push_back(static_cast<int>(r.int64(n[i], hw::item_path(key, i), 0, limit - 1)));
    return out;
  }
  const std::string text = r.string(n, key);
  try {
    return parse_index_list(text, limit);
  } catch (const std::invalid_argument& e) {
    r.fail(key, e.what(), "e.g. \"0-7\", \"0-3,12\" or a list [0, 5]");
  }
}

}  // namespace

void read_slow(const hw::StrictReader& r, const YAML::Node& node, ClusterConfig& cc) {
  if (!node.IsSequence() || node.size() == 0)
    r.fail("cluster.slow", "expected a non-empty list of entries",
           "e.g. [{ranks: \"0-7\", factor: 1.15}] or [{distribution: lognormal, sigma: 0.05, seed: 1}]");
  cc.slow_factor.assign(static_cast<std::size_t>(cc.num_gpus), 1.0);
  const int nodes = cc.num_gpus / cc.gpus_per_node;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string at = hw::item_path("cluster.slow", i);
    const YAML::Node e = node[i];
    r.check_keys(e, at, kSlowKeys);
    // The GPUs of the entry: listed ranks, the GPUs of listed nodes, or all.
    if (e["ranks"] && e["nodes"]) r.fail(at + ".nodes", "give ranks or nodes, not both");
    std::vector<int> gpus;
    if (e["ranks"]) {
      gpus = indices(r, e["ranks"], at + ".ranks", cc.num_gpus);
    } else if (e["nodes"]) {
      for (int n : indices(r, e["nodes"], at + ".nodes", nodes))
        for (int g = 0; g < cc.gpus_per_node; ++g) gpus.push_back(n * cc.gpus_per_node + g);
    } else if (e["factor"]) {
      r.fail(at + ".ranks", "missing: a fixed factor needs the ranks or nodes it slows");
    } else {
      for (int g = 0; g < cc.num_gpus; ++g) gpus.push_back(g);
    }
    if (e["factor"] && e["distribution"])
      r.fail(at + ".distribution", "give a fixed factor or a distribution, not both");
    if (e["factor"]) {
      const double f = r.positive(e["factor"], at + ".factor");
      if (f < 1 || f > kMaxSlowFactor)
        r.fail(at + ".factor", fmt::format("{:g} is out of range", f),
               "1 (datasheet speed) to 100: the time every compute op of these GPUs takes, × the nominal");
      for (int g : gpus) cc.slow_factor[static_cast<std::size_t>(g)] *= f;
      continue;
    }
    if (!e["distribution"]) r.fail(at + ".factor", "missing: give factor, or distribution (lognormal | uniform)");
    const std::string dist = r.choice(e["distribution"], at + ".distribution", {"lognormal", "uniform"});
    const std::uint64_t seed = e["seed"] ? static_cast<std::uint64_t>(r.int64(e["seed"], at + ".seed", 0)) : 1;
    double param = 0;
    if (dist == "lognormal") {
      if (e["max_factor"]) r.fail(at + ".max_factor", "belongs to distribution uniform; lognormal takes sigma");
      if (!e["sigma"]) r.fail(at + ".sigma", "missing: the log-normal spread, e.g. 0.05");
      param = r.positive(e["sigma"], at + ".sigma");
      if (param > kMaxSigma) r.fail(at + ".sigma", fmt::format("{:g} is out of range", param), "at most 2");
    } else {
      if (e["sigma"]) r.fail(at + ".sigma", "belongs to distribution lognormal; uniform takes max_factor");
      if (!e["max_factor"]) r.fail(at + ".max_factor", "missing: the slowest factor drawn, e.g. 1.2");
      param = r.positive(e["max_factor"], at + ".max_factor");
      if (param <= 1 || param > kMaxSlowFactor)
        r.fail(at + ".max_factor", fmt::format("{:g} is out of range", param), "more than 1 and at most 100");
    }
    const auto draws = draw_slowdowns(dist == "lognormal" ? SlowDistribution::lognormal : SlowDistribution::uniform,
                                      param, seed, static_cast<int>(gpus.size()));
    for (std::size_t k = 0; k < gpus.size(); ++k) cc.slow_factor[static_cast<std::size_t>(gpus[k])] *= draws[k];
  }
  for (double& f : cc.slow_factor)
    if (f > kMaxSlowFactor) f = kMaxSlowFactor;  // entries compound; keep the product in range
}

}  // namespace ptsim::sim
