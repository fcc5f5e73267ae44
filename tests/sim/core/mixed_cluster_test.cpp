// Mixed-GPU clusters (cluster.gpus, sim/core/mixed_cluster.h): the stage-to-type
// mapping, the balanced layer split against a hand calculation, and the iteration of
// the balanced against the even split by the 1F1B formula.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/errors.h"
#include "sim/core/mixed_cluster.h"
#include "sim/core/simulate.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

using testing::FreeCollectives;

// A tiny GPT on 2 A100 nodes then 2 H100 nodes of 2 GPUs (tp 2, pp 4: one stage per node).
std::string mixed_yaml(const std::string& parallel_extra = "", int layers = 40, int gbs = 8,
                       const std::string& groups = "[{type: a100-sxm-80gb, nodes: 2}, {type: h100-sxm, nodes: 2}]") {
  return fmt::format(R"(name: mixed
{}cluster:
  gpus: {}
  gpus_per_node: 2
parallel:
  tensor_parallel: 2
  pipeline_parallel: 4
{}
training:
  global_batch_size: {}
  micro_batch_size: 1
)",
                     testing::tiny_gpt_model_yaml(layers), groups, parallel_extra, gbs);
}

// GEMM and attention FLOPs at `rate` of the GPU's bf16 peak, everything else free: the
// time per layer of two GPU types is then in the ratio of their peaks.
class PeakShareCost : public hw::ComputeCostModel {
 public:
  explicit PeakShareCost(const hw::GpuSpec& g) : hw::ComputeCostModel(g) {}
  Seconds seconds(const hw::KernelDesc& k) const override {
    if (k.cls == hw::KernelClass::memory) return 0;
    return k.flops / (gpu().peak("bf16") * 0.01);
  }
  std::string source() const override { return "synthetic"; }
};

Result run_peak_share(const Scenario& s, bool fold = true) {
  std::vector<PeakShareCost> models;
  for (const auto& g : s.cluster.gpu_groups) models.emplace_back(g.gpu);
  FreeCollectives coll;
  SimulateOptions o;
  o.collectives = &coll;
  o.fold = fold;
  for (const auto& m : models) o.group_compute.push_back(&m);
  return simulate(s, o).result;
}

TEST(MixedCluster, StagesMapOntoTheGpuTypesStageMajor) {
  const Scenario s = parse_scenario(mixed_yaml("  pipeline_layers: [10, 10, 10, 10]"), "m.yaml");
  ASSERT_TRUE(s.cluster.mixed());
  EXPECT_EQ(s.cluster.num_gpus, 8);
  EXPECT_EQ(stage_groups(s.cluster, 4), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(stage_gpu(s.cluster, 4, 1).name, "a100-sxm-80gb");
  EXPECT_EQ(stage_gpu(s.cluster, 4, 2).name, "h100-sxm");
  // pp 2: each stage is one type's two nodes.
  EXPECT_EQ(stage_groups(s.cluster, 2), (std::vector<int>{0, 1}));
  // pp 1 would put both types in one stage.
  EXPECT_THROW(stage_groups(s.cluster, 1), std::invalid_argument);
  // MFU's peak: the mean of the GPUs' peaks.
  const double a = hw::find_gpu("a100-sxm-80gb")->peak_bf16, h = hw::find_gpu("h100-sxm")->peak_bf16;
  EXPECT_DOUBLE_EQ(mean_peak(s.cluster, "bf16"), (a + h) / 2);
  // The energy figure's default power: the mean TDP (A100 SXM 400 W, H100 SXM 700 W).
  EXPECT_DOUBLE_EQ(mean_tdp(s.cluster), (hw::find_gpu("a100-sxm-80gb")->tdp + hw::find_gpu("h100-sxm")->tdp) / 2);
  EXPECT_EQ(gpu_summary(s.cluster), "a100-sxm-80gb × 4 + h100-sxm × 4");
}

TEST(MixedCluster, BalancedLayersByHand) {
  // A100 stages 3× slower per layer: 40 layers in proportion to speed 1/3 : 1/3 : 1 : 1
  // = 5, 5, 15, 15 (every stage 15 layer-times of the H100).
  EXPECT_EQ(balanced_layers(40, 1, {3, 3, 1, 1}, {0, 0, 0, 0}), (std::vector<int>{5, 5, 15, 15}));
  // Units of 2 layers (2 chunks per stage), unit times 6, 6, 2, 2: with 2 units on each
  // A100 stage (time 12) the H100 stages take 8 units each (time 16); a third A100 unit
  // would take 18. So 4, 4, 16, 16.
  EXPECT_EQ(balanced_layers(40, 2, {3, 3, 1, 1}, {0, 0, 0, 0}), (std::vector<int>{4, 4, 16, 16}));
  // Equal speeds: the even split.
  EXPECT_EQ(balanced_layers(40, 1, {1, 1, 1, 1}, {0, 0, 0, 0}), (std::vector<int>{10, 10, 10, 10}));
  // Every stage holds at least one unit.
  EXPECT_EQ(balanced_layers(4, 1, {100, 1, 1, 1}, {0, 0, 0, 0}), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_THROW(balanced_layers(3, 1, {1, 1, 1, 1}, {0, 0, 0, 0}), std::invalid_argument);
  EXPECT_THROW(balanced_layers(41, 2, {1, 1, 1, 1}, {0, 0, 0, 0}), std::invalid_argument);
}

TEST(MixedCluster, BalancedLayersWithAHead) {
  // The last stage also runs a head worth 3 H100 layer-times. A slowest stage of 16
  // allows at most 5 + 5 + 16 + 13 = 39 layers, of 17 at most 5 + 5 + 17 + 14 = 41: the
  // least maximum is 17, and the greedy split reaches it.
  const auto n = balanced_layers(40, 1, {3, 3, 1, 1}, {0, 0, 0, 3});
  int sum = 0;
  for (int k : n) sum += k;
  EXPECT_EQ(sum, 40);
  double worst = 0;
  const double t[4] = {3, 3, 1, 1}, f[4] = {0, 0, 0, 3};
  for (int i = 0; i < 4; ++i) worst = std::max(worst, f[i] + n[static_cast<std::size_t>(i)] * t[i]);
  EXPECT_EQ(worst, 17);
}

TEST(MixedCluster, ScenarioWithoutPipelineLayersIsBalanced) {
  const Scenario s = parse_scenario(mixed_yaml(), "m.yaml");
  EXPECT_TRUE(s.pipeline_balanced);
  const auto& n = s.plan.par.pipeline_layers;
  ASSERT_EQ(n.size(), 4u);
  // The same split by hand from the two types' layer times (the roofline's).
  const auto a = block_seconds(s, group_compute(s, 0)), h = block_seconds(s, group_compute(s, 1));
  EXPECT_GT(a.dense_layer, h.dense_layer);
  EXPECT_EQ(n, balanced_layers(40, 1, {a.dense_layer, a.dense_layer, h.dense_layer, h.dense_layer},
                               {a.embedding, 0, 0, h.head}));
  EXPECT_GT(n[2], n[1]);  // the H100 stages hold more layers
  // Given pipeline_layers stay as given.
  const Scenario g = parse_scenario(mixed_yaml("  pipeline_layers: [10, 10, 10, 10]"), "m.yaml");
  EXPECT_FALSE(g.pipeline_balanced);
  EXPECT_EQ(g.plan.par.pipeline_layers, (std::vector<int>{10, 10, 10, 10}));
}

TEST(MixedCluster, BalancedSplitAgainstTheEvenOneBy1F1BFormula) {
  // Compute-only costs at 1 % of each GPU's bf16 peak, free communication: an H100
  // layer (forward + backward) takes h, an A100 layer r·h with r = 989.4 / 312 (the
  // peaks). H100 nodes first: stages 0-1 on H100, 2-3 on A100. 1F1B whose last stages
  // are the slowest takes ΣT_s + (m − 1)·max T_s (the first micro-batch's forward down
  // the pipeline, m passes of the last stage, the last backward back up).
  const std::string groups = "[{type: h100-sxm, nodes: 2}, {type: a100-sxm-80gb, nodes: 2}]";
  const double r = hw::find_gpu("h100-sxm")->peak_bf16 / hw::find_gpu("a100-sxm-80gb")->peak_bf16;
  const int m = 8;
  const Result even =
      run_peak_share(parse_scenario(mixed_yaml("  pipeline_layers: [10, 10, 10, 10]", 40, m, groups), "m.yaml"));
  const Result bal =
      run_peak_share(parse_scenario(mixed_yaml("  pipeline_layers: [15, 15, 5, 5]", 40, m, groups), "m.yaml"));
  ASSERT_TRUE(even.mixed);
  // The even split's baseline (every stage an H100, equal stages): 40h + 7·10h = 110h.
  const double h = even.mixed->baseline_iteration_s / (40 + (m - 1) * 10.0);
  const double even_hand = (20 + 20 * r) * h + (m - 1) * 10 * r * h;
  const double bal_hand = (30 + 10 * r) * h + (m - 1) * std::max(5 * r, 15.0) * h;
  EXPECT_NEAR(even.iteration_time_s, even_hand, 0.01 * even_hand);
  EXPECT_NEAR(bal.iteration_time_s, bal_hand, 0.01 * bal_hand);
  EXPECT_LT(bal.iteration_time_s, 0.6 * even.iteration_time_s);
  // The summary: the critical stage is an A100 one, and the cost is against all H100.
  EXPECT_EQ(even.mixed->critical_gpu, "a100-sxm-80gb");
  EXPECT_GE(even.mixed->critical_stage, 2);
  EXPECT_EQ(even.mixed->fastest_gpu, "h100-sxm");
  EXPECT_EQ(even.mixed->stage_gpus, (std::vector<std::string>{"h100-sxm", "h100-sxm", "a100-sxm-80gb", "a100-sxm-80gb"}));
  EXPECT_NEAR(even.mixed->cost_s, even.iteration_time_s - even.mixed->baseline_iteration_s, 1e-9);
  const auto j = to_json(even);
  EXPECT_EQ(j["mixed"]["critical_gpu"], "a100-sxm-80gb");
  // Folded and unfolded agree (every rank of a stage has the stage's GPU).
  const Result full = run_peak_share(
      parse_scenario(mixed_yaml("  pipeline_layers: [15, 15, 5, 5]", 40, m, groups), "m.yaml"), false);
  EXPECT_NEAR(full.iteration_time_s, bal.iteration_time_s, 1e-6 * bal.iteration_time_s);
}

TEST(MixedCluster, MemoryIsCheckedAgainstEachStagesGpu) {
  // A100 40 GB next to A100 80 GB: a stage that needs between 40 and 80 GiB fits on the
  // 80 GB type only, and the verdict names the stage and its GPU.
  const std::string groups = "[{type: a100-sxm-40gb, nodes: 2}, {type: a100-sxm-80gb, nodes: 2}]";
  std::string yaml = mixed_yaml("  pipeline_layers: [10, 10, 10, 10]", 40, 8, groups);
  yaml.replace(yaml.find("hidden_size: 1024"), 17, "hidden_size: 8192");
  yaml.replace(yaml.find("num_attention_heads: 16"), 23, "num_attention_heads: 64");
  yaml.replace(yaml.find("ffn_hidden_size: 4096"), 21, "ffn_hidden_size: 32768");
  const Scenario s = parse_scenario(yaml, "m.yaml");
  const Result res = run_peak_share(s);
  ASSERT_EQ(res.per_stage.size(), 4u);
  // 10 layers of 805 M parameters / tp 2 at 18 bytes each: about 68 GiB per stage.
  EXPECT_GT(res.per_stage[2].peak, 40e9);
  EXPECT_LT(res.per_stage[2].peak, 80e9);
  EXPECT_FALSE(res.feasible);
  ASSERT_EQ(res.infeasible_reasons.size(), 2u);  // stages 0 and 1
  EXPECT_NE(res.infeasible_reasons[0].find("stage 0 (a100-sxm-40gb)"), std::string::npos) << res.infeasible_reasons[0];
}

TEST(MixedCluster, BadInputNamesTheKey) {
  auto fails = [](const std::string& yaml, const std::string& key) {
    try {
      parse_scenario(yaml, "m.yaml");
      ADD_FAILURE() << "accepted " << yaml;
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  fails(mixed_yaml("", 40, 8, "[]"), "cluster.gpus");
  fails(mixed_yaml("", 40, 8, "[{type: a100-sxm-80gb}]"), "cluster.gpus[0].nodes");
  fails(mixed_yaml("", 40, 8, "[{type: a100, nodes: 2}, {type: h10-sxm, nodes: 2}]"), "cluster.gpus[1].type");
  fails(mixed_yaml("", 40, 8, "[{type: h100-sxm, nodes: 0}]"), "cluster.gpus[0].nodes");
  fails(mixed_yaml("", 40, 8, "[{type: h100-sxm, nodes: 2, speed: 2}]"), "cluster.gpus[0].speed");
  // A stage across the two types: 3 A100 nodes, 1 H100 node, 4 GPUs per stage at pp 2.
  std::string straddle =
      mixed_yaml("", 40, 8, "[{type: a100-sxm-80gb, nodes: 3}, {type: h100-sxm, nodes: 1}]");
  straddle.replace(straddle.find("pipeline_parallel: 4"), 20, "pipeline_parallel: 2");
  fails(straddle, "cluster.gpus");
  std::string both = mixed_yaml();
  both.replace(both.find("  gpus:"), 7, "  gpu: h100-sxm\n  gpus:");
  fails(both, "cluster.gpus");
  std::string count = mixed_yaml();
  count.replace(count.find("  gpus_per_node"), 15, "  num_gpus: 16\n  gpus_per_node");
  fails(count, "cluster.num_gpus");
}

TEST(MixedCluster, SingleGroupIsClusterGpu) {
  const Scenario s = parse_scenario(mixed_yaml("", 40, 8, "[{type: h100-sxm, nodes: 4}]"), "m.yaml");
  EXPECT_FALSE(s.cluster.mixed());
  EXPECT_EQ(s.cluster.gpu.name, "h100-sxm");
  EXPECT_EQ(s.cluster.num_gpus, 8);
  EXPECT_TRUE(s.plan.par.pipeline_layers.empty());
}

}  // namespace
}  // namespace ptsim::sim
