#include "hw/net/routing.h"

#include <fmt/format.h>
#include <algorithm>
#include <limits>
#include <stdexcept>

namespace ptsim::hw::net {
namespace {

constexpr std::uint32_t kInf = std::numeric_limits<std::uint32_t>::max();

// splitmix64 finaliser (Steele et al., "Fast splittable pseudorandom number
// generators", OOPSLA'14): a cheap, well-mixed hash for the ECMP choice.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Router::Router(const Topology& topo, std::size_t cached_destinations) : topo_(topo) {
  const std::size_t n = topo.num_vertices();
  out_begin_.assign(n + 1, 0);
  in_begin_.assign(n + 1, 0);
  for (const Link& l : topo.links()) {
    ++out_begin_[l.src + 1];
    ++in_begin_[l.dst + 1];
    max_cost_ = std::max<std::uint32_t>(max_cost_, l.cost);
  }
  for (std::size_t v = 0; v < n; ++v) {
    out_begin_[v + 1] += out_begin_[v];
    in_begin_[v + 1] += in_begin_[v];
  }
  out_links_.resize(topo.num_links());
  in_links_.resize(topo.num_links());
  std::vector<std::uint32_t> out_fill(out_begin_.begin(), out_begin_.end() - 1);
  std::vector<std::uint32_t> in_fill(in_begin_.begin(), in_begin_.end() - 1);
  for (LinkId id = 0; id < topo.num_links(); ++id) {
    const Link& l = topo.link(id);
    out_links_[out_fill[l.src]++] = id;
    in_links_[in_fill[l.dst]++] = id;
  }
  const std::size_t per_table = std::max<std::size_t>(1, n) * sizeof(std::uint32_t);
  capacity_ =
      cached_destinations > 0 ? cached_destinations : std::clamp<std::size_t>((256u << 20) / per_table, 4, 8192);
  buckets_.resize(max_cost_ + 1);
  slot_of_dst_.assign(n, -1);

  // Compute-node structure (per-node contraction, routing.h).
  node_of_.resize(n);
  local_index_.assign(n, 0);
  int nodes = 0;
  for (VertexId v = 0; v < n; ++v) {
    node_of_[v] = topo.node(v);
    nodes = std::max(nodes, node_of_[v] + 1);
  }
  node_begin_.assign(static_cast<std::size_t>(nodes) + 1, 0);
  for (VertexId v = 0; v < n; ++v)
    if (node_of_[v] >= 0) ++node_begin_[node_of_[v] + 1];
  for (int i = 0; i < nodes; ++i) node_begin_[i + 1] += node_begin_[i];
  node_vertices_.resize(node_begin_.back());
  {
    std::vector<std::uint32_t> fill(node_begin_.begin(), node_begin_.end() - 1);
    for (VertexId v = 0; v < n; ++v)
      if (node_of_[v] >= 0) {
        local_index_[v] = fill[node_of_[v]] - node_begin_[node_of_[v]];
        node_vertices_[fill[node_of_[v]]++] = v;
      }
  }
  port_begin_.assign(static_cast<std::size_t>(nodes) + 1, 0);
  auto is_port = [&](const Link& l) { return node_of_[l.dst] >= 0 && node_of_[l.src] != node_of_[l.dst]; };
  for (const Link& l : topo.links())
    if (is_port(l)) ++port_begin_[node_of_[l.dst] + 1];
  for (int i = 0; i < nodes; ++i) port_begin_[i + 1] += port_begin_[i];
  port_links_.resize(port_begin_.back());
  {
    std::vector<std::uint32_t> fill(port_begin_.begin(), port_begin_.end() - 1);
    for (LinkId id = 0; id < topo.num_links(); ++id)
      if (is_port(topo.link(id))) port_links_[fill[node_of_[topo.link(id).dst]]++] = id;
  }
  dst_info_.resize(n);
  dst_info_ready_.assign(n, 0);
}

const Router::DstInfo& Router::dst_info(VertexId dst) {
  DstInfo& info = dst_info_[dst];
  if (dst_info_ready_[dst]) return info;
  dst_info_ready_[dst] = 1;
  info.node = node_of_[dst];
  if (info.node < 0) {  // a fabric vertex: its own full table
    info.entries.push_back({dst, 0});
    return info;
  }
  // dist_in: reverse Dijkstra inside the node (O(k^2) over its ~20 vertices).
  const std::uint32_t b = node_begin_[info.node], k = node_begin_[info.node + 1] - b;
  info.in_dist.assign(k, kInf);
  std::vector<char> done(k, 0);
  info.in_dist[local_index_[dst]] = 0;
  for (std::uint32_t it = 0; it < k; ++it) {
    std::uint32_t best = kInf, bi = 0;
    for (std::uint32_t i = 0; i < k; ++i)
      if (!done[i] && info.in_dist[i] < best) best = info.in_dist[i], bi = i;
    if (best == kInf) break;
    done[bi] = 1;
    const VertexId v = node_vertices_[b + bi];
    for (std::uint32_t e = in_begin_[v]; e < in_begin_[v + 1]; ++e) {
      const Link& l = topo_.link(in_links_[e]);
      if (node_of_[l.src] != info.node) continue;
      auto& d = info.in_dist[local_index_[l.src]];
      d = std::min(d, best + l.cost);
    }
  }
  // Entries: min over the ports from each outside vertex u.
  for (std::uint32_t e = port_begin_[info.node]; e < port_begin_[info.node + 1]; ++e) {
    const Link& l = topo_.link(port_links_[e]);
    const std::uint32_t dp = info.in_dist[local_index_[l.dst]];
    if (dp == kInf) continue;
    auto it = std::find_if(info.entries.begin(), info.entries.end(), [&](const Entry& x) { return x.u == l.src; });
    if (it == info.entries.end())
      info.entries.push_back({l.src, dp + l.cost});
    else
      it->extra = std::min(it->extra, dp + l.cost);
  }
  return info;
}

void Router::load_tables(const DstInfo& info, VertexId, std::vector<const std::uint32_t*>& tables) {
  // Every entry table must stay cached while this route is walked.
  capacity_ = std::max(capacity_, info.entries.size() + 1);
  tables.clear();
  for (const Entry& e : info.entries)
    tables.push_back(distances_to(e.u).data());  // buffers never move (same-size assign)
}

std::uint32_t Router::dist_via(VertexId w, const DstInfo& info, const std::vector<const std::uint32_t*>& tables) const {
  std::uint32_t d = kInf;
  if (info.node >= 0 && node_of_[w] == info.node) d = info.in_dist[local_index_[w]];
  for (std::size_t i = 0; i < info.entries.size(); ++i) {
    const std::uint32_t t = tables[i][w];
    if (t != kInf) d = std::min(d, t + info.entries[i].extra);
  }
  return d;
}

const std::vector<std::uint32_t>& Router::distances_to(VertexId dst) {
  ++clock_;
  if (const std::int32_t i = slot_of_dst_[dst]; i >= 0) {
    tables_[i].last_use = clock_;
    return tables_[i].dist;
  }
  Table* slot = nullptr;
  if (tables_.size() < capacity_) {
    slot = &tables_.emplace_back();
  } else {
    slot = &*std::min_element(tables_.begin(), tables_.end(),
                              [](const Table& a, const Table& b) { return a.last_use < b.last_use; });
    slot_of_dst_[slot->dst] = -1;
  }
  slot_of_dst_[dst] = static_cast<std::int32_t>(slot - tables_.data());
  slot->dst = dst;
  slot->last_use = clock_;
  auto& dist = slot->dist;
  dist.assign(topo_.num_vertices(), kInf);
  // Dial's algorithm (Dijkstra with a circular bucket queue; integer weights <= max_cost_),
  // run backwards over incoming links so dist[v] = least cost v -> dst.
  dist[dst] = 0;
  const std::size_t nb = buckets_.size();
  buckets_[0].push_back(dst);
  std::size_t pending = 1;
  for (std::uint32_t d = 0; pending > 0; ++d) {
    auto& bucket = buckets_[d % nb];
    // Vertices appended to this bucket while scanning it have distance d too (only
    // if cost 0 existed, which connect() forbids), so index-based iteration is safe.
    for (std::size_t i = 0; i < bucket.size(); ++i) {
      const VertexId v = bucket[i];
      --pending;
      if (dist[v] != d) continue;  // stale entry
      for (std::uint32_t k = in_begin_[v]; k < in_begin_[v + 1]; ++k) {
        const Link& l = topo_.link(in_links_[k]);
        const std::uint32_t nd = d + l.cost;
        if (nd < dist[l.src]) {
          dist[l.src] = nd;
          buckets_[nd % nb].push_back(l.src);
          ++pending;
        }
      }
    }
    bucket.clear();
  }
  ++tables_computed_;
  return dist;
}

void Router::route(VertexId src, VertexId dst, std::uint64_t flow, std::vector<LinkId>& out) {
  out.clear();
  if (src >= topo_.num_vertices() || dst >= topo_.num_vertices())
    throw std::invalid_argument(fmt::format("route: unknown vertex {} or {}", src, dst));
  if (src == dst) return;
  const DstInfo& info = dst_info(dst);
  load_tables(info, dst, scratch_tables_);
  const auto& tables = scratch_tables_;
  std::uint32_t dv = dist_via(src, info, tables);
  if (dv == kInf)
    throw std::invalid_argument(fmt::format("route: no path from '{}' to '{}'", topo_.name(src), topo_.name(dst)));
  const std::uint64_t key = mix(mix(mix(src) ^ dst) ^ flow);
  VertexId v = src;
  auto& cand = cand_;
  while (v != dst) {
    cand.clear();
    for (std::uint32_t k = out_begin_[v]; k < out_begin_[v + 1]; ++k) {
      const Link& l = topo_.link(out_links_[k]);
      const std::uint32_t dl = dist_via(l.dst, info, tables);
      if (dl != kInf && dl + l.cost == dv) cand.push_back(out_links_[k]);
    }
    const auto count = static_cast<std::uint32_t>(cand.size());
    std::uint32_t pick = 0;
    if (count > 1) {
      const int a = nic_affinity_pick(src, dst, v, count, topo_.link(cand[0]).dst);
      pick = a >= 0 ? static_cast<std::uint32_t>(a) : static_cast<std::uint32_t>(mix(key ^ v) % count);
    }
    const Link& l = topo_.link(cand[pick]);
    out.push_back(cand[pick]);
    dv -= l.cost;
    v = l.dst;
  }
}

int Router::nic_affinity_pick(VertexId src, VertexId dst, VertexId, std::uint32_t count, std::uint32_t first) const {
  if (topo_.kind(first) != VertexKind::nic) return -1;
  const int node = node_of_[first];
  const VertexId g = node == node_of_[src] ? src : node == node_of_[dst] ? dst : kNoVertex;
  if (g == kNoVertex) return -1;
  const int rank = topo_.rank_of(g);
  return rank < 0 ? -1 : rank % static_cast<int>(count);
}

std::vector<LinkId> Router::route(VertexId src, VertexId dst, std::uint64_t flow) {
  std::vector<LinkId> out;
  route(src, dst, flow, out);
  return out;
}

std::vector<LinkId> Router::route_ranks(int src_rank, int dst_rank, std::uint64_t flow) {
  return route(topo_.gpu(src_rank), topo_.gpu(dst_rank), flow);
}

std::uint32_t Router::cost(VertexId src, VertexId dst) {
  const DstInfo& info = dst_info(dst);
  load_tables(info, dst, scratch_tables_);
  return dist_via(src, info, scratch_tables_);
}

std::uint64_t Router::count_paths(VertexId src, VertexId dst) {
  const auto& dist = distances_to(dst);
  if (dist[src] == kInf) return 0;
  // Paths counted in increasing distance-to-dst order (a DAG on the least-cost edges).
  std::vector<VertexId> order;
  for (VertexId v = 0; v < topo_.num_vertices(); ++v)
    if (dist[v] <= dist[src]) order.push_back(v);
  std::sort(order.begin(), order.end(), [&](VertexId a, VertexId b) { return dist[a] < dist[b]; });
  std::vector<std::uint64_t> paths(topo_.num_vertices(), 0);
  paths[dst] = 1;
  for (VertexId v : order) {
    if (v == dst) continue;
    std::uint64_t sum = 0;
    for (std::uint32_t k = out_begin_[v]; k < out_begin_[v + 1]; ++k) {
      const Link& l = topo_.link(out_links_[k]);
      if (dist[l.dst] != kInf && dist[l.dst] + l.cost == dist[v])
        sum = std::min<std::uint64_t>(sum + paths[l.dst], 1ULL << 32);
    }
    paths[v] = sum;
  }
  return paths[src];
}

Seconds Router::path_latency(std::span<const LinkId> path) const {
  Seconds s = 0;
  for (LinkId l : path) s += topo_.link(l).latency;
  return s;
}

BytesPerSecond Router::path_bandwidth(std::span<const LinkId> path) const {
  BytesPerSecond b = std::numeric_limits<double>::infinity();
  for (LinkId l : path) b = std::min(b, topo_.link(l).bandwidth);
  return b;
}

}  // namespace ptsim::hw::net
