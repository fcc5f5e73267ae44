// One simulated iteration of the default scenario (GPT-3 175B, 1,024 A100s,
// tp 8 × pp 16 × dp 8): every rank simulated, and folded.
#include <benchmark/benchmark.h>

#include "ptsim/config.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"

namespace {

void BM_DefaultScenario(benchmark::State& state) {
  const auto s = ptsim::sim::load_scenario(std::string(PTSIM_SOURCE_DIR) + "/scenarios/default.yaml");
  ptsim::sim::SimulateOptions o;
  o.fold = state.range(0) != 0;
  for (auto _ : state) benchmark::DoNotOptimize(ptsim::sim::simulate(s, o).result.iteration_time_s);
}
BENCHMARK(BM_DefaultScenario)->Arg(0)->Arg(1)->ArgNames({"folded"})->Unit(benchmark::kMillisecond);

}  // namespace
