// FlowNetwork: flows share directed links max-min fairly (progressive filling).
//
// Model: SimGrid's fluid network model (Velho, Mello Schnorr, Casanova, Legrand,
// "On the validity of flow-level TCP network models for grid and cloud simulations",
// TOMACS 2013; src/kernel/lmm/maxmin.cpp): every active flow gets a rate such that no
// link exceeds its bandwidth and no flow's rate can grow without shrinking a flow that
// has an equal or smaller rate (max-min fairness, Bertsekas & Gallager, Data Networks,
// §6.5.2). The allocation is found by progressive filling: repeatedly saturate the link
// with the smallest fair share remaining/unfixed-flows and fix the rates of its flows.
// A flow first waits its path latency (start + Σ link latencies, as SimGrid charges
// latency before bandwidth), then transfers its bytes at its current rate; rates are
// recomputed whenever a flow starts, finishes or is cancelled.
//
// Engine-agnostic: the caller (sim/'s event loop, or the collective runner) asks
// next_event_time() and calls advance_to(t). Time is in seconds (double); an event
// due within kTimeEpsilon (1 ns = one Tick) of t is processed at t, so a caller that
// rounds to integer ticks never stalls.
//
// Cost (so that every rank of a 16,384-GPU iteration fits in seconds):
//  - Incremental max-min: max-min allocations decompose over connected components of
//    the flow/link sharing graph, so when flows start or end only the component(s)
//    reachable from the links they touched are re-filled (SimGrid's "selective
//    update" of modified constraints, same idea); everything else keeps its rates.
//    All activations and completions due at one time are applied before one solve.
//  - Level-bounded re-solve: progressive filling fixes rates in increasing order, and
//    removing a flow of rate r leaves every rate below r as it was (the links it
//    crossed all saturate at r or above; without it their fair shares only grow), while
//    adding a flow leaves every rate below min over its links of capacity / Σ weight
//    as it was (a lower bound of its own rate). So a solve only re-fills the flows at or
//    above the lowest such level among the changes since the last one, reached from the
//    changed links through such flows; the flows below keep their rates and only
//    reserve their capacity. Completions mostly remove the fastest flows, so a wave of
//    thousands of flows (an all-to-all) no longer re-fills all of them per completion.
//  - Which flows a solve re-fills (exact; a link counts as saturated when its load is
//    within a relative kSaturated = 1e-9 of capacity, so near-ties count as saturated).
//    Write L for the level above, "old" for the last solve's allocation, S for the
//    re-filled flows; the flows below L keep their rates (above), so what follows is
//    about the flows at or above L on the capacity the ones below leave (the same
//    before and after the change: removed flows are at or above L, added ones unsolved).
//    Max-min fairness is characterised by bottlenecks (Bertsekas & Gallager §6.5.2):
//    a feasible allocation is the max-min one iff every flow crosses a saturated link
//    on which no flow is faster. Rules, each proved by that characterisation:
//    (a) Seeds: a link where a flow was added, or where one was removed while the link
//        was saturated and which still carries flows. A removed flow's unsaturated link
//        is not a seed: no flow has it as a bottleneck, and its load only drops; nor is
//        a link the removal left empty: no flow is there to re-fill. (Measured in
//        finish() before the load drops; loads only drop between solves, adds carry no
//        load until solved.)
//    (b) Search: the flows added since the last solve join S, and so do a seed's flows
//        at its top rate (the fastest there, ties within a relative 1e-9, at or above L);
//        a link of an S flow that is saturated (old) has the flows at its top rate join S
//        too, and so on. The other flows on these links, and on an S flow's unsaturated
//        links, keep their rates and reserve their capacity in the filling. (A flow below
//        a link's top rate has its bottleneck elsewhere; it only moves if that link's new
//        share drops below its rate, which (c) finds.)
//    (c) Check: after the filling, each component link m that fixed flows (at share s_m)
//        is checked: if a flow kept at or above L crosses m faster than s_m (beyond a
//        relative 1e-9), all of m's flows at or above L join S and the filling runs again
//        on the larger S (SolveStats::refills: 6.0 % and 9.6 % of the solves of the MoE
//        1:1 and 4:1 bench runs, none of ZeRO-3's).
//    Proof that the result is the max-min allocation: a flow j not in S (at or above
//    L) had an old bottleneck l, saturated with j fastest there, so at l's top rate. If
//    any S flow crossed l, or l were a seed, (b) would have put j in S; so l has the same
//    flows at the same rates as before, still saturated, j still fastest. A flow i in S
//    is fixed by the filling on a link m that the filling saturates, where no S flow is
//    faster; by (c), which repeats until it holds, no kept flow at or above L on m is
//    faster either, and the flows below L are slower (the rates at or above L stay at or
//    above L). The allocation is feasible (the filling respects each link's capacity
//    less what the others reserve). So every flow has a bottleneck: it is the max-min
//    allocation, the one a from-scratch solve finds. Breaking (a), (b) or (c) on purpose
//    (dropping the removal seeds, taking no flow at a link's top rate, skipping the
//    check) fails the randomized reference tests
//    (tests/hw/net/flow_network_reference_test.cpp, flow_network_incremental_test.cpp).
//    Per solve on the MoE 1:1 / 4:1 bench runs this re-fills 11.3 / 34.2 flows (34.2 /
//    58.6 when (b) took every flow at or above L on a searched link and (c) searched
//    any newly saturated link) on 31.8 / 80.6 links (67.5 / 117.8); the runs took 0.64 /
//    0.73 s instead of 1.18 / 0.95 s. ZeRO-3 on 1,024 GPUs: 6.3 flows, 28 links.
//  - A solve costs what it re-fills, not what its links carry: each link keeps its
//    flows in a max-heap by rate (unsolved flows behind it), so the flows at or above the
//    level are found without visiting those below; a link's reserved capacity is its
//    load minus the re-filled flows' part, with loads summed exactly in fixed point;
//    the filling's heap holds each component link once instead of one entry per fixed
//    flow and link (on the 512-GPU MoE all-to-all, 32,256 flows a wave, this halved the
//    run, README "Performance"), keyed lazily: fixing flows at the round's share only
//    raises a link's share, so a stale key is a lower bound, brought up to date when it
//    reaches the top (before, every link a round touched was re-keyed in place: 40 % of
//    the 16,384-GPU Llama 3 reference run with 16 queue pairs per connection). Of
//    the links only one re-filled flow crosses, only that flow's tightest enters the
//    heap (the others could only tie with it or pop once it is fixed).
//  - A flow added since the last solve waits in its links' entry lists behind the heap
//    (LinkState::heap_n), not at the heap's top with key +inf: it joins the heap once,
//    from the bottom, with its first rate. Before, each activation sifted a +inf entry
//    up to the root of every link it crosses (8 % of the MoE 4:1 profile) and its first
//    solve sifted it back down. Tried and not kept (no difference measurable through
//    the load of a shared 2-core machine, results identical): 4-ary link heaps (half
//    the depth), and heap moves that write a flow's position without reading its
//    path length (one cache line of the moved flow instead of two).
//  - A flow that activates alone on every link of its path (a transport promotes a ring
//    flow that ran on links of its own) is given its tightest link's capacity / weight
//    there, the value a solve computes for it, and touches no link: no flow's rate
//    depends on it until another joins one of its links, which seeds a solve as usual.
//    A quarter of the ZeRO-3 bench run's solves (79 k of 324 k) were such flows alone.
//  - Lazy progress: a flow stores (remaining bytes, rate, time of the last update) and
//    is only brought up to date when its rate changes; its completion time sits in an
//    indexed min-heap (moved in place when its rate changes). Pending activations are
//    a second heap, whose stale entries a per-flow version counter recognises. Link
//    statistics are integrated lazily the same way.
//    So an event costs O(component · path length · log) instead of O(all flows).
//  - Completion is decided from the same stored finish time the heap is ordered by, so
//    a flow due within kTimeEpsilon of t always completes at t (no re-tests of a
//    recomputed remaining/rate that rounding could keep just above the epsilon).
//  - Every buffer is reused (no allocation once the network has seen its peak flow count).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "hw/net/topology.h"

namespace ptsim::hw::net {

using FlowId = std::uint32_t;  // reused after the flow completes or is cancelled

class FlowNetwork {
 public:
  static constexpr Seconds kTimeEpsilon = 1e-9;
  static constexpr Seconds kNever = std::numeric_limits<double>::infinity();

  explicit FlowNetwork(const Topology& topo);

  // A flow of `bytes` over `path` that starts at `start` (>= now()); it begins to
  // consume bandwidth after the path latency. `tag` is a small non-negative integer
  // (e.g. a Dim) under which its delivered bytes are counted. pay_latency = false
  // starts the transfer at `start` itself (a flow resumed from elsewhere, which has
  // already paid its latency). weight = k (>= 1) stands for k identical flows (same
  // path, size and start): one entry that takes k shares at every link it crosses,
  // so its rate() is what each of the k flows would get in a per-flow solve (max-min
  // gives identical flows identical rates) and it moves k × bytes in all.
  // copies = q (>= 1): the flow stands for q flows that move in lockstep (one
  // connection's queue pairs, each carrying `bytes`), and `path` holds all their links:
  // a link that m of them cross takes m shares there, either listed m times or once with
  // mult[i] = m (mult: one count per path entry, each >= 1; empty = all 1). Only the
  // bytes counted under `tag` see q (q × k × bytes in all); rates are per queue pair.
  FlowId add_flow(std::span<const LinkId> path, Bytes bytes, Seconds start, int tag = 0, bool pay_latency = true,
                  std::uint32_t weight = 1, std::uint32_t copies = 1, std::span<const std::uint16_t> mult = {});
  // Series links: a NIC or PCIe switch with exactly two neighbours passes every flow that
  // enters from one on to the other (no route turns back), so the links of such a chain
  // (GPU -> PCIe switch -> NIC -> leaf, and back) carry the same flows: only the narrowest
  // can bind, and the others add nothing to a max-min solve but work. After this call a
  // flow's path keeps one link of each chain it crosses (the narrowest; the first on a tie)
  // and drops the rest (contract_path; add_flow then takes only kept links, and the path's
  // latency from the caller: pay_latency = false); their statistics are the kept link's
  // (the same flows). Rates, times and bytes are the per-link solve's (test
  // FlowNetworkSeries). An inter-node flow crosses 6 links instead of 8 on a DGX-style node
  // with two GPUs and NICs per PCIe switch, 4 with a switch per GPU.
  void contract_series_links();
  // Drops from `path` the links of each chain it crosses but the kept one (and their
  // entries of `mult`, when not empty). The path must cross a chain whole or not at all (a
  // routed path between GPUs does; checked). Nothing without contract_series_links.
  void contract_path(std::vector<LinkId>& path, std::vector<std::uint16_t>& mult) const;
  // The link whose statistics stand for `l` (itself, unless contracted away).
  LinkId series_rep(LinkId l) const { return series_rep_.empty() ? l : series_rep_[l]; }
  // Drops an unfinished flow; its delivered bytes stay counted.
  void cancel(FlowId id);

  Seconds now() const { return now_; }
  // Time of the next flow activation or completion; kNever when nothing is pending.
  Seconds next_event_time();
  // Moves time to t (>= now() - kTimeEpsilon), processing every activation and
  // completion on the way; completed flow ids are appended to `completed` in
  // completion order.
  void advance_to(Seconds t, std::vector<FlowId>& completed);
  // Runs until every flow has completed; returns the time.
  Seconds run_until_idle(std::vector<FlowId>* completed = nullptr);

  std::size_t num_unfinished() const { return active_.size() + num_pending_; }
  std::size_t num_active() const { return active_.size(); }
  bool unfinished(FlowId id) const;
  BytesPerSecond rate(FlowId id);    // of each of its `weight` flows; 0 while still in its latency phase
  Bytes remaining(FlowId id) const;  // of each of its `weight` flows

  // Statistics since construction or reset_statistics().
  Bytes link_bytes(LinkId l) const;
  Seconds link_busy_time(LinkId l) const;
  Bytes tag_bytes(int tag) const;
  Seconds statistics_start() const { return stats_start_; }
  void reset_statistics();
  const Topology& topology() const { return topo_; }

  // Work of the max-min solves since construction (tests check that a change re-fills
  // what it must and no more; a probe can print them for a run).
  struct SolveStats {
    std::uint64_t solves = 0;
    std::uint64_t refills = 0;  // fillings repeated after the check found a newly saturated link
    std::uint64_t flows = 0;    // re-filled flows, summed over solves
    std::uint64_t links = 0;    // component links, summed over solves
    std::uint64_t entries = 0;  // (flow, link) entries at or above the level the search visited
    std::uint64_t changed = 0;  // re-filled flows whose rate changed
  };
  const SolveStats& solve_stats() const { return stats_; }

 private:
  __extension__ typedef __int128 Load;  // fixed-point link load, see kLoadScale
  enum class State : std::uint8_t { free, pending, active };
  // Laid out for the solver, which is memory-bound (the MoE profile's hottest loads
  // were a flow's mark, its path and a link's state): the stamps it tests once per
  // (flow, link) entry are a dense array of their own (FlowStamps), what it reads once
  // per re-filled flow sits in the flow's first 64 bytes, the path's link ids in the
  // next 64 (inline up to kInlineHops links: every path of the built-in fabrics, GPU ->
  // PCIe -> NIC -> leaf -> spine -> core -> ..., is shorter), the heap positions in the
  // third; the progress fields last. Paths longer than kInlineHops live in `spill`
  // (links, then positions), as do paths with multiplicities (then those). Before, path
  // and positions were two vectors per flow: two more allocations and cache misses per
  // re-filled flow.
  static constexpr std::uint32_t kInlineHops = 16;
  struct alignas(64) Flow {
    std::uint32_t weight = 1;  // identical flows this entry stands for
    double new_rate = 0;       // solver scratch
    bool solved = false;       // has a rate from a solve (else it joins the next one)
    bool linked = false;       // on its links' flow lists (active, non-empty path, bytes > 0)
    State state = State::pending;
    bool multi = false;          // per-entry multiplicities (add_flow's mult), kept in `spill`
    std::uint32_t list_pos = 0;  // index in active_
    double rate = 0;
    std::uint32_t version = 0;  // pending-heap entries with another version are stale
    int tag = 0;
    std::uint32_t hops = 0;  // path length
    std::uint32_t copies = 1;  // lockstep flows it stands for (add_flow): counted under its tag
    Load load_q = 0;         // weight × rate on each of its links
    LinkId link_in[kInlineHops];
    std::uint32_t pos_in[kInlineHops];  // index of this flow's entry in each path link's heap
    Bytes total = 0;
    Bytes remaining = 0;  // at time `updated`
    Seconds updated = 0;  // last time remaining was brought up to date
    Seconds activate_at = 0;
    Seconds finish_at = kNever;  // updated + remaining / rate (the completion heap key)
    std::vector<std::uint32_t> spill;

    void set_path(std::span<const LinkId> p, std::span<const std::uint16_t> mult) {
      hops = static_cast<std::uint32_t>(p.size());
      multi = !mult.empty();
      if (hops > kInlineHops || multi) spill.resize((multi ? 3 : 2) * std::size_t{hops});
      std::copy(p.begin(), p.end(), links());
      if (multi) std::copy(mult.begin(), mult.end(), spill.data() + 2 * std::size_t{hops});
    }
    bool inline_path() const { return hops <= kInlineHops && !multi; }
    LinkId* links() { return inline_path() ? link_in : spill.data(); }
    std::uint32_t* pos() { return inline_path() ? pos_in : spill.data() + hops; }
    std::span<const LinkId> path() const { return {inline_path() ? link_in : spill.data(), hops}; }
    // Its i-th link's multiplicity (add_flow's mult), and the shares it takes there.
    std::uint32_t mult(std::uint32_t i) const { return multi ? spill[2 * std::size_t{hops} + i] : 1; }
    std::uint32_t slot_weight(std::uint32_t i) const { return weight * mult(i); }
  };
  static_assert(sizeof(Flow) == 256 && offsetof(Flow, link_in) == 64, "Flow: hot fields in its first cache line");
  // A link's entry of a flow crossing it; key = the flow's rate, +inf until its first solve.
  struct LinkEntry {
    double key;
    FlowId id;
    std::uint32_t slot;  // index of the link in the flow's path
  };
  // Solver fields first (the component search and the filling read them per link),
  // statistics last; two whole cache lines per link (with 16-byte alignment a third of
  // the links straddled three).
  struct alignas(64) LinkState {
    // Active flows crossing the link: [0, heap_n) solved ones, a max-heap on key (the
    // rate); then the unsolved ones (added since the last solve), in no order.
    std::vector<LinkEntry> flows;
    std::uint32_t mark = 0;        // component search stamp
    std::uint32_t comp = 0;        // solver scratch: index in comp_links_
    Load load_q = 0;               // Σ weight × rate of its flows (exact sums)
    std::uint32_t seed = 0;        // == stamp_ at the next solve: a seed of the re-fill (see the header)
    std::uint32_t expanded = 0;    // == stamp_: its flows at its top rate (at or above the level) are re-filled
    std::uint32_t full = 0;        // == stamp_: all its flows at or above the level are re-filled
    BytesPerSecond capacity = 0;
    std::uint32_t weight = 0;  // Σ weight of `flows`
    std::uint32_t heap_n = 0;  // solved entries at the front of `flows`
    double load = 0;           // load_q / kLoadScale
    Seconds updated = 0;       // bytes/busy integrated up to here
    Bytes bytes = 0;
    Seconds busy = 0;
  };
  static_assert(sizeof(LinkState) == 128, "LinkState: two cache lines, solver fields in the first");
  // Solver stamps by FlowId, apart from the flows: the component search tests them for
  // every (flow, link) entry it visits (a flow is met once per link of its path), 4 bytes
  // a flow instead of a 256-byte flow record each.
  struct FlowStamps {
    std::uint32_t mark = 0;  // == stamp_: in this solve's component
  };
  static constexpr std::uint32_t kNotQueued = 0xffffffffu;
  // The filling's min-heap of links by (fair share, link id) (the share a lower bound, see
  // fill()): one unsigned 128-bit key each, the share's bits above the link id above the
  // link's index in comp_links_. A share is >= 0, and non-negative doubles order as their
  // bits, so one integer compare orders two entries as the pair, and the heap picks the
  // smaller child without a branch. (std::pop_heap with a (share, link) comparator took
  // half the filling in branch mispredictions on the 512-GPU MoE bench run.)
  __extension__ typedef unsigned __int128 FillKey;
  static FillKey fill_key(double share, LinkId link, std::uint32_t comp) {
    return (static_cast<FillKey>(std::bit_cast<std::uint64_t>(share)) << 64) | (static_cast<FillKey>(link) << 32) |
           comp;
  }
  static double fill_share(FillKey k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k >> 64)); }
  static std::uint32_t fill_comp(FillKey k) { return static_cast<std::uint32_t>(k); }
  static LinkId fill_link(FillKey k) { return static_cast<LinkId>(k >> 32); }
  void fill_heap_make();
  void fill_heap_push(FillKey k);
  void fill_heap_up(std::uint32_t i, FillKey k);
  FillKey fill_heap_pop();
  struct CompHop {         // a re-filled flow's link (take_flow): the filling's view of its path
    std::uint32_t comp;    // the link's index in comp_links_
    std::uint32_t weight;  // the shares the flow takes there (Flow::slot_weight)
  };
  struct HeapEntry {
    double key;
    std::uint32_t id;  // FlowId
    std::uint32_t version;
  };

  // Link loads are sums of weight × rate in 128-bit fixed point (2^-24 B/s: finer than
  // a double's last bit for any rate above 1 B/s; 1e18 B/s links, strict_yaml's bound,
  // stay far from overflow), so adding and removing flows in any order leaves a link's
  // load exact and the solver can take its reserved capacity as load − the re-filled
  // flows' part without visiting the flows below the level.
  static constexpr double kLoadScale = 16777216.0;  // 2^24
  static Load to_load(double bytes_per_s) { return static_cast<Load>(std::nearbyint(bytes_per_s * kLoadScale)); }
  // The same correctly rounded value as static_cast<double>(q), without the libgcc
  // 128-bit conversion (__floattidf) for the loads that fit 64 bits (links below
  // ~550 GB/s): both round the same integer to the nearest double.
  static double to_double(Load q) {
    const auto narrow = static_cast<std::int64_t>(q);
    return narrow == q ? static_cast<double>(narrow) : static_cast<double>(q);
  }
  void set_load(LinkState& ls, Load q) {
    ls.load_q = q;
    ls.load = to_double(q) / kLoadScale;
  }
  // The link's max-heap by rate; entries know their flow and path slot, so a move
  // updates the flow's pos() directly.
  void place(LinkState& ls, std::uint32_t i, const LinkEntry& e) {
    ls.flows[i] = e;
    flows_[e.id].pos()[e.slot] = i;
  }
  void sift_up(LinkState& ls, std::uint32_t i);
  void sift_down(LinkState& ls, std::uint32_t i);
  void sift(LinkState& ls, std::uint32_t i);

  void check(FlowId id) const;
  void activate(FlowId id);
  void finish(FlowId id);  // removes an active or pending flow
  void settle_flow(Flow& f);
  void settle_link(LinkState& l);
  // Load within a relative kSaturated of capacity (a tie in exact arithmetic).
  static constexpr double kSaturated = 1e-9;
  static bool saturated(const LinkState& ls) { return ls.load >= ls.capacity * (1 - kSaturated); }
  void touch(LinkId l, bool seed);
  void take_flow(FlowId id);
  void expand(LinkId l, bool full);
  double faster_kept(LinkId l, double level);
  template <class Visit>
  void walk_heap(const LinkState& ls, Visit visit);
  void search(double level);
  void fill();
  void solve();
  void schedule_finish(FlowId id);
  Seconds next_event_internal();
  // Completions: a min-heap on (finish time, id) with each flow's index in due_pos_
  // (a dense array: sifting touches 4 bytes per moved flow, not its record). A rate
  // change moves the flow's entry in place: no stale entries. The id breaks ties, so
  // flows due at the same time complete in one order whatever order the solver
  // scheduled them in (the caller's events follow that order).
  struct DueEntry {
    double key;
    FlowId id;
  };
  static bool due_before(const DueEntry& a, const DueEntry& b) {
    return a.key < b.key || (a.key == b.key && a.id < b.id);
  }
  void due_place(std::uint32_t i, const DueEntry& e) {
    due_[i] = e;
    due_pos_[e.id] = i;
  }
  void due_sift(std::uint32_t i);
  void due_remove(FlowId id);

  const Topology& topo_;
  // contract_series_links: by link, the link of its chain that flows keep (itself when it
  // is in no chain or kept), and by kept link, its chain's length (1: none); empty = off.
  std::vector<LinkId> series_rep_;
  std::vector<std::uint32_t> series_len_;
  std::vector<Flow> flows_;
  std::vector<FlowStamps> stamps_;  // by FlowId, sized with flows_
  std::vector<FlowId> free_ids_;
  std::vector<FlowId> active_;
  std::size_t num_pending_ = 0;
  std::vector<LinkState> link_;
  std::vector<FillKey> fill_heap_;  // solver: component links by fair share
  struct OwnLink {                  // solver scratch by index in comp_flows_: its tightest link
    double share;                   // that no other re-filled flow crosses
    LinkId link;
    std::uint32_t comp_plus_one;  // its index in comp_links_ + 1; 0: none
  };
  std::vector<OwnLink> own_link_;
  std::vector<HeapEntry> pending_heap_;  // activations by time
  std::vector<DueEntry> due_;            // completions by (time, id)
  std::vector<std::uint32_t> due_pos_;   // by FlowId: index in due_ (kNotQueued: none)
  std::vector<LinkId> dirty_links_;      // links whose flow set changed since the last solve
  std::vector<LinkId> comp_links_;       // solver scratch: the affected component
  std::vector<FlowId> comp_flows_;
  std::vector<CompHop> comp_hops_;           // solver scratch: the re-filled flows' hops, in comp_flows_ order,
  std::vector<std::uint32_t> comp_hop_end_;  // ... flow k's ending at comp_hop_end_[k]
  std::vector<std::uint32_t>
      comp_entries_;  // solver scratch: each component link's re-filled flows (index in comp_flows_) ...
  std::vector<std::uint32_t> comp_begin_;    // ... from comp_begin_[i] (by index in comp_links_)
  std::vector<Load> comp_refilled_;          // solver scratch: re-filled flows' load on each component link
  std::vector<std::uint32_t> comp_unfixed_;  // ... and their weight (the filling: of the unfixed ones)
  std::vector<double> comp_fix_share_;  // solver scratch: the share at which a component link fixed flows (-1: none)
  std::vector<double> comp_remaining_;       // solver scratch: each component link's slack in the filling
  std::vector<std::uint8_t> comp_fixed_;     // solver scratch: by index in comp_flows_, fixed in this filling
  std::vector<std::uint32_t> comp_fill_at_;  // solver scratch: next free slot of each link's entries
  struct Expansion {
    LinkId link;
    bool full;
  };
  std::vector<Expansion> expand_q_;          // solver scratch: links whose flows the search visits next
  std::vector<std::uint32_t> dfs_;           // solver scratch: heap positions to visit
  std::uint32_t stamp_ = 0;
  SolveStats stats_;
  double resolve_level_ = kNever;  // flows below this rate keep their rates at the next solve
  std::vector<Bytes> tag_bytes_;   // settled bytes by tag
  Seconds now_ = 0, stats_start_ = 0;
};

}  // namespace ptsim::hw::net
