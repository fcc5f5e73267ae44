#include "sim/core/prediction_band.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "sim/core/scenario.h"

namespace ptsim::embedded {
extern const char prediction_bands_json[];
}

namespace ptsim::sim {

namespace {

double round1(double v) {
  const double r = std::round(v * 10.0) / 10.0;
  return r == 0.0 ? 0.0 : r;  // no "-0.0"
}

std::string gpu_generation(const std::string& name) {
  if (name.rfind("a100", 0) == 0) return "A100";
  if (name.rfind("h100", 0) == 0) return "H100";
  return name;
}

}  // namespace

std::string regime_of(const Scenario& s) {
  const bool zero3 = s.plan.par.zero_stage == 3;
  std::string family;
  switch (s.framework.framework) {
    case Framework::megatron_core:
    case Framework::megatron_lm:
      family = "megatron";
      break;
    // ZeRO-3 of DeepSpeed releases before 0.6 gathers with the host blocked
    // (framework_profile.h): runs of those releases say nothing of later ones.
    case Framework::deepspeed:
      family = zero3 && s.framework.gather_blocks_host ? "deepspeed < 0.6" : "deepspeed";
      break;
    case Framework::fsdp:
      family = "fsdp";
      break;
  }
  const bool large = s.plan.world_size() >= 256;
  // A mixed cluster (cluster.gpus) is its own regime, e.g. "A100+H100": no validated run mixes types.
  std::string generation = gpu_generation(s.cluster.gpu.name);
  for (const auto& g : s.cluster.gpu_groups) {
    const std::string gen = gpu_generation(g.gpu.name);
    if (generation.find(gen) == std::string::npos) generation += "+" + gen;
  }
  return fmt::format("{}, {}, {}, {}", family, zero3 ? "ZeRO-3" : "ZeRO-0..2", large ? ">=256 GPUs" : "<256 GPUs",
                     generation);
}

std::vector<PredictionBand> bands_from_residuals(const std::vector<Residual>& residuals) {
  std::map<std::string, PredictionBand> by;
  for (const auto& r : residuals) {
    auto [it, fresh] = by.try_emplace(r.regime);
    auto& b = it->second;
    if (fresh) {
      b.regime = r.regime;
      b.low = b.high = r.deviation_pct;
    }
    b.low = std::min(b.low, r.deviation_pct);
    b.high = std::max(b.high, r.deviation_pct);
    ++b.runs;
  }
  std::vector<PredictionBand> out;
  for (auto& [k, b] : by) {
    b.low = round1(b.low);
    b.high = round1(b.high);
    out.push_back(b);
  }
  return out;
}

nlohmann::json bands_to_json(const std::vector<PredictionBand>& bands) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& b : bands)
    list.push_back({{"regime", b.regime}, {"runs", b.runs}, {"low", b.low}, {"high", b.high}});
  return {{"generated_by", "ptsim validate --write-bands (scenarios/reference)"},
          {"definition",
           "per regime (framework family, ZeRO-3 or not, <256 or >=256 GPUs, GPU generation): the smallest "
           "(low) and largest (high) deviation, in percent, of the published throughput from ptsim's "
           "prediction over the validated runs of that regime (a time residual, out of memory in ptsim or not)"},
          {"regimes", list}};
}

std::string bands_json_text(const std::vector<PredictionBand>& bands) { return bands_to_json(bands).dump(2) + "\n"; }

std::vector<PredictionBand> parse_bands(const std::string& text, const std::string& what) {
  std::vector<PredictionBand> out;
  try {
    const auto j = nlohmann::json::parse(text);
    for (const auto& e : j.at("regimes")) {
      PredictionBand b;
      b.regime = e.at("regime").get<std::string>();
      b.runs = e.at("runs").get<int>();
      b.low = e.at("low").get<double>();
      b.high = e.at("high").get<double>();
      if (b.runs <= 0 || b.low > b.high)
        throw std::invalid_argument(fmt::format("regime '{}': runs must be > 0 and low <= high", b.regime));
      out.push_back(b);
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(fmt::format("{}: not a prediction band table: {}", what, e.what()));
  }
  return out;
}

const std::vector<PredictionBand>& committed_bands() {
  static const std::vector<PredictionBand> bands =
      parse_bands(ptsim::embedded::prediction_bands_json, "scenarios/reference/prediction_bands.json");
  return bands;
}

std::optional<PredictionBand> find_band(const Scenario& s) {
  const auto regime = regime_of(s);
  for (const auto& b : committed_bands())
    if (b.regime == regime) return b;
  return std::nullopt;
}

std::string band_text(const std::optional<PredictionBand>& b, const std::string& regime) {
  if (!b) return fmt::format("none: outside every validated regime ({})", regime);
  return fmt::format("{:+.1f} % to {:+.1f} % ({}; {} run{})", b->low, b->high, b->regime, b->runs,
                     b->runs == 1 ? "" : "s");
}

}  // namespace ptsim::sim
