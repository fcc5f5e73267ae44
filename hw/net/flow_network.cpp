#include "hw/net/flow_network.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace ptsim::hw::net {

FlowNetwork::FlowNetwork(const Topology& topo) : topo_(topo), link_(topo.num_links()) {
  for (LinkId l = 0; l < topo.num_links(); ++l) link_[l].capacity = topo.link(l).bandwidth;
}

void FlowNetwork::check(FlowId id) const {
  if (id >= flows_.size() || flows_[id].state == State::free)
    throw std::invalid_argument(fmt::format("FlowNetwork: flow {} is not unfinished", id));
}

FlowId FlowNetwork::add_flow(std::span<const LinkId> path, Bytes bytes, Seconds start, int tag, bool pay_latency) {
  if (!(bytes >= 0) || !std::isfinite(bytes))
    throw std::invalid_argument(fmt::format("FlowNetwork: flow size must be finite and >= 0, got {}", bytes));
  if (!(start >= now_ - kTimeEpsilon))
    throw std::invalid_argument(fmt::format("FlowNetwork: flow start {} s is before now ({} s)", start, now_));
  if (tag < 0) throw std::invalid_argument(fmt::format("FlowNetwork: tag must be >= 0, got {}", tag));
  for (LinkId l : path)
    if (l >= link_.size()) throw std::invalid_argument(fmt::format("FlowNetwork: unknown link {}", l));
  FlowId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[id];
  f.path.assign(path.begin(), path.end());
  f.pos.resize(path.size());
  f.total = f.remaining = bytes;
  Seconds latency = 0;
  if (pay_latency)
    for (LinkId l : path) latency += topo_.link(l).latency;
  f.activate_at = std::max(start, now_) + latency;
  f.rate = 0;
  f.tag = tag;
  f.state = State::pending;
  f.list_pos = static_cast<std::uint32_t>(pending_.size());
  pending_.push_back(id);
  if (static_cast<std::size_t>(tag) >= tag_bytes_.size()) tag_bytes_.resize(tag + 1, 0.0);
  return id;
}

void FlowNetwork::activate(FlowId id) {
  Flow& f = flows_[id];
  // Out of pending_ (swap-remove).
  const FlowId moved = pending_.back();
  pending_[f.list_pos] = moved;
  flows_[moved].list_pos = f.list_pos;
  pending_.pop_back();
  f.state = State::active;
  f.list_pos = static_cast<std::uint32_t>(active_.size());
  active_.push_back(id);
  for (std::size_t i = 0; i < f.path.size(); ++i) {
    LinkState& ls = link_[f.path[i]];
    if (ls.flows.empty()) {
      ls.used_pos = static_cast<std::uint32_t>(used_links_.size());
      used_links_.push_back(f.path[i]);
    }
    f.pos[i] = static_cast<std::uint32_t>(ls.flows.size());
    ls.flows.push_back(id);
  }
  dirty_ = true;
}

void FlowNetwork::finish(FlowId id) {
  Flow& f = flows_[id];
  auto& list = f.state == State::active ? active_ : pending_;
  const FlowId moved = list.back();
  list[f.list_pos] = moved;
  flows_[moved].list_pos = f.list_pos;
  list.pop_back();
  if (f.state == State::active) {
    for (std::size_t i = 0; i < f.path.size(); ++i) {
      const LinkId l = f.path[i];
      LinkState& ls = link_[l];
      const FlowId last = ls.flows.back();
      ls.flows[f.pos[i]] = last;
      if (last != id) {
        // Tell the moved flow where it now sits on this link.
        Flow& g = flows_[last];
        for (std::size_t j = 0; j < g.path.size(); ++j)
          if (g.path[j] == l) {
            g.pos[j] = f.pos[i];
            break;
          }
      }
      ls.flows.pop_back();
      if (ls.flows.empty()) {
        const LinkId other = used_links_.back();
        used_links_[ls.used_pos] = other;
        link_[other].used_pos = ls.used_pos;
        used_links_.pop_back();
        ls.load = 0;
      }
    }
    dirty_ = true;
  }
  f.state = State::free;
  f.rate = 0;
  free_ids_.push_back(id);
}

void FlowNetwork::cancel(FlowId id) {
  check(id);
  finish(id);
}

bool FlowNetwork::unfinished(FlowId id) const { return id < flows_.size() && flows_[id].state != State::free; }

BytesPerSecond FlowNetwork::rate(FlowId id) {
  check(id);
  if (dirty_) solve();
  return flows_[id].rate;
}

Bytes FlowNetwork::remaining(FlowId id) const {
  check(id);
  return flows_[id].remaining;
}

Bytes FlowNetwork::tag_bytes(int tag) const {
  return tag >= 0 && static_cast<std::size_t>(tag) < tag_bytes_.size() ? tag_bytes_[tag] : 0.0;
}

void FlowNetwork::reset_statistics() {
  for (auto& l : link_) l.bytes = l.busy = 0;
  std::fill(tag_bytes_.begin(), tag_bytes_.end(), 0.0);
  stats_start_ = now_;
}

// Progressive filling (max-min fairness), see the header.
void FlowNetwork::solve() {
  dirty_ = false;
  heap_.clear();
  auto cmp = [](const HeapEntry& a, const HeapEntry& b) { return a.share > b.share; };  // min-heap
  for (LinkId l : used_links_) {
    LinkState& ls = link_[l];
    ls.remaining = ls.capacity;
    ls.unfixed = static_cast<std::uint32_t>(ls.flows.size());
    ls.load = 0;
    heap_.push_back({ls.remaining / ls.unfixed, l, ++ls.version});
  }
  std::make_heap(heap_.begin(), heap_.end(), cmp);
  for (FlowId id : active_) {
    Flow& f = flows_[id];
    f.fixed = f.path.empty();
    f.rate = f.path.empty() ? std::numeric_limits<double>::infinity() : 0.0;
  }
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    const HeapEntry e = heap_.back();
    heap_.pop_back();
    LinkState& ls = link_[e.link];
    if (e.version != ls.version || ls.unfixed == 0) continue;
    const double share = std::max(0.0, ls.remaining) / ls.unfixed;
    for (FlowId id : ls.flows) {
      Flow& f = flows_[id];
      if (f.fixed) continue;
      f.fixed = true;
      f.rate = share;
      for (LinkId m : f.path) {
        LinkState& ms = link_[m];
        ms.remaining -= share;
        ms.load += share;
        --ms.unfixed;
        ++ms.version;
        if (m != e.link && ms.unfixed > 0) {
          heap_.push_back({std::max(0.0, ms.remaining) / ms.unfixed, m, ms.version});
          std::push_heap(heap_.begin(), heap_.end(), cmp);
        }
      }
    }
  }
}

Seconds FlowNetwork::next_event_internal() {
  Seconds t = kNever;
  for (FlowId id : pending_) t = std::min(t, flows_[id].activate_at);
  for (FlowId id : active_) {
    const Flow& f = flows_[id];
    t = std::min(t, f.remaining <= 0 || std::isinf(f.rate) ? now_ : now_ + f.remaining / f.rate);
  }
  return t;
}

Seconds FlowNetwork::next_event_time() {
  if (dirty_) solve();
  return next_event_internal();
}

void FlowNetwork::progress(Seconds dt) {
  if (dt <= 0) return;
  for (FlowId id : active_) {
    Flow& f = flows_[id];
    if (std::isinf(f.rate)) continue;  // loopback: no wire bytes
    const Bytes moved = std::min(f.remaining, f.rate * dt);
    f.remaining -= moved;
    tag_bytes_[f.tag] += moved;
  }
  for (LinkId l : used_links_) {
    LinkState& ls = link_[l];
    ls.bytes += ls.load * dt;
    if (ls.load > 0) ls.busy += dt;
  }
}

void FlowNetwork::advance_to(Seconds t, std::vector<FlowId>& completed) {
  if (t < now_ - kTimeEpsilon)
    throw std::invalid_argument(fmt::format("FlowNetwork: cannot go back in time from {} s to {} s", now_, t));
  for (;;) {
    if (dirty_) solve();
    const Seconds te = next_event_internal();
    if (te > t + kTimeEpsilon) {
      progress(t - now_);
      now_ = std::max(now_, t);
      return;
    }
    const Seconds at = std::max(now_, std::min(te, t));
    progress(at - now_);
    now_ = at;
    // Activations due now (iterate backwards: activate() swap-removes from pending_).
    for (std::size_t i = pending_.size(); i-- > 0;)
      if (flows_[pending_[i]].activate_at <= now_ + kTimeEpsilon) activate(pending_[i]);
    for (std::size_t i = active_.size(); i-- > 0;) {
      if (i >= active_.size()) continue;
      const FlowId id = active_[i];
      const Flow& f = flows_[id];
      const bool done = f.remaining <= 0 || std::isinf(f.rate) || (f.rate > 0 && f.remaining / f.rate <= kTimeEpsilon);
      // A flow activated in this very call has rate 0 until the next solve, unless empty.
      if (done && !(f.rate == 0 && f.remaining > 0)) {
        completed.push_back(id);
        finish(id);
      }
    }
  }
}

Seconds FlowNetwork::run_until_idle(std::vector<FlowId>* completed) {
  std::vector<FlowId> local;
  auto& out = completed ? *completed : local;
  while (num_unfinished() > 0) advance_to(next_event_time(), out);
  return now_;
}

}  // namespace ptsim::hw::net
