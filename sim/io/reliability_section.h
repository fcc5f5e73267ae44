// The scenario's `reliability:` section (README "Goodput"): failure rates, checkpoint
// size, storage bandwidth, checkpoint mode, restart and checkpoint interval, read into
// s.reliability (sim/core/reliability.h).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "hw/strict_yaml.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

extern const std::vector<std::string> kReliabilityKeys;
extern const std::vector<std::string> kStorageBandwidthKeys;

// "90 s", "30 min", "2.5 h", "3 d" (s, min, h, d; ms): seconds. Throws hw UnitError-like
// std::invalid_argument naming the text when it is not a duration.
double parse_duration(std::string_view text);

// Reads `node` (the reliability mapping) into s.reliability; s.cluster is read.
void read_reliability(const hw::StrictReader& r, const YAML::Node& node, Scenario& s);

}  // namespace ptsim::sim
