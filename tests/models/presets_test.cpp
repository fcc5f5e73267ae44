// Presets (models/presets.yaml, embedded) and HuggingFace config import.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/model_spec.h"
#include "models/params.h"
#include "tests/test_paths.h"

namespace ptsim::models {
namespace {

std::string data_path(const std::string& name) { return test::repo_path("tests/models/data/" + name); }

// Writes `text` to a fresh file in the temp directory, removed on destruction.
class TempConfig {
 public:
  explicit TempConfig(const std::string& text) {
    path_ = (std::filesystem::temp_directory_path() /
             ("ptsim_models_test_" + std::to_string(reinterpret_cast<std::uintptr_t>(this)) + ".json"))
                .string();
    std::ofstream(path_) << text;
  }
  ~TempConfig() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string error_of(const std::string& path) {
  try {
    from_hf_config(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Presets, EveryContractPresetExistsWithASource) {
  for (const char* name :
       {"gpt3-1.7b", "gpt3-3.6b", "gpt3-7.5b", "gpt3-18.4b", "gpt3-39.1b", "gpt3-76.1b", "gpt3-145.6b", "gpt3-310.1b",
        "gpt3-529.6b", "gpt3-1t", "gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b",
        "llama3-405b", "mixtral-8x7b", "mixtral-8x22b"}) {
    const auto m = find_preset(name);
    ASSERT_TRUE(m.has_value()) << name;
    EXPECT_EQ(m->name, name);
    EXPECT_FALSE(m->source.empty()) << name;
  }
  EXPECT_FALSE(find_preset("gpt3-2t").has_value());
}

TEST(Presets, ParsedOnce) {
  // The same vector (not a re-parse) on every call.
  EXPECT_EQ(&presets(), &presets());
  EXPECT_EQ(presets().size(), 20u);
}

TEST(Presets, GptTable1Row) {
  // Narayanan et al. SC'21 Table 1, 7.5B row: 32 heads, hidden 4096, 36 layers;
  // V = 51200, s = 2048; ffn = 4h = 16384.
  const ModelSpec m = *find_preset("gpt3-7.5b");
  EXPECT_EQ(m.num_layers, 36);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_attention_heads, 32);
  EXPECT_EQ(m.num_query_groups, 32);
  EXPECT_EQ(m.ffn_hidden_size, 16384);
  EXPECT_EQ(m.vocab_size, 51200);
  EXPECT_EQ(m.seq_length, 2048);
  EXPECT_EQ(m.mlp, Mlp::gelu);
  EXPECT_EQ(m.norm, Norm::layernorm);
  EXPECT_FALSE(m.untie_embeddings);
  EXPECT_TRUE(m.add_bias_linear);
  EXPECT_TRUE(m.learned_position_embeddings);
  EXPECT_FALSE(m.moe.has_value());
  const ModelSpec t = *find_preset("gpt3-1t");
  EXPECT_EQ(t.num_layers, 128);
  EXPECT_EQ(t.hidden_size, 25600);
  EXPECT_EQ(t.num_attention_heads, 160);
}

TEST(Presets, LlamaAndMixtralShapes) {
  // meta-llama/Meta-Llama-3-8B config.json: 8 kv heads, vocab 128256, untied, RMSNorm, SwiGLU.
  const ModelSpec l = *find_preset("llama3-8b");
  EXPECT_EQ(l.num_query_groups, 8);
  EXPECT_EQ(l.vocab_size, 128256);
  EXPECT_EQ(l.ffn_hidden_size, 14336);
  EXPECT_TRUE(l.untie_embeddings);
  EXPECT_FALSE(l.add_bias_linear);
  EXPECT_FALSE(l.learned_position_embeddings);
  EXPECT_EQ(l.norm, Norm::rmsnorm);
  EXPECT_EQ(l.mlp, Mlp::swiglu);
  EXPECT_EQ(l.hidden_dropout, 0.0);  // no dropout in Llama; GPT presets keep Megatron's 0.1
  EXPECT_EQ(l.attention_dropout, 0.0);
  EXPECT_EQ(find_preset("gpt3-175b")->hidden_dropout, 0.1);
  // mistralai/Mixtral-8x7B-v0.1: 8 experts, top-2, expert ffn 14336, every layer MoE.
  const ModelSpec x = *find_preset("mixtral-8x7b");
  ASSERT_TRUE(x.moe.has_value());
  EXPECT_EQ(x.moe->num_experts, 8);
  EXPECT_EQ(x.moe->top_k, 2);
  EXPECT_EQ(x.moe->ffn_hidden_size, 14336);
  EXPECT_TRUE(x.is_moe_layer(0));
  EXPECT_TRUE(x.is_moe_layer(31));
}

std::string preset_error_of(const std::string& yaml) {
  try {
    parse_presets_yaml(yaml, "my-presets.yaml");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Presets, ParserRejectsBadEntries) {
  const std::string ok = R"(models:
  - name: tiny
    source: "hand-written"
    num_layers: 2
    hidden_size: 64
    num_attention_heads: 4
    ffn_hidden_size: 256
    vocab_size: 1000
    seq_length: 128
    mlp: gelu
    norm: layernorm
    untie_embeddings: false
    add_bias_linear: true
    learned_position_embeddings: true
)";
  const auto parsed = parse_presets_yaml(ok, "my-presets.yaml");
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed[0].num_query_groups, 4);  // defaults to the head count
  // Unknown key (a misspelling): the error names the file, the model and the key.
  std::string e = preset_error_of(ok + "    hiden_size: 64\n");
  EXPECT_NE(e.find("my-presets.yaml"), std::string::npos) << e;
  EXPECT_NE(e.find("tiny"), std::string::npos) << e;
  EXPECT_NE(e.find("hiden_size"), std::string::npos) << e;
  // Missing key.
  std::string missing = ok;
  missing.erase(missing.find("    vocab_size: 1000\n"), 21);
  e = preset_error_of(missing);
  EXPECT_NE(e.find("vocab_size"), std::string::npos) << e;
  // Bad enum value.
  std::string relu = ok;
  relu.replace(relu.find("mlp: gelu"), 9, "mlp: relu");
  e = preset_error_of(relu);
  EXPECT_NE(e.find("relu"), std::string::npos) << e;
  // Duplicate names.
  e = preset_error_of(ok + ok.substr(ok.find("  - name")));
  EXPECT_NE(e.find("duplicate"), std::string::npos) << e;
}

TEST(ModelSpec, MoeLayerFrequency) {
  // Megatron-core moe_layer_freq = 2: layers 0, 2, 4, ... are MoE.
  ModelSpec m = *find_preset("mixtral-8x7b");
  m.moe->layer_freq = 2;
  EXPECT_TRUE(m.is_moe_layer(0));
  EXPECT_FALSE(m.is_moe_layer(1));
  EXPECT_TRUE(m.is_moe_layer(2));
  EXPECT_THROW(m.is_moe_layer(32), std::invalid_argument);
  EXPECT_FALSE(find_preset("llama2-7b")->is_moe_layer(3));
}

// Megatron-core's list form of --moe-layer-freq (a Python list expression of 0/1 per layer).
TEST(ModelSpec, MoeLayerPattern) {
  EXPECT_EQ(parse_moe_layer_pattern("([0]*1+[1]*3)"), (std::vector<std::uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(parse_moe_layer_pattern("[0]*2+[1]*2"), (std::vector<std::uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ(parse_moe_layer_pattern(" [1, 0] * 2 "), (std::vector<std::uint8_t>{1, 0, 1, 0}));
  EXPECT_EQ(parse_moe_layer_pattern("[1,1,0]"), (std::vector<std::uint8_t>{1, 1, 0}));
  for (const char* bad : {"", "()", "[2]", "[0]*", "[0]+", "[0,]", "(0,1)", "[0]*1x", "[0]*9999999", "[0]-[1]"})
    EXPECT_THROW(parse_moe_layer_pattern(bad), std::invalid_argument) << bad;
  try {
    parse_moe_layer_pattern("[0]*2+[3]");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("0 or 1"), std::string::npos) << e.what();
  }
  ModelSpec m = *find_preset("mixtral-8x7b");
  m.moe->layer_pattern = parse_moe_layer_pattern("[0]*2+[1]*30");
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_FALSE(m.is_moe_layer(1));
  EXPECT_TRUE(m.is_moe_layer(2));
  EXPECT_TRUE(m.is_moe_layer(31));
}

// DeepSeekMoE 16B (arXiv 2401.06066: 16.4B parameters, 2.8B activated): a dense first layer
// (first_k_dense_replace 1), then 64 fine-grained experts of 1408, top-6, and 2 shared.
TEST(Presets, DeepSeekMoe16bCounts) {
  const ModelSpec m = *find_preset("deepseek-moe-16b");
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_TRUE(m.is_moe_layer(1));
  EXPECT_TRUE(m.is_moe_layer(27));
  const ParamCounts c = count_params(m);
  // Embedding and head 2 · 102400 · 2048; attention 4 · 2048² a layer; the dense MLP
  // 3 · 2048 · 10944; a MoE layer's 66 experts of 3 · 2048 · 1408 and a 64 × 2048 router;
  // two RMSNorms a layer and the final one.
  const std::int64_t h = 2048, attn = 4 * h * h, norms = 2 * h;
  const std::int64_t expert = 3 * h * 1408;
  const std::int64_t expected =
      2 * 102400 * h + (attn + norms + 3 * h * 10944) + 27 * (attn + norms + 66 * expert + 64 * h) + h;
  EXPECT_EQ(c.total, expected);
  EXPECT_NEAR(c.total / 1e9, 16.4, 0.05);
  EXPECT_NEAR(c.active / 1e9, 2.8, 0.05);
}

TEST(HfConfig, Llama2_7b) {
  const ModelSpec m = from_hf_config(data_path("llama2-7b-config.json"));
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.num_attention_heads, 32);
  EXPECT_EQ(m.num_query_groups, 32);
  EXPECT_EQ(m.ffn_hidden_size, 11008);
  EXPECT_EQ(m.vocab_size, 32000);
  EXPECT_EQ(m.seq_length, 4096);
  EXPECT_EQ(m.mlp, Mlp::swiglu);  // hidden_act silu
  EXPECT_EQ(m.norm, Norm::rmsnorm);
  EXPECT_TRUE(m.untie_embeddings);
  EXPECT_FALSE(m.add_bias_linear);
  EXPECT_FALSE(m.learned_position_embeddings);
  EXPECT_EQ(m.hidden_dropout, 0.0);     // no hidden dropout module in LlamaDecoderLayer
  EXPECT_EQ(m.attention_dropout, 0.0);  // attention_dropout 0.0
  // Same count as the preset: 6,738,415,616 (see params_test).
  EXPECT_EQ(count_params(m).total, 6'738'415'616);
}

TEST(HfConfig, Gpt2KeysAndDefaults) {
  // GPT-2 small: n_inner null → 4h; tie_word_embeddings defaults to true.
  // Params: wte 50257·768 = 38,597,376; wpe 1024·768 = 786,432;
  // 12 layers × (12h² + 13h) = 12 × 7,087,872 = 85,054,464; ln_f 2h = 1,536;
  // total 124,439,808 (the well-known "124M").
  TempConfig c(R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                   "n_positions": 1024, "n_inner": null, "vocab_size": 50257,
                   "activation_function": "gelu_new"})");
  const ModelSpec m = from_hf_config(c.path());
  EXPECT_EQ(m.ffn_hidden_size, 3072);
  EXPECT_EQ(m.seq_length, 1024);
  EXPECT_EQ(m.mlp, Mlp::gelu);
  EXPECT_EQ(m.norm, Norm::layernorm);
  EXPECT_FALSE(m.untie_embeddings);
  EXPECT_TRUE(m.learned_position_embeddings);
  EXPECT_EQ(m.hidden_dropout, 0.1);  // resid_pdrop / attn_pdrop: GPT2Config's defaults
  EXPECT_EQ(m.attention_dropout, 0.1);
  EXPECT_EQ(count_params(m).total, 124'439'808);
}

TEST(HfConfig, MixtralExperts) {
  TempConfig c(R"({"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                   "vocab_size": 32000, "max_position_embeddings": 32768, "hidden_act": "silu",
                   "num_local_experts": 8, "num_experts_per_tok": 2, "rms_norm_eps": 1e-5,
                   "tie_word_embeddings": false})");
  const ModelSpec m = from_hf_config(c.path());
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_EQ(m.moe->num_experts, 8);
  EXPECT_EQ(m.moe->top_k, 2);
  EXPECT_EQ(m.moe->ffn_hidden_size, 14336);
  EXPECT_EQ(count_params(m).total, count_params(*find_preset("mixtral-8x7b")).total);
}

// DeepSeek (n_routed_experts, n_shared_experts, first_k_dense_replace) and Qwen2-MoE
// (shared_expert_intermediate_size, decoder_sparse_step counting from layer 1, mlp_only_layers)
// as their modeling files build them; multi-head latent attention is refused.
TEST(HfConfig, FineGrainedExpertsAndLayerPatterns) {
  TempConfig deepseek(R"({"model_type": "deepseek", "hidden_size": 2048, "num_hidden_layers": 28,
                          "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 10944,
                          "moe_intermediate_size": 1408, "n_routed_experts": 64, "num_experts_per_tok": 6,
                          "n_shared_experts": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1,
                          "vocab_size": 102400, "max_position_embeddings": 4096, "hidden_act": "silu",
                          "tie_word_embeddings": false})");
  const ModelSpec d = from_hf_config(deepseek.path());
  ASSERT_TRUE(d.moe.has_value());
  EXPECT_EQ(d.moe->shared_experts, 2);
  EXPECT_EQ(d.moe->layer_pattern, parse_moe_layer_pattern("[0]+[1]*27"));
  EXPECT_EQ(count_params(d).total, count_params(*find_preset("deepseek-moe-16b")).total);

  TempConfig qwen(R"({"model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 6,
                      "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 256,
                      "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,
                      "shared_expert_intermediate_size": 128, "decoder_sparse_step": 2,
                      "mlp_only_layers": [3], "vocab_size": 100, "max_position_embeddings": 64})");
  const ModelSpec q = from_hf_config(qwen.path());
  EXPECT_EQ(q.moe->shared_experts, 4);
  EXPECT_EQ(q.moe->layer_pattern, (std::vector<std::uint8_t>{0, 1, 0, 0, 0, 1}));  // (i + 1) % 2 == 0, not 3
  // Qwen2-MoE's shared_expert_gate: 64 weights in each of its two MoE layers.
  EXPECT_TRUE(q.moe->shared_expert_gate);
  ModelSpec ungated = q;
  ungated.moe->shared_expert_gate = false;
  EXPECT_EQ(count_params(q).total - count_params(ungated).total, 2 * 64);
  EXPECT_FALSE(d.moe->shared_expert_gate);

  std::string text = R"({"model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 6,
                         "num_attention_heads": 4, "intermediate_size": 256, "moe_intermediate_size": 32,
                         "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 100,
                         "max_position_embeddings": 64, )";
  TempConfig no_shared(text + R"("shared_expert_intermediate_size": 0, "n_shared_experts": 0})");
  EXPECT_EQ(from_hf_config(no_shared.path()).moe->shared_experts, 0);
  TempConfig odd_shared(text + R"("shared_expert_intermediate_size": 100})");
  EXPECT_NE(error_of(odd_shared.path()).find("shared_expert_intermediate_size"), std::string::npos);
  TempConfig bad_layers(text + R"("mlp_only_layers": [9]})");
  EXPECT_NE(error_of(bad_layers.path()).find("mlp_only_layers"), std::string::npos);
  TempConfig mla(text + R"("kv_lora_rank": 512, "q_lora_rank": null})");
  const std::string e = error_of(mla.path());
  EXPECT_NE(e.find("kv_lora_rank"), std::string::npos) << e;
  EXPECT_NE(e.find("latent attention"), std::string::npos) << e;
}

TEST(HfConfig, ErrorsNameFileAndKey) {
  TempConfig missing(R"({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 2,
                         "intermediate_size": 8, "vocab_size": 10, "max_position_embeddings": 16})");
  std::string e = error_of(missing.path());
  EXPECT_NE(e.find(missing.path()), std::string::npos) << e;
  EXPECT_NE(e.find("hidden_size"), std::string::npos) << e;

  TempConfig wrong_type(R"({"model_type": "llama", "hidden_size": 8, "num_hidden_layers": "2",
                            "num_attention_heads": 2, "intermediate_size": 8, "vocab_size": 10,
                            "max_position_embeddings": 16})");
  e = error_of(wrong_type.path());
  EXPECT_NE(e.find("num_hidden_layers"), std::string::npos) << e;
  EXPECT_NE(e.find("\"2\""), std::string::npos) << e;

  TempConfig bad_act(R"({"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2,
                         "num_attention_heads": 2, "intermediate_size": 8, "vocab_size": 10,
                         "max_position_embeddings": 16, "hidden_act": "relu"})");
  e = error_of(bad_act.path());
  EXPECT_NE(e.find("hidden_act"), std::string::npos) << e;
  EXPECT_NE(e.find("relu"), std::string::npos) << e;

  TempConfig not_json("{ hidden_size: ");
  EXPECT_NE(error_of(not_json.path()).find(not_json.path()), std::string::npos);

  // A fuzz crasher: nlohmann throws out_of_range (not parse_error) for a number beyond double.
  TempConfig number_overflow(R"({"model_type": "llama", "hidden_size": 1e28256, "num_hidden_layers": 2})");
  e = error_of(number_overflow.path());
  EXPECT_NE(e.find(number_overflow.path()), std::string::npos) << e;
  EXPECT_NE(e.find("1e28256"), std::string::npos) << e;

  e = error_of("/nonexistent/config.json");
  EXPECT_NE(e.find("/nonexistent/config.json"), std::string::npos) << e;
}

}  // namespace
}  // namespace ptsim::models
