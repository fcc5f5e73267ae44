#include "sim/io/output_file.h"

#include <cerrno>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "hw/atomic_file.h"
#include "hw/errors.h"

namespace ptsim::sim {

void write_output(const std::string& path, const std::string& text) {
  if (path != "-") return hw::write_file_atomically(path, text);
  std::cout << text << std::flush;
  if (!std::cout) throw InputError("<stdout>", "", fmt::format("cannot write the output: {}", std::strerror(errno)));
}

}  // namespace ptsim::sim
