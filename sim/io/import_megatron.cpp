// Megatron-LM launch arguments -> scenario keys (README "Inputs you already have").
// Flag meanings and defaults: Megatron-LM megatron/training/arguments.py.
#include <fmt/format.h>

#include <algorithm>

#include <charconv>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "hw/errors.h"
#include "models/model_spec.h"
#include "sim/io/import_args.h"

namespace ptsim::sim {
namespace {

// The words of a shell script with `\`-newline joined and comments dropped, quotes removed.
std::vector<std::string> words(const std::string& text) {
  std::string joined;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      joined += ' ';
      ++i;
    } else {
      joined += text[i];
    }
  }
  std::vector<std::string> out;
  std::istringstream lines(joined);
  for (std::string line; std::getline(lines, line);) {
    std::string word;
    char quote = 0;
    for (std::size_t i = 0; i <= line.size(); ++i) {
      const char c = i < line.size() ? line[i] : ' ';
      if (quote) {
        if (c == quote)
          quote = 0;
        else
          word += c;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#' && word.empty()) {
        break;  // a comment to the end of the line
      } else if (c == ' ' || c == '\t' || c == '\r') {
        if (!word.empty()) out.push_back(word);
        word.clear();
      } else {
        word += c;
      }
    }
  }
  return out;
}

// Flags in order: "--name" or "--name=value", each with the words up to the next flag.
struct Flag {
  std::string name;
  std::vector<std::string> values;
};

std::vector<Flag> flags_of(const std::vector<std::string>& ws, const std::map<std::string, std::string>& vars) {
  std::vector<Flag> out;
  for (const auto& w : ws) {
    if (w.starts_with("--") && w.size() > 2) {
      const auto eq = w.find('=');
      out.push_back({w.substr(0, eq), {}});
      if (eq != std::string::npos) out.back().values.push_back(w.substr(eq + 1));
    } else if (!out.empty()) {
      out.back().values.push_back(w);
    }
  }
  // $NAME / ${NAME} values set in the script.
  static const std::regex var(R"(^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$)");
  for (auto& f : out)
    for (auto& v : f.values)
      if (std::smatch m; std::regex_match(v, m, var))
        if (const auto it = vars.find(m[1]); it != vars.end()) v = it->second;
  return out;
}

// NAME=value assignments with a one-word value (`export` allowed).
std::map<std::string, std::string> variables(const std::vector<std::string>& ws) {
  static const std::regex assign(R"(^([A-Za-z_][A-Za-z0-9_]*)=([^(\s][^\s]*)$)");
  std::map<std::string, std::string> vars;
  for (const auto& w : ws)
    if (std::smatch m; std::regex_match(w, m, assign)) vars[m[1]] = m[2];
  return vars;
}

class Mapper {
 public:
  Mapper(std::string source, std::vector<std::string>& warnings) : source_(std::move(source)), warnings_(warnings) {}

  // The flag's first value; nullopt (with a warning) when it is missing or an unset variable.
  std::optional<std::string> value(const Flag& f) const {
    if (f.values.empty()) throw InputError(source_, f.name, "needs a value");
    const std::string& v = f.values.front();
    if (v.starts_with("$")) {
      warnings_.push_back(
          fmt::format("{}: {}: '{}' is a shell variable the file does not set: flag ignored", source_, f.name, v));
      return std::nullopt;
    }
    return v;
  }
  [[noreturn]] void bad(const Flag& f, const std::string& what) const { throw InputError(source_, f.name, what); }
  std::optional<std::int64_t> whole(const Flag& f) const {
    const auto v = value(f);
    if (!v) return std::nullopt;
    std::int64_t x = 0;
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
    if (ec != std::errc() || end != v->data() + v->size() || x < 1 || x > (std::int64_t{1} << 40))
      throw InputError(source_, f.name, fmt::format("'{}' is not a whole number from 1 to 2^40", *v));
    return x;
  }
  std::optional<double> number(const Flag& f) const {
    return real(
        f, [](double x) { return x > 0 && x < 1e18; }, "a positive number");
  }
  std::optional<double> probability(const Flag& f) const {
    return real(f, models::ModelSpec::valid_dropout, "a probability in [0, 1)");
  }
  std::optional<std::string> one_of(const Flag& f, const std::vector<std::string>& options) const {
    const auto v = value(f);
    if (!v) return std::nullopt;
    for (const auto& o : options)
      if (*v == o) return v;
    std::string list;
    for (const auto& o : options) list += (list.empty() ? "" : ", ") + o;
    throw InputError(source_, f.name, fmt::format("'{}' is not one of {}", *v, list));
  }

 private:
  // The flag's value as a whole decimal number that `ok` accepts, else "is not `what`".
  template <class Ok>
  std::optional<double> real(const Flag& f, Ok ok, const char* what) const {
    const auto v = value(f);
    if (!v) return std::nullopt;
    double x = 0;
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
    if (ec != std::errc() || end != v->data() + v->size() || !ok(x))
      throw InputError(source_, f.name, fmt::format("'{}' is not {}", *v, what));
    return x;
  }

  std::string source_;
  std::vector<std::string>& warnings_;
};

}  // namespace

ImportedKeys import_megatron_args(const std::string& text, const std::string& source,
                                  std::optional<std::int64_t> num_gpus) {
  const auto ws = words(text);
  const auto vars = variables(ws);
  const auto flags = flags_of(ws, vars);
  ImportedKeys out;
  Mapper m(source, out.warnings);
  std::map<std::string, const Flag*> last;  // the last occurrence wins, as in argparse
  for (const auto& f : flags) last[f.name] = &f;
  const auto get = [&](const char* name) -> const Flag* {
    const auto it = last.find(name);
    return it == last.end() ? nullptr : it->second;
  };
  const auto has = [&](const char* name) { return get(name) != nullptr; };
  std::set<std::string> used;
  const auto use = [&](const char* name) {
    used.insert(name);
    return get(name);
  };

  YAML::Node model = out.keys["model"], par = out.keys["parallel"], train = out.keys["training"];
  const auto set_whole = [&](YAML::Node node, const char* key, const char* flag) -> std::optional<std::int64_t> {
    if (const Flag* f = use(flag))
      if (const auto v = m.whole(*f)) {
        node[key] = *v;
        return v;
      }
    return std::nullopt;
  };
  const auto layers = set_whole(model, "num_layers", "--num-layers");
  const auto hidden = set_whole(model, "hidden_size", "--hidden-size");
  set_whole(model, "num_attention_heads", "--num-attention-heads");
  // --num-query-groups counts only with --group-query-attention (else MHA).
  use("--group-query-attention");
  if (const Flag* f = use("--num-query-groups")) {
    if (has("--group-query-attention")) {
      if (const auto v = m.whole(*f)) model["num_query_groups"] = *v;
    } else {
      out.warnings.push_back(
          fmt::format("{}: --num-query-groups: ignored without --group-query-attention (as in "
                      "Megatron-LM: multi-head attention)",
                      source));
    }
  }
  const bool swiglu = static_cast<bool>(use("--swiglu"));
  model["mlp"] = swiglu ? "swiglu" : "gelu";
  if (!set_whole(model, "ffn_hidden_size", "--ffn-hidden-size") && hidden) {
    // Megatron's default: 4h, or for SwiGLU int(4h · 2/3 / 64) · 64 (arguments.py).
    model["ffn_hidden_size"] = swiglu ? (4 * *hidden * 2 / 3) / 64 * 64 : 4 * *hidden;
  }
  const auto seq = set_whole(model, "seq_length", "--seq-length");
  if (const Flag* f = use("--max-position-embeddings")) {
    if (const auto v = m.whole(*f)) {
      if (!seq) {
        model["seq_length"] = *v;
        out.warnings.push_back(fmt::format(
            "{}: --max-position-embeddings: no --seq-length: the sequence is taken as {} (the position table)", source,
            *v));
      } else if (*v != *seq) {
        out.warnings.push_back(
            fmt::format("{}: --max-position-embeddings: {} is not modelled beyond the sequence "
                        "length {} (the learned position table is taken as seq_length rows)",
                        source, *v, *seq));
      }
    }
  }
  if (const Flag* f = use("--vocab-size")) {
    if (const auto v = m.whole(*f)) {
      // Megatron pads the vocabulary to a multiple of --make-vocab-size-divisible-by (128) × tp.
      std::int64_t divisible = 128, tp = 1;
      if (const Flag* d = use("--make-vocab-size-divisible-by"))
        if (const auto x = m.whole(*d)) divisible = *x;
      if (const Flag* t = get("--tensor-model-parallel-size"))
        if (const auto x = m.whole(*t)) tp = *x;
      model["vocab_size"] = models::megatron_padded_vocab(*v, divisible, tp);
    }
  } else {
    use("--make-vocab-size-divisible-by");
    if (has("--vocab-file") || has("--tokenizer-model"))
      out.missing.emplace_back("model.vocab_size",
                               fmt::format("{}: --vocab-file/--tokenizer-model: the vocabulary size is in the "
                                           "tokenizer, not the arguments: set model.vocab_size",
                                           source));
  }
  if (const Flag* f = use("--normalization"))
    if (const auto v = m.one_of(*f, {"LayerNorm", "RMSNorm"}))
      model["norm"] = *v == "LayerNorm" ? "layernorm" : "rmsnorm";
  model["untie_embeddings"] = static_cast<bool>(use("--untie-embeddings-and-output-weights"));
  model["add_bias_linear"] = !use("--disable-bias-linear");
  if (const Flag* f = use("--hidden-dropout"))
    if (const auto v = m.probability(*f)) model["hidden_dropout"] = *v;
  if (const Flag* f = use("--attention-dropout"))
    if (const auto v = m.probability(*f)) model["attention_dropout"] = *v;
  model["position_embedding"] = "learned_absolute";
  if (const Flag* f = use("--position-embedding-type"))
    if (const auto v = m.one_of(*f, {"learned_absolute", "rope"})) model["position_embedding"] = *v;
  if (const Flag* f = use("--num-experts")) {
    if (const auto v = m.whole(*f)) {
      YAML::Node moe = model["moe"];
      moe["num_experts"] = *v;
      moe["top_k"] = 2;  // --moe-router-topk default
      set_whole(moe, "top_k", "--moe-router-topk");
      set_whole(moe, "ffn_hidden_size", "--moe-ffn-hidden-size");
      if (const Flag* c = use("--moe-expert-capacity-factor"))
        if (const auto x = m.number(*c)) moe["capacity_factor"] = *x;
      if (const Flag* c = use("--moe-layer-freq")) {
        if (const auto x = m.value(*c)) {
          if (x->find_first_not_of("0123456789") == std::string::npos) {
            set_whole(moe, "layer_freq", "--moe-layer-freq");
          } else {
            // The list form, e.g. "([0]*1+[1]*27)": kept as written, checked here.
            try {
              models::parse_moe_layer_pattern(*x);
              moe["layer_freq"] = *x;
            } catch (const std::invalid_argument& e) {
              m.bad(*c, e.what());
            }
          }
        }
      }
      if (use("--moe-shared-expert-gate")) moe["shared_expert_gate"] = true;
      // Megatron's shared experts are one MLP of --moe-shared-expert-intermediate-size;
      // ptsim counts them in experts of the routed width.
      if (const Flag* c = use("--moe-shared-expert-intermediate-size"))
        if (const auto x = m.whole(*c)) {
          const std::int64_t width = moe["ffn_hidden_size"]     ? moe["ffn_hidden_size"].as<std::int64_t>()
                                     : model["ffn_hidden_size"] ? model["ffn_hidden_size"].as<std::int64_t>()
                                                                : 0;
          if (width > 0 && *x % width == 0)
            moe["shared_experts"] = *x / width;
          else
            m.bad(*c, fmt::format("{} is not a multiple of the experts' width {} (--moe-ffn-hidden-size)", *x, width));
        }
    }
  }

  const auto tp = set_whole(par, "tensor_parallel", "--tensor-model-parallel-size");
  const auto pp = set_whole(par, "pipeline_parallel", "--pipeline-model-parallel-size");
  const auto cp = set_whole(par, "context_parallel", "--context-parallel-size");
  set_whole(par, "expert_parallel", "--expert-model-parallel-size");
  // Megatron-core's MoE parallel folding: the experts' own tensor-parallel size (default
  // the model's; parallel.expert_tensor_parallel, a divisor of tp).
  if (const Flag* f = use("--expert-tensor-parallel-size"))
    if (const auto etp = m.whole(*f); etp && *etp != tp.value_or(1) && has("--num-experts")) {
      if (tp.value_or(1) % *etp != 0)
        throw InputError(source, f->name,
                         fmt::format("{} does not divide --tensor-model-parallel-size {}: experts sharded over "
                                     "more ranks than the attention's are not modelled",
                                     *etp, tp.value_or(1)));
      par["expert_tensor_parallel"] = *etp;
    }
  if (const Flag* f = use("--num-layers-per-virtual-pipeline-stage")) {
    if (const auto per = m.whole(*f); per && layers) {
      const std::int64_t stages = pp.value_or(1);
      if (*layers % (stages * *per) != 0)
        throw InputError(
            source, f->name,
            fmt::format("{} does not divide --num-layers ({}) over {} pipeline stages", *per, *layers, stages));
      par["virtual_pipeline_stages"] = *layers / (stages * *per);
    }
  }
  set_whole(par, "virtual_pipeline_stages", "--num-virtual-stages-per-pipeline-rank");
  // Uneven pipeline splits: Megatron's own keys (training.megatron, README "Training frameworks").
  if (has("--decoder-first-pipeline-num-layers") || has("--decoder-last-pipeline-num-layers") ||
      has("--account-for-embedding-in-pipeline-split") || has("--account-for-loss-in-pipeline-split")) {
    YAML::Node meg = train["megatron"];
    set_whole(meg, "decoder_first_pipeline_num_layers", "--decoder-first-pipeline-num-layers");
    set_whole(meg, "decoder_last_pipeline_num_layers", "--decoder-last-pipeline-num-layers");
    for (const char* flag : {"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"})
      if (use(flag)) {
        std::string key = std::string(flag).substr(2);
        std::replace(key.begin(), key.end(), '-', '_');
        meg[key] = true;
      }
  }
  // Megatron-LM's tensor-parallel all-reduce beside the weight-gradient GEMM (on by default;
  // README "Cost model"), turned off by the script.
  if (use("--no-async-tensor-model-parallel-allreduce"))
    train["megatron"]["async_tensor_model_parallel_allreduce"] = false;
  if (use("--no-gradient-accumulation-fusion")) train["megatron"]["gradient_accumulation_fusion"] = false;
  // Megatron turns sequence parallelism off without tensor parallelism ("Disabling sequence
  // parallelism because tensor model parallelism is disabled", megatron/training/arguments.py).
  const bool sp = static_cast<bool>(use("--sequence-parallel"));
  par["sequence_parallel"] = sp && tp.value_or(1) > 1;
  if (sp && tp.value_or(1) <= 1)
    out.warnings.push_back(
        fmt::format("{}: --sequence-parallel: off, as Megatron-LM turns it off without tensor parallelism", source));
  par["recompute"] = "none";
  if (use("--recompute-activations")) par["recompute"] = "selective";
  if (const Flag* f = use("--recompute-granularity"))
    if (const auto v = m.one_of(*f, {"full", "selective"})) par["recompute"] = *v;
  const bool dist_opt = static_cast<bool>(use("--use-distributed-optimizer"));
  par["zero_stage"] = dist_opt ? 1 : 0;
  // Megatron's defaults are off; the scenario's are on: say what the script says.
  par["overlap_grad_reduce"] = static_cast<bool>(use("--overlap-grad-reduce"));
  par["overlap_param_gather"] = static_cast<bool>(use("--overlap-param-gather"));

  const auto micro = set_whole(train, "micro_batch_size", "--micro-batch-size");
  if (!set_whole(train, "global_batch_size", "--global-batch-size") && num_gpus) {
    const std::int64_t mp = tp.value_or(1) * pp.value_or(1) * cp.value_or(1);
    if (*num_gpus % mp == 0) train["global_batch_size"] = micro.value_or(1) * (*num_gpus / mp);  // Megatron's default
  }
  train["precision"] = "fp32";
  if (use("--fp16")) train["precision"] = "fp16";
  if (use("--bf16")) train["precision"] = "bf16";
  if (const Flag* f = use("--fp8-format"))
    if (m.value(*f)) train["precision"] = "fp8";
  if (const Flag* f = use("--optimizer"))
    if (const auto v = m.one_of(*f, {"adam", "sgd"})) train["optimizer"] = *v;
  // The attention kernel. Megatron-core's --attention-backend (AttnBackend: flash | fused |
  // unfused | local | auto; auto, the default, lets Transformer Engine pick a flash or fused
  // kernel): unfused (TE's UnfusedDotProductAttention) and local materialise the s × s scores,
  // as the local transformer's DotProductAttention (--transformer-impl local,
  // gpt_layer_specs.py get_gpt_layer_local_spec) does: naive in ptsim.
  bool local_impl = false;
  if (const Flag* impl = use("--transformer-impl"))
    if (const auto v = m.one_of(*impl, {"transformer_engine", "local", "inference_optimized"}))
      if (*v != "inference_optimized") {
        train["megatron"]["transformer_impl"] = *v;
        local_impl = *v == "local";
      }
  if (use("--use-flash-attn")) train["attention"] = "flash";
  if (const Flag* f = use("--attention-backend")) {
    if (const auto v = m.one_of(*f, {"flash", "fused", "unfused", "local", "auto"})) {
      if (*v == "unfused" || *v == "local") train["attention"] = "naive";
      if (*v == "flash") train["attention"] = "flash";
      if (*v == "fused") train["attention"] = "cudnn";
      if (*v == "auto" && local_impl) train["attention"] = "naive";
    }
  } else if (local_impl && !has("--use-flash-attn")) {
    train["attention"] = "naive";
  }
  // Megatron's softmax: the fused kernel unless --no-masked-softmax-fusion; in fp32 with
  // --attention-softmax-in-fp32, which --apply-query-key-layer-scaling implies.
  if (use("--no-masked-softmax-fusion")) train["megatron"]["masked_softmax_fusion"] = false;
  if (use("--moe-grouped-gemm")) train["megatron"]["moe_grouped_gemm"] = true;
  set_whole(train["megatron"], "microbatch_group_size_per_vp_stage",
            "--microbatch-group-size-per-virtual-pipeline-stage");
  if (use("--moe-shared-expert-overlap")) train["megatron"]["moe_shared_expert_overlap"] = true;
  if (use("--tp-comm-overlap")) train["megatron"]["tp_comm_overlap"] = true;
  // --cp-comm-type (nargs '+': one type for all layers, or one per layer): p2p, allgather and
  // a2a are modelled, one for all layers; a2a+p2p (hierarchical) is not.
  if (const Flag* f = use("--cp-comm-type")) {
    const std::set<std::string> types(f->values.begin(), f->values.end());
    if (types.size() == 1 && (types.count("p2p") || types.count("allgather") || types.count("a2a")))
      train["megatron"]["cp_comm_type"] = *types.begin();
    else
      out.warnings.push_back(
          fmt::format("{}: --cp-comm-type: only one of p2p, allgather or a2a for every layer is modelled: flag ignored "
                      "(ring exchange, p2p)",
                      source));
  }
  if (use("--cross-entropy-loss-fusion")) train["megatron"]["cross_entropy_loss_fusion"] = true;
  if (use("--no-check-for-nan-in-loss-and-grad")) train["megatron"]["check_for_nan_in_loss_and_grad"] = false;
  if (use("--ddp-average-in-collective")) train["megatron"]["ddp_average_in_collective"] = true;
  if (use("--no-delay-grad-reduce")) train["megatron"]["delay_grad_reduce"] = false;
  if (use("--defer-embedding-wgrad-compute")) {
    train["megatron"]["defer_embedding_wgrad_compute"] = true;
    set_whole(train["megatron"], "wgrad_deferral_limit", "--wgrad-deferral-limit");
  }
  // Megatron sets bias_activation_fusion from the flag of the model's activation
  // (argument_utils.py: bias_swiglu_fusion under --swiglu, else bias_gelu_fusion).
  const bool no_swiglu_fusion = static_cast<bool>(use("--no-bias-swiglu-fusion"));
  const bool no_gelu_fusion = static_cast<bool>(use("--no-bias-gelu-fusion"));
  if (has("--swiglu") ? no_swiglu_fusion : no_gelu_fusion) train["megatron"]["bias_activation_fusion"] = false;
  // The MoE token dispatcher: Megatron-core's default is allgather (transformer_config.py
  // moe_token_dispatcher_type = "allgather"); ptsim's scenario default is alltoall, so a
  // script that names none says allgather.
  if (const Flag* f = use("--moe-token-dispatcher-type")) {
    if (const auto v = m.one_of(*f, {"allgather", "alltoall", "flex"}))
      train["megatron"]["moe_token_dispatcher_type"] = *v;
  } else if (has("--num-experts")) {
    train["megatron"]["moe_token_dispatcher_type"] = "allgather";
  }
  const bool fp32_softmax = static_cast<bool>(use("--attention-softmax-in-fp32"));
  if (use("--apply-query-key-layer-scaling") || fp32_softmax) train["megatron"]["attention_softmax_in_fp32"] = true;
  // A launch script that sets PyTorch's cuBLAS workspace (deterministic runs do):
  // `export CUBLAS_WORKSPACE_CONFIG=:4096:8` (README "Memory model").
  if (const auto it = vars.find("CUBLAS_WORKSPACE_CONFIG"); it != vars.end())
    train["memory"]["cublas_workspace_config"] = it->second;
  set_whole(train, "train_iters", "--train-iters");
  if (has("--train-iters") && has("--train-samples"))
    throw InputError(source, "--train-samples", "given with --train-iters; Megatron-LM takes one of them");
  if (const Flag* f = use("--train-samples")) {
    if (const auto v = m.whole(*f)) {
      if (seq)
        train["total_tokens"] = static_cast<double>(*v) * static_cast<double>(*seq);
      else
        out.warnings.push_back(fmt::format("{}: --train-samples: no --seq-length to turn samples into tokens", source));
    }
  }

  std::string ignored;
  std::set<std::string> seen;
  for (const auto& f : flags)
    if (!used.contains(f.name) && seen.insert(f.name).second) ignored += (ignored.empty() ? "" : ", ") + f.name;
  if (!ignored.empty())
    out.warnings.push_back(
        fmt::format("{}: ignored (no effect on the simulated iteration, or not modelled): {}", source, ignored));
  return out;
}

}  // namespace ptsim::sim
