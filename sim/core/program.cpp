#include "sim/core/program.h"

namespace ptsim::sim {

const char* to_string(Dim d) {
  static const char* names[] = {"tp", "pp", "dp", "cp", "ep", "mp"};
  return names[static_cast<int>(d)];
}

const char* to_string(Coll c) {
  static const char* names[] = {"all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "send/recv"};
  return names[static_cast<int>(c)];
}

}  // namespace ptsim::sim
