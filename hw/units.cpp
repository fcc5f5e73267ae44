#include "hw/units.h"

#include <fmt/format.h>
#include <cctype>
#include <cmath>
#include <utility>

namespace ptsim {

void throw_time_range(Seconds s) {
  throw TimeRangeError(fmt::format(
      "a simulated duration of {} s cannot be represented (the clock holds 0 to {:g} s): check the model sizes, "
      "batch sizes, bandwidths and latencies of the input",
      s, kMaxSimulatedSeconds));
}
namespace {

// Splits "  300 GB/s " into (300, "GB/s"). Throws when there is no number or no unit.
std::pair<double, std::string> split_quantity(std::string_view text, std::string_view what) {
  std::string s(text);
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw UnitError(fmt::format("'{}' is not a {}: expected a number followed by a unit", text, what));
  }
  while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
  std::string unit = s.substr(pos);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.pop_back();
  if (unit.empty())
    throw UnitError(fmt::format("'{}' has no unit: a {} needs one (e.g. {})", text, what,
                                what == "size"       ? "\"80 GiB\""
                                : what == "duration" ? "\"2 us\""
                                : what == "power"    ? "\"700 W\""
                                                     : "\"300 GB/s\""));
  if (!std::isfinite(value) || value < 0)
    throw UnitError(fmt::format("'{}' must be a finite, non-negative {}", text, what));
  return {value, unit};
}

double prefix_factor(std::string_view p, bool& ok) {
  ok = true;
  if (p.empty()) return 1;
  if (p == "K" || p == "k") return 1e3;
  if (p == "M") return 1e6;
  if (p == "G") return 1e9;
  if (p == "T") return 1e12;
  if (p == "P") return 1e15;
  if (p == "Ki") return kKiB;
  if (p == "Mi") return kMiB;
  if (p == "Gi") return kGiB;
  if (p == "Ti") return kGiB * 1024;
  ok = false;
  return 0;
}

}  // namespace

Bytes parse_bytes(std::string_view text) {
  auto [v, unit] = split_quantity(text, "size");
  if (unit.back() == 'B') {
    bool ok = false;
    double f = prefix_factor(std::string_view(unit).substr(0, unit.size() - 1), ok);
    if (ok) return v * f;
  }
  throw UnitError(fmt::format("'{}': unknown size unit '{}' (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", text, unit));
}

Seconds parse_seconds(std::string_view text) {
  auto [v, unit] = split_quantity(text, "duration");
  if (unit == "s") return v;
  if (unit == "ms") return v * 1e-3;
  if (unit == "us" || unit == "µs") return v * 1e-6;
  if (unit == "ns") return v * 1e-9;
  throw UnitError(fmt::format("'{}': unknown time unit '{}' (use s, ms, us, ns)", text, unit));
}

BytesPerSecond parse_bandwidth(std::string_view text) {
  auto [v, unit] = split_quantity(text, "bandwidth");
  if (unit.size() >= 3 && unit.substr(unit.size() - 2) == "/s") {  // "B/s" and "b/s" too
    const std::string base = unit.substr(0, unit.size() - 2);
    const char last = base.back();
    if (last == 'B' || last == 'b') {
      bool ok = false;
      double f = prefix_factor(std::string_view(base).substr(0, base.size() - 1), ok);
      if (ok) return last == 'B' ? v * f : v * f / 8.0;
    }
  }
  throw UnitError(fmt::format("'{}': unknown bandwidth unit '{}' (use GB/s for bytes or Gb/s for bits)", text, unit));
}

FlopsPerSecond parse_flops_rate(std::string_view text) {
  auto [v, unit] = split_quantity(text, "compute rate");
  const std::string_view u = unit;
  const std::string_view tail = "FLOP/s";
  if (u.size() >= tail.size() && u.substr(u.size() - tail.size()) == tail) {
    bool ok = false;
    double f = prefix_factor(u.substr(0, u.size() - tail.size()), ok);
    if (ok) return v * f;
  }
  throw UnitError(fmt::format("'{}': unknown compute-rate unit '{}' (use TFLOP/s)", text, unit));
}

Watts parse_power(std::string_view text) {
  auto [v, unit] = split_quantity(text, "power");
  if (unit == "W") return v;
  if (unit == "kW") return v * 1e3;
  throw UnitError(fmt::format("'{}': unknown power unit '{}' (use W or kW)", text, unit));
}

std::string format_bytes(Bytes b) {
  if (b >= kGiB) return fmt::format("{:.2f} GiB", b / kGiB);
  if (b >= kMiB) return fmt::format("{:.2f} MiB", b / kMiB);
  if (b >= kKiB) return fmt::format("{:.2f} KiB", b / kKiB);
  return fmt::format("{:.0f} B", b);
}

std::string format_seconds(Seconds s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  if (s >= 1e-6) return fmt::format("{:.3f} us", s * 1e6);
  return fmt::format("{:.0f} ns", s * 1e9);
}

std::string format_bandwidth(BytesPerSecond bw) { return fmt::format("{:.1f} GB/s", bw / kGB); }

}  // namespace ptsim
