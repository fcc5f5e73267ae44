#include "hw/compute_cost.h"

#include <fmt/format.h>
#include <algorithm>

namespace ptsim::hw {

ComputeCostModel::ComputeCostModel(GpuSpec gpu) : gpu_(std::move(gpu)), eff_(gpu_.efficiency) {}

ComputeCostModel::ComputeCostModel(GpuSpec gpu, std::shared_ptr<const CostTable> table)
    : gpu_(std::move(gpu)), eff_(gpu_.efficiency), table_(std::move(table)) {}

Seconds ComputeCostModel::seconds(const KernelDesc& k) const {
  if (table_) {
    std::optional<Seconds> t;
    // Tables store measured dtypes; TF32 math is measured as "fp32".
    const std::string dtype = k.dtype == "tf32" ? "fp32" : k.dtype;
    switch (k.cls) {
      case KernelClass::gemm:
        if (k.m > 0 && k.n > 0 && k.k > 0)
          if (auto g = table_->gemm_seconds(k.m, k.n, k.k, dtype)) t = *g * k.count;
        break;
      case KernelClass::attention:
        if (k.batch_heads > 0)
          t = table_->attention_seconds({k.batch_heads, k.seq_q, k.seq_kv, k.head_dim, k.causal}, dtype, k.backward);
        break;
      case KernelClass::memory:
        if (k.bytes > 0) t = table_->membw_seconds(k.bytes);
        break;
    }
    if (t) {
      table_used_ = true;
      return *t;
    }
  }
  return roofline_seconds(k);
}

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
