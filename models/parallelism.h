// The parallel plan as the model library sees it: degrees and options that change
// per-GPU FLOPs, bytes and memory. sim/ wraps it into a validated Plan.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "models/finetune.h"

namespace ptsim::models {

enum class Precision { fp32, fp16, bf16, fp8 };
enum class Recompute { none, selective, full };
// zb_h1 / zb_h2 (Qi et al., ICLR 2024 §3) and zb_v (Qi et al. 2024, "Pipeline
// Parallelism with Controllable Memory") split the backward into B (input
// gradient) and W (weight gradient); dualpipe (DeepSeek-V3 report §3.2.1) runs two
// copies of the stages in opposite directions. zb_v and dualpipe hold 2 chunks.
enum class Schedule { gpipe, one_f_one_b, interleaved_1f1b, zb_h1, zb_h2, zb_v, dualpipe };
// Whose mixed-precision model-state layout and buffers the memory model follows
// (models/memory.h state_bytes_per_param, buffer_bytes): Megatron-core's DDP +
// (distributed) optimizer, DeepSpeed ZeRO, PyTorch FSDP. A training-framework
// profile selects it; megatron is the default.
enum class StateLayout { megatron, deepspeed, fsdp };
// flash: the GPU's default flash kernel (hw/gpus.yaml attention_kernel); fa1 / fa2 / fa3 /
// cudnn name one (FlashAttention-1, as flash-attn 1.x and MPT's Triton kernel run it;
// FlashAttention-2, FlashAttention-3, cuDNN fused attention); naive materialises the
// scores. All flash kinds do the same FLOPs and HBM traffic; their rates differ.
enum class AttentionImpl { flash, naive, fa1, fa2, fa3, cudnn };
// The loss kernels over a GPU's T × V/tp logits (models/ops.cpp head_ops): one fused pass
// (flash-attn's cross entropy), Megatron's vocab_parallel_cross_entropy as PyTorch ops, or
// that code under torch.compile (Megatron-core's --cross-entropy-loss-fusion).
enum class LossKernel { fused, megatron, megatron_compiled };

struct Parallelism {
  int expert_tp() const { return etp > 0 ? etp : tp; }
  int expert_dp() const { return tp * cp * dp / (expert_tp() * ep); }
  int tp = 1;   // tensor parallel
  int pp = 1;   // pipeline parallel
  int dp = 1;   // data parallel
  int cp = 1;   // context parallel
  int ep = 1;   // expert parallel (carved out of dp for the experts, as Megatron does)
  // The routed experts' own tensor-parallel size, 1 or tp (0 = tp): Megatron-core's MoE
  // parallel folding (--expert-tensor-parallel-size; Liu et al., "MoE Parallel Folding",
  // arXiv 2504.14960). At 1 every expert is whole on its GPU and the expert-parallel group
  // spans the tensor-parallel ranks: the experts lay etp × ep × edp over a stage's tp·cp·dp
  // ranks (hw/net/layout.h), edp = tp·cp·dp / (etp·ep) holding the same experts.
  int etp = 0;
  // Megatron-core's MoEAllGatherTokenDispatcher (--moe-token-dispatcher-type allgather,
  // training.megatron.moe_token_dispatcher_type): every rank all-gathers the tokens of its
  // tensor-and-expert-parallel group and reduce-scatters the combined output, in place of the
  // all-to-all of the routed copies. Its gathered input lives in the GlobalMemoryBuffer the
  // sequence-parallel gather uses (models/memory.cpp buffer_bytes).
  bool moe_allgather = false;
  // Megatron-core's flex dispatcher on DeepEP (--moe-token-dispatcher-type flex): a token goes
  // once to each EP rank holding one of its experts (DeepEP's dispatch layout,
  // is_token_in_rank), not once per expert (models::moe_copies_per_token).
  bool moe_dedup_per_rank = false;
  // Where the routing weights multiply in (models/memory.cpp activation_bytes_per_layer):
  // Megatron-core weights the experts' activation (true), in a fused weighted-SwiGLU kernel
  // unless moe_fused_weighted_act is false; elsewhere the combine weights the expert output.
  bool moe_probs_in_experts = false;
  bool moe_fused_weighted_act = true;
  // Megatron's --defer-embedding-wgrad-compute with --wgrad-deferral-limit (0 = every
  // micro-batch): the output layer's weight gradient of the step's first micro-batches waits
  // for the pipeline flush, its input and logits gradient held until then
  // (models/memory.h deferred_head_wgrad_bytes).
  bool defer_head_wgrad = false;
  int wgrad_deferral_limit = 0;
  int vpp = 1;  // virtual pipeline stages (model chunks per rank)
  // Interleaved 1F1B: the micro-batches each model chunk runs back to back before the next
  // chunk's (Megatron-core's microbatch_group_size_per_vp_stage); 0 = pp, its default.
  int microbatch_group = 0;
  bool sequence_parallel = false;
  // Context parallelism by all-to-all over heads (DeepSpeed Ulysses, Megatron's --cp-comm-type
  // a2a; sim/core/framework_profile.h CpComm): attention sees the whole sequence for
  // heads / cp heads instead of s / cp queries against s keys.
  bool cp_heads = false;
  int zero_stage = 0;  // 0..3
  Recompute recompute = Recompute::none;
  Schedule schedule = Schedule::one_f_one_b;
  bool offload_optimizer = false;
  bool offload_params = false;
  // Layers per pipeline stage, first to last; or, under interleaved-1f1b, per virtual
  // stage (pp × vpp entries, models/memory.h layers_per_stage); empty = even split.
  std::vector<int> pipeline_layers;
  int micro_batch_size = 1;
  int num_microbatches = 1;  // gradient-accumulation steps per iteration
  Precision precision = Precision::bf16;
  AttentionImpl attention = AttentionImpl::flash;
  // The busiest GPU's experts process mean × min(moe_load_imbalance,
  // moe_capacity_factor) tokens each (tokens beyond capacity are dropped, GShard);
  // moe_capacity_factor <= 0 means dropless (no cap, Megatron-core's default).
  double moe_capacity_factor = 0.0;  // tokens an expert accepts, × the mean (0 = dropless)
  double moe_load_imbalance = 1.0;   // hottest expert's tokens, × the mean
  StateLayout state_layout = StateLayout::megatron;
  // DeepSpeed's BF16_Optimizer (sim/core/framework_profile.h): bf16 gradients plus an
  // unsharded fp32 copy, and the fp32 master weights and Adam state sharded over the
  // data-parallel ranks even at zero_stage 0.
  bool bf16_optimizer = false;
  // PyTorch FSDP's MixedPrecision reduce_dtype in bytes per element (training.fsdp.reduce_dtype;
  // 0 = the parameter dtype): another dtype is a second, cast copy of a unit's gradient.
  double fsdp_reduce_bytes = 0;
  // PyTorch's cuBLAS workspace, bytes per (handle, stream) (training.memory.
  // cublas_workspace_config, default the GPU's, hw/gpus.yaml blas_workspace); 0 = none.
  double blas_workspace = 0.0;
  // Transformer Engine's cuBLAS workspaces, bytes in all (training.megatron.transformer_impl
  // transformer_engine, Megatron's MoE router, moe_grouped_gemm; hw/gpus.yaml te_workspace
  // each; sim/io/scenario_file.cpp counts them); 0 = no Transformer Engine GEMMs.
  double te_workspace = 0.0;
  // Transformer Engine's userbuffers under Megatron's --tp-comm-overlap, bytes in all
  // (sim/io/scenario_file.cpp); 0 = none.
  double te_userbuffers = 0.0;
  // Megatron-core's local DotProductAttention keeps its s × s scores in the
  // GlobalMemoryBuffer (naive attention only; training.megatron.transformer_impl local).
  bool score_buffer = false;
  // Megatron's unfused softmax in fp32 (masked_softmax_fusion off, attention_softmax_in_fp32):
  // naive attention saves its probabilities in fp32, 4 bytes per score.
  bool fp32_softmax_saved = false;
  // How the framework computes the cross-entropy loss (the training framework decides).
  LossKernel loss_kernel = LossKernel::megatron;
  // PyTorch caching-allocator gap: reserved = allocated × (1 + allocator_overhead)
  // at the peak (fragmentation, rounding to blocks). 0 reports max allocated.
  double allocator_overhead = 0.0;
  // training.finetune: LoRA / QLoRA (models/finetune.h); method none = full training.
  FinetuneSpec finetune;
  // ZeRO-3's parameter gathers as the framework issues them (sim/core/framework_profile.h;
  // the scenario fills them from training.framework): DeepSpeed's one per linear submodule of
  // at least persistence_elems parameters, prefetched while fewer than prefetch_elems are in
  // flight, a layer above reuse_elems gathered again for its backward under full recompute;
  // else one per layer, the next one prefetched. Without reshard_after_forward (FSDP's
  // SHARD_GRAD_OP) the forward's gathers stay to the backward, which gathers nothing.
  struct Zero3Gathers {
    bool per_submodule = false;
    double persistence_elems = 0, prefetch_elems = 0, reuse_elems = 0;
    bool reshard_after_forward = true;
    bool prefetch = true, backward_prefetch = true;  // units gathered ahead in forward / backward
  };
  Zero3Gathers zero3;
};

// The interleaved schedule's micro-batch group: `group` when given (> 0), else pp, Megatron-core's
// default (Parallelism::microbatch_group).
inline int microbatch_group_size(int group, int pp) { return group > 0 ? group : pp; }
inline int microbatch_group_size(const Parallelism& p) { return microbatch_group_size(p.microbatch_group, p.pp); }

// The k-th forward of an interleaved stage (k < m·v) as (micro-batch, model chunk), in
// Megatron-core's schedule table (schedules.py get_schedule_table): micro-batches in groups
// of n, each group through chunk 0, then chunk 1, ..., the last group with what is left
// (m − n·⌊(m − 1) / n⌋ micro-batches). The k-th backward is the same micro-batch on chunk
// v − 1 − chunk.
struct InterleavedSlot {
  int microbatch, chunk;
};
inline InterleavedSlot interleaved_slot(int m, int v, int n, int k) {
  const int before_last = (m - 1) / n;  // full groups before the last one
  if (k < before_last * n * v) {
    const int in_group = k % (n * v);
    return {k / (n * v) * n + in_group % n, in_group / n};
  }
  const int first = before_last * n, size = m - first, in_group = k - first * v;
  return {first + in_group % size, in_group / size};
}

// Each enum's spellings, in one place: as the scenario keys write them (CONTRACT §2),
// in enum order. to_string, from_string and every parser of these names read them.
template <class E>
struct Spelling {
  E value;
  std::string_view name;
};
inline constexpr Spelling<Precision> kPrecisionNames[] = {
    {Precision::fp32, "fp32"}, {Precision::fp16, "fp16"}, {Precision::bf16, "bf16"}, {Precision::fp8, "fp8"}};
inline constexpr Spelling<Recompute> kRecomputeNames[] = {
    {Recompute::none, "none"}, {Recompute::selective, "selective"}, {Recompute::full, "full"}};
inline constexpr Spelling<Schedule> kScheduleNames[] = {
    {Schedule::gpipe, "gpipe"},         {Schedule::one_f_one_b, "1f1b"}, {Schedule::interleaved_1f1b, "interleaved-1f1b"},
    {Schedule::zb_h1, "zb-h1"},         {Schedule::zb_h2, "zb-h2"},      {Schedule::zb_v, "zb-v"},
    {Schedule::dualpipe, "dualpipe"}};
// Schedules that run the weight-gradient half of the backward (W) as its own step.
constexpr bool splits_backward(Schedule s) {
  return s == Schedule::zb_h1 || s == Schedule::zb_h2 || s == Schedule::zb_v || s == Schedule::dualpipe;
}
// Schedules with a fixed two-chunk placement (virtual_pipeline_stages is 2).
constexpr bool two_chunk_schedule(Schedule s) { return s == Schedule::zb_v || s == Schedule::dualpipe; }
inline constexpr Spelling<AttentionImpl> kAttentionImplNames[] = {
    {AttentionImpl::flash, "flash"}, {AttentionImpl::naive, "naive"}, {AttentionImpl::fa1, "fa1"},
    {AttentionImpl::fa2, "fa2"},     {AttentionImpl::fa3, "fa3"},     {AttentionImpl::cudnn, "cudnn"}};
inline constexpr Spelling<StateLayout> kStateLayoutNames[] = {
    {StateLayout::megatron, "megatron"}, {StateLayout::deepspeed, "deepspeed"}, {StateLayout::fsdp, "fsdp"}};

std::string_view to_string(Precision p);
std::string_view to_string(Recompute r);
std::string_view to_string(Schedule s);
std::string_view to_string(AttentionImpl a);
std::string_view to_string(StateLayout l);

// The value spelt `name` in `table`; nullopt when no entry is.
template <class E, std::size_t N>
std::optional<E> from_string(const Spelling<E> (&table)[N], std::string_view name) {
  for (const auto& s : table)
    if (s.name == name) return s.value;
  return std::nullopt;
}

// Bytes of one element in the compute (activation / weight) precision: fp32 4,
// fp16/bf16 2, fp8 1 for GEMM inputs (activations saved in bf16 under fp8, as
// Transformer Engine does).
double compute_bytes(Precision p);
// Bytes of one saved activation element: 4 for fp32, 2 otherwise (fp8 training
// keeps activations in bf16 between GEMMs, as Transformer Engine does).
double activation_element_bytes(Precision p);

}  // namespace ptsim::models
