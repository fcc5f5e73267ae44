// Compute slowed by a data-parallel collective's NCCL kernel (hw::KernelDesc::
// reserved_sms, Instr::duration_under_comm): the builder gives every compute op its
// duration under a collective, and the replay takes it for the part of the op that
// overlaps one of the rank's async DP collectives.
#include <gtest/gtest.h>

#include "hw/net/nccl_tuning.h"
#include "sim/core/program_builder.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

using testing::FlopsOnlyCost;
using testing::tiny_gpt_yaml;

// FLOPs at 10 PFLOP/s, twice as long while SMs are held by a collective.
class HeldSmCost : public FlopsOnlyCost {
 public:
  using FlopsOnlyCost::FlopsOnlyCost;
  Seconds seconds(const hw::KernelDesc& k) const override {
    return FlopsOnlyCost::seconds(k) * (k.reserved_sms > 0 ? 2 : 1);
  }
};

// Collectives of dimension `d` take `seconds` each; the others are free.
class OneDimCollectives : public CollectiveCost {
 public:
  OneDimCollectives(Dim d, Seconds seconds) : d_(d), t_(seconds) {}
  Seconds seconds(CollectiveKind, Dim d, const GroupShape&, Bytes) const override { return d == d_ ? t_ : 0; }

 private:
  Dim d_;
  Seconds t_;
};

// Megatron's DDP reduces a bucket (40M parameters) as soon as the backward has filled
// it: after about three of these 16 layers, the rest of the backward runs under it.
const std::string kDp2 = tiny_gpt_yaml(1, 2, 1, 16, 2, "  overlap_grad_reduce: true");

TEST(ComputeUnderComm, BuilderGivesOpsTheirDurationUnderACollective) {
  const Scenario dp2 = parse_scenario(kDp2, "test");
  const Program p = build_program(dp2, HeldSmCost(dp2.cluster.gpu));
  int slowed = 0;
  for (const auto* list : {&p.stages[0].chunks[0].forward, &p.stages[0].chunks[0].backward})
    for (const Instr& in : *list)
      if (in.kind == InstrKind::compute) {
        // Every op here is a GEMM or attention (each op's ticks rounded on their own).
        EXPECT_NEAR(static_cast<double>(in.duration_under_comm()), 2.0 * in.duration, 1e-2 * in.duration);
        slowed += in.duration > 0;
      }
  EXPECT_GT(slowed, 0);
  // Without data parallelism no collective runs under compute: nothing is slowed.
  const Scenario dp1 = parse_scenario(tiny_gpt_yaml(1, 1, 1, 16, 2, "  overlap_grad_reduce: true"), "test");
  const Program q = build_program(dp1, HeldSmCost(dp1.cluster.gpu));
  for (const Instr& in : q.stages[0].chunks[0].backward)
    if (in.kind == InstrKind::compute) EXPECT_EQ(in.duration_under_comm(), in.duration);
  // The SMs held: NCCL's channels, two per NIC.
  EXPECT_EQ(hw::net::nccl_channels(8), 16);
  EXPECT_EQ(hw::net::nccl_channels(0), 2);
}

// Records the HBM bandwidth the builder says a collective takes from the kernels under it.
class HbmTakenRecorder : public FlopsOnlyCost {
 public:
  using FlopsOnlyCost::FlopsOnlyCost;
  Seconds seconds(const hw::KernelDesc& k) const override {
    (k.cls == hw::KernelClass::memory ? memory_taken : compute_taken) =
        std::max(k.cls == hw::KernelClass::memory ? memory_taken : compute_taken, k.hbm_taken);
    if (k.cls == hw::KernelClass::memory) memory_sms = std::max(memory_sms, k.reserved_sms);
    return FlopsOnlyCost::seconds(k);
  }
  mutable BytesPerSecond memory_taken = 0, compute_taken = 0;
  mutable int memory_sms = 0;
};

TEST(ComputeUnderComm, CollectiveTakesTwiceItsLinkRateOfHbm) {
  // NVIDIA/nccl#1428: NCCL stores what it receives and reads it back to send it on.
  // In a node the ring runs at the NVLink rate; across nodes at each GPU's share of the NICs.
  const Scenario in_node = parse_scenario(kDp2, "test");
  HbmTakenRecorder a(in_node.cluster.gpu);
  build_program(in_node, a);
  EXPECT_DOUBLE_EQ(a.memory_taken, 2 * in_node.cluster.intra_bandwidth);
  EXPECT_DOUBLE_EQ(a.compute_taken, 2 * in_node.cluster.intra_bandwidth);
  EXPECT_EQ(a.memory_sms, 0);  // memory-bound kernels lose HBM, not SMs
  const Scenario across = parse_scenario(kDp2, "test", {"cluster.gpus_per_node=1"});
  HbmTakenRecorder b(across.cluster.gpu);
  build_program(across, b);
  const auto& c = across.cluster;
  EXPECT_DOUBLE_EQ(b.memory_taken, 2 * c.nic_bandwidth * c.nics_per_node / c.gpus_per_node);
  EXPECT_LT(b.memory_taken, a.memory_taken);
  // No data parallelism, no collective under compute.
  const Scenario dp1 = parse_scenario(tiny_gpt_yaml(1, 1, 1, 16, 2), "test");
  HbmTakenRecorder d(dp1.cluster.gpu);
  build_program(dp1, d);
  EXPECT_EQ(d.memory_taken + d.compute_taken, 0);
}

// `yaml` (with `set` overrides) when the collectives of dimension `d` take `seconds`
// each and compute is FLOPs at HeldSmCost's rates.
Result run(const std::string& yaml, Dim d, Seconds seconds, const std::vector<std::string>& set = {}) {
  const Scenario s = parse_scenario(yaml, "test", set);
  HeldSmCost compute(s.cluster.gpu);
  OneDimCollectives coll(d, seconds);
  SimulateOptions o;
  o.compute = &compute;
  o.collectives = &coll;
  return simulate(s, o).result;
}
// Busy time of rank 0 of `yaml` when the collectives of dimension `d` take `seconds`.
Seconds busy(const std::string& yaml, Dim d, Seconds seconds) {
  return run(yaml, d, seconds).stage_timing.at(0).busy_s;
}
Seconds busy(Seconds dp_seconds) { return busy(kDp2, Dim::dp, dp_seconds); }

TEST(ComputeUnderComm, ReplaySlowsTheComputeThatOverlapsADpCollective) {
  const Scenario s = parse_scenario(kDp2, "test");
  HeldSmCost compute(s.cluster.gpu);
  const Program p = build_program(s, compute);
  const StageProgram& st = p.stages[0];
  ASSERT_EQ(s.plan.par.num_microbatches, 1);
  // Walk rank 0's instructions in order: after the first DP launch every compute op
  // takes its duration under the collective.
  Tick plain = 0, overlapped = 0;
  bool launched = false;
  for (const auto* list : {&st.prologue, &st.chunks[0].forward, &st.chunks[0].backward, &st.epilogue})
    for (const Instr& in : *list) {
      if (in.kind == InstrKind::launch && in.dim == Dim::dp) launched = true;
      if (in.kind != InstrKind::compute) continue;
      plain += in.duration;
      overlapped += launched ? in.duration_under_comm() : in.duration;
    }
  ASSERT_TRUE(launched);
  ASSERT_GT(overlapped, plain);
  // Free collectives hold no SMs for any time: the ops keep their own durations.
  EXPECT_DOUBLE_EQ(busy(0), to_seconds(plain));
  // A collective of 1,000 s outlasts the backward: everything after the launch is slowed.
  EXPECT_DOUBLE_EQ(busy(1000), to_seconds(overlapped));
  // A collective that ends within the backward slows only what runs before its end,
  // the op it ends in in part.
  const Seconds part = busy(to_seconds((overlapped - plain) / 4));
  EXPECT_GT(part, to_seconds(plain));
  EXPECT_LT(part, to_seconds(overlapped));
}

// Megatron's column-parallel backward (ProgramBuilder::column_parallel_backward): a
// tensor-parallel collective beside the next compute (kBesideNext). Sums over the computes
// that follow one in stage 0's backward (one micro-batch): their own and held-SM durations.
struct Beside {
  int count = 0;
  Tick plain = 0, under = 0;
};
Beside beside_computes(const Scenario& s) {
  const Program p = build_program(s, HeldSmCost(s.cluster.gpu));
  const auto& b = p.stages[0].chunks[0].backward;
  Beside out;
  for (std::size_t i = 0; i + 1 < b.size(); ++i)
    if (b[i].kind == InstrKind::collective && (b[i].flags & kBesideNext)) {
      EXPECT_EQ(b[i].dim, Dim::tp);
      EXPECT_EQ(b[i + 1].kind, InstrKind::compute);
      ++out.count;
      out.plain += b[i + 1].duration;
      out.under += b[i + 1].duration_under_comm();
    }
  return out;
}

TEST(ComputeUnderComm, ColumnParallelBackwardRunsItsCollectiveBesideAGemm) {
  // tp 2, 2 layers, one micro-batch. Without SP: the input-gradient all-reduce of QKV, of
  // MLP up (each layer) and of the logits GEMM beside their weight-gradient GEMMs.
  const std::string yaml = tiny_gpt_yaml(1, 1, 2, 2, 1, "", 51200);
  const std::vector<std::string> blocking = {"training.megatron.async_tensor_model_parallel_allreduce=false"};
  const Beside w = beside_computes(parse_scenario(yaml, "test"));
  EXPECT_EQ(w.count, 5);
  EXPECT_EQ(beside_computes(parse_scenario(yaml, "test", blocking)).count, 0);
  ASSERT_GT(w.under, w.plain);
  // Collectives of 1,000 s: each weight-gradient GEMM runs wholly beside its all-reduce,
  // slowed by the SMs NCCL holds; the step is shorter by those GEMMs' own time, and so
  // much less of the collectives is exposed.
  const Result on = run(yaml, Dim::tp, 1000), off = run(yaml, Dim::tp, 1000, blocking);
  const int tp = static_cast<int>(Dim::tp);
  EXPECT_NEAR(off.iteration_time_s - on.iteration_time_s, to_seconds(w.plain), 1e-9);
  EXPECT_NEAR(off.exposed_comm_s[tp] - on.exposed_comm_s[tp], to_seconds(w.under), 1e-9);
  EXPECT_NEAR(on.stage_timing.at(0).busy_s - off.stage_timing.at(0).busy_s, to_seconds(w.under - w.plain), 1e-9);
  // Free collectives hold no SMs: the same step either way.
  EXPECT_NEAR(run(yaml, Dim::tp, 0).iteration_time_s, run(yaml, Dim::tp, 0, blocking).iteration_time_s, 1e-12);
  // With SP: the input re-gathered beside the input-gradient GEMM and the input gradient
  // reduce-scattered beside the weight-gradient GEMM, twice per column-parallel linear.
  const std::vector<std::string> sp = {"parallel.sequence_parallel=true"};
  const Beside v = beside_computes(parse_scenario(yaml, "test", sp));
  EXPECT_EQ(v.count, 10);
  const Result slow = run(yaml, Dim::tp, 1000, sp), fast = run(yaml, Dim::tp, 0, sp);
  EXPECT_NEAR(slow.stage_timing.at(0).busy_s - fast.stage_timing.at(0).busy_s, to_seconds(v.under - v.plain), 1e-9);
}

// DualPipe's F&B pairs run one chunk's EP all-to-alls under the other chunk's compute:
// those all-to-alls hold SMs too, so the pairs' compute is longer when they cost time.
TEST(ComputeUnderComm, DualPipeEpAllToAllsSlowThePairsCompute) {
  const std::string dualpipe = testing::tiny_moe_yaml("dualpipe");
  EXPECT_GT(busy(dualpipe, Dim::ep, 1e-3), busy(dualpipe, Dim::ep, 0));
}

}  // namespace
}  // namespace ptsim::sim
