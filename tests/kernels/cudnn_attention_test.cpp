// cuDNN 9 fused attention (kernels/cuda/cudnn_attention.cu) against the CPU naive reference
// with |x − ref| ≤ atol + rtol·|ref| (tolerances in kernels/cuda/attention_api.cu: a few
// steps of the 16-bit type). GPU cases skip without a device or without cuDNN in the build.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda_api.h"
#include "ptsim/config.h"

namespace ptsim::kernels {
namespace {

struct CudnnCase {
  AttentionDims dims;
  const char* dtype;
};

class CudnnAttention : public ::testing::TestWithParam<CudnnCase> {};

TEST_P(CudnnAttention, ForwardMatchesCpuReference) {
#if PTSIM_HAVE_CUDA
  if (!cuda::cudnn_attention_compiled_in()) GTEST_SKIP() << "built without cuDNN";
  if (cuda::device_count() < 1) GTEST_SKIP() << "needs 1 CUDA device";
  // cuDNN documents its fused flash attention for sm_80 and newer only.
  if (cuda::device_properties(0).cc_major < 8) GTEST_SKIP() << "cuDNN fused attention needs sm_80+";
  const auto& c = GetParam();
  // On sm_80+ with cuDNN 9 every case here is inside the documented support (head dim ≤ 128
  // and a multiple of 8; bottom-right causal with sequences multiple of 64), so a graph that
  // cuDNN rejects is a failure of ours, not a skip.
  const std::string why = cuda::cudnn_attention_unsupported_reason(c.dims, c.dtype);
  ASSERT_TRUE(why.empty()) << why;
  const auto r = cuda::check_attention(c.dims, c.dtype, "cudnn", false);
  EXPECT_TRUE(r.ok()) << r.detail << ": max |err| " << r.max_abs_error;
  const auto t = cuda::bench_attention(c.dims, c.dtype, "cudnn", false, {1, 3, true});
  ASSERT_TRUE(t.has_value());
  EXPECT_GT(t->median_s, 0.0);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudnnAttention,
    ::testing::Values(CudnnCase{{2, 128, 128, 64, false, 0}, "bf16"}, CudnnCase{{2, 128, 128, 64, true, 0}, "bf16"},
                      CudnnCase{{2, 128, 128, 128, true, 0}, "fp16"}, CudnnCase{{1, 128, 256, 128, false, 0}, "fp16"},
                      // seq_q < seq_kv, causal: the mask is bottom-right aligned as in attention_cpu.h.
                      CudnnCase{{2, 64, 192, 64, true, 0}, "bf16"}),
    [](const ::testing::TestParamInfo<CudnnCase>& info) {
      const auto& c = info.param;
      return std::string(c.dtype) + "_bh" + std::to_string(c.dims.batch_heads) + "_q" + std::to_string(c.dims.seq_q) +
             "_kv" + std::to_string(c.dims.seq_kv) + "_d" + std::to_string(c.dims.head_dim) +
             (c.dims.causal ? "_causal" : "");
    });

TEST(CudnnAttentionApi, ForwardOnlyAndValidatedWithoutDevice) {
#if PTSIM_HAVE_CUDA
  // These paths return or throw before any device memory is touched, so they run in CI.
  const AttentionDims d{1, 64, 64, 64, false, 0};
  EXPECT_FALSE(cuda::bench_attention(d, "bf16", "cudnn", true, {}).has_value());
  EXPECT_THROW(cuda::check_attention(d, "bf16", "cudnn", true), std::invalid_argument);
  EXPECT_THROW(cuda::bench_attention(d, "fp32", "cudnn", false, {}), std::invalid_argument);
  EXPECT_THROW(cuda::bench_attention(d, "bf16", "cuDNN", false, {}), std::invalid_argument);
  EXPECT_THROW(cuda::cudnn_attention_unsupported_reason(d, "fp8"), std::invalid_argument);
  // Head dim 0 is rejected by AttentionDims::validate before cuDNN is asked.
  EXPECT_THROW(cuda::cudnn_attention_unsupported_reason({1, 64, 64, 0, false, 0}, "bf16"), std::invalid_argument);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace ptsim::kernels
