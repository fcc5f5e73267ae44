// A ranked plan written back as a runnable scenario (search.h: plan_scenario_yaml).
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "hw/errors.h"
#include "sim/io/scenario_file.h"
#include "sim/tools/search.h"

namespace ptsim::sim {

std::string plan_scenario_yaml(const std::string& scenario_text, const std::string& file,
                               const std::vector<std::string>& sets, const RankedPlan& p) {
  YAML::Node root = scenario_yaml(scenario_text, file, sets);
  const auto& q = p.plan.par;
  root["cluster"]["num_gpus"] = p.num_gpus;
  YAML::Node par = root["parallel"];
  if (!par.IsMap()) {
    root["parallel"] = YAML::Node(YAML::NodeType::Map);
    par = root["parallel"];
  }
  par["tensor_parallel"] = q.tp;
  par["pipeline_parallel"] = q.pp;
  par["context_parallel"] = q.cp;
  par["expert_parallel"] = q.ep;
  if (q.expert_tp() != q.tp)
    par["expert_tensor_parallel"] = q.expert_tp();
  else
    par.remove("expert_tensor_parallel");
  par["data_parallel"] = q.dp;
  par["virtual_pipeline_stages"] = q.vpp;
  par["pipeline_schedule"] = std::string(models::to_string(q.schedule));
  par["sequence_parallel"] = q.sequence_parallel;
  par["zero_stage"] = q.zero_stage;
  par["recompute"] = std::string(models::to_string(q.recompute));
  par.remove("pipeline_layers");  // the search splits the layers evenly
  root["training"]["micro_batch_size"] = q.micro_batch_size;

  YAML::Emitter out;
  out << root;
  const std::string text =
      fmt::format("# Plan #{} of `ptsim search {}`: {:.0f} tokens/s, iteration {:.6g} s (predicted).\n{}\n", p.rank,
                  file, p.tokens_per_s, p.iteration_time_s, out.c_str());
  // The written scenario must describe exactly the ranked plan.
  const Scenario back = parse_scenario(text, "<emitted>");
  const auto& b = back.plan.par;
  PTSIM_CHECK(back.cluster.num_gpus == p.num_gpus && b.tp == q.tp && b.pp == q.pp && b.cp == q.cp && b.ep == q.ep &&
                  b.expert_tp() == q.expert_tp() && b.dp == q.dp && b.vpp == q.vpp && b.schedule == q.schedule &&
                  b.micro_batch_size == q.micro_batch_size && b.num_microbatches == q.num_microbatches &&
                  b.zero_stage == q.zero_stage && b.recompute == q.recompute &&
                  b.sequence_parallel == q.sequence_parallel,
              "search: the emitted scenario of plan #{} does not read back as that plan", p.rank);
  return text;
}

}  // namespace ptsim::sim
