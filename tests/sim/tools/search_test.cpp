#include "sim/tools/search.h"

#include <gtest/gtest.h>

#include <set>

#include "sim/core/simulate.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

// 8 GPUs, 8 layers, global batch 16: small enough to simulate every plan.
Scenario small_scenario() {
  return parse_scenario(
      testing::tiny_gpt_yaml(/*pp=*/1, /*dp=*/8, /*tp=*/1, /*layers=*/8, /*gbs=*/16, "", /*vocab=*/1024), "tiny.yaml");
}

// Restrict the space so an exhaustive run stays in the hundreds of simulations.
SearchOptions small_options() {
  SearchOptions o;
  o.fix = {"parallel.zero_stage=0,1", "parallel.recompute=none,selective"};
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

TEST(Search, BoundPruningKeepsTheExhaustiveTopK) {
  const Scenario base = small_scenario();
  SearchOptions pruned = small_options();
  SearchOptions all = small_options();
  all.prune_by_bound = false;
  all.top_k = 1000000;
  const SearchResult ex = search(base, all), bb = search(base, pruned);
  ASSERT_GE(ex.plans.size(), 5u);
  // The bound is a true upper bound on every simulated plan's throughput.
  for (const auto& p : ex.plans) EXPECT_GE(p.bound_tokens_per_s, p.tokens_per_s) << plan_to_json(p.plan).dump();
  ASSERT_EQ(bb.plans.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(plan_to_json(bb.plans[i].plan), plan_to_json(ex.plans[i].plan)) << "rank " << i + 1;
    EXPECT_DOUBLE_EQ(bb.plans[i].tokens_per_s, ex.plans[i].tokens_per_s);
  }
  // Branch and bound must actually cut something on this space.
  EXPECT_LT(bb.simulated, ex.simulated);
  EXPECT_GT(bb.pruned.at("bound"), 0);
}

TEST(Search, JsonShapeFollowsContract) {
  const SearchResult r = search(small_scenario(), small_options());
  const auto j = search_to_json(r);
  ASSERT_TRUE(j.contains("plans") && j["plans"].is_array());
  ASSERT_TRUE(j.contains("pruned") && j["pruned"].is_object());
  EXPECT_EQ(j["candidates"].get<std::int64_t>(), r.candidates);
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
    if (k != "oom (simulated)") before += v;
  EXPECT_EQ(before + r.simulated, r.candidates);
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

TEST(Search, LowerBoundHoldsOnGpt3Default) {
  const Scenario s = load_scenario(test::repo_path("scenarios/default.yaml"));
  const auto compute = make_compute_cost(s);
  const auto coll = make_collective_cost(s);
  SimulateOptions so;
  so.fold = true;
  const double t = simulate(s, so).result.iteration_time_s;
  const double lb = iteration_time_lower_bound(s, compute, *coll);
  EXPECT_LE(lb, t);
  // And it is not trivially loose: compute alone is most of a 1F1B iteration.
  EXPECT_GT(lb, 0.5 * t);
}

}  // namespace
}  // namespace ptsim::sim
