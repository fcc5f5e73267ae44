// The compute cost model: the duration of one kernel on one GPU. A calibrated
// table answers when it covers the kernel; otherwise the shape-aware roofline of the
// GPU catalog does (README 'Cost model'): max(compute, bytes / (HBM bandwidth · eff_mem))
// + launch overhead, where compute is the tile/wave model of hw/gemm_model.h for GEMMs,
// the attention kernel's rate at its sequence length for flash attention, and its
// GEMMs plus the score traffic for naive attention. Constants are global per GPU type
// (hw/gpus.yaml), never per scenario.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "hw/cost_table.h"
#include "hw/gpu_catalog.h"
#include "hw/units.h"

namespace ptsim::hw {

enum class KernelClass { gemm, attention, memory };

struct KernelDesc {
  KernelClass cls = KernelClass::memory;
  Flops flops = 0;
  Bytes bytes = 0;             // HBM bytes read + written
  std::string dtype = "bf16";  // math precision: fp32 | tf32 | fp16 | bf16 | fp8
  bool backward = false;
  // GEMM shape (cls == gemm): count × (m×k · k×n)
  std::int64_t m = 0, n = 0, k = 0;
  int count = 1;
  // Attention shape (cls == attention)
  std::int64_t batch_heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  bool causal = true;
  // SMs held by a concurrent NCCL kernel (one CTA per channel, NCCL src/enqueue.cc
  // ncclLaunchKernel: grid = the plan's channel count) while this kernel runs: GEMM
  // tiles go in waves over the SMs left, flash attention runs on the SMs left, a
  // measured GEMM or attention time stretches by sm_count / SMs left; memory-bound
  // kernels are unchanged (fewer SMs still saturate HBM).
  int reserved_sms = 0;
  // HBM bandwidth a concurrent NCCL collective takes (bytes/s): NCCL stores what it
  // receives to memory and reads it back to send it on, at least twice its link rate
  // (NVIDIA/nccl#1428, sjeaugey). The kernel's HBM traffic runs on what is left.
  BytesPerSecond hbm_taken = 0;
};

using Efficiency = GpuSpec::Efficiency;

class ComputeCostModel {
 public:
  explicit ComputeCostModel(GpuSpec gpu);
  // With a calibration table: measured costs where the table covers the kernel,
  // the roofline elsewhere.
  ComputeCostModel(GpuSpec gpu, std::shared_ptr<const CostTable> table);
  virtual ~ComputeCostModel() = default;
  ComputeCostModel(const ComputeCostModel& o)
      : gpu_(o.gpu_), eff_(o.eff_), table_(o.table_), source_(o.source_), attention_kernel_(o.attention_kernel_) {}
  const GpuSpec& gpu() const { return gpu_; }
  const Efficiency& efficiency() const { return eff_; }
  void set_efficiency(const Efficiency& e) { eff_ = e; }
  // The attention kernel: "naive", "flash" (the GPU's default flash kernel) or a named
  // one ("fa2", "fa3", "cudnn"). Throws std::invalid_argument when the GPU has no such
  // kernel (e.g. fa3 on an A100), naming the kernels it has.
  void set_attention_kernel(const std::string& kind);
  const std::string& attention_kernel() const { return attention_kernel_; }

  // Seconds for one kernel by the shape-aware roofline (launch overhead included).
  Seconds roofline_seconds(const KernelDesc& k) const;
  // The table's figure when it has one for this kernel, else the roofline.
  virtual Seconds seconds(const KernelDesc& k) const;
  // Where costs came from: the table's name once any lookup was answered by it,
  // "datasheet" otherwise (CONTRACT §3 cost_source).
  virtual std::string source() const { return table_used_ ? table_->name : source_; }
  const CostTable* table() const { return table_.get(); }

 private:
  FlopsPerSecond math_peak(const std::string& dtype) const;
  // HBM time of `bytes` at the bandwidth left by a collective taking `taken` bytes/s
  // (never below a quarter of the whole).
  Seconds memory_seconds(Bytes bytes, BytesPerSecond taken = 0) const;
  // How much longer a kernel that scales with SMs runs with k.reserved_sms of them held
  // (sm_count / SMs left; 1 when none are).
  double held_sms_stretch(const KernelDesc& k) const;
  // How much longer a measured memory-bound kernel runs with k.hbm_taken of HBM taken.
  double held_hbm_stretch(const KernelDesc& k) const;
  Seconds gemm_seconds(const KernelDesc& k) const;
  Seconds attention_seconds(const KernelDesc& k) const;
  Seconds naive_attention_seconds(const KernelDesc& k) const;

  GpuSpec gpu_;
  Efficiency eff_;
  std::shared_ptr<const CostTable> table_;
  std::string source_ = "datasheet";
  std::string attention_kernel_;  // set by the constructors to the GPU's default flash kernel
  mutable std::atomic<bool> table_used_{false};
};

}  // namespace ptsim::hw
