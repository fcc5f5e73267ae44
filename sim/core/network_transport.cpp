#include "sim/core/network_transport.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "hw/errors.h"
#include "hw/slot_pool.h"

namespace ptsim::sim {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// Engine tick at or after t (seconds), so that advancing the FlowNetwork to that
// tick always reaches the event (FlowNetwork::kTimeEpsilon is one tick).
Tick tick_at_or_after(Seconds t) {
  return static_cast<Tick>(std::ceil(t * static_cast<double>(kTicksPerSecond) - 0.5));
}

std::string percent(double x) { return fmt::format("{:.0f}%", 100 * x); }

}  // namespace

NetworkTransport::NetworkTransport(NetworkModel& model, const CollectiveCost& cost)
    : model_(model), cost_(cost), net_(model.topology()) {
  net_.contract_series_links();  // its paths are routes between GPUs, contracted in get_template
  const std::size_t links = model.topology().num_links();
  use_.assign(links, LinkUse{kNone, 0, 0.0});
  fast_comp_.assign(links, 0);
  link_owner_.assign(links, kUnowned);
  slots_.resize(1024);
}

std::uint64_t NetworkTransport::hash(const Key& k) {
  // splitmix64 finaliser (Steele, Lea & Flood, "Fast splittable pseudorandom number
  // generators", OOPSLA 2014) over the three words.
  auto mix = [](std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  return mix(mix(mix(k.a) ^ k.b) ^ k.c);
}

const NetworkTransport::Template& NetworkTransport::get_template(CollectiveKind c, Dim d, std::int64_t gid,
                                                                 std::span<const int> ranks, Bytes S,
                                                                 std::uint32_t group) {
  std::uint64_t sbits = 0;
  static_assert(sizeof(Bytes) == sizeof(std::uint64_t));
  std::memcpy(&sbits, &S, sizeof sbits);
  const Key key{static_cast<std::uint64_t>(c) | (static_cast<std::uint64_t>(d) << 8), static_cast<std::uint64_t>(gid),
                sbits};
  std::size_t mask = slots_.size() - 1;
  std::size_t pos = hash(key) & mask;
  for (; slots_[pos].t; pos = (pos + 1) & mask)
    if (slots_[pos].key == key) return *slots_[pos].t;
  if (2 * (templates_.size() + 1) > slots_.size()) {  // grow, then find the new key's slot
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (!s.t) continue;
      std::size_t j = hash(s.key) & mask;
      while (slots_[j].t) j = (j + 1) & mask;
      slots_[j] = s;
    }
    for (pos = hash(key) & mask; slots_[pos].t; pos = (pos + 1) & mask) {
    }
  }
  templates_.push_back(std::make_unique<Template>());
  Template& t = *templates_.back();
  slots_[pos] = Slot{key, &t};
  const auto e = model_.expand(c, ranks, S);
  auto& router = model_.router();
  const auto& topo = model_.topology();
  // Flows per link in the current step; left all-zero after each step (reused scratch).
  auto& load = template_load_;
  if (load.size() != topo.num_links()) load.assign(topo.num_links(), 0);
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> same;  // (path, size) hash -> flows of the step
  for (const auto& step : e.steps) {
    PhaseT p;
    p.repeat = step.repeat;
    p.flow_begin = static_cast<std::uint32_t>(t.flows.size());
    same.clear();
    for (std::size_t i = 0; i < step.flows.size(); ++i) {
      FlowT f;
      const auto& src = step.flows[i];
      router.route(src.src, src.dst, i, f.path);  // ECMP flow index i, as collective_time
      // The step's latency: NCCL's when the expansion has it, else its slowest path's.
      const bool path_latency = e.step_latency < 0;
      f.latency = path_latency ? router.path_latency(f.path) : e.step_latency;
      // A connection's queue pairs (adjacent flows of one node pair, hw/net/collectives.cpp
      // split_over_qps) move in lockstep: one flow over the links of all their paths, each
      // once with the number of them that cross it.
      if (e.qps > 1 && hw::net::split_over_qps(topo, src.src, src.dst)) {
        auto& crossing = qp_count_;  // by link: the connection's paths on it (all zero between uses)
        if (crossing.size() != topo.num_links()) crossing.assign(topo.num_links(), 0);
        for (auto l : f.path) ++crossing[l];
        for (int q = 1; q < e.qps; ++q) {
          router.route(src.src, src.dst, i + q, qp_path_);
          if (path_latency) f.latency = std::max(f.latency, router.path_latency(qp_path_));
          for (auto l : qp_path_)
            if (crossing[l]++ == 0) f.path.push_back(l);
        }
        f.mult.resize(f.path.size());
        for (std::size_t k = 0; k < f.path.size(); ++k) {
          f.mult[k] = static_cast<std::uint16_t>(crossing[f.path[k]]);
          crossing[f.path[k]] = 0;
        }
        if (std::all_of(f.mult.begin(), f.mult.end(), [](std::uint16_t m) { return m == 1; })) f.mult.clear();
        f.qps = static_cast<std::uint32_t>(e.qps);
        i += static_cast<std::size_t>(e.qps) - 1;
      }
      net_.contract_path(f.path, f.mult);  // one link per chain of series links (latency taken above)
      f.bytes = src.bytes;
      p.alpha = std::max(p.alpha, f.latency);
      for (std::size_t k = 0; k < f.path.size(); ++k) {
        const auto l = f.path[k];
        if (load[l] == 0) p.links.push_back(l);
        load[l] += f.mult_at(k);
      }
      // A flow identical to an earlier one of the step joins it as one more share.
      std::uint64_t bbits = 0;
      std::memcpy(&bbits, &f.bytes, sizeof bbits);
      std::uint64_t h = hash(Key{bbits, f.path.size(), 0});
      for (std::size_t k = 0; k < f.path.size(); ++k) h = hash(Key{h, f.path[k], f.mult_at(k)});
      auto& bucket = same[h];
      bool merged = false;
      for (std::uint32_t j : bucket) {
        FlowT& g = t.flows[j];
        if (g.bytes == f.bytes && g.path == f.path && g.mult == f.mult) {
          ++g.count;
          merged = true;
          break;
        }
      }
      if (merged) continue;
      bucket.push_back(static_cast<std::uint32_t>(t.flows.size()));
      t.flows.push_back(std::move(f));
    }
    p.flow_end = static_cast<std::uint32_t>(t.flows.size());
    // Isolated rates: each flow's equal share of its most loaded link (collective_time).
    for (std::uint32_t i = p.flow_begin; i < p.flow_end; ++i) {
      FlowT& f = t.flows[i];
      f.rate = std::numeric_limits<double>::infinity();
      for (auto l : f.path) f.rate = std::min(f.rate, topo.link(l).bandwidth / load[l]);
    }
    for (auto l : p.links) load[l] = 0;
    split_components(t, p);
    p.link_bytes.assign(p.links.size(), 0.0);
    for (std::uint32_t i = p.flow_begin; i < p.flow_end; ++i) {
      const FlowT& f = t.flows[i];
      if (f.path.empty()) continue;
      p.wire_bytes += f.count * f.qps * f.bytes;
    }
    // Bytes per link of the phase; load[] holds each link's index + 1 in p.links meanwhile.
    for (std::size_t k = 0; k < p.links.size(); ++k) load[p.links[k]] = static_cast<std::uint32_t>(k + 1);
    for (std::uint32_t i = p.flow_begin; i < p.flow_end; ++i) {
      const FlowT& f = t.flows[i];
      for (std::size_t k = 0; k < f.path.size(); ++k)
        p.link_bytes[load[f.path[k]] - 1] += f.count * f.mult_at(k) * f.bytes;
    }
    for (auto l : p.links) load[l] = 0;
    // Isolated durations: each component's slowest flow; the phase's is the slowest of all.
    Seconds transfer = 0;
    for (Comp& k : p.comps) {
      Seconds slowest = 0;
      for (std::uint32_t j = k.flow_begin; j < k.flow_end; ++j) {
        const FlowT& f = t.flows[p.comp_flows[j]];
        if (f.bytes > 0) slowest = std::max(slowest, f.bytes / f.rate);
        k.wire_bytes += f.count * f.qps * f.bytes;
      }
      k.fast_time = static_cast<double>(p.repeat) * (p.alpha + slowest);
      transfer = std::max(transfer, slowest);
    }
    p.fast_time = static_cast<double>(p.repeat) * (p.alpha + transfer);
    t.phases.push_back(std::move(p));
  }
  t.group = group;
  claim_links(t);
  return t;
}

// The phase's components (flows joined by a shared link, union-find), numbered in the
// order of their first flow; p.links is regrouped by component.
void NetworkTransport::split_components(const Template& t, PhaseT& p) {
  auto& first = template_load_;  // all zero: link -> 1 + the first flow (local index) on it
  const std::uint32_t n = p.flow_end - p.flow_begin;
  std::vector<std::uint32_t> parent(n);
  for (std::uint32_t i = 0; i < n; ++i) parent[i] = i;
  auto root = [&](std::uint32_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  for (std::uint32_t i = 0; i < n; ++i)
    for (auto l : t.flows[p.flow_begin + i].path) {
      if (first[l] == 0) {
        first[l] = i + 1;
        continue;
      }
      const std::uint32_t a = root(first[l] - 1), b = root(i);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  std::vector<std::uint32_t> comp(n, kNone);  // by local flow index: its component
  std::uint32_t ncomp = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (t.flows[p.flow_begin + i].path.empty()) continue;
    std::uint32_t& r = comp[root(i)];
    if (r == kNone) r = ncomp++;
    comp[i] = r;
  }
  p.comps.assign(ncomp, Comp{});
  std::vector<std::pair<std::uint32_t, hw::net::LinkId>> by_comp;
  by_comp.reserve(p.links.size());
  for (auto l : p.links) {
    by_comp.emplace_back(comp[first[l] - 1], l);
    first[l] = 0;
  }
  std::stable_sort(by_comp.begin(), by_comp.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t k = 0; k < by_comp.size(); ++k) {
    p.links[k] = by_comp[k].second;
    Comp& c = p.comps[by_comp[k].first];
    if (c.link_end == 0) c.link_begin = static_cast<std::uint32_t>(k);
    c.link_end = static_cast<std::uint32_t>(k + 1);
  }
  std::vector<std::uint32_t> count(ncomp + 1, 0);  // flows per component, then where each begins
  for (std::uint32_t i = 0; i < n; ++i)
    if (comp[i] != kNone) ++count[comp[i] + 1];
  for (std::uint32_t c = 0; c < ncomp; ++c) {
    count[c + 1] += count[c];
    p.comps[c].flow_begin = count[c];
    p.comps[c].flow_end = count[c];
  }
  p.comp_flows.assign(count[ncomp], 0);
  for (std::uint32_t i = 0; i < n; ++i)
    if (comp[i] != kNone) p.comp_flows[p.comps[comp[i]].flow_end++] = p.flow_begin + i;
}

// A group's template takes its links if no other group and no shared template crosses
// them; otherwise all of its links become shared, and a group that loses a link loses
// its private phases there (epoch_).
void NetworkTransport::claim_links(Template& t) {
  bool own = t.group != kSharedLink;
  for (const PhaseT& p : t.phases)
    for (auto l : p.links) own = own && (link_owner_[l] == kUnowned || link_owner_[l] == t.group);
  bool lost = false;
  for (const PhaseT& p : t.phases)
    for (auto l : p.links) {
      std::uint32_t& o = link_owner_[l];
      if (own) {
        o = t.group;
      } else if (o != kSharedLink) {
        // Another group's link, taken while a collective that group ran inline may not have
        // ended: the traffic now starting could have met it (run_inline). Its own next
        // template comes after it: every member was in it.
        if (o != kUnowned && o != t.group) {
          const auto& until = inline_until_[o >> 24];
          if ((o & 0xffffffu) < until.size() && engine_ && until[o & 0xffffffu] >= engine_->now())
            throw InlineConflict{};
        }
        lost = lost || o != kUnowned;
        o = kSharedLink;
      }
    }
  if (!lost) return;
  ++epoch_;
  for (const auto& memos : memo_)
    for (const GroupMemo& m : memos)
      if (m.private_xfer != kNone) register_private(m.private_xfer);
}

bool NetworkTransport::is_private(const Template& t, const PhaseT& p) const {
  if (p.private_epoch != epoch_) {
    p.private_links = t.group != kSharedLink &&
                      std::all_of(p.links.begin(), p.links.end(), [&](auto l) { return link_owner_[l] == t.group; });
    p.private_epoch = epoch_;
  }
  return p.private_links;
}

// A private transfer in flight becomes an ordinary fast-path one: it takes its links,
// so that traffic arriving on them sees (and promotes) it.
void NetworkTransport::register_private(std::uint32_t id) {
  Transfer& x = transfers_[id];
  claim_fast(id);
  x.priv = false;
  memo_of(x.group).private_xfer = kNone;
}

// A private phase's bytes, per dimension now and per link when a report asks (settle_private).
void NetworkTransport::count_private(const PhaseT& p, int tag) {
  const double r = static_cast<double>(p.repeat);
  dim_bytes_[static_cast<std::size_t>(tag)] += r * p.wire_bytes;
  if (p.private_repeats == 0) private_phases_.push_back(&p);
  p.private_repeats += r;
}

// Private phases' link bytes, onto their links (before any link's bytes are read).
void NetworkTransport::settle_private() const {
  if (private_phases_.empty()) return;
  if (private_bytes_.empty()) private_bytes_.assign(use_.size(), 0.0);
  for (const PhaseT* p : private_phases_) {
    for (std::size_t i = 0; i < p->links.size(); ++i)
      private_bytes_[p->links[i]] += p->private_repeats * p->link_bytes[i];
    p->private_repeats = 0;
  }
  private_phases_.clear();
}

void NetworkTransport::start_collective(Engine& engine, CollectiveKind c, Dim d, int gid, const GroupShape& shape,
                                        Bytes S, Engine::Callback done, void* ctx, std::uint64_t arg) {
  engine_ = &engine;
  if (shape.size <= 1) {
    engine.schedule(engine.now(), done, ctx, arg);
    return;
  }
  begin(engine, group_template(c, d, gid, S), static_cast<int>(d), gid >= 0 ? group_token(d, gid) : kSharedLink, done,
        ctx, arg);
}

// Exact: until `at` nothing of the group can start (the caller's promise), and a group's
// private links carry no one else's traffic. If a new template takes one of them before
// `at` (claim_links), the transfer registers on its links as any private one in flight
// does, and traffic that meets it there promotes it with its flows starting at
// phase_tick + latency, in the future (promote's `now < active_from`). Declined, it may
// still have built the group's template now rather than at `at`, which can take links from
// other groups earlier; their phases then take the ordinary fast path instead of the
// private one, with the same times (test NetworkTransport.PrivatePhasesGiveTheShared...).
bool NetworkTransport::start_collective_at(Engine& e, Tick at, CollectiveKind c, Dim d, int gid,
                                           const GroupShape& shape, Bytes S, Engine::Callback done, void* ctx,
                                           std::uint64_t arg) {
  engine_ = &e;
  if (shape.size <= 1 || gid < 0) return false;
  const Template& t = group_template(c, d, gid, S);
  if (t.phases.empty()) return false;
  if (memo_of(group_token(d, gid)).inflight != 0 || !is_private(t, t.phases[0])) return false;
  begin(e, t, static_cast<int>(d), group_token(d, gid), done, ctx, arg, at);  // alone and private: its fast path
  return true;
}

Tick NetworkTransport::run_inline(Engine& e, Tick at, CollectiveKind c, Dim d, int gid, const GroupShape& shape,
                                  Bytes S) {
  engine_ = &e;
  if (shape.size <= 1 || gid < 0) return -1;
  const Template& t = group_template(c, d, gid, S);
  const std::uint32_t token = group_token(d, gid);
  if (t.phases.empty() || memo_of(token).inflight != 0) return -1;
  for (const PhaseT& p : t.phases)
    if (!is_private(t, p)) return -1;
  Tick end = at;
  for (const PhaseT& p : t.phases) {
    count_private(p, static_cast<int>(d));
    end += to_ticks(p.fast_time);
  }
  ++transfers_started_;
  last_time_ = std::max(last_time_, to_seconds(end));
  auto& until = inline_until_[static_cast<std::size_t>(d)];
  if (until.size() <= static_cast<std::size_t>(gid)) until.resize(static_cast<std::size_t>(gid) + 1, -1);
  until[static_cast<std::size_t>(gid)] = std::max(until[static_cast<std::size_t>(gid)], end);
  return end - at;
}

const NetworkTransport::Template& NetworkTransport::group_template(CollectiveKind c, Dim d, int gid, Bytes S) {
  if (gid < 0) return get_template(c, d, gid, model_.members(d, gid), S, kSharedLink);
  std::uint64_t sbits = 0;
  std::memcpy(&sbits, &S, sizeof sbits);
  auto& memos = memo_[static_cast<std::size_t>(d)];
  if (static_cast<std::size_t>(gid) >= memos.size()) {
    PTSIM_CHECK(gid < (1 << 24), "group id {} does not fit a group token", gid);
    memos.resize(static_cast<std::size_t>(gid) + 1);
  }
  GroupMemo& m = memos[static_cast<std::size_t>(gid)];
  for (int i = 0; i < 2; ++i)
    if (m.t[i] && m.c[i] == c && m.sbits[i] == sbits) {
      __builtin_prefetch(m.t[i]);
      __builtin_prefetch(m.first[i]);
      return *m.t[i];
    }
  const Template& t = get_template(c, d, gid, model_.members(d, gid), S, group_token(d, gid));
  m.sbits[m.next] = sbits;
  m.t[m.next] = &t;
  m.first[m.next] = t.phases.empty() ? nullptr : t.phases.data();
  m.c[m.next] = c;
  m.next ^= 1;
  return t;
}

void NetworkTransport::start_p2p(Engine& engine, int src, int dst, const GroupShape&, Bytes bytes,
                                 Engine::Callback done, void* ctx, std::uint64_t arg) {
  engine_ = &engine;
  std::uint64_t sbits = 0;
  std::memcpy(&sbits, &bytes, sizeof sbits);
  if (static_cast<std::size_t>(src) >= p2p_memo_.size()) p2p_memo_.resize(static_cast<std::size_t>(src) + 1);
  P2pMemo& m = p2p_memo_[static_cast<std::size_t>(src)];
  for (int i = 0; i < 2; ++i)
    if (m.t[i] && m.dst[i] == dst && m.sbits[i] == sbits) {
      begin(engine, *m.t[i], static_cast<int>(Dim::pp), kSharedLink, done, ctx, arg);
      return;
    }
  const int ranks[2] = {src, dst};
  const Template& t = get_template(CollectiveKind::send_recv, Dim::pp, (static_cast<std::int64_t>(src) << 32) | dst,
                                   ranks, bytes, kSharedLink);
  m.t[m.next] = &t;
  m.dst[m.next] = dst;
  m.sbits[m.next] = sbits;
  m.next ^= 1;
  begin(engine, t, static_cast<int>(Dim::pp), kSharedLink, done, ctx, arg);
}

void NetworkTransport::begin(Engine& e, const Template& t, int tag, std::uint32_t group, Engine::Callback done,
                             void* ctx, std::uint64_t arg, Tick at) {
  ++transfers_started_;
  if (at < 0) at = e.now();
  last_time_ = std::max(last_time_, to_seconds(at));
  if (t.phases.empty()) {
    e.schedule(e.now(), done, ctx, arg);
    return;
  }
  const std::uint32_t id = take_slot(free_transfers_, transfers_);
  Transfer& x = transfers_[id];
  // A reused slot: start_phase sets the per-phase fields (comp_mode keeps its capacity).
  x.t = &t;
  x.phase = 0;
  x.priv = false;
  x.tag = tag;
  x.done = done;
  x.ctx = ctx;
  x.arg = arg;
  x.group = group;
  if (group != kSharedLink) ++memo_of(group).inflight;
  start_phase(id, at);
}

void NetworkTransport::start_phase(std::uint32_t id, Tick at) {
  Transfer& x = transfers_[id];
  const PhaseT& p = x.t->phases[x.phase];
  x.phase_tick = at < 0 ? engine_->now() : at;
  x.outstanding = 0;
  x.fast_pending = true;
  x.shared = false;
  x.comps_recorded = false;
  if (x.group != kSharedLink && is_private(*x.t, p)) {
    GroupMemo& m = memo_of(x.group);
    if (m.inflight == 1) {  // alone on links no one else crosses
      x.priv = true;
      m.private_xfer = id;
      x.fast_at = x.phase_tick + to_ticks(p.fast_time);
      x.fast_event = engine_->schedule(x.fast_at, &NetworkTransport::on_fast_done, this, id);
      return;
    }
    if (m.private_xfer != kNone) register_private(m.private_xfer);  // the group's other transfer meets this one
  }
  // The fast components this phase meets, pushed above what callers further up (a
  // promotion that ends a transfer starts its next phase) still iterate.
  const std::size_t base = owners_.size();
  bool contended = false;
  std::uint32_t c = 0;  // the component of links[k] (they are grouped by component)
  for (std::uint32_t k = 0; k < p.links.size(); ++k) {
    const LinkUse& u = use_[p.links[k]];
    if (u.net_users == 0 && u.fast_owner == kNone) continue;
    if (!contended) x.comp_mode.assign(p.comps.size(), CompMode::fast);
    contended = true;
    while (k >= p.comps[c].link_end) ++c;
    x.comp_mode[c] = CompMode::net;
    if (u.fast_owner == kNone) continue;
    const std::uint64_t o = (std::uint64_t{u.fast_owner} << 32) | fast_comp_of(u.fast_owner, p.links[k]);
    if (std::find(owners_.begin() + static_cast<std::ptrdiff_t>(base), owners_.end(), o) == owners_.end())
      owners_.push_back(o);
  }
  if (!contended) {  // the whole phase on the fast path (comp_mode is read once it is shared)
    claim_fast(id);
    x.fast_at = x.phase_tick + to_ticks(p.fast_time);
    x.fast_event = engine_->schedule(x.fast_at, &NetworkTransport::on_fast_done, this, id);
    return;
  }
  const std::size_t end = owners_.size();
  for (std::size_t i = base; i < end; ++i)
    promote(static_cast<std::uint32_t>(owners_[i] >> 32), static_cast<std::uint32_t>(owners_[i]));
  owners_.resize(base);
  launch_net(id);
}

// Transfer `id` takes every link of its phase; with more than one component it notes
// which one each link is, for a promotion (fast_comp_of).
void NetworkTransport::claim_fast(std::uint32_t id) {
  Transfer& x = transfers_[id];
  const PhaseT& p = x.t->phases[x.phase];
  for (auto l : p.links) use_[l].fast_owner = id;
  if (p.comps.size() < 2) return;
  for (std::uint32_t c = 0; c < p.comps.size(); ++c)
    for (std::uint32_t k = p.comps[c].link_begin; k < p.comps[c].link_end; ++k) fast_comp_[p.links[k]] = c;
  x.comps_recorded = true;
}

void NetworkTransport::own_flow(Transfer& x, std::uint32_t id, hw::net::FlowId fid) {
  if (flow_owner_.size() <= fid) flow_owner_.resize(fid + 1, kNone);
  flow_owner_[fid] = id;
  ++x.outstanding;
  ++shared_flows_;
}

void NetworkTransport::schedule_fast(std::uint32_t id) {
  Transfer& x = transfers_[id];
  const PhaseT& p = x.t->phases[x.phase];
  Seconds last = -1;
  for (std::uint32_t c = 0; c < p.comps.size(); ++c)
    if (x.comp_mode[c] == CompMode::fast) last = std::max(last, p.comps[c].fast_time);
  if (p.comps.empty()) last = p.fast_time;  // nothing on the wire: only the latency
  // A component promoted after the others' end leaves them due now.
  const Tick at = last < 0 ? -1 : std::max(engine_->now(), x.phase_tick + to_ticks(last));
  if (x.fast_pending && at == x.fast_at) return;
  if (x.fast_pending) engine_->cancel(x.fast_event);
  x.fast_pending = at >= 0;
  if (!x.fast_pending) return;
  x.fast_at = at;
  x.fast_event = engine_->schedule(at, &NetworkTransport::on_fast_done, this, id);
}

// Components that meet traffic go to the FlowNetwork; the others take their links.
void NetworkTransport::launch_net(std::uint32_t id) {
  Transfer& x = transfers_[id];
  const PhaseT& p = x.t->phases[x.phase];
  const Seconds now = to_seconds(x.phase_tick);
  const double r = static_cast<double>(p.repeat);
  x.fast_pending = false;
  x.comps_recorded = true;
  bool net = false;
  for (std::uint32_t c = 0; c < p.comps.size(); ++c) {
    const Comp& k = p.comps[c];
    if (x.comp_mode[c] == CompMode::fast) {
      for (std::uint32_t i = k.link_begin; i < k.link_end; ++i) {
        use_[p.links[i]].fast_owner = id;
        fast_comp_[p.links[i]] = c;
      }
      continue;
    }
    if (!x.shared) ++shared_phases_;
    x.shared = true;
    net = true;
    for (std::uint32_t j = k.flow_begin; j < k.flow_end; ++j) {
      const FlowT& f = x.t->flows[p.comp_flows[j]];
      // Every flow starts moving bytes at now + repeat·α, its step's latency (the
      // expansion's, which may exceed the path's links), so an idle network reproduces
      // the closed form.
      own_flow(
          x, id,
          net_.add_flow(f.path, r * f.bytes, now + r * p.alpha, x.tag, /*pay_latency=*/false, f.count, f.qps, f.mult));
    }
    for (std::uint32_t i = k.link_begin; i < k.link_end; ++i) ++use_[p.links[i]].net_users;
  }
  schedule_fast(id);
  if (net) kick();
}

// A fast-path component that meets other traffic joins the FlowNetwork with what it has
// left: until now its flows ran alone at their isolated rates.
void NetworkTransport::promote(std::uint32_t id, std::uint32_t c) {
  Transfer& x = transfers_[id];
  const PhaseT& p = x.t->phases[x.phase];
  const Comp& k = p.comps[c];
  const Seconds now = to_seconds(engine_->now());
  const double r = static_cast<double>(p.repeat);
  const Seconds active_from = to_seconds(x.phase_tick) + r * p.alpha;
  bool left = false;
  for (std::uint32_t j = k.flow_begin; j < k.flow_end && !left; ++j) {
    const FlowT& f = x.t->flows[p.comp_flows[j]];
    if (f.bytes <= 0) continue;
    left = now < active_from || r * f.bytes - f.rate * (now - active_from) > 1.0;
  }
  if (!left) return;  // finishing now anyway: let its own event complete it
  for (std::uint32_t i = k.link_begin; i < k.link_end; ++i)
    if (use_[p.links[i]].fast_owner == id) use_[p.links[i]].fast_owner = kNone;
  if (!x.shared) x.comp_mode.assign(p.comps.size(), CompMode::fast);
  x.comp_mode[c] = CompMode::net;
  if (!x.shared) ++shared_phases_;
  x.shared = true;
  const std::uint32_t before = x.outstanding;
  for (std::uint32_t j = k.flow_begin; j < k.flow_end; ++j) {
    const FlowT& f = x.t->flows[p.comp_flows[j]];
    const Bytes total = r * f.bytes;
    Bytes rest = total;
    hw::net::FlowId fid;
    if (now < active_from) {
      fid = net_.add_flow(f.path, total, active_from, x.tag, /*pay_latency=*/false, f.count, f.qps, f.mult);
    } else {
      const Bytes moved = std::min(total, f.rate * (now - active_from));
      rest = total - moved;
      for (std::size_t k = 0; k < f.path.size(); ++k) use_[f.path[k]].bytes += f.count * f.mult_at(k) * moved;
      dim_bytes_[static_cast<std::size_t>(x.tag)] += f.count * f.qps * moved;
      if (rest <= 1.0) continue;
      fid = net_.add_flow(f.path, rest, now, x.tag, /*pay_latency=*/false, f.count, f.qps, f.mult);
    }
    own_flow(x, id, fid);
  }
  if (x.outstanding == before) {  // every flow done after all
    x.comp_mode[c] = CompMode::done;
  } else {
    for (std::uint32_t i = k.link_begin; i < k.link_end; ++i) ++use_[p.links[i]].net_users;
  }
  schedule_fast(id);
  if (!x.fast_pending && x.outstanding == 0) {
    phase_finished(id);
    return;
  }
  if (x.outstanding > before) kick();
}

void NetworkTransport::phase_finished(std::uint32_t id, Done how) {
  Transfer& x = transfers_[id];
  last_time_ = std::max(last_time_, to_seconds(engine_->now()));
  if (++x.phase < x.t->phases.size()) {
    start_phase(id);
    return;
  }
  const Engine::Callback done = x.done;
  void* const ctx = x.ctx;
  const std::uint64_t arg = x.arg;
  if (x.group != kSharedLink) --memo_of(x.group).inflight;
  free_transfers_.push_back(id);
  switch (how) {  // x may move from here on: transfers started by `done` can grow transfers_
    case Done::now:
      done(ctx, arg);
      break;
    case Done::collect:
      finished_.push_back({done, ctx, arg});
      break;
    case Done::event:
      engine_->schedule(engine_->now(), done, ctx, arg);
      break;
  }
}

void NetworkTransport::on_fast_done(void* ctx, std::uint64_t arg) {
  auto* self = static_cast<NetworkTransport*>(ctx);
  const auto id = static_cast<std::uint32_t>(arg);
  Transfer& x = self->transfers_[id];
  const PhaseT& p = x.t->phases[x.phase];
  const double r = static_cast<double>(p.repeat);
  if (x.priv) {
    self->count_private(p, x.tag);
    x.priv = false;
    self->memo_of(x.group).private_xfer = kNone;
    self->phase_finished(id, Done::now);
    return;
  }
  x.fast_pending = false;
  if (!x.shared) {  // the whole phase ran on the fast path
    self->dim_bytes_[static_cast<std::size_t>(x.tag)] += r * p.wire_bytes;
    for (std::size_t i = 0; i < p.links.size(); ++i) {
      LinkUse& u = self->use_[p.links[i]];
      u.bytes += r * p.link_bytes[i];
      if (u.fast_owner == id) u.fast_owner = kNone;
    }
    self->phase_finished(id, Done::now);
    return;
  }
  // Its fast components end (the promoted ones' bytes are counted where they ran).
  for (std::uint32_t c = 0; c < p.comps.size(); ++c) {
    if (x.comp_mode[c] != CompMode::fast) continue;
    x.comp_mode[c] = CompMode::done;
    const Comp& k = p.comps[c];
    self->dim_bytes_[static_cast<std::size_t>(x.tag)] += r * k.wire_bytes;
    for (std::uint32_t i = k.link_begin; i < k.link_end; ++i) {
      LinkUse& u = self->use_[p.links[i]];
      u.bytes += r * p.link_bytes[i];
      if (u.fast_owner == id) u.fast_owner = kNone;
    }
  }
  if (x.outstanding == 0) self->phase_finished(id, Done::now);
}

// Runs the FlowNetwork's next event (or catches up after flows were added) now.
void NetworkTransport::kick() {
  const Tick now = engine_->now();
  if (net_event_at_ == now) return;
  if (net_event_at_ >= 0) engine_->cancel(net_event_);
  net_event_ = engine_->schedule(now, &NetworkTransport::on_net_event, this, 0);
  net_event_at_ = now;
}

void NetworkTransport::reschedule(bool in_handler) {
  const Seconds t = net_.next_event_time();
  if (t == hw::net::FlowNetwork::kNever) {
    net_event_at_ = -1;
    return;
  }
  Tick at = std::max(engine_->now() + (in_handler ? 1 : 0), tick_at_or_after(t));
  if (net_event_at_ == at) return;
  if (net_event_at_ >= 0) engine_->cancel(net_event_);
  net_event_ = engine_->schedule(at, &NetworkTransport::on_net_event, this, 0);
  net_event_at_ = at;
}

void NetworkTransport::on_net_event(void* ctx, std::uint64_t) {
  auto* self = static_cast<NetworkTransport*>(ctx);
  self->net_event_at_ = -1;
  self->completed_.clear();
  self->net_.advance_to(to_seconds(self->engine_->now()), self->completed_);
  // Resolve owners first: the FlowNetwork reuses a completed flow's id, and a phase
  // that finishes below may launch new flows that take the ids still in this list.
  // (Owners go to a member buffer: phase_finished() below never re-enters this handler.)
  auto& owners = self->completed_owners_;
  owners.clear();
  for (auto fid : self->completed_) {
    owners.push_back(self->flow_owner_[fid]);
    self->flow_owner_[fid] = kNone;
  }
  self->finished_.clear();
  for (const std::uint32_t id : owners) {
    Transfer& x = self->transfers_[id];
    if (--x.outstanding > 0) continue;
    const PhaseT& p = x.t->phases[x.phase];
    for (std::uint32_t c = 0; c < p.comps.size(); ++c) {
      if (x.comp_mode[c] != CompMode::net) continue;
      x.comp_mode[c] = CompMode::done;
      for (std::uint32_t i = p.comps[c].link_begin; i < p.comps[c].link_end; ++i) --self->use_[p.links[i]].net_users;
    }
    if (!x.fast_pending) self->phase_finished(id, Done::collect);
  }
  // The owners' callbacks, once the network's state is settled (they start new transfers).
  for (std::size_t i = 0; i < self->finished_.size(); ++i) {
    const Finished f = self->finished_[i];
    f.fn(f.ctx, f.arg);
  }
  // kick() from inside may have scheduled a catch-up at now; otherwise the next event.
  if (self->net_event_at_ != self->engine_->now()) self->reschedule(true);
}

Bytes NetworkTransport::link_bytes(hw::net::LinkId l) const {
  settle_private();
  const hw::net::LinkId r = net_.series_rep(l);  // a chain's links carry the same bytes (contract_series_links)
  return use_[r].bytes + (private_bytes_.empty() ? 0.0 : private_bytes_[r]) + net_.link_bytes(l);
}

Bytes NetworkTransport::dim_bytes(Dim d) const {
  return dim_bytes_[static_cast<std::size_t>(d)] + net_.tag_bytes(static_cast<int>(d));
}

bool NetworkTransport::is_fabric_link(hw::net::LinkId l) const {
  using hw::net::VertexKind;
  const auto& topo = model_.topology();
  const auto& L = topo.link(l);
  auto port = [&](hw::net::VertexId v) {
    const auto k = topo.kind(v);
    return k == VertexKind::gpu || k == VertexKind::nvswitch || k == VertexKind::pcie_switch || k == VertexKind::host;
  };
  return !port(L.src) && !port(L.dst);
}

std::vector<hw::net::LinkUsage> NetworkTransport::busiest_links(std::size_t n, bool fabric_only) const {
  std::function<bool(hw::net::LinkId)> keep;
  if (fabric_only) keep = [this](hw::net::LinkId l) { return is_fabric_link(l); };
  return hw::net::busiest_links(
      model_.topology(), [this](hw::net::LinkId l) { return link_bytes(l); }, std::max(last_time_, 1e-12), n, keep);
}

std::vector<std::string> NetworkTransport::report() const {
  std::vector<std::string> out;
  out.push_back(
      fmt::format("network: {}; link sharing on ({} transfers, {} phases shared links with overlapping traffic)",
                  model_.topology().description(), transfers_started_, shared_phases_));
  auto line = [](const std::vector<hw::net::LinkUsage>& v) {
    std::string s;
    for (const auto& x : v)
      s += fmt::format("{}{} {} ({:.3g} GB)", s.empty() ? "" : ", ", x.name, percent(x.utilisation), x.bytes / 1e9);
    return s;
  };
  // Fabric links first: they are where plans and fabrics differ (NVSwitch ports are
  // busy with TP traffic by design).
  if (const auto f = busiest_links(3, true); !f.empty()) out.push_back("busiest links: " + line(f));
  if (const auto a = busiest_links(3, false); !a.empty())
    out.push_back("busiest links (any, incl. NVLink/PCIe): " + line(a));
  std::string dims;
  for (int d = 0; d < kNumDims; ++d)
    if (const Bytes b = dim_bytes(static_cast<Dim>(d)); b > 0)
      dims += fmt::format("{}{} {:.3g} GB", dims.empty() ? "" : ", ", to_string(static_cast<Dim>(d)), b / 1e9);
  if (!dims.empty()) out.push_back("network bytes by dimension (all GPUs): " + dims);
  return out;
}

}  // namespace ptsim::sim
