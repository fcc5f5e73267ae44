// What the program-builder tests share: a scenario built into its program on the
// synthetic costs of tests/sim/test_scenarios.h, and the collectives of one kind
// counted in an instruction list.
#pragma once
#include <string>
#include <vector>

#include "sim/core/program_builder.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim::testing {

struct Built {
  Scenario s;
  Program p;
};
inline Built build(const std::string& text) {
  Built b{parse_scenario(text, "test"), {}};
  b.p = build_program(b.s, FlopsOnlyCost(b.s.cluster.gpu));
  return b;
}

// Collectives (blocking or launched) of one dimension and kind in `v`: how many, and
// their buffer sizes S summed.
struct Tally {
  int count = 0;
  double bytes = 0;
};
inline Tally tally(const std::vector<Instr>& v, Dim d, CollectiveKind c) {
  Tally t;
  for (const Instr& in : v)
    if ((in.kind == InstrKind::collective || in.kind == InstrKind::launch) && in.dim == d && in.coll == c) {
      ++t.count;
      t.bytes += in.bytes;
    }
  return t;
}

// The forward or backward instructions of every chunk of a stage, in one list.
inline std::vector<Instr> phase(const StageProgram& sp, bool backward) {
  std::vector<Instr> out;
  for (const auto& c : sp.chunks) {
    const auto& v = backward ? c.backward : c.forward;
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace ptsim::sim::testing
