// ZeRO-3's gathered parameters at their most, per framework (models/zero3_gathers.h), checked
// by hand on GPT-3 175B (one layer on one GPU: qkv 3h², proj h², fc1 4h², fc2 4h² of weights).
#include "models/zero3_gathers.h"

#include <gtest/gtest.h>

#include "models/params.h"
#include "tests/models/presets.h"

namespace ptsim::models {
namespace {

Parallelism zero3_dp8() {
  Parallelism p;
  p.dp = 8;
  p.zero_stage = 3;
  return p;
}

double layer_bytes(const ModelSpec& m) {
  return 2.0 * static_cast<double>(layer_params_per_gpu(m, 1, 1, false).total());
}

// One layer ahead (Megatron-core, FSDP): the layer in use and the next one.
TEST(Zero3Gathers, OneLayerAheadHoldsTwoLayers) {
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p = zero3_dp8();
  EXPECT_DOUBLE_EQ(zero3_gathered_peak(m, p, 0), 2 * layer_bytes(m));
  p.zero3.prefetch = p.zero3.backward_prefetch = false;
  EXPECT_DOUBLE_EQ(zero3_gathered_peak(m, p, 0), layer_bytes(m));
  // Nothing to gather over: one data-parallel rank.
  p.dp = 1;
  EXPECT_DOUBLE_EQ(zero3_gathered_peak(m, p, 0), 0.0);
}

// DeepSpeed's linear submodules share the layer's bytes by weight: fc1 is 4/12 of it. (A
// middle stage: the embedding and the head are whole blocks, larger than any submodule.)
TEST(Zero3Gathers, DeepSpeedSubmodules) {
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p = zero3_dp8();
  p.pp = 4;
  p.num_microbatches = 4;
  p.zero3.per_submodule = true;
  p.zero3.persistence_elems = 1e5;
  p.zero3.reuse_elems = 1e9;
  // Before 0.6 every gather blocks: one submodule at a time, the largest.
  p.zero3.prefetch = p.zero3.backward_prefetch = false;
  EXPECT_NEAR(zero3_gathered_peak(m, p, 1), layer_bytes(m) * 4 / 12, 1.0);
  // Full recompute, the layer (1.8 G parameters) beyond the reuse distance: gathered again
  // for the backward, still one at a time; within it, the recompute keeps the whole layer.
  p.recompute = Recompute::full;
  EXPECT_NEAR(zero3_gathered_peak(m, p, 1), layer_bytes(m) * 4 / 12, 1.0);
  p.zero3.reuse_elems = 1e10;
  EXPECT_NEAR(zero3_gathered_peak(m, p, 1), layer_bytes(m), 1.0);
  // Prefetching while fewer than 5e7 elements are ahead: every submodule here is larger,
  // so one ahead; fc1 beside fc2 is the most.
  p.recompute = Recompute::none;
  p.zero3.prefetch = p.zero3.backward_prefetch = true;
  p.zero3.prefetch_elems = 5e7;
  EXPECT_NEAR(zero3_gathered_peak(m, p, 1), layer_bytes(m) * 8 / 12, 1.0);
  // On a single stage the head block (with the tied embedding) is gathered whole, the most.
  p.pp = 1;
  EXPECT_DOUBLE_EQ(
      zero3_gathered_peak(m, p, 0),
      2.0 * static_cast<double>(stage_params(m, p, 0).total() - 96 * layer_params_per_gpu(m, 1, 1, false).total()) +
          layer_bytes(m) * 4 / 12);
}

// FSDP's SHARD_GRAD_OP (reshard_after_forward false) keeps the forward's gathers to the
// backward: the whole stage, once per forward in flight.
TEST(Zero3Gathers, ShardGradOpKeepsTheWholeForward) {
  const ModelSpec m = preset("gpt3-175b");
  Parallelism p = zero3_dp8();
  p.zero3.reshard_after_forward = false;
  const double stage = 2.0 * static_cast<double>(stage_params(m, p, 0).total());
  EXPECT_DOUBLE_EQ(zero3_gathered_peak(m, p, 0), stage);
  p.pp = 4;
  p.dp = 2;
  p.num_microbatches = 8;
  const double layers =
      24 * layer_bytes(m) +
      2.0 * static_cast<double>(stage_params(m, p, 0).total() - 24 * layer_params_per_gpu(m, 1, 1, false).total());
  EXPECT_NEAR(zero3_gathered_peak(m, p, 0), 4 * layers, 1.0);  // 1F1B: 4 forwards in flight on stage 0
}

// A MoE layer's expert weights are a unit of their own when they lie apart.
TEST(Zero3Gathers, ExpertWeightsApart) {
  const ModelSpec m = preset("mixtral-8x7b");
  Parallelism p = zero3_dp8();
  p.ep = 4;
  EXPECT_TRUE(experts_apart(m, p));
  const LocalParams lp = layer_params_per_gpu(m, 1, 4, true);
  const auto pieces = gather_pieces(p, nullptr, static_cast<double>(lp.total()), static_cast<double>(lp.expert), 2.0);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_DOUBLE_EQ(pieces[0].bytes, 2.0 * static_cast<double>(lp.dense));
  EXPECT_TRUE(pieces[1].expert);
  EXPECT_DOUBLE_EQ(zero3_gathered_peak(m, p, 0), 4.0 * static_cast<double>(lp.total()));
  p.ep = 1;
  EXPECT_FALSE(experts_apart(m, p));
}

}  // namespace
}  // namespace ptsim::models
