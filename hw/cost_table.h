// Cost tables: measured kernel and collective costs, written by `ptsim calibrate`
// (calibration/) and read here by the simulator. hw/ owns the FORMAT and the LOOKUP only;
// it depends on neither calibration/ nor kernels/ (tables flow up, DESIGN.md).
//
// File format (YAML, one document; every time in seconds, every size in bytes):
//
//   format: ptsim-cost-table/1
//   name: h100-sxm               # becomes the result's `cost_source`
//   backend: cuda                # cuda | cpu | nccl-tests
//   date: 2025-01-31T12:00:00Z
//   device: {name: ..., sm_count: 132, sm_clock_mhz: 1980, memory_clock_mhz: 2619,
//            driver: "12.4", cuda: "12.4", nccl: "2.21.5", cudnn: "9.1.0"}
//   gemm:
//     points: [{m: 4096, n: 4096, k: 4096, dtype: bf16, seconds: 1.9e-4}, ...]
//     fits:   [{dtype: bf16, overhead_s: ..., seconds_per_flop: ..., seconds_per_byte: ...,
//               tile_m: 128, tile_n: 128, sm_count: 132}]
//   attention:
//     points: [{batch_heads: 32, seq_q: 2048, seq_kv: 2048, head_dim: 128, causal: true,
//               dtype: bf16, impl: flash, fwd_seconds: ..., bwd_seconds: ...}]   # bwd optional
//     fits:   [{dtype: bf16, impl: flash, fwd_overhead_s: ..., fwd_seconds_per_flop: ...,
//               bwd_overhead_s: ..., bwd_seconds_per_flop: ...}]                 # bwd_* optional
//   membw:
//     points: [{bytes: 1048576, seconds: ...}]
//     fit:    {latency_s: ..., bandwidth_bytes_per_s: ...}
//   collective:
//     points: [{op: all-reduce, ranks: 8, algorithm: nccl, bytes: ..., seconds: ...}]
//     fits:   [{op: all-reduce, ranks: 8, algorithm: nccl, alpha_s: ..., beta_s_per_byte: ...}]
//
// Every section is optional: a table imported from nccl-tests has only `collective`.
// Collective `bytes` follow nccl-tests' `size` column: the whole buffer per rank
// (all-reduce: the buffer; all-gather: the gathered output; reduce-scatter: the full
// input; all-to-all: the whole send buffer; send-recv: the message).
//
// Lookup: inside the measured range a query is interpolated in log space (piecewise
// linear in log-log for one-dimensional data; for GEMM and attention the fit is
// corrected by the measured/fit ratio, interpolated in log space by inverse-distance
// weighting, so measured points are reproduced exactly). Outside the range the fit is
// used. std::nullopt means "the table has nothing for this": the caller falls back to
// the roofline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hw/atomic_file.h"  // write_file_atomically, used by save_cost_table and calibration/
#include "hw/units.h"

namespace ptsim::hw {

// "bf16" | "fp16" | "fp8" | "fp32" (fp32 GEMMs run as TF32 on tensor cores where the
// backend allows it). Kept a string so hw/ does not depend on models/.
bool is_valid_dtype(std::string_view dtype);

struct DeviceInfo {
  std::string name;
  int sm_count = 0;             // streaming multiprocessors (CPU backend: hardware threads)
  double sm_clock_mhz = 0;      // 0 = unknown
  double memory_clock_mhz = 0;  // 0 = unknown
  std::string driver_version;   // "" = not applicable / unknown
  std::string cuda_version;
  std::string nccl_version;
  std::string cudnn_version;
};

struct GemmPoint {
  std::int64_t m = 0, n = 0, k = 0;  // C[m×n] = A[m×k] · B[k×n]
  std::string dtype;
  Seconds seconds = 0;
};

struct AttentionShape {
  std::int64_t batch_heads = 0;  // batch × heads
  std::int64_t seq_q = 0;
  std::int64_t seq_kv = 0;
  std::int64_t head_dim = 0;
  bool causal = false;
};

// FLOPs of scaled-dot-product attention as FlashAttention-2 counts them (Dao 2023, §4.1
// benchmarks): forward 4·BH·Sq·Skv·d (two matmuls), halved when causal; backward 2.5× the
// forward (five matmuls instead of two).
Flops attention_flops(const AttentionShape& shape, bool backward);

struct AttentionPoint {
  AttentionShape shape;
  std::string dtype;
  std::string impl;  // "flash" (ours), "naive" (materialised scores), "cudnn", "cpu-flash", ...
  Seconds fwd_seconds = 0;
  std::optional<Seconds> bwd_seconds;  // absent when the implementation has no backward measured
};

struct MembwPoint {
  Bytes bytes = 0;  // bytes moved (read + written)
  Seconds seconds = 0;
};

struct CollectivePoint {
  std::string op;  // all-reduce | all-gather | reduce-scatter | all-to-all | send-recv | broadcast | reduce
  int ranks = 0;
  std::string algorithm;  // "nccl" (NCCL's own choice), or ring / tree / ... when forced
  Bytes bytes = 0;        // nccl-tests' `size` convention, see the file comment
  Seconds seconds = 0;
};

// Fraction of the last wave of output tiles that keeps SMs busy: tiles = ⌈m/tile_m⌉·⌈n/tile_n⌉
// spread over sm_count SMs in ⌈tiles/sm_count⌉ waves; efficiency = tiles / (waves·sm_count).
// (The "wave quantization" effect of NVIDIA's Matrix Multiplication Background guide.)
double wave_efficiency(std::int64_t m, std::int64_t n, int tile_m, int tile_n, int sm_count);
// Output tiles of `count` identical m×n GEMMs (a grouped GEMM packs them into one grid) and
// the waves they take on sm_count SMs: tiles = count·⌈m/tile_m⌉·⌈n/tile_n⌉,
// waves = ⌈tiles/sm_count⌉. The one place wave quantisation is computed (calibration fits
// and the shape-aware roofline of hw/gemm_model.h both use it).
struct GemmWaves {
  double tiles = 0;
  double waves = 0;
};
GemmWaves gemm_waves(std::int64_t m, std::int64_t n, int count, int tile_m, int tile_n, int sm_count);

// GEMM fit: t = overhead_s + seconds_per_flop·(2mnk / wave_efficiency) + seconds_per_byte·bytes,
// bytes = (mk + kn + mn)·sizeof(dtype). Least squares on relative error (calibration/).
struct GemmFit {
  std::string dtype;
  Seconds overhead_s = 0;
  double seconds_per_flop = 0;
  double seconds_per_byte = 0;
  int tile_m = 128, tile_n = 128, sm_count = 1;
  Seconds predict(std::int64_t m, std::int64_t n, std::int64_t k) const;
};

// Attention fit: t = overhead + seconds_per_flop · attention_flops(shape), per (dtype, impl).
struct AttentionFit {
  std::string dtype, impl;
  Seconds fwd_overhead_s = 0;
  double fwd_seconds_per_flop = 0;
  std::optional<Seconds> bwd_overhead_s;
  std::optional<double> bwd_seconds_per_flop;
  std::optional<Seconds> predict(const AttentionShape& shape, bool backward) const;
};

// Memory-bound fit: t = latency_s + bytes / bandwidth.
struct MembwFit {
  Seconds latency_s = 0;
  BytesPerSecond bandwidth_bytes_per_s = 0;
  Seconds predict(Bytes bytes) const { return latency_s + bytes / bandwidth_bytes_per_s; }
};

// Collective α–β fit: t = alpha_s + beta_s_per_byte · bytes, per (op, ranks, algorithm).
struct CollectiveFit {
  std::string op;
  int ranks = 0;
  std::string algorithm;
  Seconds alpha_s = 0;
  double beta_s_per_byte = 0;
  Seconds predict(Bytes bytes) const { return alpha_s + beta_s_per_byte * bytes; }
};

struct AttentionEstimate {
  Seconds seconds = 0;
  std::string impl;  // the fastest implementation for this shape
};

struct CostTable {
  std::string name;
  std::string backend;
  std::string date;
  DeviceInfo device;

  std::vector<GemmPoint> gemm;
  std::vector<AttentionPoint> attention;
  std::vector<MembwPoint> membw;
  std::vector<CollectivePoint> collectives;

  std::vector<GemmFit> gemm_fits;
  std::vector<AttentionFit> attention_fits;
  std::optional<MembwFit> membw_fit;
  std::vector<CollectiveFit> collective_fits;

  // Seconds for C[m×n] = A[m×k]·B[k×n] in `dtype`; nullopt when the table has neither
  // points nor a fit for that dtype.
  std::optional<Seconds> gemm_seconds(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view dtype) const;
  // Forward (backward = false) or backward attention time of implementation `impl`
  // ("naive", "cudnn", "flash": ptsim's own kernel); an empty `impl` takes the fastest
  // implementation measured for this (dtype, head_dim, causal). nullopt when that
  // implementation has no point or fit for this direction (cuDNN's backward is not measured).
  std::optional<Seconds> attention_seconds(const AttentionShape& shape, std::string_view dtype, bool backward,
                                           std::string_view impl = {}) const;
  std::optional<AttentionEstimate> fastest_attention(const AttentionShape& shape, std::string_view dtype, bool backward,
                                                     std::string_view impl = {}) const;
  // A memory-bound kernel moving `bytes` (read + written).
  std::optional<Seconds> membw_seconds(Bytes bytes) const;
  // Collective over `ranks` ranks with `bytes` in nccl-tests' size convention; the
  // fastest algorithm measured for (op, ranks). nullopt when (op, ranks) was not measured.
  std::optional<Seconds> collective_seconds(std::string_view op, int ranks, Bytes bytes) const;
};

// Parses a table; throws std::invalid_argument naming `source` and the key path on bad input.
CostTable parse_cost_table(const std::string& yaml_text, const std::string& source);
// Reads and parses `path`; throws std::invalid_argument naming the file (and key) on failure.
CostTable load_cost_table(const std::string& path);
std::string cost_table_to_yaml(const CostTable& table);
// Writes atomically: a temporary file in the same directory, then rename(2), so readers
// never see a half-written table and an interrupted write leaves the old file (or none).
// Throws std::runtime_error when the file cannot be written.
void save_cost_table(const CostTable& table, const std::string& path);

}  // namespace ptsim::hw
