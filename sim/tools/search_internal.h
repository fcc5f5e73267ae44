// The parts of the plan search (search.h), shared by the files that implement it:
//   search_space.cpp   the candidates: --fix restrictions and the enumeration
//   search_bound.cpp   the lower bound on the iteration time, and the pre-pass
//                      (validity, analytical memory, bound) over every candidate
//   search_waves.cpp   the thread pool, and the branch and bound over waves that
//                      simulates the survivors
//   search_output.cpp  the verdicts on the families not in the top K; JSON, CSV, text
//   search.cpp         search(): the steps in order, and the top K
// Not a public header: only sim/tools/search*.cpp include it.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sim/tools/search.h"

namespace ptsim::sim::plan_search {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A small thread pool for one batch: `threads` workers pull indices from an atomic
// counter; with a `tick`, the calling thread only reports progress (tasks finished)
// every 100 ms, from the start. No shared mutable state other than the counters:
// every task writes only its own output slot.
void parallel_for(std::int64_t n, int threads, const std::function<void(std::int64_t)>& task,
                  const std::function<void(std::int64_t)>& tick);

int hardware_threads(int requested);

// Whether --fix names the pipeline schedules, ZeRO stages and context-parallel sizes alike (the
// search then explores those, not the framework's own: SearchResult::space_fixed).
bool fixes_framework_space(const SearchOptions& opt);

enum class Verdict : std::uint8_t { survivor, invalid, oom };

// One candidate's pre-pass (no simulation).
struct PrePass {
  Verdict verdict = Verdict::survivor;
  std::string reason;        // invalid: the key
  double analytic_peak = 0;  // bytes (max over stages)
  double bound_tokens_per_s = 0;
  double goodput_bound = 1;  // --sort goodput: goodput_upper_bound of the plan
};

// One search, filled step by step by search().
struct SearchRun {
  const Scenario& base;
  const SearchOptions& opt;
  Clock::time_point t0;
  int threads = 1;
  const hw::ComputeCostModel* compute = nullptr;
  std::vector<PlanCandidate> cands;     // enumeration order
  std::vector<PrePass> pre;             // by candidate
  std::vector<std::int64_t> survivors;  // candidates that passed the pre-pass, best bound first
  std::vector<int> sizes;               // the cluster sizes searched, ascending
  SearchResult res;
};

// The peak memory a plan may have: the GPU memory less the --min-headroom share.
inline double memory_limit(const SearchRun& run) { return run.base.cluster.gpu.hbm * (1.0 - run.opt.min_headroom); }

// What the ranking compares (search.h): tokens/s, by goodput tokens/s × `goodput`, or by
// cost tokens/s scaled to the smallest cluster size searched (cost ∝ GPUs / tokens/s
// for a fixed training goal).
inline double rank_score(const SearchRun& run, double tokens_per_s, int num_gpus, double goodput) {
  if (run.opt.sort == SearchSort::goodput) return tokens_per_s * goodput;
  if (run.opt.sort == SearchSort::speed || run.sizes.empty()) return tokens_per_s;
  return tokens_per_s * static_cast<double>(run.sizes.front()) / static_cast<double>(num_gpus);
}

// A simulated feasible candidate.
struct Ranked {
  std::int64_t cand;
  CandidateOutcome o;
};

// The ranking and the equivalence of search.h, on candidates.
bool ranks_before(const SearchRun& run, const Ranked& a, const Ranked& b);
using EquivalenceKey = std::tuple<int, int, int, int, int, int, double, double>;
EquivalenceKey equivalence_key(int num_gpus, const models::Parallelism& par, double tokens_per_s, double peak_bytes);
// `ranked` (in ranking order) grouped into equivalence classes, in the order of their
// best member; each group lists indices into `ranked`, best first.
std::vector<std::vector<std::size_t>> equivalence_groups(const SearchRun& run, const std::vector<Ranked>& ranked);

// What the waves leave behind.
struct Waves {
  std::vector<Ranked> feasible;            // every simulated plan within the memory limit, in ranking order
  std::vector<CandidateOutcome> outcomes;  // by survivor position
  std::vector<bool> simulated;             // by survivor position
  // The thresholds that prune (updated between waves only): the rounded tokens/s of
  // the K-th best group of equivalent plans, and of the best plan of each cluster size.
  double kth = -std::numeric_limits<double>::infinity();
  std::map<int, double> size_best;
  std::int64_t settled = 0;  // survivors simulated or beaten by the bound
};

// Validity, memory and bound for every candidate: fills run.pre.
void pre_pass(SearchRun& run);
// The candidates the pre-pass kept, best bound first (run.survivors); counts the others in run.res.pruned.
void rank_survivors(SearchRun& run);
// Branch and bound: simulates run.survivors wave by wave; counts in run.res.simulated and run.res.pruned.
Waves run_waves(SearchRun& run);
// One verdict per family with no plan in the top K (run.res.losers).
void judge_families(SearchRun& run, const Waves& waves);

}  // namespace ptsim::sim::plan_search
