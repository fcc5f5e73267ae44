#include "hw/net/routing.h"

#include <fmt/format.h>
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>

namespace ptsim::hw::net {
namespace {

constexpr std::uint32_t kInf = std::numeric_limits<std::uint32_t>::max();
template <class D>
constexpr D kInfOf = std::numeric_limits<D>::max();  // an unreachable entry of a table of D
std::uint16_t narrow(std::uint32_t d) { return d == kInf ? kInfOf<std::uint16_t> : static_cast<std::uint16_t>(d); }

// splitmix64 finaliser (Steele et al., "Fast splittable pseudorandom number
// generators", OOPSLA'14): a cheap, well-mixed hash for the ECMP choice.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Router::Router(const Topology& topo, std::size_t cached_destinations, Contraction contraction) : topo_(topo) {
  build_csr();
  build_nodes(contraction);
  build_node_classes();
  build_exits();
  build_fabric_graph();
  for (Arc& a : out_arcs_) {
    a.closed = fidx_[a.dst] == kInf;
    if (!a.closed) {
      a.via = fidx_[a.dst];
    } else if (exit_count_[a.dst] == 1 && exits_[exit_begin_[a.dst]].extra < (1u << 22)) {  // fits `step`
      a.via = exits_[exit_begin_[a.dst]].f;
      a.step = a.cost + exits_[exit_begin_[a.dst]].extra;
    }
  }
  // A least-cost path visits each fabric vertex once: (|F| - 1) edges of H at most.
  const std::size_t bound = (std::max<std::size_t>(1, fabric_.size()) - 1) * (buckets_.size() - 1);
  wide_ = bound >= kInfOf<std::uint16_t>;
  dist_bytes_ = wide_ ? sizeof(std::uint32_t) : sizeof(std::uint16_t);
  const std::size_t per_table = std::max<std::size_t>(1, fabric_.size()) * sizeof(std::uint32_t);
  capacity_ =
      cached_destinations > 0 ? cached_destinations : std::clamp<std::size_t>((256u << 20) / per_table, 4, 8192);
  slot_of_.assign(fabric_.size(), -1);
  entry_pos_.assign(fabric_.size(), kInf);
  for (LinkId id : port_links_) {
    const std::uint32_t f = fidx_[topo_.link(id).src];
    if (entry_pos_[f] == kInf) {
      entry_pos_[f] = static_cast<std::uint32_t>(entry_fabric_.size());
      entry_fabric_.push_back(f);
    }
  }
  link_scratch_.assign(topo.num_links(), 0);
  dst_slot_.assign(topo.num_vertices(), -1);
  // A batch's stage (search_batch) at most 8 MiB (a large open user graph has ~|V| fabric vertices).
  batch_limit_ = std::clamp<std::size_t>((std::size_t{8} << 20) / (per_table * 64) * 64, 64, kBatch);
  tables_per_chunk_ = std::clamp<std::size_t>((std::size_t{4} << 20) / per_table, 1, capacity_);
  vertex_route_.resize(topo.num_vertices());
  for (VertexId v = 0; v < topo.num_vertices(); ++v)
    vertex_route_[v] = {fidx_[v], region_[v], local_index_[v], exit_begin_[v], exit_count_[v]};
}

void Router::build_csr() {
  const std::size_t n = topo_.num_vertices();
  out_begin_.assign(n + 1, 0);
  in_begin_.assign(n + 1, 0);
  for (const Link& l : topo_.links()) {
    ++out_begin_[l.src + 1];
    ++in_begin_[l.dst + 1];
  }
  for (std::size_t v = 0; v < n; ++v) {
    out_begin_[v + 1] += out_begin_[v];
    in_begin_[v + 1] += in_begin_[v];
  }
  out_arcs_.resize(topo_.num_links());
  in_links_.resize(topo_.num_links());
  std::vector<std::uint32_t> out_fill(out_begin_.begin(), out_begin_.end() - 1);
  std::vector<std::uint32_t> in_fill(in_begin_.begin(), in_begin_.end() - 1);
  for (LinkId id = 0; id < topo_.num_links(); ++id) {
    const Link& l = topo_.link(id);
    out_arcs_[out_fill[l.src]++] = {id, l.dst, kInf, l.cost, 0, l.cost};
    in_links_[in_fill[l.dst]++] = id;
  }
}

// Nodes, which of them are closed (routing.h), the fabric F and the ports into closed nodes.
void Router::build_nodes(Contraction contraction) {
  const std::size_t n = topo_.num_vertices();
  node_of_.resize(n);
  local_index_.assign(n, 0);
  int nodes = 0;
  for (VertexId v = 0; v < n; ++v) {
    node_of_[v] = topo_.node(v);
    nodes = std::max(nodes, node_of_[v] + 1);
  }
  node_begin_.assign(static_cast<std::size_t>(nodes) + 1, 0);
  for (VertexId v = 0; v < n; ++v)
    if (node_of_[v] >= 0) ++node_begin_[node_of_[v] + 1];
  for (int i = 0; i < nodes; ++i) node_begin_[i + 1] += node_begin_[i];
  node_vertices_.resize(node_begin_.back());
  std::vector<std::uint32_t> fill(node_begin_.begin(), node_begin_.end() - 1);
  for (VertexId v = 0; v < n; ++v)
    if (node_of_[v] >= 0) {
      local_index_[v] = fill[node_of_[v]] - node_begin_[node_of_[v]];
      node_vertices_[fill[node_of_[v]]++] = v;
    }
  // A node is open when a cable joins it to another node directly.
  std::vector<char> closed(static_cast<std::size_t>(nodes), contraction == Contraction::nodes ? 1 : 0);
  for (const Link& l : topo_.links())
    if (node_of_[l.src] >= 0 && node_of_[l.dst] >= 0 && node_of_[l.src] != node_of_[l.dst])
      closed[node_of_[l.src]] = closed[node_of_[l.dst]] = 0;
  region_.resize(n);
  fidx_.assign(n, kInf);
  for (VertexId v = 0; v < n; ++v) {
    region_[v] = node_of_[v] >= 0 && closed[node_of_[v]] ? node_of_[v] : -1;
    if (region_[v] < 0) {
      fidx_[v] = static_cast<std::uint32_t>(fabric_.size());
      fabric_.push_back(v);
    }
  }
  port_begin_.assign(static_cast<std::size_t>(nodes) + 1, 0);
  auto is_port = [&](const Link& l) { return region_[l.dst] >= 0 && region_[l.src] != region_[l.dst]; };
  for (const Link& l : topo_.links())
    if (is_port(l)) ++port_begin_[region_[l.dst] + 1];
  for (int i = 0; i < nodes; ++i) port_begin_[i + 1] += port_begin_[i];
  port_links_.resize(port_begin_.back());
  fill.assign(port_begin_.begin(), port_begin_.end() - 1);
  for (LinkId id = 0; id < topo_.num_links(); ++id)
    if (is_port(topo_.link(id))) port_links_[fill[region_[topo_.link(id).dst]]++] = id;
}

// Reverse Dijkstra inside a node, O(k^2) over its ~20 vertices.
void Router::in_node_distances(int node, VertexId target, std::vector<std::uint32_t>& out) const {
  const std::uint32_t b = node_begin_[node], k = node_begin_[node + 1] - b;
  out.assign(k, kInf);
  std::vector<char> done(k, 0);
  out[local_index_[target]] = 0;
  for (std::uint32_t it = 0; it < k; ++it) {
    std::uint32_t best = kInf, bi = 0;
    for (std::uint32_t i = 0; i < k; ++i)
      if (!done[i] && out[i] < best) best = out[i], bi = i;
    if (best == kInf) break;
    done[bi] = 1;
    const VertexId v = node_vertices_[b + bi];
    for (std::uint32_t e = in_begin_[v]; e < in_begin_[v + 1]; ++e) {
      const Link& l = topo_.link(in_links_[e]);
      if (node_of_[l.src] != node) continue;
      auto& d = out[local_index_[l.src]];
      d = std::min(d, best + l.cost);
    }
  }
}

// Closed nodes with the same internal wiring (same size, same links between the same
// local indices with the same costs) share one in-node distance matrix: a builder's
// 8,192 DGX nodes are one class, searched once.
void Router::build_node_classes() {
  const std::size_t nodes = node_begin_.size() - 1;
  node_class_.assign(nodes, -1);
  std::map<std::vector<std::uint32_t>, std::int32_t> classes;
  std::vector<std::uint32_t> sig, col;
  for (std::size_t node = 0; node < nodes; ++node) {
    const std::uint32_t b = node_begin_[node], k = node_begin_[node + 1] - b;
    if (k == 0 || region_[node_vertices_[b]] < 0) continue;
    sig.assign(1, k);
    for (std::uint32_t i = 0; i < k; ++i) {
      const VertexId v = node_vertices_[b + i];
      for (std::uint32_t e = out_begin_[v]; e < out_begin_[v + 1]; ++e) {
        const Link& l = topo_.link(out_arcs_[e].link);
        if (node_of_[l.dst] != static_cast<std::int32_t>(node)) continue;
        sig.insert(sig.end(), {i, local_index_[l.dst], l.cost});
      }
      sig.push_back(kInf);  // end of vertex i's links
    }
    const auto [it, fresh] = classes.try_emplace(sig, static_cast<std::int32_t>(class_k_.size()));
    node_class_[node] = it->second;
    if (!fresh) continue;
    // class_dist_: column t (distances from every local vertex to local vertex t) at t*k.
    class_k_.push_back(k);
    class_begin_.push_back(static_cast<std::uint32_t>(class_dist_.size()));
    for (std::uint32_t t = 0; t < k; ++t) {
      in_node_distances(static_cast<int>(node), node_vertices_[b + t], col);
      class_dist_.insert(class_dist_.end(), col.begin(), col.end());
    }
  }
}

const std::uint32_t* Router::in_column(VertexId target) const {
  const std::int32_t c = node_class_[region_[target]];
  return class_dist_.data() + class_begin_[c] + static_cast<std::size_t>(local_index_[target]) * class_k_[c];
}

// Per vertex of a closed node: the least cost to each fabric vertex b it can leave to.
void Router::build_exits() {
  const std::size_t n = topo_.num_vertices();
  exit_begin_.assign(n, 0);
  exit_count_.assign(n, 0);
  std::vector<std::vector<Exit>> lists;
  for (std::size_t node = 0; node + 1 < node_begin_.size(); ++node) {
    const std::uint32_t b = node_begin_[node], k = node_begin_[node + 1] - b;
    if (k == 0 || region_[node_vertices_[b]] < 0) continue;
    if (lists.size() < k) lists.resize(k);
    for (std::uint32_t w = 0; w < k; ++w) lists[w].clear();
    for (std::uint32_t i = 0; i < k; ++i) {
      const VertexId q = node_vertices_[b + i];
      const std::uint32_t* d = in_column(q);
      for (std::uint32_t e = out_begin_[q]; e < out_begin_[q + 1]; ++e) {
        const Link& l = topo_.link(out_arcs_[e].link);
        if (region_[l.dst] >= 0) continue;  // stays inside (a closed node only borders F)
        for (std::uint32_t w = 0; w < k; ++w) {
          if (d[w] == kInf) continue;
          auto& list = lists[w];
          const std::uint32_t c = d[w] + l.cost, f = fidx_[l.dst];
          auto it = std::find_if(list.begin(), list.end(), [&](const Exit& x) { return x.f == f; });
          if (it == list.end())
            list.push_back({f, c});
          else
            it->extra = std::min(it->extra, c);
        }
      }
    }
    for (std::uint32_t w = 0; w < k; ++w) {
      const VertexId v = node_vertices_[b + w];
      exit_begin_[v] = static_cast<std::uint32_t>(exits_.size());
      exit_count_[v] = static_cast<std::uint32_t>(lists[w].size());
      exits_.insert(exits_.end(), lists[w].begin(), lists[w].end());
    }
  }
}

// H: links between fabric vertices plus the shortcuts through closed nodes, reversed.
void Router::build_fabric_graph() {
  std::vector<std::pair<std::uint32_t, HEdge>> edges;  // (target, edge)
  for (const Link& l : topo_.links())
    if (fidx_[l.src] != kInf && fidx_[l.dst] != kInf) edges.push_back({fidx_[l.dst], {fidx_[l.src], l.cost}});
  for (LinkId id : port_links_) {
    const Link& l = topo_.link(id);
    for (std::uint32_t e = exit_begin_[l.dst]; e < exit_begin_[l.dst] + exit_count_[l.dst]; ++e)
      if (exits_[e].f != fidx_[l.src]) edges.push_back({exits_[e].f, {fidx_[l.src], l.cost + exits_[e].extra}});
  }
  h_in_begin_.assign(fabric_.size() + 1, 0);
  std::uint32_t max_cost = 1;
  for (const auto& [t, e] : edges) {
    ++h_in_begin_[t + 1];
    max_cost = std::max(max_cost, e.cost);
  }
  for (std::size_t f = 0; f < fabric_.size(); ++f) h_in_begin_[f + 1] += h_in_begin_[f];
  h_in_.resize(edges.size());
  std::vector<std::uint32_t> fill(h_in_begin_.begin(), h_in_begin_.end() - 1);
  for (const auto& [t, e] : edges) h_in_[fill[t]++] = e;
  buckets_.resize(max_cost + 1);
}

const Router::DstInfo& Router::dst_info(VertexId dst) {
  if (dst_slot_[dst] >= 0) return dst_info_[dst_slot_[dst]];
  dst_slot_[dst] = static_cast<std::int32_t>(dst_info_.size());
  DstInfo info;
  info.node = region_[dst];
  info.entry_begin = static_cast<std::uint32_t>(entry_pool_.size());
  info.border_begin = static_cast<std::uint32_t>(border_pool_.size());
  if (info.node < 0) {  // a fabric vertex: its own full table
    entry_pool_.push_back({fidx_[dst], 0});
  } else {
    info.in_dist = in_column(dst);
    // Entries: min over the ports from each outside vertex u.
    for (std::uint32_t e = port_begin_[info.node]; e < port_begin_[info.node + 1]; ++e) {
      const Link& l = topo_.link(port_links_[e]);
      if (std::find(border_pool_.begin() + info.border_begin, border_pool_.end(), l.src) == border_pool_.end())
        border_pool_.push_back(l.src);
      const std::uint32_t dp = info.in_dist[local_index_[l.dst]];
      if (dp == kInf) continue;
      const std::uint32_t u = fidx_[l.src];
      auto it = std::find_if(entry_pool_.begin() + info.entry_begin, entry_pool_.end(),
                             [&](const Entry& x) { return x.u == u; });
      if (it == entry_pool_.end())
        entry_pool_.push_back({u, dp + l.cost});
      else
        it->extra = std::min(it->extra, dp + l.cost);
    }
  }
  info.entry_count = static_cast<std::uint32_t>(entry_pool_.size() - info.entry_begin);
  info.border_count = static_cast<std::uint32_t>(border_pool_.size() - info.border_begin);
  return dst_info_.emplace_back(info);
}

void Router::load_tables(const DstInfo& info, TablePtrs& tables) {
  // Every entry table must stay cached while this route is walked.
  capacity_ = std::max<std::size_t>(capacity_, info.entry_count + 1);
  tables.clear();
  for (const Entry& e : entries(info))
    tables.push_back(distances_to(e.u));  // tables never move (table_chunks_)
}

template <class D>
std::uint32_t Router::fabric_dist(std::uint32_t f, const DstInfo& info, const TablePtrs& tables) const {
  std::uint32_t d = kInf;
  const Entry* e = entry_pool_.data() + info.entry_begin;
  for (std::size_t i = 0; i < info.entry_count; ++i) {
    const D t = static_cast<const D*>(tables[i])[f];
    if (t != kInfOf<D>) d = std::min(d, t + e[i].extra);
  }
  return d;
}

template <class D>
std::uint32_t Router::dist_via(VertexId w, const DstInfo& info, const TablePtrs& tables) const {
  const VertexRoute& x = vertex_route_[w];
  if (x.fidx != kInf) return fabric_dist<D>(x.fidx, info, tables);
  std::uint32_t d = x.region == info.node ? info.in_dist[x.local_index] : kInf;
  for (std::uint32_t e = x.exit_begin; e < x.exit_begin + x.exit_count; ++e) {
    const std::uint32_t t = fabric_dist<D>(exits_[e].f, info, tables);
    if (t != kInf) d = std::min(d, t + exits_[e].extra);
  }
  return d;
}

std::uint32_t Router::dist_via(VertexId w, const DstInfo& info, const TablePtrs& tables) const {
  return wide_ ? dist_via<std::uint32_t>(w, info, tables) : dist_via<std::uint16_t>(w, info, tables);
}

void* Router::claim_table(std::uint32_t u, bool fill) {
  Table* slot = nullptr;
  const std::size_t nf = fabric_.size();
  if (tables_.size() < capacity_) {
    const std::size_t i = tables_.size(), chunk = i / tables_per_chunk_;
    if (chunk == table_chunks_.size()) {
      const std::size_t bytes = tables_per_chunk_ * nf * dist_bytes_;
      table_chunks_.emplace_back(static_cast<unsigned char*>(huge_alloc(bytes)), ChunkFree{bytes});
    }
    slot = &tables_.emplace_back();
    slot->dist = table_chunks_[chunk].get() + (i % tables_per_chunk_) * nf * dist_bytes_;
  } else {
    slot = &*std::min_element(tables_.begin(), tables_.end(),
                              [](const Table& a, const Table& b) { return a.last_use < b.last_use; });
    slot_of_[slot->u] = -1;
  }
  slot_of_[u] = static_cast<std::int32_t>(slot - tables_.data());
  slot->u = u;
  slot->last_use = clock_;
  if (fill) std::memset(slot->dist, 0xFF, nf * dist_bytes_);  // kInfOf: all ones
  ++tables_computed_;
  return slot->dist;
}

const void* Router::distances_to(std::uint32_t u) {
  ++clock_;
  if (const std::int32_t i = slot_of_[u]; i >= 0) {
    tables_[i].last_use = clock_;
    return tables_[i].dist;
  }
  // With room for kBatch more tables (nothing evicted, so no table of the route being
  // walked moves), compute u's with the next kBatch - 1 uncached entry switches: a
  // collective needs the tables of most of them anyway.
  if (entry_pos_[u] != kInf && tables_.size() + batch_limit_ <= capacity_) {
    std::vector<std::uint32_t> batch{u};
    const std::size_t n = entry_fabric_.size();
    for (std::size_t k = 1; k < n && batch.size() < batch_limit_; ++k) {
      const std::uint32_t f = entry_fabric_[(entry_pos_[u] + k) % n];
      if (slot_of_[f] < 0) batch.push_back(f);
    }
    search_batch(batch);
    return tables_[slot_of_[u]].dist;
  }
  void* table = claim_table(u, false);
  search_one(u, table);
  return table;
}

void Router::search_one(std::uint32_t u, void* table) {
  // Dial's algorithm (Dijkstra with a circular bucket queue; integer weights < buckets),
  // run backwards over H's incoming edges so dist[f] = least cost f -> u.
  one_.assign(fabric_.size(), kInf);
  std::uint32_t* dist = one_.data();
  dist[u] = 0;
  const std::size_t nb = buckets_.size();
  buckets_[0].push_back(u);
  std::size_t pending = 1;
  for (std::uint32_t d = 0; pending > 0; ++d) {
    auto& bucket = buckets_[d % nb];
    // Vertices appended to this bucket while scanning it have distance d too (only
    // if cost 0 existed, which connect() forbids), so index-based iteration is safe.
    for (std::size_t i = 0; i < bucket.size(); ++i) {
      const std::uint32_t v = bucket[i];
      --pending;
      if (dist[v] != d) continue;  // stale entry
      for (std::uint32_t k = h_in_begin_[v]; k < h_in_begin_[v + 1]; ++k) {
        const HEdge& e = h_in_[k];
        const std::uint32_t nd = d + e.cost;
        if (nd < dist[e.src]) {
          dist[e.src] = nd;
          buckets_[nd % nb].push_back(e.src);
          ++pending;
        }
      }
    }
    bucket.clear();
  }
  if (wide_)
    std::copy(one_.begin(), one_.end(), static_cast<std::uint32_t*>(table));
  else
    std::transform(one_.begin(), one_.end(), static_cast<std::uint16_t*>(table), narrow);
}

void Router::search_batch(const std::vector<std::uint32_t>& targets) {
  const std::size_t nb = buckets_.size(), nf = fabric_.size();
  std::vector<void*> out;
  for (std::uint32_t t : targets) out.push_back(claim_table(t, false));
  // pend[level % nb][v]: targets that v reaches at that level, not yet settled. Every
  // entry set is pushed onto its bucket and zeroed when that bucket is scanned, so the
  // array is all zero again after a search and is kept (nb × |F| × 32 bytes: 0.8 MB at
  // 65,536 GPUs).
  if (pend_.size() != nb * nf) pend_.assign(nb * nf, Mask{});
  settled_.assign(nf, Mask{});
  std::vector<Mask>& pend = pend_;
  std::vector<Mask>& settled = settled_;
  std::size_t pending = 0;
  // Distances by (vertex, target) first: the search settles a vertex for many targets at
  // once, and writing each straight into its table missed the cache once per entry.
  const std::size_t width = targets.size();
  if (stage_.size() < nf * width) stage_.resize(nf * width);
  std::uint32_t* stage = stage_.data();
  for (std::size_t k = 0; k < targets.size(); ++k) {
    pend[targets[k]][k / 64] |= std::uint64_t{1} << (k % 64);
    buckets_[0].push_back(targets[k]);
    ++pending;
  }
  for (std::uint32_t d = 0; pending > 0; ++d) {
    auto& bucket = buckets_[d % nb];
    Mask* level = &pend[(d % nb) * nf];
    for (std::size_t i = 0; i < bucket.size(); ++i) {
      const std::uint32_t v = bucket[i];
      Mask m;
      std::uint64_t any = 0;
      for (std::size_t w = 0; w < kBatchWords; ++w) {
        m[w] = level[v][w] & ~settled[v][w];
        any |= m[w];
        settled[v][w] |= m[w];
      }
      level[v] = Mask{};
      if (any == 0) continue;
      std::uint32_t* row = &stage[v * width];
      for (std::size_t w = 0; w < kBatchWords; ++w)
        for (std::uint64_t bits = m[w]; bits; bits &= bits - 1) row[w * 64 + __builtin_ctzll(bits)] = d;
      for (std::uint32_t k = h_in_begin_[v]; k < h_in_begin_[v + 1]; ++k) {
        const HEdge& e = h_in_[k];
        Mask& p = pend[((d + e.cost) % nb) * nf + e.src];
        std::uint64_t was = 0;
        for (std::size_t w = 0; w < kBatchWords; ++w) {
          was |= p[w];
          p[w] |= m[w];
        }
        if (was == 0) {
          buckets_[(d + e.cost) % nb].push_back(e.src);
          ++pending;
        }
      }
    }
    pending -= bucket.size();
    bucket.clear();
  }
  // Into the tables, 16 vertices at a time (the stage rows of a block stay in cache while
  // every table gets its 64-byte line); what no search reached stays unreachable.
  auto write = [&]<class D>() {
    constexpr std::size_t kBlock = 32;
    for (std::size_t f0 = 0; f0 < nf; f0 += kBlock) {
      const std::size_t f1 = std::min(nf, f0 + kBlock);
      for (std::size_t k = 0; k < targets.size(); ++k) {
        const std::uint64_t bit = std::uint64_t{1} << (k % 64);
        D* t = static_cast<D*>(out[k]);
        for (std::size_t f = f0; f < f1; ++f)
          t[f] = settled[f][k / 64] & bit ? static_cast<D>(stage[f * width + k]) : kInfOf<D>;
      }
    }
  };
  if (wide_)
    write.operator()<std::uint32_t>();
  else
    write.operator()<std::uint16_t>();
}

void Router::route(VertexId src, VertexId dst, std::uint64_t flow, std::vector<LinkId>& out) {
  out.clear();
  if (src >= topo_.num_vertices() || dst >= topo_.num_vertices())
    throw std::invalid_argument(fmt::format("route: unknown vertex {} or {}", src, dst));
  if (src == dst) return;
  const std::uint64_t key = mix(mix(mix(src) ^ dst) ^ flow);
  if (flow > std::numeric_limits<std::uint32_t>::max()) {  // not a slot's: walk it
    walk(src, dst, flow, key, out);
    return;
  }
  const auto flow32 = static_cast<std::uint32_t>(flow);
  if (route_slots_.empty()) {
    route_slots_.resize(1 << 12);
    // Address space only (pages are touched as routes are stored): on a large fabric the
    // cache never copies itself while it grows to its bound. A small fabric's routes fit in
    // far less, and a router made per call (tests, small plans) should not map 32 MiB.
    route_links_.reserve(std::min(route_cache_links_, std::size_t{64} * topo_.num_links()));
  }
  std::size_t mask = route_slots_.size() - 1, i = key & mask;
  for (; route_slots_[i].src != kNoVertex; i = (i + 1) & mask) {
    const RouteSlot& r = route_slots_[i];
    if (r.src == src && r.dst == dst && r.flow == flow32) {
      const LinkId* p = route_links_.data() + r.begin;
      out.assign(p + 1, p + 1 + p[0]);
      return;
    }
  }
  walk(src, dst, flow, key, out);
  if (route_links_.size() + 1 + out.size() > route_cache_links_) {  // full: start over
    std::fill(route_slots_.begin(), route_slots_.end(), RouteSlot{});
    route_links_.clear();
    route_count_ = 0;
    for (i = key & mask; route_slots_[i].src != kNoVertex;) i = (i + 1) & mask;
    if (1 + out.size() > route_cache_links_) return;  // longer than the whole cache
  }
  route_slots_[i] = RouteSlot{src, dst, flow32, static_cast<std::uint32_t>(route_links_.size())};
  route_links_.push_back(static_cast<LinkId>(out.size()));
  route_links_.insert(route_links_.end(), out.begin(), out.end());
  if (++route_count_ * 2 > route_slots_.size()) {  // keep the table at most half full
    HugeVector<RouteSlot> old(route_slots_.size() * 2);
    old.swap(route_slots_);
    mask = route_slots_.size() - 1;
    for (const RouteSlot& r : old) {
      if (r.src == kNoVertex) continue;
      std::size_t j = mix(mix(mix(r.src) ^ r.dst) ^ r.flow) & mask;
      while (route_slots_[j].src != kNoVertex) j = (j + 1) & mask;
      route_slots_[j] = r;
    }
  }
}

template <class D>
void Router::next_hops(VertexId v, std::uint32_t dv, const DstInfo& info, const TablePtrs& tables) {
  const std::uint32_t b = out_begin_[v], e = out_begin_[v + 1];
  // A head in dst's node sees dst's in-node distances (dist_via); every other head is
  // seen through its `via`. v has heads in dst's node only when v is in it or borders it.
  const auto bv = border(info);
  const bool near = info.node >= 0 && (region_[v] == info.node || std::find(bv.begin(), bv.end(), v) != bv.end());
  auto generic = [&](const Arc& a) {
    return a.via == kInf || (near && a.closed && region_[a.dst] == info.node);
  };
  if (info.entry_count == 1) {  // one entry table (a fat tree's leaf): read it directly
    const D* t = static_cast<const D*>(tables[0]);
    const std::uint32_t x = entry_pool_[info.entry_begin].extra;
    // Through a via, a head's distance is t[via] + x; none fits when dv < x (v inside dst's node).
    const std::uint32_t want = dv >= x ? dv - x : kInf;
    for (std::uint32_t k = b; k < e; ++k) {
      const Arc& a = out_arcs_[k];
      if (!generic(a)) {
        if (t[a.via] != kInfOf<D> && t[a.via] + a.step == want) cand_.push_back(k);
      } else if (const std::uint32_t dl = dist_via<D>(a.dst, info, tables); dl != kInf && dl + a.cost == dv) {
        cand_.push_back(k);
      }
    }
    return;
  }
  for (std::uint32_t k = b; k < e; ++k) {
    const Arc& a = out_arcs_[k];
    if (!generic(a)) {
      if (const std::uint32_t t = fabric_dist<D>(a.via, info, tables); t != kInf && t + a.step == dv) cand_.push_back(k);
    } else if (const std::uint32_t dl = dist_via<D>(a.dst, info, tables); dl != kInf && dl + a.cost == dv) {
      cand_.push_back(k);
    }
  }
}

void Router::walk(VertexId src, VertexId dst, std::uint64_t flow, std::uint64_t key, std::vector<LinkId>& out) {
  walk_by(src, dst, flow, key, topo_.routing() == Topology::Routing::d_mod_k ? destination_index(src, dst) : kNoIndex,
          out);
}

void Router::walk_by(VertexId src, VertexId dst, std::uint64_t flow, std::uint64_t key, std::uint64_t d,
                     std::vector<LinkId>& out) {
  if (wide_)
    walk_with<std::uint32_t>(src, dst, flow, key, d, out);
  else
    walk_with<std::uint16_t>(src, dst, flow, key, d, out);
}

// The destination's index for d-mod-k: the position of the port through which traffic
// enters dst's node (its NIC) in the order the builders cable NICs to the leaves, so
// that the NICs below one leaf have consecutive indices (as OpenSM's ftree engine
// numbers end ports by their place in the tree). Found once per destination from a
// route that hashes its choices (the way in does not depend on them); a vertex outside
// any node, or a route that never enters dst's node from outside, has its vertex id.
std::uint64_t Router::destination_index(VertexId src, VertexId dst) {
  if (dest_index_.empty()) {
    dest_index_.assign(topo_.num_vertices(), kInf);
    nic_ordinal_.assign(topo_.num_vertices(), kInf);
    std::uint32_t n = 0;
    for (VertexId v = 0; v < topo_.num_vertices(); ++v)
      if (topo_.kind(v) == VertexKind::nic) nic_ordinal_[v] = n++;
  }
  if (dest_index_[dst] != kInf) return dest_index_[dst];
  const int node = node_of_[dst];
  if (node < 0) return dest_index_[dst] = dst;
  if (node_of_[src] == node) return dst;  // no fabric choice on the way: do not cache
  auto& path = index_scratch_;
  path.clear();
  walk_by(src, dst, 0, mix(src) ^ mix(dst), kNoIndex, path);
  for (LinkId l : path)
    if (const VertexId w = topo_.link(l).dst; node_of_[w] == node)
      return dest_index_[dst] = nic_ordinal_[w] != kInf ? nic_ordinal_[w] : w;
  return dest_index_[dst] = dst;
}

template <class D>
void Router::walk_with(VertexId src, VertexId dst, std::uint64_t flow, std::uint64_t key, std::uint64_t d,
                       std::vector<LinkId>& out) {
  const DstInfo& info = dst_info(dst);
  load_tables(info, scratch_tables_);
  const auto& tables = scratch_tables_;
  std::uint32_t dv = dist_via<D>(src, info, tables);
  if (dv == kInf)
    throw std::invalid_argument(fmt::format("route: no path from '{}' to '{}'", topo_.name(src), topo_.name(dst)));
  VertexId v = src;
  // d-mod-k (d != kNoIndex): each choice takes d mod its count, and d is divided by
  // that count for the next (Zahavi 2010, see routing.h).
  const bool by_dst = d != kNoIndex;
  while (v != dst) {
    cand_.clear();
    next_hops<D>(v, dv, info, tables);
    const auto count = static_cast<std::uint32_t>(cand_.size());
    std::uint32_t pick = 0;
    if (count > 1) {
      const int a = nic_affinity_pick(src, dst, v, count, out_arcs_[cand_[0]].dst);
      if (a >= 0) {
        pick = static_cast<std::uint32_t>(a);
      } else if (by_dst) {
        pick = static_cast<std::uint32_t>(d % count);
        d /= count;
      } else {
        pick = static_cast<std::uint32_t>(mix(key ^ v) % count);
      }
    }
    const Arc& a = out_arcs_[cand_[pick]];
    out.push_back(a.link);
    dv -= a.cost;
    v = a.dst;
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
  load_tables(info, scratch_tables_);
  return dist_via(src, info, scratch_tables_);
}

std::uint64_t Router::count_paths(VertexId src, VertexId dst) {
  const DstInfo& info = dst_info(dst);
  load_tables(info, scratch_tables_);
  std::vector<std::uint32_t> dist(topo_.num_vertices());
  for (VertexId v = 0; v < topo_.num_vertices(); ++v) dist[v] = v == dst ? 0 : dist_via(v, info, scratch_tables_);
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
      const Link& l = topo_.link(out_arcs_[k].link);
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
