// CPU GEMM through Eigen: the CPU backend's matrix multiply and the reference the CUDA
// GEMM is checked against.
#pragma once

#include <cstdint>
#include <span>

namespace ptsim::kernels {

// C[m×n] = A[m×k] · B[k×n], all row-major float. Throws std::invalid_argument on bad sizes.
void gemm_cpu(std::int64_t m, std::int64_t n, std::int64_t k, std::span<const float> a, std::span<const float> b,
              std::span<float> c);

}  // namespace ptsim::kernels
