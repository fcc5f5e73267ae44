// Prediction bands (issue 9 item 6): the regime of a plan, bands from residuals, the
// committed table, and the band a run reports.
#include "sim/core/prediction_band.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

Scenario reference(const std::string& file) { return load_scenario(test::repo_path("scenarios/reference/" + file)); }

TEST(PredictionBand, RegimeNamesFrameworkShardingScaleAndGpu) {
  EXPECT_EQ(regime_of(reference("sc21-zero3-175b-384.yaml")), "deepspeed < 0.6, ZeRO-3, >=256 GPUs, A100");
  // The same plan under a current DeepSpeed release is not that regime.
  Scenario now = reference("sc21-zero3-175b-384.yaml");
  now.framework = default_profile(Framework::deepspeed);
  EXPECT_EQ(regime_of(now), "deepspeed, ZeRO-3, >=256 GPUs, A100");
  EXPECT_EQ(regime_of(reference("gpt3-1.7b.yaml")), "megatron, ZeRO-0..2, <256 GPUs, A100");
  EXPECT_EQ(regime_of(reference("mpt-13b-64xh100.yaml")), "fsdp, ZeRO-3, <256 GPUs, H100");
  EXPECT_EQ(regime_of(reference("mpt-7b-128xa100-40gb.yaml")), "fsdp, ZeRO-3, <256 GPUs, A100");
  // 256 GPUs is the first "large" size.
  Scenario s = reference("gpt3-18.4b.yaml");
  ASSERT_EQ(s.plan.world_size(), 256);
  EXPECT_EQ(regime_of(s), "megatron, ZeRO-0..2, >=256 GPUs, A100");
}

TEST(PredictionBand, MixedClusterIsARegimeOfItsOwnWithNoBand) {
  const Scenario s = load_scenario(test::repo_path("scenarios/mixed-a100-h100-llama2-13b.yaml"));
  ASSERT_TRUE(s.cluster.mixed());
  EXPECT_EQ(regime_of(s), "megatron, ZeRO-0..2, <256 GPUs, A100+H100");
  EXPECT_FALSE(find_band(s).has_value());
}

TEST(PredictionBand, BandsFromResidualsByHand) {
  // Two regimes; low/high are the extremes, rounded to 0.1 %; sorted by regime name.
  const auto b = bands_from_residuals({{"b", 3.04}, {"a", -1.0}, {"b", -7.26}, {"b", 0.5}, {"a", -0.04}});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].regime, "a");
  EXPECT_EQ(b[0].runs, 2);
  EXPECT_DOUBLE_EQ(b[0].low, -1.0);
  EXPECT_DOUBLE_EQ(b[0].high, 0.0);  // -0.04 rounds to 0, written without a sign
  EXPECT_EQ(b[1].regime, "b");
  EXPECT_EQ(b[1].runs, 3);
  EXPECT_DOUBLE_EQ(b[1].low, -7.3);
  EXPECT_DOUBLE_EQ(b[1].high, 3.0);
  // The text form round-trips through the parser.
  const auto back = parse_bands(bands_json_text(b), "t");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].regime, "b");
  EXPECT_DOUBLE_EQ(back[1].low, -7.3);
}

TEST(PredictionBand, MalformedTableIsAnError) {
  EXPECT_THROW(parse_bands("{", "x.json"), std::invalid_argument);
  EXPECT_THROW(parse_bands(R"({"regimes": [{"regime": "a"}]})", "x.json"), std::invalid_argument);
  try {
    parse_bands(R"({"regimes": [{"regime": "a", "runs": 1, "low": 2, "high": 1}]})", "x.json");
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("low <= high"), std::string::npos) << e.what();
  }
}

TEST(PredictionBand, RunReportsItsRegimesBandOrSaysItHasNone) {
  // A validated regime: the run carries the committed band of its regime.
  SimulateOptions so;
  so.fold = true;
  const auto r = simulate(reference("sc21-zero3-175b-384.yaml"), so).result;
  ASSERT_TRUE(r.prediction_band.has_value());
  EXPECT_EQ(r.prediction_band->regime, r.regime);
  EXPECT_GE(r.prediction_band->runs, 1);
  EXPECT_LE(r.prediction_band->low, r.prediction_band->high);
  EXPECT_NE(band_text(r.prediction_band, r.regime).find("deepspeed < 0.6, ZeRO-3, >=256 GPUs, A100"), std::string::npos);
  // A GPU no validated run used: outside every regime, and the text says so.
  Scenario b200 = reference("gpt3-1.7b.yaml");
  b200.cluster.gpu.name = "b200";
  EXPECT_FALSE(find_band(b200).has_value());
  EXPECT_EQ(band_text(std::nullopt, regime_of(b200)),
            "none: outside every validated regime (megatron, ZeRO-0..2, <256 GPUs, b200)");
}

}  // namespace
}  // namespace ptsim::sim
