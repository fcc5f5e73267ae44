// Issue 17 "Scale": GPT-3 1T on 65,536 A100s (bench/scenarios/gpt3-1t-64k.yaml: tp 8,
// pp 16, dp 512 on a radix-64 3-tier fat tree) folded (budget < 1 s) and with every
// rank simulated with link sharing (budget < 30 s, < 2 GiB peak RSS). Prints wall
// time (real time), the iteration, the events and the peak RSS (/proc/self/status
// VmHWM) as counters. Folded first, so its RSS counter is not the full run's.
#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

#include "ptsim/config.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"

namespace {

// Peak resident set of this process in GiB (Linux VmHWM), 0 elsewhere.
double peak_rss_gib() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmHWM:") {
      double kib = 0;
      f >> kib;
      return kib / (1024.0 * 1024.0);
    }
    std::getline(f, key);
  }
  return 0;
}

void BM_Gpt3_1T_64k(benchmark::State& state) {
  const auto s = ptsim::sim::load_scenario(std::string(PTSIM_SOURCE_DIR) + "/bench/scenarios/gpt3-1t-64k.yaml");
  ptsim::sim::SimulateOptions o;
  o.fold = state.range(0) != 0;
  for (auto _ : state) {
    const auto r = ptsim::sim::simulate(s, o).result;
    state.counters["iteration_s"] = r.iteration_time_s;
    state.counters["events"] = static_cast<double>(r.events);
  }
  state.counters["peak_rss_GiB"] = peak_rss_gib();
}
BENCHMARK(BM_Gpt3_1T_64k)
    ->Arg(1)
    ->Arg(0)
    ->ArgNames({"folded"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace
