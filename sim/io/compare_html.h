// The `ptsim compare --report` page: self-contained HTML (no scripts, no external files)
// with the plans side by side — the comparison table, a stacked time bar per plan
// (compute, recompute, exposed TP/CP/EP/PP/DP, bubble), memory per stage against HBM,
// bytes per GPU per dimension, and each plan's pipeline timeline (the run report's).
#pragma once
#include <string>
#include <vector>

#include "sim/core/scenario.h"
#include "sim/core/simulate.h"

namespace ptsim::sim {

struct ComparePagePlan {
  std::string label;  // "1  default.yaml [tp=8 pp=16]"
  const Scenario* scenario = nullptr;
  const Simulation* sim = nullptr;  // with spans (SimulateOptions::trace) for the timeline
};

// What a page built on this one (`ptsim search --report`) puts around the plans.
struct ComparePageExtras {
  std::string title;        // the heading; default "ptsim compare: N plans"
  std::string after_table;  // HTML placed after the table (e.g. the search's scatter)
};

// `plans` best first; `table` is the terminal table, shown as is.
std::string compare_html(const std::vector<ComparePagePlan>& plans, const std::string& table,
                         const ComparePageExtras& extras = {});

}  // namespace ptsim::sim
