// The replay: runs every simulated rank's generated program on the event engine.
// Each rank has a compute stream (the program counter: compute ops and blocking
// collectives run on it in order) and one asynchronous stream per dimension (DP
// gradient buckets, ZeRO parameter gathers). Collectives are rendezvous of their
// group; pipeline messages are delivered to the receiving rank's inbox.
//
// A rank runs ahead through compute ops without events and synchronises with the
// engine's clock only where it meets another rank (collective, send, receive,
// async launch, wait), so events scale with communication, not with kernels.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "hw/net/layout.h"
#include "sim/core/collective_cost.h"
#include "sim/core/engine.h"
#include "sim/core/program.h"
#include "sim/core/transport.h"

namespace ptsim::sim {

// What the replay adds up per rank while it runs (Replay::Tally keeps it on two cache
// lines: busy, bubble and exposed, which a resume updates, on the first).
struct RankTally {
  Tick busy = 0;                         // compute stream busy with compute ops
  Tick bubble = 0;                       // compute stream waiting on pipeline dependencies
  std::array<Tick, kNumDims> exposed{};  // compute stream waiting on communication
  Bytes mem_now = 0, mem_peak = 0;
  Bytes activations_now = 0, activations_at_peak = 0;
  Bytes buffers_now = 0, buffers_at_peak = 0;

  // The memory fields (what Replay::note_memory keeps), compared or taken as a whole.
  bool same_memory(const RankTally& o) const {
    return mem_now == o.mem_now && mem_peak == o.mem_peak && activations_now == o.activations_now &&
           activations_at_peak == o.activations_at_peak && buffers_now == o.buffers_now &&
           buffers_at_peak == o.buffers_at_peak;
  }
  void take_memory(const RankTally& o) {
    mem_now = o.mem_now, mem_peak = o.mem_peak;
    activations_now = o.activations_now, activations_at_peak = o.activations_at_peak;
    buffers_now = o.buffers_now, buffers_at_peak = o.buffers_at_peak;
  }
  // Adds the time another rank's sums gained from `then` to `now` (busy, bubble, exposed).
  void add_time(const RankTally& now, const RankTally& then) {
    busy += now.busy - then.busy;
    bubble += now.bubble - then.bubble;
    for (int d = 0; d < kNumDims; ++d) exposed[d] += now.exposed[d] - then.exposed[d];
  }
};

struct RankStats : RankTally {
  Tick end = 0;  // when the rank finished its iteration
  int rank = 0;
  int stage = 0;
  std::array<Bytes, kNumDims> wire{};  // bytes sent on the wire
};

// Where in its program a traced span ran: a step of the schedule or outside them.
enum class SpanPhase : std::uint8_t { forward, backward, prologue, epilogue };

// One traced interval of a rank's stream, with what the trace and the report show of it.
struct Span {
  std::int32_t rank;
  std::uint8_t stream;  // 0 = compute, 1 + channel (Dim, kGatherChannel or kExpertGatherChannel) for async/comm streams
  SpanPhase phase;
  std::uint8_t flags;         // the instruction's InstrFlags (kRecompute marks recomputed work)
  std::uint8_t dim;           // communication: its Dim; kComputeSpan for a compute kernel
  std::uint16_t label;        // index into Program::labels
  std::int32_t layer;         // transformer layer, -1 outside one (embedding, head, optimizer, fused)
  std::int32_t microbatch;    // -1 outside the schedule's steps
  std::int32_t peer;          // pipeline send: the receiving rank; -1 otherwise
  Bytes bytes;                // communication: collective buffer or message bytes; 0 for compute
  Tick start, end;
};
inline constexpr std::uint8_t kComputeSpan = 0xff;

// The work bound of one run (README "Reliability"): at most this many engine events. The
// largest example, GPT-3 1T on 16,384 GPUs every rank with link sharing, ran 10.4 M events
// when it was set (2.1 M since deferred starts and inline collectives; README "Performance"),
// and the engine runs 10-30 M events/s, so the bound stops a runaway input after about one
// to two minutes instead of hours.
inline constexpr std::uint64_t kMaxEvents = 1'000'000'000;
// ReplayOptions::progress is called every this many events (a few ms of simulation apart).
inline constexpr std::uint64_t kProgressEvents = 1u << 18;

// Thrown when a run would exceed (estimated before it starts) or exceeds its event bound;
// simulate() turns it into an input error naming the scenario.
class EventLimitError : public std::runtime_error {
 public:
  // `events`: the events run so far, or (estimated) the synchronising instructions counted.
  EventLimitError(std::uint64_t events, std::uint64_t limit, bool estimated)
      : std::runtime_error("event limit"), events_(events), limit_(limit), estimated_(estimated) {}
  std::uint64_t events() const { return events_; }
  std::uint64_t limit() const { return limit_; }
  bool estimated() const { return estimated_; }

 private:
  std::uint64_t events_, limit_;
  bool estimated_;
};

struct ReplayOptions {
  // Simulate one representative rank per pipeline stage (tp = cp = dp index 0):
  // every other rank runs the identical program on identical links, so its
  // timeline is the same (DESIGN.md "Symmetric ranks may be folded").
  bool fold = false;
  bool trace = false;
  int trace_max_ranks = 16;  // ranks shown in the trace: the first of each stage, then others up to this
  std::uint64_t max_events = kMaxEvents;
  // Called every kProgressEvents simulated events with the events so far and the simulated
  // time (ptsim run's progress line on stderr); empty: never.
  std::function<void(std::uint64_t events, Tick now)> progress;
  // cluster.slow: every compute op of global rank i takes compute_scale[i] × its
  // duration (empty: all 1). Slow ranks break the symmetry folding relies on, so
  // it cannot be combined with `fold`.
  std::vector<double> compute_scale;
  // Lockstep sessions (Replay::start_session): the same results at a fraction of the cost;
  // off only to test that.
  bool lockstep_sessions = true;
  // A tensor-parallel collective whose last member arrives ahead of the clock is handed to
  // the transport then (Transport::start_collective_at) instead of by an event at its start:
  // the same results with fewer events; off only to test that.
  bool deferred_starts = true;
  // A lockstep session's tensor-parallel collective whose time the transport knows at once
  // (Transport::run_inline) is run through like compute, without an event: the same results
  // with fewer events; off only to test that, and where a transport throws InlineConflict.
  bool inline_collectives = true;
  // With inline_collectives: a tensor-parallel collective outside a session that the
  // transport can time when its last member arrives (Transport::run_inline) ends without an
  // event too; its members run on from its end (Replay::finish_blocking). The same results
  // with fewer events (the members of a ZeRO-3 run's groups seldom resume in one state: each
  // rank's async gathers end when its own network allows); off only to test that, and
  // after an InlineConflict (more ranks run ahead of the clock this way).
  bool inline_groups = true;
};

// Sets Instr::duration of every data- and expert-parallel launch of `p` to that
// collective's isolated time on `coll` (the closed form, its group on the stage's ranks):
// how long the replay expects it to hold SMs under the rank's compute
// (Instr::duration_under_comm). Without it a launch holds them for no time.
void expect_collective_times(Program& p, const Layout& layout, const CollectiveCost& coll);

class Replay {
 public:
  Replay(const Program& program, const Layout& layout, int num_microbatches, Transport& transport, ReplayOptions opt);
  // Runs the iteration to completion. Throws std::logic_error on a deadlock (a
  // schedule bug), naming a blocked rank and what it waits for.
  void run();
  // The synchronising instructions (collective, send, receive, launch, wait) of every simulated
  // rank's iteration: each costs the engine 1/9 to 1 event (measured: scenarios/default.yaml
  // 12.6 M instructions, 3.1 M events; mixtral-8x7b 236 k, 152 k; search_small.yaml 560, 68: a
  // tensor-parallel collective alone on its node's links costs one event for its 8 members).
  // run() throws EventLimitError before it starts when this exceeds kEventsPerInstrSlack times
  // the bound (the run would certainly pass it), and once the engine passes the bound.
  std::uint64_t sync_instructions() const;
  static constexpr std::uint64_t kEventsPerInstrSlack = 16;

  Tick iteration_ticks() const { return iteration_; }
  const std::vector<RankStats>& stats() const { return stats_; }
  const std::vector<Span>& spans() const { return spans_; }
  std::uint64_t events() const { return engine_.events_executed(); }
  bool folded() const { return opt_.fold; }
  std::uint64_t sessions() const { return sessions_started_; }  // lockstep sessions begun
  // Of them, those whose members' async collectives were expected to end at different times.
  std::uint64_t skewed_sessions() const { return skewed_sessions_; }

 private:
  enum class Block : std::uint8_t { none, collective, recv, wait, finished };

  struct Msg {
    std::uint64_t key;
    Tick sent, arrival;
    std::int32_t src_rank;
    std::uint16_t label;
    Bytes bytes;
  };
  struct Launched {  // an op on an async stream and when the rank launched it
    const Instr* instr;
    Tick at;
    std::int32_t microbatch;  // the launching step's (for the trace; -1 when not tracing)
    SpanPhase phase;
  };
  struct Channel {  // a rank's async stream of one dimension
    // Ops launched and not finished, from `head` on; emptied whenever it drains, so it stays
    // in cache (a ZeRO-3 run's launches wrote fresh memory, a miss each, when it only grew).
    std::vector<Launched> queue;
    std::size_t head = 0;
    bool busy = false;
    int launched = 0, completed = 0;
    Tick until = 0;  // its collectives are expected to run until then (Replay::expect_comm)
  };
  // The first cache line holds what every resume reads and writes (on_group_done,
  // advance), the second what a collective or a wait reads (gid, block); a rank's pipeline
  // messages live apart (Mail), so that 16k ranks' states take 2 MiB.
  struct alignas(64) RankState {
    Tick t = 0;
    const std::vector<Instr>* list = nullptr;  // list_of(step), kept with `step` (read per instruction)
    std::size_t pc = 0;
    Tick wait_start = 0;
    Tick comm_until = 0;  // an async collective of the rank is expected to run until then
    double scale = 1.0;   // compute slowdown (ReplayOptions::compute_scale)
    const StageProgram* prog = nullptr;
    int step = -1;          // -1 prologue, [0, steps) schedule, steps epilogue
    std::int32_t slot = 0;  // index in ranks_ (and tally_, stats_, channels_, mail_)
    Block block = Block::none;
    Dim wait_dim = Dim::tp;
    // Leads a lockstep session of its `lead_dim` group (Replay::start_session): the other
    // members are frozen and replayed from this rank's state when the session ends.
    bool leading = false;
    Dim lead_dim = Dim::tp;
    int wait_channel = 0;
    std::array<int, kNumDims> gid{};  // the rank's group in every dimension
    int rank = 0;
    int stage = 0;
    std::uint64_t wait_key = 0;
  };
  static_assert(sizeof(RankState) == 128, "RankState: two cache lines");
  struct Mail {
    std::vector<Msg> inbox;
    std::vector<std::uint32_t> held_sends;  // paired forward's outputs (msg_pool_ slots), sent at the pair's end
  };
  // A rank's running sums while the run goes (a resume updates the first line, memory
  // events the second), apart from RankStats' other fields; copied into RankStats when the
  // run ends. Wire bytes go to RankStats directly (once per group collective,
  // GroupState::wire, and per pipeline message).
  struct alignas(64) Tally : RankTally {};
  static_assert(sizeof(Tally) == 128, "Tally: two cache lines");
  using Channels = std::array<Channel, kNumChannels>;
  struct GroupState {
    int expected = 0;
    int arrived = 0;
    Tick start = 0;
    CollectiveKind coll = CollectiveKind::all_reduce;
    Bytes bytes = 0;
    std::uint16_t label = 0;
    bool shape_known = false;
    GroupShape shape;
    // Bytes on the wire of the group's collectives so far, each member's share (every member
    // sends the same): added to the members' RankStats::wire when the run ends, so that a
    // finished collective does not touch every member's statistics.
    Bytes wire = 0;
    std::vector<std::int32_t> waiters, resuming;
    // A lockstep session (Replay::start_session): the frozen members, and the leader's
    // running sums when it began.
    std::vector<std::int32_t> followers;
    RankTally base;
    // The members' async collectives may be expected to end at different times (each rank's
    // comm_until, from when its own gathers ended): the earliest of them (each at least the
    // session's start), and the leader's own, which it keeps here while it runs the session
    // with the latest (Replay::session_uniform).
    Tick session_lo = 0, lead_comm_until = 0;
  };

  const std::vector<Instr>& current_list(const RankState& r) const { return *r.list; }
  const std::vector<Instr>& list_of(const RankState& r) const;  // of r.step
  void set_step(RankState& r, int step) {
    r.step = step;
    r.list = &list_of(r);
  }
  // Whether `in` is left out in r's current step (work of some micro-batches only,
  // kMicrobatchFlags). Inline test of the flags, which most instructions lack.
  bool skipped(const RankState& r, const Instr& in) const {
    return (in.flags & kMicrobatchFlags) && skipped_in_step(r, in);
  }
  bool skipped_in_step(const RankState& r, const Instr& in) const;
  void release_held_sends(RankState& r);
  void start_send(std::uint32_t idx, Tick at);
  // Runs the rank from its current instruction until it blocks or finishes, then (unless
  // already doing so further up) the ranks queued in ready_ meanwhile.
  void advance(RankState& r);
  void run_rank(RankState& r);
  // An instruction that meets other ranks or the clock; false when the rank blocks.
  bool interact(RankState& r, const Instr& in, Tally& st);
  bool collective_on_compute_stream(RankState& r, const Instr& in, Tally& st);
  // A data- or expert-parallel collective launched on an async stream at r.t: until when
  // its NCCL kernel is expected to hold SMs (Instr::duration_under_comm).
  static void expect_comm(RankState& r, Channel& ch, const Instr& in);
  // How long compute instruction `in` takes starting at r.t.
  Tick compute_ticks(const RankState& r, const Instr& in) const {
    if (r.scale == 1.0 && (r.t >= r.comm_until || in.duration_under_comm() <= in.duration)) return in.duration;
    return compute_ticks_slow(r, in);
  }
  Tick compute_ticks_slow(const RankState& r, const Instr& in) const;
  // Compute `in` under a collective's SMs for its first `window` ticks, then at its own rate.
  static Tick ticks_under(const Instr& in, Tick window, double scale);
  void run_beside(RankState& r, Tally& st, Tick start, Tick end);
  // After a blocking instruction completed at r.t: on to the next one, or finished.
  void continue_after_block(RankState& r);
  // Lockstep sessions. The members of a blocking collective's group that resume from it
  // in the same state (program, step, instruction, compute rate, memory) run the same
  // instructions at the same times for as long as they meet nothing but that group's
  // blocking collectives and compute that takes each of them the same time (their async
  // collectives may be expected to end at different times: session_uniform): the first
  // member (the leader) runs for all of them and its arrivals count for the group, while
  // the others stay frozen. At the first other instruction (a send, receive, launch, wait,
  // another group's collective) or the end, end_session gives each frozen member the
  // leader's state and the leader's sums since the start; they run on after the leader
  // (ready_), in the order the members resumed. Nothing is reordered (test: every JSON
  // identical with and without sessions), and a tensor-parallel group's resume costs one
  // member instead of eight. Off when tracing (each traced rank records its own spans) and
  // when folded.
  bool start_session(GroupState& g, Dim d, Tick now);
  void end_session(RankState& leader, bool finished);
  // Whether compute `in` takes every member of r's session the same time: members whose async
  // collectives are expected to end at different times run alike while the compute is
  // wholly under every member's (or none's) collective; the leader ends the session before
  // the first compute that would set them apart, and each member runs it on its own.
  bool session_uniform(const RankState& r, const Instr& in) const;
  void mark_finished(RankState& r);
  bool next_instr(RankState& r) {
    ++r.pc;
    return r.pc < r.list->size() || next_step(r);
  }
  // At the end of r's current instruction list: on to the next step's; false when done.
  bool next_step(RankState& r);
  // `channel` < 0: the compute stream (blocking collective); else an async stream.
  void arrive(RankState& r, Dim d, int channel, const Instr& in, Tick at);
  // The stream that runs channel c's ops: the DP stream for the gather channel when the
  // framework runs the DP group's collectives on one stream (Program::dp_one_stream).
  int stream_of(int c) const {
    if (c < kGatherChannel || !program_.dp_one_stream) return c;
    return static_cast<int>(channel_dim(c));
  }
  void start_async(RankState& r, int channel, Tick at);
  void take_members(GroupState& g, Dim d, int gid);
  void settle_members(GroupState& g, Dim d, Tick start, Tick now);
  void finish_blocking(GroupState& g, Dim d, Tick start, Tick end);
  void run_ready();
  // The members' states are scattered over 16k-65k ranks: the loops over a finished group's
  // members fetch them kPrefetchAhead members ahead while earlier ones run on (their cache
  // misses were a fifth of a 16k every-rank run; 4 ahead measured a little better than 1 on
  // 16k at 512 sequences). Inlined by force: GCC 12 took an out-of-line lambda that only
  // prefetches for a function without effects and deleted its calls.
  static constexpr std::size_t kPrefetchAhead = 4;
  __attribute__((always_inline)) void prefetch_member(const GroupState& g, std::size_t i) const {
    if (i >= g.resuming.size()) return;
    const auto slot = static_cast<std::size_t>(g.resuming[i]);
    __builtin_prefetch(&ranks_[slot]);
    __builtin_prefetch(reinterpret_cast<const char*>(&ranks_[slot]) + 64);
    __builtin_prefetch(&tally_[slot]);
  }
  bool wait_satisfied(const RankState& r, const Instr& in) const;
  void send(RankState& r, const Instr& in);
  void resume_after_wait(RankState& r);
  // The state of group `gid` of dimension d (channel < 0) or of async stream `channel`.
  GroupState& group(Dim d, int channel, int gid) {
    auto& v =
        channel >= 0 ? async_groups_[static_cast<std::size_t>(channel)] : sync_groups_[static_cast<std::size_t>(d)];
    if (v.empty()) [[unlikely]]
      make_groups(v, channel < 0 ? d : channel_dim(channel));
    return v[static_cast<std::size_t>(gid)];
  }
  // The dimension whose groups async stream `channel` runs collectives of.
  static Dim channel_dim(int channel) {
    return channel == kGatherChannel ? Dim::dp : channel == kExpertGatherChannel ? Dim::edp : static_cast<Dim>(channel);
  }
  void make_groups(std::vector<GroupState>& groups, Dim dim);
  const GroupShape& shape_of(GroupState& g, Dim d, int gid);
  GroupShape pair_shape(int src, int dst) const;
  static std::uint64_t msg_key(Phase phase, int microbatch, int chunk);
  void note_memory(RankState& r, const Instr& in, bool alloc);
  SpanPhase current_phase(const RankState& r) const;
  int current_microbatch(const RankState& r) const;  // -1 outside the steps
  // The span of `in` on `stream` of r from start to end, in r's current step.
  Span span_of(const RankState& r, std::uint8_t stream, const Instr& in, Tick start, Tick end) const;
  // Keeps `s` when tracing its rank.
  void record(const Span& s);

  static void on_resume(void* ctx, std::uint64_t arg);
  static void on_group_done(void* ctx, std::uint64_t arg);
  static void on_group_start(void* ctx, std::uint64_t arg);
  static void on_send_start(void* ctx, std::uint64_t arg);
  static void on_deliver(void* ctx, std::uint64_t arg);

  const Program& program_;
  Layout layout_;
  int m_;
  Transport& transport_;
  ReplayOptions opt_;
  Engine engine_;
  std::vector<RankState> ranks_;            // simulated ranks
  // Their async streams, by slot: kept out of RankState, whose hot fields every finished
  // group's members read (a 16k-rank run was faster with the smaller record).
  std::vector<Channels> channels_;
  std::vector<std::int32_t> slot_of_rank_;  // global rank -> index in ranks_ (-1 if folded away)
  std::vector<Tally> tally_;                // by slot, while running
  std::vector<Mail> mail_;                  // by slot
  std::vector<RankStats> stats_;
  std::array<std::vector<GroupState>, kNumDims> sync_groups_;
  std::array<std::vector<GroupState>, kNumChannels> async_groups_;
  std::vector<Msg> msg_pool_;
  std::vector<std::int32_t> msg_dst_;
  std::vector<std::uint32_t> msg_free_;
  std::vector<Span> spans_;
  std::vector<char> traced_;
  int finished_ = 0;
  Tick iteration_ = 0;
  bool sessions_ = false;  // lockstep sessions on (not tracing, not folded)
  std::uint64_t sessions_started_ = 0, skewed_sessions_ = 0;
  bool paired_steps_ = false;           // a schedule with F&B pairs (held sends)
  // Ranks to run on once the one running blocks (advance): members of a collective run
  // inline (arrive, finish_blocking), frozen members a session's end gave back (end_session).
  struct Ready {
    std::int32_t slot;
    bool after_block;  // on from its next instruction (continue_after_block), else from its current one
  };
  std::vector<Ready> ready_;
  bool draining_ = false;
};

}  // namespace ptsim::sim
