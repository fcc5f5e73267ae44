#include "sim/tools/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>

#include "models/memory.h"
#include "sim/core/errors.h"
#include "hw/net/layout.h"
#include "sim/core/program_builder.h"
#include "sim/core/simulate.h"
#include "sim/io/result_json.h"

namespace ptsim::sim {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---------------------------------------------------------------------------
// --fix restrictions

const std::vector<std::string> kFixKeys = {
    "parallel.tensor_parallel",   "parallel.pipeline_parallel",       "parallel.data_parallel",
    "parallel.context_parallel",  "parallel.expert_parallel",         "parallel.virtual_pipeline_stages",
    "parallel.pipeline_schedule", "parallel.sequence_parallel",       "parallel.zero_stage",
    "parallel.recompute",         "training.micro_batch_size",        "cluster.num_gpus"};

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
  return x;
}

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "true" || v == "on" || v == "1") return true;
  if (v == "false" || v == "off" || v == "0") return false;
  throw std::invalid_argument(fmt::format("--fix {}={}: '{}' is not true or false", key, v, v));
}

models::Schedule parse_schedule(const std::string& v) {
  for (auto s : {models::Schedule::gpipe, models::Schedule::one_f_one_b, models::Schedule::interleaved_1f1b})
    if (v == models::to_string(s)) return s;
  throw std::invalid_argument(
      fmt::format("--fix parallel.pipeline_schedule={}: not a schedule (gpipe, 1f1b, interleaved-1f1b)", v));
}

models::Recompute parse_recompute(const std::string& v) {
  for (auto r : {models::Recompute::none, models::Recompute::selective, models::Recompute::full})
    if (v == models::to_string(r)) return r;
  throw std::invalid_argument(fmt::format("--fix parallel.recompute={}: not a recompute mode (none, selective, full)", v));
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
    auto& slot = r.values[key];
    slot.insert(slot.end(), vals.begin(), vals.end());
  }
  // Parse every value once now so that a typo fails before the search starts.
  for (const auto& [k, vs] : r.values)
    for (const auto& v : vs) {
      if (k == "parallel.pipeline_schedule") parse_schedule(v);
      else if (k == "parallel.recompute") parse_recompute(v);
      else if (k == "parallel.sequence_parallel") parse_bool(k, v);
      else parse_positive(k, v);
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
// A small thread pool for one batch: `threads` workers pull indices from an atomic
// counter; the calling thread reports progress every 100 ms. No shared mutable
// state other than the counters: every task writes only its own output slot.
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

// ---------------------------------------------------------------------------
// Per-candidate pre-pass

enum class Verdict : std::uint8_t { survivor, invalid, oom };

struct PrePass {
  Verdict verdict = Verdict::survivor;
  std::string reason;        // invalid: the key
  double analytic_peak = 0;  // bytes (max over stages)
  double bound_tokens_per_s = 0;
};

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

}  // namespace

// ---------------------------------------------------------------------------

std::vector<PlanCandidate> enumerate_candidates(const Scenario& base, const SearchOptions& opt) {
  const Restrictions fix = parse_fix(opt.fix);
  const auto& m = base.model;
  std::vector<int> gpus_list = opt.gpus;
  if (fix.has("cluster.num_gpus")) {
    const auto f = fix.ints("cluster.num_gpus");
    gpus_list.insert(gpus_list.end(), f.begin(), f.end());
  }
  if (gpus_list.empty()) gpus_list.push_back(base.cluster.num_gpus);
  for (int g : gpus_list)
    if (g <= 0) throw std::invalid_argument(fmt::format("--gpus {}: must be positive", g));
  std::sort(gpus_list.begin(), gpus_list.end());
  gpus_list.erase(std::unique(gpus_list.begin(), gpus_list.end()), gpus_list.end());

  const int head_gcd = std::gcd(m.num_attention_heads, std::max(1, m.num_query_groups));
  std::vector<PlanCandidate> out;
  models::Parallelism proto = base.plan.par;
  proto.pipeline_layers.clear();  // even split: a given split only fits the scenario's own pp

  auto allowed = [&](const std::string& key, const std::vector<int>& natural) {
    return fix.has(key) ? fix.ints(key) : natural;
  };
  auto keep_dp = [&](int dp) {
    if (!fix.has("parallel.data_parallel")) return true;
    const auto v = fix.ints("parallel.data_parallel");
    return std::find(v.begin(), v.end(), dp) != v.end();
  };
  std::vector<std::pair<models::Schedule, int>> fixed_sched;
  std::vector<models::Schedule> sched_filter;
  if (fix.has("parallel.pipeline_schedule"))
    for (const auto& v : fix.values.at("parallel.pipeline_schedule")) sched_filter.push_back(parse_schedule(v));
  std::vector<int> vpp_fix;
  if (fix.has("parallel.virtual_pipeline_stages")) vpp_fix = fix.ints("parallel.virtual_pipeline_stages");
  std::vector<models::Recompute> recomputes = {models::Recompute::none, models::Recompute::selective,
                                               models::Recompute::full};
  if (fix.has("parallel.recompute")) {
    recomputes.clear();
    for (const auto& v : fix.values.at("parallel.recompute")) recomputes.push_back(parse_recompute(v));
  }
  std::vector<bool> sp_fix;
  if (fix.has("parallel.sequence_parallel"))
    for (const auto& v : fix.values.at("parallel.sequence_parallel")) sp_fix.push_back(parse_bool("parallel.sequence_parallel", v));
  const std::vector<int> zeros = allowed("parallel.zero_stage", {0, 1, 2, 3});

  for (const int G : gpus_list) {
    std::vector<int> tps;
    for (int d : divisors(G))
      if (head_gcd % d == 0) tps.push_back(d);
    for (const int tp : allowed("parallel.tensor_parallel", tps)) {
      std::vector<int> pps;
      if (G % tp == 0)
        for (int d : divisors(G / tp))
          if (m.num_layers % d == 0) pps.push_back(d);
      for (const int pp : allowed("parallel.pipeline_parallel", pps)) {
        std::vector<int> cps;
        if (G % (tp * pp) == 0)
          for (int d : divisors(G / (tp * pp)))
            if (d <= opt.max_context_parallel && (d == 1 || m.seq_length % (2 * d) == 0)) cps.push_back(d);
        for (const int cp : allowed("parallel.context_parallel", cps)) {
          const int dp = std::max(1, G / (tp * pp * cp));
          if (!keep_dp(dp)) continue;
          std::vector<int> eps = {1};
          if (m.moe) {
            eps.clear();
            for (int d : divisors(m.moe->num_experts))
              if ((dp * cp) % d == 0) eps.push_back(d);
          }
          // Schedules with their virtual stage counts.
          std::vector<std::pair<models::Schedule, int>> scheds;
          if (pp == 1) {
            scheds.emplace_back(models::Schedule::one_f_one_b, 1);  // GPipe = 1F1B with one stage
          } else {
            scheds.emplace_back(models::Schedule::gpipe, 1);
            scheds.emplace_back(models::Schedule::one_f_one_b, 1);
            for (int v = 2; v <= opt.max_virtual_stages; ++v)
              if (m.num_layers % (pp * v) == 0) scheds.emplace_back(models::Schedule::interleaved_1f1b, v);
          }
          if (!vpp_fix.empty()) {
            scheds.clear();
            for (int v : vpp_fix) {
              if (v == 1) {
                scheds.emplace_back(models::Schedule::one_f_one_b, 1);
                if (pp > 1) scheds.emplace_back(models::Schedule::gpipe, 1);
              } else {
                scheds.emplace_back(models::Schedule::interleaved_1f1b, v);
              }
            }
          }
          if (!sched_filter.empty()) {
            std::vector<std::pair<models::Schedule, int>> kept;
            for (const auto& sv : scheds)
              if (std::find(sched_filter.begin(), sched_filter.end(), sv.first) != sched_filter.end()) kept.push_back(sv);
            // A fixed interleaved schedule with pp = 1 or no divisible v is still a
            // candidate, so that validation says why it cannot run.
            if (kept.empty())
              for (auto s : sched_filter) kept.emplace_back(s, s == models::Schedule::interleaved_1f1b ? 2 : 1);
            scheds = kept;
          }
          // Micro-batch sizes dividing gbs / dp; when dp does not divide the global
          // batch, one candidate carries the family to validation (which names it).
          std::vector<int> mbss;
          if (base.plan.global_batch_size % dp == 0) {
            const std::int64_t per_rank = base.plan.global_batch_size / dp;
            for (int b = 1; b <= opt.max_micro_batch_size; ++b)
              if (per_rank % b == 0) mbss.push_back(b);
          }
          if (mbss.empty()) mbss.push_back(1);
          const std::vector<bool> sps = !sp_fix.empty() ? sp_fix : (tp > 1 ? std::vector<bool>{false, true}
                                                                             : std::vector<bool>{false});
          for (const int ep : allowed("parallel.expert_parallel", eps))
            for (const auto& [sched, vpp] : scheds)
              for (const int mbs : allowed("training.micro_batch_size", mbss))
                for (const int zero : zeros)
                  for (const auto rc : recomputes)
                    for (const bool sp : sps) {
                      PlanCandidate c;
                      c.num_gpus = G;
                      c.par = proto;
                      c.par.tp = tp, c.par.pp = pp, c.par.cp = cp, c.par.dp = dp, c.par.ep = ep;
                      c.par.schedule = sched, c.par.vpp = vpp;
                      c.par.micro_batch_size = mbs;
                      c.par.zero_stage = zero;
                      c.par.recompute = rc;
                      c.par.sequence_parallel = sp;
                      out.push_back(std::move(c));
                    }
        }
      }
    }
  }
  return out;
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

double iteration_time_lower_bound(const Scenario& s, const hw::ComputeCostModel& compute,
                                  const CollectiveCost& collectives) {
  const auto& par = s.plan.par;
  BuildOptions bo;
  bo.fuse_compute = true;
  const Program prog = build_program(s, compute, bo);
  const Layout layout(par.tp, par.cp, par.dp, par.pp, par.ep, s.cluster.gpus_per_node);
  const int p = par.pp;
  const Tick m = par.num_microbatches;

  // Ticks one instruction list keeps the compute stream of `rank` busy: compute
  // instructions and blocking collectives (their idle-network cost, as
  // AnalyticTransport charges it); and each async stream (channel) busy with the
  // collectives launched on it, which that stream runs one after another.
  // `every` = instructions run on every micro-batch; `once` = those flagged for the
  // first or last micro-batch only.
  struct Busy {
    Tick every = 0, once = 0;
    std::array<Tick, kNumChannels> ch_every{}, ch_once{};
  };
  auto coll_ticks = [&](const Instr& in, int rank) {
    const GroupShape g = layout.shape(in.dim, layout.group_id(rank, in.dim));
    return to_ticks(collectives.seconds(in.coll, in.dim, g, in.bytes));
  };
  auto busy_of = [&](const std::vector<Instr>& list, int rank) {
    Busy b;
    for (const auto& in : list) {
      const bool once = (in.flags & (kFirstMicrobatch | kLastMicrobatch)) != 0;
      if (in.kind == InstrKind::compute || (in.kind == InstrKind::collective && in.dim != Dim::pp)) {
        const Tick t = in.kind == InstrKind::compute ? in.duration : coll_ticks(in, rank);
        (once ? b.once : b.every) += t;
      } else if (in.kind == InstrKind::launch && in.dim != Dim::pp && in.channel < kNumChannels) {
        (once ? b.ch_once : b.ch_every)[in.channel] += coll_ticks(in, rank);
      }
    }
    return b;
  };

  // One pipeline replica: tp/cp/dp index 0 of every stage.
  std::vector<Tick> f0(static_cast<std::size_t>(p)), b0(static_cast<std::size_t>(p));
  std::vector<Tick> busy(static_cast<std::size_t>(p)), pro(static_cast<std::size_t>(p)), epi(static_cast<std::size_t>(p));
  std::vector<bool> starts_fwd0(static_cast<std::size_t>(p)), ends_bwd0(static_cast<std::size_t>(p));
  Tick channel_bound = 0;
  for (const auto& sp : prog.stages) {
    const auto st = static_cast<std::size_t>(sp.stage);
    const int rank = layout.rank_of(Coords{0, 0, 0, sp.stage});
    Tick total = 0;
    std::array<Tick, kNumChannels> ch{};
    auto add_channels = [&](const Busy& b, Tick times) {
      for (int k = 0; k < kNumChannels; ++k) ch[static_cast<std::size_t>(k)] += times * b.ch_every[static_cast<std::size_t>(k)] + b.ch_once[static_cast<std::size_t>(k)];
    };
    for (std::size_t c = 0; c < sp.chunks.size(); ++c) {
      const Busy f = busy_of(sp.chunks[c].forward, rank), b = busy_of(sp.chunks[c].backward, rank);
      // Each chunk runs forward and backward once per micro-batch (schedule.h).
      total += m * (f.every + b.every) + f.once + b.once;
      add_channels(f, m);
      add_channels(b, m);
      if (c == 0) {
        f0[st] = f.every;
        b0[st] = b.every;
      }
    }
    busy[st] = total;
    const Busy pb = busy_of(sp.prologue, rank), eb = busy_of(sp.epilogue, rank);
    pro[st] = pb.every + pb.once;
    epi[st] = eb.every + eb.once;
    add_channels(pb, 1);
    add_channels(eb, 1);
    for (Tick t : ch) channel_bound = std::max(channel_bound, t);
    starts_fwd0[st] = !sp.steps.empty() && sp.steps.front().phase == Phase::forward && sp.steps.front().chunk == 0;
    ends_bwd0[st] = !sp.steps.empty() && sp.steps.back().phase == Phase::backward && sp.steps.back().chunk == 0;
  }
  Tick best = 0, fwd_prefix = 0, bwd_prefix = 0;
  for (int st = 0; st < p; ++st) {
    const auto i = static_cast<std::size_t>(st);
    // Stage st's first step (chunk-0 forward of micro-batch 0) needs that
    // micro-batch's chunk-0 forward on every earlier stage; its last step (a
    // chunk-0 backward) must still be followed by the backward on every earlier
    // stage. Prologue / epilogue work overlaps those waits at best.
    const Tick head = starts_fwd0[i] ? std::max(pro[i], fwd_prefix) : pro[i];
    const Tick tail = ends_bwd0[i] ? std::max(epi[i], bwd_prefix) : epi[i];
    best = std::max(best, head + busy[i] + tail);
    fwd_prefix += f0[i];
    bwd_prefix += b0[i];
  }
  return to_seconds(std::max(best, channel_bound));
}

// ---------------------------------------------------------------------------

SearchResult search(const Scenario& base, const SearchOptions& opt) {
  const auto t0 = Clock::now();
  if (opt.top_k < 1) throw std::invalid_argument(fmt::format("--top {}: must be at least 1", opt.top_k));
  if (opt.wave_size < 1) throw std::invalid_argument(fmt::format("wave size {}: must be at least 1", opt.wave_size));
  if (opt.shard_count < 1 || opt.shard_rank < 0 || opt.shard_rank >= opt.shard_count)
    throw std::invalid_argument(fmt::format("shard {} of {}: out of range", opt.shard_rank, opt.shard_count));
  const int threads = hardware_threads(opt.threads);
  const std::vector<PlanCandidate> cands = enumerate_candidates(base, opt);
  const auto n = static_cast<std::int64_t>(cands.size());

  std::optional<hw::ComputeCostModel> own_compute;
  const hw::ComputeCostModel* compute = opt.compute ? opt.compute : &own_compute.emplace(make_compute_cost(base));
  const double capacity = base.cluster.gpu.hbm;

  // 1. Validity, memory and bound, for every candidate (no simulation). The
  // collective cost model depends on the rank layout (sim/core/network_cost.h: one per
  // layout, not thread-safe), and a family (GPUs, tp, pp, cp, ep) has one layout:
  // one task per family, which builds it once for all its candidates.
  std::vector<std::pair<std::int64_t, std::int64_t>> families;  // [begin, end) in enumeration order
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& c = cands[static_cast<std::size_t>(i)];
    if (!families.empty()) {
      const auto& f = cands[static_cast<std::size_t>(families.back().first)];
      if (f.num_gpus == c.num_gpus && f.par.tp == c.par.tp && f.par.pp == c.par.pp && f.par.cp == c.par.cp &&
          f.par.dp == c.par.dp && f.par.ep == c.par.ep) {
        families.back().second = i + 1;
        continue;
      }
    }
    families.emplace_back(i, i + 1);
  }
  std::vector<PrePass> pre(static_cast<std::size_t>(n));
  parallel_for(
      static_cast<std::int64_t>(families.size()), threads,
      [&](std::int64_t fi) {
        std::unique_ptr<CollectiveCost> own_coll;
        const CollectiveCost* coll = opt.collectives;
        for (std::int64_t i = families[static_cast<std::size_t>(fi)].first; i < families[static_cast<std::size_t>(fi)].second; ++i) {
          auto& out = pre[static_cast<std::size_t>(i)];
          Scenario s;
          try {
            s = candidate_scenario(base, cands[static_cast<std::size_t>(i)]);
            validate(s);
          } catch (const ScenarioError& e) {
            out.verdict = Verdict::invalid;
            out.reason = e.key();
            continue;
          }
          try {
            for (const auto& st : models::analytical_memory(s.model, s.plan.par))
              out.analytic_peak = std::max(out.analytic_peak, st.peak);
            if (out.analytic_peak > capacity * opt.oom_margin) {
              out.verdict = Verdict::oom;
              continue;
            }
            if (!coll) {
              own_coll = make_collective_cost(s);
              coll = own_coll.get();
            }
            const double t = iteration_time_lower_bound(s, *compute, *coll);
            const double tokens = static_cast<double>(s.plan.global_batch_size) * static_cast<double>(s.model.seq_length);
            out.bound_tokens_per_s = t > 0 ? tokens / t : std::numeric_limits<double>::infinity();
          } catch (const std::invalid_argument& e) {
            // The model library or the network refuses the plan: invalid.
            out.verdict = Verdict::invalid;
            out.reason = "model sharding";
          }
        }
      },
      {});

  SearchResult res;
  res.candidates = n;
  res.capacity_bytes = capacity;
  std::vector<std::int64_t> survivors;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& p = pre[static_cast<std::size_t>(i)];
    if (p.verdict == Verdict::invalid) ++res.pruned["invalid: " + p.reason];
    else if (p.verdict == Verdict::oom) ++res.pruned["oom (analytical)"];
    else survivors.push_back(i);
  }
  // Best bound first; ties by enumeration order (deterministic).
  std::stable_sort(survivors.begin(), survivors.end(), [&](std::int64_t a, std::int64_t b) {
    return pre[static_cast<std::size_t>(a)].bound_tokens_per_s > pre[static_cast<std::size_t>(b)].bound_tokens_per_s;
  });

  // 2. Branch and bound over waves.
  struct Ranked { std::int64_t cand; CandidateOutcome o; };
  std::vector<Ranked> feasible;  // every feasible simulated plan
  std::vector<CandidateOutcome> all_outcomes(survivors.size());
  std::vector<bool> simulated_flag(survivors.size(), false);
  auto better = [](const Ranked& a, const Ranked& b) {
    if (a.o.tokens_per_s != b.o.tokens_per_s) return a.o.tokens_per_s > b.o.tokens_per_s;
    return a.cand < b.cand;
  };
  const auto total = static_cast<std::int64_t>(survivors.size());
  auto report_progress = [&](std::int64_t done) {
    if (!opt.progress) return;
    SearchProgress pr;
    pr.done = done;
    pr.total = total;
    pr.simulated = res.simulated;
    pr.elapsed_s = seconds_since(t0);
    pr.best_tokens_per_s = feasible.empty() ? 0 : feasible.front().o.tokens_per_s;
    opt.progress(pr);
  };
  std::int64_t pos = 0, bound_pruned_from = total;
  double kth = -std::numeric_limits<double>::infinity();
  while (pos < total) {
    // Stop as soon as the best remaining bound cannot reach the K-th best.
    if (opt.prune_by_bound && pre[static_cast<std::size_t>(survivors[static_cast<std::size_t>(pos)])].bound_tokens_per_s < kth) {
      bound_pruned_from = pos;
      break;
    }
    std::int64_t end = std::min(total, pos + opt.wave_size);
    if (opt.prune_by_bound)
      while (end > pos && pre[static_cast<std::size_t>(survivors[static_cast<std::size_t>(end - 1)])].bound_tokens_per_s < kth) --end;
    std::vector<std::int64_t> mine;  // positions this process simulates
    for (std::int64_t q = pos; q < end; ++q)
      if (q % opt.shard_count == opt.shard_rank) mine.push_back(q);
    std::vector<CandidateOutcome> local(mine.size());
    const std::int64_t base_done = pos;
    parallel_for(
        static_cast<std::int64_t>(mine.size()), threads,
        [&](std::int64_t k) {
          const std::int64_t q = mine[static_cast<std::size_t>(k)];
          const Scenario s = candidate_scenario(base, cands[static_cast<std::size_t>(survivors[static_cast<std::size_t>(q)])]);
          SimulateOptions so;
          so.fold = !opt.full;
          so.compute = compute;
          so.collectives = opt.collectives;  // null: simulate() builds the plan's own network model
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
          local[static_cast<std::size_t>(k)] = o;
        },
        opt.progress ? std::function<void(std::int64_t)>([&](std::int64_t done) {
          SearchProgress pr;
          pr.done = base_done + done * opt.shard_count;
          pr.total = total;
          pr.simulated = res.simulated + done * opt.shard_count;
          pr.elapsed_s = seconds_since(t0);
          pr.best_tokens_per_s = feasible.empty() ? 0 : feasible.front().o.tokens_per_s;
          opt.progress(pr);
        })
                     : std::function<void(std::int64_t)>());
    const std::vector<CandidateOutcome> wave = opt.exchange ? opt.exchange(local) : local;
    if (static_cast<std::int64_t>(wave.size()) != end - pos)
      throw std::runtime_error(fmt::format("search: wave [{}, {}) came back with {} outcomes", pos, end, wave.size()));
    for (const auto& o : wave) {
      if (o.index < pos || o.index >= end || simulated_flag[static_cast<std::size_t>(o.index)])
        throw std::runtime_error(fmt::format("search: outcome for position {} outside wave [{}, {})", o.index, pos, end));
      simulated_flag[static_cast<std::size_t>(o.index)] = true;
      all_outcomes[static_cast<std::size_t>(o.index)] = o;
      ++res.simulated;
      if (o.feasible) feasible.push_back({survivors[static_cast<std::size_t>(o.index)], o});
      else ++res.pruned["oom (simulated)"];
    }
    std::sort(feasible.begin(), feasible.end(), better);
    if (static_cast<int>(feasible.size()) >= opt.top_k) kth = feasible[static_cast<std::size_t>(opt.top_k - 1)].o.tokens_per_s;
    pos = end;
    report_progress(pos);
  }
  if (bound_pruned_from < total) res.pruned["bound"] += total - bound_pruned_from;
  report_progress(total);

  // 3. The top K.
  for (std::size_t i = 0; i < feasible.size() && static_cast<int>(i) < opt.top_k; ++i) {
    const auto& f = feasible[i];
    const Scenario s = candidate_scenario(base, cands[static_cast<std::size_t>(f.cand)]);
    RankedPlan rp;
    rp.rank = static_cast<int>(i) + 1;
    rp.num_gpus = s.cluster.num_gpus;
    rp.plan = s.plan;
    rp.tokens_per_s = f.o.tokens_per_s;
    rp.model_tflops_per_gpu = f.o.model_tflops_per_gpu;
    rp.mfu = f.o.mfu;
    rp.bubble_fraction = f.o.bubble_fraction;
    rp.peak_bytes = f.o.peak_bytes;
    rp.iteration_time_s = f.o.iteration_time_s;
    rp.exposed_comm_s = f.o.exposed_comm_s;
    rp.bound_tokens_per_s = pre[static_cast<std::size_t>(f.cand)].bound_tokens_per_s;
    res.plans.push_back(rp);
  }

  // 4. One verdict per family with no plan in the top K.
  struct Family {
    std::int64_t first = -1;
    std::int64_t invalid = 0, oom = 0, oom_sim = 0, bound = 0, simulated = 0;
    std::string invalid_key;
    double min_peak = std::numeric_limits<double>::infinity();
    double best_bound = 0;
    const Ranked* best = nullptr;
    bool in_top = false;
  };
  std::map<std::string, Family> fams;
  std::vector<std::string> fam_order;
  auto fam = [&](std::int64_t i) -> Family& {
    const std::string key = family_of(cands[static_cast<std::size_t>(i)]);
    auto it = fams.find(key);
    if (it == fams.end()) {
      fam_order.push_back(key);
      it = fams.emplace(key, Family{}).first;
      it->second.first = i;
    }
    return it->second;
  };
  for (std::int64_t i = 0; i < n; ++i) {
    auto& f = fam(i);
    const auto& p = pre[static_cast<std::size_t>(i)];
    if (p.verdict == Verdict::invalid) {
      ++f.invalid;
      if (f.invalid_key.empty()) f.invalid_key = p.reason;
    } else if (p.verdict == Verdict::oom) {
      ++f.oom;
      f.min_peak = std::min(f.min_peak, p.analytic_peak);
    }
  }
  for (std::int64_t q = 0; q < total; ++q) {
    const std::int64_t i = survivors[static_cast<std::size_t>(q)];
    auto& f = fam(i);
    if (!simulated_flag[static_cast<std::size_t>(q)]) {
      ++f.bound;
      f.best_bound = std::max(f.best_bound, pre[static_cast<std::size_t>(i)].bound_tokens_per_s);
    } else if (!all_outcomes[static_cast<std::size_t>(q)].feasible) {
      ++f.oom_sim;
      f.min_peak = std::min(f.min_peak, all_outcomes[static_cast<std::size_t>(q)].peak_bytes);
    }
  }
  for (std::size_t r = 0; r < feasible.size(); ++r) {
    auto& f = fam(feasible[r].cand);
    ++f.simulated;
    if (!f.best) f.best = &feasible[r];
    if (static_cast<int>(r) < opt.top_k) f.in_top = true;
  }
  const RankedPlan* top = res.plans.empty() ? nullptr : &res.plans.front();
  for (const auto& key : fam_order) {
    const Family& f = fams.at(key);
    if (f.in_top) continue;
    const PlanCandidate& c = cands[static_cast<std::size_t>(f.first)];
    const int gpn = base.cluster.gpus_per_node;
    std::string why;
    if (f.best) {
      const auto& o = f.best->o;
      const double loss = top ? 1.0 - o.tokens_per_s / top->tokens_per_s : 0.0;
      double exposed = 0;
      for (double e : o.exposed_comm_s) exposed += e;
      double top_exposed = 0;
      if (top)
        for (double e : top->exposed_comm_s) top_exposed += e;
      const double comm_frac = o.iteration_time_s > 0 ? exposed / o.iteration_time_s : 0;
      const double top_comm_frac = top && top->iteration_time_s > 0 ? top_exposed / top->iteration_time_s : 0;
      const double d_bubble = o.bubble_fraction - (top ? top->bubble_fraction : 0);
      const double d_comm = comm_frac - top_comm_frac;
      std::string cause;
      if (c.par.tp > gpn) {
        cause = fmt::format("cross-node TP (tp {} > {} GPUs per node)", c.par.tp, gpn);
      } else if (d_bubble > 0.01 && d_bubble >= d_comm) {
        cause = fmt::format("bubble {:.1f} %", 100 * o.bubble_fraction);
      } else if (d_comm > 0.01) {
        int worst = 0;
        for (int d = 1; d < kNumDims; ++d)
          if (o.exposed_comm_s[static_cast<std::size_t>(d)] > o.exposed_comm_s[static_cast<std::size_t>(worst)]) worst = d;
        cause = fmt::format("exposed comm {:.1f} % (mostly {})", 100 * comm_frac, to_string(static_cast<Dim>(worst)));
      } else {
        cause = "lower compute efficiency (smaller GEMMs, recompute)";
      }
      why = fmt::format("{}: best {:.0f} tokens/s ({:.1f} % below #1) with {}", cause, o.tokens_per_s, 100 * loss,
                        plan_brief(candidate_scenario(base, cands[static_cast<std::size_t>(f.best->cand)]).plan));
    } else if (f.bound > 0) {
      why = fmt::format("dominated by bound: at most {:.0f} tokens/s, below the #{} plan's {:.0f}", f.best_bound,
                        opt.top_k, kth);
    } else if (f.oom + f.oom_sim > 0) {
      why = fmt::format("OOM: smallest peak {} > {} per GPU", format_bytes(f.min_peak), format_bytes(capacity));
    } else {
      why = fmt::format("invalid: {}", f.invalid_key);
    }
    res.losers.push_back({key, why});
  }
  res.wall_time_s = seconds_since(t0);
  return res;
}

// ---------------------------------------------------------------------------

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
    for (int d = 0; d < kNumDims; ++d) ex[to_string(static_cast<Dim>(d))] = p.exposed_comm_s[static_cast<std::size_t>(d)];
    j["exposed_comm_s"] = ex;
    plans.push_back(j);
  }
  nlohmann::json pruned = nlohmann::json::object();
  for (const auto& [k, v] : r.pruned) pruned[k] = v;
  nlohmann::json losers = nlohmann::json::array();
  for (const auto& l : r.losers) losers.push_back({{"family", l.family}, {"reason", l.reason}});
  return {{"plans", plans}, {"pruned", pruned}, {"candidates", r.candidates}, {"simulated", r.simulated},
          {"families_lost", losers}};
}

std::string search_to_csv(const SearchResult& r) {
  std::string out =
      "rank,num_gpus,dp,tp,pp,cp,ep,vpp,pipeline_schedule,micro_batch_size,num_microbatches,zero_stage,recompute,"
      "sequence_parallel,tokens_per_s,model_tflops_per_gpu,mfu,bubble_fraction,exposed_comm_s,peak_bytes,"
      "iteration_time_s\n";
  for (const auto& p : r.plans) {
    const auto& q = p.plan.par;
    double exposed = 0;
    for (double e : p.exposed_comm_s) exposed += e;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.0f},{:.6g}\n", p.rank,
                       p.num_gpus, q.dp, q.tp, q.pp, q.cp, q.ep, q.vpp, models::to_string(q.schedule),
                       q.micro_batch_size, q.num_microbatches, q.zero_stage, models::to_string(q.recompute),
                       q.sequence_parallel ? "true" : "false", p.tokens_per_s, p.model_tflops_per_gpu, p.mfu,
                       p.bubble_fraction, exposed, p.peak_bytes, p.iteration_time_s);
  }
  return out;
}

std::string search_summary_text(const SearchResult& r) {
  std::string out;
  out += fmt::format("{} candidate plans, {} simulated, {:.2f} s\n", r.candidates, r.simulated, r.wall_time_s);
  out += fmt::format("{:>4} {:>6} {:<64} {:>11} {:>8} {:>6} {:>7} {:>9} {:>10}\n", "rank", "gpus", "plan", "tokens/s",
                     "TFLOP/s", "MFU", "bubble", "exp.comm", "peak mem");
  for (const auto& p : r.plans) {
    double exposed = 0;
    for (double e : p.exposed_comm_s) exposed += e;
    out += fmt::format("{:>4} {:>6} {:<64} {:>11.0f} {:>8.1f} {:>5.1f}% {:>6.1f}% {:>8.3f}s {:>10}\n", p.rank, p.num_gpus,
                       plan_brief(p.plan), p.tokens_per_s, p.model_tflops_per_gpu, 100 * p.mfu,
                       100 * p.bubble_fraction, exposed, format_bytes(p.peak_bytes));
  }
  if (r.plans.empty()) out += "no plan fits: see the reasons below\n";
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
