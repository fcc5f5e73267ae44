#include "kernels/gemm_cpu.h"

#include <fmt/format.h>
#include <Eigen/Core>

#include <stdexcept>

namespace ptsim::kernels {

void gemm_cpu(std::int64_t m, std::int64_t n, std::int64_t k, std::span<const float> a, std::span<const float> b,
              std::span<float> c) {
  if (m <= 0 || n <= 0 || k <= 0)
    throw std::invalid_argument(fmt::format("gemm_cpu: dimensions must be positive, got {}x{}x{}", m, n, k));
  if (static_cast<std::int64_t>(a.size()) != m * k || static_cast<std::int64_t>(b.size()) != k * n ||
      static_cast<std::int64_t>(c.size()) != m * n)
    throw std::invalid_argument(
        fmt::format("gemm_cpu: buffer sizes {}, {}, {} do not match {}x{}x{}", a.size(), b.size(), c.size(), m, n, k));
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMajor> A(a.data(), m, k);
  Eigen::Map<const RowMajor> B(b.data(), k, n);
  Eigen::Map<RowMajor> C(c.data(), m, n);
  C.noalias() = A * B;
}

}  // namespace ptsim::kernels
