// LoRA / QLoRA model states, ops and FLOPs (models/finetune.h) against hand
// calculations and the papers' published figures: Hu et al., "LoRA", ICLR 2022
// §4.2 (GPT-3 175B: VRAM 1.2 TB → 350 GB, checkpoint 350 GB → 35 MB with r = 4 on
// W_q and W_v) and Dettmers et al., "QLoRA", NeurIPS 2023 (§3: 0.127 bits per
// parameter of double-quantised constants; abstract: a 65B model finetuned on a
// single 48 GB GPU).
#include <gtest/gtest.h>

#include <string>

#include "models/finetune.h"
#include "models/flops.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "tests/models/presets.h"
#include "models/ops.h"
#include "models/params.h"

namespace ptsim::models {
namespace {

FinetuneSpec lora(int rank, std::uint8_t targets, FinetuneMethod method = FinetuneMethod::lora) {
  FinetuneSpec ft;
  ft.method = method;
  ft.rank = rank;
  ft.targets = targets;
  ft.base_precision = method == FinetuneMethod::qlora ? BasePrecision::nf4 : BasePrecision::bf16;
  return ft;
}

// LLaMA-65B (Touvron et al. 2023, Table 2; its params.json): 80 layers, h = 8192,
// 64 heads, SwiGLU ffn 22016, vocab 32000, RMSNorm, no biases, untied, RoPE.
ModelSpec llama_65b() {
  ModelSpec m;
  m.name = "llama-65b";
  m.num_layers = 80;
  m.hidden_size = 8192;
  m.num_attention_heads = 64;
  m.num_query_groups = 64;
  m.ffn_hidden_size = 22016;
  m.vocab_size = 32000;
  m.seq_length = 512;
  m.mlp = Mlp::swiglu;
  m.norm = Norm::rmsnorm;
  m.untie_embeddings = true;
  m.add_bias_linear = false;
  m.learned_position_embeddings = false;
  return m;
}

TEST(Finetune, Nf4DoubleQuantisedBitsPerParameter) {
  // QLoRA §3: 4 bits + 8/64 (8-bit constants per block of 64) + 32/(64·256)
  // (fp32 second-level constants) = 4.126953; "0.127 bits per parameter".
  EXPECT_NEAR(nf4_bits_per_param(), 4.127, 5e-4);
  EXPECT_DOUBLE_EQ(nf4_bits_per_param(), 4.0 + 0.125 + 32.0 / 16384.0);
  EXPECT_DOUBLE_EQ(nf4_bytes_per_param(), nf4_bits_per_param() / 8);
}

TEST(Finetune, AdapterParamsGpt3ReproduceTheLoraCheckpoint) {
  // GPT-3 175B, r = 4 on the fused QKV: r·(h + 3h) = 4·4·12288 = 196,608 per layer,
  // the same as the paper's separate W_q and W_v (2 · r·(h + h)); × 96 layers =
  // 18,874,368 parameters, 37.7 MB in fp16 — LoRA §4.2's "35 MB" checkpoint.
  const ModelSpec m = preset("gpt3-175b");
  const FinetuneSpec ft = lora(4, kLoraQkv);
  const LocalParams one = adapter_params_per_gpu(m, ft, 1, 1, false);
  EXPECT_EQ(one.dense, 196'608);
  EXPECT_EQ(one.expert, 0);
  const double checkpoint_bytes = 2.0 * 96 * static_cast<double>(one.dense);
  EXPECT_NEAR(checkpoint_bytes / 35e6, 1.0, 0.1);
}

TEST(Finetune, AdapterParamsFollowTheTensorParallelSplit) {
  // Llama-2-7B (h 4096, ffn 11008, SwiGLU), r = 16 on all four targets.
  // tp = 1: r·[(h + 3h) + (h + h) + (h + 2·ffn) + (ffn + h)] = 16·(8h + 3·ffn)
  //        = 16·(32768 + 33024) = 1,052,672.
  // tp = 2: column-parallel A whole, B halved; row-parallel A halved, B whole:
  //   qkv 16·(4096 + 6144) = 163,840; proj 16·(2048 + 4096) = 98,304;
  //   fc1 16·(4096 + 11008) = 241,664; fc2 16·(5504 + 4096) = 153,600 → 657,408.
  const ModelSpec m = preset("llama2-7b");
  const FinetuneSpec ft = lora(16, kLoraAllTargets);
  EXPECT_EQ(adapter_params_per_gpu(m, ft, 1, 1, false).total(), 1'052'672);
  EXPECT_EQ(adapter_params_per_gpu(m, ft, 2, 1, false).total(), 657'408);
  // Only fc2: 16·(11008 + 4096) = 241,664.
  EXPECT_EQ(adapter_params_per_gpu(m, lora(16, kLoraFc2), 1, 1, false).total(), 241'664);
  // Off: nothing trains beyond the model.
  EXPECT_EQ(adapter_params_per_gpu(m, FinetuneSpec{}, 1, 1, false).total(), 0);
}

TEST(Finetune, Gpt3LoraModelStatesMatchThe350GbOfThePaper) {
  // LoRA §4.2: "On GPT-3 175B, we reduce the VRAM consumption during training
  // from 1.2TB to 350GB": the fp16 frozen base (175B × 2 bytes) plus adapters.
  // One GPU holding everything (tp = pp = dp = 1), bf16, Megatron layout: the
  // adapters' 18,874,368 parameters carry 2 + 4 + 12 bytes.
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.finetune = lora(4, kLoraQkv);
  const ModelStates s = model_states(m, p, 0);
  const double psi = static_cast<double>(count_params(m).total);
  const double adapters = 96.0 * 196'608;
  EXPECT_DOUBLE_EQ(s.params, 2.0 * psi + 2.0 * adapters);
  EXPECT_DOUBLE_EQ(s.grads, 4.0 * adapters);
  EXPECT_DOUBLE_EQ(s.optimizer, 12.0 * adapters);
  EXPECT_NEAR(s.total() / 350e9, 1.0, 0.02);
  // Full training of the same model: 18 bytes per parameter, 3.15 TB.
  Parallelism full;
  EXPECT_GT(model_states(m, full, 0).total(), 8.5 * s.total());
}

TEST(Finetune, Qlora65bFitsOneGpuOf48Gb) {
  // LLaMA-65B, QLoRA with r = 64 on every linear layer (QLoRA Appendix B.2
  // hyper-parameters), NF4 base with double quantisation, gradient checkpointing
  // (full recompute), micro-batch 1 of 512 tokens, paged optimizer (its state
  // evicted to CPU memory: offload_optimizer).
  // Linear weights per layer: 4h² + 3·h·ffn = 268,435,456 + 541,065,216 =
  // 809,500,672; × 80 = 64,760,053,760 in NF4 at 4.126953 bits = 33.41 GB.
  // 16-bit: embedding + output 2·V·h = 524,288,000 and norms 2h per layer + h =
  // 1,318,912 → 1,051,213,824 bytes. Adapters per layer: 64·(8h + 3·ffn) =
  // 64·(65,536 + 66,048) = 8,421,376; × 80 = 673,710,080 parameters, 2-byte weights.
  const ModelSpec m = llama_65b();
  Parallelism p;
  p.precision = Precision::bf16;
  p.recompute = Recompute::full;
  p.offload_optimizer = true;
  p.finetune = lora(64, kLoraAllTargets, FinetuneMethod::qlora);
  EXPECT_EQ(linear_weights_per_gpu(m, 1, 1, false).total(), 809'500'672);
  EXPECT_EQ(adapter_params_per_gpu(m, p.finetune, 1, 1, false).total(), 8'421'376);
  const double adapters = 80.0 * 8'421'376;
  const double base = 64'760'053'760.0 * nf4_bytes_per_param() + 1'051'213'824.0;
  const ModelStates s = model_states(m, p, 0);
  EXPECT_NEAR(s.params, base + 2.0 * adapters, 1.0);
  EXPECT_DOUBLE_EQ(s.grads, 4.0 * adapters);
  EXPECT_DOUBLE_EQ(s.optimizer, 0.0);
  EXPECT_NEAR(base / 1e9, 34.46, 0.01);
  const std::vector<StageMemory> mem = analytical_memory(m, p);
  ASSERT_EQ(mem.size(), 1u);
  EXPECT_LT(mem[0].peak, 48e9);
  // The dequantised layer is a transient 16-bit copy of one layer's linear weights.
  Parallelism lora16 = p;
  lora16.finetune.base_precision = BasePrecision::bf16;
  lora16.finetune.method = FinetuneMethod::lora;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0) - buffer_bytes(m, lora16, 0), 2.0 * 809'500'672);
  // A 16-bit LoRA of the same model needs 130 GB of weights: no 48 GB GPU holds it.
  EXPECT_GT(analytical_memory(m, lora16)[0].peak, 130e9);
}

TEST(Finetune, FrozenGemmsSkipTheWeightGradientAndAdaptersTrain) {
  // One Llama-2-7B layer, b = 1, s = 4096, bf16, r = 16, targets qkv and fc2.
  const ModelSpec m = preset("llama2-7b");
  Parallelism full;
  Parallelism p;
  p.finetune = lora(16, kLoraQkv | kLoraFc2);
  const auto base_ops = layer_ops(m, full, false);
  const auto ft_ops = layer_ops(m, p, false);
  // Two adapter GEMMs for each of the two targets, nothing else added.
  ASSERT_EQ(ft_ops.size(), base_ops.size() + 4);
  int adapters = 0;
  for (const Op& op : ft_ops) {
    if (op.name.find("_lora_") != std::string::npos) {
      ++adapters;
      EXPECT_FALSE(op.frozen);
      EXPECT_DOUBLE_EQ(op.bwd_flops, 2.0 * op.fwd_flops);
    } else if (op.cls == OpClass::gemm) {
      EXPECT_TRUE(op.frozen) << op.name;
      EXPECT_DOUBLE_EQ(op.bwd_flops, op.fwd_flops) << op.name;
    }
  }
  EXPECT_EQ(adapters, 4);
  // qkv adapter A: 4096 tokens × r 16 × h 4096: 2·4096·16·4096 FLOPs forward.
  for (const Op& op : ft_ops)
    if (op.name == "qkv_lora_a") EXPECT_DOUBLE_EQ(op.fwd_flops, 2.0 * 4096 * 16 * 4096);
  // QLoRA adds the dequantisation of the layer's linear weights, memory-bound:
  // 202,375,168 weights × (4.127/8 read + 2 written) bytes, forward and backward.
  p.finetune = lora(16, kLoraQkv | kLoraFc2, FinetuneMethod::qlora);
  const auto q_ops = layer_ops(m, p, false);
  ASSERT_EQ(q_ops.front().name, "nf4_dequant");
  const double w = 202'375'168.0;
  EXPECT_EQ(linear_weights_per_gpu(m, 1, 1, false).total(), 202'375'168);
  EXPECT_DOUBLE_EQ(q_ops.front().fwd_bytes, w * (nf4_bytes_per_param() + 2.0));
  EXPECT_DOUBLE_EQ(q_ops.front().bwd_bytes, q_ops.front().fwd_bytes);
}

TEST(Finetune, ModelFlopsDropTheFrozenWeightGradients) {
  // A GPT of 1 layer, h = 1024, 16 heads, ffn 4096, V = 8, s = 128, 1 sequence;
  // r = 8 on qkv only. Forward: GEMMs G = 2·128·(1024·3072 + 1024² + 2·1024·4096)
  // + logits 2·128·1024·8; attention A = 4·128²·1024; adapter Ad = 2·128·8·(1024 +
  // 3072). Full training 3·(G + A); LoRA 2·G + 3·(A + Ad).
  ModelSpec m;
  m.name = "tiny";
  m.num_layers = 1;
  m.hidden_size = 1024;
  m.num_attention_heads = 16;
  m.num_query_groups = 16;
  m.ffn_hidden_size = 4096;
  m.vocab_size = 8;
  m.seq_length = 128;
  const double g = 2.0 * 128 * (1024.0 * 3072 + 1024.0 * 1024 + 2.0 * 1024 * 4096) + 2.0 * 128 * 1024 * 8;
  const double a = 4.0 * 128 * 128 * 1024;
  const double ad = 2.0 * 128 * 8 * (1024 + 3072);
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(m, 1), 3.0 * (g + a));
  const FinetuneSpec ft = lora(8, kLoraQkv);
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(m, 1, ft), 2.0 * g + 3.0 * (a + ad));
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(m, 1, FinetuneSpec{}), model_flops_per_iteration(m, 1));
  // Full recompute re-runs the whole forward, adapters included.
  EXPECT_DOUBLE_EQ(hardware_flops_per_iteration(m, 1, Recompute::full, ft),
                   2.0 * g + 3.0 * (a + ad) + (g - 2.0 * 128 * 1024 * 8) + a + ad);
}

TEST(Finetune, ActivationsGainOnlyTheAdaptersRankWideOutputs) {
  // Llama-2-7B layer, b = 1, s = 4096, bf16, r = 16 on all four targets: each
  // adapter saves x·A, 4096 × 16 × 2 bytes = 131,072; four of them 524,288.
  const ModelSpec m = preset("llama2-7b");
  Parallelism full;
  Parallelism p;
  p.finetune = lora(16, kLoraAllTargets);
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, p, false) - activation_bytes_per_layer(m, full, false), 524'288.0);
}

}  // namespace
}  // namespace ptsim::models
