// The full plan search of the default scenario (GPT-3 175B on 1,024 A100s, global
// batch 1,536): every valid plan enumerated, pruned by memory and the iteration-time
// bound, the survivors simulated folded. Target (DESIGN.md): < 30 s on 2 cores.
// Threads = the benchmark argument.
#include <benchmark/benchmark.h>

#include "ptsim/config.h"
#include "sim/io/scenario_file.h"
#include "sim/tools/search.h"

namespace {

void BM_SearchDefault(benchmark::State& state) {
  const auto s = ptsim::sim::load_scenario(std::string(PTSIM_SOURCE_DIR) + "/scenarios/default.yaml");
  ptsim::sim::SearchOptions o;
  o.threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
    const auto r = ptsim::sim::search(s, o);
    state.counters["candidates"] = static_cast<double>(r.candidates);
    state.counters["simulated"] = static_cast<double>(r.simulated);
    state.counters["best_tokens_per_s"] = r.plans.empty() ? 0 : r.plans.front().tokens_per_s;
  }
}
BENCHMARK(BM_SearchDefault)->Arg(2)->ArgNames({"threads"})->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace
