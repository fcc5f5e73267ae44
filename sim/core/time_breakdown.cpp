#include "sim/core/time_breakdown.h"

#include <algorithm>

namespace ptsim::sim {
namespace {

// Seconds of recompute kernels one rank of `st` runs over its schedule.
double stage_recompute_s(const StageProgram& st, models::Schedule kind, int num_microbatches, int deferred) {
  double total = 0;
  for (const auto& step : st.steps) {
    const auto& instrs = st.chunks[static_cast<std::size_t>(step.chunk)].of(step.phase);
    for (const auto& in : instrs) {
      if (in.kind != InstrKind::compute || !(in.flags & kRecompute)) continue;
      if (runs_on_microbatch(in.flags, kind, step.chunk, step.microbatch, num_microbatches, deferred))
        total += to_seconds(in.duration);
    }
  }
  return total;
}

}  // namespace

TimeBreakdown time_breakdown(const Simulation& sim) {
  const Result& r = sim.result;
  TimeBreakdown b;
  const auto& stages = r.stage_timing;
  if (stages.empty()) return b;
  double busy = 0, recompute = 0;
  for (const auto& t : stages) busy += t.busy_s;
  for (const auto& st : sim.program.stages)
    recompute +=
        stage_recompute_s(st, sim.program.schedule, r.plan.par.num_microbatches, sim.program.deferred_microbatches);
  const double p = static_cast<double>(stages.size());
  b.recompute_s = std::min(recompute, busy) / p;
  b.compute_s = busy / p - b.recompute_s;
  b.exposed_s = r.exposed_comm_s;
  b.bubble_s = r.bubble_time_s;
  double used = b.compute_s + b.recompute_s + b.bubble_s;
  for (double e : b.exposed_s) used += e;
  b.other_s = std::max(0.0, r.iteration_time_s - used);
  return b;
}

}  // namespace ptsim::sim
