// GEMM through cuBLASLt: bf16 / fp16 (fp32 accumulate), fp8 e4m3 on Hopper (bf16 output),
// fp32 inputs on TF32 tensor cores. Layout "TN" (A transposed), which fp8 requires: in
// column-major terms D[m×n] = Aᵀ·B with A stored k×m and B stored k×n.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/fill_random.cuh"
#include "kernels/cuda/timing.cuh"
#include "kernels/cuda_api.h"

namespace ptsim::kernels::cuda {
namespace {

struct GemmTypes {
  cudaDataType_t ab, cd;
  cublasComputeType_t compute;
  std::size_t ab_size, cd_size;
};

GemmTypes gemm_types(const std::string& dtype) {
  if (dtype == "bf16") return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2};
  if (dtype == "fp16") return {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2};
  if (dtype == "fp32") return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4};
  if (dtype == "fp8") return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2};
  throw std::invalid_argument(str("gemm: unknown dtype '", dtype, "' (bf16, fp16, fp8, fp32)"));
}

// Owns the cuBLASLt handle, descriptors, the chosen algorithm and a workspace.
class LtGemm {
 public:
  LtGemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype) : m_(m), n_(n), k_(k) {
    if (m <= 0 || n <= 0 || k <= 0) throw std::invalid_argument(str("gemm: bad shape ", m, "x", n, "x", k));
    const auto t = gemm_types(dtype);
    if (dtype == "fp8") {
      int dev = 0, major = 0;
      CUDA_CHECK(cudaGetDevice(&dev));
      CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
      if (major < 9) throw std::invalid_argument("gemm: fp8 needs sm_90 or newer");
      if (m % 16 || n % 16 || k % 16) throw std::invalid_argument("gemm: fp8 needs m, n, k multiples of 16");
    }
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, t.compute, CUDA_R_32F));
    const cublasOperation_t trans = CUBLAS_OP_T, no = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &no, sizeof(no)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, t.ab, k, m, k));  // A: k×m, lda = k
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, t.ab, k, n, k));  // B: k×n, ldb = k
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_, t.cd, m, n, m));  // C, D: m×n, ldc = m
    A_ = DeviceBuffer<char>(static_cast<std::size_t>(m * k) * t.ab_size);
    B_ = DeviceBuffer<char>(static_cast<std::size_t>(k * n) * t.ab_size);
    C_ = DeviceBuffer<char>(static_cast<std::size_t>(m * n) * t.cd_size);
    ws_ = DeviceBuffer<char>(kWorkspace);
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t ws = kWorkspace;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    int found = 0;
    const auto st = cublasLtMatmulAlgoGetHeuristic(lt_, op_, a_, b_, c_, c_, pref, 1, &algo_, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(st);
    if (found == 0)
      throw std::runtime_error(str("gemm: cuBLASLt has no algorithm for ", m, "x", n, "x", k, " ", dtype));
  }
  ~LtGemm() {
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    if (op_) cublasLtMatmulDescDestroy(op_);
    if (lt_) cublasLtDestroy(lt_);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void run(cudaStream_t stream) {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(lt_, op_, &alpha, A_.get(), a_, B_.get(), b_, &beta, C_.get(), c_, C_.get(), c_,
                                &algo_.algo, ws_.get(), kWorkspace, stream));
  }
  char* a() { return A_.get(); }
  char* b() { return B_.get(); }
  char* c() { return C_.get(); }

 private:
  static constexpr std::size_t kWorkspace = 32u << 20;  // 32 MiB, cuBLAS's Hopper recommendation
  std::int64_t m_, n_, k_;
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulHeuristicResult_t algo_{};
  DeviceBuffer<char> A_{0}, B_{0}, C_{0}, ws_{0};
};

template <typename T>
T convert_from(float x);
template <>
__nv_bfloat16 convert_from<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}
template <>
__half convert_from<__half>(float x) {
  return __float2half(x);
}
template <>
float convert_from<float>(float x) {
  return x;
}
template <>
__nv_fp8_e4m3 convert_from<__nv_fp8_e4m3>(float x) {
  return __nv_fp8_e4m3(x);
}

template <typename T>
std::vector<float> upload_random(char* dst, std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  // Small integers in [-2, 2] are exact in every dtype, so only accumulation can differ.
  std::uniform_int_distribution<int> dist(-2, 2);
  std::vector<T> h(n);
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) {
    f[i] = static_cast<float>(dist(gen));
    h[i] = convert_from<T>(f[i]);
  }
  CUDA_CHECK(cudaMemcpy(dst, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  return f;
}

template <typename T>
std::vector<float> download(const char* src, std::size_t n) {
  std::vector<T> h(n);
  CUDA_CHECK(cudaMemcpy(h.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = static_cast<float>(h[i]);
  return f;
}

// Calls f(T{}) with T the element type of LtGemm's A and B for `dtype`.
template <typename F>
void with_operand_type(const std::string& dtype, F&& f) {
  if (dtype == "bf16")
    f(__nv_bfloat16{});
  else if (dtype == "fp16")
    f(__half{});
  else if (dtype == "fp32")
    f(float{});
  else
    f(__nv_fp8_e4m3{});
}

}  // namespace

TimingStats bench_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype,
                       const BenchConfig& cfg) {
  LtGemm g(m, n, k, dtype);
  // Random operands: a GEMM on zeros draws less power and runs faster (fill_random.cuh).
  const auto mk = static_cast<std::size_t>(m * k), kn = static_cast<std::size_t>(k * n);
  with_operand_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_random(reinterpret_cast<T*>(g.a()), mk, 1);
    fill_random(reinterpret_cast<T*>(g.b()), kn, 2);
  });
  return time_gpu([&] { g.run(nullptr); }, nullptr, cfg);
}

CheckResult check_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype) {
  LtGemm g(m, n, k, dtype);
  std::vector<float> a, b, c;
  const auto mk = static_cast<std::size_t>(m * k), kn = static_cast<std::size_t>(k * n),
             mn = static_cast<std::size_t>(m * n);
  with_operand_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    a = upload_random<T>(g.a(), mk, 1);
    b = upload_random<T>(g.b(), kn, 2);
  });
  g.run(nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  if (dtype == "fp16")
    c = download<__half>(g.c(), mn);
  else if (dtype == "fp32")
    c = download<float>(g.c(), mn);
  else
    c = download<__nv_bfloat16>(g.c(), mn);  // bf16, and fp8's bf16 output
  // Reference: D[i,j] (column-major, ld m) = Σ_l A[l,i]·B[l,j] with A k×m, B k×n column-major.
  CheckResult r;
  const double rtol = dtype == "fp32" ? 2e-3 : 1e-2, atol = 1e-2;
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) {
      double ref = 0;
      for (std::int64_t l = 0; l < k; ++l) ref += double(a[i * k + l]) * b[j * k + l];
      const double e = std::abs(c[j * m + i] - ref);
      r.max_abs_error = std::max(r.max_abs_error, e);
      r.max_violation = std::max(r.max_violation, e - (atol + rtol * std::abs(ref)));
    }
  r.detail = str("cuBLASLt ", dtype, " ", m, "x", n, "x", k);
  return r;
}

}  // namespace ptsim::kernels::cuda
