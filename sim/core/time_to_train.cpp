#include "sim/core/time_to_train.h"

#include <fmt/format.h>

#include <cmath>

#include "hw/errors.h"
#include "sim/core/mixed_cluster.h"

namespace ptsim::sim {

std::optional<TimeToTrain> time_to_train(const Scenario& s, const Result& r) {
  PTSIM_CHECK(r.world_size == s.plan.world_size(), "result of {} GPUs for a plan of {}", r.world_size,
              s.plan.world_size());
  return time_to_train(s, r.iteration_time_s);
}

std::optional<TimeToTrain> time_to_train(const Scenario& s, Seconds iteration_time_s) {
  if (!s.goal.given()) return std::nullopt;
  const double gpus = static_cast<double>(s.plan.world_size());
  TimeToTrain t;
  const double tokens_per_iteration =
      static_cast<double>(s.plan.global_batch_size) * static_cast<double>(s.model.seq_length);
  t.iterations = s.goal.train_iters > 0 ? static_cast<double>(s.goal.train_iters)
                                        : std::ceil(s.goal.total_tokens / tokens_per_iteration);
  t.tokens = t.iterations * tokens_per_iteration;
  t.seconds = t.iterations * iteration_time_s;
  t.days = t.seconds / 86400.0;
  t.gpu_hours = t.seconds * gpus / 3600.0;
  t.price_per_gpu_hour = s.cluster.price_per_gpu_hour;
  if (t.price_per_gpu_hour) t.cost = t.gpu_hours * *t.price_per_gpu_hour;
  t.gpu_power_w = s.cluster.gpu_power > 0 ? s.cluster.gpu_power : mean_tdp(s.cluster);
  t.energy_kwh = t.gpu_power_w * gpus * t.seconds / 3.6e6;  // J -> kWh
  return t;
}

}  // namespace ptsim::sim
