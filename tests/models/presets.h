// The model presets of models/model_spec.h by name, for tests (which only name presets that exist).
#pragma once

#include "models/model_spec.h"

namespace ptsim::models {

inline ModelSpec preset(const char* name) { return *find_preset(name); }

}  // namespace ptsim::models
