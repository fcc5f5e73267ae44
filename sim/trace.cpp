#include "sim/trace.h"

#include <nlohmann/json.hpp>
#include <set>

namespace ptsim::sim {

std::string trace_json(const Simulation& sim, const Layout& layout) {
  nlohmann::json events = nlohmann::json::array();
  std::set<std::pair<int, int>> threads;
  std::set<int> processes;
  for (const auto& s : sim.spans) {
    processes.insert(s.rank);
    threads.insert({s.rank, s.stream});
    // Trace Event Format: complete events ("ph":"X") with microsecond timestamps.
    events.push_back({{"name", sim.program.labels[s.label]},
                      {"ph", "X"},
                      {"pid", s.rank},
                      {"tid", s.stream},
                      {"ts", static_cast<double>(s.start) / 1e3},
                      {"dur", static_cast<double>(s.end - s.start) / 1e3}});
  }
  for (int rank : processes) {
    const Coords c = layout.coords(rank);
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank},
                      {"args", {{"name", "rank " + std::to_string(rank) + " (pp " + std::to_string(c.pp) + ", dp " +
                                             std::to_string(c.dp) + ", tp " + std::to_string(c.tp) + ")"}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
  }
  for (const auto& [rank, stream] : threads) {
    const std::string name = stream == 0                    ? "compute"
                             : stream - 1 == kGatherChannel ? "dp param gather"
                                                            : std::string(to_string(static_cast<Dim>(stream - 1))) + " comm";
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", stream}, {"args", {{"name", name}}}});
  }
  nlohmann::json doc;
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ms";
  // Network summary lines (busiest links and their utilisation) travel with the
  // trace, shown by ui.perfetto.dev under "Info and stats" → metadata.
  doc["otherData"] = {{"scenario", sim.result.scenario},
                      {"iteration_time_s", sim.result.iteration_time_s},
                      {"network", sim.result.notes}};
  return doc.dump();
}

}  // namespace ptsim::sim
