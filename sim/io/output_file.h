// Where a command's outputs go: "-" is standard output; any other path goes through
// hw/atomic_file.h (regular files replaced atomically, devices and pipes written through,
// symlinks followed).
#pragma once
#include <string>

namespace ptsim::sim {

// Writes `text` to `path` ("-" = stdout). Throws ptsim::InputError (exit 2) naming the
// path and the system's reason when it cannot be written.
void write_output(const std::string& path, const std::string& text);

}  // namespace ptsim::sim
