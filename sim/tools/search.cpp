// search(): the steps of the plan search in order (search.h); the steps themselves
// are in search_space.cpp, search_bound.cpp, search_waves.cpp and search_output.cpp
// (search_internal.h).
#include "sim/tools/search.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "sim/core/errors.h"
#include "sim/core/simulate.h"
#include "sim/core/goodput.h"
#include "sim/core/time_to_train.h"
#include "sim/tools/search_internal.h"

namespace ptsim::sim {
namespace {

void check_options(const Scenario& base, const SearchOptions& opt) {
  // Each candidate's pipeline would need its own stage-to-GPU-type mapping and balanced
  // split (sim/core/mixed_cluster.h); the search plans clusters of one GPU type.
  if (base.cluster.mixed())
    throw ScenarioError(base.file, "cluster.gpus",
                        "ptsim search plans clusters of one GPU type, not a mix",
                        "search each type's nodes as a cluster.gpu scenario, or compare plans of the mixed cluster "
                        "with `ptsim run` / `ptsim compare`");
  if (opt.top_k < 1) throw std::invalid_argument(fmt::format("--top {}: must be at least 1", opt.top_k));
  if (!(opt.min_headroom >= 0 && opt.min_headroom < 1))
    throw std::invalid_argument(
        fmt::format("--min-headroom {:g} %: must be at least 0 % and below 100 %", 100 * opt.min_headroom));
  if (opt.wave_size < 1) throw std::invalid_argument(fmt::format("wave size {}: must be at least 1", opt.wave_size));
  if (opt.sort == SearchSort::cost) {
    const auto t = time_to_train(base, 1.0);
    if (!t || !t->cost)
      throw std::invalid_argument(fmt::format(
          "--sort cost needs a cost: give {}",
          t ? "cluster.price_per_gpu_hour" : "training.total_tokens (or train_iters) and cluster.price_per_gpu_hour"));
  }
  if (opt.sort == SearchSort::goodput && !base.reliability)
    throw std::invalid_argument(
        "--sort goodput needs a reliability section (README \"Goodput\"; an empty `reliability:` takes every default)");
  if (opt.shard_count < 1 || opt.shard_rank < 0 || opt.shard_rank >= opt.shard_count)
    throw std::invalid_argument(fmt::format("shard {} of {}: out of range", opt.shard_rank, opt.shard_count));
}

constexpr double kMiB = 1024.0 * 1024.0;

// The plan key of search.h's ranking: a total order that does not depend on the enumeration.
auto plan_key(int num_gpus, const models::Parallelism& q) {
  return std::make_tuple(num_gpus, q.dp, q.tp, q.pp, q.cp, q.ep, q.expert_tp(), static_cast<int>(q.schedule), q.vpp,
                         q.micro_batch_size, q.zero_stage, static_cast<int>(q.recompute), q.sequence_parallel);
}

RankedPlan ranked_plan(const plan_search::SearchRun& run, const plan_search::Ranked& f, int rank) {
  const Scenario s = candidate_scenario(run.base, run.cands[static_cast<std::size_t>(f.cand)]);
  RankedPlan rp;
  rp.rank = rank;
  rp.num_gpus = s.cluster.num_gpus;
  rp.plan = s.plan;
  rp.tokens_per_s = f.o.tokens_per_s;
  rp.model_tflops_per_gpu = f.o.model_tflops_per_gpu;
  rp.mfu = f.o.mfu;
  rp.bubble_fraction = f.o.bubble_fraction;
  rp.peak_bytes = f.o.peak_bytes;
  rp.iteration_time_s = f.o.iteration_time_s;
  rp.exposed_comm_s = f.o.exposed_comm_s;
  rp.bound_tokens_per_s = run.pre[static_cast<std::size_t>(f.cand)].bound_tokens_per_s;
  rp.regime = regime_of(s);
  rp.band = find_band(s);
  rp.time_to_train = time_to_train(s, f.o.iteration_time_s);
  if (f.o.iteration_time_s > 0) rp.goodput = goodput(s, f.o.iteration_time_s, f.o.tokens_per_s);
  return rp;
}

// The top K groups of equivalent plans, and the best plan of each cluster size.
void pick_plans(plan_search::SearchRun& run, const plan_search::Waves& waves) {
  const auto groups = plan_search::equivalence_groups(run, waves.feasible);
  for (std::size_t g = 0; g < groups.size() && static_cast<int>(g) < run.opt.top_k; ++g) {
    RankedPlan p = ranked_plan(run, waves.feasible[groups[g].front()], static_cast<int>(g) + 1);
    p.equivalents = static_cast<int>(groups[g].size()) - 1;
    run.res.plans.push_back(p);
  }
  for (const int size : run.sizes)
    for (const auto& group : groups) {
      const auto& f = waves.feasible[group.front()];
      if (run.cands[static_cast<std::size_t>(f.cand)].num_gpus != size) continue;
      RankedPlan p = ranked_plan(run, f, 0);
      p.equivalents = static_cast<int>(group.size()) - 1;
      run.res.best_per_size.push_back(p);
      break;
    }
  for (std::size_t q = 0; q < run.survivors.size(); ++q) {
    if (!waves.simulated[q]) continue;
    const auto& o = waves.outcomes[q];
    run.res.simulated_points.push_back({run.cands[static_cast<std::size_t>(run.survivors[q])].num_gpus, o.tokens_per_s,
                                        o.peak_bytes, o.feasible && o.peak_bytes <= plan_search::memory_limit(run)});
  }
  if (run.res.best_per_size.empty()) return;
  const auto& first = run.res.best_per_size.front();
  const double per_gpu0 = first.tokens_per_s / first.num_gpus;
  for (auto& p : run.res.best_per_size) p.scaling_efficiency = p.tokens_per_s / p.num_gpus / per_gpu0;
}

}  // namespace

double rounded_tokens_per_s(double tokens_per_s) { return std::round(tokens_per_s); }

bool plans_equivalent(const RankedPlan& a, const RankedPlan& b) {
  return plan_search::equivalence_key(a.num_gpus, a.plan.par, a.tokens_per_s, a.peak_bytes) ==
         plan_search::equivalence_key(b.num_gpus, b.plan.par, b.tokens_per_s, b.peak_bytes);
}

namespace plan_search {

EquivalenceKey equivalence_key(int num_gpus, const models::Parallelism& par, double tokens_per_s, double peak_bytes) {
  return {num_gpus,
          par.dp,
          par.tp,
          par.pp,
          par.cp,
          par.ep,
          rounded_tokens_per_s(tokens_per_s),
          std::round(peak_bytes / kMiB)};
}

bool ranks_before(const SearchRun& run, const Ranked& a, const Ranked& b) {
  const auto& ca = run.cands[static_cast<std::size_t>(a.cand)];
  const auto& cb = run.cands[static_cast<std::size_t>(b.cand)];
  const double ta = rounded_tokens_per_s(rank_score(run, a.o.tokens_per_s, ca.num_gpus, a.o.goodput));
  const double tb = rounded_tokens_per_s(rank_score(run, b.o.tokens_per_s, cb.num_gpus, b.o.goodput));
  if (ta != tb) return ta > tb;
  if (a.o.peak_bytes != b.o.peak_bytes) return a.o.peak_bytes < b.o.peak_bytes;
  return plan_key(ca.num_gpus, ca.par) < plan_key(cb.num_gpus, cb.par);
}

std::vector<std::vector<std::size_t>> equivalence_groups(const SearchRun& run, const std::vector<Ranked>& ranked) {
  std::vector<std::vector<std::size_t>> groups;
  std::map<EquivalenceKey, std::size_t> group_of;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const auto& c = run.cands[static_cast<std::size_t>(ranked[i].cand)];
    const auto key = equivalence_key(c.num_gpus, c.par, ranked[i].o.tokens_per_s, ranked[i].o.peak_bytes);
    const auto [it, fresh] = group_of.emplace(key, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}

}  // namespace plan_search

SearchResult search(const Scenario& base, const SearchOptions& opt) {
  plan_search::SearchRun run{base, opt, plan_search::Clock::now()};
  check_options(base, opt);
  run.threads = plan_search::hardware_threads(opt.threads);
  run.cands = enumerate_candidates(base, opt);
  std::optional<hw::ComputeCostModel> own_compute;
  run.compute = opt.compute ? opt.compute : &own_compute.emplace(make_compute_cost(base));
  run.res.candidates = static_cast<std::int64_t>(run.cands.size());
  run.res.capacity_bytes = base.cluster.gpu.hbm;
  run.res.min_headroom = opt.min_headroom;
  run.res.sort = opt.sort;
  std::uint32_t schedules = 0, zeros = 0;
  std::set<int> cps;
  for (const auto& c : run.cands) {
    if (run.sizes.empty() || run.sizes.back() != c.num_gpus) run.sizes.push_back(c.num_gpus);
    schedules |= schedule_bit(c.par.schedule);
    zeros |= 1u << c.par.zero_stage;
    cps.insert(c.par.cp);
  }
  for (const std::string_view name : schedule_names(schedules)) run.res.schedules.emplace_back(name);
  run.res.zero_stages = zero_stage_list(zeros);
  run.res.context_parallel.assign(cps.begin(), cps.end());
  run.res.space_fixed = plan_search::fixes_framework_space(opt);

  // 1. Validity, memory and bound, for every candidate (no simulation).
  plan_search::pre_pass(run);
  plan_search::rank_survivors(run);
  // 2. Branch and bound over waves.
  const plan_search::Waves waves = plan_search::run_waves(run);
  // 3. The top K, and the best of each size.
  pick_plans(run, waves);
  // 4. One verdict per family with no plan in the top K.
  plan_search::judge_families(run, waves);
  run.res.wall_time_s = plan_search::seconds_since(run.t0);
  return std::move(run.res);
}

}  // namespace ptsim::sim
