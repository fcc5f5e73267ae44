// What Megatron-LM and DeepSpeed importers share: merging into a scenario document.
#include "sim/io/import_args.h"

#include <fmt/format.h>

#include "hw/errors.h"
#include "hw/input_file.h"
#include "hw/yaml_limits.h"

namespace ptsim::sim {
namespace {

std::optional<std::int64_t> whole_at(const YAML::Node& root, const char* section, const char* key) {
  if (!root.IsMap() || !root[section] || !root[section].IsMap()) return std::nullopt;
  const YAML::Node n = root[section][key];
  if (!n || !n.IsScalar()) return std::nullopt;
  try {
    const auto v = n.as<std::int64_t>();
    return v >= 1 ? std::optional(v) : std::nullopt;
  } catch (const YAML::Exception&) {
    return std::nullopt;  // the reader reports it with its key
  }
}

std::string read(const YAML::Node& n, const std::string& file, const std::string& key, const char* what) {
  if (!n.IsScalar()) throw InputError(file, key, "expected a file path");
  try {
    return hw::read_input_file(n.Scalar(), what, hw::kMaxScenarioBytes);
  } catch (const InputError& e) {
    throw InputError(file, key, e.what());
  }
}

}  // namespace

std::optional<std::int64_t> num_gpus_of(const YAML::Node& root) { return whole_at(root, "cluster", "num_gpus"); }

std::optional<std::int64_t> data_parallel_of(const YAML::Node& root) {
  if (const auto dp = whole_at(root, "parallel", "data_parallel")) return dp;
  const auto gpus = num_gpus_of(root);
  if (!gpus) return std::nullopt;
  std::int64_t mp = 1;
  for (const char* k : {"tensor_parallel", "pipeline_parallel", "context_parallel"})
    if (const auto v = whole_at(root, "parallel", k)) {
      if (*v > *gpus) return std::nullopt;
      mp *= *v;
    }
  if (mp > *gpus || *gpus % mp != 0) return std::nullopt;
  return *gpus / mp;
}

std::vector<std::string> missing_warnings(const ImportedKeys& k, const YAML::Node& root) {
  std::vector<std::string> out;
  for (const auto& [key, warning] : k.missing) {
    YAML::Node node = YAML::Clone(root);
    bool found = true;
    for (std::size_t from = 0; found;) {
      const auto dot = key.find('.', from);
      const std::string part = key.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
      found = node.IsMap() && node[part];
      if (!found || dot == std::string::npos) break;
      node.reset(node[part]);
      from = dot + 1;
    }
    if (!found) out.push_back(warning);
  }
  return out;
}

void apply_imports(YAML::Node root, const std::string& file, std::vector<std::string>& warnings) {
  if (!root.IsMap()) return;
  const auto take = [&](ImportedKeys&& k) {
    merge_absent(root, k.keys);
    for (auto& w : k.warnings) warnings.push_back(std::move(w));
    for (auto& w : missing_warnings(k, root)) warnings.push_back(std::move(w));
  };
  if (root["model"] && root["model"].IsMap() && root["model"]["megatron_args"]) {
    const YAML::Node n = root["model"]["megatron_args"];
    const std::string text = read(n, file, "model.megatron_args", "Megatron-LM arguments");
    try {
      take(import_megatron_args(text, n.Scalar(), num_gpus_of(root)));
    } catch (const InputError& e) {
      throw InputError(file, "model.megatron_args", e.what());
    }
  }
  if (root["training"] && root["training"].IsMap() && root["training"]["deepspeed_config"]) {
    const YAML::Node n = root["training"]["deepspeed_config"];
    const std::string text = read(n, file, "training.deepspeed_config", "DeepSpeed config");
    try {
      take(import_deepspeed_config(text, n.Scalar(), data_parallel_of(root)));
    } catch (const InputError& e) {
      throw InputError(file, "training.deepspeed_config", e.what());
    }
  }
}

void merge_absent(YAML::Node to, const YAML::Node& from) {
  for (const auto& kv : from) {
    const std::string key = kv.first.as<std::string>();
    YAML::Node have = to[key];
    if (!have.IsDefined() || have.IsNull()) {
      to[key] = YAML::Clone(kv.second);
    } else if (have.IsMap() && kv.second.IsMap()) {
      merge_absent(have, kv.second);
    }
  }
}

}  // namespace ptsim::sim
