// Parameter-efficient fine-tuning: LoRA (Hu et al., "LoRA: Low-Rank Adaptation of
// Large Language Models", ICLR 2022) and QLoRA (Dettmers et al., "QLoRA: Efficient
// Finetuning of Quantized LLMs", NeurIPS 2023). The base weights are frozen (no
// gradient, no optimizer state, no weight-gradient GEMM, no DP gradient reduction);
// each targeted weight matrix W (d_in × d_out) gets a trainable low-rank update
// B·A with A: d_in × r and B: r × d_out, i.e. r·(d_in + d_out) parameters, which
// carry gradients and optimizer state as in full training. QLoRA stores the base
// weights in 4-bit NormalFloat (NF4) with double-quantised block constants and
// dequantises them to bf16 for each GEMM.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/model_spec.h"
#include "models/params.h"

namespace ptsim::models {

enum class FinetuneMethod { none, lora, qlora };
// Storage of the frozen base weights: the training precision's 16-bit (or fp32)
// weights, or NF4 (QLoRA §3).
enum class BasePrecision { bf16, nf4 };

// The linear layers an adapter can target, as a bit set.
enum LoraTarget : std::uint8_t { kLoraQkv = 1, kLoraProj = 2, kLoraFc1 = 4, kLoraFc2 = 8 };
inline constexpr std::uint8_t kLoraAllTargets = kLoraQkv | kLoraProj | kLoraFc1 | kLoraFc2;

struct FinetuneSpec {
  FinetuneMethod method = FinetuneMethod::none;
  int rank = 16;        // r
  double alpha = 32;    // scaling alpha / r: changes the numerics, not the cost
  std::uint8_t targets = kLoraAllTargets;
  BasePrecision base_precision = BasePrecision::bf16;

  bool active() const { return method != FinetuneMethod::none; }
  bool targets_any(std::uint8_t t) const { return (targets & t) != 0; }
  bool nf4() const { return active() && base_precision == BasePrecision::nf4; }
};

std::string_view to_string(FinetuneMethod m);
std::string_view to_string(BasePrecision b);
// The target names in the scenario's spelling, in order: {"qkv", "proj", ...}.
std::vector<std::string> target_names(std::uint8_t targets);

// NF4 storage (QLoRA §3): 4 bits per weight plus the block constants. Without double
// quantisation each block of 64 weights has an fp32 absmax, 32/64 = 0.5 bits per
// weight; double quantisation stores those constants in 8 bits with one fp32
// second-level constant per 256 of them: 8/64 + 32/(64·256) = 0.127 bits per weight
// (the paper's figure). Block sizes from the paper.
inline constexpr int kNf4BlockSize = 64;
inline constexpr int kNf4SecondBlockSize = 256;
double nf4_bits_per_param();  // 4 + 8/64 + 32/(64·256) = 4.1270
double nf4_bytes_per_param();

// Bytes per frozen base weight: NF4 (above), else the 16-bit weight copy (4 bytes
// in fp32 training); `weight_bytes` is the training precision's weight element.
double base_bytes_per_param(const FinetuneSpec& ft, double weight_bytes);

// Trainable adapter parameters of one transformer layer on one GPU. Each adapter
// is sharded like the weight it adapts (Megatron-style tensor parallelism, as
// NeMo's ParallelLinearAdapter): for a column-parallel weight (QKV, MLP up) A is
// replicated and B split by tp, r·d_in + r·d_out/tp; for a row-parallel one
// (projection, MLP down) A is split and B replicated, r·d_in/tp + r·d_out. MoE
// layers: every local routed expert's fc1/fc2 gets its own adapter (`expert`),
// shared experts like a dense MLP. tp = ep = 1 gives r·(d_in + d_out) per matrix.
LocalParams adapter_params_per_gpu(const ModelSpec& m, const FinetuneSpec& ft, int tp, int ep, bool moe_layer,
                                   int etp = 0);

// The weights of one layer's linear layers on one GPU (QKV, projection, MLP or
// expert matrices; no biases, norms or router): what QLoRA stores in NF4
// (bitsandbytes Linear4bit replaces nn.Linear; norms, embeddings and the output
// layer stay 16-bit).
LocalParams linear_weights_per_gpu(const ModelSpec& m, int tp, int ep, bool moe_layer, int etp = 0);

}  // namespace ptsim::models
