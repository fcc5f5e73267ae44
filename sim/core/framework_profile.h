// What a training framework really issues (README "Training frameworks"): the
// number and size of its data-parallel collectives, which of them overlap compute,
// and how its pipeline engine splits layers. A scenario picks one with
// `training.framework` and overrides its fields under the framework's own key names
// (`training.deepspeed`, `training.fsdp`, `training.megatron`; sim/io/scenario_file).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/model_spec.h"
#include "models/parallelism.h"

namespace ptsim::sim {

enum class Framework { megatron_core, megatron_lm, deepspeed, fsdp };
// Megatron-LM in either form (its own layers or Megatron-core's): the same schedules, DDP buffers
// and optimizer.
constexpr bool is_megatron(Framework f) { return f == Framework::megatron_core || f == Framework::megatron_lm; }
inline constexpr models::Spelling<Framework> kFrameworkNames[] = {{Framework::megatron_core, "megatron-core"},
                                                                  {Framework::megatron_lm, "megatron-lm"},
                                                                  {Framework::deepspeed, "deepspeed"},
                                                                  {Framework::fsdp, "fsdp"}};
std::string_view to_string(Framework f);
// Whose model-state layout the memory model follows (models::StateLayout) under this framework.
models::StateLayout state_layout_of(Framework f);

// How ZeRO-3 / FSDP parameters are gathered.
enum class GatherUnit {
  layer,      // one all-gather per block (Megatron-core, FSDP's per-layer wrapping unit)
  submodule,  // one per parameter-holding linear module (DeepSpeed's fetch_sub_module)
};

constexpr std::uint32_t schedule_bit(models::Schedule s) { return 1u << static_cast<int>(s); }

enum class BackwardPrefetch : std::uint8_t { pre, post, none };
inline constexpr models::Spelling<BackwardPrefetch> kBackwardPrefetchNames[] = {
    {BackwardPrefetch::pre, "BACKWARD_PRE"},
    {BackwardPrefetch::post, "BACKWARD_POST"},
    {BackwardPrefetch::none, "none"}};

enum class CpComm : std::uint8_t { p2p, allgather, a2a, rotate_allgather };
// Megatron's --cp-comm-type spellings (rotate_allgather is PyTorch's, training.fsdp.cp_rotate_method).
inline constexpr models::Spelling<CpComm> kCpCommNames[] = {
    {CpComm::p2p, "p2p"}, {CpComm::allgather, "allgather"}, {CpComm::a2a, "a2a"}};

// The optimizer step's implementation (training.fsdp.optimizer_impl; framework_profile.cpp
// cites each): one fused kernel, PyTorch AdamW's multi-tensor (foreach) passes, or Composer's
// DecoupledAdamW, a Python loop of per-parameter ops.
enum class OptimizerImpl : std::uint8_t { fused, foreach, decoupled_adamw };
inline constexpr models::Spelling<OptimizerImpl> kOptimizerImplNames[] = {
    {OptimizerImpl::fused, "fused"},
    {OptimizerImpl::foreach, "foreach"},
    {OptimizerImpl::decoupled_adamw, "decoupled_adamw"}};

struct FrameworkProfile {
  Framework framework = Framework::megatron_core;
  GatherUnit gather_unit = GatherUnit::layer;
  // Gradient-reduction bucket in parameters; nullopt = Megatron-core's
  // max(40M, 1M × dp) (models::dp_bucket_params). FSDP reduces per wrapping unit.
  std::optional<double> grad_bucket_params;
  bool grad_reduce_per_unit = false;  // FSDP: one reduce-scatter per layer's backward
  // DeepSpeed stage3_prefetch_bucket_size: parameter elements fetched ahead of use
  // (submodule gathering). 0 = no prefetch.
  double prefetch_bucket_params = 0;
  // DeepSpeed stage3_param_persistence_threshold: modules with fewer parameters are
  // kept whole on every rank and never gathered.
  double param_persistence_threshold = 0;
  // DeepSpeed stage3_max_reuse_distance: a gathered module is kept only if it is used
  // again within this many parameter elements. Under full recomputation a layer
  // larger than this is gathered for the recomputed forward and again for its
  // backward. 0 = never released between them (Megatron-core, FSDP).
  double max_reuse_distance = 0;
  // ZeRO-1/2 post-step parameter all-gather bucket (DeepSpeed allgather_bucket_size);
  // nullopt = one all-gather per layer (Megatron's distributed optimizer).
  std::optional<double> allgather_bucket_params;
  // FSDP reshard_after_forward: free gathered parameters after forward and gather
  // them again in backward (FULL_SHARD); false keeps them to the backward
  // (SHARD_GRAD_OP) and skips the backward gathers.
  bool reshard_after_forward = true;
  // Parameter all-gathers and gradient reductions of the data-parallel group run on one
  // stream, one after the other in issue order: every framework here issues both over
  // one torch.distributed process group, and PyTorch's ProcessGroupNCCL runs all of a
  // group's collectives on its one internal NCCL stream (framework_profile.cpp cites
  // it). false: on two streams, so a gather never queues behind a reduction (separate
  // process groups for the two, as FSDP2 has since pytorch/pytorch PR #176949, 2026).
  bool dp_one_stream = true;
  // FSDP backward_prefetch: BACKWARD_PRE (default) issues the next unit's
  // all-gather from the current unit's pre-backward hook, BACKWARD_POST from its
  // post-backward hook (torch/distributed/fsdp/_runtime_utils.py: _post_backward_hook
  // calls _post_backward_reshard, which prefetches, before _reduce_grad), none from the
  // next unit's own pre-backward hook. The hooks run on the host, which runs ahead of
  // the GPU; what holds it back is the rate limiter (limit_all_gathers: _unshard waits
  // for the free event of an earlier unit, _free_event_queue keeps two). So under PRE
  // and POST alike the gather reaches the one NCCL stream behind the previous unit's
  // reduce-scatter as the current unit's gradients begin, and overlaps them
  // (ProgramBuilder::plan_fetch); under none it queues behind the current unit's
  // reduce-scatter, which waits for those gradients: nothing overlaps it.
  BackwardPrefetch backward_prefetch = BackwardPrefetch::pre;
  // FSDP MixedPrecision reduce_dtype (training.fsdp.reduce_dtype) as bytes per
  // gradient element: 4 for fp32, 2 for bf16 / fp16; 0 = PyTorch's default
  // (reduce_dtype None), the parameter dtype.
  double reduce_bytes = 0;
  // DeepSpeed releases before 0.6 (training.deepspeed.version; framework_profile.cpp
  // cites each): every ZeRO-3 gather blocks the host, so nothing is prefetched and
  // no compute runs under a gather (before 0.6.0); each gather is the list form of
  // torch.distributed.all_gather, whose per-rank views and copies cost host time
  // and HBM traffic that grow with the DP size (before 0.5.5); and, without
  // contiguous_gradients, gradients are all-reduced, not reduce-scattered.
  bool gather_blocks_host = false;
  bool gather_per_rank_ops = false;
  bool grads_all_reduced = false;
  // ZeRO-3 gradients reduce-scattered one parameter at a time in the list form of
  // torch.distributed.reduce_scatter (DeepSpeed before 0.6.0 with contiguous_gradients and
  // reduce_scatter; framework_profile.cpp): per parameter and rank a narrow() view, then
  // ProcessGroupNCCL's copy of each view into the flat input before the NCCL call, with the
  // host (the autograd thread, in the gradient hook) issuing them.
  bool grads_per_param_list = false;
  // DeepSpeed's BF16_Optimizer (runtime/bf16_optimizer.py, from 0.6.2, PR #1801
  // "bf16+pipeline parallelism"): bf16 with fp32 gradient accumulation at ZeRO 0/1.
  // After every micro-batch's backward, update_hp_grads adds each bf16 gradient into
  // an unsharded fp32 gradient (hp_grad.add_(lp.grad.to(fp32))); the pipeline engine
  // calls it itself (runtime/pipe/engine.py _exec_backward_pass), and after the
  // schedule _bf16_reduce_grads all-reduces those fp32 gradients
  // (buffered_allreduce_fallback of get_grads_for_reduction). It keeps the fp32 master
  // weights and Adam state partitioned over the data-parallel ranks and all-gathers
  // the updated bf16 weights (a ZeRO-1 equivalent).
  bool bf16_optimizer = false;
  // The Adam step over this GPU's shard of fp32 parameters, gradients and moments, and
  // FSDP's clip_grad_norm_ before it (optimizer_step_bytes; framework_profile.cpp cites
  // each): Megatron's and DeepSpeed's fused kernels; under FSDP what the training script
  // builds, PyTorch's AdamW (foreach) by default, and the gradient clipping LLM scripts run.
  OptimizerImpl optimizer_impl = OptimizerImpl::fused;
  bool clip_grad_norm = false;
  // Megatron's column-parallel linears (QKV, MLP up, the logits GEMM) communicate
  // asynchronously in their backward (framework_profile.cpp cites it): under sequence
  // parallelism the input is all-gathered again beside the input-gradient GEMM and the
  // input gradient reduce-scattered beside the weight-gradient GEMM; without it the input
  // gradient is all-reduced beside the weight-gradient GEMM when async_tp_allreduce
  // (Megatron-LM's async_tensor_model_parallel_allreduce; off: after it, blocking).
  // Neither for other frameworks: their tensor-parallel backward blocks.
  bool async_tp_backward = false;
  bool async_tp_allreduce = false;
  // Megatron's gradient_accumulation_fusion (framework_profile.cpp cites it): the
  // weight-gradient GEMM accumulates straight into the fp32 main gradient. Off (Megatron-LM
  // before 2022-02, DeepSpeed outside its BF16_Optimizer, FSDP), each new gradient is added
  // into the one already held, a memory-bound kernel after the GEMM:
  // ProgramBuilder::accumulate_grads.
  bool fused_grad_accumulation = false;
  // Megatron's --transformer-impl (training.megatron.transformer_impl): Transformer Engine's
  // layers (megatron-core's default) hold TE's own cuBLAS workspace; the local layers'
  // DotProductAttention computes its s × s scores into Megatron's GlobalMemoryBuffer, a
  // tensor kept from step to step (models/memory.cpp buffer_bytes).
  bool transformer_engine = false;
  // Megatron's masked_softmax_fusion (--no-masked-softmax-fusion turns it off) and
  // attention_softmax_in_fp32: without the fused kernel, softmax in fp32 runs as PyTorch's
  // softmax on an fp32 copy and saves fp32 probabilities (models/memory.cpp).
  bool masked_softmax_fusion = true;
  bool softmax_in_fp32 = false;
  // Megatron's --moe-grouped-gemm: with Transformer Engine the experts are TEGroupedMLP, whose
  // grouped GEMMs hold TE's multi-stream cuBLAS workspaces (models/memory.cpp).
  bool moe_grouped_gemm = false;
  // Megatron's --moe-shared-expert-overlap: the shared experts run on a stream of their own,
  // their first GEMM and activation beside the token dispatch's all-to-all, their second GEMM
  // beside the combine's, in forward and backward (moe/shared_experts.py, token_dispatcher.py).
  bool moe_shared_expert_overlap = false;
  // Megatron's --tp-comm-overlap: Transformer Engine's userbuffers hide the sequence-parallel
  // tensor-parallel collectives inside the GEMMs next to them (TE v1.9 module/base.py
  // initialize_ub, its default methods): the forward all-gathers before QKV and FC1 and the
  // backward all-gathers of the output gradient before the proj / FC2 input-gradient GEMMs by
  // ring exchange over copy engines ("ring_exchange", num_sm 1, use_ce), the forward
  // reduce-scatters after proj and FC2 pipelined with their GEMM in 4 splits ("pipeline",
  // num_sm 16), the column-parallel backward in bulk beside its GEMMs (as async_tp does).
  bool tp_comm_overlap = false;
  // How context parallelism exchanges attention's inputs (Megatron's --cp-comm-type,
  // Transformer Engine's cp_comm_type; dot_product_attention/context_parallel.py):
  //  - p2p (Megatron's default): the K/V chunks go around a ring beside the attention kernel;
  //  - allgather (AttnFuncWithCPAndKVAllGather): K/V all-gathered before attention, "not
  //    async, and cannot be overlapped", again in backward, whose dK/dV are reduce-scattered
  //    after it (Dubey et al. 2024, Llama 3, Sec. 3.3.2: "the all-gather communication
  //    latency is exposed in the critical path");
  //  - a2a (AttnFuncWithCPAndQKVOA2A, "Like DeepSpeed Ulysses"; DeepSpeed's own sequence
  //    parallelism, deepspeed/sequence/layer.py DistributedAttention): Q, K, V all-to-all'd
  //    from sequence shards to head shards, attention over the whole sequence for heads / cp
  //    heads, the output all-to-all'd back; backward the same in reverse (dO before, dQ, dK,
  //    dV after); none of it overlapped;
  //  - rotate_allgather (PyTorch's context_parallel, torch/distributed/tensor/experimental/
  //    _attention.py: _ContextParallelOptions.rotate_method = ALL_GATHER by default,
  //    _AllGatherRotater): the K/V all-gather issued at the ring's first step and waited for
  //    at its second, so only the first step's kernel (1/cp of the work) runs beside it; in
  //    backward the same, dK/dV going round the ring beside the remaining steps.
  CpComm cp_comm = CpComm::p2p;
  // Megatron's bias_activation_fusion (--no-bias-swiglu-fusion / --no-bias-gelu-fusion turn it
  // off): with SwiGLU, MoE experts weight their activation in one fused kernel.
  bool bias_activation_fusion = true;
  // The cross-entropy loss kernels (models::LossKernel; framework_profile.cpp cites each):
  // Megatron's vocab_parallel_cross_entropy as PyTorch ops (Megatron-LM, Megatron-core and
  // Megatron-DeepSpeed), under torch.compile with Megatron-core's --cross-entropy-loss-fusion
  // (training.megatron.cross_entropy_loss_fusion), or one fused kernel (FSDP's runs).
  models::LossKernel loss_kernel = models::LossKernel::megatron;
  // Megatron's passes over a gradient bucket before its data-parallel reduction
  // (framework_profile.cpp cites them): scaling by 1/dp in place unless the collective averages
  // (Megatron-core's --ddp-average-in-collective), and Megatron-core's NaN check, a norm of
  // the bucket (--no-check-for-nan-in-loss-and-grad turns it off).
  bool grad_bucket_prescale = false;
  bool grad_bucket_nan_check = false;
  // Megatron-core's delay_grad_reduce (--no-delay-grad-reduce turns it off): under pipeline
  // parallelism with overlap_grad_reduce, only the first stage reduces its buckets during its
  // last backward; the others start all of theirs after their cooldown, "during pipeline bubble"
  // (megatron/core/pipeline_parallel/schedules.py, non-interleaved 1F1B).
  bool delay_grad_reduce = false;
  // Pipeline engine: DeepSpeed's PipelineEngine reduces gradients after the whole
  // schedule (no overlap with backward).
  bool pipeline_reduces_after_schedule = false;
  // The pipeline schedules the framework's own engine runs, one bit per models::Schedule
  // (framework_profile.cpp cites each): `ptsim search` explores these unless told otherwise;
  // a scenario may name another (a warning says where it runs), except interleaved-1f1b on
  // an engine without virtual stages (an error).
  std::uint32_t pipeline_schedules =
      schedule_bit(models::Schedule::one_f_one_b) | schedule_bit(models::Schedule::interleaved_1f1b);
  bool offers(models::Schedule s) const { return (pipeline_schedules & schedule_bit(s)) != 0; }
  // Likewise the ZeRO stages it runs (bit z for stage z) and whether it runs ring context
  // parallelism (Megatron's runs in Transformer Engine's attention; FSDP's is PyTorch's).
  std::uint32_t zero_stages = 0b1111;
  bool offers_zero(int z) const { return z >= 0 && z < 4 && ((zero_stages >> z) & 1u) != 0; }
  bool offers_context_parallel() const {
    return framework == Framework::fsdp || framework == Framework::deepspeed ||
           (is_megatron(framework) && transformer_engine);
  }
  int max_zero_stage_with_pp = 3;
  // Megatron-core: layers on the first / last pipeline stage when num_layers does
  // not divide evenly (decoder_first/last_pipeline_num_layers); 0 = not given.
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  // Megatron-core's account_for_embedding_in_pipeline_split /
  // account_for_loss_in_pipeline_split: the embedding / the loss counts as one more
  // layer in the even split, so the first / last virtual stage builds one layer fewer.
  bool embedding_in_split = false;
  bool loss_in_split = false;
};

// The documented defaults of `f` (every figure cited in framework_profile.cpp).
FrameworkProfile default_profile(Framework f);

// The schedules a mask of schedule_bit()s holds, in models::Schedule order.
std::vector<std::string_view> schedule_names(std::uint32_t schedules);
// The ZeRO stages a mask holds (bit z for stage z), ascending.
std::vector<int> zero_stage_list(std::uint32_t stages);
// The schedules fp.pipeline_schedules holds, in models::Schedule order ("1f1b, interleaved-1f1b").
std::string offered_schedules(const FrameworkProfile& fp);
// The ZeRO stages fp.zero_stages holds ("0, 1, 2, 3").
std::string offered_zero_stages(const FrameworkProfile& fp);
// Where a pipeline schedule runs, for a scenario whose framework does not offer it (cited in
// framework_profile.cpp), e.g. "DeepSeek's deepseek-ai/DualPipe".
std::string_view schedule_home(models::Schedule s);

// HBM bytes per parameter of the GPU's optimizer shard that the step moves (the optimizer
// passes and clip_grad_norm_'s; Megatron's own passes around its fused kernel are the
// builder's): 28 fused, 80 foreach, 88 decoupled_adamw, + 12 with clip_grad_norm.
double optimizer_step_bytes(const FrameworkProfile& fp);

// Bytes per gradient element on the wire of the data-parallel reduction: the dtype
// the framework reduces in (framework_profile.cpp cites each rule).
double grad_reduce_element_bytes(const FrameworkProfile& fp, models::Precision precision);

// PyTorch FSDP1 divides each unsharded gradient by this factor before its reduction and
// the reduced shard by world / factor after it, to keep fp16 sums in range
// (torch/distributed/fsdp/_init_utils.py _get_gradient_predivide_factor): f doubles
// from 1 while f divides world and world / f > f. 8 at 64 ranks (and 8 after), 4 at 8
// (then 2), 2 at 2 (then none), 1 at one rank (no division).
int fsdp_predivide_factor(int world);

// A DeepSpeed release, "0.MINOR" or "0.MINOR.PATCH" (training.deepspeed.version), from
// 0.3.12, the first with ZeRO-3.
struct DeepSpeedVersion {
  int minor = 14, patch = 0;
  bool before(int m, int p) const { return minor < m || (minor == m && patch < p); }
};
inline constexpr std::string_view kDefaultDeepSpeedVersion = "0.14";
// Throws std::invalid_argument naming the accepted form otherwise.
DeepSpeedVersion parse_deepspeed_version(std::string_view text);
// The release's ZeRO-3 gather and gradient paths on `fp` (a deepspeed profile);
// `contiguous_gradients` as given, or nullopt for the release's default.
void apply_deepspeed_release(FrameworkProfile& fp, DeepSpeedVersion v, std::optional<bool> contiguous_gradients);
// PyTorch's host time for one eager operator call on CUDA tensors (the per-rank
// views and copies of a list-form collective): the operator micro-benchmark of
// pytorch/pytorch PR #32194 (2020) times an eager `split` of CUDA tensors at 3.3 µs.
// Checked on the loop itself (bench/gpu/list_gather_host.py, PyTorch 2.11 on an H100
// host, README "Training frameworks"): 3.8 µs per rank for the views, 7.0 µs for the
// two calls per rank of the copies.
inline constexpr double kEagerOpHostSeconds = 3.3e-6;

// Transformer layers per pipeline stage when num_layers is not a multiple of pp,
// as the framework partitions them: DeepSpeed's PipelineModule partition_method
// 'parameters' (contiguous stages balancing parameter counts, the embedding on the
// first and the head on the last stage); Megatron-core's explicit first/last-stage
// layer counts with the rest split evenly, or with embedding_in_split /
// loss_in_split one count per virtual stage (pp × vpp, Megatron's order) when vpp > 1.
// Empty when the framework has no default (Megatron without those keys, FSDP): the
// caller names the keys to give. Throws std::invalid_argument when the counts given
// cannot work.
std::vector<int> default_partition(const FrameworkProfile& fp, const models::ModelSpec& m, int pp, int vpp = 1);

}  // namespace ptsim::sim
