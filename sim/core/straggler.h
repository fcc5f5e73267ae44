// Stragglers (cluster.slow): a compute slowdown factor per GPU. Factors are given
// per rank or node, or drawn from a seeded distribution; the replay stretches every
// compute op of a rank by its factor (sim/core/replay.h ReplayOptions::compute_scale)
// and simulate() reports the critical (slowest) rank and what the slowdown costs
// against the same plan without it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ptsim::sim {

enum class SlowDistribution { lognormal, uniform };

// Deterministic draws of per-GPU slowdown factors, identical on every platform
// (std::mt19937_64 is specified bit-exactly; the normal variate is our own
// Box-Muller, not std::normal_distribution, whose algorithm differs between
// standard libraries):
//   lognormal: exp(sigma·|z|), z standard normal — the log-slowdown is half-normal,
//              so every GPU runs at its datasheet speed or slower, the median
//              slowdown is exp(0.674·sigma);
//   uniform:   1 + (max_factor − 1)·u, u uniform in [0, 1).
// `param` is sigma (lognormal) or max_factor (uniform); one draw per rank in order.
std::vector<double> draw_slowdowns(SlowDistribution d, double param, std::uint64_t seed, int count);

// Ranks listed by "0-7", "0-7,12,16-19" (inclusive ranges): the indices, in order
// given; throws std::invalid_argument naming what is wrong (bad token, reversed
// range, index >= limit).
std::vector<int> parse_index_list(const std::string& text, int limit);

// The summary of a run with slow GPUs.
struct StragglerReport {
  int slow_ranks = 0;            // GPUs with a factor > 1
  int critical_rank = 0;         // the slowest GPU (lowest rank among equals)
  double critical_factor = 1.0;  // its factor
  double baseline_iteration_s = 0;  // the same plan with no slowdown
  double cost_s = 0;                // iteration_time_s − baseline_iteration_s
  double cost_fraction = 0;         // cost_s / baseline_iteration_s
};

// The summary of a run on a mixed-GPU cluster (cluster.gpus, sim/core/mixed_cluster.h):
// the critical stage (the most compute per iteration) and what the slower GPU types
// cost against the same plan (same layer split) with every GPU of the fastest type,
// from a second replay as for stragglers.
struct MixedReport {
  std::vector<std::string> stage_gpus;  // each pipeline stage's GPU type
  int critical_stage = 0;               // the stage with the most compute time (lowest among equals)
  int critical_rank = 0;                // its first global rank
  std::string critical_gpu;             // its GPU type
  double critical_busy_s = 0;           // its compute time per iteration
  std::string fastest_gpu;              // the type of the baseline (the least time per layer)
  double baseline_iteration_s = 0;      // the same plan with every GPU of the fastest type
  double cost_s = 0;                    // iteration_time_s − baseline_iteration_s
  double cost_fraction = 0;             // cost_s / baseline_iteration_s
};

}  // namespace ptsim::sim
