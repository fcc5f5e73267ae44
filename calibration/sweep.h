// What `ptsim calibrate` measures: the GEMMs a transformer layer issues, attention shapes,
// memory-bound sizes and collective sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hw/cost_table.h"

namespace ptsim::calibration {

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::string label;  // e.g. "h=4096 tokens=8192 mlp-up wgrad"
};

// The 15 GEMMs of one transformer layer plus the logits layer: QKV, attention projection,
// MLP up, MLP down and logits, each forward (tokens×in → out), dgrad (tokens×out → in) and
// wgrad (in×tokens → out). Megatron-LM's ColumnParallel/RowParallel layers issue exactly
// these three per linear (Narayanan et al. 2021, §3). Duplicates are removed.
std::vector<GemmShape> transformer_gemm_shapes(std::int64_t hidden, std::int64_t ffn_hidden, std::int64_t vocab,
                                               std::int64_t tokens);

struct Sweep {
  std::vector<GemmShape> gemm;
  std::vector<hw::AttentionShape> attention;
  std::vector<Bytes> membw_bytes;
  std::vector<Bytes> collective_bytes;
};

// The GPU sweep (quick: a few minutes on one GPU; full: tens of minutes). Collective sizes
// run 1 KiB … 4 GiB by ×4 (quick: ×16 up to 256 MiB).
Sweep gpu_sweep(bool quick);
// The same kinds of points scaled down so the CPU backend finishes in seconds (quick) or
// about a minute (full).
Sweep cpu_sweep(bool quick);

}  // namespace ptsim::calibration
