// A scenario that names a cost table takes its costs from it and says so.
#include <gtest/gtest.h>

#include "ptsim/config.h"
#include "sim/errors.h"
#include "sim/simulate.h"
#include "test_scenarios.h"

namespace ptsim::sim {
namespace {

TEST(CalibrationSource, TableNameBecomesCostSourceAndTimesChange) {
  // calibration/tables/cpu-example.yaml was measured by the CPU backend
  // (fp32 GEMMs on this machine's CPU): orders of magnitude slower than an A100.
  const std::string yaml = testing::tiny_gpt_yaml(1, 1, 1, 2, 1, "", 51200) + "\n";
  const Scenario datasheet = parse_scenario(yaml, "test", {"training.precision=fp32"});
  const Scenario table = parse_scenario(
      yaml, "test", {"training.precision=fp32", std::string("cluster.calibration=") + PTSIM_SOURCE_DIR + "/calibration/tables/cpu-example.yaml"});
  const Result a = simulate(datasheet).result, b = simulate(table).result;
  EXPECT_EQ(a.cost_source, "datasheet");
  EXPECT_EQ(b.cost_source, "cpu-example");
  EXPECT_GT(b.iteration_time_s, 10 * a.iteration_time_s);
}

TEST(CalibrationSource, MissingTableIsABadInput) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(1, 1, 1, 2, 1), "s.yaml", {"cluster.calibration=/nonexistent/table.yaml"});
  EXPECT_THROW(simulate(s), ScenarioError);
}

}  // namespace
}  // namespace ptsim::sim
