#include "sim/io/scenario_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace ptsim::sim {

namespace {

// One row per key. Add a key here and the reader accepts it (its value is read in
// sim/io/scenario_file.cpp or framework_section.cpp); the reference doc is regenerated from
// this table (`ptsim list keys --markdown > docs/scenario-keys.md`, checked by ctest).
// Megatron-LM names are its arguments (megatron/training/arguments.py), DeepSpeed's its JSON
// config keys (deepspeed/runtime/zero/config.py, runtime/config.py).
const std::vector<ScenarioKey>& key_table() {
  // Built on first use: the reader's key lists are made from it during static initialisation.
  static const std::vector<ScenarioKey> keys = {
      {"name", "", "the model's name", "the scenario's name in outputs", "", ""},
      {"model", "", "", "the architecture: a preset, an HF config, or every key", "", ""},
      {"model.preset", "", "", "a built-in model (`ptsim list models`); keys below override it", "", ""},
      {"model.num_layers", "", "preset", "transformer layers", "--num-layers", ""},
      {"model.hidden_size", "", "preset", "model width", "--hidden-size", ""},
      {"model.num_attention_heads", "", "preset", "attention heads", "--num-attention-heads", ""},
      {"model.num_query_groups", "", "num_attention_heads", "key/value heads (GQA groups); = heads for MHA",
       "--num-query-groups", ""},
      {"model.ffn_hidden_size", "", "preset", "MLP width", "--ffn-hidden-size", ""},
      {"model.vocab_size", "", "preset", "vocabulary (padded)", "--vocab-size", ""},
      {"model.seq_length", "tokens", "preset; HF config's (warns)", "training sequence length", "--seq-length", ""},
      {"model.mlp", "", "gelu", "gelu | swiglu", "--swiglu", ""},
      {"model.norm", "", "layernorm", "layernorm | rmsnorm", "--normalization", ""},
      {"model.untie_embeddings", "", "false", "separate output projection", "--untie-embeddings-and-output-weights",
       ""},
      {"model.add_bias_linear", "", "true", "biases on linear layers", "--disable-bias-linear (inverse)", ""},
      {"model.hidden_dropout", "", "0.1 (presets: Llama, Mixtral 0)",
       "dropout after attention, MLP and embedding; 0 saves no masks", "--hidden-dropout", ""},
      {"model.attention_dropout", "", "0.1 (presets: Llama, Mixtral 0)", "dropout on attention probabilities",
       "--attention-dropout", ""},
      {"model.position_embedding", "", "learned_absolute", "learned_absolute | rope", "--position-embedding-type", ""},
      {"model.moe", "", "", "mixture of experts (optional)", "", ""},
      {"model.moe.num_experts", "", "", "routed experts per MoE layer", "--num-experts", ""},
      {"model.moe.top_k", "", "", "experts per token", "--moe-router-topk", ""},
      {"model.moe.ffn_hidden_size", "", "model.ffn_hidden_size", "expert MLP width", "--moe-ffn-hidden-size", ""},
      {"model.moe.layer_freq", "", "1",
       "every Nth layer is MoE, or which: a 0/1 list per layer (\"([0]*1+[1]*27)\" or a YAML list)", "--moe-layer-freq",
       ""},
      {"model.moe.shared_experts", "", "0", "always-on experts of the expert width",
       "--moe-shared-expert-intermediate-size (÷ the expert width)", ""},
      {"model.moe.shared_expert_gate", "", "false", "a sigmoid gate (hidden × 1 weight) on the shared experts' output",
       "--moe-shared-expert-gate", ""},
      {"model.moe.capacity_factor", "", "dropless", "tokens an expert accepts, × the mean",
       "--moe-expert-capacity-factor", ""},
      {"model.moe.load_imbalance", "", "1", "the busiest expert's tokens, × the mean", "", ""},
      {"model.hf_config", "path", "",
       "a HuggingFace config.json, or a model folder holding one; relative to the scenario file", "", ""},
      {"model.megatron_args", "path", "",
       "a Megatron-LM launch script or argument list: its flags fill the keys the scenario does not give", "", ""},
      {"cluster", "", "", "the machines", "", ""},
      {"cluster.gpu", "", "", "a GPU of `ptsim list gpus` (or cluster.gpus)", "", ""},
      {"cluster.gpus", "", "", "a cluster mixing GPU types: node groups in node order (README \"Mixed-GPU clusters\")",
       "", ""},
      {"cluster.gpus.type", "", "", "the group's GPU (`ptsim list gpus`)", "", ""},
      {"cluster.gpus.nodes", "", "", "nodes holding it", "", ""},
      {"cluster.gpus.calibration", "path", "none", "a cost table measured on this type", "", ""},
      {"cluster.num_gpus", "", "cluster.gpus' nodes", "GPUs in the job", "", ""},
      {"cluster.gpus_per_node", "", "min(8, num_gpus)", "GPUs per node (default 8 with cluster.gpus)", "", ""},
      {"cluster.intra_node", "", "", "the node's GPU fabric", "", ""},
      {"cluster.intra_node.fabric", "", "nvswitch", "nvswitch | nvlink | pcie", "", ""},
      {"cluster.intra_node.bandwidth", "GB/s", "the GPU's NVLink", "per GPU, per direction", "", ""},
      {"cluster.intra_node.latency", "us", "1 us", "per transfer", "", ""},
      {"cluster.intra_node.nvls", "", "false", "NVLink SHARP all-reduce (H100+)", "", ""},
      {"cluster.inter_node", "", "", "the network between nodes", "", ""},
      {"cluster.inter_node.topology", "", "fat-tree",
       "fat-tree | fat-tree-3 | rail-optimized | torus | torus-2d | torus-3d | user", "", ""},
      {"cluster.inter_node.nics_per_node", "", "8", "NICs per node", "", ""},
      {"cluster.inter_node.nic_bandwidth", "Gb/s", "A100 200, H100+ 400 (warns)", "per NIC, per direction", "", ""},
      {"cluster.inter_node.latency", "us", "2 us", "per transfer", "", ""},
      {"cluster.inter_node.oversubscription", "", "1", "downlinks per uplink (1 = full bisection)", "", ""},
      {"cluster.inter_node.switch_radix", "", "64", "ports per switch", "", ""},
      {"cluster.inter_node.tiers", "", "fewest that fit", "fat-tree tiers: 2 or 3", "", ""},
      {"cluster.inter_node.torus_dims", "", "", "nodes per torus dimension, e.g. [8, 16]", "", ""},
      {"cluster.inter_node.graph_file", "path", "",
       "topology user: YAML nodes and links; relative to the scenario file", "", ""},
      {"cluster.inter_node.qps_per_connection", "", "1",
       "network flows per connection, each hashed on its own path (NCCL_IB_QPS_PER_CONNECTION), 1 to 64", "", ""},
      {"cluster.inter_node.sharp", "", "false",
       "in-network reduction on the switches (InfiniBand SHARP): NCCL's CollNet all-reduce, and NVLS across nodes", "",
       ""},
      {"cluster.inter_node.routing", "", "ecmp",
       "equal-cost paths: ecmp (hash per flow; Ethernet, RoCE) | d-mod-k (by destination; InfiniBand fat tree)", "",
       ""},
      {"cluster.calibration", "path", "datasheet roofline",
       "a cost table of `ptsim calibrate`; relative to the scenario file", "", ""},
      {"cluster.link_sharing", "", "true", "overlapping transfers share links", "", ""},
      {"cluster.pxn", "", "true",
       "all-to-all sends leave through the receiver's rail, aggregated (NCCL PXN; false = NCCL_PXN_DISABLE=1)", "", ""},
      {"cluster.collectives", "", "", "per-kind algorithm override", "", ""},
      {"cluster.collectives.all_reduce", "", "auto", "auto | ring | tree | nvls | hierarchical | direct", "", ""},
      {"cluster.collectives.reduce_scatter", "", "auto", "as all_reduce", "", ""},
      {"cluster.collectives.all_gather", "", "auto", "as all_reduce", "", ""},
      {"cluster.collectives.broadcast", "", "auto", "as all_reduce", "", ""},
      {"cluster.collectives.all_to_all", "", "auto", "as all_reduce", "", ""},
      {"cluster.collectives.send_recv", "", "auto", "as all_reduce", "", ""},
      {"cluster.nccl_version", "", "2.30", "NCCL cost model, 2.18 to 2.30 (optionally with the patch, e.g. 2.28.3)", "",
       ""},
      {"cluster.host_cpu", "", "intel",
       "intel | amd | arm: NCCL's network post cost (2 us on AMD, else 1) and LL cap; DGX A100 is AMD", "", ""},
      {"cluster.price_per_gpu_hour", "", "none", "any currency: gives the cost to train", "", ""},
      {"cluster.gpu_power", "W", "the GPU's TDP", "for the energy to train", "", ""},
      {"cluster.slow", "", "none", "slow GPUs: a list of entries (README \"Stragglers\")", "", ""},
      {"cluster.slow.ranks", "", "all (a distribution)", "global ranks: \"0-7,12\" or a list", "", ""},
      {"cluster.slow.nodes", "", "", "nodes (every GPU of each): \"0-1\" or a list; not with ranks", "", ""},
      {"cluster.slow.factor", "", "", "compute time x factor, 1 to 100", "", ""},
      {"cluster.slow.distribution", "", "", "lognormal | uniform: a seeded factor per GPU", "", ""},
      {"cluster.slow.sigma", "", "", "lognormal: factor exp(sigma |z|)", "", ""},
      {"cluster.slow.max_factor", "", "", "uniform: factors in [1, max_factor]", "", ""},
      {"cluster.slow.seed", "", "", "the distribution's seed", "", ""},
      {"parallel", "", "", "the plan", "", ""},
      {"parallel.tensor_parallel", "", "1", "TP size", "--tensor-model-parallel-size", ""},
      {"parallel.pipeline_parallel", "", "1", "PP size", "--pipeline-model-parallel-size", ""},
      {"parallel.data_parallel", "", "num_gpus / (tp × pp × cp)", "DP size", "", ""},
      {"parallel.context_parallel", "", "1", "CP size", "--context-parallel-size", ""},
      {"parallel.expert_parallel", "", "1",
       "EP size (within dp × cp; within tp / expert_tensor_parallel × dp × cp under MoE parallel folding)",
       "--expert-model-parallel-size", ""},
      {"parallel.expert_tensor_parallel", "", "tensor_parallel",
       "the routed experts' tensor-parallel size, a divisor of tensor_parallel (MoE parallel folding: below it the EP "
       "group spans tensor-parallel ranks; 1 keeps each expert whole on its GPU)",
       "--expert-tensor-parallel-size", ""},
      {"parallel.virtual_pipeline_stages", "", "1", "model chunks per rank (interleaved 1F1B)",
       "--num-layers-per-virtual-pipeline-stage (layers / (pp × this))", ""},
      {"parallel.pipeline_schedule", "", "1f1b; interleaved if vpp > 1",
       "gpipe | 1f1b | interleaved-1f1b | zb-h1 | zb-h2 | zb-v | dualpipe (one training.framework does not run: "
       "a warning)",
       "", ""},
      {"parallel.sequence_parallel", "", "false", "Megatron sequence parallelism", "--sequence-parallel", ""},
      {"parallel.zero_stage", "", "0", "ZeRO stage 0..3", "--use-distributed-optimizer (= 1)",
       "zero_optimization.stage"},
      {"parallel.recompute", "", "none", "none | selective | full", "--recompute-granularity", ""},
      {"parallel.offload_optimizer", "", "false", "optimizer state and step on the CPU", "",
       "zero_optimization.offload_optimizer.device"},
      {"parallel.offload_params", "", "false", "parameters on the CPU (needs ZeRO-3)", "",
       "zero_optimization.offload_param.device"},
      {"parallel.overlap_grad_reduce", "", "true", "gradient reduction overlaps backward (Megatron only)",
       "--overlap-grad-reduce", ""},
      {"parallel.overlap_param_gather", "", "true", "parameter all-gather overlaps forward (Megatron only)",
       "--overlap-param-gather", ""},
      {"parallel.overlap_p2p", "", "true", "pipeline sends on their own stream", "--overlap-p2p-communication", ""},
      {"parallel.pipeline_layers", "", "even split",
       "layers per stage, first to last; interleaved: or per virtual stage (pp × vpp, chunk-major)", "", ""},
      {"training", "", "", "batch, precision and framework", "", ""},
      {"training.global_batch_size", "sequences", "", "per iteration", "--global-batch-size", "train_batch_size"},
      {"training.micro_batch_size", "sequences", "1", "per GPU per micro-batch", "--micro-batch-size",
       "train_micro_batch_size_per_gpu"},
      {"training.precision", "", "bf16", "fp32 | fp16 | bf16 | fp8", "--bf16 / --fp16 / --fp8-format",
       "bf16.enabled / fp16.enabled"},
      {"training.optimizer", "", "adam", "adam | adamw | sgd", "--optimizer", "optimizer.type"},
      {"training.attention", "", "flash", "flash | fa1 | fa2 | fa3 | cudnn | naive", "--use-flash-attn", ""},
      {"training.memory", "", "", "memory-model options", "", ""},
      {"training.memory.state_layout", "", "the framework's", "megatron | deepspeed | fsdp", "", ""},
      {"training.memory.allocator_overhead", "", "0", "reserved-minus-allocated gap, fraction of allocated, 0 to 4", "",
       ""},
      {"training.memory.cublas_workspace_config", "", "PyTorch's for the GPU",
       "PyTorch's cuBLAS workspace as the CUBLAS_WORKSPACE_CONFIG variable sets it, \":SIZE:COUNT\" pairs of SIZE "
       "KiB; two are held (forward and backward threads)",
       "", ""},
      {"training.framework", "", "megatron-core", "megatron-core | megatron-lm | deepspeed | fsdp", "", ""},
      {"training.dp_one_stream", "", "true",
       "DP parameter gathers queue with gradient reductions (one process group, one NCCL stream)", "", ""},
      {"training.deepspeed_config", "path", "",
       "a DeepSpeed JSON config: sets framework deepspeed and fills the keys the scenario does not give", "", ""},
      {"training.deepspeed", "", "", "DeepSpeed's own keys (framework deepspeed)", "", ""},
      {"training.deepspeed.stage3_prefetch_bucket_size", "parameters", "DeepSpeed's", "ZeRO-3 prefetch", "",
       "zero_optimization.stage3_prefetch_bucket_size"},
      {"training.deepspeed.stage3_param_persistence_threshold", "parameters", "DeepSpeed's",
       "ZeRO-3: smaller parameters stay whole", "", "zero_optimization.stage3_param_persistence_threshold"},
      {"training.deepspeed.stage3_max_reuse_distance", "parameters", "DeepSpeed's", "ZeRO-3 parameter reuse", "",
       "zero_optimization.stage3_max_reuse_distance"},
      {"training.deepspeed.reduce_bucket_size", "parameters", "DeepSpeed's", "gradient bucket", "",
       "zero_optimization.reduce_bucket_size"},
      {"training.deepspeed.allgather_bucket_size", "parameters", "DeepSpeed's", "ZeRO-1/2 parameter all-gather bucket",
       "", "zero_optimization.allgather_bucket_size"},
      {"training.deepspeed.overlap_comm", "", "true with ZeRO-3", "gradient reduction overlaps backward", "",
       "zero_optimization.overlap_comm"},
      {"training.deepspeed.contiguous_gradients", "", "true (false before 0.4.3)",
       "releases before 0.6: false = ZeRO-3 gradients all-reduced", "", "zero_optimization.contiguous_gradients"},
      {"training.deepspeed.grad_accum_dtype", "", "fp32 if bf16 at ZeRO 0",
       "fp32 | bf16 | fp16: with bf16 at ZeRO 0/1, fp32 runs the BF16_Optimizer (from 0.6.2)", "",
       "data_types.grad_accum_dtype"},
      {"training.deepspeed.version", "", "0.14", "the release: ZeRO-3 gathers and gradients as it issues them", "",
       "deepspeed.__version__"},
      {"training.fsdp", "", "", "PyTorch FSDP's own keys (framework fsdp)", "", ""},
      {"training.fsdp.reshard_after_forward", "", "true", "free gathered parameters after forward", "", ""},
      {"training.fsdp.backward_prefetch", "", "BACKWARD_PRE", "BACKWARD_PRE | BACKWARD_POST | none", "", ""},
      {"training.fsdp.reduce_dtype", "", "the compute dtype", "fp32 | bf16 | fp16: gradient reduce-scatter dtype", "",
       ""},
      {"training.fsdp.optimizer_impl", "", "foreach",
       "foreach | fused | decoupled_adamw: torch AdamW's passes, its fused kernel, Composer's loop", "", ""},
      {"training.fsdp.clip_grad_norm", "", "true", "clip_grad_norm_ before the step (a norm and a scaling pass)", "",
       ""},
      {"training.fsdp.cp_rotate_method", "", "allgather",
       "allgather | alltoall: PyTorch context parallelism's K/V by one all-gather waited for after the ring's "
       "first step, or by a ring of sends beside every step",
       "", ""},
      {"training.megatron", "", "", "Megatron's own keys (framework megatron-core / megatron-lm)", "", ""},
      {"training.megatron.bucket_size", "parameters", "max(4e7, 1e6 × dp)", "DDP gradient bucket", "--ddp-bucket-size",
       ""},
      {"training.megatron.overlap_grad_reduce", "", "true", "as parallel.overlap_grad_reduce", "--overlap-grad-reduce",
       ""},
      {"training.megatron.overlap_param_gather", "", "true", "as parallel.overlap_param_gather",
       "--overlap-param-gather", ""},
      {"training.megatron.use_distributed_optimizer", "", "zero_stage >= 1", "= parallel.zero_stage 1",
       "--use-distributed-optimizer", ""},
      {"training.megatron.decoder_first_pipeline_num_layers", "", "even split", "layers of the first stage",
       "--decoder-first-pipeline-num-layers", ""},
      {"training.megatron.decoder_last_pipeline_num_layers", "", "even split", "layers of the last stage",
       "--decoder-last-pipeline-num-layers", ""},
      {"training.megatron.account_for_embedding_in_pipeline_split", "", "false",
       "the embedding counts as a layer in the even split: the first (virtual) stage holds one layer fewer",
       "--account-for-embedding-in-pipeline-split", ""},
      {"training.megatron.async_tensor_model_parallel_allreduce", "", "true",
       "without sequence parallelism, all-reduce a column-parallel linear's input gradient beside its weight-gradient "
       "GEMM (false: after it, blocking; Megatron-LM before 2021-09)",
       "--no-async-tensor-model-parallel-allreduce", ""},
      {"training.megatron.transformer_impl", "", "TE; megatron-lm: local",
       "transformer_engine | local: the layers' implementation (memory: TE's cuBLAS workspace; local attention's "
       "score buffer)",
       "--transformer-impl", ""},
      {"training.megatron.masked_softmax_fusion", "", "true",
       "fused scale-mask-softmax kernel; off, naive local attention saves fp32 probabilities when the softmax runs in "
       "fp32",
       "--no-masked-softmax-fusion", ""},
      {"training.megatron.moe_token_dispatcher_type", "", "alltoall",
       "alltoall | allgather | flex: how MoE tokens reach their experts (allgather: every rank gathers the tokens "
       "of its tp × ep group and reduce-scatters the output in fp32; flex: DeepEP, an all-to-all sending a token once "
       "to each rank holding one of its experts). Megatron's "
       "own default is allgather, which the importer applies to a script that names none",
       "--moe-token-dispatcher-type", ""},
      {"training.megatron.cross_entropy_loss_fusion", "", "false",
       "megatron-core only: the vocab-parallel cross entropy under torch.compile (three passes over the fp32 "
       "logits forward, one backward) instead of PyTorch ops (six forward, two backward)",
       "--cross-entropy-loss-fusion", ""},
      {"training.megatron.bias_activation_fusion", "", "true",
       "fused bias + activation kernels; off, MoE experts weight their activation unfused and save it",
       "--no-bias-swiglu-fusion, --no-bias-gelu-fusion", ""},
      {"training.megatron.defer_embedding_wgrad_compute", "", "false",
       "the output layer's weight gradient of the first micro-batches runs in the pipeline flush, its input and "
       "logits gradient held on the last stage until then",
       "--defer-embedding-wgrad-compute", ""},
      {"training.megatron.wgrad_deferral_limit", "", "0",
       "with defer_embedding_wgrad_compute: how many micro-batches defer (0: all)", "--wgrad-deferral-limit", ""},
      {"training.megatron.microbatch_group_size_per_vp_stage", "", "pipeline_parallel",
       "interleaved-1f1b: micro-batches each model chunk runs back to back (in [pipeline_parallel, micro-batches]; "
       "a last group of 0 or at least pipeline_parallel); megatron-core only",
       "--microbatch-group-size-per-virtual-pipeline-stage", ""},
      {"training.megatron.moe_grouped_gemm", "", "false",
       "the experts' GEMMs as one grouped GEMM (with Transformer Engine, TEGroupedMLP: memory, TE's four multi-stream "
       "cuBLAS workspaces)",
       "--moe-grouped-gemm", ""},
      {"training.megatron.moe_shared_expert_overlap", "", "false",
       "the shared experts' GEMMs run beside the token all-to-alls on a stream of their own (alltoall / flex "
       "dispatcher, a model with shared experts)",
       "--moe-shared-expert-overlap", ""},
      {"training.megatron.check_for_nan_in_loss_and_grad", "", "true; megatron-lm: false",
       "a norm of each gradient bucket checked for NaN before its data-parallel reduction (a pass over the bucket)",
       "--no-check-for-nan-in-loss-and-grad", ""},
      {"training.megatron.delay_grad_reduce", "", "true",
       "megatron-core only: with pipeline parallelism (plain 1F1B) and overlap_grad_reduce, stages after the first "
       "reduce their gradient buckets after their last backward instead of during it",
       "--no-delay-grad-reduce", ""},
      {"training.megatron.ddp_average_in_collective", "", "false",
       "megatron-core only: the data-parallel collective averages the gradients; false: each bucket is first "
       "scaled by 1/dp in place (a read and a write of the bucket)",
       "--ddp-average-in-collective", ""},
      {"training.megatron.tp_comm_overlap", "", "false",
       "Transformer Engine's userbuffers hide the sequence-parallel tensor-parallel all-gathers and reduce-scatters "
       "inside the GEMMs next to them (needs sequence_parallel and transformer_impl transformer_engine; memory: ten "
       "s x b x h userbuffers)",
       "--tp-comm-overlap", ""},
      {"training.megatron.cp_comm_type", "", "p2p",
       "p2p | allgather | a2a: context parallelism's K/V by ring exchange beside attention, all-gathered before it "
       "(exposed; dK/dV reduce-scattered after the backward), or Q, K, V all-to-all'd to head shards (Ulysses, "
       "exposed)",
       "--cp-comm-type", ""},
      {"training.megatron.attention_softmax_in_fp32", "", "false",
       "softmax in fp32 (--apply-query-key-layer-scaling implies it)", "--attention-softmax-in-fp32", ""},
      {"training.megatron.gradient_accumulation_fusion", "", "true",
       "the weight-gradient GEMM accumulates into the fp32 main gradient (false: each micro-batch's gradient is "
       "added into the held one after the GEMM, a memory-bound kernel; Megatron-LM before 2022-02)",
       "--no-gradient-accumulation-fusion", ""},
      {"training.megatron.account_for_loss_in_pipeline_split", "", "false",
       "the loss counts as a layer in the even split: the last (virtual) stage holds one layer fewer",
       "--account-for-loss-in-pipeline-split", ""},
      {"training.total_tokens", "tokens", "none", "training goal: gives time and cost to train",
       "--train-samples (× seq_length)", ""},
      {"training.train_iters", "", "none", "training goal in iterations (not with total_tokens)", "--train-iters", ""},
      {"training.finetune", "", "none (pre-training)", "LoRA / QLoRA fine-tuning (README \"Fine-tuning\")", "", ""},
      {"training.finetune.method", "", "", "lora | qlora", "", ""},
      {"training.finetune.rank", "", "16", "adapter rank r", "", ""},
      {"training.finetune.alpha", "", "2 rank", "LoRA scaling (numerics only)", "", ""},
      {"training.finetune.targets", "", "[qkv, proj, fc1, fc2]", "adapted matrices", "", ""},
      {"training.finetune.base_precision", "", "from method", "bf16 (lora) | nf4 (qlora)", "", ""},
      {"reliability", "", "", "failures and checkpoints: goodput (README \"Goodput\"); empty = every default", "", ""},
      {"reliability.gpu_mtbf", "s|min|h|d", "from gpu_failures_per_hour", "mean time between failures of one GPU", "",
       ""},
      {"reliability.gpu_failures_per_hour", "1/h", "1.1583e-5 (Llama 3)", "failures per GPU-hour", "", ""},
      {"reliability.node_mtbf", "s|min|h|d", "from node_failures_per_hour", "mean time between failures of one node",
       "", ""},
      {"reliability.node_failures_per_hour", "1/h", "6.5197e-5 (Llama 3)", "failures per node-hour (not GPU)", "", ""},
      {"reliability.checkpoint_size", "bytes", "weights + optimizer states", "one checkpoint, whole job", "", ""},
      {"reliability.storage_bandwidth", "", "", "checkpoint storage", "", ""},
      {"reliability.storage_bandwidth.write", "GB/s", "2 TB/s (Llama 3)", "aggregate write", "", ""},
      {"reliability.storage_bandwidth.read", "GB/s", "2 TB/s (Llama 3)", "aggregate read", "", ""},
      {"reliability.storage_bandwidth.node_write", "GB/s", "none", "per node write cap", "", ""},
      {"reliability.storage_bandwidth.node_read", "GB/s", "none", "per node read cap", "", ""},
      {"reliability.checkpoint_mode", "", "sync", "sync | async (only the snapshot blocks)", "--async-save", ""},
      {"reliability.snapshot_bandwidth", "GB/s", "the GPU's PCIe", "device-to-host snapshot of an async checkpoint", "",
       ""},
      {"reliability.relaunch_time", "s", "10 min", "job relaunch after a failure", "", ""},
      {"reliability.warmup_time", "s", "0", "warm-up after the checkpoint load", "", ""},
      {"reliability.checkpoint_interval", "", "optimal", "optimal | a time | \"N iterations\"", "--save-interval", ""},
  };
  return keys;
}

std::string cell(std::string_view s) { return std::string(s); }

// A Markdown table cell: '|' would end the cell.
std::string md(std::string_view s) {
  std::string out;
  for (const char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

const std::vector<ScenarioKey>& scenario_keys() { return key_table(); }

std::vector<std::string> keys_of(std::string_view section) {
  const std::string prefix = section.empty() ? "" : std::string(section) + ".";
  bool known = section.empty();
  std::vector<std::string> out;
  for (const auto& k : key_table()) {
    if (k.path == section) known = true;
    if (!k.path.starts_with(prefix) || k.path.size() == prefix.size()) continue;
    const std::string_view rest = k.path.substr(prefix.size());
    if (rest.find('.') != std::string_view::npos) continue;  // deeper: listed under its own section
    out.emplace_back(rest);
  }
  if (!known || out.empty()) throw std::logic_error(fmt::format("scenario key table: no section '{}'", section));
  return out;
}

std::string keys_text() {
  std::string out = fmt::format("{:<54} {:<10} {}\n", "key", "unit", "default");
  for (const auto& k : key_table())
    out += fmt::format("{:<54} {:<10} {}\n", k.path, cell(k.unit), k.default_text.empty() ? "-" : cell(k.default_text));
  out += "\n`ptsim list keys --markdown` adds each key's meaning and the Megatron-LM / DeepSpeed name\n";
  return out;
}

std::string keys_markdown() {
  std::string out =
      "# Scenario keys\n\n"
      "Generated by `ptsim list keys --markdown` from the table the scenario reader uses\n"
      "(sim/io/scenario_keys.cpp); a ctest fails when this file differs. Values with a unit are\n"
      "strings with the unit (`\"400 Gb/s\"`, `\"2 us\"`); unknown keys are errors. *Megatron-LM* and\n"
      "*DeepSpeed* give the framework's own name for the setting (`ptsim import` maps them).\n\n"
      "| key | unit | default | meaning | Megatron-LM | DeepSpeed |\n"
      "|---|---|---|---|---|---|\n";
  const auto code = [](std::string_view s) { return s.empty() ? std::string() : fmt::format("`{}`", s); };
  for (const auto& k : key_table())
    out += fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", k.path, md(k.unit), md(k.default_text), md(k.description),
                       md(code(k.megatron)), md(code(k.deepspeed)));
  return out;
}

}  // namespace ptsim::sim
