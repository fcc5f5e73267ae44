// The search space: every candidate plan of a scenario under the --fix restrictions
// (search.h: enumerate_candidates, candidate_scenario).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "sim/io/scenario_file.h"
#include "sim/tools/search_internal.h"

namespace ptsim::sim {
namespace {

// ---------------------------------------------------------------------------
// --fix restrictions

const std::vector<std::string> kFixKeys = {"parallel.tensor_parallel",
                                           "parallel.pipeline_parallel",
                                           "parallel.data_parallel",
                                           "parallel.context_parallel",
                                           "parallel.expert_parallel",
                                           "parallel.virtual_pipeline_stages",
                                           "parallel.pipeline_schedule",
                                           "parallel.sequence_parallel",
                                           "parallel.zero_stage",
                                           "parallel.recompute",
                                           "training.micro_batch_size",
                                           "cluster.num_gpus",
                                           "parallel.expert_tensor_parallel"};

int parse_positive(const std::string& key, const std::string& v) {
  std::size_t used = 0;
  int x = 0;
  try {
    x = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || x < (key == "parallel.zero_stage" ? 0 : 1))
    throw std::invalid_argument(fmt::format("--fix {}={}: '{}' is not a valid count", key, v, v));
  if (key == "parallel.zero_stage" && x > 3)
    throw std::invalid_argument(fmt::format("--fix {}={}: a ZeRO stage is 0, 1, 2 or 3", key, v));
  if (x > kMaxGpus)  // GPU counts and parallel sizes; larger ones overflow the products of sizes
    throw std::invalid_argument(fmt::format("--fix {}={}: out of range (at most {})", key, v, kMaxGpus));
  return x;
}

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "true" || v == "on" || v == "1") return true;
  if (v == "false" || v == "off" || v == "0") return false;
  throw std::invalid_argument(fmt::format("--fix {}={}: '{}' is not true or false", key, v, v));
}

models::Schedule parse_schedule(const std::string& v) {
  if (const auto s = models::from_string(models::kScheduleNames, v)) return *s;
  std::string names;
  for (const auto& n : models::kScheduleNames) names += (names.empty() ? "" : ", ") + std::string(n.name);
  throw std::invalid_argument(fmt::format("--fix parallel.pipeline_schedule={}: not a schedule ({})", v, names));
}

models::Recompute parse_recompute(const std::string& v) {
  for (auto r : {models::Recompute::none, models::Recompute::selective, models::Recompute::full})
    if (v == models::to_string(r)) return r;
  throw std::invalid_argument(
      fmt::format("--fix parallel.recompute={}: not a recompute mode (none, selective, full)", v));
}

struct Restrictions {
  std::map<std::string, std::vector<std::string>> values;
  bool has(const std::string& k) const { return values.count(k) != 0; }
  std::vector<int> ints(const std::string& k) const {
    std::vector<int> out;
    for (const auto& v : values.at(k)) out.push_back(parse_positive(k, v));
    return out;
  }
};

// The values of one "KEY=VALUE[,VALUE…]" (`f`), after the '=' at `eq`.
std::vector<std::string> split_values(const std::string& f, std::size_t eq) {
  std::vector<std::string> vals;
  std::string rest = f.substr(eq + 1);
  std::size_t pos = 0;
  while (pos <= rest.size()) {
    const auto comma = rest.find(',', pos);
    const std::string v = rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (v.empty()) throw std::invalid_argument(fmt::format("--fix '{}': empty value", f));
    vals.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return vals;
}

Restrictions parse_fix(const std::vector<std::string>& fix) {
  Restrictions r;
  for (const auto& f : fix) {
    const auto eq = f.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == f.size())
      throw std::invalid_argument(fmt::format("--fix '{}': expected KEY=VALUE[,VALUE…]", f));
    const std::string key = f.substr(0, eq);
    if (std::find(kFixKeys.begin(), kFixKeys.end(), key) == kFixKeys.end())
      throw std::invalid_argument(fmt::format("--fix '{}': '{}' is not a searched key (did you mean {}?)", f, key,
                                              closest_match(key, kFixKeys)));
    const std::vector<std::string> vals = split_values(f, eq);
    auto& slot = r.values[key];
    slot.insert(slot.end(), vals.begin(), vals.end());
  }
  // Parse every value once now so that a typo fails before the search starts.
  for (const auto& [k, vs] : r.values)
    for (const auto& v : vs) {
      if (k == "parallel.pipeline_schedule")
        parse_schedule(v);
      else if (k == "parallel.recompute")
        parse_recompute(v);
      else if (k == "parallel.sequence_parallel")
        parse_bool(k, v);
      else
        parse_positive(k, v);
    }
  return r;
}

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// ---------------------------------------------------------------------------
// The values each plan dimension takes, given the dimensions chosen before it: the
// natural ones, or the --fix values in their place.

using ScheduleChoice = std::pair<models::Schedule, int>;  // a schedule with its virtual stage count

class SearchSpace {
 public:
  SearchSpace(const Scenario& base, const SearchOptions& opt);

  std::vector<int> cluster_sizes() const;
  std::vector<int> tensor(const PlanCandidate& c) const;
  std::vector<int> pipeline(const PlanCandidate& c) const;
  std::vector<int> context(const PlanCandidate& c) const;  // those whose data parallelism is allowed
  std::vector<int> expert(const PlanCandidate& c) const;
  std::vector<ScheduleChoice> schedules(const PlanCandidate& c) const;
  std::vector<int> micro_batch_sizes(const PlanCandidate& c) const;
  std::vector<int> zero_stages() const;
  const std::vector<models::Recompute>& recomputes() const { return recomputes_; }
  std::vector<bool> sequence_parallel(const PlanCandidate& c) const;
  std::vector<int> expert_tensor(const PlanCandidate& c) const;

  static int data_parallel(const PlanCandidate& c, int cp) {
    return std::max(1, c.num_gpus / (c.par.tp * c.par.pp * cp));
  }

 private:
  std::vector<int> allowed(const std::string& key, const std::vector<int>& natural) const {
    return fix_.has(key) ? fix_.ints(key) : natural;
  }
  bool keep_dp(int dp) const;
  std::vector<ScheduleChoice> natural_schedules(int pp) const;
  std::vector<ScheduleChoice> fixed_vpp_schedules(int pp) const;
  std::vector<ScheduleChoice> filter_schedules(const std::vector<ScheduleChoice>& scheds) const;
  std::vector<ScheduleChoice> framework_schedules(const std::vector<ScheduleChoice>& scheds) const;

  const Scenario& base_;
  const models::ModelSpec& m_;
  const SearchOptions& opt_;
  Restrictions fix_;
  std::vector<models::Schedule> sched_filter_;
  std::vector<int> vpp_fix_;
  std::vector<models::Recompute> recomputes_ = {models::Recompute::none, models::Recompute::selective,
                                                models::Recompute::full};
  std::vector<bool> sp_fix_;
};

SearchSpace::SearchSpace(const Scenario& base, const SearchOptions& opt)
    : base_(base), m_(base.model), opt_(opt), fix_(parse_fix(opt.fix)) {
  if (fix_.has("parallel.pipeline_schedule"))
    for (const auto& v : fix_.values.at("parallel.pipeline_schedule")) sched_filter_.push_back(parse_schedule(v));
  if (fix_.has("parallel.virtual_pipeline_stages")) vpp_fix_ = fix_.ints("parallel.virtual_pipeline_stages");
  if (fix_.has("parallel.recompute")) {
    recomputes_.clear();
    for (const auto& v : fix_.values.at("parallel.recompute")) recomputes_.push_back(parse_recompute(v));
  }
  if (fix_.has("parallel.sequence_parallel"))
    for (const auto& v : fix_.values.at("parallel.sequence_parallel"))
      sp_fix_.push_back(parse_bool("parallel.sequence_parallel", v));
}

std::vector<int> SearchSpace::cluster_sizes() const {
  std::vector<int> gpus = opt_.gpus;
  if (fix_.has("cluster.num_gpus")) {
    const auto f = fix_.ints("cluster.num_gpus");
    gpus.insert(gpus.end(), f.begin(), f.end());
  }
  if (gpus.empty()) gpus.push_back(base_.cluster.num_gpus);
  for (int g : gpus)
    if (g <= 0 || g > kMaxGpus)
      throw std::invalid_argument(fmt::format("--gpus {}: must be between 1 and {}", g, kMaxGpus));
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  return gpus;
}

std::vector<int> SearchSpace::tensor(const PlanCandidate& c) const {
  const int head_gcd = std::gcd(m_.num_attention_heads, std::max(1, m_.num_query_groups));
  std::vector<int> tps;
  for (int d : divisors(c.num_gpus))
    if (head_gcd % d == 0) tps.push_back(d);
  return allowed("parallel.tensor_parallel", tps);
}

std::vector<int> SearchSpace::pipeline(const PlanCandidate& c) const {
  std::vector<int> pps;
  if (c.num_gpus % c.par.tp == 0)
    for (int d : divisors(c.num_gpus / c.par.tp))
      if (m_.num_layers % d == 0) pps.push_back(d);
  return allowed("parallel.pipeline_parallel", pps);
}

std::vector<int> SearchSpace::context(const PlanCandidate& c) const {
  const int tp_pp = c.par.tp * c.par.pp;
  std::vector<int> cps;
  if (c.num_gpus % tp_pp == 0)
    for (int d : divisors(c.num_gpus / tp_pp))
      if (d <= opt_.max_context_parallel && (d == 1 || m_.seq_length % (2 * d) == 0) &&
          (d == 1 || base_.framework.offers_context_parallel() || base_.plan.par.cp > 1))
        cps.push_back(d);  // ring context parallelism where the framework runs it (or the scenario has it)
  std::vector<int> kept;
  for (int cp : allowed("parallel.context_parallel", cps))
    if (keep_dp(data_parallel(c, cp))) kept.push_back(cp);
  return kept;
}

// The framework's own ZeRO stages (FrameworkProfile::zero_stages) and the scenario's.
std::vector<int> SearchSpace::zero_stages() const {
  std::vector<int> stages;
  for (int z = 0; z < 4; ++z)
    if (base_.framework.offers_zero(z) || z == base_.plan.par.zero_stage) stages.push_back(z);
  return allowed("parallel.zero_stage", stages);
}

bool SearchSpace::keep_dp(int dp) const {
  if (!fix_.has("parallel.data_parallel")) return true;
  const auto v = fix_.ints("parallel.data_parallel");
  return std::find(v.begin(), v.end(), dp) != v.end();
}

std::vector<int> SearchSpace::expert(const PlanCandidate& c) const {
  std::vector<int> eps = {1};
  if (m_.moe) {
    eps.clear();
    // Within dp × cp; under MoE parallel folding (expert_tensor_parallel 1, chosen later)
    // within tp × dp × cp.
    const int ranks = (c.par.tp > 1 ? c.par.tp : 1) * c.par.dp * c.par.cp;
    for (int d : divisors(m_.moe->num_experts))
      if (ranks % d == 0) eps.push_back(d);
  }
  return allowed("parallel.expert_parallel", eps);
}

std::vector<ScheduleChoice> SearchSpace::schedules(const PlanCandidate& c) const {
  const std::vector<ScheduleChoice> scheds =
      vpp_fix_.empty() ? natural_schedules(c.par.pp) : fixed_vpp_schedules(c.par.pp);
  return sched_filter_.empty() ? framework_schedules(scheds) : filter_schedules(scheds);
}

// The schedules the framework's own engine runs (FrameworkProfile::pipeline_schedules) and the
// one the scenario names; all of them when that leaves none (a fixed virtual stage count the
// engine cannot run), so that validation says why.
std::vector<ScheduleChoice> SearchSpace::framework_schedules(const std::vector<ScheduleChoice>& scheds) const {
  std::vector<ScheduleChoice> kept;
  for (const auto& sv : scheds)
    if (base_.framework.offers(sv.first) || sv.first == base_.plan.par.schedule) kept.push_back(sv);
  return kept.empty() ? scheds : kept;
}

std::vector<ScheduleChoice> SearchSpace::natural_schedules(int pp) const {
  if (pp == 1) return {{models::Schedule::one_f_one_b, 1}};  // GPipe = 1F1B with one stage
  std::vector<ScheduleChoice> scheds = {{models::Schedule::gpipe, 1}, {models::Schedule::one_f_one_b, 1}};
  for (int v = 2; v <= opt_.max_virtual_stages; ++v)
    if (m_.num_layers % (pp * v) == 0) scheds.emplace_back(models::Schedule::interleaved_1f1b, v);
  // The zero-bubble and DualPipe schedules (schedule.h); validation and the
  // memory check (schedule_memory.h) sort out the micro-batch counts and the
  // memory they need.
  scheds.emplace_back(models::Schedule::zb_h1, 1);
  scheds.emplace_back(models::Schedule::zb_h2, 1);
  if (m_.num_layers % (2 * pp) == 0) scheds.emplace_back(models::Schedule::zb_v, 2);
  if (pp % 2 == 0) scheds.emplace_back(models::Schedule::dualpipe, 2);
  return scheds;
}

std::vector<ScheduleChoice> SearchSpace::fixed_vpp_schedules(int pp) const {
  std::vector<ScheduleChoice> scheds;
  for (int v : vpp_fix_) {
    if (v == 1) {
      scheds.emplace_back(models::Schedule::one_f_one_b, 1);
      if (pp > 1) scheds.emplace_back(models::Schedule::gpipe, 1);
      if (pp > 1) scheds.emplace_back(models::Schedule::zb_h1, 1), scheds.emplace_back(models::Schedule::zb_h2, 1);
    } else {
      scheds.emplace_back(models::Schedule::interleaved_1f1b, v);
      if (v == 2 && pp > 1) scheds.emplace_back(models::Schedule::zb_v, 2), scheds.emplace_back(models::Schedule::dualpipe, 2);
    }
  }
  return scheds;
}

std::vector<ScheduleChoice> SearchSpace::filter_schedules(const std::vector<ScheduleChoice>& scheds) const {
  std::vector<ScheduleChoice> kept;
  for (const auto& sv : scheds)
    if (std::find(sched_filter_.begin(), sched_filter_.end(), sv.first) != sched_filter_.end()) kept.push_back(sv);
  // A fixed interleaved schedule with pp = 1 or no divisible v is still a
  // candidate, so that validation says why it cannot run.
  if (kept.empty())
    for (auto s : sched_filter_)
      kept.emplace_back(s, s == models::Schedule::interleaved_1f1b || models::two_chunk_schedule(s) ? 2 : 1);
  return kept;
}

// Micro-batch sizes dividing gbs / dp; when dp does not divide the global batch,
// one candidate carries the family to validation (which names it).
std::vector<int> SearchSpace::micro_batch_sizes(const PlanCandidate& c) const {
  const int dp = c.par.dp;
  std::vector<int> mbss;
  if (base_.plan.global_batch_size % dp == 0) {
    const std::int64_t per_rank = base_.plan.global_batch_size / dp;
    for (int b = 1; b <= opt_.max_micro_batch_size; ++b)
      if (per_rank % b == 0) mbss.push_back(b);
  }
  if (mbss.empty()) mbss.push_back(1);
  return allowed("training.micro_batch_size", mbss);
}

std::vector<bool> SearchSpace::sequence_parallel(const PlanCandidate& c) const {
  if (!sp_fix_.empty()) return sp_fix_;
  return c.par.tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
}

// The experts' tensor-parallel size, as Parallelism::etp (0 = tp): tp, and 1 (MoE parallel
// folding) for a MoE model under tp > 1 with sequence parallelism; --fix may ask for any
// divisor of tp. Sizes under which EP does not fit are left out.
std::vector<int> SearchSpace::expert_tensor(const PlanCandidate& c) const {
  if (!m_.moe) return {0};
  const int tp = c.par.tp;
  std::vector<int> sizes = fix_.has("parallel.expert_tensor_parallel") ? fix_.ints("parallel.expert_tensor_parallel")
                                                                       : std::vector<int>{tp, 1};
  std::vector<int> out;
  for (int etp : sizes) {
    if (etp > tp || tp % etp != 0 || (etp < tp && !c.par.sequence_parallel)) continue;
    if ((tp / etp * c.par.dp * c.par.cp) % c.par.ep != 0) continue;
    const int v = etp == tp ? 0 : etp;
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

// The next level of the search tree: each candidate of `level` once per value that
// `values` gives for it, applied by `set`. Expanding level by level keeps the order
// of nested loops: the first dimension varies slowest.
template <class Values, class Set>
std::vector<PlanCandidate> branch(const std::vector<PlanCandidate>& level, Values values, Set set) {
  std::vector<PlanCandidate> next;
  for (const auto& c : level)
    for (const auto& v : values(c)) {
      next.push_back(c);
      set(next.back(), v);
    }
  return next;
}

}  // namespace

bool plan_search::fixes_framework_space(const SearchOptions& opt) {
  const Restrictions fix = parse_fix(opt.fix);
  return fix.has("parallel.pipeline_schedule") && fix.has("parallel.zero_stage") &&
         fix.has("parallel.context_parallel");
}

std::vector<PlanCandidate> enumerate_candidates(const Scenario& base, const SearchOptions& opt) {
  const SearchSpace space(base, opt);
  std::vector<PlanCandidate> level;
  for (const int g : space.cluster_sizes()) {
    level.push_back({g, base.plan.par});
    level.back().par.pipeline_layers.clear();  // even split: a given split only fits the scenario's own pp
  }
  using C = PlanCandidate;
  level = branch(
      level, [&](const C& c) { return space.tensor(c); }, [](C& c, int tp) { c.par.tp = tp; });
  level = branch(
      level, [&](const C& c) { return space.pipeline(c); }, [](C& c, int pp) { c.par.pp = pp; });
  level = branch(
      level, [&](const C& c) { return space.context(c); },
      [](C& c, int cp) {
        c.par.dp = SearchSpace::data_parallel(c, cp);
        c.par.cp = cp;
      });
  level = branch(
      level, [&](const C& c) { return space.expert(c); }, [](C& c, int ep) { c.par.ep = ep; });
  level = branch(
      level, [&](const C& c) { return space.schedules(c); },
      [](C& c, const ScheduleChoice& s) {
        c.par.schedule = s.first;
        c.par.vpp = s.second;
      });
  level = branch(
      level, [&](const C& c) { return space.micro_batch_sizes(c); },
      [](C& c, int mbs) { c.par.micro_batch_size = mbs; });
  level = branch(
      level, [&](const C&) { return space.zero_stages(); }, [](C& c, int z) { c.par.zero_stage = z; });
  level = branch(
      level, [&](const C&) { return space.recomputes(); }, [](C& c, models::Recompute rc) { c.par.recompute = rc; });
  level = branch(
      level, [&](const C& c) { return space.sequence_parallel(c); },
      [](C& c, bool sp) { c.par.sequence_parallel = sp; });
  return branch(
      level, [&](const C& c) { return space.expert_tensor(c); }, [](C& c, int etp) { c.par.etp = etp; });
}

Scenario candidate_scenario(const Scenario& base, const PlanCandidate& c) {
  Scenario s = base;
  s.file = "<plan>";
  s.cluster.num_gpus = c.num_gpus;
  s.plan.par = c.par;
  s.plan.par.num_microbatches = 1;
  derive_microbatches(s);
  return s;
}

}  // namespace ptsim::sim
