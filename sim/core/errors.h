// The simulator's names for the error kinds of hw/errors.h: a scenario problem is an
// InputError whose file is the scenario and whose key is the YAML key path.
#pragma once
#include "hw/errors.h"

namespace ptsim::sim {

using ScenarioError = ::ptsim::InputError;
using ResourceError = ::ptsim::ResourceError;

}  // namespace ptsim::sim
