// Exact parameter counts (models/params.h).
#include <gtest/gtest.h>

#include <utility>

#include "models/model_spec.h"
#include "tests/models/presets.h"
#include "models/params.h"

namespace ptsim::models {
namespace {

TEST(Params, Llama2_7b) {
  // h = 4096, ffn = 11008, V = 32000, 32 layers, MHA, no biases, RMSNorm, untied.
  // Layer: attention 4h² = 67,108,864; MLP 3·h·ffn = 135,266,304; norms 2h = 8,192
  //   → 202,383,360 × 32 = 6,476,267,520.
  // Embedding + output 2·V·h = 262,144,000; final norm 4,096.
  // Total 6,738,415,616 (the figure transformers reports for Llama-2-7b-hf).
  const ParamCounts c = count_params(preset("llama2-7b"));
  EXPECT_EQ(c.dense_layer, 202'383'360);
  EXPECT_EQ(c.embedding, 131'072'000);
  EXPECT_EQ(c.output, 131'072'000);
  EXPECT_EQ(c.final_norm, 4'096);
  EXPECT_EQ(c.total, 6'738'415'616);
  EXPECT_EQ(c.active, c.total);
}

TEST(Params, Llama3_8b) {
  // GQA: q and o 2h² = 33,554,432; k and v 2·h·(8·128) = 8,388,608;
  // MLP 3·4096·14336 = 176,160,768; norms 8,192 → 218,112,000 × 32 = 6,979,584,000.
  // Embedding + output 2·128256·4096 = 1,050,673,152; final norm 4,096.
  // Total 8,030,261,248.
  const ParamCounts c = count_params(preset("llama3-8b"));
  EXPECT_EQ(c.dense_layer, 218'112'000);
  EXPECT_EQ(c.total, 8'030'261'248);
}

TEST(Params, Gpt3_175b) {
  // Layer 12h² + 13h (QKV 3h² + 3h, proj h² + h, MLP 8h² + 5h, two LayerNorms 4h);
  // 96 layers: 173,946,175,488 + 15,335,424; embeddings (V + s)·h = 654,311,424;
  // final LayerNorm 2h = 24,576. Total 174,615,846,912 ≈ 174.6e9.
  const ParamCounts c = count_params(preset("gpt3-175b"));
  EXPECT_EQ(c.total, 174'615'846'912);
  EXPECT_NEAR(static_cast<double>(c.total), 174.6e9, 174.6e9 * 1e-3);
  EXPECT_EQ(c.output, 0);  // tied
}

TEST(Params, MegatronEq2ForTheGptFamily) {
  // Narayanan et al. SC'21 Eq. 2: P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h))
  //   = 12·l·h² + 13·l·h + (V + s)·h, which leaves out the final LayerNorm (2h).
  for (const char* name : {"gpt3-1.7b", "gpt3-18.4b", "gpt3-145.6b", "gpt3-1t"}) {
    const ModelSpec m = preset(name);
    const std::int64_t l = m.num_layers, h = m.hidden_size;
    const std::int64_t eq2 = 12 * l * h * h + 13 * l * h + (m.vocab_size + m.seq_length) * h;
    EXPECT_EQ(count_params(m).total, eq2 + 2 * h) << name;
  }
  // And the table's rounded sizes: 1.7B row → 1.7e9 within 5 %, 1T row → 1008.0e9 within 0.5 %.
  EXPECT_NEAR(static_cast<double>(count_params(preset("gpt3-1.7b")).total), 1.7e9, 1.7e9 * 0.05);
  EXPECT_NEAR(static_cast<double>(count_params(preset("gpt3-1t")).total), 1008.0e9, 1008.0e9 * 0.005);
}

TEST(Params, GptFamilyRoundsToTable1) {
  // Narayanan et al. SC'21 Table 1 sizes (billions, one decimal).
  const std::pair<const char*, double> rows[] = {{"gpt3-1.7b", 1.7},     {"gpt3-3.6b", 3.6},     {"gpt3-7.5b", 7.5},
                                                 {"gpt3-18.4b", 18.4},   {"gpt3-39.1b", 39.1},   {"gpt3-76.1b", 76.1},
                                                 {"gpt3-145.6b", 145.6}, {"gpt3-310.1b", 310.1}, {"gpt3-529.6b", 529.6},
                                                 {"gpt3-1t", 1008.0}};
  for (const auto& [name, billions] : rows) {
    EXPECT_NEAR(static_cast<double>(count_params(preset(name)).total) / 1e9, billions, 0.05) << name;
  }
}

TEST(Params, OtherHuggingFaceModels) {
  // Layer = attention h·(2·a·d + 2·g·d) + SwiGLU 3·h·ffn + norms 2h; plus 2·V·h + h.
  // Llama-2 13B: 40 × (4·5120² + 3·5120·13824 + 10240) + 2·32000·5120 + 5120.
  EXPECT_EQ(count_params(preset("llama2-13b")).total, 13'015'864'320);
  // Llama-2 70B: 80 × (2·8192² + 2·8192·1024 + 3·8192·28672 + 16384) + 2·32000·8192 + 8192.
  EXPECT_EQ(count_params(preset("llama2-70b")).total, 68'976'648'192);
  // Llama-3 70B: as Llama-2 70B with V = 128256.
  EXPECT_EQ(count_params(preset("llama3-70b")).total, 70'553'706'496);
  // Llama-3.1 405B: 126 × (2·16384² + 2·16384·1024 + 3·16384·53248 + 32768)
  //   + 2·128256·16384 + 16384.
  EXPECT_EQ(count_params(preset("llama3-405b")).total, 405'853'388'800);
  // Mixtral 8x22B: Mistral AI announces 141B total, 39B active.
  const ParamCounts x = count_params(preset("mixtral-8x22b"));
  EXPECT_NEAR(static_cast<double>(x.total), 141e9, 141e9 * 0.005);
  EXPECT_NEAR(static_cast<double>(x.active), 39e9, 39e9 * 0.005);
}

TEST(Params, Mixtral8x7bTotalAndActive) {
  // Per layer: attention 41,943,040 (as Llama-3 8B), norms 8,192, router h·8 = 32,768,
  // 8 experts × 176,160,768 = 1,409,286,144 → 1,451,270,144 × 32 = 46,440,644,608;
  // + embeddings 262,144,000 + final norm 4,096 = 46,702,792,704 (≈ 46.7e9).
  // Active: 2 experts → 394,305,536 × 32 + 262,148,096 = 12,879,925,248 (≈ 12.9e9).
  const ParamCounts c = count_params(preset("mixtral-8x7b"));
  EXPECT_EQ(c.moe_layer_expert, 176'160'768);
  EXPECT_EQ(c.moe_layer, 1'451'270'144);
  EXPECT_EQ(c.total, 46'702'792'704);
  EXPECT_EQ(c.active, 12'879'925'248);
  EXPECT_NEAR(static_cast<double>(c.total), 46.7e9, 46.7e9 * 0.005);
  EXPECT_NEAR(static_cast<double>(c.active), 12.9e9, 12.9e9 * 0.005);
}

TEST(Params, SharedExpertsCountAsActiveDense) {
  // One shared expert adds one expert-sized MLP (3·h·ffn = 176,160,768) per
  // layer, active for every token.
  ModelSpec m = preset("mixtral-8x7b");
  const ParamCounts base = count_params(m);
  m.moe->shared_experts = 1;
  const ParamCounts c = count_params(m);
  EXPECT_EQ(c.total - base.total, 32 * 176'160'768LL);
  EXPECT_EQ(c.active - base.active, 32 * 176'160'768LL);
}

TEST(Params, PerGpuTensorParallelSplit) {
  // GPT-3 175B layer at tp = 8: weights 12h²/8 = 226,492,416; split biases
  // (QKV 3h, MLP up 4h)/8 = 10,752; replicated proj and MLP-down biases 2h = 24,576
  // and two LayerNorms 4h = 49,152. Total 226,576,896.
  const LocalParams p = layer_params_per_gpu(preset("gpt3-175b"), 8, 1, false);
  EXPECT_EQ(p.dense, 226'576'896);
  EXPECT_EQ(p.expert, 0);
  // tp = 1 gives back the full layer.
  EXPECT_EQ(layer_params_per_gpu(preset("gpt3-175b"), 1, 1, false).total(),
            count_params(preset("gpt3-175b")).dense_layer);
}

TEST(Params, PerGpuExpertParallelSplit) {
  // Mixtral at ep = 8: one local expert 176,160,768; dense part = attention
  // 41,943,040 + norms 8,192 + router 32,768 = 41,984,000.
  const LocalParams p = layer_params_per_gpu(preset("mixtral-8x7b"), 1, 8, true);
  EXPECT_EQ(p.expert, 176'160'768);
  EXPECT_EQ(p.dense, 41'984'000);
  EXPECT_THROW(layer_params_per_gpu(preset("mixtral-8x7b"), 1, 3, true), std::invalid_argument);
  EXPECT_THROW(layer_params_per_gpu(preset("gpt3-175b"), 5, 1, false), std::invalid_argument);
}

TEST(Params, ExpertTensorParallelShardsOnlyTheExperts) {
  // Mixtral at tp 2, ep 8: attention halves; the one local expert is halved at etp 2 (the
  // default, tp) and whole at etp 1 (MoE parallel folding).
  const ModelSpec m = preset("mixtral-8x7b");
  const LocalParams folded = layer_params_per_gpu(m, 2, 8, true, 1);
  EXPECT_EQ(folded.expert, 176'160'768);
  EXPECT_EQ(layer_params_per_gpu(m, 2, 8, true).expert, 176'160'768 / 2);
  EXPECT_EQ(layer_params_per_gpu(m, 2, 8, true, 2).expert, 176'160'768 / 2);
  EXPECT_EQ(folded.dense, layer_params_per_gpu(m, 2, 8, true).dense);
}

}  // namespace
}  // namespace ptsim::models
