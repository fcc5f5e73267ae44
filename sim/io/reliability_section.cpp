#include "sim/io/reliability_section.h"
#include "sim/io/scenario_keys.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace ptsim::sim {

const std::vector<std::string> kReliabilityKeys = keys_of("reliability");
const std::vector<std::string> kStorageBandwidthKeys = keys_of("reliability.storage_bandwidth");

namespace {

// Bounds beyond which a figure is surely a typo.
constexpr double kMaxMtbf = 1e12;             // s, ~31,700 years
constexpr double kMaxFailuresPerHour = 1e3;   // per GPU or node
constexpr double kMaxRestartTime = 30 * 86400;  // s
constexpr double kMaxInterval = 365 * 86400;  // s
constexpr std::int64_t kMaxIntervalIterations = std::int64_t{1} << 40;

// "<number> <unit>" split at the first character that cannot belong to the number.
std::pair<double, std::string> split(std::string_view text, const char* what) {
  const std::string s(text);
  std::size_t end = 0;
  double v = 0;
  try {
    v = std::stod(s, &end);
  } catch (const std::logic_error&) {
    throw std::invalid_argument(fmt::format("'{}' is not a {}", s, what));
  }
  std::string unit = s.substr(end);
  const auto first = unit.find_first_not_of(' ');
  unit = first == std::string::npos ? "" : unit.substr(first);
  while (!unit.empty() && unit.back() == ' ') unit.pop_back();
  if (!std::isfinite(v)) throw std::invalid_argument(fmt::format("'{}' is not a finite {}", s, what));
  return {v, unit};
}

double duration(const hw::StrictReader& r, const YAML::Node& n, const std::string& key, double most,
                bool zero_ok) {
  const std::string text = r.string(n, key);
  double v = 0;
  try {
    v = parse_duration(text);
  } catch (const std::invalid_argument& e) {
    r.fail(key, e.what(), "a duration with its unit: s, min, h or d, e.g. \"30 min\"");
  }
  if (v < 0 || (!zero_ok && v == 0) || v > most)
    r.fail(key, fmt::format("'{}' is out of range", text),
           fmt::format("{} and at most {:g} s", zero_ok ? "at least 0" : "more than 0", most));
  return v;
}

double rate(const hw::StrictReader& r, const YAML::Node& n, const std::string& key) {
  const double v = r.non_negative(n, key);
  if (v > kMaxFailuresPerHour)
    r.fail(key, fmt::format("{:g} is out of range", v), fmt::format("at most {:g} failures per hour", kMaxFailuresPerHour));
  return v;
}

void read_interval(const hw::StrictReader& r, const YAML::Node& n, ReliabilityConfig& c) {
  const std::string key = "reliability.checkpoint_interval";
  const std::string text = r.string(n, key);
  if (text == "optimal") return;
  const char* hint = "optimal, a time (\"30 min\") or whole iterations (\"500 iterations\")";
  std::pair<double, std::string> q;
  try {
    q = split(text, "checkpoint interval");
  } catch (const std::invalid_argument& e) {
    r.fail(key, e.what(), hint);
  }
  if (q.second == "iterations" || q.second == "iteration" || q.second == "iters") {
    if (q.first != std::floor(q.first) || q.first < 1 || q.first > static_cast<double>(kMaxIntervalIterations))
      r.fail(key, fmt::format("'{}' is not a whole number of iterations from 1 to 2^40", text), hint);
    c.interval_iterations = static_cast<std::int64_t>(q.first);
    return;
  }
  try {
    c.interval_time = parse_duration(text);
  } catch (const std::invalid_argument& e) {
    r.fail(key, e.what(), hint);
  }
  if (!(c.interval_time > 0) || c.interval_time > kMaxInterval)
    r.fail(key, fmt::format("'{}' is out of range", text), fmt::format("more than 0 and at most {:g} s", kMaxInterval));
}

}  // namespace

double parse_duration(std::string_view text) {
  const auto [v, unit] = split(text, "duration");
  if (unit.empty()) throw std::invalid_argument(fmt::format("'{}' has no unit", text));
  if (unit == "s") return v;
  if (unit == "ms") return v * 1e-3;
  if (unit == "min") return v * 60;
  if (unit == "h") return v * 3600;
  if (unit == "d") return v * 86400;
  throw std::invalid_argument(fmt::format("'{}': unknown time unit '{}' (use s, min, h or d)", text, unit));
}

void read_reliability(const hw::StrictReader& r, const YAML::Node& node, Scenario& s) {
  const std::string sec = "reliability";
  if (node.IsNull()) {  // `reliability:` with nothing under it: every default
    s.reliability = ReliabilityConfig{};
    return;
  }
  r.check_keys(node, sec, kReliabilityKeys);
  ReliabilityConfig c;
  const auto key = [&](const char* k) { return sec + "." + k; };
  auto pair = [&](const char* mtbf, const char* per_hour, double& out) {
    if (node[mtbf] && node[per_hour])
      r.fail(key(per_hour), fmt::format("give either {} or {}, not both", key(mtbf), key(per_hour)));
    if (node[mtbf]) out = 3600 / duration(r, node[mtbf], key(mtbf), kMaxMtbf, false);
    if (node[per_hour]) out = rate(r, node[per_hour], key(per_hour));
    if (node[mtbf] || node[per_hour]) c.rates_default = false;
  };
  pair("gpu_mtbf", "gpu_failures_per_hour", c.gpu_failures_per_hour);
  pair("node_mtbf", "node_failures_per_hour", c.node_failures_per_hour);
  if (!(c.gpu_failures_per_hour > 0 || c.node_failures_per_hour > 0))
    r.fail(key("gpu_failures_per_hour"), "both failure rates are 0: nothing fails, there is no goodput to model",
           "give a positive per-GPU or per-node rate, or drop the reliability section");
  if (node["checkpoint_size"]) {
    c.checkpoint_size = r.bytes(node["checkpoint_size"], key("checkpoint_size"));
    if (!(*c.checkpoint_size > 0)) r.fail(key("checkpoint_size"), "must be more than 0 bytes");
  }
  if (const YAML::Node bw = node["storage_bandwidth"]) {
    const std::string p = key("storage_bandwidth");
    r.check_keys(bw, p, kStorageBandwidthKeys);
    if (bw["write"]) c.aggregate_write = r.bandwidth(bw["write"], p + ".write");
    if (bw["read"]) c.aggregate_read = r.bandwidth(bw["read"], p + ".read");
    if (bw["node_write"]) c.node_write = r.bandwidth(bw["node_write"], p + ".node_write");
    if (bw["node_read"]) c.node_read = r.bandwidth(bw["node_read"], p + ".node_read");
  }
  if (node["checkpoint_mode"])
    c.mode = r.choice(node["checkpoint_mode"], key("checkpoint_mode"), {"sync", "async"}) == "async"
                 ? CheckpointMode::async
                 : CheckpointMode::sync;
  if (node["snapshot_bandwidth"]) {
    if (c.mode != CheckpointMode::async)
      r.fail(key("snapshot_bandwidth"), "given but reliability.checkpoint_mode is not async",
             "the device-to-host snapshot is what blocks an async checkpoint");
    c.snapshot_bandwidth = r.bandwidth(node["snapshot_bandwidth"], key("snapshot_bandwidth"));
  }
  if (node["relaunch_time"]) {
    c.relaunch_time = duration(r, node["relaunch_time"], key("relaunch_time"), kMaxRestartTime, true);
    c.relaunch_default = false;
  }
  if (node["warmup_time"]) c.warmup_time = duration(r, node["warmup_time"], key("warmup_time"), kMaxRestartTime, true);
  if (node["checkpoint_interval"]) read_interval(r, node["checkpoint_interval"], c);
  s.reliability = c;
}

}  // namespace ptsim::sim
