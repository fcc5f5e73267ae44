// The zero-bubble and DualPipe schedules simulated event by event (program_builder
// splits the backward into B and W; the replay allocates and frees along the
// steps): the iteration time of the papers' formulas for equal stages, the peak
// memory of schedule_memory.h, no deadlock, and the scenario errors.
#include <gtest/gtest.h>

#include "models/memory.h"
#include "sim/core/errors.h"
#include "sim/core/schedule_memory.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

using testing::FlopsOnlyCost;
using testing::FreeCollectives;
using testing::tiny_gpt_yaml;

Simulation simulate_synthetic(const Scenario& s) {
  FlopsOnlyCost compute(s.cluster.gpu);
  FreeCollectives coll;
  SimulateOptions o;
  o.compute = &compute;
  o.collectives = &coll;
  return simulate(s, o);
}

std::string schedule_line(const char* kind) { return fmt::format("  pipeline_schedule: {}", kind); }

// Compute seconds of stage `stage`'s chunk 0 forward, B and W.
struct Passes {
  double f = 0, b = 0, w = 0;
};
Passes passes(const Program& prog, int stage) {
  auto busy = [](const std::vector<Instr>& l) {
    Tick t = 0;
    for (const Instr& in : l)
      if (in.kind == InstrKind::compute) t += in.duration;
    return to_seconds(t);
  };
  const auto& c = prog.stages[static_cast<std::size_t>(stage)].chunks[0];
  return {busy(c.forward), busy(c.backward), busy(c.weight)};
}

TEST(ZeroBubbleReplay, BackwardSplitKeepsTheWork) {
  // B + W is the unsplit backward: the weight-gradient GEMMs are half of each
  // linear layer's backward FLOPs, the attention core has no W.
  const Scenario a = parse_scenario(tiny_gpt_yaml(4, 1, 1, 8, 8), "test");
  const Scenario z = parse_scenario(tiny_gpt_yaml(4, 1, 1, 8, 8, schedule_line("zb-h1")), "test");
  const Passes one = passes(simulate_synthetic(a).program, 1), split = passes(simulate_synthetic(z).program, 1);
  EXPECT_EQ(one.w, 0);
  EXPECT_NEAR(split.b + split.w, one.b, 1e-8);  // each op's halves round to whole ticks (ns)
  EXPECT_GT(split.w, 0.3 * one.b);
  EXPECT_LT(split.w, 0.5 * one.b);  // attention's backward stays in B
}

TEST(ZeroBubbleReplay, ZbH1IterationIsQiEtAlFormula) {
  // Equal stages, free communication: m(T_F + T_B + T_W) + (p − 1)(T_F + T_B − T_W)
  // (Qi et al. ICLR 2024 Table 2), a third of 1F1B's bubble when T_F = T_B = T_W.
  for (auto [p, m] : {std::pair{4, 8}, std::pair{4, 13}, std::pair{8, 8}, std::pair{2, 7}}) {
    const Simulation sim =
        simulate_synthetic(parse_scenario(tiny_gpt_yaml(p, 1, 1, 2 * p, m, schedule_line("zb-h1")), "t"));
    const Passes t = passes(sim.program, 1);
    const double expect = m * (t.f + t.b + t.w) + (p - 1) * (t.f + t.b - t.w);
    EXPECT_NEAR(sim.result.iteration_time_s, expect, 1e-6 * expect) << "p=" << p << " m=" << m;
  }
}

TEST(ZeroBubbleReplay, SchedulesOrderByBubble) {
  // For the same model: 1F1B > ZB-H1 > ZB-H2 and ZB-V (near-zero bubble) in
  // iteration time; DualPipe below 1F1B.
  const int p = 4, m = 16;
  auto iteration = [&](const char* kind) {
    return simulate_synthetic(parse_scenario(tiny_gpt_yaml(p, 1, 1, 16, m, schedule_line(kind)), "t"))
        .result.iteration_time_s;
  };
  const double f1b = iteration("1f1b"), h1 = iteration("zb-h1"), h2 = iteration("zb-h2"), zv = iteration("zb-v"),
               dual = iteration("dualpipe");
  EXPECT_LT(h1, f1b);
  EXPECT_LT(h2, h1);
  EXPECT_LT(zv, h1);
  EXPECT_LT(dual, f1b);
}

TEST(ZeroBubbleReplay, EveryScheduleFinishesWithoutDeadlock) {
  for (const char* kind : {"zb-h1", "zb-h2", "zb-v", "dualpipe"})
    for (int p : {2, 4, 8})
      for (int m : {p, 2 * p, 3 * p + 1}) {
        if (std::string(kind) == "dualpipe" && (m % 2 != 0 || m < 2 * p)) continue;
        const Scenario s = parse_scenario(tiny_gpt_yaml(p, 1, 1, 2 * p, m, schedule_line(kind)), "t");
        const Result r = simulate_synthetic(s).result;
        EXPECT_GT(r.iteration_time_s, 0) << kind << " p " << p << " m " << m;
      }
}

TEST(ZeroBubbleReplay, SimulatedPeakMemoryMatchesScheduleWalk) {
  // The replay's allocs and frees along the steps against schedule_memory.h, with
  // a real vocabulary (the head's fp32 logits, freed after its B), recompute and
  // the allocator gap.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"zb-h1", {}},
      {"zb-h2", {}},
      {"zb-v", {}},
      {"dualpipe", {}},
      {"zb-h1", {"parallel.recompute=full"}},
      {"zb-v", {"parallel.recompute=selective", "training.attention=naive", "training.memory.allocator_overhead=0.1"}}};
  for (const auto& [kind, sets] : cases) {
    const Scenario s = parse_scenario(
        tiny_gpt_yaml(4, 2, 2, 16, 32, schedule_line(kind.c_str()) + "\n  zero_stage: 1", 51200), "test", sets);
    const Result r = simulate(s).result;
    const auto walk = schedule_memory(s.model, s.plan.par);
    ASSERT_EQ(walk.size(), r.per_stage.size());
    for (std::size_t i = 0; i < walk.size(); ++i)
      EXPECT_NEAR(r.per_stage[i].peak, walk[i].peak, 0.01 * walk[i].peak) << kind << " stage " << i;
  }
}

TEST(ZeroBubbleReplay, MemoryAgainstOneFOneB) {
  // ZB-H1 and ZB-V keep 1F1B's activation peak (Qi et al.: p·M_B); ZB-H2 about
  // twice it ((2p − 1)·M_B); DualPipe twice the parameters and PP + 1 micro-
  // batches of activations (DeepSeek-V3 Table 2). Stage 1: no embedding or head.
  const int p = 4;
  auto stage1 = [&](const char* kind) {
    const Scenario s = parse_scenario(tiny_gpt_yaml(p, 1, 1, 16, 16, schedule_line(kind)), "t");
    return schedule_memory(s.model, s.plan.par)[1];
  };
  const auto f1b = stage1("1f1b"), h1 = stage1("zb-h1"), h2 = stage1("zb-h2"), zv = stage1("zb-v"),
             dual = stage1("dualpipe");
  // 1F1B's stage 1 holds p − 1 micro-batches; zero-bubble stages all hold p. Each peak
  // also holds one backward's largest transient.
  const Scenario s1 = parse_scenario(tiny_gpt_yaml(p, 1, 1, 16, 16, schedule_line("1f1b")), "t");
  const double t = models::backward_transient_bytes(s1.model, s1.plan.par, false);
  const double per_mb = (f1b.activations - t) / (p - 1);
  EXPECT_NEAR(h1.activations, p * per_mb + t, 1e-6 * per_mb);
  EXPECT_NEAR(h2.activations, (2 * p - 1) * per_mb + t, 1e-6 * per_mb);
  EXPECT_LE(zv.activations, p * per_mb * (1 + 1e-9) + t);
  EXPECT_NEAR(dual.params, 2 * f1b.params, 1e-9 * f1b.params);
  EXPECT_LE(dual.activations, (p + 1) * per_mb * (1 + 1e-9) + t);
}

TEST(ZeroBubbleReplay, InvalidCombinationsNameTheKey) {
  auto key_of = [](const std::string& yaml) {
    try {
      parse_scenario(yaml, "t");
    } catch (const ScenarioError& e) {
      return e.key();
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(key_of(tiny_gpt_yaml(3, 1, 1, 6, 12, schedule_line("dualpipe"))), "parallel.pipeline_parallel");
  EXPECT_EQ(key_of(tiny_gpt_yaml(4, 1, 1, 8, 6, schedule_line("dualpipe"))), "training.global_batch_size");
  EXPECT_EQ(key_of(tiny_gpt_yaml(4, 1, 1, 8, 9, schedule_line("dualpipe"))), "training.global_batch_size");
  EXPECT_EQ(key_of(tiny_gpt_yaml(4, 1, 1, 24, 8, schedule_line("zb-v") + "\n  virtual_pipeline_stages: 3")),
            "parallel.virtual_pipeline_stages");
  EXPECT_EQ(key_of(tiny_gpt_yaml(4, 1, 1, 12, 8, schedule_line("zb-v"))), "parallel.pipeline_parallel");
  EXPECT_EQ(key_of(tiny_gpt_yaml(1, 1, 1, 4, 8, schedule_line("zb-v"))), "parallel.pipeline_schedule");
  EXPECT_EQ(key_of(tiny_gpt_yaml(4, 1, 1, 8, 8, schedule_line("zb-h1") + "\n  virtual_pipeline_stages: 2")),
            "parallel.virtual_pipeline_stages");
  EXPECT_EQ(key_of(tiny_gpt_yaml(4, 1, 1, 8, 8, schedule_line("zb-h3"))), "parallel.pipeline_schedule");
  EXPECT_EQ(key_of(tiny_gpt_yaml(4, 1, 1, 12, 8, schedule_line("dualpipe"))), "(accepted)");  // whole stages
}

}  // namespace
}  // namespace ptsim::sim
