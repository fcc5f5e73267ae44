// The lower bound on the iteration time (search.h: iteration_time_lower_bound), and
// the pre-pass that prunes every candidate without simulating it: validity, the
// analytical memory model, and the bound turned into a throughput ceiling.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>

#include "hw/net/layout.h"
#include "models/memory.h"
#include "sim/core/errors.h"
#include "sim/core/goodput.h"
#include "sim/core/program_builder.h"
#include "sim/core/schedule.h"
#include "sim/core/schedule_memory.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "sim/tools/search_internal.h"

namespace ptsim::sim {
namespace {

// ---------------------------------------------------------------------------
// Lower bound

// Ticks one instruction list keeps the compute stream of a rank busy: compute
// instructions and blocking collectives (their idle-network cost, as
// AnalyticTransport charges it); and each async stream (channel) busy with the
// collectives launched on it, which that stream runs one after another.
// `every` = instructions run on every micro-batch; `once` = those flagged for the
// first or last micro-batch only.
struct Busy {
  Tick every = 0, once = 0;
  std::array<Tick, kNumChannels> ch_every{}, ch_once{};
};

class BusyMeter {
 public:
  BusyMeter(const Layout& layout, const CollectiveCost& collectives, int rank) : collectives_(collectives) {
    // The rank's group in each dimension, shaped once: Layout::shape walks the members,
    // and doing that per collective instruction was an eighth of a plan search.
    for (int d = 0; d < kNumDims; ++d)
      shapes_[d] = layout.shape(static_cast<Dim>(d), layout.group_id(rank, static_cast<Dim>(d)));
  }

  Busy operator()(const std::vector<Instr>& list) const {
    Busy b;
    Tick beside = 0;  // a collective beside the next compute (kBesideNext): the longer of the two counts
    for (const auto& in : list) {
      // Work of every micro-batch but the first runs m - 1 times, none when m = 1, and work
      // of some micro-batches only (a deferred weight gradient's split): a lower bound
      // leaves it out.
      if (in.flags & (kAfterFirstMicrobatch | kUndeferred | kDeferredOnly)) continue;
      const bool once = (in.flags & (kFirstMicrobatch | kLastMicrobatch)) != 0;
      if (in.kind == InstrKind::compute || (in.kind == InstrKind::collective && in.dim != Dim::pp)) {
        Tick t = in.kind == InstrKind::compute ? in.duration : coll_ticks(in);
        if (in.flags & kBesideNext) {
          beside = t;
          continue;
        }
        if (in.kind == InstrKind::compute) t = std::max(t, std::exchange(beside, 0));
        (once ? b.once : b.every) += t;
      } else if (in.kind == InstrKind::launch && in.dim != Dim::pp && in.channel < kNumChannels) {
        (once ? b.ch_once : b.ch_every)[in.channel] += coll_ticks(in);
      }
    }
    return b;
  }

 private:
  // A stage's program repeats a few collectives once per layer: the last kMemo asked are
  // remembered here, ahead of the cost model's own cache (which hashes the group's place).
  Tick coll_ticks(const Instr& in) const {
    for (const Memo& m : memo_)
      if (m.bytes == in.bytes && m.coll == in.coll && m.dim == in.dim && m.ticks >= 0) return m.ticks;
    const Tick t = to_ticks(collectives_.seconds(in.coll, in.dim, shapes_[static_cast<int>(in.dim)], in.bytes));
    memo_[next_] = {in.bytes, t, in.coll, in.dim};
    next_ = (next_ + 1) % kMemo;
    return t;
  }

  struct Memo {
    Bytes bytes = 0;
    Tick ticks = -1;  // -1: empty
    CollectiveKind coll = CollectiveKind::all_reduce;
    Dim dim = Dim::tp;
  };
  static constexpr std::size_t kMemo = 8;
  const CollectiveCost& collectives_;
  std::array<GroupShape, kNumDims> shapes_;
  mutable std::array<Memo, kMemo> memo_{};
  mutable std::size_t next_ = 0;
};

// One stage of one pipeline replica, as the bound sees it.
struct StageBusy {
  Tick f0 = 0, b0 = 0;    // chunk 0's forward and backward of one micro-batch
  Tick busy = 0;          // the compute stream over every chunk and micro-batch
  Tick pro = 0, epi = 0;  // prologue and epilogue
  Tick channels = 0;      // the busiest async stream
  bool starts_fwd0 = false, ends_bwd0 = false;
};

StageBusy stage_busy(const StageProgram& sp, const StepCounts& sched, const BusyMeter& busy_of, bool dp_one_stream) {
  StageBusy s;
  std::array<Tick, kNumChannels> ch{};
  auto add_channels = [&](const Busy& b, Tick times) {
    for (std::size_t k = 0; k < ch.size(); ++k) ch[k] += times * b.ch_every[k] + b.ch_once[k];
  };
  for (std::size_t c = 0; c < sp.chunks.size(); ++c) {
    std::array<Tick, 3> run{0, 0, 0};
    if (c < sched.runs.size()) std::copy(sched.runs[c].begin(), sched.runs[c].end(), run.begin());
    const Busy f = busy_of(sp.chunks[c].forward), b = busy_of(sp.chunks[c].backward), w = busy_of(sp.chunks[c].weight);
    s.busy += run[0] * f.every + run[1] * b.every + run[2] * w.every + f.once + b.once + w.once;
    add_channels(f, run[0]);
    add_channels(b, run[1]);
    add_channels(w, run[2]);
    if (c == 0) {
      s.f0 = f.every;
      s.b0 = b.every;
    }
  }
  const Busy pb = busy_of(sp.prologue), eb = busy_of(sp.epilogue);
  s.pro = pb.every + pb.once;
  s.epi = eb.every + eb.once;
  add_channels(pb, 1);
  add_channels(eb, 1);
  // One DP stream (Program::dp_one_stream): the gathers run in the reductions' queue.
  if (dp_one_stream) {
    ch[static_cast<std::size_t>(Dim::dp)] += ch[kGatherChannel];
    ch[kGatherChannel] = 0;
    ch[static_cast<std::size_t>(Dim::edp)] += ch[kExpertGatherChannel];
    ch[kExpertGatherChannel] = 0;
  }
  for (Tick t : ch) s.channels = std::max(s.channels, t);
  s.starts_fwd0 = sched.starts_fwd0;
  s.ends_bwd0 = sched.ends_bwd0;
  return s;
}

// The bound over the stages, in pipeline order.
Tick pipeline_bound(const std::vector<StageBusy>& stages) {
  Tick best = 0, fwd_prefix = 0, bwd_prefix = 0;
  for (const StageBusy& s : stages) {
    // Stage st's first step (chunk-0 forward of micro-batch 0) needs that
    // micro-batch's chunk-0 forward on every earlier stage; its last step (a
    // chunk-0 backward) must still be followed by the backward on every earlier
    // stage. Prologue / epilogue work overlaps those waits at best.
    const Tick head = s.starts_fwd0 ? std::max(s.pro, fwd_prefix) : s.pro;
    const Tick tail = s.ends_bwd0 ? std::max(s.epi, bwd_prefix) : s.epi;
    best = std::max({best, head + s.busy + tail, s.channels});
    fwd_prefix += s.f0;
    bwd_prefix += s.b0;
  }
  return best;
}

// ---------------------------------------------------------------------------
// Pre-pass

// [begin, end) of each family's candidates (same GPUs, tp, pp, cp, dp, ep), in enumeration order.
std::vector<std::pair<std::int64_t, std::int64_t>> family_ranges(const std::vector<PlanCandidate>& cands) {
  std::vector<std::pair<std::int64_t, std::int64_t>> families;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(cands.size()); ++i) {
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
  return families;
}

// The collective cost model of one family: the test hook's, or else built from the
// first of its candidates that needs it.
class FamilyCollectives {
 public:
  explicit FamilyCollectives(const CollectiveCost* given) : coll_(given) {}
  const CollectiveCost& of(const Scenario& s) {
    if (!coll_) {
      own_ = make_collective_cost(s);
      coll_ = own_.get();
    }
    return *coll_;
  }

 private:
  std::unique_ptr<CollectiveCost> own_;
  const CollectiveCost* coll_;
};

// Memory and bound of a valid candidate `s`.
void memory_and_bound(const plan_search::SearchRun& run, const Scenario& s, FamilyCollectives& coll,
                      plan_search::PrePass& out) {
  for (const auto& st : schedule_memory(s.model, s.plan.par))
    out.analytic_peak = std::max(out.analytic_peak, st.peak);
  if (out.analytic_peak > run.base.cluster.gpu.hbm * run.opt.oom_margin) {
    out.verdict = plan_search::Verdict::oom;
    return;
  }
  if (out.analytic_peak > plan_search::memory_limit(run) * run.opt.oom_margin) {
    out.verdict = plan_search::Verdict::oom;
    out.reason = "headroom";
    return;
  }
  const double t = iteration_time_lower_bound(s, *run.compute, coll.of(s));
  const double tokens = static_cast<double>(s.plan.global_batch_size) * static_cast<double>(s.model.seq_length);
  out.bound_tokens_per_s = t > 0 ? tokens / t : std::numeric_limits<double>::infinity();
  if (run.opt.sort == SearchSort::goodput) out.goodput_bound = goodput_upper_bound(s);
}

// The pre-pass of one family's candidates [begin, end); counts them in `checked`.
void pre_pass_family(const plan_search::SearchRun& run, std::int64_t begin, std::int64_t end,
                     std::vector<plan_search::PrePass>& pre, std::atomic<std::int64_t>& checked) {
  FamilyCollectives coll(run.opt.collectives);
  for (std::int64_t i = begin; i < end; ++i, checked.fetch_add(1, std::memory_order_relaxed)) {
    auto& out = pre[static_cast<std::size_t>(i)];
    Scenario s;
    try {
      s = candidate_scenario(run.base, run.cands[static_cast<std::size_t>(i)]);
      validate(s);
    } catch (const ScenarioError& e) {
      out.verdict = plan_search::Verdict::invalid;
      out.reason = e.key();
      continue;
    }
    try {
      memory_and_bound(run, s, coll, out);
    } catch (const std::invalid_argument& e) {
      // The model library or the network refuses the plan: invalid.
      out.verdict = plan_search::Verdict::invalid;
      out.reason = "model sharding";
    }
  }
}

}  // namespace

// A true lower bound (search.h) over one pipeline replica: tp/cp/dp index 0 of every stage.
double iteration_time_lower_bound(const Scenario& s, const hw::ComputeCostModel& compute,
                                  const CollectiveCost& collectives) {
  const auto& par = s.plan.par;
  BuildOptions bo;
  bo.fuse_compute = true;
  bo.schedule_steps = false;  // the bound reads only the steps' counts (StepCounts)
  bo.labels = false;          // and no instruction's name
  const Program prog = build_program(s, compute, bo);
  // ZB-V's steps depend on its pass times but its counts do not (zb_v_counts); the other
  // schedules' counts come from their steps in the per-thread cache, which the pre-pass
  // hits for most candidates (schedule.h).
  const std::vector<std::vector<ScheduleStep>>* cached =
      par.schedule == models::Schedule::zb_v
          ? nullptr
          : &cached_schedules(par.schedule, par.pp, par.num_microbatches, par.vpp, par.microbatch_group);
  const Layout layout(par.tp, par.cp, par.dp, par.pp, par.ep, s.cluster.gpus_per_node, par.etp);
  std::vector<StageBusy> stages(static_cast<std::size_t>(par.pp));
  for (const auto& sp : prog.stages) {
    const BusyMeter busy_of(layout, collectives, layout.rank_of(Coords{0, 0, 0, sp.stage}));
    const auto st = static_cast<std::size_t>(sp.stage);
    stages[st] = stage_busy(sp, cached ? count_steps((*cached)[st]) : zb_v_counts(par.num_microbatches), busy_of,
                            prog.dp_one_stream);
  }
  return to_seconds(pipeline_bound(stages));
}

namespace plan_search {

// The collective cost model depends on the rank layout (sim/core/network_cost.h: one
// per layout, not thread-safe), and a family (GPUs, tp, pp, cp, ep) has one layout:
// one task per family, which builds it once for all its candidates.
void pre_pass(SearchRun& run) {
  const auto families = family_ranges(run.cands);
  run.pre.assign(run.cands.size(), PrePass{});
  std::atomic<std::int64_t> checked{0};
  const auto t0 = Clock::now();
  auto report = [&](std::int64_t) {
    SearchProgress pr;
    pr.phase = SearchProgress::Phase::check;
    pr.done = checked.load(std::memory_order_relaxed);
    pr.total = static_cast<std::int64_t>(run.cands.size());
    pr.elapsed_s = seconds_since(run.t0);
    pr.phase_elapsed_s = seconds_since(t0);
    if (pr.done > 0)
      pr.eta_s = pr.phase_elapsed_s / static_cast<double>(pr.done) * static_cast<double>(pr.total - pr.done);
    run.opt.progress(pr);
  };
  std::function<void(std::int64_t)> tick;
  if (run.opt.progress) {
    tick = report;
    report(0);
  }
  parallel_for(
      static_cast<std::int64_t>(families.size()), run.threads,
      [&](std::int64_t fi) {
        const auto& [begin, end] = families[static_cast<std::size_t>(fi)];
        pre_pass_family(run, begin, end, run.pre, checked);
      },
      tick);
  if (run.opt.progress) report(0);
}

void rank_survivors(SearchRun& run) {
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(run.pre.size()); ++i) {
    const auto& p = run.pre[static_cast<std::size_t>(i)];
    if (p.verdict == Verdict::invalid)
      ++run.res.pruned["invalid: " + p.reason];
    else if (p.verdict == Verdict::oom && p.reason == "headroom")
      ++run.res.pruned[fmt::format("headroom < {:g} % (analytical)", 100 * run.opt.min_headroom)];
    else if (p.verdict == Verdict::oom)
      ++run.res.pruned["oom (analytical)"];
    else
      run.survivors.push_back(i);
  }
  run.res.fit = static_cast<std::int64_t>(run.survivors.size());
  // Best bound first; ties by enumeration order (deterministic).
  auto bound = [&](std::int64_t i) {
    return rank_score(run, run.pre[static_cast<std::size_t>(i)].bound_tokens_per_s,
                      run.cands[static_cast<std::size_t>(i)].num_gpus, run.pre[static_cast<std::size_t>(i)].goodput_bound);
  };
  std::stable_sort(run.survivors.begin(), run.survivors.end(),
                   [&](std::int64_t a, std::int64_t b) { return bound(a) > bound(b); });
}

}  // namespace plan_search
}  // namespace ptsim::sim
