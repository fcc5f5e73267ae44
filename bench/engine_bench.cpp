// Event engine throughput: events per second on one core (DESIGN.md budget:
// >= 20 M events/s). Each event reschedules itself at a pseudo-random delay, so
// the heap holds `pending` events throughout, as a replay's would.
#include <benchmark/benchmark.h>

#include "sim/core/engine.h"

namespace {

struct Ctx {
  ptsim::sim::Engine* engine;
  std::uint64_t left;
};

void step(void* p, std::uint64_t arg) {
  auto* c = static_cast<Ctx*>(p);
  if (c->left == 0) return;
  --c->left;
  const std::uint64_t next = arg * 6364136223846793005ULL + 1442695040888963407ULL;
  c->engine->schedule_in(static_cast<ptsim::Tick>(next >> 54) + 1, step, c, next);
}

void BM_EngineEvents(benchmark::State& state) {
  const auto pending = static_cast<std::uint64_t>(state.range(0));
  const std::uint64_t events = 4'000'000;
  for (auto _ : state) {
    ptsim::sim::Engine e;
    e.reserve(pending + 1);
    Ctx c{&e, events};
    for (std::uint64_t i = 0; i < pending; ++i) e.schedule(static_cast<ptsim::Tick>(i), step, &c, i + 1);
    e.run();
    benchmark::DoNotOptimize(e.now());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * (events + pending)));
}
BENCHMARK(BM_EngineEvents)->Arg(64)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

}  // namespace
