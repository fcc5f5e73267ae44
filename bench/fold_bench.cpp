// One iteration of GPT-3 1T on 16,384 A100s (Megatron SC'21 Table 1 shape: tp 8,
// pp 16, dp 128; scenarios/gpt3-1t-16k.yaml) folded (one representative rank per
// stage; target < 1 s) and with every rank simulated (target < 60 s, < 8 GiB peak
// RSS; the RSS is reported as a counter, read from /proc/self/status VmHWM).
#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

#include "ptsim/config.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"

namespace {

// Peak resident set of this process in bytes (Linux VmHWM), 0 elsewhere.
double peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmHWM:") {
      double kib = 0;
      f >> kib;
      return kib * 1024.0;
    }
    std::getline(f, key);
  }
  return 0;
}

void BM_Gpt3_1T_16k(benchmark::State& state) {
  const auto s = ptsim::sim::load_scenario(std::string(PTSIM_SOURCE_DIR) + "/scenarios/gpt3-1t-16k.yaml");
  ptsim::sim::SimulateOptions o;
  o.fold = state.range(0) != 0;
  for (auto _ : state) {
    const auto r = ptsim::sim::simulate(s, o).result;
    state.counters["iteration_s"] = r.iteration_time_s;
    state.counters["events"] = static_cast<double>(r.events);
  }
  state.counters["peak_rss_GiB"] = peak_rss_bytes() / (1024.0 * 1024.0 * 1024.0);
}
// Folded first, so the peak RSS counter of the folded run is not the full run's.
BENCHMARK(BM_Gpt3_1T_16k)
    ->Arg(1)
    ->Arg(0)
    ->ArgNames({"folded"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace
