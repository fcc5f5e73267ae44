// The waves: the survivors of the pre-pass, simulated best bound first in
// fixed-size waves on a thread pool (and over processes), until the best remaining
// bound cannot reach the K-th best simulated throughput (branch and bound).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <exception>
#include <thread>

#include "hw/errors.h"
#include "sim/core/simulate.h"
#include "sim/tools/search_internal.h"

namespace ptsim::sim::plan_search {
namespace {

double bound_at(const SearchRun& run, std::int64_t pos) {
  return run.pre[static_cast<std::size_t>(run.survivors[static_cast<std::size_t>(pos)])].bound_tokens_per_s;
}

void report_progress(const SearchRun& run, const Waves& waves, std::int64_t done, std::int64_t simulated) {
  SearchProgress pr;
  pr.done = done;
  pr.total = static_cast<std::int64_t>(run.survivors.size());
  pr.simulated = simulated;
  pr.elapsed_s = seconds_since(run.t0);
  pr.best_tokens_per_s = waves.feasible.empty() ? 0 : waves.feasible.front().o.tokens_per_s;
  run.opt.progress(pr);
}

// The survivor at position `q`, simulated.
CandidateOutcome simulate_candidate(const SearchRun& run, std::int64_t q) {
  const Scenario s =
      candidate_scenario(run.base, run.cands[static_cast<std::size_t>(run.survivors[static_cast<std::size_t>(q)])]);
  SimulateOptions so;
  so.fold = !run.opt.full;
  so.compute = run.compute;
  so.collectives = run.opt.collectives;  // null: simulate() builds the plan's own network model
  const Result r = simulate(s, so).result;
  CandidateOutcome o;
  o.index = q;
  o.feasible = r.feasible;
  o.tokens_per_s = r.tokens_per_s;
  o.model_tflops_per_gpu = r.model_tflops_per_gpu;
  o.mfu = r.mfu;
  o.bubble_fraction = r.bubble_fraction;
  o.peak_bytes = r.peak_bytes;
  o.iteration_time_s = r.iteration_time_s;
  o.exposed_comm_s = r.exposed_comm_s;
  return o;
}

// This process's share of the wave [pos, end), simulated on the thread pool.
std::vector<CandidateOutcome> simulate_wave(const SearchRun& run, const Waves& waves, std::int64_t pos,
                                            std::int64_t end) {
  const SearchOptions& opt = run.opt;
  std::vector<std::int64_t> mine;  // positions this process simulates
  for (std::int64_t q = pos; q < end; ++q)
    if (q % opt.shard_count == opt.shard_rank) mine.push_back(q);
  std::vector<CandidateOutcome> local(mine.size());
  std::function<void(std::int64_t)> tick;
  if (opt.progress)
    tick = [&](std::int64_t done) {
      report_progress(run, waves, pos + done * opt.shard_count, run.res.simulated + done * opt.shard_count);
    };
  parallel_for(
      static_cast<std::int64_t>(mine.size()), run.threads,
      [&](std::int64_t k) {
        local[static_cast<std::size_t>(k)] = simulate_candidate(run, mine[static_cast<std::size_t>(k)]);
      },
      tick);
  return local;
}

// Every process's outcomes of the wave [pos, end), into `waves` and the counts.
void record_wave(SearchRun& run, Waves& waves, const std::vector<CandidateOutcome>& wave, std::int64_t pos,
                 std::int64_t end) {
  PTSIM_CHECK(static_cast<std::int64_t>(wave.size()) == end - pos, "search: wave [{}, {}) came back with {} outcomes",
              pos, end, wave.size());
  for (const auto& o : wave) {
    PTSIM_CHECK(o.index >= pos && o.index < end && !waves.simulated[static_cast<std::size_t>(o.index)],
                "search: outcome for position {} outside wave [{}, {}) or twice", o.index, pos, end);
    waves.simulated[static_cast<std::size_t>(o.index)] = true;
    waves.outcomes[static_cast<std::size_t>(o.index)] = o;
    ++run.res.simulated;
    if (o.feasible)
      waves.feasible.push_back({run.survivors[static_cast<std::size_t>(o.index)], o});
    else
      ++run.res.pruned["oom (simulated)"];
  }
  std::sort(waves.feasible.begin(), waves.feasible.end(), [](const Ranked& a, const Ranked& b) {
    if (a.o.tokens_per_s != b.o.tokens_per_s) return a.o.tokens_per_s > b.o.tokens_per_s;
    return a.cand < b.cand;
  });
  const int k = run.opt.top_k;
  if (static_cast<int>(waves.feasible.size()) >= k)
    waves.kth = waves.feasible[static_cast<std::size_t>(k - 1)].o.tokens_per_s;
}

}  // namespace

void parallel_for(std::int64_t n, int threads, const std::function<void(std::int64_t)>& task,
                  const std::function<void(std::int64_t)>& tick) {
  if (n <= 0) return;
  std::atomic<std::int64_t> next{0}, finished{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  // `ticking`: the caller's thread works too and reports progress between tasks.
  auto worker = [&](bool ticking) {
    auto last = Clock::now();
    for (;;) {
      const std::int64_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        task(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      finished.fetch_add(1);
      if (ticking && seconds_since(last) > 0.1) {
        tick(finished.load());
        last = Clock::now();
      }
    }
  };
  const int t = static_cast<int>(std::min<std::int64_t>(std::max(1, threads), n));
  std::vector<std::thread> pool;
  for (int i = 1; i < t; ++i) pool.emplace_back(worker, false);
  worker(static_cast<bool>(tick));
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

int hardware_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned h = std::thread::hardware_concurrency();
  return h == 0 ? 1 : static_cast<int>(h);
}

Waves run_waves(SearchRun& run) {
  const SearchOptions& opt = run.opt;
  const auto total = static_cast<std::int64_t>(run.survivors.size());
  Waves waves;
  waves.outcomes.resize(run.survivors.size());
  waves.simulated.assign(run.survivors.size(), false);
  std::int64_t pos = 0;
  while (pos < total) {
    // Stop as soon as the best remaining bound cannot reach the K-th best.
    if (opt.prune_by_bound && bound_at(run, pos) < waves.kth) {
      run.res.pruned["bound"] += total - pos;
      break;
    }
    std::int64_t end = std::min(total, pos + opt.wave_size);
    if (opt.prune_by_bound)
      while (end > pos && bound_at(run, end - 1) < waves.kth) --end;
    const std::vector<CandidateOutcome> local = simulate_wave(run, waves, pos, end);
    record_wave(run, waves, opt.exchange ? opt.exchange(local) : local, pos, end);
    pos = end;
    if (opt.progress) report_progress(run, waves, pos, run.res.simulated);
  }
  if (opt.progress) report_progress(run, waves, total, run.res.simulated);
  return waves;
}

}  // namespace ptsim::sim::plan_search
