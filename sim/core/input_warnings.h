// Warnings about inputs a simulation needs beyond the scenario file (README "Warnings"):
// a calibration table measured on another device or in another precision than the
// scenario's. Those about the scenario's own keys are raised while reading it
// (sim/io/scenario_file.cpp, Scenario::warn).
#pragma once
#include <string>
#include <vector>

#include "hw/cost_table.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// "FILE: cluster.calibration: ..." lines, empty when the table fits the scenario: measured
// on the scenario's GPU generation (the device or table name names it, e.g. "H100" for
// h100-sxm; a CPU-backend table never fits) and holding GEMM costs in the scenario's
// precision. A table of collectives only (nccl-tests import) is not checked for device.
std::vector<std::string> calibration_warnings(const Scenario& s, const hw::CostTable& table);

}  // namespace ptsim::sim
