// ZeRO-3's parameter gathers: the units one GPU gathers and the most it holds at once. The
// simulator issues these units (sim/core/program_builder.cpp); the closed-form memory model
// (models/memory.h buffer_bytes) counts the same peak.
#pragma once
#include <vector>

#include "models/model_spec.h"
#include "models/ops.h"
#include "models/parallelism.h"

namespace ptsim::models {

// Whether the routed experts' weights lie apart from the dense ones, on their own
// expert-data-parallel group: expert parallelism, or an expert tensor-parallel size below tp.
bool experts_apart(const ModelSpec& m, const Parallelism& p);

// Whether ZeRO-3 gathers anything: a group to gather over (dp·cp, or the experts' group).
bool zero3_gathers(const ModelSpec& m, const Parallelism& p);

struct GatherPiece {
  int op = -1;          // index in the layer's op list; -1 = the whole block (or its dense / expert part)
  double bytes = 0;     // on one GPU
  bool expert = false;  // over the experts' group
};
// The gather units of one block on one GPU, in first-use order: the block as a whole, its
// dense and expert weights apart (experts_apart), or (Zero3Gathers::per_submodule, `ops` given:
// a transformer layer) each GEMM at or above the persistence threshold, sharing the block's
// bytes in proportion to its weights (biases and norms ride along), the routed experts' GEMMs
// sharing the experts' bytes. `params` the block's parameters on this GPU, `expert` of which
// the routed experts' (when apart).
std::vector<GatherPiece> gather_pieces(const Parallelism& p, const std::vector<Op>* ops, double params, double expert,
                                       double elem_bytes);

// The most gathered-parameter bytes one GPU of `stage` holds at once under ZeRO-3, walking each
// chunk's forward and backward as the simulator gathers, prefetches and frees (0 when nothing is
// gathered). Without reshard_after_forward: every forward in flight keeps its chunk's gathers.
double zero3_gathered_peak(const ModelSpec& m, const Parallelism& p, int stage);

}  // namespace ptsim::models
