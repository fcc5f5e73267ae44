#include "sim/core/network_cost.h"

#include <fmt/format.h>
#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>

#include "hw/net/cluster.h"
#include "hw/net/collective_time.h"

namespace ptsim::sim {
namespace {

// The most nearly equal factorisation of n into k factors (each >= 2 where possible):
// a square / cubic torus has the smallest diameter for its size.
std::vector<int> balanced_dims(int n, int k) {
  std::vector<int> best;
  double best_spread = 1e300;
  auto consider = [&](std::vector<int> d) {
    for (int x : d)
      if (x < 2) return;
    const auto [lo, hi] = std::minmax_element(d.begin(), d.end());
    const double spread = static_cast<double>(*hi) / *lo;
    if (spread < best_spread) best_spread = spread, best = d;
  };
  for (int a = 2; a <= n; ++a) {
    if (n % a) continue;
    if (k == 2) {
      consider({a, n / a});
    } else {
      const int m = n / a;
      for (int b = 2; b <= m; ++b)
        if (m % b == 0) consider({a, b, m / b});
    }
  }
  if (best.empty())
    throw std::invalid_argument(fmt::format("cluster: {} nodes cannot form a {}-D torus (each dimension >= 2)", n, k));
  return best;
}

}  // namespace

hw::net::ClusterNetSpec cluster_net_spec(const ClusterConfig& c) {
  hw::net::ClusterNetSpec s;
  s.num_gpus = c.num_gpus;
  // A cluster smaller than one node is that many GPUs of one node (scenario.cpp
  // accepts num_gpus < gpus_per_node).
  s.gpus_per_node = std::min(c.gpus_per_node, c.num_gpus);
  // Links carry what NCCL really gets out of them, not their signalling rate:
  // NVLink at the GPU's measured ring efficiency (hw/gpus.yaml, nccl-tests), NICs
  // at 96 % (a DGX A100 reaches 192 GB/s all-reduce busbw over 8 × 200 Gb/s, NCCL
  // maintainer in nccl #812; ConnectX-7 48–49 of 50 GB/s, nccl-tests #267).
  constexpr double kNicEfficiency = 0.96;
  s.intra_bandwidth = c.intra_bandwidth * c.gpu.nvlink_efficiency;
  s.intra_latency = c.intra_latency;
  s.nics_per_node = c.nics_per_node;
  s.nic_bandwidth = c.nic_bandwidth * kNicEfficiency;
  s.inter_latency = c.inter_latency;
  s.oversubscription = c.oversubscription;
  s.switch_radix = c.switch_radix;
  s.tiers = c.tiers;
  s.nvls = c.nvls;
  s.graph_file = c.graph_file;
  s.torus_dims = c.torus_dims;
  s.routing = c.routing;
  const std::string& t = c.topology;
  if (t == "fat-tree") {
    s.topology = "fat-tree";
  } else if (t == "fat-tree-3") {
    s.topology = "fat-tree";
    s.tiers = 3;
  } else if (t == "rail-optimized") {
    s.topology = "rail-optimized";
  } else if (t == "torus" || t == "torus-2d" || t == "torus-3d") {
    s.topology = "torus";
    const int nodes = c.num_gpus / std::max(1, c.gpus_per_node);
    if (s.torus_dims.empty()) s.torus_dims = balanced_dims(nodes, t == "torus-3d" ? 3 : 2);
  } else if (t == "user") {
    s.topology = "graph";
  } else {
    s.topology = t;  // build_cluster names the bad value
  }
  return s;
}

hw::net::AlgorithmOverrides algorithm_overrides(const ClusterConfig& c) {
  hw::net::AlgorithmOverrides o;
  for (const auto& [kind, algo] : c.collective_algorithms)
    o.set(hw::net::parse_collective_kind(kind), hw::net::parse_algorithm(algo));
  return o;
}

NetworkModel::NetworkModel(const ClusterConfig& cluster, const Layout& layout)
    : cluster_(cluster),
      layout_(layout),
      topo_(hw::net::build_cluster(cluster_net_spec(cluster))),
      overrides_(algorithm_overrides(cluster)),
      nccl_version_(hw::net::parse_nccl_version(cluster.nccl_version)) {
  const hw::net::ClusterNetSpec spec = cluster_net_spec(cluster);
  nvlink_bw_ = spec.intra_bandwidth;
  expand_options_.pxn = cluster.pxn;
  expand_options_.qps = cluster.qps_per_connection;
  // Every collective this model expands as hierarchical stands for NCCL's rings
  // (flow_algorithm) or is calibrated to NCCL's estimate: its phases overlap as a ring's do.
  expand_options_.pipelined_hierarchical = true;
  nic_bw_ = spec.nic_bandwidth;
  if (topo_.num_gpus() < layout_.world())
    throw std::invalid_argument(
        fmt::format("network: the plan needs {} GPUs but the cluster graph has {}", layout_.world(), topo_.num_gpus()));
  router_ = std::make_unique<hw::net::Router>(topo_);
}

std::vector<int> NetworkModel::members(Dim d, int gid) const {
  std::vector<int> out;
  const int n = layout_.group_size(d);
  out.reserve(static_cast<std::size_t>(n));
  for (int m = 0; m < n; ++m) out.push_back(layout_.member_rank(d, gid, m));
  return out;
}

std::vector<int> NetworkModel::members(Dim d, const GroupShape& g) const {
  if (d == Dim::pp) return {g.first_rank, g.first_rank + g.stride};
  return members(d, layout_.group_id(g.first_rank, d));
}

namespace {

bool nccl_tuned(CollectiveKind c) { return c != CollectiveKind::all_to_all && c != CollectiveKind::send_recv; }

// The NCCL algorithm a scenario's per-kind override asks for.
std::optional<hw::net::NcclAlgo> forced_nccl_algo(hw::net::Algorithm a, int n_nodes) {
  switch (a) {
    case hw::net::Algorithm::ring:
    case hw::net::Algorithm::hierarchical:
      return hw::net::NcclAlgo::ring;
    case hw::net::Algorithm::tree:
      return hw::net::NcclAlgo::tree;
    case hw::net::Algorithm::nvls:
      return n_nodes > 1 ? hw::net::NcclAlgo::nvls_tree : hw::net::NcclAlgo::nvls;
    default:
      return std::nullopt;
  }
}

}  // namespace

hw::net::NcclComm NetworkModel::nccl_comm(std::span<const int> ranks) const {
  std::set<int> nodes;
  for (int r : ranks) nodes.insert(topo_.node_of_rank(r));
  hw::net::NcclComm c;
  c.n_ranks = static_cast<int>(ranks.size());
  c.n_nodes = static_cast<int>(nodes.size());
  c.arch = hw::net::nccl_gpu_arch(cluster_.gpu.name, cluster_.gpu.nvls);
  c.cpu = cluster_.host_cpu;
  c.nvlink = cluster_.intra_fabric != "pcie";
  c.nvswitch = cluster_.intra_fabric == "nvswitch";
  c.n_channels = hw::net::nccl_channels(cluster_.nics_per_node);
  c.bus_bw_intra = nvlink_bw_;
  // Across nodes a ring crosses each node once per channel, so its busbw is what the
  // group's own NICs carry (ppn × NICs per GPU of them; at least one), never more than
  // NVLink (a DGX A100 all-reduce reaches 192 GB/s over 8 × 200 Gb/s, nccl #812).
  const double gpn = std::max(1, std::min(cluster_.gpus_per_node, cluster_.num_gpus));
  const double nics = std::max(1.0, c.ppn() * cluster_.nics_per_node / gpn);
  c.bus_bw_inter = std::min(nvlink_bw_, nic_bw_ * nics);
  c.nvls = topo_.nvls();
  c.collnet = cluster_.sharp && c.n_nodes > 1;  // cluster.inter_node.sharp
  return c;
}

hw::net::Algorithm NetworkModel::flow_algorithm(CollectiveKind kind, hw::net::NcclAlgo a, std::span<const int> ranks,
                                                Bytes S) {
  using hw::net::Algorithm;
  using hw::net::NcclAlgo;
  auto ok = [&](Algorithm x) { return hw::net::supports(kind, x, ranks, topo_); };
  if (a == NcclAlgo::tree && ok(Algorithm::tree)) return Algorithm::tree;
  if ((a == NcclAlgo::nvls) && ok(Algorithm::nvls)) return Algorithm::nvls;
  // Rings across nodes: NCCL runs one per NIC, which the hierarchical expansion stands
  // for when a group holds several GPUs of a node (hw/net/selection.h); NVLS-tree and
  // CollNet also reduce inside the node first.
  if (!ok(Algorithm::hierarchical)) return Algorithm::ring;
  if (a == NcclAlgo::nvls_tree || a == NcclAlgo::collnet_direct || a == NcclAlgo::collnet_chain)
    return Algorithm::hierarchical;
  const auto ring = hw::net::expand(kind, ranks, S, Algorithm::ring, topo_, expand_options_);
  const auto hier = hw::net::expand(kind, ranks, S, Algorithm::hierarchical, topo_, expand_options_);
  return hw::net::collective_time(hier, *router_) < hw::net::collective_time(ring, *router_) ? Algorithm::hierarchical
                                                                                             : Algorithm::ring;
}

void NetworkModel::calibrate(hw::net::Expansion& e, const hw::net::NcclEstimate& est) {
  e.step_latency = 0;
  const Seconds transfer = hw::net::collective_time(e, *router_, /*nonblocking_fabric=*/true);
  const auto steps = std::max<std::int64_t>(1, e.num_steps());
  e.step_latency = est.latency / static_cast<double>(steps);
  const Seconds want = est.time - est.latency;
  if (transfer > 0 && want > 0) {
    e.byte_scale = want / transfer;
    for (auto& step : e.steps)
      for (auto& f : step.flows) f.bytes *= e.byte_scale;
  }
  e.nccl = fmt::format("{}/{}", hw::net::to_string(est.algo), hw::net::to_string(est.proto));
}

hw::net::Expansion NetworkModel::expand(CollectiveKind kind, std::span<const int> ranks, Bytes S) {
  const hw::net::Algorithm forced = overrides_.get(kind);
  if (nccl_tuned(kind) && ranks.size() > 1 && forced != hw::net::Algorithm::direct) {
    const hw::net::NcclComm comm = nccl_comm(ranks);
    std::optional<hw::net::NcclEstimate> est;
    if (auto only = forced_nccl_algo(forced, comm.n_nodes))
      est = hw::net::nccl_choose(kind, comm, S, nccl_version_, only);
    // An override NCCL cannot run for this group falls back to its own choice, as NCCL
    // ignores an inapplicable NCCL_ALGO for that call.
    if (!est) est = hw::net::nccl_choose(kind, comm, S, nccl_version_);
    hw::net::Algorithm a = forced != hw::net::Algorithm::automatic && hw::net::supports(kind, forced, ranks, topo_)
                               ? forced
                               : flow_algorithm(kind, est->algo, ranks, S);
    auto e = hw::net::expand(kind, ranks, S, a, topo_, expand_options_);
    calibrate(e, *est);
    return e;
  }
  auto a = hw::net::select_algorithm(kind, ranks, S, *router_, overrides_, expand_options_);
  // An override that this group cannot run (e.g. nvls across nodes) falls back to
  // NCCL's own choice, as NCCL ignores an inapplicable NCCL_ALGO for that call.
  if (!hw::net::supports(kind, a, ranks, topo_))
    a = hw::net::select_algorithm(kind, ranks, S, *router_, {}, expand_options_);
  return hw::net::expand(kind, ranks, S, a, topo_, expand_options_);
}

Seconds NetworkModel::isolated_seconds(CollectiveKind c, std::span<const int> ranks, Bytes S) {
  return hw::net::collective_time(expand(c, ranks, S), *router_);
}

Seconds NetworkModel::stage_seconds(CollectiveKind c, Dim d, const GroupShape& g, Bytes S) {
  const std::vector<int> rep = members(d, g);
  if (d == Dim::mp) return isolated_seconds(c, rep, S);  // spans stages: no siblings
  hw::net::Expansion e = expand(c, rep, S);
  // Sibling groups: those of the same stage (the stage is a contiguous rank range).
  const int per_stage = layout_.group_size(Dim::tp) * layout_.group_size(Dim::dp);  // tp·cp·dp
  const int stage = layout_.coords(rep.front()).pp;
  const int lo = stage * per_stage, hi = lo + per_stage;
  std::vector<std::vector<int>> siblings;
  if (d == Dim::pp) {
    const int stride = rep[1] - rep[0];
    for (int r = lo; r < hi; ++r)
      if (r != rep[0] && r + stride >= 0 && r + stride < layout_.world()) siblings.push_back({r, r + stride});
  } else {
    std::set<int> seen{layout_.group_id(rep.front(), d)};
    for (int r = lo; r < hi; ++r)
      if (seen.insert(layout_.group_id(r, d)).second) siblings.push_back(members(d, layout_.group_id(r, d)));
  }
  Seconds slowest = 0;
  bool merged = true;
  for (const auto& sib : siblings) {
    if (!hw::net::supports(e.kind, e.algorithm, sib, topo_)) {
      merged = false;
      break;
    }
    auto se = hw::net::expand(e.kind, sib, S, e.algorithm, topo_, expand_options_);
    for (auto& step : se.steps)  // the same NCCL calibration as the representative group
      for (auto& f : step.flows) f.bytes *= e.byte_scale;
    if (se.steps.size() != e.steps.size()) {
      merged = false;
      break;
    }
    for (std::size_t i = 0; i < se.steps.size() && merged; ++i) merged = se.steps[i].repeat == e.steps[i].repeat;
    if (!merged) break;
    for (std::size_t i = 0; i < se.steps.size(); ++i)
      e.steps[i].flows.insert(e.steps[i].flows.end(), se.steps[i].flows.begin(), se.steps[i].flows.end());
  }
  if (!merged) {
    // Different step structures cannot be overlaid step by step: each group alone.
    slowest = isolated_seconds(c, rep, S);
    for (const auto& sib : siblings) slowest = std::max(slowest, isolated_seconds(c, sib, S));
    return slowest;
  }
  return hw::net::collective_time(e, *router_);
}

Seconds NetworkCost::seconds(CollectiveKind c, Dim d, const GroupShape& g, Bytes S) const {
  if (c != CollectiveKind::send_recv && g.size <= 1) return 0;
  const Layout& L = model_->layout();
  Key k{c, d, L.coords(g.first_rank).pp, g.size, g.stride, d == Dim::mp ? g.first_rank : 0, S};
  if (auto it = cache_.find(k); it != cache_.end()) return it->second;
  const Seconds t = model_->stage_seconds(c, d, g, S);
  cache_.emplace(k, t);
  return t;
}

}  // namespace ptsim::sim
