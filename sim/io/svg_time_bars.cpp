#include "sim/io/svg_time_bars.h"

#include <fmt/format.h>

#include <algorithm>

#include "hw/units.h"
#include "sim/core/time_breakdown.h"
#include "sim/io/report_html_parts.h"

namespace ptsim::sim::html {
namespace {

// The end of a long label (where a variant's --set-plan is), behind "...".
std::string tail(const std::string& s, std::size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n + 3); }

}  // namespace

const std::vector<TimeBarSegment>& time_bar_segments() {
  // Colours as the run report's timeline (svg_timeline.cpp) where they name the same thing.
  static const std::vector<TimeBarSegment> kSegments = {
      {"compute", "#1f77b4"}, {"recompute", "#bcbd22"}, {"TP", "#ff7f0e"},     {"CP", "#8c564b"},   {"EP", "#d62728"},
      {"PP", "#2ca02c"},      {"DP", "#9467bd"},        {"bubble", "#c7c7c7"}, {"other", "#eeeeee"}};
  return kSegments;
}

std::vector<double> time_bar_seconds(const Simulation& sim) {
  const TimeBreakdown b = time_breakdown(sim);
  auto e = [&](Dim d) { return b.exposed_s[static_cast<std::size_t>(d)]; };
  // Waiting on the gradient-norm all-reduce (mp) is pipeline imbalance: drawn with the bubble.
  // The experts' own tensor-parallel collectives (etp) are expert communication: with EP;
  // their gradient reductions and gathers (edp) are data-parallel: with DP.
  return {b.compute_s,
          b.recompute_s,
          e(Dim::tp),
          e(Dim::cp),
          e(Dim::ep) + e(Dim::etp),
          e(Dim::pp),
          e(Dim::dp) + e(Dim::edp),
          b.bubble_s + e(Dim::mp),
          b.other_s};
}

std::string time_bars_svg(const std::vector<std::pair<std::string, const Simulation*>>& bars) {
  const auto& segments = time_bar_segments();
  const double width = 900, row = 30, left = 260;
  double longest = 1e-12;
  for (const auto& [label, sim] : bars) longest = std::max(longest, sim->result.iteration_time_s);
  const double height = row * static_cast<double>(bars.size()) + 50;
  std::string svg = fmt::format(
      R"(<svg class="time-bars" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">)",
      left + width + 90, height);
  std::vector<bool> drawn(segments.size(), false);
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const double y = row * static_cast<double>(i);
    svg += fmt::format(R"(<text x="4" y="{:.1f}">{}</text>)", y + 19, escape(tail(bars[i].first, 40)));
    const auto secs = time_bar_seconds(*bars[i].second);
    double x = left;
    for (std::size_t k = 0; k < secs.size(); ++k) {
      const double w = width * secs[k] / longest;
      if (w <= 0) continue;
      drawn[k] = true;
      svg += fmt::format(
          R"(<rect x="{:.1f}" y="{:.1f}" width="{:.2f}" height="{}" fill="{}"><title>{}: {}</title></rect>)", x, y + 6,
          w, row - 10, segments[k].colour, segments[k].name, escape(format_seconds(secs[k])));
      x += w;
    }
    svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{}</text>)", x + 4, y + 19,
                       escape(format_seconds(bars[i].second->result.iteration_time_s)));
  }
  // The legend names the segments drawn.
  const double ly = row * static_cast<double>(bars.size()) + 20;
  double lx = left;
  svg += R"(<g class="legend">)";
  for (std::size_t k = 0; k < segments.size(); ++k) {
    if (!drawn[k]) continue;
    svg += fmt::format(R"(<rect x="{:.0f}" y="{:.0f}" width="10" height="10" fill="{}" stroke="#999"/>)", lx, ly,
                       segments[k].colour);
    svg += fmt::format(R"(<text x="{:.0f}" y="{:.0f}">{}</text>)", lx + 14, ly + 9, segments[k].name);
    lx += 14 + 8 * static_cast<double>(std::string(segments[k].name).size()) + 14;
  }
  return svg + "</g></svg>";
}

}  // namespace ptsim::sim::html
