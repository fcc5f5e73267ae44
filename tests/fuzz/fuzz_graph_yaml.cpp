// libFuzzer target: a user topology graph in YAML (hw::net::build_graph_from_yaml_text).
#include "hw/net/graph_yaml.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = ptsim::fuzz::as_text(data, size);
  ptsim::fuzz::only_documented_errors([&] { (void)ptsim::hw::net::build_graph_from_yaml_text(text); });
  return 0;
}
