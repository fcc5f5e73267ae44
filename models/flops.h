// Model and hardware FLOPs per iteration (CONTRACT §3).
#pragma once
#include "models/model_spec.h"
#include "models/finetune.h"
#include "models/parallelism.h"

namespace ptsim::models {

// Forward + backward FLOPs of the whole model for `global_batch` sequences, no
// recomputation, causal attention counted in full (Megatron SC'21 convention
// 72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h)) for a GPT; generalised to GQA, SwiGLU, MoE).
double model_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch);
// The same plus the FLOPs that recomputation re-runs (selective: attention core;
// full: the whole layer forward).
double hardware_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch, Recompute r);

// The same for LoRA / QLoRA fine-tuning (`ft` active; otherwise as above): the
// frozen GEMMs' backward is the input gradient only (1× forward, no weight
// gradient), attention's backward is unchanged (2× forward), and the adapters'
// GEMMs (2·r·(d_in + d_out) per token and adapted matrix forward) count 3×.
double model_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch, const FinetuneSpec& ft);
double hardware_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch, Recompute r,
                                    const FinetuneSpec& ft);

}  // namespace ptsim::models
