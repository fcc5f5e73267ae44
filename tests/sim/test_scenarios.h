// Small scenarios and synthetic cost models shared by the sim tests.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "hw/compute_cost.h"
#include "sim/core/collective_cost.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"

namespace ptsim::sim::testing {

// The model section of the small GPT below: `model:` and its keys, each line ended.
inline std::string tiny_gpt_model_yaml(int layers, int vocab = 8) {
  return fmt::format(R"(model:
  num_layers: {}
  hidden_size: 1024
  num_attention_heads: 16
  ffn_hidden_size: 4096
  vocab_size: {}
  seq_length: 128
)",
                     layers, vocab);
}

// A small GPT: every layer identical; the vocabulary is tiny so the head costs
// nothing under FlopsOnlyCost (below) and all stages are equal.
inline std::string tiny_gpt_yaml(int pp, int dp, int tp, int layers, int gbs, const std::string& extra_parallel = "",
                                 int vocab = 8, const std::string& extra_training = "") {
  return fmt::format(R"(name: tiny
{}cluster:
  gpu: a100-sxm-80gb
  num_gpus: {}
  gpus_per_node: {}
parallel:
  tensor_parallel: {}
  pipeline_parallel: {}
{}
training:
  global_batch_size: {}
  micro_batch_size: 1
{}
)",
                     tiny_gpt_model_yaml(layers, vocab), pp * dp * tp, std::min(8, pp * dp * tp), tp, pp,
                     extra_parallel, gbs, extra_training);
}

// A 4-layer MoE GPT (4 experts, top-2) on pp 2 × dp 2 with ep 2, 8 micro-batches.
inline std::string tiny_moe_yaml(const std::string& schedule) {
  return fmt::format(R"(name: moe
model:
  num_layers: 4
  hidden_size: 1024
  num_attention_heads: 16
  ffn_hidden_size: 4096
  vocab_size: 8
  seq_length: 128
  moe:
    num_experts: 4
    top_k: 2
    ffn_hidden_size: 1024
cluster:
  gpu: h100-sxm
  num_gpus: 4
  gpus_per_node: 4
parallel:
  tensor_parallel: 1
  pipeline_parallel: 2
  expert_parallel: 2
  pipeline_schedule: {}
training:
  global_batch_size: 16
  micro_batch_size: 1
)",
                     schedule);
}

// GEMM and attention at 10 PFLOP/s, everything memory-bound free: tiny ops round
// to zero ticks, so stages differ only in their layers.
class FlopsOnlyCost : public hw::ComputeCostModel {
 public:
  explicit FlopsOnlyCost(const hw::GpuSpec& g) : hw::ComputeCostModel(g) {}
  Seconds seconds(const hw::KernelDesc& k) const override {
    if (k.cls == hw::KernelClass::memory) return 0;
    return k.flops / 1e16;
  }
  std::string source() const override { return "synthetic"; }
};

class FreeCollectives : public CollectiveCost {
 public:
  Seconds seconds(CollectiveKind, Dim, const GroupShape&, Bytes) const override { return 0; }
};

// One iteration of `s` on the synthetic costs above (FLOPs at peak, free collectives), or
// on `compute` when given (still with free collectives).
inline Result run_synthetic(const Scenario& s, bool fold = false, const hw::ComputeCostModel* compute = nullptr) {
  FlopsOnlyCost flops(s.cluster.gpu);
  FreeCollectives coll;
  SimulateOptions o;
  o.compute = compute ? compute : &flops;
  o.collectives = &coll;
  o.fold = fold;
  return simulate(s, o).result;
}

}  // namespace ptsim::sim::testing
