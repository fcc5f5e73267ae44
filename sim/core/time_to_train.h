// Time to train, GPU-hours, cost and energy of a simulated iteration scaled to the
// scenario's training goal (training.total_tokens or training.train_iters), for the run
// summary, the JSON result, `ptsim compare` and the plan search.
#pragma once
#include <optional>

#include "sim/core/result.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// nullopt when the scenario gives no training goal. Iterations are whole: a token goal
// rounds up to the next full global batch (as Megatron-LM's train_samples does).
// Energy counts the GPUs' power only (cluster.gpu_power, default the catalog's TDP),
// not hosts, network or cooling.
std::optional<TimeToTrain> time_to_train(const Scenario& s, const Result& r);
// The same from an iteration time alone (on s.plan.world_size() GPUs), e.g. for a
// search candidate that kept only its metrics.
std::optional<TimeToTrain> time_to_train(const Scenario& s, Seconds iteration_time_s);

}  // namespace ptsim::sim
