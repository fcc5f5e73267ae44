#include "sim/core/time_to_train.h"

#include <gtest/gtest.h>

#include "sim/core/simulate.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

// tiny GPT: 8 A100s (pp 2 × dp 4), global batch 16 × sequence 128 = 2,048 tokens per iteration.
Scenario tiny(const std::vector<std::string>& sets) {
  return parse_scenario(testing::tiny_gpt_yaml(2, 4, 1, 8, 16), "tiny.yaml", sets);
}

Result two_second_iterations() {
  Result r;
  r.world_size = 8;
  r.iteration_time_s = 2.0;
  return r;
}

TEST(TimeToTrain, TokensGoalAgainstAHandCalculation) {
  const Scenario s = tiny({"training.total_tokens=1e6", "cluster.price_per_gpu_hour=2.5"});
  const auto t = time_to_train(s, two_second_iterations());
  ASSERT_TRUE(t);
  // 1e6 / 2,048 = 488.28 -> 489 whole iterations; 489 × 2,048 = 1,001,472 tokens.
  EXPECT_EQ(t->iterations, 489);
  EXPECT_EQ(t->tokens, 1001472);
  // 489 × 2 s = 978 s = 0.011319 days; × 8 GPUs / 3,600 = 2.17333 GPU-hours; × 2.5 = 5.43333.
  EXPECT_DOUBLE_EQ(t->seconds, 978);
  EXPECT_NEAR(t->days, 0.0113194, 1e-7);
  EXPECT_NEAR(t->gpu_hours, 2.173333, 1e-6);
  ASSERT_TRUE(t->cost);
  EXPECT_NEAR(*t->cost, 5.433333, 1e-6);
  // A100 SXM TDP 400 W × 8 GPUs × 978 s = 3,129,600 J = 0.869333 kWh.
  EXPECT_EQ(t->gpu_power_w, 400);
  EXPECT_NEAR(t->energy_kwh, 0.869333, 1e-6);
  // The same from the iteration time alone (what a search candidate keeps).
  EXPECT_EQ(time_to_train(s, 2.0)->cost, t->cost);
}

TEST(TimeToTrain, IterationGoalAndPowerOverride) {
  const Scenario s = tiny({"training.train_iters=1000", "cluster.gpu_power=1.2 kW"});
  const auto t = time_to_train(s, two_second_iterations());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->iterations, 1000);
  EXPECT_EQ(t->tokens, 2048000);
  EXPECT_DOUBLE_EQ(t->gpu_hours, 2000.0 * 8 / 3600);
  EXPECT_FALSE(t->cost);  // no price given
  // 1,200 W × 8 × 2,000 s = 19.2 MJ = 5.3333 kWh.
  EXPECT_NEAR(t->energy_kwh, 5.333333, 1e-6);
}

TEST(TimeToTrain, NoGoalNoFigures) {
  EXPECT_FALSE(time_to_train(tiny({}), two_second_iterations()));
  const Simulation sim = simulate(tiny({}), {});
  EXPECT_FALSE(sim.result.time_to_train);
  EXPECT_FALSE(to_json(sim.result).contains("time_to_train"));
  EXPECT_EQ(summary_text(sim.result).find("time to train"), std::string::npos);
}

TEST(TimeToTrain, SimulateFillsTheResultJsonAndSummary) {
  const Scenario s = tiny({"training.total_tokens=2048000", "cluster.price_per_gpu_hour=3"});
  SimulateOptions o;
  o.fold = true;
  const Simulation sim = simulate(s, o);
  ASSERT_TRUE(sim.result.time_to_train);
  const auto& t = *sim.result.time_to_train;
  EXPECT_EQ(t.iterations, 1000);
  EXPECT_DOUBLE_EQ(t.seconds, 1000 * sim.result.iteration_time_s);
  const auto j = to_json(sim.result);
  EXPECT_EQ(j["time_to_train"]["iterations"], 1000);
  EXPECT_DOUBLE_EQ(j["time_to_train"]["cost"].get<double>(), 3 * t.gpu_hours);
  EXPECT_EQ(j["time_to_train"]["gpu_power_w"], 400);
  const std::string text = summary_text(sim.result);
  EXPECT_NE(text.find("time to train"), std::string::npos);
  EXPECT_NE(text.find("GPUs only, 400 W each"), std::string::npos);
}

TEST(TimeToTrain, BadInputsNameTheirKey) {
  auto error_of = [](const std::vector<std::string>& sets) {
    try {
      tiny(sets);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of({"training.total_tokens=1e6", "training.train_iters=5"}).find("training.train_iters"),
            std::string::npos);
  EXPECT_NE(error_of({"training.total_tokens=-3"}).find("training.total_tokens"), std::string::npos);
  EXPECT_NE(error_of({"training.train_iters=0"}).find("training.train_iters"), std::string::npos);
  EXPECT_NE(error_of({"cluster.gpu_power=700"}).find("cluster.gpu_power: '700' has no unit"), std::string::npos);
  EXPECT_NE(error_of({"cluster.gpu_power=700 V"}).find("unknown power unit"), std::string::npos);
  EXPECT_NE(error_of({"cluster.price_per_gpu_hour=-1"}).find("cluster.price_per_gpu_hour"), std::string::npos);
}

}  // namespace
}  // namespace ptsim::sim
