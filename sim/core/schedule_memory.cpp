#include "sim/core/schedule_memory.h"

#include <algorithm>

#include "sim/core/schedule.h"

namespace ptsim::sim {

std::vector<double> schedule_activation_peaks(const models::ModelSpec& m, const models::Parallelism& p) {
  const auto& steps = cached_schedules(p.schedule, p.pp, p.num_microbatches, p.vpp, p.microbatch_group);
  const bool split = models::splits_backward(p.schedule);
  const double emb = models::embedding_activation_bytes(m, p), head = models::head_activation_bytes(m, p);
  std::vector<double> peaks;
  for (int stage = 0; stage < p.pp; ++stage) {
    std::vector<double> bytes(static_cast<std::size_t>(p.vpp)), heads(bytes.size()), working(bytes.size());
    for (int c = 0; c < p.vpp; ++c) {
      const auto r = models::chunk_layers(m, p, stage, c);
      for (int l = r.first; l < r.first + r.count; ++l) {
        bytes[c] += models::activation_bytes_per_layer(m, p, m.is_moe_layer(l));
        working[c] = std::max(working[c], models::backward_working_set_bytes(m, p, m.is_moe_layer(l)));
      }
      if (models::holds_embedding(p, stage, c)) bytes[c] += emb;
      if (models::holds_head(p, stage, c)) heads[c] = head;
      bytes[c] += heads[c];
    }
    double now = 0, peak = 0;
    for (const ScheduleStep& s : steps[static_cast<std::size_t>(stage)]) {
      const auto c = static_cast<std::size_t>(s.chunk);
      if (s.phase == Phase::forward) {
        now += bytes[c];
        peak = std::max(peak, now);
      } else if (s.phase == Phase::backward) {
        // The head's backward runs first and frees its tensors; each layer's
        // backward then re-creates its recompute working set beside its transient.
        peak = std::max(peak, now - heads[c] + working[c]);
        now -= split ? heads[c] : bytes[c];
      } else {
        now -= bytes[c] - heads[c];
      }
    }
    peaks.push_back(peak);
  }
  return peaks;
}

std::vector<models::StageMemory> schedule_memory(const models::ModelSpec& m, const models::Parallelism& p) {
  // The in-flight count alone fixes the peak when the first forwards are the ones in flight
  // at it; with interleaved micro-batch groups other than pp, the chunks in flight (the last
  // stage's head among them) change in the steady state: the steps tell.
  if (!models::splits_backward(p.schedule) && p.microbatch_group == 0) return models::analytical_memory(m, p);
  const std::vector<double> peaks = schedule_activation_peaks(m, p);
  return models::analytical_memory(m, p, &peaks);
}

}  // namespace ptsim::sim
