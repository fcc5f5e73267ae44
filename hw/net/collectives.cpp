#include "hw/net/collectives.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "hw/net/double_binary_tree.h"

namespace ptsim::hw::net {
namespace {

constexpr CollectiveKind kKinds[] = {CollectiveKind::all_reduce, CollectiveKind::reduce_scatter,
                                     CollectiveKind::all_gather, CollectiveKind::broadcast,
                                     CollectiveKind::all_to_all, CollectiveKind::send_recv};
constexpr Algorithm kAlgorithms[] = {Algorithm::automatic, Algorithm::ring,         Algorithm::tree,
                                     Algorithm::nvls,      Algorithm::hierarchical, Algorithm::direct};

std::string normalise(std::string_view t) {
  std::string s(t);
  std::replace(s.begin(), s.end(), '_', '-');
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Appends a step, merging it into the previous one when the flows are identical.
void push_step(Expansion& e, std::vector<Flow>&& flows, std::int64_t repeat = 1) {
  if (repeat <= 0) return;
  if (!e.steps.empty() && e.steps.back().flows == flows) {
    e.steps.back().repeat += repeat;
    return;
  }
  e.steps.push_back(Step{std::move(flows), repeat});
}

// One ring step: position i sends `bytes` to position i+1 (mod n).
std::vector<Flow> ring_step(const std::vector<VertexId>& v, Bytes bytes) {
  std::vector<Flow> f;
  const std::size_t n = v.size();
  f.reserve(n);
  for (std::size_t i = 0; i < n; ++i) f.push_back({v[i], v[(i + 1) % n], bytes});
  return f;
}

// Ranks of the group split by node, in order of first appearance; empty when the
// nodes hold different numbers of members.
std::vector<std::vector<VertexId>> by_node(const std::vector<VertexId>& v, const Topology& topo) {
  std::map<int, std::size_t> index;
  std::vector<std::vector<VertexId>> out;
  for (VertexId x : v) {
    auto [it, fresh] = index.try_emplace(topo.node(x), out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(x);
  }
  for (const auto& g : out)
    if (g.size() != out.front().size()) return {};
  return out;
}

void expand_ring(Expansion& e, const std::vector<VertexId>& v, Bytes S, const ExpandOptions& opt) {
  const int n = static_cast<int>(v.size());
  switch (e.kind) {
    case CollectiveKind::all_reduce:
      // Patarasuk & Yuan 2009: reduce-scatter then all-gather, 2(n−1) steps of S/n.
      push_step(e, ring_step(v, S / n), 2 * (n - 1));
      break;
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_gather:
      push_step(e, ring_step(v, S / n), n - 1);
      break;
    case CollectiveKind::broadcast: {
      // Chain from the root, pipelined in c chunks: position i (from the root) forwards
      // chunk s − i in step s; c + n − 2 steps of S/c.
      const int c = static_cast<int>(std::clamp<double>(std::ceil(S / opt.chunk_bytes), 1, opt.max_broadcast_chunks));
      std::vector<VertexId> chain(n);
      for (int i = 0; i < n; ++i) chain[i] = v[(opt.root + i) % n];
      for (int s = 0; s < c + n - 2; ++s) {
        std::vector<Flow> f;
        for (int i = std::max(0, s - c + 1); i <= std::min(s, n - 2); ++i) f.push_back({chain[i], chain[i + 1], S / c});
        push_step(e, std::move(f));
      }
      break;
    }
    case CollectiveKind::all_to_all:
      // Pairwise exchange: in step k position i sends its S/n block to position i+k.
      for (int k = 1; k < n; ++k) {
        std::vector<Flow> f;
        for (int i = 0; i < n; ++i) f.push_back({v[i], v[(i + k) % n], S / n});
        push_step(e, std::move(f));
      }
      break;
    case CollectiveKind::send_recv:
      throw std::invalid_argument("send/recv has no ring algorithm (use direct)");
  }
}

void expand_tree(Expansion& e, const std::vector<VertexId>& v, Bytes S, const ExpandOptions& opt) {
  const int n = static_cast<int>(v.size());
  auto [t1, t2] = double_binary_tree(n);
  const BinaryTree* trees[2] = {&t1, &t2};
  // Each tree carries S/2, pipelined in c chunks.
  const double half = S / 2;
  const std::int64_t c = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(half / opt.chunk_bytes)));
  const Bytes chunk = half / static_cast<double>(c);
  const int H = t1.height[t1.root];  // both trees have the same shape
  // Reduce: a node of height h sends chunk s − h to its parent in step s (its children,
  // of height <= h − 1, sent that chunk in an earlier step). Broadcast: a node of depth
  // d forwards chunk s − d to its children. Senders have height (depth) 0..H−1, so each
  // phase has H + c − 1 steps; steps with the same active range are identical.
  for (int phase = 0; phase < 2; ++phase) {
    const std::int64_t total = H + c - 1;
    std::int64_t s = 0;
    while (s < total) {
      const std::int64_t lo = std::max<std::int64_t>(0, s - c + 1), hi = std::min<std::int64_t>(s, H - 1);
      // The range stays the same while both ends stay put: count those steps.
      std::int64_t run = 1;
      if (lo == 0 && hi == H - 1) run = std::min(total, c) - s;  // steady state: s in [H−1, c−1]
      std::vector<Flow> f;
      for (const BinaryTree* t : trees)
        for (int p = 0; p < n; ++p) {
          if (phase == 0) {
            if (t->parent[p] >= 0 && t->height[p] >= lo && t->height[p] <= hi)
              f.push_back({v[p], v[t->parent[p]], chunk});
          } else {
            const int q = t->parent[p];  // q -> p
            if (q >= 0 && t->depth[q] >= lo && t->depth[q] <= hi) f.push_back({v[q], v[p], chunk});
          }
        }
      push_step(e, std::move(f), run);
      s += run;
    }
  }
}

void expand_nvls(Expansion& e, const std::vector<VertexId>& v, Bytes S, const Topology& topo) {
  const VertexId sw = topo.nvswitch_of_node(topo.node(v.front()));
  std::vector<Flow> f;
  for (VertexId x : v) f.push_back({x, sw, S});  // multimem reduce: every GPU's buffer into the switch
  for (VertexId x : v) f.push_back({sw, x, S});  // multicast of the result
  push_step(e, std::move(f));
}

void expand_hierarchical(Expansion& e, const std::vector<VertexId>& v, Bytes S, const Topology& topo, bool pipelined) {
  const auto nodes = by_node(v, topo);
  const int m = static_cast<int>(nodes.size()), g = static_cast<int>(nodes.front().size());
  auto intra = [&](Bytes b) {
    std::vector<Flow> f;
    for (const auto& nd : nodes)
      for (int i = 0; i < g; ++i) f.push_back({nd[i], nd[(i + 1) % g], b});
    return f;
  };
  auto inter = [&](Bytes b) {  // one ring per local index (rail) across the nodes
    std::vector<Flow> f;
    for (int j = 0; j < g; ++j)
      for (int k = 0; k < m; ++k) f.push_back({nodes[k][j], nodes[(k + 1) % m][j], b});
    return f;
  };
  const double n = static_cast<double>(v.size());
  if (pipelined && g > 1 && m > 1) {
    // Per flow, the sequential form's bytes over all its repeats, spread over one step
    // repeated as often as the ring's: 2(g−1)·S/g and 2(m−1)·S/n for all-reduce, half
    // of each for reduce-scatter and all-gather.
    const std::int64_t phases = e.kind == CollectiveKind::all_reduce ? 2 : 1;
    const std::int64_t repeat = phases * (static_cast<std::int64_t>(v.size()) - 1);
    const double r = static_cast<double>(repeat);
    // The inter-node flows first: a flow's place in its step is its ECMP index, so they
    // hash onto the fabric as the sequential form's inter-node step does.
    std::vector<Flow> f = inter(phases * (m - 1) * (S / n) / r);
    auto inside = intra(phases * (g - 1) * (S / g) / r);
    f.insert(f.end(), inside.begin(), inside.end());
    push_step(e, std::move(f), repeat);
    return;
  }
  if (e.kind == CollectiveKind::all_reduce || e.kind == CollectiveKind::reduce_scatter) {
    if (g > 1) push_step(e, intra(S / g), g - 1);
    if (m > 1) push_step(e, inter(S / n), e.kind == CollectiveKind::all_reduce ? 2 * (m - 1) : m - 1);
    if (e.kind == CollectiveKind::all_reduce && g > 1) push_step(e, intra(S / g), g - 1);
  } else {  // all-gather: inter-node first, then inside the node
    if (m > 1) push_step(e, inter(S / n), m - 1);
    if (g > 1) push_step(e, intra(S / g), g - 1);
  }
}

void expand_direct(Expansion& e, const std::vector<VertexId>& v, Bytes S, const Topology& topo,
                   const ExpandOptions& opt) {
  std::vector<Flow> f;
  if (e.kind == CollectiveKind::send_recv) {
    f.push_back({v[0], v[1], S});
    push_step(e, std::move(f));
    return;
  }
  const std::size_t n = v.size();
  const Bytes chunk = S / static_cast<double>(n);
  // The PXN proxy of a send from v[i] to v[j]: the member on v[i]'s node with v[j]'s
  // local index, when that node's GPUs share an NVSwitch (NCCL requires an NVLink path
  // to the proxy). Keyed by (node, local index) over the group's members only: NCCL's
  // proxy must be a rank of the communicator (ncclTopoGetLocalGpu searches comm->topo).
  std::unordered_map<std::uint64_t, VertexId> member_at;
  auto key = [](int node, int local) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(node)) << 32) | static_cast<std::uint32_t>(local);
  };
  if (opt.pxn)
    for (VertexId x : v)
      if (topo.nvswitch_of_node(topo.node(x)) != kNoVertex)
        member_at.emplace(key(topo.node(x), topo.local_index(x)), x);
  // One flow per (source, destination) vertex pair, bytes summed, in first-seen order
  // (deterministic: the pairs are visited in group order).
  std::unordered_map<std::uint64_t, std::size_t> flow_of;
  f.reserve(n * (n - 1));
  auto add = [&](VertexId a, VertexId b) {
    const auto [it, fresh] = flow_of.emplace((static_cast<std::uint64_t>(a) << 32) | b, f.size());
    if (fresh)
      f.push_back({a, b, chunk});
    else
      f[it->second].bytes += chunk;
  };
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const int from = topo.node(v[i]);
      if (!member_at.empty() && from != topo.node(v[j]) && from >= 0) {
        const auto p = member_at.find(key(from, topo.local_index(v[j])));
        if (p != member_at.end()) {
          if (p->second != v[i]) add(v[i], p->second);  // NVLink hop to the proxy
          add(p->second, v[j]);                         // the proxy's aggregated send
          continue;
        }
      }
      add(v[i], v[j]);
    }
  push_step(e, std::move(f));
}

std::string why_unsupported(CollectiveKind kind, Algorithm a, std::span<const int> ranks, const Topology& topo) {
  const int n = static_cast<int>(ranks.size());
  if (kind == CollectiveKind::send_recv) {
    if (n != 2) return fmt::format("send/recv needs a group of exactly 2 ranks, got {}", n);
    return a == Algorithm::direct ? "" : "send/recv only has the direct algorithm";
  }
  switch (a) {
    case Algorithm::automatic:
      return "choose an algorithm first (selection.h)";
    case Algorithm::ring:
      return "";
    case Algorithm::tree:
      return kind == CollectiveKind::all_reduce ? "" : "tree only implements all-reduce (as NCCL)";
    case Algorithm::direct:
      return kind == CollectiveKind::all_to_all ? "" : "direct only implements all-to-all and send/recv";
    case Algorithm::nvls: {
      if (kind != CollectiveKind::all_reduce) return "nvls is only modelled for all-reduce";
      if (!topo.nvls()) return "nvls is off for this topology (needs NVSwitch gen 3, H100+, and cluster nvls: true)";
      const int node = topo.node_of_rank(ranks[0]);
      for (int r : ranks)
        if (topo.node_of_rank(r) != node) return "nvls needs every rank in one NVSwitch domain (node)";
      if (topo.nvswitch_of_node(node) == kNoVertex) return fmt::format("node {} has no NVSwitch", node);
      return "";
    }
    case Algorithm::hierarchical: {
      if (kind != CollectiveKind::all_reduce && kind != CollectiveKind::reduce_scatter &&
          kind != CollectiveKind::all_gather)
        return "hierarchical implements all-reduce, reduce-scatter and all-gather";
      std::vector<VertexId> v;
      for (int r : ranks) v.push_back(topo.gpu(r));
      if (by_node(v, topo).empty()) return "hierarchical needs the same number of group members on every node";
      return "";
    }
  }
  return "unknown algorithm";
}

}  // namespace

std::string_view to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce:
      return "all-reduce";
    case CollectiveKind::reduce_scatter:
      return "reduce-scatter";
    case CollectiveKind::all_gather:
      return "all-gather";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::all_to_all:
      return "all-to-all";
    case CollectiveKind::send_recv:
      return "send-recv";
  }
  return "?";
}

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::automatic:
      return "auto";
    case Algorithm::ring:
      return "ring";
    case Algorithm::tree:
      return "tree";
    case Algorithm::nvls:
      return "nvls";
    case Algorithm::hierarchical:
      return "hierarchical";
    case Algorithm::direct:
      return "direct";
  }
  return "?";
}

CollectiveKind parse_collective_kind(std::string_view text) {
  const std::string s = normalise(text);
  for (auto k : kKinds)
    if (s == to_string(k)) return k;
  if (s == "alltoall" || s == "all2all") return CollectiveKind::all_to_all;
  if (s == "sendrecv" || s == "p2p") return CollectiveKind::send_recv;
  throw std::invalid_argument(fmt::format(
      "unknown collective '{}' (expected all-reduce, reduce-scatter, all-gather, broadcast, all-to-all, send-recv)",
      text));
}

Algorithm parse_algorithm(std::string_view text) {
  const std::string s = normalise(text);
  for (auto a : kAlgorithms)
    if (s == to_string(a)) return a;
  if (s == "automatic") return Algorithm::automatic;
  throw std::invalid_argument(
      fmt::format("unknown collective algorithm '{}' (expected auto, ring, tree, nvls, hierarchical, direct)", text));
}

std::int64_t Expansion::num_steps() const {
  std::int64_t n = 0;
  for (const auto& s : steps) n += s.repeat;
  return n;
}

std::size_t Expansion::num_flows() const {
  std::size_t n = 0;
  for (const auto& s : steps) n += s.flows.size() * static_cast<std::size_t>(s.repeat);
  return n;
}

bool supports(CollectiveKind kind, Algorithm a, std::span<const int> ranks, const Topology& topo) {
  return !ranks.empty() && why_unsupported(kind, a, ranks, topo).empty();
}

bool split_over_qps(const Topology& topo, VertexId src, VertexId dst) {
  const int a = topo.node(src), b = topo.node(dst);
  return !(a == b && a >= 0);
}

namespace {

// ExpandOptions::qps: every flow between two nodes becomes `qps` flows of equal bytes
// (adjacent, so that each gets its own flow number and so its own ECMP hash).
void split_over_qps(Expansion& e, const Topology& topo, int qps) {
  std::vector<Flow> out;
  for (Step& s : e.steps) {
    out.clear();
    for (const Flow& f : s.flows) {
      if (!split_over_qps(topo, f.src, f.dst)) {
        out.push_back(f);
        continue;
      }
      for (int q = 0; q < qps; ++q) out.push_back({f.src, f.dst, f.bytes / qps});
    }
    s.flows.swap(out);
  }
}

}  // namespace

Expansion expand(CollectiveKind kind, std::span<const int> ranks, Bytes bytes, Algorithm algorithm,
                 const Topology& topo, const ExpandOptions& opt) {
  if (ranks.empty()) throw std::invalid_argument("collective: empty group");
  if (!(bytes >= 0) || !std::isfinite(bytes))
    throw std::invalid_argument(fmt::format("collective: bytes must be finite and >= 0, got {}", bytes));
  if (!(opt.chunk_bytes > 0))
    throw std::invalid_argument(fmt::format("collective: chunk_bytes must be > 0, got {}", opt.chunk_bytes));
  if (opt.qps < 1 || opt.qps > kMaxQps)
    throw std::invalid_argument(fmt::format("collective: qps must be 1 to {}, got {}", kMaxQps, opt.qps));
  if (opt.max_broadcast_chunks < 1)
    throw std::invalid_argument(
        fmt::format("collective: max_broadcast_chunks must be >= 1, got {}", opt.max_broadcast_chunks));
  std::vector<VertexId> v;
  v.reserve(ranks.size());
  std::unordered_set<int> seen;
  for (int r : ranks) {
    v.push_back(topo.gpu(r));  // throws on an unknown rank
    if (!seen.insert(r).second)
      throw std::invalid_argument(fmt::format("collective: rank {} appears twice in the group", r));
  }
  if (opt.root < 0 || opt.root >= static_cast<int>(v.size()))
    throw std::invalid_argument(
        fmt::format("collective: root position {} outside the group of {}", opt.root, v.size()));
  if (auto why = why_unsupported(kind, algorithm, ranks, topo); !why.empty())
    throw std::invalid_argument(fmt::format("{} with algorithm '{}': {}", to_string(kind), to_string(algorithm), why));
  Expansion e;
  e.kind = kind;
  e.algorithm = algorithm;
  e.group_size = static_cast<int>(v.size());
  e.bytes = bytes;
  if (v.size() == 1 && kind != CollectiveKind::send_recv) return e;  // nothing moves
  switch (algorithm) {
    case Algorithm::ring:
      expand_ring(e, v, bytes, opt);
      break;
    case Algorithm::tree:
      expand_tree(e, v, bytes, opt);
      break;
    case Algorithm::nvls:
      expand_nvls(e, v, bytes, topo);
      break;
    case Algorithm::hierarchical:
      expand_hierarchical(e, v, bytes, topo, opt.pipelined_hierarchical);
      break;
    case Algorithm::direct:
      expand_direct(e, v, bytes, topo, opt);
      break;
    case Algorithm::automatic:
      break;  // rejected above
  }
  if (opt.qps > 1) split_over_qps(e, topo, opt.qps);
  e.qps = opt.qps;
  return e;
}

Bytes bytes_sent(const Expansion& e, VertexId v) {
  Bytes b = 0;
  for (const auto& s : e.steps)
    for (const auto& f : s.flows)
      if (f.src == v) b += f.bytes * static_cast<double>(s.repeat);
  return b;
}

Bytes bytes_received(const Expansion& e, VertexId v) {
  Bytes b = 0;
  for (const auto& s : e.steps)
    for (const auto& f : s.flows)
      if (f.dst == v) b += f.bytes * static_cast<double>(s.repeat);
  return b;
}

}  // namespace ptsim::hw::net
