#include "kernels/membw_cpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace ptsim::kernels {

Bytes copy_cpu(std::span<const float> src, std::span<float> dst) {
  if (src.size() != dst.size())
    throw std::invalid_argument(fmt::format("copy_cpu: sizes differ ({} vs {})", src.size(), dst.size()));
  std::copy(src.begin(), src.end(), dst.begin());
  return 2.0 * static_cast<double>(src.size()) * sizeof(float);
}

Bytes triad_cpu(std::span<float> a, std::span<const float> b, std::span<const float> c, float s) {
  if (a.size() != b.size() || a.size() != c.size())
    throw std::invalid_argument(fmt::format("triad_cpu: sizes differ ({}, {}, {})", a.size(), b.size(), c.size()));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = b[i] + s * c[i];
  return 3.0 * static_cast<double>(a.size()) * sizeof(float);
}

}  // namespace ptsim::kernels
