// ZeRO report: volumes and memory against the ZeRO paper's formulas (SC'20 §5, §7).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/model_spec.h"
#include "models/params.h"
#include "sim/tools/zero_report.h"

namespace ptsim::sim {
namespace {

ZeroReportInput input(int dp) {
  ZeroReportInput in;
  in.model = *models::find_preset("gpt3-175b");
  in.dp = dp;
  in.cluster = default_cluster("a100-sxm-80gb", dp);
  return in;
}

TEST(ZeroReport, VolumesAndMemoryMatchThePaper) {
  const ZeroReport r = zero_report(input(64));
  const double psi = static_cast<double>(models::count_params(*models::find_preset("gpt3-175b")).total);
  const double n = 64, f = 63.0 / 64.0, K = 12;
  ASSERT_EQ(r.stages.size(), 4u);
  EXPECT_EQ(r.bytes_per_element, 2);  // bf16
  // Volume in Ψ: 2, 2, 2, 3 times (N−1)/N = 1.96875, 1.96875, 1.96875, 2.953125.
  EXPECT_NEAR(r.stages[0].volume_psi, 2 * f, 1e-12);
  EXPECT_NEAR(r.stages[1].volume_psi, 2 * f, 1e-12);
  EXPECT_NEAR(r.stages[2].volume_psi, 2 * f, 1e-12);
  EXPECT_NEAR(r.stages[3].volume_psi, 3 * f, 1e-12);
  // Bytes sent = volume × Ψ × 2 bytes; received the same for ring collectives.
  EXPECT_NEAR(r.stages[3].sent_bytes, 3 * f * psi * 2, 1.0);
  EXPECT_NEAR(r.stages[3].received_bytes, r.stages[3].sent_bytes, 1.0);
  // Memory (bytes): (2+2+K)Ψ, 2Ψ+2Ψ+KΨ/N, 2Ψ+(2+K)Ψ/N, (2+2+K)Ψ/N.
  EXPECT_NEAR(r.stages[0].memory.total(), (2 + 2 + K) * psi, 1.0);
  EXPECT_NEAR(r.stages[1].memory.total(), 4 * psi + K * psi / n, 1.0);
  EXPECT_NEAR(r.stages[2].memory.total(), 2 * psi + (2 + K) * psi / n, 1.0);
  EXPECT_NEAR(r.stages[3].memory.total(), (2 + 2 + K) * psi / n, 1.0);
  // ZeRO-1: reduce-scatter + all-gather of Ψ·2 bytes each, once.
  ASSERT_EQ(r.stages[1].collectives.size(), 2u);
  EXPECT_EQ(r.stages[1].collectives[0].kind, "reduce-scatter");
  EXPECT_EQ(r.stages[1].collectives[1].kind, "all-gather");
  EXPECT_NEAR(r.stages[1].collectives[0].bytes_each, 2 * psi, 1.0);
  // ZeRO-3 gathers the parameters twice (forward and backward).
  EXPECT_EQ(r.stages[3].collectives[0].count, 2);
  // Times: ZeRO-3 moves 1.5x the bytes of ZeRO-1 over the same rings, so it takes longer.
  EXPECT_GT(r.stages[3].time_s, r.stages[1].time_s);
  EXPECT_GT(r.stages[0].time_s, 0);
}

TEST(ZeroReport, JsonHasTheContractShape) {
  const auto j = nlohmann::json::parse(zero_report_json(zero_report(input(8))));
  for (const char* k : {"model", "params", "dp", "bytes_per_element", "stages"}) EXPECT_TRUE(j.contains(k)) << k;
  const auto& s = j["stages"][0];
  for (const char* k : {"stage", "collectives", "sent_bytes", "received_bytes", "volume_psi", "memory", "time_s"})
    EXPECT_TRUE(s.contains(k)) << k;
  for (const char* k : {"params", "grads", "optimizer", "total"}) EXPECT_TRUE(s["memory"].contains(k)) << k;
  EXPECT_EQ(s["collectives"][0]["kind"], "all-reduce");
  // N = 8: 2 · 7/8 = 1.75 Ψ.
  EXPECT_DOUBLE_EQ(s["volume_psi"].get<double>(), 1.75);
}

TEST(ZeroReport, MarkdownExplainsZeroOneAndCsvHasOneRowPerStage) {
  const auto r = zero_report(input(8));
  const std::string md = zero_report_markdown(r);
  EXPECT_NE(md.find("[^zero1]:"), std::string::npos);
  EXPECT_NE(md.find("| ZeRO stage |"), std::string::npos);
  const std::string csv = zero_report_csv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);  // header + 4 stages
}

TEST(ZeroReport, BadInputThrowsWithTheValue) {
  auto in = input(8);
  in.stages = {0, 4};
  EXPECT_THROW(zero_report(in), std::invalid_argument);
  in.stages = {1, 1};
  EXPECT_THROW(zero_report(in), std::invalid_argument);
  EXPECT_THROW(default_cluster("a100-typo", 8), std::invalid_argument);
  in = input(8);
  in.dp = 0;
  EXPECT_THROW(zero_report(in), std::invalid_argument);
}

}  // namespace
}  // namespace ptsim::sim
