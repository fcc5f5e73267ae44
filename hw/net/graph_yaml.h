// A user-described topology from YAML:
//
//   nodes:
//     - {name: g0, kind: gpu, node: 0}        # kind: see parse_vertex_kind; node: server index
//     - {name: sw, kind: nvswitch, node: 0}
//   links:
//     - {a: g0, b: sw, bandwidth: "300 GB/s", latency: "1 us", cost: 1}   # cost optional (routing.h)
//
// GPU ranks follow the order of the gpu entries. Quantities are unit strings parsed
// with ptsim::parse_bandwidth / parse_seconds (hw/units.h). Unknown keys, duplicate
// names, dangling link ends and GPUs that cannot reach every other GPU are errors.
#pragma once

#include <string>
#include <string_view>

#include "hw/net/topology.h"

namespace ptsim::hw::net {

Topology build_graph_from_yaml_text(std::string_view yaml_text);
Topology build_graph_from_yaml_file(const std::string& path);

}  // namespace ptsim::hw::net
