// CUDA backend: cuBLASLt GEMMs, our FlashAttention-2 kernels, the naive baseline and cuDNN's
// fused attention (forward), a copy kernel, NCCL collectives over the local GPUs. Built only
// with CUDA, into the shared module libptsim_cuda.so that `ptsim calibrate` opens with dlopen
// (calibration/cuda_module.cpp): the ptsim executable itself links no CUDA library.
#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "calibration/backend.h"
#include "calibration/cuda_module.h"
#include "kernels/cuda_api.h"

namespace ptsim::calibration {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(TimingConfig timing, int devices)
      : cfg_{timing.warmup, timing.repeats, true, timing.warmup_seconds}, devices_(devices), props_(kernels::cuda::device_properties(0)) {
    if (!kernels::cuda::cudnn_attention_compiled_in())
      fmt::print(stderr, "cudnn attention: this ptsim was built without cuDNN; measuring flash and naive only\n");
  }

  std::string name() const override { return "cuda"; }
  hw::DeviceInfo device() const override {
    return {props_.name,           props_.sm_count,        props_.sm_clock_mhz, props_.memory_clock_mhz,
            props_.driver_version, props_.runtime_version, props_.nccl_version, props_.cudnn_version};
  }
  std::vector<std::string> gemm_dtypes() const override {
    std::vector<std::string> d{"bf16", "fp16", "fp32"};
    if (props_.cc_major >= 9) d.push_back("fp8");  // fp8 tensor cores from Hopper on
    return d;
  }
  std::vector<std::string> attention_dtypes() const override { return {"bf16", "fp16"}; }
  // cuDNN's fused attention (backend graph API) when this build links cuDNN. A scenario takes
  // from the table the implementation it names (naive, cudnn: hw/compute_cost.cpp).
  std::vector<std::string> attention_impls() const override {
    std::vector<std::string> impls{"flash", "naive"};
    if (kernels::cuda::cudnn_attention_compiled_in()) impls.push_back("cudnn");
    return impls;
  }
  // cuBLASLt's large-GEMM kernels use 128×128 (and larger) output tiles; the fit's wave term
  // assumes 128×128 — an approximation, the residual interpolation absorbs the rest.
  int gemm_tile() const override { return 128; }
  int parallel_units() const override { return props_.sm_count; }

  Seconds gemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype) override {
    return kernels::cuda::bench_gemm(m, n, k, dtype, cfg_).median_s;
  }
  std::optional<AttentionTiming> attention(const hw::AttentionShape& s, const std::string& dtype,
                                           const std::string& impl) override {
    const kernels::AttentionDims d{s.batch_heads, s.seq_q, s.seq_kv, s.head_dim, s.causal, 0};
    const auto fwd = kernels::cuda::bench_attention(d, dtype, impl, false, cfg_);
    if (!fwd) {
      // cuDNN's heuristics can reject a graph on a given GPU/cuDNN version; say why, then the
      // sweep skips the point.
      if (impl == "cudnn")
        fmt::print(stderr, "cudnn attention skipped: {}\n",
                   kernels::cuda::cudnn_attention_unsupported_reason(d, dtype));
      return std::nullopt;
    }
    AttentionTiming t{fwd->median_s, std::nullopt};
    // cudnn is forward only: bench_attention returns nullopt for its backward.
    if (const auto bwd = kernels::cuda::bench_attention(d, dtype, impl, true, cfg_)) t.bwd_seconds = bwd->median_s;
    return t;
  }
  Seconds membw(Bytes bytes) override { return kernels::cuda::bench_membw(bytes, cfg_).median_s; }
  int collective_ranks() const override { return devices_; }
  std::vector<std::string> collective_ops() const override {
    return {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv"};
  }
  Seconds collective(const std::string& op, int ranks, Bytes bytes) override {
    return kernels::cuda::bench_collective(op, ranks, bytes, cfg_).median_s;
  }
  FlopsPerSecond peak_flops(const std::string& dtype) const override { return props_.peak_dense(dtype); }
  BytesPerSecond peak_bandwidth() const override { return props_.peak_bandwidth; }

 private:
  kernels::cuda::BenchConfig cfg_;
  int devices_;
  kernels::cuda::DeviceProperties props_;
};

}  // namespace

}  // namespace ptsim::calibration

// The module's one entry point (calibration/cuda_module.h), looked up by name with dlsym.
extern "C" __attribute__((visibility("default"))) ptsim::calibration::Backend* ptsim_cuda_backend_create(
    int abi, const ptsim::calibration::TimingConfig* timing, char* why, std::size_t why_size) {
  using namespace ptsim::calibration;
  auto say = [&](const std::string& text) { std::snprintf(why, why_size, "%s", text.c_str()); };
  if (abi != kCudaModuleAbi) {
    say(fmt::format("module ABI {} but ptsim expects {}: rebuild ptsim and its CUDA module together", kCudaModuleAbi,
                    abi));
    return nullptr;
  }
  try {
    const int n = ptsim::kernels::cuda::device_count();
    if (n == 0) {
      say("no CUDA device found: cudaGetDeviceCount reports no usable device");
      return nullptr;
    }
    return new CudaBackend(*timing, n);
  } catch (const std::exception& e) {
    say(fmt::format("no CUDA device found: {}", e.what()));
    return nullptr;
  }
}
