#include "sim/core/mixed_cluster.h"

#include <fmt/format.h>

#include <stdexcept>

#include "hw/cost_table.h"
#include "models/memory.h"
#include "sim/core/errors.h"
#include "sim/core/program_builder.h"

namespace ptsim::sim {

namespace {

// The group holding global rank `rank` (groups are node ranges in order).
int group_of_rank(const ClusterConfig& c, int rank) {
  const int node = rank / c.gpus_per_node;
  for (std::size_t g = 0; g < c.gpu_groups.size(); ++g) {
    const auto& grp = c.gpu_groups[g];
    if (node >= grp.first_node && node < grp.first_node + grp.nodes) return static_cast<int>(g);
  }
  throw std::invalid_argument(fmt::format("rank {} (node {}) is in no group of cluster.gpus", rank, node));
}

}  // namespace

std::vector<int> stage_groups(const ClusterConfig& c, int pp) {
  std::vector<int> out(static_cast<std::size_t>(pp), 0);
  if (c.gpu_groups.empty()) return out;
  if (pp < 1 || c.num_gpus % pp != 0)
    throw std::invalid_argument(fmt::format("pipeline_parallel {} does not divide the {} GPUs", pp, c.num_gpus));
  const int per_stage = c.num_gpus / pp;
  for (int s = 0; s < pp; ++s) {
    const int first = s * per_stage, last = first + per_stage - 1;
    const int a = group_of_rank(c, first), b = group_of_rank(c, last);
    if (a != b)
      throw std::invalid_argument(fmt::format(
          "pipeline stage {} (ranks {}-{}, nodes {}-{}) spans {} and {} GPUs: each stage must lie on one GPU type "
          "(stage-major placement, {} GPUs per stage)",
          s, first, last, first / c.gpus_per_node, last / c.gpus_per_node, c.gpu_groups[static_cast<std::size_t>(a)].gpu.name,
          c.gpu_groups[static_cast<std::size_t>(b)].gpu.name, per_stage));
    out[static_cast<std::size_t>(s)] = a;
  }
  return out;
}

const hw::GpuSpec& stage_gpu(const ClusterConfig& c, int pp, int stage) {
  if (c.gpu_groups.empty()) return c.gpu;
  return c.gpu_groups[static_cast<std::size_t>(stage_groups(c, pp)[static_cast<std::size_t>(stage)])].gpu;
}

double mean_peak(const ClusterConfig& c, const std::string& precision) {
  if (c.gpu_groups.empty()) return c.gpu.peak(precision);
  double sum = 0, nodes = 0;
  for (const auto& g : c.gpu_groups) {
    sum += g.gpu.peak(precision) * g.nodes;
    nodes += g.nodes;
  }
  return nodes > 0 ? sum / nodes : 0;
}

std::string gpu_summary(const ClusterConfig& c) {
  if (c.gpu_groups.empty()) return c.gpu.name;
  std::string out;
  for (const auto& g : c.gpu_groups)
    out += fmt::format("{}{} × {}", out.empty() ? "" : " + ", g.gpu.name, g.nodes * c.gpus_per_node);
  return out;
}

double mean_tdp(const ClusterConfig& c) {
  if (c.gpu_groups.empty()) return c.gpu.tdp;
  double sum = 0, nodes = 0;
  for (const auto& g : c.gpu_groups) {
    sum += g.gpu.tdp * g.nodes;
    nodes += g.nodes;
  }
  return nodes > 0 ? sum / nodes : 0;
}

hw::ComputeCostModel group_compute(const Scenario& s, int group) {
  const auto& g = s.cluster.gpu_groups.at(static_cast<std::size_t>(group));
  const std::string key = fmt::format("cluster.gpus[{}]", group);
  std::shared_ptr<const hw::CostTable> table;
  if (!g.calibration.empty()) {
    try {
      table = std::make_shared<const hw::CostTable>(hw::load_cost_table(g.calibration));
    } catch (const std::exception& e) {
      throw ScenarioError(s.file, key + ".calibration", e.what(), "make one with `ptsim calibrate` on that GPU");
    }
  }
  hw::ComputeCostModel m = table ? hw::ComputeCostModel(g.gpu, std::move(table)) : hw::ComputeCostModel(g.gpu);
  try {
    m.set_attention_kernel(std::string(models::to_string(s.plan.par.attention)));
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(s.file, "training.attention", fmt::format("{} ({})", e.what(), key),
                        "use flash (each GPU's default kernel) or naive");
  }
  return m;
}

std::vector<int> balanced_layers(int num_layers, int unit, const std::vector<double>& layer_s,
                                 const std::vector<double>& fixed_s) {
  const int p = static_cast<int>(layer_s.size());
  if (p < 1 || fixed_s.size() != layer_s.size()) throw std::invalid_argument("balanced_layers: one time per stage");
  if (unit < 1 || num_layers % unit != 0)
    throw std::invalid_argument(fmt::format("{} layers do not divide into units of {}", num_layers, unit));
  const int units = num_layers / unit;
  if (units < p)
    throw std::invalid_argument(fmt::format("{} layers cannot give each of {} stages {} layer(s)", num_layers, p, unit));
  std::vector<int> n(static_cast<std::size_t>(p), 1);
  for (int left = units - p; left > 0; --left) {
    std::size_t best = 0;
    double best_t = 0;
    for (std::size_t i = 0; i < n.size(); ++i) {
      const double t = fixed_s[i] + (n[i] + 1) * layer_s[i];
      if (i == 0 || t < best_t) best = i, best_t = t;
    }
    ++n[best];
  }
  for (int& k : n) k *= unit;
  return n;
}

void balance_mixed_pipeline(Scenario& s) {
  auto& par = s.plan.par;
  if (!s.cluster.mixed()) return;
  std::vector<int> groups;
  try {
    groups = stage_groups(s.cluster, par.pp);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(s.file, "cluster.gpus", e.what(),
                        "give each GPU type a multiple of cluster.num_gpus / pipeline_parallel GPUs, or change "
                        "parallel.pipeline_parallel");
  }
  if (par.pp < 2 || !par.pipeline_layers.empty()) return;
  if (models::two_chunk_schedule(par.schedule)) {
    s.warn("parallel.pipeline_layers",
           fmt::format("not given: {} holds two chunks of different depths on every stage, so the layers are split "
                       "evenly, not balanced for the GPU types; give pipeline_layers to balance them",
                       models::to_string(par.schedule)));
    return;
  }
  std::vector<BlockSeconds> per_group;
  for (std::size_t g = 0; g < s.cluster.gpu_groups.size(); ++g)
    per_group.push_back(block_seconds(s, group_compute(s, static_cast<int>(g))));
  // A layer's time: the mean over the model's layers (MoE layers every layer_freq).
  const auto& m = s.model;
  int moe_layers = 0;
  for (int l = 0; l < m.num_layers; ++l) moe_layers += m.is_moe_layer(l) ? 1 : 0;
  std::vector<double> layer_s, fixed_s;
  for (int st = 0; st < par.pp; ++st) {
    const auto& b = per_group[static_cast<std::size_t>(groups[static_cast<std::size_t>(st)])];
    layer_s.push_back((b.dense_layer * (m.num_layers - moe_layers) + b.moe_layer * moe_layers) / m.num_layers);
    // The embedding runs on the first stage, the head on the last.
    fixed_s.push_back((st == 0 ? b.embedding : 0.0) + (st == par.pp - 1 ? b.head : 0.0));
  }
  try {
    par.pipeline_layers = balanced_layers(m.num_layers, par.vpp, layer_s, fixed_s);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(s.file, "parallel.pipeline_parallel", e.what(), "give parallel.pipeline_layers");
  }
  s.pipeline_balanced = true;
}

}  // namespace ptsim::sim
