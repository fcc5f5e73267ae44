#include "sim/io/trace.h"
#include "sim/io/scenario_file.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

TEST(Trace, ChromeTraceEventFormatOneProcessPerRankShown) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(4, 2, 2, 8, 8, "", 51200), "test");
  SimulateOptions o;
  o.trace = true;
  o.trace_max_ranks = 4;  // the first rank of each of the 4 stages
  const Simulation sim = simulate(s, o);
  const auto& q = s.plan.par;
  const auto doc =
      nlohmann::json::parse(trace_json(sim, Layout(q.tp, q.cp, q.dp, q.pp, q.ep, s.cluster.gpus_per_node)));
  std::set<int> pids;
  double last_end = 0;
  int complete = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      pids.insert(e["pid"].get<int>());
      EXPECT_GE(e["dur"].get<double>(), 0);
      last_end = std::max(last_end, e["ts"].get<double>() + e["dur"].get<double>());
    }
  }
  EXPECT_GT(complete, 0);
  // Ranks 0, 4, 8, 12 (tp 2 × dp 2 per stage): one per stage.
  EXPECT_EQ(pids, (std::set<int>{0, 4, 8, 12}));
  // Nothing ends after the iteration (µs).
  EXPECT_LE(last_end, sim.result.iteration_time_s * 1e6 + 1e-3);
  EXPECT_EQ(doc["otherData"]["scenario"], "tiny");
}

}  // namespace
}  // namespace ptsim::sim
