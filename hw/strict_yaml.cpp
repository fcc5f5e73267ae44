#include "hw/strict_yaml.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>
#include <stdexcept>

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
    // A complex key (`? {a: 1}` or `? [x]`) is never a valid key: report it as unknown.
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("<complex key>");
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      return UnknownKey{key, closest_match(key, allowed), kv.first.Mark().line + 1};
  }
  return std::nullopt;
}

std::optional<DuplicateKey> duplicate_key(const YAML::Node& node, const std::string& path) {
  if (node.IsMap()) {
    std::map<std::string, int> seen;  // key -> line
    for (const auto& kv : node) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("<complex key>");
      const int line = kv.first.Mark().line + 1;
      const auto [it, fresh] = seen.emplace(key, line);
      if (!fresh) return DuplicateKey{key_path(path, key), line, it->second};
      if (auto d = duplicate_key(kv.second, key_path(path, key))) return d;
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      if (auto d = duplicate_key(node[i], item_path(path, i))) return d;
  }
  return std::nullopt;
}

std::string with_hint(const std::string& what, const std::string& hint) {
  return hint.empty() ? what : what + " (" + hint + ")";
}

std::string key_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string item_path(const std::string& list, std::size_t index) { return fmt::format("{}[{}]", list, index); }

void StrictReader::fail(const std::string& key, const std::string& what, const std::string& hint) const {
  fail_(key, what, hint);
  // A Fail that returns breaks the contract; stop here rather than read on.
  std::abort();
}

void StrictReader::check_keys(const YAML::Node& node, const std::string& path,
                              const std::vector<std::string>& allowed) const {
  if (!node.IsMap()) fail(path.empty() ? "<root>" : path, "expected a mapping of keys");
  if (const auto u = unknown_key(node, allowed))
    fail(key_path(path, u->key), "unknown key",
         u->line > 0 ? fmt::format("did you mean '{}'? line {}", key_path(path, u->suggestion), u->line)
                     // a key without a place in the file came from the command line (--set)
                     : fmt::format("did you mean '{}'? given with --set", key_path(path, u->suggestion)));
}

void StrictReader::check_unique_keys(const YAML::Node& node) const {
  if (const auto d = duplicate_key(node))
    fail(d->path, fmt::format("duplicate key at line {} (first at line {})", d->line, d->first_line),
         "a key may appear once in a mapping; remove one of them");
}

template <class T>
T StrictReader::scalar(const YAML::Node& n, const std::string& key, const char* type_name) const {
  if (!n) fail(key, "missing");
  if (!n.IsScalar()) fail(key, fmt::format("expected a {}", type_name));
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    fail(key, fmt::format("'{}' is not a {}", n.Scalar(), type_name));
  }
}

std::int64_t StrictReader::int64(const YAML::Node& n, const std::string& key, std::int64_t min,
                                 std::int64_t max) const {
  const auto v = scalar<std::int64_t>(n, key, "whole number");
  if (v < min) fail(key, fmt::format("{} must be at least {}", v, min));
  if (v > max) fail(key, fmt::format("{} is out of range", v), fmt::format("at most {}", max));
  return v;
}

int StrictReader::integer(const YAML::Node& n, const std::string& key, int min) const {
  const auto v = int64(n, key, min);
  if (v > 1'000'000'000) fail(key, fmt::format("{} is out of range", v));
  return static_cast<int>(v);
}

double StrictReader::number(const YAML::Node& n, const std::string& key) const {
  return scalar<double>(n, key, "number");
}

double StrictReader::positive(const YAML::Node& n, const std::string& key) const {
  const auto v = number(n, key);
  if (!std::isfinite(v) || v <= 0) fail(key, fmt::format("{} must be a positive finite number", n.Scalar()));
  return v;
}

double StrictReader::non_negative(const YAML::Node& n, const std::string& key) const {
  const auto v = number(n, key);
  if (!std::isfinite(v) || v < 0) fail(key, fmt::format("{} must be a non-negative finite number", n.Scalar()));
  return v;
}

bool StrictReader::boolean(const YAML::Node& n, const std::string& key) const {
  return scalar<bool>(n, key, "boolean (true/false)");
}

std::string StrictReader::string(const YAML::Node& n, const std::string& key) const {
  return scalar<std::string>(n, key, "string");
}

std::string StrictReader::choice(const YAML::Node& n, const std::string& key,
                                 const std::vector<std::string>& options) const {
  const std::string v = string(n, key);
  if (std::find(options.begin(), options.end(), v) == options.end()) {
    std::string list;
    for (const auto& o : options) list += (list.empty() ? "" : " | ") + o;
    fail(key, fmt::format("'{}' is not one of {}", v, list),
         fmt::format("did you mean '{}'?", closest_match(v, options)));
  }
  return v;
}

double StrictReader::quantity(const YAML::Node& n, const std::string& key, double (*parse)(std::string_view)) const {
  if (!n) fail(key, "missing");
  if (!n.IsScalar()) fail(key, "expected a quantity with its unit");
  const std::string& text = n.Scalar();
  std::size_t number_end = 0;
  try {
    (void)std::stod(text, &number_end);
  } catch (const std::logic_error&) {  // not a number at all (or out of range): the unit parser says why
  }
  if (number_end > 0 && number_end == text.size())
    fail(key, fmt::format("'{}' has no unit", text), "write it with its unit, e.g. \"300 GB/s\", \"2 us\", \"80 GiB\"");
  try {
    return parse(text);
  } catch (const UnitError& e) {
    fail(key, e.what());
  }
}

Bytes StrictReader::bytes(const YAML::Node& n, const std::string& key) const {
  const Bytes b = quantity(n, key, parse_bytes);
  if (!(std::isfinite(b) && b >= 0)) fail(key, fmt::format("'{}' is out of range", n.Scalar()), "a finite size >= 0");
  return b;
}

Seconds StrictReader::seconds(const YAML::Node& n, const std::string& key) const {
  const Seconds s = quantity(n, key, parse_seconds);
  if (!(s >= 0 && s <= kMaxLatency))
    fail(key, fmt::format("'{}' is out of range", n.Scalar()), fmt::format("0 to {:g} s", kMaxLatency));
  return s;
}

BytesPerSecond StrictReader::bandwidth(const YAML::Node& n, const std::string& key) const {
  const BytesPerSecond bw = quantity(n, key, parse_bandwidth);
  if (!(bw >= kMinBandwidth && bw <= kMaxBandwidth))
    fail(key, fmt::format("'{}' is out of range", n.Scalar()),
         fmt::format("{:g} to {:g} bytes/s", kMinBandwidth, kMaxBandwidth));
  return bw;
}

}  // namespace ptsim::hw
