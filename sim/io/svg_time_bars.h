// Stacked time bars: where an iteration goes (compute, recompute, exposed TP/CP/EP/PP/DP,
// bubble, the rest), one horizontal bar per simulation on a common scale, with a legend of
// the segments drawn. Shared by the run report and the compare / search pages.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "sim/core/simulate.h"

namespace ptsim::sim::html {

struct TimeBarSegment {
  const char* name;
  const char* colour;
};
// The segments in drawing order.
const std::vector<TimeBarSegment>& time_bar_segments();
// Seconds of each segment (time_breakdown), in time_bar_segments() order.
std::vector<double> time_bar_seconds(const Simulation& sim);

// One bar per (label, simulation), best first.
std::string time_bars_svg(const std::vector<std::pair<std::string, const Simulation*>>& bars);

}  // namespace ptsim::sim::html
