// The per-layer op list: what one GPU computes for one micro-batch, after the
// plan's sharding (TP, SP, CP, EP), with forward and backward FLOPs and bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "models/model_spec.h"
#include "models/parallelism.h"

namespace ptsim::models {

enum class OpClass { gemm, attention, elementwise, norm, embedding, loss, router };

// Where an op sits in a transformer layer, for the communication placed around it
// (sim/core/program_builder.cpp): the tensor-parallel region boundaries of
// Megatron-LM (Shoeybi et al. 2019, Fig. 3) and the MoE token exchange.
enum class OpRole : std::uint8_t {
  none,
  attn_enter,    // qkv: activations enter the attention's tensor-parallel region
  attn_leave,    // bias-dropout-add after the projection: they have left it
  mlp_enter,     // dense mlp_up, or the MoE router: they enter the MLP's region
  mlp_leave,     // bias-dropout-add after the MLP: they have left it
  moe_dispatch,  // token permute: the dispatch all-to-all follows it
  moe_combine,   // token unpermute: the combine all-to-all precedes it
};

// A GEMM C[m×n] = A[m×k]·B[k×n]; backward issues dgrad (m×k = m×n · n×k) and wgrad
// (k×n = k×m · m×n). `count` identical GEMMs (e.g. local experts).
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  int count = 1;
};
// Attention over `batch_heads` (micro-batch × local heads) with local query length
// `seq_q`, key length `seq_kv`, head dimension `head_dim`.
struct AttentionShape {
  std::int64_t batch_heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  bool causal = true;
};

struct Op {
  std::string name;  // for display: "qkv", "attention", "proj", "mlp_up", "mlp_down", ...
  OpClass cls = OpClass::elementwise;
  OpRole role = OpRole::none;
  double fwd_flops = 0;  // per GPU, per micro-batch
  double bwd_flops = 0;  // dgrad + wgrad
  double fwd_bytes = 0;  // HBM bytes read + written
  double bwd_bytes = 0;
  GemmShape gemm;                     // set for cls == gemm
  AttentionShape attn;                // set for cls == attention
  bool recomputed_selective = false;  // re-run in backward under selective recompute
  // A GEMM with a frozen weight (LoRA / QLoRA base): backward is dgrad only
  // (bwd_flops = fwd_flops, bwd_bytes the dgrad's), no weight gradient.
  bool frozen = false;
  // A routed expert's GEMM (the experts' weights, sharded apart under expert parallelism).
  bool routed_expert = false;
  // A shared expert's op (always-on experts of a MoE layer).
  bool shared_expert = false;
};

// Throws std::invalid_argument (naming the value) when the plan cannot shard the
// model: heads, query groups, ffn sizes not divisible by tp; seq_length not
// divisible by cp; num_experts not divisible by ep; non-positive degrees.
void check_sharding(const ModelSpec& m, const Parallelism& p);

// MoE: rows of each local expert's GEMMs on the busiest GPU for one micro-batch:
// ceil(T·top_k·ep/num_experts × min(moe_load_imbalance, moe_capacity_factor)),
// T = micro_batch_size·seq_length/cp (no cap when moe_capacity_factor <= 0).
double moe_tokens_per_expert(const ModelSpec& m, const Parallelism& p);
// MoE: copies of each token the dispatch sends over the EP group: top_k (× the capacity
// factor's padding), or, deduplicated per rank (Parallelism::moe_dedup_per_rank), the
// expected number of EP ranks its top_k experts fall on under balanced routing, ep·(1 −
// C(E − E/ep, k) / C(E, k)) for E experts, E/ep a rank.
double moe_copies_per_token(const ModelSpec& m, const Parallelism& p);

// One transformer layer (dense or MoE), per GPU, per micro-batch. With
// p.finetune active its GEMMs are frozen, each targeted weight is followed by
// its adapter's two GEMMs ("<name>_lora_a", "<name>_lora_b"), and with an NF4
// base the layer starts with "nf4_dequant" (memory-bound: read 4.127-bit
// weights, write the 16-bit copy; again in backward for the input gradients).
std::vector<Op> layer_ops(const ModelSpec& m, const Parallelism& p, bool moe_layer);
// First stage: token (+ position) embedding lookup.
std::vector<Op> embedding_ops(const ModelSpec& m, const Parallelism& p);
// Last stage: final norm, output projection (logits) and cross-entropy loss.
std::vector<Op> head_ops(const ModelSpec& m, const Parallelism& p);

}  // namespace ptsim::models
