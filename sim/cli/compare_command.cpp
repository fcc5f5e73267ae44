// `ptsim compare A.yaml B.yaml …` or `ptsim compare A.yaml --set-plan "tp=8 pp=4" --set-plan …`:
// the plans side by side (sim/tools/compare.h, sim/io/compare_html.h).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "hw/errors.h"
#include "sim/cli/commands.h"
#include "sim/io/compare_html.h"
#include "sim/io/output_file.h"
#include "sim/tools/compare.h"

namespace ptsim::cli {

Command compare_command() {
  struct Opts {
    std::vector<std::string> scenarios, set_plans, sets;
    std::string report, csv, json, sort = "speed";
    bool fold = false, quiet = false;
  };
  auto o = std::make_shared<Opts>();
  Command c;
  c.add = [o](CLI::App& app) {
    auto* sub = app.add_subcommand("compare", "simulate several plans and put them side by side");
    sub->add_option("scenarios", o->scenarios, "scenario YAML files (one, with --set-plan variants, or several)")
        ->required();
    sub->add_option("--set-plan", o->set_plans,
                    "a variant of the one scenario, e.g. \"tp=8 pp=4 dp=16 mbs=1\" (repeat for each plan)");
    sub->add_option("--set", o->sets,
                    "override a scenario key in every plan, e.g. --set training.global_batch_size=1536")
        ->take_all();
    sub->add_option("--sort", o->sort,
                    "rank by speed (tokens/s), by cost to train, or by goodput (tokens/s x goodput under failures "
                    "and checkpoints: needs a reliability section)")
        ->check(CLI::IsMember({"speed", "cost", "goodput"}));
    sub->add_option("--report", o->report, "write the plans side by side as a self-contained HTML page");
    sub->add_option("--csv", o->csv, "write the table as CSV ('-' = stdout)");
    sub->add_option("--json", o->json, "write the table as JSON ('-' = stdout)");
    sub->add_flag("--fold", o->fold, "simulate one representative rank per pipeline stage");
    sub->add_flag("-q,--quiet", o->quiet, "no table on stdout");
    return sub;
  };
  c.execute = [o]() {
    sim::CompareOptions opt;
    opt.files = o->scenarios;
    opt.set_plans = o->set_plans;
    opt.sets = o->sets;
    opt.fold = o->fold;
    opt.trace = !o->report.empty();
    const auto sort = o->sort == "cost"      ? sim::CompareSort::cost
                      : o->sort == "goodput" ? sim::CompareSort::goodput
                                             : sim::CompareSort::speed;
    const auto plans = sim::run_comparison(opt);
    const auto rows = sim::compare_rows(plans, sort);
    // README "Warnings": each distinct warning once on stderr (variants of a file share most).
    std::vector<std::string> warned;
    for (const auto& p : plans)
      for (const auto& w : p.sim.result.warnings)
        if (std::find(warned.begin(), warned.end(), w) == warned.end()) {
          warned.push_back(w);
          std::cerr << "warning: " << w << "\n";
        }
    const std::string table = sim::compare_table_text(rows, plans, sort);
    if (!o->quiet && o->csv != "-" && o->json != "-") std::cout << table;
    if (!o->csv.empty()) sim::write_output(o->csv, sim::compare_csv(rows, plans));
    if (!o->json.empty()) sim::write_output(o->json, sim::compare_json(rows, plans, sort).dump(2) + "\n");
    if (!o->report.empty()) {
      std::vector<sim::ComparePagePlan> page;
      for (const auto& r : rows)
        page.push_back({fmt::format("{}  {}", r.rank, r.label), &plans[r.index].scenario, &plans[r.index].sim});
      sim::write_output(o->report, sim::compare_html(page, table));
    }
    return 0;
  };
  return c;
}

}  // namespace ptsim::cli
