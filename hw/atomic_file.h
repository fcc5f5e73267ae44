// Writing a file so that nothing the user had is lost half-way: the text goes to a
// temporary file in the same folder, then rename(2) replaces the target, so a
// crash or Ctrl-C leaves either the old file or the new one, never a mix.
#pragma once
#include <string>

namespace ptsim::hw {

// Throws std::runtime_error naming the path when the folder is not writable.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace ptsim::hw
