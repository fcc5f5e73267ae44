#include "hw/net/bottleneck.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

namespace ptsim::hw::net {

std::vector<LinkUsage> busiest_links(const Topology& topo, const std::function<Bytes(LinkId)>& link_bytes,
                                     Seconds elapsed, std::size_t top_n, const std::function<bool(LinkId)>& keep) {
  std::vector<LinkUsage> all;
  for (LinkId l = 0; l < topo.num_links(); ++l) {
    if (keep && !keep(l)) continue;
    const Bytes b = link_bytes(l);
    if (b <= 0) continue;
    all.push_back({l, {}, b, 0, elapsed > 0 ? b / (topo.link(l).bandwidth * elapsed) : 0.0});
  }
  auto level = [](const LinkUsage& x) { return std::llround(x.utilisation * 1e9); };
  auto busier = [&](const LinkUsage& a, const LinkUsage& b) {
    const auto la = level(a), lb = level(b);
    return la != lb ? la > lb : a.link < b.link;
  };
  const std::size_t n = std::min(top_n, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(), busier);
  all.resize(n);
  for (auto& u : all) u.name = topo.link_name(u.link);
  return all;
}

std::vector<LinkUsage> busiest_links(const FlowNetwork& net, std::size_t top_n, Seconds elapsed) {
  if (elapsed <= 0) elapsed = net.now() - net.statistics_start();
  auto out = busiest_links(
      net.topology(), [&](LinkId l) { return net.link_bytes(l); }, elapsed, top_n);
  for (auto& u : out) u.busy = net.link_busy_time(u.link);
  return out;
}

std::string format_busiest_links(const std::vector<LinkUsage>& links) {
  if (links.empty()) return "no link carried traffic\n";
  std::size_t w = 4;
  for (const auto& u : links) w = std::max(w, u.name.size());
  std::string s = fmt::format("{:<{}}  {:>12}  {:>6}  {:>10}\n", "link", w, "bytes", "util", "busy");
  for (const auto& u : links)
    s += fmt::format("{:<{}}  {:>12}  {:>5.1f}%  {:>10}\n", u.name, w, format_bytes(u.bytes), 100 * u.utilisation,
                     format_seconds(u.busy));
  return s;
}

}  // namespace ptsim::hw::net
