#include "sim/core/input_warnings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace ptsim::sim {
namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

// The generation's marketing name of a catalog GPU: "a100-sxm-80gb" -> "A100".
std::string generation(const std::string& gpu) { return upper(gpu.substr(0, gpu.find('-'))); }

}  // namespace

std::vector<std::string> calibration_warnings(const Scenario& s, const hw::CostTable& t) {
  std::vector<std::string> out;
  const std::string key = s.file + ": cluster.calibration: ";
  const std::string gen = generation(s.cluster.gpu.name);
  const bool measures_kernels = !t.gemm.empty() || !t.gemm_fits.empty() || !t.attention.empty() ||
                                !t.attention_fits.empty() || !t.membw.empty() || t.membw_fit;
  if (t.backend == "cpu") {
    out.push_back(key +
                  fmt::format("table '{}' was measured by the CPU backend on '{}', not on the scenario's {}: its times "
                              "are not this GPU's",
                              t.name, t.device.name, s.cluster.gpu.name));
  } else if (measures_kernels) {
    const bool named =
        upper(t.device.name).find(gen) != std::string::npos || upper(t.name).find(gen) != std::string::npos;
    if (!named)
      out.push_back(key + fmt::format("table '{}' was measured on '{}', not on the scenario's {} (neither its device "
                                      "nor its name says {})",
                                      t.name, t.device.name.empty() ? "an unnamed device" : t.device.name,
                                      s.cluster.gpu.name, gen));
  }
  std::set<std::string> dtypes;
  for (const auto& g : t.gemm) dtypes.insert(g.dtype);
  for (const auto& f : t.gemm_fits) dtypes.insert(f.dtype);
  const std::string precision(models::to_string(s.plan.par.precision));
  if (!dtypes.empty() && !dtypes.contains(precision)) {
    std::string have;
    for (const auto& d : dtypes) have += (have.empty() ? "" : ", ") + d;
    out.push_back(key + fmt::format("table '{}' has GEMM costs in {} only, not the scenario's {} "
                                    "(training.precision): those GEMMs use the datasheet roofline",
                                    t.name, have, precision));
  }
  return out;
}

}  // namespace ptsim::sim
