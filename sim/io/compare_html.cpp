#include "sim/io/compare_html.h"

#include <fmt/format.h>

#include <algorithm>

#include "hw/units.h"
#include "sim/core/time_breakdown.h"
#include "sim/io/report_html_parts.h"

namespace ptsim::sim {
namespace {

using html::escape;

struct Segment {
  const char* name;
  const char* colour;
};

// The stacked bar's segments, in drawing order (colours as the run report's timeline).
constexpr Segment kSegments[] = {{"compute", "#1f77b4"}, {"recompute", "#bcbd22"}, {"TP", "#ff7f0e"},
                                 {"CP", "#8c564b"},      {"EP", "#d62728"},        {"PP", "#2ca02c"},
                                 {"DP", "#9467bd"},      {"bubble", "#c7c7c7"},    {"other", "#eeeeee"}};

// The end of a long label (where a variant's --set-plan is), behind "...".
std::string tail(const std::string& s, std::size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n + 3); }

std::vector<double> segment_seconds(const Simulation& sim) {
  const TimeBreakdown b = time_breakdown(sim);
  auto e = [&](Dim d) { return b.exposed_s[static_cast<std::size_t>(d)]; };
  // Waiting on the gradient-norm all-reduce (mp) is pipeline imbalance: drawn with the bubble.
  return {b.compute_s, b.recompute_s,           e(Dim::tp), e(Dim::cp), e(Dim::ep), e(Dim::pp),
          e(Dim::dp),  b.bubble_s + e(Dim::mp), b.other_s};
}

// One horizontal bar per plan on a common time scale, with the legend.
std::string time_bars_svg(const std::vector<ComparePagePlan>& plans) {
  const double width = 900, row = 30, left = 260;
  double longest = 1e-12;
  for (const auto& p : plans) longest = std::max(longest, p.sim->result.iteration_time_s);
  const double height = row * static_cast<double>(plans.size()) + 50;
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">)",
      left + width + 90, height);
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const double y = row * static_cast<double>(i);
    svg += fmt::format(R"(<text x="4" y="{:.1f}">{}</text>)", y + 19, escape(tail(plans[i].label, 44)));
    const auto secs = segment_seconds(*plans[i].sim);
    double x = left;
    for (std::size_t k = 0; k < secs.size(); ++k) {
      const double w = width * secs[k] / longest;
      if (w <= 0) continue;
      svg += fmt::format(
          R"(<rect x="{:.1f}" y="{:.1f}" width="{:.2f}" height="{}" fill="{}"><title>{}: {}</title></rect>)", x, y + 6,
          w, row - 10, kSegments[k].colour, kSegments[k].name, escape(format_seconds(secs[k])));
      x += w;
    }
    svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{}</text>)", x + 4, y + 19,
                       escape(format_seconds(plans[i].sim->result.iteration_time_s)));
  }
  const double ly = row * static_cast<double>(plans.size()) + 20;
  double lx = left;
  for (const auto& s : kSegments) {
    svg += fmt::format(R"(<rect x="{:.0f}" y="{:.0f}" width="10" height="10" fill="{}" stroke="#999"/>)", lx, ly,
                       s.colour);
    svg += fmt::format(R"(<text x="{:.0f}" y="{:.0f}">{}</text>)", lx + 14, ly + 9, s.name);
    lx += 14 + 8 * static_cast<double>(std::string(s.name).size()) + 14;
  }
  return svg + "</svg>";
}

// Each plan's chart in a cell of a row that wraps, titled by the plan.
template <class Chart>
std::string side_by_side(const std::vector<ComparePagePlan>& plans, Chart chart) {
  std::string out = R"(<div style="display:flex;flex-wrap:wrap;gap:1.5em">)";
  for (const auto& p : plans)
    out += "<div><h3 style=\"font-size:0.95em\">" + escape(p.label) + "</h3>" + chart(p) + "</div>";
  return out + "</div>";
}

}  // namespace

std::string compare_html(const std::vector<ComparePagePlan>& plans, const std::string& table,
                         const ComparePageExtras& extras) {
  const std::string title =
      extras.title.empty() ? "ptsim compare: " + std::to_string(plans.size()) + " plans" : extras.title;
  std::string page = "<!doctype html><html><head><meta charset=\"utf-8\"><title>" + escape(title) + "</title><style>" +
                     html::kStyle + "</style></head><body><h1>" + escape(title) + "</h1>";
  page += "<h2>Plans, best first</h2><pre>" + escape(table) + "</pre>" + extras.after_table;
  page +=
      "<h2>Where the iteration goes</h2><p>Mean over pipeline stages: compute, recompute, communication the compute "
      "stream waited for per dimension, pipeline bubble (with the gradient-norm wait), and the rest.</p>";
  page += time_bars_svg(plans);
  page += "<h2>Memory per stage</h2><p>Dashed line: the GPU's HBM.</p>";
  page += side_by_side(plans, [](const ComparePagePlan& p) { return html::memory_svg(p.sim->result); });
  page += "<h2>Bytes sent per GPU per iteration</h2>";
  page += side_by_side(plans, [](const ComparePagePlan& p) { return html::comm_svg(p.sim->result); });
  page +=
      "<h2>Pipeline timelines</h2><p>Compute stream of the first rank of each stage: blue compute, orange TP, red EP, "
      "brown CP, olive recompute; gaps are bubbles and exposed communication.</p>";
  for (const auto& p : plans) {
    const auto& q = p.scenario->plan.par;
    const Layout layout(q.tp, q.cp, q.dp, q.pp, q.ep, p.scenario->cluster.gpus_per_node);
    page += "<h3>" + escape(p.label) + "</h3>" + html::timeline_svg(*p.sim, layout, q.pp);
  }
  return page + "</body></html>\n";
}

}  // namespace ptsim::sim
