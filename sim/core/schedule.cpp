#include "sim/core/schedule.h"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>

#include <fmt/format.h>

#include "hw/errors.h"

namespace ptsim::sim {

namespace {

std::vector<ScheduleStep> classic_schedule(models::Schedule kind, int stage, int p, int m, int v, int group) {
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
      const int n = models::microbatch_group_size(group, p);
      const int total = m * v;
      // Megatron-core's schedule table (models::interleaved_slot, get_model_chunk_id).
      const auto fwd = [&](int k) {
        const auto s = models::interleaved_slot(m, v, n, k);
        return ScheduleStep{Phase::forward, s.microbatch, s.chunk};
      };
      const auto bwd = [&](int k) {
        const auto s = models::interleaved_slot(m, v, n, k);
        return ScheduleStep{Phase::backward, s.microbatch, v - 1 - s.chunk};
      };
      // Megatron-core schedules.py (get_pp_rank_microbatches): warm-up
      // (p − rank − 1)·2 + (v − 1)·n, all of them only when that reaches m·v (the
      // 2021 Megatron-LM's "m == p: all warm-up" special case is gone).
      const int warmup = std::min(total, (p - stage - 1) * 2 + (v - 1) * n);
      const int steady = total - warmup;
      for (int k = 0; k < warmup; ++k) steps.push_back(fwd(k));
      for (int i = 0; i < steady; ++i) {
        steps.push_back(fwd(warmup + i));
        steps.push_back(bwd(i));
      }
      for (int k = steady; k < total; ++k) steps.push_back(bwd(k));
      break;
    }
    default:
      PTSIM_CHECK(false, "schedule {} is not a classic one", models::to_string(kind));
  }
  return steps;
}

// 1F1B's order of forwards and B passes with `warmup` forwards first, each W
// following the B `defer` B passes after its own (ZB-H1: warm-up p − s − 1, defer
// s; ZB-H2: 2(p − s − 1), 2s; Qi et al. ICLR 2024 §3.1), the W left at the end
// after the last B.
std::vector<ScheduleStep> deferred_w_schedule(int m, int warmup, int defer) {
  std::vector<ScheduleStep> steps;
  steps.reserve(static_cast<std::size_t>(3 * m));  // F, B and W of every micro-batch
  warmup = std::min(warmup, m);
  int next_w = 0;
  auto backward = [&](int i) {
    steps.push_back({Phase::backward, i, 0});
    if (i - defer >= 0) steps.push_back({Phase::weight, next_w++, 0});
  };
  for (int i = 0; i < warmup; ++i) steps.push_back({Phase::forward, i, 0});
  for (int i = 0; i < m - warmup; ++i) {
    steps.push_back({Phase::forward, warmup + i, 0});
    backward(i);
  }
  for (int i = m - warmup; i < m; ++i) backward(i);
  while (next_w < m) steps.push_back({Phase::weight, next_w++, 0});
  return steps;
}

// A micro-batch's path through (stage, chunk) positions 0..length−1 (ZB-V's V,
// DualPipe's two directions; Megatron's chunk·p + stage otherwise).
int path_length(models::Schedule kind, int p, int v) {
  if (kind == models::Schedule::dualpipe) return p;
  if (kind == models::Schedule::zb_v) return 2 * p;
  return p * v;
}
int position(models::Schedule kind, int stage, int chunk, int p) {
  switch (kind) {
    case models::Schedule::zb_v:
      return chunk == 0 ? stage : 2 * p - 1 - stage;
    case models::Schedule::dualpipe:
      return chunk == 0 ? stage : p - 1 - stage;
    default:
      return chunk * p + stage;
  }
}
// The (stage, chunk) at `pos` of the path that `chunk` lies on.
PipelinePeer at_position(models::Schedule kind, int pos, int chunk, int p) {
  switch (kind) {
    case models::Schedule::zb_v:
      return pos < p ? PipelinePeer{pos, 0} : PipelinePeer{2 * p - 1 - pos, 1};
    case models::Schedule::dualpipe:
      return chunk == 0 ? PipelinePeer{pos, 0} : PipelinePeer{p - 1 - pos, 1};
    default:
      return {pos % p, pos / p};
  }
}

// ZB-V: list scheduling of all stages at once for the chunk pass times `t`. At
// each moment a pass ends (from 0 on), every free stage with work left runs the
// first ready of: a B (the oldest micro-batch, the chunk nearer the loss on ties),
// a forward if its activations stay within `cap` chunk activations (the chunk
// nearer the loss first), the oldest pending W; else it waits for the next pass
// to end anywhere. The order each stage ran its passes in is its schedule: it
// respects every dependency by construction.
std::vector<std::vector<ScheduleStep>> greedy_v_schedule(int p, int m, int cap, const std::vector<PassTimes>& times) {
  const auto kind = models::Schedule::zb_v;
  const int length = 2 * p;
  constexpr double kNever = std::numeric_limits<double>::infinity();
  // done_f[pos][mb], done_b[pos][mb]: when the pass finished.
  std::vector<std::vector<double>> done_f(length, std::vector<double>(m, kNever)), done_b = done_f;
  struct StageState {
    int next_f[2] = {0, 0}, next_b[2] = {0, 0};
    std::deque<std::pair<int, int>> pending_w;  // (chunk, micro-batch)
    int held = 0;                                // chunk activations held (F done, W not)
    double free_at = 0;
    std::size_t ran = 0;
  };
  std::vector<StageState> st(static_cast<std::size_t>(p));
  std::vector<std::vector<ScheduleStep>> out(static_cast<std::size_t>(p));
  const std::size_t per_stage = static_cast<std::size_t>(6 * m);
  std::size_t left = per_stage * static_cast<std::size_t>(p);
  for (double now = 0; left > 0;) {
    for (int s = 0; s < p; ++s) {
      auto& ss = st[static_cast<std::size_t>(s)];
      if (ss.free_at > now || ss.ran == per_stage) continue;
      ScheduleStep pick{Phase::forward, -1, -1};
      for (int c : {1, 0}) {
        const int mb = ss.next_b[c], pos = position(kind, s, c, p);
        if (mb >= ss.next_f[c] || done_f[pos][mb] > now) continue;
        if (pos < length - 1 && done_b[pos + 1][mb] > now) continue;
        if (pick.chunk < 0 || mb < pick.microbatch) pick = {Phase::backward, mb, c};
      }
      if (pick.chunk < 0 && ss.held < cap)
        for (int c : {1, 0}) {
          const int mb = ss.next_f[c], pos = position(kind, s, c, p);
          if (mb >= m || (pos > 0 && done_f[pos - 1][mb] > now)) continue;
          // Chunk 0 leaves room for one chunk-1 forward: else a stage could fill
          // its cap with the V's down leg while the up leg waits for it.
          if (c == 0 && ss.next_f[0] - ss.next_f[1] >= cap - 1) continue;
          pick = {Phase::forward, mb, c};
          break;
        }
      if (pick.chunk < 0 && !ss.pending_w.empty())
        pick = {Phase::weight, ss.pending_w.front().second, ss.pending_w.front().first};
      if (pick.chunk < 0) continue;  // waits
      const int pos = position(kind, s, pick.chunk, p);
      const PassTimes& t = times[static_cast<std::size_t>(2 * s + pick.chunk)];
      if (pick.phase == Phase::forward) {
        ss.free_at = now + t.forward;
        done_f[pos][pick.microbatch] = ss.free_at;
        ++ss.next_f[pick.chunk];
        ++ss.held;
      } else if (pick.phase == Phase::backward) {
        ss.free_at = now + t.backward;
        done_b[pos][pick.microbatch] = ss.free_at;
        ++ss.next_b[pick.chunk];
        ss.pending_w.emplace_back(pick.chunk, pick.microbatch);
      } else {
        ss.free_at = now + t.weight;
        ss.pending_w.pop_front();
        --ss.held;
      }
      out[static_cast<std::size_t>(s)].push_back(pick);
      ++ss.ran;
      --left;
    }
    double next = kNever;  // the next moment a pass ends
    for (const auto& ss : st)
      if (ss.free_at > now) next = std::min(next, ss.free_at);
    PTSIM_CHECK(left == 0 || next < kNever, "zb-v schedule: no stage can run after {} (p {}, m {}, cap {})", now, p, m,
                cap);
    now = next;
  }
  return out;
}

// DualPipe (DeepSeek-V3 §3.2.1; deepseek-ai/DualPipe dualpipe.py), rank `rank` of
// p with m micro-batches: "phase 0" is the direction in which this rank is nearer
// the start (chunk 0 on the first half of the ranks, chunk 1 on the second), and
// the steps run in eight parts: F0 warm-up; F0 F1 pairs; B1 W1 F1 (zero bubble);
// the main part of overlapped F0&B1, F1&B0 pairs; B1, F1&B0; B1 B0 (the second
// half of them with W deferred); W B0; the remaining W. An overlapped F&B pair is
// the forward then the (whole, B + W) backward here.
std::vector<ScheduleStep> dualpipe_schedule(int rank, int p, int m) {
  const int half_ranks = p / 2, half_mb = m / 2;
  const int hr = std::min(rank, p - 1 - rank);
  const bool second_half = rank >= half_ranks;
  std::vector<ScheduleStep> steps;
  steps.reserve(static_cast<std::size_t>(3 * m));  // F, B and W of every micro-batch
  int next_f[2] = {0, 0}, next_b[2] = {0, 0};
  std::deque<std::pair<int, int>> pending_w;
  auto chunk_of = [&](int phase) { return second_half ? 1 - phase : phase; };
  auto forward = [&](int phase, bool paired = false) {
    const int c = chunk_of(phase);
    steps.push_back({Phase::forward, c * half_mb + next_f[phase]++, c, paired});
  };
  auto backward = [&](int phase, bool defer_w) {
    const int c = chunk_of(phase), mb = c * half_mb + next_b[phase]++;
    steps.push_back({Phase::backward, mb, c});
    if (defer_w)
      pending_w.emplace_back(c, mb);
    else
      steps.push_back({Phase::weight, mb, c});
  };
  auto weight = [&] {
    PTSIM_CHECK(!pending_w.empty(), "dualpipe: no W pending on rank {}", rank);
    steps.push_back({Phase::weight, pending_w.front().second, pending_w.front().first});
    pending_w.pop_front();
  };
  for (int i = 0; i < (half_ranks - hr - 1) * 2; ++i) forward(0);
  for (int i = 0; i < hr + 1; ++i) forward(0), forward(1);
  for (int i = 0; i < half_ranks - hr - 1; ++i) backward(1, true), weight(), forward(1);
  for (int i = 0; i < half_mb - p + hr + 1; ++i) {
    forward(0, true), backward(1, false);
    forward(1, true), backward(0, false);
  }
  for (int i = 0; i < half_ranks - hr - 1; ++i) backward(1, false), forward(1, true), backward(0, false);
  bool defer = false;
  for (int i = 0; i < hr + 1; ++i) {
    if (i == (hr + 1) / 2 && hr % 2 == 1) defer = true;
    backward(1, defer);
    if (i == (hr + 1) / 2 && hr % 2 == 0) defer = true;
    backward(0, defer);
  }
  for (int i = 0; i < half_ranks - hr - 1; ++i) weight(), backward(0, true);
  for (int i = 0; i < hr + 1; ++i) weight();
  PTSIM_CHECK(pending_w.empty(), "dualpipe: {} W left on rank {}", pending_w.size(), rank);
  return steps;
}

}  // namespace

std::string schedule_requirement(models::Schedule kind, int p, int m, int v, int group) {
  using models::Schedule;
  const bool two = models::two_chunk_schedule(kind);
  if (two && v != 2)
    return fmt::format("{} holds 2 model chunks per stage: parallel.virtual_pipeline_stages must be 2 (or unset), "
                       "got {}",
                       models::to_string(kind), v);
  if (!two && kind != Schedule::interleaved_1f1b && kind != Schedule::gpipe && v != 1)
    return fmt::format("{} runs one model chunk per stage, got virtual_pipeline_stages {}", models::to_string(kind), v);
  if (kind == Schedule::dualpipe) {
    if (p < 2 || p % 2 != 0) return fmt::format("dualpipe needs an even pipeline_parallel >= 2, got {}", p);
    if (m % 2 != 0 || m < 2 * p)
      return fmt::format(
          "dualpipe needs an even number of micro-batches >= 2 × pipeline_parallel = {} (half enter at each end), "
          "got {}",
          2 * p, m);
  }
  if (kind == Schedule::zb_v && p < 2) return "zb-v needs pipeline_parallel >= 2";
  if (kind == Schedule::interleaved_1f1b && v > 1) {
    // Megatron-core forward_backward_pipelining_with_interleaving: the group N in [p, m],
    // and a last group of 0 or at least p micro-batches ("otherwise, it introduces
    // dependency bubbles").
    const int n = models::microbatch_group_size(group, p);
    if (n < p || n > m)
      return fmt::format(
          "interleaved-1f1b takes micro-batches in groups of {} per model chunk, which must lie in "
          "[pipeline_parallel, micro-batches] = [{}, {}]",
          n, p, m);
    if (m % n != 0 && m % n < p)
      return fmt::format(
          "interleaved-1f1b with {} micro-batches in groups of {} leaves a last group of {}, fewer than "
          "pipeline_parallel ({})",
          m, n, m % n, p);
  }
  return {};
}

std::vector<std::vector<ScheduleStep>> build_schedules(models::Schedule kind, int p, int m, int v, PassTimes times,
                                                       const std::vector<PassTimes>& per_chunk, int group) {
  PTSIM_CHECK(p >= 1 && m >= 1 && v >= 1, "schedule: {} stages, {} micro-batches, {} chunks", p, m, v);
  const std::string why = schedule_requirement(kind, p, m, v, group);
  PTSIM_CHECK(why.empty(), "{}", why);
  std::vector<std::vector<ScheduleStep>> out;
  switch (kind) {
    case models::Schedule::zb_v:
    {
      std::vector<PassTimes> t = per_chunk;
      if (t.size() != static_cast<std::size_t>(2 * p)) t.assign(static_cast<std::size_t>(2 * p), times);
      for (const PassTimes& x : t)
        PTSIM_CHECK(x.forward > 0 && x.backward > 0 && x.weight > 0, "zb-v: pass times {} {} {}", x.forward,
                    x.backward, x.weight);
      return greedy_v_schedule(p, m, 2 * p, t);
    }
    case models::Schedule::dualpipe:
      for (int s = 0; s < p; ++s) out.push_back(dualpipe_schedule(s, p, m));
      return out;
    case models::Schedule::zb_h1:
      for (int s = 0; s < p; ++s) out.push_back(deferred_w_schedule(m, p - s - 1, s));
      return out;
    case models::Schedule::zb_h2:
      for (int s = 0; s < p; ++s) out.push_back(deferred_w_schedule(m, 2 * (p - s - 1), 2 * s));
      return out;
    default:
      for (int s = 0; s < p; ++s) out.push_back(classic_schedule(kind, s, p, m, v, group));
      return out;
  }
}

const std::vector<std::vector<ScheduleStep>>& cached_schedules(models::Schedule kind, int p, int m, int v, int group) {
  struct Entry {
    std::array<int, 5> key{-1, 0, 0, 0, 0};
    std::vector<std::vector<ScheduleStep>> steps;
  };
  constexpr std::size_t kEntries = 8;  // a family's schedules (mbs x schedule kinds) in turn
  thread_local std::array<Entry, kEntries> cache;
  thread_local std::size_t next = 0;
  const std::array<int, 5> key{static_cast<int>(kind), p, m, v, group};
  for (const Entry& e : cache)
    if (e.key == key) return e.steps;
  Entry& e = cache[next];
  next = (next + 1) % kEntries;
  e.steps = build_schedules(kind, p, m, v, {}, {}, group);
  e.key = key;
  return e.steps;
}

StepCounts count_steps(const std::vector<ScheduleStep>& steps) {
  StepCounts s;
  for (const auto& step : steps) {
    const auto c = static_cast<std::size_t>(step.chunk);
    if (c >= s.runs.size()) s.runs.resize(c + 1, {0, 0, 0});
    ++s.runs[c][static_cast<int>(step.phase)];
  }
  s.starts_fwd0 = !steps.empty() && steps.front().phase == Phase::forward && steps.front().chunk == 0;
  s.ends_bwd0 = !steps.empty() && steps.back().phase == Phase::backward && steps.back().chunk == 0;
  return s;
}

StepCounts zb_v_counts(int m) {
  StepCounts s;
  s.runs.assign(2, {m, m, m});
  s.starts_fwd0 = true;
  s.ends_bwd0 = false;
  return s;
}

std::vector<ScheduleStep> build_schedule(models::Schedule kind, int stage, int p, int m, int v, int group) {
  PTSIM_CHECK(stage >= 0 && stage < p && m >= 1 && v >= 1, "schedule: stage {} of {}, {} micro-batches, {} chunks",
              stage, p, m, v);
  const std::string why = schedule_requirement(kind, p, m, v, group);  // as build_schedules checks
  PTSIM_CHECK(why.empty(), "{}", why);
  if (kind == models::Schedule::zb_v) return build_schedules(kind, p, m, v)[static_cast<std::size_t>(stage)];
  if (kind == models::Schedule::dualpipe) return dualpipe_schedule(stage, p, m);
  if (kind == models::Schedule::zb_h1) return deferred_w_schedule(m, p - stage - 1, stage);
  if (kind == models::Schedule::zb_h2) return deferred_w_schedule(m, 2 * (p - stage - 1), 2 * stage);
  return classic_schedule(kind, stage, p, m, v, group);
}

PipelinePeer pipeline_source(models::Schedule kind, Phase phase, int stage, int chunk, int p, int v) {
  const int pos = position(kind, stage, chunk, p), length = path_length(kind, p, v);
  if (phase == Phase::forward) return pos > 0 ? at_position(kind, pos - 1, chunk, p) : PipelinePeer{};
  // Backward: the gradient comes from the stage that consumed our forward output.
  if (phase == Phase::backward && pos < length - 1) return at_position(kind, pos + 1, chunk, p);
  return {};
}

PipelinePeer pipeline_destination(models::Schedule kind, Phase phase, int stage, int chunk, int p, int v) {
  const int pos = position(kind, stage, chunk, p), length = path_length(kind, p, v);
  if (phase == Phase::forward) return pos < length - 1 ? at_position(kind, pos + 1, chunk, p) : PipelinePeer{};
  if (phase == Phase::backward && pos > 0) return at_position(kind, pos - 1, chunk, p);
  return {};
}

PipelinePeer pipeline_source(Phase phase, int stage, int chunk, int p, int v) {
  return pipeline_source(models::Schedule::interleaved_1f1b, phase, stage, chunk, p, v);
}
PipelinePeer pipeline_destination(Phase phase, int stage, int chunk, int p, int v) {
  return pipeline_destination(models::Schedule::interleaved_1f1b, phase, stage, chunk, p, v);
}

int first_microbatch(models::Schedule kind, int chunk, int m) {
  return kind == models::Schedule::dualpipe && chunk == 1 ? m / 2 : 0;
}
int last_microbatch(models::Schedule kind, int chunk, int m) {
  return kind == models::Schedule::dualpipe && chunk == 0 ? m / 2 - 1 : m - 1;
}

}  // namespace ptsim::sim
