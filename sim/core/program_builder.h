// Builds the per-stage instruction templates of a scenario: the model's op list
// (models/) timed by the cost model (hw/), with Megatron-LM's communication
// placed where Megatron issues it:
//   TP (Shoeybi et al. 2019, Fig. 3): per layer, an all-reduce after the attention
//     projection and after the MLP down-projection in forward, and at the inputs of
//     QKV and MLP-up in backward; with sequence parallelism (Korthikanti et al.
//     2022 §4.2.2) each becomes an all-gather entering / reduce-scatter leaving the
//     tensor-parallel region (and the mirror image in backward).
//   PP: activations sent to the next stage after each forward chunk, gradients to
//     the previous one after each backward chunk.
//   DP: gradient buckets reduced on the async stream as the last micro-batch's
//     backward produces them (overlap_grad_reduce), or all at the end.
//   Optimizer: gradient-norm all-reduce over the model-parallel group, then the
//     Adam step (memory-bound), on the GPU or on the host when offloaded.
#pragma once
#include <vector>

#include "hw/compute_cost.h"
#include "sim/core/program.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

struct BuildOptions {
  // Merge consecutive compute ops into one instruction (faster replay); the trace
  // then shows fused blocks instead of kernels.
  bool fuse_compute = true;
  // A mixed-GPU cluster (sim/core/mixed_cluster.h): stage i's compute costs from
  // stage_compute[i] when it is given and not null, from `compute` otherwise.
  std::vector<const hw::ComputeCostModel*> stage_compute;
  // false: leave every StageProgram::steps empty, for a caller that reads only the
  // instruction lists (the plan search's bound, which counts steps from cached_schedules).
  bool schedule_steps = true;
  // false: every instruction's label is 0 and Program::labels stays empty, for a caller that
  // reads no names (the plan search's bound: looking each name up was ~8 % of the search).
  bool labels = true;
};

Program build_program(const Scenario& s, const hw::ComputeCostModel& compute, BuildOptions opt = {});

// Compute seconds of one pass (forward, the recompute the plan asks for, backward) of a
// dense transformer layer, a MoE layer, the embedding and the head on `compute`'s GPU: what
// the balanced pipeline split of a mixed cluster weighs the stages by.
struct BlockSeconds {
  double dense_layer = 0, moe_layer = 0, embedding = 0, head = 0;
};
BlockSeconds block_seconds(const Scenario& s, const hw::ComputeCostModel& compute);

}  // namespace ptsim::sim
