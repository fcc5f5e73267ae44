#include "hw/net/placement.h"

#include <algorithm>
#include <fmt/format.h>
#include <set>
#include <sstream>
#include <stdexcept>

#include "hw/net/topology.h"

namespace ptsim::hw::net {

const char* to_string(Dim d) {
  switch (d) {
    case Dim::tp: return "tp";
    case Dim::cp: return "cp";
    case Dim::dp: return "dp";
    case Dim::pp: return "pp";
    case Dim::ep: return "ep";
    case Dim::edp: return "edp";
  }
  return "?";
}

Placement::Placement(const ParallelShape& s, int world_size) : world_(world_size), ep_(s.ep) {
  size_ = {s.tp, s.cp, s.dp, s.pp};
  const char* names[] = {"tp", "cp", "dp", "pp"};
  for (int i = 0; i < 4; ++i)
    if (size_[i] < 1) throw std::invalid_argument(fmt::format("placement: {} must be >= 1, got {}", names[i], size_[i]));
  if (s.ep < 1 || s.dp % s.ep != 0)
    throw std::invalid_argument(fmt::format("placement: ep must be >= 1 and divide dp ({}), got {}", s.dp, s.ep));
  const long product = static_cast<long>(s.tp) * s.cp * s.dp * s.pp;
  if (product != world_size)
    throw std::invalid_argument(fmt::format("placement: tp*cp*dp*pp = {}*{}*{}*{} = {} but world size is {}", s.tp, s.cp,
                                            s.dp, s.pp, product, world_size));
  // Parse the order: tokens separated by '-', innermost first.
  std::vector<std::string> tokens;
  std::stringstream ss(s.order);
  for (std::string t; std::getline(ss, t, '-');) tokens.push_back(t);
  std::vector<int> order;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto& t = tokens[i];
    if (t == "ep") {
      // EP is carved from DP, so it must sit right inside dp (Megatron "tp-cp-ep-dp-pp").
      if (i + 1 >= tokens.size() || tokens[i + 1] != "dp")
        throw std::invalid_argument(fmt::format("placement order '{}': 'ep' must come right before 'dp'", s.order));
      continue;
    }
    auto it = std::find(std::begin(names), std::end(names), t);
    if (it == std::end(names))
      throw std::invalid_argument(fmt::format("placement order '{}': unknown dimension '{}' (use tp, cp, ep, dp, pp)", s.order, t));
    const int d = static_cast<int>(it - std::begin(names));
    if (std::find(order.begin(), order.end(), d) != order.end())
      throw std::invalid_argument(fmt::format("placement order '{}': '{}' appears twice", s.order, t));
    order.push_back(d);
  }
  if (order.size() != 4)
    throw std::invalid_argument(fmt::format("placement order '{}' must name each of tp, cp, dp, pp once", s.order));
  int stride = 1;
  for (int d : order) {
    stride_[d] = stride;
    stride *= size_[d];
  }
}

void Placement::check_rank(int rank) const {
  if (rank < 0 || rank >= world_)
    throw std::out_of_range(fmt::format("placement: rank {} out of range [0, {})", rank, world_));
}

int Placement::size(Dim d) const {
  switch (d) {
    case Dim::ep: return ep_;
    case Dim::edp: return size_[2] / ep_;
    default: return size_[static_cast<int>(d)];
  }
}

int Placement::coord(int rank, Dim d) const {
  check_rank(rank);
  switch (d) {
    case Dim::ep: return coord(rank, Dim::dp) % ep_;
    case Dim::edp: return coord(rank, Dim::dp) / ep_;
    default: {
      const int i = static_cast<int>(d);
      return rank / stride_[i] % size_[i];
    }
  }
}

int Placement::rank_from(const std::array<int, 4>& c) const {
  int r = 0;
  for (int i = 0; i < 4; ++i) r += c[i] * stride_[i];
  return r;
}

std::vector<int> Placement::group(int rank, Dim d) const {
  check_rank(rank);
  std::array<int, 4> c{};
  for (int i = 0; i < 4; ++i) c[i] = rank / stride_[i] % size_[i];
  std::vector<int> out;
  switch (d) {
    case Dim::ep: {
      const int base = c[2] / ep_ * ep_;
      for (int e = 0; e < ep_; ++e) {
        c[2] = base + e;
        out.push_back(rank_from(c));
      }
      break;
    }
    case Dim::edp: {
      const int e = c[2] % ep_;
      for (int g = 0; g < size_[2] / ep_; ++g) {
        c[2] = g * ep_ + e;
        out.push_back(rank_from(c));
      }
      break;
    }
    default: {
      const int i = static_cast<int>(d);
      for (int k = 0; k < size_[i]; ++k) {
        c[i] = k;
        out.push_back(rank_from(c));
      }
    }
  }
  return out;
}

std::vector<std::vector<int>> Placement::groups(Dim d) const {
  std::vector<std::vector<int>> out;
  std::vector<char> seen(world_, 0);
  for (int r = 0; r < world_; ++r) {
    if (seen[r]) continue;
    auto g = group(r, d);
    for (int m : g) seen[m] = 1;
    out.push_back(std::move(g));
  }
  return out;
}

PlacementReport placement_report(const Placement& p, const Topology& topo) {
  if (topo.num_gpus() < p.world_size())
    throw std::invalid_argument(
        fmt::format("placement report: world size {} exceeds the topology's {} GPUs", p.world_size(), topo.num_gpus()));
  PlacementReport rep;
  for (Dim d : {Dim::tp, Dim::cp, Dim::dp, Dim::pp, Dim::ep, Dim::edp}) {
    GroupCrossing gc{d, p.size(d), 0, 0, 0};
    for (const auto& g : p.groups(d)) {
      std::set<int> nodes;
      for (int r : g) nodes.insert(topo.node_of_rank(r));
      ++gc.num_groups;
      if (nodes.size() > 1) ++gc.groups_crossing_nodes;
      gc.max_nodes_spanned = std::max(gc.max_nodes_spanned, static_cast<int>(nodes.size()));
    }
    rep.dims.push_back(gc);
  }
  return rep;
}

std::string PlacementReport::text() const {
  std::string s;
  for (const auto& d : dims) {
    if (d.group_size <= 1) continue;
    s += fmt::format("{:>3}: {} groups of {}: {}\n", to_string(d.dim), d.num_groups, d.group_size,
                     d.groups_crossing_nodes == 0
                         ? std::string("all inside one node")
                         : fmt::format("{} cross nodes (up to {} nodes each)", d.groups_crossing_nodes, d.max_nodes_spanned));
  }
  if (s.empty()) s = "no parallel groups (every dimension has size 1)\n";
  return s;
}

}  // namespace ptsim::hw::net
