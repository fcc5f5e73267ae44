// Units live in names and types (ASTRA-sim `common/Type.h` habit): quantities are
// doubles in SI base units, named by alias; simulated time is an integer Tick.
// Unit strings ("300 GB/s", "2 us", "80 GiB") are parsed once, here, at the edge.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ptsim {

using Bytes = double;           // bytes
using Seconds = double;         // seconds
using BytesPerSecond = double;  // bytes per second
using Flops = double;           // floating-point operations
using FlopsPerSecond = double;  // floating-point operations per second
using Watts = double;           // power

// Simulated time: integer nanoseconds, so event order is total and runs are
// bit-for-bit reproducible (ns-3 / OMNeT++ habit, STYLE.md item 1).
using Tick = std::int64_t;
inline constexpr Tick kTicksPerSecond = 1'000'000'000;

// The longest simulated duration (about 31.7 years): beyond it, the int64 nanosecond clock
// could wrap once durations are added up, so a larger one is refused, never wrapped.
inline constexpr Seconds kMaxSimulatedSeconds = 1e9;

// Thrown by to_ticks() for a duration the clock cannot hold (infinite, NaN or above
// kMaxSimulatedSeconds): an input asks for it (a tiny bandwidth, a huge model), so exit 2.
struct TimeRangeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
[[noreturn]] void throw_time_range(Seconds s);

inline constexpr Tick to_ticks(Seconds s) {
  // Round to nearest; durations are never negative. A cast of a double beyond int64 is
  // undefined (in practice INT64_MIN: the clock went backwards), so the range is checked.
  if (!(s >= 0 && s <= kMaxSimulatedSeconds)) throw_time_range(s);
  return static_cast<Tick>(s * static_cast<double>(kTicksPerSecond) + 0.5);
}
inline constexpr Seconds to_seconds(Tick t) { return static_cast<double>(t) / static_cast<double>(kTicksPerSecond); }

inline constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
inline constexpr double kGB = 1e9, kTB = 1e12;

// Thrown by the parsers below; the message names the bad text and what was expected.
struct UnitError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// "80 GiB", "40 GB", "512 MiB", "1.5 KB", "100 B" -> bytes. Decimal (KB, MB, GB, TB)
// and binary (KiB, MiB, GiB, TiB) prefixes; a bare number is an error.
Bytes parse_bytes(std::string_view text);
// "2 us", "1.5 ms", "10 ns", "3 s" -> seconds.
Seconds parse_seconds(std::string_view text);
// "300 GB/s" (bytes) or "200 Gb/s" (bits: divided by 8), "1.6 Tb/s", "25 GiB/s".
BytesPerSecond parse_bandwidth(std::string_view text);
// "312 TFLOP/s", "1.979 PFLOP/s" -> FLOP/s.
FlopsPerSecond parse_flops_rate(std::string_view text);
// "700 W", "1.2 kW" -> watts.
Watts parse_power(std::string_view text);

// Human formatting for summaries: "1.23 GiB", "4.5 ms", "300 GB/s".
std::string format_bytes(Bytes b);
std::string format_seconds(Seconds s);
std::string format_bandwidth(BytesPerSecond bw);

}  // namespace ptsim
