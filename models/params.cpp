#include "models/params.h"

#include <fmt/format.h>

#include <stdexcept>

namespace ptsim::models {

namespace {

std::int64_t norm_params(const ModelSpec& m) {
  // LayerNorm: weight + bias; RMSNorm: weight only.
  return m.norm == Norm::layernorm ? 2 * m.hidden_size : m.hidden_size;
}

// One MLP with `ffn_local` intermediate columns on this GPU (column-parallel up,
// row-parallel down; the down bias is replicated on every TP rank).
std::int64_t mlp_params(const ModelSpec& m, std::int64_t ffn_local) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t up_cols = m.mlp == Mlp::swiglu ? 2 * ffn_local : ffn_local;  // gate + up
  std::int64_t n = h * up_cols + ffn_local * h;
  if (m.add_bias_linear) n += up_cols + h;
  return n;
}

void check_divides(std::int64_t value, int by, const char* what, const char* degree) {
  if (by <= 0) throw std::invalid_argument(fmt::format("{} must be >= 1, got {}", degree, by));
  if (value % by != 0) {
    throw std::invalid_argument(fmt::format("{} = {} is not divisible by {} = {}", what, value, degree, by));
  }
}

}  // namespace

LocalParams layer_params_per_gpu(const ModelSpec& m, int tp, int ep, bool moe_layer, int etp) {
  check_divides(m.num_attention_heads, tp, "num_attention_heads", "tensor_parallel");
  check_divides(m.num_query_groups, tp, "num_query_groups", "tensor_parallel");
  check_divides(m.ffn_hidden_size, tp, "ffn_hidden_size", "tensor_parallel");
  const std::int64_t h = m.hidden_size;
  const std::int64_t d = m.head_dim();
  const std::int64_t q_cols = m.num_attention_heads / tp * d;
  const std::int64_t kv_cols = 2 * (m.num_query_groups / tp) * d;  // GQA: K and V per group

  LocalParams p;
  // Attention: column-parallel QKV, row-parallel output projection (Megatron-LM,
  // Shoeybi et al. 2019 §3); norms and row-parallel biases replicated.
  p.dense += h * (q_cols + kv_cols) + q_cols * h;
  if (m.add_bias_linear) p.dense += (q_cols + kv_cols) + h;
  p.dense += 2 * norm_params(m);  // input and post-attention norms

  if (!moe_layer) {
    p.dense += mlp_params(m, m.ffn_hidden_size / tp);
    return p;
  }
  if (!m.moe || m.moe->num_experts <= 0) {
    throw std::invalid_argument(fmt::format("model '{}' has no MoE spec but a MoE layer was requested", m.name));
  }
  const MoeSpec& moe = *m.moe;
  check_divides(moe.num_experts, ep, "moe.num_experts", "expert_parallel");
  const int et = etp > 0 ? etp : tp;
  check_divides(moe.ffn_hidden_size, et, "moe.ffn_hidden_size", "expert_tensor_parallel");
  // Router: h × E, no bias (Mixtral's gate, Megatron-core TopKRouter), replicated.
  p.dense += h * moe.num_experts;
  // Shared experts act like one dense MLP of shared_experts × ffn (Megatron-core
  // moe_shared_expert_intermediate_size), TP-sharded, not expert-parallel.
  if (moe.shared_experts > 0) p.dense += mlp_params(m, moe.shared_experts * moe.ffn_hidden_size / tp);
  if (moe.shared_experts > 0 && moe.shared_expert_gate) p.dense += h;  // replicated (shared_experts.py gate_weight)
  // Routed experts: num_experts/ep local experts, each sharded over the experts' own
  // tensor-parallel size (Megatron-core's default expert_tensor_parallel_size = tp).
  p.expert += static_cast<std::int64_t>(moe.num_experts / ep) * mlp_params(m, moe.ffn_hidden_size / et);
  return p;
}

ParamCounts count_params(const ModelSpec& m) {
  if (m.num_layers <= 0 || m.hidden_size <= 0 || m.num_attention_heads <= 0 || m.vocab_size <= 0) {
    throw std::invalid_argument(fmt::format("model '{}': num_layers {}, hidden_size {}, heads {}, vocab {} must be > 0",
                                            m.name, m.num_layers, m.hidden_size, m.num_attention_heads, m.vocab_size));
  }
  ParamCounts c;
  c.embedding = m.vocab_size * m.hidden_size;
  if (m.learned_position_embeddings) c.embedding += m.seq_length * m.hidden_size;
  c.output = m.untie_embeddings ? m.vocab_size * m.hidden_size : 0;
  c.final_norm = norm_params(m);
  c.dense_layer = layer_params_per_gpu(m, 1, 1, false).total();

  std::int64_t moe_active = 0;
  if (m.moe && m.moe->num_experts > 0) {
    const LocalParams moe = layer_params_per_gpu(m, 1, 1, true);
    c.moe_layer = moe.total();
    c.moe_layer_expert = mlp_params(m, m.moe->ffn_hidden_size);
    moe_active = moe.dense + static_cast<std::int64_t>(m.moe->top_k) * c.moe_layer_expert;
  }
  c.total = c.embedding + c.output + c.final_norm;
  c.active = c.total;
  for (int i = 0; i < m.num_layers; ++i) {
    const bool moe = m.is_moe_layer(i);
    c.total += moe ? c.moe_layer : c.dense_layer;
    c.active += moe ? moe_active : c.dense_layer;
  }
  return c;
}

}  // namespace ptsim::models
