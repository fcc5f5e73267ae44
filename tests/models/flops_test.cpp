// Model and hardware FLOPs per iteration (models/flops.h).
#include <gtest/gtest.h>

#include "models/flops.h"
#include "models/model_spec.h"
#include "tests/models/presets.h"

namespace ptsim::models {
namespace {

constexpr const char* kGpt[] = {"gpt3-1.7b",   "gpt3-3.6b",   "gpt3-7.5b",   "gpt3-18.4b", "gpt3-39.1b", "gpt3-76.1b",
                                "gpt3-145.6b", "gpt3-310.1b", "gpt3-529.6b", "gpt3-1t",    "gpt3-175b"};

TEST(Flops, GptEqualsMegatronModelFlops) {
  // CONTRACT §3 / Narayanan et al. SC'21: 72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h)).
  for (const char* name : kGpt) {
    const ModelSpec m = preset(name);
    const double B = 1536, s = m.seq_length, L = m.num_layers, h = m.hidden_size, V = m.vocab_size;
    const double expected = 72.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * L * h));
    EXPECT_NEAR(model_flops_per_iteration(m, 1536), expected, expected * 1e-9) << name;
  }
}

TEST(Flops, FullRecomputeEqualsMegatronEq3) {
  // SC'21 Eq. 3 counts the recomputed forward: 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)).
  for (const char* name : kGpt) {
    const ModelSpec m = preset(name);
    const double B = 512, s = m.seq_length, L = m.num_layers, h = m.hidden_size, V = m.vocab_size;
    const double expected = 96.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h));
    EXPECT_NEAR(hardware_flops_per_iteration(m, 512, Recompute::full), expected, expected * 1e-9) << name;
  }
}

TEST(Flops, SelectiveRecomputeAddsAttentionCore) {
  // Selective recompute re-runs Q·Kᵀ and P·V: + L·4·B·s²·h.
  const ModelSpec m = preset("gpt3-175b");
  const double B = 8, s = 2048, L = 96, h = 12288;
  const double extra = L * 4.0 * B * s * s * h;
  const double base = model_flops_per_iteration(m, 8);
  EXPECT_NEAR(hardware_flops_per_iteration(m, 8, Recompute::selective), base + extra, base * 1e-12);
  EXPECT_DOUBLE_EQ(hardware_flops_per_iteration(m, 8, Recompute::none), base);
}

TEST(Flops, SwiGluMha) {
  // Llama-2 7B, per token per layer forward: QKV 2·h·3h + proj 2h² = 8h²,
  // SwiGLU 3 matrices 6·h·ffn, attention 4·s·h; logits 2·h·V. ×3 for fwd + bwd.
  const ModelSpec m = preset("llama2-7b");
  const double B = 4, s = 4096, L = 32, h = 4096, ffn = 11008, V = 32000;
  const double expected = 3.0 * B * s * (L * (8.0 * h * h + 6.0 * h * ffn + 4.0 * s * h) + 2.0 * h * V);
  EXPECT_NEAR(model_flops_per_iteration(m, 4), expected, expected * 1e-12);
  // Untying the embeddings does not change the FLOPs (the logits GEMM runs anyway).
  ModelSpec tied = m;
  tied.untie_embeddings = false;
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(tied, 4), model_flops_per_iteration(m, 4));
}

TEST(Flops, GqaAndMoe) {
  // Mixtral 8x7B, per token per layer forward: QKV 2·h·(h + 2·8·128) = 2·h·6144,
  // proj 2h², attention 4·s·h, router 2·h·8, top-2 SwiGLU experts 2·6·h·ffn;
  // logits 2·h·V.
  const ModelSpec m = preset("mixtral-8x7b");
  const double B = 2, s = 32768, L = 32, h = 4096, ffn = 14336, V = 32000;
  const double layer = 2.0 * h * 6144 + 2.0 * h * h + 4.0 * s * h + 2.0 * h * 8 + 2.0 * 6.0 * h * ffn;
  const double expected = 3.0 * B * s * (L * layer + 2.0 * h * V);
  EXPECT_NEAR(model_flops_per_iteration(m, 2), expected, expected * 1e-12);
}

TEST(Flops, RejectsEmptyBatch) {
  EXPECT_THROW(model_flops_per_iteration(preset("gpt3-175b"), 0), std::invalid_argument);
}

}  // namespace
}  // namespace ptsim::models
