#include "hw/gemm_model.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "hw/cost_table.h"

namespace ptsim::hw {
namespace {

GpuSpec a100() { return *find_gpu("a100-sxm-80gb"); }

TEST(GemmModel, OneTileMoreThanTheSmsTakesTwoWaves) {
  const GpuSpec g = a100();
  ASSERT_EQ(g.sm_count, 108);
  // 109 × 1 tiles of 128×128 on 108 SMs: two waves, the second with one busy SM.
  EXPECT_EQ(gemm_waves(128 * 109, 128, 1, 128, 128, 108).waves, 2);
  EXPECT_EQ(gemm_waves(128 * 108, 128, 1, 128, 128, 108).waves, 1);
  // Every tile choice needs twice the time of the full single wave (256×128 halves the
  // tiles but doubles each one's work), so one extra tile doubles the GEMM.
  const double one_wave = gemm_timing(g, 312e12, 0.8, 128 * 108, 128, 4096).seconds;
  const double two_waves = gemm_timing(g, 312e12, 0.8, 128 * 109, 128, 4096).seconds;
  EXPECT_DOUBLE_EQ(two_waves, 2 * one_wave);
  // By hand: ⌈4096/64⌉ + 3 = 67 slices of 2·128·128·64 FLOPs at 312e12·0.8/108 per SM.
  EXPECT_NEAR(one_wave, 67 * 2.0 * 128 * 128 * 64 / (312e12 * 0.8 / 108), 1e-15);
}

TEST(GemmModel, SmsHeldByACollectiveAddAWave) {
  // The NVIDIA forum case (developer forums thread 337991, H100): a GEMM of exactly 132
  // tiles fills one wave; with an all-gather's 24 CTAs resident it needs a second wave
  // and takes twice as long.
  const GpuSpec h100 = *find_gpu("h100-sxm");
  ASSERT_EQ(h100.sm_count, 132);
  const std::int64_t m = 128 * 12, n = 256 * 11, k = 8192;  // 132 tiles of 128×256 (or 256×128)
  const GemmTiming alone = gemm_timing(h100, 989e12, 0.7, m, n, k);
  const GemmTiming shared = gemm_timing(h100, 989e12, 0.7, m, n, k, 1, 24);
  EXPECT_EQ(alone.waves, 1);
  EXPECT_EQ(shared.waves, 2);
  EXPECT_DOUBLE_EQ(shared.seconds, 2 * alone.seconds);
  // A GEMM of many waves loses about the share of SMs held: 132/108 here.
  const double many = gemm_timing(h100, 989e12, 0.7, 16384, 16384, 8192, 1, 24).seconds /
                      gemm_timing(h100, 989e12, 0.7, 16384, 16384, 8192).seconds;
  EXPECT_NEAR(many, 132.0 / 108, 0.05);
  EXPECT_THROW(gemm_timing(h100, 989e12, 0.7, m, n, k, 1, 132), std::invalid_argument);
  EXPECT_THROW(gemm_timing(h100, 989e12, 0.7, m, n, k, 1, -1), std::invalid_argument);
}

TEST(GemmModel, GroupedGemmPacksTilesIntoSharedWaves) {
  const GpuSpec g = a100();
  // 4 experts × 27 tiles = 108 tiles: one wave, as fast as one expert alone.
  const double one = gemm_timing(g, 312e12, 0.8, 128 * 27, 128, 1024, 1).seconds;
  const double four = gemm_timing(g, 312e12, 0.8, 128 * 27, 128, 1024, 4).seconds;
  EXPECT_DOUBLE_EQ(four, one);
}

TEST(GemmModel, PicksTheFastestTile) {
  const GpuSpec g = a100();
  // 256×(128·108): with 128×128 tiles 216 tiles = 2 full waves; 256×128 tiles 108 = 1
  // wave of double work: a tie; 128×256 tiles: 2·54 = 108 tiles, also one wave.
  const GemmTiming t = gemm_timing(g, 312e12, 0.8, 256, 128 * 108, 8192);
  EXPECT_EQ(t.waves, 1);
  EXPECT_THROW(gemm_timing(g, 312e12, 0.8, 0, 1, 1), std::invalid_argument);
  EXPECT_THROW(gemm_timing(g, 0, 0.8, 1, 1, 1), std::invalid_argument);
}

TEST(GemmModel, ShortKPaysThePipelineFill) {
  const GpuSpec g = a100();
  auto rate = [&](std::int64_t k) {
    return 2.0 * 4096 * 4096 * k / gemm_timing(g, 312e12, 0.8, 4096, 4096, k).seconds;
  };
  // k = 64: 1 slice + 3 of fill -> a quarter of the long-k rate; k = 12288 loses 1.5 %.
  EXPECT_NEAR(rate(64) / rate(1 << 20), 0.25, 0.01);
  EXPECT_GT(rate(12288) / rate(1 << 20), 0.98);
  EXPECT_LT(rate(1536) / rate(12288), 0.92);
}

// gemm_timing remembers recent results per thread (the plan search times the same shapes
// for every candidate): a remembered answer must be the one computed afresh, whatever ran
// in between, and must not leak from one GPU, rate or SM reservation to another.
TEST(GemmModel, RememberedTimingsAreTheComputedOnes) {
  const GpuSpec a = a100();
  GpuSpec b = a;
  b.sm_count = 96;  // another GPU with the same shapes in flight
  GpuSpec c = a;
  c.gemm_tile_k = 32;
  struct Variant {
    const GpuSpec* gpu;
    double eff;
    int reserved;
  };
  // Keys that differ from the first in one field each.
  const std::vector<Variant> variants = {{&a, 0.8, 0}, {&b, 0.8, 0}, {&c, 0.8, 0}, {&a, 0.7, 0}, {&a, 0.8, 20}};
  auto timing = [](const Variant& v, std::int64_t m) {
    return gemm_timing(*v.gpu, 312e12, v.eff, m, 4096, 1024 + m % 7, 1, v.reserved).seconds;
  };
  constexpr std::int64_t kShapes = 3000;  // more than the table holds
  // Each variant alone, in order; then all of them interleaved, twice, in reverse order.
  std::vector<std::vector<double>> alone(variants.size());
  for (std::size_t v = 0; v < variants.size(); ++v)
    for (std::int64_t m = 1; m <= kShapes; ++m) alone[v].push_back(timing(variants[v], m));
  for (int round = 0; round < 2; ++round)
    for (std::int64_t m = kShapes; m >= 1; --m)
      for (std::size_t v = variants.size(); v-- > 0;)
        ASSERT_EQ(timing(variants[v], m), alone[v][static_cast<std::size_t>(m - 1)]) << "variant " << v << " m " << m;
  // The variants really answer differently (else a leak between keys would go unseen).
  for (std::size_t v = 1; v < variants.size(); ++v) EXPECT_NE(alone[v], alone[0]) << v;
  // By hand: m = 1, n = 4096 is one wave of every tile; k = 1025 + 1 % 7 - 1 = 1025 gives
  // ⌈1025/64⌉ + 3 = 20 slices of a 128×128 tile at 312e12·0.8/108 per SM.
  EXPECT_NEAR(alone[0][0], 20 * 2.0 * 128 * 128 * 64 / (312e12 * 0.8 / 108), 1e-15);
}

TEST(GemmModel, AttentionRateFactor) {
  const GpuSpec g = a100();
  // Forward, unmasked: half the long-sequence rate at L½ = 235, FA2's published low end
  // 0.50 of peak at 512 (gpus.yaml [fa2]).
  EXPECT_DOUBLE_EQ(attention_rate_factor(g, "fa2", 235, false, false), 0.5);
  EXPECT_LT(attention_rate_factor(g, "fa2", 512, false, false), attention_rate_factor(g, "fa2", 16384, false, false));
  EXPECT_NEAR(g.efficiency.attention * attention_rate_factor(g, "fa2", 512, false, false), 0.50, 0.005);
  // By hand: backward 0.873 · 4096 / (4096 + 405); causal 0.930 and 300 more on either L½.
  EXPECT_DOUBLE_EQ(attention_rate_factor(g, "fa2", 4096, true, false), 0.873 * 4096 / (4096 + 405.0));
  EXPECT_DOUBLE_EQ(attention_rate_factor(g, "fa2", 4096, true, true), 0.873 * 0.930 * 4096 / (4096 + 705.0));
  EXPECT_DOUBLE_EQ(attention_rate_factor(g, "fa2", 4096, false, true), 0.930 * 4096 / (4096 + 535.0));
  // Length not known: the long-sequence rate of the pass and mask.
  EXPECT_DOUBLE_EQ(attention_rate_factor(g, "fa2", 0, true, true), 0.873 * 0.930);
  EXPECT_THROW(attention_rate_factor(g, "fa2", -1, false, false), std::invalid_argument);
  EXPECT_THROW(attention_rate_factor(g, "fa3", 4096, false, false), std::invalid_argument);  // not an A100 kernel
}

// The H100 shapes reproduce FlashAttention-3's Fig. 5 / 6 bars (head dim 128, gpus.yaml
// [fa3]) within 5 % at 512 and 16k, for every kernel, pass and mask given there.
TEST(GemmModel, AttentionShapesMatchFlashAttention3Figures) {
  const GpuSpec h = *find_gpu("h100");
  const double peak = 989.4;
  struct Bar {
    const char* kernel;
    bool backward, causal;
    double at512, at16k;
  };
  for (const Bar& b :
       {Bar{"fa3", false, false, 467, 648}, Bar{"fa3", false, true, 292, 616}, Bar{"fa3", true, false, 316, 561},
        Bar{"cudnn", false, false, 497, 595}, Bar{"cudnn", false, true, 315, 539}, Bar{"cudnn", true, false, 305, 516},
        Bar{"fa2", false, false, 309, 370}, Bar{"fa2", false, true, 191, 335}, Bar{"fa2", true, false, 214, 322}}) {
    const double rate =
        std::string(b.kernel) == h.attention_kernel ? h.efficiency.attention : h.attention_kernels.at(b.kernel);
    for (const auto& [length, bar] : {std::pair{512, b.at512}, std::pair{16384, b.at16k}})
      EXPECT_NEAR(peak * rate * attention_rate_factor(h, b.kernel, length, b.backward, b.causal) / bar, 1.0, 0.05)
          << b.kernel << " backward " << b.backward << " causal " << b.causal << " L " << length;
  }
}

}  // namespace
}  // namespace ptsim::hw
