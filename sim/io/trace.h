// Chrome / Perfetto trace (JSON "traceEvents" format, loads in ui.perfetto.dev):
// one process per rank shown, one thread per stream (compute, tp, pp, dp, ...).
#pragma once
#include <string>

#include "sim/core/simulate.h"

namespace ptsim::sim {

std::string trace_json(const Simulation& sim, const Layout& layout);

}  // namespace ptsim::sim
