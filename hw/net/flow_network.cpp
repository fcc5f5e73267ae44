#include "hw/net/flow_network.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cmath>

#include "hw/errors.h"
#include "hw/slot_pool.h"

namespace ptsim::hw::net {

FlowNetwork::FlowNetwork(const Topology& topo) : topo_(topo), link_(topo.num_links()) {
  for (LinkId l = 0; l < topo.num_links(); ++l) link_[l].capacity = topo.link(l).bandwidth;
}

void FlowNetwork::contract_series_links() {
  const std::size_t nl = topo_.num_links();
  // Out- and in-links by vertex, for the vertices a chain passes (not GPUs: flows end there).
  std::vector<std::uint32_t> out_n(topo_.num_vertices(), 0);
  std::vector<std::array<LinkId, 2>> out(topo_.num_vertices()), in(topo_.num_vertices());
  std::vector<std::uint32_t> in_n(topo_.num_vertices(), 0);
  for (LinkId l = 0; l < nl; ++l) {
    const Link& k = topo_.link(l);
    if (out_n[k.src] < 2) out[k.src][out_n[k.src]] = l;
    ++out_n[k.src];
    if (in_n[k.dst] < 2) in[k.dst][in_n[k.dst]] = l;
    ++in_n[k.dst];
  }
  std::vector<LinkId> parent(nl);
  for (LinkId l = 0; l < nl; ++l) parent[l] = l;
  auto find = [&](LinkId l) {
    while (parent[l] != l) l = parent[l] = parent[parent[l]];
    return l;
  };
  for (VertexId v = 0; v < topo_.num_vertices(); ++v) {
    const VertexKind kind = topo_.kind(v);
    if ((kind != VertexKind::nic && kind != VertexKind::pcie_switch) || out_n[v] != 2 || in_n[v] != 2) continue;
    const VertexId a = topo_.link(out[v][0]).dst, b = topo_.link(out[v][1]).dst;
    if (a == b) continue;
    for (LinkId i : in[v]) {  // a -> v goes on v -> b, b -> v on v -> a
      const LinkId o = topo_.link(i).src == a ? out[v][1] : out[v][0];
      parent[find(i)] = find(o);
    }
  }
  // The kept link of each chain: the narrowest, the lowest id on a tie.
  std::vector<LinkId> best(nl, ~LinkId{0});
  for (LinkId l = 0; l < nl; ++l) {
    LinkId& k = best[find(l)];
    if (k == ~LinkId{0} || topo_.link(l).bandwidth < topo_.link(k).bandwidth) k = l;
  }
  series_rep_.resize(nl);
  series_len_.assign(nl, 0);
  for (LinkId l = 0; l < nl; ++l) {
    series_rep_[l] = best[find(l)];
    ++series_len_[series_rep_[l]];
  }
}

void FlowNetwork::contract_path(std::vector<LinkId>& path, std::vector<std::uint16_t>& mult) const {
  if (series_rep_.empty()) return;
  // Chains crossed whole: as many of the path's links lie in chains as the chains it keeps
  // a link of are long.
  std::uint32_t in_chains = 0, kept_chains = 0;
  std::size_t n = 0;
  for (std::size_t k = 0; k < path.size(); ++k) {
    const LinkId rep = series_rep_[path[k]];
    const std::uint32_t len = series_len_[rep];
    if (len > 1) ++in_chains;
    if (rep != path[k]) continue;
    if (len > 1) kept_chains += len;
    if (!mult.empty()) mult[n] = mult[k];
    path[n++] = path[k];
  }
  PTSIM_CHECK(in_chains == kept_chains, "FlowNetwork: a path crosses part of a chain of series links ({} of {})",
              in_chains, kept_chains);
  path.resize(n);
  if (!mult.empty()) mult.resize(n);
}

namespace {

// Min-heap order on HeapEntry::key, then id (std heap functions build max-heaps).
struct KeyGreater {
  template <class E>
  bool operator()(const E& a, const E& b) const {
    return a.key > b.key || (a.key == b.key && a.id > b.id);
  }
};

}  // namespace

void FlowNetwork::check(FlowId id) const {
  PTSIM_CHECK(id < flows_.size() && flows_[id].state != State::free, "FlowNetwork: flow {} is not unfinished", id);
}

FlowId FlowNetwork::add_flow(std::span<const LinkId> path, Bytes bytes, Seconds start, int tag, bool pay_latency,
                             std::uint32_t weight, std::uint32_t copies, std::span<const std::uint16_t> mult) {
  PTSIM_CHECK(bytes >= 0 && std::isfinite(bytes), "FlowNetwork: flow size must be finite and >= 0, got {}", bytes);
  PTSIM_CHECK(start >= now_ - kTimeEpsilon, "FlowNetwork: flow start {} s is before now ({} s)", start, now_);
  PTSIM_CHECK(tag >= 0, "FlowNetwork: tag must be >= 0, got {}", tag);
  PTSIM_CHECK(weight >= 1, "FlowNetwork: flow weight must be >= 1, got {}", weight);
  PTSIM_CHECK(copies >= 1, "FlowNetwork: flow copies must be >= 1, got {}", copies);
  for (LinkId l : path) PTSIM_CHECK(l < link_.size(), "FlowNetwork: unknown link {}", l);
  PTSIM_CHECK(mult.empty() || mult.size() == path.size(), "FlowNetwork: {} multiplicities for a path of {} links",
              mult.size(), path.size());
  for (std::uint16_t m : mult) PTSIM_CHECK(m >= 1, "FlowNetwork: a path multiplicity must be >= 1, got {}", m);
  Seconds latency = 0;
  if (pay_latency)
    for (LinkId l : path) latency += topo_.link(l).latency;
  PTSIM_CHECK(series_rep_.empty() || !pay_latency,
              "FlowNetwork: with series links contracted a path's latency is the caller's (pay_latency = false)");
  if (!series_rep_.empty())
    for (LinkId l : path)
      PTSIM_CHECK(series_rep_[l] == l, "FlowNetwork: link {} of a path was contracted away (contract_path)",
                  topo_.link_name(l));
  const FlowId id = take_slot(free_ids_, flows_);
  if (stamps_.size() < flows_.size()) stamps_.resize(flows_.size());
  if (due_pos_.size() < flows_.size()) due_pos_.resize(flows_.size(), kNotQueued);
  Flow& f = flows_[id];
  f.set_path(path, mult);
  f.total = f.remaining = bytes;
  f.activate_at = std::max(start, now_) + latency;
  f.updated = f.activate_at;
  f.finish_at = kNever;
  f.rate = 0;
  f.tag = tag;
  f.weight = weight;
  f.copies = copies;
  f.load_q = 0;
  f.state = State::pending;
  f.linked = false;
  ++f.version;
  ++num_pending_;
  pending_heap_.push_back({f.activate_at, id, f.version});
  std::push_heap(pending_heap_.begin(), pending_heap_.end(), KeyGreater{});
  if (static_cast<std::size_t>(tag) >= tag_bytes_.size()) tag_bytes_.resize(tag + 1, 0.0);
  return id;
}

void FlowNetwork::sift_up(LinkState& ls, std::uint32_t i) {
  const LinkEntry e = ls.flows[i];
  while (i > 0) {
    const std::uint32_t parent = (i - 1) / 2;
    if (!(ls.flows[parent].key < e.key)) break;
    place(ls, i, ls.flows[parent]);
    i = parent;
  }
  place(ls, i, e);
}

void FlowNetwork::sift_down(LinkState& ls, std::uint32_t i) {
  const LinkEntry e = ls.flows[i];
  const std::uint32_t n = ls.heap_n;
  for (;;) {
    std::uint32_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && ls.flows[c + 1].key > ls.flows[c].key) ++c;
    if (!(ls.flows[c].key > e.key)) break;
    place(ls, i, ls.flows[c]);
    i = c;
  }
  place(ls, i, e);
}

// Restores the heap after the key at i (< heap_n) changed.
void FlowNetwork::sift(LinkState& ls, std::uint32_t i) {
  if (i > 0 && ls.flows[(i - 1) / 2].key < ls.flows[i].key)
    sift_up(ls, i);
  else
    sift_down(ls, i);
}

void FlowNetwork::touch(LinkId l, bool seed) {
  LinkState& ls = link_[l];
  if (seed) ls.seed = stamp_ + 1;
  if (ls.mark == stamp_ + 1) return;  // already queued for the next solve
  ls.mark = stamp_ + 1;
  dirty_links_.push_back(l);
}

void FlowNetwork::activate(FlowId id) {
  Flow& f = flows_[id];
  --num_pending_;
  f.state = State::active;
  f.list_pos = static_cast<std::uint32_t>(active_.size());
  active_.push_back(id);
  f.updated = now_;
  if (f.hops == 0 || f.remaining <= 0) {
    // Loopback (no wire) or empty: done as soon as it starts, shares nothing.
    f.rate = f.hops == 0 ? std::numeric_limits<double>::infinity() : 0.0;
    schedule_finish(id);
    return;
  }
  f.linked = true;
  f.solved = false;
  f.load_q = 0;
  const LinkId* links = f.links();
  // Its links' states are scattered (one miss each at 16k GPUs): fetch them all at once.
  for (std::uint32_t i = 0; i < f.hops; ++i) __builtin_prefetch(&link_[links[i]]);
  bool alone = true;
  for (std::uint32_t i = 0; i < f.hops && alone; ++i) alone = link_[links[i]].weight == 0;
  for (std::uint32_t i = 1; i < f.hops && alone; ++i)  // a path through a link twice takes two shares there
    alone = std::find(links, links + i, links[i]) == links + i;
  if (alone) {
    // Alone on every link (a promoted ring flow, whose links were its own): its max-min
    // rate is its tightest link's capacity / weight, and no other flow's rate depends on
    // it. Solved here, with the value a solve computes (the filling's share of a link
    // without other load), without a solve.
    double rate = kNever;
    for (std::uint32_t i = 0; i < f.hops; ++i) rate = std::min(rate, link_[links[i]].capacity / f.slot_weight(i));
    f.solved = true;
    f.rate = rate;
    f.load_q = to_load(rate * f.weight);
    for (std::uint32_t i = 0; i < f.hops; ++i) {
      LinkState& ls = link_[links[i]];
      settle_link(ls);
      ls.flows.push_back({rate, id, i});
      f.pos()[i] = 0;
      ls.heap_n = 1;
      ls.weight = f.slot_weight(i);
      set_load(ls, f.load_q * f.mult(i));
    }
    schedule_finish(id);
    return;
  }
  for (std::uint32_t i = 0; i < f.hops; ++i) {
    LinkState& ls = link_[links[i]];
    // Unsolved: in the tail after the heap, where the next solve finds it (and moves it
    // into the heap with its rate).
    ls.flows.push_back({kNever, id, static_cast<std::uint32_t>(i)});
    f.pos()[i] = static_cast<std::uint32_t>(ls.flows.size() - 1);
    ls.weight += f.slot_weight(i);
    // Its rate will be at least the link's equal share: rates below it stay.
    resolve_level_ = std::min(resolve_level_, ls.capacity / ls.weight);
    touch(links[i], true);
  }
}

// Brings a flow's remaining bytes (and its tag's delivered bytes) up to now.
void FlowNetwork::settle_flow(Flow& f) {
  const Seconds dt = now_ - f.updated;
  if (dt > 0 && f.rate > 0 && std::isfinite(f.rate)) {
    const Bytes moved = std::min(f.remaining, f.rate * dt);
    f.remaining -= moved;
    tag_bytes_[f.tag] += moved * f.weight * f.copies;
  }
  f.updated = std::max(f.updated, now_);
}

// Integrates a link's carried bytes and busy time up to now at its current load.
void FlowNetwork::settle_link(LinkState& ls) {
  const Seconds dt = now_ - ls.updated;
  if (dt > 0 && ls.load > 0) {
    ls.bytes += ls.load * dt;
    ls.busy += dt;
  }
  ls.updated = now_;
}

void FlowNetwork::finish(FlowId id) {
  Flow& f = flows_[id];
  if (f.state == State::active) {
    const FlowId moved = active_.back();
    active_[f.list_pos] = moved;
    flows_[moved].list_pos = f.list_pos;
    active_.pop_back();
    settle_flow(f);
  } else {
    --num_pending_;
  }
  if (f.linked) {
    // Rates below its own stay (see the header); an unsolved flow has rate 0.
    resolve_level_ = std::min(resolve_level_, f.solved ? f.rate : 0.0);
    const LinkId* links = f.links();
    for (std::uint32_t i = 0; i < f.hops; ++i) __builtin_prefetch(&link_[links[i]]);  // as in activate()
    for (std::uint32_t i = 0; i < f.hops; ++i) {
      const LinkId l = links[i];
      LinkState& ls = link_[l];
      // Saturated before this removal (loads only drop between solves, so the first
      // removal since the last solve sees the solved load): flows may speed up here.
      const bool was_saturated = saturated(ls);
      settle_link(ls);
      set_load(ls, ls.load_q - f.load_q * f.mult(i));
      ls.weight -= f.slot_weight(i);
      std::uint32_t hole = f.pos()[i];
      if (hole < ls.heap_n) {
        // Out of the heap: the heap's last entry fills the hole, which moves to its slot.
        const std::uint32_t hl = --ls.heap_n;
        if (hole < hl) {
          place(ls, hole, ls.flows[hl]);
          sift(ls, hole);
        }
        hole = hl;
      }
      // The hole is in the unsolved tail now: the last entry fills it.
      const LinkEntry last = ls.flows.back();
      ls.flows.pop_back();
      if (hole < ls.flows.size()) place(ls, hole, last);
      // A link left without flows constrains no one: nothing to re-fill there. (A ring's
      // flows end together and leave their links empty: 4 in 10 of the ZeRO-3 benchmark's
      // solves re-filled nothing and only walked such links.)
      if (!ls.flows.empty()) touch(l, was_saturated);
    }
    f.load_q = 0;
    f.linked = false;
  }
  due_remove(id);
  f.state = State::free;
  f.rate = 0;
  ++f.version;  // invalidates its pending-heap entry
  free_ids_.push_back(id);
}

void FlowNetwork::cancel(FlowId id) {
  check(id);
  finish(id);
}

bool FlowNetwork::unfinished(FlowId id) const { return id < flows_.size() && flows_[id].state != State::free; }

BytesPerSecond FlowNetwork::rate(FlowId id) {
  check(id);
  if (!dirty_links_.empty()) solve();
  return flows_[id].rate;
}

Bytes FlowNetwork::remaining(FlowId id) const {
  check(id);
  const Flow& f = flows_[id];
  if (f.state != State::active || !(f.rate > 0) || !std::isfinite(f.rate)) return f.remaining;
  return std::max(0.0, f.remaining - f.rate * std::max(0.0, now_ - f.updated));
}

Bytes FlowNetwork::link_bytes(LinkId l) const {
  const LinkState& ls = link_[series_rep_.empty() ? l : series_rep_[l]];
  return ls.bytes + ls.load * std::max(0.0, now_ - ls.updated);
}

Seconds FlowNetwork::link_busy_time(LinkId l) const {
  const LinkState& ls = link_[series_rep_.empty() ? l : series_rep_[l]];
  return ls.busy + (ls.load > 0 ? std::max(0.0, now_ - ls.updated) : 0.0);
}

Bytes FlowNetwork::tag_bytes(int tag) const {
  if (tag < 0 || static_cast<std::size_t>(tag) >= tag_bytes_.size()) return 0.0;
  Bytes b = tag_bytes_[tag];
  for (FlowId id : active_) {  // plus what active flows moved since their last update
    const Flow& f = flows_[id];
    if (f.tag == tag) b += (f.remaining - remaining(id)) * f.weight * f.copies;
  }
  return b;
}

void FlowNetwork::reset_statistics() {
  for (auto& l : link_) {
    settle_link(l);
    l.bytes = l.busy = 0;
  }
  for (FlowId id : active_) settle_flow(flows_[id]);
  std::fill(tag_bytes_.begin(), tag_bytes_.end(), 0.0);
  stats_start_ = now_;
}

void FlowNetwork::schedule_finish(FlowId id) {
  Flow& f = flows_[id];
  if (f.remaining <= 0 || std::isinf(f.rate))
    f.finish_at = f.updated;
  else if (f.rate > 0)
    f.finish_at = f.updated + f.remaining / f.rate;
  else
    f.finish_at = kNever;  // starved (a zero-capacity link): never completes
  if (f.finish_at == kNever) {
    due_remove(id);
    return;
  }
  std::uint32_t p = due_pos_[id];
  if (p == kNotQueued) {
    p = static_cast<std::uint32_t>(due_.size());
    due_.push_back({f.finish_at, id});
    due_pos_[id] = p;
  } else {
    due_[p].key = f.finish_at;
  }
  due_sift(p);
}

// The completion heap: restores order after the entry at i changed (either way).
void FlowNetwork::due_sift(std::uint32_t i) {
  const DueEntry e = due_[i];
  if (i > 0 && due_before(e, due_[(i - 1) / 2])) {
    do {
      const std::uint32_t parent = (i - 1) / 2;
      if (!due_before(e, due_[parent])) break;
      due_place(i, due_[parent]);
      i = parent;
    } while (i > 0);
    due_place(i, e);
    return;
  }
  const auto n = static_cast<std::uint32_t>(due_.size());
  for (;;) {
    std::uint32_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && due_before(due_[c + 1], due_[c])) ++c;
    if (!due_before(due_[c], e)) break;
    due_place(i, due_[c]);
    i = c;
  }
  due_place(i, e);
}

void FlowNetwork::due_remove(FlowId id) {
  const std::uint32_t p = due_pos_[id];
  if (p == kNotQueued) return;
  due_pos_[id] = kNotQueued;
  const DueEntry last = due_.back();
  due_.pop_back();
  if (p < due_.size()) {
    due_place(p, last);
    due_sift(p);
  }
}

// Adds flow `id` (at or above the level, not yet in the component) to the re-filled set
// and its links to the component; a link joins the search (its flows at its top rate are
// re-filled too) when it is a seed or saturated (see the header, rule (b)).
void FlowNetwork::take_flow(FlowId id) {
  stamps_[id].mark = stamp_;
  comp_flows_.push_back(id);
  const Flow& f = flows_[id];
  const auto path = f.path();
  for (std::uint32_t i = 0; i < f.hops; ++i) {
    const LinkId m = path[i];
    LinkState& ms = link_[m];
    if (ms.mark != stamp_) {
      ms.mark = stamp_;
      ms.comp = static_cast<std::uint32_t>(comp_links_.size());
      comp_links_.push_back(m);
    }
    comp_hops_.push_back({ms.comp, f.slot_weight(i)});
    if (ms.expanded != stamp_ && (ms.seed == stamp_ || saturated(ms))) expand(m, false);
  }
  comp_hop_end_.push_back(static_cast<std::uint32_t>(comp_hops_.size()));
}

// Queues link `l` for the search: its flows at its top rate, or (full) all at or above the
// level; a link is searched once each way at most.
void FlowNetwork::expand(LinkId l, bool full) {
  LinkState& ls = link_[l];
  if (ls.full == stamp_ || (!full && ls.expanded == stamp_)) return;
  ls.expanded = stamp_;
  if (full) ls.full = stamp_;
  expand_q_.push_back({l, full});
}

// Visits the entries of a link's heap from the root down, into the children of those for
// which `visit` returns true.
template <class Visit>
void FlowNetwork::walk_heap(const LinkState& ls, Visit visit) {
  dfs_.clear();
  dfs_.push_back(0);
  while (!dfs_.empty()) {
    const std::uint32_t j = dfs_.back();
    dfs_.pop_back();
    if (!visit(ls.flows[j])) continue;
    if (2 * j + 1 < ls.heap_n) dfs_.push_back(2 * j + 1);
    if (2 * j + 2 < ls.heap_n) dfs_.push_back(2 * j + 2);
  }
}

// Re-fills the queued links' flows at their top rate (all at or above the level for a
// full expansion) and the unsolved ones; their links join in turn (take_flow). A link's
// heap yields those flows without visiting the ones below: in a max-heap every entry at
// or above a rate has only such ancestors, so a walk from the root that stops at entries
// below it finds them all.
void FlowNetwork::search(double level) {
  while (!expand_q_.empty()) {
    const Expansion x = expand_q_.back();
    expand_q_.pop_back();
    LinkState& ls = link_[x.link];
    const auto size = static_cast<std::uint32_t>(ls.flows.size());
    for (std::uint32_t j = ls.heap_n; j < size; ++j) {  // unsolved: all re-filled
      ++stats_.entries;
      const FlowId id = ls.flows[j].id;
      if (stamps_[id].mark != stamp_) take_flow(id);
    }
    if (ls.heap_n == 0) continue;
    // Not full: the flows at the link's top rate (ties within a relative 1e-9).
    const double from = x.full ? level : std::max(level, ls.flows[0].key * (1 - 1e-9));
    walk_heap(ls, [&](const LinkEntry& e) {
      if (e.key < from) return false;  // and so is its whole subtree
      ++stats_.entries;
      if (stamps_[e.id].mark != stamp_) take_flow(e.id);
      return true;
    });
  }
}

// The fastest flow at or above the level on link `l` that this solve does not re-fill
// (0: none): a search of its heap that stops below the level and at the first kept
// entry of each path (the entries under it are no faster).
double FlowNetwork::faster_kept(LinkId l, double level) {
  const LinkState& ls = link_[l];
  if (ls.full == stamp_ || ls.heap_n == 0) return 0;
  double best = 0;
  walk_heap(ls, [&](const LinkEntry& e) {
    if (e.key < level || e.key <= best) return false;
    if (stamps_[e.id].mark == stamp_) return true;  // re-filled: look below it
    best = e.key;
    return false;
  });
  return best;
}

// Progressive filling of the re-filled flows (comp_flows_) on the component's links;
// flows not re-filled keep their rates and reserve their capacity: the link's load
// minus what the re-filled flows carried (exact fixed-point sums: the order does not
// matter). Leaves each component link's slack in comp_remaining_ and each flow's rate
// in new_rate. Works on the component's own dense arrays (indexed by position in
// comp_links_, each flow's hops listed in comp_hops_ by take_flow): after the first
// pass the scattered link and flow records are not read again.
void FlowNetwork::fill() {
  const std::size_t nl = comp_links_.size();
  const std::size_t nf = comp_flows_.size();
  comp_refilled_.assign(nl, 0);
  comp_unfixed_.assign(nl, 0);
  comp_begin_.assign(nl + 1, 0);
  for (std::size_t k = 0; k < nf; ++k) {
    const Flow& f = flows_[comp_flows_[k]];
    const std::uint32_t h0 = comp_hop_end_[k] - f.hops;
    for (std::uint32_t i = 0; i < f.hops; ++i) {
      const CompHop& h = comp_hops_[h0 + i];
      comp_refilled_[h.comp] += f.load_q * f.mult(i);
      comp_unfixed_[h.comp] += h.weight;
      ++comp_begin_[h.comp + 1];
    }
  }
  comp_remaining_.resize(nl);
  for (std::uint32_t i = 0; i < nl; ++i) {
    const LinkState& ls = link_[comp_links_[i]];
    comp_remaining_[i] = ls.capacity - to_double(ls.load_q - comp_refilled_[i]) / kLoadScale;
  }
  comp_fix_share_.assign(nl, -1.0);
  if (nf == 1) {
    // One flow (a fifth of the ZeRO-3 bench run's solves): its link of the smallest share
    // fixes it (the first in component order on a tie: any tied link is a bottleneck), the
    // value the heap's first pop gives, without the heap.
    double share = kNever;
    std::uint32_t at = 0;
    for (std::uint32_t i = 0; i < nl; ++i) {
      if (comp_unfixed_[i] == 0) continue;
      const double s = std::max(0.0, comp_remaining_[i]) / comp_unfixed_[i];
      if (s < share) share = s, at = i;
    }
    flows_[comp_flows_[0]].new_rate = share;
    comp_fix_share_[at] = share;
    for (std::uint32_t h = 0; h < comp_hop_end_[0]; ++h)
      comp_remaining_[comp_hops_[h].comp] -= share * comp_hops_[h].weight;
    return;
  }
  // Each component link's re-filled flows (by index in comp_flows_), in comp_flows_
  // order (a counting sort).
  for (std::size_t i = 0; i < nl; ++i) comp_begin_[i + 1] += comp_begin_[i];
  comp_entries_.resize(comp_begin_[nl]);
  comp_fill_at_.assign(comp_begin_.begin(), comp_begin_.end() - 1);
  for (std::uint32_t k = 0, h = 0; k < nf; ++k)
    for (; h < comp_hop_end_[k]; ++h) comp_entries_[comp_fill_at_[comp_hops_[h].comp]++] = k;
  // Every re-filled flow gets its new_rate below (each of its links pops from the heap).
  // A link crossed by one re-filled flow only can only ever fix that flow: of such
  // links only each flow's tightest joins the heap (the others would pop after the
  // flow is fixed, with nothing left to fix, or tie with it at the same share).
  comp_fixed_.assign(nf, 0);
  own_link_.assign(nf, {kNever, 0, 0});
  fill_heap_.clear();
  for (std::uint32_t i = 0; i < nl; ++i) {
    if (comp_unfixed_[i] == 0) continue;
    const double share = std::max(0.0, comp_remaining_[i]) / comp_unfixed_[i];
    if (comp_begin_[i + 1] - comp_begin_[i] == 1) {
      OwnLink& own = own_link_[comp_entries_[comp_begin_[i]]];
      if (own.comp_plus_one == 0 || share < own.share) own = {share, comp_links_[i], i + 1};
      continue;
    }
    fill_heap_.push_back(fill_key(share, comp_links_[i], i));
  }
  for (const OwnLink& own : own_link_)
    if (own.comp_plus_one != 0) fill_heap_.push_back(fill_key(own.share, own.link, own.comp_plus_one - 1));
  fill_heap_make();
  // Each round saturates the link of the smallest share and fixes its unfixed flows at
  // that share. A link's share only grows as flows on it are fixed (they take the round's
  // share, at most its own), so its key stays a lower bound and is brought up to date
  // when it reaches the top (pushed again if it grew), not at every round that touches it;
  // a share that rounding nudged below its key is still the smallest (every other share
  // is at least its key). Ends when every re-filled flow is fixed: the links still queued
  // have none left.
  std::size_t unfixed_flows = nf;
  while (unfixed_flows > 0 && !fill_heap_.empty()) {
    const FillKey top = fill_heap_pop();
    const std::uint32_t c = fill_comp(top);
    if (comp_unfixed_[c] == 0) continue;
    const double share = std::max(0.0, comp_remaining_[c]) / comp_unfixed_[c];
    if (share > fill_share(top)) {
      fill_heap_push(fill_key(share, fill_link(top), c));
      continue;
    }
    comp_fix_share_[c] = share;
    for (std::uint32_t e = comp_begin_[c]; e < comp_begin_[c + 1]; ++e) {
      const std::uint32_t k = comp_entries_[e];
      if (comp_fixed_[k]) continue;
      comp_fixed_[k] = 1;
      --unfixed_flows;
      flows_[comp_flows_[k]].new_rate = share;
      for (std::uint32_t h = k == 0 ? 0 : comp_hop_end_[k - 1]; h < comp_hop_end_[k]; ++h) {
        const CompHop& hop = comp_hops_[h];
        comp_remaining_[hop.comp] -= share * hop.weight;  // k shares for a k-flow entry, m per multiplicity
        comp_unfixed_[hop.comp] -= hop.weight;
      }
    }
  }
}

// The filling's heap (a binary min-heap on FillKey): the smaller child is picked with an
// integer compare, no branch; a pop moves the hole to a leaf along the smaller children
// and sifts the last entry up from there (Floyd), which rarely climbs.
void FlowNetwork::fill_heap_make() {
  const auto n = static_cast<std::uint32_t>(fill_heap_.size());
  for (std::uint32_t s = n / 2; s-- > 0;) {
    const FillKey e = fill_heap_[s];
    std::uint32_t i = s;
    for (std::uint32_t c; (c = 2 * i + 1) < n; i = c) {
      c += static_cast<std::uint32_t>(c + 1 < n && fill_heap_[c + 1] < fill_heap_[c]);
      if (!(fill_heap_[c] < e)) break;
      fill_heap_[i] = fill_heap_[c];
    }
    fill_heap_[i] = e;
  }
}

// Puts `k` into the hole at i, moving it up past larger parents.
void FlowNetwork::fill_heap_up(std::uint32_t i, FillKey k) {
  while (i > 0) {
    const std::uint32_t p = (i - 1) / 2;
    if (!(k < fill_heap_[p])) break;
    fill_heap_[i] = fill_heap_[p];
    i = p;
  }
  fill_heap_[i] = k;
}

void FlowNetwork::fill_heap_push(FillKey k) {
  fill_heap_.push_back(k);
  fill_heap_up(static_cast<std::uint32_t>(fill_heap_.size() - 1), k);
}

FlowNetwork::FillKey FlowNetwork::fill_heap_pop() {
  const FillKey top = fill_heap_.front();
  const FillKey last = fill_heap_.back();
  fill_heap_.pop_back();
  const auto n = static_cast<std::uint32_t>(fill_heap_.size());
  if (n == 0) return top;
  std::uint32_t i = 0;
  for (std::uint32_t c; (c = 2 * i + 1) < n; i = c) {
    c += static_cast<std::uint32_t>(c + 1 < n && fill_heap_[c + 1] < fill_heap_[c]);
    fill_heap_[i] = fill_heap_[c];
  }
  fill_heap_up(i, last);
  return top;
}

// Max-min rates for the flows that a change since the last solve can move (see the
// header: level-bounded, seeded by the changed links that were saturated, grown through
// saturated links, checked after the filling).
void FlowNetwork::solve() {
  ++stamp_;  // dirty links carry this stamp already (touch() marks with stamp_ + 1)
  ++stats_.solves;
  // A relative margin keeps flows that rounding put a hair below the level (ties in
  // exact arithmetic) in the re-fill.
  const double level = resolve_level_ * (1 - 1e-9);
  resolve_level_ = kNever;
  comp_links_.clear();
  comp_flows_.clear();
  comp_hops_.clear();
  comp_hop_end_.clear();
  for (LinkId l : dirty_links_) {
    LinkState& ls = link_[l];
    if (ls.seed != stamp_) {  // only lost flows, and was not saturated: no flow depends on it
      ls.mark = 0;            // (not in the component unless a re-filled flow crosses it)
      continue;
    }
    ls.comp = static_cast<std::uint32_t>(comp_links_.size());
    comp_links_.push_back(l);
    expand(l, false);
  }
  dirty_links_.clear();
  search(level);
  // Fill (when the search found flows to re-fill); where a link fixed flows below the rate
  // of a flow it kept, re-fill all of that link's flows at or above the level (the
  // header's check (c)) and fill again.
  while (!comp_flows_.empty()) {
    fill();
    const std::size_t had = comp_flows_.size();
    for (std::uint32_t i = 0; i < comp_links_.size(); ++i)
      if (comp_fix_share_[i] >= 0 && faster_kept(comp_links_[i], level) > comp_fix_share_[i] * (1 + 1e-9))
        expand(comp_links_[i], true);
    search(level);
    if (comp_flows_.size() == had) break;
    ++stats_.refills;
  }
  stats_.links += comp_links_.size();
  stats_.flows += comp_flows_.size();
  // Flows whose rate changed: bring them up to now, move their load and heap keys,
  // re-key their completion. (Every link of a re-filled flow is a component link.)
  for (LinkId m : comp_links_) settle_link(link_[m]);
  for (FlowId id : comp_flows_) {
    Flow& f = flows_[id];
    const bool was_solved = f.solved;
    f.solved = true;
    if (was_solved && f.new_rate == f.rate && f.finish_at != kNever) continue;
    ++stats_.changed;
    settle_flow(f);
    f.rate = f.new_rate;
    const Load q = to_load(f.rate * f.weight);
    const LinkId* links = f.links();
    std::uint32_t* pos = f.pos();
    for (std::uint32_t i = 0; i < f.hops; ++i) {
      LinkState& ls = link_[links[i]];
      set_load(ls, ls.load_q + (q - f.load_q) * f.mult(i));
      const std::uint32_t p = pos[i];
      if (p < ls.heap_n) {
        ls.flows[p].key = f.rate;
        sift(ls, p);
        continue;
      }
      // First rate: from the tail into the heap (the tail's first entry takes its slot).
      const std::uint32_t h = ls.heap_n++;
      if (p != h) place(ls, p, ls.flows[h]);
      place(ls, h, {f.rate, id, i});
      sift_up(ls, h);
    }
    f.load_q = q;
    schedule_finish(id);
  }
}

Seconds FlowNetwork::next_event_internal() {
  while (!pending_heap_.empty()) {
    const HeapEntry& e = pending_heap_.front();
    const Flow& f = flows_[e.id];
    if (f.version == e.version && f.state == State::pending) break;
    std::pop_heap(pending_heap_.begin(), pending_heap_.end(), KeyGreater{});
    pending_heap_.pop_back();
  }
  Seconds t = kNever;
  if (!pending_heap_.empty()) t = pending_heap_.front().key;
  if (!due_.empty()) t = std::min(t, std::max(now_, due_.front().key));
  return t;
}

Seconds FlowNetwork::next_event_time() {
  if (!dirty_links_.empty()) solve();
  return next_event_internal();
}

void FlowNetwork::advance_to(Seconds t, std::vector<FlowId>& completed) {
  PTSIM_CHECK(t >= now_ - kTimeEpsilon, "FlowNetwork: cannot go back in time from {} s to {} s", now_, t);
  for (;;) {
    if (!dirty_links_.empty()) solve();
    const Seconds te = next_event_internal();
    if (te > t + kTimeEpsilon) {
      now_ = std::max(now_, t);
      return;
    }
    now_ = std::max(now_, std::min(te, t));
    const Seconds due = now_ + kTimeEpsilon;
    // Activations due now.
    while (!pending_heap_.empty() && pending_heap_.front().key <= due) {
      const HeapEntry e = pending_heap_.front();
      std::pop_heap(pending_heap_.begin(), pending_heap_.end(), KeyGreater{});
      pending_heap_.pop_back();
      const Flow& f = flows_[e.id];
      if (f.version == e.version && f.state == State::pending) activate(e.id);
    }
    // Completions due now, in completion order; one solve afterwards for all of them.
    while (!due_.empty() && due_.front().key <= due) {
      const FlowId id = due_.front().id;
      completed.push_back(id);
      finish(id);  // takes it off the completion heap
    }
  }
}

Seconds FlowNetwork::run_until_idle(std::vector<FlowId>* completed) {
  std::vector<FlowId> local;
  auto& out = completed ? *completed : local;
  while (num_unfinished() > 0) {
    const Seconds t = next_event_time();
    if (t == kNever) break;  // only starved flows left
    advance_to(t, out);
  }
  return now_;
}

}  // namespace ptsim::hw::net
