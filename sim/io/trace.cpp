#include "sim/io/trace.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

namespace ptsim::sim {

// Trace Event Format (the JSON Chrome and Perfetto load): complete events
// ("ph":"X") with microsecond timestamps, one process per rank shown, one thread
// per stream. Written directly, event by event: a 1,024-GPU iteration has
// millions of spans, and a JSON tree of them would need gigabytes.
std::string trace_json(const Simulation& sim, const Layout& layout) {
  std::vector<std::string> names;  // JSON-escaped labels, once each
  names.reserve(sim.program.labels.size());
  for (const auto& l : sim.program.labels) names.push_back(nlohmann::json(l).dump());
  std::set<std::pair<int, int>> threads;
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out.reserve(sim.spans.size() * 80 + 4096);
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const auto& s : sim.spans) {
    threads.insert({s.rank, s.stream});
    sep();
    fmt::format_to(std::back_inserter(out), R"({{"name":{},"ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f}}})",
                   names[s.label], s.rank, s.stream, static_cast<double>(s.start) / 1e3,
                   static_cast<double>(s.end - s.start) / 1e3);
  }
  std::set<int> processes;
  for (const auto& [rank, stream] : threads) processes.insert(rank);
  for (int rank : processes) {
    const Coords c = layout.coords(rank);
    sep();
    fmt::format_to(
        std::back_inserter(out),
        R"x({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {} (pp {}, dp {}, cp {}, tp {})"}}}})x",
        rank, rank, c.pp, c.dp, c.cp, c.tp);
    sep();
    fmt::format_to(std::back_inserter(out),
                   R"({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})", rank, rank);
  }
  for (const auto& [rank, stream] : threads) {
    const std::string name = stream == 0 ? "compute"
                             : stream - 1 == kGatherChannel
                                 ? "dp param gather"
                                 : std::string(to_string(static_cast<Dim>(stream - 1))) + " comm";
    sep();
    fmt::format_to(std::back_inserter(out),
                   R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})", rank, stream, name);
  }
  // Network summary lines (busiest links and their utilisation) travel with the
  // trace, shown by ui.perfetto.dev under "Info and stats" → metadata.
  const nlohmann::json other = {{"scenario", sim.result.scenario},
                                {"iteration_time_s", sim.result.iteration_time_s},
                                {"network", sim.result.notes}};
  out += "\n],\"otherData\":" + other.dump() + "}\n";
  return out;
}

}  // namespace ptsim::sim
