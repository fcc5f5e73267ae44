#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "hw/errors.h"
#include "hw/net/layout.h"
#include "hw/units.h"
#include "sim/cli/commands.h"
#include "sim/core/goodput.h"
#include "sim/core/simulate.h"
#include "sim/io/output_file.h"
#include "sim/io/report_html.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"
#include "sim/io/trace.h"
#include "sim/tools/compare.h"

namespace ptsim::cli {

namespace {

// A long run's progress on stderr (a simulation of every rank at thousands of GPUs can take
// minutes): from the second second on, the simulated time and events so far, redrawn in place
// on a terminal, a plain line every 5 s with --progress otherwise; the line is cleared when the
// run ends.
class RunProgress {
 public:
  explicit RunProgress(bool tty) : tty_(tty), t0_(std::chrono::steady_clock::now()) {}
  ~RunProgress() {
    if (tty_ && shown_) std::fprintf(stderr, "\r\033[K"), std::fflush(stderr);
  }
  void operator()(std::uint64_t events, double simulated_s) {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (wall < 2.0 || wall - last_ < (tty_ ? 0.5 : 5.0)) return;
    last_ = wall;
    shown_ = true;
    const std::string line = fmt::format("simulating: {:.3f} s of the iteration, {:.1f} M events, {:.0f} s",
                                         simulated_s, events / 1e6, wall);
    if (tty_)
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    else
      std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point t0_;
  double last_ = 0;
  bool shown_ = false;
};

}  // namespace

Command run_command() {
  struct Opts {
    std::string scenario, json, csv, trace, report, calibration;
    std::vector<std::string> sets;
    bool fold = false, quiet = false, no_link_sharing = false, progress = false, no_progress = false;
    int trace_ranks = 16;
    std::int64_t trials = 0;
    std::uint64_t seed = 1;
    std::uint64_t max_events = sim::kMaxEvents;
  };
  auto o = std::make_shared<Opts>();
  Command c;
  c.add = [o](CLI::App& app) {
    auto* sub = app.add_subcommand("run", "simulate one training iteration of a scenario");
    sub->add_option("scenario", o->scenario, "scenario YAML")->required();
    sub->add_option("--json", o->json, "write the result document (CONTRACT §3) to FILE ('-' = stdout)");
    sub->add_option(
        "--csv", o->csv,
        "write the result as CSV, the columns of `ptsim compare` (header + one row) to FILE ('-' = stdout)");
    sub->add_option("--trace", o->trace, "write a Chrome/Perfetto trace (ui.perfetto.dev); a name ending in .gz is written gzip-compressed");
    sub->add_option("--report", o->report, "write a self-contained HTML report");
    sub->add_option("--set", o->sets, "override a scenario key, e.g. --set parallel.tensor_parallel=4")->take_all();
    sub->add_flag("--fold", o->fold, "simulate one representative rank per pipeline stage (symmetric ranks folded)");
    sub->add_flag("--no-link-sharing", o->no_link_sharing,
                  "closed-form network cost per transfer, no bandwidth sharing between overlapping transfers "
                  "(= --set cluster.link_sharing=false)");
    sub->add_option("--trace-ranks", o->trace_ranks, "ranks shown in the trace (first of each stage first), 0 to 65536")
        ->check(CLI::Range(0, 65536));
    sub->add_option("--max-events", o->max_events,
                    fmt::format("work bound: stop with exit 2 past this many simulated events, 1 to 10^12 "
                                "(default {})",
                                sim::kMaxEvents))
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000'000}));
    auto* trials = sub->add_option("--trials", o->trials,
                    "Monte Carlo of failures and restarts: N seeded runs to the training goal, the distribution "
                    "of the time to train (needs a reliability section and training.total_tokens or train_iters)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000'000}));
    sub->add_option("--seed", o->seed, "seed of --trials (default 1); the same seed gives the same numbers")
        ->needs(trials);
    sub->add_flag("-q,--quiet", o->quiet, "no summary on stdout");
    sub->add_flag("--progress", o->progress,
                  "progress on stderr (simulated time, events) every 5 s of a run longer than 2 s, even when "
                  "stderr is not a terminal");
    sub->add_flag("--no-progress", o->no_progress, "no progress on stderr");
    sub->add_option("--calibration", o->calibration, "cost table to use (overrides cluster.calibration)");
    return sub;
  };
  c.execute = [o]() {
    auto sets = o->sets;
    if (!o->calibration.empty()) sets.push_back("cluster.calibration=" + o->calibration);
    if (o->no_link_sharing) sets.push_back("cluster.link_sharing=false");
    const sim::Scenario s = sim::load_scenario(o->scenario, sets);
    sim::SimulateOptions so;
    so.fold = o->fold;
    so.trace = !o->trace.empty() || !o->report.empty();
    so.trace_max_ranks = o->trace_ranks;
    so.max_events = o->max_events;
    so.build.fuse_compute = o->trace.empty();
    const bool tty = isatty(fileno(stderr)) != 0;
    std::optional<RunProgress> progress;
    if (!o->no_progress && (o->progress || tty)) {
      progress.emplace(tty);
      so.progress = [&progress](std::uint64_t events, double simulated_s) { (*progress)(events, simulated_s); };
    }
    if (o->trials > 0 && !s.reliability)
      throw InputError(o->scenario, "reliability", "--trials needs a reliability section",
                       "add `reliability:` (README \"Goodput\"); an empty one takes every default");
    sim::Simulation result = [&] {
      try {
        return sim::simulate(s, so);
      } catch (const TimeRangeError& e) {  // the scenario asks for a time the clock cannot hold: name the file
        throw InputError(o->scenario, "", e.what());
      }
    }();
    progress.reset();                                         // clears its line before anything else is written
    std::cerr << sim::warnings_text(result.result.warnings);  // README "Warnings": stderr, also in the JSON
    if (o->trials > 0 && result.result.goodput)
      result.result.goodput->trials = sim::goodput_trials(s, result.result.iteration_time_s, *result.result.goodput,
                                                          o->trials, o->seed);
    const bool json_to_stdout = o->json == "-" || o->csv == "-";
    if (!o->quiet && !json_to_stdout) std::cout << sim::summary_text(result.result);
    if (!o->json.empty()) sim::write_output(o->json, sim::to_json_text(result.result));
    const auto& q = s.plan.par;
    const sim::Layout layout(q.tp, q.cp, q.dp, q.pp, q.ep, s.cluster.gpus_per_node, q.etp);
    if (!o->trace.empty()) {
      const std::string trace = sim::trace_json(result, layout);
      sim::write_output(o->trace, sim::wants_gzip(o->trace) ? sim::gzip(trace) : trace);
    }
    if (!o->report.empty()) sim::write_output(o->report, sim::report_html(s, result, layout));
    if (!o->csv.empty()) {
      std::vector<sim::ComparedPlan> plans{{o->scenario, "", s, std::move(result)}};
      sim::write_output(o->csv, sim::compare_csv(sim::compare_rows(plans, sim::CompareSort::speed), plans));
    }
    return 0;
  };
  return c;
}

}  // namespace ptsim::cli
