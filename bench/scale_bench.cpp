// GPT-3 1T at scale, one iteration per benchmark, folded (one representative rank per
// stage, closed-form network) and with every rank simulated with link sharing:
//  - BM_GPT3_1T_16k: 16,384 A100s (Megatron SC'21 Table 1 shape: tp 8, pp 16, dp 128;
//    scenarios/gpt3-1t-16k.yaml); budgets folded < 1 s, every rank < 60 s, < 8 GiB.
//  - BM_GPT3_1T_64k: 65,536 A100s (bench/scenarios/gpt3-1t-64k.yaml: dp 512 on a
//    radix-64 3-tier fat tree; issue 17 "Scale"); budgets folded < 1 s, every rank
//    < 30 s, < 2 GiB.
// Counters: the iteration, the events and the peak RSS (/proc/self/status VmHWM).
// The peak RSS only grows, so run one benchmark at a time (--benchmark_filter) for
// the RSS of a case; folded runs come first for that reason. On a shared machine read
// the process CPU time (/usr/bin/time), not the wall time.
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

void run_scenario(benchmark::State& state, const char* relative_path) {
  const auto s = ptsim::sim::load_scenario(std::string(PTSIM_SOURCE_DIR) + "/" + relative_path);
  ptsim::sim::SimulateOptions o;
  o.fold = state.range(0) != 0;
  for (auto _ : state) {
    const auto r = ptsim::sim::simulate(s, o).result;
    state.counters["iteration_s"] = r.iteration_time_s;
    state.counters["events"] = static_cast<double>(r.events);
  }
  state.counters["peak_rss_GiB"] = peak_rss_gib();
}

void BM_GPT3_1T_16k(benchmark::State& state) { run_scenario(state, "scenarios/gpt3-1t-16k.yaml"); }
void BM_GPT3_1T_64k(benchmark::State& state) { run_scenario(state, "bench/scenarios/gpt3-1t-64k.yaml"); }

BENCHMARK(BM_GPT3_1T_16k)
    ->Arg(1)
    ->Arg(0)
    ->ArgNames({"folded"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();
BENCHMARK(BM_GPT3_1T_64k)
    ->Arg(1)
    ->Arg(0)
    ->ArgNames({"folded"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace
