// Bounds on YAML input (README "Reliability"), checked before yaml-cpp sees the text:
// yaml-cpp builds a node tree of about 70-130 bytes of memory per byte of YAML and
// recurses once per nesting level, so a 5 MB scenario took 1.4 GB and seconds to report an
// unknown key, and 10,000 '[' ended in its "bad file". Every YAML reader (scenario, --set
// value, HF config, topology graph, cost table, published runs) calls check_yaml_depth and
// reads its file with a size cap from here.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace ptsim::hw {

// Size caps per kind of file; the largest real inputs are far below them: scenarios are
// about 1 KB, HF configs 1-5 KB, cost tables 10-100 KB; a user topology graph of 65,536 GPUs
// (one line per GPU, switch and link) is 8.4 MB and parses in about 3 s and 0.6 GB.
inline constexpr std::size_t kMaxScenarioBytes = std::size_t{1} << 20;       // 1 MiB
inline constexpr std::size_t kMaxHfConfigBytes = std::size_t{1} << 20;       // 1 MiB
inline constexpr std::size_t kMaxPublishedRunsBytes = std::size_t{1} << 20;  // 1 MiB
inline constexpr std::size_t kMaxCostTableBytes = std::size_t{4} << 20;      // 4 MiB
inline constexpr std::size_t kMaxGraphBytes = std::size_t{16} << 20;         // 16 MiB

// Nesting levels of block and flow collections (ptsim's own files use at most 4).
inline constexpr int kMaxYamlDepth = 64;

struct YamlDepth {
  int depth = 0;  // the deepest nesting found, the document being 1 (an upper estimate: counts every open collection)
  int line = 0;   // 1-based line where it was first reached
};
// The nesting depth of YAML (or JSON) `text` by a linear scan that needs no parse: block
// indentation levels, "- " and "? " entries and open '[' / '{' outside quotes and comments.
YamlDepth yaml_depth(std::string_view text);

// Throws ptsim::InputError naming `file` (and `key` when the text is one key's value) when
// `text` nests deeper than kMaxYamlDepth; `what` names the kind of file ("scenario file").
void check_yaml_depth(std::string_view text, const std::string& file, const std::string& what,
                      const std::string& key = {});

}  // namespace ptsim::hw
