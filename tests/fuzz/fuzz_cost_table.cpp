// libFuzzer target: the cost-table parser (hw::parse_cost_table); a table that parses must
// also survive a round trip through cost_table_to_yaml.
#include "hw/cost_table.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = ptsim::fuzz::as_text(data, size);
  ptsim::fuzz::only_documented_errors([&] {
    const auto table = ptsim::hw::parse_cost_table(text, "<fuzz>");
    (void)ptsim::hw::cost_table_to_yaml(table);
  });
  return 0;
}
