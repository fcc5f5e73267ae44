// Pipeline schedules: the order in which one pipeline stage runs the forward and
// backward passes of its (micro-batch, model chunk) pairs.
//   GPipe (Huang et al. 2019): all forwards, then all backwards.
//   1F1B (Narayanan et al. 2021, PipeDream-Flush): p − s − 1 warm-up forwards,
//     then one forward / one backward, then the cool-down backwards.
//   Interleaved 1F1B (Megatron-LM SC'21 §2.2.2; megatron/core/pipeline_parallel/
//     schedules.py): v model chunks per stage, warm-up (p − s − 1)·2 + (v − 1)·p.
#pragma once
#include <cstdint>
#include <vector>

#include "models/parallelism.h"

namespace ptsim::sim {

enum class Phase : std::uint8_t { forward, backward };

struct ScheduleStep {
  Phase phase;
  int microbatch;
  int chunk;  // model chunk (virtual stage) on this rank, 0..v-1
};

// The steps of `stage` (0-based) for p stages, m micro-batches, v chunks.
std::vector<ScheduleStep> build_schedule(models::Schedule kind, int stage, int p, int m, int v);

// Where the input of (phase, chunk) on `stage` comes from and where its output
// goes, in (stage, chunk) terms; stage = -1 when there is none (the first
// forward reads the embedding, the last forward turns into the loss).
struct PipelinePeer {
  int stage = -1;
  int chunk = -1;
};
PipelinePeer pipeline_source(Phase phase, int stage, int chunk, int p, int v);
PipelinePeer pipeline_destination(Phase phase, int stage, int chunk, int p, int v);

}  // namespace ptsim::sim
