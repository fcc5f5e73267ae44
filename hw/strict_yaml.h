// Strict YAML input, shared by every reader of ours (scenarios, cost tables,
// topology graphs, published runs): an unknown key is an error that names the
// closest valid key, as CONTRACT §1 asks for a misspelt key.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace ptsim::hw {

// The candidate closest to `word` by edit distance (Levenshtein); "" when there
// are no candidates. Used for "did you mean" hints.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

struct UnknownKey {
  std::string key;         // as written
  std::string suggestion;  // the closest allowed key
  int line = 0;            // 1-based line of the key in its file
};
// The first key of the mapping `node` that is not in `allowed`; nullopt when every
// key is known (or `node` is not a mapping).
std::optional<UnknownKey> unknown_key(const YAML::Node& node, const std::vector<std::string>& allowed);

}  // namespace ptsim::hw
