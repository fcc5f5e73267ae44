// A unit-free replay of pipeline schedules for tests: every stage runs its steps
// in order, each as soon as its inputs exist (F after the upstream F; B after the
// downstream B, or its own F at the end of the path; W after its own B), with
// fixed pass times and free messages. It reports the makespan, each stage's idle
// time and the most chunk activations a stage holds (a forward adds one, the W
// frees it, or the backward when the schedule does not split it); a step order
// that can never finish (a deadlock) is reported as such.
#pragma once
#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "sim/core/schedule.h"

namespace ptsim::sim::timing {


struct ScheduleTiming {
  bool deadlock = false;
  double makespan = 0;
  std::vector<double> busy, idle;  // per stage
  // The most a stage idles between its own first and last pass: the bubble when
  // each stage starts its next iteration as soon as it is done (ZB-H2's
  // parallelogram, the optimizer step's synchronisation bypassed, Qi et al. §4).
  double span_bubble = 0;
  std::vector<int> peak_held;      // chunk activations, per stage
};

// `t`: per chunk; backward is the input-gradient half when the schedule splits it.
inline ScheduleTiming time_schedule(models::Schedule kind, int p, int m, int v, PassTimes t) {
  const auto steps = build_schedules(kind, p, m, v, t);
  const bool split = models::splits_backward(kind);
  ScheduleTiming out;
  out.busy.assign(p, 0);
  out.idle.assign(p, 0);
  out.peak_held.assign(p, 0);
  // Finish time of (phase, stage, chunk, micro-batch).
  // done: when the output reaches the other stages; local: when the pass ended.
  std::map<std::tuple<int, int, int, int>, double> done, local;
  std::vector<std::size_t> pc(p, 0);
  std::vector<double> clock(p, 0);
  std::vector<int> held(p, 0);
  std::vector<double> first(p, 0);
  auto finished = [&](Phase ph, int s, int c, int mb, double& at, bool own = false) {
    const auto& table = own ? local : done;
    auto it = table.find({static_cast<int>(ph), s, c, mb});
    if (it == table.end()) return false;
    at = std::max(at, it->second);
    return true;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (pc[s] < steps[s].size()) {
        const ScheduleStep& st = steps[s][pc[s]];
        double ready = clock[s];
        bool ok = true;
        if (st.phase == Phase::forward) {
          const PipelinePeer src = pipeline_source(kind, Phase::forward, s, st.chunk, p, v);
          if (src.stage >= 0) ok = finished(Phase::forward, src.stage, src.chunk, st.microbatch, ready);
        } else if (st.phase == Phase::backward) {
          ok = finished(Phase::forward, s, st.chunk, st.microbatch, ready, true);
          const PipelinePeer src = pipeline_source(kind, Phase::backward, s, st.chunk, p, v);
          if (ok && src.stage >= 0) ok = finished(Phase::backward, src.stage, src.chunk, st.microbatch, ready);
        } else {
          ok = finished(Phase::backward, s, st.chunk, st.microbatch, ready, true);
        }
        if (!ok) break;
        const double dur = st.phase == Phase::forward    ? t.forward
                           : st.phase == Phase::backward ? (split ? t.backward : t.backward + t.weight)
                                                         : t.weight;
        if (pc[s] == 0) first[s] = ready;
        out.idle[s] += ready - clock[s];
        clock[s] = ready + dur;
        out.busy[s] += dur;
        // A forward paired with the next step (DualPipe's F&B) hands its output on
        // when the pair ends.
        local[{static_cast<int>(st.phase), s, st.chunk, st.microbatch}] = clock[s];
        if (!st.paired) done[{static_cast<int>(st.phase), s, st.chunk, st.microbatch}] = clock[s];
        if (pc[s] > 0 && steps[s][pc[s] - 1].paired) {
          const ScheduleStep& f = steps[s][pc[s] - 1];
          done[{static_cast<int>(Phase::forward), s, f.chunk, f.microbatch}] = clock[s];
        }
        if (st.phase == Phase::forward) out.peak_held[s] = std::max(out.peak_held[s], ++held[s]);
        if (st.phase == Phase::weight || (st.phase == Phase::backward && !split)) --held[s];
        ++pc[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s) out.deadlock |= pc[s] < steps[s].size();
  out.makespan = *std::max_element(clock.begin(), clock.end());
  for (int s = 0; s < p; ++s) out.span_bubble = std::max(out.span_bubble, clock[s] - first[s] - out.busy[s]);
  return out;
}

}  // namespace ptsim::sim::timing
