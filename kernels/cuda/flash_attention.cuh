// FlashAttention-2-style kernels (Dao 2023): tiled Q/K/V in shared memory, online softmax,
// bf16/fp16 inputs with fp32 accumulation on tensor cores (WMMA 16×16×16, sm_80+), head
// dims 64 and 128, causal (bottom-right mask, as kernels/attention_cpu.h) and non-causal.
// Layouts as kernels/attention_cpu.h: Q,O [BH, Sq, D]; K,V [BH, Skv, D]; lse [BH, Sq] (fp32).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>

#include "kernels/attention_cpu.h"

namespace ptsim::kernels::cuda {

// Tile sizes: 64 query rows (4 warps × 16 rows) by 64 key/value rows.
inline constexpr int kFlashBr = 64;
inline constexpr int kFlashBc = 64;
inline constexpr int kFlashThreads = 128;

// Throws std::invalid_argument unless head_dim ∈ {64, 128}, both sequence lengths are
// multiples of 64 and the dims are valid (attention_cpu.h).
void check_flash_preconditions(const AttentionDims& d);

template <typename T>
void launch_flash_attention_fwd(const AttentionDims& d, const T* q, const T* k, const T* v, T* o, float* lse,
                                cudaStream_t stream);

// Workspace: delta = rowsum(dO∘O) [BH·Sq] and the fp32 dQ accumulator [BH·Sq·D].
std::size_t flash_attention_bwd_workspace_bytes(const AttentionDims& d);
template <typename T>
void launch_flash_attention_bwd(const AttentionDims& d, const T* q, const T* k, const T* v, const T* o,
                                const float* lse, const T* d_o, T* dq, T* dk, T* dv, void* workspace,
                                cudaStream_t stream);

// Conversions shared by the kernels.
template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}

// Copies a [rows × D] tile from global (row stride D) to shared memory (row stride ld),
// 16 bytes per thread per step.
template <typename T, int D>
__device__ __forceinline__ void load_tile(T* __restrict__ dst, int ld, const T* __restrict__ src, int rows) {
  constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte vector
  const int vecs = rows * D / kVec;
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
    const int r = i / (D / kVec), c = (i % (D / kVec)) * kVec;
    *reinterpret_cast<int4*>(dst + r * ld + c) = *reinterpret_cast<const int4*>(src + r * D + c);
  }
}

}  // namespace ptsim::kernels::cuda
