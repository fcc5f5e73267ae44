// Honest timing on the CPU (llm.c `benchmark_kernel` habit, STYLE.md item 10): warm-up runs
// first, then the median of repeats (robust to a stray context switch), and the achieved
// rate printed next to a roofline by the caller. The CUDA equivalent, with CUDA events and
// an L2 flush, is kernels/cuda/timing.cuh.
#pragma once

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptsim::kernels {

struct TimingStats {
  double median_s = 0;
  double min_s = 0;
  double max_s = 0;
  int repeats = 0;
};

// Median of `repeats` runs after `warmup` runs; `before_each` (e.g. a cache flush) runs
// outside the timed region.
template <typename Fn, typename Before>
TimingStats time_cpu(Fn&& fn, Before&& before_each, int warmup, int repeats) {
  if (repeats < 1 || warmup < 0)
    throw std::invalid_argument("time_cpu: repeats must be >= 1 and warmup >= 0, got " + std::to_string(repeats) +
                                " and " + std::to_string(warmup));
  for (int i = 0; i < warmup; ++i) {
    before_each();
    fn();
  }
  std::vector<double> t(static_cast<std::size_t>(repeats));
  for (auto& x : t) {
    before_each();
    const auto start = std::chrono::steady_clock::now();
    fn();
    x = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  const double median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  return {median, t.front(), t.back(), repeats};
}

template <typename Fn>
TimingStats time_cpu(Fn&& fn, int warmup, int repeats) {
  return time_cpu(
      std::forward<Fn>(fn), [] {}, warmup, repeats);
}

}  // namespace ptsim::kernels
