// Inputs users already have (README "Inputs you already have"): a Megatron-LM launch
// script or argument list, and a DeepSpeed JSON config, turned into scenario keys.
// Every flag or key they support is mapped; every other one is named in a warning.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ptsim::sim {

struct ImportedKeys {
  YAML::Node keys;                    // a mapping of scenario sections: model, parallel, training
  std::vector<std::string> warnings;  // "SOURCE: FLAG: what"
  // Scenario keys the file cannot give (e.g. model.vocab_size, which is in the tokenizer),
  // with the warning to print when the scenario does not give them either.
  std::vector<std::pair<std::string, std::string>> missing;
};

// The warnings of `k.missing` whose key `root` (the merged scenario document) lacks.
std::vector<std::string> missing_warnings(const ImportedKeys& k, const YAML::Node& root);

// A Megatron-LM launch script (bash: `VAR=value` assignments are substituted, `\` line
// continuations joined, `#` comments dropped, arrays `ARGS=( ... )` read as flags) or a
// plain argument list. `num_gpus`, when known, gives the global batch Megatron derives
// without --global-batch-size (micro × data-parallel size). Throws ptsim::InputError
// (file = `source`, key = the flag) on a bad value.
ImportedKeys import_megatron_args(const std::string& text, const std::string& source,
                                  std::optional<std::int64_t> num_gpus = std::nullopt);

// A DeepSpeed JSON config: sets training.framework deepspeed and the training.deepspeed
// keys. `data_parallel`, when known, gives the global batch from micro × accumulation ×
// dp without train_batch_size (and checks the three agree when all are given).
ImportedKeys import_deepspeed_config(const std::string& text, const std::string& source,
                                     std::optional<std::int64_t> data_parallel = std::nullopt);

// cluster.num_gpus and the data-parallel size (parallel.data_parallel, or num_gpus / (tp ×
// pp × cp)) of a scenario document, when its keys say them.
std::optional<std::int64_t> num_gpus_of(const YAML::Node& root);
std::optional<std::int64_t> data_parallel_of(const YAML::Node& root);

// A scenario's model.megatron_args and training.deepspeed_config: the files' keys are
// merged under what the scenario states (merge_absent), their warnings appended to
// `warnings`. Throws ptsim::InputError (file = `file`, key = the scenario key).
void apply_imports(YAML::Node root, const std::string& file, std::vector<std::string>& warnings);

// Copies every key of `from` that `to` does not have (recursively into sections): what a
// scenario states wins over what it imports.
void merge_absent(YAML::Node to, const YAML::Node& from);

}  // namespace ptsim::sim
