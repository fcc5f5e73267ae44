// libFuzzer target: the scenario file parser and validator (sim::parse_scenario).
#include "sim/io/scenario_file.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = ptsim::fuzz::as_text(data, size);
  ptsim::fuzz::only_documented_errors([&] { (void)ptsim::sim::parse_scenario(text, "<fuzz>"); });
  return 0;
}
