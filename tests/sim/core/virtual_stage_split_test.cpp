// Layers per virtual stage (Megatron-core's account_for_embedding_in_pipeline_split /
// account_for_loss_in_pipeline_split, or parallel.pipeline_layers with pp × vpp counts):
// chunks that hold only the embedding or only the head run, and interleaving one layer
// per chunk shrinks the bubble as (p − 1) / (v · m) says.
#include <gtest/gtest.h>

#include <string>

#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"

namespace ptsim::sim {
namespace {

// 14 layers + embedding + loss = 16 = 4 stages × 4 chunks of one layer.
Scenario split(int vpp) {
  const std::string schedule = vpp > 1 ? "interleaved-1f1b" : "1f1b";
  return parse_scenario(R"(name: vstage
model:
  num_layers: 14
  hidden_size: 4096
  num_attention_heads: 32
  ffn_hidden_size: 16384
  vocab_size: 50304
  seq_length: 2048
cluster:
  gpu: a100-sxm-80gb
  num_gpus: 64
  inter_node: { nic_bandwidth: "200 Gb/s" }
parallel:
  tensor_parallel: 8
  pipeline_parallel: 4
  pipeline_schedule: )" + schedule +
                            R"(
  virtual_pipeline_stages: )" +
                            std::to_string(vpp) + R"(
training:
  global_batch_size: 64
  micro_batch_size: 1
  megatron:
    account_for_embedding_in_pipeline_split: true
    account_for_loss_in_pipeline_split: true
)",
                        "vstage.yaml");
}

TEST(VirtualStageSplit, EmbeddingAndHeadOnlyChunksRunAndInterleavingShrinksTheBubble) {
  const Scenario plain = split(1), inter = split(4);
  EXPECT_EQ(plain.plan.par.pipeline_layers, (std::vector<int>{3, 4, 4, 3}));
  ASSERT_EQ(inter.plan.par.pipeline_layers.size(), 16u);
  EXPECT_EQ(inter.plan.par.pipeline_layers.front(), 0);  // the embedding's chunk
  EXPECT_EQ(inter.plan.par.pipeline_layers.back(), 0);   // the head's chunk
  const auto a = simulate(plain).result, b = simulate(inter).result;
  ASSERT_TRUE(a.feasible);
  ASSERT_TRUE(b.feasible);
  // m = 8 micro-batches per pipeline (64 / dp 2 / 1), p = 4: 1F1B's bubble is about
  // (p − 1) / m of the compute, interleaving's with one layer per chunk about a quarter of it
  // (uneven chunks and the extra p2p keep it above).
  EXPECT_LT(b.bubble_time_s, 0.6 * a.bubble_time_s);
  EXPECT_LT(b.iteration_time_s, a.iteration_time_s);
  // The same model, the same work: equal model FLOPs.
  EXPECT_DOUBLE_EQ(a.model_flops_per_iteration, b.model_flops_per_iteration);
}

}  // namespace
}  // namespace ptsim::sim
