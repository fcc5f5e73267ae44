// Activation memory along a pipeline schedule's steps, for the schedules whose
// order decides it (zero-bubble ZB-H1/H2/V and DualPipe, where a W frees what
// its forward allocated): the analytical counterpart of what the replay
// allocates and frees (program_builder.cpp), used by `ptsim memory` and the
// search's memory check.
#pragma once
#include <vector>

#include "models/memory.h"

namespace ptsim::sim {

// Per stage, the most activation bytes held at once: each forward allocates its
// chunk's activations (+ embedding / head where the chunk holds them), its B
// frees the head's after the recompute working set of its layers, its W (or the
// whole backward) frees the rest. ZB-V's order is the one placed for equal pass
// times (the replay places it for the simulated ones: the same cap of 2p chunk
// activations bounds both).
std::vector<double> schedule_activation_peaks(const models::ModelSpec& m, const models::Parallelism& p);

// models::analytical_memory with those peaks where the schedule splits the
// backward; models::analytical_memory itself otherwise.
std::vector<models::StageMemory> schedule_memory(const models::ModelSpec& m, const models::Parallelism& p);

}  // namespace ptsim::sim
