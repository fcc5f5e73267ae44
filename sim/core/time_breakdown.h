// Where an iteration's time goes, as a mean over the pipeline stages (the way the
// result's bubble and exposed communication are averaged): compute, recompute,
// exposed communication per dimension, bubble, and what is left. Drawn as the stacked
// time bar of `ptsim compare --report`.
#pragma once
#include <array>

#include "sim/core/simulate.h"

namespace ptsim::sim {

struct TimeBreakdown {
  double compute_s = 0;                      // compute stream busy with compute kernels, recompute excluded
  double recompute_s = 0;                    // recomputed forward work (parallel.recompute)
  std::array<double, kNumDims> exposed_s{};  // compute stream waiting on each dimension
  double bubble_s = 0;                       // waiting on pipeline dependencies
  double other_s = 0;                        // the iteration minus the above (a stage done before the last one), >= 0
};

// From the simulation's stage timing and its programs (the recompute kernels of each
// stage's schedule, with the replay's first/last micro-batch rules).
TimeBreakdown time_breakdown(const Simulation& sim);

}  // namespace ptsim::sim
