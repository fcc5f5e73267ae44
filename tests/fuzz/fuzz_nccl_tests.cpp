// libFuzzer target: nccl-tests log import (calibration::parse_nccl_tests). The source name
// carries no op, so the op must come from the log's content.
#include "calibration/nccl_tests_import.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = ptsim::fuzz::as_text(data, size);
  ptsim::fuzz::only_documented_errors([&] { (void)ptsim::calibration::parse_nccl_tests(text, "<fuzz>.log"); });
  return 0;
}
