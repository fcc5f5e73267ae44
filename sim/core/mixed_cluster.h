// Mixed-GPU clusters (cluster.gpus: node ranges of different GPU types, README
// "Mixed-GPU clusters"). Megatron's rank order puts pipeline parallelism outermost
// (hw/net/layout.h: stage s holds global ranks [s·n/pp, (s+1)·n/pp)), so with the
// groups listed in node order each stage lies on one GPU type when the groups hold
// whole stages: a stage's program is then costed on its own GPU (compute constants,
// calibration table, HBM capacity) and folding one rank per stage stays exact.
// Without parallel.pipeline_layers the layers are split so that the stages of the
// faster GPUs hold more of them (balanced_layers).
#pragma once
#include <string>
#include <vector>

#include "hw/compute_cost.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// The index in c.gpu_groups of each of the pp stages. Throws std::invalid_argument naming
// the stage, its nodes and the two GPU types when a stage's ranks span two groups.
std::vector<int> stage_groups(const ClusterConfig& c, int pp);

// The GPU of `stage`: its group's on a mixed cluster, else c.gpu.
const hw::GpuSpec& stage_gpu(const ClusterConfig& c, int pp, int stage);

// The mean dense peak over the cluster's GPUs for a precision name (MFU's denominator).
double mean_peak(const ClusterConfig& c, const std::string& precision);

// The cluster's GPUs for outputs: the GPU's name, or "a100-sxm-80gb × 16 + h100-sxm × 16".
std::string gpu_summary(const ClusterConfig& c);

// The mean TDP over the cluster's GPUs (the energy figure's default power).
double mean_tdp(const ClusterConfig& c);

// The compute cost model of one GPU group: its calibration table when it names one, the
// datasheet roofline otherwise, with the scenario's attention kernel. Throws ScenarioError
// naming cluster.gpus[i].calibration or training.attention.
hw::ComputeCostModel group_compute(const Scenario& s, int group);

// Layer counts per stage balancing stages of unequal speed: `unit` layers at a time (the
// layers of a stage must divide over its model chunks), every stage at least one unit,
// the units handed out one by one to the stage whose time fixed_s + n_s·layer_s would
// then be the smallest (the lowest stage among equals). Handing each unit to the stage
// that finishes it soonest minimises the slowest stage's time. Throws
// std::invalid_argument when num_layers is not a multiple of unit or too small.
std::vector<int> balanced_layers(int num_layers, int unit, const std::vector<double>& layer_s,
                                 const std::vector<double>& fixed_s);

// On a mixed cluster with pipeline_parallel > 1 and no parallel.pipeline_layers: sets
// s.plan.par.pipeline_layers to the balanced split for the stages' GPUs (s.pipeline_balanced
// = true). ZB-V and DualPipe place two chunks of different depths on every stage: they keep
// the even split (a warning says so). Throws ScenarioError naming cluster.gpus when a stage
// spans two GPU types.
void balance_mixed_pipeline(Scenario& s);

}  // namespace ptsim::sim
