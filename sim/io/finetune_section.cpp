#include "sim/io/finetune_section.h"
#include "sim/io/scenario_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace ptsim::sim {
namespace {

const std::vector<std::string> kFinetuneKeys = keys_of("training.finetune");
// LoRA ranks in use are 1..256 (Hu et al. 2021 §7.2 try 1..64; QLoRA uses 64);
// beyond 65,536 a rank is surely a typo.
constexpr int kMaxLoraRank = 65'536;
constexpr double kMaxLoraAlpha = 1e6;

struct TargetName {
  models::LoraTarget bit;
  const char* name;
};
constexpr TargetName kTargetNames[] = {
    {models::kLoraQkv, "qkv"}, {models::kLoraProj, "proj"}, {models::kLoraFc1, "fc1"}, {models::kLoraFc2, "fc2"}};

}  // namespace

void read_finetune(const hw::StrictReader& r, const YAML::Node& node, Scenario& s) {
  if (!node.IsMap())
    r.fail("training.finetune", "expected a section, e.g. {method: lora, rank: 16, targets: [qkv, proj, fc1, fc2]}");
  r.check_keys(node, "training.finetune", kFinetuneKeys);
  models::FinetuneSpec ft;
  if (!node["method"]) r.fail("training.finetune.method", "missing", "lora or qlora");
  const std::string method = r.choice(node["method"], "training.finetune.method", {"lora", "qlora"});
  ft.method = method == "lora" ? models::FinetuneMethod::lora : models::FinetuneMethod::qlora;
  // QLoRA is LoRA over an NF4 base (Dettmers et al. 2023 §3); LoRA keeps the 16-bit base.
  ft.base_precision = ft.method == models::FinetuneMethod::qlora ? models::BasePrecision::nf4
                                                                 : models::BasePrecision::bf16;
  if (node["base_precision"]) {
    const std::string b = r.choice(node["base_precision"], "training.finetune.base_precision", {"bf16", "nf4"});
    const auto want = b == "nf4" ? models::BasePrecision::nf4 : models::BasePrecision::bf16;
    if (want != ft.base_precision)
      r.fail("training.finetune.base_precision",
             fmt::format("{} does not go with method {}", b, method),
             "method lora keeps a bf16 base, method qlora an nf4 base; leave base_precision out");
  }
  if (node["rank"]) {
    const std::int64_t most = std::min<std::int64_t>(kMaxLoraRank, s.model.hidden_size);
    ft.rank = static_cast<int>(r.int64(node["rank"], "training.finetune.rank", 1, most));
  }
  ft.alpha = 2.0 * ft.rank;  // the common default (peft examples use alpha = 2r)
  if (node["alpha"]) {
    ft.alpha = r.positive(node["alpha"], "training.finetune.alpha");
    if (ft.alpha > kMaxLoraAlpha)
      r.fail("training.finetune.alpha", fmt::format("{:g} is out of range", ft.alpha), "at most 1e6");
  }
  if (const auto t = node["targets"]) {
    if (!t.IsSequence() || t.size() == 0)
      r.fail("training.finetune.targets", "expected a non-empty list of qkv, proj, fc1, fc2");
    ft.targets = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
      const std::string key = hw::item_path("training.finetune.targets", i);
      const std::string name = r.choice(t[i], key, {"qkv", "proj", "fc1", "fc2"});
      for (const auto& tn : kTargetNames) {
        if (name != tn.name) continue;
        if (ft.targets & tn.bit) r.fail(key, fmt::format("'{}' is listed twice", name));
        ft.targets |= tn.bit;
      }
    }
  }
  const auto& par = s.plan.par;
  if (ft.nf4() && par.zero_stage == 3)
    r.fail("training.finetune.method", "qlora with parallel.zero_stage 3 is not modelled (NF4 shards)",
           "use zero_stage 0, 1 or 2");
  if (par.offload_params)
    r.fail("training.finetune.method", fmt::format("{} with parallel.offload_params is not modelled", method),
           "the frozen base is small enough to keep on the GPU; set offload_params: false");
  s.plan.par.finetune = ft;
}

}  // namespace ptsim::sim
