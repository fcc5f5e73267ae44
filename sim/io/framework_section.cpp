#include "sim/io/framework_section.h"

#include <fmt/format.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/io/scenario_keys.h"

namespace ptsim::sim {
namespace {

// Every key each framework section accepts (README "Training frameworks"), from the key table.
const std::vector<std::string> kDeepSpeedKeys = keys_of("training.deepspeed");
const std::vector<std::string> kFsdpKeys = keys_of("training.fsdp");
const std::vector<std::string> kMegatronKeys = keys_of("training.megatron");
// Bucket sizes are parameter counts; 1e12 is beyond any model (and keeps byte counts finite).
constexpr double kMaxElements = 1e12;

double elements(const hw::StrictReader& r, const YAML::Node& n, const std::string& key, bool zero_ok) {
  const double v = zero_ok ? r.non_negative(n, key) : r.positive(n, key);
  if (v > kMaxElements) r.fail(key, fmt::format("{:g} is out of range", v), fmt::format("at most {:g}", kMaxElements));
  return v;
}

// The section named for `f` is the only one allowed; another framework's section is an error.
void check_sections(const hw::StrictReader& r, const YAML::Node& t, Framework f) {
  const std::pair<const char*, bool> sections[] = {
      {"deepspeed", f == Framework::deepspeed}, {"fsdp", f == Framework::fsdp}, {"megatron", is_megatron(f)}};
  for (const auto& [name, ok] : sections)
    if (t[name] && !ok)
      r.fail(std::string("training.") + name, fmt::format("given but training.framework is {}", to_string(f)),
             fmt::format("set training.framework to the framework whose keys these are"));
}

void read_deepspeed(const hw::StrictReader& r, const YAML::Node& d, Scenario& s) {
  auto& fp = s.framework;
  bool overlap = s.plan.par.zero_stage == 3;  // overlap_comm_valid: None -> stage == 3
  DeepSpeedVersion v;
  const bool bf16 = s.plan.par.precision == models::Precision::bf16;
  // data_types.grad_accum_dtype; DeepSpeed's default (engine.py get_data_types): fp32
  // for bf16 without ZeRO, else the model's dtype.
  bool fp32_accum = bf16 && s.plan.par.zero_stage == 0;
  if (d) {
    r.check_keys(d, "training.deepspeed", kDeepSpeedKeys);
    const auto get = [&](const char* key, bool zero_ok, auto set) {
      if (d[key]) set(elements(r, d[key], std::string("training.deepspeed.") + key, zero_ok));
    };
    get("stage3_prefetch_bucket_size", true, [&](double v) { fp.prefetch_bucket_params = v; });
    get("stage3_param_persistence_threshold", true, [&](double v) { fp.param_persistence_threshold = v; });
    get("stage3_max_reuse_distance", true, [&](double v) { fp.max_reuse_distance = v; });
    get("reduce_bucket_size", false, [&](double v) { fp.grad_bucket_params = v; });
    get("allgather_bucket_size", false, [&](double v) { fp.allgather_bucket_params = v; });
    if (d["overlap_comm"]) overlap = r.boolean(d["overlap_comm"], "training.deepspeed.overlap_comm");
    std::optional<bool> contiguous;
    if (d["contiguous_gradients"])
      contiguous = r.boolean(d["contiguous_gradients"], "training.deepspeed.contiguous_gradients");
    if (d["grad_accum_dtype"])
      fp32_accum =
          r.choice(d["grad_accum_dtype"], "training.deepspeed.grad_accum_dtype", {"fp32", "bf16", "fp16"}) == "fp32";
    if (d["version"]) {
      const std::string text = r.string(d["version"], "training.deepspeed.version");
      try {
        v = parse_deepspeed_version(text);
      } catch (const std::invalid_argument& e) {
        r.fail("training.deepspeed.version", e.what());
      }
    }
    apply_deepspeed_release(fp, v, contiguous);
  }
  // engine.py _do_optimizer_sanity_check (0.14): bf16 with fp32 accumulation and ZeRO
  // off or at stage 1 runs the BF16_Optimizer, which 0.6.2 introduced.
  fp.bf16_optimizer = bf16 && fp32_accum && s.plan.par.zero_stage <= 1 && !v.before(6, 2);
  s.plan.par.bf16_optimizer = fp.bf16_optimizer;
  s.plan.overlap_grad_reduce = overlap && !(s.plan.par.pp > 1 && fp.pipeline_reduces_after_schedule);
  s.plan.overlap_param_gather = overlap;
}

void read_fsdp(const hw::StrictReader& r, const YAML::Node& f, Scenario& s) {
  auto& fp = s.framework;
  if (f) {
    r.check_keys(f, "training.fsdp", kFsdpKeys);
    if (f["reshard_after_forward"])
      fp.reshard_after_forward = r.boolean(f["reshard_after_forward"], "training.fsdp.reshard_after_forward");
    if (f["backward_prefetch"])
      fp.backward_prefetch =
          r.choice(f["backward_prefetch"], "training.fsdp.backward_prefetch", kBackwardPrefetchNames);
    if (f["reduce_dtype"])
      fp.reduce_bytes =
          r.choice(f["reduce_dtype"], "training.fsdp.reduce_dtype", {"fp32", "bf16", "fp16"}) == "fp32" ? 4.0 : 2.0;
    if (f["optimizer_impl"])
      fp.optimizer_impl = r.choice(f["optimizer_impl"], "training.fsdp.optimizer_impl", kOptimizerImplNames);
    if (f["clip_grad_norm"]) fp.clip_grad_norm = r.boolean(f["clip_grad_norm"], "training.fsdp.clip_grad_norm");
    // PyTorch's set_rotate_method: "allgather" (the default) or "alltoall" (a ring of sends).
    if (f["cp_rotate_method"])
      fp.cp_comm =
          r.choice(f["cp_rotate_method"], "training.fsdp.cp_rotate_method", {"allgather", "alltoall"}) == "allgather"
              ? CpComm::rotate_allgather
              : CpComm::p2p;
  }
  s.plan.par.fsdp_reduce_bytes = fp.reduce_bytes;
  // Gradients are reduce-scattered on FSDP's own stream after each unit's backward.
  s.plan.overlap_grad_reduce = true;
  // Without forward_prefetch FSDP still issues the next unit's all-gather as soon as
  // the CPU reaches it, ahead of the GPU: the forward gathers overlap compute.
  s.plan.overlap_param_gather = true;
}

// The key that asked for Megatron-core's accounted split (embedding first when both).
const char* accounted_key(const FrameworkProfile& fp) {
  return fp.embedding_in_split ? "training.megatron.account_for_embedding_in_pipeline_split"
                               : "training.megatron.account_for_loss_in_pipeline_split";
}

void read_megatron(const hw::StrictReader& r, const YAML::Node& m, const YAML::Node& parallel, Scenario& s) {
  if (!m) return;
  auto& fp = s.framework;
  r.check_keys(m, "training.megatron", kMegatronKeys);
  if (m["bucket_size"]) fp.grad_bucket_params = elements(r, m["bucket_size"], "training.megatron.bucket_size", false);
  for (const char* key : {"overlap_grad_reduce", "overlap_param_gather"}) {
    if (!m[key]) continue;
    const std::string path = std::string("training.megatron.") + key;
    if (parallel && parallel[key])
      r.fail(path, fmt::format("also given as parallel.{}", key), "give it once, under training.megatron");
    (std::string(key) == "overlap_grad_reduce" ? s.plan.overlap_grad_reduce : s.plan.overlap_param_gather) =
        r.boolean(m[key], path);
  }
  if (m["use_distributed_optimizer"]) {
    const bool on = r.boolean(m["use_distributed_optimizer"], "training.megatron.use_distributed_optimizer");
    auto& zero = s.plan.par.zero_stage;
    if (on && zero > 1)
      r.fail("training.megatron.use_distributed_optimizer",
             fmt::format("shards the optimizer state (ZeRO-1) but parallel.zero_stage is {}", zero));
    if (!on && zero >= 1)
      r.fail("training.megatron.use_distributed_optimizer",
             fmt::format("is false but parallel.zero_stage is {}", zero));
    if (on) zero = 1;
  }
  const auto layers = [&](const char* key) {
    return m[key] ? r.integer(m[key], std::string("training.megatron.") + key) : 0;
  };
  fp.first_stage_layers = layers("decoder_first_pipeline_num_layers");
  fp.last_stage_layers = layers("decoder_last_pipeline_num_layers");
  const auto flag = [&](const char* key) {
    return m[key] && r.boolean(m[key], std::string("training.megatron.") + key);
  };
  // A megatron-core option given under another framework is an error naming it.
  const auto core_only = [&](const std::string& key) {
    if (fp.framework != Framework::megatron_core)
      r.fail(key, "is a megatron-core option (training.framework: megatron-core)");
  };
  if (m["async_tensor_model_parallel_allreduce"])
    fp.async_tp_allreduce = r.boolean(m["async_tensor_model_parallel_allreduce"],
                                      "training.megatron.async_tensor_model_parallel_allreduce");
  if (m["gradient_accumulation_fusion"])
    fp.fused_grad_accumulation =
        r.boolean(m["gradient_accumulation_fusion"], "training.megatron.gradient_accumulation_fusion");
  if (m["masked_softmax_fusion"])
    fp.masked_softmax_fusion = r.boolean(m["masked_softmax_fusion"], "training.megatron.masked_softmax_fusion");
  if (m["moe_token_dispatcher_type"]) {
    const std::string d = r.choice(m["moe_token_dispatcher_type"], "training.megatron.moe_token_dispatcher_type",
                                   {"alltoall", "allgather", "flex"});
    s.plan.par.moe_allgather = d == "allgather";
    s.plan.par.moe_dedup_per_rank = d == "flex";
  }
  if (m["cross_entropy_loss_fusion"]) {
    const std::string key = "training.megatron.cross_entropy_loss_fusion";
    // Megatron-core's fused_cross_entropy.py (2024); Megatron-LM's own loss had no fused form.
    core_only(key);
    if (r.boolean(m["cross_entropy_loss_fusion"], key)) fp.loss_kernel = models::LossKernel::megatron_compiled;
  }
  if (m["bias_activation_fusion"])
    fp.bias_activation_fusion = r.boolean(m["bias_activation_fusion"], "training.megatron.bias_activation_fusion");
  if (m["defer_embedding_wgrad_compute"])
    s.plan.par.defer_head_wgrad =
        r.boolean(m["defer_embedding_wgrad_compute"], "training.megatron.defer_embedding_wgrad_compute");
  if (m["wgrad_deferral_limit"]) {
    if (!s.plan.par.defer_head_wgrad)
      r.fail("training.megatron.wgrad_deferral_limit", "given without defer_embedding_wgrad_compute: true");
    s.plan.par.wgrad_deferral_limit = r.integer(m["wgrad_deferral_limit"], "training.megatron.wgrad_deferral_limit", 0);
  }
  if (m["microbatch_group_size_per_vp_stage"]) {
    const std::string key = "training.megatron.microbatch_group_size_per_vp_stage";
    // Megatron-core's (ModelParallelConfig, schedules.py get_schedule_table); the 2021
    // Megatron-LM grouped micro-batches by pipeline_parallel only.
    if (fp.framework != Framework::megatron_core)
      r.fail(key, "is Megatron-core's (training.framework: megatron-core); megatron-lm groups by pipeline_parallel");
    s.plan.par.microbatch_group = r.integer(m["microbatch_group_size_per_vp_stage"], key, 1);
  }
  if (m["moe_grouped_gemm"])
    fp.moe_grouped_gemm = r.boolean(m["moe_grouped_gemm"], "training.megatron.moe_grouped_gemm");
  if (m["moe_shared_expert_overlap"]) {
    const std::string key = "training.megatron.moe_shared_expert_overlap";
    fp.moe_shared_expert_overlap = r.boolean(m["moe_shared_expert_overlap"], key);
    // Megatron-core's TransformerConfig checks (transformer_config.py): shared experts, and a
    // dispatcher with all-to-alls to hide them behind.
    if (fp.moe_shared_expert_overlap && !(s.model.moe && s.model.moe->shared_experts > 0))
      r.fail(key, "the model has no shared experts (model.moe.shared_experts)");
    if (fp.moe_shared_expert_overlap && s.plan.par.moe_allgather)
      r.fail(key, "needs the alltoall or flex dispatcher (training.megatron.moe_token_dispatcher_type)");
  }
  if (m["attention_softmax_in_fp32"])
    fp.softmax_in_fp32 = r.boolean(m["attention_softmax_in_fp32"], "training.megatron.attention_softmax_in_fp32");
  if (m["transformer_impl"])
    fp.transformer_engine = r.choice(m["transformer_impl"], "training.megatron.transformer_impl",
                                     {"transformer_engine", "local"}) == "transformer_engine";
  if (m["check_for_nan_in_loss_and_grad"])
    fp.grad_bucket_nan_check =
        r.boolean(m["check_for_nan_in_loss_and_grad"], "training.megatron.check_for_nan_in_loss_and_grad");
  if (m["delay_grad_reduce"]) {
    const std::string key = "training.megatron.delay_grad_reduce";
    core_only(key);
    fp.delay_grad_reduce = r.boolean(m["delay_grad_reduce"], key);
  }
  if (m["ddp_average_in_collective"]) {
    const std::string key = "training.megatron.ddp_average_in_collective";
    // Megatron-core's DistributedDataParallelConfig.average_in_collective (2024).
    core_only(key);
    fp.grad_bucket_prescale = !r.boolean(m["ddp_average_in_collective"], key);
  }
  if (m["tp_comm_overlap"]) {
    const std::string key = "training.megatron.tp_comm_overlap";
    fp.tp_comm_overlap = r.boolean(m["tp_comm_overlap"], key);
    // Megatron's checks (megatron/training/arguments.py): "Tensor parallel communication/GEMM
    // overlap can happen only when sequence parallelism is enabled"; the userbuffers are
    // Transformer Engine's (initialize.py _initialize_tp_communicators imports it).
    if (fp.tp_comm_overlap && fp.framework != Framework::megatron_core)
      r.fail(key, "is Megatron-core's with Transformer Engine (training.framework: megatron-core)");
    if (fp.tp_comm_overlap && !s.plan.par.sequence_parallel)
      r.fail(key, "needs sequence parallelism (parallel.sequence_parallel: true), as Megatron asserts");
    if (fp.tp_comm_overlap && !fp.transformer_engine)
      r.fail(key,
             "needs Transformer Engine's layers (training.megatron.transformer_impl: transformer_engine), whose "
             "userbuffers it runs on");
  }
  if (m["cp_comm_type"]) {
    const std::string key = "training.megatron.cp_comm_type";
    // megatron/training/arguments.py --cp-comm-type: p2p, a2a, allgather or a2a+p2p, one for all
    // layers here; the context parallelism is Transformer Engine's attention's.
    fp.cp_comm = r.choice(m["cp_comm_type"], key, kCpCommNames);
    if (fp.cp_comm != CpComm::p2p && !fp.transformer_engine)
      r.fail(key, fmt::format("{} runs in Transformer Engine's attention (training.megatron.transformer_impl: "
                              "transformer_engine)",
                              m["cp_comm_type"].Scalar()));
  }
  fp.embedding_in_split = flag("account_for_embedding_in_pipeline_split");
  fp.loss_in_split = flag("account_for_loss_in_pipeline_split");
  // transformer_config.py: not with the explicit first / last stage counts.
  if ((fp.embedding_in_split || fp.loss_in_split) && (fp.first_stage_layers > 0 || fp.last_stage_layers > 0))
    r.fail(accounted_key(fp), "given together with decoder_first/last_pipeline_num_layers",
           "give one of them (as Megatron-core asks)");
}

// Uneven layer counts: the framework's own partition (framework_profile.h).
void apply_partition(const hw::StrictReader& r, Scenario& s) {
  auto& par = s.plan.par;
  const auto& fp = s.framework;
  const bool accounted = fp.embedding_in_split || fp.loss_in_split;
  const bool given = fp.first_stage_layers > 0 || fp.last_stage_layers > 0 || accounted;
  const std::string key = accounted ? accounted_key(fp) : "training.megatron.decoder_first_pipeline_num_layers";
  if (!par.pipeline_layers.empty()) {
    if (given) r.fail(key, "given together with parallel.pipeline_layers", "give one of them");
    return;
  }
  if (s.model.num_layers % (par.pp * par.vpp) == 0 && !given) return;
  if (accounted && par.pp < 2)
    r.fail(key, "needs parallel.pipeline_parallel >= 2 (Megatron-core splits pipeline stages)");
  try {
    // Per virtual stage under interleaving (one chunk per stage otherwise).
    const int vpp = par.schedule == models::Schedule::interleaved_1f1b ? par.vpp : 1;
    par.pipeline_layers = default_partition(fp, s.model, par.pp, vpp);
  } catch (const std::invalid_argument& e) {
    r.fail(given ? key : "parallel.pipeline_parallel", e.what());
  }
}

}  // namespace

void read_framework(const hw::StrictReader& r, const YAML::Node& t, const YAML::Node& parallel, Scenario& s) {
  Framework f = Framework::megatron_core;
  if (t["framework"]) f = r.choice(t["framework"], "training.framework", kFrameworkNames);
  check_sections(r, t, f);
  s.framework = default_profile(f);
  if (f == Framework::deepspeed) read_deepspeed(r, t["deepspeed"], s);
  if (f == Framework::fsdp) read_fsdp(r, t["fsdp"], s);
  if (is_megatron(f)) read_megatron(r, t["megatron"], parallel, s);
  if (t["dp_one_stream"]) s.framework.dp_one_stream = r.boolean(t["dp_one_stream"], "training.dp_one_stream");
  s.plan.par.cp_heads = s.framework.cp_comm == CpComm::a2a;
  if (!is_megatron(f))
    for (const char* key : {"overlap_grad_reduce", "overlap_param_gather"})
      if (parallel && parallel[key])
        r.fail(
            std::string("parallel.") + key, fmt::format("is a Megatron flag; training.framework is {}", to_string(f)),
            f == Framework::deepspeed ? "use training.deepspeed.overlap_comm" : "use training.fsdp.backward_prefetch");
  apply_partition(r, s);
}

}  // namespace ptsim::sim
