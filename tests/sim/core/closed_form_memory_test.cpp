// The closed-form memory model (ptsim memory, the search's memory check) against the
// simulated run on every scenario the project ships: the same peak, per stage.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sim/core/schedule_memory.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

TEST(ClosedFormMemory, AgreesWithTheRunOnEveryShippedScenario) {
  std::vector<std::string> files;
  for (const char* dir : {"scenarios", "scenarios/reference"})
    for (const auto& e : std::filesystem::directory_iterator(test::repo_path(dir)))
      if (e.path().extension() == ".yaml" && e.path().filename() != "published.yaml")
        files.push_back(e.path().string());
  ASSERT_GT(files.size(), 60u);
  for (const std::string& f : files) {
    const Scenario s = load_scenario(f);
    SimulateOptions o;
    o.fold = true;
    const Result r = simulate(s, o).result;
    const auto closed = schedule_memory(s.model, s.plan.par);
    ASSERT_EQ(closed.size(), r.per_stage.size()) << f;
    for (std::size_t i = 0; i < closed.size(); ++i) {
      // The closed form adds each kind at its most; the run takes the columns at its peak,
      // where a ZeRO-3 gather may be below its most (DeepSpeed's submodules: < 1 %).
      EXPECT_NEAR(closed[i].peak, r.per_stage[i].peak, 0.01 * r.per_stage[i].peak) << f << " stage " << i;
      EXPECT_GE(closed[i].peak, r.per_stage[i].peak * (1 - 2e-3)) << f << " stage " << i;
    }
  }
}

TEST(ClosedFormMemory, FollowsTheStepsWithInterleavedMicroBatchGroups) {
  // Megatron-core's Mixtral run (pp 4, vpp 8, 16 micro-batches) with groups of 6: the last
  // stage's head activations in flight change in the steady state, so the closed form
  // walks the steps; it equals the run on every stage, and the peak grows with the group
  // ((vpp − 1)·N forwards of warm-up).
  double before = 0;
  for (int n : {4, 6, 8}) {
    const Scenario s = load_scenario(test::repo_path("scenarios/reference/mcore-mixtral-8x7b-64xh100.yaml"),
                                     {fmt::format("training.megatron.microbatch_group_size_per_vp_stage={}", n)});
    SimulateOptions o;
    o.fold = true;
    const Result r = simulate(s, o).result;
    const auto closed = schedule_memory(s.model, s.plan.par);
    ASSERT_EQ(closed.size(), r.per_stage.size());
    for (std::size_t i = 0; i < closed.size(); ++i)
      EXPECT_NEAR(closed[i].peak, r.per_stage[i].peak, 1e-6 * r.per_stage[i].peak) << "group " << n << " stage " << i;
    EXPECT_GT(closed[0].peak, before) << n;
    before = closed[0].peak;
  }
}

}  // namespace
}  // namespace ptsim::sim
