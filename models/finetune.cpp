#include "models/finetune.h"

#include <fmt/format.h>

#include <stdexcept>

namespace ptsim::models {

std::string_view to_string(FinetuneMethod m) {
  switch (m) {
    case FinetuneMethod::none:
      return "none";
    case FinetuneMethod::lora:
      return "lora";
    case FinetuneMethod::qlora:
      return "qlora";
  }
  throw std::invalid_argument(fmt::format("unknown FinetuneMethod value {}", static_cast<int>(m)));
}

std::string_view to_string(BasePrecision b) {
  switch (b) {
    case BasePrecision::bf16:
      return "bf16";
    case BasePrecision::nf4:
      return "nf4";
  }
  throw std::invalid_argument(fmt::format("unknown BasePrecision value {}", static_cast<int>(b)));
}

std::vector<std::string> target_names(std::uint8_t targets) {
  std::vector<std::string> out;
  if (targets & kLoraQkv) out.emplace_back("qkv");
  if (targets & kLoraProj) out.emplace_back("proj");
  if (targets & kLoraFc1) out.emplace_back("fc1");
  if (targets & kLoraFc2) out.emplace_back("fc2");
  return out;
}

double nf4_bits_per_param() {
  // QLoRA §3 "Double Quantization": 8-bit first-level constants per block of 64
  // plus one fp32 second-level constant per 256 first-level ones.
  return 4.0 + 8.0 / kNf4BlockSize + 32.0 / (static_cast<double>(kNf4BlockSize) * kNf4SecondBlockSize);
}

double nf4_bytes_per_param() { return nf4_bits_per_param() / 8.0; }

double base_bytes_per_param(const FinetuneSpec& ft, double weight_bytes) {
  return ft.nf4() ? nf4_bytes_per_param() : weight_bytes;
}

namespace {

void check(const ModelSpec& m, const FinetuneSpec& ft, int tp, int ep) {
  if (ft.rank < 1) throw std::invalid_argument(fmt::format("LoRA rank must be >= 1, got {}", ft.rank));
  if (tp < 1 || ep < 1) throw std::invalid_argument(fmt::format("tp {} and ep {} must be >= 1", tp, ep));
  if (m.num_attention_heads % tp != 0 || m.num_query_groups % tp != 0 || m.ffn_hidden_size % tp != 0)
    throw std::invalid_argument(fmt::format("model '{}' does not shard over tensor_parallel {}", m.name, tp));
}

// Adapters of one MLP with `ffn` intermediate columns (all TP ranks together).
std::int64_t mlp_adapter(const ModelSpec& m, const FinetuneSpec& ft, std::int64_t ffn, int tp) {
  const std::int64_t r = ft.rank, h = m.hidden_size;
  const std::int64_t up = m.mlp == Mlp::swiglu ? 2 * ffn : ffn;  // gate + up fused
  std::int64_t n = 0;
  if (ft.targets_any(kLoraFc1)) n += r * h + r * up / tp;   // column-parallel
  if (ft.targets_any(kLoraFc2)) n += r * ffn / tp + r * h;  // row-parallel
  return n;
}

std::int64_t mlp_weights(const ModelSpec& m, std::int64_t ffn_local) {
  const std::int64_t up = m.mlp == Mlp::swiglu ? 2 * ffn_local : ffn_local;
  return m.hidden_size * up + ffn_local * m.hidden_size;
}

}  // namespace

LocalParams adapter_params_per_gpu(const ModelSpec& m, const FinetuneSpec& ft, int tp, int ep, bool moe_layer,
                                   int etp) {
  LocalParams p;
  if (!ft.active()) return p;
  check(m, ft, tp, ep);
  const std::int64_t r = ft.rank, h = m.hidden_size, d = m.head_dim();
  const std::int64_t q = m.num_attention_heads * d, kv = 2 * m.num_query_groups * d;
  if (ft.targets_any(kLoraQkv)) p.dense += r * h + r * (q + kv) / tp;
  if (ft.targets_any(kLoraProj)) p.dense += r * q / tp + r * h;
  if (!moe_layer) {
    p.dense += mlp_adapter(m, ft, m.ffn_hidden_size, tp);
    return p;
  }
  const MoeSpec& moe = *m.moe;
  if (moe.num_experts % ep != 0)
    throw std::invalid_argument(fmt::format("moe.num_experts {} not divisible by expert_parallel {}", moe.num_experts, ep));
  if (moe.shared_experts > 0) p.dense += mlp_adapter(m, ft, moe.shared_experts * moe.ffn_hidden_size, tp);
  p.expert +=
      static_cast<std::int64_t>(moe.num_experts / ep) * mlp_adapter(m, ft, moe.ffn_hidden_size, etp > 0 ? etp : tp);
  return p;
}

LocalParams linear_weights_per_gpu(const ModelSpec& m, int tp, int ep, bool moe_layer, int etp) {
  if (tp < 1 || ep < 1 || m.num_attention_heads % tp != 0 || m.num_query_groups % tp != 0)
    throw std::invalid_argument(fmt::format("model '{}' does not shard over tensor_parallel {}", m.name, tp));
  const std::int64_t h = m.hidden_size, d = m.head_dim();
  const std::int64_t q = m.num_attention_heads / tp * d, kv = 2 * (m.num_query_groups / tp) * d;
  LocalParams p;
  p.dense = h * (q + kv) + q * h;
  if (!moe_layer) {
    p.dense += mlp_weights(m, m.ffn_hidden_size / tp);
    return p;
  }
  const MoeSpec& moe = *m.moe;
  if (moe.shared_experts > 0) p.dense += mlp_weights(m, moe.shared_experts * moe.ffn_hidden_size / tp);
  p.expert +=
      static_cast<std::int64_t>(moe.num_experts / ep) * mlp_weights(m, moe.ffn_hidden_size / (etp > 0 ? etp : tp));
  return p;
}

}  // namespace ptsim::models
