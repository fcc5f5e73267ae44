// The analytical (closed-form) memory model. The simulator allocates exactly these
// items along the schedule; its peak is cross-checked against `analytical_memory`.
#pragma once
#include <cstdint>
#include <vector>
#include "models/model_spec.h"
#include "models/parallelism.h"
#include "models/params.h"

namespace ptsim::models {

// Model states on one GPU of `stage` (bytes): weights, gradients, optimizer state,
// after TP/PP/EP sharding and the ZeRO stage over dp, in the layout of
// p.state_layout (see state_bytes_per_param).
struct ModelStates {
  double params = 0, grads = 0, optimizer = 0;
  // Allocated by the optimizer step alone and freed by the next step's zero_grad, so not
  // there during forward and backward: Megatron's fp16 fp32 main gradients.
  double step = 0;
  double total() const { return params + grads + optimizer; }
};
ModelStates model_states(const ModelSpec& m, const Parallelism& p, int stage);

// Bytes per parameter of weights, gradients and optimizer state (Adam) as each
// framework allocates them (the sharded part is `optimizer`, plus `grads` from
// ZeRO-2 and `params` from ZeRO-3):
//   megatron (Megatron-core distributed-optimizer guide, bytes-per-parameter
//   table): fp16 2 / 2 / 16 (fp32 main params 4, fp32 main grads 4, m + v 8) =
//   20, "4 + 16/d" distributed, of which the fp32 main grads (`step`) exist only
//   during the optimizer step; bf16 and fp8 2 / 4 (fp32 main-grad buffer) / 12 =
//   18, "6 + 12/d"; fp32 4 / 4 / 8 = 16, "8 + 8/d".
//   deepspeed (ZeRO, Rajbhandari et al. SC'20 §3.1, K = 12): fp16, bf16, fp8
//   2 / 2 / 12; fp32 4 / 4 / 8.
//   fsdp (PyTorch FSDP with MixedPrecision(param_dtype=bf16)): the sharded flat
//   parameter stays fp32 and is the master copy, its gradient is reduced into an
//   fp32 shard: 4 / 4 / 8 for every precision (the bf16 copy is the gathered unit,
//   a buffer).
ModelStates state_bytes_per_param(Precision precision, StateLayout layout);
// ZeRO (Rajbhandari et al. SC'20 §5): model states of `psi` parameters on one of
// `dp` data-parallel GPUs at ZeRO stage 0..3 (0: replicated; 1: optimizer
// sharded; 2: + gradients; 3: + parameters), bytes per parameter of `layout`.
ModelStates zero_model_state_bytes(double psi, int dp, int stage, Precision precision, StateLayout layout);

// Parameters held by one GPU of `stage` after TP/PP/EP (before ZeRO): its layers,
// plus the embedding on stage 0 and final norm + output layer on the last stage
// (a copy of the tied word embedding there when pp > 1, as Megatron-LM does).
LocalParams stage_params(const ModelSpec& m, const Parallelism& p, int stage);
// The parameters of `stage` that train (carry gradients and optimizer state): all of
// stage_params in full training; only the LoRA adapters when p.finetune is active
// (models/finetune.h).
LocalParams trainable_stage_params(const ModelSpec& m, const Parallelism& p, int stage);
// Trainable parameters of one transformer layer on one GPU (its adapters when
// fine-tuning, else the layer).
LocalParams trainable_layer_params(const ModelSpec& m, const Parallelism& p, bool moe_layer);

// Whether chunk `chunk` of `stage` runs the embedding / the head (final norm,
// output layer, loss): stage 0 chunk 0 / the last stage's last chunk; ZB-V puts
// the head on stage 0 (chunk 1); DualPipe's two copies put an embedding and a
// head on each end stage.
bool holds_embedding(const Parallelism& p, int stage, int chunk);
bool holds_head(const Parallelism& p, int stage, int chunk);
// Parameters on one GPU of the embedding block and of the head block on (stage,
// chunk) (a tied word embedding counts once where the stage holds the embedding
// of the same model copy).
std::int64_t embedding_block_params(const ModelSpec& m, const Parallelism& p);
std::int64_t head_block_params(const ModelSpec& m, const Parallelism& p, int stage, int chunk);
// The same blocks as the simulator gathers and updates them (sim/core/program_builder.cpp,
// models/zero3_gathers.h): under the two-chunk schedules the blocks above; otherwise what the
// first / last stage holds beyond its transformer layers, with everything but the layers counted
// with the head on a single stage (its embedding then holds nothing).
double embedding_params_held(const ModelSpec& m, const Parallelism& p);
double head_params_held(const ModelSpec& m, const Parallelism& p, int stage, int chunk);

// Global layer indices [first, first + count) of model chunk `chunk` (0..vpp−1)
// on pipeline stage `stage`. Megatron-LM interleaving: virtual stage
// chunk·pp + stage holds the next layers_per_stage[stage]/vpp layers. ZB-V:
// chunk 0 is virtual stage `stage`, chunk 1 virtual stage 2·pp − 1 − stage.
// DualPipe: chunk 0 holds stage `stage`'s layers, chunk 1 stage pp − 1 − stage's
// (a second copy of the model).
struct LayerRange {
  int first = 0, count = 0;
};
LayerRange chunk_layers(const ModelSpec& m, const Parallelism& p, int stage, int chunk);
// Model chunk that the k-th forward on a stage runs (Megatron-LM
// schedules.py get_model_chunk_id: (k / pp) % vpp; 0 without interleaving).
int forward_chunk(const Parallelism& p, int k);

// Layers held by each pipeline stage (pipeline_layers or an even split). Under
// interleaved-1f1b, pipeline_layers may instead give pp × vpp counts, one per virtual
// stage in Megatron's order (virtual stage chunk·pp + stage), which chunk_layers then
// uses as they are. Only the first and the last entry may be 0 (a chunk that holds
// just the embedding / the head).
std::vector<int> layers_per_stage(const ModelSpec& m, const Parallelism& p);
// Whether p.pipeline_layers gives one count per virtual stage (interleaved-1f1b, vpp > 1,
// pp × vpp entries) rather than one per stage.
bool per_virtual_stage(const Parallelism& p);

// Saved activations of one transformer layer for one micro-batch on one GPU,
// Korthikanti et al. 2022 Table 2 with the flash-attention change (the 5as/h term
// is gone: no s×s scores are stored) and GQA / SwiGLU / MoE generalisations.
double activation_bytes_per_layer(const ModelSpec& m, const Parallelism& p, bool moe_layer);
// Of which the LoRA adapters' own saved tensors (0 without p.finetune).
double lora_activation_bytes(const ModelSpec& m, const Parallelism& p, bool moe_layer);
// Saved activations of the embedding (first stage) and of the head (last stage:
// logits in fp32 for the loss) for one micro-batch.
double embedding_activation_bytes(const ModelSpec& m, const Parallelism& p);
double head_activation_bytes(const ModelSpec& m, const Parallelism& p);
// What the deferred output-layer weight gradients hold on the last stage at its peak
// (p.defer_head_wgrad): per deferred micro-batch the layer's input and its logits gradient,
// for min(limit, m − 1) micro-batches (the peak of the m-th micro-batch's backward comes
// before its own append). 0 when not deferred.
double deferred_head_wgrad_bytes(const ModelSpec& m, const Parallelism& p);
// The recompute pass's working set for one layer's backward: the saved tensors
// that recomputation re-creates and the backward then consumes, i.e. the layer's
// activations without recompute minus those kept under p.recompute (full: the
// whole layer but its input; selective: the attention core's s×s tensors). 0
// without recompute. Allocated before the layer's backward, freed after it.
double recompute_working_set_bytes(const ModelSpec& m, const Parallelism& p, bool moe_layer);
// The largest transient tensor one layer's backward creates and frees (the MLP
// up-projection output gradient, the naive-attention score gradient, FlashAttention-2's
// fp32 dQ accumulator).
double backward_transient_bytes(const ModelSpec& m, const Parallelism& p, bool moe_layer);
// What a layer's backward holds on top of the saved activations: its recompute working set
// and its largest transient. On the last stage the head's backward comes first and frees
// the head's tensors, so there it adds only what exceeds them.
double backward_working_set_bytes(const ModelSpec& m, const Parallelism& p, bool moe_layer);

// Micro-batches whose activations a stage holds at its peak: GPipe m; 1F1B
// min(m, p − stage); interleaved per Megatron (stage 0: (1 + (p−1)/(p·v))·p worth).
// Returned as a count of (micro-batch, model-chunk) pairs held at once.
int in_flight_microbatch_chunks(const Parallelism& p, int stage);

// Megatron-LM's default DDP bucket: max(40,000,000, 1,000,000 · dp) parameters
// (megatron/core/distributed/distributed_data_parallel.py).
double dp_bucket_params(int dp);
// DeepSpeed ZeRO's default reduce_bucket_size, 5e8 elements (DeepSpeed config
// docs, zero_optimization.reduce_bucket_size).
inline constexpr double kDeepSpeedReduceBucket = 5e8;

// Buffers held throughout (bytes): PyTorch's and Transformer Engine's cuBLAS workspaces,
// Megatron-core's local attention score buffer, DP gradient buckets in the layout's own form (DeepSpeed's reduce
// bucket; FSDP's unsharded unit gradient; Megatron reduces in place in its grad buffer), ZeRO-3 gathered layers,
// pipeline send/recv buffers.
double buffer_bytes(const ModelSpec& m, const Parallelism& p, int stage);

// Reserved bytes for `allocated` bytes at the peak: allocated × (1 +
// p.allocator_overhead), the PyTorch caching allocator's fragmentation gap.
double reserved_bytes(const Parallelism& p, double allocated);

struct StageMemory {
  int stage = 0;
  double params = 0, grads = 0, optimizer = 0, activations = 0, buffers = 0;
  double allocator = 0;  // the allocator's reserved-minus-allocated gap
  double peak = 0;       // everything above, allocator gap included
};
// `activations_at_peak` (per stage, bytes, recompute working set included):
// the activation peak of a schedule whose steps decide it (the zero-bubble and
// DualPipe schedules, sim/core/schedule_memory.h); required for those.
std::vector<StageMemory> analytical_memory(const ModelSpec& m, const Parallelism& p,
                                           const std::vector<double>* activations_at_peak = nullptr);

}  // namespace ptsim::models
