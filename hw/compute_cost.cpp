#include "hw/compute_cost.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace ptsim::hw {

ComputeCostModel::ComputeCostModel(GpuSpec gpu) : gpu_(std::move(gpu)), eff_(gpu_.efficiency) {}

Seconds ComputeCostModel::roofline_seconds(const KernelDesc& k) const {
  Seconds mem = 0;
  if (k.bytes > 0) mem = k.bytes / (gpu_.hbm_bandwidth * eff_.memory);
  if (k.flops <= 0 || k.cls == KernelClass::memory) return mem;
  FlopsPerSecond peak = gpu_.peak(k.dtype);
  if (peak <= 0) {
    // fp8 on a GPU without fp8 tensor cores runs in 16-bit (as Transformer Engine
    // falls back); fp32 math uses TF32 tensor cores as PyTorch's default for matmul.
    peak = gpu_.peak_bf16;
  }
  const double eff = k.cls == KernelClass::gemm ? eff_.gemm : eff_.attention;
  double flops = k.flops;
  // Causal attention kernels skip the masked half of the score blocks; the op list
  // counts causal attention in full (model-FLOPs convention), so halve it here.
  if (k.cls == KernelClass::attention && k.causal) flops *= 0.5;
  return std::max(flops / (peak * eff), mem);
}

}  // namespace ptsim::hw
