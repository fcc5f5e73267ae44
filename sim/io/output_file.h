// Output files are written atomically: the text goes to a temporary file in the
// same folder, then rename(2) replaces the target, so a crash or Ctrl-C never
// leaves a half-written result where the user's file was.
#pragma once
#include <string>

namespace ptsim::sim {

// Writes `text` to `path` ("-" = stdout), atomically. Throws std::invalid_argument
// naming the path when it cannot be written.
void write_output(const std::string& path, const std::string& text);

}  // namespace ptsim::sim
