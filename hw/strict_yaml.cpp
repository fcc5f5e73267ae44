#include "hw/strict_yaml.h"

#include <algorithm>
#include <climits>

namespace ptsim::hw {
namespace {

int levenshtein(std::string_view a, std::string_view b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = INT_MAX;
  for (const auto& c : candidates) {
    const int d = levenshtein(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

std::optional<UnknownKey> unknown_key(const YAML::Node& node, const std::vector<std::string>& allowed) {
  if (!node.IsMap()) return std::nullopt;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      return UnknownKey{key, closest_match(key, allowed), kv.first.Mark().line + 1};
  }
  return std::nullopt;
}

}  // namespace ptsim::hw
