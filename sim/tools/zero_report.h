// ZeRO communication-volume and memory report (CONTRACT §4).
//
// Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
// Models", SC'20. Per GPU and per iteration, with Ψ = parameters × bytes per element
// and N data-parallel GPUs (ring collectives, nccl-tests conventions: a GPU sends
// (N−1)/N of the buffer in a reduce-scatter or an all-gather, twice that in an
// all-reduce):
//   stage 0 (plain DP)    all-reduce(grads Ψ)                           2Ψ·(N−1)/N  (§7.1)
//   stage 1 (P_os)        reduce-scatter(grads Ψ) + all-gather(params Ψ) 2Ψ·(N−1)/N  (§7.2.1)
//   stage 2 (P_os+g)      reduce-scatter(grads Ψ) + all-gather(params Ψ) 2Ψ·(N−1)/N  (§7.2.1)
//   stage 3 (P_os+g+p)    all-gather(params Ψ) forward + again backward
//                         + reduce-scatter(grads Ψ)                      3Ψ·(N−1)/N  (§7.2.2)
// Model-state memory (§3.1, §5, Fig. 1; K = 12 for mixed-precision Adam), in
// parameters × bytes: (2+2+K)Ψ, 2Ψ+2Ψ+KΨ/N, 2Ψ+(2+K)Ψ/N, (2+2+K)Ψ/N — from
// models::zero_model_state_bytes.
// Time: each collective on the chosen cluster through the network model
// (sim/core/network_cost.h), every DP group of the stage running it at once.
#pragma once

#include <string>
#include <vector>

#include "models/memory.h"
#include "models/model_spec.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

struct ZeroCollective {
  std::string kind;      // "all-reduce", "reduce-scatter", "all-gather"
  int count = 0;         // per iteration
  Bytes bytes_each = 0;  // buffer size S (nccl-tests convention)
  Seconds time_each = 0;
};

struct ZeroStageReport {
  int stage = 0;
  std::vector<ZeroCollective> collectives;
  Bytes sent_bytes = 0, received_bytes = 0;  // per GPU per iteration
  double volume_psi = 0;                     // sent_bytes / (params × bytes_per_element)
  models::ModelStates memory;                // per GPU, bytes
  Seconds time_s = 0;                        // Σ count × time_each
};

struct ZeroReport {
  std::string model;
  double params = 0;  // Ψ in parameters (per model-parallel rank when taken from a scenario)
  int dp = 1;
  double bytes_per_element = 2;
  std::string precision = "bf16";
  std::string cluster;  // one-line description of the network the times are for
  std::vector<ZeroStageReport> stages;
};

struct ZeroReportInput {
  models::ModelSpec model;
  double params = 0;  // 0: the model's total parameter count
  int dp = 1;
  std::vector<int> stages = {0, 1, 2, 3};
  models::Precision precision = models::Precision::bf16;
  ClusterConfig cluster;  // num_gpus = dp × model-parallel ranks (tp, pp below)
  int tp = 1, pp = 1;     // the DP group's rank stride (from a scenario's plan)
};

// Throws std::invalid_argument for dp < 1, a stage outside 0..3, a repeated stage,
// or a cluster the network model cannot build.
ZeroReport zero_report(const ZeroReportInput& in);

// A DGX-style cluster of `num_gpus` GPUs of `gpu` (min(8, num_gpus) per node when it
// divides, the scenario defaults otherwise: NVLink of the GPU, 8 × 200 Gb/s NICs,
// full-bisection fat tree). Throws std::invalid_argument for an unknown GPU.
ClusterConfig default_cluster(const std::string& gpu, int num_gpus);

std::string zero_report_markdown(const ZeroReport& r);
std::string zero_report_csv(const ZeroReport& r);
std::string zero_report_json(const ZeroReport& r);  // CONTRACT §4 shape

}  // namespace ptsim::sim
