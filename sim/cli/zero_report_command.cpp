// `ptsim zero-report` (CONTRACT §4): ZeRO communication volume and model-state
// memory per stage, as Markdown (GitHub), CSV or JSON.
#include <fmt/format.h>
#include <iostream>
#include <memory>

#include "models/memory.h"
#include "models/model_spec.h"
#include "sim/cli/commands.h"
#include "sim/io/output_file.h"
#include "sim/io/scenario_file.h"
#include "sim/tools/zero_report.h"

namespace ptsim::cli {
namespace {

std::vector<int> parse_stages(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    std::size_t pos = 0;
    int v = -1;
    try {
      v = std::stoi(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != item.size())
      throw std::invalid_argument(fmt::format("--stages: '{}' is not a stage number (expected e.g. 0,1,2,3)", item));
    out.push_back(v);
  }
  return out;
}

// fp8 is not offered: fp8 training keeps its model states in bf16 (a scenario's fp8 is read as bf16).
models::Precision parse_precision(const std::string& p) {
  const auto v = models::from_string(models::kPrecisionNames, p);
  if (!v || *v == models::Precision::fp8)
    throw std::invalid_argument(fmt::format("--precision: '{}' is not one of fp32, fp16, bf16", p));
  return *v;
}

}  // namespace

Command zero_report_command() {
  struct Opts {
    std::string model, stages = "0,1,2,3", gpu = "a100-sxm-80gb", format = "md", scenario, out, precision = "bf16";
    int dp = 0;
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  Command c;
  c.add = [o](CLI::App& app) {
    auto* sub =
        app.add_subcommand("zero-report", "ZeRO communication volume and model-state memory per stage (CONTRACT §4)");
    sub->add_option("--model", o->model, "model preset (`ptsim list models`)");
    sub->add_option("--dp", o->dp, "data-parallel GPUs N");
    sub->add_option("--stages", o->stages, "ZeRO stages, comma separated (default 0,1,2,3)");
    sub->add_option("--gpu", o->gpu, "GPU of the cluster the times are for (default a100-sxm-80gb)");
    sub->add_option("--precision", o->precision, "fp32 | fp16 | bf16 (bytes per element 4 / 2 / 2; default bf16)");
    sub->add_option("--format", o->format, "md | csv | json (default md)");
    sub->add_option("--scenario", o->scenario,
                    "take model, cluster, precision and plan (dp, and tp x pp as the DP rank stride) from a scenario");
    sub->add_option("--set", o->sets, "override a scenario key")->take_all();
    sub->add_option("--out", o->out, "write to FILE instead of stdout");
    return sub;
  };
  c.execute = [o]() {
    if (o->format != "md" && o->format != "csv" && o->format != "json")
      throw std::invalid_argument(fmt::format("--format: '{}' is not one of md, csv, json", o->format));
    sim::ZeroReportInput in;
    in.stages = parse_stages(o->stages);
    if (!o->scenario.empty()) {
      const sim::Scenario s = sim::load_scenario(o->scenario, o->sets);
      in.model = s.model;
      if (!o->model.empty() && o->model != s.model.name)
        throw std::invalid_argument(
            fmt::format("--model '{}' conflicts with the scenario's model '{}'", o->model, s.model.name));
      const auto& par = s.plan.par;
      if (par.cp != 1 || par.ep != 1)
        throw std::invalid_argument("zero-report: scenarios with context or expert parallelism are not supported");
      in.dp = o->dp > 0 ? o->dp : par.dp;
      if (in.dp != par.dp)
        throw std::invalid_argument(
            fmt::format("--dp {} conflicts with the scenario's data_parallel {}", o->dp, par.dp));
      in.tp = par.tp;
      in.pp = par.pp;
      in.precision = par.precision == models::Precision::fp8 ? models::Precision::bf16 : par.precision;
      in.cluster = s.cluster;
      // Ψ of one model-parallel rank: the largest pipeline stage's parameters.
      double psi = 0;
      for (int st = 0; st < par.pp; ++st)
        psi = std::max(psi, static_cast<double>(models::stage_params(s.model, par, st).total()));
      in.params = psi;
    } else {
      if (o->model.empty()) throw std::invalid_argument("zero-report: give --model NAME (or --scenario FILE)");
      if (o->dp < 1) throw std::invalid_argument(fmt::format("zero-report: --dp must be >= 1, got {}", o->dp));
      if (o->dp > sim::kMaxGpus)
        throw std::invalid_argument(
            fmt::format("zero-report: --dp {} is out of range (at most {} GPUs)", o->dp, sim::kMaxGpus));
      auto m = models::find_preset(o->model);
      if (!m) {
        std::vector<std::string> names;
        for (const auto& p : models::presets()) names.push_back(p.name);
        throw std::invalid_argument(fmt::format("--model: unknown model '{}' (did you mean '{}'? `ptsim list models`)",
                                                o->model, sim::closest_match(o->model, names)));
      }
      in.model = *m;
      in.dp = o->dp;
      in.precision = parse_precision(o->precision);
      in.cluster = sim::default_cluster(o->gpu, o->dp);
    }
    const sim::ZeroReport r = sim::zero_report(in);
    const std::string text = o->format == "json"  ? sim::zero_report_json(r)
                             : o->format == "csv" ? sim::zero_report_csv(r)
                                                  : sim::zero_report_markdown(r);
    sim::write_output(o->out.empty() ? "-" : o->out, text);
    return 0;
  };
  return c;
}

}  // namespace ptsim::cli
