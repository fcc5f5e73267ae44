#include "sim/core/straggler.h"

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <stdexcept>

namespace ptsim::sim {

namespace {

// A double in [0, 1) from the top 53 bits of one 64-bit draw.
double unit(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }

int parse_int(const std::string& tok, const std::string& text) {
  if (tok.empty() || tok.size() > 9 || tok.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument(fmt::format("'{}' in \"{}\" is not a whole number >= 0", tok, text));
  return std::stoi(tok);
}

}  // namespace

std::vector<double> draw_slowdowns(SlowDistribution d, double param, std::uint64_t seed, int count) {
  if (count < 0) throw std::invalid_argument(fmt::format("count must be >= 0, got {}", count));
  std::mt19937_64 g(seed);
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (d == SlowDistribution::uniform) {
      out.push_back(1.0 + (param - 1.0) * unit(g));
      continue;
    }
    // Box-Muller: z = sqrt(−2 ln u1) · cos(2π u2), u1 in (0, 1].
    const double u1 = 1.0 - unit(g), u2 = unit(g);
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    out.push_back(std::exp(param * std::fabs(z)));
  }
  return out;
}

std::vector<int> parse_index_list(const std::string& text, int limit) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    const std::size_t dash = item.find('-');
    const int lo = parse_int(item.substr(0, dash), text);
    const int hi = dash == std::string::npos ? lo : parse_int(item.substr(dash + 1), text);
    if (hi < lo) throw std::invalid_argument(fmt::format("range '{}' in \"{}\" runs backwards", item, text));
    if (hi >= limit) throw std::invalid_argument(fmt::format("{} in \"{}\" is out of range: at most {}", hi, text, limit - 1));
    for (int i = lo; i <= hi; ++i) out.push_back(i);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace ptsim::sim
