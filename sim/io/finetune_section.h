// training.finetune: LoRA / QLoRA fine-tuning (models/finetune.h), read into
// s.plan.par.finetune and checked against the model and plan.
#pragma once
#include <yaml-cpp/yaml.h>

#include "hw/strict_yaml.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// Reads `node` (training.finetune) into s.plan.par.finetune; s.model and the
// parallel section are read. Bad input fails through `r` naming the key.
void read_finetune(const hw::StrictReader& r, const YAML::Node& node, Scenario& s);

}  // namespace ptsim::sim
