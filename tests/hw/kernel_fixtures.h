// What the compute-cost tests share: a GEMM of 2-byte operands (bf16 / fp16) as the cost
// model sees it.
#pragma once
#include <cstdint>

#include "hw/compute_cost.h"

namespace ptsim::hw::testing {

// C[m×n] = A[m×k]·B[k×n]: 2mnk FLOPs, the three matrices' bytes once each.
inline KernelDesc gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  KernelDesc d;
  d.cls = KernelClass::gemm;
  d.m = m, d.n = n, d.k = k;
  d.flops = 2.0 * double(m) * double(n) * double(k);
  d.bytes = 2.0 * double(m * k + k * n + m * n);
  return d;
}

}  // namespace ptsim::hw::testing
