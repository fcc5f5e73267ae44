// The scenario file (CONTRACT §2): strict YAML loading, unit parsing at the edge,
// --set overrides, and every constraint checked with a message naming the keys.
#pragma once
#include <string>
#include <vector>

#include "hw/strict_yaml.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// Loads and validates; throws ScenarioError (file, key path, what, hint).
// `overrides` are "key.path=value" strings applied before validation (--set).
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});
Scenario parse_scenario(const std::string& yaml_text, const std::string& file,
                        const std::vector<std::string>& overrides = {});

// Sets plan.par.num_microbatches = global_batch / (micro_batch × dp) when it divides
// (validate() reports it when it does not).
void derive_microbatches(Scenario& s);

// Checks every cross-key constraint; throws ScenarioError. Also used by the search
// (with file = "<plan>") to reject invalid candidates.
void validate(const Scenario& s);

// The closest of `candidates` to `word` (Levenshtein), for "did you mean" hints.
using hw::closest_match;

}  // namespace ptsim::sim
