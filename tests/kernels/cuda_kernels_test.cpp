// GPU kernels against their CPU references (|x − ref| ≤ atol + rtol·|ref|, tolerances in
// kernels/cuda/*.cu). Every test skips when the build has no CUDA or no device is present.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda_api.h"
#include "ptsim/config.h"

namespace ptsim::kernels {
namespace {

#if PTSIM_HAVE_CUDA
#define PTSIM_REQUIRE_GPU(n)                                                              \
  do {                                                                                    \
    if (cuda::device_count() < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA device(s)"; \
  } while (0)
#else
#define PTSIM_REQUIRE_GPU(n) GTEST_SKIP() << "built without CUDA"
#endif

struct AttentionCase {
  AttentionDims dims;
  const char* dtype;
  const char* impl;
};

class CudaAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CudaAttention, ForwardAndBackwardMatchCpuReference) {
  PTSIM_REQUIRE_GPU(1);
#if PTSIM_HAVE_CUDA
  const auto& c = GetParam();
  const auto fwd = cuda::check_attention(c.dims, c.dtype, c.impl, false);
  EXPECT_TRUE(fwd.ok()) << fwd.detail << ": max |err| " << fwd.max_abs_error;
  const auto bwd = cuda::check_attention(c.dims, c.dtype, c.impl, true);
  EXPECT_TRUE(bwd.ok()) << bwd.detail << ": max |err| " << bwd.max_abs_error;
#endif
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttention,
                         ::testing::Values(AttentionCase{{2, 128, 128, 64, false, 0}, "bf16", "flash"},
                                           AttentionCase{{2, 128, 128, 64, true, 0}, "bf16", "flash"},
                                           AttentionCase{{2, 64, 192, 128, true, 0}, "fp16", "flash"},
                                           AttentionCase{{1, 128, 256, 128, false, 0}, "fp16", "flash"},
                                           AttentionCase{{2, 96, 80, 32, false, 0}, "bf16", "naive"},
                                           AttentionCase{{2, 64, 128, 64, true, 0}, "fp16", "naive"}),
                         // Readable test names, e.g. flash_bf16_bh2_q128_kv128_d64_causal.
                         [](const ::testing::TestParamInfo<AttentionCase>& info) {
                           const auto& c = info.param;
                           return std::string(c.impl) + "_" + c.dtype + "_bh" + std::to_string(c.dims.batch_heads) +
                                  "_q" + std::to_string(c.dims.seq_q) + "_kv" + std::to_string(c.dims.seq_kv) + "_d" +
                                  std::to_string(c.dims.head_dim) + (c.dims.causal ? "_causal" : "");
                         });

TEST(CudaFlashAttention, RejectsUnsupportedShapes) {
  PTSIM_REQUIRE_GPU(1);
#if PTSIM_HAVE_CUDA
  // Head dim 96 has no instantiation; sequence 100 is not a multiple of the 64-row tile.
  EXPECT_THROW(cuda::check_attention({1, 64, 64, 96, false, 0}, "bf16", "flash", false), std::invalid_argument);
  EXPECT_THROW(cuda::check_attention({1, 100, 100, 64, false, 0}, "bf16", "flash", false), std::invalid_argument);
  EXPECT_FALSE(cuda::bench_attention({1, 100, 100, 64, false, 0}, "bf16", "flash", false, {}).has_value());
#endif
}

TEST(CudaGemm, MatchesReference) {
  PTSIM_REQUIRE_GPU(1);
#if PTSIM_HAVE_CUDA
  for (const char* dtype : {"bf16", "fp16", "fp32"}) {
    const auto r = cuda::check_gemm(96, 80, 64, dtype);
    EXPECT_TRUE(r.ok()) << r.detail << ": max |err| " << r.max_abs_error;
  }
  if (cuda::device_properties(0).cc_major >= 9) {
    const auto r = cuda::check_gemm(128, 64, 64, "fp8");
    EXPECT_TRUE(r.ok()) << r.detail << ": max |err| " << r.max_abs_error;
  }
#endif
}

TEST(CudaMembw, CopyIsExactAndTimed) {
  PTSIM_REQUIRE_GPU(1);
#if PTSIM_HAVE_CUDA
  EXPECT_TRUE(cuda::check_membw(1 << 16).ok());
  const auto t = cuda::bench_membw(64.0 * (1 << 20), {1, 3, true});
  EXPECT_GT(t.median_s, 0.0);
  EXPECT_LE(t.min_s, t.median_s);
#endif
}

TEST(CudaDevice, PropertiesAreQueried) {
  PTSIM_REQUIRE_GPU(1);
#if PTSIM_HAVE_CUDA
  const auto p = cuda::device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.sm_count, 0);
  EXPECT_GT(p.peak_bandwidth, 0.0);
#endif
}

TEST(CudaCollectives, MatchExpectedValues) {
  PTSIM_REQUIRE_GPU(2);
#if PTSIM_HAVE_CUDA
  for (const char* op : {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"}) {
    const auto r = cuda::check_collective(op, 2);
    EXPECT_TRUE(r.ok()) << r.detail;
  }
  EXPECT_TRUE(cuda::check_collective("send-recv", 2).ok());
#endif
}

TEST(DeviceProperties, PeakFromSmCountAndClock) {
  // Needs no GPU: the roofline arithmetic. H100 SXM figures: 132 SMs at 1830 MHz × 4096
  // dense 16-bit FLOP/clk/SM = 989.43 TFLOP/s; FP8 doubles it, TF32 halves it.
  cuda::DeviceProperties p;
  p.cc_major = 9;
  p.sm_count = 132;
  p.sm_clock_mhz = 1830;
  EXPECT_NEAR(p.peak_dense("bf16"), 989.43e12, 0.01e12);
  EXPECT_NEAR(p.peak_dense("fp8"), 2 * 989.43e12, 0.02e12);
  EXPECT_NEAR(p.peak_dense("fp32"), 989.43e12 / 2, 0.01e12);
  // A100: 108 SMs × 1410 MHz × 2048 = 311.9 TFLOP/s, no FP8 path.
  p.cc_major = 8;
  p.sm_count = 108;
  p.sm_clock_mhz = 1410;
  EXPECT_NEAR(p.peak_dense("fp16"), 311.87e12, 0.01e12);
  EXPECT_EQ(p.peak_dense("fp8"), 0.0);
}

}  // namespace
}  // namespace ptsim::kernels
