// cuDNN 9's fused flash attention (scaled-dot-product attention), forward, built with the
// backend graph API (cudnn_graph.h) because the cudnn-frontend header library is not
// installed. The graph is the one cuDNN's runtime-fusion engines recognise as SDPA
// (NVIDIA cudnn-frontend, include/cudnn_frontend/node/scaled_dot_product_flash_attention.h,
// consulted for which operations and tensor types it builds): S = Q·Kᵀ, S·scale, causal mask
// (GEN_INDEX row/col, CMP_GE, BINARY_SELECT with the lowest float), softmax as
// MAX-reduce / SUB / EXP / ADD-reduce / DIV with stats = max + log(sum), P cast to the input
// type, O = P·V. Layout as kernels/attention_cpu.h: [batch_heads, seq, head_dim], lse
// [batch_heads, seq_q] (natural log, scaled scores), so it shares buffers and the CPU
// reference with our kernels.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/attention_cpu.h"

namespace ptsim::kernels::cuda {

// This build or this GPU/cuDNN cannot run the graph: no cuDNN at build time, or cuDNN's
// heuristics offer no engine configuration whose execution plan finalises.
class CudnnUnsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// True when ptsim was compiled against cuDNN (kernels/CMakeLists.txt found libcudnn).
bool cudnn_compiled_in() noexcept;

// One finalised execution plan bound to fixed device buffers (q, k, v, o: bf16 or fp16 as
// `bf16` says; lse: float), so run() only enqueues cudnnBackendExecute on the default stream.
class CudnnAttentionFwd {
 public:
  // Throws CudnnUnsupported with cuDNN's reason when no engine accepts the graph.
  CudnnAttentionFwd(const AttentionDims& d, bool bf16, const void* q, const void* k, const void* v, void* o,
                    float* lse);
  ~CudnnAttentionFwd();
  CudnnAttentionFwd(const CudnnAttentionFwd&) = delete;
  CudnnAttentionFwd& operator=(const CudnnAttentionFwd&) = delete;
  void run();
  // Name of the engine configuration chosen (cuDNN engine id and its workspace).
  std::string engine() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ptsim::kernels::cuda
