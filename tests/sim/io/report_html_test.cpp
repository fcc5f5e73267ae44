#include "sim/io/report_html.h"
#include "sim/io/scenario_file.h"

#include <gtest/gtest.h>

#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

TEST(ReportHtml, SelfContainedWithTheThreeCharts) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(4, 2, 1, 8, 16, "", 51200), "test");
  SimulateOptions o;
  o.trace = true;
  const Simulation sim = simulate(s, o);
  const auto& q = s.plan.par;
  const std::string html = report_html(s, sim, Layout(q.tp, q.cp, q.dp, q.pp, q.ep, s.cluster.gpus_per_node));
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  // Three SVG charts: timeline, memory, communication.
  std::size_t svgs = 0;
  for (auto pos = html.find("<svg"); pos != std::string::npos; pos = html.find("<svg", pos + 1)) ++svgs;
  EXPECT_EQ(svgs, 3u);
  for (int st = 0; st < 4; ++st) EXPECT_NE(html.find("stage " + std::to_string(st)), std::string::npos);
  // Nothing loaded from elsewhere: no scripts, no links, no external images.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  // The timeline draws busy pixels as rectangles.
  EXPECT_NE(html.find("fill=\"#1f77b4\""), std::string::npos);
}

}  // namespace
}  // namespace ptsim::sim
