// A DeepSpeed JSON config -> scenario keys (README "Inputs you already have"). Key
// meanings and defaults: DeepSpeed deepspeed/runtime/config.py and runtime/zero/config.py.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "hw/errors.h"
#include "sim/io/import_args.h"

namespace ptsim::sim {
namespace {

using Json = nlohmann::json;

class Reader {
 public:
  Reader(std::string source, std::vector<std::string>& warnings) : source_(std::move(source)), warnings_(warnings) {}

  // The value at `path` ("zero_optimization.stage"); null when absent or "auto" (warned:
  // the HF Trainer fills those in, the scenario must say it).
  const Json* at(const Json& root, const std::string& path) {
    const Json* j = &root;
    std::size_t from = 0;
    while (true) {
      const auto dot = path.find('.', from);
      const std::string key = path.substr(from, dot - from);
      if (!j->is_object() || !j->contains(key)) return nullptr;
      j = &(*j)[key];
      if (dot == std::string::npos) break;
      from = dot + 1;
    }
    used_.insert(path);
    if (j->is_string() && j->get<std::string>() == "auto") {
      warnings_.push_back(
          fmt::format("{}: {}: \"auto\" is filled in by the HF Trainer at run time: not imported; "
                      "set the scenario key",
                      source_, path));
      return nullptr;
    }
    return j;
  }
  std::int64_t whole(const Json& j, const std::string& path, std::int64_t min) const {
    if (!j.is_number_integer() || j.get<std::int64_t>() < min || j.get<std::int64_t>() > (std::int64_t{1} << 40))
      throw InputError(source_, path, fmt::format("expected a whole number from {} to 2^40, got {}", min, j.dump()));
    return j.get<std::int64_t>();
  }
  double count(const Json& j, const std::string& path) const {  // bucket sizes: JSON numbers like 5e8
    if (!j.is_number() || !(j.get<double>() >= 0) || j.get<double>() > 1e12)
      throw InputError(source_, path, fmt::format("expected a number from 0 to 1e12, got {}", j.dump()));
    return j.get<double>();
  }
  bool boolean(const Json& j, const std::string& path) const {
    if (!j.is_boolean()) throw InputError(source_, path, fmt::format("expected true or false, got {}", j.dump()));
    return j.get<bool>();
  }
  std::string text(const Json& j, const std::string& path) const {
    if (!j.is_string()) throw InputError(source_, path, fmt::format("expected a string, got {}", j.dump()));
    return j.get<std::string>();
  }
  // Every leaf path not read, for the "ignored" warning.
  void unused(const Json& j, const std::string& prefix, std::vector<std::string>& out) const {
    if (!prefix.empty() && used_.contains(prefix)) return;
    if (j.is_object() && !j.empty()) {
      for (const auto& [k, v] : j.items()) unused(v, prefix.empty() ? k : prefix + "." + k, out);
    } else if (!prefix.empty()) {
      out.push_back(prefix);
    }
  }

 private:
  std::string source_;
  std::vector<std::string>& warnings_;
  std::set<std::string> used_;
};

}  // namespace

ImportedKeys import_deepspeed_config(const std::string& text, const std::string& source,
                                     std::optional<std::int64_t> data_parallel) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    throw InputError(source, "", fmt::format("not valid JSON: {}", e.what()));
  }
  if (!root.is_object()) throw InputError(source, "", "expected a JSON object (a DeepSpeed config)");
  ImportedKeys out;
  Reader r(source, out.warnings);
  YAML::Node par = out.keys["parallel"], train = out.keys["training"];
  train["framework"] = "deepspeed";

  std::int64_t stage = 0;
  if (const Json* j = r.at(root, "zero_optimization.stage")) {
    stage = r.whole(*j, "zero_optimization.stage", 0);
    if (stage > 3) throw InputError(source, "zero_optimization.stage", fmt::format("{} is not 0, 1, 2 or 3", stage));
  }
  par["zero_stage"] = stage;
  YAML::Node ds = train["deepspeed"];
  for (const char* key : {"reduce_bucket_size", "allgather_bucket_size", "stage3_prefetch_bucket_size",
                          "stage3_param_persistence_threshold", "stage3_max_reuse_distance"}) {
    const std::string path = std::string("zero_optimization.") + key;
    if (const Json* j = r.at(root, path)) ds[key] = r.count(*j, path);
  }
  for (const char* key : {"overlap_comm", "contiguous_gradients"}) {
    const std::string path = std::string("zero_optimization.") + key;
    if (const Json* j = r.at(root, path)) ds[key] = r.boolean(*j, path);
  }
  if (const Json* j = r.at(root, "data_types.grad_accum_dtype")) {
    std::string dtype = r.text(*j, "data_types.grad_accum_dtype");
    // DeepSpeed's DtypeEnum spellings (runtime/config_utils / constants): fp32, fp16, bf16.
    if (dtype == "float32" || dtype == "float") dtype = "fp32";
    if (dtype == "bfloat16") dtype = "bf16";
    if (dtype == "float16" || dtype == "half") dtype = "fp16";
    if (dtype != "fp32" && dtype != "bf16" && dtype != "fp16")
      throw InputError(source, "data_types.grad_accum_dtype", fmt::format("'{}' is not fp32, bf16 or fp16", dtype));
    ds["grad_accum_dtype"] = dtype;
  }
  for (const auto& [from, to] :
       {std::pair{"offload_optimizer", "offload_optimizer"}, {"offload_param", "offload_params"}}) {
    const std::string path = std::string("zero_optimization.") + from + ".device";
    if (const Json* j = r.at(root, path)) {
      const std::string device = r.text(*j, path);
      if (device != "cpu" && device != "nvme" && device != "none")
        throw InputError(source, path, fmt::format("'{}' is not cpu, nvme or none", device));
      par[to] = device != "none";
      if (device == "nvme")
        out.warnings.push_back(
            fmt::format("{}: {}: NVMe offload is modelled as CPU offload (host memory bandwidth)", source, path));
    }
  }

  std::optional<std::int64_t> batch, micro, accumulation;
  if (const Json* j = r.at(root, "train_batch_size")) batch = r.whole(*j, "train_batch_size", 1);
  if (const Json* j = r.at(root, "train_micro_batch_size_per_gpu"))
    micro = r.whole(*j, "train_micro_batch_size_per_gpu", 1);
  if (const Json* j = r.at(root, "gradient_accumulation_steps"))
    accumulation = r.whole(*j, "gradient_accumulation_steps", 1);
  if (micro) train["micro_batch_size"] = *micro;
  if (batch) {
    train["global_batch_size"] = *batch;
    // DeepSpeed: train_batch_size = micro × accumulation × data-parallel size.
    if (micro && accumulation && data_parallel && *batch != *micro * *accumulation * *data_parallel)
      throw InputError(source, "train_batch_size",
                       fmt::format("{} is not train_micro_batch_size_per_gpu × gradient_accumulation_steps × "
                                   "data-parallel size = {} × {} × {}",
                                   *batch, *micro, *accumulation, *data_parallel));
  } else if (micro && accumulation && data_parallel) {
    train["global_batch_size"] = *micro * *accumulation * *data_parallel;
  } else if (accumulation) {
    out.warnings.push_back(
        fmt::format("{}: gradient_accumulation_steps: no train_batch_size, and the data-parallel "
                    "size is not known here: set training.global_batch_size",
                    source));
  }

  train["precision"] = "fp32";
  if (const Json* j = r.at(root, "fp16.enabled"); j && r.boolean(*j, "fp16.enabled")) train["precision"] = "fp16";
  if (const Json* j = r.at(root, "bf16.enabled"); j && r.boolean(*j, "bf16.enabled")) train["precision"] = "bf16";
  if (const Json* j = r.at(root, "optimizer.type")) {
    const std::string type = r.text(*j, "optimizer.type");
    if (type == "Adam" || type == "adam")
      train["optimizer"] = "adam";
    else if (type == "AdamW" || type == "adamw")
      train["optimizer"] = "adamw";
    else
      out.warnings.push_back(fmt::format("{}: optimizer.type: '{}' is modelled as Adam's state", source, type));
  }

  std::vector<std::string> rest;
  r.unused(root, "", rest);
  std::string ignored;
  for (const auto& k : rest) ignored += (ignored.empty() ? "" : ", ") + k;
  if (!ignored.empty())
    out.warnings.push_back(
        fmt::format("{}: ignored (no effect on the simulated iteration, or not modelled): {}", source, ignored));
  return out;
}

}  // namespace ptsim::sim
