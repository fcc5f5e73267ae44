// Random operands for timing: never time on zeros. On an H100 80GB HBM3 a bf16 8192^3
// GEMM ran 24 % faster on zeros than on random data (836 against 675 TFLOP/s): zeros draw
// less power, so the clocks stay higher under the 700 W limit
// (calibration/logs/h100-sxm/calibrate-zeros.log against calibrate.log).
// Uniform values in [-scale, scale] from a hash of the index, filled on the device.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/check.cuh"

namespace ptsim::kernels::cuda {

template <typename T>
__global__ void fill_random_kernel(T* p, std::size_t n, std::uint32_t seed, float scale) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    // splitmix-style integer hash of (index, seed): a different value per element and seed
    std::uint32_t x = static_cast<std::uint32_t>(i) * 0x9E3779B9u ^ seed ^ static_cast<std::uint32_t>(i >> 32);
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    p[i] = T(scale * (static_cast<float>(x) * (2.0f / 4294967296.0f) - 1.0f));
  }
}

template <typename T>
void fill_random(T* p, std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 65535));
  fill_random_kernel<T><<<blocks, 256>>>(p, n, seed, scale);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ptsim::kernels::cuda
