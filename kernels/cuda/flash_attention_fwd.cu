// FlashAttention-2 forward (Dao 2023, Algorithm 1) on tensor cores via WMMA.
// One block = 64 query rows of one (batch, head); 4 warps, each owning 16 query rows. Per
// key/value tile: S = Q·Kᵀ (WMMA, fp32) → shared; each warp updates its rows' running max m
// and sum l, rescales its O rows by exp(m_old − m_new) and writes P = exp(S − m_new) as
// bf16/fp16; O += P·V (WMMA). No [Sq × Skv] matrix ever reaches global memory.

#include <cmath>
#include <stdexcept>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/flash_attention.cuh"

namespace ptsim::kernels::cuda {
namespace {

namespace wmma = nvcuda::wmma;

template <typename T, int D>
struct FwdLayout {
  static constexpr int kLdT = D + 8;         // T tiles: +8 elements (16 B) against bank conflicts
  static constexpr int kLdS = kFlashBc + 4;  // fp32 score tile
  static constexpr int kLdP = kFlashBc + 8;  // T probability tile
  static constexpr int kLdO = D + 4;         // fp32 output accumulator
  static constexpr std::size_t kQ = 0;       // [Br × D]  T
  static constexpr std::size_t kK = kQ + sizeof(T) * kFlashBr * kLdT;      // [Bc × D]  T
  static constexpr std::size_t kV = kK + sizeof(T) * kFlashBc * kLdT;      // [Bc × D]  T
  static constexpr std::size_t kS = kV + sizeof(T) * kFlashBc * kLdT;      // [Br × Bc] fp32
  static constexpr std::size_t kP = kS + sizeof(float) * kFlashBr * kLdS;  // [Br × Bc] T
  static constexpr std::size_t kO = kP + sizeof(T) * kFlashBr * kLdP;      // [Br × D]  fp32
  static constexpr std::size_t kM = kO + sizeof(float) * kFlashBr * kLdO;  // [Br] running max
  static constexpr std::size_t kL = kM + sizeof(float) * kFlashBr;         // [Br] running sum
  static constexpr std::size_t kBytes = kL + sizeof(float) * kFlashBr;
  // WMMA pointers must be 32-byte aligned: every section starts on a multiple of 32.
  static_assert(kK % 32 == 0 && kV % 32 == 0 && kS % 32 == 0 && kP % 32 == 0 && kO % 32 == 0);
};

template <typename T, int D>
__global__ void __launch_bounds__(kFlashThreads)
    flash_fwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,
                     float* __restrict__ lse, int seq_q, int seq_kv, float scale, bool causal) {
  using L = FwdLayout<T, D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem + L::kQ);
  T* sK = reinterpret_cast<T*>(smem + L::kK);
  T* sV = reinterpret_cast<T*>(smem + L::kV);
  float* sS = reinterpret_cast<float*>(smem + L::kS);
  T* sP = reinterpret_cast<T*>(smem + L::kP);
  float* sO = reinterpret_cast<float*>(smem + L::kO);
  float* sM = reinterpret_cast<float*>(smem + L::kM);
  float* sL = reinterpret_cast<float*>(smem + L::kL);

  const int bh = blockIdx.y;
  const int q0 = blockIdx.x * kFlashBr;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r0 = warp * 16;           // this warp's first row in the tile
  const int offset = seq_kv - seq_q;  // bottom-right causal alignment

  load_tile<T, D>(sQ, L::kLdT, q + (static_cast<std::size_t>(bh) * seq_q + q0) * D, kFlashBr);
  for (int i = threadIdx.x; i < kFlashBr * L::kLdO; i += blockDim.x) sO[i] = 0.0f;
  for (int i = threadIdx.x; i < kFlashBr; i += blockDim.x) {
    sM[i] = -INFINITY;
    sL[i] = 0.0f;
  }

  // Causal: key tiles wholly right of the last row's diagonal are skipped.
  const int kv_end = causal ? min(seq_kv, q0 + kFlashBr + offset) : seq_kv;
  // Lane layout for the softmax: two lanes per row, 32 columns each.
  const int row = r0 + lane / 2, half = lane % 2;
  const int qi = q0 + row;

  for (int j0 = 0; j0 < kv_end; j0 += kFlashBc) {
    __syncthreads();  // previous tile's K/V no longer in use
    load_tile<T, D>(sK, L::kLdT, k + (static_cast<std::size_t>(bh) * seq_kv + j0) * D, kFlashBc);
    load_tile<T, D>(sV, L::kLdT, v + (static_cast<std::size_t>(bh) * seq_kv + j0) * D, kFlashBc);
    __syncthreads();

    // S[r0:r0+16, :] = Q[r0:r0+16, :] · Kᵀ — 16×64 per warp, 4 fragments of 16×16.
    for (int cb = 0; cb < kFlashBc / 16; ++cb) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;  // Kᵀ: K rows as columns
        wmma::load_matrix_sync(a, sQ + r0 * L::kLdT + kk * 16, L::kLdT);
        wmma::load_matrix_sync(b, sK + cb * 16 * L::kLdT + kk * 16, L::kLdT);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(sS + r0 * L::kLdS + cb * 16, acc, L::kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax for this warp's rows.
    const float m_old = sM[row], l_old = sL[row];
    float tile_max = -INFINITY;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      const bool masked = causal && (j0 + c) > qi + offset;
      if (!masked) tile_max = fmaxf(tile_max, sS[row * L::kLdS + c] * scale);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m_old, tile_max);
    // A row with nothing visible yet keeps m = −inf: add nothing, rescale nothing.
    const float alpha = m_new == -INFINITY ? 1.0f : __expf(m_old - m_new);
    float rowsum = 0.0f;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      const bool masked = causal && (j0 + c) > qi + offset;
      const float p = (masked || m_new == -INFINITY) ? 0.0f : __expf(sS[row * L::kLdS + c] * scale - m_new);
      sP[row * L::kLdP + c] = from_float<T>(p);
      rowsum += p;
    }
    rowsum += __shfl_xor_sync(0xffffffffu, rowsum, 1);
    for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c) sO[row * L::kLdO + c] *= alpha;
    __syncwarp();  // both lanes of a row have read m_old, l_old
    if (half == 0) {
      sM[row] = m_new;
      sL[row] = alpha * l_old + rowsum;
    }
    __syncwarp();

    // O[r0:r0+16, :] += P[r0:r0+16, :] · V — D/16 fragments of 16×16, accumulated in fp32.
    for (int nb = 0; nb < D / 16; ++nb) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, sO + r0 * L::kLdO + nb * 16, L::kLdO, wmma::mem_row_major);
      for (int kk = 0; kk < kFlashBc / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, sP + r0 * L::kLdP + kk * 16, L::kLdP);
        wmma::load_matrix_sync(b, sV + kk * 16 * L::kLdT + nb * 16, L::kLdT);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(sO + r0 * L::kLdO + nb * 16, acc, L::kLdO, wmma::mem_row_major);
    }
    __syncwarp();
  }

  // O = acc / l; lse = m + log l (what the backward pass recomputes P from).
  const float inv_l = 1.0f / sL[row];
  T* out = o + (static_cast<std::size_t>(bh) * seq_q + qi) * D;
  for (int c = half * (D / 2); c < (half + 1) * (D / 2); ++c) out[c] = from_float<T>(sO[row * L::kLdO + c] * inv_l);
  if (half == 0) lse[static_cast<std::size_t>(bh) * seq_q + qi] = sM[row] + logf(sL[row]);
}

template <typename T, int D>
void launch_fwd(const AttentionDims& d, const T* q, const T* k, const T* v, T* o, float* lse, cudaStream_t stream) {
  constexpr std::size_t bytes = FwdLayout<T, D>::kBytes;
  CUDA_CHECK(cudaFuncSetAttribute(flash_fwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)));
  const dim3 grid(static_cast<unsigned>(d.seq_q / kFlashBr), static_cast<unsigned>(d.batch_heads));
  flash_fwd_kernel<T, D><<<grid, kFlashThreads, bytes, stream>>>(
      q, k, v, o, lse, static_cast<int>(d.seq_q), static_cast<int>(d.seq_kv), d.softmax_scale(), d.causal);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void check_flash_preconditions(const AttentionDims& d) {
  d.validate();
  if (d.head_dim != 64 && d.head_dim != 128)
    throw std::invalid_argument(str("flash attention: head_dim must be 64 or 128, got ", d.head_dim));
  if (d.seq_q % kFlashBr != 0 || d.seq_kv % kFlashBc != 0)
    throw std::invalid_argument(
        str("flash attention: seq_q (", d.seq_q, ") and seq_kv (", d.seq_kv, ") must be multiples of 64"));
  if (d.batch_heads > 65535)
    throw std::invalid_argument(str("flash attention: batch_heads ", d.batch_heads, " exceeds the grid's y limit"));
}

template <typename T>
void launch_flash_attention_fwd(const AttentionDims& d, const T* q, const T* k, const T* v, T* o, float* lse,
                                cudaStream_t stream) {
  check_flash_preconditions(d);
  if (!q || !k || !v || !o || !lse) throw std::invalid_argument("flash attention: null pointer");
  if (d.head_dim == 64)
    launch_fwd<T, 64>(d, q, k, v, o, lse, stream);
  else
    launch_fwd<T, 128>(d, q, k, v, o, lse, stream);
}

template void launch_flash_attention_fwd<__half>(const AttentionDims&, const __half*, const __half*, const __half*,
                                                 __half*, float*, cudaStream_t);
template void launch_flash_attention_fwd<__nv_bfloat16>(const AttentionDims&, const __nv_bfloat16*,
                                                        const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                                        float*, cudaStream_t);

}  // namespace ptsim::kernels::cuda
