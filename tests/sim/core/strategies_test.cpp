// Each parallel strategy alone and mixed, against hand-derived expectations.
#include <gtest/gtest.h>

#include "models/memory.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

using testing::FreeCollectives;
using testing::tiny_gpt_yaml;

constexpr int kDp = static_cast<int>(Dim::dp), kTp = static_cast<int>(Dim::tp), kCp = static_cast<int>(Dim::cp),
              kEp = static_cast<int>(Dim::ep);

Result run(const std::string& yaml, const std::vector<std::string>& sets = {}, bool fold = false) {
  const Scenario s = parse_scenario(yaml, "test", sets);
  SimulateOptions o;
  o.fold = fold;
  return simulate(s, o).result;
}

TEST(Strategies, ZeroCommunicationVolumeMatchesThePaper) {
  // One stage, one micro-batch, dp = n: Ψ parameters of 2 bytes, fp16 as in the paper.
  // ZeRO paper §7: DP / ZeRO-1 / ZeRO-2 move 2Ψ per GPU (reduce-scatter + all-gather,
  // each (n−1)/n·Ψ), ZeRO-3 3Ψ (a second parameter all-gather for the backward).
  // In bf16 Megatron reduces the gradients in fp32 (framework_profile.cpp): their
  // half of each volume doubles, so DP moves 4Ψ, ZeRO-1/2 3Ψ and ZeRO-3 4Ψ.
  const int n = 4;
  for (const char* precision : {"fp16", "bf16"})
    for (int stage = 0; stage <= 3; ++stage) {
      const std::string yaml = tiny_gpt_yaml(1, n, 1, 4, n, fmt::format("  zero_stage: {}", stage), 51200);
      const Scenario s = parse_scenario(yaml, "test", {std::string("training.precision=") + precision});
      const double psi_bytes = 2.0 * static_cast<double>(models::stage_params(s.model, s.plan.par, 0).total());
      const bool fp16 = std::string(precision) == "fp16";
      const double units = fp16 ? (stage == 3 ? 3.0 : 2.0) : (stage == 1 || stage == 2 ? 3.0 : 4.0);
      const double expected = units * (n - 1) / n * psi_bytes;
      const Result r = simulate(s).result;
      EXPECT_NEAR(r.comm_bytes_per_gpu[kDp], expected, 1e-9 * expected) << precision << " ZeRO-" << stage;
    }
}

TEST(Strategies, ZeroStagesShrinkModelStates) {
  const std::string yaml = tiny_gpt_yaml(1, 8, 1, 4, 8, "", 51200);
  double last = 1e300;
  for (int stage = 0; stage <= 3; ++stage) {
    const Result r = run(yaml, {fmt::format("parallel.zero_stage={}", stage)});
    const auto& m = r.per_stage[0];
    const double states = m.params + m.grads + m.optimizer;
    EXPECT_LT(states, last) << stage;
    last = states;
  }
}

TEST(Strategies, SequenceParallelKeepsTpVolumeAndCutsActivations) {
  // All-reduce = reduce-scatter + all-gather: the same 2(n−1)/n·S per GPU, while
  // the replicated activations are split by t (Korthikanti Table 2).
  // One stage (no pipeline scatter/gather): every all-reduce of the plain run is
  // an all-gather + reduce-scatter pair with SP, byte for byte. Megatron adds one
  // all-gather of S per column-parallel linear in backward (its input, kept sharded,
  // again for the weight gradient): 2 per layer and the logits GEMM, per micro-batch.
  const std::string yaml = tiny_gpt_yaml(1, 1, 4, 4, 4, "", 51200);
  const Result plain = run(yaml), sp = run(yaml, {"parallel.sequence_parallel=true"});
  const double s_bytes = 1.0 * 128 * 1024 * 2, regather = 0.75 * s_bytes;  // (n − 1)/n·S per GPU, n = 4
  EXPECT_DOUBLE_EQ(sp.comm_bytes_per_gpu[kTp], plain.comm_bytes_per_gpu[kTp] + (2 * 4 + 1) * 4 * regather);
  EXPECT_LT(sp.per_stage[0].activations, 0.8 * plain.per_stage[0].activations);
}

TEST(Strategies, GPipeHoldsEveryMicrobatchOneFOneBAtMostP) {
  const int p = 4, m = 12;
  const std::string yaml = tiny_gpt_yaml(p, 1, 1, 8, m, "", 51200);
  const Scenario s = parse_scenario(yaml, "test");
  const double per_layer = models::activation_bytes_per_layer(s.model, s.plan.par, false);
  const Result f1b = run(yaml), gpipe = run(yaml, {"parallel.pipeline_schedule=gpipe"});
  // Stage 1 (no embedding/head): 2 layers per micro-batch; GPipe holds all m,
  // 1F1B holds p − 1 = 3 on stage 1; both beside the first backward's largest transient.
  const double t = models::backward_transient_bytes(s.model, s.plan.par, false);
  EXPECT_NEAR(gpipe.per_stage[1].activations, m * 2 * per_layer + t, 1e-6 * gpipe.per_stage[1].activations);
  EXPECT_NEAR(f1b.per_stage[1].activations, (p - 1) * 2 * per_layer + t, 1e-6 * f1b.per_stage[1].activations);
}

TEST(Strategies, InterleavingShrinksTheBubble) {
  const std::string yaml = tiny_gpt_yaml(4, 1, 1, 16, 8, "", 51200);
  const Result plain = run(yaml);
  const Result inter = run(yaml, {"parallel.virtual_pipeline_stages=2"});
  EXPECT_LT(inter.bubble_fraction, plain.bubble_fraction);
  EXPECT_GT(inter.comm_bytes_per_gpu[static_cast<int>(Dim::pp)], plain.comm_bytes_per_gpu[static_cast<int>(Dim::pp)]);
}

TEST(Strategies, UnevenPipelineSplitShowsInTheBubble) {
  const std::string yaml = tiny_gpt_yaml(2, 1, 1, 8, 8, "", 51200);
  const Result even = run(yaml), uneven = run(yaml, {"parallel.pipeline_layers=[2, 6]"});
  EXPECT_GT(uneven.iteration_time_s, even.iteration_time_s);
  EXPECT_GT(uneven.bubble_fraction, even.bubble_fraction);
}

TEST(Strategies, ContextParallelExchangesKeysAndValues) {
  const std::string yaml = tiny_gpt_yaml(1, 2, 1, 4, 4, "  context_parallel: 2", 51200);
  const Result r = run(yaml);
  EXPECT_GT(r.comm_bytes_per_gpu[kCp], 0);
  // dp = 2 GPUs / cp 2 = 1, so m = 4 micro-batches. Each rank holds K and V of
  // s/cp = 64 tokens: 2·64·h·2 bytes; a ring all-gather over 2 ranks sends one
  // chunk. Per layer and micro-batch: forward K/V, backward K/V + dK/dV = 3
  // rings; 4 layers × 4 micro-batches.
  const double chunk = 2.0 * 64 * 1024 * 2;
  EXPECT_DOUBLE_EQ(r.comm_bytes_per_gpu[kCp], 3 * chunk * 4 * 4);
  // Half the sequence per GPU: activations per layer halve.
  const Result no_cp = run(tiny_gpt_yaml(1, 4, 1, 4, 4, "", 51200));
  EXPECT_NEAR(r.per_stage[0].activations, no_cp.per_stage[0].activations / 2, 0.05 * r.per_stage[0].activations);
}

// Megatron's --tp-comm-overlap (Transformer Engine's userbuffers, TE v1.9 defaults): the
// sequence-parallel all-gathers run beside the QKV / FC1 GEMMs and the proj / FC2
// input-gradient GEMMs, the reduce-scatters beside proj / FC2 but for the last of four
// splits. The same bytes and FLOPs; less tensor-parallel time exposed, never less than the
// last splits' reduce-scatters; ten s x b x h bf16 userbuffers more memory.
TEST(Strategies, TpCommOverlapHidesTheSequenceParallelCollectivesInTheirGemms) {
  const std::string yaml = tiny_gpt_yaml(2, 1, 4, 4, 8, "  sequence_parallel: true", 51200);
  for (const char* recompute : {"parallel.recompute=none", "parallel.recompute=full"}) {
    const Result plain = run(yaml, {recompute});
    const Result ub = run(yaml, {recompute, "training.megatron.tp_comm_overlap=true"});
    EXPECT_LT(ub.iteration_time_s, plain.iteration_time_s) << recompute;
    EXPECT_LT(ub.exposed_comm_s[kTp], 0.5 * plain.exposed_comm_s[kTp]) << recompute;
    EXPECT_GT(ub.exposed_comm_s[kTp], 0) << recompute;
    EXPECT_NEAR(ub.comm_bytes_per_gpu[kTp], plain.comm_bytes_per_gpu[kTp], 1e-9 * plain.comm_bytes_per_gpu[kTp])
        << recompute;
    EXPECT_DOUBLE_EQ(ub.model_flops_per_iteration, plain.model_flops_per_iteration) << recompute;
    // s = 128 tokens, micro-batch 1, h = 1024: 10 x 128 x 1024 x 2 bytes.
    EXPECT_NEAR(ub.per_stage[0].buffers - plain.per_stage[0].buffers, 10.0 * 128 * 1024 * 2, 1.0) << recompute;
  }
}

TEST(Strategies, RecomputeTradesTimeForMemory) {
  const std::string yaml = tiny_gpt_yaml(2, 1, 2, 4, 8, "  sequence_parallel: true", 51200);
  const Result none = run(yaml, {"parallel.recompute=none", "training.attention=naive"});
  const Result sel = run(yaml, {"parallel.recompute=selective", "training.attention=naive"});
  const Result full = run(yaml, {"parallel.recompute=full", "training.attention=naive"});
  EXPECT_LT(none.iteration_time_s, sel.iteration_time_s);
  EXPECT_LT(sel.iteration_time_s, full.iteration_time_s);
  EXPECT_GT(none.per_stage[0].activations, sel.per_stage[0].activations);
  EXPECT_GT(sel.per_stage[0].activations, full.per_stage[0].activations);
  EXPECT_DOUBLE_EQ(none.hfu, none.mfu);
  EXPECT_GT(full.hfu, full.mfu);
  // Megatron SC'21: model FLOPs 72·Bslh²(1 + s/6h + V/12lh); full recompute adds
  // one forward of every layer, 24·Bslh²(1 + s/6h) (Eq. 3's 96 = 72 + 24).
  // s = 128, h = 1024, l = 4, V = 51200.
  const double s_6h = 128.0 / (6 * 1024), v_12lh = 51200.0 / (12 * 4 * 1024);
  EXPECT_NEAR(full.hfu / full.mfu, (72 * (1 + s_6h + v_12lh) + 24 * (1 + s_6h)) / (72 * (1 + s_6h + v_12lh)), 1e-9);
}

TEST(Strategies, OptimizerOffloadMovesStateOffTheGpu) {
  const std::string yaml = tiny_gpt_yaml(1, 2, 1, 4, 2, "  zero_stage: 1", 51200);
  const Result gpu = run(yaml), off = run(yaml, {"parallel.offload_optimizer=true"});
  EXPECT_EQ(off.per_stage[0].optimizer, 0);
  EXPECT_GT(gpu.per_stage[0].optimizer, 0);
  EXPECT_GT(off.iteration_time_s, gpu.iteration_time_s);
}

TEST(Strategies, ParamOffloadNeedsZero3AndCostsPcieTime) {
  const std::string yaml = tiny_gpt_yaml(1, 2, 1, 4, 2, "  zero_stage: 3", 51200);
  const Result z3 = run(yaml), off = run(yaml, {"parallel.offload_params=true"});
  EXPECT_EQ(off.per_stage[0].params, 0);
  EXPECT_GT(off.iteration_time_s, z3.iteration_time_s);
}

TEST(Strategies, OverlappedGradientReductionHidesDpTime) {
  const std::string yaml = tiny_gpt_yaml(2, 8, 1, 8, 16, "", 51200);
  const Result overlap = run(yaml), serial = run(yaml, {"parallel.overlap_grad_reduce=false"});
  EXPECT_LT(overlap.exposed_comm_s[kDp], serial.exposed_comm_s[kDp]);
  EXPECT_DOUBLE_EQ(overlap.comm_bytes_per_gpu[kDp], serial.comm_bytes_per_gpu[kDp]);
}

TEST(Strategies, Fp8IsFasterOnHopper) {
  const std::string yaml = tiny_gpt_yaml(1, 1, 1, 4, 2, "", 51200);
  const Result bf16 = run(yaml, {"cluster.gpu=h100-sxm"}),
               fp8 = run(yaml, {"cluster.gpu=h100-sxm", "training.precision=fp8"});
  EXPECT_LT(fp8.iteration_time_s, bf16.iteration_time_s);
}

TEST(Strategies, MixtralWithExpertParallelism) {
  const std::string yaml = R"(name: mixtral
model: { preset: mixtral-8x7b }
cluster: { gpu: h100-sxm, num_gpus: 64, gpus_per_node: 8 }
parallel: { tensor_parallel: 2, pipeline_parallel: 4, expert_parallel: 8, sequence_parallel: true, zero_stage: 1, recompute: selective }
training: { global_batch_size: 64, micro_batch_size: 1 }
)";
  const Result balanced = run(yaml, {}, true);
  EXPECT_GT(balanced.comm_bytes_per_gpu[kEp], 0);
  EXPECT_GT(balanced.exposed_comm_s[kEp], 0);
  const Result hot = run(yaml, {"model.moe.load_imbalance=2"}, true);
  EXPECT_GT(hot.iteration_time_s, balanced.iteration_time_s);
  // MoE parallel folding (expert_tensor_parallel 1): whole experts, the EP group of 8 over
  // tp × dp ranks inside a node, and no tensor-parallel collectives around the MoE block;
  // each GPU holds twice the expert weights, the same expert optimizer state (sharded over
  // twice the ranks), and sends the same routed tokens.
  const Result folded = run(yaml, {"parallel.expert_tensor_parallel=1"}, true);
  EXPECT_LT(folded.comm_bytes_per_gpu[kTp], balanced.comm_bytes_per_gpu[kTp]);
  EXPECT_DOUBLE_EQ(folded.comm_bytes_per_gpu[kEp], balanced.comm_bytes_per_gpu[kEp]);
  EXPECT_LT(folded.exposed_comm_s[kEp], balanced.exposed_comm_s[kEp]);
  EXPECT_GT(folded.per_stage[0].params, balanced.per_stage[0].params);
  EXPECT_NEAR(folded.per_stage[0].optimizer, balanced.per_stage[0].optimizer, 1.0);
  EXPECT_DOUBLE_EQ(folded.model_flops_per_iteration, balanced.model_flops_per_iteration);
  // Megatron's all-gather dispatcher: per layer and pass a gather of the 8 EP ranks'
  // tp-gathered tokens (bf16) and a reduce-scatter of the output in fp32, 8 · (2 + 4) bytes a
  // token and hidden unit against the all-to-all's four exchanges of top_k / tp = 1 copy
  // (4 · 2): 12 times the EP bytes, with the gathered tokens in the buffers.
  // Experts tensor-parallel over half the TP group (tp 4, etp 2): the EP all-to-all as at
  // etp 1 (each GPU its sequence shard's routed copies) plus an all-gather and a
  // reduce-scatter per pass over the etp pair of the received tokens; no MoE-block TP
  // collectives. Each GPU holds half an expert.
  const std::vector<std::string> tp4 = {"parallel.tensor_parallel=4", "parallel.pipeline_parallel=2"};
  std::vector<std::string> etp2 = tp4;
  etp2.push_back("parallel.expert_tensor_parallel=2");
  const Result at_tp = run(yaml, tp4, true), half = run(yaml, etp2, true);
  EXPECT_EQ(at_tp.comm_bytes_per_gpu[static_cast<int>(Dim::etp)], 0);
  EXPECT_GT(half.comm_bytes_per_gpu[static_cast<int>(Dim::etp)], 0);
  EXPECT_LT(half.comm_bytes_per_gpu[kTp], at_tp.comm_bytes_per_gpu[kTp]);
  EXPECT_GT(half.per_stage[0].params, at_tp.per_stage[0].params);
  EXPECT_DOUBLE_EQ(half.model_flops_per_iteration, at_tp.model_flops_per_iteration);
  // The all-gather dispatcher's gather spans the etp × ep group: over the pair it moves the
  // ep-gathered tokens (8 of the shard) where the all-to-all's pair moves the routed copies (2).
  std::vector<std::string> etp2_gathered = etp2;
  etp2_gathered.push_back("training.megatron.moe_token_dispatcher_type=allgather");
  EXPECT_GT(run(yaml, etp2_gathered, true).comm_bytes_per_gpu[static_cast<int>(Dim::etp)],
            3 * half.comm_bytes_per_gpu[static_cast<int>(Dim::etp)]);
  const Result gathered = run(yaml, {"training.megatron.moe_token_dispatcher_type=allgather"}, true);
  EXPECT_NEAR(gathered.comm_bytes_per_gpu[kEp] / balanced.comm_bytes_per_gpu[kEp], 12.0, 1e-9);
  EXPECT_GT(gathered.per_stage[0].buffers, balanced.per_stage[0].buffers);
}

// A MoE scenario on H100s with tp 1, pp 1 and ZeRO-1: `model` the model mapping.
std::string moe_yaml(const std::string& model, int gpus, int ep, int gbs, int mbs) {
  return fmt::format(R"(name: moe
model: {}
cluster: {{ gpu: h100-sxm, num_gpus: {}, gpus_per_node: 8 }}
parallel: {{ tensor_parallel: 1, pipeline_parallel: 1, expert_parallel: {}, zero_stage: 1 }}
training: {{ global_batch_size: {}, micro_batch_size: {} }}
)",
                     model, gpus, ep, gbs, mbs);
}
// DeepSeekMoE 16B cut to `layers` (the first dense) on 16 GPUs.
std::string small_deepseek_yaml(int layers, int ep, int gbs, int mbs) {
  return moe_yaml(fmt::format(R"({{ preset: deepseek-moe-16b, num_layers: {}, moe: {{ layer_freq: "[0]+[1]*{}" }} }})",
                              layers, layers - 1),
                  16, ep, gbs, mbs);
}

// The routed experts' weights are reduced, sharded and gathered over their own
// expert-data-parallel group (Megatron-core's expert_parallel_buffers and distributed
// optimizer), the dense ones over dp: with the distributed optimizer in bf16 each moves
// 3 · (n − 1)/n of its 2-byte volume over its group (the fp32 reduce-scatter and the bf16
// all-gather), and experts held by one rank of a stage are not reduced at all.
TEST(Strategies, ExpertWeightsReduceOverTheirOwnDataParallelGroup) {
  const std::string yaml = moe_yaml("{ preset: mixtral-8x7b, num_layers: 4 }", 8, 4, 8, 1);
  const int edp = static_cast<int>(Dim::edp);
  // dp 8, ep 4: the experts' group is 8 / 4 = 2 ranks.
  const auto volume = [](double n, std::int64_t params) {
    return 3.0 * (n - 1) / n * 2.0 * static_cast<double>(params);
  };
  const Scenario s = parse_scenario(yaml, "test", {});
  const models::LocalParams lp = models::stage_params(s.model, s.plan.par, 0);
  ASSERT_GT(lp.expert, 0);
  const Result r = simulate(s).result;
  EXPECT_NEAR(r.comm_bytes_per_gpu[kDp], volume(8, lp.dense), 1e-9 * volume(8, lp.dense));
  EXPECT_NEAR(r.comm_bytes_per_gpu[edp], volume(2, lp.expert), 1e-9 * volume(2, lp.expert));
  // ep 8: each expert on one GPU of the stage, nothing to reduce; the dense volume stays.
  const Result alone = run(yaml, {"parallel.expert_parallel=8"});
  EXPECT_EQ(alone.comm_bytes_per_gpu[edp], 0);
  EXPECT_EQ(alone.exposed_comm_s[edp], 0);
  EXPECT_NEAR(alone.comm_bytes_per_gpu[kDp], volume(8, lp.dense), 1e-9 * volume(8, lp.dense));
  // Without expert parallelism the experts are ordinary weights of the dp group.
  const Scenario p = parse_scenario(yaml, "test", {"parallel.expert_parallel=1"});
  const std::int64_t all = models::stage_params(p.model, p.plan.par, 0).total();
  const Result plain = simulate(p).result;
  EXPECT_EQ(plain.comm_bytes_per_gpu[edp], 0);
  EXPECT_NEAR(plain.comm_bytes_per_gpu[kDp], volume(8, all), 1e-9 * volume(8, all));
  // Overlapped: gradient buckets of each kind in the backward, each layer's expert weights
  // gathered on the experts' stream under the first forward (interleaved chunks too).
  const std::vector<std::string> overlap = {"parallel.overlap_grad_reduce=true", "parallel.overlap_param_gather=true"};
  const Result o = run(yaml, overlap);
  EXPECT_NEAR(o.comm_bytes_per_gpu[kDp], volume(8, lp.dense), 1e-9 * volume(8, lp.dense));
  EXPECT_NEAR(o.comm_bytes_per_gpu[edp], volume(2, lp.expert), 1e-9 * volume(2, lp.expert));
  std::vector<std::string> interleaved = overlap;
  for (const char* k : {"parallel.pipeline_parallel=2", "parallel.virtual_pipeline_stages=2",
                        "parallel.expert_parallel=2", "training.global_batch_size=16"})
    interleaved.push_back(k);
  const Result v = run(yaml, interleaved);
  EXPECT_GT(v.comm_bytes_per_gpu[edp], 0);
  EXPECT_GT(v.iteration_time_s, 0);
  // ZeRO-3 (one micro-batch): each kind gathered twice in bf16 and reduce-scattered over its
  // own group, in fp32 under Megatron-core (4 · (n − 1)/n of its 2-byte volume) and in bf16
  // under DeepSpeed (3 ·); a MoE layer's dense and expert weights are two gathers (Megatron:
  // per layer), or its expert GEMMs' own (DeepSpeed: per linear submodule).
  for (const auto& [framework, units] : {std::pair{"megatron-core", 4.0}, std::pair{"deepspeed", 3.0}}) {
    const auto zero3 = [units = units](double n, std::int64_t params) {
      return units * (n - 1) / n * 2.0 * static_cast<double>(params);
    };
    const Result z = run(yaml, {"parallel.zero_stage=3", std::string("training.framework=") + framework});
    // (DeepSpeed keeps modules under stage3_param_persistence_threshold resident: the
    // routers, 0.03 % of the dense weights here.)
    EXPECT_NEAR(z.comm_bytes_per_gpu[kDp], zero3(8, lp.dense), 1e-3 * zero3(8, lp.dense)) << framework;
    EXPECT_NEAR(z.comm_bytes_per_gpu[edp], zero3(2, lp.expert), 1e-6 * zero3(2, lp.expert)) << framework;
  }
}

// Megatron's --moe-shared-expert-overlap: the shared experts' GEMMs run beside the token
// all-to-alls (their first GEMM and activation beside the dispatch's, the second beside the
// combine's, forward and backward): the same bytes and work, less EP time exposed.
TEST(Strategies, SharedExpertsOverlapTheTokenAllToAlls) {
  const std::string yaml = small_deepseek_yaml(5, 16, 64, 2);
  for (const char* extra : {"parallel.recompute=selective", "parallel.recompute=full"}) {
    const Result plain = run(yaml, {extra});
    const Result overlap = run(yaml, {extra, "training.megatron.moe_shared_expert_overlap=true"});
    EXPECT_LT(overlap.iteration_time_s, plain.iteration_time_s) << extra;
    EXPECT_LT(overlap.exposed_comm_s[kEp], plain.exposed_comm_s[kEp]) << extra;
    EXPECT_DOUBLE_EQ(overlap.comm_bytes_per_gpu[kEp], plain.comm_bytes_per_gpu[kEp]) << extra;
    EXPECT_DOUBLE_EQ(overlap.model_flops_per_iteration, plain.model_flops_per_iteration) << extra;
    // What it hides is at most the shared experts' time: the saving is below the EP time.
    EXPECT_LT(plain.iteration_time_s - overlap.iteration_time_s, plain.exposed_comm_s[kEp]) << extra;
  }
}

// Megatron's flex dispatcher on DeepEP sends a token once to each EP rank holding one of its
// experts: under balanced routing the expected ranks among ep hit by k of E experts (E/ep a
// rank), 1 − Π (E − E/ep − i)/(E − i) of each; with one expert a rank nothing is saved.
TEST(Strategies, DeepEpSendsATokenOnceARank) {
  const std::string yaml = small_deepseek_yaml(3, 8, 32, 1);
  const auto ratio = [&](const std::string& y, int experts, int top_k, int ep) {
    const double a2a = run(y).comm_bytes_per_gpu[kEp];
    const double flex = run(y, {"training.megatron.moe_token_dispatcher_type=flex"}).comm_bytes_per_gpu[kEp];
    double miss = 1;
    for (int i = 0; i < top_k; ++i) miss *= static_cast<double>(experts - experts / ep - i) / (experts - i);
    return std::pair{flex / a2a, ep * (1 - miss) / top_k};
  };
  const auto [deepseek, expected] = ratio(yaml, 64, 6, 8);
  EXPECT_NEAR(deepseek, expected, 1e-9);
  EXPECT_NEAR(deepseek, 0.7559, 1e-3);
  const std::string mixtral = moe_yaml("{ preset: mixtral-8x7b, num_layers: 2 }", 16, 8, 16, 1);
  EXPECT_NEAR(ratio(mixtral, 8, 2, 8).first, 1.0, 1e-9);
}

// Megatron's deferred output-layer weight gradient: the last stage skips the logits GEMM's
// weight gradient of the first micro-batches and runs them after its last backward, in the
// flush; the same work (within 0.1 %: a GEMM no longer beside the input gradient's
// reduce-scatter runs at full speed; the drain re-gathers its inputs), a shorter critical
// path, the inputs held until then.
TEST(Strategies, DeferredOutputLayerWgradRunsInTheFlush) {
  const std::string yaml = R"(name: defer
model: { preset: llama3-8b, seq_length: 4096 }
cluster: { gpu: h100-sxm, num_gpus: 32, gpus_per_node: 8 }
parallel: { tensor_parallel: 2, pipeline_parallel: 4, sequence_parallel: true, zero_stage: 1 }
training: { global_batch_size: 64, micro_batch_size: 1 }
)";
  const Result plain = run(yaml, {}, true);
  for (const char* limit : {"0", "3"}) {
    const Result deferred = run(yaml,
                                {"training.megatron.defer_embedding_wgrad_compute=true",
                                 std::string("training.megatron.wgrad_deferral_limit=") + limit},
                                true);
    EXPECT_LT(deferred.iteration_time_s, plain.iteration_time_s) << limit;
    EXPECT_NEAR(deferred.stage_timing.back().busy_s, plain.stage_timing.back().busy_s,
                1e-3 * plain.stage_timing.back().busy_s)
        << limit;
    EXPECT_GT(deferred.per_stage.back().peak, plain.per_stage.back().peak) << limit;
    EXPECT_DOUBLE_EQ(deferred.per_stage.front().peak, plain.per_stage.front().peak) << limit;
  }
}

TEST(Strategies, EverythingMixedOnGpt3_175B) {
  // tp 8 × pp 8 × dp 16 with ZeRO-1, SP, interleaved v = 2, selective recompute.
  const std::string yaml = R"(name: mixed
model: { preset: gpt3-175b }
cluster: { gpu: a100-sxm-80gb, num_gpus: 1024, gpus_per_node: 8 }
parallel: { tensor_parallel: 8, pipeline_parallel: 8, virtual_pipeline_stages: 2, sequence_parallel: true,
            zero_stage: 1, recompute: selective }
training: { global_batch_size: 1536, micro_batch_size: 1 }
)";
  const Result r = run(yaml, {}, true);
  EXPECT_TRUE(r.feasible);
  EXPECT_GT(r.mfu, 0.2);
  EXPECT_LT(r.mfu, 0.9);
  // 1536 / 16 = 96 micro-batches: bubble near (p−1)/(v·m + p−1) = 7/199, plus what the
  // pipeline sends and the data-parallel gathers and reductions add: 0.063 with them,
  // 0.066 since those collectives also slow the compute they overlap, 0.072 since Megatron's
  // passes over each gradient bucket (the 1/dp scaling, the NaN check) run on the compute
  // stream of the last backwards.
  EXPECT_NEAR(r.bubble_fraction, 7.0 / 199, 0.04);
}

}  // namespace
}  // namespace ptsim::sim
