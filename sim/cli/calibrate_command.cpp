#include <iostream>
#include <memory>

#include "calibration/calibrate.h"
#include "sim/cli/commands.h"

namespace ptsim::cli {

Command calibrate_command() {
  auto o = std::make_shared<calibration::CalibrateOptions>();
  Command c;
  c.add = [o](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "calibrate", "measure GEMM, attention, bandwidth and NCCL collectives on the local GPU(s), write a cost table");
    sub->add_option("--out", o->out, "table to write (default calibration/tables/<device>.yaml); written atomically");
    sub->add_option("--name", o->name, "table name reported as cost_source (default: the file's stem)");
    sub->add_flag("--quick", o->quick, "a small sweep (minutes instead of tens of minutes)");
    sub->add_flag("--cpu", o->cpu, "run the CPU backend (Eigen GEMM, CPU attention): tests the path without a GPU");
    sub->add_option("--op", o->import_op,
                    "with --import-nccl-tests: the logs' collective when neither header nor file name says it")
        ->check(CLI::IsMember(
            {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv", "broadcast", "reduce"}));
    sub->add_option("--import-nccl-tests", o->import_nccl_tests,
                    "nccl-tests logs (all_reduce_perf, ...) to import as collective costs")
        ->expected(1, -1);
    sub->add_option("--warmup", o->timing.warmup, "untimed runs before measuring");
    sub->add_option("--repeats", o->timing.repeats, "timed runs (the median is kept)");
    sub->add_option("--warmup-seconds", o->timing.warmup_seconds,
                    "GPU: warm up back to back for this long first, so clocks settle under the power limit");
    return sub;
  };
  c.execute = [o]() {
    o->progress = &std::cerr;
    o->errors = &std::cerr;
    return calibration::run_calibrate(*o);
  };
  return c;
}

}  // namespace ptsim::cli
