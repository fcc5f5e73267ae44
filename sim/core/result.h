// The result of one simulated iteration (CONTRACT §3). Its JSON and text forms are
// sim/io/result_json.h.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/plan.h"
#include "sim/core/prediction_band.h"
#include "sim/core/program.h"
#include "sim/core/reliability.h"
#include "sim/core/straggler.h"

namespace ptsim::sim {

struct StageMemoryResult {
  int stage = 0;
  double params = 0, grads = 0, optimizer = 0, activations = 0, buffers = 0, peak = 0;
};

struct StageTiming {
  int stage = 0;
  double busy_s = 0, bubble_s = 0, end_s = 0;
  std::array<double, kNumDims> exposed_s{};
};

// Time to train, GPU-hours, cost and energy for the scenario's training goal
// (sim/core/time_to_train.h computes it from a Result and its Scenario).
struct TimeToTrain {
  double iterations = 0;  // train_iters, or ceil(total_tokens / tokens per iteration)
  double tokens = 0;      // iterations × global batch × sequence length
  double seconds = 0, days = 0;
  double gpu_hours = 0;        // seconds × GPUs / 3600
  std::optional<double> cost;  // gpu_hours × cluster.price_per_gpu_hour, when a price is given
  std::optional<double> price_per_gpu_hour;
  double gpu_power_w = 0;  // cluster.gpu_power, default the catalog's TDP
  double energy_kwh = 0;   // GPU power only: gpu_power × GPUs × seconds
};

// The model the scenario resolved to (README "Inputs you already have"): its name, where
// its figures came from, parameter counts and the sequence length with its origin.
struct ResolvedModel {
  std::string name, source;
  double parameters = 0, active_parameters = 0;
  std::int64_t seq_length = 0;
  std::string seq_length_source;
};

struct Result {
  std::string scenario;
  ResolvedModel model;
  int world_size = 0;
  Plan plan;
  bool feasible = true;
  std::vector<std::string> infeasible_reasons;
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double model_flops_per_iteration = 0;
  double hardware_flops_per_iteration = 0;
  double model_tflops_per_gpu = 0;
  double mfu = 0, hfu = 0;
  double bubble_time_s = 0, bubble_fraction = 0;
  std::array<double, kNumDims> exposed_comm_s{};
  std::array<double, kNumDims> comm_bytes_per_gpu{};
  double capacity_bytes = 0, peak_bytes = 0;
  std::vector<StageMemoryResult> per_stage;
  std::vector<StageTiming> stage_timing;
  std::string framework = "megatron-core";  // training.framework (sim/core/framework_profile.h)
  std::string nccl_version;                 // cluster.nccl_version as given, or the default
  std::string cost_source = "datasheet";
  double sim_wall_time_s = 0;
  std::uint64_t events = 0;
  bool folded = false;
  std::optional<TimeToTrain> time_to_train;  // when the scenario gives a training goal
  std::optional<Goodput> goodput;            // when the scenario has a reliability section
  std::optional<StragglerReport> straggler;   // when cluster.slow slows some GPUs
  // The validation band of the plan's regime (sim/core/prediction_band.h); none when
  // no validated run shares the regime.
  std::optional<PredictionBand> prediction_band;
  std::string regime;
  std::optional<MixedReport> mixed;           // on a cluster mixing GPU types (cluster.gpus)
  std::vector<std::string> warnings;
  std::vector<std::string> notes;  // extra lines for the text summary (e.g. busiest links)
};

}  // namespace ptsim::sim
