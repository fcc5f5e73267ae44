#include "hw/net/collective_time.h"

#include <algorithm>
#include <limits>
#include <span>

namespace ptsim::hw::net {

Seconds collective_time(const Expansion& e, Router& router, bool nonblocking_fabric) {
  const Topology& topo = router.topology();
  auto fabric_switch = [&](VertexId v) {
    const VertexKind k = topo.kind(v);
    return k == VertexKind::leaf || k == VertexKind::spine || k == VertexKind::core;
  };
  auto limits = [&](LinkId l) {
    return !nonblocking_fabric || !fabric_switch(topo.link(l).src) || !fabric_switch(topo.link(l).dst);
  };
  std::vector<std::uint32_t>& load = router.link_scratch();  // all zero between uses
  std::vector<LinkId> links, path;                            // the step's paths, back to back
  std::vector<std::size_t> begin;
  Seconds total = 0;
  for (const Step& s : e.steps) {
    links.clear();
    begin.assign(1, 0);
    for (std::size_t i = 0; i < s.flows.size(); ++i) {
      router.route(s.flows[i].src, s.flows[i].dst, i, path);
      for (LinkId l : path) ++load[l];
      links.insert(links.end(), path.begin(), path.end());
      begin.push_back(links.size());
    }
    Seconds alpha = 0, transfer = 0;
    for (std::size_t i = 0; i < s.flows.size(); ++i) {
      const std::span<const LinkId> p(links.data() + begin[i], begin[i + 1] - begin[i]);
      alpha = std::max(alpha, router.path_latency(p));
      double rate = std::numeric_limits<double>::infinity();
      for (LinkId l : p)
        if (limits(l)) rate = std::min(rate, topo.link(l).bandwidth / load[l]);
      if (s.flows[i].bytes > 0 && !p.empty()) transfer = std::max(transfer, s.flows[i].bytes / rate);
    }
    for (LinkId l : links) load[l] = 0;
    if (e.step_latency >= 0) alpha = e.step_latency;
    total += static_cast<double>(s.repeat) * (alpha + transfer);
  }
  return total;
}

Seconds idle_network_time(const Expansion& e, Router& router) {
  FlowNetwork net(router.topology());
  std::vector<LinkId> path;
  std::vector<FlowId> done;
  Seconds total = 0;
  for (const Step& s : e.steps) {
    const Seconds start = net.now();
    for (std::size_t i = 0; i < s.flows.size(); ++i) {
      router.route(s.flows[i].src, s.flows[i].dst, i, path);
      if (e.step_latency >= 0)
        net.add_flow(path, s.flows[i].bytes, start + e.step_latency, 0, /*pay_latency=*/false);
      else
        net.add_flow(path, s.flows[i].bytes, start);
    }
    done.clear();
    total += static_cast<double>(s.repeat) * (net.run_until_idle(&done) - start);
  }
  return total;
}

CollectiveRunner::CollectiveRunner(const Expansion& e, Router& router) : expansion_(e), router_(router) {}

std::int64_t CollectiveRunner::steps_left() const {
  std::int64_t n = 0;
  for (std::size_t i = next_step_; i < expansion_.steps.size(); ++i) n += expansion_.steps[i].repeat;
  return n - done_repeats_;
}

std::size_t CollectiveRunner::launch_next_step(FlowNetwork& net, Seconds start, int tag, std::vector<FlowId>& ids) {
  if (finished()) return 0;
  const Step& s = expansion_.steps[next_step_];
  if (resolved_for_ != next_step_) {
    paths_.resize(s.flows.size());
    for (std::size_t i = 0; i < s.flows.size(); ++i) router_.route(s.flows[i].src, s.flows[i].dst, i, paths_[i]);
    resolved_for_ = next_step_;
  }
  for (std::size_t i = 0; i < s.flows.size(); ++i)
    ids.push_back(expansion_.step_latency >= 0
                      ? net.add_flow(paths_[i], s.flows[i].bytes, start + expansion_.step_latency, tag, false)
                      : net.add_flow(paths_[i], s.flows[i].bytes, start, tag));
  if (++done_repeats_ == s.repeat) {
    ++next_step_;
    done_repeats_ = 0;
  }
  return s.flows.size();
}

}  // namespace ptsim::hw::net
