// FlashAttention-2 backward (Dao 2023, Algorithm 2) on tensor cores via WMMA.
// Pre-pass: delta_i = rowsum(dO_i ∘ O_i). Main pass: one block = 64 key/value rows of one
// (batch, head); dK and dV stay in registers (WMMA accumulators, warp w owns kv rows
// 16w..16w+15). For every query tile the block recomputes S = Q·Kᵀ and P = exp(scale·S − lse)
// — no probabilities were stored by the forward — then dP = dO·Vᵀ, dS = P∘(dP − delta),
// dV += Pᵀ·dO, dK += dSᵀ·Q, and dQ += dS·K into an fp32 accumulator with atomics. A last
// pass scales dQ and converts it to bf16/fp16.
#include <stdexcept>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/flash_attention.cuh"

namespace ptsim::kernels::cuda {
namespace {

namespace wmma = nvcuda::wmma;

template <typename T, int D>
struct BwdLayout {
  static constexpr int kLdT = D + 8;
  static constexpr int kLdS = kFlashBc + 4;
  static constexpr int kLdP = kFlashBc + 8;
  static constexpr std::size_t kK = 0;                                        // [Bc × D]  T
  static constexpr std::size_t kV = kK + sizeof(T) * kFlashBc * kLdT;         // [Bc × D]  T
  static constexpr std::size_t kQ = kV + sizeof(T) * kFlashBc * kLdT;         // [Br × D]  T
  static constexpr std::size_t kdO = kQ + sizeof(T) * kFlashBr * kLdT;        // [Br × D]  T
  static constexpr std::size_t kS = kdO + sizeof(T) * kFlashBr * kLdT;        // [Br × Bc] fp32 scores
  static constexpr std::size_t kdP = kS + sizeof(float) * kFlashBr * kLdS;    // [Br × Bc] fp32 dP
  static constexpr std::size_t kP = kdP + sizeof(float) * kFlashBr * kLdS;    // [Br × Bc] T probabilities
  static constexpr std::size_t kdS = kP + sizeof(T) * kFlashBr * kLdP;        // [Br × Bc] T score gradients
  static constexpr std::size_t kScratch = kdS + sizeof(T) * kFlashBr * kLdP;  // [4 warps × 16 × 16] fp32
  static constexpr std::size_t kLse = kScratch + sizeof(float) * 4 * 256;     // [Br]
  static constexpr std::size_t kDelta = kLse + sizeof(float) * kFlashBr;      // [Br]
  static constexpr std::size_t kBytes = kDelta + sizeof(float) * kFlashBr;
  static_assert(kV % 32 == 0 && kQ % 32 == 0 && kdO % 32 == 0 && kS % 32 == 0 && kdP % 32 == 0 && kP % 32 == 0 &&
                kdS % 32 == 0 && kScratch % 32 == 0);
  // 127.5 KiB at D = 128: within sm_80's 163 KiB and sm_90's 227 KiB opt-in limits.
  static_assert(kBytes <= 163 * 1024);
};

// delta[bh·Sq + i] = Σ_c dO[i,c]·O[i,c]; one warp per row.
template <typename T, int D>
__global__ void flash_bwd_delta_kernel(const T* __restrict__ o, const T* __restrict__ d_o, float* __restrict__ delta,
                                       std::size_t rows) {
  const std::size_t row = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float s = 0;
  for (int c = lane; c < D; c += 32) s += to_float(o[row * D + c]) * to_float(d_o[row * D + c]);
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) delta[row] = s;
}

template <typename T>
__global__ void flash_bwd_convert_dq_kernel(const float* __restrict__ acc, T* __restrict__ dq, float scale,
                                            std::size_t n) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dq[i] = from_float<T>(acc[i] * scale);
}

template <typename T, int D>
__global__ void __launch_bounds__(kFlashThreads)
    flash_bwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                     const float* __restrict__ lse, const float* __restrict__ delta, const T* __restrict__ d_o,
                     float* __restrict__ dq_acc, T* __restrict__ dk, T* __restrict__ dv, int seq_q, int seq_kv,
                     float scale, bool causal) {
  using L = BwdLayout<T, D>;
  using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
  using FragAT = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::col_major>;
  using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
  using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;
  using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem + L::kK);
  T* sV = reinterpret_cast<T*>(smem + L::kV);
  T* sQ = reinterpret_cast<T*>(smem + L::kQ);
  T* sdO = reinterpret_cast<T*>(smem + L::kdO);
  float* sS = reinterpret_cast<float*>(smem + L::kS);
  float* sdP = reinterpret_cast<float*>(smem + L::kdP);
  T* sP = reinterpret_cast<T*>(smem + L::kP);
  T* sdS = reinterpret_cast<T*>(smem + L::kdS);
  float* sScratch = reinterpret_cast<float*>(smem + L::kScratch);
  float* sLse = reinterpret_cast<float*>(smem + L::kLse);
  float* sDelta = reinterpret_cast<float*>(smem + L::kDelta);

  const int bh = blockIdx.y;
  const int j0 = blockIdx.x * kFlashBc;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int w0 = warp * 16;  // this warp's 16 rows: query rows for S/dP/dQ, kv rows for dK/dV
  const int offset = seq_kv - seq_q;
  float* scratch = sScratch + warp * 256;

  load_tile<T, D>(sK, L::kLdT, k + (static_cast<std::size_t>(bh) * seq_kv + j0) * D, kFlashBc);
  load_tile<T, D>(sV, L::kLdT, v + (static_cast<std::size_t>(bh) * seq_kv + j0) * D, kFlashBc);

  Acc dK[D / 16], dV[D / 16];  // [16 × D] per warp, fp32, in registers
  for (int nb = 0; nb < D / 16; ++nb) {
    wmma::fill_fragment(dK[nb], 0.0f);
    wmma::fill_fragment(dV[nb], 0.0f);
  }

  // Causal: query rows below j0 − offset see none of this tile; start at their tile.
  const int first_q = causal ? max(0, j0 - offset) / kFlashBr * kFlashBr : 0;
  const int row = w0 + lane / 2, half = lane % 2;
  for (int i0 = first_q; i0 < seq_q; i0 += kFlashBr) {
    __syncthreads();  // previous query tile no longer in use
    load_tile<T, D>(sQ, L::kLdT, q + (static_cast<std::size_t>(bh) * seq_q + i0) * D, kFlashBr);
    load_tile<T, D>(sdO, L::kLdT, d_o + (static_cast<std::size_t>(bh) * seq_q + i0) * D, kFlashBr);
    for (int r = threadIdx.x; r < kFlashBr; r += blockDim.x) {
      sLse[r] = lse[static_cast<std::size_t>(bh) * seq_q + i0 + r];
      sDelta[r] = delta[static_cast<std::size_t>(bh) * seq_q + i0 + r];
    }
    __syncthreads();

    // S[w0:w0+16, :] = Q·Kᵀ and dP[w0:w0+16, :] = dO·Vᵀ, 16×64 each per warp.
    for (int cb = 0; cb < kFlashBc / 16; ++cb) {
      Acc s, dp;
      wmma::fill_fragment(s, 0.0f);
      wmma::fill_fragment(dp, 0.0f);
      for (int kk = 0; kk < D / 16; ++kk) {
        FragA a;
        FragBT b;
        wmma::load_matrix_sync(a, sQ + w0 * L::kLdT + kk * 16, L::kLdT);
        wmma::load_matrix_sync(b, sK + cb * 16 * L::kLdT + kk * 16, L::kLdT);
        wmma::mma_sync(s, a, b, s);
        wmma::load_matrix_sync(a, sdO + w0 * L::kLdT + kk * 16, L::kLdT);
        wmma::load_matrix_sync(b, sV + cb * 16 * L::kLdT + kk * 16, L::kLdT);
        wmma::mma_sync(dp, a, b, dp);
      }
      wmma::store_matrix_sync(sS + w0 * L::kLdS + cb * 16, s, L::kLdS, wmma::mem_row_major);
      wmma::store_matrix_sync(sdP + w0 * L::kLdS + cb * 16, dp, L::kLdS, wmma::mem_row_major);
    }
    __syncwarp();
    // P = exp(scale·S − lse) (0 where masked); dS = P∘(dP − delta). Two lanes per row.
    const int qi = i0 + row;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      const bool masked = causal && (j0 + c) > qi + offset;
      const float p = masked ? 0.0f : __expf(sS[row * L::kLdS + c] * scale - sLse[row]);
      sP[row * L::kLdP + c] = from_float<T>(p);
      sdS[row * L::kLdP + c] = from_float<T>(p * (sdP[row * L::kLdS + c] - sDelta[row]));
    }
    __syncthreads();  // dV/dK below read every warp's rows of P and dS

    // dV[w0:w0+16, :] += Pᵀ[w0:w0+16, :]·dO and dK[w0:w0+16, :] += dSᵀ·Q (kv rows w0..w0+15).
    for (int nb = 0; nb < D / 16; ++nb)
      for (int kk = 0; kk < kFlashBr / 16; ++kk) {
        FragAT a;  // Pᵀ: P's columns w0.. read as rows (col-major view of the row-major tile)
        FragB b;
        wmma::load_matrix_sync(a, sP + kk * 16 * L::kLdP + w0, L::kLdP);
        wmma::load_matrix_sync(b, sdO + kk * 16 * L::kLdT + nb * 16, L::kLdT);
        wmma::mma_sync(dV[nb], a, b, dV[nb]);
        wmma::load_matrix_sync(a, sdS + kk * 16 * L::kLdP + w0, L::kLdP);
        wmma::load_matrix_sync(b, sQ + kk * 16 * L::kLdT + nb * 16, L::kLdT);
        wmma::mma_sync(dK[nb], a, b, dK[nb]);
      }

    // dQ[w0:w0+16, :] += dS[w0:w0+16, :]·K, through the warp's 16×16 scratch into fp32 atomics.
    for (int nb = 0; nb < D / 16; ++nb) {
      Acc dq;
      wmma::fill_fragment(dq, 0.0f);
      for (int kk = 0; kk < kFlashBc / 16; ++kk) {
        FragA a;
        FragB b;
        wmma::load_matrix_sync(a, sdS + w0 * L::kLdP + kk * 16, L::kLdP);
        wmma::load_matrix_sync(b, sK + kk * 16 * L::kLdT + nb * 16, L::kLdT);
        wmma::mma_sync(dq, a, b, dq);
      }
      wmma::store_matrix_sync(scratch, dq, 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32)
        atomicAdd(dq_acc + (static_cast<std::size_t>(bh) * seq_q + i0 + w0 + e / 16) * D + nb * 16 + e % 16,
                  scratch[e]);
      __syncwarp();
    }
  }

  // dK = scale·dSᵀQ (the score scale, chain rule through scale·QKᵀ); dV as accumulated.
  for (int nb = 0; nb < D / 16; ++nb) {
    for (int x = 0; x < dK[nb].num_elements; ++x) dK[nb].x[x] *= scale;  // uniform: layout-independent
    wmma::store_matrix_sync(scratch, dK[nb], 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32)
      dk[(static_cast<std::size_t>(bh) * seq_kv + j0 + w0 + e / 16) * D + nb * 16 + e % 16] = from_float<T>(scratch[e]);
    __syncwarp();
    wmma::store_matrix_sync(scratch, dV[nb], 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32)
      dv[(static_cast<std::size_t>(bh) * seq_kv + j0 + w0 + e / 16) * D + nb * 16 + e % 16] = from_float<T>(scratch[e]);
    __syncwarp();
  }
}

template <typename T, int D>
void launch_bwd(const AttentionDims& d, const T* q, const T* k, const T* v, const T* o, const float* lse, const T* d_o,
                T* dq, T* dk, T* dv, void* workspace, cudaStream_t stream) {
  const std::size_t rows = static_cast<std::size_t>(d.batch_heads * d.seq_q);
  float* delta = static_cast<float*>(workspace);
  float* dq_acc = delta + rows;
  CUDA_CHECK(cudaMemsetAsync(dq_acc, 0, rows * D * sizeof(float), stream));
  flash_bwd_delta_kernel<T, D><<<static_cast<unsigned>((rows * 32 + 255) / 256), 256, 0, stream>>>(o, d_o, delta, rows);
  CUDA_CHECK_LAUNCH();
  constexpr std::size_t bytes = BwdLayout<T, D>::kBytes;
  CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)));
  const dim3 grid(static_cast<unsigned>(d.seq_kv / kFlashBc), static_cast<unsigned>(d.batch_heads));
  flash_bwd_kernel<T, D><<<grid, kFlashThreads, bytes, stream>>>(q, k, v, lse, delta, d_o, dq_acc, dk, dv,
                                                                 static_cast<int>(d.seq_q), static_cast<int>(d.seq_kv),
                                                                 d.softmax_scale(), d.causal);
  CUDA_CHECK_LAUNCH();
  flash_bwd_convert_dq_kernel<T><<<1024, 256, 0, stream>>>(dq_acc, dq, d.softmax_scale(), rows * D);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

std::size_t flash_attention_bwd_workspace_bytes(const AttentionDims& d) {
  const auto rows = static_cast<std::size_t>(d.batch_heads * d.seq_q);
  return sizeof(float) * (rows + rows * static_cast<std::size_t>(d.head_dim));
}

template <typename T>
void launch_flash_attention_bwd(const AttentionDims& d, const T* q, const T* k, const T* v, const T* o,
                                const float* lse, const T* d_o, T* dq, T* dk, T* dv, void* workspace,
                                cudaStream_t stream) {
  check_flash_preconditions(d);
  if (!q || !k || !v || !o || !lse || !d_o || !dq || !dk || !dv || !workspace)
    throw std::invalid_argument("flash attention backward: null pointer");
  if (d.head_dim == 64)
    launch_bwd<T, 64>(d, q, k, v, o, lse, d_o, dq, dk, dv, workspace, stream);
  else
    launch_bwd<T, 128>(d, q, k, v, o, lse, d_o, dq, dk, dv, workspace, stream);
}

template void launch_flash_attention_bwd<__half>(const AttentionDims&, const __half*, const __half*, const __half*,
                                                 const __half*, const float*, const __half*, __half*, __half*, __half*,
                                                 void*, cudaStream_t);
template void launch_flash_attention_bwd<__nv_bfloat16>(const AttentionDims&, const __nv_bfloat16*,
                                                        const __nv_bfloat16*, const __nv_bfloat16*,
                                                        const __nv_bfloat16*, const float*, const __nv_bfloat16*,
                                                        __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, void*,
                                                        cudaStream_t);

}  // namespace ptsim::kernels::cuda
