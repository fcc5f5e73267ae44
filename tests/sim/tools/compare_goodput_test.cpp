// `ptsim compare --sort goodput` (README "Goodput"): the ranking by tokens/s × goodput.
#include <gtest/gtest.h>

#include "hw/errors.h"
#include "sim/tools/compare.h"

namespace ptsim::sim {
namespace {

ComparedPlan plan(const std::string& file, double tokens_per_s, std::optional<double> goodput) {
  ComparedPlan p;
  p.file = file;
  p.sim.result.tokens_per_s = tokens_per_s;
  if (goodput) {
    Goodput g;
    g.goodput = *goodput;
    g.tokens_per_s = tokens_per_s * *goodput;
    p.sim.result.goodput = g;
  }
  return p;
}

TEST(CompareGoodput, RanksByTokensTimesGoodput) {
  // big: 1,000 × 0.80 = 800; small: 900 × 0.95 = 855 — first by goodput, second by speed.
  const std::vector<ComparedPlan> plans = {plan("big.yaml", 1000, 0.80), plan("small.yaml", 900, 0.95)};
  const auto by_speed = compare_rows(plans, CompareSort::speed);
  EXPECT_EQ(by_speed.front().label, "big.yaml");
  const auto by_goodput = compare_rows(plans, CompareSort::goodput);
  ASSERT_EQ(by_goodput.size(), 2u);
  EXPECT_EQ(by_goodput[0].label, "small.yaml");
  EXPECT_EQ(by_goodput[1].label, "big.yaml");
  // vs best: 800 / 855 − 1 = −6.433 %.
  EXPECT_NEAR(by_goodput[1].vs_best_pct, -6.4327, 1e-3);
  const std::string table = compare_table_text(by_goodput, plans, CompareSort::goodput);
  EXPECT_NE(table.find("gp tok/s"), std::string::npos);
  EXPECT_NE(table.find("95.0%"), std::string::npos);
  const auto j = compare_json(by_goodput, plans, CompareSort::goodput);
  EXPECT_EQ(j["sort"], "goodput");
  EXPECT_DOUBLE_EQ(j["plans"][0]["goodput_tokens_per_s"].get<double>(), 855);
}

TEST(CompareGoodput, NeedsAReliabilitySectionInEveryPlan) {
  const std::vector<ComparedPlan> plans = {plan("a.yaml", 1000, 0.9), plan("b.yaml", 900, std::nullopt)};
  try {
    compare_rows(plans, CompareSort::goodput);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "b.yaml");
    EXPECT_EQ(e.key(), "reliability");
  }
  EXPECT_NO_THROW(compare_rows(plans, CompareSort::speed));
}

}  // namespace
}  // namespace ptsim::sim
