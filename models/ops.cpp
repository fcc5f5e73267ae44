#include "models/ops.h"

#include "models/finetune.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

// Per-GPU, per-micro-batch operations of one transformer layer after sharding.
//
// Conventions (documented here once, used by every op below):
// * Tokens: a GPU sees T = b·s/cp tokens of its micro-batch (context parallel
//   splits the sequence). GEMMs in the tensor-parallel region always see all T
//   tokens (sequence parallel all-gathers them first, Korthikanti et al. 2022
//   §4.2.2); norms, dropout and residual adds see T/tp tokens with sequence
//   parallelism and all T (replicated work) without it.
// * FLOPs: GEMM forward 2·m·n·k; backward 2× forward (dgrad + wgrad). Attention
//   forward 4·b·(a/tp)·(s/cp)·s·d: Q·Kᵀ and P·V, causal counted in FULL (the
//   model-FLOPs convention of CONTRACT §3) with `attn.causal = true` so a cost
//   model may halve the work a causal kernel really does. Context parallelism:
//   ring attention with load-balanced causal chunks (Megatron-core CP) gives each
//   rank s/cp queries against all s keys, i.e. total/cp FLOPs per GPU.
//   Flash backward = 2.5× forward: five matmuls (recomputed S = Q·Kᵀ, dV, dP,
//   dQ, dK) against two in forward (Dao, FlashAttention-2, arXiv 2307.08691 §3.1
//   and its FLOPs count "2.5× forward" for backward). Naive backward = 2× (four
//   matmuls: dV, dP, dQ, dK; the probabilities are stored, not recomputed).
// * Element-wise / norm FLOPs are small per-element counts (they never enter
//   model FLOPs); their time is memory-bound, so their bytes are what matters.
// * Bytes: HBM traffic. GEMM forward reads A (m×k) and B (k×n) in the compute
//   precision and writes C (m×n) in the activation precision; backward dgrad
//   reads dC and B and writes dA, wgrad reads A and dC and accumulates dB into
//   the fp32 main gradient (read + write 8 bytes per weight: Megatron-LM's
//   gradient_accumulation_fusion).
namespace ptsim::models {

namespace {

struct Dims {
  double b = 0;        // micro-batch size
  double s_local = 0;  // s / cp
  double s_full = 0;   // s (keys seen by ring attention)
  double h = 0;
  double d = 0;          // head dim
  double heads = 0;      // local query heads a/tp
  double groups = 0;     // local kv groups g/tp
  double tokens = 0;     // T = b·s/cp
  double sp_tokens = 0;  // tokens of replicated-region work: T/tp with SP, T otherwise
  double ab = 0;         // activation element bytes
  double cb = 0;         // GEMM operand element bytes
  int tp = 1;
};

Dims dims(const ModelSpec& m, const Parallelism& p) {
  check_sharding(m, p);
  Dims x;
  x.tp = p.tp;
  x.b = p.micro_batch_size;
  x.s_full = static_cast<double>(m.seq_length);
  x.s_local = x.s_full / p.cp;
  x.h = static_cast<double>(m.hidden_size);
  x.d = static_cast<double>(m.head_dim());
  x.heads = static_cast<double>(m.num_attention_heads / p.tp);
  x.groups = static_cast<double>(m.num_query_groups / p.tp);
  x.tokens = x.b * x.s_local;
  x.sp_tokens = p.sequence_parallel ? x.tokens / p.tp : x.tokens;
  x.ab = activation_element_bytes(p.precision);
  x.cb = compute_bytes(p.precision);
  return x;
}

Op gemm(std::string name, double m, double n, double k, int count, const Dims& x, OpClass cls = OpClass::gemm) {
  Op op;
  op.name = std::move(name);
  op.cls = cls;
  op.gemm = GemmShape{static_cast<std::int64_t>(m), static_cast<std::int64_t>(n), static_cast<std::int64_t>(k), count};
  const double c = count;
  op.fwd_flops = 2.0 * m * n * k * c;
  op.bwd_flops = 2.0 * op.fwd_flops;
  op.fwd_bytes = c * ((m * k + k * n) * x.cb + m * n * x.ab);
  const double dgrad = (m * n + k * n) * x.cb + m * k * x.ab;
  const double wgrad = (m * k + m * n) * x.cb + k * n * 8.0;
  op.bwd_bytes = c * (dgrad + wgrad);
  return op;
}

// `elems` elements; per element: forward/backward FLOPs and bytes.
Op pointwise(std::string name, OpClass cls, double elems, double fwd_flops, double fwd_bytes, double bwd_flops,
             double bwd_bytes) {
  Op op;
  op.name = std::move(name);
  op.cls = cls;
  op.fwd_flops = elems * fwd_flops;
  op.fwd_bytes = elems * fwd_bytes;
  op.bwd_flops = elems * bwd_flops;
  op.bwd_bytes = elems * bwd_bytes;
  return op;
}

Op norm(std::string name, const ModelSpec& m, const Dims& x) {
  // LayerNorm ≈ 8 FLOPs per element (mean, centre, square, variance, normalise,
  // scale, shift), RMSNorm ≈ 4 (square, sum, normalise, scale); backward ≈ 2×.
  // Forward reads x and writes y; backward reads x and dy and writes dx.
  const double f = m.norm == Norm::layernorm ? 8.0 : 4.0;
  return pointwise(std::move(name), OpClass::norm, x.sp_tokens * x.h, f, 2.0 * x.ab, 2.0 * f, 3.0 * x.ab);
}

Op bias_dropout_add(std::string name, const ModelSpec& m, const Dims& x) {
  // Fused bias + dropout + residual add (Megatron bias_dropout_add_fused):
  // forward reads input and residual, writes output and a 1-byte dropout mask;
  // backward reads dy and the mask and writes the branch gradient. Without
  // dropout (hidden_dropout 0) no mask is written or read.
  const double mask = m.hidden_dropout > 0 ? 1.0 : 0.0;
  return pointwise(std::move(name), OpClass::elementwise, x.sp_tokens * x.h, 3.0, 3.0 * x.ab + mask, 1.0,
                   2.0 * x.ab + mask);
}

// Activation of an MLP whose up projection produced `rows` × `ffn_local`.
Op activation(std::string name, const ModelSpec& m, double rows, double ffn_local, const Dims& x) {
  const double e = rows * ffn_local;
  if (m.mlp == Mlp::swiglu) {
    // silu(g)·u: forward reads g and u, writes y; backward reads g, u, dy and
    // writes dg, du. ≈ 6 FLOPs forward (sigmoid, two products), ≈ 12 backward.
    return pointwise(std::move(name), OpClass::elementwise, e, 6.0, 3.0 * x.ab, 12.0, 5.0 * x.ab);
  }
  // GeLU (tanh approximation ≈ 8 FLOPs), backward ≈ 2×; reads x (and dy), writes.
  return pointwise(std::move(name), OpClass::elementwise, e, 8.0, 2.0 * x.ab, 16.0, 3.0 * x.ab);
}

Op with_role(Op op, OpRole role) {
  op.role = role;
  return op;
}

// Up (+ activation) + down of an MLP with `ffn_local` columns per GPU over `rows`
// tokens, `count` times (local experts); the up-projection gets `up_role`.
void add_mlp(std::vector<Op>& ops, const std::string& prefix, const ModelSpec& m, double rows, double ffn_local,
             int count, const Dims& x, OpRole up_role = OpRole::none) {
  const double up_cols = m.mlp == Mlp::swiglu ? 2.0 * ffn_local : ffn_local;  // gate + up for SwiGLU
  ops.push_back(with_role(gemm(prefix + "_up", rows, up_cols, x.h, count, x), up_role));
  ops.push_back(activation(prefix + "_act", m, rows * count, ffn_local, x));
  ops.push_back(gemm(prefix + "_down", rows, x.h, ffn_local, count, x));
}

Op attention(const ModelSpec& m, const Parallelism& p, const Dims& x) {
  Op op;
  op.name = "attention";
  op.cls = OpClass::attention;
  // Context parallelism by head all-to-all (Ulysses, Parallelism::cp_heads): the whole
  // sequence for heads / cp heads; else s / cp queries against all s keys (ring).
  const double heads = p.cp_heads ? x.heads / p.cp : x.heads, groups = p.cp_heads ? x.groups / p.cp : x.groups;
  const double queries = p.cp_heads ? x.s_full : x.s_local;
  op.attn = AttentionShape{static_cast<std::int64_t>(x.b * heads), static_cast<std::int64_t>(queries),
                           static_cast<std::int64_t>(x.s_full), static_cast<std::int64_t>(x.d), true};
  // Selective recompute re-runs the attention core in backward (Korthikanti §5).
  op.recomputed_selective = true;
  const double bh = x.b * heads;
  op.fwd_flops = 4.0 * bh * queries * x.s_full * x.d;
  const double q = x.b * queries * heads * x.d;     // Q, O, dO, dQ elements
  const double kv = x.b * groups * x.s_full * x.d;  // K (or V) elements over the full sequence
  const double lse = 4.0 * bh * queries;            // fp32 log-sum-exp per query row
  // Flash forward: read Q, K, V, write O and the LSE. Backward: read Q, K, V, O,
  // dO, LSE; write dQ, dK, dV. No s×s tensor touches HBM.
  op.fwd_bytes = (2.0 * q + 2.0 * kv) * x.ab + lse;
  op.bwd_bytes = (4.0 * q + 4.0 * kv) * x.ab + lse;
  if (p.attention != AttentionImpl::naive) {
    op.bwd_flops = 2.5 * op.fwd_flops;
  } else {
    op.bwd_flops = 2.0 * op.fwd_flops;
    // Naive attention materialises the s×s scores (Korthikanti §4.1 lists the
    // softmax output, dropout mask and dropout output as saved). Forward per
    // score element: write Q·Kᵀ, read it for softmax, write softmax, read it for
    // dropout, write mask (1 B) and dropout output, read that for P·V: 6·ab + 1.
    // Backward: read dropout output (dV), write dP, read dP + mask + softmax,
    // write dS, read dS for dQ and dK: 7·ab + 1. Without attention dropout P·V
    // reads the softmax output itself (forward 4·ab: no dropout read, mask or
    // output) and backward reads no mask (7·ab).
    const double scores = bh * queries * x.s_full;
    const bool dropout = m.attention_dropout > 0;
    op.fwd_bytes += scores * (dropout ? 6.0 * x.ab + 1.0 : 4.0 * x.ab);
    op.bwd_bytes += scores * (dropout ? 7.0 * x.ab + 1.0 : 7.0 * x.ab);
  }
  return op;
}

// ---------------------------------------------------------- fine-tuning ---

// A frozen weight's GEMM: backward computes the input gradient only.
void freeze(Op& op, const Dims& x) {
  if (op.cls != OpClass::gemm && op.cls != OpClass::router) return;
  const double m = static_cast<double>(op.gemm.m), n = static_cast<double>(op.gemm.n),
               k = static_cast<double>(op.gemm.k), c = op.gemm.count;
  op.frozen = true;
  op.bwd_flops = op.fwd_flops;
  op.bwd_bytes = c * ((m * n + k * n) * x.cb + m * k * x.ab);
}

// LoRA update of a weight d_in × d_out seen by `rows` tokens (`count` copies for
// local experts): x·A (rows × r × d_in) then (x·A)·B (rows × d_out × r), at the
// local widths of models/finetune.h (column-parallel: A full, B split by tp;
// row-parallel: A split, B full). The row-parallel adapter's rows × r partial sum
// is reduced with the base output's TP all-reduce in Megatron, not separately.
void add_adapter(std::vector<Op>& ops, const std::string& name, double rows, double d_in_local, double d_out_local,
                 int r, int count, const Dims& x) {
  ops.push_back(gemm(name + "_lora_a", rows, r, d_in_local, count, x));
  ops.push_back(gemm(name + "_lora_b", rows, d_out_local, r, count, x));
}

// Rewrites a layer's op list for p.finetune (see layer_ops in ops.h).
std::vector<Op> finetune_layer(std::vector<Op> base, const ModelSpec& m, const Parallelism& p, bool moe_layer,
                               const Dims& x) {
  const FinetuneSpec& ft = p.finetune;
  std::vector<Op> out;
  if (ft.nf4()) {
    // QLoRA: dequantise the layer's NF4 weights to a 16-bit copy (read 4.127 bits,
    // write e bytes per weight) before the forward GEMMs and again before the
    // backward's input-gradient GEMMs (bitsandbytes MatMul4Bit.backward).
    const double w = static_cast<double>(linear_weights_per_gpu(m, p.tp, p.ep, moe_layer, p.etp).total());
    const double per = nf4_bytes_per_param() + x.cb;
    out.push_back(pointwise("nf4_dequant", OpClass::elementwise, w, 1.0, per, 1.0, per));
  }
  for (Op op : base) {
    freeze(op, x);
    out.push_back(op);
    if (op.cls != OpClass::gemm) continue;
    const double rows = static_cast<double>(op.gemm.m);
    const int count = op.gemm.count;
    const double k = static_cast<double>(op.gemm.k), n = static_cast<double>(op.gemm.n);
    const bool is_up = op.name.size() > 3 && op.name.compare(op.name.size() - 3, 3, "_up") == 0;
    const bool is_down = op.name.size() > 5 && op.name.compare(op.name.size() - 5, 5, "_down") == 0;
    // The base GEMM's local k × n is the adapter's local d_in × d_out: QKV and
    // MLP up are column-parallel (k = h whole), projection and MLP down
    // row-parallel (n = h whole).
    const bool target = (op.name == "qkv" && ft.targets_any(kLoraQkv)) ||
                        (op.name == "proj" && ft.targets_any(kLoraProj)) || (is_up && ft.targets_any(kLoraFc1)) ||
                        (is_down && ft.targets_any(kLoraFc2));
    if (target) add_adapter(out, op.name, rows, k, n, ft.rank, count, x);
  }
  return out;
}

}  // namespace

void check_sharding(const ModelSpec& m, const Parallelism& p) {
  auto positive = [](int v, const char* what) {
    if (v < 1) throw std::invalid_argument(fmt::format("{} must be >= 1, got {}", what, v));
  };
  positive(p.tp, "tensor_parallel");
  positive(p.pp, "pipeline_parallel");
  positive(p.dp, "data_parallel");
  positive(p.cp, "context_parallel");
  positive(p.ep, "expert_parallel");
  positive(p.vpp, "virtual_pipeline_stages");
  positive(p.micro_batch_size, "micro_batch_size");
  positive(p.num_microbatches, "num_microbatches");
  if (p.zero_stage < 0 || p.zero_stage > 3) {
    throw std::invalid_argument(fmt::format("zero_stage must be 0..3, got {}", p.zero_stage));
  }
  auto divides = [&](std::int64_t value, int by, const char* what, const char* degree) {
    if (value % by != 0) {
      throw std::invalid_argument(
          fmt::format("model '{}': {} = {} is not divisible by {} = {}", m.name, what, value, degree, by));
    }
  };
  if (m.num_attention_heads <= 0 || m.num_query_groups <= 0 || m.hidden_size <= 0 || m.seq_length <= 0) {
    throw std::invalid_argument(fmt::format("model '{}': heads {}, query groups {}, hidden {}, seq {} must be > 0",
                                            m.name, m.num_attention_heads, m.num_query_groups, m.hidden_size,
                                            m.seq_length));
  }
  divides(m.hidden_size, m.num_attention_heads, "hidden_size", "num_attention_heads");
  divides(m.num_attention_heads, p.tp, "num_attention_heads", "tensor_parallel");
  divides(m.num_query_groups, p.tp, "num_query_groups", "tensor_parallel");
  divides(m.ffn_hidden_size, p.tp, "ffn_hidden_size", "tensor_parallel");
  // Load-balanced causal CP cuts the sequence into 2·cp chunks; by head all-to-all (Ulysses) each
  // rank takes heads / cp of its tensor-parallel heads and kv groups.
  divides(m.seq_length, p.cp > 1 ? 2 * p.cp : 1, "seq_length", "2 × context_parallel");
  if (p.cp_heads) {
    divides(m.num_attention_heads / p.tp, p.cp, "num_attention_heads / tensor_parallel", "context_parallel");
    divides(m.num_query_groups / p.tp, p.cp, "num_query_groups / tensor_parallel", "context_parallel");
  }
  if (m.moe && m.moe->num_experts > 0) {
    divides(m.moe->num_experts, p.ep, "moe.num_experts", "expert_parallel");
    divides(m.moe->ffn_hidden_size, p.expert_tp(), "moe.ffn_hidden_size", "expert_tensor_parallel");
    if (m.moe->top_k < 1 || m.moe->top_k > m.moe->num_experts) {
      throw std::invalid_argument(
          fmt::format("model '{}': moe.top_k {} must be in 1..{}", m.name, m.moe->top_k, m.moe->num_experts));
    }
    if (m.moe->layer_freq < 1) {
      throw std::invalid_argument(
          fmt::format("model '{}': moe.layer_freq must be >= 1, got {}", m.name, m.moe->layer_freq));
    }
    if (!m.moe->layer_pattern.empty() && m.moe->layer_pattern.size() != static_cast<std::size_t>(m.num_layers)) {
      throw std::invalid_argument(fmt::format("model '{}': the MoE layer pattern has {} entries for {} layers", m.name,
                                              m.moe->layer_pattern.size(), m.num_layers));
    }
  } else if (p.ep != 1) {
    throw std::invalid_argument(fmt::format("expert_parallel = {} but model '{}' has no experts", p.ep, m.name));
  }
  if (p.etp < 0 || (p.etp > 0 && p.tp % p.etp != 0)) {
    throw std::invalid_argument(
        fmt::format("expert_tensor_parallel = {} must divide tensor_parallel ({})", p.etp, p.tp));
  }
  if (p.expert_tp() != p.tp && !p.sequence_parallel) {
    throw std::invalid_argument(fmt::format(
        "expert_tensor_parallel = {} other than tensor_parallel ({}) needs sequence_parallel", p.etp, p.tp));
  }
  // Expert parallelism is carved out of data parallelism (× context parallel,
  // Megatron-core's expert-data-parallel group = dp·cp/ep), and at etp 1 out of the
  // tensor-parallel ranks too (tp·cp·dp / ep).
  const std::int64_t folded = static_cast<std::int64_t>(p.dp) * p.cp * (p.tp / p.expert_tp());  // etp divides tp
  if (folded % p.ep != 0) {
    throw std::invalid_argument(
        p.expert_tp() == p.tp
            ? fmt::format("expert_parallel = {} does not divide data_parallel × context_parallel = {}", p.ep, folded)
            : fmt::format("expert_parallel = {} does not divide tensor_parallel / expert_tensor_parallel × "
                          "data_parallel × context_parallel = {}",
                          p.ep, folded));
  }
  if (!(p.moe_load_imbalance > 0)) {
    throw std::invalid_argument(fmt::format("moe_load_imbalance must be > 0, got {}", p.moe_load_imbalance));
  }
}

double moe_copies_per_token(const ModelSpec& m, const Parallelism& p) {
  if (!m.moe) return 0;
  const int k = m.moe->top_k, experts = m.moe->num_experts;
  if (!p.moe_dedup_per_rank) return k * (p.moe_capacity_factor > 0 ? p.moe_capacity_factor : 1.0);
  // Probability that none of the k distinct experts lies on a given rank (hypergeometric).
  const int others = experts - experts / p.ep;
  double none = 1.0;
  for (int i = 0; i < k; ++i) none *= others - i > 0 ? static_cast<double>(others - i) / (experts - i) : 0.0;
  return p.ep * (1.0 - none);
}

double moe_tokens_per_expert(const ModelSpec& m, const Parallelism& p) {
  const Dims x = dims(m, p);
  if (!m.moe || m.moe->num_experts <= 0) {
    throw std::invalid_argument(fmt::format("model '{}' has no experts", m.name));
  }
  double load = p.moe_load_imbalance;
  if (p.moe_capacity_factor > 0 && p.moe_capacity_factor < load) load = p.moe_capacity_factor;
  // At etp < tp an expert's GPU takes the routed tokens of tp / etp times fewer sequences'
  // worth of ranks (the EP group spans tensor-parallel ranks, each with its sequence shard).
  const double share = static_cast<double>(p.expert_tp()) / p.tp;
  return std::ceil(x.tokens * share * m.moe->top_k * p.ep / static_cast<double>(m.moe->num_experts) * load);
}

std::vector<Op> layer_ops(const ModelSpec& m, const Parallelism& p, bool moe_layer) {
  const Dims x = dims(m, p);
  std::vector<Op> ops;
  ops.push_back(norm("input_norm", m, x));
  // QKV: column-parallel, GQA width a/tp·d queries + 2·g/tp·d keys and values.
  ops.push_back(with_role(gemm("qkv", x.tokens, (x.heads + 2.0 * x.groups) * x.d, x.h, 1, x), OpRole::attn_enter));
  ops.push_back(attention(m, p, x));
  ops.push_back(gemm("proj", x.tokens, x.h, x.heads * x.d, 1, x));
  ops.push_back(with_role(bias_dropout_add("attn_bias_dropout_add", m, x), OpRole::attn_leave));
  ops.push_back(norm("post_attn_norm", m, x));

  // The MLP block is a tensor-parallel region (its entry and exit collectives), but for a
  // MoE block whose experts are not tensor-parallel over tp (expert_tensor_parallel 1) and
  // that has no shared experts: its router reads the sequence-parallel shard, which goes
  // straight into the all-to-all (Megatron-core's MoEAlltoAllTokenDispatcher).
  const bool tp_region = !moe_layer || p.expert_tp() == p.tp || m.moe->shared_experts > 0;
  if (!moe_layer) {
    add_mlp(ops, "mlp", m, x.tokens, static_cast<double>(m.ffn_hidden_size) / p.tp, 1, x, OpRole::mlp_enter);
  } else {
    if (!m.moe || m.moe->num_experts <= 0) {
      throw std::invalid_argument(fmt::format("model '{}' has no MoE spec but a MoE layer was requested", m.name));
    }
    const MoeSpec& moe = *m.moe;
    const double experts = moe.num_experts;
    // Router logits on the sequence-parallel-local tokens (Megatron-core TopKRouter).
    ops.push_back(with_role(gemm("router", x.sp_tokens, experts, x.h, 1, x, OpClass::router),
                            tp_region ? OpRole::mlp_enter : OpRole::none));
    // Every EP rank sends T·top_k token copies spread over E experts; a GPU's
    // E/ep local experts receive, on average, T·top_k·ep/E tokens each. The
    // busiest GPU (the one the combine all-to-all waits for) gets
    // mean × moe_load_imbalance, capped by the capacity factor when tokens
    // beyond capacity are dropped; its expert GEMMs carry that many rows.
    const double per_expert = moe_tokens_per_expert(m, p);
    const int local_experts = moe.num_experts / p.ep;
    const double routed = per_expert * local_experts;
    // Permute / unpermute of the routed token copies (read + write each).
    Op permute = pointwise("moe_permute", OpClass::elementwise, routed * x.h, 0.0, 2.0 * x.ab, 0.0, 2.0 * x.ab);
    permute.role = OpRole::moe_dispatch;
    ops.push_back(permute);
    const std::size_t experts_from = ops.size();
    add_mlp(ops, "expert", m, per_expert, static_cast<double>(moe.ffn_hidden_size) / p.expert_tp(), local_experts, x);
    for (std::size_t j = experts_from; j < ops.size(); ++j) ops[j].routed_expert = ops[j].cls == OpClass::gemm;
    // Unpermute multiplies each copy by its routing probability and sums top_k copies.
    Op unpermute = pointwise("moe_unpermute", OpClass::elementwise, routed * x.h, 2.0, 2.0 * x.ab, 2.0, 3.0 * x.ab);
    unpermute.role = OpRole::moe_combine;
    ops.push_back(unpermute);
    if (moe.shared_experts > 0) {
      const std::size_t shared_from = ops.size();
      add_mlp(ops, "shared_expert", m, x.tokens,
              static_cast<double>(moe.shared_experts) * static_cast<double>(moe.ffn_hidden_size) / p.tp, 1, x);
      for (std::size_t j = shared_from; j < ops.size(); ++j) ops[j].shared_expert = true;
    }
  }
  ops.push_back(
      with_role(bias_dropout_add("mlp_bias_dropout_add", m, x), tp_region ? OpRole::mlp_leave : OpRole::none));
  if (p.finetune.active()) return finetune_layer(std::move(ops), m, p, moe_layer, x);
  return ops;
}

std::vector<Op> embedding_ops(const ModelSpec& m, const Parallelism& p) {
  const Dims x = dims(m, p);
  std::vector<Op> ops;
  // Vocab-parallel lookup (Megatron VocabParallelEmbedding): each TP rank reads
  // the rows of its V/tp slice (≈ T/tp of the tokens), writes a T×h partial
  // output (zeros elsewhere) that the TP all-reduce / reduce-scatter sums; learned
  // positions add a read of T×h and one add per element. Backward is PyTorch's dense
  // embedding gradient (F.embedding's embedding_dense_backward, or index_put for
  // Megatron's deterministic self.weight[masked_input]): a zero-filled gradient of the
  // whole V/tp × h slice in the weights' dtype, dY read and summed into the rows of
  // its tokens. Adding that gradient into Megatron's main_grad is the DDP hook's pass
  // (sim/core/program_builder.cpp embedding_grad_hook).
  const double rows = x.tokens / p.tp;
  const double elems = x.tokens * x.h;
  const double vocab_local = std::ceil(static_cast<double>(m.vocab_size) / p.tp);
  Op lookup;
  lookup.name = "embedding";
  lookup.cls = OpClass::embedding;
  lookup.fwd_bytes = rows * x.h * x.cb + elems * x.ab + x.tokens * 8.0 /* int64 token ids */;
  lookup.bwd_bytes = elems * x.ab + (vocab_local + rows) * x.h * x.cb + x.tokens * 8.0;
  lookup.bwd_flops = rows * x.h;
  if (m.learned_position_embeddings) {
    lookup.fwd_flops = elems;
    lookup.fwd_bytes += 2.0 * elems * x.ab;
    lookup.bwd_bytes += elems * x.ab + elems * 8.0 / p.tp;
    lookup.bwd_flops += elems;
  }
  ops.push_back(lookup);
  // Embedding dropout (Megatron hidden_dropout on the embedding output); at 0 no kernel.
  if (m.hidden_dropout > 0)
    ops.push_back(pointwise("embedding_dropout", OpClass::elementwise, x.sp_tokens * x.h, 1.0, 2.0 * x.ab + 1.0, 1.0,
                            2.0 * x.ab + 1.0));
  if (p.finetune.active()) {
    // Frozen embedding, nothing before it trains: no backward at all.
    for (Op& op : ops) op.bwd_flops = op.bwd_bytes = 0;
  }
  return ops;
}

std::vector<Op> head_ops(const ModelSpec& m, const Parallelism& p) {
  const Dims x = dims(m, p);
  std::vector<Op> ops;
  ops.push_back(norm("final_norm", m, x));
  // Vocab-parallel logits: h × ceil(V/tp) per GPU (Megatron pads V to a multiple of tp).
  const double vocab_local = std::ceil(static_cast<double>(m.vocab_size) / p.tp);
  ops.push_back(gemm("logits", x.tokens, vocab_local, x.h, 1, x));
  // Cross entropy over the logits (max, sub, exp, sum, divide ≈ 5 FLOPs forward, the
  // softmax minus the target times the loss gradient backward), HBM bytes per logit:
  //  - fused: one kernel reads the logits and writes the fp32 softmax it keeps for
  //    backward, which reads it and writes the logits gradient.
  //  - megatron: vocab_parallel_cross_entropy (megatron/core/tensor_parallel/
  //    cross_entropy.py, the same in 2021's megatron/mpu/cross_entropy.py) as PyTorch ops
  //    on an fp32 copy: .float() (read ab, write 4), max (read 4), sub_ (8), exp out= in
  //    place (8), sum (read 4), div_ (8); backward mul_ by the loss gradient (8) and
  //    autograd's cast of the fp32 gradient back to the logits' dtype (read 4, write ab).
  //  - megatron_compiled: the same functions under torch.compile (megatron/core/fusions/
  //    fused_cross_entropy.py, Megatron-core's jit_fuser from PyTorch 2.2): cast + max
  //    (read ab, write the fp32 copy), sub + exp + sum (8), div_ (8); backward mul and
  //    the cast to bf16 in one kernel (read 4, write ab).
  const bool megatron = p.loss_kernel == LossKernel::megatron;
  const double fwd_fp32 = megatron ? 36.0 : p.loss_kernel == LossKernel::megatron_compiled ? 20.0 : 4.0;
  ops.push_back(pointwise("cross_entropy", OpClass::loss, x.tokens * vocab_local, 5.0, x.ab + fwd_fp32, 2.0,
                          (megatron ? 12.0 : 4.0) + x.ab));
  if (p.finetune.active())
    for (Op& op : ops) freeze(op, x);  // the output layer stays frozen: dgrad only
  return ops;
}

}  // namespace ptsim::models
