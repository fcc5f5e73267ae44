// Shape-aware kernel times without a calibration table (README 'Cost model'): GEMMs by
// tile and wave quantisation on the GPU's SMs with a k-dependent pipeline fill, flash
// attention by sequence length. Constants come from the GPU catalog (hw/gpus.yaml).
#pragma once
#include <cstdint>

#include "hw/gpu_catalog.h"
#include "hw/units.h"

namespace ptsim::hw {

struct GemmTile {
  int m = 0, n = 0;
};

struct GemmTiming {
  Seconds seconds = 0;  // main loop + pipeline fill of every wave (no launch, no HBM floor)
  GemmTile tile;        // the tile chosen
  double waves = 0;
};

// `count` identical C[m×n] = A[m×k]·B[k×n] run as one grid at `eff` of `peak`. Each SM
// runs one output tile at a time at peak·eff/sm_count; a tile costs
// (⌈k/gemm_tile_k⌉ + gemm_stages) main-loop slices (prologue and epilogue fill the
// software pipeline); tiles go in ⌈tiles/sm_count⌉ waves (hw::gemm_waves). Like cuBLAS's
// heuristic, the fastest of CUTLASS's large tensor-op tiles 256×128, 128×256 and 128×128
// is chosen. `reserved_sms` of the SMs are held by another kernel (a NCCL collective's
// CTAs, KernelDesc::reserved_sms): the tile is still the one chosen for the whole GPU (the
// library's heuristic does not know), and its tiles go in waves over the SMs left, each
// at the same rate. Throws std::invalid_argument on non-positive sizes, peak or eff, or when
// no SM is left.
GemmTiming gemm_timing(const GpuSpec& gpu, FlopsPerSecond peak, double eff, std::int64_t m, std::int64_t n,
                       std::int64_t k, int count = 1, int reserved_sms = 0);

// A flash kernel's rate with `length` queries per kernel, in the pass and under the mask
// given, as a fraction of its long-sequence forward rate (GpuSpec::AttentionShape):
// [backward] · [causal] · length / (length + L½ + [causal_seq_half]), L½ the pass's;
// length 0 (not known) gives the long-sequence rate. Throws std::invalid_argument on
// length < 0 or a kernel without a shape.
double attention_rate_factor(const GpuSpec& gpu, const std::string& kernel, std::int64_t length, bool backward,
                             bool causal);

}  // namespace ptsim::hw
