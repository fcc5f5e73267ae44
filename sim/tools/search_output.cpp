// The verdicts on the families not in the top K, and the search result as JSON,
// CSV and a text summary (search.h).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "sim/io/result_json.h"
#include "sim/tools/search_internal.h"

namespace ptsim::sim {
namespace {

double total_exposed(const std::array<double, kNumDims>& exposed_comm_s) {
  return std::accumulate(exposed_comm_s.begin(), exposed_comm_s.end(), 0.0);
}

std::string family_of(const PlanCandidate& c) {
  return fmt::format("gpus {} tp {} pp {} cp {}{}", c.num_gpus, c.par.tp, c.par.pp, c.par.cp,
                     c.par.ep > 1 ? fmt::format(" ep {}", c.par.ep) : std::string());
}

std::string plan_brief(const Plan& p) {
  const auto& q = p.par;
  return fmt::format("dp {} tp {} pp {} cp {}{} {}{} mbs {} zero {} rc {}{}", q.dp, q.tp, q.pp, q.cp,
                     q.ep > 1 ? fmt::format(" ep {}", q.ep) : std::string(), models::to_string(q.schedule),
                     q.vpp > 1 ? fmt::format(" v{}", q.vpp) : std::string(), q.micro_batch_size, q.zero_stage,
                     models::to_string(q.recompute), q.sequence_parallel ? " sp" : "");
}

// ---------------------------------------------------------------------------
// Verdicts

// What happened to one family's candidates.
struct Family {
  std::int64_t first = -1;  // its first candidate
  std::int64_t invalid = 0, oom = 0, oom_sim = 0, bound = 0;
  std::string invalid_key;
  double min_peak = std::numeric_limits<double>::infinity();
  double best_bound = 0;
  const plan_search::Ranked* best = nullptr;
  bool in_top = false;
};

// The families in order of first appearance.
class Families {
 public:
  explicit Families(const std::vector<PlanCandidate>& cands) : cands_(cands) {}

  Family& of(std::int64_t i) {
    const std::string key = family_of(cands_[static_cast<std::size_t>(i)]);
    auto it = fams_.find(key);
    if (it == fams_.end()) {
      order_.push_back(key);
      it = fams_.emplace(key, Family{}).first;
      it->second.first = i;
    }
    return it->second;
  }
  const std::vector<std::string>& order() const { return order_; }
  const Family& at(const std::string& key) const { return fams_.at(key); }

 private:
  const std::vector<PlanCandidate>& cands_;
  std::map<std::string, Family> fams_;
  std::vector<std::string> order_;
};

Families tally_families(const plan_search::SearchRun& run, const plan_search::Waves& waves) {
  Families fams(run.cands);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(run.cands.size()); ++i) {
    auto& f = fams.of(i);
    const auto& p = run.pre[static_cast<std::size_t>(i)];
    if (p.verdict == plan_search::Verdict::invalid) {
      ++f.invalid;
      if (f.invalid_key.empty()) f.invalid_key = p.reason;
    } else if (p.verdict == plan_search::Verdict::oom) {
      ++f.oom;
      f.min_peak = std::min(f.min_peak, p.analytic_peak);
    }
  }
  for (std::size_t q = 0; q < run.survivors.size(); ++q) {
    const std::int64_t i = run.survivors[q];
    auto& f = fams.of(i);
    if (!waves.simulated[q]) {
      ++f.bound;
      f.best_bound = std::max(f.best_bound, run.pre[static_cast<std::size_t>(i)].bound_tokens_per_s);
    } else if (!waves.outcomes[q].feasible) {
      ++f.oom_sim;
      f.min_peak = std::min(f.min_peak, waves.outcomes[q].peak_bytes);
    }
  }
  for (std::size_t r = 0; r < waves.feasible.size(); ++r) {
    auto& f = fams.of(waves.feasible[r].cand);
    if (!f.best) f.best = &waves.feasible[r];
    if (static_cast<int>(r) < run.opt.top_k) f.in_top = true;
  }
  return fams;
}

// Why a family's best simulated plan `o` (of candidate `c`) is slower than the #1 plan `top`.
std::string slowdown_cause(const PlanCandidate& c, const CandidateOutcome& o, const RankedPlan* top, int gpn) {
  const double comm_frac = o.iteration_time_s > 0 ? total_exposed(o.exposed_comm_s) / o.iteration_time_s : 0;
  const double top_comm_frac =
      top && top->iteration_time_s > 0 ? total_exposed(top->exposed_comm_s) / top->iteration_time_s : 0;
  const double d_bubble = o.bubble_fraction - (top ? top->bubble_fraction : 0);
  const double d_comm = comm_frac - top_comm_frac;
  if (c.par.tp > gpn) return fmt::format("cross-node TP (tp {} > {} GPUs per node)", c.par.tp, gpn);
  if (d_bubble > 0.01 && d_bubble >= d_comm) return fmt::format("bubble {:.1f} %", 100 * o.bubble_fraction);
  if (d_comm > 0.01) {
    int worst = 0;
    for (int d = 1; d < kNumDims; ++d)
      if (o.exposed_comm_s[static_cast<std::size_t>(d)] > o.exposed_comm_s[static_cast<std::size_t>(worst)]) worst = d;
    return fmt::format("exposed comm {:.1f} % (mostly {})", 100 * comm_frac, to_string(static_cast<Dim>(worst)));
  }
  return "lower compute efficiency (smaller GEMMs, recompute)";
}

std::string verdict(const plan_search::SearchRun& run, const plan_search::Waves& waves, const Family& f) {
  if (f.best) {
    const RankedPlan* top = run.res.plans.empty() ? nullptr : &run.res.plans.front();
    const auto& o = f.best->o;
    const double loss = top ? 1.0 - o.tokens_per_s / top->tokens_per_s : 0.0;
    const PlanCandidate& c = run.cands[static_cast<std::size_t>(f.first)];
    const Plan best = candidate_scenario(run.base, run.cands[static_cast<std::size_t>(f.best->cand)]).plan;
    return fmt::format("{}: best {:.0f} tokens/s ({:.1f} % below #1) with {}",
                       slowdown_cause(c, o, top, run.base.cluster.gpus_per_node), o.tokens_per_s, 100 * loss,
                       plan_brief(best));
  }
  if (f.bound > 0)
    return fmt::format("dominated by bound: at most {:.0f} tokens/s, below the #{} plan's {:.0f}", f.best_bound,
                       run.opt.top_k, waves.kth);
  if (f.oom + f.oom_sim > 0)
    return fmt::format("OOM: smallest peak {} > {} per GPU", format_bytes(f.min_peak),
                       format_bytes(run.res.capacity_bytes));
  return fmt::format("invalid: {}", f.invalid_key);
}

}  // namespace

namespace plan_search {

void judge_families(SearchRun& run, const Waves& waves) {
  const Families fams = tally_families(run, waves);
  for (const auto& key : fams.order()) {
    const Family& f = fams.at(key);
    if (!f.in_top) run.res.losers.push_back({key, verdict(run, waves, f)});
  }
}

}  // namespace plan_search

// ---------------------------------------------------------------------------
// Output

nlohmann::json search_to_json(const SearchResult& r) {
  nlohmann::json plans = nlohmann::json::array();
  for (const auto& p : r.plans) {
    nlohmann::json j;
    j["rank"] = p.rank;
    j["plan"] = plan_to_json(p.plan);
    j["num_gpus"] = p.num_gpus;
    j["tokens_per_s"] = p.tokens_per_s;
    j["model_tflops_per_gpu"] = p.model_tflops_per_gpu;
    j["mfu"] = p.mfu;
    j["bubble_fraction"] = p.bubble_fraction;
    j["peak_bytes"] = p.peak_bytes;
    j["iteration_time_s"] = p.iteration_time_s;
    j["bound_tokens_per_s"] = p.bound_tokens_per_s;
    nlohmann::json ex;
    for (int d = 0; d < kNumDims; ++d)
      ex[to_string(static_cast<Dim>(d))] = p.exposed_comm_s[static_cast<std::size_t>(d)];
    j["exposed_comm_s"] = ex;
    plans.push_back(j);
  }
  nlohmann::json pruned = nlohmann::json::object();
  for (const auto& [k, v] : r.pruned) pruned[k] = v;
  nlohmann::json losers = nlohmann::json::array();
  for (const auto& l : r.losers) losers.push_back({{"family", l.family}, {"reason", l.reason}});
  return {{"plans", plans},
          {"pruned", pruned},
          {"candidates", r.candidates},
          {"simulated", r.simulated},
          {"families_lost", losers}};
}

std::string search_to_csv(const SearchResult& r) {
  std::string out =
      "rank,num_gpus,dp,tp,pp,cp,ep,vpp,pipeline_schedule,micro_batch_size,num_microbatches,zero_stage,recompute,"
      "sequence_parallel,tokens_per_s,model_tflops_per_gpu,mfu,bubble_fraction,exposed_comm_s,peak_bytes,"
      "iteration_time_s\n";
  for (const auto& p : r.plans) {
    const auto& q = p.plan.par;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.0f},{:.6g}\n",
                       p.rank, p.num_gpus, q.dp, q.tp, q.pp, q.cp, q.ep, q.vpp, models::to_string(q.schedule),
                       q.micro_batch_size, q.num_microbatches, q.zero_stage, models::to_string(q.recompute),
                       q.sequence_parallel ? "true" : "false", p.tokens_per_s, p.model_tflops_per_gpu, p.mfu,
                       p.bubble_fraction, total_exposed(p.exposed_comm_s), p.peak_bytes, p.iteration_time_s);
  }
  return out;
}

std::string search_summary_text(const SearchResult& r) {
  std::string out;
  out += fmt::format("{} candidate plans, {} simulated, {:.2f} s\n", r.candidates, r.simulated, r.wall_time_s);
  out += fmt::format("{:>4} {:>6} {:<64} {:>11} {:>8} {:>6} {:>7} {:>9} {:>10}\n", "rank", "gpus", "plan", "tokens/s",
                     "TFLOP/s", "MFU", "bubble", "exp.comm", "peak mem");
  for (const auto& p : r.plans)
    out += fmt::format("{:>4} {:>6} {:<64} {:>11.0f} {:>8.1f} {:>5.1f}% {:>6.1f}% {:>8.3f}s {:>10}\n", p.rank,
                       p.num_gpus, plan_brief(p.plan), p.tokens_per_s, p.model_tflops_per_gpu, 100 * p.mfu,
                       100 * p.bubble_fraction, total_exposed(p.exposed_comm_s), format_bytes(p.peak_bytes));
  if (r.plans.empty() && r.candidates == 0)
    out +=
        "no plan fits: no candidate plan at all. A plan needs tensor_parallel to divide cluster.num_gpus, "
        "model.num_attention_heads and model.num_query_groups; pipeline_parallel to divide model.num_layers and "
        "the GPUs left; context_parallel and data_parallel the GPUs left: check the --fix values against these\n";
  else if (r.plans.empty())
    out += "no plan fits: see the reasons below\n";
  out += "pruned:";
  for (const auto& [k, v] : r.pruned) out += fmt::format("  {} {}", k, v);
  out += "\n";
  if (!r.losers.empty()) {
    out += "families not in the top plans:\n";
    for (const auto& l : r.losers) out += fmt::format("  {:<28} {}\n", l.family, l.reason);
  }
  return out;
}

}  // namespace ptsim::sim
