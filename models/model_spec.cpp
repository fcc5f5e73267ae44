#include "models/model_spec.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include <stdexcept>
#include "hw/errors.h"
#include "hw/input_file.h"
#include "hw/yaml_limits.h"

namespace ptsim::embedded {
extern const char presets_yaml[];  // models/presets.yaml, embedded by CMake
}

namespace ptsim::models {

std::vector<std::uint8_t> parse_moe_layer_pattern(const std::string& text) {
  std::string t;
  for (char c : text)
    if (c != ' ' && c != '\t') t += c;
  const auto bad = [&](const std::string& what) {
    throw std::invalid_argument(fmt::format(
        "'{}' is not a MoE layer pattern ({}): give a layer frequency N or a sum of 0/1 lists like \"([0]*1+[1]*27)\"",
        text, what));
  };
  if (t.size() >= 2 && t.front() == '(' && t.back() == ')') t = t.substr(1, t.size() - 2);
  if (t.empty()) bad("empty");
  std::vector<std::uint8_t> out;
  std::size_t i = 0;
  for (;;) {
    if (i >= t.size() || t[i] != '[') bad("a term must start with '['");
    std::vector<std::uint8_t> term;
    for (++i;;) {
      if (i >= t.size() || (t[i] != '0' && t[i] != '1')) bad("list entries are 0 or 1");
      term.push_back(static_cast<std::uint8_t>(t[i++] - '0'));
      if (i < t.size() && t[i] == ',') {
        ++i;
        continue;
      }
      if (i >= t.size() || t[i] != ']') bad("a list must end with ']'");
      ++i;
      break;
    }
    long repeat = 1;
    if (i < t.size() && t[i] == '*') {
      const std::size_t from = ++i;
      while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
      if (i == from || i - from > 6) bad("'*' takes a count of 1 to 6 digits");
      repeat = std::stol(t.substr(from, i - from));
    }
    if (static_cast<long>(out.size()) + repeat * static_cast<long>(term.size()) > kMaxLayers) bad("too many layers");
    for (long r = 0; r < repeat; ++r) out.insert(out.end(), term.begin(), term.end());
    if (i == t.size()) break;
    if (t[i] != '+') bad(fmt::format("unexpected '{}'", t[i]));
    ++i;
  }
  return out;
}

bool ModelSpec::is_moe_layer(int layer_index) const {
  if (layer_index < 0 || layer_index >= num_layers) {
    throw std::invalid_argument(
        fmt::format("layer index {} out of range [0, {}) for model '{}'", layer_index, num_layers, name));
  }
  if (!moe || moe->num_experts <= 0) return false;
  // Megatron-core moe_layer_freq = N: layer i is MoE when i % N == 0, or the list's entry
  // (megatron/core/transformer/transformer_block.py, moe_layer_pattern).
  if (!moe->layer_pattern.empty())
    return static_cast<std::size_t>(layer_index) < moe->layer_pattern.size() &&
           moe->layer_pattern[static_cast<std::size_t>(layer_index)] != 0;
  return layer_index % moe->layer_freq == 0;
}

namespace {

// ---------------------------------------------------------------- presets ---

// The file being parsed, for error messages (threaded through explicitly: no globals).
struct Origin {
  const std::string& file;
};

[[noreturn]] void preset_error(const Origin& o, const std::string& model, const std::string& key,
                               const std::string& what) {
  throw std::invalid_argument(fmt::format("{}: model '{}', key '{}': {}", o.file, model, key, what));
}

template <typename T>
T required(const Origin& o, const YAML::Node& node, const std::string& model, const std::string& key) {
  const YAML::Node v = node[key];
  if (!v) preset_error(o, model, key, "missing");
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    preset_error(o, model, key, fmt::format("bad value '{}'", v.IsScalar() ? v.Scalar() : "<not a scalar>"));
  }
}

Mlp parse_mlp(const Origin& o, const std::string& s, const std::string& model) {
  if (s == "gelu") return Mlp::gelu;
  if (s == "swiglu") return Mlp::swiglu;
  preset_error(o, model, "mlp", fmt::format("'{}' is not gelu | swiglu", s));
}

Norm parse_norm(const Origin& o, const std::string& s, const std::string& model) {
  if (s == "layernorm") return Norm::layernorm;
  if (s == "rmsnorm") return Norm::rmsnorm;
  preset_error(o, model, "norm", fmt::format("'{}' is not layernorm | rmsnorm", s));
}

void reject_unknown_keys(const Origin& o, const YAML::Node& node, const std::set<std::string>& known,
                         const std::string& model) {
  if (!node.IsMap()) preset_error(o, model, "-", "expected a mapping");
  for (const auto& kv : node) {
    const auto key = kv.first.as<std::string>();
    if (!known.contains(key)) preset_error(o, model, key, "unknown key");
  }
}

ModelSpec parse_preset(const Origin& o, const YAML::Node& node) {
  ModelSpec m;
  if (!node.IsMap() || !node["name"]) preset_error(o, "?", "name", "missing");
  m.name = node["name"].as<std::string>();
  reject_unknown_keys(o, node,
                      {"name", "source", "num_layers", "hidden_size", "num_attention_heads", "num_query_groups",
                       "ffn_hidden_size", "vocab_size", "seq_length", "mlp", "norm", "untie_embeddings",
                       "add_bias_linear", "learned_position_embeddings", "hidden_dropout", "attention_dropout", "moe"},
                      m.name);
  m.source = required<std::string>(o, node, m.name, "source");
  m.num_layers = required<int>(o, node, m.name, "num_layers");
  m.hidden_size = required<std::int64_t>(o, node, m.name, "hidden_size");
  m.num_attention_heads = required<int>(o, node, m.name, "num_attention_heads");
  m.num_query_groups =
      node["num_query_groups"] ? required<int>(o, node, m.name, "num_query_groups") : m.num_attention_heads;
  m.ffn_hidden_size = required<std::int64_t>(o, node, m.name, "ffn_hidden_size");
  m.vocab_size = required<std::int64_t>(o, node, m.name, "vocab_size");
  m.seq_length = required<std::int64_t>(o, node, m.name, "seq_length");
  m.mlp = parse_mlp(o, required<std::string>(o, node, m.name, "mlp"), m.name);
  m.norm = parse_norm(o, required<std::string>(o, node, m.name, "norm"), m.name);
  m.untie_embeddings = required<bool>(o, node, m.name, "untie_embeddings");
  m.add_bias_linear = required<bool>(o, node, m.name, "add_bias_linear");
  m.learned_position_embeddings = required<bool>(o, node, m.name, "learned_position_embeddings");
  for (auto [key, field] :
       {std::pair{"hidden_dropout", &m.hidden_dropout}, {"attention_dropout", &m.attention_dropout}})
    if (node[key]) {
      *field = required<double>(o, node, m.name, key);
      if (!ModelSpec::valid_dropout(*field)) preset_error(o, m.name, key, "must be in [0, 1)");
    }
  if (const YAML::Node moe = node["moe"]) {
    reject_unknown_keys(
        o, moe, {"num_experts", "top_k", "ffn_hidden_size", "layer_freq", "shared_experts", "shared_expert_gate"},
        m.name);
    MoeSpec s;
    s.num_experts = required<int>(o, moe, m.name, "num_experts");
    s.top_k = required<int>(o, moe, m.name, "top_k");
    s.ffn_hidden_size = required<std::int64_t>(o, moe, m.name, "ffn_hidden_size");
    if (const YAML::Node f = moe["layer_freq"]; f && f.IsScalar() && f.Scalar().find('[') != std::string::npos) {
      try {
        s.layer_pattern = parse_moe_layer_pattern(f.Scalar());
      } catch (const std::invalid_argument& e) {
        preset_error(o, m.name, "moe.layer_freq", e.what());
      }
    } else {
      s.layer_freq = f ? required<int>(o, moe, m.name, "layer_freq") : 1;
    }
    s.shared_experts = moe["shared_experts"] ? required<int>(o, moe, m.name, "shared_experts") : 0;
    s.shared_expert_gate = moe["shared_expert_gate"] && required<bool>(o, moe, m.name, "shared_expert_gate");
    m.moe = s;
  }
  return m;
}

// ------------------------------------------------------- HuggingFace import ---

using Json = nlohmann::json;

[[noreturn]] void hf_error(const std::string& path, const std::string& key, const std::string& what) {
  throw std::invalid_argument(fmt::format("{}: key '{}': {}", path, key, what));
}

// The first of `keys` present in the config (GPT-2 spells them n_embd, ...).
const Json* find_key(const Json& j, std::initializer_list<const char*> keys, std::string* found) {
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_null()) {
      *found = k;
      return &*it;
    }
  }
  return nullptr;
}

std::int64_t hf_int(const Json& j, const std::string& path, std::initializer_list<const char*> keys, std::int64_t max) {
  std::string key;
  const Json* v = find_key(j, keys, &key);
  if (v == nullptr) hf_error(path, *keys.begin(), "missing");
  if (!v->is_number_integer()) hf_error(path, key, fmt::format("expected an integer, got {}", v->dump()));
  // Read as 64-bit (an unsigned above INT64_MAX is out of range too), then range-checked:
  // nothing is truncated to int.
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    hf_error(path, key, fmt::format("{} is out of range (at most {})", v->get<std::uint64_t>(), max));
  const auto x = v->get<std::int64_t>();
  if (x <= 0) hf_error(path, key, fmt::format("must be positive, got {}", x));
  if (x > max) hf_error(path, key, fmt::format("{} is out of range (at most {})", x, max));
  return x;
}

std::optional<std::int64_t> hf_opt_int(const Json& j, const std::string& path, std::initializer_list<const char*> keys,
                                       std::int64_t max) {
  std::string key;
  if (find_key(j, keys, &key) == nullptr) return std::nullopt;
  return hf_int(j, path, keys, max);
}

bool hf_bool(const Json& j, const std::string& path, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) hf_error(path, key, fmt::format("expected true/false, got {}", it->dump()));
  return it->get<bool>();
}

std::string hf_string(const Json& j, const std::string& path, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) hf_error(path, key, fmt::format("expected a string, got {}", it->dump()));
  return it->get<std::string>();
}

}  // namespace

std::vector<ModelSpec> parse_presets_yaml(const std::string& text, const std::string& origin) {
  const Origin o{origin};
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(fmt::format("{}: not valid YAML: {}", origin, e.what()));
  }
  const YAML::Node list = root.IsMap() ? root["models"] : YAML::Node();
  if (!list || !list.IsSequence()) preset_error(o, "-", "models", "missing or not a list");
  std::vector<ModelSpec> out;
  std::set<std::string> names;
  for (const auto& node : list) {
    out.push_back(parse_preset(o, node));
    if (!names.insert(out.back().name).second) preset_error(o, out.back().name, "name", "duplicate preset name");
  }
  return out;
}

const std::vector<ModelSpec>& presets() {
  // Parsed once on first use; immutable afterwards (thread-safe static init).
  static const std::vector<ModelSpec> parsed = parse_presets_yaml(ptsim::embedded::presets_yaml, "models/presets.yaml");
  return parsed;
}

std::optional<ModelSpec> find_preset(const std::string& name) {
  for (const auto& m : presets()) {
    if (m.name == name) return m;
  }
  return std::nullopt;
}

ModelSpec from_hf_config(const std::string& given) {
  namespace fs = std::filesystem;
  // A model directory (as downloaded from the Hub) holds its config in config.json.
  std::string path = given;
  std::error_code ec;
  if (fs::is_directory(given, ec)) {
    path = (fs::path(given) / "config.json").string();
    if (!fs::exists(path, ec))
      throw std::invalid_argument(
          fmt::format("{}: a directory without a config.json (give the model's folder or its config.json)", given));
  }
  std::string text;
  try {
    text = hw::read_input_file(path, "HuggingFace config", hw::kMaxHfConfigBytes);
    hw::check_yaml_depth(text, path, "HuggingFace config");
  } catch (const InputError& e) {  // this function's contract: std::invalid_argument naming the file
    throw std::invalid_argument(e.what());
  }
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number like 1e28256
    throw std::invalid_argument(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  if (!j.is_object()) throw std::invalid_argument(fmt::format("{}: expected a JSON object", path));

  const std::string model_type = hf_string(j, path, "model_type", "");
  // GPT-2 (transformers GPT2Config) and GPT-NeoX keep GPT-3's LayerNorm + biases;
  // Llama / Mistral / Mixtral / Qwen2 use RMSNorm, no biases, RoPE, SwiGLU.
  const bool gpt2 = model_type == "gpt2";
  const bool neox = model_type == "gpt_neox";

  ModelSpec m;
  // The model's folder name for a Hub download (.../Llama-3.1-70B/config.json), else the file's stem.
  const fs::path p(path);
  m.name = p.filename() == "config.json" && p.has_parent_path() && !p.parent_path().filename().empty()
               ? p.parent_path().filename().string()
               : p.stem().string();
  m.source = fmt::format("HuggingFace config {} (model_type '{}')", path, model_type);
  m.hidden_size = hf_int(j, path, {"hidden_size", "n_embd"}, kMaxHiddenSize);
  m.num_layers = static_cast<int>(hf_int(j, path, {"num_hidden_layers", "n_layer"}, kMaxLayers));
  m.num_attention_heads = static_cast<int>(hf_int(j, path, {"num_attention_heads", "n_head"}, kMaxHeads));
  m.num_query_groups =
      static_cast<int>(hf_opt_int(j, path, {"num_key_value_heads"}, kMaxHeads).value_or(m.num_attention_heads));
  // GPT-2: n_inner = null means 4·n_embd (transformers GPT2MLP).
  m.ffn_hidden_size =
      hf_opt_int(j, path, {"intermediate_size", "n_inner"}, kMaxFfnHiddenSize).value_or(4 * m.hidden_size);
  m.vocab_size = hf_int(j, path, {"vocab_size"}, kMaxVocabSize);
  m.seq_length = hf_int(j, path, {"max_position_embeddings", "n_positions"}, kMaxSeqLength);
  if (m.hidden_size % m.num_attention_heads != 0) {
    hf_error(path, "num_attention_heads",
             fmt::format("{} does not divide hidden_size {}", m.num_attention_heads, m.hidden_size));
  }
  if (m.num_attention_heads % m.num_query_groups != 0) {
    hf_error(path, "num_key_value_heads",
             fmt::format("{} does not divide num_attention_heads {}", m.num_query_groups, m.num_attention_heads));
  }
  if (auto hd = hf_opt_int(j, path, {"head_dim"}, kMaxHiddenSize); hd && *hd != m.head_dim()) {
    hf_error(path, "head_dim",
             fmt::format("{} differs from hidden_size/num_attention_heads = {}; not supported", *hd, m.head_dim()));
  }

  const std::string act = hf_string(j, path, gpt2 ? "activation_function" : "hidden_act", gpt2 ? "gelu_new" : "silu");
  if (act == "silu" || act == "swish") {
    m.mlp = Mlp::swiglu;  // Llama-style gated MLP: down(silu(gate(x)) * up(x))
  } else if (act.starts_with("gelu")) {
    m.mlp = Mlp::gelu;
  } else {
    hf_error(path, gpt2 ? "activation_function" : "hidden_act", fmt::format("'{}' is not silu or gelu*", act));
  }

  if (gpt2 || neox) {
    m.norm = Norm::layernorm;
    m.add_bias_linear = true;
    m.learned_position_embeddings = gpt2;  // NeoX uses rotary embeddings
  } else {
    m.norm = j.contains("layer_norm_eps") && !j.contains("rms_norm_eps") ? Norm::layernorm : Norm::rmsnorm;
    m.add_bias_linear = hf_bool(j, path, "attention_bias", false) || hf_bool(j, path, "mlp_bias", false);
    m.learned_position_embeddings = false;
  }
  // transformers' PretrainedConfig defaults tie_word_embeddings to true; Llama,
  // Mistral, Mixtral and GPT-NeoX configs override that default with false.
  m.untie_embeddings = !hf_bool(j, path, "tie_word_embeddings", gpt2);
  // Dropout: GPT-2's resid_pdrop / attn_pdrop (transformers GPT2Config default 0.1),
  // GPT-NeoX's hidden_dropout / attention_dropout (default 0.0); Llama, Mistral and
  // Mixtral have an attention_dropout (default 0.0) and no hidden dropout module.
  auto prob = [&](const char* key, double dflt) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return dflt;
    if (!it->is_number()) hf_error(path, key, "expected a number");
    const double v = it->get<double>();
    if (!ModelSpec::valid_dropout(v)) hf_error(path, key, fmt::format("{} is not a probability in [0, 1)", v));
    return v;
  };
  if (gpt2) {
    m.hidden_dropout = prob("resid_pdrop", 0.1);
    m.attention_dropout = prob("attn_pdrop", 0.1);
  } else if (neox) {
    m.hidden_dropout = prob("hidden_dropout", 0.0);
    m.attention_dropout = prob("attention_dropout", 0.0);
  } else {
    m.hidden_dropout = 0.0;
    m.attention_dropout = prob("attention_dropout", 0.0);
  }

  // DeepSeek-V2 / V3's multi-head latent attention compresses K and V (and Q) through
  // low-rank projections: not the attention ptsim models.
  for (const char* key : {"kv_lora_rank", "q_lora_rank"})
    if (const auto it = j.find(key); it != j.end() && !it->is_null())
      hf_error(path, key, "multi-head latent attention (DeepSeek-V2 / V3) is not modelled");

  // MoE: Mixtral's num_local_experts, Qwen2-MoE's num_experts, DeepSeek's n_routed_experts.
  if (auto experts = hf_opt_int(j, path, {"num_local_experts", "num_experts", "n_routed_experts"}, kMaxExperts)) {
    MoeSpec s;
    s.num_experts = static_cast<int>(*experts);
    s.top_k = static_cast<int>(hf_int(j, path, {"num_experts_per_tok"}, kMaxExperts));
    s.ffn_hidden_size = hf_opt_int(j, path, {"moe_intermediate_size"}, kMaxFfnHiddenSize).value_or(m.ffn_hidden_size);
    if (s.top_k > s.num_experts) {
      hf_error(path, "num_experts_per_tok", fmt::format("{} exceeds the {} experts", s.top_k, s.num_experts));
    }
    // A count from 0 to `max`; `absent` when the key is missing or null.
    const auto whole = [&](const char* key, std::int64_t max, std::int64_t absent) -> std::int64_t {
      const auto it = j.find(key);
      if (it == j.end() || it->is_null()) return absent;
      if (!it->is_number_integer() || it->get<std::int64_t>() < 0 || it->get<std::int64_t>() > max)
        hf_error(path, key, fmt::format("expected an integer from 0 to {}, got {}", max, it->dump()));
      return it->get<std::int64_t>();
    };
    // Shared experts: DeepSeek's n_shared_experts of the experts' width (modeling_deepseek.py
    // DeepseekMoE: one MLP of moe_intermediate_size × n_shared_experts); Qwen2-MoE's one MLP of
    // shared_expert_intermediate_size with its sigmoid shared_expert_gate (modeling_qwen2_moe.py).
    s.shared_experts = static_cast<int>(whole("n_shared_experts", kMaxExperts, 0));
    if (const std::int64_t w = whole("shared_expert_intermediate_size", kMaxFfnHiddenSize, 0); w > 0) {
      if (w % s.ffn_hidden_size != 0)
        hf_error(path, "shared_expert_intermediate_size",
                 fmt::format("{} is not a multiple of moe_intermediate_size {}", w, s.ffn_hidden_size));
      s.shared_experts = static_cast<int>(w / s.ffn_hidden_size);
      s.shared_expert_gate = model_type == "qwen2_moe";  // Qwen2MoeSparseMoeBlock.shared_expert_gate
    }
    // Which layers are MoE. DeepSeek: layer i when i >= first_k_dense_replace and i %
    // moe_layer_freq == 0 (DeepseekDecoderLayer). Qwen2-MoE: when i is not in mlp_only_layers
    // and (i + 1) % decoder_sparse_step == 0 (Qwen2MoeDecoderLayer). The dense layers keep
    // intermediate_size.
    const std::int64_t first_dense = whole("first_k_dense_replace", kMaxLayers, -1),
                       freq = whole("moe_layer_freq", kMaxLayers, -1),
                       step = whole("decoder_sparse_step", kMaxLayers, -1);
    for (auto [key, v] : {std::pair{"moe_layer_freq", freq}, std::pair{"decoder_sparse_step", step}})
      if (v == 0) hf_error(path, key, "must be at least 1");
    std::vector<std::int64_t> mlp_only;
    if (const auto it = j.find("mlp_only_layers"); it != j.end() && !it->is_null()) {
      if (!it->is_array()) hf_error(path, "mlp_only_layers", "expected a list of layer indices");
      for (const auto& x : *it) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() >= m.num_layers)
          hf_error(path, "mlp_only_layers", fmt::format("{} is not a layer index below {}", x.dump(), m.num_layers));
        mlp_only.push_back(x.get<std::int64_t>());
      }
    }
    if (first_dense > 0 || freq > 1 || step > 1 || !mlp_only.empty()) {
      for (std::int64_t i = 0; i < m.num_layers; ++i) {
        bool sparse = i >= std::max<std::int64_t>(first_dense, 0) && i % std::max<std::int64_t>(freq, 1) == 0;
        sparse = sparse && (i + 1) % std::max<std::int64_t>(step, 1) == 0 &&
                 std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end();
        s.layer_pattern.push_back(sparse ? 1 : 0);
      }
    }
    m.moe = s;
  }
  return m;
}

}  // namespace ptsim::models
