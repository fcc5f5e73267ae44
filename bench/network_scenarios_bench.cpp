// Every rank of one iteration with link sharing on (the max-min flow network), for the
// scenarios of issue 12 that put many flows on the fabric: the 512-GPU MoE all-to-all
// case at 1:1 and 4:1, ZeRO-3 GPT-3 175B on 1,024 A100s, the default scenario and
// GPT-3 1T on 16,384 GPUs; and the Llama 3 405B reference run on 8,192 H100s, whose
// connections are 16 queue pairs each (README "Network model"). Prints wall time (the
// benchmark's time) and events/s.
#include <benchmark/benchmark.h>

#include <string>

#include "ptsim/config.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"

namespace {

void run(benchmark::State& state, const std::string& file) {
  const auto s = ptsim::sim::load_scenario(std::string(PTSIM_SOURCE_DIR) + "/" + file);
  std::uint64_t events = 0;
  for (auto _ : state) {
    const auto r = ptsim::sim::simulate(s).result;
    events = r.events;
    benchmark::DoNotOptimize(r.events);
  }
  state.counters["events"] = static_cast<double>(events);
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_MoE512_1to1(benchmark::State& s) { run(s, "bench/scenarios/moe-64e-512xh100-1to1.yaml"); }
void BM_MoE512_4to1(benchmark::State& s) { run(s, "bench/scenarios/moe-64e-512xh100-4to1.yaml"); }
void BM_Zero3_175B_1024(benchmark::State& s) { run(s, "bench/scenarios/gpt3-175b-zero3-1024xa100.yaml"); }
void BM_Default(benchmark::State& s) { run(s, "scenarios/default.yaml"); }
void BM_GPT3_1T_16k(benchmark::State& s) { run(s, "scenarios/gpt3-1t-16k.yaml"); }
void BM_Llama3_405B_8k_16qps(benchmark::State& s) { run(s, "scenarios/reference/llama3-405b-8192-cp1.yaml"); }

BENCHMARK(BM_MoE512_1to1)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_MoE512_4to1)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Zero3_175B_1024)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Default)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_GPT3_1T_16k)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Llama3_405B_8k_16qps)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
