#include "sim/core/framework_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <numeric>
#include <stdexcept>

#include "models/params.h"

namespace ptsim::sim {

models::StateLayout state_layout_of(Framework f) {
  switch (f) {
    case Framework::deepspeed:
      return models::StateLayout::deepspeed;
    case Framework::fsdp:
      return models::StateLayout::fsdp;
    default:
      return models::StateLayout::megatron;
  }
}

std::string_view to_string(Framework f) {
  for (const auto& s : kFrameworkNames)
    if (s.value == f) return s.name;
  throw std::invalid_argument(fmt::format("unknown Framework value {}", static_cast<int>(f)));
}

FrameworkProfile default_profile(Framework f) {
  FrameworkProfile p;
  p.framework = f;
  // dp_one_stream (true for all four): each framework gathers parameters and reduces
  // gradients over one data-parallel process group — Megatron-core's param_and_grad_buffer
  // (data_parallel_group for both), DeepSpeed's ZeRO-3 as Megatron-DeepSpeed builds it
  // (zero.Init(data_parallel_group=mpu.get_data_parallel_group()), the engine's
  // dp_process_group from the same mpu), FSDP's process_group. PyTorch's
  // ProcessGroupNCCL runs every collective of a group on its one internal NCCL stream
  // (pytorch/pytorch#65299: FSDP's all-gather and reduce-scatter streams do not overlap,
  // "it allows one process group to run single NCCL stream only, this is expected";
  // pytorch/pytorch#136187), and NCCL serializes the operations of one communicator
  // (NVIDIA/nccl#574: "NCCL collective operations on a given communicator are always
  // serialized"). So a gather issued after a gradient reduction starts when it ends.
  // PyTorch PR #176949 (2026) gives FSDP2's all-gather and reduce-scatter their own
  // process groups: training.dp_one_stream false models that.
  switch (f) {
    case Framework::megatron_core:
    case Framework::megatron_lm:
      // Megatron-core DistributedDataParallelConfig (megatron/core/distributed/
      // distributed_data_parallel_config.py, core 0.7): bucket_size None = "max(40000000,
      // 1000000 * dp_size) parameters" — models::dp_bucket_params. Megatron-LM's
      // training loop wraps the model in that same class (megatron/training/training.py),
      // so the two profiles issue the same collectives. Parameters are gathered per
      // layer (the distributed optimizer's per-bucket param all-gather, overlapped
      // with the forward under overlap_param_gather).
      // Tensor-parallel backward: megatron/core/tensor_parallel/layers.py
      // LinearWithGradAccumulationAndAsyncCommunication.backward, the same in Megatron-LM's
      // megatron/mpu/layers.py since sequence parallelism arrived (commit 02bb1f5c,
      // 2022-03-02). With sequence parallelism it starts the all-gather of the saved input
      // (async_op=True) before the input-gradient GEMM and waits after it, then starts the
      // reduce-scatter of the input gradient before the weight-gradient GEMM and waits
      // after it. Without, all_reduce(grad_input, async_op=True) before the weight-gradient
      // GEMM ("Asynchronous all-reduce"), under Megatron-LM's
      // async_tensor_model_parallel_allreduce: on by default since it was introduced
      // (ColumnParallelLinearWithAsyncAllreduce, megatron/mpu/layers.py, commits of
      // 2021-09-02; "--no-async-tensor-model-parallel-allreduce" turns it off); deprecated
      // and ignored (always on) in megatron-core's ModelParallelConfig until its removal
      // (PR #3408, 2026).
      p.async_tp_backward = true;
      p.async_tp_allreduce = true;
      // Gradient accumulation fusion: the same layers.py class passes main_grad to
      // fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32 / _fp16, which accumulates
      // the weight gradient inside the GEMM (Megatron-LM commit 83b1e42f "gradient
      // accumulation fusion", 2022-02-13; on unless --no-gradient-accumulation-fusion, and
      // megatron-core's ModelParallelConfig.gradient_accumulation_fusion). Before it,
      // F.linear's weight gradient went to param.grad through autograd's AccumulateGrad
      // (`variable_grad += new_grad` from the second micro-batch on), and Megatron's
      // local DDP hook added it into main_grad when a contiguous fp32 buffer was used
      // (megatron/model/distributed.py _make_param_hook, "main_grad.add_(param.grad.data)",
      // commit b4bc51b1 "Bfloat with fp32 grad acc", 2021-03-08).
      p.fused_grad_accumulation = true;
      // --transformer-impl: "transformer_engine" by default in megatron-core's training
      // (megatron/training/arguments.py); Megatron-LM's own layers before Transformer Engine
      // (2023), which the megatron-lm profile's runs used.
      p.transformer_engine = f == Framework::megatron_core;
      // Before a bucket's reduction: Megatron-core's Bucket.start_grad_sync (megatron/core/
      // distributed/param_and_grad_buffer.py, core r0.8) computes grad_data.norm(p=2) and asserts
      // it is not NaN when check_for_nan_in_grad (Megatron's --check-for-nan-in-loss-and-grad, on
      // by default: `--no-check-for-nan-in-loss-and-grad` is store_false) and multiplies the
      // bucket by gradient_scaling_factor = 1/dp unless average_in_collective
      // (--ddp-average-in-collective, off by default; distributed_data_parallel.py). The 2021
      // local DDP divided its buffers by the DP size before the all-reduce too
      // (megatron/model/distributed.py allreduce_gradients, `buffer_.data /=
      // mpu.get_data_parallel_world_size()`), without the NaN check.
      p.grad_bucket_prescale = true;
      p.grad_bucket_nan_check = f == Framework::megatron_core;
      // --no-delay-grad-reduce is store_false (megatron/training/arguments.py): training.py then
      // sets config.grad_sync_func = start_grad_sync, which forward_backward_pipelining_without_
      // interleaving calls after the cooldown on every stage but the first ("Other pipeline
      // stages do grad reduction during pipeline bubble").
      p.delay_grad_reduce = f == Framework::megatron_core;
      // Pipeline schedules: get_forward_backward_func (megatron/core/pipeline_parallel/
      // schedules.py, NVIDIA/Megatron-LM d98e8a64dd, 2026-08; megatron/schedules.py in the
      // 2021 Megatron-LM) returns forward_backward_no_pipelining, _pipelining_with_interleaving
      // or _pipelining_without_interleaving: 1F1B and interleaved 1F1B, no GPipe, zero-bubble
      // or DualPipe schedule.
      p.pipeline_schedules =
          schedule_bit(models::Schedule::one_f_one_b) | schedule_bit(models::Schedule::interleaved_1f1b);
      // ZeRO stages: DDP (0) and the distributed optimizer (--use-distributed-optimizer, 1) in
      // both; Megatron-core also shards gradients and parameters with Megatron-FSDP
      // (--use-megatron-fsdp, --data-parallel-sharding-strategy optim_grads | optim_grads_params,
      // megatron/training/arguments.py at d98e8a64dd). Context parallelism needs Transformer
      // Engine's attention: the local DotProductAttention asserts "Context parallelism is only
      // supported by TEDotProductAttention!" (megatron/core/transformer/dot_product_attention.py).
      p.zero_stages = f == Framework::megatron_core ? 0b1111u : 0b0011u;
      return p;
    case Framework::deepspeed:
      // DeepSpeed runtime/zero/config.py (DeepSpeedZeroConfig, v0.12–0.14):
      //   reduce_bucket_size 5e8, allgather_bucket_size 5e8 (elements),
      //   stage3_prefetch_bucket_size 5e7, stage3_param_persistence_threshold 1e5,
      //   stage3_max_reuse_distance 1e9,
      //   overlap_comm None -> True for stage 3, False otherwise (overlap_comm_valid).
      // ZeRO-3 fetches parameters per submodule (runtime/zero/
      // partitioned_param_coordinator.py fetch_sub_module), one coalesced all-gather
      // per fetch, prefetching the following submodules while fewer than
      // prefetch_bucket_size elements are in flight.
      p.gather_unit = GatherUnit::submodule;
      p.grad_bucket_params = 5e8;
      p.allgather_bucket_params = 5e8;
      p.prefetch_bucket_params = 5e7;
      p.param_persistence_threshold = 1e5;
      p.max_reuse_distance = 1e9;
      // runtime/pipe/schedule.py TrainSchedule: ReduceGrads and OptimizerStep run
      // after the last micro-batch's backward; runtime/pipe/engine.py has no
      // interleaved schedule and asserts ZeRO stage < 2 with pipeline parallelism.
      // The engine builds schedule.TrainSchedule for training (runtime/pipe/engine.py
      // train_batch; runtime/pipe/schedule.py has TrainSchedule, InferenceSchedule and
      // DataParallelSchedule): 1F1B only.
      p.pipeline_reduces_after_schedule = true;
      p.pipeline_schedules = schedule_bit(models::Schedule::one_f_one_b);
      p.max_zero_stage_with_pp = 1;
      // ZeRO stages 0–3 (zero_optimization.stage). Its context parallelism is Ulysses
      // (deepspeed/sequence/layer.py DistributedAttention: Q, K, V all-to-all'd from sequence
      // to head shards around the local attention, the output back), no ring.
      p.cp_comm = CpComm::a2a;
      // Tensor parallelism under DeepSpeed comes from a Megatron-DeepSpeed fork of 2021
      // Megatron-LM: bigscience-workshop/Megatron-DeepSpeed megatron/mpu/layers.py
      // ColumnParallelLinear.forward calls copy_to_tensor_model_parallel_region, whose
      // backward all-reduces the input gradient blocking (async_tp_backward stays false).
      return p;
    case Framework::fsdp:
      // The loss is the model's, not FSDP's: llm-foundry's ComposerMPTCausalLM takes
      // model.loss_fn "fused_crossentropy" by default, flash-attn's CrossEntropyLoss (one
      // kernel over the logits, llmfoundry/models/mpt/modeling_mpt.py); the Megatron-based
      // profiles keep Megatron's unfused vocab_parallel_cross_entropy (its
      // --cross-entropy-loss-fusion is store_true, megatron/training/arguments.py).
      p.loss_kernel = models::LossKernel::fused;
      // PyTorch FSDP (torch.distributed.fsdp.FullyShardedDataParallel, 2.x docs):
      // wrapping unit = one transformer layer (transformer_auto_wrap_policy), the
      // default sharding_strategy FULL_SHARD reshards after forward, backward_prefetch
      // BACKWARD_PRE prefetches the next unit's all-gather in backward, and each
      // unit's gradients are reduce-scattered as soon as its backward finishes.
      p.grad_reduce_per_unit = true;
      // Pipelining beside FSDP is torch.distributed.pipelining (as torchtitan runs it): its
      // schedules.py exports ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B,
      // ScheduleLoopedBFS, ScheduleInterleavedZeroBubble and ScheduleZBVZeroBubble (PyTorch
      // docs, stable, 2025); ptsim's kinds among them: gpipe, 1f1b, interleaved-1f1b, zb-v.
      p.pipeline_schedules = schedule_bit(models::Schedule::gpipe) | schedule_bit(models::Schedule::one_f_one_b) |
                             schedule_bit(models::Schedule::interleaved_1f1b) | schedule_bit(models::Schedule::zb_v);
      // torch.distributed.fsdp.ShardingStrategy: NO_SHARD (ZeRO-0), FULL_SHARD (3) and
      // SHARD_GRAD_OP (ZeRO-3 without the backward re-gather: training.fsdp.
      // reshard_after_forward false); no mode shards only the optimizer state (ZeRO-1) or only it
      // and the gradients with the parameters replicated between steps (ptsim's ZeRO-2). Ring
      // context parallelism: torch.distributed.tensor.experimental.context_parallel (PyTorch 2.5),
      // as torchtitan runs it.
      p.zero_stages = 0b1001u;
      // The step is the training script's: torch.optim.AdamW runs its multi-tensor (foreach)
      // implementation on CUDA unless fused=True is asked for (torch/optim/adamw.py, 2.x:
      // "foreach ... we will try to use foreach over the for-loop implementation on CUDA";
      // fused defaults to None), as foundation-model-stack/fms-fsdp main_training_llama.py
      // builds it (optim.AdamW(model.parameters(), lr, betas, weight_decay)). LLM scripts on
      // FSDP clip the gradient norm (llm-foundry's yamls: algorithms.gradient_clipping
      // clipping_type norm, threshold 1.0; fms-fsdp grad_clip_thresh; torchtitan max_norm),
      // through FullyShardedDataParallel.clip_grad_norm_.
      p.optimizer_impl = OptimizerImpl::foreach;
      p.clip_grad_norm = true;
      // Its context parallelism rotates K/V by one all-gather (torch/distributed/tensor/
      // experimental/_attention.py: rotate_method ALL_GATHER by default; set_rotate_method
      // "alltoall" rotates them step by step; torchtitan's context_parallel_rotate_method
      // defaults to "allgather").
      p.cp_comm = CpComm::rotate_allgather;
      return p;
  }
  throw std::invalid_argument(fmt::format("unknown Framework value {}", static_cast<int>(f)));
}

double optimizer_step_bytes(const FrameworkProfile& fp) {
  // Bytes read and written per fp32 element of the shard (parameter p, gradient g, moments m
  // and v), each pass a kernel over it:
  double step = 0;
  switch (fp.optimizer_impl) {
    case OptimizerImpl::fused:
      // One kernel (apex / Transformer Engine / DeepSpeed FusedAdam, torch fused=True):
      // reads p, g, m, v and writes p, m, v; a 16-bit weight copy, where there is one,
      // counted in place of g's upper half (Megatron's weights: the builder's passes).
      step = 28;
      break;
    case OptimizerImpl::foreach:
      // torch/optim/adamw.py _multi_tensor_adamw (2.x): _foreach_mul_(p) 8, _foreach_lerp_(m,
      // g) 12, _foreach_mul_(v) 8, _foreach_addcmul_(v, g, g) 12, _foreach_sqrt(v) into a new
      // list 8, _foreach_div_ 8, _foreach_add_(eps) 8, _foreach_addcdiv_(p, m, denom) 16.
      step = 80;
      break;
    case OptimizerImpl::decoupled_adamw:
      // mosaicml/composer composer/optim/decoupled_weight_decay.py DecoupledAdamW.adamw
      // (v0.14-v0.16): per parameter param.mul_ 8, exp_avg.mul_(beta1).add_(grad) 8 + 12,
      // exp_avg_sq.mul_(beta2).addcmul_(grad, grad) 8 + 12, (exp_avg_sq.sqrt() / c).add_(eps)
      // 8 + 8 + 8, param.addcdiv_(exp_avg, denom) 16.
      step = 88;
      break;
  }
  // FullyShardedDataParallel.clip_grad_norm_ (torch/distributed/fsdp): the local norm reads
  // each gradient (torch.linalg.vector_norm, 4), and every gradient is multiplied in place by
  // the clamped coefficient, even at 1 ("it avoids the host-device sync", 8).
  return step + (fp.clip_grad_norm ? 12 : 0);
}

std::vector<std::string_view> schedule_names(std::uint32_t schedules) {
  std::vector<std::string_view> out;
  for (const auto& [s, name] : models::kScheduleNames)
    if (schedules & schedule_bit(s)) out.push_back(name);
  return out;
}

std::vector<int> zero_stage_list(std::uint32_t stages) {
  std::vector<int> out;
  for (int z = 0; z < 4; ++z)
    if ((stages >> z) & 1u) out.push_back(z);
  return out;
}

std::string offered_schedules(const FrameworkProfile& fp) {
  return fmt::format("{}", fmt::join(schedule_names(fp.pipeline_schedules), ", "));
}

std::string offered_zero_stages(const FrameworkProfile& fp) {
  return fmt::format("{}", fmt::join(zero_stage_list(fp.zero_stages), ", "));
}

std::string_view schedule_home(models::Schedule s) {
  switch (s) {
    case models::Schedule::gpipe:
      return "torch.distributed.pipelining's ScheduleGPipe (training.framework: fsdp)";
    case models::Schedule::zb_h1:
    case models::Schedule::zb_h2:
      // README of sail-sg/zero-bubble-pipeline-parallelism: "a fork of Megatron-LM",
      // --enable-zero-bubble (ZB1P / ZB2P by --zero-bubble-max-pending-backward).
      return "the zero-bubble fork of Megatron-LM, sail-sg/zero-bubble-pipeline-parallelism";
    case models::Schedule::zb_v:
      return "sail-sg/zero-bubble-pipeline-parallelism (--zero-bubble-v-schedule) or torch.distributed.pipelining's "
             "ScheduleZBVZeroBubble (training.framework: fsdp)";
    case models::Schedule::dualpipe:
      return "DeepSeek's deepseek-ai/DualPipe";
    case models::Schedule::one_f_one_b:
    case models::Schedule::interleaved_1f1b:
      return "Megatron-LM";
  }
  return "";
}

int fsdp_predivide_factor(int world) {
  int f = 1;
  while (world % f == 0 && world / f > f) f *= 2;
  return f;
}

double grad_reduce_element_bytes(const FrameworkProfile& fp, models::Precision precision) {
  if (fp.framework == Framework::fsdp && fp.reduce_bytes > 0) return fp.reduce_bytes;
  if (precision == models::Precision::fp32) return 4.0;
  switch (fp.framework) {
    case Framework::megatron_core:
    case Framework::megatron_lm:
      // Megatron-LM megatron/training/arguments.py (validate_args): "bfloat16 requires
      // gradient accumulation and all-reduce to be done in fp32", so bf16 (and fp8,
      // which keeps bf16 weights) sets accumulate_allreduce_grads_in_fp32, which
      // training.py passes to DistributedDataParallelConfig as grad_reduce_in_fp32:
      // the DDP buffer and its reduce-scatter / all-reduce are fp32. fp16 keeps the
      // flag's default, False: fp16 gradients are reduced. (The memory model's 18 bytes
      // per bf16 parameter are the same fp32 buffer, models/memory.cpp.)
      return precision == models::Precision::fp16 ? 2.0 : 4.0;
    case Framework::fsdp:
      return 2.0;  // the parameter dtype (reduce_bytes above when given)
    case Framework::deepspeed:
      // ZeRO's reduce_ipg_grads / average_tensor reduce the 16-bit gradients (ZeRO
      // paper §3.1 counts 2 bytes per gradient); the BF16_Optimizer all-reduces its
      // fp32 gradients (framework_profile.h).
      return fp.bf16_optimizer ? 4.0 : 2.0;
  }
  throw std::invalid_argument(fmt::format("unknown Framework value {}", static_cast<int>(fp.framework)));
}

DeepSpeedVersion parse_deepspeed_version(std::string_view text) {
  const std::string_view form = "\"0.MINOR\" or \"0.MINOR.PATCH\" from 0.3.12, e.g. \"0.3.16\" or \"0.14\"";
  DeepSpeedVersion v;
  int major = -1;
  const char* p = text.data();
  const char* end = p + text.size();
  auto r = std::from_chars(p, end, major);
  bool ok = r.ec == std::errc{} && r.ptr != end && *r.ptr == '.';
  if (ok) r = std::from_chars(r.ptr + 1, end, v.minor), ok = r.ec == std::errc{};
  if (ok && r.ptr != end) {
    ok = *r.ptr == '.' && r.ptr + 1 != end;
    if (ok) r = std::from_chars(r.ptr + 1, end, v.patch), ok = r.ec == std::errc{} && r.ptr == end;
  }
  if (!ok || major != 0 || v.minor > 99 || v.patch > 99 || v.before(3, 12))
    throw std::invalid_argument(fmt::format("'{}' is not a modelled DeepSpeed release ({})", text, form));
  return v;
}

void apply_deepspeed_release(FrameworkProfile& fp, DeepSpeedVersion v, std::optional<bool> contiguous_gradients) {
  // Tags of github.com/microsoft/DeepSpeed read for each threshold below.
  // v0.3.12 (2021-03-12) is the first release with runtime/zero/stage3.py.
  // v0.3.12 .. v0.5.4: PartitionedParameterCoordinator.fetch_sub_module gathers each
  // parameter with partition_parameters.py _allgather_param, which calls
  // torch.cuda.synchronize() before its all-gather and builds a Python list of
  // world_size narrow() views for the list form of torch.distributed.all_gather (whose
  // ProcessGroupNCCL implementation copies the flat result out once per rank);
  // fetch_sub_module then waits in _synchronize_communication (comm_stream and
  // torch.cuda.synchronize). Before PR #1170 (June 2021) the trace-based prefetch did
  // not run at all: a sub-module's pre-forward hook ran before the module's own, whose
  // reset_step put every step id one off the trace, so get_params_to_prefetch gave up
  // ("Tracing failed", DeepSpeed issue #1069). After it, prefetching went through the
  // same path, so it was "not async at all" (DeepSpeed PR #1188, v0.5.5, which moved the fetch to
  // _allgather_params_coalesced: flat all-gathers back to back, one synchronize).
  // v0.6.0 (PR #1453) gathers on its own stream with coalesced prefetch buckets,
  // the behaviour default_profile describes.
  fp.gather_blocks_host = v.before(6, 0);
  fp.gather_per_rank_ops = v.before(5, 5);
  // Gradients before v0.6.0: stage3.py reduce_ipg_grads all-reduces each bucket
  // (buffered_reduce_fallback -> allreduce_bucket) unless contiguous_gradients, whose
  // stage-3 default is False up to v0.4.2 and True from v0.4.3 (constants.py,
  // PR #1199); with it, average_tensor reduce-scatters when reduce_scatter is on (its
  // default, except False in v0.3.16, PR #971). From v0.6.0 always
  // reduce_scatter_coalesced.
  const bool contiguous = contiguous_gradients.value_or(!v.before(4, 3));
  const bool reduce_scatter = !(v.minor == 3 && v.patch == 16);
  fp.grads_all_reduced = v.before(6, 0) && !(contiguous && reduce_scatter);
  // That reduce-scatter, v0.3.12 .. v0.5.10: average_tensor calls the parameter extension's
  // reduce_gradients_at_owner, i.e. partition_parameters.py _reduce_scatter_gradients, which
  // issues one torch.distributed.reduce_scatter per parameter (_reduce_scatter_gradient) with
  // an input list of world_size narrow() views of the gradient; PyTorch's
  // ProcessGroupNCCL::reduce_scatter flattens that list, copying each view into the flat
  // input (select, recordStream, copy_) before ncclReduceScatter. v0.6.0 replaced it with
  // reduce_scatter_coalesced over the bucket.
  fp.grads_per_param_list = v.before(6, 0) && contiguous && reduce_scatter;
}

namespace {

// Contiguous split of `w` into `parts` groups minimising the heaviest group (the
// objective of DeepSpeed's ds_utils.partition_balanced): binary search on the
// bottleneck, then a greedy fill that leaves at least one item per later group.
std::vector<int> balanced_counts(const std::vector<double>& w, int parts) {
  const auto fits = [&](double cap) {
    int used = 1;
    double sum = 0;
    for (double x : w) {
      if (x > cap) return false;
      if (sum + x > cap) ++used, sum = 0;
      sum += x;
    }
    return used <= parts;
  };
  double lo = *std::max_element(w.begin(), w.end()), hi = std::accumulate(w.begin(), w.end(), 0.0);
  for (int i = 0; i < 200 && hi - lo > 0.5; ++i) {
    const double mid = (lo + hi) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  std::vector<int> counts;
  std::size_t next = 0;
  for (int part = 0; part < parts; ++part) {
    const std::size_t must_leave = static_cast<std::size_t>(parts - part - 1);
    double sum = 0;
    int n = 0;
    while (next < w.size() - must_leave && (n == 0 || part == parts - 1 || sum + w[next] <= hi)) sum += w[next++], ++n;
    counts.push_back(n);
  }
  return counts;
}

// Megatron-core's get_num_layers_to_build (megatron/core/transformer/transformer_block.py)
// with account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split:
// num_layers + 1 per flag split evenly over the pp stages and their vpp chunks
// (transformer_config.py checks both divide), then the first chunk of the first stage
// builds one layer fewer for the embedding and the last chunk of the last stage one
// fewer for the loss. Counts per virtual stage (chunk·pp + stage) when vpp > 1.
std::vector<int> megatron_accounted_partition(const FrameworkProfile& fp, const models::ModelSpec& m, int pp, int vpp) {
  const int total = m.num_layers + (fp.embedding_in_split ? 1 : 0) + (fp.loss_in_split ? 1 : 0);
  const std::string counted =
      fmt::format("{} layers{}{} = {}", m.num_layers, fp.embedding_in_split ? " + the embedding" : "",
                  fp.loss_in_split ? " + the loss" : "", total);
  if (total % pp != 0 || (total / pp) % vpp != 0)
    throw std::invalid_argument(
        fmt::format("{} do not split evenly over pipeline_parallel {} × virtual_pipeline_stages {}", counted, pp, vpp));
  const int per = total / pp / vpp;
  std::vector<int> out(static_cast<std::size_t>(pp) * static_cast<std::size_t>(vpp), per);
  if (fp.embedding_in_split) --out.front();
  if (fp.loss_in_split) --out.back();
  if (per == 0 || out.front() < 0 || out.back() < 0)
    throw std::invalid_argument(fmt::format("{} leave a (virtual) pipeline stage without a layer", counted));
  return out;
}

std::vector<int> megatron_partition(const FrameworkProfile& fp, const models::ModelSpec& m, int pp, int vpp) {
  if (fp.embedding_in_split || fp.loss_in_split) return megatron_accounted_partition(fp, m, pp, vpp);
  const int first = fp.first_stage_layers, last = fp.last_stage_layers;
  if (first == 0 && last == 0) return {};
  const int middle_stages = pp - (first > 0) - (last > 0);
  const int middle_layers = m.num_layers - first - last;
  if (pp < 2 || middle_stages < 0 || middle_layers < middle_stages || (middle_stages == 0 && middle_layers != 0) ||
      (middle_stages > 0 && middle_layers % middle_stages != 0))
    throw std::invalid_argument(fmt::format(
        "{} layers minus {} on the first and {} on the last stage do not split evenly over the other {} stages",
        m.num_layers, first, last, std::max(middle_stages, 0)));
  std::vector<int> out;
  if (first > 0) out.push_back(first);
  for (int i = 0; i < middle_stages; ++i) out.push_back(middle_layers / middle_stages);
  if (last > 0) out.push_back(last);
  return out;
}

}  // namespace

std::vector<int> default_partition(const FrameworkProfile& fp, const models::ModelSpec& m, int pp, int vpp) {
  if (is_megatron(fp.framework)) return megatron_partition(fp, m, pp, vpp);
  if (fp.framework != Framework::deepspeed) return {};
  if (m.num_layers < pp)
    throw std::invalid_argument(fmt::format("{} layers cannot fill {} pipeline stages", m.num_layers, pp));
  // partition_method 'parameters' (deepspeed/runtime/pipe/module.py, the default):
  // each stage's weight is the parameter count of its layers. Megatron-DeepSpeed's
  // GPTModelPipe puts the embedding first and, tied, again as the head on the last
  // stage (TiedLayerSpec counts it there too); untied, the output projection.
  const models::ParamCounts pc = models::count_params(m);
  std::vector<double> w;
  for (int l = 0; l < m.num_layers; ++l)
    w.push_back(static_cast<double>(m.is_moe_layer(l) ? pc.moe_layer : pc.dense_layer));
  w.front() += static_cast<double>(pc.embedding);
  w.back() += static_cast<double>(pc.final_norm + (m.untie_embeddings ? pc.output : pc.embedding));
  return balanced_counts(w, pp);
}

}  // namespace ptsim::sim
