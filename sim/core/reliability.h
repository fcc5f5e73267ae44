// Failures, checkpoints and restarts of a training run (scenario section `reliability:`,
// README "Goodput"), and the goodput figures sim/core/goodput.h derives from them.
// Plain data, so that scenario.h and result.h can hold it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "hw/units.h"

namespace ptsim::sim {

// Llama 3 (Dubey et al. 2024, "The Llama 3 Herd of Models", §3.3.4 and Table 5): 419
// unexpected interruptions in 54 days of pre-training on 16,384 H100 GPUs (2,048 nodes
// of 8), 58.7 % of them GPU issues (faulty GPU, HBM3, SRAM, GPU system processor, SDC,
// thermal), the other 41.3 % host, network, software and maintenance. Per GPU-hour:
//   0.587 × 419 / (16,384 GPUs × 54 d × 24 h) = 245.95 / 21,233,664 = 1.1583e-5 (MTBF 86,333 h)
// per node-hour (everything that is not a GPU):
//   0.413 × 419 / (2,048 nodes × 1,296 h) = 173.05 / 2,654,208 = 6.5197e-5 (MTBF 15,338 h)
// Check: 16,384 × 1.1583e-5 + 2,048 × 6.5197e-5 = 0.32330 per hour = one per 3.093 h =
// 1,296 h / 419.
inline constexpr double kLlama3Interruptions = 419, kLlama3Days = 54, kLlama3Gpus = 16384, kLlama3GpusPerNode = 8;
inline constexpr double kLlama3GpuShare = 0.587;
inline constexpr double kDefaultGpuFailuresPerHour =
    kLlama3GpuShare * kLlama3Interruptions / (kLlama3Gpus * kLlama3Days * 24);
inline constexpr double kDefaultNodeFailuresPerHour =
    (1 - kLlama3GpuShare) * kLlama3Interruptions / (kLlama3Gpus / kLlama3GpusPerNode * kLlama3Days * 24);
// Llama 3 §3.3.1 (storage): Tectonic "supports a sustainable throughput of 2 TB/s"
// (peak 7 TB/s): the default aggregate checkpoint write and read bandwidth.
inline constexpr BytesPerSecond kDefaultAggregateStorageBandwidth = 2e12;
// Job relaunch (scheduling, process start, NCCL initialisation) when the scenario does not
// give reliability.relaunch_time: an assumption of this model, not a published figure
// (the summary says so); set it for your cluster.
inline constexpr Seconds kDefaultRelaunchTime = 600;

enum class CheckpointMode { sync, async };

struct ReliabilityConfig {
  double gpu_failures_per_hour = kDefaultGpuFailuresPerHour;    // per GPU
  double node_failures_per_hour = kDefaultNodeFailuresPerHour;  // per node (host, NICs, switch port)
  bool rates_default = true;                                    // neither rate given
  std::optional<Bytes> checkpoint_size;                         // total; absent: from the model states
  // Storage bandwidth; 0 = no per-node limit. Aggregate defaults: Tectonic's 2 TB/s.
  BytesPerSecond aggregate_write = kDefaultAggregateStorageBandwidth;
  BytesPerSecond aggregate_read = kDefaultAggregateStorageBandwidth;
  BytesPerSecond node_write = 0, node_read = 0;
  CheckpointMode mode = CheckpointMode::sync;
  BytesPerSecond snapshot_bandwidth = 0;  // async device→host copy per GPU; 0 = the GPU's PCIe
  Seconds relaunch_time = kDefaultRelaunchTime;
  bool relaunch_default = true;
  Seconds warmup_time = 0;  // slower first iterations after a restart (compilation, caches)
  // checkpoint_interval: optimal (both 0), a time, or whole iterations.
  Seconds interval_time = 0;
  std::int64_t interval_iterations = 0;
};

// The Monte Carlo distribution of the wall time to the training goal (ptsim run --trials).
struct GoodputTrials {
  std::int64_t trials = 0;
  std::uint64_t seed = 0;
  double mean_s = 0, stddev_s = 0, p10_s = 0, p50_s = 0, p90_s = 0;
  double mean_failures = 0;
};

struct Goodput {
  // Inputs as derived for this plan.
  double job_failures_per_hour = 0;  // GPUs × per-GPU rate + nodes × per-node rate
  Seconds mtbf_s = 0;                // 1 / the job's rate
  Bytes checkpoint_bytes = 0;        // every rank's share together (unique model states)
  Bytes checkpoint_bytes_per_rank = 0;  // the largest share one GPU writes
  bool checkpoint_size_given = false;
  Seconds checkpoint_write_s = 0;  // persisting one checkpoint to storage
  Seconds checkpoint_cost_s = 0;   // what blocks training: the write (sync) or the snapshot (async)
  Seconds checkpoint_load_s = 0;   // reading it back on restart
  Seconds restart_s = 0;           // relaunch + load + warm-up (+ async: the unfinished write)
  std::string mode;                // sync | async
  bool relaunch_default = true;
  bool rates_default = true;
  // The interval: compute time between checkpoints, in whole iterations.
  std::string interval_source;  // optimal | time | iterations
  std::int64_t interval_iterations = 0;
  Seconds interval_s = 0;
  Seconds young_interval_s = 0;    // Young 1974: √(2 δ M)
  Seconds daly_interval_s = 0;     // Daly 2006 eq. 37, higher-order estimate
  Seconds optimal_interval_s = 0;  // exact minimum of the expected wall time (continuous)
  // Outcomes.
  double goodput = 0;              // useful training time / expected wall time
  Seconds lost_work_per_failure_s = 0;  // expected work lost (since the last checkpoint) per failure
  double failures_per_day = 0;
  double tokens_per_s = 0;         // simulated throughput × goodput
  // With a training goal (training.total_tokens or train_iters).
  std::optional<double> failures_per_run;
  std::optional<Seconds> wall_s;  // expected wall time to the goal
  std::optional<double> wall_days, gpu_hours, cost, energy_kwh;
  std::optional<GoodputTrials> trials;
};

}  // namespace ptsim::sim
