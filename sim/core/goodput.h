// Goodput under failures and checkpoints (README "Goodput"): how much of the wall time a
// run pays for turns into training, from the scenario's `reliability:` section and the
// simulated iteration time.
//
// The model is Daly's (J. T. Daly, "A higher order estimate of the optimum checkpoint
// interval for restart dumps", Future Generation Computer Systems 22 (2006) 303–312):
// failures arrive as a Poisson process of rate 1/M (M = the job's MTBF), also during
// checkpoints and restarts; the run is cut into segments of τ compute + δ checkpoint;
// a failure loses the segment's progress and costs a restart R. The expected wall time
// of one segment is
//     E(τ) = M · e^{R/M} · (e^{(τ+δ)/M} − 1)
// (Daly §3, the wall-time model whose derivative gives his optimum). Young's first-order
// interval is √(2δM) (J. W. Young, CACM 17(9), 1974); Daly's higher-order estimate
// √(2δM)·[1 + ⅓·√(δ/2M) + ⅑·(δ/2M)] − δ for δ < 2M, else M; the exact optimum of E(τ)/τ
// solves e^{(τ+δ)/M}·(τ/M − 1) + 1 = 0, i.e. τ = M·(1 + W₀(−e^{−1−δ/M})).
#pragma once
#include <cstdint>
#include <optional>

#include "sim/core/reliability.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// The checkpoint of the plan: weights and optimizer states (not gradients), in the bytes
// per parameter of the plan's state layout, each stage's unique states shared evenly by
// its tp·cp·dp GPUs (fully parallel saving, as Megatron-core's distributed checkpointing
// does). `total` sums the stages; `per_rank` is the largest GPU's share.
struct CheckpointSize {
  Bytes total = 0, per_rank = 0;
};
CheckpointSize checkpoint_size(const Scenario& s);

// Daly's expected wall time of a segment of `work` seconds (compute + checkpoint) with
// restart `restart` and MTBF `mtbf` (all seconds).
double expected_segment_time(double work, double restart, double mtbf);
// Expected time a failed attempt at a segment of `work` seconds ran before the failure:
// E[X | X < work] = M − work / (e^{work/M} − 1), X ~ Exp(M).
double expected_lost_work(double work, double mtbf);
double young_interval(double delta, double mtbf);
double daly_interval(double delta, double mtbf);
double optimal_interval(double delta, double mtbf);  // exact, by bisection on (0, M)

// nullopt when the scenario has no reliability section. `tokens_per_s` is the simulated
// throughput; the figures for the training goal need s.goal.
std::optional<Goodput> goodput(const Scenario& s, Seconds iteration_time_s, double tokens_per_s);

// The goodput at the exact optimal interval, ignoring whole iterations and the training
// goal's last short interval: no interval does better (each interval's wall time is at
// least its work × the optimal ratio), so it bounds goodput() for any iteration time.
// 1 without a reliability section. For the plan search's branch and bound.
double goodput_upper_bound(const Scenario& s);

// Monte Carlo of the same process to the training goal: `trials` independent runs, each
// with its own generator seeded from (seed, trial index), so the result does not depend
// on the order or the number of threads that run them. Needs s.goal and g from goodput().
GoodputTrials goodput_trials(const Scenario& s, Seconds iteration_time_s, const Goodput& g, std::int64_t trials,
                             std::uint64_t seed);
// At most this many simulated segments (trials × segments per run): more is an error.
inline constexpr double kMaxTrialSegments = 2e8;

}  // namespace ptsim::sim
