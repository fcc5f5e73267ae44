// Plan search (`ptsim search`, CONTRACT §1): enumerate every valid parallel plan of a
// scenario's model, cluster and global batch; prune with the analytical memory
// model and a lower bound on the iteration time (branch and bound); simulate the
// survivors with the event engine; rank them by simulated throughput.
//
// Determinism: the candidates that survive pruning are processed best bound first
// in fixed-size waves; the running K-th best throughput (the bound that prunes)
// is updated only between waves. What gets simulated, and so the whole result,
// is therefore the same for any thread count and any number of MPI processes.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/compute_cost.h"
#include "sim/core/collective_cost.h"
#include "sim/core/plan.h"
#include "sim/core/program.h"
#include "sim/core/result.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// Progress of a running search (for a progress bar), phase by phase:
//   check     every candidate plan: validity, analytical memory, the bound
//             (done / total = candidates checked / SearchResult::candidates);
//   simulate  the plans that fit, best bound first
//             (done / total = plans settled, simulated or beaten by the bound /
//             SearchResult::fit).
struct SearchProgress {
  enum class Phase : std::uint8_t { check, simulate };
  Phase phase = Phase::check;
  std::int64_t done = 0, total = 0;
  std::int64_t simulated = 0;  // simulate: plans simulated so far
  // simulate: the plans not yet settled whose bound still beats the current
  // threshold, i.e. the most that can still be simulated (the threshold only rises).
  std::int64_t still_to_simulate = 0;
  double elapsed_s = 0;        // since the search started
  double phase_elapsed_s = 0;  // since this phase started
  double best_tokens_per_s = 0;
  // Seconds left in this phase, from this phase's own measured time per item
  // (check: per candidate checked; simulate: per plan simulated, times
  // still_to_simulate, so an upper bound); negative when nothing is measured yet.
  double eta_s = -1;
};

// One candidate's simulated metrics, as exchanged between processes.
struct CandidateOutcome {
  std::int64_t index = 0;  // position in the survivor list (best bound first)
  bool feasible = false;   // false: the simulated peak exceeds the GPU memory
  double tokens_per_s = 0, model_tflops_per_gpu = 0, mfu = 0, bubble_fraction = 0, peak_bytes = 0, iteration_time_s = 0;
  std::array<double, kNumDims> exposed_comm_s{};
  double goodput = 1;  // sim/core/goodput.h, with a reliability section (1 without)
};

// What the ranking puts first: speed (tokens/s) or cost to train. The cost of a plan is
// iterations × iteration time × GPUs × price, and the iterations (the training goal over
// the global batch) are the same for every plan, so ranking by cost is ranking by
// tokens/s per GPU: within one cluster size it equals the speed ranking.
// By goodput: tokens/s × goodput under failures and checkpoints (sim/core/goodput.h),
// which falls with the GPU count (more GPUs fail more often); the bound of a plan is
// its tokens/s bound × goodput_upper_bound.
enum class SearchSort : std::uint8_t { speed, cost, goodput };

struct SearchOptions {
  // Restrictions "key=value[,value...]" on scenario keys (CONTRACT §2 names):
  // parallel.{tensor_parallel, pipeline_parallel, data_parallel, context_parallel,
  // expert_parallel, virtual_pipeline_stages, pipeline_schedule, sequence_parallel,
  // zero_stage, recompute}, training.micro_batch_size, cluster.num_gpus.
  std::vector<std::string> fix;
  std::vector<int> gpus;  // cluster sizes to sweep; empty = the scenario's
  int top_k = 10;
  SearchSort sort = SearchSort::speed;  // cost: needs a training goal and a price (throws otherwise)
  // A plan must leave this fraction of the GPU memory free (--min-headroom 10% = 0.1).
  double min_headroom = 0;
  int threads = 0;               // 0 = every hardware thread
  bool full = false;             // simulate every rank instead of one per stage
  int max_micro_batch_size = 8;  // micro-batch sizes 1..this that divide gbs / dp
  int max_virtual_stages = 8;    // interleaved 1F1B: v in 2..this dividing layers / pp
  int max_context_parallel = 8;
  bool prune_by_bound = true;  // false: simulate every plan that fits (tests)
  int wave_size = 32;          // candidates simulated between bound updates
  // Analytical peak above capacity × this is pruned as OOM without simulating;
  // the simulated peak agrees with the analytical one within 1 %
  // (tests/sim/replay_test.cpp), so plans in the margin are left to the simulator.
  double oom_margin = 1.02;
  // Test hooks: cost models instead of the scenario's.
  const hw::ComputeCostModel* compute = nullptr;
  const CollectiveCost* collectives = nullptr;
  // Distribution over processes (MPI): this process simulates the survivors at
  // positions ≡ shard_rank (mod shard_count) of each wave; `exchange` receives this
  // process's outcomes of the wave and returns every process's (any order).
  int shard_rank = 0, shard_count = 1;
  std::function<std::vector<CandidateOutcome>(const std::vector<CandidateOutcome>&)> exchange;
  std::function<void(const SearchProgress&)> progress;  // called from the calling thread
};

struct RankedPlan {
  int rank = 0;
  int num_gpus = 0;
  Plan plan;
  double tokens_per_s = 0, model_tflops_per_gpu = 0, mfu = 0, bubble_fraction = 0, peak_bytes = 0, iteration_time_s = 0;
  std::array<double, kNumDims> exposed_comm_s{};
  double bound_tokens_per_s = 0;             // the analytical upper bound it had
  int equivalents = 0;                       // other plans equivalent to this one (plans_equivalent), not listed
  std::optional<PredictionBand> band;        // validation band of its regime (sim/core/prediction_band.h)
  std::string regime;
  double scaling_efficiency = 0;             // best_per_size only: tokens/s per GPU over the smallest size's
  std::optional<TimeToTrain> time_to_train;  // when the scenario gives a training goal
  std::optional<Goodput> goodput;            // when the scenario has a reliability section
};

// One simulated plan (for the report's throughput-vs-memory scatter).
struct SimulatedPoint {
  int num_gpus = 0;
  double tokens_per_s = 0, peak_bytes = 0;
  bool fits = true;  // within the memory limit (the GPU memory less --min-headroom)
};

// Ranking (speed): more tokens/s first, compared as rounded to whole tokens/s (what the
// table prints); then lower peak memory; then the plan key (gpus, dp, tp, pp, cp,
// ep, schedule, v, micro-batch, ZeRO, recompute, sp), so the order is total.
// Two plans are equivalent when they have the same GPUs, dp, tp, pp, cp and ep, the
// same tokens/s rounded to a whole token/s and the same peak memory rounded to a
// MiB: they differ only in knobs that change neither (e.g. the ZeRO stage with
// dp = 1). The table lists the best-ranked one with "+N" for the others. Ranking by
// cost compares tokens/s × (smallest cluster size / the plan's GPUs) instead, rounded
// the same way, so the branch and bound prunes the same way in both.
double rounded_tokens_per_s(double tokens_per_s);
bool plans_equivalent(const RankedPlan& a, const RankedPlan& b);

// A family of plans (same GPUs, tp, pp, cp, ep) and why none of it is in the top K.
struct FamilyVerdict {
  std::string family;  // "gpus 1024 tp 8 pp 16 cp 1"
  std::string reason;  // "OOM: …", "dominated by bound: …", "bubble 23 %", …
};

struct SearchResult {
  std::vector<RankedPlan> plans;               // top K (equivalent plans collapsed), best first
  std::vector<RankedPlan> best_per_size;       // the best plan of each cluster size, smallest size first
  std::map<std::string, std::int64_t> pruned;  // reason → count
  // candidates = every plan enumerated; fit = those valid whose analytical peak
  // fits (the plans the simulate phase settles); simulated ⊆ fit.
  std::int64_t candidates = 0, fit = 0, simulated = 0;
  // The pipeline schedules, ZeRO stages and context-parallel sizes the candidates run: the
  // framework's own and the scenario's unless --fix names others (space_fixed: it names all three).
  std::vector<std::string> schedules;
  std::vector<int> zero_stages, context_parallel;
  bool space_fixed = false;
  double min_headroom = 0;
  std::vector<FamilyVerdict> losers;
  std::vector<SimulatedPoint> simulated_points;  // every simulated plan, best bound first
  SearchSort sort = SearchSort::speed;
  double capacity_bytes = 0;
  double wall_time_s = 0;
};

// One point of the search space: a cluster size and a plan (the rest of the
// scenario — model, GPU, network, precision, overlap flags — is the base's).
struct PlanCandidate {
  int num_gpus = 0;
  models::Parallelism par;
};

// Every candidate plan of `base` under the options' restrictions, in a fixed
// order (before validation). Throws std::invalid_argument for a bad --fix.
std::vector<PlanCandidate> enumerate_candidates(const Scenario& base, const SearchOptions& opt);
// `base` with the candidate's cluster size and plan (micro-batch count derived).
Scenario candidate_scenario(const Scenario& base, const PlanCandidate& c);

// A true lower bound on the iteration time the simulator reports for `s`: every
// instruction on a stage's compute stream runs one after another, so a stage is
// busy for the sum of its compute and blocking (TP/CP) collective durations; it
// cannot start before micro-batch 0's forward crossed the stages before it
// (Σ forward of chunk 0) and its last backward (chunk 0) must still cross them
// back; and each async stream (channel) runs its launched collectives one after
// another. Rendezvous waits and p2p transfers are bounded by zero.
double iteration_time_lower_bound(const Scenario& s, const hw::ComputeCostModel& compute,
                                  const CollectiveCost& collectives);

SearchResult search(const Scenario& base, const SearchOptions& opt);

// CONTRACT §1: {"plans": [{"rank", "plan", "tokens_per_s", "model_tflops_per_gpu",
// "mfu", "bubble_fraction", "peak_bytes", "iteration_time_s"}…], "pruned": {…},
// "candidates": N, "simulated": M}.
nlohmann::json search_to_json(const SearchResult& r);
std::string search_to_csv(const SearchResult& r);
// The summary for a terminal: every line within 100 columns; `explain` adds the
// prune reasons in full and one line per losing family.
std::string search_summary_text(const SearchResult& r, bool explain = false);
// Plan `p` of a search over the scenario `scenario_text` (read from `file`, with the
// --set overrides `sets`) as a runnable scenario YAML: the same document with the
// plan's cluster size, parallel sizes, schedule, micro-batch, ZeRO, recompute and
// sequence parallelism (an even layer split). Checked to read back as that plan.
std::string plan_scenario_yaml(const std::string& scenario_text, const std::string& file,
                               const std::vector<std::string>& sets, const RankedPlan& p);
// `ptsim search --report`: a self-contained HTML page with a throughput-vs-memory scatter
// of every simulated plan and the first kSearchReportPlans top plans side by side as
// `ptsim compare --report` draws them (each re-simulated with its timeline: one
// representative rank per stage unless `full`). `file` names the scenario in the labels.
inline constexpr std::size_t kSearchReportPlans = 10;
std::string search_report_html(const Scenario& base, const std::string& file, const SearchResult& r, bool full);
// Seconds as "42s" / "3m07s"; "?" when negative or not finite.
std::string format_eta(double seconds);

}  // namespace ptsim::sim
