// Stragglers (cluster.slow, sim/core/straggler.h): seeded draws, the rank lists,
// and the slowdown of an iteration against a hand calculation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/core/errors.h"
#include "sim/core/simulate.h"
#include "sim/core/straggler.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

using testing::FlopsOnlyCost;
using testing::FreeCollectives;
using testing::tiny_gpt_yaml;

Scenario with_slow(int pp, int dp, const std::string& slow, int gbs = 8) {
  std::string yaml = tiny_gpt_yaml(pp, dp, 1, 4, gbs);
  yaml.replace(yaml.find("parallel:"), 9, "  slow: " + slow + "\nparallel:");
  return parse_scenario(yaml, "slow.yaml");
}

Result run(const Scenario& s, bool fold = false) { return testing::run_synthetic(s, fold); }

TEST(Straggler, DrawsAreSeededAndDeterministic) {
  const auto a = draw_slowdowns(SlowDistribution::lognormal, 0.1, 7, 20'000);
  EXPECT_EQ(a, draw_slowdowns(SlowDistribution::lognormal, 0.1, 7, 20'000));
  EXPECT_NE(a, draw_slowdowns(SlowDistribution::lognormal, 0.1, 8, 20'000));
  for (double f : a) EXPECT_GE(f, 1.0);
  // exp(σ·|z|): the median of |z| is 0.6745 (the normal's upper quartile), so the
  // median factor is exp(0.06745) = 1.0698.
  std::vector<double> sorted = a;
  std::nth_element(sorted.begin(), sorted.begin() + 10'000, sorted.end());
  EXPECT_NEAR(sorted[10'000], std::exp(0.1 * 0.6745), 0.002);
  const auto u = draw_slowdowns(SlowDistribution::uniform, 1.2, 3, 20'000);
  double mean = 0;
  for (double f : u) {
    EXPECT_GE(f, 1.0);
    EXPECT_LT(f, 1.2);
    mean += f / 20'000;
  }
  EXPECT_NEAR(mean, 1.1, 0.002);  // uniform on [1, 1.2): mean 1.1
}

TEST(Straggler, IndexLists) {
  EXPECT_EQ(parse_index_list("0-3,7", 8), (std::vector<int>{0, 1, 2, 3, 7}));
  EXPECT_EQ(parse_index_list("5", 8), (std::vector<int>{5}));
  EXPECT_THROW(parse_index_list("0-8", 8), std::invalid_argument);
  EXPECT_THROW(parse_index_list("3-1", 8), std::invalid_argument);
  EXPECT_THROW(parse_index_list("a", 8), std::invalid_argument);
  EXPECT_THROW(parse_index_list("", 8), std::invalid_argument);
  EXPECT_THROW(parse_index_list("1,,2", 8), std::invalid_argument);
}

TEST(Straggler, OneSlowRankInADataParallelGroupSlowsTheIteration) {
  // pp = 1, dp = 4, compute-bound (GEMM and attention at 10 PFLOP/s, everything
  // else and all communication free): each rank computes for T, then the gradient
  // all-reduce waits for all four. Rank 2 at 1.15 computes for 1.15·T, so the
  // iteration is 1.15·T: the straggler costs 15 % of the compute time.
  const Scenario s = with_slow(1, 4, "[{ranks: \"2\", factor: 1.15}]");
  const Result r = run(s);
  ASSERT_TRUE(r.straggler);
  EXPECT_EQ(r.straggler->slow_ranks, 1);
  EXPECT_EQ(r.straggler->critical_rank, 2);
  EXPECT_DOUBLE_EQ(r.straggler->critical_factor, 1.15);
  EXPECT_NEAR(r.straggler->cost_fraction, 0.15, 0.002);
  EXPECT_NEAR(r.iteration_time_s, 1.15 * r.straggler->baseline_iteration_s, 1e-3 * r.iteration_time_s);
  // The baseline is the plan with no slowdown.
  std::string plain = tiny_gpt_yaml(1, 4, 1, 4, 8);
  EXPECT_DOUBLE_EQ(r.straggler->baseline_iteration_s, run(parse_scenario(plain, "plain.yaml")).iteration_time_s);
  // JSON names the critical rank.
  const auto j = to_json(r);
  EXPECT_EQ(j["straggler"]["critical_rank"], 2);
}

TEST(Straggler, PipelineStageRunsAtItsSlowestRank) {
  // pp = 2, dp = 2, one slow GPU in the last stage: that stage's compute stretches
  // by 1.3, so the iteration lies between the baseline and 1.3 × it (the first
  // stage's warm-up forward is not slowed).
  const Scenario s = with_slow(2, 2, "[{ranks: [3], factor: 1.3}]");
  const Result r = run(s);
  ASSERT_TRUE(r.straggler);
  EXPECT_GT(r.straggler->cost_fraction, 0.2);
  EXPECT_LT(r.straggler->cost_fraction, 0.3);
}

TEST(Straggler, FoldIsRefusedAndNodesExpand) {
  // --fold would simulate rank 0 of each stage only, which is not slow: the run
  // simulates every rank instead and says so.
  const Scenario s = with_slow(1, 8, "[{nodes: [0], factor: 1.1}]", 16);
  EXPECT_EQ(std::count(s.cluster.slow_factor.begin(), s.cluster.slow_factor.end(), 1.1), 8);
  const Result r = run(s, true);
  EXPECT_FALSE(r.folded);
  EXPECT_NE(std::find_if(r.warnings.begin(), r.warnings.end(),
                         [](const std::string& w) { return w.find("--fold ignored") != std::string::npos; }),
            r.warnings.end());
  EXPECT_NEAR(r.straggler->cost_fraction, 0.1, 0.002);
}

TEST(Straggler, SeededDistributionGivesTheSameIterationEveryRun) {
  const std::string d = "[{distribution: lognormal, sigma: 0.05, seed: 11}]";
  const Result a = run(with_slow(1, 8, d, 16)), b = run(with_slow(1, 8, d, 16));
  EXPECT_EQ(a.iteration_time_s, b.iteration_time_s);
  EXPECT_EQ(a.straggler->critical_rank, b.straggler->critical_rank);
  // Compute-bound and synchronised by the all-reduce: the iteration is the slowest factor.
  EXPECT_NEAR(a.iteration_time_s / a.straggler->baseline_iteration_s, a.straggler->critical_factor, 1e-3);
}

TEST(Straggler, BadEntriesNameTheKey) {
  auto fails = [](const std::string& slow, const std::string& key) {
    try {
      with_slow(1, 4, slow);
      ADD_FAILURE() << "accepted " << slow;
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  fails("[]", "cluster.slow");
  fails("[{ranks: \"0\", factor: 0.5}]", "cluster.slow[0].factor");
  fails("[{ranks: \"4\", factor: 1.1}]", "cluster.slow[0].ranks");
  fails("[{ranks: [9], factor: 1.1}]", "cluster.slow[0].ranks[0]");
  fails("[{factor: 1.1}]", "cluster.slow[0].ranks");
  fails("[{ranks: \"0\", nodes: [0], factor: 1.1}]", "cluster.slow[0].nodes");
  fails("[{ranks: \"0\", factor: 1.1, distribution: uniform}]", "cluster.slow[0].distribution");
  fails("[{distribution: lognormal}]", "cluster.slow[0].sigma");
  fails("[{distribution: uniform, max_factor: 1}]", "cluster.slow[0].max_factor");
  fails("[{distribution: gamma, sigma: 1}]", "cluster.slow[0].distribution");
  fails("[{ranks: \"0\", factr: 1.1}]", "cluster.slow[0].factr");
}

}  // namespace
}  // namespace ptsim::sim
