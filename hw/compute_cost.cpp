#include "hw/compute_cost.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "hw/gemm_model.h"

namespace ptsim::hw {

namespace {

// The head dimension FlashAttention's kernel computes for a model's `d`: FA2 rounds it up
// to a multiple of 32 (Dao-AILab/flash-attention csrc/flash_attn/flash_api.cpp, mha_fwd /
// mha_bwd: head_size_rounded = round_multiple(head_size, 32), the kernel dispatched on
// it), FA3 to 64, 96, 128, 192 or 256 (hopper/flash_api.cpp round_up_headdim).
std::int64_t flash_kernel_head_dim(const std::string& kind, std::int64_t d) {
  if (kind != "fa3") return (d + 31) / 32 * 32;
  for (const std::int64_t compiled : {64, 96, 128, 192, 256})
    if (d <= compiled) return compiled;
  return d;
}

}  // namespace

ComputeCostModel::ComputeCostModel(GpuSpec gpu)
    : gpu_(std::move(gpu)), eff_(gpu_.efficiency), attention_kernel_(gpu_.attention_kernel) {}

ComputeCostModel::ComputeCostModel(GpuSpec gpu, std::shared_ptr<const CostTable> table)
    : gpu_(std::move(gpu)), eff_(gpu_.efficiency), table_(std::move(table)), attention_kernel_(gpu_.attention_kernel) {}

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
        // Only the kernel the scenario runs: a table measures naive and cuDNN attention as
        // a training stack runs them, but its "flash" is ptsim's own reference kernel, not
        // FA2/FA3, so those (and cuDNN's unmeasured backward) come from the roofline.
        if (k.batch_heads > 0 && (attention_kernel_ == "naive" || attention_kernel_ == "cudnn"))
          t = table_->attention_seconds({k.batch_heads, k.seq_q, k.seq_kv, k.head_dim, k.causal}, dtype, k.backward,
                                        attention_kernel_);
        break;
      case KernelClass::memory:
        if (k.bytes > 0) t = table_->membw_seconds(k.bytes);
        break;
    }
    if (t) {
      table_used_ = true;
      *t *= k.cls == KernelClass::memory ? held_hbm_stretch(k) : held_sms_stretch(k);
      return *t;
    }
  }
  return roofline_seconds(k);
}

void ComputeCostModel::set_attention_kernel(const std::string& kind) {
  if (kind == "naive" || kind == "flash" || kind == gpu_.attention_kernel) {
    attention_kernel_ = kind == "flash" ? gpu_.attention_kernel : kind;
    return;
  }
  if (gpu_.attention_kernels.count(kind)) {
    attention_kernel_ = kind;
    return;
  }
  std::string have = "naive, flash (= " + gpu_.attention_kernel + ")";
  for (const auto& [name, eff] : gpu_.attention_kernels) have += ", " + name;
  throw std::invalid_argument(
      fmt::format("attention kernel '{}' does not run on {} (it has: {})", kind, gpu_.name, have));
}

FlopsPerSecond ComputeCostModel::math_peak(const std::string& dtype) const {
  const FlopsPerSecond peak = gpu_.peak(dtype);
  // fp8 on a GPU without fp8 tensor cores runs in 16-bit (as Transformer Engine falls
  // back); fp32 math uses TF32 tensor cores as PyTorch's default for matmul.
  return peak > 0 ? peak : gpu_.peak_bf16;
}

double ComputeCostModel::held_sms_stretch(const KernelDesc& k) const {
  return static_cast<double>(gpu_.sm_count) / (gpu_.sm_count - k.reserved_sms);
}

Seconds ComputeCostModel::memory_seconds(Bytes bytes, BytesPerSecond taken) const {
  const BytesPerSecond bw = gpu_.hbm_bandwidth * eff_.memory;
  return bytes > 0 ? bytes / std::max(bw - taken, 0.25 * bw) : 0.0;
}

double ComputeCostModel::held_hbm_stretch(const KernelDesc& k) const {
  return k.hbm_taken > 0 ? memory_seconds(1.0, k.hbm_taken) / memory_seconds(1.0) : 1.0;
}

Seconds ComputeCostModel::roofline_seconds(const KernelDesc& k) const {
  switch (k.cls) {
    case KernelClass::gemm:
      return gemm_seconds(k);
    case KernelClass::attention:
      return attention_seconds(k);
    case KernelClass::memory:
      break;
  }
  return memory_seconds(k.bytes, k.hbm_taken) + gpu_.launch_overhead;
}

// One launch for the whole (grouped) GEMM; the tile/wave model when the shape is known,
// flat FLOPs at the GEMM efficiency otherwise; never below the HBM traffic.
Seconds ComputeCostModel::gemm_seconds(const KernelDesc& k) const {
  const FlopsPerSecond peak = math_peak(k.dtype);
  Seconds compute = k.flops / (peak * eff_.gemm);
  if (k.m > 0 && k.n > 0 && k.k > 0)
    compute = gemm_timing(gpu_, peak, eff_.gemm, k.m, k.n, k.k, k.count, k.reserved_sms).seconds;
  else
    compute *= held_sms_stretch(k);
  return std::max(compute, memory_seconds(k.bytes, k.hbm_taken)) + gpu_.launch_overhead;
}

Seconds ComputeCostModel::attention_seconds(const KernelDesc& k) const {
  if (attention_kernel_ == "naive" && k.batch_heads > 0) return naive_attention_seconds(k);
  double eff =
      attention_kernel_ == gpu_.attention_kernel ? eff_.attention : gpu_.attention_kernels.at(attention_kernel_);
  // Flash kernels skip the masked half of causal score blocks; the op list counts causal
  // attention in full (model-FLOPs convention), so halve it here. Ring attention
  // (seq_kv = cp·seq_q) runs one kernel per K/V chunk of seq_q keys.
  double flops = k.causal ? 0.5 * k.flops : k.flops;
  // FlashAttention computes the head dimension its kernel was compiled for
  // (flash_kernel_head_dim): MPT-30B's 112 as 128. cuDNN's fused attention takes any
  // multiple of 8.
  if (k.head_dim > 0 && attention_kernel_ != "cudnn")
    flops *=
        static_cast<double>(flash_kernel_head_dim(attention_kernel_, k.head_dim)) / static_cast<double>(k.head_dim);
  // The pass's and the mask's rate at the kernel's length (0: unknown, the long-sequence
  // rate). Ring attention runs one kernel per K/V chunk, of which only the diagonal one is
  // masked: 1 of `launches` at the causal rate, the rest at the unmasked one.
  const std::int64_t length = k.seq_q > 0 && k.seq_kv > 0 ? std::min(k.seq_q, k.seq_kv) : 0;
  const double launches =
      length > 0 ? std::max(1.0, std::ceil(static_cast<double>(k.seq_kv) / static_cast<double>(k.seq_q))) : 1;
  const double masked = attention_rate_factor(gpu_, attention_kernel_, length, k.backward, k.causal);
  if (launches > 1 && k.causal) {
    const double open = attention_rate_factor(gpu_, attention_kernel_, length, k.backward, false);
    eff /= 1 / (launches * masked) + (launches - 1) / (launches * open);
  } else {
    eff *= masked;
  }
  eff /= held_sms_stretch(k);
  return std::max(flops / (math_peak(k.dtype) * eff), memory_seconds(k.bytes, k.hbm_taken)) +
         launches * gpu_.launch_overhead;
}

// Naive attention (Megatron-LM 2021: baddbmm, fused scale-mask-softmax, dropout, bmm)
// computes every score, causal or not: its batched GEMMs (k = head_dim or seq: short k
// pays the pipeline fill) plus the score tensor's HBM traffic, kernel after kernel.
// Forward Q·Kᵀ and P·V; backward dV, dP, dQ, dK.
Seconds ComputeCostModel::naive_attention_seconds(const KernelDesc& k) const {
  const FlopsPerSecond peak = math_peak(k.dtype);
  const int bh = static_cast<int>(k.batch_heads);
  auto bmm = [&](std::int64_t m, std::int64_t n, std::int64_t kk) {
    return gemm_timing(gpu_, peak, eff_.gemm, m, n, kk, bh, k.reserved_sms).seconds;
  };
  const std::int64_t q = k.seq_q, kv = k.seq_kv, d = k.head_dim;
  Seconds t = bmm(q, kv, d) + bmm(q, d, kv);
  int launches = 4;  // two GEMMs, softmax, dropout
  if (k.backward) {
    t = bmm(kv, d, q) + bmm(q, kv, d) + bmm(q, d, kv) + bmm(kv, d, q);
    launches = 6;  // four GEMMs, dropout and softmax backward
  }
  return t + memory_seconds(k.bytes, k.hbm_taken) + launches * gpu_.launch_overhead;
}

}  // namespace ptsim::hw
