// Pipeline schedules: the order in which one pipeline stage runs the forward and
// backward passes of its (micro-batch, model chunk) pairs.
//   GPipe (Huang et al. 2019): all forwards, then all backwards.
//   1F1B (Narayanan et al. 2021, PipeDream-Flush): p − s − 1 warm-up forwards,
//     then one forward / one backward, then the cool-down backwards.
//   Interleaved 1F1B (Megatron-LM SC'21 §2.2.2; megatron/core/pipeline_parallel/
//     schedules.py): v model chunks per stage, micro-batches taken in groups of N
//     (microbatch_group_size_per_vp_stage, default p: get_schedule_table), each group
//     through chunk 0, then chunk 1, ...; warm-up (p − s − 1)·2 + (v − 1)·N.
// With the backward split into B (input gradient) and W (weight gradient):
//   ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, §3.1): 1F1B's
//     p − s − 1 warm-up forwards; the W of micro-batch i runs after B of i + s,
//     so every stage holds at most p micro-batches (1F1B's peak) and the bubble
//     is (p − 1)(T_F + T_B − T_W).
//   ZB-H2 (ibid. §3.1): 2(p − s − 1) warm-up forwards, W of i after B of i + 2s:
//     2p − 1 micro-batches in flight on every stage, bubble (p − 1)(T_F + T_B −
//     2T_W) (ibid. Table 2) once the optimizer step's synchronisation is gone.
//   ZB-V (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory", §4;
//     the zero-bubble repository's V schedule): 2 chunks per stage in a V (chunk 0
//     on virtual stage s, chunk 1 on 2p − 1 − s), at most 2p chunk activations
//     (1F1B's p micro-batches) per stage; passes placed by list scheduling for the
//     chunk's pass times (as the repository's V schedule is generated from profiled
//     times), B before F before W, which fills the bubbles with W.
//   DualPipe (DeepSeek-V3 technical report 2024, §3.2.1, Fig. 5; deepseek-ai/
//     DualPipe): two copies of the p stages, fed from both ends with half the
//     micro-batches each; the eight-part order of the reference implementation
//     (forward warm-up, zero-bubble B/W/F, overlapped F&B pairs, B/W tail).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/parallelism.h"

namespace ptsim::sim {

// backward: the whole backward, or its input-gradient half (B) when the schedule
// splits it (models::splits_backward); weight: the weight-gradient half (W).
enum class Phase : std::uint8_t { forward, backward, weight };

struct ScheduleStep {
  Phase phase;
  int microbatch;
  int chunk;  // model chunk (virtual stage) on this rank, 0..v-1
  // A forward overlapped with the backward after it (DualPipe's F&B pair): its
  // output leaves when the pair ends, as their interleaved kernels finish together
  // (deepseek-ai/DualPipe dualpipe.py sends both after the pair).
  bool paired = false;
};

// Pass times of one chunk on one stage (any unit), for the schedules placed by
// list scheduling (ZB-V); backward is the input-gradient half.
struct PassTimes {
  double forward = 1, backward = 1, weight = 1;
};

// Why (kind, p, m, v) cannot run, naming what to change; empty when it can.
// `group`: the interleaved schedule's micro-batch group N (0 = p).
std::string schedule_requirement(models::Schedule kind, int p, int m, int v, int group = 0);

// The steps of every stage, 0..p−1, for p stages, m micro-batches, v chunks.
// `times`: ZB-V places its passes for these (equal T_F, T_B, T_W by default),
// per (stage, chunk) at index stage·v + chunk when `per_chunk` has p·v entries.
// `group`: the interleaved schedule's micro-batch group N (0 = p).
std::vector<std::vector<ScheduleStep>> build_schedules(models::Schedule kind, int p, int m, int v, PassTimes times = {},
                                                       const std::vector<PassTimes>& per_chunk = {}, int group = 0);
// build_schedules(kind, p, m, v) with the default pass times, from a small per-thread
// cache of the last ones built: the plan search's pre-pass asks for the same schedule for
// every candidate of a family that differs only in ZeRO, recompute or sequence
// parallelism. The reference is valid until the thread's next call.
const std::vector<std::vector<ScheduleStep>>& cached_schedules(models::Schedule kind, int p, int m, int v,
                                                               int group = 0);
// What a bound reads of one stage's steps: how often each chunk runs each pass (once per
// micro-batch, but DualPipe's chunks carry half of them each), and whether the stage
// starts with chunk 0's forward and ends with chunk 0's backward.
struct StepCounts {
  std::vector<std::array<int, 3>> runs;  // by chunk: forward, backward, weight steps
  bool starts_fwd0 = false, ends_bwd0 = false;
};
StepCounts count_steps(const std::vector<ScheduleStep>& steps);
// ZB-V's counts on every stage, whatever pass times placed its steps: each of the two
// chunks runs m forwards, m input-gradient and m weight-gradient passes; a stage can start
// with nothing but chunk 0's forward of micro-batch 0 (the first input anywhere), and
// ends with a weight pass (each B's W comes after it).
StepCounts zb_v_counts(int m);
// The steps of `stage` (0-based) alone.
std::vector<ScheduleStep> build_schedule(models::Schedule kind, int stage, int p, int m, int v, int group = 0);

// Where the input of (phase, chunk) on `stage` comes from and where its output
// goes, in (stage, chunk) terms; stage = -1 when there is none (the first
// forward reads the embedding, the last forward turns into the loss; W passes
// neither receive nor send).
struct PipelinePeer {
  int stage = -1;
  int chunk = -1;
};
PipelinePeer pipeline_source(models::Schedule kind, Phase phase, int stage, int chunk, int p, int v);
PipelinePeer pipeline_destination(models::Schedule kind, Phase phase, int stage, int chunk, int p, int v);
// Megatron's placement (GPipe, 1F1B, interleaved): virtual stage chunk·p + stage.
PipelinePeer pipeline_source(Phase phase, int stage, int chunk, int p, int v);
PipelinePeer pipeline_destination(Phase phase, int stage, int chunk, int p, int v);

// The micro-batches [first, last] that `chunk` runs: all of them, but for
// DualPipe, whose chunk 0 carries the first half and chunk 1 the second.
int first_microbatch(models::Schedule kind, int chunk, int m);
int last_microbatch(models::Schedule kind, int chunk, int m);

}  // namespace ptsim::sim
