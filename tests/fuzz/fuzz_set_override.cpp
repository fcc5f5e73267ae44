// libFuzzer target: the `--set KEY=VALUE` override parser. Each input line is one --set
// argument, applied (through sim::parse_scenario, as the CLI does) to a small valid
// scenario, then the result is validated.
#include <sstream>
#include <vector>

#include "sim/io/scenario_file.h"
#include "tests/fuzz/fuzz_common.h"

namespace {
const char* const kBase = R"(name: fuzz-base
model:
  num_layers: 4
  hidden_size: 512
  num_attention_heads: 8
  ffn_hidden_size: 2048
  vocab_size: 32000
  seq_length: 1024
cluster:
  gpu: a100-sxm-80gb
  num_gpus: 16
  gpus_per_node: 8
  intra_node: { fabric: nvswitch, bandwidth: "300 GB/s", latency: "1 us" }
  inter_node:
    topology: fat-tree
    nics_per_node: 8
    nic_bandwidth: "200 Gb/s"
    latency: "2 us"
parallel:
  tensor_parallel: 2
  pipeline_parallel: 2
training:
  global_batch_size: 32
  micro_batch_size: 1
)";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> overrides;
  std::stringstream in(ptsim::fuzz::as_text(data, size));
  for (std::string line; std::getline(in, line);) overrides.push_back(line);
  ptsim::fuzz::only_documented_errors([&] { (void)ptsim::sim::parse_scenario(kBase, "<fuzz>", overrides); });
  return 0;
}
