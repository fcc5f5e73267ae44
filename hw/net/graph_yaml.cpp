#include "hw/net/graph_yaml.h"

#include "hw/errors.h"
#include "hw/input_file.h"
#include "hw/yaml_limits.h"
#include "hw/strict_yaml.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <stdexcept>
#include <unordered_map>

namespace ptsim::hw::net {
namespace {

void check_keys(const YAML::Node& n, std::initializer_list<std::string_view> allowed, std::string_view where) {
  const std::vector<std::string> keys(allowed.begin(), allowed.end());
  if (const auto u = unknown_key(n, keys))
    throw std::invalid_argument(
        fmt::format("topology graph: unknown key '{}' in {} (did you mean '{}'?)", u->key, where, u->suggestion));
}

// Scalars are read by the strict reader; a bad one is "topology graph: <key path>: <what is wrong>".
StrictReader graph_reader() {
  return StrictReader([](const std::string& key, const std::string& what, const std::string& hint) {
    throw std::invalid_argument(fmt::format("topology graph: {}: {}", key, with_hint(what, hint)));
  });
}

// The node at `where`.`key`, which must be there.
YAML::Node required(const YAML::Node& n, const char* key, const std::string& where) {
  if (!n[key]) throw std::invalid_argument(fmt::format("topology graph: {} lacks '{}'", where, key));
  return n[key];
}

std::string required_string(const StrictReader& r, const YAML::Node& n, const char* key, const std::string& where) {
  return r.string(required(n, key, where), key_path(where, key));
}

Topology build(const YAML::Node& root) {
  const StrictReader r = graph_reader();
  r.check_unique_keys(root);
  if (!root.IsMap()) throw std::invalid_argument("topology graph: the document must be a map with 'nodes' and 'links'");
  check_keys(root, {"nodes", "links", "nvls", "description"}, "the document");
  if (!root["nodes"] || !root["nodes"].IsSequence() || root["nodes"].size() == 0)
    throw std::invalid_argument("topology graph: 'nodes' must be a non-empty list");
  if (!root["links"] || !root["links"].IsSequence())
    throw std::invalid_argument("topology graph: 'links' must be a list");
  Topology topo;
  std::unordered_map<std::string, VertexId> by_name;
  int i = 0;
  for (const auto& n : root["nodes"]) {
    const std::string where = fmt::format("nodes[{}]", i++);
    if (!n.IsMap()) throw std::invalid_argument(fmt::format("topology graph: {} must be a map", where));
    check_keys(n, {"name", "kind", "node"}, where);
    std::string name = required_string(r, n, "name", where);
    const VertexKind kind = parse_vertex_kind(required_string(r, n, "kind", where));
    // A node index names one of at most as many nodes as there are vertices: bounded before
    // anything is sized by it (a huge index would allocate per-node tables of that size).
    const auto max_node = static_cast<std::int64_t>(root["nodes"].size()) - 1;
    const int node = n["node"] ? static_cast<int>(r.int64(n["node"], key_path(where, "node"), 0, max_node)) : -1;
    if (kind == VertexKind::gpu && node < 0)
      throw std::invalid_argument(fmt::format("topology graph: {} ('{}') is a gpu and needs 'node'", where, name));
    if (by_name.count(name)) throw std::invalid_argument(fmt::format("topology graph: duplicate node name '{}'", name));
    by_name[name] = topo.add_vertex(kind, name, node);
  }
  if (topo.num_gpus() == 0) throw std::invalid_argument("topology graph: no node has kind gpu");
  i = 0;
  for (const auto& l : root["links"]) {
    const std::string where = fmt::format("links[{}]", i++);
    if (!l.IsMap()) throw std::invalid_argument(fmt::format("topology graph: {} must be a map", where));
    check_keys(l, {"a", "b", "bandwidth", "latency", "cost"}, where);
    auto end = [&](const char* key) {
      const std::string nm = required_string(r, l, key, where);
      auto it = by_name.find(nm);
      if (it == by_name.end())
        throw std::invalid_argument(fmt::format("topology graph: {}.{} names unknown node '{}'", where, key, nm));
      return it->second;
    };
    const VertexId a = end("a"), b = end("b");
    const BytesPerSecond bw = r.bandwidth(required(l, "bandwidth", where), key_path(where, "bandwidth"));
    const Seconds lat = r.seconds(required(l, "latency", where), key_path(where, "latency"));
    const int cost = l["cost"] ? r.integer(l["cost"], key_path(where, "cost"), 0) : 1;
    if (cost < 1 || cost > 255)
      throw std::invalid_argument(fmt::format("topology graph: {}.cost must be 1..255, got {}", where, cost));
    try {
      topo.connect(a, b, bw, lat, static_cast<std::uint8_t>(cost));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("topology graph: {}: {}", where, e.what()));
    }
  }
  // Every GPU must reach every other: links are full duplex, so reaching all GPUs
  // from GPU 0 suffices.
  std::vector<std::uint32_t> begin(topo.num_vertices() + 1, 0), next(topo.num_links());
  for (const Link& l : topo.links()) ++begin[l.src + 1];
  for (std::size_t v = 0; v < topo.num_vertices(); ++v) begin[v + 1] += begin[v];
  std::vector<std::uint32_t> fill(begin.begin(), begin.end() - 1);
  for (const Link& l : topo.links()) next[fill[l.src]++] = l.dst;
  std::vector<char> seen(topo.num_vertices(), 0);
  std::vector<VertexId> queue{topo.gpu(0)};
  seen[topo.gpu(0)] = 1;
  for (std::size_t i = 0; i < queue.size(); ++i)
    for (std::uint32_t e = begin[queue[i]]; e < begin[queue[i] + 1]; ++e)
      if (!seen[next[e]]) {
        seen[next[e]] = 1;
        queue.push_back(next[e]);
      }
  for (VertexId g : topo.gpus())
    if (!seen[g])
      throw std::invalid_argument(
          fmt::format("topology graph: gpu '{}' cannot be reached from '{}'", topo.name(g), topo.name(topo.gpu(0))));
  if (root["nvls"]) topo.set_nvls(r.boolean(root["nvls"], "nvls"));
  topo.set_description(root["description"]
                           ? r.string(root["description"], "description")
                           : fmt::format("user graph: {} vertices, {} GPUs", topo.num_vertices(), topo.num_gpus()));
  return topo;
}

}  // namespace

Topology build_graph_from_yaml_text(std::string_view yaml_text) {
  YAML::Node root;
  try {
    check_yaml_depth(yaml_text, "", "topology graph");
    root = YAML::Load(std::string(yaml_text));
  } catch (const InputError& e) {
    throw std::invalid_argument(fmt::format("topology graph: {}", e.what()));
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(fmt::format("topology graph: YAML error: {}", e.what()));
  }
  try {
    return build(root);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(fmt::format("topology graph: {}", e.what()));
  }
}

Topology build_graph_from_yaml_file(const std::string& path) {
  YAML::Node root;
  try {
    const std::string text = read_input_file(path, "topology graph", kMaxGraphBytes);
    check_yaml_depth(text, path, "topology graph");
    root = YAML::Load(text);
  } catch (const InputError& e) {  // this function's contract: std::invalid_argument naming the file
    throw std::invalid_argument(e.what());
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(fmt::format("topology graph '{}': {}", path, e.what()));
  }
  try {
    return build(root);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", path, e.what()));
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(fmt::format("{}: topology graph: {}", path, e.what()));
  }
}

}  // namespace ptsim::hw::net
