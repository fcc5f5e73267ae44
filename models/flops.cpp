#include "models/flops.h"

#include <fmt/format.h>

#include <stdexcept>

namespace ptsim::models {

// Model FLOPs follow Narayanan et al. SC'21 §5.1 (Appendix: "Floating-point
// operations"): only matrix multiplications count (2·m·n·k each), biases, norms,
// softmax and element-wise ops do not; backward = 2 × forward (dgrad + wgrad).
// For a GPT layer and B sequences of s tokens (N = B·s):
//   QKV 2·N·h·3h + scores Q·Kᵀ 2·B·s²·h + P·V 2·B·s²·h + proj 2·N·h²
//   + MLP 2·2·N·h·4h = 24·N·h² + 4·B·s²·h,
// and the logits 2·N·h·V; ×3 for forward + backward gives
// 72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h)). Generalised here: GQA changes the QKV
// width to a·d + 2·g·d, SwiGLU has three h×ffn matrices, a MoE layer runs the
// router (h×E) and top_k + shared experts per token. Tied or untied output
// embeddings do not change the count (the logits GEMM runs either way).
namespace {

double mlp_fwd(const ModelSpec& m, double tokens, double ffn) {
  const double matrices = m.mlp == Mlp::swiglu ? 3.0 : 2.0;
  return 2.0 * tokens * static_cast<double>(m.hidden_size) * ffn * matrices;
}

// Attention core forward (Q·Kᵀ and P·V), causal counted in full.
double attention_core_fwd(const ModelSpec& m, double batch) {
  const double s = static_cast<double>(m.seq_length);
  const double qdim = static_cast<double>(m.num_attention_heads) * static_cast<double>(m.head_dim());
  return 4.0 * batch * s * s * qdim;
}

double layer_fwd(const ModelSpec& m, double batch, bool moe_layer) {
  const double n = batch * static_cast<double>(m.seq_length);
  const double h = static_cast<double>(m.hidden_size);
  const double d = static_cast<double>(m.head_dim());
  const double qdim = static_cast<double>(m.num_attention_heads) * d;
  const double kvdim = 2.0 * static_cast<double>(m.num_query_groups) * d;
  double f = 2.0 * n * h * (qdim + kvdim)                          // QKV
             + attention_core_fwd(m, batch) + 2.0 * n * qdim * h;  // output projection
  if (moe_layer) {
    const MoeSpec& moe = *m.moe;
    const double ffn = static_cast<double>(moe.ffn_hidden_size);
    f += 2.0 * n * h * static_cast<double>(moe.num_experts);                        // router
    f += static_cast<double>(moe.top_k + moe.shared_experts) * mlp_fwd(m, n, ffn);  // experts
  } else {
    f += mlp_fwd(m, n, static_cast<double>(m.ffn_hidden_size));
  }
  return f;
}

void check(const ModelSpec& m, std::int64_t global_batch) {
  if (global_batch <= 0) throw std::invalid_argument(fmt::format("global_batch must be > 0, got {}", global_batch));
  if (m.num_layers <= 0 || m.num_attention_heads <= 0 || m.seq_length <= 0) {
    throw std::invalid_argument(fmt::format("model '{}' has num_layers {}, heads {}, seq_length {}", m.name,
                                            m.num_layers, m.num_attention_heads, m.seq_length));
  }
}

// Adapter forward FLOPs of one layer for `batch` sequences: 2 FLOPs per adapter
// parameter per token that passes through it (routed experts: top_k of them).
double adapter_fwd(const ModelSpec& m, const FinetuneSpec& ft, double batch, bool moe_layer) {
  if (!ft.active()) return 0.0;
  const double n = batch * static_cast<double>(m.seq_length);
  const LocalParams a = adapter_params_per_gpu(m, ft, 1, 1, moe_layer);
  double per_token = static_cast<double>(a.dense);
  if (moe_layer) per_token += static_cast<double>(a.expert) / m.moe->num_experts * m.moe->top_k;
  return 2.0 * n * per_token;
}

}  // namespace

double model_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch, const FinetuneSpec& ft) {
  if (!ft.active()) return model_flops_per_iteration(m, global_batch);
  check(m, global_batch);
  const double b = static_cast<double>(global_batch);
  double gemm = 2.0 * b * static_cast<double>(m.seq_length) * static_cast<double>(m.hidden_size) *
                static_cast<double>(m.vocab_size);  // logits
  double attn = 0, adapters = 0;
  for (int i = 0; i < m.num_layers; ++i) {
    const bool moe = m.is_moe_layer(i);
    attn += attention_core_fwd(m, b);
    gemm += layer_fwd(m, b, moe) - attention_core_fwd(m, b);
    adapters += adapter_fwd(m, ft, b, moe);
  }
  // Frozen GEMMs: forward + input gradient; attention and adapters: forward + 2×.
  return 2.0 * gemm + 3.0 * (attn + adapters);
}

double hardware_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch, Recompute r,
                                    const FinetuneSpec& ft) {
  if (!ft.active()) return hardware_flops_per_iteration(m, global_batch, r);
  double f = model_flops_per_iteration(m, global_batch, ft);
  const double b = static_cast<double>(global_batch);
  if (r == Recompute::selective) f += static_cast<double>(m.num_layers) * attention_core_fwd(m, b);
  if (r == Recompute::full)
    for (int i = 0; i < m.num_layers; ++i) f += layer_fwd(m, b, m.is_moe_layer(i)) + adapter_fwd(m, ft, b, m.is_moe_layer(i));
  return f;
}

double model_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch) {
  check(m, global_batch);
  const double b = static_cast<double>(global_batch);
  double fwd = 0;
  for (int i = 0; i < m.num_layers; ++i) fwd += layer_fwd(m, b, m.is_moe_layer(i));
  fwd += 2.0 * b * static_cast<double>(m.seq_length) * static_cast<double>(m.hidden_size) *
         static_cast<double>(m.vocab_size);  // logits
  return 3.0 * fwd;
}

double hardware_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch, Recompute r) {
  double f = model_flops_per_iteration(m, global_batch);
  const double b = static_cast<double>(global_batch);
  switch (r) {
    case Recompute::none:
      break;
    case Recompute::selective:
      // Korthikanti et al. 2022 §5: selective recompute re-runs the attention
      // core (Q·Kᵀ, softmax, dropout, P·V) in backward: 4·B·s²·h per layer.
      f += static_cast<double>(m.num_layers) * attention_core_fwd(m, b);
      break;
    case Recompute::full:
      // Every layer's forward runs again (the logits do not): Narayanan et al.
      // SC'21 Eq. 3, 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)) for a GPT.
      for (int i = 0; i < m.num_layers; ++i) f += layer_fwd(m, b, m.is_moe_layer(i));
      break;
  }
  return f;
}

}  // namespace ptsim::models
