#include "sim/io/svg_timeline.h"
#include "sim/io/scenario_file.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "tests/sim/test_scenarios.h"

namespace ptsim::sim::html {
namespace {

// A MoE plan with TP, CP, EP, PP and DP and full recompute: every category occurs.
constexpr const char* kEveryCategory = R"(name: every
model:
  num_layers: 4
  hidden_size: 1024
  num_attention_heads: 16
  ffn_hidden_size: 4096
  vocab_size: 32000
  seq_length: 2048
  moe:
    num_experts: 4
    top_k: 2
    ffn_hidden_size: 2048
cluster:
  gpu: h100-sxm
  num_gpus: 16
  gpus_per_node: 8
parallel:
  tensor_parallel: 2
  context_parallel: 2
  pipeline_parallel: 2
  expert_parallel: 2
  recompute: full
training:
  global_batch_size: 8
  micro_batch_size: 1
)";

Simulation traced(const Scenario& s) {
  SimulateOptions o;
  o.trace = true;
  return simulate(s, o);
}

Layout layout_of(const Scenario& s) {
  const auto& q = s.plan.par;
  return Layout(q.tp, q.cp, q.dp, q.pp, q.ep, s.cluster.gpus_per_node);
}

// The SVG without its legend group: what the lanes draw.
std::string without_legend(const std::string& svg) {
  const auto a = svg.find(R"(<g class="legend">)");
  EXPECT_NE(a, std::string::npos);
  const auto b = svg.find("</g>", a);
  return svg.substr(0, a) + svg.substr(b + 4);
}

std::set<std::string> fills(const std::string& svg) {
  std::set<std::string> out;
  const std::regex re(R"re(<rect [^>]*fill="(#[0-9a-f]{6})")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1]);
  return out;
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(SvgTimeline, EveryCategoryOfARichPlanIsDrawnInItsColourAndNamedInTheLegend) {
  const Scenario s = parse_scenario(kEveryCategory, "every.yaml");
  const Simulation sim = traced(s);
  const Timeline t = svg_timeline(sim, layout_of(s));
  std::set<TimelineCat> legend(t.legend.begin(), t.legend.end());
  for (TimelineCat c : {TimelineCat::forward, TimelineCat::backward, TimelineCat::recompute, TimelineCat::optimizer,
                        TimelineCat::tp, TimelineCat::cp, TimelineCat::ep, TimelineCat::pp, TimelineCat::dp,
                        TimelineCat::idle})
    EXPECT_TRUE(legend.count(c)) << timeline_cat_info(c).name;
  // Every legend entry is drawn in the lanes, and every category colour drawn is in the legend.
  const std::set<std::string> drawn = fills(without_legend(t.svg));
  for (TimelineCat c : t.legend) {
    EXPECT_TRUE(drawn.count(timeline_cat_info(c).colour)) << timeline_cat_info(c).name;
    EXPECT_NE(t.svg.find(std::string(">") + timeline_cat_info(c).name + "<"), std::string::npos);
  }
  for (int c = 0; c < kNumTimelineCats; ++c)
    if (drawn.count(timeline_cat_info(static_cast<TimelineCat>(c)).colour))
      EXPECT_TRUE(legend.count(static_cast<TimelineCat>(c))) << timeline_cat_info(static_cast<TimelineCat>(c)).name;
  // The colours differ from each other.
  std::set<std::string> colours;
  for (int c = 0; c < kNumTimelineCats; ++c) colours.insert(timeline_cat_info(static_cast<TimelineCat>(c)).colour);
  EXPECT_EQ(colours.size(), static_cast<std::size_t>(kNumTimelineCats));
}

TEST(SvgTimeline, OnlyCategoriesThatOccurAreInTheLegend) {
  // One GPU per stage, no MoE, no recompute: no TP, CP, EP or DP, nothing recomputed.
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(2, 1, 1, 4, 8, "", 51200), "tiny.yaml");
  const Timeline t = svg_timeline(traced(s), layout_of(s));
  const std::set<TimelineCat> legend(t.legend.begin(), t.legend.end());
  for (TimelineCat c : {TimelineCat::tp, TimelineCat::cp, TimelineCat::ep, TimelineCat::dp, TimelineCat::recompute}) {
    EXPECT_FALSE(legend.count(c)) << timeline_cat_info(c).name;
    EXPECT_EQ(t.svg.find(timeline_cat_info(c).colour), std::string::npos) << timeline_cat_info(c).name;
  }
  for (TimelineCat c : {TimelineCat::forward, TimelineCat::backward, TimelineCat::pp, TimelineCat::idle})
    EXPECT_TRUE(legend.count(c)) << timeline_cat_info(c).name;
}

TEST(SvgTimeline, OneRowPerTracedRankWithAComputeAndACommunicationLane) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(4, 2, 2, 8, 16, "", 51200), "tiny.yaml");
  SimulateOptions o;
  o.trace = true;
  o.trace_max_ranks = 6;  // the first rank of each of the 4 stages, then 2 more
  const Simulation sim = simulate(s, o);
  std::set<int> ranks;
  for (const auto& sp : sim.spans) ranks.insert(sp.rank);
  const Timeline t = svg_timeline(sim, layout_of(s));
  EXPECT_EQ(t.rows, static_cast<int>(ranks.size()));
  EXPECT_EQ(t.rows, 6);
  for (int r : ranks) EXPECT_NE(t.svg.find("· rank " + std::to_string(r) + "<"), std::string::npos) << r;
  // The communication lane's frame, one per row.
  EXPECT_EQ(count(t.svg, R"(fill="#ffffff" stroke="#dddddd")"), 6u);
  // Micro-batch marks: 8 micro-batches, forward and backward, on every row.
  EXPECT_EQ(count(t.svg, R"(class="mb")"), 6u * 2 * 8);
  EXPECT_NE(t.svg.find(">F0<"), std::string::npos);
  EXPECT_NE(t.svg.find(">B7<"), std::string::npos);
}

TEST(SvgTimeline, TimeAxisHasIncreasingTicksUpToTheIteration) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(2, 1, 2, 4, 8, "", 51200), "tiny.yaml");
  const Simulation sim = traced(s);
  const Timeline t = svg_timeline(sim, layout_of(s), 1000);
  EXPECT_GE(t.ticks, 5);
  EXPECT_LE(t.ticks, 21);
  EXPECT_EQ(count(t.svg, R"(class="tick")"), static_cast<std::size_t>(t.ticks));
  std::vector<double> xs;
  const std::regex re(R"re(class="tick" x1="([0-9.]+)")re");
  for (auto it = std::sregex_iterator(t.svg.begin(), t.svg.end(), re); it != std::sregex_iterator(); ++it)
    xs.push_back(std::stod((*it)[1]));
  ASSERT_EQ(xs.size(), static_cast<std::size_t>(t.ticks));
  EXPECT_DOUBLE_EQ(xs.front(), 120);  // time 0 at the lanes' left edge
  for (std::size_t i = 1; i < xs.size(); ++i) EXPECT_GT(xs[i], xs[i - 1]);
  EXPECT_LE(xs.back(), 120 + 1000 + 1e-6);  // no tick past the iteration
  EXPECT_NE(t.svg.find(R"(text-anchor="middle">0<)"), std::string::npos);
}

TEST(SvgTimeline, TooltipsNameTheOpMicroBatchLayerAndBytes) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(2, 1, 2, 4, 8, "", 51200), "tiny.yaml");
  const Timeline t = svg_timeline(traced(s), layout_of(s), 4000);
  EXPECT_NE(t.svg.find("<title>forward: "), std::string::npos);
  EXPECT_NE(t.svg.find(", micro-batch "), std::string::npos);
  EXPECT_NE(t.svg.find(", layer "), std::string::npos);
  EXPECT_TRUE(std::regex_search(t.svg, std::regex("<title>TP: tp [^<]*, micro-batch [0-9]+, layer [0-9]+, [0-9.]+ [KMG]iB, [0-9.]+ [mun]?s")));
}

TEST(SvgTimeline, SpanCategories) {
  Span s{};
  s.dim = kComputeSpan;
  s.phase = SpanPhase::forward;
  EXPECT_EQ(timeline_cat(s), TimelineCat::forward);
  s.phase = SpanPhase::backward;
  EXPECT_EQ(timeline_cat(s), TimelineCat::backward);
  s.flags = kRecompute;
  EXPECT_EQ(timeline_cat(s), TimelineCat::recompute);
  s.flags = 0;
  s.phase = SpanPhase::epilogue;
  EXPECT_EQ(timeline_cat(s), TimelineCat::optimizer);
  s.dim = static_cast<std::uint8_t>(Dim::ep);
  EXPECT_EQ(timeline_cat(s), TimelineCat::ep);
  s.dim = static_cast<std::uint8_t>(Dim::dp);
  EXPECT_EQ(timeline_cat(s), TimelineCat::dp);
}

}  // namespace
}  // namespace ptsim::sim::html
