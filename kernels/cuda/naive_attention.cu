// Naive attention — the baseline FlashAttention is measured against: the [Sq × Skv] scores
// are materialised in global memory (fp32), softmax writes P (bf16/fp16), and every
// product is a batched cuBLAS GEMM. Backward: dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − rowsum(P∘dP)),
// dQ = scale·dS·K, dK = scale·dSᵀ·Q (the same algebra as kernels/attention_cpu.cpp).
#include <stdexcept>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/flash_attention.cuh"
#include "kernels/cuda/naive_attention.cuh"

namespace ptsim::kernels::cuda {
namespace {

template <typename T>
constexpr cudaDataType_t cuda_type();
template <>
constexpr cudaDataType_t cuda_type<__half>() {
  return CUDA_R_16F;
}
template <>
constexpr cudaDataType_t cuda_type<__nv_bfloat16>() {
  return CUDA_R_16BF;
}

// Row-major C[M×N] = alpha·op(A)·op(B), batched with strides: column-major cuBLAS computes
// Cᵀ = op(B)ᵀ·op(A)ᵀ, so the operands are passed swapped.
void rm_gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const void* a, cudaDataType_t at,
             int lda, long long sa, const void* b, cudaDataType_t bt, int ldb, long long sb, void* c, cudaDataType_t ct,
             int ldc, long long sc, int batch) {
  const float beta = 0.0f;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                          &alpha, b, bt, ldb, sb, a, at, lda, sa, &beta, c, ct, ldc, sc, batch,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

__device__ float block_reduce(float v, bool is_max, float* shared) {
  for (int off = 16; off > 0; off /= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : (is_max ? -INFINITY : 0.0f);
  for (int off = 16; off > 0; off /= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  return v;
}

// One block per score row: P = softmax(scale·S + mask), lse = log Σ exp.
template <typename T>
__global__ void softmax_rows_kernel(const float* __restrict__ s, T* __restrict__ p, float* __restrict__ lse, int seq_q,
                                    int seq_kv, float scale, bool causal) {
  __shared__ float shared[32];
  const std::size_t row = blockIdx.x;
  const int i = static_cast<int>(row % seq_q);
  const int limit = causal ? i + (seq_kv - seq_q) : seq_kv - 1;  // last visible key
  const float* sr = s + row * seq_kv;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j <= limit && j < seq_kv; j += blockDim.x) mx = fmaxf(mx, sr[j] * scale);
  mx = block_reduce(mx, true, shared);
  float sum = 0;
  for (int j = threadIdx.x; j <= limit && j < seq_kv; j += blockDim.x) sum += __expf(sr[j] * scale - mx);
  sum = block_reduce(sum, false, shared);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < seq_kv; j += blockDim.x)
    p[row * seq_kv + j] = from_float<T>(j <= limit ? __expf(sr[j] * scale - mx) * inv : 0.0f);
  if (threadIdx.x == 0) lse[row] = mx + logf(sum);
}

// One block per row: dS = P∘(dP − Σ_j P·dP), written over P.
template <typename T>
__global__ void softmax_bwd_rows_kernel(T* __restrict__ p_ds, const float* __restrict__ dp, int seq_kv) {
  __shared__ float shared[32];
  const std::size_t row = blockIdx.x;
  T* pr = p_ds + row * seq_kv;
  const float* dpr = dp + row * seq_kv;
  float dot = 0;
  for (int j = threadIdx.x; j < seq_kv; j += blockDim.x) dot += to_float(pr[j]) * dpr[j];
  dot = block_reduce(dot, false, shared);
  __syncthreads();
  for (int j = threadIdx.x; j < seq_kv; j += blockDim.x) pr[j] = from_float<T>(to_float(pr[j]) * (dpr[j] - dot));
}

}  // namespace

std::size_t naive_attention_scratch_bytes(const AttentionDims& d, std::size_t elem) {
  // fp32 scores (reused for dP) + P in the input type.
  return static_cast<std::size_t>(d.batch_heads * d.seq_q * d.seq_kv) * (sizeof(float) + elem);
}

template <typename T>
void launch_naive_attention_fwd(cublasHandle_t h, const AttentionDims& d, const T* q, const T* k, const T* v, T* o,
                                float* lse, float* scores, T* probs, cudaStream_t stream) {
  d.validate();
  if (!q || !k || !v || !o || !lse || !scores || !probs) throw std::invalid_argument("naive attention: null pointer");
  CUBLAS_CHECK(cublasSetStream(h, stream));
  const int B = static_cast<int>(d.batch_heads), Sq = static_cast<int>(d.seq_q), Skv = static_cast<int>(d.seq_kv),
            D = static_cast<int>(d.head_dim);
  const long long sq = 1LL * Sq * D, skv = 1LL * Skv * D, ss = 1LL * Sq * Skv;
  // S[Sq×Skv] = Q·Kᵀ (fp32, materialised).
  rm_gemm(h, false, true, Sq, Skv, D, 1.0f, q, cuda_type<T>(), D, sq, k, cuda_type<T>(), D, skv, scores, CUDA_R_32F,
          Skv, ss, B);
  softmax_rows_kernel<T><<<static_cast<unsigned>(1LL * B * Sq), 256, 0, stream>>>(scores, probs, lse, Sq, Skv,
                                                                                  d.softmax_scale(), d.causal);
  CUDA_CHECK_LAUNCH();
  // O[Sq×D] = P·V.
  rm_gemm(h, false, false, Sq, D, Skv, 1.0f, probs, cuda_type<T>(), Skv, ss, v, cuda_type<T>(), D, skv, o,
          cuda_type<T>(), D, sq, B);
}

template <typename T>
void launch_naive_attention_bwd(cublasHandle_t h, const AttentionDims& d, const T* q, const T* k, const T* v,
                                const T* d_o, T* probs, float* scores, T* dq, T* dk, T* dv, cudaStream_t stream) {
  d.validate();
  if (!q || !k || !v || !d_o || !probs || !scores || !dq || !dk || !dv)
    throw std::invalid_argument("naive attention backward: null pointer");
  CUBLAS_CHECK(cublasSetStream(h, stream));
  const int B = static_cast<int>(d.batch_heads), Sq = static_cast<int>(d.seq_q), Skv = static_cast<int>(d.seq_kv),
            D = static_cast<int>(d.head_dim);
  const long long sq = 1LL * Sq * D, skv = 1LL * Skv * D, ss = 1LL * Sq * Skv;
  const auto t = cuda_type<T>();
  const float scale = d.softmax_scale();
  rm_gemm(h, true, false, Skv, D, Sq, 1.0f, probs, t, Skv, ss, d_o, t, D, sq, dv, t, D, skv, B);  // dV = Pᵀ·dO
  rm_gemm(h, false, true, Sq, Skv, D, 1.0f, d_o, t, D, sq, v, t, D, skv, scores, CUDA_R_32F, Skv, ss, B);  // dP = dO·Vᵀ
  softmax_bwd_rows_kernel<T><<<static_cast<unsigned>(1LL * B * Sq), 256, 0, stream>>>(probs, scores, Skv);
  CUDA_CHECK_LAUNCH();
  rm_gemm(h, false, false, Sq, D, Skv, scale, probs, t, Skv, ss, k, t, D, skv, dq, t, D, sq, B);  // dQ = scale·dS·K
  rm_gemm(h, true, false, Skv, D, Sq, scale, probs, t, Skv, ss, q, t, D, sq, dk, t, D, skv, B);  // dK = scale·dSᵀ·Q
}

template void launch_naive_attention_fwd<__half>(cublasHandle_t, const AttentionDims&, const __half*, const __half*,
                                                 const __half*, __half*, float*, float*, __half*, cudaStream_t);
template void launch_naive_attention_fwd<__nv_bfloat16>(cublasHandle_t, const AttentionDims&, const __nv_bfloat16*,
                                                        const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                                        float*, float*, __nv_bfloat16*, cudaStream_t);
template void launch_naive_attention_bwd<__half>(cublasHandle_t, const AttentionDims&, const __half*, const __half*,
                                                 const __half*, const __half*, __half*, float*, __half*, __half*,
                                                 __half*, cudaStream_t);
template void launch_naive_attention_bwd<__nv_bfloat16>(cublasHandle_t, const AttentionDims&, const __nv_bfloat16*,
                                                        const __nv_bfloat16*, const __nv_bfloat16*,
                                                        const __nv_bfloat16*, __nv_bfloat16*, float*, __nv_bfloat16*,
                                                        __nv_bfloat16*, __nv_bfloat16*, cudaStream_t);

}  // namespace ptsim::kernels::cuda
