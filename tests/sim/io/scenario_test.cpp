#include "sim/io/scenario_file.h"

#include <gtest/gtest.h>

#include "sim/core/errors.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

const std::string kBase = R"(name: t
model:
  preset: gpt3-1.7b
cluster:
  gpu: a100-sxm-80gb
  num_gpus: 32
  gpus_per_node: 8
  intra_node: { fabric: nvswitch, bandwidth: "300 GB/s", latency: "1 us" }
  inter_node: { topology: fat-tree, nics_per_node: 8, nic_bandwidth: "200 Gb/s", latency: "2 us" }
parallel:
  tensor_parallel: 2
  pipeline_parallel: 2
training:
  global_batch_size: 64
  micro_batch_size: 1
)";

// Expects a ScenarioError whose message contains every fragment.
void expect_error(const std::string& yaml, const std::vector<std::string>& overrides,
                  const std::vector<std::string>& fragments) {
  try {
    parse_scenario(yaml, "s.yaml", overrides);
    ADD_FAILURE() << "no error for overrides " << ::testing::PrintToString(overrides);
  } catch (const ScenarioError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("s.yaml"), std::string::npos) << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
  }
}

TEST(Scenario, LoadsAndDerivesDataParallel) {
  const Scenario s = parse_scenario(kBase, "s.yaml");
  EXPECT_EQ(s.plan.par.dp, 8);
  EXPECT_EQ(s.plan.par.num_microbatches, 8);  // 64 / (1 × 8)
  EXPECT_DOUBLE_EQ(s.cluster.nic_bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(s.cluster.intra_bandwidth, 300e9);
  EXPECT_DOUBLE_EQ(s.cluster.inter_latency, 2e-6);
}

TEST(Scenario, UnknownKeySuggestsTheClosest) {
  expect_error(kBase, {"parallel.tensor_paralel=2"},
               {"parallel.tensor_paralel", "unknown key", "parallel.tensor_parallel"});
  expect_error(kBase, {"trainig.x=1"}, {"trainig", "training"});
}

TEST(Scenario, QuantityWithoutUnitIsAnError) {
  expect_error(kBase, {"cluster.intra_node.bandwidth=300"}, {"cluster.intra_node.bandwidth", "no unit"});
  expect_error(kBase, {"cluster.inter_node.latency=2"}, {"cluster.inter_node.latency", "no unit"});
  expect_error(kBase, {"cluster.inter_node.nic_bandwidth=200 Gbps"}, {"nic_bandwidth", "unknown bandwidth unit"});
}

TEST(Scenario, SetOverridesAKey) {
  const Scenario s = parse_scenario(kBase, "s.yaml", {"parallel.tensor_parallel=4", "training.precision=fp16"});
  EXPECT_EQ(s.plan.par.tp, 4);
  EXPECT_EQ(s.plan.par.dp, 4);
  EXPECT_EQ(s.plan.par.precision, models::Precision::fp16);
  expect_error(kBase, {"parallel.tensor_parallel"}, {"KEY=VALUE"});
}

TEST(Scenario, TrainingMemoryKeys) {
  const Scenario s = parse_scenario(
      kBase, "s.yaml", {"training.memory.state_layout=deepspeed", "training.memory.allocator_overhead=0.15"});
  EXPECT_EQ(s.plan.par.state_layout, models::StateLayout::deepspeed);
  EXPECT_DOUBLE_EQ(s.plan.par.allocator_overhead, 0.15);
  const Scenario d = parse_scenario(kBase, "s.yaml");
  EXPECT_EQ(d.plan.par.state_layout, models::StateLayout::megatron);
  EXPECT_DOUBLE_EQ(d.plan.par.allocator_overhead, 0.0);
  expect_error(kBase, {"training.memory.state_layout=zero"}, {"training.memory.state_layout", "megatron"});
  expect_error(kBase, {"training.memory.allocator_overhead=-0.1"}, {"training.memory.allocator_overhead", "[0, 4]"});
  expect_error(kBase, {"training.memory.overhead=0.1"}, {"training.memory", "allocator_overhead"});
}

// PyTorch's cuBLAS workspace per (handle, stream): the GPU's default, or the
// CUBLAS_WORKSPACE_CONFIG string (":SIZE:COUNT" pairs of SIZE KiB, summed).
TEST(Scenario, CublasWorkspaceConfig) {
  EXPECT_DOUBLE_EQ(parse_scenario(kBase, "s.yaml").plan.par.blas_workspace, 8519680.0);  // A100: :4096:2:16:8
  EXPECT_DOUBLE_EQ(parse_scenario(kBase, "s.yaml", {"cluster.gpu=h100"}).plan.par.blas_workspace, 33554432.0);
  const std::string key = "training.memory.cublas_workspace_config";
  EXPECT_DOUBLE_EQ(parse_scenario(kBase, "s.yaml", {key + "=\":4096:8\""}).plan.par.blas_workspace, 33554432.0);
  EXPECT_DOUBLE_EQ(parse_scenario(kBase, "s.yaml", {key + "=\":4096:2:16:8\""}).plan.par.blas_workspace, 8519680.0);
  EXPECT_DOUBLE_EQ(parse_scenario(kBase, "s.yaml", {key + "=\":0:0\""}).plan.par.blas_workspace, 0.0);
  for (const char* bad : {"4096:8", ":4096", "\":4096:8:\"", "4 MiB"})
    expect_error(kBase, {key + "=" + bad}, {key, ":SIZE:COUNT"});
  expect_error(kBase, {key + "=\"\""}, {key});
  expect_error(kBase, {key + "=\":999999999:999\""}, {key, "out of range"});
}

// Transformer Engine's cuBLAS workspaces: one for its layers, one for Megatron's MoE router
// GEMM even under the local layers, four more for TEGroupedMLP's grouped GEMMs.
TEST(Scenario, TransformerEngineWorkspaces) {
  const auto workspaces = [](std::vector<std::string> o) {
    return parse_scenario(kBase, "s.yaml", o).plan.par.te_workspace / (4.0 * 1024 * 1024);
  };
  const std::string moe = "model.moe.num_experts=8", local = "training.megatron.transformer_impl=local";
  const std::string grouped = "training.megatron.moe_grouped_gemm=true";
  EXPECT_DOUBLE_EQ(workspaces({}), 1.0);
  EXPECT_DOUBLE_EQ(workspaces({local}), 0.0);
  EXPECT_DOUBLE_EQ(workspaces({grouped}), 1.0);  // no experts: nothing grouped
  EXPECT_DOUBLE_EQ(workspaces({moe, "model.moe.top_k=2"}), 1.0);
  EXPECT_DOUBLE_EQ(workspaces({moe, "model.moe.top_k=2", local}), 1.0);
  EXPECT_DOUBLE_EQ(workspaces({moe, "model.moe.top_k=2", local, grouped}), 1.0);
  EXPECT_DOUBLE_EQ(workspaces({moe, "model.moe.top_k=2", grouped}), 5.0);
  EXPECT_DOUBLE_EQ(workspaces({moe, "model.moe.top_k=2", grouped, "cluster.gpu=h100"}), 40.0);
  EXPECT_DOUBLE_EQ(workspaces({moe, "model.moe.top_k=2", "training.framework=deepspeed"}), 0.0);
  expect_error(kBase, {grouped + "x"}, {"training.megatron.moe_grouped_gemm"});
}

// Megatron-core's experts apply the routing weights to their activation (fused for SwiGLU
// unless training.megatron.bias_activation_fusion is off); DeepSpeed's combine weights the
// expert output.
TEST(Scenario, WhereMoeRoutingWeightsApply) {
  const std::vector<std::string> moe = {"model.moe.num_experts=8", "model.moe.top_k=2"};
  auto par = [&](std::vector<std::string> more) {
    more.insert(more.begin(), moe.begin(), moe.end());
    return parse_scenario(kBase, "s.yaml", more).plan.par;
  };
  EXPECT_TRUE(par({}).moe_probs_in_experts);
  EXPECT_FALSE(par({}).moe_fused_weighted_act);  // kBase's MLP is GeLU
  EXPECT_TRUE(par({"model.mlp=swiglu"}).moe_fused_weighted_act);
  EXPECT_FALSE(par({"model.mlp=swiglu", "training.megatron.bias_activation_fusion=false"}).moe_fused_weighted_act);
  EXPECT_FALSE(par({"training.framework=deepspeed"}).moe_probs_in_experts);
  EXPECT_FALSE(parse_scenario(kBase, "s.yaml").plan.par.moe_probs_in_experts);
}

// The loss kernels follow the framework: Megatron's unfused vocab-parallel cross entropy
// (megatron-core, megatron-lm, Megatron-DeepSpeed), its torch.compile form under
// training.megatron.cross_entropy_loss_fusion (megatron-core only), FSDP's runs one fused kernel.
TEST(Scenario, LossKernelFollowsTheFramework) {
  const auto kernel = [](std::vector<std::string> o) {
    return parse_scenario(kBase, "s.yaml", o).plan.par.loss_kernel;
  };
  const std::string fusion = "training.megatron.cross_entropy_loss_fusion";
  EXPECT_EQ(kernel({}), models::LossKernel::megatron);
  EXPECT_EQ(kernel({fusion + "=true"}), models::LossKernel::megatron_compiled);
  EXPECT_EQ(kernel({fusion + "=false"}), models::LossKernel::megatron);
  EXPECT_EQ(kernel({"training.framework=megatron-lm"}), models::LossKernel::megatron);
  EXPECT_EQ(kernel({"training.framework=deepspeed"}), models::LossKernel::megatron);
  EXPECT_EQ(kernel({"training.framework=fsdp", "parallel.zero_stage=3"}), models::LossKernel::fused);
  expect_error(kBase, {"training.framework=megatron-lm", fusion + "=true"}, {fusion, "megatron-core"});
  expect_error(kBase, {fusion + "=yes please"}, {fusion});
  // The other megatron-core-only options of the same family.
  for (const std::string key : {"training.megatron.ddp_average_in_collective", "training.megatron.delay_grad_reduce"})
    expect_error(kBase, {"training.framework=megatron-lm", key + "=true"}, {key, "megatron-core"});
  expect_error(kBase, {"training.megatron.check_for_nan_in_loss_and_grad=2"},
               {"training.megatron.check_for_nan_in_loss_and_grad"});
}

TEST(Scenario, WgradDeferralLimitNeedsTheDeferral) {
  expect_error(kBase, {"training.megatron.wgrad_deferral_limit=2"},
               {"training.megatron.wgrad_deferral_limit", "defer_embedding_wgrad_compute"});
  expect_error(kBase,
               {"training.megatron.defer_embedding_wgrad_compute=true", "training.megatron.wgrad_deferral_limit=-1"},
               {"training.megatron.wgrad_deferral_limit"});
  EXPECT_EQ(parse_scenario(
                kBase, "s.yaml",
                {"training.megatron.defer_embedding_wgrad_compute=true", "training.megatron.wgrad_deferral_limit=3"})
                .plan.par.wgrad_deferral_limit,
            3);
}

TEST(Scenario, ExpertTensorParallel) {
  const std::vector<std::string> moe = {"model.moe.num_experts=8", "model.moe.top_k=2", "parallel.tensor_parallel=2",
                                        "parallel.sequence_parallel=true", "parallel.expert_parallel=4"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), moe.begin(), moe.end());
    return more;
  };
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", with({})).plan.par.expert_tp(), 2);
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", with({"parallel.expert_tensor_parallel=1"})).plan.par.expert_tp(), 1);
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", with({"parallel.expert_tensor_parallel=2"})).plan.par.expert_tp(), 2);
  const std::string key = "parallel.expert_tensor_parallel";
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", with({key + "=4", "parallel.tensor_parallel=4"})).plan.par.expert_tp(), 4);
  expect_error(kBase, with({key + "=4"}), {key, "does not divide tensor_parallel (2)"});
  expect_error(kBase, with({key + "=3"}), {key, "does not divide tensor_parallel"});
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", with({key + "=2", "parallel.tensor_parallel=4"})).plan.par.expert_tp(), 2);
  expect_error(kBase, with({key + "=1", "parallel.sequence_parallel=false"}), {key, "sequence_parallel"});
  expect_error(kBase, {key + "=1", "parallel.tensor_parallel=2", "parallel.sequence_parallel=true"}, {key, "MoE"});
}

TEST(Scenario, EveryConstraintNamesItsKeys) {
  expect_error(kBase, {"parallel.tensor_parallel=5", "cluster.num_gpus=40"},
               {"parallel.tensor_parallel", "model.num_attention_heads"});
  expect_error(kBase, {"model.num_query_groups=3"}, {"parallel.tensor_parallel", "model.num_query_groups"});
  expect_error(kBase, {"parallel.pipeline_parallel=5"}, {"num_gpus"});
  expect_error(kBase, {"parallel.pipeline_parallel=16"}, {"model.num_layers", "pipeline_parallel"});
  expect_error(kBase, {"parallel.data_parallel=4"}, {"cluster.num_gpus", "data_parallel"});
  expect_error(kBase, {"training.global_batch_size=60"},
               {"training.global_batch_size", "micro_batch_size × data_parallel"});
  expect_error(kBase, {"training.micro_batch_size=0"}, {"training.micro_batch_size", "at least 1"});
  expect_error(kBase, {"parallel.sequence_parallel=true", "parallel.tensor_parallel=1"},
               {"parallel.sequence_parallel"});
  expect_error(kBase, {"parallel.sequence_parallel=true", "model.seq_length=2047"},
               {"sequence_parallel", "seq_length"});
  expect_error(kBase, {"parallel.virtual_pipeline_stages=2", "parallel.pipeline_schedule=1f1b"},
               {"virtual_pipeline_stages", "interleaved"});
  expect_error(kBase, {"parallel.virtual_pipeline_stages=2", "training.global_batch_size=40"},
               {"multiple of pipeline_parallel"});
  expect_error(kBase, {"training.megatron.microbatch_group_size_per_vp_stage=8"},
               {"training.megatron.microbatch_group_size_per_vp_stage", "interleaved schedule only"});
  // 8 micro-batches on 2 stages with 2 chunks: groups in [2, 8], a last one of 0 or >= 2.
  const std::string vpp2 = "parallel.virtual_pipeline_stages=2";
  expect_error(kBase, {vpp2, "training.megatron.microbatch_group_size_per_vp_stage=1"},
               {"training.megatron.microbatch_group_size_per_vp_stage", "[pipeline_parallel, micro-batches] = [2, 8]"});
  expect_error(kBase, {vpp2, "training.megatron.microbatch_group_size_per_vp_stage=9"},
               {"training.megatron.microbatch_group_size_per_vp_stage", "outside"});
  expect_error(kBase, {vpp2, "training.megatron.microbatch_group_size_per_vp_stage=7"},
               {"training.global_batch_size", "last group of 1"});
  expect_error(kBase,
               {vpp2, "training.framework=megatron-lm", "training.megatron.microbatch_group_size_per_vp_stage=4"},
               {"training.megatron.microbatch_group_size_per_vp_stage", "megatron-core"});
  EXPECT_EQ(parse_scenario(kBase, "s.yaml", {vpp2, "training.megatron.microbatch_group_size_per_vp_stage=3"})
                .plan.par.microbatch_group,
            3);
  expect_error(kBase, {"parallel.zero_stage=4"}, {"parallel.zero_stage"});
  expect_error(kBase, {"parallel.expert_parallel=2"}, {"parallel.expert_parallel", "MoE"});
  expect_error(kBase, {"parallel.context_parallel=3", "parallel.tensor_parallel=1"}, {"context_parallel"});
  expect_error(kBase, {"training.precision=fp8"}, {"training.precision", "fp8"});
  expect_error(kBase, {"parallel.offload_params=true"}, {"offload_params", "zero_stage"});
  expect_error(kBase, {"parallel.pipeline_layers=[10, 10]"}, {"parallel.pipeline_layers", "num_layers"});
  expect_error(kBase, {"parallel.pipeline_layers=[24]"}, {"parallel.pipeline_layers", "entries"});
  expect_error(kBase, {"training.precision=bf17"}, {"training.precision", "bf16"});
  expect_error(kBase, {"model.preset=gpt3-175"}, {"model.preset", "gpt3-175b"});
  expect_error(kBase, {"cluster.gpu=a100-sxm-80"}, {"cluster.gpu", "a100-sxm-80gb"});
  expect_error(kBase, {"cluster.num_gpus=-4"}, {"cluster.num_gpus"});
  expect_error(kBase, {"cluster.inter_node.oversubscription=0.5"}, {"oversubscription"});
  expect_error(kBase, {"model.hidden_size=2305"}, {"model.hidden_size", "num_attention_heads"});
  expect_error(kBase, {"parallel.tensor_parallel=abc"}, {"parallel.tensor_parallel", "whole number"});
}

TEST(Scenario, BadYamlNamesTheLine) { expect_error("model: [\n", {}, {"not valid YAML"}); }

TEST(Scenario, UnevenPipelineSplit) {
  const Scenario s = parse_scenario(kBase, "s.yaml", {"parallel.pipeline_layers=[10, 14]"});
  EXPECT_EQ(s.plan.par.pipeline_layers.size(), 2u);
}

TEST(Scenario, ClosestMatch) {
  EXPECT_EQ(closest_match("tensor_paralel", {"pipeline_parallel", "tensor_parallel"}), "tensor_parallel");
}

}  // namespace
}  // namespace ptsim::sim
