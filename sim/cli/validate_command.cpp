// `ptsim validate` (CONTRACT §1): predicted vs published for the reference runs;
// exit 0 when the accuracy bound holds, 4 when it does not.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "hw/errors.h"
#include "hw/gpu_catalog.h"
#include "hw/strict_yaml.h"
#include "sim/cli/commands.h"
#include "sim/io/output_file.h"
#include "sim/tools/validate.h"

#include "ptsim/config.h"

namespace ptsim::cli {

namespace {

constexpr int kExitBoundMissed = 4;  // CONTRACT §1

// "GPU=gemm,attention,memory" → the override; throws std::invalid_argument (exit 2).
void parse_efficiency(const std::string& text, sim::ValidateOptions& opt) {
  const auto eq = text.find('=');
  const auto bad = [&]() {
    return std::invalid_argument(
        fmt::format("--efficiency '{}': expected GPU=gemm,attention,memory, e.g. a100-sxm-80gb=0.75,0.5,0.6", text));
  };
  if (eq == std::string::npos || eq == 0) throw bad();
  if (const std::string gpu = text.substr(0, eq); !hw::find_gpu(gpu)) {
    std::vector<std::string> names;
    for (const auto& g : hw::gpu_catalog()) names.push_back(g.name);
    throw std::invalid_argument(
        fmt::format("--efficiency '{}': unknown GPU '{}' (did you mean '{}'? see `ptsim list gpus`)", text, gpu,
                    hw::closest_match(gpu, names)));
  }
  hw::GpuSpec::Efficiency e;
  std::istringstream in(text.substr(eq + 1));
  char c1 = 0, c2 = 0;
  if (!(in >> e.gemm >> c1 >> e.attention >> c2 >> e.memory) || c1 != ',' || c2 != ',') throw bad();
  if (in >> std::ws; !in.eof()) throw bad();  // "0.5,0.5,0.5,0.5": a fourth value would be ignored
  for (const double v : {e.gemm, e.attention, e.memory})
    if (!(v > 0 && v <= 1)) throw bad();
  opt.efficiency[text.substr(0, eq)] = e;
}

// The reference runs when --dir is not given, so that `ptsim validate` works from any folder:
// ./scenarios/reference (the repository root), then next to the executable (a build folder
// inside or beside the checkout, or an install: PREFIX/bin/ptsim with
// PREFIX/share/ptsim/scenarios/reference), then the source tree this binary was built from.
std::string default_reference_dir() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates{"scenarios/reference"};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path bin = exe.parent_path();
    candidates.push_back(bin / "../share/ptsim/scenarios/reference");
    candidates.push_back(bin / "scenarios/reference");
    candidates.push_back(bin / "../scenarios/reference");
  }
  candidates.push_back(fs::path(PTSIM_SOURCE_DIR) / "scenarios/reference");
  std::string looked;
  for (const auto& c : candidates) {
    if (fs::exists(c / "published.yaml", ec)) return c.lexically_normal().string();
    looked += (looked.empty() ? "" : ", ") + c.lexically_normal().string();
  }
  throw InputError("scenarios/reference", "", fmt::format("no reference runs found (looked in {})", looked),
                   "give the folder with --dir");
}

}  // namespace

Command validate_command() {
  struct Opts {
    std::string dir, json, efficiency, source, bands;
    bool fit = false, full = false;
  };
  auto o = std::make_shared<Opts>();
  Command c;
  c.add = [o](CLI::App& app) {
    auto* sub = app.add_subcommand("validate", "compare predictions with the published reference runs");
    sub->add_option("--dir", o->dir,
                    "reference folder: scenarios + published.yaml (default: scenarios/reference here, next to the "
                    "executable, or in the install's share/ptsim)");
    sub->add_option("--json", o->json, "write the validation document to FILE ('-' = stdout)");
    sub->add_flag("--fit", o->fit,
                  "fit the GPU efficiencies on the runs marked 'fitted', then validate with them "
                  "(prints the values to put in hw/gpus.yaml)");
    sub->add_option("--efficiency", o->efficiency,
                    "override one GPU's efficiencies for this run: GPU=gemm,attention,memory");
    sub->add_option("--source", o->source,
                    "only the runs of this source_id of published.yaml (e.g. narayanan-sc21-t1)");
    sub->add_option("--write-bands", o->bands,
                    "write the prediction bands of these runs (per regime) to FILE; the committed table is "
                    "scenarios/reference/prediction_bands.json, which `ptsim run` reports from");
    sub->add_flag("--full", o->full, "simulate every rank (default: folded, one rank per stage)");
    return sub;
  };
  c.execute = [o]() {
    if (o->dir.empty()) o->dir = default_reference_dir();
    sim::ValidateOptions opt;
    opt.fold = !o->full;
    opt.source = o->source;
    if (!o->efficiency.empty()) parse_efficiency(o->efficiency, opt);
    const bool json_to_stdout = o->json == "-";
    if (o->fit) {
      for (const auto& fr : sim::fit_efficiency(o->dir, opt)) {
        if (!json_to_stdout) {
          fmt::print("fit on the {} runs marked 'fitted' ({} simulations of each):\n", fr.gpu, fr.evaluations);
          fmt::print("  start  {}: gemm {:.4f}, attention {:.4f}, memory {:.4f}  mean |error| {:.2f} %\n", fr.gpu,
                     fr.start.gemm, fr.start.attention, fr.start.memory, fr.start_mae_pct);
          fmt::print("  fitted {}: gemm {:.4f}, attention {:.4f}, memory {:.4f}  mean |error| {:.2f} %\n\n", fr.gpu,
                     fr.best.gemm, fr.best.attention, fr.best.memory, fr.best_mae_pct);
        }
        opt.efficiency[fr.gpu] = fr.best;
      }
    }
    const auto rep = sim::run_validation(o->dir, opt);
    if (!json_to_stdout) std::cout << sim::validation_text(rep);
    if (!o->json.empty()) sim::write_output(o->json, sim::validation_json(rep).dump(2) + "\n");
    if (!o->bands.empty()) sim::write_output(o->bands, sim::bands_json_text(sim::prediction_bands(rep)));
    return rep.bound_holds ? 0 : kExitBoundMissed;
  };
  return c;
}

}  // namespace ptsim::cli
