// The GPU catalog (hw/gpus.yaml, embedded in the binary): dense peak per precision,
// HBM size and bandwidth, NVLink and PCIe bandwidth, each figure with its source.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hw/units.h"

namespace ptsim::hw {

struct GpuSpec {
  std::string name;
  std::vector<std::string> aliases;
  std::string description;
  FlopsPerSecond peak_fp32 = 0, peak_tf32 = 0, peak_fp16 = 0, peak_bf16 = 0, peak_fp8 = 0;
  Bytes hbm = 0;
  BytesPerSecond hbm_bandwidth = 0;
  BytesPerSecond nvlink_bandwidth = 0;  // per GPU, per direction
  double nvlink_efficiency = 1;         // busbw a NCCL ring reaches / nvlink_bandwidth (measured)
  BytesPerSecond pcie_bandwidth = 0;    // per direction
  Watts tdp = 0;                        // max thermal design power (datasheet); default cluster.gpu_power
  double host_adam_params_per_s = 0;    // CPU optimizer step rate (offload)
  double matmul_best = 0;               // best measured matmul / peak
  bool nvls = false;                    // NVSwitch SHARP available
  // Kernel-level constants of the shape-aware cost model (hw/gemm_model.h, README 'Cost model').
  int sm_count = 0;               // streaming multiprocessors: the GEMM wave width
  Seconds launch_overhead = 0;    // per kernel, back-to-back on one stream
  // PyTorch's default cuBLAS workspace on this GPU, one per (cuBLAS handle, stream), taken
  // from the caching allocator (models/memory.cpp buffer_bytes).
  Bytes blas_workspace = 0;
  // Transformer Engine's own cuBLAS workspace (one tensor, get_workspace) on this GPU.
  Bytes te_workspace = 0;
  int gemm_tile_k = 64;           // k-slice of one main-loop iteration (CUTLASS ThreadblockShape k)
  int gemm_stages = 3;            // software-pipeline stages: prologue + epilogue cost this many k-slices
  std::string attention_kernel;   // default flash kernel of the generation: fa2 | fa3 | cudnn
  // Other flash kernels this GPU runs, with their long-sequence forward fraction of peak
  // (the default kernel's is efficiency.attention).
  std::map<std::string, double> attention_kernels;
  // How a flash kernel's rate moves with the pass, the mask and the kernel's length L (its
  // queries): forward at rate · L / (L + seq_half), backward at rate · backward · L / (L +
  // backward_seq_half), a causal mask multiplying either by `causal` and adding
  // causal_seq_half to its L½ (hw/gemm_model.h attention_rate_factor).
  struct AttentionShape {
    double backward = 1;           // backward rate / forward rate at long sequences
    double seq_half = 0;           // forward: L at which the kernel reaches half its long-sequence rate
    double backward_seq_half = 0;  // the same for the backward kernel
    double causal = 1;             // causal rate / non-causal rate at long sequences
    double causal_seq_half = 0;    // added to either L½ under a causal mask
  };
  // One per kernel: the default one and each of attention_kernels.
  std::map<std::string, AttentionShape> attention_shapes;
  // Fraction of peak reached per op class, global per GPU type: gemm is the main loop of a
  // full-wave, long-k GEMM tile; attention the default flash kernel at long sequences;
  // memory the fraction of HBM bandwidth a streaming kernel reaches.
  struct Efficiency {
    double gemm = 0.7, attention = 0.5, memory = 0.8;
  } efficiency;
  // Which of them come from a measurement or a publication (catalog key
  // efficiency_not_fitted): `ptsim validate --fit` keeps those and fits the others.
  struct NotFitted {
    bool gemm = false, attention = false, memory = false;
  } efficiency_not_fitted;
  std::vector<std::string> sources;

  // Dense peak for a precision name ("fp32", "tf32", "fp16", "bf16", "fp8");
  // 0 when the GPU has no such tensor-core path (e.g. fp8 on A100).
  FlopsPerSecond peak(std::string_view precision) const;
};

const std::vector<GpuSpec>& gpu_catalog();
// By name or alias; nullopt when unknown.
std::optional<GpuSpec> find_gpu(const std::string& name);
// Parses a catalog document (used for the embedded one and by tests).
std::vector<GpuSpec> parse_gpu_catalog(const std::string& yaml_text);

}  // namespace ptsim::hw
