// LoRA / QLoRA in the program and the replay: only adapter gradients are reduced
// over data parallelism, the frozen GEMMs' backward is the input gradient only,
// and the scenario key is checked (models/finetune.h, sim/io/finetune_section.h).
//
// Model: h = 1024, 16 heads (MHA), GeLU ffn 4096, s = 128, b = 1, bf16. Adapters at
// r = 8 on all four targets, per layer: r·[(h + 3h) + (h + h) + (h + ffn) + (ffn + h)]
// = 8·(8h + 2·ffn) = 8·16,384 = 131,072 parameters.
#include <gtest/gtest.h>

#include <string>

#include "models/flops.h"
#include "models/memory.h"
#include "sim/core/errors.h"
#include "sim/core/program_builder.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

using testing::FlopsOnlyCost;
using testing::FreeCollectives;
using testing::tiny_gpt_yaml;

const std::string kLora = "  finetune: {method: lora, rank: 8, targets: [qkv, proj, fc1, fc2]}";

Scenario scenario(int dp, int layers, int gbs, const std::string& training, const std::string& parallel = "") {
  return parse_scenario(tiny_gpt_yaml(1, dp, 1, layers, gbs, parallel, 8, training), "test.yaml");
}

double dp_launched_bytes(const StageProgram& sp, CollectiveKind kind) {
  double bytes = 0;
  auto add = [&](const std::vector<Instr>& v) {
    for (const Instr& in : v)
      if (in.kind == InstrKind::launch && in.dim == Dim::dp && in.coll == kind) bytes += in.bytes;
  };
  for (const ChunkProgram& c : sp.chunks) add(c.backward), add(c.weight);
  add(sp.prologue);
  add(sp.epilogue);
  return bytes;
}

TEST(FinetuneProgram, DataParallelReducesOnlyTheAdapterGradients) {
  // dp = 2, two layers: the gradient all-reduce carries 2 layers × 131,072 adapter
  // parameters × 4 bytes (bf16 gradients reduced in fp32, framework_profile.cpp) =
  // 1,048,576 bytes; full training would carry every weight.
  const Scenario s = scenario(2, 2, 2, kLora);
  EXPECT_EQ(models::trainable_stage_params(s.model, s.plan.par, 0).total(), 2 * 131'072);
  const Program p = build_program(s, FlopsOnlyCost(s.cluster.gpu));
  EXPECT_DOUBLE_EQ(dp_launched_bytes(p.stages[0], CollectiveKind::all_reduce), 4.0 * 2 * 131'072);
  // ZeRO-1: reduce-scatter of the adapter gradients, all-gather of the updated adapters.
  const Scenario z = scenario(2, 2, 2, kLora, "  zero_stage: 1");
  const Program pz = build_program(z, FlopsOnlyCost(z.cluster.gpu));
  EXPECT_DOUBLE_EQ(dp_launched_bytes(pz.stages[0], CollectiveKind::reduce_scatter), 4.0 * 2 * 131'072);
  EXPECT_DOUBLE_EQ(dp_launched_bytes(pz.stages[0], CollectiveKind::all_gather), 2.0 * 2 * 131'072);
  // A zero-bubble schedule reduces the gradients after its W passes: the same buckets.
  const Scenario zb = scenario(2, 2, 2, kLora, "  pipeline_schedule: zb-h1");
  BuildOptions named;  // one instruction per kernel, with its name
  named.fuse_compute = false;
  const Program pzb = build_program(zb, FlopsOnlyCost(zb.cluster.gpu), named);
  EXPECT_DOUBLE_EQ(dp_launched_bytes(pzb.stages[0], CollectiveKind::all_reduce), 4.0 * 2 * 131'072);
  // and its W passes compute only the adapters' weight gradients (a frozen GEMM has none).
  int adapter_wgrads = 0;
  for (const ChunkProgram& c : pzb.stages[0].chunks)
    for (const Instr& in : c.weight) {
      if (in.kind != InstrKind::compute) continue;
      const std::string& name = pzb.labels[in.label];
      EXPECT_NE(name.find("lora"), std::string::npos) << name;
      adapter_wgrads += 1;
    }
  EXPECT_GT(adapter_wgrads, 0);  // (those that last a tick at FlopsOnlyCost's rate)
}

TEST(FinetuneProgram, IterationTimeIsTheFineTuningFlops) {
  // One GPU, GEMM and attention at 10 PFLOP/s, memory-bound work and
  // communication free: the iteration is the FLOPs the ops run / 1e16, i.e.
  // models::model_flops_per_iteration with the fine-tuning spec (frozen GEMMs
  // forward + input gradient, adapters and attention 3×) up to tick rounding.
  // Naive attention: its backward is 2× forward, the model-FLOPs convention
  // (flash recomputes the scores: 2.5×).
  const std::string naive = "  attention: naive\n";
  for (const std::string& training : {naive, naive + kLora}) {
    const Scenario s = scenario(1, 2, 1, training);
    FlopsOnlyCost compute(s.cluster.gpu);
    FreeCollectives coll;
    SimulateOptions o;
    o.compute = &compute;
    o.collectives = &coll;
    const Result r = simulate(s, o).result;
    const double flops = models::model_flops_per_iteration(s.model, 1, s.plan.par.finetune);
    EXPECT_DOUBLE_EQ(r.model_flops_per_iteration, flops);
    EXPECT_NEAR(r.iteration_time_s / (flops / 1e16), 1.0, 0.02) << training;
  }
}

TEST(FinetuneProgram, ScenarioKeyIsChecked) {
  auto fails = [](const std::string& ft, const std::string& parallel, const std::string& key) {
    try {
      scenario(2, 2, 2, "  finetune: " + ft, parallel);
      ADD_FAILURE() << "accepted " << ft;
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  fails("{rank: 8}", "", "training.finetune.method");
  fails("{method: dora}", "", "training.finetune.method");
  fails("{method: lora, rank: 0}", "", "training.finetune.rank");
  fails("{method: lora, rank: 4096}", "", "training.finetune.rank");  // > hidden_size 1024
  fails("{method: lora, alpha: -1}", "", "training.finetune.alpha");
  fails("{method: lora, targets: []}", "", "training.finetune.targets");
  fails("{method: lora, targets: [qkv, qkv]}", "", "training.finetune.targets[1]");
  fails("{method: lora, targets: [q_proj]}", "", "training.finetune.targets[0]");
  fails("{method: lora, base_precision: nf4}", "", "training.finetune.base_precision");
  fails("{method: qlora, base_precision: fp8}", "", "training.finetune.base_precision");
  fails("{method: qlora}", "  zero_stage: 3", "training.finetune.method");
  fails("{method: lora, rnak: 8}", "", "training.finetune.rnak");
  const Scenario q = scenario(2, 2, 2, "  finetune: {method: qlora}");
  EXPECT_TRUE(q.plan.par.finetune.nf4());
  EXPECT_EQ(q.plan.par.finetune.rank, 16);
  EXPECT_EQ(q.plan.par.finetune.targets, models::kLoraAllTargets);
}

}  // namespace
}  // namespace ptsim::sim
