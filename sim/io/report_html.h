// A self-contained HTML report (no scripts, no external files) that answers "why is
// this plan slow": the inputs (model, batch, cluster, network, cost source, framework),
// the stacked time breakdown, the SVG timeline of the traced ranks (svg_timeline.h),
// memory per stage against HBM, bytes sent per GPU per dimension, and the summary.
#pragma once
#include <string>

#include "sim/core/scenario.h"
#include "sim/core/simulate.h"

namespace ptsim::sim {

std::string report_html(const Scenario& s, const Simulation& sim, const Layout& layout);

}  // namespace ptsim::sim
