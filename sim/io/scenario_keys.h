// The scenario key table (README "Scenario keys", docs/scenario-keys.md): every key the
// scenario reader accepts, with its unit, default, meaning and the framework's own name for
// it. The reader's allowed-key lists (check_keys) are taken from this table, and
// `ptsim list keys --markdown` prints docs/scenario-keys.md from it, so the reference cannot
// drift from the parser (a ctest compares them).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ptsim::sim {

struct ScenarioKey {
  std::string_view path;          // "cluster.inter_node.nic_bandwidth"; a section is a row too
  std::string_view unit;          // "Gb/s" (written with the number, e.g. "400 Gb/s"), "" = none
  std::string_view default_text;  // "" = required or none
  std::string_view description;
  std::string_view megatron;   // Megatron-LM argument, "" = none
  std::string_view deepspeed;  // DeepSpeed JSON config key, "" = none
};

// Every key, in document order (a section before its keys).
const std::vector<ScenarioKey>& scenario_keys();
// The names directly under `section` ("" = the top level, "cluster.inter_node", ...): what
// the reader allows there. Throws std::logic_error for a section that is not in the table.
std::vector<std::string> keys_of(std::string_view section);
// `ptsim list keys`: aligned text; `ptsim list keys --markdown`: docs/scenario-keys.md.
std::string keys_text();
std::string keys_markdown();

}  // namespace ptsim::sim
