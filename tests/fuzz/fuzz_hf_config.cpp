// libFuzzer target: HuggingFace config.json import (models::from_hf_config). The parser
// takes a path, so each input is written to a private temporary file first.
#include <unistd.h>

#include <fstream>

#include "models/model_spec.h"
#include "tests/fuzz/fuzz_common.h"

namespace {
const std::string& scratch_path() {
  static const std::string path = [] {
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp && *tmp ? tmp : "/tmp") + "/ptsim-fuzz-hf-" + std::to_string(getpid()) + ".json";
  }();
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream out(scratch_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) std::abort();
  }
  ptsim::fuzz::only_documented_errors([&] { (void)ptsim::models::from_hf_config(scratch_path()); });
  return 0;
}
