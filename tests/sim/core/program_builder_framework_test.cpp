// The collectives each training framework issues (sim/core/framework_profile.h),
// counted by hand on a small GPT: h = 1024, ffn 4096, 16 heads, s = 128, b = 1,
// bf16, tp = 1. Its linear submodules hold qkv 1024·3072 = 3,145,728, proj
// 1024·1024 = 1,048,576, mlp_up and mlp_down 1024·4096 = 4,194,304 weights each
// (12,582,912 in all), every one above DeepSpeed's persistence threshold (1e5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/memory.h"
#include "models/params.h"
#include "sim/core/framework_profile.h"
#include "sim/core/program_builder.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/core/program_fixtures.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

using testing::build;
using testing::Built;
using testing::FlopsOnlyCost;
using testing::phase;
using testing::Tally;

constexpr double kQkv = 3145728, kProj = 1048576, kMlp = 4194304, kLinear = kQkv + kProj + 2 * kMlp;

// One stage, no tensor parallelism: tests/sim/test_scenarios.h's tiny GPT with `parallel` and `training` lines.
std::string one_stage_yaml(int layers, int dp, int gbs, const std::string& parallel, const std::string& training) {
  return testing::tiny_gpt_yaml(1, dp, 1, layers, gbs, parallel, 8, training);
}

// The data-parallel collectives of kind c in `v`.
Tally tally(const std::vector<Instr>& v, CollectiveKind c) { return testing::tally(v, Dim::dp, c); }
// Per layer: (4-layer − 2-layer) / 2, so the embedding and head drop out.
Tally per_layer(const std::string& parallel, const std::string& training, bool backward, CollectiveKind c) {
  const Built four = build(one_stage_yaml(4, 4, 4, parallel, training)),
              two = build(one_stage_yaml(2, 4, 4, parallel, training));
  const Tally a = tally(phase(four.p.stages[0], backward), c), b = tally(phase(two.p.stages[0], backward), c);
  return {(a.count - b.count) / 2, (a.bytes - b.bytes) / 2};
}
double layer_bytes() {
  const Built b = build(one_stage_yaml(2, 4, 4, "  zero_stage: 3", ""));
  return 2.0 * static_cast<double>(models::layer_params_per_gpu(b.s.model, 1, 1, false).total());
}
// The largest count a wait on the parameter-gather channel allows in flight.
int max_gather_wait(const std::vector<Instr>& v) {
  int most = -1;
  for (const Instr& in : v)
    if (in.kind == InstrKind::wait && in.channel == kGatherChannel) most = std::max(most, in.count);
  return most;
}

TEST(ProgramBuilderFramework, Zero3GatherCountPerLayer) {
  // Megatron-core and FSDP gather a layer as one message; DeepSpeed per linear
  // submodule: 4 all-gathers per layer each way, the same bytes in all.
  const std::string z3 = "  zero_stage: 3";
  for (bool bwd : {false, true}) {
    const Tally mc = per_layer(z3, "", bwd, CollectiveKind::all_gather);
    const Tally fs = per_layer(z3, "  framework: fsdp", bwd, CollectiveKind::all_gather);
    const Tally ds = per_layer(z3, "  framework: deepspeed", bwd, CollectiveKind::all_gather);
    EXPECT_EQ(mc.count, 1);
    EXPECT_EQ(fs.count, 1);
    EXPECT_EQ(ds.count, 4);
    EXPECT_DOUBLE_EQ(mc.bytes, layer_bytes());
    EXPECT_DOUBLE_EQ(fs.bytes, layer_bytes());
    EXPECT_NEAR(ds.bytes, layer_bytes(), 1e-6 * layer_bytes());
  }
}

TEST(ProgramBuilderFramework, DeepSpeedPersistentModulesAreNotGathered) {
  // A threshold of 2e6 elements keeps proj (1,048,576) resident: 3 gathers per
  // layer, carrying (kLinear − kProj) / kLinear of the layer's bytes.
  const Tally t =
      per_layer("  zero_stage: 3", "  framework: deepspeed\n  deepspeed: {stage3_param_persistence_threshold: 2e6}",
                false, CollectiveKind::all_gather);
  EXPECT_EQ(t.count, 3);
  EXPECT_NEAR(t.bytes, layer_bytes() * (kLinear - kProj) / kLinear, 1e-6 * layer_bytes());
}

TEST(ProgramBuilderFramework, DeepSpeedPrefetchWindow) {
  // stage3_prefetch_bucket_size elements ahead: the default 5e7 exceeds the whole
  // 2-layer model's 9 gathers (4 per layer, and the embedding and head, one block
  // on a single stage), so the first use lets the other 8 fly; a window of
  // 1 element keeps one gather ahead; 0 prefetches nothing.
  const auto fwd = [](const std::string& ds) {
    return phase(build(one_stage_yaml(2, 4, 4, "  zero_stage: 3", "  framework: deepspeed\n" + ds)).p.stages[0], false);
  };
  EXPECT_EQ(max_gather_wait(fwd("")), 8);
  EXPECT_EQ(max_gather_wait(fwd("  deepspeed: {stage3_prefetch_bucket_size: 1}")), 1);
  EXPECT_EQ(max_gather_wait(fwd("  deepspeed: {stage3_prefetch_bucket_size: 0}")), 0);
  EXPECT_EQ(max_gather_wait(fwd("  deepspeed: {overlap_comm: false}")), 0);
}

// The work a list-form gather adds (DeepSpeed before 0.5.5): the total duration of the
// compute instructions of those names in `v`.
double per_rank_copy_seconds(const std::vector<Instr>& v, const Program& p) {
  double t = 0;
  for (const Instr& in : v) {
    if (in.kind != InstrKind::compute) continue;
    const std::string& name = p.labels[in.label];
    if (name == "zero3 gather buffer and per-rank views" || name == "zero3 gather per-rank copies issued" ||
        name == "zero3 gather per-rank copies")
      t += to_seconds(in.duration);
  }
  return t;
}

TEST(ProgramBuilderFramework, DeepSpeedReleasesBefore06GatherWithTheHostBlocked) {
  // 0.3.14: nothing prefetched (the default 5e7 window is ignored), every gather
  // followed by its per-rank views and copies, gradients all-reduced
  // (contiguous_gradients false before 0.4.3). 0.5.5: still blocking, flat gathers.
  // 0.6 and later: the current profile.
  const std::string z3 = "  zero_stage: 3";
  const auto built = [&](const std::string& ds, int dp) {
    Built b{parse_scenario(one_stage_yaml(2, dp, dp, z3, "  framework: deepspeed\n" + ds), "test"), {}};
    BuildOptions named;  // compute instructions keep their names
    named.fuse_compute = false;
    b.p = build_program(b.s, FlopsOnlyCost(b.s.cluster.gpu), named);
    return b;
  };
  const Built old = built("  deepspeed: {version: \"0.3.14\"}", 4);
  const auto fwd = phase(old.p.stages[0], false);
  EXPECT_EQ(max_gather_wait(fwd), 0);
  EXPECT_GT(per_rank_copy_seconds(fwd, old.p), 0);
  EXPECT_EQ(tally(phase(old.p.stages[0], true), CollectiveKind::reduce_scatter).count, 0);
  EXPECT_GT(tally(phase(old.p.stages[0], true), CollectiveKind::all_reduce).count, 0);
  // contiguous_gradients brings the reduce-scatter back.
  const Built contiguous = built("  deepspeed: {version: \"0.3.14\", contiguous_gradients: true}", 4);
  EXPECT_EQ(tally(phase(contiguous.p.stages[0], true), CollectiveKind::all_reduce).count, 0);
  EXPECT_GT(tally(phase(contiguous.p.stages[0], true), CollectiveKind::reduce_scatter).count, 0);
  // The host part grows with the DP size: per rank DeepSpeed's view, then PyTorch's select
  // of the flat result's row and its copy_, 3.3 us each; on the GPU one copy kernel per
  // rank, each with its launch overhead.
  const Built wide = built("  deepspeed: {version: \"0.3.14\"}", 64);
  const double narrow4 = per_rank_copy_seconds(fwd, old.p);
  const double wide64 = per_rank_copy_seconds(phase(wide.p.stages[0], false), wide.p);
  const int gathers = tally(fwd, CollectiveKind::all_gather).count;
  ASSERT_GT(gathers, 0);
  const double per_rank = 3 * kEagerOpHostSeconds + wide.s.cluster.gpu.launch_overhead;
  EXPECT_GT(wide.s.cluster.gpu.launch_overhead, 0);
  EXPECT_NEAR(wide64 - narrow4, gathers * (64 - 4) * per_rank, 1e-6);
  // torch.cuda.synchronize() first (a wait for the DP stream: its reductions); the views
  // come before the gather is launched; the copies are issued while it runs
  // (ProcessGroupNCCL's `post` right after the NCCL call), before the wait for it.
  std::string order;
  for (const Instr& in : fwd) {
    const std::string& name = old.p.labels[in.label];
    if (in.kind == InstrKind::launch && in.coll == CollectiveKind::all_gather) order += 'G';
    if (in.kind == InstrKind::wait && in.channel == kGatherChannel) order += 'W';
    if (in.kind == InstrKind::wait && in.channel == static_cast<int>(Dim::dp)) order += 'D';
    if (name == "zero3 gather buffer and per-rank views") order += 'v';
    if (name == "zero3 gather per-rank copies issued") order += 'c';
  }
  EXPECT_EQ(order.substr(0, 10), "DvGcWDvGcW");
  const Built mid = built("  deepspeed: {version: \"0.5.5\"}", 4);
  EXPECT_EQ(max_gather_wait(phase(mid.p.stages[0], false)), 0);
  EXPECT_EQ(per_rank_copy_seconds(phase(mid.p.stages[0], false), mid.p), 0);
  EXPECT_GT(tally(phase(mid.p.stages[0], true), CollectiveKind::reduce_scatter).count, 0);
  for (const char* v : {"0.6", "0.14.4"}) {
    const Built now = built(std::string("  deepspeed: {version: \"") + v + "\"}", 4);
    EXPECT_EQ(max_gather_wait(phase(now.p.stages[0], false)), 8) << v;
    EXPECT_EQ(per_rank_copy_seconds(phase(now.p.stages[0], false), now.p), 0) << v;
  }
}

// DeepSpeed's ZeRO-3 before 0.6.0 with contiguous_gradients reduce-scatters each parameter's
// gradient on its own, in list form: per layer of the small GPT (biases, LayerNorm) 12
// reduce-scatters (4 weights, 4 biases, 2 norms of weight and bias), the same bytes as 0.6's
// buckets, each after its per-rank views and copies on the host (3 eager calls a rank).
TEST(ProgramBuilderFramework, DeepSpeedBefore06ReduceScattersEachParameterInListForm) {
  const std::string z3 = "  zero_stage: 3";
  const std::string old = "  framework: deepspeed\n  deepspeed: {version: \"0.3.14\", contiguous_gradients: true}";
  const std::string now = "  framework: deepspeed\n  deepspeed: {version: \"0.6.0\"}";
  const Tally per_param = per_layer(z3, old, true, CollectiveKind::reduce_scatter);
  const Tally bucketed = per_layer(z3, now, true, CollectiveKind::reduce_scatter);
  EXPECT_EQ(per_param.count, 12);
  EXPECT_NEAR(per_param.bytes, bucketed.bytes, 1e-6 * bucketed.bytes);
  EXPECT_EQ(per_layer(z3, old, false, CollectiveKind::reduce_scatter).count, 0);  // backward only
  // The host's part: 3 calls a rank before each reduce-scatter, growing with the DP size.
  for (const int dp : {4, 16}) {
    const Scenario s = parse_scenario(one_stage_yaml(2, dp, dp, z3, old), "test");
    BuildOptions named;
    named.fuse_compute = false;
    const Program p = build_program(s, FlopsOnlyCost(s.cluster.gpu), named);
    std::string order;
    for (const Instr& in : phase(p.stages[0], true)) {
      if (in.kind == InstrKind::launch && in.coll == CollectiveKind::reduce_scatter) order += 'R';
      if (in.kind == InstrKind::compute && p.labels[in.label] == "zero3 grad per-rank views and copies") {
        order += 'h';
        EXPECT_NEAR(to_seconds(in.duration), 3 * dp * kEagerOpHostSeconds, 1e-9) << dp;
      }
    }
    EXPECT_EQ(order.substr(0, 6), "hRhRhR") << dp;
  }
}

// The most gathered-parameter bytes live at once along `v` (allocs and releases).
double peak_gathered(const std::vector<Instr>& v, const Program& p) {
  double live = 0, peak = 0;
  for (const Instr& in : v) {
    if (in.mem != MemCat::buffers || p.labels[in.label] != "gathered params") continue;
    if (in.kind == InstrKind::alloc) live += in.bytes;
    if (in.kind == InstrKind::release) live -= in.bytes;
    peak = std::max(peak, live);
  }
  EXPECT_NEAR(live, 0, 1e-6);  // everything gathered is released
  return peak;
}

TEST(ProgramBuilderFramework, DeepSpeedReleasesEachSubmoduleAfterUse) {
  // DeepSpeed frees a submodule's gathered weights once its hook has run: with
  // nothing prefetched (0.3.14) one submodule is live at a time, the largest
  // (mlp_up / mlp_down, kMlp of the layer's kLinear weights), not the layer; in the
  // backward under full recomputation too, where a layer beyond the reuse distance
  // is gathered twice and each copy is freed after its use.
  const double mlp = layer_bytes() * kMlp / kLinear;
  for (const std::string extra : {"", ", stage3_max_reuse_distance: 1e6"}) {
    SCOPED_TRACE(extra);
    const Built b = build(one_stage_yaml(2, 4, 4, "  zero_stage: 3\n  recompute: full",
                                         "  framework: deepspeed\n  deepspeed: {version: \"0.3.14\"" + extra + "}"));
    EXPECT_NEAR(peak_gathered(phase(b.p.stages[0], false), b.p), mlp, 1e-6 * mlp);
    const double bwd = peak_gathered(phase(b.p.stages[0], true), b.p);
    // Reused copies stay to the layer's backward; re-gathered ones go one by one.
    if (extra.empty())
      EXPECT_NEAR(bwd, layer_bytes(), 1e-6 * layer_bytes());
    else
      EXPECT_NEAR(bwd, mlp, 1e-6 * mlp);
  }
}

TEST(ProgramBuilderFramework, DeepSpeedRegathersBeyondTheReuseDistance) {
  // Full recomputation: the recomputed forward gathers a layer's 4 submodules; the
  // backward reuses them while the layer (12.6M elements) is within
  // stage3_max_reuse_distance (default 1e9), and gathers them again beyond it.
  const std::string z3 = "  zero_stage: 3\n  recompute: full";
  EXPECT_EQ(per_layer(z3, "  framework: deepspeed", true, CollectiveKind::all_gather).count, 4);
  EXPECT_EQ(per_layer(z3, "  framework: deepspeed\n  deepspeed: {stage3_max_reuse_distance: 1e6}", true,
                      CollectiveKind::all_gather)
                .count,
            8);
}

// The dtype of the gradient reduction (framework_profile.cpp): a layer's reduce-scatter
// carries its parameters × 2 bytes in bf16 under FSDP's default (the parameter dtype),
// × 4 with reduce_dtype fp32 (Composer's DEFAULT mixed precision), and × 4 under
// Megatron in bf16 (accumulate_allreduce_grads_in_fp32), × 2 in fp16.
TEST(ProgramBuilderFramework, GradientsAreReducedInTheFrameworksDtype) {
  const std::string z3 = "  zero_stage: 3";
  const Built b = build(one_stage_yaml(2, 4, 4, z3, "  framework: fsdp"));
  const double layer = static_cast<double>(models::layer_params_per_gpu(b.s.model, 1, 1, false).total());
  EXPECT_DOUBLE_EQ(per_layer(z3, "  framework: fsdp", true, CollectiveKind::reduce_scatter).bytes, 2 * layer);
  EXPECT_DOUBLE_EQ(
      per_layer(z3, "  framework: fsdp\n  fsdp: {reduce_dtype: fp32}", true, CollectiveKind::reduce_scatter).bytes,
      4 * layer);
  EXPECT_DOUBLE_EQ(
      per_layer(z3, "  framework: fsdp\n  fsdp: {reduce_dtype: bf16}", true, CollectiveKind::reduce_scatter).bytes,
      2 * layer);
  FrameworkProfile megatron = default_profile(Framework::megatron_core), fsdp = default_profile(Framework::fsdp);
  EXPECT_EQ(grad_reduce_element_bytes(megatron, models::Precision::bf16), 4.0);
  EXPECT_EQ(grad_reduce_element_bytes(megatron, models::Precision::fp8), 4.0);
  EXPECT_EQ(grad_reduce_element_bytes(megatron, models::Precision::fp16), 2.0);
  EXPECT_EQ(grad_reduce_element_bytes(default_profile(Framework::deepspeed), models::Precision::bf16), 2.0);
  EXPECT_EQ(grad_reduce_element_bytes(fsdp, models::Precision::fp32), 4.0);
  fsdp.reduce_bytes = 4;
  EXPECT_EQ(grad_reduce_element_bytes(fsdp, models::Precision::bf16), 4.0);
  fsdp.reduce_bytes = 2;  // fp32 training reducing in bf16
  EXPECT_EQ(grad_reduce_element_bytes(fsdp, models::Precision::fp32), 2.0);
}

TEST(ProgramBuilderFramework, FsdpReshardAndPerUnitReduceScatter) {
  const std::string z3 = "  zero_stage: 3";
  // One reduce-scatter per layer (FSDP reduces each unit's gradients after its
  // backward); Megatron-core fills one 40M-parameter bucket with the whole model.
  EXPECT_EQ(per_layer(z3, "  framework: fsdp", true, CollectiveKind::reduce_scatter).count, 1);
  EXPECT_EQ(per_layer(z3, "", true, CollectiveKind::reduce_scatter).count, 0);
  // reshard_after_forward false (SHARD_GRAD_OP): no backward gathers.
  EXPECT_EQ(per_layer(z3, "  framework: fsdp\n  fsdp: {reshard_after_forward: false}", true, CollectiveKind::all_gather)
                .count,
            0);
  // backward_prefetch none: backward gathers are not issued ahead.
  const Built b = build(one_stage_yaml(2, 4, 4, z3, "  framework: fsdp\n  fsdp: {backward_prefetch: none}"));
  EXPECT_EQ(max_gather_wait(phase(b.p.stages[0], true)), 0);
  EXPECT_EQ(max_gather_wait(phase(b.p.stages[0], false)), 1);
}

// FSDP's work on each unit's unsharded gradient (ProgramBuilder::fsdp_unit_grads): the
// split backward's cat in bf16 (2 + 2 bytes per parameter), then
// the cast to reduce_dtype (2 + 4), the pre-divide (4 + 4; by 2 at 4 ranks) and the
// post-divide of the reduced shard (2 × 4 / 4; by 4 / 2). Every micro-batch under
// ZeRO-3; none in Megatron's programs.
TEST(ProgramBuilderFramework, FsdpCastsAndDividesEachUnitsGradient) {
  EXPECT_EQ(fsdp_predivide_factor(1), 1);
  EXPECT_EQ(fsdp_predivide_factor(2), 2);
  EXPECT_EQ(fsdp_predivide_factor(4), 2);
  EXPECT_EQ(fsdp_predivide_factor(8), 4);
  EXPECT_EQ(fsdp_predivide_factor(24), 8);
  EXPECT_EQ(fsdp_predivide_factor(64), 8);
  EXPECT_EQ(fsdp_predivide_factor(128), 16);
  // The datasheet roofline, names kept (FlopsOnlyCost makes memory-bound kernels free).
  const auto kernels = [](const std::string& training, int dp, const char* label) {
    Built b{parse_scenario(one_stage_yaml(2, dp, 2 * dp, "  zero_stage: 3", training), "test"), {}};
    BuildOptions named;
    named.fuse_compute = false;
    b.p = build_program(b.s, make_compute_cost(b.s), named);
    std::vector<Tick> found;
    for (const Instr& in : phase(b.p.stages[0], true))
      if (in.kind == InstrKind::compute && b.p.labels[in.label] == label) found.push_back(in.duration);
    return std::pair{b, found};
  };
  const auto ticks = [](const Built& b, double bytes) {
    hw::KernelDesc k;
    k.cls = hw::KernelClass::memory;
    k.bytes = bytes;
    return to_ticks(make_compute_cost(b.s).seconds(k));
  };
  const std::string fp32 = "  framework: fsdp\n  fsdp: {reduce_dtype: fp32}";
  const auto [b, cat] = kernels(fp32, 4, "fsdp flat grad (split backward)");
  const double layer = static_cast<double>(models::layer_params_per_gpu(b.s.model, 1, 1, false).total());
  // In backward order: the head's unit (on a single stage it counts the embedding too;
  // vocabulary 8, so small), then layer 1 and layer 0.
  ASSERT_EQ(cat.size(), 3u);
  EXPECT_EQ(cat[1], ticks(b, 4 * layer));
  EXPECT_EQ(cat[2], cat[1]);
  const auto [b4, prep] = kernels(fp32, 4, "fsdp grad cast and divide");
  ASSERT_EQ(prep.size(), 3u);
  EXPECT_EQ(prep[1], ticks(b4, (6 + 8 + 2) * layer));
  // 8 ranks: pre-divide by 4, the shard by 2 (2 × 4 / 8 bytes per parameter more).
  EXPECT_EQ(kernels(fp32, 8, "fsdp grad cast and divide").second[1], ticks(b4, (6 + 8 + 1) * layer));
  // reduce_dtype bf16 (the parameter dtype): no cast, the divisions in bf16.
  EXPECT_EQ(kernels("  framework: fsdp\n  fsdp: {reduce_dtype: bf16}", 4, "fsdp grad cast and divide").second[1],
            ticks(b4, (4 + 1) * layer));
  EXPECT_TRUE(kernels("", 4, "fsdp flat grad (split backward)").second.empty());
  EXPECT_TRUE(kernels("", 4, "fsdp grad cast and divide").second.empty());
}

// The kinds of the DP launches of a backward pass, in issue order (what one stream runs).
std::string dp_launch_order(const std::string& prefetch) {
  const Built b = build(
      one_stage_yaml(2, 4, 4, "  zero_stage: 3", "  framework: fsdp\n  fsdp: {backward_prefetch: " + prefetch + "}"));
  std::string order;
  for (const Instr& in : phase(b.p.stages[0], true))
    if (in.kind == InstrKind::launch && in.dim == Dim::dp)
      order += in.coll == CollectiveKind::all_gather ? 'G' : in.coll == CollectiveKind::reduce_scatter ? 'R' : '?';
  return order;
}

TEST(ProgramBuilderFramework, FsdpBackwardPrefetchOrdersTheGatherAndTheReduceScatter) {
  // Gathered units in backward: layer 1, layer 0, the embedding (with the tied head).
  // With the host ahead of the GPU and FSDP's rate limiter, BACKWARD_PRE and
  // BACKWARD_POST both put the next unit's gather on the NCCL stream behind the previous
  // unit's reduce-scatter, as this unit's gradients begin (ProgramBuilder::plan_fetch):
  // it overlaps them. none issues it when the next unit's backward starts, behind this
  // unit's reduce-scatter, so nothing overlaps it.
  EXPECT_EQ(dp_launch_order("BACKWARD_PRE"), "GGRGRR");
  EXPECT_EQ(dp_launch_order("BACKWARD_POST"), "GGRGRR");
  EXPECT_EQ(dp_launch_order("none"), "GRGRGR");
  for (const char* prefetch : {"BACKWARD_PRE", "BACKWARD_POST"}) {
    const Built b = build(one_stage_yaml(
        2, 4, 4, "  zero_stage: 3", std::string("  framework: fsdp\n  fsdp: {backward_prefetch: ") + prefetch + "}"));
    EXPECT_EQ(max_gather_wait(phase(b.p.stages[0], true)), 1) << prefetch;
  }
}

TEST(ProgramBuilderFramework, DpOneStreamComesFromTheProfileOrTheKey) {
  const std::string z3 = "  zero_stage: 3";
  EXPECT_TRUE(build(one_stage_yaml(2, 4, 4, z3, "  framework: fsdp")).p.dp_one_stream);
  EXPECT_FALSE(build(one_stage_yaml(2, 4, 4, z3, "  framework: fsdp\n  dp_one_stream: false")).p.dp_one_stream);
}

TEST(ProgramBuilderFramework, DeepSpeedZero1BucketsAfterBackward) {
  // ZeRO-1 under DeepSpeed: overlap_comm defaults to false below stage 3, so the
  // gradients are reduce-scattered after the backward (epilogue) in
  // reduce_bucket_size buckets, and the updated weights all-gathered after the step
  // in allgather_bucket_size buckets: ceil(Ψ / bucket) each.
  const Built b = build(
      one_stage_yaml(2, 4, 4, "  zero_stage: 1",
                     "  framework: deepspeed\n  deepspeed: {reduce_bucket_size: 1e6, allgather_bucket_size: 3e6}"));
  const StageProgram& sp = b.p.stages[0];
  const double psi = static_cast<double>(models::stage_params(b.s.model, b.s.plan.par, 0).total());
  EXPECT_EQ(tally(phase(sp, true), CollectiveKind::reduce_scatter).count, 0);
  const Tally rs = tally(sp.epilogue, CollectiveKind::reduce_scatter);
  EXPECT_EQ(rs.count, static_cast<int>(std::ceil(psi / 1e6)));
  EXPECT_DOUBLE_EQ(rs.bytes, 2 * psi);
  const Tally ag = tally(sp.epilogue, CollectiveKind::all_gather);
  EXPECT_EQ(ag.count, static_cast<int>(std::ceil(psi / 3e6)));
  EXPECT_DOUBLE_EQ(ag.bytes, 2 * psi);
  EXPECT_EQ(tally(sp.prologue, CollectiveKind::all_gather).count, 0);
}

// Sharded gradients cannot wait for the step: with overlap_comm off, ZeRO-2 and ZeRO-3 still
// reduce-scatter each micro-batch's gradients in its backward (DeepSpeed's hook reduces on the
// current stream), each reduction followed by a wait that holds the compute stream; nothing is
// left for the epilogue. With overlap_comm on the backward does not wait for them.
TEST(ProgramBuilderFramework, DeepSpeedShardedGradientsWithoutOverlapReduceEveryMicroBatch) {
  for (const int stage : {2, 3})
    for (const bool overlap : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "ZeRO-" << stage << " overlap_comm " << overlap);
      const Built b = build(one_stage_yaml(2, 4, 8, "  zero_stage: " + std::to_string(stage),
                                           std::string("  framework: deepspeed\n  deepspeed: {overlap_comm: ") +
                                               (overlap ? "true" : "false") + ", reduce_bucket_size: 1e6}"));
      const StageProgram& sp = b.p.stages[0];
      const double psi = static_cast<double>(models::stage_params(b.s.model, b.s.plan.par, 0).total());
      const auto bwd = phase(sp, true);
      const Tally rs = tally(bwd, CollectiveKind::reduce_scatter);
      EXPECT_NEAR(rs.bytes, 2 * psi, 1e-6 * psi);  // one micro-batch's gradients, in bf16
      EXPECT_EQ(tally(sp.epilogue, CollectiveKind::reduce_scatter).count, 0);
      int waits = 0, launches = 0;
      for (const Instr& in : bwd) {
        if (in.kind == InstrKind::launch && in.dim == Dim::dp && in.coll == CollectiveKind::reduce_scatter) {
          ++launches;
          EXPECT_EQ(in.flags & kLastMicrobatch, 0);  // every micro-batch
        }
        if (in.kind == InstrKind::wait && in.channel == static_cast<int>(Dim::dp)) ++waits;
      }
      EXPECT_EQ(launches, rs.count);
      EXPECT_EQ(waits, overlap ? 0 : launches);
    }
}

TEST(ProgramBuilderFramework, DeepSpeedBf16OptimizerAccumulatesInFp32AndAllReduces) {
  // bf16 at ZeRO 0 (DeepSpeed's default fp32 gradient accumulation): the BF16_Optimizer.
  // Every micro-batch's backward ends with update_hp_grads; after the schedule the fp32
  // gradients (4 bytes each) are all-reduced in one 5e8-element buffer, and the updated
  // bf16 weights all-gathered (its ZeRO-1 equivalent).
  // The datasheet roofline (memory-bound kernels cost time; FlopsOnlyCost makes them free).
  const auto built = [&](const std::string& parallel, const std::string& ds) {
    Built b{parse_scenario(one_stage_yaml(2, 4, 4, parallel, "  framework: deepspeed\n" + ds), "test"), {}};
    BuildOptions named;  // compute instructions keep their names
    named.fuse_compute = false;
    b.p = build_program(b.s, make_compute_cost(b.s), named);
    return b;
  };
  Tick pass_ticks = 0;
  const auto passes = [&](const Built& b) {
    int n = 0;
    for (const Instr& in : phase(b.p.stages[0], true))
      if (in.kind == InstrKind::compute && b.p.labels[in.label] == "bf16 grads into fp32 (update_hp_grads)") {
        ++n;
        pass_ticks = in.duration;
      }
    return n;
  };
  const Built z0 = built("  zero_stage: 0", "");
  ASSERT_TRUE(z0.s.framework.bf16_optimizer);
  EXPECT_TRUE(z0.s.plan.par.bf16_optimizer);
  EXPECT_EQ(passes(z0), 1);
  const StageProgram& sp = z0.p.stages[0];
  const double psi = static_cast<double>(models::stage_params(z0.s.model, z0.s.plan.par, 0).total());
  // 18 bytes per parameter through HBM (the stage's 2 layers: the embedding and head
  // blocks are on this one stage too).
  hw::KernelDesc k;
  k.cls = hw::KernelClass::memory;
  k.bytes = 18 * psi;
  EXPECT_EQ(pass_ticks, to_ticks(make_compute_cost(z0.s).seconds(k)));
  const Tally ar = tally(sp.epilogue, CollectiveKind::all_reduce);
  EXPECT_EQ(ar.count, 1);
  EXPECT_DOUBLE_EQ(ar.bytes, 4 * psi);
  EXPECT_EQ(tally(sp.epilogue, CollectiveKind::reduce_scatter).count, 0);
  EXPECT_DOUBLE_EQ(tally(sp.epilogue, CollectiveKind::all_gather).bytes, 2 * psi);
  // ZeRO-1 keeps DeepSpeed's ZeRO optimizer unless fp32 accumulation is asked for;
  // releases before 0.6.2 have no BF16_Optimizer; fp16 never uses it.
  EXPECT_FALSE(built("  zero_stage: 1", "").s.framework.bf16_optimizer);
  EXPECT_EQ(passes(built("  zero_stage: 1", "")), 0);
  EXPECT_TRUE(built("  zero_stage: 1", "  deepspeed: {grad_accum_dtype: fp32}").s.framework.bf16_optimizer);
  EXPECT_FALSE(built("  zero_stage: 0", "  deepspeed: {grad_accum_dtype: bf16}").s.framework.bf16_optimizer);
  EXPECT_FALSE(built("  zero_stage: 0", "  deepspeed: {version: \"0.6.1\"}").s.framework.bf16_optimizer);
  Built fp16{
      parse_scenario(one_stage_yaml(2, 4, 4, "  zero_stage: 0", "  framework: deepspeed\n  precision: fp16"), "test"),
      {}};
  EXPECT_FALSE(fp16.s.framework.bf16_optimizer);
  // Model states per parameter: bf16 weights 2, bf16 + fp32 gradients 6, and the 12
  // bytes of fp32 master and Adam state over dp 4.
  const models::ModelStates st = models::model_states(z0.s.model, z0.s.plan.par, 0);
  EXPECT_DOUBLE_EQ(st.grads, 6 * psi);
  EXPECT_DOUBLE_EQ(st.optimizer, 12 * psi / 4);
  EXPECT_DOUBLE_EQ(st.params, 2 * psi);
}

TEST(ProgramBuilderFramework, MegatronBucketSizeOverride) {
  // Ψ of the 2-layer model ≈ 25.2M parameters: one 40M bucket by default. A bucket
  // closes once it holds bucket_size parameters, filled a block at a time: with
  // bucket_size 1e7 each 12.6M-parameter layer closes one (the head, which holds
  // the tiny embedding on a single stage, rides with the last layer): 2.
  const Built b = build(one_stage_yaml(2, 4, 4, "  zero_stage: 1", "  megatron: {bucket_size: 1e7}"));
  const double psi = static_cast<double>(models::stage_params(b.s.model, b.s.plan.par, 0).total());
  const Tally rs = tally(phase(b.p.stages[0], true), CollectiveKind::reduce_scatter);
  EXPECT_EQ(rs.count, 2);
  EXPECT_DOUBLE_EQ(rs.bytes, 4 * psi);  // bf16 gradients reduced in fp32 (framework_profile.cpp)
  EXPECT_EQ(tally(phase(build(one_stage_yaml(2, 4, 4, "  zero_stage: 1", "")).p.stages[0], true),
                  CollectiveKind::reduce_scatter)
                .count,
            1);
}

}  // namespace
}  // namespace ptsim::sim
