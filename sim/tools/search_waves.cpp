// The waves: the survivors of the pre-pass, simulated best bound first in
// fixed-size waves on a thread pool (and over processes); a survivor is skipped
// (beaten by the bound) once its bound can neither reach the K-th best group of
// equivalent plans nor the best plan of its cluster size (branch and bound).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "hw/errors.h"
#include "sim/core/simulate.h"
#include "sim/tools/search_internal.h"

namespace ptsim::sim::plan_search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int size_at(const SearchRun& run, std::int64_t pos) {
  return run.cands[static_cast<std::size_t>(run.survivors[static_cast<std::size_t>(pos)])].num_gpus;
}

// The bound on the ranking score (rank_score) of the survivor at `pos`.
double bound_at(const SearchRun& run, std::int64_t pos) {
  const auto& p = run.pre[static_cast<std::size_t>(run.survivors[static_cast<std::size_t>(pos)])];
  return rank_score(run, p.bound_tokens_per_s, size_at(run, pos), p.goodput_bound);
}

// A plan whose tokens/s is below threshold − 1 rounds below the threshold's
// rounded value, so it can neither rank above nor be equivalent to that plan.
bool below(double bound, double threshold) { return bound < threshold - 1.0; }

double size_threshold(const Waves& waves, int gpus) {
  const auto it = waves.size_best.find(gpus);
  return it == waves.size_best.end() ? -kInf : it->second;
}

// The survivor at `pos` can change neither the top K nor its size's best.
bool beaten(const SearchRun& run, const Waves& waves, std::int64_t pos) {
  const double b = bound_at(run, pos);
  return below(b, waves.kth) && below(b, size_threshold(waves, size_at(run, pos)));
}

// Every survivor from `pos` on is beaten (they come best bound first).
bool all_beaten(const SearchRun& run, const Waves& waves, std::int64_t pos) {
  double lowest = waves.kth;
  for (int g : run.sizes) lowest = std::min(lowest, size_threshold(waves, g));
  return below(bound_at(run, pos), lowest);
}

// The survivors from `pos` on that could still be simulated under the current thresholds.
std::int64_t still_to_simulate(const SearchRun& run, const Waves& waves, std::int64_t pos) {
  std::int64_t n = 0;
  const auto total = static_cast<std::int64_t>(run.survivors.size());
  for (std::int64_t q = pos; q < total && !all_beaten(run, waves, q); ++q)
    if (!beaten(run, waves, q)) ++n;
  return n;
}

struct WaveProgress {
  Clock::time_point t0 = Clock::now();
  std::int64_t sims_before = 0;  // simulated before the phase (0)
};

void report_progress(const SearchRun& run, const Waves& waves, const WaveProgress& wp, std::int64_t settled,
                     std::int64_t simulated, std::int64_t to_simulate) {
  SearchProgress pr;
  pr.phase = SearchProgress::Phase::simulate;
  pr.done = settled;
  pr.total = static_cast<std::int64_t>(run.survivors.size());
  pr.simulated = simulated;
  pr.still_to_simulate = to_simulate;
  pr.elapsed_s = seconds_since(run.t0);
  pr.phase_elapsed_s = seconds_since(wp.t0);
  pr.best_tokens_per_s = waves.feasible.empty() ? 0 : waves.feasible.front().o.tokens_per_s;
  const std::int64_t sims = simulated - wp.sims_before;
  if (pr.done >= pr.total)
    pr.eta_s = 0;
  else if (sims > 0 && std::isfinite(waves.kth))  // before the top K is full nothing can be beaten yet
    pr.eta_s = pr.phase_elapsed_s / static_cast<double>(sims) * static_cast<double>(to_simulate);
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
  if (r.goodput && run.opt.sort == SearchSort::goodput) o.goodput = r.goodput->goodput;
  return o;
}

// This process's share of the wave (survivor positions), simulated on the thread pool.
std::vector<CandidateOutcome> simulate_wave(const SearchRun& run, const Waves& waves, const WaveProgress& wp,
                                            const std::vector<std::int64_t>& wave, std::int64_t next_pos) {
  const SearchOptions& opt = run.opt;
  std::vector<std::int64_t> mine;  // positions this process simulates
  for (std::size_t k = 0; k < wave.size(); ++k)
    if (static_cast<int>(k % static_cast<std::size_t>(opt.shard_count)) == opt.shard_rank) mine.push_back(wave[k]);
  std::vector<CandidateOutcome> local(mine.size());
  std::function<void(std::int64_t)> tick;
  if (opt.progress) {
    const std::int64_t later = still_to_simulate(run, waves, next_pos);
    tick = [&, later](std::int64_t done) {
      const std::int64_t all_done = std::min<std::int64_t>(done * opt.shard_count, wave.size());
      report_progress(run, waves, wp, waves.settled + all_done, run.res.simulated + all_done,
                      later + static_cast<std::int64_t>(wave.size()) - all_done);
    };
  }
  parallel_for(
      static_cast<std::int64_t>(mine.size()), run.threads,
      [&](std::int64_t k) {
        local[static_cast<std::size_t>(k)] = simulate_candidate(run, mine[static_cast<std::size_t>(k)]);
      },
      tick);
  return local;
}

// The thresholds from the plans ranked so far.
void update_thresholds(const SearchRun& run, Waves& waves) {
  const auto groups = equivalence_groups(run, waves.feasible);
  const auto k = static_cast<std::size_t>(run.opt.top_k);
  const auto score = [&](const Ranked& f) {
    return rounded_tokens_per_s(
        rank_score(run, f.o.tokens_per_s, run.cands[static_cast<std::size_t>(f.cand)].num_gpus, f.o.goodput));
  };
  if (groups.size() >= k) waves.kth = score(waves.feasible[groups[k - 1].front()]);
  // Each size's best so far: `feasible` is ranked best first, so the first plan of a size
  // is its best (the map is rebuilt, not kept: a later wave may beat an earlier best).
  waves.size_best.clear();
  for (const auto& f : waves.feasible) {
    const int g = run.cands[static_cast<std::size_t>(f.cand)].num_gpus;
    if (!waves.size_best.count(g)) waves.size_best[g] = score(f);
  }
}

// Every process's outcomes of the wave, into `waves` and the counts.
void record_wave(SearchRun& run, Waves& waves, const std::vector<CandidateOutcome>& outcomes,
                 const std::vector<std::int64_t>& wave) {
  PTSIM_CHECK(outcomes.size() == wave.size(), "search: a wave of {} came back with {} outcomes", wave.size(),
              outcomes.size());
  const double limit = memory_limit(run);
  for (const auto& o : outcomes) {
    PTSIM_CHECK(
        std::binary_search(wave.begin(), wave.end(), o.index) && !waves.simulated[static_cast<std::size_t>(o.index)],
        "search: outcome for position {} outside its wave or twice", o.index);
    waves.simulated[static_cast<std::size_t>(o.index)] = true;
    waves.outcomes[static_cast<std::size_t>(o.index)] = o;
    ++run.res.simulated;
    ++waves.settled;
    if (!o.feasible)
      ++run.res.pruned["oom (simulated)"];
    else if (o.peak_bytes > limit)
      ++run.res.pruned[fmt::format("headroom < {:g} % (simulated)", 100 * run.opt.min_headroom)];
    else
      waves.feasible.push_back({run.survivors[static_cast<std::size_t>(o.index)], o});
  }
  std::sort(waves.feasible.begin(), waves.feasible.end(),
            [&](const Ranked& a, const Ranked& b) { return ranks_before(run, a, b); });
  update_thresholds(run, waves);
}

// The next wave: up to wave_size survivors from `pos` on that are not beaten; the
// beaten ones passed over are settled. Advances `pos`.
std::vector<std::int64_t> next_wave(SearchRun& run, Waves& waves, std::int64_t& pos) {
  const auto total = static_cast<std::int64_t>(run.survivors.size());
  const bool prune = run.opt.prune_by_bound;
  std::vector<std::int64_t> wave;
  while (pos < total && static_cast<int>(wave.size()) < run.opt.wave_size) {
    if (prune && all_beaten(run, waves, pos)) {
      run.res.pruned["bound"] += total - pos;
      waves.settled += total - pos;
      pos = total;
      break;
    }
    if (prune && beaten(run, waves, pos)) {
      ++run.res.pruned["bound"];
      ++waves.settled;
    } else {
      wave.push_back(pos);
    }
    ++pos;
  }
  return wave;
}

}  // namespace

void parallel_for(std::int64_t n, int threads, const std::function<void(std::int64_t)>& task,
                  const std::function<void(std::int64_t)>& tick) {
  if (n <= 0) return;
  std::atomic<std::int64_t> next{0}, finished{0};
  std::exception_ptr error;
  std::mutex mutex;
  std::condition_variable all_done;
  auto worker = [&]() {
    for (;;) {
      const std::int64_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        task(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
      if (finished.fetch_add(1) + 1 == n) {
        std::lock_guard<std::mutex> lock(mutex);
        all_done.notify_all();
      }
    }
  };
  const int t = static_cast<int>(std::min<std::int64_t>(std::max(1, threads), n));
  std::vector<std::thread> pool;
  // Without a tick the calling thread is one of the workers; with one it reports.
  for (int i = tick ? 0 : 1; i < t; ++i) pool.emplace_back(worker);
  if (tick) {
    std::unique_lock<std::mutex> lock(mutex);
    while (!all_done.wait_for(lock, std::chrono::milliseconds(100), [&] { return finished.load() >= n; })) {
      lock.unlock();
      tick(finished.load());
      lock.lock();
    }
  } else {
    worker();
  }
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
  WaveProgress wp;
  wp.sims_before = run.res.simulated;
  std::int64_t pos = 0;
  if (opt.progress) report_progress(run, waves, wp, 0, run.res.simulated, total);
  while (pos < total) {
    const std::vector<std::int64_t> wave = next_wave(run, waves, pos);
    if (wave.empty()) break;
    const std::vector<CandidateOutcome> local = simulate_wave(run, waves, wp, wave, pos);
    record_wave(run, waves, opt.exchange ? opt.exchange(local) : local, wave);
    if (opt.progress)
      report_progress(run, waves, wp, waves.settled, run.res.simulated, still_to_simulate(run, waves, pos));
  }
  PTSIM_CHECK(waves.settled == total, "search: {} of {} plans settled", waves.settled, total);
  // The last wave may have been followed by the bound settling every plan left: say so.
  if (opt.progress && total > 0) report_progress(run, waves, wp, waves.settled, run.res.simulated, 0);
  return waves;
}

}  // namespace ptsim::sim::plan_search
