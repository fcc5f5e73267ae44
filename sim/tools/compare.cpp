#include "sim/tools/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <sstream>
#include <utility>

#include "hw/errors.h"
#include "hw/strict_yaml.h"
#include "sim/core/time_to_train.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"

namespace ptsim::sim {
namespace {

// --set-plan's short names for the scenario keys a plan is made of (the keys
// `ptsim search --fix` restricts, plus the global batch).
const std::vector<std::pair<std::string, std::string>> kSetPlanKeys = {
    {"tp", "parallel.tensor_parallel"},
    {"pp", "parallel.pipeline_parallel"},
    {"dp", "parallel.data_parallel"},
    {"cp", "parallel.context_parallel"},
    {"ep", "parallel.expert_parallel"},
    {"etp", "parallel.expert_tensor_parallel"},
    {"vpp", "parallel.virtual_pipeline_stages"},
    {"mbs", "training.micro_batch_size"},
    {"gbs", "training.global_batch_size"},
    {"zero", "parallel.zero_stage"},
    {"recompute", "parallel.recompute"},
    {"sp", "parallel.sequence_parallel"},
    {"schedule", "parallel.pipeline_schedule"},
    {"gpus", "cluster.num_gpus"},
};

Simulation simulate_plan(const Scenario& s, const CompareOptions& opt, const std::string& where) {
  SimulateOptions so;
  so.fold = opt.fold;
  so.trace = opt.trace;
  try {
    return simulate(s, so);
  } catch (const TimeRangeError& e) {  // the scenario asks for a time the clock cannot hold
    throw InputError(where, "", e.what());
  }
}

ComparedPlan load_plan(const std::string& file, const std::string& set_plan, const CompareOptions& opt) {
  ComparedPlan p;
  p.file = file;
  p.set_plan = set_plan;
  std::vector<std::string> sets = opt.sets;
  const auto extra = set_plan_overrides(set_plan);
  sets.insert(sets.end(), extra.begin(), extra.end());
  try {
    p.scenario = load_scenario(file, sets);
  } catch (const InputError& e) {
    if (set_plan.empty()) throw;
    throw InputError(fmt::format("--set-plan \"{}\"", set_plan), "", e.what());
  }
  p.sim = simulate_plan(p.scenario, opt, file);
  return p;
}

double cost_of(const CompareRow& r) { return r.time_to_train && r.time_to_train->cost ? *r.time_to_train->cost : 0; }

CompareRow make_row(const ComparedPlan& p, std::size_t index) {
  const Result& r = p.sim.result;
  CompareRow row;
  row.index = index;
  row.label = p.label();
  row.feasible = r.feasible;
  row.iteration_time_s = r.iteration_time_s;
  row.tokens_per_s = r.tokens_per_s;
  row.mfu = r.mfu;
  row.bubble_fraction = r.bubble_fraction;
  for (std::size_t k = 0; k < kCompareDims.size(); ++k) {
    row.exposed_s[k] = r.exposed_comm_s[static_cast<std::size_t>(kCompareDims[k])];
    // The experts' own tensor-parallel collectives count with EP, their data-parallel ones with DP.
    if (kCompareDims[k] == Dim::ep) row.exposed_s[k] += r.exposed_comm_s[static_cast<std::size_t>(Dim::etp)];
    if (kCompareDims[k] == Dim::dp) row.exposed_s[k] += r.exposed_comm_s[static_cast<std::size_t>(Dim::edp)];
  }
  row.peak_bytes = r.peak_bytes;
  row.capacity_bytes = r.capacity_bytes;
  row.headroom_bytes = r.capacity_bytes - r.peak_bytes;
  row.time_to_train = r.time_to_train;
  row.goodput = r.goodput;
  return row;
}

}  // namespace

std::vector<std::string> set_plan_overrides(const std::string& spec) {
  std::vector<std::string> out;
  std::istringstream words(spec);
  for (std::string w; words >> w;) {
    const auto eq = w.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == w.size())
      throw InputError("--set-plan", w, "expected KEY=VALUE", "e.g. --set-plan \"tp=8 pp=4 dp=16 mbs=1\"");
    const std::string key = w.substr(0, eq);
    if (key.find('.') != std::string::npos) {
      out.push_back(w);  // a scenario key path, as --set takes it
      continue;
    }
    const auto it =
        std::find_if(kSetPlanKeys.begin(), kSetPlanKeys.end(), [&](const auto& k) { return k.first == key; });
    if (it == kSetPlanKeys.end()) {
      std::vector<std::string> names;
      for (const auto& k : kSetPlanKeys) names.push_back(k.first);
      throw InputError("--set-plan", w, fmt::format("'{}' is not a plan key", key),
                       fmt::format("did you mean '{}'? short keys: tp pp dp cp ep vpp mbs gbs zero recompute sp "
                                   "schedule gpus, or a scenario key such as parallel.zero_stage",
                                   hw::closest_match(key, names)));
    }
    out.push_back(it->second + "=" + w.substr(eq + 1));
  }
  return out;
}

std::vector<ComparedPlan> run_comparison(const CompareOptions& opt) {
  if (opt.files.empty()) throw InputError("", "", "no scenario to compare", "ptsim compare A.yaml B.yaml …");
  if (opt.files.size() > 1 && !opt.set_plans.empty())
    throw InputError("--set-plan", "", "variants need exactly one scenario file",
                     "compare files, or one file with several --set-plan");
  std::vector<ComparedPlan> plans;
  if (opt.set_plans.empty())
    for (const auto& f : opt.files) plans.push_back(load_plan(f, "", opt));
  else
    for (const auto& v : opt.set_plans) plans.push_back(load_plan(opt.files.front(), v, opt));
  return plans;
}

std::vector<CompareRow> compare_rows(const std::vector<ComparedPlan>& plans, CompareSort sort) {
  std::vector<CompareRow> rows;
  for (std::size_t i = 0; i < plans.size(); ++i) rows.push_back(make_row(plans[i], i));
  if (sort == CompareSort::cost)
    for (const auto& r : rows)
      if (!r.time_to_train || !r.time_to_train->cost)
        throw InputError(plans[r.index].file, r.time_to_train ? "cluster.price_per_gpu_hour" : "training.total_tokens",
                         "--sort cost needs a cost for every plan",
                         "give training.total_tokens (or train_iters) and cluster.price_per_gpu_hour");
  if (sort == CompareSort::goodput)
    for (const auto& r : rows)
      if (!r.goodput)
        throw InputError(plans[r.index].file, "reliability", "--sort goodput needs a reliability section in every plan",
                         "add `reliability:` (README \"Goodput\"); an empty one takes every default");
  std::stable_sort(rows.begin(), rows.end(), [&](const CompareRow& a, const CompareRow& b) {
    if (a.feasible != b.feasible) return a.feasible;
    if (sort == CompareSort::cost && cost_of(a) != cost_of(b)) return cost_of(a) < cost_of(b);
    if (sort == CompareSort::goodput && a.goodput_tokens_per_s() != b.goodput_tokens_per_s())
      return a.goodput_tokens_per_s() > b.goodput_tokens_per_s();
    if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
    return a.peak_bytes < b.peak_bytes;
  });
  if (rows.empty()) return rows;
  const CompareRow& best = rows.front();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto& r = rows[i];
    r.rank = static_cast<int>(i) + 1;
    if (sort == CompareSort::speed)
      r.vs_best_pct = best.tokens_per_s > 0 ? 100 * (r.tokens_per_s / best.tokens_per_s - 1) : 0;
    else if (sort == CompareSort::goodput)
      r.vs_best_pct = best.goodput_tokens_per_s() > 0
                          ? 100 * (r.goodput_tokens_per_s() / best.goodput_tokens_per_s() - 1)
                          : 0;
    else
      r.vs_best_pct = cost_of(best) > 0 ? 100 * (cost_of(r) / cost_of(best) - 1) : 0;
  }
  return rows;
}

}  // namespace ptsim::sim
