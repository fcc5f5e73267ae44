#include "sim/core/schedule.h"

#include <algorithm>

#include "hw/errors.h"

namespace ptsim::sim {

namespace {

// Megatron's interleaved mapping from a virtual micro-batch index k (the k-th
// forward or backward this rank runs) to its model chunk and micro-batch
// (schedules.py: get_model_chunk_id / microbatch id within the group of p).
int interleaved_chunk(int k, int p, int v, bool forward) {
  const int in_group = k % (p * v);
  const int chunk = in_group / p;
  return forward ? chunk : v - 1 - chunk;
}
int interleaved_microbatch(int k, int p, int v) { return (k / (p * v)) * p + k % p; }

}  // namespace

std::vector<ScheduleStep> build_schedule(models::Schedule kind, int stage, int p, int m, int v) {
  PTSIM_CHECK(stage >= 0 && stage < p && m >= 1 && v >= 1, "schedule: stage {} of {}, {} micro-batches, {} chunks",
              stage, p, m, v);
  std::vector<ScheduleStep> steps;
  steps.reserve(static_cast<std::size_t>(2 * m * v));
  switch (kind) {
    case models::Schedule::gpipe:
      for (int c = 0; c < v; ++c)
        for (int mb = 0; mb < m; ++mb) steps.push_back({Phase::forward, mb, c});
      for (int c = v - 1; c >= 0; --c)
        for (int mb = 0; mb < m; ++mb) steps.push_back({Phase::backward, mb, c});
      break;
    case models::Schedule::one_f_one_b: {
      PTSIM_CHECK(v == 1, "1F1B runs one chunk per stage, got {}", v);
      const int warmup = std::min(p - stage - 1, m);
      for (int i = 0; i < warmup; ++i) steps.push_back({Phase::forward, i, 0});
      for (int i = 0; i < m - warmup; ++i) {
        steps.push_back({Phase::forward, warmup + i, 0});
        steps.push_back({Phase::backward, i, 0});
      }
      for (int i = m - warmup; i < m; ++i) steps.push_back({Phase::backward, i, 0});
      break;
    }
    case models::Schedule::interleaved_1f1b: {
      const int total = m * v;
      // Megatron-core schedules.py (get_pp_rank_microbatches): warm-up
      // (p − rank − 1)·2 + (v − 1)·p, all of them only when that reaches m·v (the
      // 2021 Megatron-LM's "m == p: all warm-up" special case is gone).
      const int warmup = std::min(total, (p - stage - 1) * 2 + (v - 1) * p);
      const int steady = total - warmup;
      for (int k = 0; k < warmup; ++k)
        steps.push_back({Phase::forward, interleaved_microbatch(k, p, v), interleaved_chunk(k, p, v, true)});
      for (int i = 0; i < steady; ++i) {
        const int kf = warmup + i;
        steps.push_back({Phase::forward, interleaved_microbatch(kf, p, v), interleaved_chunk(kf, p, v, true)});
        steps.push_back({Phase::backward, interleaved_microbatch(i, p, v), interleaved_chunk(i, p, v, false)});
      }
      for (int k = steady; k < total; ++k)
        steps.push_back({Phase::backward, interleaved_microbatch(k, p, v), interleaved_chunk(k, p, v, false)});
      break;
    }
  }
  return steps;
}

PipelinePeer pipeline_source(Phase phase, int stage, int chunk, int p, int v) {
  if (phase == Phase::forward) {
    if (stage > 0) return {stage - 1, chunk};
    if (chunk > 0) return {p - 1, chunk - 1};
    return {};
  }
  // Backward: the gradient comes from the stage that consumed our forward output.
  if (stage < p - 1) return {stage + 1, chunk};
  if (chunk < v - 1) return {0, chunk + 1};
  return {};
}

PipelinePeer pipeline_destination(Phase phase, int stage, int chunk, int p, int v) {
  if (phase == Phase::forward) {
    if (stage < p - 1) return {stage + 1, chunk};
    if (chunk < v - 1) return {0, chunk + 1};
    return {};
  }
  if (stage > 0) return {stage - 1, chunk};
  if (chunk > 0) return {p - 1, chunk - 1};
  return {};
}

}  // namespace ptsim::sim
