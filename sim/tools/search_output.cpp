// The verdicts on the families not in the top K, and the search result as JSON,
// CSV and a text summary (search.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "sim/io/goodput_output.h"
#include "sim/io/result_json.h"
#include "sim/tools/search_internal.h"

namespace ptsim::sim {
namespace {

double total_exposed(const std::array<double, kNumDims>& exposed_comm_s) {
  return std::accumulate(exposed_comm_s.begin(), exposed_comm_s.end(), 0.0);
}

// " ep N" (with " etp 1" under MoE parallel folding), or nothing without expert parallelism.
std::string expert_words(const models::Parallelism& q) {
  if (q.ep <= 1 && q.expert_tp() == q.tp) return {};
  return fmt::format(" ep {}{}", q.ep, q.expert_tp() != q.tp ? fmt::format(" etp {}", q.expert_tp()) : std::string());
}

std::string family_of(const PlanCandidate& c) {
  return fmt::format("gpus {} tp {} pp {} cp {}{}", c.num_gpus, c.par.tp, c.par.pp, c.par.cp, expert_words(c.par));
}

std::string plan_brief(const Plan& p) {
  const auto& q = p.par;
  return fmt::format("dp {} tp {} pp {} cp {}{} {}{} mbs {} zero {} rc {}{}", q.dp, q.tp, q.pp, q.cp, expert_words(q),
                     models::to_string(q.schedule), q.vpp > 1 ? fmt::format(" v{}", q.vpp) : std::string(),
                     q.micro_batch_size, q.zero_stage, models::to_string(q.recompute),
                     q.sequence_parallel ? " sp" : "");
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
      const auto& pre = run.pre[static_cast<std::size_t>(i)];
      f.best_bound = std::max(f.best_bound, pre.bound_tokens_per_s * pre.goodput_bound);  // goodput_bound 1 unless --sort goodput
    } else if (!waves.outcomes[q].feasible || waves.outcomes[q].peak_bytes > plan_search::memory_limit(run)) {
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
  if (f.bound > 0) {
    const int gpus = run.cands[static_cast<std::size_t>(f.first)].num_gpus;
    const bool scaled = run.opt.sort == SearchSort::cost && run.sizes.size() > 1;
    return fmt::format("dominated by bound: at most {:.0f} tokens/s{}, below the #{} plan's {:.0f}{}",
                       plan_search::rank_score(run, f.best_bound, gpus, 1.0),
                       scaled ? fmt::format(" scaled to {} GPUs (cost)", run.sizes.front())
                       : run.opt.sort == SearchSort::goodput ? std::string(" x goodput")
                                                             : std::string(),
                       run.opt.top_k, waves.kth, run.sizes.size() > 1 ? " and its size's best" : "");
  }
  if (f.oom + f.oom_sim > 0 && run.opt.min_headroom > 0)
    return fmt::format("OOM or under {:g} % headroom: smallest peak {} > {} per GPU", 100 * run.opt.min_headroom,
                       format_bytes(f.min_peak), format_bytes(plan_search::memory_limit(run)));
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
  auto plan_json = [](const RankedPlan& p) {
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
    j["equivalent_plans"] = p.equivalents;
    j["prediction_band"] = prediction_band_json(p.band);
    j["regime"] = p.regime;
    if (p.time_to_train) j["time_to_train"] = time_to_train_json(*p.time_to_train);
    if (p.goodput) j["goodput"] = goodput_json(*p.goodput);
    nlohmann::json ex;
    for (int d = 0; d < kNumDims; ++d)
      ex[to_string(static_cast<Dim>(d))] = p.exposed_comm_s[static_cast<std::size_t>(d)];
    j["exposed_comm_s"] = ex;
    return j;
  };
  nlohmann::json plans = nlohmann::json::array();
  for (const auto& p : r.plans) plans.push_back(plan_json(p));
  nlohmann::json sizes = nlohmann::json::array();
  for (const auto& p : r.best_per_size) {
    nlohmann::json j = plan_json(p);
    j.erase("rank");
    j["tokens_per_s_per_gpu"] = p.tokens_per_s / p.num_gpus;
    j["scaling_efficiency"] = p.scaling_efficiency;
    sizes.push_back(j);
  }
  nlohmann::json pruned = nlohmann::json::object();
  for (const auto& [k, v] : r.pruned) pruned[k] = v;
  nlohmann::json losers = nlohmann::json::array();
  for (const auto& l : r.losers) losers.push_back({{"family", l.family}, {"reason", l.reason}});
  return {{"plans", plans},
          {"sort", r.sort == SearchSort::cost      ? "cost"
                   : r.sort == SearchSort::goodput ? "goodput"
                                                   : "speed"},
          {"best_per_size", sizes},
          {"pruned", pruned},
          {"candidates", r.candidates},
          {"schedules", r.schedules},
          {"zero_stages", r.zero_stages},
          {"context_parallel", r.context_parallel},
          {"fit", r.fit},
          {"simulated", r.simulated},
          {"min_headroom", r.min_headroom},
          {"families_lost", losers}};
}

std::string search_to_csv(const SearchResult& r) {
  std::string out =
      "rank,num_gpus,dp,tp,pp,cp,ep,vpp,pipeline_schedule,micro_batch_size,num_microbatches,zero_stage,recompute,"
      "sequence_parallel,tokens_per_s,model_tflops_per_gpu,mfu,bubble_fraction,exposed_comm_s,peak_bytes,"
      "iteration_time_s,equivalent_plans,days,gpu_hours,cost,energy_kwh,goodput,goodput_tokens_per_s\n";
  const auto opt = [](std::optional<double> v) { return v ? fmt::format("{:.6g}", *v) : std::string(); };
  for (const auto& p : r.plans) {
    const auto& q = p.plan.par;
    const auto& t = p.time_to_train;
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.0f},{:.6g},{},{},{},{},{},{},{}\n",
        p.rank, p.num_gpus, q.dp, q.tp, q.pp, q.cp, q.ep, q.vpp, models::to_string(q.schedule), q.micro_batch_size,
        q.num_microbatches, q.zero_stage, models::to_string(q.recompute), q.sequence_parallel ? "true" : "false",
        p.tokens_per_s, p.model_tflops_per_gpu, p.mfu, p.bubble_fraction, total_exposed(p.exposed_comm_s), p.peak_bytes,
        p.iteration_time_s, p.equivalents, opt(t ? std::optional(t->days) : std::nullopt),
        opt(t ? std::optional(t->gpu_hours) : std::nullopt), opt(t ? t->cost : std::nullopt),
        opt(t ? std::optional(t->energy_kwh) : std::nullopt),
        opt(p.goodput ? std::optional(p.goodput->goodput) : std::nullopt),
        opt(p.goodput ? std::optional(p.goodput->tokens_per_s) : std::nullopt));
  }
  return out;
}

namespace {

constexpr std::size_t kColumns = 100;

// `text` wrapped at word boundaries to kColumns; continuation lines indented by `indent`.
std::string wrapped(const std::string& text, std::size_t indent) {
  std::string out, line;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t sp = text.find(' ', pos + 1);
    const std::string word = text.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos);
    if (!line.empty() && line.size() + word.size() > kColumns) {
      out += line + "\n";
      line = std::string(indent, ' ');
      const std::size_t first = word.find_first_not_of(' ');
      line += first == std::string::npos ? std::string() : word.substr(first);
    } else {
      line += word;
    }
    pos = sp == std::string::npos ? text.size() : sp;
  }
  return out + line + "\n";
}

std::string short_schedule(const models::Parallelism& q) {
  if (q.schedule == models::Schedule::interleaved_1f1b) return fmt::format("i1f1b v{}", q.vpp);
  return std::string(models::to_string(q.schedule));
}

std::string short_recompute(models::Recompute rc) {
  return rc == models::Recompute::selective ? "sel" : std::string(models::to_string(rc));
}

// The plan columns of a table row (and, with header, their titles).
std::string plan_cells(int gpus, const models::Parallelism& q, bool with_ep) {
  return fmt::format("{:>5} {:>4} {:>3} {:>3} {:>3}{} {:<8} {:>3} {:>4} {:<4} {:<2}", gpus, q.dp, q.tp, q.pp, q.cp,
                     with_ep ? fmt::format(" {:>5}", q.expert_tp() != q.tp ? fmt::format("{}/{}", q.ep, q.expert_tp())
                                                                           : fmt::to_string(q.ep))
                             : std::string(),
                     short_schedule(q), q.micro_batch_size, q.zero_stage, short_recompute(q.recompute),
                     q.sequence_parallel ? "on" : "-");
}

std::string plan_titles(bool with_ep) {
  return fmt::format("{:>5} {:>4} {:>3} {:>3} {:>3}{} {:<8} {:>3} {:>4} {:<4} {:<2}", "gpus", "dp", "tp", "pp", "cp",
                     with_ep ? fmt::format(" {:>5}", "ep") : std::string(), "schedule", "mbs", "zero", "rc", "sp");
}

bool any_ep(const std::vector<RankedPlan>& plans) {
  return std::any_of(plans.begin(), plans.end(), [](const RankedPlan& p) { return p.plan.par.ep > 1; });
}

std::string counts_text(const SearchResult& r) {
  std::int64_t invalid = 0, memory = 0;
  for (const auto& [k, v] : r.pruned) {
    if (k.rfind("invalid", 0) == 0) invalid += v;
    if (k.find("analytical") != std::string::npos) memory += v;
  }
  const auto at = [&](const char* k) { return r.pruned.count(k) ? r.pruned.at(k) : std::int64_t{0}; };
  std::string memory_what = r.min_headroom > 0
                                ? fmt::format("out of memory or under {:g} % headroom", 100 * r.min_headroom)
                                : std::string("out of memory");
  std::string out =
      wrapped(fmt::format("{} candidate plans in {:.1f} s: {} invalid, {} {}, {} fit; of those {} simulated, {} "
                          "beaten by the bound",
                          r.candidates, r.wall_time_s, invalid, memory, memory_what, r.fit, r.simulated, at("bound")),
              2);
  std::int64_t sim_lost = 0;  // simulated, then over the memory limit
  for (const auto& [k, v] : r.pruned)
    if (k.find("(simulated)") != std::string::npos) sim_lost += v;
  if (sim_lost > 0) out += fmt::format("  ({} simulated plans over the memory limit)\n", sim_lost);
  if (!r.schedules.empty())
    out += wrapped(
        fmt::format("pipeline schedules {}; ZeRO stages {}; context parallel {}{}", fmt::join(r.schedules, ", "),
                    fmt::join(r.zero_stages, ", "), fmt::join(r.context_parallel, ", "),
                    r.space_fixed ? ""
                                  : " (the framework's own and the scenario's; --fix "
                                    "parallel.pipeline_schedule=..., zero_stage, context_parallel adds others)"),
        2);
  return out;
}

std::string top_table(const SearchResult& r) {
  const bool ep = any_ep(r.plans);
  std::string out = fmt::format("{:>2} {} {:>9} {:>6} {:>6} {:>6} {:>9} {:>3}\n", "#", plan_titles(ep), "tokens/s",
                                "MFU", "bubble", "comm", "peak", "+eq");
  for (const auto& p : r.plans) {
    const double comm = p.iteration_time_s > 0 ? total_exposed(p.exposed_comm_s) / p.iteration_time_s : 0;
    out += fmt::format("{:>2} {} {:>9.0f} {:>5.1f}% {:>5.1f}% {:>5.1f}% {:>9} {:>3}\n", p.rank,
                       plan_cells(p.num_gpus, p.plan.par, ep), p.tokens_per_s, 100 * p.mfu, 100 * p.bubble_fraction,
                       100 * comm, format_bytes(p.peak_bytes),
                       p.equivalents > 0 ? fmt::format("+{}", p.equivalents) : std::string("-"));
  }
  // The validation band of each regime among the listed plans (README "Prediction bands").
  std::vector<std::string> regimes;
  for (const auto& p : r.plans)
    if (std::find(regimes.begin(), regimes.end(), p.regime) == regimes.end()) regimes.push_back(p.regime);
  for (const auto& g : regimes) {
    std::vector<int> ranks;
    std::optional<PredictionBand> band;
    for (const auto& p : r.plans)
      if (p.regime == g) {
        ranks.push_back(p.rank);
        band = p.band;
      }
    out += wrapped(fmt::format("band of #{}: {}", fmt::join(ranks, ", #"), band_text(band, g)), 2);
  }
  out += wrapped(
      "comm: exposed communication, % of the iteration. peak: peak memory per GPU. +eq: +N equivalent plans not listed "
      "(same GPUs, dp, tp, pp, cp and ep, same tokens/s and peak memory; they differ in a knob that changes "
      "neither). i1f1b v6: interleaved 1F1B with 6 virtual stages. rc: recompute.",
      0);
  return out;
}

// Days, GPU-hours, cost and energy of each top plan (when the scenario gives a training goal).
std::string time_to_train_table(const SearchResult& r) {
  if (r.plans.empty() || !r.plans.front().time_to_train) return "";
  const auto& t0 = *r.plans.front().time_to_train;
  std::string out =
      wrapped(fmt::format("time to train {:.4g} tokens ({:.0f} iterations){}:", t0.tokens, t0.iterations,
                          t0.price_per_gpu_hour ? fmt::format(", at {:g} per GPU-hour", *t0.price_per_gpu_hour)
                                                : std::string()),
              2);
  out += fmt::format("{:>2} {:>5} {:>9} {:>8} {:>10} {:>12} {:>10}\n", "#", "gpus", "tokens/s", "days", "GPU-hours",
                     "cost", "energy kWh");
  for (const auto& p : r.plans) {
    const auto& t = *p.time_to_train;
    out += fmt::format("{:>2} {:>5} {:>9.0f} {:>8.2f} {:>10.0f} {:>12} {:>10.0f}\n", p.rank, p.num_gpus, p.tokens_per_s,
                       t.days, t.gpu_hours, t.cost ? fmt::format("{:.0f}", *t.cost) : std::string("-"), t.energy_kwh);
  }
  if (r.sort == SearchSort::cost) out += "ranked by cost to train (the same as tokens/s per GPU)\n";
  return out;
}

// Goodput of each top plan (when the scenario has a reliability section, README "Goodput").
std::string goodput_table(const SearchResult& r) {
  if (r.plans.empty() || !r.plans.front().goodput) return "";
  std::string out = "goodput under failures and checkpoints:\n";
  out += fmt::format("{:>2} {:>5} {:>9} {:>8} {:>11} {:>9} {:>9} {:>8}\n", "#", "gpus", "tokens/s", "goodput",
                     "gp tokens/s", "fail/day", "interval", "gp days");
  for (const auto& p : r.plans) {
    if (!p.goodput) continue;
    const auto& g = *p.goodput;
    out += fmt::format("{:>2} {:>5} {:>9.0f} {:>7.1f}% {:>11.0f} {:>9.2f} {:>8}s {:>8}\n", p.rank, p.num_gpus,
                       p.tokens_per_s, 100 * g.goodput, g.tokens_per_s, g.failures_per_day,
                       fmt::format("{:.0f}", g.interval_s), g.wall_days ? fmt::format("{:.2f}", *g.wall_days) : "-");
  }
  if (r.sort == SearchSort::goodput) out += "ranked by tokens/s x goodput (more GPUs fail more often)\n";
  return out;
}

std::string size_table(const SearchResult& r) {
  const bool ep = any_ep(r.best_per_size);
  std::string out =
      wrapped(fmt::format("best plan per cluster size (efficiency: tokens/s per GPU relative to {} GPUs):",
                          r.best_per_size.front().num_gpus),
              2);
  out += fmt::format("{} {:>9} {:>7} {:>5} {:>9}\n", plan_titles(ep), "tokens/s", "per GPU", "eff.", "peak");
  for (const auto& p : r.best_per_size)
    out += fmt::format("{} {:>9.0f} {:>7.1f} {:>4.0f}% {:>9}\n", plan_cells(p.num_gpus, p.plan.par, ep), p.tokens_per_s,
                       p.tokens_per_s / p.num_gpus, 100 * p.scaling_efficiency, format_bytes(p.peak_bytes));
  return out;
}

std::string explain_text(const SearchResult& r) {
  std::string out = "pruned, by reason:\n";
  for (const auto& [k, v] : r.pruned) out += wrapped(fmt::format("  {:>8}  {}", v, k), 12);
  if (!r.losers.empty()) {
    out += "families not in the top plans:\n";
    for (const auto& l : r.losers) out += wrapped(fmt::format("  {:<28} {}", l.family, l.reason), 31);
  }
  return out;
}

}  // namespace

std::string search_summary_text(const SearchResult& r, bool explain) {
  std::string out = counts_text(r);
  if (!r.plans.empty()) out += top_table(r) + time_to_train_table(r) + goodput_table(r);
  if (r.plans.empty() && r.candidates == 0)
    out += wrapped(
        "no plan fits: no candidate plan at all. A plan needs tensor_parallel to divide cluster.num_gpus, "
        "model.num_attention_heads and model.num_query_groups; pipeline_parallel to divide model.num_layers and "
        "the GPUs left; context_parallel and data_parallel the GPUs left: check the --fix values against these",
        2);
  else if (r.plans.empty())
    out += explain ? "no plan fits: see the reasons below\n" : "no plan fits: --explain says why\n";
  if (r.best_per_size.size() > 1) out += size_table(r);
  if (explain)
    out += explain_text(r);
  else if (!r.losers.empty())
    out += fmt::format("{} families (same GPUs, tp, pp, cp, ep) not in the top plans: --explain says why\n",
                       r.losers.size());
  return out;
}

std::string format_eta(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  const double r = std::round(s);
  if (r < 60) return fmt::format("{:.0f}s", r);
  return fmt::format("{:.0f}m{:02.0f}s", std::floor(r / 60), std::fmod(r, 60));
}

}  // namespace ptsim::sim
