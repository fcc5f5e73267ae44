// CPU references for scaled-dot-product attention: the naive algorithm (materialised
// score matrix) and the FlashAttention-2 tiled algorithm with online softmax (Dao 2023,
// Algorithms 1 and 2), forward and backward. The tiled version never holds more than one
// tile of scores; it is the exact algorithm the CUDA kernels run, so CI tests it without a GPU.
//
// Layout (row-major, float): Q, O, dQ, dO: [batch_heads, seq_q, head_dim];
// K, V, dK, dV: [batch_heads, seq_kv, head_dim]; lse (log-sum-exp of each score row): [batch_heads, seq_q].
// Causal mask, bottom-right aligned as in FlashAttention-2: query i sees key j iff
// j <= i + (seq_kv - seq_q); causal therefore requires seq_q <= seq_kv so no row is empty.
#pragma once

#include <cstdint>
#include <span>

namespace ptsim::kernels {

struct AttentionDims {
  std::int64_t batch_heads = 0;
  std::int64_t seq_q = 0;
  std::int64_t seq_kv = 0;
  std::int64_t head_dim = 0;
  bool causal = false;
  float scale = 0;  // softmax scale; 0 = 1/sqrt(head_dim)

  float softmax_scale() const;
  // Throws std::invalid_argument naming the bad value.
  void validate() const;
  std::int64_t q_elements() const { return batch_heads * seq_q * head_dim; }
  std::int64_t kv_elements() const { return batch_heads * seq_kv * head_dim; }
  bool masked(std::int64_t i, std::int64_t j) const { return causal && j > i + (seq_kv - seq_q); }
};

struct AttentionTiles {
  std::int64_t q = 64;   // Br: query rows per tile
  std::int64_t kv = 64;  // Bc: key/value rows per tile
};

// O = softmax(scale·Q·Kᵀ + mask)·V with the full [seq_q × seq_kv] score matrix per head.
void naive_attention_forward(const AttentionDims& d, std::span<const float> q, std::span<const float> k,
                             std::span<const float> v, std::span<float> o, std::span<float> lse);
// Gradients of O with respect to Q, K, V given dO (analytic: dV = Pᵀ·dO, dP = dO·Vᵀ,
// dS = P∘(dP − rowsum(dO∘O)), dQ = scale·dS·K, dK = scale·dSᵀ·Q).
void naive_attention_backward(const AttentionDims& d, std::span<const float> q, std::span<const float> k,
                              std::span<const float> v, std::span<const float> o, std::span<const float> d_o,
                              std::span<float> dq, std::span<float> dk, std::span<float> dv);

// FlashAttention-2 forward (Dao 2023, Algorithm 1): query tiles × key/value tiles, running
// row max m and row sum l, output rescaled by exp(m_old − m_new); writes lse = m + log l.
void flash_attention_forward_cpu(const AttentionDims& d, std::span<const float> q, std::span<const float> k,
                                 std::span<const float> v, std::span<float> o, std::span<float> lse,
                                 AttentionTiles tiles = {});
// FlashAttention-2 backward (Dao 2023, Algorithm 2): for each key/value tile, recompute the
// scores of every query tile from lse, accumulate dK, dV in the tile and dQ in place.
void flash_attention_backward_cpu(const AttentionDims& d, std::span<const float> q, std::span<const float> k,
                                  std::span<const float> v, std::span<const float> o, std::span<const float> lse,
                                  std::span<const float> d_o, std::span<float> dq, std::span<float> dk,
                                  std::span<float> dv, AttentionTiles tiles = {});

}  // namespace ptsim::kernels
