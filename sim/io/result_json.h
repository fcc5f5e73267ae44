// The JSON document (CONTRACT §3) and the text summary of a Result.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/core/result.h"

namespace ptsim::sim {

// CONTRACT §3 "plan" object (also in the search output).
// A figure that may be absent: its value, or null (CONTRACT §3 writes absent figures as null).
nlohmann::json json_or_null(const std::optional<double>& v);

nlohmann::json plan_to_json(const Plan& p);

// The "prediction_band" object of the result and of each searched plan: {low, high, regime, runs}, or null.
nlohmann::json prediction_band_json(const std::optional<PredictionBand>& b);

// The "time_to_train" object of the result (and of `ptsim compare`); its summary lines.
nlohmann::json time_to_train_json(const TimeToTrain& t);
std::string time_to_train_text(const TimeToTrain& t);

nlohmann::json to_json(const Result& r);
// Deterministic text: everything but sim_wall_time_s is a function of the input.
std::string to_json_text(const Result& r);
// The summary printed by `ptsim run` (stdout); warnings are not in it.
std::string summary_text(const Result& r);
// One "warning: ..." line per entry (Result::warnings, Scenario::warnings): what `ptsim run`,
// `memory` and `search` print on stderr.
std::string warnings_text(const std::vector<std::string>& warnings);
// "70.55 B parameters, sequence 8192 (preset llama3-70b)": the resolved model in one line.
std::string model_text(const ResolvedModel& m);

}  // namespace ptsim::sim
