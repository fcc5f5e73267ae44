// The model presets of models/model_spec.h by name, for tests (which only name presets that exist).
#pragma once

#include "models/model_spec.h"
#include "models/parallelism.h"

namespace ptsim::models {

inline ModelSpec preset(const char* name) { return *find_preset(name); }

// Mixtral's plan of the expert tensor-parallel tests: tp 2 with sequence parallelism, ep 8,
// dp 8; experts split over tp (etp unset) unless the test sets p.etp.
inline Parallelism moe_tp2_ep8() {
  Parallelism p;
  p.tp = 2;
  p.ep = 8;
  p.dp = 8;
  p.sequence_parallel = true;
  return p;
}

}  // namespace ptsim::models
