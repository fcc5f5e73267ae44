// training.framework and its sections: strict keys, the framework's defaults, and
// the partition of a layer count that does not divide over the pipeline stages.
#include "sim/io/framework_section.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/errors.h"
#include "sim/io/scenario_file.h"

namespace ptsim::sim {
namespace {

// A BLOOM-176B-shaped model on 12 pipeline stages: 70 layers do not divide by 12.
std::string bloom(const std::string& parallel, const std::string& training) {
  return fmt::format(R"(name: uneven
model:
  num_layers: 70
  hidden_size: 14336
  num_attention_heads: 112
  ffn_hidden_size: 57344
  vocab_size: 250880
  seq_length: 2048
  position_embedding: rope
cluster:
  gpu: a100-sxm-80gb
  num_gpus: 384
parallel:
  tensor_parallel: 4
  pipeline_parallel: 12
{}
training:
  global_batch_size: 2048
  micro_batch_size: 2
{}
)",
                     parallel, training);
}

void expect_error(const std::string& yaml, const std::vector<std::string>& fragments) {
  try {
    parse_scenario(yaml, "s.yaml");
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("s.yaml"), std::string::npos) << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
  }
}

TEST(FrameworkSection, DefaultIsMegatronCoreWithTodaysOverlap) {
  const Scenario s =
      parse_scenario(bloom("", "").replace(bloom("", "").find("num_layers: 70"), 14, "num_layers: 72"), "s.yaml");
  EXPECT_EQ(s.framework.framework, Framework::megatron_core);
  EXPECT_TRUE(s.plan.overlap_grad_reduce);
  EXPECT_TRUE(s.plan.overlap_param_gather);
  EXPECT_TRUE(s.plan.par.pipeline_layers.empty());
}

TEST(FrameworkSection, DeepSpeedPartitions70LayersOver12StagesByParameters) {
  const Scenario s = parse_scenario(bloom("", "  framework: deepspeed"), "s.yaml");
  EXPECT_EQ(s.plan.par.pipeline_layers, (std::vector<int>{5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5}));
  // DeepSpeed's pipeline engine reduces gradients after the schedule; overlap_comm
  // is off below ZeRO-3.
  EXPECT_FALSE(s.plan.overlap_grad_reduce);
}

TEST(FrameworkSection, MegatronNamesItsFirstAndLastStageKeys) {
  expect_error(bloom("", ""),
               {"not divisible", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"});
  const Scenario s = parse_scenario(
      bloom("", "  megatron: {decoder_first_pipeline_num_layers: 4, decoder_last_pipeline_num_layers: 6}"), "s.yaml");
  EXPECT_EQ(s.plan.par.pipeline_layers, (std::vector<int>{4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6}));
  expect_error(bloom("", "  megatron: {decoder_first_pipeline_num_layers: 5}"),
               {"training.megatron.decoder_first_pipeline_num_layers", "do not split evenly"});
}

// Interleaving needs a micro-batch count that is a multiple of pp: 2304 / (2 × 8) = 144.
std::string interleavable(std::string yaml) {
  yaml.replace(yaml.find("global_batch_size: 2048"), 23, "global_batch_size: 2304");
  return yaml;
}

TEST(FrameworkSection, MegatronAccountsForEmbeddingAndLossPerVirtualStage) {
  const std::string both =
      "  megatron: {account_for_embedding_in_pipeline_split: true, account_for_loss_in_pipeline_split: true}";
  // (70 + 2) / 12 = 6 a stage: 5 on the first, 5 on the last.
  EXPECT_EQ(parse_scenario(bloom("", both), "s.yaml").plan.par.pipeline_layers,
            (std::vector<int>{5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5}));
  // Interleaved with 6 chunks a stage: one layer per virtual stage, none in the first
  // (the embedding) and the last (the loss), as Llama 3 405B's schedule (Dubey et al.
  // 2024 Sec. 3.3.2).
  const Scenario v = parse_scenario(
      interleavable(bloom("  pipeline_schedule: interleaved-1f1b\n  virtual_pipeline_stages: 6", both)), "s.yaml");
  ASSERT_EQ(v.plan.par.pipeline_layers.size(), 72u);
  EXPECT_EQ(v.plan.par.pipeline_layers.front(), 0);
  EXPECT_EQ(v.plan.par.pipeline_layers.back(), 0);
  expect_error(bloom("", "  megatron: {account_for_loss_in_pipeline_split: true}"),
               {"training.megatron.account_for_loss_in_pipeline_split", "do not split evenly"});
  expect_error(
      bloom("", "  megatron: {account_for_loss_in_pipeline_split: true, decoder_first_pipeline_num_layers: 4}"),
      {"training.megatron.account_for_loss_in_pipeline_split", "decoder_first/last"});
  expect_error(bloom("  pipeline_layers: [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]", both),
               {"account_for_embedding_in_pipeline_split", "parallel.pipeline_layers"});
  expect_error(bloom("", "  megatron: {account_for_loss_in_pipeline_split: 2}"),
               {"training.megatron.account_for_loss_in_pipeline_split"});
}

TEST(FrameworkSection, PipelineLayersPerVirtualStage) {
  const std::string interleaved = "  pipeline_schedule: interleaved-1f1b\n  virtual_pipeline_stages: 2\n";
  std::string counts = "  pipeline_layers: [0";
  for (int i = 1; i < 23; ++i) counts += i == 1 ? ", 4" : ", 3";
  counts += ", 0]";  // 0 + 4 + 21 × 3 + 0 = 67: not 70
  expect_error(interleavable(bloom(interleaved + counts, "")), {"parallel.pipeline_layers", "sums to 67"});
  counts = "  pipeline_layers: [0, 4, 4, 4";
  for (int i = 4; i < 23; ++i) counts += ", 3";
  counts += ", 0]";                                  // 0 + 12 + 19 × 3 + 0 = 69
  counts.replace(counts.find("[0, 4"), 5, "[1, 4");  // 70
  EXPECT_EQ(parse_scenario(interleavable(bloom(interleaved + counts, "")), "s.yaml").plan.par.pipeline_layers.size(),
            24u);
  counts.replace(counts.find(", 3"), 3, ", 0");  // a middle virtual stage without a layer
  expect_error(interleavable(bloom(interleaved + counts, "")),
               {"parallel.pipeline_layers[", "only the first and the last"});
  // Per stage, a stage of two chunks cannot be empty.
  expect_error(interleavable(bloom(interleaved + "  pipeline_layers: [0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 10]", "")),
               {"parallel.pipeline_layers[0]", "several model chunks"});
  // Without interleaving a count per stage; a stage's count must then split over the chunks.
  expect_error(bloom("  pipeline_layers: [6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 4, 0]", ""),
               {"parallel.pipeline_layers", "13 entries"});
}

TEST(FrameworkSection, UnknownKeysAreErrorsWithTheClosestName) {
  expect_error(bloom("", "  framework: deepspeed\n  deepspeed: {stage3_prefetch_bucket: 1e6}"),
               {"training.deepspeed", "stage3_prefetch_bucket_size"});
  expect_error(bloom("", "  framework: fsdp\n  fsdp: {reshard_after_fwd: false}"), {"reshard_after_forward"});
  expect_error(bloom("", "  megatron: {bucket_sise: 1e7}"), {"bucket_size"});
  expect_error(bloom("", "  framework: deepspee"), {"training.framework", "deepspeed"});
}

TEST(FrameworkSection, SectionsAndFlagsBelongToTheirFramework) {
  expect_error(bloom("", "  deepspeed: {overlap_comm: true}"), {"training.deepspeed", "megatron-core"});
  expect_error(bloom("  overlap_grad_reduce: false", "  framework: deepspeed"),
               {"parallel.overlap_grad_reduce", "training.deepspeed.overlap_comm"});
  expect_error(bloom("  overlap_grad_reduce: false", "  megatron: {overlap_grad_reduce: true}"),
               {"training.megatron.overlap_grad_reduce", "also given"});
  expect_error(bloom("", "  framework: deepspeed\n  deepspeed: {reduce_bucket_size: 0}"),
               {"training.deepspeed.reduce_bucket_size"});
}

TEST(FrameworkSection, DeepSpeedPipelineEngineLimits) {
  expect_error(bloom("  virtual_pipeline_stages: 2\n  pipeline_layers: [6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 4]",
                     "  framework: deepspeed"),
               {"parallel.pipeline_schedule", "deepspeed"});
  expect_error(bloom("  zero_stage: 2", "  framework: deepspeed"), {"parallel.zero_stage", "ZeRO stage <= 1"});
}

// Megatron's --tp-comm-overlap runs on Transformer Engine's userbuffers and needs sequence
// parallelism (megatron/training/arguments.py asserts it).
TEST(FrameworkSection, TpCommOverlapNeedsSequenceParallelismAndTransformerEngine) {
  const std::string split = "  pipeline_layers: [6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 4]";
  const std::string sp = split + "\n  sequence_parallel: true";
  EXPECT_TRUE(parse_scenario(bloom(sp, "  megatron: {tp_comm_overlap: true}"), "s.yaml").framework.tp_comm_overlap);
  expect_error(bloom(split, "  megatron: {tp_comm_overlap: true}"),
               {"training.megatron.tp_comm_overlap", "sequence parallelism", "parallel.sequence_parallel"});
  expect_error(bloom(sp, "  megatron: {tp_comm_overlap: true, transformer_impl: local}"),
               {"training.megatron.tp_comm_overlap", "Transformer Engine", "transformer_impl"});
  expect_error(bloom(sp, "  framework: megatron-lm\n  megatron: {tp_comm_overlap: true}"),
               {"training.megatron.tp_comm_overlap", "megatron-core"});
}

TEST(FrameworkSection, MegatronDistributedOptimizerIsZero1) {
  EXPECT_EQ(parse_scenario(bloom("",
                                 "  megatron: {use_distributed_optimizer: true, decoder_first_pipeline_num_layers: "
                                 "4, decoder_last_pipeline_num_layers: 6}"),
                           "s.yaml")
                .plan.par.zero_stage,
            1);
  expect_error(bloom("  zero_stage: 1", "  megatron: {use_distributed_optimizer: false}"),
               {"use_distributed_optimizer", "zero_stage is 1"});
}

}  // namespace
}  // namespace ptsim::sim
