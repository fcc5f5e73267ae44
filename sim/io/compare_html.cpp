#include "sim/io/compare_html.h"

#include <fmt/format.h>

#include <algorithm>

#include "hw/units.h"
#include "sim/io/report_html_parts.h"
#include "sim/io/svg_time_bars.h"
#include "sim/io/svg_timeline.h"

namespace ptsim::sim {
namespace {

using html::escape;

std::string time_bars_svg(const std::vector<ComparePagePlan>& plans) {
  std::vector<std::pair<std::string, const Simulation*>> bars;
  for (const auto& p : plans) bars.emplace_back(p.label, p.sim);
  return html::time_bars_svg(bars);
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
      "<h2>Pipeline timelines</h2><p>Per traced rank: the compute lane (forward, backward, recompute, optimizer; "
      "shaded where a step waits, grey where the rank has no step) over its communication lane.</p>";
  for (const auto& p : plans) {
    const auto& q = p.scenario->plan.par;
    const Layout layout(q.tp, q.cp, q.dp, q.pp, q.ep, p.scenario->cluster.gpus_per_node, q.etp);
    page += "<h3>" + escape(p.label) + "</h3>" + html::svg_timeline(*p.sim, layout).svg;
  }
  return page + "</body></html>\n";
}

}  // namespace ptsim::sim
