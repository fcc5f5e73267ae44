#include "sim/core/replay.h"

#include <cmath>

#include <fmt/format.h>
#include <algorithm>

#include "hw/errors.h"
#include "hw/slot_pool.h"

namespace ptsim::sim {

namespace {
constexpr int kNoSlot = -1;

bool traced_stream_dim(Dim d) { return d != Dim::mp; }
}  // namespace

void expect_collective_times(Program& p, const Layout& layout, const CollectiveCost& coll) {
  for (StageProgram& sp : p.stages) {
    // Every data- (expert-) parallel group of a stage has the same shape: its first rank's.
    const int rank = layout.rank_of({0, 0, 0, sp.stage});
    const GroupShape dp = layout.shape(Dim::dp, layout.group_id(rank, Dim::dp));
    const GroupShape ep = layout.shape(Dim::ep, layout.group_id(rank, Dim::ep));
    const GroupShape edp = layout.shape(Dim::edp, layout.group_id(rank, Dim::edp));
    auto annotate = [&](std::vector<Instr>& list) {
      for (Instr& in : list)
        if (in.kind == InstrKind::launch && (in.dim == Dim::dp || in.dim == Dim::ep || in.dim == Dim::edp))
          in.duration = to_ticks(coll.seconds(in.coll, in.dim,
                                              in.dim == Dim::dp   ? dp
                                              : in.dim == Dim::ep ? ep
                                                                  : edp,
                                              in.bytes));
    };
    annotate(sp.prologue);
    annotate(sp.epilogue);
    for (ChunkProgram& c : sp.chunks)
      for (auto* list : {&c.forward, &c.backward, &c.weight, &c.forward_overlap, &c.backward_overlap}) annotate(*list);
  }
}

Replay::Replay(const Program& program, const Layout& layout, int num_microbatches, Transport& transport,
               ReplayOptions opt)
    : program_(program), layout_(layout), m_(num_microbatches), transport_(transport), opt_(opt) {
  const int world = layout_.world();
  if (!opt_.compute_scale.empty() && (opt_.fold || static_cast<int>(opt_.compute_scale.size()) != world))
    throw std::logic_error("Replay: compute_scale needs one factor per rank and no folding");
  slot_of_rank_.assign(static_cast<std::size_t>(world), kNoSlot);
  for (int rank = 0; rank < world; ++rank) {
    const Coords c = layout_.coords(rank);
    if (opt_.fold && (c.tp != 0 || c.cp != 0 || c.dp != 0)) continue;
    slot_of_rank_[rank] = static_cast<std::int32_t>(ranks_.size());
    RankState r;
    r.rank = rank;
    r.slot = static_cast<std::int32_t>(ranks_.size());
    r.stage = c.pp;
    r.prog = &program_.stages[static_cast<std::size_t>(c.pp)];
    if (!opt_.compute_scale.empty()) r.scale = opt_.compute_scale[static_cast<std::size_t>(rank)];
    for (int d = 0; d < kNumDims; ++d) r.gid[d] = layout_.group_id(rank, static_cast<Dim>(d));
    ranks_.push_back(std::move(r));
  }
  stats_.resize(ranks_.size());
  tally_.resize(ranks_.size());
  mail_.resize(ranks_.size());
  for (auto& m : mail_) m.inbox.reserve(8);
  channels_.resize(ranks_.size());
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    stats_[i].rank = ranks_[i].rank;
    stats_[i].stage = ranks_[i].stage;
  }
  // Group states (one set per dimension for blocking collectives, one per async stream)
  // are made on the first collective of their set (group()): a dimension of size 1 (cp,
  // ep here) would otherwise hold one state per rank, 65,536 of them at 65k GPUs, for
  // collectives that never run.
  if (opt_.trace) {
    // Show the first rank of every stage, then the lowest ranks, up to the limit.
    traced_.assign(static_cast<std::size_t>(world), 0);
    int shown = 0;
    for (const auto& r : ranks_) {
      const Coords c = layout_.coords(r.rank);
      if (c.tp == 0 && c.cp == 0 && c.dp == 0 && shown < opt_.trace_max_ranks) traced_[r.rank] = 1, ++shown;
    }
    for (const auto& r : ranks_)
      if (!traced_[r.rank] && shown < opt_.trace_max_ranks) traced_[r.rank] = 1, ++shown;
  }
  engine_.reserve(ranks_.size() * 4 + 64);
  sessions_ = opt_.lockstep_sessions && !opt_.trace && !opt_.fold;
  for (const StageProgram& sp : program_.stages)
    for (const auto& step : sp.steps) paired_steps_ = paired_steps_ || step.paired;
}

// Folded, only the representative of each stage is simulated, so a group has one
// simulated member, except the model-parallel group (one per stage).
void Replay::make_groups(std::vector<GroupState>& groups, Dim dim) {
  groups.resize(static_cast<std::size_t>(layout_.group_count(dim)));
  for (auto& g : groups) g.expected = opt_.fold ? 0 : layout_.group_size(dim);
  if (opt_.fold)
    for (const auto& r : ranks_) ++groups[static_cast<std::size_t>(layout_.group_id(r.rank, dim))].expected;
}

bool Replay::wait_satisfied(const RankState& r, const Instr& in) const {
  const auto& ch = channels_[static_cast<std::size_t>(r.slot)][in.channel];
  if (in.flags & kAbsoluteWait) return ch.completed >= in.count;
  return ch.launched - ch.completed <= in.count;
}

GroupShape Replay::pair_shape(int src, int dst) const {
  GroupShape pair;
  pair.size = 2;
  pair.first_rank = src;
  pair.stride = dst - src;
  pair.nodes = layout_.node_of(src) == layout_.node_of(dst) ? 1 : 2;
  return pair;
}

const GroupShape& Replay::shape_of(GroupState& g, Dim d, int gid) {
  if (!g.shape_known) {
    g.shape = layout_.shape(d, gid);
    g.shape_known = true;
  }
  return g.shape;
}

const std::vector<Instr>& Replay::list_of(const RankState& r) const {
  const auto& p = *r.prog;
  if (r.step < 0) return p.prologue;
  if (r.step >= static_cast<int>(p.steps.size())) return p.epilogue;
  const auto& s = p.steps[static_cast<std::size_t>(r.step)];
  // An F&B pair: a paired forward and the backward right after it (schedule.h).
  const bool in_pair = s.paired || (s.phase == Phase::backward && r.step > 0 &&
                                    p.steps[static_cast<std::size_t>(r.step - 1)].paired);
  return p.chunks[static_cast<std::size_t>(s.chunk)].of(s.phase, in_pair);
}

int Replay::current_microbatch(const RankState& r) const {
  const auto& p = *r.prog;
  if (r.step < 0 || r.step >= static_cast<int>(p.steps.size())) return -1;
  return p.steps[static_cast<std::size_t>(r.step)].microbatch;
}

// A pipeline message is named by the step that consumes it: (phase, micro-batch,
// the receiver's chunk). Only one stage sends a given key to a given rank.
std::uint64_t Replay::msg_key(Phase phase, int microbatch, int chunk) {
  return static_cast<std::uint64_t>(phase) | (static_cast<std::uint64_t>(microbatch) << 2) |
         (static_cast<std::uint64_t>(chunk) << 34);
}

// Whether `in` is left out on the rank's current step: instructions of some of a
// chunk's micro-batches only (program.h runs_on_microbatch).
bool Replay::skipped_in_step(const RankState& r, const Instr& in) const {
  const auto& p = *r.prog;
  if (r.step < 0 || r.step >= static_cast<int>(p.steps.size())) return true;
  const auto& s = p.steps[static_cast<std::size_t>(r.step)];
  return !runs_on_microbatch(in.flags, program_.schedule, s.chunk, s.microbatch, m_, program_.deferred_microbatches);
}

// Moves the program counter past the end of the current list to the next non-empty
// step's first instruction; false when the rank is done.
bool Replay::next_step(RankState& r) {
  for (;;) {
    if (r.pc < current_list(r).size()) return true;
    if (r.step > static_cast<int>(r.prog->steps.size())) return false;
    if (r.step == static_cast<int>(r.prog->steps.size())) {
      set_step(r, r.step + 1);
      return false;
    }
    // The output of a forward overlapped with the next step (DualPipe's F&B pair)
    // leaves when that step ends.
    if (!mail_[static_cast<std::size_t>(r.slot)].held_sends.empty() &&
        !(r.step >= 0 && r.prog->steps[static_cast<std::size_t>(r.step)].paired))
      release_held_sends(r);
    set_step(r, r.step + 1);
    r.pc = 0;
  }
}

void Replay::release_held_sends(RankState& r) {
  auto& held = mail_[static_cast<std::size_t>(r.slot)].held_sends;
  for (std::uint32_t idx : held) {
    msg_pool_[idx].sent = r.t;
    start_send(idx, r.t);
  }
  held.clear();
}

SpanPhase Replay::current_phase(const RankState& r) const {
  const auto& p = *r.prog;
  if (r.step < 0) return SpanPhase::prologue;
  if (r.step >= static_cast<int>(p.steps.size())) return SpanPhase::epilogue;
  return p.steps[static_cast<std::size_t>(r.step)].phase == Phase::forward ? SpanPhase::forward : SpanPhase::backward;
}

Span Replay::span_of(const RankState& r, std::uint8_t stream, const Instr& in, Tick start, Tick end) const {
  const bool compute = in.kind == InstrKind::compute;
  return {r.rank,
          stream,
          current_phase(r),
          in.flags,
          compute ? kComputeSpan : static_cast<std::uint8_t>(in.dim),
          in.label,
          in.layer,
          current_microbatch(r),
          -1,
          compute ? 0 : in.bytes,
          start,
          end};
}

void Replay::record(const Span& s) {
  if (opt_.trace && traced_[static_cast<std::size_t>(s.rank)] && s.end > s.start) spans_.push_back(s);
}

void Replay::note_memory(RankState& r, const Instr& in, bool alloc) {
  auto& st = tally_[static_cast<std::size_t>(r.slot)];
  const Bytes delta = alloc ? in.bytes : -in.bytes;
  st.mem_now += delta;
  if (in.mem == MemCat::activations) st.activations_now += delta;
  if (in.mem == MemCat::buffers) st.buffers_now += delta;
  if (st.mem_now > st.mem_peak) {
    st.mem_peak = st.mem_now;
    st.activations_at_peak = st.activations_now;
    st.buffers_at_peak = st.buffers_now;
  }
}

namespace {
std::uint64_t sync_instrs(const std::vector<Instr>& list) {
  return static_cast<std::uint64_t>(std::count_if(list.begin(), list.end(), [](const Instr& in) {
    return in.kind != InstrKind::compute && in.kind != InstrKind::alloc && in.kind != InstrKind::release;
  }));
}
}  // namespace

std::uint64_t Replay::sync_instructions() const {
  std::vector<std::uint64_t> per_stage(program_.stages.size(), 0);
  for (std::size_t st = 0; st < program_.stages.size(); ++st) {
    const auto& p = program_.stages[st];
    std::uint64_t n = sync_instrs(p.prologue) + sync_instrs(p.epilogue);
    for (const auto& step : p.steps) n += sync_instrs(p.chunks[static_cast<std::size_t>(step.chunk)].of(step.phase));
    per_stage[st] = n;
  }
  std::uint64_t total = 0;
  for (const auto& r : ranks_) total += per_stage[static_cast<std::size_t>(r.stage)];
  return total;
}

void Replay::run() {
  if (const std::uint64_t n = sync_instructions(); n / kEventsPerInstrSlack > opt_.max_events)
    throw EventLimitError(n, opt_.max_events, true);
  // Every rank starts at time 0 with its prologue.
  for (auto& r : ranks_) {
    set_step(r, -1);
    r.pc = 0;
    if (current_list(r).empty()) {
      r.pc = static_cast<std::size_t>(-1);
      if (!next_instr(r)) {
        mark_finished(r);
        continue;
      }
    }
    engine_.schedule(0, &Replay::on_resume, this, static_cast<std::uint64_t>(r.slot));
  }
  std::uint64_t next_progress = kProgressEvents;
  while (engine_.pending() > 0) {
    const std::uint64_t done = engine_.events_executed();
    if (done >= opt_.max_events) throw EventLimitError(done, opt_.max_events, false);
    if (done >= next_progress) {
      next_progress = done + kProgressEvents;
      if (opt_.progress) opt_.progress(done, engine_.now());
    }
    engine_.step();
  }
  if (finished_ != static_cast<int>(ranks_.size())) {
    for (const auto& r : ranks_) {
      if (r.block == Block::finished) continue;
      static const char* what[] = {"nothing", "a collective", "a pipeline message", "an async stream"};
      throw InternalError(
          fmt::format("deadlock: rank {} (stage {}) at step {} instruction {} waits for {} ({} of {} ranks finished)",
                      r.rank, r.stage, r.step, r.pc, what[static_cast<int>(r.block)], finished_, ranks_.size()));
    }
  }
  for (std::size_t i = 0; i < ranks_.size(); ++i) static_cast<RankTally&>(stats_[i]) = tally_[i];
  iteration_ = 0;
  for (const auto& s : stats_) iteration_ = std::max(iteration_, s.end);
  // Each rank's share of its groups' collectives (GroupState::wire).
  for (const RankState& r : ranks_) {
    auto& wire = stats_[static_cast<std::size_t>(r.slot)].wire;
    for (int d = 0; d < kNumDims; ++d)
      if (const auto& v = sync_groups_[static_cast<std::size_t>(d)]; !v.empty())
        wire[d] += v[static_cast<std::size_t>(r.gid[d])].wire;
    for (int c = 0; c < kNumChannels; ++c) {
      const int d = static_cast<int>(channel_dim(c));
      if (const auto& v = async_groups_[static_cast<std::size_t>(c)]; !v.empty())
        wire[d] += v[static_cast<std::size_t>(r.gid[d])].wire;
    }
  }
}

void Replay::on_resume(void* ctx, std::uint64_t arg) {
  auto* self = static_cast<Replay*>(ctx);
  self->advance(self->ranks_[arg]);
}

void Replay::advance(RankState& r) {
  run_rank(r);
  run_ready();
}

// The ranks queued to run on (ready_), in their order; those they queue in turn run
// behind them. Once, from the outermost caller: a queued rank's collective can end inline
// again while others of its group are still queued.
void Replay::run_ready() {
  if (draining_ || ready_.empty()) return;
  draining_ = true;
  for (std::size_t i = 0; i < ready_.size(); ++i) {
    RankState& r = ranks_[static_cast<std::size_t>(ready_[i].slot)];
    if (ready_[i].after_block)
      continue_after_block(r);
    else
      advance(r);
  }
  ready_.clear();
  draining_ = false;
}

void Replay::run_rank(RankState& r) {
  auto& st = tally_[static_cast<std::size_t>(r.slot)];
  r.block = Block::none;
  for (;;) {
    const Instr& in = current_list(r)[r.pc];
    if (!skipped(r, in)) {
      if (in.kind == InstrKind::compute) {
        if (r.leading && r.t < r.comm_until && !session_uniform(r, in)) end_session(r, false);
        const Tick d = compute_ticks(r, in);
        if (opt_.trace) record(span_of(r, 0, in, r.t, r.t + d));
        r.t += d;
        st.busy += d;
      } else if (in.kind == InstrKind::alloc || in.kind == InstrKind::release) {
        note_memory(r, in, in.kind == InstrKind::alloc);
      } else {
        if (r.leading && !(in.kind == InstrKind::collective && in.dim == r.lead_dim)) end_session(r, false);
        if (!interact(r, in, st)) return;  // blocked, or resumed later by an event
      }
    }
    if (!next_instr(r)) {
      if (r.leading) end_session(r, true);
      mark_finished(r);
      return;
    }
  }
}

bool Replay::interact(RankState& r, const Instr& in, Tally& st) {
  // Collectives, launches and sends carry their own timestamp. Receives and waits look at
  // state that only grows with the engine's clock (messages delivered, stream ops done), and
  // the rank may be ahead of that clock (r.t > now): what is there now is there at r.t, and
  // what comes later wakes the rank at max(its arrival, r.t) (on_deliver,
  // resume_after_wait). So no rank needs an event to catch up with the clock first; that
  // event was a third of a ZeRO-3 run's events, one per rank and parameter gather.
  switch (in.kind) {
    case InstrKind::collective:
      return collective_on_compute_stream(r, in, st);
    case InstrKind::recv: {
      const auto& step = r.prog->steps[static_cast<std::size_t>(r.step)];
      const std::uint64_t key = msg_key(step.phase, step.microbatch, step.chunk);
      auto& inbox = mail_[static_cast<std::size_t>(r.slot)].inbox;
      auto it = std::find_if(inbox.begin(), inbox.end(), [&](const Msg& m) { return m.key == key; });
      if (it == inbox.end()) {
        r.block = Block::recv;
        r.wait_key = key;
        r.wait_start = r.t;
        return false;  // resumed by on_deliver
      }
      *it = inbox.back();
      inbox.pop_back();
      return true;
    }
    case InstrKind::send:
      send(r, in);
      return true;
    case InstrKind::launch: {
      auto& own = channels_[static_cast<std::size_t>(r.slot)];
      ++own[in.channel].launched;  // counted on its own channel, run on its stream
      const int stream = stream_of(in.channel);
      auto& ch = own[stream];
      // The launching step's micro-batch and phase label the op's span: only a trace reads them.
      if (opt_.trace)
        ch.queue.push_back({&in, r.t, current_microbatch(r), current_phase(r)});
      else
        ch.queue.push_back({&in, r.t, -1, SpanPhase::forward});
      if (in.dim == Dim::dp || in.dim == Dim::ep || in.dim == Dim::edp)
        expect_comm(r, ch, in);  // what holds SMs (Builder::comm_sms)
      if (!ch.busy) start_async(r, stream, r.t);
      return true;
    }
    case InstrKind::wait:
      if (wait_satisfied(r, in)) return true;
      r.block = Block::wait;
      r.wait_dim = in.dim;
      r.wait_channel = in.channel;
      r.wait_start = r.t;
      return false;  // resumed by on_group_done of the async stream
    default:
      return true;
  }
}

// The network decides when a collective ends, later than the rank, which runs ahead of
// the engine's clock through compute, reaches the compute that overlaps it; so the
// overlap is taken from the collective's isolated time (expect_collective_times), from
// when its stream reaches it.
void Replay::expect_comm(RankState& r, Channel& ch, const Instr& in) {
  ch.until = std::max(ch.until, r.t) + in.duration;
  r.comm_until = std::max(r.comm_until, ch.until);
}

// Under an expected collective for `window` ticks the op progresses at its
// duration_under_comm rate, then at its own.
Tick Replay::compute_ticks_slow(const RankState& r, const Instr& in) const {
  return ticks_under(in, r.comm_until - r.t, r.scale);
}

Tick Replay::ticks_under(const Instr& in, Tick window, double scale) {
  Tick d = in.duration;
  const Tick slow = in.duration_under_comm();
  if (window > 0 && slow > d) {
    d = window >= slow ? slow
                       : window + static_cast<Tick>(std::llround(static_cast<double>(in.duration) *
                                                                 (1.0 - static_cast<double>(window) / slow)));
  }
  return scale == 1.0 ? d : static_cast<Tick>(std::llround(static_cast<double>(d) * scale));
}

// The compute after collective r.pc (kBesideNext) ran beside it from the rank's arrival
// (r.wait_start), under its NCCL kernel's SMs until `end` (or the rank's async collectives'
// expected end, if later); the rank goes on when both have ended. Consumes the compute.
void Replay::run_beside(RankState& r, Tally& st, Tick start, Tick end) {
  const Instr& coll = current_list(r)[r.pc];
  const Instr& next = current_list(r)[++r.pc];
  const Tick d = ticks_under(next, std::max(end, r.comm_until) - r.wait_start, r.scale);
  const Tick done = r.wait_start + d;
  st.busy += d;
  if (end > done) st.exposed[static_cast<int>(coll.dim)] += end - done;
  if (opt_.trace) {
    record(span_of(r, static_cast<std::uint8_t>(1 + static_cast<int>(coll.dim)), coll, start, end));
    record(span_of(r, 0, next, r.wait_start, done));
  }
  r.t = std::max(end, done);
}

bool Replay::collective_on_compute_stream(RankState& r, const Instr& in, Tally& st) {
  GroupState& g = group(in.dim, -1, r.gid[static_cast<int>(in.dim)]);
  if (g.expected == 1 && transport_.immediate()) {
    // The only simulated member (a folded run): with a closed-form network the
    // collective's time is known now, no event needed.
    const int di = static_cast<int>(in.dim);
    const GroupShape& shape = shape_of(g, in.dim, r.gid[di]);
    const Tick dur = to_ticks(transport_.collective_seconds(in.coll, in.dim, r.gid[di], shape, in.bytes));
    stats_[static_cast<std::size_t>(r.slot)].wire[di] += transport_.wire_bytes(in.coll, in.dim, shape, in.bytes);
    if (in.flags & kBesideNext) {
      r.wait_start = r.t;
      run_beside(r, st, r.t, r.t + dur);
      return true;
    }
    st.exposed[di] += dur;
    if (in.dim != Dim::mp && opt_.trace) record(span_of(r, 0, in, r.t, r.t + dur));
    r.t += dur;
    return true;
  }
  if (r.leading && (in.flags & kBesideNext) && r.t < r.comm_until && !session_uniform(r, current_list(r)[r.pc + 1]))
    end_session(r, false);
  // A lockstep session's leader stands for every member: when the transport can time the
  // collective now (Transport::run_inline), the leader runs through it as through compute,
  // as on_group_done would resume it at its end. Tensor-parallel groups only: they have no
  // async transfers, so nothing of theirs but this collective can be in flight.
  if (r.leading && in.dim == Dim::tp && r.lead_dim == Dim::tp && opt_.inline_collectives) {
    const int gid = r.gid[static_cast<int>(Dim::tp)];
    const GroupShape& shape = shape_of(g, in.dim, gid);
    const Tick dur = transport_.run_inline(engine_, r.t, in.coll, in.dim, gid, shape, in.bytes);
    if (dur >= 0) {
      g.wire += transport_.wire_bytes(in.coll, in.dim, shape, in.bytes);
      if (in.flags & kBesideNext) {
        r.wait_start = r.t;
        run_beside(r, st, r.t, r.t + dur);
        return true;
      }
      st.exposed[static_cast<int>(Dim::tp)] += dur;
      r.t += dur;
      return true;
    }
  }
  r.block = Block::collective;
  r.wait_start = r.t;
  r.wait_dim = in.dim;
  arrive(r, in.dim, -1, in, r.t);
  return false;  // resumed by on_group_done
}

void Replay::mark_finished(RankState& r) {
  r.block = Block::finished;
  stats_[static_cast<std::size_t>(r.slot)].end = r.t;
  ++finished_;
}

void Replay::continue_after_block(RankState& r) {
  if (next_instr(r)) {
    advance(r);
    return;
  }
  if (r.leading) end_session(r, true);
  mark_finished(r);
}

bool Replay::start_session(GroupState& g, Dim d, Tick now) {
  const auto& members = g.resuming;
  const RankState& lead = ranks_[static_cast<std::size_t>(members[0])];
  const Tally& lt = tally_[static_cast<std::size_t>(lead.slot)];
  const auto held = [this](const RankState& r) {
    return paired_steps_ && !mail_[static_cast<std::size_t>(r.slot)].held_sends.empty();
  };
  if (held(lead)) return false;
  // An expected collective that ended by now slows nothing; one that runs on may end at a
  // different time on each member (session_uniform).
  Tick lo = std::max(lead.comm_until, now), hi = lo;
  for (std::size_t i = 1; i < members.size(); ++i) {
    const RankState& r = ranks_[static_cast<std::size_t>(members[i])];
    const Tally& t = tally_[static_cast<std::size_t>(r.slot)];
    // r.t is now unless a compute beside the collective (kBesideNext) ends later.
    if (r.prog != lead.prog || r.step != lead.step || r.pc != lead.pc || r.t != lead.t || r.scale != lead.scale ||
        !t.same_memory(lt) || held(r))
      return false;
    lo = std::min(lo, std::max(r.comm_until, now));
    hi = std::max(hi, r.comm_until);
  }
  RankState& leader = ranks_[static_cast<std::size_t>(lead.slot)];
  leader.leading = true;
  leader.lead_dim = d;
  g.lead_comm_until = leader.comm_until;
  g.session_lo = lo;
  leader.comm_until = hi;  // runs the session under the latest (session_uniform)
  g.followers.assign(members.begin() + 1, members.end());
  g.base = lt;
  ++sessions_started_;
  if (lo != hi) ++skewed_sessions_;
  return true;
}

void Replay::end_session(RankState& lead, bool finished) {
  GroupState& g = group(lead.lead_dim, -1, lead.gid[static_cast<int>(lead.lead_dim)]);
  const Tally& lt = tally_[static_cast<std::size_t>(lead.slot)];
  for (std::int32_t slot : g.followers) {
    RankState& r = ranks_[static_cast<std::size_t>(slot)];
    Tally& t = tally_[static_cast<std::size_t>(slot)];
    t.add_time(lt, g.base);
    t.take_memory(lt);  // the same before the session, so the same after
    r.t = lead.t;
    r.list = lead.list;
    r.pc = lead.pc;
    r.step = lead.step;
    r.wait_start = lead.wait_start;  // its own comm_until stays (no launch in a session)
    r.block = lead.block;
    r.wait_dim = lead.wait_dim;
    r.wait_channel = lead.wait_channel;
    r.wait_key = lead.wait_key;
    if (finished)
      mark_finished(r);
    else
      ready_.push_back({slot, false});  // at the instruction that ended the session
  }
  g.followers.clear();
  lead.leading = false;
  lead.comm_until = g.lead_comm_until;
}

bool Replay::session_uniform(const RankState& r, const Instr& in) const {
  // The leader runs under the latest expected end (r.comm_until > r.t here); each member's
  // window ticks_under sees is its own comm_until - r.t. The same for all when the compute
  // is not slowed, or every window covers the whole slowed compute.
  const Tick slow = in.duration_under_comm();
  if (slow <= in.duration) return true;
  const auto& groups = sync_groups_[static_cast<std::size_t>(r.lead_dim)];
  const GroupState& g = groups[static_cast<std::size_t>(r.gid[static_cast<int>(r.lead_dim)])];
  return g.session_lo - r.t >= slow || g.session_lo == r.comm_until;
}

void Replay::arrive(RankState& r, Dim d, int channel, const Instr& in, Tick at) {
  const int gid = r.gid[static_cast<int>(d)];
  GroupState& g = group(d, channel, gid);
  if (g.arrived == 0) {
    g.coll = in.coll;
    g.bytes = in.bytes;
    g.label = in.label;
  }
  ++g.arrived;
  if (r.leading && channel < 0 && d == r.lead_dim) g.arrived += static_cast<int>(g.followers.size());
  g.start = std::max(g.start, at);
  g.waiters.push_back(r.slot);
  if (g.arrived < g.expected) return;
  const GroupShape& shape = shape_of(g, d, gid);
  // A tensor-parallel collective the transport can time at once (Transport::run_inline)
  // ends without an event: its members go on from its end (ReplayOptions::inline_groups).
  if (channel < 0 && d == Dim::tp && opt_.inline_collectives && opt_.inline_groups) {
    const Tick start = std::max(g.start, engine_.now());
    const Tick dur = transport_.run_inline(engine_, start, g.coll, d, gid, shape, g.bytes);
    if (dur >= 0) {  // what on_group_done does at its end, without the event
      take_members(g, d, gid);
      finish_blocking(g, d, start, start + dur);  // run on once the rank now running blocks (advance)
      return;
    }
  }
  const std::uint64_t arg = static_cast<std::uint64_t>(d) | (static_cast<std::uint64_t>(channel + 1) << 8) |
                            (static_cast<std::uint64_t>(gid) << 16);
  // The last member may arrive ahead of the engine's clock (it ran ahead through
  // compute): the transfer starts at that time, taken now when the transport can
  // (Transport::start_collective_at; a tensor-parallel collective blocks every member).
  if (g.start > engine_.now()) {
    if (channel < 0 && d == Dim::tp && opt_.deferred_starts &&
        transport_.start_collective_at(engine_, g.start, g.coll, d, gid, shape, g.bytes, &Replay::on_group_done, this,
                                       arg))
      return;
    engine_.schedule(g.start, &Replay::on_group_start, this, arg);
    return;
  }
  transport_.start_collective(engine_, g.coll, d, gid, shape, g.bytes, &Replay::on_group_done, this, arg);
}

void Replay::on_group_start(void* ctx, std::uint64_t arg) {
  auto* self = static_cast<Replay*>(ctx);
  const Dim d = static_cast<Dim>(arg & 0xff);
  const int channel = static_cast<int>((arg >> 8) & 0xff) - 1;
  const int gid = static_cast<int>(arg >> 16);
  GroupState& g = self->group(d, channel, gid);
  self->transport_.start_collective(self->engine_, g.coll, d, gid, self->shape_of(g, d, gid), g.bytes,
                                    &Replay::on_group_done, self, arg);
}

void Replay::start_async(RankState& r, int channel, Tick at) {
  auto& ch = channels_[static_cast<std::size_t>(r.slot)][channel];
  ch.busy = true;
  const Launched& op = ch.queue[ch.head];
  arrive(r, op.instr->dim, channel, *op.instr, std::max(at, op.at));
}

// The group's collective ended: its waiters become the members resuming from it.
void Replay::take_members(GroupState& g, Dim d, int gid) {
  g.wire += transport_.wire_bytes(g.coll, d, shape_of(g, d, gid), g.bytes);
  std::swap(g.waiters, g.resuming);
  g.waiters.clear();
  g.arrived = 0;
  g.start = 0;
}

// The members of a blocking collective that ran from `start` to `now`: their waiting
// time, or the compute beside it (kBesideNext); each is at `now` (or its compute's end).
void Replay::settle_members(GroupState& g, Dim d, Tick start, Tick now) {
  const int di = static_cast<int>(d);
  const std::size_t n = g.resuming.size();
  for (std::size_t i = 0; i < n; ++i) {
    prefetch_member(g, i + kPrefetchAhead);
    const std::int32_t slot = g.resuming[i];
    RankState& r = ranks_[static_cast<std::size_t>(slot)];
    auto& st = tally_[static_cast<std::size_t>(slot)];
    if (current_list(r)[r.pc].flags & kBesideNext) {
      run_beside(r, st, start, now);
      continue;
    }
    // Waiting for slower peers of the model-parallel sync is pipeline imbalance when
    // there is a pipeline; with one stage it is waiting on communication (peers held
    // up by their own collectives), not a bubble.
    if (d == Dim::mp && program_.stages.size() > 1) {
      st.bubble += start - r.wait_start;
      st.exposed[di] += now - start;
    } else {
      st.exposed[di] += now - r.wait_start;
    }
    if (traced_stream_dim(d) && opt_.trace) record(span_of(r, 0, current_list(r)[r.pc], start, now));
    r.t = now;
  }
}

// A blocking collective (its members taken, take_members) ran from `start` to `end`: its
// members' waits settled, then they (or, in a lockstep session, running or begun now, its
// leader alone) queue to run on (run_ready).
void Replay::finish_blocking(GroupState& g, Dim d, Tick start, Tick end) {
  for (std::size_t i = 0; i < kPrefetchAhead; ++i) prefetch_member(g, i);
  settle_members(g, d, start, end);
  if (!g.followers.empty() || (g.resuming.size() > 1 && sessions_ && start_session(g, d, end))) {
    ready_.push_back({g.resuming[0], true});
    return;
  }
  for (std::int32_t slot : g.resuming) ready_.push_back({slot, true});
}

void Replay::on_group_done(void* ctx, std::uint64_t arg) {
  auto* self = static_cast<Replay*>(ctx);
  const Dim d = static_cast<Dim>(arg & 0xff);
  const int channel = static_cast<int>((arg >> 8) & 0xff) - 1;
  const bool async = channel >= 0;
  const int gid = static_cast<int>(arg >> 16);
  GroupState& g = self->group(d, channel, gid);
  const Tick now = self->engine_.now();
  const Tick start = g.start;
  self->take_members(g, d, gid);
  const std::size_t n = g.resuming.size();
  if (!async) {
    self->finish_blocking(g, d, start, now);
    self->run_ready();
    return;
  }
  // Async stream: finish the op on every member, start its next queued op, then
  // wake ranks whose compute stream waits on the op's channel.
  for (std::size_t i = 0; i < kPrefetchAhead; ++i) self->prefetch_member(g, i);
  int done_channel = channel;
  for (std::size_t i = 0; i < n; ++i) {
    self->prefetch_member(g, i + kPrefetchAhead);
    const std::int32_t slot = g.resuming[i];
    RankState& r = self->ranks_[static_cast<std::size_t>(slot)];
    auto& own = self->channels_[static_cast<std::size_t>(slot)];
    auto& ch = own[channel];
    const Launched& op = ch.queue[ch.head];
    done_channel = op.instr->channel;  // the same op on every member (their programs match)
    if (self->opt_.trace) {
      Span sp = self->span_of(r, static_cast<std::uint8_t>(1 + done_channel), *op.instr, start, now);
      sp.microbatch = op.microbatch;
      sp.phase = op.phase;
      self->record(sp);
    }
    ++own[done_channel].completed;
    ch.busy = false;
    if (++ch.head < ch.queue.size()) {
      self->start_async(r, channel, now);
    } else {
      ch.queue.clear();
      ch.head = 0;
    }
  }
  for (std::int32_t slot : g.resuming) {
    RankState& r = self->ranks_[static_cast<std::size_t>(slot)];
    if (r.block == Block::wait && r.wait_channel == done_channel) self->resume_after_wait(r);
  }
}

void Replay::resume_after_wait(RankState& r) {
  const Instr& in = current_list(r)[r.pc];
  if (!wait_satisfied(r, in)) return;
  auto& st = tally_[static_cast<std::size_t>(r.slot)];
  // The rank may have blocked ahead of the clock: it goes on at its own time or now.
  const Tick now = std::max(engine_.now(), r.wait_start);
  st.exposed[static_cast<int>(in.dim)] += now - r.wait_start;
  r.t = now;
  continue_after_block(r);
}

void Replay::send(RankState& r, const Instr& in) {
  const auto& s = r.prog->steps[static_cast<std::size_t>(r.step)];
  const int p = static_cast<int>(program_.stages.size());
  const int v = static_cast<int>(r.prog->chunks.size());
  const PipelinePeer dst = pipeline_destination(program_.schedule, s.phase, r.stage, s.chunk, p, v);
  if (dst.stage < 0) return;
  Coords c = layout_.coords(r.rank);
  c.pp = dst.stage;
  const int dst_rank = layout_.rank_of(c);
  stats_[static_cast<std::size_t>(r.slot)].wire[static_cast<int>(Dim::pp)] += in.bytes;
  const std::uint32_t idx = take_slot(msg_free_, msg_pool_, msg_dst_);
  msg_pool_[idx] = {msg_key(s.phase, s.microbatch, dst.chunk), r.t, 0, r.rank, in.label, in.bytes};
  msg_dst_[idx] = slot_of_rank_[dst_rank];
  if (s.paired) {
    mail_[static_cast<std::size_t>(r.slot)].held_sends.push_back(idx);
    return;
  }
  start_send(idx, r.t);
}

void Replay::start_send(std::uint32_t idx, Tick at) {
  if (at > engine_.now()) {
    engine_.schedule(at, &Replay::on_send_start, this, idx);
    return;
  }
  const Msg& m = msg_pool_[idx];
  const int dst_rank = ranks_[static_cast<std::size_t>(msg_dst_[idx])].rank;
  transport_.start_p2p(engine_, m.src_rank, dst_rank, pair_shape(m.src_rank, dst_rank), m.bytes, &Replay::on_deliver,
                       this, idx);
}

void Replay::on_send_start(void* ctx, std::uint64_t arg) {
  auto* self = static_cast<Replay*>(ctx);
  const Msg& m = self->msg_pool_[arg];
  const int dst_rank = self->ranks_[static_cast<std::size_t>(self->msg_dst_[arg])].rank;
  self->transport_.start_p2p(self->engine_, m.src_rank, dst_rank, self->pair_shape(m.src_rank, dst_rank), m.bytes,
                             &Replay::on_deliver, self, arg);
}

void Replay::on_deliver(void* ctx, std::uint64_t arg) {
  auto* self = static_cast<Replay*>(ctx);
  Msg m = self->msg_pool_[arg];
  m.arrival = self->engine_.now();
  const std::int32_t slot = self->msg_dst_[arg];
  if (self->opt_.trace && m.src_rank >= 0) {
    // The message key names the consuming step: its phase and micro-batch are the sender's.
    const bool backward = static_cast<Phase>(m.key & 3) != Phase::forward;  // msg_key layout
    self->record({m.src_rank, static_cast<std::uint8_t>(1 + static_cast<int>(Dim::pp)),
                  backward ? SpanPhase::backward : SpanPhase::forward, kNoFlags, static_cast<std::uint8_t>(Dim::pp),
                  m.label, -1, static_cast<std::int32_t>((m.key >> 2) & 0xffffffffu),
                  self->ranks_[static_cast<std::size_t>(slot)].rank, m.bytes, m.sent, m.arrival});
  }
  self->msg_free_.push_back(static_cast<std::uint32_t>(arg));
  RankState& r = self->ranks_[static_cast<std::size_t>(slot)];
  if (r.block == Block::recv && r.wait_key == m.key) {
    auto& st = self->tally_[static_cast<std::size_t>(slot)];
    // Waiting until the producer sent is the bubble; the transfer after that is
    // exposed pipeline communication.
    // A rank that blocked ahead of the clock waits only from its own time.
    const Tick resume = std::max(m.arrival, r.wait_start);
    const Tick waited = resume - r.wait_start;
    const Tick bubble = std::clamp<Tick>(m.sent - r.wait_start, 0, waited);
    st.bubble += bubble;
    st.exposed[static_cast<int>(Dim::pp)] += waited - bubble;
    r.t = resume;
    self->continue_after_block(r);
    return;
  }
  self->mail_[static_cast<std::size_t>(r.slot)].inbox.push_back(m);
}

}  // namespace ptsim::sim
