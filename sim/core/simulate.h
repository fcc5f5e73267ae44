// Scenario in, Result out: builds the cost models, the per-stage programs and
// the replay, runs one iteration and derives the metrics of CONTRACT §3.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "hw/compute_cost.h"
#include "sim/core/collective_cost.h"
#include "sim/core/program_builder.h"
#include "sim/core/replay.h"
#include "sim/core/result.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

struct SimulateOptions {
  bool fold = false;   // one representative rank per stage
  bool trace = false;  // keep spans for --trace / --report
  int trace_max_ranks = 16;
  std::uint64_t max_events = kMaxEvents;  // the work bound (replay.h); exceeding it is an input error
  BuildOptions build;
  // Optional overrides (tests inject synthetic cost models); null = from the scenario.
  const hw::ComputeCostModel* compute = nullptr;
  const CollectiveCost* collectives = nullptr;
  // A mixed cluster (cluster.gpus): one model per GPU group, in the groups' order; empty
  // = from the scenario (`compute` does not apply to mixed clusters).
  std::vector<const hw::ComputeCostModel*> group_compute;
  Transport* transport = nullptr;  // e.g. a link-sharing network; null = analytic
  bool lockstep_sessions = true;   // ReplayOptions::lockstep_sessions (off only to test it)
  bool deferred_starts = true;     // ReplayOptions::deferred_starts (off only to test it)
  bool inline_collectives = true;  // ReplayOptions::inline_collectives (off only to test it)
  bool inline_groups = true;       // ReplayOptions::inline_groups (off only to test it)
  // Called every kProgressEvents simulated events with the events so far and the simulated
  // seconds of the iteration (ReplayOptions::progress); empty: never.
  std::function<void(std::uint64_t events, double simulated_s)> progress;
};

struct Simulation {
  Result result;
  Program program;  // kept for the trace writer (labels)
  std::vector<Span> spans;
  std::uint64_t lockstep_sessions = 0;  // Replay::sessions(): how often the replay ran a group as one member
  std::uint64_t skewed_sessions = 0;    // Replay::skewed_sessions(): of them, members' async ends apart
  // How often the link-sharing network found traffic that could have met a collective the
  // replay had run inline (InlineConflict), so the iteration was replayed with less inlining:
  // 1 without the groups' (ReplayOptions::inline_groups), 2 without any; else 0.
  int inline_conflicts = 0;
};

Simulation simulate(const Scenario& s, const SimulateOptions& opt = {});

// Cost models the scenario asks for (a calibration table when cluster.calibration
// names one, else the datasheet roofline).
hw::ComputeCostModel make_compute_cost(const Scenario& s);
std::unique_ptr<CollectiveCost> make_collective_cost(const Scenario& s);

}  // namespace ptsim::sim
