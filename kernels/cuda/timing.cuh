// Honest GPU timing (llm.c dev/cuda/common.h `benchmark_kernel`, STYLE.md item 10): warm-up
// runs, the L2 cache flushed before every timed run (outside the timed region), CUDA events
// around the work only, the median of the repeats.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <optional>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda_api.h"
#include "kernels/timing.h"

namespace ptsim::kernels::cuda {

// A buffer twice the L2 size, overwritten before each timed run so no operand is L2-resident.
class L2Flusher {
 public:
  L2Flusher() {
    int dev = 0, l2 = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    bytes_ = 2 * static_cast<std::size_t>(l2);
    if (bytes_ > 0) CUDA_CHECK(cudaMalloc(&buf_, bytes_));
  }
  ~L2Flusher() {
    if (buf_) cudaFree(buf_);
  }
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
  void flush(cudaStream_t s) const {
    if (buf_) CUDA_CHECK(cudaMemsetAsync(buf_, 0, bytes_, s));
  }

 private:
  void* buf_ = nullptr;
  std::size_t bytes_ = 0;
};

template <typename Fn>
TimingStats time_gpu(Fn&& fn, cudaStream_t stream, const BenchConfig& cfg) {
  if (cfg.repeats < 1 || cfg.warmup < 0 || !(cfg.warmup_seconds >= 0))
    throw std::invalid_argument("time_gpu: repeats must be >= 1, warmup and warmup_seconds >= 0");
  std::optional<L2Flusher> flusher;
  if (cfg.flush_l2) flusher.emplace();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  auto timed = [&] {
    CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms * 1e-3;
  };
  for (int i = 0; i < cfg.warmup; ++i) fn();
  if (cfg.warmup_seconds > 0) {
    // One timed run sizes the back-to-back batch that fills warmup_seconds (capped, so a
    // microsecond kernel does not queue millions of launches).
    const double one = std::max(1e-6, timed());
    const auto more = static_cast<long>(std::min(100000.0, std::ceil(cfg.warmup_seconds / one)));
    for (long i = 0; i < more; ++i) fn();
  }
  std::vector<double> t;
  for (int i = 0; i < cfg.repeats; ++i) {
    if (flusher) flusher->flush(stream);
    t.push_back(timed());
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  return {n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), t.front(), t.back(), cfg.repeats};
}

// Device buffer owned by RAII, so an exception mid-benchmark frees it.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n) CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (p_) cudaFree(p_);
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace ptsim::kernels::cuda
