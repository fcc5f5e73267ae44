// The scenario file (CONTRACT §2): strict YAML loading, unit parsing at the edge,
// --set overrides, and every constraint checked with a message naming the keys.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hw/strict_yaml.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// Documented limits (README "Limits") besides the model's (models/model_spec.h): a larger
// value is an error naming its key, read as 64-bit before any arithmetic on it.
inline constexpr std::int64_t kMaxGpus = 1 << 20;  // cluster.num_gpus and each parallel size
inline constexpr std::int64_t kMaxMicroBatch = 1 << 16;
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 40;
inline constexpr std::int64_t kMaxMicrobatches = 1 << 20;  // gradient-accumulation steps

// Loads and validates; throws ScenarioError (file, key path, what, hint).
// `overrides` are "key.path=value" strings applied before validation (--set).
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});
Scenario parse_scenario(const std::string& yaml_text, const std::string& file,
                        const std::vector<std::string>& overrides = {});
// The scenario's YAML document with the overrides applied, before any key is read
// (for tools that write a scenario back, e.g. `ptsim search --emit-scenario`).
YAML::Node scenario_yaml(const std::string& yaml_text, const std::string& file,
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
