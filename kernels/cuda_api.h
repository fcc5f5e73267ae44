// Host-side API of the CUDA kernels, usable from plain C++ (no CUDA headers here). Defined
// only when PTSIM_HAVE_CUDA; each function sets up its buffers, checks its kernel against
// the CPU reference (check_*) or times it honestly (bench_*: warm-up, L2 flush between
// repeats, CUDA events, median). Errors throw std::runtime_error with file and line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hw/units.h"
#include "kernels/attention_cpu.h"
#include "kernels/timing.h"
#include "ptsim/config.h"

namespace ptsim::kernels::cuda {

struct BenchConfig {
  int warmup = 2;
  int repeats = 5;
  bool flush_l2 = true;  // overwrite an L2-sized buffer before every timed run
  // After `warmup` runs, more run back to back until this much GPU time has passed
  // (calibration::TimingConfig::warmup_seconds: clocks settle under the power limit).
  double warmup_seconds = 0;
};

struct DeviceProperties {
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  double sm_clock_mhz = 0, memory_clock_mhz = 0;
  int memory_bus_bits = 0;
  Bytes l2_bytes = 0;
  std::string driver_version, runtime_version, nccl_version, cudnn_version;
  // Roofline figures derived from the queries above (see cuda/device.cu for the sources).
  BytesPerSecond peak_bandwidth = 0;
  FlopsPerSecond peak_dense(const std::string& dtype) const;
};

// |x − ref| ≤ atol + rtol·|ref| over every element; max_violation = max(|x − ref| − tol).
struct CheckResult {
  double max_abs_error = 0;
  double max_violation = 0;
  std::string detail;
  bool ok() const { return max_violation <= 0; }
};

#if PTSIM_HAVE_CUDA
// 0 when cudaGetDeviceCount fails (no driver, no device) or finds none.
int device_count() noexcept;
DeviceProperties device_properties(int device);

// dtype: bf16 | fp16 | fp8 (sm_90 only: e4m3 inputs, bf16 output) | fp32 (TF32 tensor cores).
TimingStats bench_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype,
                       const BenchConfig& cfg);
CheckResult check_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype);

// impl: "flash" (ours, kernels/cuda/flash_attention_*.cu), "naive" (materialised scores,
// kernels/cuda/naive_attention.cu), "cudnn" (cuDNN 9 fused flash attention through the
// backend graph API, kernels/cuda/cudnn_attention.cu; forward only). dtype: bf16 | fp16.
// nullopt when the implementation does not support the shape (flash: head_dim 64/128,
// sequences multiple of 64; naive: score matrix larger than a quarter of free memory;
// cudnn: backward, built without cuDNN, or no cuDNN engine accepts the graph).
// check_attention throws std::invalid_argument for a cudnn backward and std::runtime_error
// (cuDNN's reason) when cuDNN cannot build the graph.
std::optional<TimingStats> bench_attention(const AttentionDims& dims, const std::string& dtype, const std::string& impl,
                                           bool backward, const BenchConfig& cfg);
CheckResult check_attention(const AttentionDims& dims, const std::string& dtype, const std::string& impl,
                            bool backward);
// Why cuDNN's fused attention cannot run this forward here ("" when it can): builds the
// graph and asks cuDNN's heuristics, exactly as bench_attention does.
std::string cudnn_attention_unsupported_reason(const AttentionDims& dims, const std::string& dtype);
// Whether this build links cuDNN at all (kernels/CMakeLists.txt makes it optional).
bool cudnn_attention_compiled_in() noexcept;

// Device-to-device copy kernel moving `bytes` (read + written).
TimingStats bench_membw(Bytes bytes, const BenchConfig& cfg);
CheckResult check_membw(std::int64_t elements);

// NCCL over the first `ranks` local GPUs of this process (ncclCommInitAll). op: all-reduce,
// all-gather, reduce-scatter, all-to-all, send-recv (ranks 0 → 1); bytes in nccl-tests'
// size convention. Time = the slowest rank's median.
TimingStats bench_collective(const std::string& op, int ranks, Bytes bytes, const BenchConfig& cfg);
CheckResult check_collective(const std::string& op, int ranks);
#endif

}  // namespace ptsim::kernels::cuda
