// The compute cost model: the duration of one kernel on one GPU. A calibrated
// table answers when it covers the kernel; otherwise the roofline of the GPU
// catalog does: max(FLOPs / (peak · eff_class), bytes / (HBM bandwidth · eff_mem)).
// Efficiencies are global per GPU type and op class (hw/gpus.yaml), never per scenario.
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
};

using Efficiency = GpuSpec::Efficiency;

class ComputeCostModel {
 public:
  explicit ComputeCostModel(GpuSpec gpu);
  // With a calibration table: measured costs where the table covers the kernel,
  // the roofline elsewhere.
  ComputeCostModel(GpuSpec gpu, std::shared_ptr<const CostTable> table);
  virtual ~ComputeCostModel() = default;
  ComputeCostModel(const ComputeCostModel& o) : gpu_(o.gpu_), eff_(o.eff_), table_(o.table_), source_(o.source_) {}
  const GpuSpec& gpu() const { return gpu_; }
  const Efficiency& efficiency() const { return eff_; }
  void set_efficiency(const Efficiency& e) { eff_ = e; }

  // Seconds for one kernel by roofline.
  Seconds roofline_seconds(const KernelDesc& k) const;
  // The table's figure when it has one for this kernel, else the roofline.
  virtual Seconds seconds(const KernelDesc& k) const;
  // Where costs came from: the table's name once any lookup was answered by it,
  // "datasheet" otherwise (CONTRACT §3 cost_source).
  virtual std::string source() const { return table_used_ ? table_->name : source_; }
  const CostTable* table() const { return table_.get(); }

 private:
  GpuSpec gpu_;
  Efficiency eff_;
  std::shared_ptr<const CostTable> table_;
  std::string source_ = "datasheet";
  mutable std::atomic<bool> table_used_{false};
};

}  // namespace ptsim::hw
