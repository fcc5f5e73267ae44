// bench_attention / check_attention: buffers, dispatch on dtype and implementation, timing
// with kernels/cuda/timing.cuh, correctness against kernels/attention_cpu.h.
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/cudnn_attention.cuh"
#include "kernels/cuda/fill_random.cuh"
#include "kernels/cuda/flash_attention.cuh"
#include "kernels/cuda/naive_attention.cuh"
#include "kernels/cuda/timing.cuh"
#include "kernels/cuda_api.h"

namespace ptsim::kernels::cuda {
namespace {

class CublasHandle {
 public:
  CublasHandle() { CUBLAS_CHECK(cublasCreate(&h_)); }
  ~CublasHandle() { cublasDestroy(h_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

template <typename T>
struct AttentionBuffers {
  explicit AttentionBuffers(const AttentionDims& d)
      : q(d.q_elements()),
        k(d.kv_elements()),
        v(d.kv_elements()),
        o(d.q_elements()),
        d_o(d.q_elements()),
        dq(d.q_elements()),
        dk(d.kv_elements()),
        dv(d.kv_elements()),
        lse(d.batch_heads * d.seq_q) {}
  DeviceBuffer<T> q, k, v, o, d_o, dq, dk, dv;
  DeviceBuffer<float> lse;
};

bool flash_supports(const AttentionDims& d) {
  try {
    check_flash_preconditions(d);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

bool naive_fits(const AttentionDims& d, std::size_t elem) {
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  // Leave room for everything else: the score matrix may take a quarter of free memory.
  return naive_attention_scratch_bytes(d, elem) <= free / 4;
}

// Runs forward (and backward) of `impl` once on buffers `b`; `scratch` as the impl needs.
template <typename T>
class Runner {
 public:
  // impl "cudnn" throws CudnnUnsupported when cuDNN cannot build the graph for `d`.
  Runner(const AttentionDims& d, const std::string& impl, AttentionBuffers<T>& b)
      : d_(d), flash_(impl == "flash"), b_(b) {
    if (impl == "cudnn")
      cudnn_ = std::make_unique<CudnnAttentionFwd>(d, std::is_same_v<T, __nv_bfloat16>, b.q.get(), b.k.get(), b.v.get(),
                                                   b.o.get(), b.lse.get());
    else if (flash_)
      workspace_ = DeviceBuffer<char>(flash_attention_bwd_workspace_bytes(d));
    else {
      scores_ = DeviceBuffer<float>(static_cast<std::size_t>(d.batch_heads * d.seq_q * d.seq_kv));
      probs_ = DeviceBuffer<T>(static_cast<std::size_t>(d.batch_heads * d.seq_q * d.seq_kv));
    }
  }
  void forward() {
    if (cudnn_)
      cudnn_->run();
    else if (flash_)
      launch_flash_attention_fwd<T>(d_, b_.q.get(), b_.k.get(), b_.v.get(), b_.o.get(), b_.lse.get(), nullptr);
    else
      launch_naive_attention_fwd<T>(cublas_.get(), d_, b_.q.get(), b_.k.get(), b_.v.get(), b_.o.get(), b_.lse.get(),
                                    scores_.get(), probs_.get(), nullptr);
  }
  void backward() {
    if (cudnn_) throw std::invalid_argument("attention: the cudnn implementation is forward only");
    if (flash_)
      launch_flash_attention_bwd<T>(d_, b_.q.get(), b_.k.get(), b_.v.get(), b_.o.get(), b_.lse.get(), b_.d_o.get(),
                                    b_.dq.get(), b_.dk.get(), b_.dv.get(), workspace_.get(), nullptr);
    else
      launch_naive_attention_bwd<T>(cublas_.get(), d_, b_.q.get(), b_.k.get(), b_.v.get(), b_.d_o.get(), probs_.get(),
                                    scores_.get(), b_.dq.get(), b_.dk.get(), b_.dv.get(), nullptr);
  }

 private:
  AttentionDims d_;
  bool flash_;
  AttentionBuffers<T>& b_;
  CublasHandle cublas_;
  DeviceBuffer<char> workspace_{0};
  DeviceBuffer<float> scores_{0};
  DeviceBuffer<T> probs_{0};
  std::unique_ptr<CudnnAttentionFwd> cudnn_;
};

template <typename T>
std::optional<TimingStats> bench(const AttentionDims& d, const std::string& impl, bool backward,
                                 const BenchConfig& cfg) {
  if (impl == "flash" && !flash_supports(d)) return std::nullopt;
  if (impl == "naive" && !naive_fits(d, sizeof(T))) return std::nullopt;
  if (impl == "cudnn" && backward) return std::nullopt;  // forward only (see cuda_api.h)
  AttentionBuffers<T> b(d);
  // Random inputs in [-1, 1] (scores stay small, the softmax finite); zeros would draw less
  // power and time faster than training data (fill_random.cuh).
  std::uint32_t seed = 11;
  for (auto* buf : {&b.q, &b.k, &b.v, &b.d_o}) fill_random(buf->get(), buf->size(), seed++);
  std::optional<Runner<T>> runner;
  try {
    runner.emplace(d, impl, b);
  } catch (const CudnnUnsupported&) {
    return std::nullopt;  // cudnn_attention_unsupported_reason() says why
  }
  Runner<T>& run = *runner;
  if (!backward) return time_gpu([&] { run.forward(); }, nullptr, cfg);
  run.forward();  // lse (flash) or P (naive) for the backward
  // Naive backward overwrites P with dS; re-running it keeps the same amount of work.
  return time_gpu([&] { run.backward(); }, nullptr, cfg);
}

template <typename T>
std::vector<float> upload(DeviceBuffer<T>& dst, std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<T> h(n);
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) {
    h[i] = static_cast<T>(dist(gen));
    f[i] = static_cast<float>(h[i]);  // the reference sees exactly the rounded inputs
  }
  CUDA_CHECK(cudaMemcpy(dst.get(), h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  return f;
}

template <typename T>
std::vector<float> download(const DeviceBuffer<T>& src) {
  std::vector<T> h(src.size());
  CUDA_CHECK(cudaMemcpy(h.data(), src.get(), h.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return std::vector<float>(h.begin(), h.end());
}

void compare(CheckResult& r, const std::vector<float>& x, const std::vector<float>& ref, double atol, double rtol) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double e = std::abs(double(x[i]) - ref[i]);
    r.max_abs_error = std::max(r.max_abs_error, e);
    r.max_violation = std::max(r.max_violation, e - (atol + rtol * std::abs(double(ref[i]))));
  }
}

template <typename T>
CheckResult check(const AttentionDims& d, const std::string& impl, bool backward) {
  if (impl == "flash") check_flash_preconditions(d);
  if (impl == "cudnn" && backward) throw std::invalid_argument("attention: the cudnn implementation is forward only");
  AttentionBuffers<T> b(d);
  const auto q = upload(b.q, b.q.size(), 1), k = upload(b.k, b.k.size(), 2), v = upload(b.v, b.v.size(), 3),
             d_o = upload(b.d_o, b.d_o.size(), 4);
  Runner<T> run(d, impl, b);
  run.forward();
  std::vector<float> o_ref(q.size()), lse_ref(b.lse.size());
  naive_attention_forward(d, q, k, v, o_ref, lse_ref);
  CheckResult r;
  // bf16 keeps 8 mantissa bits (relative step 2^-8 ≈ 0.4%), fp16 11; P is rounded to the input
  // type before P·V, so tolerances are a few steps of the type.
  const bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  const double tol = (bf16 ? 3e-2 : 1e-2) * (backward ? 2 : 1);
  if (!backward) {
    CUDA_CHECK(cudaDeviceSynchronize());
    compare(r, download(b.o), o_ref, tol, tol);
    r.detail = str(impl, " forward bh=", d.batch_heads, " seq=", d.seq_q, "x", d.seq_kv, " d=", d.head_dim,
                   d.causal ? " causal" : "");
    return r;
  }
  run.backward();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  naive_attention_backward(d, q, k, v, o_ref, d_o, dq, dk, dv);
  compare(r, download(b.dq), dq, tol, tol);
  compare(r, download(b.dk), dk, tol, tol);
  compare(r, download(b.dv), dv, tol, tol);
  r.detail = str(impl, " backward bh=", d.batch_heads, " seq=", d.seq_q, "x", d.seq_kv, " d=", d.head_dim,
                 d.causal ? " causal" : "");
  return r;
}

void check_impl(const std::string& impl) {
  if (impl != "flash" && impl != "naive" && impl != "cudnn")
    throw std::invalid_argument(str("attention: unknown implementation '", impl, "' (flash, naive, cudnn)"));
}

template <typename T>
std::string cudnn_reason(const AttentionDims& d) {
  AttentionBuffers<T> b(d);
  try {
    CudnnAttentionFwd plan(d, std::is_same_v<T, __nv_bfloat16>, b.q.get(), b.k.get(), b.v.get(), b.o.get(),
                           b.lse.get());
  } catch (const CudnnUnsupported& ex) {
    return ex.what();
  }
  return {};
}

}  // namespace

std::optional<TimingStats> bench_attention(const AttentionDims& dims, const std::string& dtype, const std::string& impl,
                                           bool backward, const BenchConfig& cfg) {
  check_impl(impl);
  dims.validate();
  if (dtype == "bf16") return bench<__nv_bfloat16>(dims, impl, backward, cfg);
  if (dtype == "fp16") return bench<__half>(dims, impl, backward, cfg);
  throw std::invalid_argument(str("attention: unsupported dtype '", dtype, "' (bf16, fp16)"));
}

std::string cudnn_attention_unsupported_reason(const AttentionDims& dims, const std::string& dtype) {
  dims.validate();
  if (dtype == "bf16") return cudnn_reason<__nv_bfloat16>(dims);
  if (dtype == "fp16") return cudnn_reason<__half>(dims);
  throw std::invalid_argument(str("attention: unsupported dtype '", dtype, "' (bf16, fp16)"));
}

bool cudnn_attention_compiled_in() noexcept { return cudnn_compiled_in(); }

CheckResult check_attention(const AttentionDims& dims, const std::string& dtype, const std::string& impl,
                            bool backward) {
  check_impl(impl);
  dims.validate();
  if (dtype == "bf16") return check<__nv_bfloat16>(dims, impl, backward);
  if (dtype == "fp16") return check<__half>(dims, impl, backward);
  throw std::invalid_argument(str("attention: unsupported dtype '", dtype, "' (bf16, fp16)"));
}

}  // namespace ptsim::kernels::cuda
