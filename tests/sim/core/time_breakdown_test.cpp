#include "sim/core/time_breakdown.h"

#include <gtest/gtest.h>

#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

TimeBreakdown breakdown_of(const std::string& recompute, Simulation* out = nullptr) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(2, 4, 1, 8, 16, "  recompute: " + recompute), "tiny.yaml");
  SimulateOptions o;
  o.fold = true;
  Simulation sim = simulate(s, o);
  const TimeBreakdown b = time_breakdown(sim);
  if (out) *out = std::move(sim);
  return b;
}

TEST(TimeBreakdown, PartsAddUpToTheIteration) {
  Simulation sim;
  const TimeBreakdown b = breakdown_of("full", &sim);
  double sum = b.compute_s + b.recompute_s + b.bubble_s + b.other_s;
  for (double e : b.exposed_s) sum += e;
  EXPECT_NEAR(sum, sim.result.iteration_time_s, 1e-9 * sim.result.iteration_time_s);
  EXPECT_EQ(b.bubble_s, sim.result.bubble_time_s);
  EXPECT_GT(b.compute_s, 0);
}

TEST(TimeBreakdown, RecomputeOnlyWhenAsked) {
  EXPECT_EQ(breakdown_of("none").recompute_s, 0);
  const TimeBreakdown full = breakdown_of("full");
  const TimeBreakdown none = breakdown_of("none");
  EXPECT_GT(full.recompute_s, 0);
  // Full recompute runs each layer's forward again: the extra compute is the recompute.
  EXPECT_NEAR(full.compute_s, none.compute_s, 0.02 * none.compute_s);
  EXPECT_GT(breakdown_of("selective").recompute_s, 0);
  EXPECT_LT(breakdown_of("selective").recompute_s, full.recompute_s);
}

}  // namespace
}  // namespace ptsim::sim
