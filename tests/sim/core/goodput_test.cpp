#include "sim/core/goodput.h"

#include <gtest/gtest.h>

#include <cmath>

#include "models/params.h"
#include "sim/core/errors.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

// tiny GPT on 8 A100s in one node (pp 2 × dp 4), with a reliability section.
Scenario tiny(const std::string& reliability, const std::vector<std::string>& sets = {}) {
  return parse_scenario(testing::tiny_gpt_yaml(2, 4, 1, 8, 16) + "reliability:\n" + reliability, "tiny.yaml", sets);
}

// The hand-calculated case: 8 GPUs × 0.1 + 1 node × 0.2 = 1 failure per hour, M = 3,600 s;
// a 100 GB checkpoint written at 1 GB/s (δ = 100 s) and read at 2 GB/s (50 s);
// R = 300 s relaunch + 50 s load + 10 s warm-up = 360 s; 2 s iterations.
const char* kHand = R"(  gpu_failures_per_hour: 0.1
  node_failures_per_hour: 0.2
  checkpoint_size: "100 GB"
  storage_bandwidth: { write: "1 GB/s", read: "2 GB/s" }
  relaunch_time: "5 min"
  warmup_time: "10 s"
)";

TEST(Goodput, IntervalFormulasAgainstAHandCalculation) {
  // Young: √(2 · 100 · 3,600) = √720,000 = 848.528 s.
  EXPECT_NEAR(young_interval(100, 3600), 848.528137, 1e-5);
  // Daly: δ/2M = 1/72 = 0.0138889, √ = 0.117851: 848.528 · (1 + 0.039284 + 0.001543) − 100 = 783.171 s.
  EXPECT_NEAR(daly_interval(100, 3600), 783.170928, 1e-5);
  // Exact: x = τ/M solves e^{x + 1/36}(x − 1) + 1 = 0: x = 0.2175591 (e^{0.2453369} = 1.278052,
  // × (−0.7824409) = −1.000000), τ = 783.2126 s — Daly's estimate is 0.04 s short.
  EXPECT_NEAR(optimal_interval(100, 3600), 783.212646, 1e-5);
  // δ ≥ 2M: Daly's estimate is M.
  EXPECT_EQ(daly_interval(8000, 3600), 3600);
  // For δ ≪ M Daly's higher-order estimate agrees with the exact optimum to 1e-8.
  EXPECT_NEAR(daly_interval(10, 1e5) / optimal_interval(10, 1e5), 1, 2e-8);
  // E(a) = M e^{R/M}(e^{a/M} − 1): with a = 0 there is nothing to do; as M → ∞ it tends to a.
  EXPECT_EQ(expected_segment_time(0, 360, 3600), 0);
  EXPECT_NEAR(expected_segment_time(100, 0, 1e12), 100, 1e-6);
  // Lost work per failure of a 100 s segment with M = 100 s: 100 − 100/(e − 1) = 41.802329 s.
  EXPECT_NEAR(expected_lost_work(100, 100), 41.802329, 1e-5);
}

TEST(Goodput, SteadyStateAgainstAHandCalculation) {
  const Scenario s = tiny(kHand);
  const auto g = goodput(s, 2.0, 1000);
  ASSERT_TRUE(g);
  EXPECT_DOUBLE_EQ(g->job_failures_per_hour, 1.0);
  EXPECT_DOUBLE_EQ(g->mtbf_s, 3600);
  EXPECT_DOUBLE_EQ(g->failures_per_day, 24);
  EXPECT_DOUBLE_EQ(g->checkpoint_bytes, 100e9);
  EXPECT_DOUBLE_EQ(g->checkpoint_write_s, 100);
  EXPECT_DOUBLE_EQ(g->checkpoint_cost_s, 100);
  EXPECT_DOUBLE_EQ(g->checkpoint_load_s, 50);
  EXPECT_DOUBLE_EQ(g->restart_s, 360);
  // τ* = 783.21 s = 391.6 iterations: 391 gives E(882)/782 = 1.4124660, 392 gives
  // E(884)/784 = 1.4124658 (E(a) = 3,600 · e^{0.1} · (e^{a/3600} − 1)), so 392.
  EXPECT_EQ(g->interval_source, "optimal");
  EXPECT_EQ(g->interval_iterations, 392);
  EXPECT_DOUBLE_EQ(g->interval_s, 784);
  // Goodput 784 / E(884) = 784 / 1,107.373 = 0.707982; 1,000 tokens/s → 707.98.
  EXPECT_NEAR(g->goodput, 0.7079818, 1e-6);
  EXPECT_NEAR(g->tokens_per_s, 707.9818, 1e-3);
  // Lost work per failure: 3,600 − 884 / (e^{884/3600} − 1) = 423.93 s.
  EXPECT_NEAR(g->lost_work_per_failure_s, 423.92889, 1e-4);
  EXPECT_FALSE(g->wall_s);  // no training goal
}

TEST(Goodput, TrainingGoalAgainstAHandCalculation) {
  const Scenario s = tiny(kHand, {"training.train_iters=1000", "cluster.price_per_gpu_hour=2"});
  const auto g = goodput(s, 2.0, 1000);
  ASSERT_TRUE(g && g->wall_s);
  // 1,000 iterations = 2 segments of 392 + one of 216: 2 · E(884) + E(532)
  // = 2 · 1,107.3732 + 633.6154 = 2,848.3617 s; goodput 2,000 / 2,848.36 = 0.702158.
  EXPECT_NEAR(*g->wall_s, 2848.36174, 1e-4);
  EXPECT_NEAR(g->goodput, 0.7021580, 1e-6);
  EXPECT_NEAR(*g->failures_per_run, 2848.36174 / 3600, 1e-7);
  // 2,848.36 s × 8 GPUs / 3,600 = 6.32969 GPU-hours, × 2 = 12.6594.
  EXPECT_NEAR(*g->gpu_hours, 6.329693, 1e-6);
  EXPECT_NEAR(*g->cost, 12.659386, 1e-5);
  // A100 400 W × 8 × 2,848.36 s / 3.6e6 = 2.531877 kWh.
  EXPECT_NEAR(*g->energy_kwh, 2.531877, 1e-6);
}

TEST(Goodput, GivenIntervalsAndAsyncCheckpoints) {
  // 1,000 s of 2 s iterations = 500 iterations; "300 iterations" as given.
  EXPECT_EQ(goodput(tiny(std::string(kHand) + "  checkpoint_interval: \"1000 s\"\n"), 2.0, 1)->interval_iterations, 500);
  EXPECT_EQ(goodput(tiny(std::string(kHand) + "  checkpoint_interval: \"300 iterations\"\n"), 2.0, 1)->interval_iterations,
            300);
  // Async: the 100 GB spread as the plan shards it, about 100 GB / 8 GPUs = 12.5 GB per GPU
  // (the larger stage's share: a little more, as the last stage also holds the output
  // layer); the snapshot at 25 GB/s blocks about 0.5 s; the rest of the 100 s write
  // counts as restart (R ≈ 360 + 99.5 s) and bounds the interval from below:
  // ceil(99.5 s / 2 s) = 50 iterations.
  const auto a = goodput(tiny(std::string(kHand) + "  checkpoint_mode: async\n  snapshot_bandwidth: \"25 GB/s\"\n"
                                                   "  checkpoint_interval: \"10 iterations\"\n"),
                         2.0, 1);
  EXPECT_EQ(a->mode, "async");
  EXPECT_GE(a->checkpoint_bytes_per_rank, 12.5e9);
  EXPECT_LT(a->checkpoint_bytes_per_rank, 12.6e9);
  EXPECT_DOUBLE_EQ(a->checkpoint_cost_s, a->checkpoint_bytes_per_rank / 25e9);
  EXPECT_DOUBLE_EQ(a->restart_s, 360 + 100 - a->checkpoint_cost_s);
  EXPECT_EQ(a->interval_iterations, 50);
  // A blocking cost of 0.5 s instead of 100 s: better goodput at the optimum.
  const auto best_async =
      goodput(tiny(std::string(kHand) + "  checkpoint_mode: async\n  snapshot_bandwidth: \"25 GB/s\"\n"), 2.0, 1);
  EXPECT_GT(best_async->goodput, goodput(tiny(kHand), 2.0, 1)->goodput);
}

TEST(Goodput, FailureRatesGrowWithTheCluster) {
  // The defaults (Llama 3: 419 interruptions in 54 days on 16,384 GPUs): 16,384 × 1.1583e-5 +
  // 2,048 × 6.5197e-5 = 0.32330 per hour, i.e. 1,296 h / 419 = 3.0931 h.
  EXPECT_NEAR(16384 * kDefaultGpuFailuresPerHour + 2048 * kDefaultNodeFailuresPerHour, 419.0 / 1296, 1e-12);
  EXPECT_NEAR(kDefaultGpuFailuresPerHour, 1.15833e-5, 1e-9);
  EXPECT_NEAR(kDefaultNodeFailuresPerHour, 6.51972e-5, 1e-9);
  // Twice the GPUs (dp 8 instead of 4): twice the failure rate, lower goodput.
  const auto small = goodput(tiny("  gpu_mtbf: \"100 h\"\n  node_mtbf: \"1000 h\"\n"), 1.0, 1);
  const Scenario big_s = parse_scenario(
      testing::tiny_gpt_yaml(2, 8, 1, 8, 16) + "reliability:\n  gpu_mtbf: \"100 h\"\n  node_mtbf: \"1000 h\"\n", "t.yaml");
  const auto big = goodput(big_s, 1.0, 1);
  // 8 / 100 + 1 / 1000 = 0.081 per hour; 16 / 100 + 2 / 1000 = 0.162.
  EXPECT_NEAR(small->job_failures_per_hour, 0.081, 1e-12);
  EXPECT_NEAR(big->job_failures_per_hour, 0.162, 1e-12);
  EXPECT_LT(big->goodput, small->goodput);
}

TEST(Goodput, CheckpointSizeFromTheModelStates) {
  // bf16 with Megatron's layout: 2-byte weights + 12 bytes of fp32 main weights and Adam
  // m, v per parameter. tiny: pp 2 × dp 4 — every parameter once, the last stage's copy of
  // the tied embedding (Megatron keeps one there when pp > 1) on top.
  const Scenario s = tiny("  gpu_mtbf: \"100 h\"\n", {"training.precision=bf16"});
  const auto p = models::count_params(s.model);
  const CheckpointSize c = checkpoint_size(s);
  EXPECT_GE(c.total, static_cast<double>(p.total) * 14);
  EXPECT_LE(c.total, static_cast<double>(p.total + p.embedding) * 14);
  // Each stage's states spread over its 4 GPUs: the larger stage's quarter.
  EXPECT_GT(c.per_rank, c.total / 8);
  EXPECT_LE(c.per_rank, c.total / 4);
  // tp 2 splits the same model over twice the GPUs: the total stays, the shares halve.
  const Scenario t = parse_scenario(testing::tiny_gpt_yaml(2, 4, 2, 8, 16) + "reliability:\n  gpu_mtbf: \"100 h\"\n",
                                    "t.yaml", {"training.precision=bf16"});
  EXPECT_NEAR(checkpoint_size(t).per_rank / c.per_rank, 0.5, 0.01);
}

// A MoE model's experts are saved once whatever their sharding: the same total with the
// experts split over tp (etp 2) or whole on each GPU (etp 1), but for the row-parallel
// biases, which tp · share counts once per tensor-parallel rank (0.03 % here).
TEST(Goodput, CheckpointSizeOfFoldedExperts) {
  const std::string yaml = testing::tiny_moe_yaml("1f1b") + "reliability:\n  gpu_mtbf: \"100 h\"\n";
  const std::vector<std::string> tp2 = {"parallel.tensor_parallel=2", "parallel.sequence_parallel=true",
                                        "cluster.num_gpus=8", "cluster.gpus_per_node=8"};
  std::vector<std::string> folded = tp2;
  folded.push_back("parallel.expert_tensor_parallel=1");
  const double split = checkpoint_size(parse_scenario(yaml, "m.yaml", tp2)).total;
  EXPECT_GT(split, 0);
  EXPECT_NEAR(checkpoint_size(parse_scenario(yaml, "m.yaml", folded)).total, split, 1e-3 * split);
  EXPECT_LE(checkpoint_size(parse_scenario(yaml, "m.yaml", folded)).total, split);
}

TEST(Goodput, MonteCarloMatchesTheClosedForm) {
  const Scenario s = tiny(kHand, {"training.train_iters=1000"});
  const auto g = goodput(s, 2.0, 1000);
  const GoodputTrials t = goodput_trials(s, 2.0, *g, 20000, 7);
  // 20,000 independent runs: the standard error of the mean is σ/√20,000; the mean is
  // within 4 standard errors of Daly's expectation (a false alarm once in ~16,000 seeds).
  const double se = t.stddev_s / std::sqrt(20000.0);
  EXPECT_NEAR(t.mean_s, *g->wall_s, 4 * se);
  EXPECT_LT(se, 0.01 * *g->wall_s);  // the tolerance is tight: under 1 % of the mean
  // Failures arrive at 1/M over the whole wall time (Wald): E[failures] = E[wall] / M.
  EXPECT_NEAR(t.mean_failures, *g->failures_per_run, 0.03 * *g->failures_per_run);
  EXPECT_LE(t.p10_s, t.p50_s);
  EXPECT_LE(t.p50_s, t.p90_s);
  EXPECT_GE(t.p10_s, 2000 + 3 * 100);  // never less than the work and three checkpoints
  // Seeded: the same seed gives the same numbers, another seed others.
  const GoodputTrials again = goodput_trials(s, 2.0, *g, 20000, 7);
  EXPECT_EQ(again.mean_s, t.mean_s);
  EXPECT_EQ(again.p90_s, t.p90_s);
  EXPECT_NE(goodput_trials(s, 2.0, *g, 20000, 8).mean_s, t.mean_s);
}

TEST(Goodput, TrialsNeedAGoalAndABound) {
  const Scenario s = tiny(kHand);
  const auto g = goodput(s, 2.0, 1);
  EXPECT_THROW(goodput_trials(s, 2.0, *g, 10, 1), ScenarioError);
  const Scenario long_run = tiny(kHand, {"training.train_iters=1000000000"});
  const auto gl = goodput(long_run, 2.0, 1);
  EXPECT_THROW(goodput_trials(long_run, 2.0, *gl, 1000000, 1), InputError);
}

TEST(Goodput, ARunThatNeverEndsIsAnError) {
  // 8,000 failures per hour (M = 0.45 s) against a 360 s restart: e^{800} overflows.
  EXPECT_THROW(goodput(tiny(std::string(kHand) + "", {"reliability.gpu_failures_per_hour=1000"}), 2.0, 1), ScenarioError);
  // A given interval of 10^7 iterations (2·10^7 s) with M = 3,600 s: e^{5556} overflows; the key is the interval.
  try {
    goodput(tiny(std::string(kHand) + "  checkpoint_interval: \"10000000 iterations\"\n"), 2.0, 1);
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key(), "reliability.checkpoint_interval");
  }
}

TEST(Goodput, NoSectionNoGoodput) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(2, 4, 1, 8, 16), "t.yaml");
  EXPECT_FALSE(goodput(s, 1.0, 1));
  // `reliability:` alone: every default (Llama 3 rates, 2 TB/s, sync, 10 min relaunch).
  const auto d = goodput(tiny(""), 1.0, 1);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->rates_default);
  EXPECT_TRUE(d->relaunch_default);
  EXPECT_NEAR(d->job_failures_per_hour, 8 * kDefaultGpuFailuresPerHour + kDefaultNodeFailuresPerHour, 1e-15);
}

}  // namespace
}  // namespace ptsim::sim
