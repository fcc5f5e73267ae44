// Naive (materialised-scores) attention on the GPU: see naive_attention.cu.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/attention_cpu.h"

namespace ptsim::kernels::cuda {

// Bytes of the fp32 score matrix plus P for one call: BH·Sq·Skv·(4 + sizeof(T)).
std::size_t naive_attention_scratch_bytes(const AttentionDims& d, std::size_t elem);

// scores: fp32 [BH, Sq, Skv]; probs: T [BH, Sq, Skv] (kept for the backward).
template <typename T>
void launch_naive_attention_fwd(cublasHandle_t h, const AttentionDims& d, const T* q, const T* k, const T* v, T* o,
                                float* lse, float* scores, T* probs, cudaStream_t stream);
// Overwrites probs with dS and scores with dP.
template <typename T>
void launch_naive_attention_bwd(cublasHandle_t h, const AttentionDims& d, const T* q, const T* k, const T* v,
                                const T* d_o, T* probs, float* scores, T* dq, T* dk, T* dv, cudaStream_t stream);

}  // namespace ptsim::kernels::cuda
