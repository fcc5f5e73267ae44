#include "hw/net/routing.h"

#include <algorithm>
#include <fmt/format.h>
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
  capacity_ = cached_destinations > 0 ? cached_destinations
                                      : std::clamp<std::size_t>((32u << 20) / per_table, 4, 4096);
  buckets_.resize(max_cost_ + 1);
}

const std::vector<std::uint32_t>& Router::distances_to(VertexId dst) {
  ++clock_;
  for (Table& t : tables_)
    if (t.dst == dst) {
      t.last_use = clock_;
      return t.dist;
    }
  Table* slot = nullptr;
  if (tables_.size() < capacity_) {
    slot = &tables_.emplace_back();
  } else {
    slot = &*std::min_element(tables_.begin(), tables_.end(),
                              [](const Table& a, const Table& b) { return a.last_use < b.last_use; });
  }
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
  const auto& dist = distances_to(dst);
  if (dist[src] == kInf)
    throw std::invalid_argument(fmt::format("route: no path from '{}' to '{}'", topo_.name(src), topo_.name(dst)));
  const std::uint64_t key = mix(mix(mix(src) ^ dst) ^ flow);
  VertexId v = src;
  while (v != dst) {
    std::uint32_t count = 0;
    for (std::uint32_t k = out_begin_[v]; k < out_begin_[v + 1]; ++k) {
      const Link& l = topo_.link(out_links_[k]);
      if (dist[l.dst] != kInf && dist[l.dst] + l.cost == dist[v]) ++count;
    }
    std::uint32_t pick = count > 1 ? static_cast<std::uint32_t>(mix(key ^ v) % count) : 0;
    for (std::uint32_t k = out_begin_[v]; k < out_begin_[v + 1]; ++k) {
      const Link& l = topo_.link(out_links_[k]);
      if (dist[l.dst] != kInf && dist[l.dst] + l.cost == dist[v]) {
        if (pick == 0) {
          out.push_back(out_links_[k]);
          v = l.dst;
          break;
        }
        --pick;
      }
    }
  }
}

std::vector<LinkId> Router::route(VertexId src, VertexId dst, std::uint64_t flow) {
  std::vector<LinkId> out;
  route(src, dst, flow, out);
  return out;
}

std::vector<LinkId> Router::route_ranks(int src_rank, int dst_rank, std::uint64_t flow) {
  return route(topo_.gpu(src_rank), topo_.gpu(dst_rank), flow);
}

std::uint32_t Router::cost(VertexId src, VertexId dst) { return distances_to(dst)[src]; }

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
      if (dist[l.dst] != kInf && dist[l.dst] + l.cost == dist[v]) sum = std::min<std::uint64_t>(sum + paths[l.dst], 1ULL << 32);
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
