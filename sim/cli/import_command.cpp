// `ptsim import megatron-args FILE` / `ptsim import deepspeed-config FILE`: a runnable
// scenario from inputs users already have (README "Inputs you already have").
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "hw/errors.h"
#include "hw/input_file.h"
#include "hw/yaml_limits.h"
#include "sim/cli/commands.h"
#include "sim/io/import_args.h"
#include "sim/io/output_file.h"
#include "sim/io/scenario_file.h"

namespace ptsim::cli {

Command import_command() {
  struct Opts {
    std::string kind, file, out = "-", gpu, model;
    std::int64_t num_gpus = 0;
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  Command c;
  c.add = [o](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "import", "write a scenario from a Megatron-LM launch script / argument list or a DeepSpeed JSON config");
    sub->add_option("kind", o->kind, "megatron-args | deepspeed-config")
        ->required()
        ->check(CLI::IsMember({"megatron-args", "deepspeed-config"}));
    sub->add_option("file", o->file, "the launch script, argument list or JSON config")->required();
    sub->add_option("-o,--out", o->out, "the scenario YAML to write ('-' = stdout, the default)");
    sub->add_option("--gpu", o->gpu, "cluster.gpu (`ptsim list gpus`)")->required();
    sub->add_option("--num-gpus", o->num_gpus, "cluster.num_gpus")->required()->check(CLI::Range(1, 1 << 20));
    sub->add_option("--model", o->model, "model.preset (needed for a DeepSpeed config, which has no architecture)");
    sub->add_option("--set", o->sets, "any other scenario key, e.g. --set model.vocab_size=51200 (wins over the file)")
        ->take_all();
    return sub;
  };
  c.execute = [o]() {
    const bool megatron = o->kind == "megatron-args";
    const std::string text =
        hw::read_input_file(o->file, megatron ? "Megatron-LM arguments" : "DeepSpeed config", hw::kMaxScenarioBytes);
    YAML::Node skeleton;
    skeleton["name"] = std::filesystem::path(o->file).stem().string();
    if (!o->model.empty()) skeleton["model"]["preset"] = o->model;
    skeleton["cluster"]["gpu"] = o->gpu;
    skeleton["cluster"]["num_gpus"] = o->num_gpus;
    // --set first: what the user states wins over the file, and gives the sizes the import needs.
    const std::string where = o->out == "-" ? "<stdout>" : o->out;
    YAML::Node root = sim::scenario_yaml(YAML::Dump(skeleton), where, o->sets);
    if (!megatron && !root["model"])
      throw InputError(o->file, "--model", "a DeepSpeed config has no model architecture",
                       "give --model PRESET (`ptsim list models`) or --set model.hf_config=PATH");
    const sim::ImportedKeys k = megatron ? sim::import_megatron_args(text, o->file, sim::num_gpus_of(root))
                                         : sim::import_deepspeed_config(text, o->file, sim::data_parallel_of(root));
    sim::merge_absent(root, k.keys);
    std::vector<std::string> warnings = k.warnings;
    for (auto& w : sim::missing_warnings(k, root)) warnings.push_back(std::move(w));
    std::string yaml = fmt::format("# Imported by `ptsim import {}` from {}\n", o->kind, o->file);
    for (const auto& w : warnings) yaml += "# warning: " + w + "\n";
    yaml += YAML::Dump(root) + "\n";
    sim::parse_scenario(yaml, where);  // a runnable scenario, or exit 2 naming the key
    for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
    sim::write_output(o->out, yaml);
    return 0;
  };
  return c;
}

}  // namespace ptsim::cli
