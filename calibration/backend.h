// The measuring side of `ptsim calibrate`: one interface, a CPU backend (Eigen GEMM, the CPU
// FlashAttention algorithm, STREAM copy) that runs the whole sweep → fit → write path in CI,
// and a CUDA backend (cuBLASLt, our FlashAttention-2 kernels, NCCL) for real tables.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hw/cost_table.h"

namespace ptsim::calibration {

struct AttentionTiming {
  Seconds fwd_seconds = 0;
  std::optional<Seconds> bwd_seconds;
};

struct TimingConfig {
  int warmup = 2;   // untimed runs first (clocks up, caches and cuBLAS heuristics warm)
  int repeats = 5;  // the median of these is recorded
  // GPU backend: the warm-up goes on back to back until this much GPU time has passed, so
  // the timed runs see the clocks a training step runs at. An H100 SXM at its 700 W limit
  // ran a bf16 GEMM 15-18 % slower after 1-3 s back to back than in its first 10 ms
  // (README "Calibration on a real GPU").
  double warmup_seconds = 0.2;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // the table's `backend`: "cpu" | "cuda"
  virtual hw::DeviceInfo device() const = 0;

  virtual std::vector<std::string> gemm_dtypes() const = 0;
  virtual std::vector<std::string> attention_dtypes() const = 0;
  virtual std::vector<std::string> attention_impls() const = 0;
  // Output tile the GEMM library is assumed to use, and the number of parallel units, for
  // the wave-quantisation term of the GEMM fit.
  virtual int gemm_tile() const = 0;
  virtual int parallel_units() const = 0;

  virtual Seconds gemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype) = 0;
  // nullopt when the implementation does not support the shape (e.g. naive attention whose
  // score matrix would not fit in memory).
  virtual std::optional<AttentionTiming> attention(const hw::AttentionShape& shape, const std::string& dtype,
                                                   const std::string& impl) = 0;
  // A memory-bound copy moving `bytes` (read + written).
  virtual Seconds membw(Bytes bytes) = 0;

  // Ranks a collective can span here (local GPUs); < 2 skips the collective sweep.
  virtual int collective_ranks() const = 0;
  virtual std::vector<std::string> collective_ops() const = 0;
  virtual Seconds collective(const std::string& op, int ranks, Bytes bytes) = 0;

  // Roofline figures printed beside the achieved rate; 0 = unknown (nothing printed).
  virtual FlopsPerSecond peak_flops(const std::string& dtype) const = 0;
  virtual BytesPerSecond peak_bandwidth() const = 0;
};

std::unique_ptr<Backend> make_cpu_backend(TimingConfig timing);
// Opens the CUDA module (calibration/cuda_module.h) and asks it for a backend. nullptr, with
// `why` set to one line naming the cause, when the module is absent (a build without CUDA), a
// CUDA library it needs is missing (dlopen's message names it), or no device is present.
std::unique_ptr<Backend> make_cuda_backend(TimingConfig timing, std::string& why);

}  // namespace ptsim::calibration
