// The compute cost model: the duration of one kernel on one GPU. A calibrated
// table answers when it covers the kernel; otherwise the roofline of the GPU
// catalog does: max(FLOPs / (peak · eff_class), bytes / (HBM bandwidth · eff_mem)).
// Efficiencies are global per GPU type and op class (hw/gpus.yaml), never per scenario.
#pragma once
#include <cstdint>
#include <string>

#include "hw/gpu_catalog.h"
#include "hw/units.h"

namespace ptsim::hw {

enum class KernelClass { gemm, attention, memory };

struct KernelDesc {
  KernelClass cls = KernelClass::memory;
  Flops flops = 0;
  Bytes bytes = 0;            // HBM bytes read + written
  std::string dtype = "bf16"; // math precision: fp32 | tf32 | fp16 | bf16 | fp8
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
  virtual ~ComputeCostModel() = default;
  const GpuSpec& gpu() const { return gpu_; }
  const Efficiency& efficiency() const { return eff_; }
  void set_efficiency(const Efficiency& e) { eff_ = e; }

  // Seconds for one kernel by roofline.
  Seconds roofline_seconds(const KernelDesc& k) const;
  virtual Seconds seconds(const KernelDesc& k) const { return roofline_seconds(k); }
  // Name of where costs come from: "datasheet" or a table's name.
  virtual std::string source() const { return source_; }

 private:
  GpuSpec gpu_;
  Efficiency eff_;
  std::string source_ = "datasheet";
};

}  // namespace ptsim::hw
