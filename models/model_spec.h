// A transformer architecture (Megatron-LM argument names) and the built-in presets.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ptsim::models {

enum class Mlp { gelu, swiglu };
enum class Norm { layernorm, rmsnorm };

struct MoeSpec {
  int num_experts = 0;
  int top_k = 0;
  std::int64_t ffn_hidden_size = 0;
  int layer_freq = 1;  // every Nth layer is MoE (layer i when i % N == 0)
  // Or, when not empty, which layers are: one entry per layer, 1 = MoE (Megatron-core's
  // --moe-layer-freq given as a list, e.g. "([0]*1+[1]*27)"; parse_moe_layer_pattern).
  std::vector<std::uint8_t> layer_pattern;
  int shared_experts = 0;  // always-on experts of the same ffn size
  // A sigmoid gate on the shared experts' output, a hidden × 1 weight (Qwen2-MoE's
  // shared_expert_gate; Megatron-core --moe-shared-expert-gate). Its 2·hidden FLOPs a token
  // are not costed.
  bool shared_expert_gate = false;
};

// Megatron-core's --moe-layer-freq in its list form (megatron/training/arguments.py
// moe_freq_type: a Python expression evaluated to a list of 0/1 per layer): a sum of
// bracketed 0/1 lists, each optionally repeated ("*N"), in optional parentheses, e.g.
// "([0]*3+[1]*58)" or "[1,0,1,0]". Throws std::invalid_argument saying what is wrong.
std::vector<std::uint8_t> parse_moe_layer_pattern(const std::string& text);

// Documented limits (README "Limits") on a model's sizes: every reader (scenario, preset,
// HuggingFace config) rejects a larger value naming its key, so that the products the
// simulator forms (parameters, FLOPs, bytes, token counts) stay far from int64 overflow.
inline constexpr std::int64_t kMaxLayers = 100'000;
inline constexpr std::int64_t kMaxHeads = 65'536;           // attention heads, query groups
inline constexpr std::int64_t kMaxHiddenSize = 1 << 20;     // 1,048,576
inline constexpr std::int64_t kMaxFfnHiddenSize = 1 << 24;  // 16,777,216
inline constexpr std::int64_t kMaxVocabSize = 1 << 24;
inline constexpr std::int64_t kMaxSeqLength = 1 << 24;  // tokens
inline constexpr std::int64_t kMaxExperts = 65'536;

// Megatron-LM's padded vocabulary (megatron/training/tokenizer/tokenizer.py
// _vocab_size_with_padding): the next multiple of make_vocab_size_divisible_by × tp.
inline std::int64_t megatron_padded_vocab(std::int64_t vocab, std::int64_t divisible, std::int64_t tp) {
  const std::int64_t multiple = divisible * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

struct ModelSpec {
  std::string name;
  std::string source;  // where the figures come from (paper / config.json)
  int num_layers = 0;
  std::int64_t hidden_size = 0;
  int num_attention_heads = 0;
  int num_query_groups = 0;  // kv heads; = heads for MHA
  std::int64_t ffn_hidden_size = 0;
  std::int64_t vocab_size = 0;
  std::int64_t seq_length = 0;
  Mlp mlp = Mlp::gelu;
  Norm norm = Norm::layernorm;
  bool untie_embeddings = false;
  bool add_bias_linear = true;              // GPT: biases on linear layers; Llama: none
  bool learned_position_embeddings = true;  // GPT: s×h table; Llama: RoPE (no params)
  // Dropout probabilities (Megatron-LM --hidden-dropout / --attention-dropout, default
  // 0.1 each). With 0, PyTorch's dropout returns its input (aten Dropout.cpp: p == 0 is
  // the identity): no mask is saved and no dropout kernel runs. Llama and Mixtral train
  // without dropout (their HF configs: attention_dropout 0.0, no hidden dropout module).
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  // What every reader accepts for a dropout probability: [0, 1) (NaN is not).
  static bool valid_dropout(double p) { return p >= 0 && p < 1; }
  std::optional<MoeSpec> moe;

  std::int64_t head_dim() const { return hidden_size / num_attention_heads; }
  bool is_moe_layer(int layer_index) const;  // 0-based
};

// Built-in presets (data embedded in the binary, models/presets.yaml).
const std::vector<ModelSpec>& presets();
std::optional<ModelSpec> find_preset(const std::string& name);
// Parses a presets document (`models:` list, keys as in models/presets.yaml);
// unknown or missing keys throw std::invalid_argument naming `origin`, the model
// and the key. presets() is this applied to the embedded file.
std::vector<ModelSpec> parse_presets_yaml(const std::string& text, const std::string& origin);

// A HuggingFace config.json (LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM,
// GPT2/GPT-NeoX style), or a model directory holding one as config.json. The name is the
// directory's (Hub download) or the file's stem. Throws std::invalid_argument naming the
// file and key (a directory without config.json included).
ModelSpec from_hf_config(const std::string& path);

}  // namespace ptsim::models
