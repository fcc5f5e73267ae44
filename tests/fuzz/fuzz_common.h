// Shared by the libFuzzer targets (tests/fuzz/, scripts/fuzz.sh): a parser may reject
// its input only with a documented error (hw/errors.h: InputError, which sim::ScenarioError
// is; std::invalid_argument). Anything else — another exception, a crash, a leak, a
// sanitizer report, a timeout — is a finding: abort() so that libFuzzer keeps the input.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "hw/errors.h"

namespace ptsim::fuzz {

inline std::string as_text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

template <class F>
void only_documented_errors(F&& parse) {
  try {
    parse();
  } catch (const ::ptsim::InputError&) {
  } catch (const std::invalid_argument&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "undocumented exception (%s): %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "undocumented exception of a non-std type\n");
    std::abort();
  }
}

}  // namespace ptsim::fuzz
