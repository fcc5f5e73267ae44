#include "sim/io/report_html.h"
#include "sim/io/scenario_file.h"

#include <gtest/gtest.h>

#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

TEST(ReportHtml, SelfContainedWithInputsTimeBreakdownTimelineMemoryAndBytes) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(4, 2, 1, 8, 16, "", 51200), "test");
  SimulateOptions o;
  o.trace = true;
  const Simulation sim = simulate(s, o);
  const auto& q = s.plan.par;
  const std::string html = report_html(s, sim, Layout(q.tp, q.cp, q.dp, q.pp, q.ep, s.cluster.gpus_per_node));
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  // Four SVG charts: stacked time bar, timeline, memory, communication.
  std::size_t svgs = 0;
  for (auto pos = html.find("<svg"); pos != std::string::npos; pos = html.find("<svg", pos + 1)) ++svgs;
  EXPECT_EQ(svgs, 4u);
  EXPECT_NE(html.find(R"(<svg class="time-bars")"), std::string::npos);
  EXPECT_NE(html.find(R"(<svg class="timeline")"), std::string::npos);
  // The first rank of every stage (tp 1 × dp 2: ranks 0, 2, 4, 6) has a row.
  for (int st = 0; st < 4; ++st)
    EXPECT_NE(html.find("stage " + std::to_string(st) + " · rank " + std::to_string(2 * st)), std::string::npos);
  // The inputs panel: what the run was asked.
  for (const char* row : {">model<", ">parameters<", ">layers × hidden<", ">8 × 1024<", ">sequence length<", ">128<",
                          ">batch<", ">GPU<", ">a100-sxm-80gb<", ">GPUs<", ">NIC<", ">topology<", ">fat-tree<",
                          ">cost source<", ">datasheet<", ">framework<", ">megatron-core<", ">precision<", ">bf16<"})
    EXPECT_NE(html.find(row), std::string::npos) << row;
  // Nothing loaded from elsewhere: no scripts, no links, no external images.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  // The timeline draws forward and backward kernels and pipeline sends; the bar, compute and bubble.
  for (const char* colour : {"#1f77b4", "#17becf", "#2ca02c", "#c7c7c7"})
    EXPECT_NE(html.find(std::string("fill=\"") + colour + "\""), std::string::npos) << colour;
  for (const char* seg : {"<title>compute: ", "<title>bubble: "}) EXPECT_NE(html.find(seg), std::string::npos) << seg;
}

}  // namespace
}  // namespace ptsim::sim
