// The "goodput" object of the result JSON (README "Goodput") and its summary lines.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "sim/core/reliability.h"

namespace ptsim::sim {

nlohmann::json goodput_json(const Goodput& g);
std::string goodput_text(const Goodput& g);

}  // namespace ptsim::sim
