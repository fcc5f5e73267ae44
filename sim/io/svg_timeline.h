// The run report's timeline as inline SVG: one row per traced rank with a compute lane
// (forward, backward, recompute, optimizer kernels over forward/backward step shading,
// bubble/idle where the rank has no step) and a communication lane below it (TP, CP,
// EP, PP, DP/ZeRO), so communication never vanishes under compute. Micro-batch marks
// above each compute lane, a time axis with ticks, <title> tooltips (op, micro-batch,
// layer, bytes, duration) and a legend of exactly the categories drawn.
//
// Each pixel column of a lane shows one category — the one with the most time there —
// so the SVG stays small at any scale: a compute column shows compute when kernels fill
// at least half of it, a communication column shows communication when any is there.
#pragma once
#include <string>
#include <vector>

#include "sim/core/simulate.h"

namespace ptsim::sim::html {

enum class TimelineCat {
  forward,
  backward,
  recompute,
  optimizer,
  tp,
  cp,
  ep,
  pp,
  dp,
  forward_step,   // shading: inside a forward step, kernels not running (waiting on communication)
  backward_step,  // the same in a backward step
  idle,           // bubble / idle: no step running (pipeline fill and drain, waiting for the optimizer)
};
inline constexpr int kNumTimelineCats = 12;

struct TimelineCatInfo {
  const char* name;
  const char* colour;
};
const TimelineCatInfo& timeline_cat_info(TimelineCat c);

// The category a traced span is drawn in.
TimelineCat timeline_cat(const Span& s);

struct Timeline {
  std::string svg;                   // <svg class="timeline">…</svg>
  std::vector<TimelineCat> legend;   // the categories drawn, in legend order
  int rows = 0;                      // ranks drawn
  int ticks = 0;                     // time-axis ticks
};

// `width`: pixels of the time axis.
Timeline svg_timeline(const Simulation& sim, const Layout& layout, int width = 1100);

}  // namespace ptsim::sim::html
