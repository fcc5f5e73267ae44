// A self-contained HTML report (no scripts, no external files): the summary
// table, an SVG pipeline timeline (compute stream of the first rank of every
// stage, forward / backward / communication coloured), the memory breakdown per
// stage as stacked bars, and bytes sent per GPU per parallel dimension.
#pragma once
#include <string>

#include "sim/core/scenario.h"
#include "sim/core/simulate.h"

namespace ptsim::sim {

std::string report_html(const Scenario& s, const Simulation& sim, const Layout& layout);

}  // namespace ptsim::sim
