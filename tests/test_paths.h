// The one way tests find files of the repository (scenarios, tables, test data): a path
// relative to the source tree, whatever the working directory.
#pragma once
#include <string>

#include "ptsim/config.h"

namespace ptsim::test {

inline std::string repo_path(const std::string& relative) { return std::string(PTSIM_SOURCE_DIR) + "/" + relative; }

}  // namespace ptsim::test
