#include "hw/net/bottleneck.h"

#include <algorithm>
#include <fmt/format.h>

namespace ptsim::hw::net {

std::vector<LinkUsage> busiest_links(const FlowNetwork& net, std::size_t top_n, Seconds elapsed) {
  const Topology& topo = net.topology();
  if (elapsed <= 0) elapsed = net.now() - net.statistics_start();
  std::vector<LinkUsage> all;
  for (LinkId l = 0; l < topo.num_links(); ++l) {
    const Bytes b = net.link_bytes(l);
    if (b <= 0) continue;
    all.push_back({l, {}, b, net.link_busy_time(l), elapsed > 0 ? b / (topo.link(l).bandwidth * elapsed) : 0.0});
  }
  auto better = [](const LinkUsage& a, const LinkUsage& b) {
    if (a.utilisation != b.utilisation) return a.utilisation > b.utilisation;
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.link < b.link;
  };
  const std::size_t n = std::min(top_n, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(), better);
  all.resize(n);
  for (auto& u : all) u.name = topo.link_name(u.link);
  return all;
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
