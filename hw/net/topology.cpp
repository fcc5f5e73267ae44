#include "hw/net/topology.h"

#include <fmt/format.h>
#include <cmath>
#include <stdexcept>

#include "hw/errors.h"

namespace ptsim::hw::net {

std::string_view to_string(VertexKind kind) {
  switch (kind) {
    case VertexKind::gpu:
      return "gpu";
    case VertexKind::nvswitch:
      return "nvswitch";
    case VertexKind::pcie_switch:
      return "pcie_switch";
    case VertexKind::host:
      return "host";
    case VertexKind::nic:
      return "nic";
    case VertexKind::leaf:
      return "leaf";
    case VertexKind::spine:
      return "spine";
    case VertexKind::core:
      return "core";
    case VertexKind::torus_node:
      return "torus_node";
  }
  return "?";
}

VertexKind parse_vertex_kind(std::string_view text) {
  static constexpr VertexKind kAll[] = {VertexKind::gpu,   VertexKind::nvswitch, VertexKind::pcie_switch,
                                        VertexKind::host,  VertexKind::nic,      VertexKind::leaf,
                                        VertexKind::spine, VertexKind::core,     VertexKind::torus_node};
  for (VertexKind k : kAll)
    if (text == to_string(k)) return k;
  if (text == "pcie") return VertexKind::pcie_switch;
  throw std::invalid_argument(fmt::format(
      "unknown vertex kind '{}' (expected gpu, nvswitch, pcie_switch, host, nic, leaf, spine, core, torus_node)",
      text));
}

VertexId Topology::add_vertex(VertexKind kind, std::string_view name, int node) {
  if (kind_.size() >= kNoVertex)
    throw std::invalid_argument(fmt::format("topology: more than {} vertices", kNoVertex - 1));
  const VertexId v = static_cast<VertexId>(kind_.size());
  kind_.push_back(kind);
  node_.push_back(node);
  names_.append(name);
  name_end_.push_back(names_.size());
  rank_of_vertex_.push_back(-1);
  if (kind == VertexKind::gpu) {
    rank_of_vertex_[v] = static_cast<int>(gpus_.size());
    gpus_.push_back(v);
    int local = -1;
    if (node >= 0) {
      if (gpus_in_node_.size() <= static_cast<std::size_t>(node)) gpus_in_node_.resize(node + 1, 0);
      local = gpus_in_node_[node]++;
    }
    local_index_.push_back(local);
  }
  if (node >= num_nodes_) num_nodes_ = node + 1;
  if (kind == VertexKind::nvswitch && node >= 0) {
    if (nvswitch_of_node_.size() <= static_cast<std::size_t>(node)) nvswitch_of_node_.resize(node + 1, kNoVertex);
    nvswitch_of_node_[node] = v;
  }
  return v;
}

void Topology::reserve(std::size_t vertices, std::size_t cables, std::size_t name_bytes) {
  kind_.reserve(vertices);
  node_.reserve(vertices);
  name_end_.reserve(vertices);
  rank_of_vertex_.reserve(vertices);
  names_.reserve(name_bytes);
  links_.reserve(2 * cables);
}

LinkId Topology::connect(VertexId a, VertexId b, BytesPerSecond bandwidth, Seconds latency, std::uint8_t cost) {
  const auto n = num_vertices();
  if (a >= n || b >= n) throw std::invalid_argument(fmt::format("connect: unknown vertex {} or {} (have {})", a, b, n));
  if (a == b) throw std::invalid_argument(fmt::format("connect: self-loop on vertex '{}'", name(a)));
  if (!(bandwidth > 0) || !std::isfinite(bandwidth))
    throw std::invalid_argument(
        fmt::format("connect {}<->{}: bandwidth must be positive and finite, got {}", name(a), name(b), bandwidth));
  if (!(latency >= 0) || !std::isfinite(latency))
    throw std::invalid_argument(
        fmt::format("connect {}<->{}: latency must be non-negative, got {}", name(a), name(b), latency));
  if (cost == 0)
    throw std::invalid_argument(fmt::format("connect {}<->{}: routing cost must be >= 1", name(a), name(b)));
  const LinkId id = static_cast<LinkId>(links_.size());
  links_.push_back(Link{a, b, bandwidth, latency, cost});
  links_.push_back(Link{b, a, bandwidth, latency, cost});
  return id;
}

std::string Topology::link_name(LinkId id) const {
  const Link& l = links_.at(id);
  return fmt::format("{}->{}", name(l.src), name(l.dst));
}

VertexId Topology::gpu(int rank) const {
  PTSIM_CHECK(rank >= 0 && rank < num_gpus(), "GPU rank {} out of range (cluster has {} GPUs)", rank, num_gpus());
  return gpus_[rank];
}

int Topology::rank_of(VertexId v) const { return v < rank_of_vertex_.size() ? rank_of_vertex_[v] : -1; }

VertexId Topology::nvswitch_of_node(int node) const {
  if (node < 0 || static_cast<std::size_t>(node) >= nvswitch_of_node_.size()) return kNoVertex;
  return nvswitch_of_node_[node];
}

}  // namespace ptsim::hw::net
