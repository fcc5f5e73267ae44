#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "models/memory.h"
#include "sim/cli/commands.h"
#include "sim/core/mixed_cluster.h"
#include "sim/core/schedule_memory.h"
#include "sim/io/output_file.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"

namespace ptsim::cli {

Command memory_command() {
  struct Opts {
    std::string scenario, json, csv;
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  Command c;
  c.add = [o](CLI::App& app) {
    auto* sub = app.add_subcommand("memory", "per-GPU memory breakdown (analytical, instant)");
    sub->add_option("scenario", o->scenario, "scenario YAML")->required();
    sub->add_option("--json", o->json, "write the breakdown as JSON to FILE ('-' = stdout)");
    sub->add_option("--csv", o->csv, "write the breakdown as CSV (one row per stage, bytes) to FILE ('-' = stdout)");
    sub->add_option("--set", o->sets, "override a scenario key")->take_all();
    return sub;
  };
  c.execute = [o]() {
    const sim::Scenario s = sim::load_scenario(o->scenario, o->sets);
    std::cerr << sim::warnings_text(s.warnings);
    const auto stages = sim::schedule_memory(s.model, s.plan.par);
    // A mixed cluster (cluster.gpus): each stage against its own GPU's HBM.
    auto cap_of = [&](int stage) { return sim::stage_gpu(s.cluster, s.plan.par.pp, stage).hbm; };
    double cap = s.cluster.gpu.hbm;
    for (int st = 0; st < s.plan.par.pp; ++st) cap = std::min(cap, cap_of(st));
    bool fits = true;
    nlohmann::json j;
    j["scenario"] = s.name;
    j["capacity_bytes"] = cap;
    j["warnings"] = s.warnings;
    j["per_stage"] = nlohmann::json::array();
    double peak = 0;
    std::string csv = "stage,params,grads,optimizer,activations,buffers,allocator,peak,capacity,fits\n";
    std::string text =
        s.cluster.mixed()
            ? fmt::format("{}: per-GPU memory (analytical), capacity per stage's GPU\n", s.name)
            : fmt::format("{}: per-GPU memory (analytical), capacity {}\n", s.name, format_bytes(cap));
    text += "  stage      params       grads   optimizer activations     buffers   allocator        peak  fits\n";
    for (const auto& m : stages) {
      peak = std::max(peak, m.peak);
      const double stage_cap = cap_of(m.stage);
      const bool ok = m.peak <= stage_cap;
      fits = fits && ok;
      const std::string gpu = s.cluster.mixed()
                                  ? fmt::format("  {} ({})", sim::stage_gpu(s.cluster, s.plan.par.pp, m.stage).name,
                                                format_bytes(stage_cap))
                                  : "";
      j["per_stage"].push_back({{"stage", m.stage},
                                {"params", m.params},
                                {"grads", m.grads},
                                {"optimizer", m.optimizer},
                                {"activations", m.activations},
                                {"buffers", m.buffers},
                                {"allocator", m.allocator},
                                {"peak", m.peak},
                                {"capacity", stage_cap},
                                {"gpu", sim::stage_gpu(s.cluster, s.plan.par.pp, m.stage).name}});
      text += fmt::format("  {:>5} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  {}{}\n", m.stage,
                          format_bytes(m.params), format_bytes(m.grads), format_bytes(m.optimizer),
                          format_bytes(m.activations), format_bytes(m.buffers), format_bytes(m.allocator),
                          format_bytes(m.peak), ok ? "yes" : "NO", gpu);
      csv += fmt::format("{},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f},{}\n", m.stage, m.params, m.grads,
                         m.optimizer, m.activations, m.buffers, m.allocator, m.peak, stage_cap,
                         ok ? "true" : "false");
    }
    j["peak_bytes"] = peak;
    j["feasible"] = fits;
    if (o->json != "-" && o->csv != "-") std::cout << text;
    if (!o->json.empty()) sim::write_output(o->json, j.dump(2) + "\n");
    if (!o->csv.empty()) sim::write_output(o->csv, csv);
    return 0;
  };
  return c;
}

}  // namespace ptsim::cli
