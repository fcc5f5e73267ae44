// The analytical memory model (models/memory.h).
#include <gtest/gtest.h>

#include "models/memory.h"
#include "models/model_spec.h"
#include "tests/models/presets.h"
#include "models/params.h"

namespace ptsim::models {
namespace {

TEST(Zero, PaperExample) {
  // DeepSpeed's layout is the ZeRO paper's.
  // Rajbhandari et al. SC'20 §5 (Figure 1): Ψ = 7.5e9, N_d = 64, K = 12.
  //   baseline (2 + 2 + 12)Ψ = 120e9 B; P_os 4Ψ + 12Ψ/64 = 31.40625e9 (paper: 31.4 GB);
  //   P_os+g 2Ψ + 14Ψ/64 = 16.640625e9 (16.6 GB); P_os+g+p 16Ψ/64 = 1.875e9 (1.9 GB).
  const double psi = 7.5e9;
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 64, 0, Precision::bf16, StateLayout::deepspeed).total(), 120e9);
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 64, 1, Precision::bf16, StateLayout::deepspeed).total(), 31.40625e9);
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 64, 2, Precision::bf16, StateLayout::deepspeed).total(), 16.640625e9);
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 64, 3, Precision::bf16, StateLayout::deepspeed).total(), 1.875e9);
  const ModelStates s1 = zero_model_state_bytes(psi, 64, 1, Precision::fp16, StateLayout::deepspeed);
  EXPECT_DOUBLE_EQ(s1.params, 2 * psi);
  EXPECT_DOUBLE_EQ(s1.grads, 2 * psi);
  EXPECT_DOUBLE_EQ(s1.optimizer, 12 * psi / 64);
  // fp32 Adam: 4 + 4 + 8 bytes; ZeRO-1 → 8Ψ + 8Ψ/N.
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 64, 0, Precision::fp32, StateLayout::deepspeed).total(), 16 * psi);
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 64, 1, Precision::fp32, StateLayout::deepspeed).total(),
                   8 * psi + 8 * psi / 64);
  // fp8 (Transformer Engine) keeps bf16 weights: same as bf16.
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 64, 2, Precision::fp8, StateLayout::deepspeed).total(), 16.640625e9);
  EXPECT_THROW(zero_model_state_bytes(psi, 64, 4, Precision::bf16, StateLayout::deepspeed), std::invalid_argument);
  EXPECT_THROW(zero_model_state_bytes(psi, 0, 1, Precision::bf16, StateLayout::deepspeed), std::invalid_argument);
}

TEST(Zero, MegatronBytesPerParameter) {
  // Megatron-core distributed-optimizer guide, bytes per parameter (d = data
  // parallel size): fp16 20 | 4 + 16/d; bf16 (fp32 grads) 18 | 6 + 12/d;
  // fp32 16 | 8 + 8/d. fp8 keeps bf16 weights: the bf16 row. Counted with what the
  // optimizer step alone allocates (fp16's fp32 main grads, 4 | 4/d).
  const double psi = 1e9, d = 8;
  const auto total = [&](int zero, Precision pr) {
    const ModelStates s = zero_model_state_bytes(psi, 8, zero, pr, StateLayout::megatron);
    return (s.total() + s.step) / psi;
  };
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 8, 0, Precision::fp16, StateLayout::megatron).step, 4 * psi);
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 8, 1, Precision::fp16, StateLayout::megatron).step, 4 * psi / d);
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 8, 1, Precision::bf16, StateLayout::megatron).step, 0);
  EXPECT_DOUBLE_EQ(total(0, Precision::fp16), 20);
  EXPECT_DOUBLE_EQ(total(1, Precision::fp16), 4 + 16 / d);
  EXPECT_DOUBLE_EQ(total(0, Precision::bf16), 18);
  EXPECT_DOUBLE_EQ(total(1, Precision::bf16), 6 + 12 / d);
  EXPECT_DOUBLE_EQ(total(0, Precision::fp8), 18);
  EXPECT_DOUBLE_EQ(total(1, Precision::fp8), 6 + 12 / d);
  EXPECT_DOUBLE_EQ(total(0, Precision::fp32), 16);
  EXPECT_DOUBLE_EQ(total(1, Precision::fp32), 8 + 8 / d);
  // The split: bf16 weights 2, fp32 main-grad buffer 4, main params + m + v 12.
  const ModelStates bf16 = state_bytes_per_param(Precision::bf16, StateLayout::megatron);
  EXPECT_DOUBLE_EQ(bf16.params, 2);
  EXPECT_DOUBLE_EQ(bf16.grads, 4);
  EXPECT_DOUBLE_EQ(bf16.optimizer, 12);
  // FSDP: fp32 flat-parameter shards, fp32 gradient shards, m + v: 16/d at ZeRO-3.
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 8, 3, Precision::bf16, StateLayout::fsdp).total(), 16 * psi / d);
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(psi, 8, 2, Precision::bf16, StateLayout::fsdp).total(),
                   4 * psi + 12 * psi / d);
}

// Korthikanti et al. 2022, Table 2, for the 175B GPT (s = 2048, b = 1, h = 12288,
// a = 96), t = 8, naive attention (scores stored), bf16.
class Table2 : public ::testing::Test {
 protected:
  ModelSpec m = preset("gpt3-175b");
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
  const double sbh = s * b * h;
  Parallelism plan(int tp, bool sp, Recompute r, AttentionImpl attn = AttentionImpl::naive) const {
    Parallelism p;
    p.tp = tp;
    p.sequence_parallel = sp;
    p.recompute = r;
    p.attention = attn;
    return p;
  }
  double bytes(const Parallelism& p) const { return activation_bytes_per_layer(m, p, false); }
};

TEST_F(Table2, NoParallelism) {
  // sbh(34 + 5as/h)
  EXPECT_DOUBLE_EQ(bytes(plan(1, false, Recompute::none)), sbh * (34 + 5 * a * s / h));
}
TEST_F(Table2, TensorParallel) {
  // sbh(10 + 24/t + 5as/(ht))
  EXPECT_DOUBLE_EQ(bytes(plan(8, false, Recompute::none)), sbh * (10 + 24 / t + 5 * a * s / (h * t)));
}
TEST_F(Table2, TensorAndSequenceParallel) {
  // sbh/t·(34 + 5as/h)
  EXPECT_DOUBLE_EQ(bytes(plan(8, true, Recompute::none)), sbh / t * (34 + 5 * a * s / h));
}
TEST_F(Table2, TensorParallelSelective) {
  // sbh(10 + 24/t)
  EXPECT_DOUBLE_EQ(bytes(plan(8, false, Recompute::selective)), sbh * (10 + 24 / t));
}
TEST_F(Table2, TensorSequenceParallelSelective) {
  // 34·sbh/t
  EXPECT_DOUBLE_EQ(bytes(plan(8, true, Recompute::selective)), 34 * sbh / t);
}
TEST_F(Table2, FullRecompute) {
  // 2sbh (layer input only), /t with SP.
  EXPECT_DOUBLE_EQ(bytes(plan(8, false, Recompute::full)), 2 * sbh);
  EXPECT_DOUBLE_EQ(bytes(plan(8, true, Recompute::full)), 2 * sbh / t);
}
TEST_F(Table2, FlashDropsTheScoreTerm) {
  // Flash attention stores no s×s tensor: no recompute equals the selective rows.
  EXPECT_DOUBLE_EQ(bytes(plan(8, false, Recompute::none, AttentionImpl::flash)), sbh * (10 + 24 / t));
  EXPECT_DOUBLE_EQ(bytes(plan(8, true, Recompute::none, AttentionImpl::flash)), 34 * sbh / t);
  EXPECT_DOUBLE_EQ(bytes(plan(1, false, Recompute::none, AttentionImpl::flash)), 34 * sbh);
}
TEST_F(Table2, RecomputeWorkingSet) {
  // Full recompute re-creates the layer's plain-forward tensors on top of the kept
  // input: sbh(10 + 24/t + 5as/(ht)) − 2sbh (t = 8, naive), /t of the replicated
  // part with SP: sbh/t·(34 + 5as/h) − 2sbh/t.
  EXPECT_DOUBLE_EQ(recompute_working_set_bytes(m, plan(8, false, Recompute::full), false),
                   sbh * (10 + 24 / t + 5 * a * s / (h * t)) - 2 * sbh);
  EXPECT_DOUBLE_EQ(recompute_working_set_bytes(m, plan(8, true, Recompute::full), false),
                   sbh / t * (34 + 5 * a * s / h) - 2 * sbh / t);
  // Selective re-creates the attention core's scores: softmax 2, mask 1, dropout
  // output 2 bytes per score, 5·a·s²·b/t.
  EXPECT_DOUBLE_EQ(recompute_working_set_bytes(m, plan(8, true, Recompute::selective), false), 5 * a * s * s * b / t);
  // FlashAttention has no scores to re-create; no recompute, no working set.
  EXPECT_DOUBLE_EQ(recompute_working_set_bytes(m, plan(8, true, Recompute::selective, AttentionImpl::flash), false), 0);
  EXPECT_DOUBLE_EQ(recompute_working_set_bytes(m, plan(8, true, Recompute::none), false), 0);
  // Full with flash, t = 1: 34sbh − 2sbh.
  EXPECT_DOUBLE_EQ(recompute_working_set_bytes(m, plan(1, false, Recompute::full, AttentionImpl::flash), false),
                   32 * sbh);
}
TEST_F(Table2, ContextParallelHalvesAndMicroBatchDoubles) {
  // Every term is linear in the local sequence s/cp (naive scores: s/cp × s).
  Parallelism p = plan(8, true, Recompute::none);
  Parallelism c = p;
  c.cp = 2;
  EXPECT_DOUBLE_EQ(bytes(c), bytes(p) / 2);
  Parallelism mb = p;
  mb.micro_batch_size = 2;
  EXPECT_DOUBLE_EQ(bytes(mb), 2 * bytes(p));
}
TEST_F(Table2, Fp32) {
  // 4-byte activations, 1-byte masks, flash, no TP: replicated 4·4 + 2 = 18,
  // Q K V 12, projection input 4, MLP 2·4·4h/h = 32 → 66·sbh.
  Parallelism p = plan(1, false, Recompute::none, AttentionImpl::flash);
  p.precision = Precision::fp32;
  EXPECT_DOUBLE_EQ(bytes(p), 66 * sbh);
}

TEST(Activations, GqaSwiGlu) {
  // Llama-3 8B, flash, bf16, no TP, per sbh: replicated 8 (LN1, QKV, LN2 and MLP
  // inputs; no dropout masks: the preset has no dropout), Q K V 2·(h + 2048)/h = 3,
  // projection input 2, SwiGLU 3·2·ffn/h = 6·3.5 = 21 → 34·sbh.
  const double sbh = 8192.0 * 4096;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(preset("llama3-8b"), Parallelism{}, false), 34 * sbh);
}

TEST(Activations, DropoutMasksOnlyWithDropout) {
  // GPT-3 175B, t = 8, SP, naive attention, no recompute. With dropout (the default
  // 0.1): per sbh/t the replicated 4·2 + 2 masks, and per score softmax 2 + mask 1 +
  // dropout output 2. Without: no hidden masks, softmax alone per score, and no
  // embedding dropout mask.
  ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.tp = 8;
  p.sequence_parallel = true;
  p.attention = AttentionImpl::naive;
  const double sbh = 2048.0 * 12288, scores = (96.0 / 8) * 2048 * 2048;
  const double with = activation_bytes_per_layer(m, p, false);
  m.hidden_dropout = 0;
  EXPECT_DOUBLE_EQ(with - activation_bytes_per_layer(m, p, false), 2 * sbh / 8);
  m.attention_dropout = 0;
  EXPECT_DOUBLE_EQ(with - activation_bytes_per_layer(m, p, false), 2 * sbh / 8 + 3 * scores);
  EXPECT_DOUBLE_EQ(embedding_activation_bytes(m, p), 0);
}

TEST(Activations, UnfusedFp32SoftmaxSavesFp32Probabilities) {
  // Megatron's softmax without the fused kernel, in fp32: the saved probabilities take 4
  // bytes per score instead of 2 (bf16), with or without attention dropout.
  ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.tp = 8;
  p.attention = AttentionImpl::naive;
  const double scores = (96.0 / 8) * 2048 * 2048;
  const double fused = activation_bytes_per_layer(m, p, false);
  p.fp32_softmax_saved = true;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, p, false) - fused, 2 * scores);
  p.attention = AttentionImpl::flash;  // FlashAttention saves no scores
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, p, false), [&] {
    Parallelism q = p;
    q.fp32_softmax_saved = false;
    return activation_bytes_per_layer(m, q, false);
  }());
}

TEST(Activations, Moe) {
  // Mixtral 8x7B, flash, bf16, no TP/EP, s = 32768, b = 1, per sbh: replicated 8 (no
  // dropout masks), Q K V 3, projection input 2; router probabilities 4·8/h = 1/128;
  // two routed copies per token, each: dispatched input 2 + expert output 2 + SwiGLU
  // 6·3.5 = 25 → 50. Total (63 + 1/128)·sbh.
  const double sbh = 32768.0 * 4096;
  Parallelism p;
  p.moe_capacity_factor = 0;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(preset("mixtral-8x7b"), p, true), (63 + 1.0 / 128) * sbh);
  // Megatron-core's experts weight their activation: the fused weighted SwiGLU saves no
  // expert output (−2 per copy, two copies: 59); unfused, the activation output instead,
  // 2·3.5 = 7 per copy (73).
  p.moe_probs_in_experts = true;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(preset("mixtral-8x7b"), p, true), (59 + 1.0 / 128) * sbh);
  p.moe_fused_weighted_act = false;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(preset("mixtral-8x7b"), p, true), (73 + 1.0 / 128) * sbh);
}

// etp 1 under tp 2: each GPU routes half the tokens into whole experts: the routed
// tensors' bytes are those of etp 2 (half the rows, twice the ffn) but the dispatched
// input and expert output (h wide) halve.
TEST(Activations, MoeExpertTensorParallelOne) {
  const ModelSpec m = preset("mixtral-8x7b");
  Parallelism p = moe_tp2_ep8();
  const double split = activation_bytes_per_layer(m, p, true);
  p.etp = 1;
  const double whole = activation_bytes_per_layer(m, p, true);
  const double routed_split = 32768.0 * 2 * 8 / 8;  // T·top_k·ep/E rows on each GPU at etp 2
  EXPECT_DOUBLE_EQ(split - whole, 2.0 * 2 * 4096 * (routed_split - routed_split / 2));
  // The experts' optimizer states shard over tp·cp·dp / (etp·ep) = 2 ranks.
  EXPECT_EQ(p.expert_dp(), 2);
}

// Megatron's deferred output-layer weight gradients: per deferred micro-batch the layer's
// input (the SP shard) and its logits gradient, for min(limit, m − 1) micro-batches.
TEST(Activations, DeferredHeadWeightGradients) {
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.tp = 8;
  p.sequence_parallel = true;
  p.num_microbatches = 4;
  EXPECT_DOUBLE_EQ(deferred_head_wgrad_bytes(m, p), 0.0);
  p.defer_head_wgrad = true;
  const double one = 2.0 * 2048 * (12288.0 / 8 + 6400);        // bf16, s = 2048, V/t = 51200/8
  EXPECT_DOUBLE_EQ(deferred_head_wgrad_bytes(m, p), 3 * one);  // no limit: m − 1
  p.wgrad_deferral_limit = 2;
  EXPECT_DOUBLE_EQ(deferred_head_wgrad_bytes(m, p), 2 * one);
  p.num_microbatches = 1;
  EXPECT_DOUBLE_EQ(deferred_head_wgrad_bytes(m, p), 0.0);
  // It adds to the last stage's peak only.
  p.pp = 2;
  p.dp = 16;
  p.num_microbatches = 8;
  Parallelism plain = p;
  plain.defer_head_wgrad = false;
  const auto with = analytical_memory(m, p), without = analytical_memory(m, plain);
  EXPECT_DOUBLE_EQ(with[0].peak, without[0].peak);
  EXPECT_DOUBLE_EQ(with[1].peak - without[1].peak, 2 * one);
}

TEST(Activations, EmbeddingAndHead) {
  // GPT-3 175B, t = 8, SP: embedding dropout mask s·b·h/t (1 byte);
  // head: final-norm and logits inputs 2·2·sbh/t + fp32 softmax and bf16 logits
  // gradient (4 + 2)·s·b·V/t.
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.tp = 8;
  p.sequence_parallel = true;
  const double sbh = 2048.0 * 12288;
  EXPECT_DOUBLE_EQ(embedding_activation_bytes(m, p), sbh / 8);
  EXPECT_DOUBLE_EQ(head_activation_bytes(m, p), 4 * sbh / 8 + 6.0 * 2048 * 6400);
  // A fused loss kernel keeps the bf16 logits and writes the bf16 gradient: 2 + 2.
  p.loss_kernel = LossKernel::fused;
  EXPECT_DOUBLE_EQ(head_activation_bytes(m, p), 4 * sbh / 8 + 4.0 * 2048 * 6400);
}

TEST(Pipeline, InFlightMicrobatches) {
  Parallelism p;
  p.pp = 4;
  p.num_microbatches = 16;
  // 1F1B: min(m, p − stage).
  EXPECT_EQ(in_flight_microbatch_chunks(p, 0), 4);
  EXPECT_EQ(in_flight_microbatch_chunks(p, 3), 1);
  p.num_microbatches = 2;
  EXPECT_EQ(in_flight_microbatch_chunks(p, 0), 2);
  // GPipe: all m.
  p.schedule = Schedule::gpipe;
  p.num_microbatches = 16;
  EXPECT_EQ(in_flight_microbatch_chunks(p, 0), 16);
  EXPECT_EQ(in_flight_microbatch_chunks(p, 3), 16);
  // Interleaved, p = 4, v = 2, m = 16: stage 0 warm-up 2·3 + 1·4 = 10, +1 = 11
  // chunks of L/8 layers = 11L/8 = L·(1 + (p−1)/(p·v)) (Korthikanti §4.2.3).
  p.schedule = Schedule::interleaved_1f1b;
  p.vpp = 2;
  EXPECT_EQ(in_flight_microbatch_chunks(p, 0), 11);
  EXPECT_EQ(in_flight_microbatch_chunks(p, 3), 5);  // 0·2 + 4 + 1
  // m == pp: Megatron-core keeps the same warm-up (the 2021 "m == pp: every
  // forward first" case is gone): last stage 0·2 + 4 + 1 = 5 of 8; stage 0's
  // 2·3 + 4 + 1 = 11 is capped at m·v = 8 (all forwards first).
  p.num_microbatches = 4;
  EXPECT_EQ(in_flight_microbatch_chunks(p, 3), 5);
  EXPECT_EQ(in_flight_microbatch_chunks(p, 0), 8);
  // Virtual stages need the interleaved schedule.
  p.schedule = Schedule::one_f_one_b;
  EXPECT_THROW(in_flight_microbatch_chunks(p, 0), std::invalid_argument);
  EXPECT_THROW(in_flight_microbatch_chunks(Parallelism{}, 1), std::invalid_argument);
}

TEST(Pipeline, LayerAssignment) {
  const ModelSpec m = preset("gpt3-1.7b");  // 24 layers
  Parallelism p;
  p.pp = 4;
  EXPECT_EQ(layers_per_stage(m, p), (std::vector<int>{6, 6, 6, 6}));
  p.pipeline_layers = {5, 7, 7, 5};
  EXPECT_EQ(layers_per_stage(m, p), (std::vector<int>{5, 7, 7, 5}));
  p.pipeline_layers = {5, 7, 7, 4};
  EXPECT_THROW(layers_per_stage(m, p), std::invalid_argument);
  p.pipeline_layers.clear();
  p.pp = 5;
  EXPECT_THROW(layers_per_stage(m, p), std::invalid_argument);
  // Interleaving, pp = 2, vpp = 2 → 6 layers per virtual stage, in model order
  // (chunk 0: stage 0, stage 1; chunk 1: stage 0, stage 1).
  p.pp = 2;
  p.vpp = 2;
  p.schedule = Schedule::interleaved_1f1b;
  EXPECT_EQ(chunk_layers(m, p, 0, 0).first, 0);
  EXPECT_EQ(chunk_layers(m, p, 1, 0).first, 6);
  EXPECT_EQ(chunk_layers(m, p, 0, 1).first, 12);
  EXPECT_EQ(chunk_layers(m, p, 1, 1).first, 18);
  EXPECT_EQ(chunk_layers(m, p, 1, 1).count, 6);
  // Megatron get_model_chunk_id, 4 micro-batches: forwards 0–1 chunk 0, 2–3 chunk 1, 4 chunk 0.
  p.num_microbatches = 4;
  EXPECT_EQ(forward_chunk(p, 1), 0);
  EXPECT_EQ(forward_chunk(p, 2), 1);
  EXPECT_EQ(forward_chunk(p, 4), 0);
  // microbatch_group_size_per_vp_stage 3, 5 micro-batches: schedules.py's own example
  // ("PP2 N3M5 with VP2"): chunks 0 0 0 1 1 1 0 0 1 1.
  p.num_microbatches = 5;
  p.microbatch_group = 3;
  std::vector<int> chunks;
  for (int k = 0; k < 10; ++k) chunks.push_back(forward_chunk(p, k));
  EXPECT_EQ(chunks, (std::vector<int>{0, 0, 0, 1, 1, 1, 0, 0, 1, 1}));
  p.microbatch_group = 0;
  p.num_microbatches = 1;
  // One count per virtual stage (pp × vpp, chunk-major): taken as given, the ends may be 0.
  p.pipeline_layers = {5, 6, 7, 6};  // chunk 0: stage 0 5, stage 1 6; chunk 1: stage 0 7, stage 1 6
  EXPECT_EQ(layers_per_stage(m, p), (std::vector<int>{12, 12}));
  EXPECT_EQ(chunk_layers(m, p, 1, 0).first, 5);
  EXPECT_EQ(chunk_layers(m, p, 0, 1).first, 11);
  EXPECT_EQ(chunk_layers(m, p, 0, 1).count, 7);
  p.pipeline_layers = {0, 12, 12, 0};  // embedding-only first chunk, head-only last chunk
  EXPECT_EQ(chunk_layers(m, p, 0, 0).count, 0);
  EXPECT_EQ(chunk_layers(m, p, 1, 0).first, 0);
  EXPECT_EQ(chunk_layers(m, p, 1, 1).count, 0);
  EXPECT_EQ(layers_per_stage(m, p), (std::vector<int>{12, 12}));
  p.pipeline_layers = {6, 0, 12, 6};  // a middle virtual stage without a layer
  EXPECT_THROW(layers_per_stage(m, p), std::invalid_argument);
  p.pipeline_layers = {6, 6, 6};  // neither pp nor pp × vpp entries
  EXPECT_THROW(layers_per_stage(m, p), std::invalid_argument);
  p.pipeline_layers = {0, 24};  // a whole stage of 2 chunks without a layer
  EXPECT_THROW(layers_per_stage(m, p), std::invalid_argument);
}

TEST(States, StageParamsAndTiedEmbeddingCopy) {
  // GPT-3 175B, t = 8, p = 8: 12 layers per stage of 226,576,896 (params_test)
  // = 2,718,922,752; stage 0 adds the word embedding V/t·h = 78,643,200 and the
  // positions s·h = 25,165,824; the last stage adds its final LayerNorm 2h = 24,576
  // and the tied word-embedding copy 78,643,200.
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.tp = 8;
  p.pp = 8;
  EXPECT_EQ(stage_params(m, p, 3).total(), 2'718'922'752);
  EXPECT_EQ(stage_params(m, p, 0).total(), 2'718'922'752 + 78'643'200 + 25'165'824);
  EXPECT_EQ(stage_params(m, p, 7).total(), 2'718'922'752 + 24'576 + 78'643'200);
  // pp = 1, tp = 1: exactly the model's parameter count (no copy).
  EXPECT_EQ(stage_params(m, Parallelism{}, 0).total(), count_params(m).total);
}

TEST(States, ZeroOverDataAndExpertDataParallel) {
  // Mixtral 8x7B, tp = 1, pp = 1, ep = 8, dp = 8, ZeRO-1: non-expert params
  // (embeddings 262,144,000 + final norm 4,096 + 32 × 41,984,000) = 1,605,636,096
  // with optimizer over dp = 8; expert params 32 × 176,160,768 = 5,637,144,576
  // (one local expert) with optimizer over dp/ep = 1.
  const ModelSpec m = preset("mixtral-8x7b");
  Parallelism p;
  p.ep = 8;
  p.dp = 8;
  p.zero_stage = 1;
  const double dense = 1'605'636'096.0, expert = 5'637'144'576.0;
  const ModelStates s = model_states(m, p, 0);
  // Megatron layout, bf16: 2-byte weights, 4-byte main grads, 12 bytes sharded.
  EXPECT_DOUBLE_EQ(s.params, 2 * (dense + expert));
  EXPECT_DOUBLE_EQ(s.grads, 4 * (dense + expert));
  EXPECT_DOUBLE_EQ(s.optimizer, 12 * dense / 8 + 12 * expert);
  // Offload: the optimizer leaves the GPU; parameter offload needs ZeRO-3.
  p.offload_optimizer = true;
  EXPECT_DOUBLE_EQ(model_states(m, p, 0).optimizer, 0);
  p.offload_params = true;
  EXPECT_THROW(model_states(m, p, 0), std::invalid_argument);
  p.zero_stage = 3;
  EXPECT_DOUBLE_EQ(model_states(m, p, 0).params, 0);
  EXPECT_DOUBLE_EQ(model_states(m, p, 0).grads, 4 * dense / 8 + 4 * expert);
}

// Megatron's all-gather MoE dispatcher gathers into the sequence-parallel gather's buffer
// the tokens of the tp × ep group: ep times the tp-gathered tokens (etp = tp), or ep times
// the sequence shard when the experts are whole (etp 1).
TEST(Buffers, MoeAllGatherDispatcher) {
  const ModelSpec m = preset("mixtral-8x7b");
  Parallelism p = moe_tp2_ep8();
  const double sbh = 2.0 * 32768 * 4096;  // bf16, s = 32768, b = 1, h = 4096
  const double plain = buffer_bytes(m, p, 0);
  p.moe_allgather = true;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0) - plain, 8 * sbh - sbh);
  p.etp = 1;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0) - plain, 8 * sbh / 2 - sbh);
}

TEST(Buffers, Components) {
  // GPT-3 175B, t = 8, no SP, flash, ZeRO-0, pp = 1: nothing held throughout. The
  // largest backward transient, max(fp32 dQ 4·s·(a/t)·d = 12,582,912, MLP-up gradient
  // 2·s·4h/t = 25,165,824) = 25,165,824, lives only during a layer's backward.
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.tp = 8;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 0.0);
  EXPECT_DOUBLE_EQ(backward_transient_bytes(m, p, false), 25'165'824.0);
  // pp = 2 adds p2p receive buffers 2·2·s·h = 100,663,296. Megatron's ZeRO-1
  // (distributed optimizer) reduces in place in its grad buffer: nothing more.
  p.pp = 2;
  p.dp = 64;
  p.zero_stage = 1;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0);
  // DeepSpeed copies gradients into a reduce bucket of 5e8 bf16 elements (the
  // stage holds 48 × 226,576,896 + 78,643,200 > 5e8 parameters): 1e9 bytes.
  p.state_layout = StateLayout::deepspeed;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0 + 1e9);
  // ZeRO-3 adds two gathered layers: 2 × 226,576,896 × 2 bytes.
  p.zero_stage = 3;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0 + 1e9 + 4.0 * 226'576'896);
  // FSDP has no reduce bucket but keeps the unit's unsharded bf16 gradient.
  p.state_layout = StateLayout::fsdp;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0 + 6.0 * 226'576'896);
  // reduce_dtype fp32: the fp32 copy the reduce-scatter reads, beside the bf16 one.
  p.fsdp_reduce_bytes = 4;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0 + 10.0 * 226'576'896);
  p.fsdp_reduce_bytes = 2;  // bf16, the parameter dtype: no copy
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0 + 6.0 * 226'576'896);
  // fp32 training reducing in bf16: the bf16 copy beside the fp32 gradient, and the
  // gathered layers in fp32 (4 × 2 + 4 + 2 bytes per parameter).
  p.precision = Precision::fp32;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0) - buffer_bytes(
                                               m,
                                               [&] {
                                                 Parallelism q = p;
                                                 q.fsdp_reduce_bytes = 0;
                                                 return q;
                                               }(),
                                               0),
                   2.0 * 226'576'896);
  p.precision = Precision::bf16;
  p.fsdp_reduce_bytes = 0;
  p.state_layout = StateLayout::megatron;
  // SP (t = 8) divides the p2p buffers by t and adds one gathered input 2·s·h.
  p.zero_stage = 0;
  p.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0 / 8 + 50'331'648.0);
  // PyTorch's cuBLAS workspace is held twice: the forward's thread and autograd's.
  p.blas_workspace = 33'554'432.0;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0 / 8 + 50'331'648.0 + 67'108'864.0);
  // Transformer Engine's workspace, once.
  p.te_workspace = 33'554'432.0;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0 / 8 + 50'331'648.0 + 67'108'864.0 + 33'554'432.0);
  // Megatron-core's local attention keeps its scores (naive: b·(a/t)·s·s·2 = 100,663,296 B).
  p.te_workspace = 0;
  p.score_buffer = true;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0 / 8 + 50'331'648.0 + 67'108'864.0);  // flash: none
  p.attention = AttentionImpl::naive;
  EXPECT_DOUBLE_EQ(buffer_bytes(m, p, 0), 100'663'296.0 / 8 + 50'331'648.0 + 67'108'864.0 + 2.0 * 12 * 2048.0 * 2048.0);
}

TEST(Analytical, OneFOneBMatchesTheAllocationRule) {
  // GPT-3 175B, t = 8, p = 8, SP, selective, m = 64: stage 0 holds p = 8
  // micro-batches × 12 layers × 34·sbh/t plus 8 embedding masks sbh/t; the last
  // stage holds one micro-batch and one head activation.
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p;
  p.tp = 8;
  p.pp = 8;
  p.dp = 16;
  p.sequence_parallel = true;
  p.recompute = Recompute::selective;
  p.zero_stage = 1;
  p.num_microbatches = 64;
  const double sbh = 2048.0 * 12288;
  const auto mem = analytical_memory(m, p);
  ASSERT_EQ(mem.size(), 8u);
  // Every stage but the last adds the first backward's largest transient; the last
  // frees its head (larger) before the layers' backward.
  const double transient = backward_transient_bytes(m, p, false);
  EXPECT_DOUBLE_EQ(mem[0].activations, 8 * 12 * 34 * sbh / 8 + 8 * sbh / 8 + transient);
  EXPECT_DOUBLE_EQ(mem[7].activations, 12 * 34 * sbh / 8 + head_activation_bytes(m, p));
  EXPECT_DOUBLE_EQ(mem[4].activations, 4 * 12 * 34 * sbh / 8 + transient);
  for (const auto& s : mem) {
    const ModelStates ms = model_states(m, p, s.stage);
    EXPECT_DOUBLE_EQ(s.params, ms.params);
    EXPECT_DOUBLE_EQ(s.optimizer, ms.optimizer);
    EXPECT_DOUBLE_EQ(s.buffers, buffer_bytes(m, p, s.stage));
    EXPECT_DOUBLE_EQ(s.peak, s.params + s.grads + s.optimizer + s.activations + s.buffers);
    EXPECT_DOUBLE_EQ(s.allocator, 0);
  }
  // Stage 0 with the distributed optimizer over dp = 16: 2,822,731,776 params ×
  // (6 + 12/16) bytes (Megatron bf16 row).
  EXPECT_DOUBLE_EQ(mem[0].params + mem[0].grads + mem[0].optimizer, 2'822'731'776.0 * 6.75);
}

TEST(Analytical, InterleavedStageZero) {
  // GPT-3 1.7B (24 layers), p = 4, v = 2, m = 16, flash, no TP: stage 0 holds 11
  // chunks of 3 layers = 33 layers = L·(1 + (p−1)/(p·v)) = 24·11/8, each 34·sbh;
  // forwards 0–3 and 8–10 are chunk 0 → 7 embedding masks sbh.
  const ModelSpec m = preset("gpt3-1.7b");
  Parallelism p;
  p.pp = 4;
  p.vpp = 2;
  p.schedule = Schedule::interleaved_1f1b;
  p.num_microbatches = 16;
  const double sbh = 2048.0 * 2304;
  const auto mem = analytical_memory(m, p);
  EXPECT_DOUBLE_EQ(mem[0].activations, 33 * 34 * sbh + 7 * sbh + backward_transient_bytes(m, p, false));
  // Last stage: 5 forwards in flight (chunks 0,0,0,0,1): 15 layers and one head.
  EXPECT_DOUBLE_EQ(mem[3].activations, 15 * 34 * sbh + head_activation_bytes(m, p));
}

TEST(Analytical, FullRecomputeAddsOneLayerWorkingSet) {
  // GPT-3 1.7B, pp = 2, m = 2, flash, full recompute. Stage 0 holds two
  // micro-batches of 12 kept inputs (2sbh) + embedding mask sbh, and during the
  // first backward one layer re-created: 34sbh − 2sbh.
  const ModelSpec m = preset("gpt3-1.7b");
  Parallelism p;
  p.pp = 2;
  p.num_microbatches = 2;
  p.recompute = Recompute::full;
  const double sbh = 2048.0 * 2304;
  const auto mem = analytical_memory(m, p);
  const double transient = backward_transient_bytes(m, p, false);
  EXPECT_DOUBLE_EQ(mem[0].activations, 2 * (12 * 2 * sbh + sbh) + 32 * sbh + transient);
  // The last stage frees its head (4sbh + s·V·6 bytes, larger than 32sbh and the
  // transient) before the layers' backward: the working set fits in what the head left.
  const double head = head_activation_bytes(m, p);
  ASSERT_GT(head, 32 * sbh + transient);
  EXPECT_DOUBLE_EQ(mem[1].activations, 12 * 2 * sbh + head);
}

TEST(Analytical, AllocatorOverheadScalesThePeak) {
  const ModelSpec m = preset("gpt3-1.7b");
  Parallelism p;
  const double allocated = analytical_memory(m, p)[0].peak;
  p.allocator_overhead = 0.1;
  const auto mem = analytical_memory(m, p);
  EXPECT_NEAR(mem[0].peak, 1.1 * allocated, 1e-9 * allocated);
  EXPECT_NEAR(mem[0].allocator, 0.1 * allocated, 1e-9 * allocated);
  p.allocator_overhead = -0.1;
  EXPECT_THROW(analytical_memory(m, p), std::invalid_argument);
}

}  // namespace
}  // namespace ptsim::models
