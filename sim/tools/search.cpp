// search(): the steps of the plan search in order (search.h); the steps themselves
// are in search_space.cpp, search_bound.cpp, search_waves.cpp and search_output.cpp
// (search_internal.h).
#include "sim/tools/search.h"

#include <fmt/format.h>

#include <optional>
#include <stdexcept>
#include <utility>

#include "sim/core/simulate.h"
#include "sim/tools/search_internal.h"

namespace ptsim::sim {
namespace {

void check_options(const SearchOptions& opt) {
  if (opt.top_k < 1) throw std::invalid_argument(fmt::format("--top {}: must be at least 1", opt.top_k));
  if (opt.wave_size < 1) throw std::invalid_argument(fmt::format("wave size {}: must be at least 1", opt.wave_size));
  if (opt.shard_count < 1 || opt.shard_rank < 0 || opt.shard_rank >= opt.shard_count)
    throw std::invalid_argument(fmt::format("shard {} of {}: out of range", opt.shard_rank, opt.shard_count));
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
  return rp;
}

}  // namespace

SearchResult search(const Scenario& base, const SearchOptions& opt) {
  plan_search::SearchRun run{base, opt, plan_search::Clock::now()};
  check_options(opt);
  run.threads = plan_search::hardware_threads(opt.threads);
  run.cands = enumerate_candidates(base, opt);
  std::optional<hw::ComputeCostModel> own_compute;
  run.compute = opt.compute ? opt.compute : &own_compute.emplace(make_compute_cost(base));
  run.res.candidates = static_cast<std::int64_t>(run.cands.size());
  run.res.capacity_bytes = base.cluster.gpu.hbm;

  // 1. Validity, memory and bound, for every candidate (no simulation).
  plan_search::pre_pass(run);
  plan_search::rank_survivors(run);
  // 2. Branch and bound over waves.
  const plan_search::Waves waves = plan_search::run_waves(run);
  // 3. The top K.
  for (std::size_t i = 0; i < waves.feasible.size() && static_cast<int>(i) < opt.top_k; ++i)
    run.res.plans.push_back(ranked_plan(run, waves.feasible[i], static_cast<int>(i) + 1));
  // 4. One verdict per family with no plan in the top K.
  plan_search::judge_families(run, waves);
  run.res.wall_time_s = plan_search::seconds_since(run.t0);
  return std::move(run.res);
}

}  // namespace ptsim::sim
