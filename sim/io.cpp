#include "sim/io.h"

#include <iostream>

#include "hw/atomic_file.h"

namespace ptsim::sim {

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text << std::flush;
    return;
  }
  hw::write_file_atomically(path, text);
}

}  // namespace ptsim::sim
