// Pieces of the run report (report_html.cpp) that other pages reuse (compare_html.cpp):
// the page style, HTML escaping and the SVG charts of one simulation (the timeline is
// svg_timeline.h, the stacked time bars svg_time_bars.h).
#pragma once
#include <string>

#include "sim/core/simulate.h"

namespace ptsim::sim::html {

// The <style> of every ptsim page.
inline constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:2em;max-width:1250px}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "pre{background:#f6f6f6;padding:1em}";

std::string escape(const std::string& s);
// Memory per stage, stacked by category, against the GPU's capacity.
std::string memory_svg(const Result& r);
// Bytes each GPU sends per iteration, per dimension.
std::string comm_svg(const Result& r);

}  // namespace ptsim::sim::html
