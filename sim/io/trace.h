// Chrome / Perfetto trace (JSON "traceEvents" format, loads in ui.perfetto.dev):
// one process per rank shown, one thread per stream (compute, tp, pp, dp, ...).
// Span names say fwd / bwd / recompute; args carry micro-batch, layer and bytes;
// pipeline sends are flow arrows to the receiving rank.
#pragma once
#include <string>

#include "sim/core/simulate.h"

namespace ptsim::sim {

std::string trace_json(const Simulation& sim, const Layout& layout);

// True for a path ending in ".gz": the trace is written gzip-compressed.
bool wants_gzip(const std::string& path);
// `text` as a gzip file (zlib), byte-identical for identical text.
std::string gzip(const std::string& text);

}  // namespace ptsim::sim
