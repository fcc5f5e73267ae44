// Exact parameter counts.
#pragma once
#include <cstdint>
#include "models/model_spec.h"

namespace ptsim::models {

struct ParamCounts {
  std::int64_t total = 0;      // every parameter
  std::int64_t active = 0;     // used per token (MoE: top_k + shared experts)
  std::int64_t embedding = 0;  // word (+ learned position) embeddings
  std::int64_t output = 0;     // untied output projection (0 when tied)
  std::int64_t final_norm = 0;
  std::int64_t dense_layer = 0;       // one non-MoE transformer layer
  std::int64_t moe_layer = 0;         // one MoE layer (all experts); 0 without MoE
  std::int64_t moe_layer_expert = 0;  // one routed expert's MLP in a MoE layer
};

ParamCounts count_params(const ModelSpec& m);

// Parameters of one transformer layer held by ONE GPU after tensor parallelism
// (column/row-parallel weights split by tp; norms, row-parallel biases and the
// router replicated) and expert parallelism (num_experts/ep local experts).
// `expert` are the routed experts' parameters (sharded by ZeRO over the
// expert-data-parallel group), `dense` everything else.
struct LocalParams {
  std::int64_t dense = 0;
  std::int64_t expert = 0;
  std::int64_t total() const { return dense + expert; }
};
// etp: the routed experts' tensor-parallel size (0 = tp; Parallelism::etp).
LocalParams layer_params_per_gpu(const ModelSpec& m, int tp, int ep, bool moe_layer, int etp = 0);

}  // namespace ptsim::models
