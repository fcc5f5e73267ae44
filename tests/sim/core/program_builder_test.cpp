// The communication the program builder places, per layer and per step, against
// counts and sizes derived by hand from Megatron-LM (Shoeybi et al. 2019 Fig. 3;
// Korthikanti et al. 2022 §4.2.2; Narayanan et al. SC'21 §4.1), ring attention
// (Liu et al. 2023), GShard's all-to-all and ZeRO (Rajbhandari et al. SC'20 §7).
//
// Model of every scenario: hidden h = 1024, 16 heads of d = 64 (MHA: 16 query groups),
// sequence s = 128, micro-batch b = 1, bf16 (2-byte activations, parameters and
// gradients). Buffer sizes S follow nccl-tests: the all-reduce buffer, the all-gather
// output and reduce-scatter input (the whole tensor, not the shard), the per-rank
// all-to-all send buffer, the point-to-point message.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "models/memory.h"
#include "models/ops.h"
#include "models/params.h"
#include "sim/core/program_builder.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/core/program_fixtures.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

using testing::build;
using testing::Built;
using testing::phase;
using testing::tally;
using testing::Tally;

constexpr double kH = 1024, kS = 128, kB = 1, kBf16 = 2;
// Megatron reduces bf16 gradients in fp32 (framework_profile.cpp, grad_reduce_element_bytes).
constexpr double kGradBytes = 4;
// One layer's activation b·s·h in bf16: 1·128·1024·2 = 262,144 bytes.
constexpr double kHidden = kB * kS * kH * kBf16;

// `parallel` lines go under `parallel:`, `moe` lines under `model:`.
std::string yaml(int num_gpus, int layers, int gbs, const std::string& parallel, const std::string& moe = "") {
  return fmt::format(R"(name: builder
{}{}
cluster:
  gpu: a100-sxm-80gb
  num_gpus: {}
  gpus_per_node: {}
parallel:
{}
training:
  global_batch_size: {}
  micro_batch_size: 1
)",
                     testing::tiny_gpt_model_yaml(layers), moe, num_gpus, std::min(8, num_gpus), parallel, gbs);
}

// Everything a stage runs per step: prologue, one micro-batch of every chunk, epilogue.
std::vector<Instr> all_of(const StageProgram& sp) {
  std::vector<Instr> out = sp.prologue;
  for (bool bwd : {false, true}) {
    const auto v = phase(sp, bwd);
    out.insert(out.end(), v.begin(), v.end());
  }
  out.insert(out.end(), sp.epilogue.begin(), sp.epilogue.end());
  return out;
}

// Per-layer tally: the difference between a 4-layer and a 2-layer model, halved, so
// the embedding and head drop out.
Tally per_layer(const std::string& parallel, int gpus, bool backward, Dim d, CollectiveKind c,
                const std::string& moe = "") {
  const Built four = build(yaml(gpus, 4, gpus, parallel, moe)), two = build(yaml(gpus, 2, gpus, parallel, moe));
  const Tally a = tally(phase(four.p.stages[0], backward), d, c), b = tally(phase(two.p.stages[0], backward), d, c);
  return {(a.count - b.count) / 2, (a.bytes - b.bytes) / 2};
}

// BuildOptions::schedule_steps = false leaves the steps out and nothing else.
TEST(ProgramBuilder, WithoutScheduleStepsTheInstructionsAreTheSame) {
  const Built with = build(yaml(8, 4, 16, "  pipeline_parallel: 4\n  data_parallel: 2"));
  BuildOptions opt;
  opt.schedule_steps = false;
  const Program without = build_program(with.s, testing::FlopsOnlyCost(with.s.cluster.gpu), opt);
  ASSERT_EQ(without.stages.size(), with.p.stages.size());
  for (std::size_t st = 0; st < with.p.stages.size(); ++st) {
    EXPECT_FALSE(with.p.stages[st].steps.empty());
    EXPECT_TRUE(without.stages[st].steps.empty());
    EXPECT_EQ(all_of(without.stages[st]).size(), all_of(with.p.stages[st]).size());
  }
}

// BuildOptions::labels = false leaves every name out (label 0, no labels) and nothing else.
TEST(ProgramBuilder, WithoutLabelsTheInstructionsAreTheSame) {
  const Built with = build(yaml(8, 4, 16, "  pipeline_parallel: 4\n  data_parallel: 2\n  zero_stage: 3"));
  BuildOptions opt;
  opt.labels = false;
  const Program without = build_program(with.s, testing::FlopsOnlyCost(with.s.cluster.gpu), opt);
  EXPECT_FALSE(with.p.labels.empty());
  EXPECT_TRUE(without.labels.empty());
  ASSERT_EQ(without.stages.size(), with.p.stages.size());
  bool named = false;
  for (std::size_t st = 0; st < with.p.stages.size(); ++st) {
    const auto a = all_of(with.p.stages[st]), b = all_of(without.stages[st]);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      Instr x = a[i];
      named = named || x.label != 0;
      EXPECT_EQ(b[i].label, 0);
      x.label = 0;
      EXPECT_EQ(std::memcmp(&x, &b[i], sizeof x), 0) << "stage " << st << " instruction " << i;
    }
  }
  EXPECT_TRUE(named);
}

TEST(ProgramBuilder, TensorParallelAllReducesTwicePerLayerEachWay) {
  // Megatron TP (Fig. 3): in forward the operator g all-reduces the attention output
  // (after the row-parallel projection) and the MLP output (after the down-projection);
  // in backward the operator f all-reduces the input gradients of QKV and MLP-up. Each
  // is the layer activation b·s·h·2 = 262,144 bytes; no all-gather or reduce-scatter.
  const std::string par = "  tensor_parallel: 2";
  for (bool bwd : {false, true}) {
    const Tally ar = per_layer(par, 2, bwd, Dim::tp, CollectiveKind::all_reduce);
    EXPECT_EQ(ar.count, 2) << bwd;
    EXPECT_DOUBLE_EQ(ar.bytes, 2 * kHidden) << bwd;
    EXPECT_EQ(per_layer(par, 2, bwd, Dim::tp, CollectiveKind::all_gather).count, 0) << bwd;
    EXPECT_EQ(per_layer(par, 2, bwd, Dim::tp, CollectiveKind::reduce_scatter).count, 0) << bwd;
  }
  // Beyond the layers (L = 2): forward, the vocab-parallel embedding's partial
  // lookups are all-reduced (262,144 bytes) and vocab-parallel cross entropy
  // all-reduces max, sum of exps and target logit, 3·b·s fp32 = 1,536 bytes; backward,
  // the logits GEMM's input gradient is all-reduced (262,144). Forward 2L + 2 =
  // 6 all-reduces, backward 2L + 1 = 5.
  const Built two = build(yaml(2, 2, 2, par));
  const Tally f = tally(phase(two.p.stages[0], false), Dim::tp, CollectiveKind::all_reduce);
  const Tally b = tally(phase(two.p.stages[0], true), Dim::tp, CollectiveKind::all_reduce);
  EXPECT_EQ(f.count, 6);
  EXPECT_DOUBLE_EQ(f.bytes, 5 * kHidden + 3 * kB * kS * 4);
  EXPECT_EQ(b.count, 5);
  EXPECT_DOUBLE_EQ(b.bytes, 5 * kHidden);
}

TEST(ProgramBuilder, SequenceParallelGathersAndScattersInsteadOfAllReducing) {
  // Korthikanti §4.2.2: with SP each all-reduce becomes a reduce-scatter leaving the
  // tensor-parallel region (ḡ) and each identity entering it an all-gather (g): per
  // layer and direction 2 all-gathers + 2 reduce-scatters of S = b·s·h·2 (the whole
  // tensor), no all-reduce. Backward, Megatron keeps a column-parallel linear's input
  // sharded and all-gathers it again for the weight gradient (QKV, MLP up): 2 more.
  const std::string par = "  tensor_parallel: 2\n  sequence_parallel: true";
  for (bool bwd : {false, true}) {
    const Tally ag = per_layer(par, 2, bwd, Dim::tp, CollectiveKind::all_gather);
    const Tally rs = per_layer(par, 2, bwd, Dim::tp, CollectiveKind::reduce_scatter);
    EXPECT_EQ(ag.count, bwd ? 4 : 2) << bwd;
    EXPECT_DOUBLE_EQ(ag.bytes, (bwd ? 4 : 2) * kHidden) << bwd;
    EXPECT_EQ(rs.count, 2) << bwd;
    EXPECT_DOUBLE_EQ(rs.bytes, 2 * kHidden) << bwd;
    EXPECT_EQ(per_layer(par, 2, bwd, Dim::tp, CollectiveKind::all_reduce).count, 0) << bwd;
  }
  // Embedding: reduce-scatter into the sequence-parallel region forward, all-gather
  // backward; head: all-gather before the logits GEMM forward, reduce-scatter of its
  // input gradient backward and the re-gather of its input; the cross-entropy
  // all-reduce stays. With L = 2: forward 5 all-gathers, 5 reduce-scatters, 1
  // all-reduce; backward 5 + 5 re-gathers and 5.
  const Built two = build(yaml(2, 2, 2, par));
  const auto f = phase(two.p.stages[0], false), b = phase(two.p.stages[0], true);
  EXPECT_EQ(tally(f, Dim::tp, CollectiveKind::all_gather).count, 5);
  EXPECT_EQ(tally(f, Dim::tp, CollectiveKind::reduce_scatter).count, 5);
  EXPECT_EQ(tally(f, Dim::tp, CollectiveKind::all_reduce).count, 1);
  EXPECT_EQ(tally(b, Dim::tp, CollectiveKind::all_gather).count, 10);
  EXPECT_EQ(tally(b, Dim::tp, CollectiveKind::reduce_scatter).count, 5);
  EXPECT_EQ(tally(b, Dim::tp, CollectiveKind::all_reduce).count, 0);
}

// The instructions from QKV's backward to its end, as kinds and collective names:
// Megatron's LinearWithGradAccumulationAndAsyncCommunication.backward (framework_profile.cpp).
std::vector<std::string> qkv_backward(const std::string& parallel, const std::string& training = "") {
  const Scenario s = parse_scenario(yaml(2, 1, 2, parallel) + training, "test");
  BuildOptions opt;
  opt.fuse_compute = false;  // each op keeps its name
  const Program p = build_program(s, testing::FlopsOnlyCost(s.cluster.gpu), opt);
  std::vector<std::string> out;
  bool in = false;
  for (const Instr& i : phase(p.stages[0], true)) {
    const std::string name = p.labels[i.label];
    const bool qkv = name.rfind("qkv", 0) == 0 || name.find(" attn") != std::string::npos;
    in = in || name.rfind("qkv", 0) == 0 || name == "tp all-gather attn input (bwd)";
    if (!in) continue;
    if (!qkv) break;  // past QKV's backward (the input norm's, the embedding's)
    const bool beside = (i.flags & kBesideNext) != 0;
    const char* kind = i.kind == InstrKind::compute      ? "compute "
                       : i.kind == InstrKind::collective ? (beside ? "beside " : "blocking ")
                                                         : "other ";
    out.push_back(kind + name);
  }
  return out;
}

TEST(ProgramBuilder, ColumnParallelBackwardOverlapsItsTensorParallelCommunication) {
  // Without SP: dgrad, then the input gradient's all-reduce beside the wgrad GEMM
  // (started before it, waited for after it).
  EXPECT_EQ(qkv_backward("  tensor_parallel: 2"),
            (std::vector<std::string>{"compute qkv dgrad", "beside tp all-reduce attn (bwd)", "compute qkv wgrad"}));
  // With SP: the input re-gathered beside dgrad, the input gradient reduce-scattered
  // beside wgrad.
  EXPECT_EQ(qkv_backward("  tensor_parallel: 2\n  sequence_parallel: true"),
            (std::vector<std::string>{"beside tp all-gather attn input (bwd)", "compute qkv dgrad",
                                      "beside tp reduce-scatter attn (bwd)", "compute qkv wgrad"}));
  // Megatron-LM before 2021-09 (async_tensor_model_parallel_allreduce false): the whole
  // backward, then a blocking all-reduce; DeepSpeed's and FSDP's tensor parallelism block too.
  const std::vector<std::string> blocking = {"compute qkv", "blocking tp all-reduce attn"};
  EXPECT_EQ(qkv_backward("  tensor_parallel: 2", "  megatron:\n    async_tensor_model_parallel_allreduce: false\n"),
            blocking);
  EXPECT_EQ(qkv_backward("  tensor_parallel: 2", "  framework: deepspeed\n"), blocking);
}

// Memory-bound kernels at 1 TB/s, everything else free: the iteration is its memory traffic.
class BytesOnlyCost : public hw::ComputeCostModel {
 public:
  explicit BytesOnlyCost(const hw::GpuSpec& g) : hw::ComputeCostModel(g) {}
  Seconds seconds(const hw::KernelDesc& k) const override {
    return k.cls == hw::KernelClass::memory ? k.bytes / 1e12 : 0;
  }
  std::string source() const override { return "synthetic"; }
};

// `text` built on BytesOnlyCost with every compute instruction apart and named.
Built bytes_build(const std::string& text) {
  Built b{parse_scenario(text, "test"), {}};
  BuildOptions opt;
  opt.fuse_compute = false;
  b.p = build_program(b.s, BytesOnlyCost(b.s.cluster.gpu), opt);
  return b;
}
// The instructions of `v` named `label`, and their seconds summed.
std::vector<Instr> labelled(const Program& p, const std::vector<Instr>& v, std::string_view label) {
  std::vector<Instr> out;
  for (const Instr& i : v)
    if (p.labels[i.label] == label) out.push_back(i);
  return out;
}
double seconds_of(const std::vector<Instr>& v) {
  double t = 0;
  for (const Instr& i : v) t += to_seconds(i.duration);
  return t;
}
// Parameters on stage 0 of a built scenario.
double stage0_params(const Built& b) {
  return static_cast<double>(models::stage_params(b.s.model, b.s.plan.par, 0).total());
}

// One GPU, 4 micro-batches, `layers` layers: the backward's gradient-accumulation adds
// (their seconds per micro-batch, their flags) and the iteration time.
struct Accumulation {
  double add_s = 0, iteration_s = 0;
  int count = 0;
  std::uint8_t flags = 0;
};
Accumulation accumulation(int layers, const std::string& training, const std::string& parallel = "") {
  const Built b = bytes_build(yaml(1, layers, 4, "  tensor_parallel: 1\n" + parallel) + training);
  Accumulation a;
  for (const Instr& i : labelled(b.p, phase(b.p.stages[0], true), "grad accumulation"))
    a.add_s += to_seconds(i.duration), ++a.count, a.flags |= i.flags;
  BytesOnlyCost cost(b.s.cluster.gpu);
  a.iteration_s = testing::run_synthetic(b.s, false, &cost).iteration_time_s;
  return a;
}

TEST(ProgramBuilder, UnfusedGradientAccumulationAddsEachGradientIntoTheHeldOne) {
  const double layer = static_cast<double>(
      models::count_params(parse_scenario(yaml(1, 2, 4, "  tensor_parallel: 1"), "t").model).dense_layer);
  const std::string unfused = "  megatron:\n    gradient_accumulation_fusion: false\n";
  // Megatron's fused wgrad GEMM (the default): no add (the embedding's is its own pass,
  // test EmbeddingGradientThroughTheDdpHook).
  EXPECT_EQ(accumulation(2, "").count, 0);
  // Megatron-LM before 2022-02 in fp16: autograd's AccumulateGrad adds into param.grad
  // (read 2 + 2, write 2 bytes per parameter), from the second micro-batch on.
  const Accumulation f4 = accumulation(4, unfused + "  precision: fp16\n"),
                     f2 = accumulation(2, unfused + "  precision: fp16\n");
  EXPECT_NEAR((f4.add_s - f2.add_s) / 2, layer * 6 / 1e12, 1e-9);  // ticks of 1 ns
  EXPECT_EQ(f4.flags, kAfterFirstMicrobatch);
  // In bf16 Megatron reduces in fp32: the DDP hook adds every micro-batch's bf16 gradient
  // into main_grad (2 + 4 + 4 bytes), the first one included.
  const Accumulation b4 = accumulation(4, unfused), b2 = accumulation(2, unfused);
  EXPECT_NEAR((b4.add_s - b2.add_s) / 2, layer * 10 / 1e12, 1e-9);
  EXPECT_EQ(b4.flags, kNoFlags);
  // Against the fused default, whose DDP hook adds the embedding's gradient every
  // micro-batch (6 bytes a parameter in fp16, 10 in bf16): the unfused adds replace it.
  const Scenario tiny = parse_scenario(yaml(1, 4, 4, "  tensor_parallel: 1"), "t");
  const double embedding = static_cast<double>(models::embedding_block_params(tiny.model, tiny.plan.par));
  EXPECT_NEAR(f4.iteration_s - accumulation(4, "  precision: fp16\n").iteration_s,
              3 * f4.add_s - 4 * embedding * 6 / 1e12, 1e-8)
      << "3 of the 4 micro-batches add";
  EXPECT_NEAR(b4.iteration_s - accumulation(4, "").iteration_s, 4 * b4.add_s - 4 * embedding * 10 / 1e12, 1e-8);
  // DeepSpeed (ZeRO-0, fp16) accumulates through autograd as well.
  EXPECT_NEAR(accumulation(2, "  framework: deepspeed\n  precision: fp16\n").add_s, f2.add_s, 1e-12);
  // FSDP adds the reduced shard into its fp32 flat parameter's gradient (4 + 4 + 4 bytes;
  // one GPU here, so the shard is the whole layer), from the second micro-batch on.
  const Accumulation s4 = accumulation(4, "  framework: fsdp\n", "  zero_stage: 3\n"),
                     s2 = accumulation(2, "  framework: fsdp\n", "  zero_stage: 3\n");
  EXPECT_NEAR((s4.add_s - s2.add_s) / 2, layer * 12 / 1e12, 1e-9);
  EXPECT_EQ(s4.flags, kAfterFirstMicrobatch);
}

// Megatron's gradient_accumulation_fusion leaves the embedding out: its dense gradient goes
// through param.grad, which the DDP hook adds into main_grad every micro-batch.
TEST(ProgramBuilder, EmbeddingGradientThroughTheDdpHook) {
  const auto hook = [](const std::string& training, const std::string& parallel = "") {
    const Built b = bytes_build(yaml(2, 2, 4, "  tensor_parallel: 1\n  pipeline_parallel: 2\n" + parallel) + training);
    const std::string label = "embedding grad into main_grad";
    EXPECT_TRUE(labelled(b.p, phase(b.p.stages[1], true), label).empty()) << "the embedding is on the first stage";
    const std::vector<Instr> adds = labelled(b.p, phase(b.p.stages[0], true), label);
    for (const Instr& i : adds) EXPECT_EQ(i.flags, kNoFlags) << "every micro-batch";
    return std::pair{std::pair{seconds_of(adds), static_cast<int>(adds.size())},
                     static_cast<double>(models::embedding_block_params(b.s.model, b.s.plan.par))};
  };
  const auto [bf16, params] = hook("");
  EXPECT_EQ(bf16.second, 1);
  EXPECT_NEAR(bf16.first, params * (2 + 4 + 4) / 1e12, 1e-9);
  EXPECT_NEAR(hook("  precision: fp16\n").first.first, params * (2 + 2 + 2) / 1e12, 1e-9);
  EXPECT_EQ(hook("  megatron:\n    gradient_accumulation_fusion: false\n").first.second, 0);
  EXPECT_EQ(hook("  framework: deepspeed\n").first.second, 0);
  EXPECT_EQ(hook("  framework: fsdp\n", "  zero_stage: 3\n").first.second, 0);
}

// Megatron zeroes its whole gradient buffer at the start of a step, DeepSpeed's BF16_Optimizer
// its fp32 accumulators after the step; ZeRO-2/3 and FSDP set gradients to None.
TEST(ProgramBuilder, GradientBuffersZeroedOnceAStep) {
  const auto zeroed = [](const std::string& training, const std::string& parallel = "") {
    const Built b = bytes_build(yaml(1, 2, 4, "  tensor_parallel: 1\n" + parallel) + training);
    return std::pair{seconds_of(labelled(b.p, all_of(b.p.stages[0]), "zero grad buffer")), stage0_params(b)};
  };
  const auto [bf16, params] = zeroed("");
  EXPECT_NEAR(bf16, params * 4 / 1e12, 1e-9);  // fp32 main_grad
  EXPECT_NEAR(zeroed("  precision: fp16\n").first, params * 2 / 1e12, 1e-9);
  EXPECT_NEAR(zeroed("  framework: megatron-lm\n").first, params * 4 / 1e12, 1e-9);
  EXPECT_NEAR(zeroed("  framework: deepspeed\n").first, params * 4 / 1e12, 1e-9);  // BF16_Optimizer
  EXPECT_EQ(zeroed("  framework: deepspeed\n", "  zero_stage: 2\n").first, 0.0);
  EXPECT_EQ(zeroed("  framework: fsdp\n", "  zero_stage: 3\n").first, 0.0);
}

// The optimizer step's HBM bytes per parameter: Adam's fused kernel (28), and around it
// Megatron's mixed-precision optimizer: the gradient norm (4) and the fp32 -> 16-bit weight copy
// (6), with fp16 also the main_grad -> fp32 copy (6) and the unscale / inf check (8).
TEST(ProgramBuilder, OptimizerStepBytesPerParameter) {
  const auto step = [](const std::string& training, const std::string& parallel = "") {
    const Built b = bytes_build(yaml(1, 2, 4, "  tensor_parallel: 1\n" + parallel) + training);
    return seconds_of(labelled(b.p, b.p.stages[0].epilogue, "optimizer")) * 1e12 / stage0_params(b);
  };
  EXPECT_NEAR(step(""), 28 + 4 + 6, 1e-3);
  EXPECT_NEAR(step("  precision: fp16\n"), 28 + 6 + 8 + 4 + 6, 1e-3);
  EXPECT_NEAR(step("  precision: fp32\n"), 28 + 4, 1e-3);
  EXPECT_NEAR(step("  framework: megatron-lm\n"), 28 + 4 + 6, 1e-3);
  EXPECT_NEAR(step("  framework: deepspeed\n"), 28, 1e-3);
  // FSDP: the training script's step (FrameworkProfile::optimizer_impl), PyTorch AdamW's
  // foreach passes by default, and clip_grad_norm_'s norm and scaling.
  EXPECT_NEAR(step("  framework: fsdp\n", "  zero_stage: 3\n"), 80 + 12, 1e-3);
  EXPECT_NEAR(step("  framework: fsdp\n  fsdp: {optimizer_impl: decoupled_adamw}\n", "  zero_stage: 3\n"), 88 + 12,
              1e-3);
  EXPECT_NEAR(step("  framework: fsdp\n  fsdp: {optimizer_impl: fused, clip_grad_norm: false}\n", "  zero_stage: 3\n"),
              28, 1e-3);
}

// Megatron's passes over each gradient bucket before its data-parallel reduction: the scaling
// by 1/dp (read + write) and Megatron-core's NaN-check norm (read), in the bucket's dtype (fp32
// under bf16), once a step (the last micro-batch's backward).
TEST(ProgramBuilder, GradientBucketPassesBeforeTheReduction) {
  const auto passes = [](const std::string& training, const std::string& parallel = "") {
    const Built b = bytes_build(yaml(2, 2, 4, "  tensor_parallel: 1\n" + parallel) + training);
    const std::vector<Instr> v = labelled(b.p, all_of(b.p.stages[0]), "grad bucket scale and check");
    for (const Instr& i : v) EXPECT_EQ(i.flags, kLastMicrobatch);
    return seconds_of(v) * 1e12 / stage0_params(b);
  };
  EXPECT_NEAR(passes(""), (2 + 1) * 4, 1e-3);
  EXPECT_NEAR(passes("  megatron:\n    check_for_nan_in_loss_and_grad: false\n"), 2 * 4, 1e-3);
  EXPECT_NEAR(passes("  megatron:\n    ddp_average_in_collective: true\n"), 1 * 4, 1e-3);
  EXPECT_NEAR(passes("  precision: fp16\n"), (2 + 1) * 2, 1e-3);
  EXPECT_NEAR(passes("  framework: megatron-lm\n"), 2 * 4, 1e-3);  // no NaN check before Megatron-core
  EXPECT_EQ(passes("  framework: deepspeed\n"), 0.0);
  EXPECT_EQ(passes("  framework: fsdp\n", "  zero_stage: 3\n"), 0.0);
}

// Megatron-core's delay_grad_reduce: under plain 1F1B only the first stage reduces its buckets
// during its last backward; the others after their schedule.
TEST(ProgramBuilder, DelayedGradReduceAfterTheScheduleOnLaterStages) {
  const auto where = [](const std::string& training, const std::string& parallel = "") {
    const Built b = build(yaml(4, 4, 8, "  tensor_parallel: 1\n  pipeline_parallel: 2\n" + parallel) + training);
    std::vector<std::pair<int, int>> out;  // per stage: (in backward, in epilogue) DP reductions
    for (const StageProgram& sp : b.p.stages)
      out.emplace_back(tally(phase(sp, true), Dim::dp, CollectiveKind::reduce_scatter).count +
                           tally(phase(sp, true), Dim::dp, CollectiveKind::all_reduce).count,
                       tally(sp.epilogue, Dim::dp, CollectiveKind::reduce_scatter).count +
                           tally(sp.epilogue, Dim::dp, CollectiveKind::all_reduce).count);
    return out;
  };
  const auto delayed = where("");
  EXPECT_GT(delayed[0].first, 0);
  EXPECT_EQ(delayed[0].second, 0);
  EXPECT_EQ(delayed[1].first, 0);
  EXPECT_GT(delayed[1].second, 0);
  const auto plain = where("  megatron:\n    delay_grad_reduce: false\n");
  EXPECT_GT(plain[1].first, 0);
  EXPECT_EQ(plain[1].second, 0);
  // Sharded gradients are reduced every micro-batch: nothing to delay.
  const auto sharded = where("", "  zero_stage: 2\n");
  EXPECT_GT(sharded[1].first, 0);
  EXPECT_EQ(sharded[1].second, 0);
}

TEST(ProgramBuilder, ContextParallelRingAttention) {
  // Ring attention over cp = 2: forward, every rank sees every K and V chunk, an
  // all-gather of K and V of the whole sequence: S = 2 (K, V) · b·s · g·d · 2 bytes
  // = 2·128·1024·2 = 524,288; backward, K and V again plus a reduce-scatter of dK, dV
  // of the same size. Gradients are then reduced over DP × CP (Megatron's
  // data-parallel group with context parallelism): here the 2 CP ranks.
  const std::string par = "  context_parallel: 2";
  const double kv = 2 * kB * kS * kH * kBf16;
  const Tally fwd = per_layer(par, 2, false, Dim::cp, CollectiveKind::all_gather);
  EXPECT_EQ(fwd.count, 1);
  EXPECT_DOUBLE_EQ(fwd.bytes, kv);
  EXPECT_EQ(per_layer(par, 2, false, Dim::cp, CollectiveKind::reduce_scatter).count, 0);
  const Tally bwd_ag = per_layer(par, 2, true, Dim::cp, CollectiveKind::all_gather);
  const Tally bwd_rs = per_layer(par, 2, true, Dim::cp, CollectiveKind::reduce_scatter);
  EXPECT_EQ(bwd_ag.count, 1);
  EXPECT_DOUBLE_EQ(bwd_ag.bytes, kv);
  EXPECT_EQ(bwd_rs.count, 1);
  EXPECT_DOUBLE_EQ(bwd_rs.bytes, kv);
  const Built two = build(yaml(2, 2, 2, par));
  const double psi = static_cast<double>(models::stage_params(two.s.model, two.s.plan.par, 0).total());
  EXPECT_DOUBLE_EQ(tally(all_of(two.p.stages[0]), Dim::dp, CollectiveKind::all_reduce).bytes, kGradBytes * psi);
}

// The order of a layer's context-parallel collectives and its attention kernel, as letters:
// A / R / X a launched all-gather / reduce-scatter / all-to-all, W a wait for them, K the
// attention kernel.
std::string cp_order(const std::string& training, bool backward) {
  Built b{parse_scenario(yaml(2, 1, 2, "  context_parallel: 2") + training, "test"), {}};
  BuildOptions named;
  named.fuse_compute = false;
  b.p = build_program(b.s, FlopsOnlyCost(b.s.cluster.gpu), named);
  std::string order;
  for (const Instr& in : phase(b.p.stages[0], backward)) {
    if (in.kind == InstrKind::compute && b.p.labels[in.label] == "attention") order += 'K';
    if (in.dim != Dim::cp) continue;
    if (in.kind == InstrKind::launch)
      order += in.coll == CollectiveKind::all_gather ? 'A' : in.coll == CollectiveKind::all_to_all ? 'X' : 'R';
    if (in.kind == InstrKind::wait) order += 'W';
  }
  return order;
}

// Megatron's --cp-comm-type: p2p (the default) exchanges K/V around the ring beside the
// attention kernel; allgather (Transformer Engine's AttnFuncWithCPAndKVAllGather, Llama 3
// Sec. 3.3.2) waits for the K/V all-gather before the kernel, and in backward gathers them
// again and reduce-scatters dK/dV after it: nothing of it overlaps attention.
TEST(ProgramBuilder, ContextParallelAllGatherIsExposed) {
  EXPECT_EQ(cp_order("", false), "AKW");
  EXPECT_EQ(cp_order("", true), "ARKW");
  const std::string allgather = "  megatron:\n    cp_comm_type: allgather\n";
  EXPECT_EQ(cp_order(allgather, false), "AWK");
  EXPECT_EQ(cp_order(allgather, true), "AWKRW");
  // PyTorch's context_parallel (FSDP's), whose default rotation all-gathers K/V at the ring's
  // first step and waits at its second: the first step's kernel beside it, the rest after; in
  // backward the dK/dV ring beside the rest. set_rotate_method("alltoall"): the ring.
  const std::string fsdp = "  framework: fsdp\n";
  EXPECT_EQ(cp_order(fsdp, false), "AKWK");
  EXPECT_EQ(cp_order(fsdp, true), "AKWRKW");
  EXPECT_EQ(cp_order(fsdp + "  fsdp: { cp_rotate_method: alltoall }\n", false), "AKW");
  // The same bytes either way (ContextParallelRingAttention).
  const Built ring = build(yaml(2, 2, 2, "  context_parallel: 2")),
              gathered = build(yaml(2, 2, 2, "  context_parallel: 2") + allgather);
  for (const bool bwd : {false, true})
    for (const CollectiveKind c : {CollectiveKind::all_gather, CollectiveKind::reduce_scatter})
      EXPECT_DOUBLE_EQ(tally(phase(ring.p.stages[0], bwd), Dim::cp, c).bytes,
                       tally(phase(gathered.p.stages[0], bwd), Dim::cp, c).bytes);
}

// By head all-to-all (Megatron's --cp-comm-type a2a, DeepSpeed's Ulysses): Q, K and V to
// head shards before the kernel, the output back after it; backward dO before, dQ, dK and dV
// after; each waited for. A rank sends its T = b·s/cp tokens' share: cp 2, T = 64, Q, K, V
// 3 · 64 · 1024 · 2 bytes, O 64 · 1024 · 2. The kernel sees the whole sequence for half the
// heads: the same FLOPs as the ring's s/cp queries against s keys.
TEST(ProgramBuilder, ContextParallelByHeadAllToAll) {
  const std::string a2a = "  megatron:\n    cp_comm_type: a2a\n";
  EXPECT_EQ(cp_order(a2a, false), "XWKXW");
  EXPECT_EQ(cp_order(a2a, true), "XWKXW");
  EXPECT_EQ(cp_order("  framework: deepspeed\n", false), "XWKXW");  // Ulysses, DeepSpeed's own
  const double t = kB * kS / 2;
  EXPECT_DOUBLE_EQ(per_layer("  context_parallel: 2", 2, false, Dim::cp, CollectiveKind::all_to_all).count, 0);
  const Built two = build(yaml(2, 2, 2, "  context_parallel: 2") + a2a),
              four = build(yaml(2, 4, 2, "  context_parallel: 2") + a2a);
  for (const bool bwd : {false, true}) {
    const Tally a = tally(phase(four.p.stages[0], bwd), Dim::cp, CollectiveKind::all_to_all),
                b = tally(phase(two.p.stages[0], bwd), Dim::cp, CollectiveKind::all_to_all);
    EXPECT_EQ((a.count - b.count) / 2, 2) << bwd;
    EXPECT_DOUBLE_EQ((a.bytes - b.bytes) / 2, (3 + 1) * t * kH * kBf16) << bwd;
  }
  const Scenario s = parse_scenario(yaml(2, 2, 2, "  context_parallel: 2") + a2a, "t");
  EXPECT_TRUE(s.plan.par.cp_heads);
  models::Parallelism ring = s.plan.par;
  ring.cp_heads = false;
  const auto find_attention = [&](const models::Parallelism& p) {
    for (const models::Op& op : models::layer_ops(s.model, p, false))
      if (op.cls == models::OpClass::attention) return op;
    return models::Op{};
  };
  const models::Op heads = find_attention(s.plan.par), chunks = find_attention(ring);
  EXPECT_EQ(heads.attn.seq_q, static_cast<std::int64_t>(kS));
  EXPECT_EQ(chunks.attn.seq_q, static_cast<std::int64_t>(kS) / 2);
  EXPECT_EQ(heads.attn.batch_heads * 2, chunks.attn.batch_heads);
  EXPECT_DOUBLE_EQ(heads.fwd_flops, chunks.fwd_flops);
}

TEST(ProgramBuilder, ExpertParallelAllToAllTwicePerMoeLayerEachWay) {
  // MoE layer, ep = 2 (carved from dp = 2), top_k = 2, dropless: the dispatch
  // all-to-all sends each token's top_k copies of its hidden state, the combine
  // all-to-all brings them back; per rank S = b·s·top_k·h·2 = 128·2·1024·2 = 524,288.
  // Backward mirrors both (GShard; Megatron-core's alltoall token dispatcher).
  const std::string par = "  expert_parallel: 2";
  const std::string moe = "  moe:\n    num_experts: 4\n    top_k: 2\n    ffn_hidden_size: 1024";
  for (bool bwd : {false, true}) {
    const Tally a2a = per_layer(par, 2, bwd, Dim::ep, CollectiveKind::all_to_all, moe);
    EXPECT_EQ(a2a.count, 2) << bwd;
    EXPECT_DOUBLE_EQ(a2a.bytes, 2 * (kB * kS * 2 * kH * kBf16)) << bwd;
  }
}

TEST(ProgramBuilder, ZeroStagesReduceAndGatherAsInThePaper) {
  // dp = 4, two micro-batches per step (gbs 8), Ψ parameters of 2 bytes (below one
  // 40M-parameter DDP bucket, so one gradient collective, of 4Ψ bytes: Megatron
  // reduces bf16 gradients in fp32; the ZeRO paper's fp16 ones would be 2Ψ). ZeRO §7:
  //   DP:      all-reduce of the gradients once per step (after the last micro-batch);
  //   ZeRO-1:  reduce-scatter of the gradients once per step, all-gather of the
  //            updated parameters (2Ψ);
  //   ZeRO-2:  reduce-scatter after every micro-batch (only a shard of the gradients
  //            is kept), all-gather of the parameters (2Ψ);
  //   ZeRO-3:  reduce-scatter after every micro-batch, parameters all-gathered before
  //            each block's forward and again before its backward (2Ψ + 2Ψ per
  //            micro-batch), no separate parameter all-gather after the step.
  for (int stage = 0; stage <= 3; ++stage) {
    const Built b = build(yaml(4, 2, 8, fmt::format("  zero_stage: {}", stage)));
    ASSERT_EQ(b.s.plan.par.num_microbatches, 2);
    const StageProgram& sp = b.p.stages[0];
    const double psi = static_cast<double>(models::stage_params(b.s.model, b.s.plan.par, 0).total());
    const auto bwd = phase(sp, true);
    const CollectiveKind grad = stage == 0 ? CollectiveKind::all_reduce : CollectiveKind::reduce_scatter;
    const Tally g = tally(bwd, Dim::dp, grad);
    EXPECT_EQ(g.count, 1) << "ZeRO-" << stage;
    EXPECT_DOUBLE_EQ(g.bytes, kGradBytes * psi) << "ZeRO-" << stage;
    for (const Instr& in : bwd)
      if (in.kind == InstrKind::launch && in.coll == grad)
        EXPECT_EQ(in.flags & kLastMicrobatch, stage <= 1 ? kLastMicrobatch : 0) << "ZeRO-" << stage;
    const Tally fwd_gather = tally(phase(sp, false), Dim::dp, CollectiveKind::all_gather);
    const Tally bwd_gather = tally(bwd, Dim::dp, CollectiveKind::all_gather);
    const Tally step_gather = tally(sp.prologue, Dim::dp, CollectiveKind::all_gather);
    const Tally end_gather = tally(sp.epilogue, Dim::dp, CollectiveKind::all_gather);
    if (stage == 3) {
      EXPECT_DOUBLE_EQ(fwd_gather.bytes, kBf16 * psi);
      EXPECT_DOUBLE_EQ(bwd_gather.bytes, kBf16 * psi);
      EXPECT_EQ(step_gather.count + end_gather.count, 0);
    } else {
      EXPECT_EQ(fwd_gather.count + bwd_gather.count, 0) << "ZeRO-" << stage;
      EXPECT_DOUBLE_EQ(step_gather.bytes + end_gather.bytes, stage == 0 ? 0 : kBf16 * psi) << "ZeRO-" << stage;
    }
  }
}

TEST(ProgramBuilder, PipelineSendsOneActivationEachWay) {
  // pp = 2, tp = 2: per micro-batch stage 0 sends its output activation forward and
  // receives its gradient backward; stage 1 the mirror image. With Megatron's
  // scatter/gather (SC'21 §4.1) each TP rank sends 1/t of b·s·h·2 = 131,072 bytes and
  // the receiving TP group all-gathers the whole 262,144-byte activation.
  const Built b = build(yaml(4, 4, 4, "  tensor_parallel: 2\n  pipeline_parallel: 2"));
  auto count = [](const std::vector<Instr>& v, InstrKind k, double& bytes) {
    int n = 0;
    for (const Instr& in : v)
      if (in.kind == k && in.dim == Dim::pp && in.coll == CollectiveKind::send_recv) ++n, bytes = in.bytes;
    return n;
  };
  for (int stage = 0; stage < 2; ++stage) {
    const auto f = phase(b.p.stages[stage], false), bw = phase(b.p.stages[stage], true);
    double bytes = 0;
    EXPECT_EQ(count(f, InstrKind::send, bytes), stage == 0 ? 1 : 0) << stage;
    EXPECT_EQ(count(f, InstrKind::recv, bytes), stage == 1 ? 1 : 0) << stage;
    EXPECT_EQ(count(bw, InstrKind::send, bytes), stage == 1 ? 1 : 0) << stage;
    EXPECT_EQ(count(bw, InstrKind::recv, bytes), stage == 0 ? 1 : 0) << stage;
    EXPECT_DOUBLE_EQ(bytes, kHidden / 2) << stage;
    // The receiver's TP all-gather of the scattered message.
    const auto& received = stage == 1 ? f : bw;
    const Tally ag = tally(received, Dim::tp, CollectiveKind::all_gather);
    EXPECT_EQ(ag.count, 1) << stage;
    EXPECT_DOUBLE_EQ(ag.bytes, kHidden) << stage;
  }
}

// Program::label interns names: one index per distinct name, in the order of first use
// (traces print labels[index]); a copied program keeps its own, working index.
TEST(Program, LabelsAreInternedInTheOrderOfFirstUse) {
  Program p;
  EXPECT_EQ(p.label("compute"), 0);
  EXPECT_EQ(p.label("wait tp"), 1);
  EXPECT_EQ(p.label(std::string("comp") + "ute"), 0);
  const Program copy = p;
  EXPECT_EQ(p.label("wait dp"), 2);
  Program other = copy;
  EXPECT_EQ(other.label("wait tp"), 1);
  EXPECT_EQ(other.label("send"), 2);
  EXPECT_EQ(p.labels, (std::vector<std::string>{"compute", "wait tp", "wait dp"}));
  EXPECT_EQ(other.labels, (std::vector<std::string>{"compute", "wait tp", "send"}));
}

}  // namespace
}  // namespace ptsim::sim
