// training.framework and the framework's own section (training.deepspeed,
// training.fsdp, training.megatron): the profile the program builder follows
// (sim/core/framework_profile.h), each key under the framework's own name.
#pragma once
#include <yaml-cpp/yaml.h>

#include "hw/strict_yaml.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// Reads the framework of `training` (s.plan and s.model read) into s.framework,
// applies its overlap defaults to s.plan, and, when the layers do not divide over
// the pipeline stages and no parallel.pipeline_layers is given, the framework's
// default partition into s.plan.par.pipeline_layers.
void read_framework(const hw::StrictReader& r, const YAML::Node& training, const YAML::Node& parallel, Scenario& s);

}  // namespace ptsim::sim
