#include "hw/cost_table.h"
#include "hw/errors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace ptsim::hw {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("ptsim_cost_table_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(WaveEfficiency, LastWavePartlyIdle) {
  // 256×256 with 128×128 tiles = 4 tiles on 3 SMs: 2 waves, 6 slots, 4 used -> 4/6.
  EXPECT_NEAR(wave_efficiency(256, 256, 128, 128, 3), 4.0 / 6.0, 1e-15);
  // 1152×1024: ⌈1152/128⌉·⌈1024/128⌉ = 9·8 = 72 tiles on 64 SMs: 2 waves -> 72/128 = 0.5625.
  EXPECT_DOUBLE_EQ(wave_efficiency(1152, 1024, 128, 128, 64), 0.5625);
  EXPECT_DOUBLE_EQ(wave_efficiency(1024, 1024, 128, 128, 64), 1.0);
  EXPECT_THROW(wave_efficiency(0, 1, 128, 128, 1), std::invalid_argument);
}

TEST(AttentionFlops, FlashAttention2Convention) {
  // 4·BH·Sq·Skv·d = 4·2·128·256·64 = 16,777,216; causal halves; backward is 2.5×.
  AttentionShape s{2, 128, 256, 64, false};
  EXPECT_DOUBLE_EQ(attention_flops(s, false), 16777216.0);
  EXPECT_DOUBLE_EQ(attention_flops(s, true), 2.5 * 16777216.0);
  s.causal = true;
  EXPECT_DOUBLE_EQ(attention_flops(s, false), 8388608.0);
}

CostTable gemm_table() {
  CostTable t;
  t.name = "test";
  // Fit: 1 ps per FLOP, no overhead or byte term, 64 SMs, 128×128 tiles.
  t.gemm_fits.push_back({"bf16", 0.0, 1e-12, 0.0, 128, 128, 64});
  const double f1 = 2.0 * 1024 * 1024 * 1024 * 1e-12;
  const double f2 = 2.0 * 2048.0 * 2048 * 2048 * 1e-12;
  t.gemm.push_back({1024, 1024, 1024, "bf16", 2.0 * f1});  // measured twice the fit
  t.gemm.push_back({2048, 2048, 2048, "bf16", f2});        // measured equal to the fit
  return t;
}

TEST(CostTableGemm, MeasuredPointsAreReproduced) {
  const auto t = gemm_table();
  // 2·1024³·1e-12 s = 2.147483648e-3 s, measured ×2.
  EXPECT_NEAR(*t.gemm_seconds(1024, 1024, 1024, "bf16"), 2 * 2.147483648e-3, 1e-15);
  EXPECT_NEAR(*t.gemm_seconds(2048, 2048, 2048, "bf16"), 17.179869184e-3, 1e-15);
}

TEST(CostTableGemm, InterpolatesResidualInLogSpaceInsideRange) {
  const auto t = gemm_table();
  // Query (1024, 1024, 2048): log distances ln2 to p1 and √2·ln2 to p2, so IDW weights are
  // 1/ln²2 and 1/(2 ln²2): residual = (2·ln2 + 1·0)/3 -> factor 2^(2/3).
  // Fit at the query: 2·1024·1024·2048·1e-12 = 4.294967296e-3 s (one full wave).
  EXPECT_NEAR(*t.gemm_seconds(1024, 1024, 2048, "bf16"), 4.294967296e-3 * std::pow(2.0, 2.0 / 3.0), 1e-12);
}

TEST(CostTableGemm, UsesFitOutsideRangeAndNulloptWithoutData) {
  const auto t = gemm_table();
  // Outside the box: the fit, 2·4096³·1e-12 = 0.137438953472 s.
  EXPECT_NEAR(*t.gemm_seconds(4096, 4096, 4096, "bf16"), 0.137438953472, 1e-12);
  // Wave quantisation: 1152×1024 runs 72 tiles on 64 SMs at efficiency 0.5625, so the
  // fit charges 2·1152·1024·4096·1e-12 / 0.5625 = 17.179869184e-3 s (k = 4096 is outside).
  EXPECT_NEAR(*t.gemm_seconds(1152, 1024, 4096, "bf16"), 2.0 * 1152 * 1024 * 4096 * 1e-12 / 0.5625, 1e-12);
  EXPECT_FALSE(t.gemm_seconds(1024, 1024, 1024, "fp8").has_value());
  EXPECT_THROW(t.gemm_seconds(0, 1, 1, "bf16"), std::invalid_argument);
}

TEST(CostTableMembw, LogLogInterpolationThenFit) {
  CostTable t;
  t.membw = {{1e3, 2e-6}, {1e5, 2e-5}};
  // Between the points log t is linear in log bytes with slope ln10/ln100 = 1/2:
  // t(1e4) = 2e-6 · 10^0.5 = 6.32455532e-6 s.
  EXPECT_NEAR(*t.membw_seconds(1e4), 2e-6 * std::sqrt(10.0), 1e-15);
  EXPECT_FALSE(t.membw_seconds(1e7).has_value());  // no fit: outside the range is unknown
  t.membw_fit = MembwFit{1e-6, 1e9};
  // Fit: 1 us + 1e7 B / 1e9 B/s = 1e-6 + 1e-2 = 1.0001e-2 s.
  EXPECT_NEAR(*t.membw_seconds(1e7), 1.0001e-2, 1e-15);
  EXPECT_NEAR(*t.membw_seconds(1e3), 2e-6, 1e-18);  // inside: the measurement, not the fit
}

TEST(CostTableCollective, FastestAlgorithmAndFitOutsideRange) {
  CostTable t;
  t.collectives = {{"all-reduce", 8, "ring", 1e6, 40e-6},
                   {"all-reduce", 8, "ring", 1e8, 1e-3},
                   {"all-reduce", 8, "tree", 1e6, 30e-6},
                   {"all-reduce", 8, "tree", 1e8, 2e-3}};
  t.collective_fits = {{"all-reduce", 8, "ring", 10e-6, 1e-11}, {"all-reduce", 8, "tree", 5e-6, 2e-11}};
  // At 1 MB tree (30 us) beats ring (40 us); at 100 MB ring (1 ms) beats tree (2 ms).
  EXPECT_NEAR(*t.collective_seconds("all-reduce", 8, 1e6), 30e-6, 1e-18);
  EXPECT_NEAR(*t.collective_seconds("all-reduce", 8, 1e8), 1e-3, 1e-15);
  // 1 GB is outside both ranges: ring fit 10 us + 1e9·1e-11 = 10.01 ms, tree 5 us + 20 ms.
  EXPECT_NEAR(*t.collective_seconds("all-reduce", 8, 1e9), 10.01e-3, 1e-12);
  EXPECT_FALSE(t.collective_seconds("all-reduce", 16, 1e6).has_value());
  EXPECT_FALSE(t.collective_seconds("all-gather", 8, 1e6).has_value());
}

TEST(CostTableAttention, KeepsFastestImplementationPerShape) {
  CostTable t;
  const AttentionShape small{8, 512, 512, 64, true}, large{8, 4096, 4096, 64, true};
  // naive wins at the small shape, flash at the large one; naive has no backward.
  t.attention.push_back({small, "bf16", "flash", 2e-4, 5e-4});
  t.attention.push_back({large, "bf16", "flash", 4e-3, 1e-2});
  t.attention.push_back({small, "bf16", "naive", 1e-4, std::nullopt});
  t.attention.push_back({large, "bf16", "naive", 9e-3, std::nullopt});
  auto e = t.fastest_attention(small, "bf16", false);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->impl, "naive");
  EXPECT_NEAR(e->seconds, 1e-4, 1e-16);
  e = t.fastest_attention(large, "bf16", false);
  EXPECT_EQ(e->impl, "flash");
  EXPECT_NEAR(e->seconds, 4e-3, 1e-15);
  // Backward: only flash has it.
  EXPECT_NEAR(*t.attention_seconds(small, "bf16", true), 5e-4, 1e-15);
  // Head dim 128 was never measured and there is no fit: nothing to say.
  EXPECT_FALSE(t.attention_seconds({8, 512, 512, 128, true}, "bf16", false).has_value());
  // With a fit, head dim 128 uses it: 1e-5 + 1e-13·(4·8·512·512·128/2) = 1e-5 + 5.36870912e-5.
  t.attention_fits.push_back({"bf16", "flash", 1e-5, 1e-13, std::nullopt, std::nullopt});
  EXPECT_NEAR(*t.attention_seconds({8, 512, 512, 128, true}, "bf16", false), 1e-5 + 5.36870912e-5, 1e-15);
  EXPECT_FALSE(t.attention_seconds({8, 512, 512, 128, true}, "bf16", true).has_value());
}

TEST(CostTableIo, RoundTripsExactly) {
  auto t = gemm_table();
  t.backend = "cpu";
  t.date = "2025-01-01T00:00:00Z";
  t.device = {"Test CPU", 2, 0, 0, "", "", "", ""};
  t.attention.push_back({{8, 512, 1024, 64, true}, "fp32", "cpu-flash", 1.25e-3, 3.5e-3});
  t.attention.push_back({{8, 512, 1024, 64, false}, "fp32", "naive", 1.5e-3, std::nullopt});
  t.attention_fits.push_back({"fp32", "cpu-flash", 1e-6, 3e-11, 2e-6, 7e-11});
  t.membw = {{1e6, 1e-4}};
  t.membw_fit = MembwFit{1e-7, 1.0 / 3.0 * 1e10};
  t.collectives = {{"all-gather", 4, "nccl", 1024, 1.2345678901234567e-5}};
  t.collective_fits = {{"all-gather", 4, "nccl", 1e-5, 1e-10}};
  const auto dir = fresh_dir("roundtrip");
  const auto path = (dir / "t.yaml").string();
  save_cost_table(t, path);
  const auto u = load_cost_table(path);
  EXPECT_EQ(u.name, "test");
  EXPECT_EQ(u.device.name, "Test CPU");
  ASSERT_EQ(u.gemm.size(), 2u);
  EXPECT_EQ(u.gemm[1].m, 2048);
  EXPECT_EQ(u.gemm[1].seconds, t.gemm[1].seconds);
  ASSERT_EQ(u.attention.size(), 2u);
  EXPECT_EQ(u.attention[0].shape.seq_kv, 1024);
  EXPECT_TRUE(u.attention[0].shape.causal);
  EXPECT_EQ(*u.attention[0].bwd_seconds, 3.5e-3);
  EXPECT_FALSE(u.attention[1].bwd_seconds.has_value());
  EXPECT_EQ(*u.attention_fits[0].bwd_seconds_per_flop, 7e-11);
  EXPECT_EQ(u.membw_fit->bandwidth_bytes_per_s, t.membw_fit->bandwidth_bytes_per_s);
  EXPECT_EQ(u.collectives[0].seconds, 1.2345678901234567e-5);
  EXPECT_EQ(u.collective_fits[0].beta_s_per_byte, 1e-10);
  EXPECT_EQ(cost_table_to_yaml(u), cost_table_to_yaml(t));
  // Only the table itself is left in the directory: the temporary was renamed away.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(CostTableIo, TableWrittenBeforeIsWrittenAgainByteForByte) {
  // Written by `ptsim calibrate` (the tests run in the source root): read and written
  // again it is the same text, and so is a second round.
  const std::string path = "calibration/tables/cpu-example.yaml";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string first = cost_table_to_yaml(parse_cost_table(written, path));
  EXPECT_EQ(first, written);
  EXPECT_EQ(cost_table_to_yaml(parse_cost_table(first, path)), first);
}

TEST(CostTableIo, FailedSaveLeavesNothing) {
  const auto dir = fresh_dir("failed");
  const auto path = (dir / "missing-subdir" / "t.yaml").string();
  EXPECT_THROW(save_cost_table(gemm_table(), path), std::runtime_error);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 0);
}

void expect_error(const std::string& yaml, const std::string& needle) {
  try {
    parse_cost_table(yaml, "bad.yaml");
    ADD_FAILURE() << "no error for: " << yaml;
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.yaml"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

TEST(CostTableIo, BadInputNamesFileAndKey) {
  expect_error("format: ptsim-cost-table/1\nname: x\nbogus: 1\n", "'bogus'");
  expect_error("name: x\n", "'format'");
  expect_error("format: ptsim-cost-table/1\nname: x\ngemm: {points: [{m: 1, n: 1, k: 1, dtype: bf16, seconds: -1}]}\n",
               "gemm.points[0].seconds");
  expect_error("format: ptsim-cost-table/1\nname: x\ngemm: {points: [{m: 1, n: 1, k: 1, dtype: int4, seconds: 1}]}\n",
               "gemm.points[0].dtype");
  expect_error("format: ptsim-cost-table/1\nname: x\nmembw: {points: [{bytes: 1}]}\n", "membw.points[0].seconds");
  expect_error("format: [unclosed\n", "not valid YAML");
  EXPECT_THROW(load_cost_table("/nonexistent/table.yaml"), ptsim::InputError);
}

}  // namespace
}  // namespace ptsim::hw
