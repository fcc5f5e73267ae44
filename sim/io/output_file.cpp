#include "sim/io/output_file.h"

#include <iostream>
#include <stdexcept>

#include "hw/atomic_file.h"

namespace ptsim::sim {

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text << std::flush;
    return;
  }
  try {
    hw::write_file_atomically(path, text);
  } catch (const std::runtime_error& e) {
    // An output path the user gave that cannot be written is bad input (exit 2).
    throw std::invalid_argument(e.what());
  }
}

}  // namespace ptsim::sim
