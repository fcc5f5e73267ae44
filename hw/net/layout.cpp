#include "hw/net/layout.h"

#include <fmt/format.h>
#include <algorithm>

namespace ptsim::hw::net {

const char* to_string(Dim d) {
  static const char* names[] = {"tp", "pp", "dp", "cp", "ep", "mp", "etp", "edp"};
  return names[static_cast<int>(d)];
}

Layout::Layout(int tp, int cp, int dp, int pp, int ep, int gpus_per_node, int etp)
    : tp_(tp),
      cp_(cp),
      dp_(dp),
      pp_(pp),
      ep_(ep),
      gpus_per_node_(std::max(1, gpus_per_node)),
      etp_(etp > 0 ? etp : tp) {}

Coords Layout::coords(int rank) const {
  Coords c;
  c.tp = rank % tp_;
  rank /= tp_;
  c.cp = rank % cp_;
  rank /= cp_;
  c.dp = rank % dp_;
  c.pp = rank / dp_;
  return c;
}

int Layout::group_size(Dim d) const {
  switch (d) {
    case Dim::tp:
      return tp_;
    case Dim::cp:
      return cp_;
    case Dim::dp:
      return dp_ * cp_;
    case Dim::ep:
      return ep_;
    case Dim::etp:
      return etp_;
    case Dim::edp:
      return tp_ * cp_ * dp_ / (etp_ * ep_);
    case Dim::mp:
      return tp_ * cp_ * pp_;
    case Dim::pp:
      return 2;
  }
  return 1;
}

int Layout::group_count(Dim d) const {
  if (d == Dim::pp) return world();
  return world() / group_size(d);
}

int Layout::group_id(int rank, Dim d) const {
  const Coords c = coords(rank);
  const int j = c.cp + cp_ * c.dp;  // index in the dp × cp group
  switch (d) {
    case Dim::tp:
      return rank / tp_;
    case Dim::cp:
      return c.tp + tp_ * (c.dp + dp_ * c.pp);
    case Dim::dp:
      return c.tp + tp_ * c.pp;
    case Dim::ep: {
      // Numbered (etp_i, pp_i, edp_i), edp_i fastest: with etp = tp, (tp_i, pp_i, j / ep).
      const int i = c.tp + tp_ * j;
      return (i % etp_ + etp_ * c.pp) * (tp_ * cp_ * dp_ / (etp_ * ep_)) + i / (etp_ * ep_);
    }
    case Dim::etp:
      return rank / etp_;
    case Dim::edp:  // numbered (etp_i + etp·ep_i, pp_i), the former fastest
      return (c.tp + tp_ * j) % (etp_ * ep_) + etp_ * ep_ * c.pp;
    case Dim::mp:
      return c.dp;
    case Dim::pp:
      return rank;
  }
  return 0;
}

int Layout::member_index(int rank, Dim d) const {
  const Coords c = coords(rank);
  const int j = c.cp + cp_ * c.dp;
  switch (d) {
    case Dim::tp:
      return c.tp;
    case Dim::cp:
      return c.cp;
    case Dim::dp:
      return j;
    case Dim::ep:
      return (c.tp + tp_ * j) / etp_ % ep_;
    case Dim::etp:
      return rank % etp_;
    case Dim::edp:
      return (c.tp + tp_ * j) / (etp_ * ep_);
    case Dim::mp:
      return c.tp + tp_ * (c.cp + cp_ * c.pp);
    case Dim::pp:
      return 0;
  }
  return 0;
}

int Layout::member_rank(Dim d, int g, int m) const {
  switch (d) {
    case Dim::tp:
      return g * tp_ + m;
    case Dim::cp: {
      const int t = g % tp_, rest = g / tp_;
      const int dpi = rest % dp_, ppi = rest / dp_;
      return rank_of({t, m, dpi, ppi});
    }
    case Dim::dp: {
      const int t = g % tp_, ppi = g / tp_;
      return rank_of({t, m % cp_, m / cp_, ppi});
    }
    case Dim::ep: {
      const int stage = tp_ * cp_ * dp_;
      const int per = stage / (etp_ * ep_);
      const int base = g / per, slot = g % per;
      const int t = base % etp_, ppi = base / etp_;
      return t + etp_ * (m + ep_ * slot) + stage * ppi;
    }
    case Dim::etp:
      return g * etp_ + m;
    case Dim::edp: {
      const int per = etp_ * ep_;
      return g % per + per * m + tp_ * cp_ * dp_ * (g / per);
    }
    case Dim::mp: {
      const int t = m % tp_, rest = m / tp_;
      return rank_of({t, rest % cp_, g, rest / cp_});
    }
    case Dim::pp:
      return m == 0 ? g : g + tp_ * cp_ * dp_;
  }
  return 0;
}

GroupShape Layout::shape(Dim d, int g) const {
  GroupShape s;
  s.size = group_size(d);
  s.first_rank = member_rank(d, g, 0);
  s.stride = s.size > 1 ? member_rank(d, g, 1) - s.first_rank : 1;
  // Distinct nodes spanned: member ranks increase with the member index in every
  // dimension (TP innermost ... PP outermost), so nodes change monotonically and
  // counting the changes counts them.
  int nodes = 0, last = -1;
  for (int m = 0; m < s.size; ++m) {
    const int n = node_of(member_rank(d, g, m));
    if (n != last) ++nodes, last = n;
  }
  s.nodes = std::max(1, nodes);
  return s;
}

std::string Layout::placement_summary() const {
  std::string out = "placement:";
  for (Dim d : {Dim::tp, Dim::cp, Dim::ep, Dim::etp, Dim::dp, Dim::edp, Dim::mp}) {
    const int size = group_size(d);
    // etp = tp is the TP group, and without experts sharded apart edp is the dp group.
    if (size <= 1 || (d == Dim::etp && etp_ == tp_) || (d == Dim::edp && ep_ == 1 && etp_ == tp_)) continue;
    int crossing = 0, widest = 1;
    for (int g = 0; g < group_count(d); ++g) {
      const int nodes = shape(d, g).nodes;
      crossing += nodes > 1;
      widest = std::max(widest, nodes);
    }
    const char* name = d == Dim::mp ? "tp×cp×pp" : to_string(d);
    if (crossing == 0)
      out += fmt::format("  {} {}×{} in-node;", name, group_count(d), size);
    else
      out += fmt::format("  {} {}×{}, {} cross nodes (up to {} nodes);", name, group_count(d), size, crossing, widest);
  }
  if (pp_ > 1) {
    const bool cross = node_of(0) != node_of(tp_ * cp_ * dp_);
    out += fmt::format("  pp sends {};", cross ? "cross nodes" : "stay in-node");
  }
  if (out.back() == ';') out.pop_back();
  return out;
}

}  // namespace ptsim::hw::net
