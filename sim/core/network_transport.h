// NetworkTransport: every collective and pipeline message of the replay becomes steps
// of flows on the cluster graph (NetworkModel), and transfers that overlap in time
// share link bandwidth max-min fairly in one hw::net::FlowNetwork driven by the sim
// Engine — a DP all-reduce and a PP send on the same NIC slow each other, and
// cross-leaf traffic queues on an oversubscribed leaf's uplinks.
//
// Model, and why it is fast enough for every rank of a 1,024-GPU iteration:
//  - A transfer runs its expansion's distinct steps ("phases") in order. A phase of
//    `repeat` identical steps (a ring all-reduce: one phase of 2(n−1) steps of S/n)
//    runs as one set of flows carrying repeat × bytes after repeat × α of latency
//    (α = the step's latency: the expansion's NCCL figure, else its largest path
//    latency; in the FlowNetwork too, not the links' own latency): on an idle network
//    that is exactly the closed form repeat·(α + b/rate) of hw/net/collective_time.h,
//    and a collective that meets traffic does not start moving bytes early. Under sharing the
//    latency is charged up front, not interleaved with the transfers (an
//    approximation that keeps one rate computation per phase instead of one per step).
//  - Fast path: a phase whose links carry nothing else (most TP collectives, inside
//    one NVSwitch node) is not put into the FlowNetwork at all: it owns its links and
//    completes after its isolated time, one engine event. When a later transfer needs
//    one of those links, the owner is "promoted": its flows enter the FlowNetwork with
//    the bytes they have left (they ran at their isolated rates until then), and from
//    then on both share max-min. So the max-min solver only ever sees transfers that
//    really overlap.
//  - Components: a phase's flows fall into components that share no link with each
//    other (a ring's flows over distinct NICs; two flows that ECMP puts on one spine
//    link are one component). Max-min allocations decompose over components, so each
//    is fast or in the FlowNetwork on its own: a phase starting where one component
//    meets traffic sends only that component's flows to the FlowNetwork, and a later
//    transfer promotes only the components it touches. A ZeRO-3 all-gather ring over
//    eight nodes whose one NIC carries a pipeline send puts one flow into the solver,
//    not eight. The phase ends when its last component does (its fast components at
//    the latest of their isolated times, one engine event). The components still on
//    the fast path run at their isolated rates, as a whole fast phase does.
//  - Private phases: a group's phase on links that no other group's (or p2p) template
//    crosses, e.g. a TP collective on its node's NVSwitch ports, and while no other
//    transfer of that group is in flight, cannot meet other traffic, so it runs the fast
//    path without reading or writing its links' use at start and end, and its link bytes
//    are added up per phase (private_repeats) and spread over the links when a report
//    asks (one miss chain instead of three per transfer: at 16k GPUs millions of TP
//    collectives). A link's owner (link_owner_) is the one group whose templates cross
//    it; a template that crosses another group's link or a shared one makes all of its
//    links shared, which bumps epoch_: every phase re-checks its links, and a private
//    transfer in flight registers on its links (becomes an ordinary fast-path phase), so
//    later traffic sees and promotes it exactly as before.
//  - A connection split over queue pairs (cluster.qps_per_connection) is one flow over
//    the links of its queue pairs' equal-cost paths (a link that k of them cross takes k
//    shares: FlowNetwork::add_flow's mult), at one rate per queue pair: NCCL's IB transport
//    splits each message over the QPs (NCCL_IB_SPLIT_DATA_ON_QPS=1) or sends the messages
//    round-robin over them (=0), and a connection's NCCL_STEPS buffer slots are consumed in
//    order (src/transport/net_ib.cc, src/device/prims_simple.h), so no QP runs ahead of
//    the slowest: each moves at that one's rate. Alone, the slowest QP sets the time either
//    way (the closed form); under contention the others no longer finish early, and a
//    16-QP connection costs the FlowNetwork one flow, not 16 that each finish at their
//    own time (Llama 3 405B on 16,384 GPUs: minutes -> seconds, README "Performance").
//  - Identical flows of a step (same path and size, so the same start) are one
//    weighted FlowNetwork flow (FlowNetwork::add_flow's weight): k of them take k
//    shares on every link, which is the per-flow max-min answer at 1/k of the cost.
//  - The FlowNetwork's next completion is one engine event, re-scheduled (the stale
//    one cancelled with Engine::cancel) whenever flows are added; seconds <-> Tick
//    with hw/units.h, rounding up so the network never lags the engine.
// Statistics: bytes per directed link (fast and shared flows alike) and per
// dimension; report() lists the busiest links by utilisation = bytes / (bandwidth ×
// elapsed) — simulate() appends it to the text summary.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "hw/net/bottleneck.h"
#include "hw/net/flow_network.h"
#include "sim/core/network_cost.h"
#include "sim/core/transport.h"

namespace ptsim::sim {

class NetworkTransport : public Transport {
 public:
  // `cost` answers wire_bytes (CONTRACT §3 accounting); the model gives routes.
  NetworkTransport(NetworkModel& model, const CollectiveCost& cost);

  void start_collective(Engine& engine, CollectiveKind c, Dim d, int gid, const GroupShape& shape, Bytes S,
                        Engine::Callback done, void* ctx, std::uint64_t arg) override;
  // A private first phase with nothing else of its group in flight (the private fast path
  // start_phase would take at `at`): begun now, dated `at`, its end scheduled.
  bool start_collective_at(Engine& engine, Tick at, CollectiveKind c, Dim d, int gid, const GroupShape& shape, Bytes S,
                           Engine::Callback done, void* ctx, std::uint64_t arg) override;
  // Every phase private with nothing else of its group in flight (what the private fast
  // path would run, phase after phase, at `at`): its isolated duration, its bytes counted
  // as on_fast_done counts them, no transfer and no event. Until its end, a template that
  // takes one of the group's links (claim_links) throws InlineConflict: traffic could have
  // met it there.
  Tick run_inline(Engine& engine, Tick at, CollectiveKind c, Dim d, int gid, const GroupShape& shape, Bytes S) override;
  void start_p2p(Engine& engine, int src, int dst, const GroupShape& pair, Bytes bytes, Engine::Callback done,
                 void* ctx, std::uint64_t arg) override;
  Bytes wire_bytes(CollectiveKind c, Dim d, const GroupShape& shape, Bytes S) const override {
    return cost_.wire_bytes(c, shape, S);
  }
  std::vector<std::string> report() const override;

  // Statistics.
  // The n busiest links (hw::net::busiest_links) over the whole replay. fabric_only:
  // only links between NICs and fabric switches (inter-node traffic, where plans
  // differ), not GPU / NVSwitch / PCIe ports.
  std::vector<hw::net::LinkUsage> busiest_links(std::size_t n, bool fabric_only = false) const;
  bool is_fabric_link(hw::net::LinkId l) const;
  Bytes link_bytes(hw::net::LinkId l) const;
  Bytes dim_bytes(Dim d) const;  // bytes on the wire (every link a flow's path starts on counted once)
  Seconds elapsed() const { return last_time_; }
  std::size_t transfers() const { return transfers_started_; }
  std::size_t shared_phases() const { return shared_phases_; }  // phases with flows in the FlowNetwork
  std::size_t shared_flows() const { return shared_flows_; }    // flows put into the FlowNetwork

 private:
  struct FlowT {
    std::vector<hw::net::LinkId> path;
    Seconds latency = 0;
    Bytes bytes = 0;          // per repeat, of each of its `count` flows
    double rate = 0;          // isolated rate (equal share of its most loaded link)
    std::uint32_t count = 1;  // identical flows of the step (same path and size) it stands for
    // Queue pairs of one connection (cluster.qps_per_connection), each carrying `bytes`
    // on its own equal-cost path: `path` holds the links of all their paths, each once,
    // `mult` how many of them cross it (empty: one each), `rate` the slowest one's; they
    // move in lockstep (see the header).
    std::uint32_t qps = 1;
    std::vector<std::uint16_t> mult;
    std::uint32_t mult_at(std::size_t k) const { return mult.empty() ? 1 : mult[k]; }
  };
  // Flows of a phase that share links (transitively); none shares a link with another
  // component's. Its links are PhaseT::links[link_begin, link_end), its flows
  // PhaseT::comp_flows[flow_begin, flow_end) (indices into Template::flows).
  struct Comp {
    Seconds fast_time = 0;  // isolated duration, from the phase's start
    Bytes wire_bytes = 0;   // per repeat
    std::uint32_t link_begin = 0, link_end = 0, flow_begin = 0, flow_end = 0;
  };
  struct PhaseT {
    // What a private phase reads, first (one cache line).
    Seconds fast_time = 0;  // isolated duration of the whole phase
    std::int64_t repeat = 1;
    Bytes wire_bytes = 0;                     // per repeat, Σ bytes of its flows that cross a link
    mutable double private_repeats = 0;       // repeats run privately, link bytes not yet on the links
    mutable std::uint32_t private_epoch = 0;  // epoch_ when `private_links` was decided
    mutable bool private_links = false;       // every link owned by the template's group
    Seconds alpha = 0;
    std::uint32_t flow_begin = 0, flow_end = 0;
    std::vector<hw::net::LinkId> links;  // distinct links of the phase, grouped by component
    std::vector<Bytes> link_bytes;       // per repeat, on each of `links` (fast-path accounting)
    std::vector<Comp> comps;
    std::vector<std::uint32_t> comp_flows;
  };
  struct Template {
    std::vector<PhaseT> phases;
    std::vector<FlowT> flows;
    std::uint32_t group = kSharedLink;  // the group token (group_token) of a group's template
  };
  // Where a component of a transfer's current phase is: on the fast path (owning its
  // links), in the FlowNetwork, or finished.
  enum class CompMode : std::uint8_t { fast, net, done };
  // link_owner_ values besides a group token ((dim << 24) | gid).
  static constexpr std::uint32_t kUnowned = 0xffffffffu, kSharedLink = 0xfffffffeu;
  static std::uint32_t group_token(Dim d, int gid) {
    return (static_cast<std::uint32_t>(d) << 24) | static_cast<std::uint32_t>(gid);
  }
  struct Transfer {
    const Template* t = nullptr;
    std::size_t phase = 0;
    int tag = 0;
    Engine::Callback done = nullptr;
    void* ctx = nullptr;
    std::uint64_t arg = 0;
    Tick phase_tick = 0;        // its phase's start
    Engine::Handle fast_event;  // the fast components' end, while fast_pending
    Tick fast_at = 0;
    std::uint32_t outstanding = 0;      // its flows in the FlowNetwork
    std::uint32_t group = kSharedLink;  // group token, or kSharedLink (p2p)
    bool priv = false;                  // fast path without registering on its links
    bool fast_pending = false;
    bool shared = false;              // its phase has met traffic (counted in shared_phases_)
    bool comps_recorded = false;      // fast_comp_ holds the component of each of its fast links (else one)
    std::vector<CompMode> comp_mode;  // by component of the phase, while `shared`
  };
  struct Key {
    std::uint64_t a, b, c;
    bool operator==(const Key&) const = default;
  };
  // Templates are looked up once per transfer (millions at 16k GPUs): an open-addressing
  // table (power-of-two size, linear probing) avoids the modulo and the node chase of
  // std::unordered_map.
  struct Slot {
    Key key{};
    Template* t = nullptr;  // nullptr: empty
  };
  static std::uint64_t hash(const Key& k);
  // The last two templates each group used, by dimension and group id: a group
  // alternates between few collectives (an all-gather and a reduce-scatter of one size
  // under sequence parallelism), and at 16k GPUs the table probe was a cache miss per
  // transfer (8 % of the run) plus a member list built per call; the groups' memos are
  // small enough to stay cached. The same Template as the table's, so results do not move.
  // It also counts the group's transfers in flight (private phases need to be alone).
  struct GroupMemo {
    std::uint64_t sbits[2] = {0, 0};
    const Template* t[2] = {nullptr, nullptr};
    const PhaseT* first[2] = {nullptr, nullptr};  // t[i]'s first phase (fetched with t[i]: two misses at once)
    CollectiveKind c[2] = {};
    std::uint8_t next = 0;  // the entry to replace
    std::uint32_t inflight = 0;                // the group's transfers in flight
    std::uint32_t private_xfer = 0xffffffffu;  // the one running privately, if any
  };
  GroupMemo& memo_of(std::uint32_t token) { return memo_[token >> 24][token & 0xffffffu]; }
  // The last two pipeline sends of each source rank (a stage sends to its two
  // neighbours, one activation or gradient size each): the template without the table.
  struct P2pMemo {
    std::uint64_t sbits[2] = {0, 0};
    const Template* t[2] = {nullptr, nullptr};
    std::int32_t dst[2] = {-1, -1};
    std::uint8_t next = 0;
  };
  std::vector<P2pMemo> p2p_memo_;  // by source rank
  const Template& group_template(CollectiveKind c, Dim d, int gid, Bytes S);
  // Per link: who uses it, and the bytes fast-path phases put on it; one cache line
  // read per link in start_phase / on_fast_done.
  struct LinkUse {
    std::uint32_t fast_owner;  // transfer with a fast component on it, or kNone
    std::uint32_t net_users;   // components in the FlowNetwork using it
    Bytes bytes;               // fast-path bytes (the FlowNetwork counts its own)
  };

  // `group`: the group token of a group's collective, kSharedLink for a p2p.
  const Template& get_template(CollectiveKind c, Dim d, std::int64_t id, std::span<const int> ranks, Bytes S,
                               std::uint32_t group);
  // `at`: its start, now unless later (start_collective_at, on the private path only).
  void begin(Engine& e, const Template& t, int tag, std::uint32_t group, Engine::Callback done, void* ctx,
             std::uint64_t arg, Tick at = -1);
  void start_phase(std::uint32_t id, Tick at = -1);
  bool is_private(const Template& t, const PhaseT& p) const;
  void split_components(const Template& t, PhaseT& p);
  void claim_links(Template& t);
  void register_private(std::uint32_t id);
  void count_private(const PhaseT& p, int tag);
  void settle_private() const;
  void launch_net(std::uint32_t id);
  // Component `c` of transfer `id`'s phase, on the fast path until now, meets traffic.
  void promote(std::uint32_t id, std::uint32_t c);
  void claim_fast(std::uint32_t id);
  // The component of transfer `o`'s phase on its fast link `l`.
  std::uint32_t fast_comp_of(std::uint32_t o, hw::net::LinkId l) const {
    return transfers_[o].comps_recorded ? fast_comp_[l] : 0;
  }
  // The transfer's fast components end at the latest of their isolated times.
  void schedule_fast(std::uint32_t id);
  // Transfer `id` (x) now waits for flow `fid` too.
  void own_flow(Transfer& x, std::uint32_t id, hw::net::FlowId fid);
  // The transfer's phase ended: its next phase, or its end, when the owner's callback runs
  // `how`: now (from an event handler with nothing left to do after it), collected into
  // finished_ (on_net_event runs them once the network is settled), or as an event of its
  // own at the same tick (from inside another transfer's start). The first two save an
  // engine event per transfer; results are the same (test: every JSON but the event count).
  enum class Done : std::uint8_t { now, collect, event };
  void phase_finished(std::uint32_t id, Done how = Done::event);
  struct Finished {
    Engine::Callback fn;
    void* ctx;
    std::uint64_t arg;
  };
  std::vector<Finished> finished_;  // on_net_event's completed transfers
  void account_fast(const PhaseT& p, const Template& t, double fraction_of_total, const std::vector<Bytes>* moved);
  void kick();
  void reschedule(bool in_handler);
  static void on_fast_done(void* ctx, std::uint64_t id);
  static void on_net_event(void* ctx, std::uint64_t);

  NetworkModel& model_;
  const CollectiveCost& cost_;
  hw::net::FlowNetwork net_;
  Engine* engine_ = nullptr;
  std::vector<std::unique_ptr<Template>> templates_;
  std::vector<Slot> slots_;  // size a power of two, at most half full
  std::array<std::vector<GroupMemo>, kNumDims> memo_;  // by Dim, then group id
  // By group token, like memo_: the end of the group's last collective run inline (run_inline).
  std::array<std::vector<Tick>, kNumDims> inline_until_;
  std::vector<Transfer> transfers_;
  std::vector<std::uint32_t> free_transfers_;
  std::vector<LinkUse> use_;               // by link
  std::vector<std::uint32_t> link_owner_;  // by link: a group token, kUnowned or kSharedLink
  std::uint32_t epoch_ = 1;                // bumped when a group loses a link
  mutable std::vector<const PhaseT*> private_phases_;  // phases with private_repeats > 0
  mutable std::vector<Bytes> private_bytes_;           // by link: settled private bytes
  std::vector<std::uint32_t> flow_owner_;  // by FlowId
  std::array<Bytes, kNumDims> dim_bytes_{};
  std::vector<std::uint32_t> fast_comp_;      // by link: the component of its fast owner's phase
  std::vector<std::uint64_t> owners_;         // start_phase's stack: (transfer << 32) | component
  std::vector<std::uint32_t> template_load_;  // get_template scratch, by link
  std::vector<hw::net::LinkId> qp_path_;      // get_template scratch
  std::vector<std::uint32_t> qp_count_;       // get_template scratch, by link
  std::vector<hw::net::FlowId> completed_;
  std::vector<std::uint32_t> completed_owners_;
  Engine::Handle net_event_;
  Tick net_event_at_ = -1;  // -1: none scheduled
  Seconds last_time_ = 0;
  std::size_t transfers_started_ = 0, shared_phases_ = 0, shared_flows_ = 0;
};

}  // namespace ptsim::sim
