#include "models/memory.h"
#include "models/zero3_gathers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "models/ops.h"

namespace ptsim::models {

namespace {

void check_stage(const Parallelism& p, int stage) {
  if (stage < 0 || stage >= p.pp) {
    throw std::invalid_argument(fmt::format("pipeline stage {} out of range [0, {})", stage, p.pp));
  }
}

bool interleaved(const Parallelism& p) {
  if (two_chunk_schedule(p.schedule)) {
    if (p.vpp != 2)
      throw std::invalid_argument(fmt::format("{} holds 2 model chunks per stage, got virtual_pipeline_stages = {}",
                                              to_string(p.schedule), p.vpp));
    return false;
  }
  if (p.vpp > 1 && p.schedule != Schedule::interleaved_1f1b) {
    throw std::invalid_argument(fmt::format(
        "virtual_pipeline_stages = {} needs pipeline_schedule interleaved-1f1b, got {}", p.vpp, to_string(p.schedule)));
  }
  // Megatron-LM runs the interleaved schedule only when virtual stages exist;
  // with vpp = 1 "interleaved-1f1b" is plain 1F1B.
  return p.vpp > 1;
}

double local_vocab(const ModelSpec& m, const Parallelism& p) {
  return std::ceil(static_cast<double>(m.vocab_size) / p.tp);
}

double chunk_activation_bytes(const ModelSpec& m, const Parallelism& p, int stage, int chunk) {
  const LayerRange r = chunk_layers(m, p, stage, chunk);
  double bytes = 0;
  for (int i = r.first; i < r.first + r.count; ++i) bytes += activation_bytes_per_layer(m, p, m.is_moe_layer(i));
  return bytes;
}

// How many of the layers `stage` holds (all its chunks) are dense and how many MoE: every
// per-layer figure here depends on that alone, so each is computed once per kind.
struct LayerKinds {
  std::int64_t dense = 0, moe = 0;
  std::int64_t of(bool moe_layer) const { return moe_layer ? moe : dense; }
};
LayerKinds stage_layer_kinds(const ModelSpec& m, const Parallelism& p, int stage) {
  LayerKinds k;
  for (int c = 0; c < p.vpp; ++c) {
    const LayerRange r = chunk_layers(m, p, stage, c);
    for (int i = r.first; i < r.first + r.count; ++i) (m.is_moe_layer(i) ? k.moe : k.dense) += 1;
  }
  return k;
}

// The sum over the stage's layers of per_layer(moe_layer), a LocalParams.
template <class PerLayer>
LocalParams sum_layers(const LayerKinds& k, PerLayer per_layer) {
  LocalParams out;
  for (const bool moe : {false, true}) {
    if (k.of(moe) == 0) continue;
    const LocalParams l = per_layer(moe);
    out.dense += k.of(moe) * l.dense;
    out.expert += k.of(moe) * l.expert;
  }
  return out;
}

// The largest per_layer(moe_layer) over the stage's layers (T{} when it has none).
template <class PerLayer>
auto max_layers(const LayerKinds& k, PerLayer per_layer) {
  decltype(per_layer(false)) best{};
  for (const bool moe : {false, true})
    if (k.of(moe) > 0) best = std::max(best, per_layer(moe));
  return best;
}

}  // namespace

// ------------------------------------------------------------ model states ---

ModelStates state_bytes_per_param(Precision precision, StateLayout layout) {
  switch (layout) {
    case StateLayout::megatron:
      // Megatron-core distributed-optimizer guide (docs/source/api-guide/
      // dist_optimizer.md), theoretical bytes per parameter: "fp16 parameters,
      // fp16 gradients: 20 | 4 + 16/d"; "bf16 parameters, fp32 gradients: 18 |
      // 6 + 12/d"; "fp32 parameters, fp32 gradients: 16 | 8 + 8/d". The /d part
      // is what the distributed optimizer shards: fp32 main params and Adam m, v,
      // and for fp16 also the fp32 main-grad copy. bf16 grads accumulate in an
      // fp32 buffer (accumulate_allreduce_grads_in_fp32, forced on for bf16).
      // fp8 (Transformer Engine) keeps bf16 weights: the bf16 row.
      // fp16: Float16OptimizerWithFloat16Params (and the distributed optimizer for its
      // shard) creates the fp32 main grads in _copy_model_grads_to_main_grads
      // (`main_param.grad = model_param.main_grad.float()`), and the next train_step's
      // optimizer.zero_grad() sets them to None: they exist during the step only.
      if (precision == Precision::fp32) return {4.0, 4.0, 8.0};
      if (precision == Precision::fp16) return {2.0, 2.0, 12.0, 4.0};
      return {2.0, 4.0, 12.0};
    case StateLayout::deepspeed:
      // ZeRO (Rajbhandari et al. SC'20) §3.1: mixed-precision Adam keeps fp16/bf16
      // weights and gradients (2 + 2 bytes) and K = 12 bytes of fp32 master
      // weights, momentum and variance. fp32 training: 4-byte weights and
      // gradients, Adam's m and v (8 bytes), no separate master copy.
      if (precision == Precision::fp32) return {4.0, 4.0, 8.0};
      return {2.0, 2.0, 12.0};
    case StateLayout::fsdp:
      // PyTorch FSDP (FlatParameter): the sharded flat parameter keeps the
      // original fp32 dtype and is what the optimizer steps; with
      // MixedPrecision(param_dtype=bf16) only the all-gathered unit is bf16, and
      // the reduced gradient shard is cast back to fp32. m and v in fp32.
      return {4.0, 4.0, 8.0};
  }
  return {4.0, 4.0, 8.0};  // unreachable: every layout returns above
}

ModelStates zero_model_state_bytes(double psi, int dp, int stage, Precision precision, StateLayout layout) {
  if (dp < 1) throw std::invalid_argument(fmt::format("data-parallel size must be >= 1, got {}", dp));
  if (stage < 0 || stage > 3) throw std::invalid_argument(fmt::format("zero_stage must be 0..3, got {}", stage));
  if (psi < 0) throw std::invalid_argument(fmt::format("parameter count must be >= 0, got {}", psi));
  const ModelStates per = state_bytes_per_param(precision, layout);
  const double n = dp;
  // ZeRO §5: P_os shards the optimizer state, P_os+g also the gradients,
  // P_os+g+p also the parameters, each 1/N_d per GPU.
  ModelStates s;
  s.optimizer = psi * per.optimizer / (stage >= 1 ? n : 1.0);
  s.step = psi * per.step / (stage >= 1 ? n : 1.0);
  s.grads = psi * per.grads / (stage >= 2 ? n : 1.0);
  s.params = psi * per.params / (stage >= 3 ? n : 1.0);
  return s;
}

bool per_virtual_stage(const Parallelism& p) {
  return p.schedule == Schedule::interleaved_1f1b && p.vpp > 1 &&
         static_cast<int>(p.pipeline_layers.size()) == p.pp * p.vpp;
}

std::vector<int> layers_per_stage(const ModelSpec& m, const Parallelism& p) {
  if (p.pp < 1) throw std::invalid_argument(fmt::format("pipeline_parallel must be >= 1, got {}", p.pp));
  if (!p.pipeline_layers.empty()) {
    const auto n = static_cast<int>(p.pipeline_layers.size());
    const bool virt = per_virtual_stage(p);
    if (n != p.pp && !virt) {
      throw std::invalid_argument(fmt::format("pipeline_layers has {} entries, pipeline_parallel is {}{}", n, p.pp,
                                              p.vpp > 1 ? fmt::format(" (or {} virtual stages)", p.pp * p.vpp) : ""));
    }
    const int sum = std::accumulate(p.pipeline_layers.begin(), p.pipeline_layers.end(), 0);
    for (int i = 0; i < n; ++i) {
      // Only the very first and very last (virtual) stage may hold no layer: they still
      // hold the embedding / the head (Megatron-core's account_for_*_in_pipeline_split).
      // A whole stage of several chunks may not (its later chunks would be empty).
      const int least = (i == 0 || i == n - 1) && (virt || p.vpp == 1) ? 0 : 1;
      if (p.pipeline_layers[i] < least)
        throw std::invalid_argument(fmt::format("pipeline_layers entry {} must be >= {}", p.pipeline_layers[i], least));
    }
    if (sum != m.num_layers) {
      throw std::invalid_argument(
          fmt::format("pipeline_layers sum to {}, model '{}' has {} layers", sum, m.name, m.num_layers));
    }
    if (!virt) return p.pipeline_layers;
    std::vector<int> out(static_cast<std::size_t>(p.pp), 0);
    for (int i = 0; i < n; ++i) out[static_cast<std::size_t>(i % p.pp)] += p.pipeline_layers[i];
    return out;
  }
  if (m.num_layers % p.pp != 0) {
    throw std::invalid_argument(
        fmt::format("num_layers {} of model '{}' is not divisible by pipeline_parallel {}; "
                    "give pipeline_layers",
                    m.num_layers, m.name, p.pp));
  }
  return std::vector<int>(static_cast<std::size_t>(p.pp), m.num_layers / p.pp);
}

LayerRange chunk_layers(const ModelSpec& m, const Parallelism& p, int stage, int chunk) {
  check_stage(p, stage);
  if (chunk < 0 || chunk >= p.vpp) {
    throw std::invalid_argument(fmt::format("model chunk {} out of range [0, {})", chunk, p.vpp));
  }
  const std::vector<int> per_stage = layers_per_stage(m, p);
  interleaved(p);  // checks vpp against the schedule
  if (p.schedule == Schedule::dualpipe) {
    // DualPipe (DeepSeek-V3 §3.2.1): two copies of the pp-stage model, one per
    // direction; chunk 0 is stage `stage` of the first copy, chunk 1 stage
    // pp − 1 − stage of the second.
    const int owner = chunk == 0 ? stage : p.pp - 1 - stage;
    LayerRange out;
    for (int r = 0; r < owner; ++r) out.first += per_stage[r];
    out.count = per_stage[owner];
    return out;
  }
  if (per_virtual_stage(p)) {  // the given counts, in virtual-stage order
    LayerRange out;
    const int v = chunk * p.pp + stage;
    for (int i = 0; i < v; ++i) out.first += p.pipeline_layers[static_cast<std::size_t>(i)];
    out.count = p.pipeline_layers[static_cast<std::size_t>(v)];
    return out;
  }
  for (int r = 0; r < p.pp; ++r) {
    if (per_stage[r] % p.vpp != 0) {
      throw std::invalid_argument(
          fmt::format("stage {} has {} layers, not divisible by virtual_pipeline_stages {}", r, per_stage[r], p.vpp));
    }
  }
  if (p.schedule == Schedule::zb_v) {
    // ZB-V: virtual stage `stage` (chunk 0) down the pipeline, then 2·pp − 1 −
    // stage (chunk 1) back up: stage 0 holds the first and the last layers.
    LayerRange out;
    for (int r = 0; r < p.pp; ++r) out.first += per_stage[r] / 2;  // past the down leg
    if (chunk == 0) {
      out.first = 0;
      for (int r = 0; r < stage; ++r) out.first += per_stage[r] / 2;
    } else {
      for (int r = p.pp - 1; r > stage; --r) out.first += per_stage[r] / 2;
    }
    out.count = per_stage[stage] / 2;
    return out;
  }
  // Virtual stages in model order: (chunk 0: stages 0..pp−1), (chunk 1: ...), ...
  LayerRange out;
  for (int c = 0; c <= chunk; ++c) {
    for (int r = 0; r < p.pp; ++r) {
      const int n = per_stage[r] / p.vpp;
      if (c == chunk && r == stage) {
        out.count = n;
        return out;
      }
      out.first += n;
    }
  }
  return out;  // unreachable: the loop returns at (chunk, stage)
}

int forward_chunk(const Parallelism& p, int k) {
  if (k < 0) throw std::invalid_argument(fmt::format("forward index must be >= 0, got {}", k));
  if (!interleaved(p)) return 0;
  // Megatron-core's schedule table (schedules.py get_model_chunk_id, forward): groups of
  // microbatch_group_size_per_vp_stage (default pp) micro-batches run chunk 0, then 1, ...
  const int m = std::max(1, p.num_microbatches);
  return models::interleaved_slot(m, p.vpp, microbatch_group_size(p), k % (m * p.vpp)).chunk;
}

bool holds_embedding(const Parallelism& p, int stage, int chunk) {
  if (p.schedule == Schedule::dualpipe) return (chunk == 0 && stage == 0) || (chunk == 1 && stage == p.pp - 1);
  return stage == 0 && chunk == 0;
}

bool holds_head(const Parallelism& p, int stage, int chunk) {
  if (p.schedule == Schedule::dualpipe) return (chunk == 0 && stage == p.pp - 1) || (chunk == 1 && stage == 0);
  if (p.schedule == Schedule::zb_v) return stage == 0 && chunk == 1;
  return stage == p.pp - 1 && chunk == p.vpp - 1;
}

std::int64_t embedding_block_params(const ModelSpec& m, const Parallelism& p) {
  const auto word = static_cast<std::int64_t>(local_vocab(m, p)) * m.hidden_size;  // vocab-parallel
  // Learned positions are replicated on every TP rank (Megatron Embedding).
  return word + (m.learned_position_embeddings ? std::int64_t{m.seq_length} * m.hidden_size : 0);
}

namespace {
// A stage's parameters on one GPU beyond its transformer layers.
double non_layer_params(const ModelSpec& m, const Parallelism& p, int stage) {
  double layers = 0;
  for (int c = 0; c < p.vpp; ++c) {
    const LayerRange r = chunk_layers(m, p, stage, c);
    for (int l = r.first; l < r.first + r.count; ++l)
      layers += static_cast<double>(layer_params_per_gpu(m, p.tp, p.ep, m.is_moe_layer(l), p.etp).total());
  }
  return static_cast<double>(stage_params(m, p, stage).total()) - layers;
}
}  // namespace

double embedding_params_held(const ModelSpec& m, const Parallelism& p) {
  if (two_chunk_schedule(p.schedule)) return static_cast<double>(embedding_block_params(m, p));
  return p.pp == 1 ? 0.0 : non_layer_params(m, p, 0);
}

double head_params_held(const ModelSpec& m, const Parallelism& p, int stage, int chunk) {
  if (two_chunk_schedule(p.schedule)) return static_cast<double>(head_block_params(m, p, stage, chunk));
  return non_layer_params(m, p, p.pp - 1);
}

std::int64_t head_block_params(const ModelSpec& m, const Parallelism& p, int stage, int chunk) {
  const auto word = static_cast<std::int64_t>(local_vocab(m, p)) * m.hidden_size;
  const std::int64_t norm = m.norm == Norm::layernorm ? 2 * m.hidden_size : m.hidden_size;  // final norm
  // Untied: the output layer. Tied: shared with the embedding of the same model
  // copy when this stage holds it (pp = 1; ZB-V's stage 0), else Megatron-LM keeps
  // a copy of the word embedding and all-reduces its gradient with the embedding's
  // stage. DualPipe's two copies each have their own.
  bool shares = false;
  for (int c = 0; c < p.vpp; ++c)
    if (holds_embedding(p, stage, c) && (p.schedule != Schedule::dualpipe || c == chunk)) shares = true;
  return norm + (m.untie_embeddings || !shares ? word : 0);
}

LocalParams stage_params(const ModelSpec& m, const Parallelism& p, int stage) {
  check_stage(p, stage);
  LocalParams out = sum_layers(stage_layer_kinds(m, p, stage),
                               [&](bool moe) { return layer_params_per_gpu(m, p.tp, p.ep, moe, p.etp); });
  for (int c = 0; c < p.vpp; ++c) {
    if (holds_embedding(p, stage, c)) out.dense += embedding_block_params(m, p);
    if (holds_head(p, stage, c)) out.dense += head_block_params(m, p, stage, c);
  }
  return out;
}

LocalParams trainable_layer_params(const ModelSpec& m, const Parallelism& p, bool moe_layer) {
  if (p.finetune.active()) return adapter_params_per_gpu(m, p.finetune, p.tp, p.ep, moe_layer, p.etp);
  return layer_params_per_gpu(m, p.tp, p.ep, moe_layer, p.etp);
}

LocalParams trainable_stage_params(const ModelSpec& m, const Parallelism& p, int stage) {
  if (!p.finetune.active()) return stage_params(m, p, stage);
  check_stage(p, stage);
  // Embedding, final norm and output layer stay frozen (LoRA §4: only the
  // adapted matrices train).
  return sum_layers(stage_layer_kinds(m, p, stage), [&](bool moe) { return trainable_layer_params(m, p, moe); });
}

ModelStates model_states(const ModelSpec& m, const Parallelism& p, int stage) {
  check_sharding(m, p);
  if (p.offload_params && p.zero_stage != 3) {
    throw std::invalid_argument(
        fmt::format("offload_params needs zero_stage 3 (ZeRO-Infinity), got zero_stage {}", p.zero_stage));
  }
  const LocalParams lp = stage_params(m, p, stage);
  // Megatron-core shards the distributed optimizer over the data-parallel group
  // including context parallelism (dp·cp ranks hold the same weights); expert
  // weights over the expert-data-parallel group dp·cp/ep (tp·cp·dp / (etp·ep) under
  // MoE parallel folding).
  const int n_dense = p.dp * p.cp;
  const int n_expert = p.expert_dp();
  const LocalParams trained = trainable_stage_params(m, p, stage);
  const ModelStates d =
      zero_model_state_bytes(static_cast<double>(trained.dense), n_dense, p.zero_stage, p.precision, p.state_layout);
  const ModelStates e =
      zero_model_state_bytes(static_cast<double>(trained.expert), n_expert, p.zero_stage, p.precision, p.state_layout);
  ModelStates s{d.params + e.params, d.grads + e.grads, d.optimizer + e.optimizer, d.step + e.step};
  if (p.bf16_optimizer) {
    // DeepSpeed's BF16_Optimizer (bf16_optimizer.py): the bf16 gradients (2 bytes)
    // and an unsharded fp32 copy they are added into (fp32_groups_gradients, 4); the
    // fp32 master weights and Adam m, v (12) partitioned over the data-parallel ranks.
    const auto dense = static_cast<double>(trained.dense), expert = static_cast<double>(trained.expert);
    s.grads = 6.0 * (dense + expert);
    s.optimizer = 12.0 * (dense / n_dense + expert / n_expert);
  }
  if (p.finetune.active()) {
    // LoRA / QLoRA: the frozen base weights are held without gradient or
    // optimizer state, in the weight dtype, or NF4 for the linear layers' weights
    // (QLoRA §3; norms, biases, embeddings and the output layer stay 16-bit).
    // ZeRO-3 shards them like any parameter.
    const LocalParams linear = sum_layers(stage_layer_kinds(m, p, stage),
                                          [&](bool moe) { return linear_weights_per_gpu(m, p.tp, p.ep, moe, p.etp); });
    const double wb = activation_element_bytes(p.precision);
    const double lin_b = base_bytes_per_param(p.finetune, wb);
    const double dense = static_cast<double>(lp.dense - linear.dense) * wb + static_cast<double>(linear.dense) * lin_b;
    const double expert =
        static_cast<double>(lp.expert - linear.expert) * wb + static_cast<double>(linear.expert) * lin_b;
    const bool shard = p.zero_stage >= 3;
    s.params += dense / (shard ? n_dense : 1) + expert / (shard ? n_expert : 1);
  }
  // ZeRO-Offload (Ren et al. 2021): the optimizer state and step live in CPU
  // memory. ZeRO-Infinity parameter offload: the parameter shards live in CPU
  // memory; only the gathered layers (buffer_bytes) occupy the GPU.
  if (p.offload_optimizer) s.optimizer = s.step = 0;
  if (p.offload_params) s.params = 0;
  return s;
}

// ----------------------------------------------------------- activations ---

// Korthikanti et al. 2022 (arXiv 2205.05198) §4.1 decomposes the 34·s·b·h bytes
// of a GPT layer (2-byte activations, 1-byte dropout masks) as:
//   attention: LN1 input 2sbh, QKV input 2sbh, Q and K 4sbh, V 2sbh,
//              softmax 2as²b, dropout mask as²b, dropout output 2as²b,
//              projection input 2sbh, dropout mask sbh   = 11sbh + 5as²b
//   MLP:       LN2 input 2sbh, up input 2sbh, up output 8sbh, GeLU output 8sbh,
//              dropout mask sbh                          = 19sbh (+ 2 LN = 4sbh counted above)
// With tensor parallelism the Q, K, V, projection input, up output and GeLU
// output (24sbh) and the scores are split by t; the rest (10sbh) is replicated
// (Table 2: sbh(10 + 24/t + 5as/(ht))); sequence parallelism splits the 10sbh
// too (sbh/t·(34 + 5as/h)). Selective recompute drops the 5as²b score terms;
// full recompute keeps only the layer input, 2sbh (/t with SP).
// Generalisations here, element size e (2 bytes; 4 for fp32), masks 1 byte:
//   GQA: Q, K, V = e·sb·(a·d + 2·g·d)/t; projection input e·sb·a·d/t.
//   MLP: GeLU keeps up output + activation output = 2·e·sb·ffn/t;
//        SwiGLU keeps gate+up output (2·ffn) + activation output = 3·e·sb·ffn/t.
//   MoE: router probabilities in fp32 (4·sb·E, replicated part), and per routed
//        token copy (T·top_k·load on this GPU): its dispatched input e·h, the
//        expert MLP tensors as above with the expert ffn, and what the routing weight's
//        gradient needs: where the combine weights the expert output (DeepSpeed's
//        MOELayer einsum, Megatron-core until the weights moved into the experts), that
//        output, e·h; Megatron-core's experts weight the activation instead
//        (p.moe_probs_in_experts: experts.py bias_act_func, mlp.py per_token_scale), in
//        the fused weighted SwiGLU kernel (nothing more saved) or, unfused (GeLU, or
//        --no-bias-swiglu-fusion), as activation × fp32 probabilities, which saves the
//        activation output, e·ffn; shared experts as a dense MLP of shared·ffn.
//   Flash attention stores no s×s tensor: the 5as²b term disappears (its fp32
//   log-sum-exp, 4·a·s·b/t bytes, is < 0.1 % of the layer and left out, so flash
//   equals the selective row, as Korthikanti note for FlashAttention).
//   Context parallelism: s → s/cp for every term; naive scores s/cp × s.
// Dropout masks are counted when the dropout probability is above 0 (Megatron's
// hidden_dropout and attention_dropout default 0.1); at 0, PyTorch's dropout returns its
// input and saves nothing (aten Dropout.cpp), so a Llama-style model without dropout keeps
// neither the two hidden masks nor, with naive attention, the score mask and the
// dropout output (its softmax output is what P·V reads).
// LoRA adapters save what their GEMMs need beyond the base layer's tensors: the
// input x of A is the (already saved) input of the adapted weight; the r-wide
// output of A, x·A, is saved for B's weight gradient: e·rows·r per adapter (the
// routed rows of each local expert for expert MLPs). The base layer's own saved
// tensors are kept unchanged (PyTorch saves a frozen linear's input whenever the
// adapter shares it).
double lora_activation_bytes(const ModelSpec& m, const Parallelism& p, bool moe_layer) {
  const FinetuneSpec& ft = p.finetune;
  if (!ft.active()) return 0.0;
  const double e = activation_element_bytes(p.precision);
  const double tokens = p.micro_batch_size * static_cast<double>(m.seq_length) / p.cp;
  const double r = ft.rank;
  double rows = 0;  // token rows through adapters, summed over targets
  if (ft.targets_any(kLoraQkv)) rows += tokens;
  if (ft.targets_any(kLoraProj)) rows += tokens;
  const int mlp_targets = (ft.targets_any(kLoraFc1) ? 1 : 0) + (ft.targets_any(kLoraFc2) ? 1 : 0);
  if (!moe_layer) {
    rows += mlp_targets * tokens;
  } else {
    const double routed = moe_tokens_per_expert(m, p) * (m.moe->num_experts / p.ep);
    rows += mlp_targets * routed;
    if (m.moe->shared_experts > 0) rows += mlp_targets * tokens;
  }
  return e * rows * r;
}

double activation_bytes_per_layer(const ModelSpec& m, const Parallelism& p, bool moe_layer) {
  check_sharding(m, p);
  const double e = activation_element_bytes(p.precision);
  const double t = p.tp;
  const double s_local = static_cast<double>(m.seq_length) / p.cp;
  const double tokens = p.micro_batch_size * s_local;  // s·b on this GPU
  const double h = static_cast<double>(m.hidden_size);
  const double sbh = tokens * h;
  const double rep = p.sequence_parallel ? 1.0 / t : 1.0;  // factor on the replicated part
  if (p.recompute == Recompute::full) return e * sbh * rep;

  const double d = static_cast<double>(m.head_dim());
  const double a = m.num_attention_heads;
  const double g = m.num_query_groups;
  // Replicated part: LN1 in, QKV in, LN2 in, MLP in (4e) + two dropout masks (2).
  const double hidden_masks = m.hidden_dropout > 0 ? 2.0 : 0.0;
  double bytes = sbh * rep * (4.0 * e + hidden_masks);
  bytes += e * tokens * (a * d + 2.0 * g * d) / t;  // Q, K, V
  bytes += e * tokens * a * d / t;                  // projection input
  if (p.attention == AttentionImpl::naive && p.recompute == Recompute::none) {
    // softmax (e) + dropout mask (1) + dropout output (e) per score; softmax alone
    // without attention dropout. Megatron's unfused softmax in fp32 (FusedScaleMaskSoftmax
    // forward_torch_softmax: input.float(), torch softmax, then the cast back) saves the
    // fp32 probabilities for its backward: 4 bytes instead of e.
    const double softmax = p.fp32_softmax_saved ? 4.0 : e;
    const double per_score = m.attention_dropout > 0 ? softmax + 1.0 + e : softmax;
    bytes += p.micro_batch_size * (a / t) * s_local * static_cast<double>(m.seq_length) * per_score;
  }
  const double mlp_per_ffn = m.mlp == Mlp::swiglu ? 3.0 * e : 2.0 * e;
  bytes += lora_activation_bytes(m, p, moe_layer);
  if (!moe_layer) {
    bytes += tokens * mlp_per_ffn * static_cast<double>(m.ffn_hidden_size) / t;
    return bytes;
  }
  const MoeSpec& moe = *m.moe;
  const double ffn_e = static_cast<double>(moe.ffn_hidden_size) / p.expert_tp();
  bytes += 4.0 * tokens * rep * moe.num_experts;  // router probabilities (fp32)
  const double routed = moe_tokens_per_expert(m, p) * (moe.num_experts / p.ep);
  const double weighting = !p.moe_probs_in_experts ? e * h : p.moe_fused_weighted_act ? 0.0 : e * ffn_e;
  bytes += routed * (e * h + mlp_per_ffn * ffn_e + weighting);  // dispatched input, MLP, routing weight
  if (moe.shared_experts > 0)
    bytes += tokens * mlp_per_ffn * moe.shared_experts * static_cast<double>(moe.ffn_hidden_size) / t;
  return bytes;
}

double embedding_activation_bytes(const ModelSpec& m, const Parallelism& p) {
  check_sharding(m, p);
  // The embedding output goes through dropout: its 1-byte mask is saved (the
  // output itself is the first layer's input, counted there); none without dropout.
  if (m.hidden_dropout <= 0) return 0.0;
  const double tokens = p.micro_batch_size * static_cast<double>(m.seq_length) / p.cp;
  const double rep = p.sequence_parallel ? 1.0 / p.tp : 1.0;
  return tokens * static_cast<double>(m.hidden_size) * rep;
}

double head_activation_bytes(const ModelSpec& m, const Parallelism& p) {
  check_sharding(m, p);
  const double e = activation_element_bytes(p.precision);
  const double tokens = p.micro_batch_size * static_cast<double>(m.seq_length) / p.cp;
  const double rep = p.sequence_parallel ? 1.0 / p.tp : 1.0;
  const double sbh = tokens * static_cast<double>(m.hidden_size);
  const double vocab = local_vocab(m, p);
  // Final-norm input and logits-GEMM input (SP keeps the sharded copy and
  // re-gathers in backward, Korthikanti §4.2.2); Megatron's
  // vocab_parallel_cross_entropy saves the fp32 softmax (s·b·V/t·4) and its
  // backward turns it into the logits gradient (s·b·V/t·e), both live at once. A
  // fused loss kernel (flash-attn's cross entropy) saves the logits themselves and
  // writes the gradient beside them (2e).
  const double per_logit = p.loss_kernel == LossKernel::fused ? 2.0 * e : 4.0 + e;
  return 2.0 * e * sbh * rep + tokens * vocab * per_logit;
}

double deferred_head_wgrad_bytes(const ModelSpec& m, const Parallelism& p) {
  if (!p.defer_head_wgrad) return 0.0;
  // Megatron (tensor_parallel/layers.py): the output layer's forward appends its input
  // (input_parallel, the sequence-parallel shard under SP) to embedding_activation_buffer
  // and its backward the logits gradient (grad_output) to grad_output_buffer, skipping the
  // weight gradient, while the buffer holds fewer than wgrad_deferral_limit (0: no limit);
  // finish_embedding_wgrad_compute drains both after the schedule (schedules.py).
  const int m_count = p.num_microbatches;
  const int deferred = std::min(p.wgrad_deferral_limit > 0 ? p.wgrad_deferral_limit : m_count, m_count - 1);
  if (deferred <= 0) return 0.0;
  const double e = activation_element_bytes(p.precision);
  const double tokens = p.micro_batch_size * static_cast<double>(m.seq_length) / p.cp;
  const double rep = p.sequence_parallel ? 1.0 / p.tp : 1.0;
  return deferred * e * tokens * (static_cast<double>(m.hidden_size) * rep + local_vocab(m, p));
}

double recompute_working_set_bytes(const ModelSpec& m, const Parallelism& p, bool moe_layer) {
  if (p.recompute == Recompute::none) return 0.0;
  // Full: Megatron's CheckpointFunction re-runs the layer's forward under
  // enable_grad right before its backward (tensor_parallel/random.py), so every
  // tensor the plain forward saves exists again until that backward ends.
  // Selective: the checkpointed core attention re-creates its scores, softmax
  // and dropout (Korthikanti §5: the 5as²b term), which the naive kernel saves
  // and FlashAttention never materialises.
  Parallelism plain = p;
  plain.recompute = Recompute::none;
  return activation_bytes_per_layer(m, plain, moe_layer) - activation_bytes_per_layer(m, p, moe_layer);
}

// ---------------------------------------------------------------- pipeline ---

int in_flight_microbatch_chunks(const Parallelism& p, int stage) {
  check_stage(p, stage);
  if (p.num_microbatches < 1) {
    throw std::invalid_argument(fmt::format("num_microbatches must be >= 1, got {}", p.num_microbatches));
  }
  const int m = p.num_microbatches;
  if (p.schedule == Schedule::gpipe) {
    if (p.vpp > 1) throw std::invalid_argument(fmt::format("gpipe has no virtual stages, got {}", p.vpp));
    return m;  // GPipe (Huang et al. 2019): all forwards before any backward
  }
  if (!interleaved(p)) {
    // 1F1B (PipeDream-Flush; Megatron forward_backward_pipelining_without_
    // interleaving): min(pp − rank − 1, m) warm-up forwards + 1 in steady state.
    return std::min(m, p.pp - stage);
  }
  // Megatron-core forward_backward_pipelining_with_interleaving (schedules.py
  // get_pp_rank_microbatches): warm-up forwards (pp − rank − 1)·2 + (vpp − 1)·N, N the
  // micro-batch group (microbatch_group_size_per_vp_stage, default pp), capped at m·vpp
  // (then all forwards run first); one more forward runs before the first backward
  // frees anything. (2021 Megatron-LM also ran every forward first when m == pp;
  // Megatron-core dropped that case.)
  const int total = m * p.vpp;
  const int warmup = (p.pp - stage - 1) * 2 + (p.vpp - 1) * microbatch_group_size(p);
  return std::min(total, warmup + 1);
}

// ------------------------------------------------------------------ buffers ---

double dp_bucket_params(int dp) { return std::max(40'000'000.0, 1'000'000.0 * dp); }

double buffer_bytes(const ModelSpec& m, const Parallelism& p, int stage) {
  check_sharding(m, p);
  check_stage(p, stage);
  const double e = activation_element_bytes(p.precision);
  const double tokens = p.micro_batch_size * static_cast<double>(m.seq_length) / p.cp;
  const double h = static_cast<double>(m.hidden_size);
  const double rep = p.sequence_parallel ? 1.0 / p.tp : 1.0;
  const LocalParams lp = stage_params(m, p, stage);
  double bytes = 0;

  const int dp = p.dp * p.cp;
  if (p.state_layout == StateLayout::deepspeed && (p.zero_stage >= 1 || p.bf16_optimizer) && dp > 1) {
    // DeepSpeed ZeRO-1/2 (stage_1_and_2.py): gradients are copied into an
    // independent-partition bucket of reduce_bucket_size elements in the gradient
    // dtype before each reduce; never more than the stage's parameters. The
    // BF16_Optimizer's all-reduce flattens its fp32 gradients into buffers of
    // MEMORY_OPT_ALLREDUCE_SIZE (5e8, the same figure) elements.
    bytes += (p.bf16_optimizer ? 4.0 : state_bytes_per_param(p.precision, p.state_layout).grads) *
             std::min(kDeepSpeedReduceBucket, static_cast<double>(trainable_stage_params(m, p, stage).total()));
  }
  // Megatron-core reduce-scatters and all-gathers in place in its contiguous grad
  // and param buffers (dist_optimizer.md: "contiguous buffers for parameters and
  // main gradients"): no staging copy. FSDP: see the ZeRO-3 block below.
  // PyTorch's cuBLAS workspaces: every cuBLAS call gets its (handle, stream)'s workspace,
  // taken from the caching allocator the first time and held (CublasHandlePool.cpp
  // setWorkspaceForHandle / getNewWorkspace; pytorch issue #95668: one Linear forward leaves
  // 8,519,680 B allocated). A thread reserves its own handle (DeviceThreadHandlePool), and
  // the forward runs on the Python thread, the backward on autograd's thread for the device
  // (torch/csrc/autograd/engine.cpp): two workspaces on the compute stream.
  bytes += 2.0 * p.blas_workspace;
  // Transformer Engine's GEMMs run on its own workspaces (get_workspace, one tensor; the
  // grouped GEMMs' multi-stream ones), beside PyTorch's.
  bytes += p.te_workspace;
  // --tp-comm-overlap: Transformer Engine's userbuffers, allocated once at start-up.
  bytes += p.te_userbuffers;
  // Megatron-core's local attention computes QK^T into a buffer of Megatron's
  // GlobalMemoryBuffer (megatron/core/transformer/dot_product_attention.py:
  // get_global_memory_buffer().get_tensor((b·np, sq, sk), dtype, "mpu")), kept from step to
  // step; Transformer Engine's unfused attention allocates its scores per call.
  if (p.score_buffer && p.attention == AttentionImpl::naive)
    bytes += e * p.micro_batch_size * static_cast<double>(m.num_attention_heads / p.tp) *
             (static_cast<double>(m.seq_length) / p.cp) * static_cast<double>(m.seq_length);
  // Pipeline p2p: one received activation (forward) and one received gradient
  // (backward) of shape s/cp × b × h (/tp with SP: Megatron's scatter-gather).
  if (p.pp > 1) bytes += 2.0 * e * tokens * h * rep;
  // Sequence parallel: the all-gathered layer input lives in Megatron's
  // GlobalMemoryBuffer (core/utils.py), one s/cp × b × h tensor. The MoE all-gather
  // dispatcher gathers into the same buffer ("mpu") the tokens of the tensor-and-expert-
  // parallel group, ep times as many (token_dispatcher.py: use_global_buffer=True), and the
  // buffer keeps the largest size asked of it.
  double gathered = p.sequence_parallel && p.tp > 1 ? e * tokens * h : 0.0;
  if (p.moe_allgather && m.moe && (p.tp > 1 || p.ep > 1)) {
    const double held = p.sequence_parallel ? tokens * p.expert_tp() / p.tp : tokens;
    gathered = std::max(gathered, e * held * p.ep * h);
  }
  bytes += gathered;

  const LayerKinds layers = stage_layer_kinds(m, p, stage);
  // ZeRO-3: the gathered parameters, as many as the framework holds at once (the current
  // layer's and the prefetched next one's, DeepSpeed's submodules within its prefetch bucket,
  // FSDP's SHARD_GRAD_OP the whole forward's; models/zero3_gathers.h).
  if (p.zero_stage == 3 || p.offload_params) {
    const std::int64_t largest =
        max_layers(layers, [&](bool moe) { return layer_params_per_gpu(m, p.tp, p.ep, moe, p.etp).total(); });
    // The gathered copy is in the compute dtype (bf16/fp16; fp32 in fp32 training).
    const double gathered = activation_element_bytes(p.precision);
    bytes += zero3_gathered_peak(m, p, stage);
    // FSDP: the unit's unsharded gradient (param dtype) lives until its
    // reduce-scatter has produced the fp32 shard (FlatParamHandle, _post_backward), and
    // beside it, when reduce_dtype differs, its cast copy that the reduce-scatter reads
    // (_runtime_utils.py _post_backward_hook: `flat_param.grad.to(reduce_dtype)`, the
    // original kept for the post-backward stream by record_stream).
    if (p.state_layout == StateLayout::fsdp) {
      bytes += gathered * static_cast<double>(largest);
      if (p.fsdp_reduce_bytes > 0 && p.fsdp_reduce_bytes != gathered)
        bytes += p.fsdp_reduce_bytes * static_cast<double>(largest);
    }
  }
  // QLoRA: each layer's NF4 weights are dequantised to a transient 16-bit copy
  // for its GEMMs (bitsandbytes dequantize_4bit in forward and again for the
  // input gradient); one layer's worth is live at a time.
  if (p.finetune.nf4()) {
    const std::int64_t largest =
        max_layers(layers, [&](bool moe) { return linear_weights_per_gpu(m, p.tp, p.ep, moe, p.etp).total(); });
    bytes += activation_element_bytes(p.precision) * static_cast<double>(largest);
  }
  return bytes;
}

// The largest transient gradient the layer's backward materialises: the MLP
// up-projection output gradient, the naive-attention score gradient, or the fp32 dQ
// accumulator of FlashAttention-2's backward.
double backward_transient_bytes(const ModelSpec& m, const Parallelism& p, bool moe_layer) {
  const double e = activation_element_bytes(p.precision);
  const double tokens = p.micro_batch_size * static_cast<double>(m.seq_length) / p.cp;
  const double heads = static_cast<double>(m.num_attention_heads / p.tp);
  double transient = p.attention == AttentionImpl::naive ? e * heads * tokens * static_cast<double>(m.seq_length)
                                                         : 4.0 * tokens * heads * static_cast<double>(m.head_dim());
  const double up = m.mlp == Mlp::swiglu ? 2.0 : 1.0;
  if (!moe_layer) return std::max(transient, e * tokens * up * static_cast<double>(m.ffn_hidden_size) / p.tp);
  const double routed = moe_tokens_per_expert(m, p) * (m.moe->num_experts / p.ep);
  return std::max(transient, e * routed * up * static_cast<double>(m.moe->ffn_hidden_size) / p.expert_tp());
}

double backward_working_set_bytes(const ModelSpec& m, const Parallelism& p, bool moe_layer) {
  return recompute_working_set_bytes(m, p, moe_layer) + backward_transient_bytes(m, p, moe_layer);
}

// ---------------------------------------------------------------- summary ---

double reserved_bytes(const Parallelism& p, double allocated) {
  if (!(p.allocator_overhead >= 0.0)) {
    throw std::invalid_argument(fmt::format("allocator_overhead must be >= 0, got {}", p.allocator_overhead));
  }
  return allocated * (1.0 + p.allocator_overhead);
}

// Consistent with what the simulator allocates: static model states from the
// start; on each forward of a (micro-batch, chunk) the chunk's layers'
// activations (+ the embedding activation for chunk 0 of stage 0, + the head
// activation for the last chunk of the last stage, freed right after the head's
// backward), freed at its backward; during each layer's backward its recompute
// working set and largest transient; the buffers held throughout. A stage's peak is
// reached with the most forwards in flight, in_flight_microbatch_chunks, which are the
// first ones of the schedule (their chunks given by forward_chunk), plus the backward
// working set of the backward that follows them; the allocator gap scales the sum.
std::vector<StageMemory> analytical_memory(const ModelSpec& m, const Parallelism& p,
                                           const std::vector<double>* activations_at_peak) {
  check_sharding(m, p);
  if (splits_backward(p.schedule) && (!activations_at_peak || static_cast<int>(activations_at_peak->size()) != p.pp))
    throw std::invalid_argument(fmt::format(
        "{}: the activations in flight follow the schedule's steps; give them per stage (sim/core/schedule_memory.h)",
        to_string(p.schedule)));
  std::vector<StageMemory> out;
  const double emb = embedding_activation_bytes(m, p);
  const double head = head_activation_bytes(m, p);
  for (int stage = 0; stage < p.pp; ++stage) {
    StageMemory sm;
    sm.stage = stage;
    const ModelStates ms = model_states(m, p, stage);
    sm.params = ms.params;
    sm.grads = ms.grads;
    sm.optimizer = ms.optimizer;
    std::vector<double> chunk_bytes(static_cast<std::size_t>(p.vpp));
    for (int c = 0; c < p.vpp; ++c) chunk_bytes[c] = chunk_activation_bytes(m, p, stage, c);
    const int in_flight = activations_at_peak ? 0 : in_flight_microbatch_chunks(p, stage);
    if (activations_at_peak) sm.activations = (*activations_at_peak)[static_cast<std::size_t>(stage)];
    for (int k = 0; k < in_flight; ++k) {
      const int c = forward_chunk(p, k);
      sm.activations += chunk_bytes[c];
      if (stage == 0 && c == 0) sm.activations += emb;
      if (stage == p.pp - 1 && c == p.vpp - 1) sm.activations += head;
    }
    // The first backward after the in-flight forwards re-creates one layer's
    // recompute working set on top of them, beside its largest transient gradient. On
    // the last stage the head's backward comes first and its activation is freed before
    // the layers' backward: the working set then adds only what exceeds one head.
    const double working_set =
        max_layers(stage_layer_kinds(m, p, stage), [&](bool moe) { return backward_working_set_bytes(m, p, moe); });
    // (With the backward split, the peak comes before a W, after the B that freed
    // its working set: a B's working set sits on top of what the steps before it hold,
    // which the per-stage figure then already counts.)
    const bool head_here = stage == p.pp - 1;
    if (!activations_at_peak) sm.activations += head_here ? std::max(0.0, working_set - head) : working_set;
    if (head_here && !splits_backward(p.schedule)) sm.activations += deferred_head_wgrad_bytes(m, p);
    sm.buffers = buffer_bytes(m, p, stage);
    double allocated = sm.params + sm.grads + sm.optimizer + sm.activations + sm.buffers;
    // The optimizer step's own allocation, after the activations are freed.
    if (const double at_step = sm.params + sm.grads + sm.optimizer + ms.step + sm.buffers; at_step > allocated) {
      sm.optimizer += ms.step;
      sm.activations = 0;
      allocated = at_step;
    }
    sm.peak = reserved_bytes(p, allocated);
    sm.allocator = sm.peak - allocated;
    out.push_back(sm);
  }
  return out;
}

}  // namespace ptsim::models
