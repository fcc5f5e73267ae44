// Strict YAML input, shared by every reader of ours (scenarios, cost tables,
// topology graphs, published runs): an unknown key is an error that names the
// closest valid key, as CONTRACT §1 asks for a misspelt key.
#pragma once
#include <climits>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "hw/units.h"

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

struct DuplicateKey {
  std::string path;  // key path of the second occurrence, e.g. "parallel.tensor_parallel"
  int line = 0;      // 1-based line of the second occurrence
  int first_line = 0;
};
// The first mapping key that occurs twice in the same mapping anywhere under `node`
// (yaml-cpp keeps both and one silently wins); nullopt when there is none.
std::optional<DuplicateKey> duplicate_key(const YAML::Node& node, const std::string& path = {});

// "what (hint)", or `what` alone when there is no hint: for Fail functions to compose messages.
std::string with_hint(const std::string& what, const std::string& hint);

// Key paths for messages: "model" + "moe" -> "model.moe" ("" + "name" -> "name");
// "parallel.pipeline_layers", 2 -> "parallel.pipeline_layers[2]".
std::string key_path(const std::string& parent, std::string_view key);
std::string item_path(const std::string& list, std::size_t index);

// The one strict reader: typed getters that name the key path of a bad value and what
// is wrong with it. Every getter takes the node and its full key path; a node that is
// absent is reported as "missing". Each parser supplies how a failure is thrown (its
// own exception type and message layout, which the CLI maps to exit codes); the
// reader supplies the key path, what is wrong and a hint ("" when there is none).
inline constexpr Seconds kMaxLatency = 3600;          // 1 hour
inline constexpr BytesPerSecond kMinBandwidth = 1e3;  // 1 KB/s
inline constexpr BytesPerSecond kMaxBandwidth = 1e18;

class StrictReader {
 public:
  // Must throw; called with the key path, what is wrong and a hint.
  using Fail = std::function<void(const std::string& key, const std::string& what, const std::string& hint)>;
  explicit StrictReader(Fail fail) : fail_(std::move(fail)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what, const std::string& hint = {}) const;

  // `node` must be a mapping (an empty `path` is the document) whose keys are all in
  // `allowed`; an unknown key fails with the closest allowed key and its line.
  void check_keys(const YAML::Node& node, const std::string& path, const std::vector<std::string>& allowed) const;
  // No mapping anywhere under `node` has a key twice; a duplicate fails naming the key and its lines.
  void check_unique_keys(const YAML::Node& node) const;

  // Whole numbers of at least `min` and at most `max`; integer() also at most 10^9.
  std::int64_t int64(const YAML::Node& n, const std::string& key, std::int64_t min = 1,
                     std::int64_t max = INT64_MAX) const;
  int integer(const YAML::Node& n, const std::string& key, int min = 1) const;
  double number(const YAML::Node& n, const std::string& key) const;        // any, the caller checks its range
  double positive(const YAML::Node& n, const std::string& key) const;      // finite, > 0
  double non_negative(const YAML::Node& n, const std::string& key) const;  // finite, >= 0
  bool boolean(const YAML::Node& n, const std::string& key) const;
  std::string string(const YAML::Node& n, const std::string& key) const;

  // One of `options`; otherwise fails listing them, with the closest as the hint.
  std::string choice(const YAML::Node& n, const std::string& key, const std::vector<std::string>& options) const;
  // The same for a spelling table: a range of {value, name} entries (an enum's
  // spellings); returns the value whose name was written.
  template <class Table>
  auto choice(const YAML::Node& n, const std::string& key, const Table& table) const {
    std::vector<std::string> names;
    for (const auto& e : table) names.emplace_back(e.name);
    const std::string v = choice(n, key, names);
    for (const auto& e : table)
      if (e.name == v) return e.value;
    return std::begin(table)->value;  // unreachable: choice() accepted one of the names
  }

  // Quantities carry their unit (CONTRACT §2): "80 GiB", "2 us", "300 GB/s"; a bare
  // number is an error. Parsed by hw/units.h. Ranges, so that every time derived from them
  // fits the clock: bytes finite and >= 0; seconds (latencies) 0 to kMaxLatency;
  // bandwidths kMinBandwidth to kMaxBandwidth.
  Bytes bytes(const YAML::Node& n, const std::string& key) const;
  Seconds seconds(const YAML::Node& n, const std::string& key) const;
  BytesPerSecond bandwidth(const YAML::Node& n, const std::string& key) const;

 private:
  template <class T>
  T scalar(const YAML::Node& n, const std::string& key, const char* type_name) const;
  double quantity(const YAML::Node& n, const std::string& key, double (*parse)(std::string_view)) const;

  Fail fail_;
};

}  // namespace ptsim::hw
