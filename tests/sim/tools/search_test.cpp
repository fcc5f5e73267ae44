#include "sim/tools/search.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>

#include <algorithm>

#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/simulate.h"
#include "sim/core/time_to_train.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    lines.push_back(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  return lines;
}

// 8 GPUs, 8 layers, global batch 16: small enough to simulate every plan.
Scenario small_scenario() {
  return parse_scenario(
      testing::tiny_gpt_yaml(/*pp=*/1, /*dp=*/8, /*tp=*/1, /*layers=*/8, /*gbs=*/16, "", /*vocab=*/1024), "tiny.yaml");
}

// Restrict the space so an exhaustive run stays in the hundreds of simulations; every
// pipeline schedule ptsim models, not only the framework's own (their bounds differ most).
SearchOptions small_options() {
  SearchOptions o;
  o.fix = {"parallel.zero_stage=0,1", "parallel.recompute=none,selective",
           "parallel.pipeline_schedule=gpipe,1f1b,interleaved-1f1b,zb-h1,zb-h2,zb-v,dualpipe"};
  o.max_micro_batch_size = 4;
  o.threads = 2;
  o.top_k = 5;
  return o;
}

TEST(Search, ReturnsValidBestPlanBestFirst) {
  const Scenario base = small_scenario();
  const SearchResult r = search(base, small_options());
  ASSERT_FALSE(r.plans.empty());
  ASSERT_LE(r.plans.size(), 5u);
  for (std::size_t i = 0; i < r.plans.size(); ++i) {
    EXPECT_EQ(r.plans[i].rank, static_cast<int>(i) + 1);
    if (i > 0) EXPECT_GE(r.plans[i - 1].tokens_per_s, r.plans[i].tokens_per_s);
  }
  const auto& best = r.plans.front();
  // Every plan uses the whole cluster: dp·tp·pp·cp = 8.
  EXPECT_EQ(best.plan.world_size(), 8);
  Scenario s = base;
  s.plan = best.plan;
  EXPECT_NO_THROW(validate(s));
  // tokens/s = global batch · seq / iteration time = 16 · 128 / t.
  EXPECT_NEAR(best.tokens_per_s, 16.0 * 128.0 / best.iteration_time_s, 1e-6 * best.tokens_per_s);
  // Re-simulating the winner reproduces the search's number exactly.
  SimulateOptions so;
  so.fold = true;
  EXPECT_DOUBLE_EQ(simulate(s, so).result.tokens_per_s, best.tokens_per_s);
  EXPECT_GT(r.simulated, 0);
  EXPECT_GT(r.candidates, r.simulated);
}

TEST(Search, SameRankingForAnyThreadCount) {
  const Scenario base = small_scenario();
  SearchOptions one = small_options(), four = small_options();
  one.threads = 1;
  four.threads = 4;
  // The whole document, pruning counts included, is a function of the input only.
  EXPECT_EQ(search_to_json(search(base, one)).dump(), search_to_json(search(base, four)).dump());
}

// Plans simulated and then dropped: out of memory, or short of the headroom asked for.
std::int64_t simulated_then_dropped(const SearchResult& r) {
  std::int64_t n = 0;
  for (const auto& [reason, count] : r.pruned)
    if (reason.find("(simulated)") != std::string::npos) n += count;
  return n;
}

// Every plan of the small space, simulated and ranked (no pruning, no top-K cut): searched
// once for the tests that compare a pruned search with it.
const SearchResult& exhaustive_small() {
  static const SearchResult ex = [] {
    SearchOptions all = small_options();
    all.prune_by_bound = false;
    all.top_k = 1000000;
    return search(small_scenario(), all);
  }();
  return ex;
}

TEST(Search, BoundPruningKeepsTheExhaustiveTopK) {
  const SearchResult& ex = exhaustive_small();
  const SearchResult bb = search(small_scenario(), small_options());
  ASSERT_GE(ex.plans.size(), 5u);
  // The bound is a true upper bound on every simulated plan's throughput.
  for (const auto& p : ex.plans) EXPECT_GE(p.bound_tokens_per_s, p.tokens_per_s) << plan_to_json(p.plan).dump();
  ASSERT_EQ(bb.plans.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(plan_to_json(bb.plans[i].plan), plan_to_json(ex.plans[i].plan)) << "rank " << i + 1;
    EXPECT_DOUBLE_EQ(bb.plans[i].tokens_per_s, ex.plans[i].tokens_per_s);
    // The bound never cuts a plan equivalent to one in the top K either.
    EXPECT_EQ(bb.plans[i].equivalents, ex.plans[i].equivalents) << "rank " << i + 1;
  }
  // Branch and bound must actually cut something on this space.
  EXPECT_LT(bb.simulated, ex.simulated);
  EXPECT_GT(bb.pruned.at("bound"), 0);
}

TEST(Search, BoundThresholdIsTheBestPlanFoundSoFar) {
  // K = 1 and one plan per wave: after each simulation the size's best and the K-th
  // best are the best plan so far, so a plan is simulated exactly when its bound reaches
  // the best of the plans simulated before it (in bound order). The best of a size is
  // the best so far, not the best of the first wave: a first wave of plans whose bounds
  // promise more than they give must not keep every later plan above that wave's best.
  SearchOptions one = small_options();
  one.top_k = 1;
  one.wave_size = 1;
  one.threads = 1;
  const SearchResult& ex = exhaustive_small();
  const SearchResult bb = search(small_scenario(), one);
  std::vector<RankedPlan> by_bound;
  for (const auto& p : ex.plans)
    for (int k = 0; k <= p.equivalents; ++k) by_bound.push_back(p);  // equivalents: same throughput
  std::stable_sort(by_bound.begin(), by_bound.end(), [](const RankedPlan& a, const RankedPlan& b) {
    return a.bound_tokens_per_s > b.bound_tokens_per_s;
  });
  double best = -std::numeric_limits<double>::infinity();
  std::int64_t expected = 0, best_at = -1;
  for (const auto& p : by_bound) {
    if (p.bound_tokens_per_s < best - 1.0) continue;
    ++expected;
    if (std::round(p.tokens_per_s) > best) best = std::round(p.tokens_per_s), best_at = expected;
  }
  ASSERT_GT(best_at, 1) << "the first plan simulated is already the best: the case is not exercised";
  EXPECT_EQ(bb.simulated - simulated_then_dropped(bb), expected);
}

// Without --fix parallel.pipeline_schedule the search runs the schedules the framework's own
// engine offers (FrameworkProfile::pipeline_schedules), and the one the scenario names.
TEST(Search, ExploresTheFrameworksOwnSchedules) {
  SearchOptions o = small_options();
  o.fix.pop_back();  // no schedule fix
  o.fix.push_back("parallel.pipeline_parallel=2");
  auto schedules_of = [&](const std::vector<std::string>& overrides) {
    const Scenario base = parse_scenario(testing::tiny_gpt_yaml(1, 8, 1, 8, 16, "", 1024), "tiny.yaml", overrides);
    const SearchResult r = search(base, o);
    std::set<models::Schedule> run;
    for (const auto& c : enumerate_candidates(base, o)) run.insert(c.par.schedule);
    EXPECT_FALSE(r.space_fixed);
    EXPECT_EQ(r.schedules.size(), run.size());
    return run;
  };
  using models::Schedule;
  EXPECT_EQ(schedules_of({}), (std::set<Schedule>{Schedule::one_f_one_b, Schedule::interleaved_1f1b}));
  EXPECT_EQ(schedules_of({"training.framework=deepspeed"}), (std::set<Schedule>{Schedule::one_f_one_b}));
  EXPECT_EQ(schedules_of({"training.framework=fsdp"}),
            (std::set<Schedule>{Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved_1f1b, Schedule::zb_v}));
  EXPECT_EQ(
      schedules_of({"parallel.pipeline_parallel=2", "parallel.pipeline_schedule=dualpipe", "parallel.data_parallel=4"}),
      (std::set<Schedule>{Schedule::one_f_one_b, Schedule::interleaved_1f1b, Schedule::dualpipe}));
  // The framework's ZeRO stages and context parallelism too.
  auto plans_of = [&](const std::string& framework) {
    SearchOptions z = o;
    z.fix = {"parallel.recompute=none", "parallel.pipeline_parallel=1", "training.micro_batch_size=1"};
    const Scenario base = parse_scenario(testing::tiny_gpt_yaml(1, 8, 1, 8, 16, "", 1024), "tiny.yaml",
                                         {"training.framework=" + framework});
    std::set<int> zeros, cps;
    for (const auto& c : enumerate_candidates(base, z)) zeros.insert(c.par.zero_stage), cps.insert(c.par.cp);
    return std::make_pair(zeros, cps);
  };
  EXPECT_EQ(plans_of("fsdp").first, (std::set<int>{0, 3}));
  EXPECT_EQ(plans_of("megatron-core").first, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(plans_of("megatron-lm").first, (std::set<int>{0, 1}));
  EXPECT_EQ(plans_of("megatron-lm").second, (std::set<int>{1}));  // its own layers: no context parallelism
  EXPECT_GT(plans_of("deepspeed").second.size(), 1u);             // Ulysses
  EXPECT_GT(plans_of("megatron-core").second.size(), 1u);
  // --fix names them: those run, whatever the framework.
  const SearchResult fixed = search(small_scenario(), small_options());
  EXPECT_FALSE(fixed.space_fixed);  // the schedule and ZeRO stages only
  EXPECT_NE(std::find(fixed.schedules.begin(), fixed.schedules.end(), "zb-h1"), fixed.schedules.end());
  EXPECT_NE(search_summary_text(fixed).find("pipeline schedules gpipe, 1f1b"), std::string::npos);
  EXPECT_EQ(fixed.zero_stages, (std::vector<int>{0, 1}));
}

TEST(Search, JsonShapeFollowsContract) {
  const SearchResult r = search(small_scenario(), small_options());
  const auto j = search_to_json(r);
  ASSERT_TRUE(j.contains("plans") && j["plans"].is_array());
  ASSERT_TRUE(j.contains("pruned") && j["pruned"].is_object());
  EXPECT_EQ(j["candidates"].get<std::int64_t>(), r.candidates);
  EXPECT_EQ(j["schedules"].get<std::vector<std::string>>(), r.schedules);
  EXPECT_EQ(j["zero_stages"].get<std::vector<int>>(), r.zero_stages);
  EXPECT_EQ(j["context_parallel"].get<std::vector<int>>(), r.context_parallel);
  EXPECT_EQ(j["simulated"].get<std::int64_t>(), r.simulated);
  int rank = 1;
  for (const auto& p : j["plans"]) {
    EXPECT_EQ(p["rank"].get<int>(), rank++);
    for (const char* k :
         {"tokens_per_s", "model_tflops_per_gpu", "mfu", "bubble_fraction", "peak_bytes", "iteration_time_s"})
      EXPECT_TRUE(p.contains(k) && p[k].is_number()) << k;
    for (const char* k : {"dp", "tp", "pp", "cp", "ep", "vpp", "zero_stage", "micro_batch_size", "global_batch_size",
                          "num_microbatches", "recompute", "sequence_parallel", "pipeline_schedule"})
      EXPECT_TRUE(p["plan"].contains(k)) << k;
  }
  // Every candidate is either simulated or pruned before simulation; plans the
  // simulator found out of memory are counted in both.
  std::int64_t before = 0;
  for (const auto& [k, v] : r.pruned)
    if (k.find("(simulated)") == std::string::npos) before += v;
  EXPECT_EQ(before + r.simulated, r.candidates);
  // The plans that fit are those neither invalid nor pruned by the analytical memory model.
  EXPECT_EQ(j["fit"].get<std::int64_t>(), r.fit);
  EXPECT_EQ(r.fit, r.simulated + r.pruned.at("bound"));
}

TEST(Search, FixRestrictsAndRejectsUnknownKeys) {
  const Scenario base = small_scenario();
  SearchOptions o = small_options();
  o.fix.push_back("parallel.tensor_parallel=2");
  const SearchResult r = search(base, o);
  ASSERT_FALSE(r.plans.empty());
  for (const auto& p : r.plans) EXPECT_EQ(p.plan.par.tp, 2);
  SearchOptions bad = small_options();
  bad.fix.push_back("parallel.tensor_paralel=2");
  EXPECT_THROW(enumerate_candidates(base, bad), std::invalid_argument);
  SearchOptions bad_value = small_options();
  bad_value.fix.push_back("parallel.recompute=some");
  EXPECT_THROW(enumerate_candidates(base, bad_value), std::invalid_argument);
}

TEST(Search, EnumeratesEveryShardingOfTheSmallCluster) {
  // 8 GPUs, 16 heads, 8 layers, seq 128: tp ∈ {1,2,4,8}, pp ∈ {1,2,4,8} with
  // tp·pp ≤ 8 → 10 (tp, pp) pairs; each with cp | 8/(tp·pp), cp ≤ 8.
  SearchOptions o;
  o.fix = {"parallel.zero_stage=0", "parallel.recompute=none", "training.micro_batch_size=1",
           "parallel.sequence_parallel=false", "parallel.pipeline_schedule=1f1b"};
  const auto c = enumerate_candidates(small_scenario(), o);
  std::set<std::tuple<int, int, int, int>> seen;
  for (const auto& x : c) seen.insert({x.par.tp, x.par.pp, x.par.cp, x.par.dp});
  // Σ over (tp, pp) of the divisors of 8/(tp·pp): tp·pp = 1 (1 pair): 4 cp values;
  // 2 (2 pairs): 3 each; 4 (3 pairs): 2 each; 8 (4 pairs): 1 each → 4+6+6+4 = 20.
  EXPECT_EQ(seen.size(), 20u);
  EXPECT_EQ(c.size(), 20u);
  for (const auto& x : c) EXPECT_EQ(x.par.tp * x.par.pp * x.par.cp * x.par.dp, 8);
}

// The scenario's lower bound and its folded simulated iteration time, in seconds.
std::pair<double, double> bound_and_time(const Scenario& s) {
  const auto compute = make_compute_cost(s);
  const auto coll = make_collective_cost(s);
  SimulateOptions so;
  so.fold = true;
  return {iteration_time_lower_bound(s, compute, *coll), simulate(s, so).result.iteration_time_s};
}

TEST(Search, LowerBoundHoldsOnGpt3Default) {
  const auto [lb, t] = bound_and_time(load_scenario(test::repo_path("scenarios/default.yaml")));
  EXPECT_LE(lb, t);
  // And it is not trivially loose: compute alone is most of a 1F1B iteration.
  EXPECT_GT(lb, 0.5 * t);
  // The deferred output-layer weight gradients (some micro-batches' work only) keep it a bound.
  const auto [lb_deferred, t_deferred] = bound_and_time(load_scenario(
      test::repo_path("scenarios/default.yaml"), {"training.megatron.defer_embedding_wgrad_compute=true"}));
  EXPECT_LE(lb_deferred, t_deferred);
}

// ZeRO-3 whose gathers and gradient reductions share the DP stream (Program::dp_one_stream):
// the bound counts them on one stream, which it must still not overshoot, and which is
// tighter than taking the busier of two. MPT-70B's FSDP on 64 A100s, with 2 Gb/s NICs so
// that the DP stream, not compute, bounds the step.
TEST(Search, LowerBoundHoldsWithOneDataParallelStream) {
  Scenario s = load_scenario(test::repo_path("scenarios/reference/mpt-70b-64xa100.yaml"));
  s.cluster.nic_bandwidth /= 100;
  ASSERT_TRUE(s.framework.dp_one_stream);
  const auto [one, t] = bound_and_time(s);
  EXPECT_LE(one, t);
  EXPECT_GT(one, 0.5 * t);
  s.framework.dp_one_stream = false;
  EXPECT_GT(one, 1.2 * bound_and_time(s).first);
}

// The ranking: no two listed plans equivalent; more tokens/s (rounded) first, then
// less memory. With dp = cp = 1 (ZeRO shards over dp·cp) ZeRO stages 0 and 1 give
// the same plan: each listed plan stands for at least one other.
TEST(Search, CollapsesEquivalentPlansAndBreaksTiesByMemory) {
  SearchOptions o = small_options();
  o.fix.push_back("parallel.data_parallel=1");
  o.fix.push_back("parallel.context_parallel=1");
  o.prune_by_bound = false;
  o.top_k = 1000000;
  const SearchResult r = search(small_scenario(), o);
  ASSERT_GE(r.plans.size(), 3u);
  std::int64_t listed_or_collapsed = 0;
  for (std::size_t i = 0; i < r.plans.size(); ++i) {
    const auto& p = r.plans[i];
    EXPECT_EQ(p.plan.par.dp, 1);
    EXPECT_GE(p.equivalents, 1) << plan_to_json(p.plan).dump();
    listed_or_collapsed += 1 + p.equivalents;
    for (std::size_t j = 0; j < i; ++j) EXPECT_FALSE(plans_equivalent(r.plans[j], p)) << i << " vs " << j;
    if (i == 0) continue;
    const auto& q = r.plans[i - 1];
    EXPECT_GE(rounded_tokens_per_s(q.tokens_per_s), rounded_tokens_per_s(p.tokens_per_s));
    if (rounded_tokens_per_s(q.tokens_per_s) == rounded_tokens_per_s(p.tokens_per_s))
      EXPECT_LE(q.peak_bytes, p.peak_bytes);
  }
  // Every feasible simulated plan is listed or counted as an equivalent of one.
  EXPECT_EQ(listed_or_collapsed, r.simulated - simulated_then_dropped(r));
}

TEST(Search, PlansEquivalentComparesSizesThroughputAndMemory) {
  RankedPlan a;
  a.num_gpus = 8;
  a.plan.par.dp = 1;
  a.plan.par.tp = 8;
  a.tokens_per_s = 1000.2;
  a.peak_bytes = 10e9;
  RankedPlan b = a;
  b.plan.par.zero_stage = 1;  // a knob outside the sizes
  b.tokens_per_s = 999.9;     // the same whole tokens/s
  EXPECT_TRUE(plans_equivalent(a, b));
  b.peak_bytes = 10e9 + 2e6;  // 2 MB more: not the same memory
  EXPECT_FALSE(plans_equivalent(a, b));
  b = a;
  b.tokens_per_s = 1001;
  EXPECT_FALSE(plans_equivalent(a, b));
  b = a;
  b.plan.par.tp = 4;
  b.plan.par.dp = 2;
  EXPECT_FALSE(plans_equivalent(a, b));
}

TEST(Search, MinHeadroomLeavesThatMuchMemoryFree) {
  const Scenario base = small_scenario();
  SearchOptions o = small_options();
  const SearchResult free_all = search(base, o);
  ASSERT_FALSE(free_all.plans.empty());
  // A headroom that leaves just under the best plan's peak excludes it.
  o.min_headroom = 1 - 0.999 * free_all.plans.front().peak_bytes / base.cluster.gpu.hbm;
  const SearchResult r = search(base, o);
  for (const auto& p : r.plans) EXPECT_LE(p.peak_bytes, base.cluster.gpu.hbm * (1 - o.min_headroom));
  ASSERT_FALSE(r.plans.empty());
  EXPECT_NE(plan_to_json(r.plans.front().plan), plan_to_json(free_all.plans.front().plan));
  o.min_headroom = 1.0;
  EXPECT_THROW(search(base, o), std::invalid_argument);
  o.min_headroom = -0.1;
  EXPECT_THROW(search(base, o), std::invalid_argument);
}

// With several sizes: the best plan of each, whether or not the top K holds it;
// the same as an exhaustive search's; efficiency per GPU against the smallest.
TEST(Search, BestPlanPerClusterSize) {
  const Scenario base = small_scenario();
  SearchOptions o = small_options();
  o.gpus = {8, 16, 32};
  o.top_k = 2;
  SearchOptions all = o;
  all.prune_by_bound = false;
  const SearchResult r = search(base, o), ex = search(base, all);
  ASSERT_EQ(r.best_per_size.size(), 3u);
  ASSERT_EQ(ex.best_per_size.size(), 3u);
  const double per_gpu_8 = r.best_per_size[0].tokens_per_s / 8;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& p = r.best_per_size[i];
    EXPECT_EQ(p.num_gpus, o.gpus[i]);
    EXPECT_EQ(plan_to_json(p.plan), plan_to_json(ex.best_per_size[i].plan)) << p.num_gpus << " GPUs";
    EXPECT_DOUBLE_EQ(p.tokens_per_s, ex.best_per_size[i].tokens_per_s);
    EXPECT_NEAR(p.scaling_efficiency, p.tokens_per_s / p.num_gpus / per_gpu_8, 1e-12);
  }
  EXPECT_DOUBLE_EQ(r.best_per_size[0].scaling_efficiency, 1.0);
  for (const auto& line : split_lines(search_summary_text(r))) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_NE(search_summary_text(r).find("best plan per cluster size"), std::string::npos);
}

// MoE parallel folding in the search: at tp 2 with sequence parallelism each EP size that
// fits in dp × cp comes with etp = tp and etp 1, and EP sizes up to tp × dp × cp only with
// etp 1; --fix parallel.expert_tensor_parallel=1 keeps the folded ones, and a folded plan's
// emitted scenario runs to the search's numbers.
TEST(Search, ExpertTensorParallelOneIsSearched) {
  const std::string yaml = testing::tiny_moe_yaml("1f1b");
  const Scenario base = parse_scenario(yaml, "moe.yaml");
  SearchOptions o;
  o.fix = {"parallel.tensor_parallel=2",      "parallel.pipeline_parallel=1",   "parallel.context_parallel=1",
           "parallel.sequence_parallel=true", "parallel.zero_stage=0",          "parallel.recompute=none",
           "training.micro_batch_size=1",     "parallel.pipeline_schedule=1f1b"};
  std::set<std::pair<int, int>> seen;  // (ep, etp)
  for (const auto& c : enumerate_candidates(base, o)) seen.insert({c.par.ep, c.par.expert_tp()});
  // tp 2 × dp 2: ep 1, 2 in dp, with etp 2 or 1; ep 4 only folded.
  EXPECT_EQ(seen, (std::set<std::pair<int, int>>{{1, 2}, {1, 1}, {2, 2}, {2, 1}, {4, 1}}));
  o.fix.push_back("parallel.expert_tensor_parallel=1");
  for (const auto& c : enumerate_candidates(base, o)) EXPECT_EQ(c.par.expert_tp(), 1);
  o.threads = 2;
  o.top_k = 10;
  const SearchResult r = search(base, o);
  ASSERT_FALSE(r.plans.empty());
  const RankedPlan& p = r.plans[0];
  EXPECT_EQ(p.plan.par.expert_tp(), 1);
  const Scenario back = parse_scenario(plan_scenario_yaml(yaml, "moe.yaml", {}, p), "emitted.yaml");
  EXPECT_EQ(back.plan.par.expert_tp(), 1);
  SimulateOptions so;
  so.fold = true;
  EXPECT_DOUBLE_EQ(simulate(back, so).result.iteration_time_s, p.iteration_time_s);
  EXPECT_NE(search_summary_text(r).find("4/1"), std::string::npos) << search_summary_text(r);
}

// --emit-scenario: the written YAML, run again, gives the search's numbers for that plan.
TEST(Search, EmittedScenarioRunsToTheSameNumbers) {
  const std::string yaml =
      testing::tiny_gpt_yaml(/*pp=*/1, /*dp=*/8, /*tp=*/1, /*layers=*/8, /*gbs=*/16, "", /*vocab=*/1024);
  const Scenario base = parse_scenario(yaml, "tiny.yaml");
  const SearchResult r = search(base, small_options());
  ASSERT_GE(r.plans.size(), 3u);
  for (const auto& p : {r.plans[0], r.plans[2]}) {
    const std::string emitted = plan_scenario_yaml(yaml, "tiny.yaml", {}, p);
    const Scenario back = parse_scenario(emitted, "emitted.yaml");
    SimulateOptions so;
    so.fold = true;
    const Result again = simulate(back, so).result;
    EXPECT_DOUBLE_EQ(again.iteration_time_s, p.iteration_time_s) << emitted;
    EXPECT_DOUBLE_EQ(again.tokens_per_s, p.tokens_per_s);
    EXPECT_DOUBLE_EQ(again.peak_bytes, p.peak_bytes);
  }
  // --set overrides given to the search are kept in the emitted scenario.
  const std::string with_set = plan_scenario_yaml(yaml, "tiny.yaml", {"name=renamed"}, r.plans[0]);
  EXPECT_EQ(parse_scenario(with_set, "emitted.yaml").name, "renamed");
}

// Progress from the start, phase by phase, with totals that are the summary's counts.
TEST(Search, ProgressCountsAgreeWithTheSummary) {
  std::vector<SearchProgress> seen;
  SearchOptions o = small_options();
  o.progress = [&](const SearchProgress& p) { seen.push_back(p); };
  const SearchResult r = search(small_scenario(), o);
  ASSERT_GE(seen.size(), 4u);
  EXPECT_EQ(seen.front().phase, SearchProgress::Phase::check);
  EXPECT_EQ(seen.front().done, 0);
  bool simulate_seen = false;
  for (const auto& p : seen) {
    if (p.phase == SearchProgress::Phase::check) {
      EXPECT_FALSE(simulate_seen);
      EXPECT_EQ(p.total, r.candidates);
    } else {
      simulate_seen = true;
      EXPECT_EQ(p.total, r.fit);
      EXPECT_LE(p.simulated, r.simulated);
    }
    EXPECT_LE(p.done, p.total);
    if (p.eta_s >= 0) EXPECT_TRUE(std::isfinite(p.eta_s));
  }
  EXPECT_TRUE(simulate_seen);
  EXPECT_EQ(seen.back().done, r.fit);
  EXPECT_EQ(seen.back().simulated, r.simulated);
  EXPECT_EQ(seen.back().eta_s, 0);
}

TEST(Search, SummaryFitsIn100ColumnsAndExplainListsTheFamilies) {
  const SearchResult r = search(small_scenario(), small_options());
  ASSERT_FALSE(r.losers.empty());
  const std::string brief = search_summary_text(r), full = search_summary_text(r, true);
  for (const auto& line : split_lines(brief)) EXPECT_LE(line.size(), 100u) << line;
  for (const auto& line : split_lines(full)) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_EQ(brief.find(r.losers.front().family), std::string::npos);
  EXPECT_NE(brief.find("--explain"), std::string::npos);
  EXPECT_NE(full.find(r.losers.front().family), std::string::npos);
}

TEST(Search, FormatEta) {
  EXPECT_EQ(format_eta(-1), "?");
  EXPECT_EQ(format_eta(42), "42s");
  EXPECT_EQ(format_eta(187), "3m07s");
}

// The small scenario with a training goal and a price.
Scenario priced_scenario() {
  Scenario s = small_scenario();
  s.goal.total_tokens = 1e9;
  s.cluster.price_per_gpu_hour = 2.5;
  return s;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
  return n;
}

TEST(Search, TimeToTrainOfTheTopPlanIsTimeToTrainOfItsIteration) {
  const Scenario base = priced_scenario();
  const SearchResult r = search(base, small_options());
  ASSERT_FALSE(r.plans.empty());
  const RankedPlan& top = r.plans.front();
  ASSERT_TRUE(top.time_to_train.has_value());
  const auto want = time_to_train(candidate_scenario(base, {top.num_gpus, top.plan.par}), top.iteration_time_s);
  ASSERT_TRUE(want && want->cost);
  EXPECT_DOUBLE_EQ(top.time_to_train->days, want->days);
  EXPECT_DOUBLE_EQ(*top.time_to_train->cost, *want->cost);
  // By hand: ceil(1e9 / (16 × seq)) iterations × iteration time × 8 GPUs × 2.5 per hour.
  const double iters = std::ceil(1e9 / (16.0 * static_cast<double>(base.model.seq_length)));
  EXPECT_NEAR(*top.time_to_train->cost, iters * top.iteration_time_s * 8 * 2.5 / 3600, 1e-9 * *want->cost);
  const auto j = search_to_json(r);
  EXPECT_DOUBLE_EQ(j["plans"][0]["time_to_train"]["days"].get<double>(), want->days);
  EXPECT_NE(search_to_csv(r).find("days,gpu_hours,cost,energy_kwh"), std::string::npos);
  const std::string text = search_summary_text(r);
  EXPECT_NE(text.find("time to train"), std::string::npos) << text;
  for (const auto& line : split_lines(text)) EXPECT_LE(line.size(), 100u) << line;
  // Without a goal: no time-to-train figures.
  EXPECT_FALSE(search(small_scenario(), small_options()).plans.front().time_to_train.has_value());
}

TEST(Search, SortByCostRanksByCostAcrossSizesAndNeedsAPrice) {
  SearchOptions o = small_options();
  o.gpus = {8, 16};
  o.sort = SearchSort::cost;
  o.prune_by_bound = false;
  const SearchResult all = search(priced_scenario(), o);
  ASSERT_GE(all.plans.size(), 2u);
  // Cheapest first (the score is rounded to a whole token/s: ties within 0.1 %).
  for (std::size_t i = 1; i < all.plans.size(); ++i)
    EXPECT_LE(*all.plans[i - 1].time_to_train->cost, *all.plans[i].time_to_train->cost * 1.001) << i;
  // The branch and bound finds the same top plans as the exhaustive search, by cost too.
  o.prune_by_bound = true;
  const SearchResult bb = search(priced_scenario(), o);
  ASSERT_EQ(bb.plans.size(), all.plans.size());
  for (std::size_t i = 0; i < bb.plans.size(); ++i)
    EXPECT_DOUBLE_EQ(bb.plans[i].tokens_per_s, all.plans[i].tokens_per_s);
  EXPECT_EQ(search_to_json(bb)["sort"], "cost");
  // One size: cost order is speed order.
  SearchOptions one = small_options(), one_cost = small_options();
  one_cost.sort = SearchSort::cost;
  const SearchResult speed = search(priced_scenario(), one), cost = search(priced_scenario(), one_cost);
  ASSERT_EQ(speed.plans.size(), cost.plans.size());
  for (std::size_t i = 0; i < speed.plans.size(); ++i)
    EXPECT_DOUBLE_EQ(speed.plans[i].tokens_per_s, cost.plans[i].tokens_per_s);
  EXPECT_THROW(search(small_scenario(), one_cost), std::invalid_argument);
}

TEST(Search, ReportHasOneColumnPerTopPlanAndOnePointPerSimulatedPlan) {
  const Scenario base = priced_scenario();
  SearchOptions o = small_options();
  o.top_k = 3;
  const SearchResult r = search(base, o);
  ASSERT_EQ(r.plans.size(), 3u);
  ASSERT_EQ(static_cast<std::int64_t>(r.simulated_points.size()), r.simulated);
  const std::string page = search_report_html(base, "tiny.yaml", r, false);
  EXPECT_EQ(count_of(page, "<circle class=\"pt\""), r.simulated_points.size());
  EXPECT_EQ(count_of(page, "<circle class=\"top\""), 3u);
  EXPECT_EQ(count_of(page, "class=\"hbm\""), 1u);
  // One column per plan in each side-by-side chart (memory, bytes): each titled "#rank".
  for (const auto& p : r.plans)
    EXPECT_EQ(count_of(page, fmt::format("<h3 style=\"font-size:0.95em\">#{} ", p.rank)), 2u) << p.rank;
  EXPECT_NE(page.find("ptsim search: top 3 of"), std::string::npos);
  EXPECT_NE(page.find("</html>"), std::string::npos);
}

}  // namespace
}  // namespace ptsim::sim
