// Per-GPU op lists (models/ops.h) and the precision helpers (models/parallelism.h).
#include <gtest/gtest.h>

#include <numeric>
#include <utility>

#include "models/flops.h"
#include "models/model_spec.h"
#include "tests/models/presets.h"
#include "models/ops.h"

namespace ptsim::models {
namespace {

const Op& find(const std::vector<Op>& ops, const std::string& name) {
  for (const auto& op : ops) {
    if (op.name == name) return op;
  }
  throw std::out_of_range("no op " + name);
}

TEST(Parallelism, NamesReadBack) {
  EXPECT_EQ(from_string(kScheduleNames, "interleaved-1f1b"), Schedule::interleaved_1f1b);
  EXPECT_EQ(from_string(kRecomputeNames, "selective"), Recompute::selective);
  EXPECT_EQ(from_string(kAttentionImplNames, "naive"), AttentionImpl::naive);
  EXPECT_FALSE(from_string(kPrecisionNames, "int4").has_value());
  for (const auto& s : kPrecisionNames) EXPECT_EQ(from_string(kPrecisionNames, to_string(s.value)), s.value);
}

TEST(Parallelism, NamesAndBytes) {
  EXPECT_EQ(to_string(Precision::bf16), "bf16");
  EXPECT_EQ(to_string(Precision::fp8), "fp8");
  EXPECT_EQ(to_string(Recompute::selective), "selective");
  EXPECT_EQ(to_string(Schedule::one_f_one_b), "1f1b");
  EXPECT_EQ(to_string(Schedule::interleaved_1f1b), "interleaved-1f1b");
  EXPECT_EQ(to_string(Schedule::gpipe), "gpipe");
  EXPECT_EQ(to_string(AttentionImpl::flash), "flash");
  EXPECT_EQ(compute_bytes(Precision::fp32), 4.0);
  EXPECT_EQ(compute_bytes(Precision::fp16), 2.0);
  EXPECT_EQ(compute_bytes(Precision::bf16), 2.0);
  EXPECT_EQ(compute_bytes(Precision::fp8), 1.0);
  EXPECT_EQ(activation_element_bytes(Precision::fp8), 2.0);
  EXPECT_EQ(activation_element_bytes(Precision::fp32), 4.0);
}

TEST(Ops, Gpt175bLayerUnsharded) {
  // One sequence (b = 1, s = 2048, h = 12288): GEMM forward FLOPs 24·s·h²,
  // attention 4·s²·h; GEMM backward 2×, flash attention backward 2.5×.
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  const auto ops = layer_ops(m, p, false);
  const double s = 2048, h = 12288;
  double gemm_fwd = 0;
  for (const auto& op : ops) {
    if (op.cls == OpClass::gemm) {
      gemm_fwd += op.fwd_flops;
      EXPECT_DOUBLE_EQ(op.bwd_flops, 2.0 * op.fwd_flops) << op.name;
    }
  }
  EXPECT_DOUBLE_EQ(gemm_fwd, 24.0 * s * h * h);
  const Op& attn = find(ops, "attention");
  EXPECT_EQ(attn.cls, OpClass::attention);
  EXPECT_DOUBLE_EQ(attn.fwd_flops, 4.0 * s * s * h);
  EXPECT_DOUBLE_EQ(attn.bwd_flops, 2.5 * attn.fwd_flops);
  EXPECT_TRUE(attn.attn.causal);
  EXPECT_TRUE(attn.recomputed_selective);
  EXPECT_EQ(attn.attn.batch_heads, 96);
  EXPECT_EQ(attn.attn.seq_q, 2048);
  EXPECT_EQ(attn.attn.seq_kv, 2048);
  EXPECT_EQ(attn.attn.head_dim, 128);
  // QKV GEMM: m = s, n = 3h, k = h.
  const Op& qkv = find(ops, "qkv");
  EXPECT_EQ(qkv.gemm.m, 2048);
  EXPECT_EQ(qkv.gemm.n, 3 * 12288);
  EXPECT_EQ(qkv.gemm.k, 12288);
  // The op order of a Megatron layer.
  std::vector<std::string> names;
  for (const auto& op : ops) names.push_back(op.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"input_norm", "qkv", "attention", "proj", "attn_bias_dropout_add",
                                      "post_attn_norm", "mlp_up", "mlp_act", "mlp_down", "mlp_bias_dropout_add"}));
}

// Sum of fwd + bwd matmul FLOPs of the whole model for one sequence at tp = cp = 1
// with naive attention (backward exactly 2× like the GEMMs): must equal the model
// FLOPs for a batch of one.
double op_model_flops(const ModelSpec& m) {
  Parallelism p;
  p.attention = AttentionImpl::naive;
  p.moe_capacity_factor = 0;
  double f = 0;
  auto add = [&](const std::vector<Op>& ops) {
    for (const auto& op : ops) {
      if (op.cls == OpClass::gemm || op.cls == OpClass::attention || op.cls == OpClass::router) {
        f += op.fwd_flops + op.bwd_flops;
      }
    }
  };
  for (int i = 0; i < m.num_layers; ++i) add(layer_ops(m, p, m.is_moe_layer(i)));
  add(head_ops(m, p));
  return f;
}

TEST(Ops, OpListAgreesWithModelFlops) {
  for (const char* name : {"gpt3-1.7b", "llama3-8b", "mixtral-8x7b"}) {
    const ModelSpec m = preset(name);
    const double expected = model_flops_per_iteration(m, 1);
    EXPECT_NEAR(op_model_flops(m), expected, expected * 1e-12) << name;
  }
}

TEST(Ops, NaiveAttentionBackwardAndScoreTraffic) {
  // Naive attention: backward 2× forward (no recompute); it adds (6·2 + 1) bytes
  // per score in forward and (7·2 + 1) in backward, scores = a·s² = 96·2048².
  const ModelSpec m = preset("gpt3-175b");
  Parallelism flash, naive;
  naive.attention = AttentionImpl::naive;
  const Op f = find(layer_ops(m, flash, false), "attention");
  const Op n = find(layer_ops(m, naive, false), "attention");
  const double scores = 96.0 * 2048 * 2048;
  EXPECT_DOUBLE_EQ(n.bwd_flops, 2.0 * n.fwd_flops);
  EXPECT_DOUBLE_EQ(n.fwd_bytes - f.fwd_bytes, 13.0 * scores);
  EXPECT_DOUBLE_EQ(n.bwd_bytes - f.bwd_bytes, 15.0 * scores);
  // Flash forward: Q, K, V, O of s·h bf16 each + fp32 LSE per head row.
  EXPECT_DOUBLE_EQ(f.fwd_bytes, 4.0 * 2048 * 12288 * 2 + 4.0 * 96 * 2048);
}

TEST(Ops, WithoutDropoutNoMasksAndNoEmbeddingDropout) {
  // dropout 0 (model.hidden_dropout / attention_dropout): the naive scores lose the
  // dropout read, mask and output in forward (6·2 + 1 -> 4·2 bytes per score) and the
  // mask in backward (7·2 + 1 -> 7·2); bias-dropout-add writes and reads no 1-byte
  // mask (s·h elements); the embedding dropout kernel is gone.
  ModelSpec m = preset("gpt3-175b");
  Parallelism naive;
  naive.attention = AttentionImpl::naive;
  const auto with = layer_ops(m, naive, false);
  m.hidden_dropout = m.attention_dropout = 0;
  const auto without = layer_ops(m, naive, false);
  const double scores = 96.0 * 2048 * 2048, elems = 2048.0 * 12288;
  EXPECT_DOUBLE_EQ(find(with, "attention").fwd_bytes - find(without, "attention").fwd_bytes, 5.0 * scores);
  EXPECT_DOUBLE_EQ(find(with, "attention").bwd_bytes - find(without, "attention").bwd_bytes, 1.0 * scores);
  for (const char* name : {"attn_bias_dropout_add", "mlp_bias_dropout_add"}) {
    EXPECT_DOUBLE_EQ(find(with, name).fwd_bytes - find(without, name).fwd_bytes, elems);
    EXPECT_DOUBLE_EQ(find(with, name).bwd_bytes - find(without, name).bwd_bytes, elems);
  }
  Parallelism p;
  EXPECT_EQ(embedding_ops(preset("gpt3-175b"), p).size(), embedding_ops(m, p).size() + 1);
}

TEST(Ops, TensorSequenceAndContextParallelSharding) {
  const ModelSpec m = preset("gpt3-175b");
  Parallelism base;
  Parallelism tp = base;
  tp.tp = 8;
  const auto o1 = layer_ops(m, base, false);
  const auto o8 = layer_ops(m, tp, false);
  // TP: heads and ffn split by 8; every GEMM and attention FLOP count / 8.
  EXPECT_EQ(find(o8, "qkv").gemm.n, 3 * 12288 / 8);
  EXPECT_EQ(find(o8, "mlp_up").gemm.n, 4 * 12288 / 8);
  EXPECT_EQ(find(o8, "attention").attn.batch_heads, 12);
  EXPECT_DOUBLE_EQ(find(o8, "mlp_down").fwd_flops, find(o1, "mlp_down").fwd_flops / 8);
  EXPECT_DOUBLE_EQ(find(o8, "attention").fwd_flops, find(o1, "attention").fwd_flops / 8);
  // Without SP the norms are replicated: same work on every TP rank.
  EXPECT_DOUBLE_EQ(find(o8, "input_norm").fwd_bytes, find(o1, "input_norm").fwd_bytes);
  // SP: norms and dropout-add on s/t tokens.
  Parallelism sp = tp;
  sp.sequence_parallel = true;
  const auto os = layer_ops(m, sp, false);
  EXPECT_DOUBLE_EQ(find(os, "input_norm").fwd_bytes, find(o1, "input_norm").fwd_bytes / 8);
  EXPECT_DOUBLE_EQ(find(os, "mlp_bias_dropout_add").fwd_flops, find(o1, "mlp_bias_dropout_add").fwd_flops / 8);
  EXPECT_EQ(find(os, "qkv").gemm.m, 2048);  // GEMMs see the all-gathered sequence
  // CP = 4: local queries s/4 against all s keys; FLOPs / 4; GEMM rows s/4.
  Parallelism cp = base;
  cp.cp = 4;
  const auto oc = layer_ops(m, cp, false);
  EXPECT_EQ(find(oc, "attention").attn.seq_q, 512);
  EXPECT_EQ(find(oc, "attention").attn.seq_kv, 2048);
  EXPECT_DOUBLE_EQ(find(oc, "attention").fwd_flops, find(o1, "attention").fwd_flops / 4);
  EXPECT_EQ(find(oc, "qkv").gemm.m, 512);
  // Micro-batch 2 doubles everything.
  Parallelism mb = base;
  mb.micro_batch_size = 2;
  EXPECT_DOUBLE_EQ(find(layer_ops(m, mb, false), "attention").fwd_flops, 2 * find(o1, "attention").fwd_flops);
  EXPECT_EQ(find(layer_ops(m, mb, false), "mlp_up").gemm.m, 4096);
}

TEST(Ops, GqaAndSwiGluShapes) {
  // Llama-3 8B: QKV width h + 2·8·128 = 6144; SwiGLU up 2·14336; down k = 14336.
  const auto ops = layer_ops(preset("llama3-8b"), Parallelism{}, false);
  EXPECT_EQ(find(ops, "qkv").gemm.n, 6144);
  EXPECT_EQ(find(ops, "mlp_up").gemm.n, 28672);
  EXPECT_EQ(find(ops, "mlp_down").gemm.k, 14336);
  // fp8: GEMM operands 1 byte → qkv forward bytes (m·k + k·n)·1 + m·n·2.
  Parallelism f8;
  f8.precision = Precision::fp8;
  const Op q = find(layer_ops(preset("llama3-8b"), f8, false), "qkv");
  const double mm = 8192, n = 6144, k = 4096;
  EXPECT_DOUBLE_EQ(q.fwd_bytes, (mm * k + k * n) * 1.0 + mm * n * 2.0);
}

TEST(Ops, MoeExpertsAndLoadImbalance) {
  // Mixtral 8x7B, b = 1, s = 32768, ep = 8: one local expert; mean tokens per
  // expert T·top_k·ep/E = 32768·2·8/8 = 65536.
  const ModelSpec m = preset("mixtral-8x7b");
  Parallelism p;
  p.ep = 8;
  p.dp = 8;
  auto ops = layer_ops(m, p, true);
  const Op& up = find(ops, "expert_up");
  EXPECT_EQ(up.gemm.count, 1);
  EXPECT_EQ(up.gemm.m, 65536);
  EXPECT_EQ(up.gemm.n, 2 * 14336);
  EXPECT_EQ(find(ops, "router").cls, OpClass::router);
  EXPECT_EQ(find(ops, "router").gemm.n, 8);
  // Imbalance 1.25 is capped by a capacity factor of 1.0 (tokens dropped) ...
  p.moe_load_imbalance = 1.25;
  p.moe_capacity_factor = 1.0;
  EXPECT_EQ(find(layer_ops(m, p, true), "expert_up").gemm.m, 65536);
  // ... and applies in full when dropless (the default, as in Megatron-core):
  // 65536 · 1.25 = 81920 rows, FLOPs × 1.25.
  p.moe_capacity_factor = 0;
  const Op hot = find(layer_ops(m, p, true), "expert_up");
  EXPECT_EQ(hot.gemm.m, 81920);
  EXPECT_DOUBLE_EQ(hot.fwd_flops, 1.25 * up.fwd_flops);
  // ep = 1: 8 local experts, T·2/8 = 8192 tokens each.
  Parallelism one;
  EXPECT_EQ(find(layer_ops(m, one, true), "expert_up").gemm.count, 8);
  EXPECT_EQ(find(layer_ops(m, one, true), "expert_up").gemm.m, 8192);
  EXPECT_DOUBLE_EQ(moe_tokens_per_expert(m, one), 8192);
}

// MoE parallel folding: at etp 1 under tp 2 each GPU's whole experts take the routed
// tokens of its sequence shard (half of etp 2's rows, the full ffn width); FLOPs per GPU
// are the same.
TEST(Ops, ExpertTensorParallelOne) {
  const ModelSpec m = preset("mixtral-8x7b");
  Parallelism p = moe_tp2_ep8();
  const Op split = find(layer_ops(m, p, true), "expert_up");
  p.etp = 1;
  const Op whole = find(layer_ops(m, p, true), "expert_up");
  EXPECT_EQ(whole.gemm.m, split.gemm.m / 2);
  EXPECT_EQ(whole.gemm.n, 2 * split.gemm.n);
  EXPECT_DOUBLE_EQ(whole.fwd_flops, split.fwd_flops);
  EXPECT_DOUBLE_EQ(moe_tokens_per_expert(m, p), 32768);  // s 32768 · top_k 2 · ep 8 / E 8 / (tp / etp) 2
  // Checked: 1 or tp, sequence parallelism on, ep dividing tp · dp · cp.
  p.etp = 3;
  EXPECT_THROW(layer_ops(m, p, true), std::invalid_argument);
  p.etp = 1;
  p.sequence_parallel = false;
  EXPECT_THROW(layer_ops(m, p, true), std::invalid_argument);
  p.sequence_parallel = true;
  p.dp = 4;  // tp 2 · dp 4 = 8 ranks for ep 8: fine only when folded
  EXPECT_NO_THROW(layer_ops(m, p, true));
  p.etp = 2;
  EXPECT_THROW(layer_ops(m, p, true), std::invalid_argument);
}

TEST(Ops, RolesMarkTheTensorParallelBoundariesAndTheMoeExchange) {
  // Megatron's TP regions: attention from QKV to the bias-dropout-add after the
  // projection, the MLP from its up-projection (a MoE layer: its router) to the
  // bias-dropout-add after it; MoE tokens leave after the permute and come back
  // before the unpermute. One op per role, in that order.
  auto roles = [](const std::vector<Op>& ops) {
    std::vector<std::pair<std::string, OpRole>> out;
    for (const auto& op : ops)
      if (op.role != OpRole::none) out.emplace_back(op.name, op.role);
    return out;
  };
  Parallelism p;
  const auto dense = roles(layer_ops(preset("gpt3-175b"), p, false));
  EXPECT_EQ(dense, (std::vector<std::pair<std::string, OpRole>>{{"qkv", OpRole::attn_enter},
                                                                {"attn_bias_dropout_add", OpRole::attn_leave},
                                                                {"mlp_up", OpRole::mlp_enter},
                                                                {"mlp_bias_dropout_add", OpRole::mlp_leave}}));
  p.ep = 8;
  p.dp = 8;
  const auto moe = roles(layer_ops(preset("mixtral-8x7b"), p, true));
  EXPECT_EQ(moe, (std::vector<std::pair<std::string, OpRole>>{{"qkv", OpRole::attn_enter},
                                                              {"attn_bias_dropout_add", OpRole::attn_leave},
                                                              {"router", OpRole::mlp_enter},
                                                              {"moe_permute", OpRole::moe_dispatch},
                                                              {"moe_unpermute", OpRole::moe_combine},
                                                              {"mlp_bias_dropout_add", OpRole::mlp_leave}}));
  // Experts whole on their GPU under tp 2 (etp 1): the MoE block is no tensor-parallel
  // region; with shared experts (tp-sharded) it stays one.
  p.tp = 2;
  p.etp = 1;
  p.sequence_parallel = true;
  const auto folded = roles(layer_ops(preset("mixtral-8x7b"), p, true));
  EXPECT_EQ(folded, (std::vector<std::pair<std::string, OpRole>>{{"qkv", OpRole::attn_enter},
                                                                 {"attn_bias_dropout_add", OpRole::attn_leave},
                                                                 {"moe_permute", OpRole::moe_dispatch},
                                                                 {"moe_unpermute", OpRole::moe_combine}}));
  ModelSpec shared = preset("mixtral-8x7b");
  shared.moe->shared_experts = 1;
  EXPECT_EQ(roles(layer_ops(shared, p, true)).size(), 6u);
}

TEST(Ops, EmbeddingAndHead) {
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.tp = 8;
  const auto emb = embedding_ops(m, p);
  EXPECT_EQ(emb.front().cls, OpClass::embedding);
  EXPECT_EQ(emb.front().fwd_flops, 2048.0 * 12288);  // learned-position add
  // Backward: dY read, PyTorch's dense gradient of the V/t × h slice zero-filled and the
  // rows of the slice's T/t tokens written (bf16), token ids; the learned positions' dY
  // read again and their fp32 gradient rows.
  const double elems = 2048.0 * 12288;
  EXPECT_DOUBLE_EQ(emb.front().bwd_bytes,
                   elems * 2 + (6400 + 2048.0 / 8) * 12288 * 2 + 2048 * 8.0 + elems * 2 + elems * 8 / 8);
  const auto head = head_ops(m, p);
  ASSERT_EQ(head.size(), 3u);
  EXPECT_EQ(head[0].cls, OpClass::norm);
  // Logits: h × V/t = 12288 × 6400 per GPU.
  EXPECT_EQ(head[1].gemm.n, 6400);
  EXPECT_EQ(head[1].gemm.k, 12288);
  EXPECT_DOUBLE_EQ(head[1].fwd_flops, 2.0 * 2048 * 6400 * 12288);
  EXPECT_EQ(head[2].cls, OpClass::loss);
}

// The loss kernels' HBM bytes per logit (T × V/t of them; models/ops.cpp cites each pass):
// Megatron's PyTorch ops on an fp32 copy, their torch.compile form, one fused kernel.
TEST(Ops, CrossEntropyBytesPerLogit) {
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.tp = 8;
  const double logits = 2048.0 * 6400;
  const auto loss = [&](LossKernel k) {
    p.loss_kernel = k;
    const Op op = head_ops(m, p).back();
    EXPECT_EQ(op.name, "cross_entropy");
    return std::pair{op.fwd_bytes / logits, op.bwd_bytes / logits};
  };
  EXPECT_EQ(loss(LossKernel::megatron), (std::pair{2.0 + 4 + 4 + 8 + 8 + 4 + 8, 8.0 + 4 + 2}));
  EXPECT_EQ(loss(LossKernel::megatron_compiled), (std::pair{2.0 + 4 + 8 + 8, 4.0 + 2}));
  EXPECT_EQ(loss(LossKernel::fused), (std::pair{2.0 + 4, 4.0 + 2}));
  // The FLOPs do not depend on the kernels.
  EXPECT_DOUBLE_EQ(head_ops(m, p).back().fwd_flops, 5.0 * logits);
}

TEST(Ops, RejectsUnshardablePlans) {
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.tp = 5;  // 96 heads
  try {
    layer_ops(m, p, false);
    FAIL() << "tp = 5 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("5"), std::string::npos);
  }
  Parallelism ep;
  ep.ep = 2;  // dense model
  EXPECT_THROW(layer_ops(m, ep, false), std::invalid_argument);
  Parallelism mx;
  mx.ep = 3;
  mx.dp = 3;
  EXPECT_THROW(layer_ops(preset("mixtral-8x7b"), mx, true), std::invalid_argument);
  Parallelism cp;
  cp.cp = 3;  // 2048 not divisible by 6
  EXPECT_THROW(layer_ops(m, cp, false), std::invalid_argument);
  EXPECT_THROW(layer_ops(m, Parallelism{}, true), std::invalid_argument);  // no experts
}

}  // namespace
}  // namespace ptsim::models
