// `ptsim compare` (README "Comparing plans"): several scenarios, or variants of one
// (--set-plan), simulated and put side by side — one table (text, CSV, JSON with the
// same columns) ranked by speed or by cost, with each plan's difference from the best.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/scenario.h"
#include "sim/core/simulate.h"

namespace ptsim::sim {

// One plan of a comparison: where it came from, what was simulated, and the outcome.
struct ComparedPlan {
  std::string file;      // the scenario file
  std::string set_plan;  // the --set-plan text ("" for the scenario as written)
  Scenario scenario;
  Simulation sim;
  std::string label() const { return set_plan.empty() ? file : file + " [" + set_plan + "]"; }
};

// "tp=8 pp=4 dp=16 mbs=1 …" as --set overrides ("parallel.tensor_parallel=8", …). Short
// names: tp, pp, dp, cp, ep, vpp, mbs, gbs, zero, recompute, sp, schedule, gpus (the
// scenario keys in kSetPlanKeys); a full key path (with a dot) passes through as --set.
// Throws InputError (file "--set-plan", naming the word) for a word that is neither.
std::vector<std::string> set_plan_overrides(const std::string& spec);

struct CompareOptions {
  std::vector<std::string> files;      // scenario files
  std::vector<std::string> set_plans;  // with one file: each is a variant of it
  std::vector<std::string> sets;       // --set overrides applied to every plan first
  bool fold = false;
  bool trace = false;  // keep the spans (the HTML page draws each plan's timeline)
};

// Loads and simulates every plan, in the order given. Bad input is an InputError
// naming the file (or --set-plan) and the key.
std::vector<ComparedPlan> run_comparison(const CompareOptions& opt);

enum class CompareSort { speed, cost, goodput };

// Exposed communication columns, in this order.
inline constexpr std::array<Dim, 5> kCompareDims = {Dim::tp, Dim::cp, Dim::ep, Dim::pp, Dim::dp};

struct CompareRow {
  int rank = 0;           // 1 = best
  std::size_t index = 0;  // into the plans as given
  std::string label;
  bool feasible = true;
  double iteration_time_s = 0, tokens_per_s = 0, mfu = 0, bubble_fraction = 0;
  std::array<double, kCompareDims.size()> exposed_s{};
  double peak_bytes = 0, capacity_bytes = 0, headroom_bytes = 0;  // headroom = capacity − peak
  // Speed: throughput relative to the best (≤ 0); cost: cost relative to the cheapest (≥ 0).
  double vs_best_pct = 0;
  std::optional<TimeToTrain> time_to_train;
  std::optional<Goodput> goodput;  // with a reliability section (sim/core/goodput.h)
  // tokens/s × goodput: the ranking of --sort goodput (0 without a reliability section).
  double goodput_tokens_per_s() const { return goodput ? goodput->tokens_per_s : 0; }
};

// Ranked best first: feasible plans before out-of-memory ones, then by tokens/s
// (speed), by cost (cost) or by tokens/s × goodput (goodput), ties by lower peak
// memory, then input order. Sorting by cost needs a cost for every plan (training goal
// and price), by goodput a reliability section: otherwise an InputError naming the
// first plan without one.
std::vector<CompareRow> compare_rows(const std::vector<ComparedPlan>& plans, CompareSort sort);

// The columns of the CSV and of each JSON row, in order (README "Comparing plans").
const std::vector<std::string>& compare_columns();
// Terminal table within 100 columns: a legend line per plan, then one row per plan.
std::string compare_table_text(const std::vector<CompareRow>& rows, const std::vector<ComparedPlan>& plans,
                               CompareSort sort);
std::string compare_csv(const std::vector<CompareRow>& rows, const std::vector<ComparedPlan>& plans);
nlohmann::json compare_json(const std::vector<CompareRow>& rows, const std::vector<ComparedPlan>& plans,
                            CompareSort sort);

}  // namespace ptsim::sim
