#include "sim/io/scenario_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <sstream>

#include "hw/input_file.h"
#include "hw/net/collectives.h"
#include "hw/net/nccl_tuning.h"
#include "hw/strict_yaml.h"
#include "hw/yaml_limits.h"
#include "models/memory.h"
#include "sim/core/errors.h"
#include "sim/core/mixed_cluster.h"
#include "sim/core/schedule.h"
#include "sim/io/finetune_section.h"
#include "sim/io/framework_section.h"
#include "sim/io/gpus_section.h"
#include "sim/io/import_args.h"
#include "sim/io/reliability_section.h"
#include "sim/io/scenario_keys.h"
#include "sim/io/slow_section.h"

namespace ptsim::sim {
namespace {

// The schema: allowed keys per section (CONTRACT §2), from the key table (scenario_keys.h).
// Unknown keys are errors.
const std::vector<std::string> kTopKeys = keys_of("");
const std::vector<std::string> kModelKeys = keys_of("model");
const std::vector<std::string> kMoeKeys = keys_of("model.moe");
const std::vector<std::string> kClusterKeys = keys_of("cluster");
const std::vector<std::string> kIntraKeys = keys_of("cluster.intra_node");
const std::vector<std::string> kInterKeys = keys_of("cluster.inter_node");
constexpr models::Spelling<hw::net::Topology::Routing> kRoutingNames[] = {
    {hw::net::Topology::Routing::ecmp, "ecmp"}, {hw::net::Topology::Routing::d_mod_k, "d-mod-k"}};
constexpr models::Spelling<hw::net::CpuVendor> kHostCpuNames[] = {
    {hw::net::CpuVendor::intel, "intel"}, {hw::net::CpuVendor::amd, "amd"}, {hw::net::CpuVendor::arm, "arm"}};
const std::vector<std::string> kCollectiveKindKeys = keys_of("cluster.collectives");
const std::vector<std::string> kParallelKeys = keys_of("parallel");
const std::vector<std::string> kTrainingKeys = keys_of("training");
const std::vector<std::string> kMemoryKeys = keys_of("training.memory");
// Bounds of the time-to-train inputs: beyond them a figure is surely a typo.
constexpr double kMaxTotalTokens = 1e18;
constexpr std::int64_t kMaxTrainIters = std::int64_t{1} << 40;
constexpr double kMaxGpuPower = 1e5;  // W

// cluster.inter_node.oversubscription: 1 uplink per this many downlinks at most (real fabrics: 1 to 8).
constexpr double kMaxOversubscription = 1024;

// Keys naming another file: a relative path in a scenario file is read from the scenario
// file's folder, not the working directory (a relative path given with --set stays
// relative to the working directory, where the user typed it).
const std::vector<std::vector<std::string>> kPathKeys = {{"model", "hf_config"},
                                                         {"model", "megatron_args"},
                                                         {"cluster", "calibration"},
                                                         {"cluster", "inter_node", "graph_file"},
                                                         {"training", "deepspeed_config"}};

void resolve_relative_paths(YAML::Node& root, const std::string& file) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(file).parent_path();
  if (folder.empty() || !root.IsMap()) return;
  for (const auto& keys : kPathKeys) {
    YAML::Node node = root;
    bool found = true;
    for (std::size_t i = 0; i + 1 < keys.size() && found; ++i) {
      node.reset(node[keys[i]]);  // rebind (operator= would overwrite the parent's content)
      found = node.IsDefined() && node.IsMap();
    }
    if (!found) continue;
    YAML::Node value = node[keys.back()];
    if (!value.IsDefined() || !value.IsScalar() || value.Scalar().empty()) continue;
    const fs::path path(value.Scalar());
    if (path.is_absolute()) continue;
    // Absolute, so that a scenario written elsewhere (search --emit-scenario) still finds it.
    node[keys.back()] = fs::absolute(folder / path).lexically_normal().string();
  }
  // cluster.gpus[i].calibration: each GPU type's cost table.
  YAML::Node cluster = root["cluster"];
  if (!cluster.IsDefined() || !cluster.IsMap()) return;
  YAML::Node gpus = cluster["gpus"];
  if (!gpus.IsDefined() || !gpus.IsSequence()) return;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    YAML::Node e = gpus[i];
    if (!e.IsMap()) continue;
    YAML::Node value = e["calibration"];
    if (!value.IsDefined() || !value.IsScalar() || value.Scalar().empty()) continue;
    const fs::path path(value.Scalar());
    if (!path.is_absolute()) e["calibration"] = fs::absolute(folder / path).lexically_normal().string();
  }
}

// The strict reader for one scenario file: bad input is a ScenarioError naming the file.
hw::StrictReader reader(const std::string& file) {
  return hw::StrictReader([file](const std::string& key, const std::string& what, const std::string& hint) {
    throw ScenarioError(file, key, what, hint);
  });
}

// --set a.b.c=value: walk (creating maps) and assign the YAML-parsed value.
void apply_override(YAML::Node& root, const std::string& assignment, const std::string& file) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ScenarioError(file, assignment, "--set expects KEY=VALUE", "e.g. --set parallel.tensor_parallel=4");
  const std::string key = assignment.substr(0, eq);
  const std::string value = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  // yaml-cpp nodes are handles: rebuild the chain top-down with a copy per level.
  std::vector<YAML::Node> chain{root};
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[parts[i]];
    }
    if (!next.IsMap()) throw ScenarioError(file, key, fmt::format("--set: '{}' is not a section", parts[i]));
    chain.push_back(next);
  }
  hw::check_yaml_depth(value, file, "--set value", key);
  YAML::Node parsed;
  try {
    parsed = YAML::Load(value);
  } catch (const YAML::Exception& e) {
    throw ScenarioError(file, key, fmt::format("--set value '{}' is not valid YAML: {}", value, e.msg));
  }
  chain.back()[parts.back()] = parsed.IsNull() ? YAML::Node(value) : parsed;
}

std::string join_divisors(std::int64_t n, std::int64_t limit = 64) {
  std::string out;
  for (std::int64_t d = 1; d <= std::min(n, limit); ++d)
    if (n % d == 0) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return out;
}

models::ModelSpec read_model(const hw::StrictReader& r, const YAML::Node& m, Scenario& s) {
  r.check_keys(m, "model", kModelKeys);
  models::ModelSpec spec;
  s.seq_length_source = "model.seq_length";
  if (m["preset"] && m["hf_config"]) r.fail("model.hf_config", "give either model.preset or model.hf_config, not both");
  if (m["preset"]) {
    const std::string name = r.string(m["preset"], "model.preset");
    auto p = models::find_preset(name);
    if (!p) {
      std::vector<std::string> names;
      for (const auto& x : models::presets()) names.push_back(x.name);
      r.fail("model.preset", fmt::format("unknown preset '{}'", name),
             fmt::format("did you mean '{}'? `ptsim list models` lists them", closest_match(name, names)));
    }
    spec = *p;
    s.seq_length_source = "preset " + name;
  } else if (m["hf_config"]) {
    std::string path = r.string(m["hf_config"], "model.hf_config");
    try {
      spec = models::from_hf_config(path);
    } catch (const std::exception& e) {
      r.fail("model.hf_config", e.what());
    }
    s.seq_length_source = "max_position_embeddings of " + path;
    if (!m["seq_length"])  // the context window, often far longer than the training sequence
      s.warn("model.seq_length",
             fmt::format("not given: {} tokens taken from max_position_embeddings of {} (the context window, not "
                         "necessarily the training sequence); set model.seq_length",
                         spec.seq_length, path));
  }
  auto set_int64 = [&](const char* key, auto& field) {
    if (m[key]) field = r.int64(m[key], std::string("model.") + key);
  };
  auto set_int = [&](const char* key, int& field) {
    if (m[key]) field = r.integer(m[key], std::string("model.") + key);
  };
  set_int("num_layers", spec.num_layers);
  set_int64("hidden_size", spec.hidden_size);
  set_int("num_attention_heads", spec.num_attention_heads);
  const bool groups_given = static_cast<bool>(m["num_query_groups"]);
  set_int("num_query_groups", spec.num_query_groups);
  if (!groups_given && m["num_attention_heads"] && !m["preset"] && !m["hf_config"])
    spec.num_query_groups = spec.num_attention_heads;  // MHA unless said otherwise
  set_int64("ffn_hidden_size", spec.ffn_hidden_size);
  set_int64("vocab_size", spec.vocab_size);
  set_int64("seq_length", spec.seq_length);
  if (m["seq_length"]) s.seq_length_source = "model.seq_length";
  if (m["mlp"])
    spec.mlp = r.choice(m["mlp"], "model.mlp", {"gelu", "swiglu"}) == "gelu" ? models::Mlp::gelu : models::Mlp::swiglu;
  if (m["norm"])
    spec.norm = r.choice(m["norm"], "model.norm", {"layernorm", "rmsnorm"}) == "layernorm" ? models::Norm::layernorm
                                                                                           : models::Norm::rmsnorm;
  if (m["untie_embeddings"]) spec.untie_embeddings = r.boolean(m["untie_embeddings"], "model.untie_embeddings");
  if (m["add_bias_linear"]) spec.add_bias_linear = r.boolean(m["add_bias_linear"], "model.add_bias_linear");
  for (auto [key, field] :
       {std::pair{"hidden_dropout", &spec.hidden_dropout}, {"attention_dropout", &spec.attention_dropout}})
    if (m[key]) {
      const std::string path = std::string("model.") + key;
      *field = r.number(m[key], path);
      if (!models::ModelSpec::valid_dropout(*field))
        r.fail(path, fmt::format("{} is not a probability in [0, 1)", *field));
    }
  if (m["position_embedding"])
    spec.learned_position_embeddings = r.choice(m["position_embedding"], "model.position_embedding",
                                                {"learned_absolute", "rope"}) == "learned_absolute";
  if (const auto moe = m["moe"]) {
    r.check_keys(moe, "model.moe", kMoeKeys);
    models::MoeSpec ms = spec.moe.value_or(models::MoeSpec{});
    if (moe["num_experts"]) ms.num_experts = r.integer(moe["num_experts"], "model.moe.num_experts");
    if (moe["top_k"]) ms.top_k = r.integer(moe["top_k"], "model.moe.top_k");
    if (moe["ffn_hidden_size"]) ms.ffn_hidden_size = r.int64(moe["ffn_hidden_size"], "model.moe.ffn_hidden_size");
    if (const YAML::Node f = moe["layer_freq"]) {
      // An integer N, or Megatron's list form: a string like "([0]*1+[1]*27)" or a YAML list.
      std::string text;
      if (f.IsSequence()) {
        for (const auto& x : f) text += (text.empty() ? "[" : ",") + (x.IsScalar() ? x.Scalar() : std::string("?"));
        text += "]";
      } else if (f.IsScalar() && f.Scalar().find('[') != std::string::npos) {
        text = f.Scalar();
      }
      if (text.empty()) {
        ms.layer_freq = r.integer(f, "model.moe.layer_freq");
        ms.layer_pattern.clear();
      } else {
        try {
          ms.layer_pattern = models::parse_moe_layer_pattern(text);
        } catch (const std::invalid_argument& e) {
          r.fail("model.moe.layer_freq", e.what());
        }
      }
    }
    if (moe["shared_experts"]) ms.shared_experts = r.integer(moe["shared_experts"], "model.moe.shared_experts", 0);
    if (moe["shared_expert_gate"])
      ms.shared_expert_gate = r.boolean(moe["shared_expert_gate"], "model.moe.shared_expert_gate");
    if (ms.num_experts < 1) r.fail("model.moe.num_experts", "a MoE block needs num_experts >= 1");
    if (ms.top_k < 1 || ms.top_k > ms.num_experts)
      r.fail("model.moe.top_k",
             fmt::format("{} must be between 1 and model.moe.num_experts ({})", ms.top_k, ms.num_experts));
    if (ms.ffn_hidden_size == 0) ms.ffn_hidden_size = spec.ffn_hidden_size;
    if (ms.shared_expert_gate && ms.shared_experts == 0)
      r.fail("model.moe.shared_expert_gate", "gates the shared experts, but model.moe.shared_experts is 0");
    spec.moe = ms;
  }
  if (spec.num_layers <= 0 || spec.hidden_size <= 0)
    r.fail("model", "no architecture: give model.preset, model.hf_config, or every model key",
           "`ptsim list models` lists the presets");
  if (spec.moe && !spec.moe->layer_pattern.empty() &&
      spec.moe->layer_pattern.size() != static_cast<std::size_t>(spec.num_layers))
    r.fail("model.moe.layer_freq",
           fmt::format("the MoE layer pattern lists {} layers but the model has {} (model.num_layers)",
                       spec.moe->layer_pattern.size(), spec.num_layers),
           "give one 0/1 entry per layer, or a layer frequency N");
  if (spec.name.empty() || m["num_layers"] || m["hidden_size"])
    spec.name = spec.name.empty() ? "custom" : spec.name + "-custom";
  return spec;
}

// cluster.price_per_gpu_hour (a number in any currency) and cluster.gpu_power ("700 W").
void read_cost_inputs(const hw::StrictReader& r, const YAML::Node& c, ClusterConfig& cc) {
  if (c["price_per_gpu_hour"])
    cc.price_per_gpu_hour = r.non_negative(c["price_per_gpu_hour"], "cluster.price_per_gpu_hour");
  cc.gpu_power = cc.gpu.tdp;
  if (c["gpu_power"]) {
    const std::string text = r.string(c["gpu_power"], "cluster.gpu_power");
    try {
      cc.gpu_power = parse_power(text);
    } catch (const UnitError& e) {
      r.fail("cluster.gpu_power", e.what(), "e.g. \"700 W\"");
    }
    if (cc.gpu_power <= 0 || cc.gpu_power > kMaxGpuPower)
      r.fail("cluster.gpu_power", fmt::format("'{}' is out of range", text), "more than 0 W and at most 100 kW");
  }
}

// The NIC of the GPU generation's reference node (NVIDIA DGX user guides / datasheets),
// the default of cluster.inter_node.nic_bandwidth, per NIC and direction.
struct ReferenceNic {
  const char* gpu_prefix;
  double gbit_per_s;
  const char* what;
};
constexpr ReferenceNic kReferenceNics[] = {
    // DGX A100 User Guide: 8 × single-port ConnectX-6 VPI, 200 Gb/s HDR InfiniBand.
    {"a100", 200, "HDR InfiniBand, the DGX A100 NIC: 8 × 200 Gb/s ConnectX-6"},
    // DGX H100/H200 User Guide: 8 × single-port ConnectX-7 VPI, 400 Gb/s NDR InfiniBand.
    {"h100", 400, "NDR InfiniBand, the DGX H100 NIC: 8 × 400 Gb/s ConnectX-7"},
    {"h200", 400, "NDR InfiniBand, the DGX H200 NIC: 8 × 400 Gb/s ConnectX-7"},
    // DGX B200 datasheet: 8 × single-port ConnectX-7 VPI, up to 400 Gb/s InfiniBand.
    {"b200", 400, "NDR InfiniBand, the DGX B200 NIC: 8 × 400 Gb/s ConnectX-7"},
};

const ReferenceNic* reference_nic(const std::string& gpu) {
  for (const auto& n : kReferenceNics)
    if (gpu.starts_with(n.gpu_prefix)) return &n;
  return nullptr;
}

ClusterConfig read_cluster(const hw::StrictReader& r, const YAML::Node& c, Scenario& s) {
  r.check_keys(c, "cluster", kClusterKeys);
  ClusterConfig cc;
  if (c["gpus"]) {
    read_gpus(r, c, cc);  // a cluster mixing GPU types (sim/core/mixed_cluster.h)
  } else {
    if (!c["gpu"]) r.fail("cluster.gpu", "missing", "`ptsim list gpus` lists the catalog; or cluster.gpus");
    cc.gpu = catalog_gpu(r, c["gpu"], "cluster.gpu");
    if (!c["num_gpus"]) r.fail("cluster.num_gpus", "missing");
    cc.num_gpus = static_cast<int>(r.int64(c["num_gpus"], "cluster.num_gpus", 1, kMaxGpus));
    // Default: DGX-style 8-GPU nodes, or one node holding every GPU when fewer.
    cc.gpus_per_node = std::min(8, cc.num_gpus);
    if (c["gpus_per_node"])
      cc.gpus_per_node = static_cast<int>(r.int64(c["gpus_per_node"], "cluster.gpus_per_node", 1, kMaxGpus));
  }
  // Defaults below are the GPU's own NVLink figure and a DGX-style node
  // (documented in the README, section "Scenario defaults"). A mixed cluster's nodes
  // share one intra-node figure: the slowest type's NVLink.
  cc.intra_bandwidth = cc.gpu.nvlink_bandwidth;
  for (const auto& grp : cc.gpu_groups) cc.intra_bandwidth = std::min(cc.intra_bandwidth, grp.gpu.nvlink_bandwidth);
  if (cc.mixed() && !(c["intra_node"] && c["intra_node"]["bandwidth"]))
    for (const auto& grp : cc.gpu_groups)
      if (grp.gpu.nvlink_bandwidth != cc.intra_bandwidth) {
        s.warn("cluster.intra_node.bandwidth",
               fmt::format("not given: every node's NVLink at {} per GPU, the slowest GPU type's (intra-node "
                           "bandwidth per GPU type is not modelled)",
                           format_bandwidth(cc.intra_bandwidth)));
        break;
      }
  if (const auto in = c["intra_node"]) {
    r.check_keys(in, "cluster.intra_node", kIntraKeys);
    if (in["fabric"])
      cc.intra_fabric = r.choice(in["fabric"], "cluster.intra_node.fabric", {"nvswitch", "nvlink", "pcie"});
    if (in["bandwidth"]) cc.intra_bandwidth = r.bandwidth(in["bandwidth"], "cluster.intra_node.bandwidth");
    if (in["latency"]) cc.intra_latency = r.seconds(in["latency"], "cluster.intra_node.latency");
    if (in["nvls"]) cc.nvls = r.boolean(in["nvls"], "cluster.intra_node.nvls");
  }
  // Not yet checked to be a mapping (that is below): a scalar `inter_node` must not be indexed.
  if (const auto ex = c["inter_node"]; !(ex && ex.IsMap() && ex["nic_bandwidth"])) {
    // A mixed cluster: the slowest reference NIC of its GPU types.
    const ReferenceNic* nic = reference_nic(cc.gpu.name);
    for (const auto& grp : cc.gpu_groups) {
      const ReferenceNic* other = reference_nic(grp.gpu.name);
      if (!other || (nic && other->gbit_per_s < nic->gbit_per_s)) nic = other;
      if (!nic) break;
    }
    if (!nic)
      r.fail("cluster.inter_node.nic_bandwidth", fmt::format("missing: no reference NIC is known for {}", cc.gpu.name),
             "give your cluster's NIC, e.g. \"400 Gb/s\"");
    cc.nic_bandwidth = nic->gbit_per_s * 1e9 / 8;
    if (cc.num_gpus > cc.gpus_per_node)  // more than one node: the NIC carries traffic
      s.warn(
          "cluster.inter_node.nic_bandwidth",
          fmt::format("not given: {:g} Gb/s per NIC assumed ({}); set your cluster's NIC", nic->gbit_per_s, nic->what));
  }
  if (const auto ex = c["inter_node"]) {
    r.check_keys(ex, "cluster.inter_node", kInterKeys);
    if (ex["topology"])
      cc.topology = r.choice(ex["topology"], "cluster.inter_node.topology",
                             {"fat-tree", "fat-tree-3", "rail-optimized", "torus-2d", "torus-3d", "torus", "user"});
    if (ex["nics_per_node"]) cc.nics_per_node = r.integer(ex["nics_per_node"], "cluster.inter_node.nics_per_node");
    if (ex["nic_bandwidth"]) cc.nic_bandwidth = r.bandwidth(ex["nic_bandwidth"], "cluster.inter_node.nic_bandwidth");
    if (ex["latency"]) cc.inter_latency = r.seconds(ex["latency"], "cluster.inter_node.latency");
    if (ex["oversubscription"]) {
      cc.oversubscription = r.positive(ex["oversubscription"], "cluster.inter_node.oversubscription");
      if (cc.oversubscription < 1)
        r.fail("cluster.inter_node.oversubscription",
               fmt::format("{} must be >= 1 (1 = full bisection)", cc.oversubscription));
      if (cc.oversubscription > kMaxOversubscription)
        r.fail("cluster.inter_node.oversubscription",
               fmt::format("{} is out of range", ex["oversubscription"].Scalar()),
               fmt::format("at most {:g}: one uplink per {:g} downlinks", kMaxOversubscription, kMaxOversubscription));
    }
    if (ex["switch_radix"]) {
      cc.switch_radix = r.integer(ex["switch_radix"], "cluster.inter_node.switch_radix", 4);
      if (cc.switch_radix % 2 != 0)
        r.fail("cluster.inter_node.switch_radix", fmt::format("{} must be even", cc.switch_radix));
    }
    if (ex["tiers"]) {
      cc.tiers = r.integer(ex["tiers"], "cluster.inter_node.tiers", 2);
      if (cc.tiers > 3) r.fail("cluster.inter_node.tiers", fmt::format("{} is not 2 or 3", cc.tiers));
    }
    if (const auto dims = ex["torus_dims"]) {
      if (!dims.IsSequence()) r.fail("cluster.inter_node.torus_dims", "expected a list of sizes, e.g. [8, 16]");
      for (std::size_t i = 0; i < dims.size(); ++i)
        cc.torus_dims.push_back(r.integer(dims[i], hw::item_path("cluster.inter_node.torus_dims", i), 2));
      if (cc.torus_dims.size() != 2 && cc.torus_dims.size() != 3)
        r.fail("cluster.inter_node.torus_dims",
               fmt::format("has {} entries; a torus has 2 or 3 dimensions", cc.torus_dims.size()));
    }
    if (ex["graph_file"]) cc.graph_file = r.string(ex["graph_file"], "cluster.inter_node.graph_file");
    if (ex["routing"]) cc.routing = r.choice(ex["routing"], "cluster.inter_node.routing", kRoutingNames);
    if (ex["sharp"]) cc.sharp = r.boolean(ex["sharp"], "cluster.inter_node.sharp");
    if (ex["qps_per_connection"]) {
      cc.qps_per_connection = r.integer(ex["qps_per_connection"], "cluster.inter_node.qps_per_connection", 1);
      if (cc.qps_per_connection > hw::net::kMaxQps)
        r.fail("cluster.inter_node.qps_per_connection", fmt::format("{} is out of range", cc.qps_per_connection),
               fmt::format("at most {}", hw::net::kMaxQps));
    }
    if (cc.topology != "user" && ex["graph_file"])  // it would be ignored without a word
      r.fail("cluster.inter_node.graph_file", fmt::format("is read only with topology 'user', not '{}'", cc.topology),
             "set cluster.inter_node.topology=user or remove graph_file");
    if (cc.topology == "user" && cc.graph_file.empty())
      r.fail("cluster.inter_node.graph_file", "missing: topology 'user' reads its graph from this YAML file");
  }
  // How the switches pick among equal-cost uplinks decides whether rings collide there (README
  // "Network model"): hashed per flow (Ethernet / RoCE) or by destination (InfiniBand), so the
  // default stands in for a fact about the user's fabric.
  if (const auto ex = c["inter_node"];
      cc.num_gpus > cc.gpus_per_node && !(ex && ex.IsMap() && ex["routing"]) &&
      (cc.topology == "fat-tree" || cc.topology == "fat-tree-3" || cc.topology == "rail-optimized"))
    s.warn("cluster.inter_node.routing",
           "not given: ecmp, a hash per flow as Ethernet / RoCE switches route; an InfiniBand fabric routes by "
           "destination: set d-mod-k");
  if (c["link_sharing"]) cc.link_sharing = r.boolean(c["link_sharing"], "cluster.link_sharing");
  if (c["pxn"]) cc.pxn = r.boolean(c["pxn"], "cluster.pxn");
  if (c["host_cpu"]) cc.host_cpu = r.choice(c["host_cpu"], "cluster.host_cpu", kHostCpuNames);
  if (c["nccl_version"]) {
    cc.nccl_version = r.string(c["nccl_version"], "cluster.nccl_version");
    hw::net::NcclVersion v;
    try {
      v = hw::net::parse_nccl_version(cc.nccl_version);
    } catch (const std::invalid_argument& e) {
      r.fail("cluster.nccl_version", e.what());
    }
    const auto arch = hw::net::nccl_gpu_arch(cc.gpu.name, cc.gpu.nvls);
    if (v.minor < hw::net::nccl_first_minor(arch))
      s.warn("cluster.nccl_version",
             fmt::format("NCCL {} predates {} (its tables know compute capability 10.0 from 2.25): costed with "
                         "Hopper's rows and no LL128, as that release would run it",
                         cc.nccl_version, cc.gpu.name));
  }
  if (const auto co = c["collectives"]) {
    r.check_keys(co, "cluster.collectives", kCollectiveKindKeys);
    for (const auto& kv : co) {
      const std::string kind = kv.first.as<std::string>();
      const std::string key = "cluster.collectives." + kind;
      cc.collective_algorithms.emplace_back(
          kind, r.choice(kv.second, key, {"auto", "ring", "tree", "nvls", "hierarchical", "direct"}));
    }
  }
  if (c["calibration"]) cc.calibration = r.string(c["calibration"], "cluster.calibration");
  read_cost_inputs(r, c, cc);
  if (c["slow"]) read_slow(r, c["slow"], cc);
  if (cc.intra_bandwidth <= 0) r.fail("cluster.intra_node.bandwidth", "must be positive");
  if (cc.nic_bandwidth <= 0) r.fail("cluster.inter_node.nic_bandwidth", "must be positive");
  return cc;
}

// parallel.{tensor,pipeline,context,expert,data}_parallel and virtual_pipeline_stages;
// data_parallel defaults to what the cluster leaves.
void read_parallel_sizes(const hw::StrictReader& r, const YAML::Node& p, Scenario& s) {
  auto& par = s.plan.par;
  // Each size is at most kMaxGpus (2^20), so a product of three fits int64; the sizes are
  // checked against the cluster before any arithmetic on them.
  auto size = [&](const char* key, int& field) {
    const std::string path = std::string("parallel.") + key;
    if (p[key]) field = static_cast<int>(r.int64(p[key], path, 1, kMaxGpus));
  };
  size("tensor_parallel", par.tp);
  size("pipeline_parallel", par.pp);
  size("context_parallel", par.cp);
  size("expert_parallel", par.ep);
  size("expert_tensor_parallel", par.etp);
  size("virtual_pipeline_stages", par.vpp);
  size("data_parallel", par.dp);
  const std::int64_t model_parallel = std::int64_t{par.tp} * par.pp * par.cp;
  if (!p["data_parallel"]) {
    if (s.cluster.num_gpus % model_parallel != 0)
      r.fail("cluster.num_gpus",
             fmt::format("{} is not divisible by tensor_parallel × pipeline_parallel × context_parallel = {}",
                         s.cluster.num_gpus, model_parallel));
    par.dp = static_cast<int>(s.cluster.num_gpus / model_parallel);
  }
}

// The parallel section into s.plan (s.cluster is read).
void read_parallel(const hw::StrictReader& r, const YAML::Node& root, Scenario& s) {
  auto& par = s.plan.par;
  const YAML::Node p = root["parallel"] ? root["parallel"] : YAML::Node(YAML::NodeType::Map);
  r.check_keys(p, "parallel", kParallelKeys);
  read_parallel_sizes(r, p, s);
  if (p["pipeline_schedule"]) {
    par.schedule = r.choice(p["pipeline_schedule"], "parallel.pipeline_schedule", models::kScheduleNames);
    // ZB-V and DualPipe hold two chunks per stage: virtual_pipeline_stages 2 unless given.
    if (models::two_chunk_schedule(par.schedule) && !p["virtual_pipeline_stages"]) par.vpp = 2;
  } else if (par.vpp > 1) {
    par.schedule = models::Schedule::interleaved_1f1b;
  }
  if (p["sequence_parallel"]) par.sequence_parallel = r.boolean(p["sequence_parallel"], "parallel.sequence_parallel");
  if (p["zero_stage"]) par.zero_stage = r.integer(p["zero_stage"], "parallel.zero_stage", 0);
  if (p["recompute"]) par.recompute = r.choice(p["recompute"], "parallel.recompute", models::kRecomputeNames);
  if (p["offload_optimizer"]) par.offload_optimizer = r.boolean(p["offload_optimizer"], "parallel.offload_optimizer");
  if (p["offload_params"]) par.offload_params = r.boolean(p["offload_params"], "parallel.offload_params");
  if (p["overlap_grad_reduce"])
    s.plan.overlap_grad_reduce = r.boolean(p["overlap_grad_reduce"], "parallel.overlap_grad_reduce");
  if (p["overlap_param_gather"])
    s.plan.overlap_param_gather = r.boolean(p["overlap_param_gather"], "parallel.overlap_param_gather");
  if (p["overlap_p2p"]) s.plan.overlap_p2p = r.boolean(p["overlap_p2p"], "parallel.overlap_p2p");
  if (const auto pl = p["pipeline_layers"]) {
    if (!pl.IsSequence())
      r.fail("parallel.pipeline_layers",
             "expected a list of layer counts, one per pipeline stage (or per virtual stage)");
    // 0 only at the ends (validate_pipeline): a first / last chunk with just the embedding / head.
    for (std::size_t i = 0; i < pl.size(); ++i)
      par.pipeline_layers.push_back(
          static_cast<int>(r.int64(pl[i], hw::item_path("parallel.pipeline_layers", i), 0, models::kMaxLayers)));
  }
}

// model.moe's capacity_factor and load_imbalance, which the plan carries.
void read_moe_plan(const hw::StrictReader& r, const YAML::Node& root, Scenario& s) {
  if (!s.model.moe) return;
  auto& par = s.plan.par;
  const auto moe = root["model"]["moe"];
  if (moe && moe["capacity_factor"]) {
    par.moe_capacity_factor = r.positive(moe["capacity_factor"], "model.moe.capacity_factor");
    // At num_experts every expert can take every token: a larger factor changes nothing but overflows sizes.
    const auto most = static_cast<double>(s.model.moe->num_experts);
    if (par.moe_capacity_factor > most)
      r.fail("model.moe.capacity_factor", fmt::format("{} is out of range", moe["capacity_factor"].Scalar()),
             fmt::format("at most model.moe.num_experts = {:g}: every expert then takes every token", most));
  }
  if (moe && moe["load_imbalance"]) {
    par.moe_load_imbalance = r.positive(moe["load_imbalance"], "model.moe.load_imbalance");
    if (par.moe_load_imbalance < 1) r.fail("model.moe.load_imbalance", "must be >= 1 (1 = perfectly balanced)");
    const double most = static_cast<double>(s.model.moe->num_experts) / s.model.moe->top_k;
    if (par.moe_load_imbalance > most)
      r.fail("model.moe.load_imbalance", fmt::format("{} is out of range", moe["load_imbalance"].Scalar()),
             fmt::format("at most model.moe.num_experts / top_k = {:g}: every token on the busiest experts", most));
  }
}

// A per-GPU catalog figure of the cluster: the largest of a mixed cluster's types.
double largest(const ClusterConfig& c, Bytes hw::GpuSpec::*figure) {
  double most = c.gpu.*figure;
  for (const GpuGroup& g : c.gpu_groups) most = std::max(most, g.gpu.*figure);
  return most;
}

// PyTorch's cuBLAS workspace per (handle, stream): training.memory.cublas_workspace_config
// in the syntax of the CUBLAS_WORKSPACE_CONFIG variable it stands for, ":SIZE:COUNT" pairs
// of SIZE KiB buffers (PyTorch sums them: CublasHandlePool.cpp parseChosenWorkspaceSize);
// else the GPU's default (hw/gpus.yaml).
double blas_workspace(const hw::StrictReader& r, const YAML::Node& mem, const ClusterConfig& c) {
  if (!(mem && mem["cublas_workspace_config"])) return largest(c, &hw::GpuSpec::blas_workspace);
  const char* key = "training.memory.cublas_workspace_config";
  const std::string text = r.string(mem["cublas_workspace_config"], key);
  const char* hint = "CUBLAS_WORKSPACE_CONFIG's form, \":SIZE:COUNT\" pairs of SIZE KiB, e.g. \":4096:8\"";
  static const std::regex pair(":([0-9]{1,9}):([0-9]{1,9})");
  if (text.empty() || !std::regex_match(text, std::regex("(:[0-9]{1,9}:[0-9]{1,9})+")))
    r.fail(key, fmt::format("'{}' is not a list of :SIZE:COUNT pairs", text), hint);
  double bytes = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), pair), end; it != end; ++it)
    bytes += std::stod((*it)[1].str()) * 1024.0 * std::stod((*it)[2].str());
  if (bytes > 64.0 * (1ull << 30))
    r.fail(key, fmt::format("'{}' is {:g} GiB, out of range", text, bytes / (1ull << 30)), "at most 64 GiB");
  return bytes;
}

void read_training(const hw::StrictReader& r, const YAML::Node& root, Scenario& s) {
  auto& par = s.plan.par;
  const YAML::Node t = root["training"] ? root["training"] : YAML::Node(YAML::NodeType::Map);
  r.check_keys(t, "training", kTrainingKeys);
  if (!t["global_batch_size"]) r.fail("training.global_batch_size", "missing");
  s.plan.global_batch_size = r.int64(t["global_batch_size"], "training.global_batch_size", 1, kMaxGlobalBatch);
  if (t["micro_batch_size"])
    par.micro_batch_size =
        static_cast<int>(r.int64(t["micro_batch_size"], "training.micro_batch_size", 1, kMaxMicroBatch));
  if (t["precision"]) par.precision = r.choice(t["precision"], "training.precision", models::kPrecisionNames);
  if (t["optimizer"]) s.optimizer = r.choice(t["optimizer"], "training.optimizer", {"adam", "adamw", "sgd"});
  if (t["attention"]) par.attention = r.choice(t["attention"], "training.attention", models::kAttentionImplNames);
  if (const YAML::Node mem = t["memory"]) {
    r.check_keys(mem, "training.memory", kMemoryKeys);
    if (mem["state_layout"])
      par.state_layout = r.choice(mem["state_layout"], "training.memory.state_layout", models::kStateLayoutNames);
    if (mem["allocator_overhead"]) {
      const double v = r.number(mem["allocator_overhead"], "training.memory.allocator_overhead");
      if (!(v >= 0.0 && v <= 4.0))
        r.fail("training.memory.allocator_overhead", fmt::format("must be in [0, 4], got {}", v),
               "the reserved-minus-allocated gap as a fraction of allocated, e.g. 0.1");
      par.allocator_overhead = v;
    }
  }
  par.blas_workspace = blas_workspace(r, t["memory"], s.cluster);
  read_framework(r, t, root["parallel"], s);
  // ZeRO-3's gathers as the framework issues them, for the closed-form memory model to count
  // what the simulator holds (models/zero3_gathers.h; sim/core/program_builder.cpp plan_fetch).
  {
    const FrameworkProfile& fw = s.framework;
    auto& z = par.zero3;
    z.per_submodule = fw.gather_unit == GatherUnit::submodule;
    z.persistence_elems = fw.param_persistence_threshold;
    z.prefetch_elems = fw.prefetch_bucket_params;
    z.reuse_elems = fw.max_reuse_distance;
    z.reshard_after_forward = fw.reshard_after_forward;
    z.prefetch = s.plan.overlap_param_gather && !fw.gather_blocks_host;
    z.backward_prefetch = z.prefetch && fw.backward_prefetch != BackwardPrefetch::none;
  }
  // Transformer Engine's cuBLAS workspaces / Megatron-core's local attention buffer
  // (models/memory.cpp). TE's layers use one (get_workspace). Megatron's MoE router runs its
  // GEMM through TE whenever TE is installed, as in NVIDIA's containers, local layers or not
  // (moe_utils.py router_gating_linear: te_general_gemm, on that same workspace). TEGroupedMLP
  // (--moe-grouped-gemm with TE) runs its grouped GEMMs on TE's multi-stream workspaces, one
  // per cuBLAS stream (get_multi_stream_cublas_workspace; num_streams = 4,
  // transformer_engine/common/include/transformer_engine/multi_streams.h).
  const bool megatron_moe = s.model.moe && is_megatron(s.framework.framework);
  int te_workspaces = s.framework.transformer_engine || megatron_moe ? 1 : 0;
  if (megatron_moe && s.framework.transformer_engine && s.framework.moe_grouped_gemm) te_workspaces += 4;
  par.te_workspace = te_workspaces * largest(s.cluster, &hw::GpuSpec::te_workspace);
  // --tp-comm-overlap: TE's initialize_ub makes one userbuffer per overlapped GEMM name (ten:
  // qkv/fc1 fprop, proj/fc2 dgrad, proj/fc2 fprop, qkv/fc1 dgrad and wgrad; module/base.py v1.9),
  // each of the shape Megatron passes, (seq_length · micro_batch_size / cp) × hidden
  // (megatron/training/initialize.py _initialize_tp_communicators), in bf16 (initialize_ub's
  // dtype), the six all-gather ones (layers_all_gather_overlap) in one byte under fp8 (fp8_buf).
  const double ub_elems = static_cast<double>(s.model.seq_length) * s.plan.par.micro_batch_size / s.plan.par.cp *
                          static_cast<double>(s.model.hidden_size);
  const double gather_bytes = s.plan.par.precision == models::Precision::fp8 ? 1.0 : 2.0;
  par.te_userbuffers = s.framework.tp_comm_overlap ? ub_elems * (4 * 2.0 + 6 * gather_bytes) : 0.0;
  // Megatron-core's experts apply the routing weights to their activation (models/memory.cpp);
  // fused only for SwiGLU (weighted_bias_swiglu_impl).
  par.moe_probs_in_experts = megatron_moe;
  par.moe_fused_weighted_act = s.model.mlp == models::Mlp::swiglu && s.framework.bias_activation_fusion;
  par.score_buffer = s.framework.framework == Framework::megatron_core && !s.framework.transformer_engine;
  par.loss_kernel = s.framework.loss_kernel;
  par.fp32_softmax_saved =
      !s.framework.transformer_engine && !s.framework.masked_softmax_fusion && s.framework.softmax_in_fp32;
  // The framework decides how model states are laid out, unless the scenario says otherwise.
  const YAML::Node mem = t["memory"];
  if (!(mem && mem["state_layout"])) par.state_layout = state_layout_of(s.framework.framework);
  if (t["total_tokens"] && t["train_iters"])
    r.fail("training.train_iters", "give either training.total_tokens or training.train_iters, not both");
  if (t["total_tokens"]) {
    s.goal.total_tokens = r.positive(t["total_tokens"], "training.total_tokens");
    if (s.goal.total_tokens > kMaxTotalTokens)
      r.fail("training.total_tokens", fmt::format("{:g} is out of range", s.goal.total_tokens), "at most 1e18");
  }
  if (t["train_iters"]) s.goal.train_iters = r.int64(t["train_iters"], "training.train_iters", 1, kMaxTrainIters);
  if (t["finetune"]) read_finetune(r, t["finetune"], s);
}

}  // namespace

namespace {
void validate_layout(const hw::StrictReader& r, const Scenario& s);

// A plan the framework does not run (FrameworkProfile: its pipeline schedules, ZeRO stages and
// context parallelism) is simulated as given, with a warning that says what it runs instead.
void warn_foreign_plan(Scenario& s) {
  const auto& par = s.plan.par;
  const auto& fp = s.framework;
  const std::string_view fw = to_string(fp.framework);
  if (par.pp > 1 && !fp.offers(par.schedule))
    s.warn("parallel.pipeline_schedule",
           fmt::format("{} is not one of {}'s pipeline schedules ({}); simulated as given, as in {}",
                       models::to_string(par.schedule), fw, offered_schedules(fp), schedule_home(par.schedule)));
  if (!fp.offers_zero(par.zero_stage))
    s.warn("parallel.zero_stage",
           fmt::format("{} is not one of {}'s ZeRO stages ({}{}); simulated as given", par.zero_stage, fw,
                       offered_zero_stages(fp),
                       fp.framework == Framework::fsdp ? ": NO_SHARD, and FULL_SHARD or SHARD_GRAD_OP" : ""));
  if (par.cp > 1 && !fp.offers_context_parallel())
    s.warn("parallel.context_parallel",
           fmt::format("{}: {} runs no context parallelism (Megatron's runs in Transformer Engine's attention; "
                       "training.megatron.transformer_impl is local); simulated as Megatron's ring",
                       par.cp, fw));
}
}  // namespace

YAML::Node scenario_yaml(const std::string& yaml_text, const std::string& file,
                         const std::vector<std::string>& overrides) {
  hw::check_yaml_depth(yaml_text, file, "scenario file");
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ScenarioError(file, fmt::format("line {}", e.mark.line + 1), fmt::format("not valid YAML: {}", e.msg));
  }
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  reader(file).check_unique_keys(root);
  resolve_relative_paths(root, file);
  for (const auto& o : overrides) apply_override(root, o, file);
  return root;
}

Scenario parse_scenario(const std::string& yaml_text, const std::string& file,
                        const std::vector<std::string>& overrides) {
  YAML::Node root = scenario_yaml(yaml_text, file, overrides);
  const auto r = reader(file);
  r.check_keys(root, "", kTopKeys);
  Scenario s;
  s.file = file;
  apply_imports(root, file, s.warnings);  // model.megatron_args, training.deepspeed_config
  if (!root["model"]) r.fail("model", "missing section");
  if (!root["cluster"]) r.fail("cluster", "missing section");
  s.model = read_model(r, root["model"], s);
  s.cluster = read_cluster(r, root["cluster"], s);
  s.name = root["name"] ? r.string(root["name"], "name") : s.model.name;

  read_parallel(r, root, s);
  read_moe_plan(r, root, s);
  read_training(r, root, s);
  if (root["reliability"]) read_reliability(r, root["reliability"], s);

  derive_microbatches(s);
  if (s.cluster.mixed()) {
    validate_layout(r, s);  // the stage sizes the balanced split needs
    balance_mixed_pipeline(s);
  }
  validate(s);
  warn_foreign_plan(s);
  return s;
}

void derive_microbatches(Scenario& s) {
  auto& par = s.plan.par;
  const std::int64_t per_step = static_cast<std::int64_t>(par.micro_batch_size) * par.dp;
  if (per_step > 0 && s.plan.global_batch_size % per_step == 0 &&
      s.plan.global_batch_size / per_step <= kMaxMicrobatches)  // more: validate() names the key
    par.num_microbatches = static_cast<int>(s.plan.global_batch_size / per_step);
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_scenario(hw::read_input_file(path, "scenario file", hw::kMaxScenarioBytes), path, overrides);
}

namespace {

// validate(), one concern at a time (in the order the checks report).

void validate_model(const hw::StrictReader& r, const models::ModelSpec& m) {
  // The documented limits (models/model_spec.h), whatever the source (preset, HF config, keys).
  const auto limit = [&](const char* key, std::int64_t v, std::int64_t max) {
    if (v > max)
      r.fail(std::string("model.") + key, fmt::format("{} is out of range", v), fmt::format("at most {}", max));
  };
  limit("num_layers", m.num_layers, models::kMaxLayers);
  limit("hidden_size", m.hidden_size, models::kMaxHiddenSize);
  limit("num_attention_heads", m.num_attention_heads, models::kMaxHeads);
  limit("num_query_groups", m.num_query_groups, models::kMaxHeads);
  limit("ffn_hidden_size", m.ffn_hidden_size, models::kMaxFfnHiddenSize);
  limit("vocab_size", m.vocab_size, models::kMaxVocabSize);
  limit("seq_length", m.seq_length, models::kMaxSeqLength);
  if (m.moe) {
    limit("moe.num_experts", m.moe->num_experts, models::kMaxExperts);
    limit("moe.ffn_hidden_size", m.moe->ffn_hidden_size, models::kMaxFfnHiddenSize);
  }
  // A model written key by key must give its shape (a preset or HF config gives all of it).
  const std::pair<const char*, std::int64_t> shape[] = {
      {"num_layers", m.num_layers}, {"hidden_size", m.hidden_size}, {"num_attention_heads", m.num_attention_heads}};
  for (const auto& [key, v] : shape)
    if (v <= 0)
      r.fail(std::string("model.") + key, "not given", "give it, or model.preset / model.hf_config for the whole shape");
  if (m.hidden_size % m.num_attention_heads != 0)
    r.fail("model.hidden_size",
           fmt::format("{} is not divisible by model.num_attention_heads ({})", m.hidden_size, m.num_attention_heads));
  if (m.num_query_groups <= 0 || m.num_attention_heads % m.num_query_groups != 0)
    r.fail("model.num_query_groups",
           fmt::format("{} must divide model.num_attention_heads ({})", m.num_query_groups, m.num_attention_heads));
  if (m.ffn_hidden_size <= 0 || m.vocab_size <= 0 || m.seq_length <= 0)
    r.fail("model", "ffn_hidden_size, vocab_size and seq_length must be positive");
}

// Cluster size, data parallelism and tensor parallelism.
void validate_layout(const hw::StrictReader& r, const Scenario& s) {
  const auto& m = s.model;
  const auto& par = s.plan.par;
  const auto& c = s.cluster;
  if (c.num_gpus % c.gpus_per_node != 0)
    r.fail("cluster.num_gpus",
           fmt::format("{} is not a multiple of cluster.gpus_per_node ({})", c.num_gpus, c.gpus_per_node),
           "a cluster is made of whole nodes; for a single partial node set gpus_per_node to num_gpus");
  // Each size <= kMaxGpus (2^20): tp·pp·cp fits int64; the product with dp is only formed when it cannot overflow
  // (it is printed whenever it fits, so a user sees what the sizes multiply to).
  const std::int64_t model_parallel = std::int64_t{par.tp} * par.pp * par.cp;
  const bool fits = par.dp > 0 && model_parallel <= std::numeric_limits<std::int64_t>::max() / par.dp;
  if (!fits || model_parallel * par.dp != c.num_gpus)
    r.fail("parallel.data_parallel",
           fmt::format("data_parallel × tensor_parallel × pipeline_parallel × context_parallel = {}×{}×{}×{} = {} but "
                       "cluster.num_gpus = {}",
                       par.dp, par.tp, par.pp, par.cp,
                       fits ? fmt::format("{}", model_parallel * par.dp) : std::string("more than 2^63"), c.num_gpus),
           "leave parallel.data_parallel out to derive it");
  if (m.num_attention_heads % par.tp != 0)
    r.fail("parallel.tensor_parallel",
           fmt::format("{} does not divide model.num_attention_heads ({})", par.tp, m.num_attention_heads),
           "divisors: " + join_divisors(m.num_attention_heads));
  if (m.num_query_groups % par.tp != 0)
    r.fail("parallel.tensor_parallel",
           fmt::format("{} does not divide model.num_query_groups ({})", par.tp, m.num_query_groups),
           "divisors: " + join_divisors(m.num_query_groups));
  if (m.ffn_hidden_size % par.tp != 0)
    r.fail("parallel.tensor_parallel",
           fmt::format("{} does not divide model.ffn_hidden_size ({})", par.tp, m.ffn_hidden_size));
}

// What to give when the layers do not divide over the stages: the framework's own keys.
std::string uneven_layers_hint(Framework f) {
  if (is_megatron(f))
    return "give training.megatron.decoder_first_pipeline_num_layers and/or decoder_last_pipeline_num_layers (the "
           "rest split evenly), or parallel.pipeline_layers";
  return "or give parallel.pipeline_layers";
}

// What the framework's pipeline engine supports.
void validate_framework(const hw::StrictReader& r, const Scenario& s) {
  const auto& par = s.plan.par;
  const auto& fp = s.framework;
  if (par.schedule == models::Schedule::interleaved_1f1b && !fp.offers(par.schedule))
    r.fail("parallel.pipeline_schedule",
           fmt::format("interleaved-1f1b is not offered by {}'s pipeline engine", to_string(fp.framework)),
           fmt::format("use one of its schedules: {}", offered_schedules(fp)));
  if (par.pp > 1 && par.zero_stage > fp.max_zero_stage_with_pp)
    r.fail("parallel.zero_stage",
           fmt::format("{} with pipeline_parallel {}: {}'s pipeline engine supports ZeRO stage <= {}", par.zero_stage,
                       par.pp, to_string(fp.framework), fp.max_zero_stage_with_pp));
}

void validate_pipeline(const hw::StrictReader& r, const Scenario& s) {
  const auto& m = s.model;
  const auto& par = s.plan.par;
  const bool two_chunks = models::two_chunk_schedule(par.schedule);
  const std::string_view sched = models::to_string(par.schedule);
  if (two_chunks && par.vpp != 2)
    r.fail("parallel.virtual_pipeline_stages",
           fmt::format("{}: {} holds 2 model chunks per stage", par.vpp, sched), "give 2 or leave it out");
  if (!two_chunks && par.vpp > 1 && par.schedule != models::Schedule::interleaved_1f1b)
    r.fail("parallel.virtual_pipeline_stages",
           fmt::format("{} needs parallel.pipeline_schedule: interleaved-1f1b", par.vpp));
  if ((par.schedule == models::Schedule::interleaved_1f1b || two_chunks) && par.pp < 2)
    r.fail("parallel.pipeline_schedule", fmt::format("{} needs parallel.pipeline_parallel >= 2", sched));
  if (par.schedule == models::Schedule::dualpipe && par.pp % 2 != 0)
    r.fail("parallel.pipeline_parallel",
           fmt::format("{}: dualpipe feeds the pipeline from both ends and needs an even pipeline_parallel", par.pp));
  // DualPipe's chunks are whole stages (two copies of the model); the others split
  // each stage's layers over its chunks.
  const int layer_split = par.schedule == models::Schedule::dualpipe ? 1 : par.vpp;
  if (par.pipeline_layers.empty()) {
    if (m.num_layers % (par.pp * layer_split) != 0)
      r.fail("parallel.pipeline_parallel",
             fmt::format("model.num_layers ({}) is not divisible by pipeline_parallel × virtual_pipeline_stages = {}",
                         m.num_layers, par.pp * layer_split),
             uneven_layers_hint(s.framework.framework));
  } else {
    // One count per stage, or under interleaving one per virtual stage (Megatron's order,
    // virtual stage chunk·pp + stage: models/memory.h layers_per_stage).
    const std::size_t n = par.pipeline_layers.size();
    const bool per_virtual = models::per_virtual_stage(par);
    if (n != static_cast<std::size_t>(par.pp) && !per_virtual)
      r.fail("parallel.pipeline_layers",
             fmt::format("has {} entries but parallel.pipeline_parallel is {}{}", n, par.pp,
                         par.schedule == models::Schedule::interleaved_1f1b && par.vpp > 1
                             ? fmt::format(" (or pipeline_parallel × virtual_pipeline_stages = {})", par.pp * par.vpp)
                             : ""));
    std::int64_t sum = 0;  // entries <= kMaxLayers, at most kMaxGpus of them: no overflow
    for (std::size_t i = 0; i < n; ++i) {
      sum += par.pipeline_layers[i];
      if (par.pipeline_layers[i] == 0 && ((i != 0 && i + 1 != n) || (!per_virtual && par.vpp > 1)))
        r.fail(fmt::format("parallel.pipeline_layers[{}]", i),
               per_virtual || par.vpp == 1
                   ? "is 0: only the first and the last entry may hold no layer (the embedding's / the head's chunk)"
                   : "is 0: a stage of several model chunks needs a layer in each (give one count per virtual stage)");
      if (!per_virtual && par.pipeline_layers[i] % layer_split != 0)
        r.fail(fmt::format("parallel.pipeline_layers[{}]", i),
               fmt::format("{} is not divisible by virtual_pipeline_stages ({})", par.pipeline_layers[i], par.vpp),
               par.schedule == models::Schedule::interleaved_1f1b
                   ? fmt::format("or give one count per virtual stage ({} entries)", par.pp * par.vpp)
                   : std::string());
    }
    if (sum != m.num_layers)
      r.fail("parallel.pipeline_layers", fmt::format("sums to {} but model.num_layers is {}", sum, m.num_layers));
  }
}

void validate_batches(const hw::StrictReader& r, const Scenario& s) {
  const auto& par = s.plan.par;
  const std::int64_t per_step = static_cast<std::int64_t>(par.micro_batch_size) * par.dp;
  if (s.plan.global_batch_size % per_step != 0)
    r.fail("training.global_batch_size",
           fmt::format("{} is not divisible by micro_batch_size × data_parallel = {}×{} = {}", s.plan.global_batch_size,
                       par.micro_batch_size, par.dp, per_step));
  const std::int64_t m_count = s.plan.global_batch_size / per_step;
  if (m_count > kMaxMicrobatches)
    r.fail(
        "training.global_batch_size",
        fmt::format("implies {} micro-batches (global_batch_size / (micro_batch_size × data_parallel)), more than {}",
                    m_count, kMaxMicrobatches),
        "raise training.micro_batch_size or lower the global batch");
  if (par.num_microbatches != m_count)
    r.fail("training.global_batch_size",
           fmt::format("implies {} micro-batches but the plan says {}", m_count, par.num_microbatches),
           "the plan's micro-batch count must be global_batch_size / (micro_batch_size × data_parallel)");
  if (par.schedule == models::Schedule::dualpipe && (m_count % 2 != 0 || m_count < 2 * par.pp))
    r.fail("training.global_batch_size",
           fmt::format("implies {} micro-batches; dualpipe needs an even number of them, at least 2 × "
                       "pipeline_parallel = {} (half enter the pipeline at each end)",
                       m_count, 2 * par.pp),
           "raise training.global_batch_size or lower training.micro_batch_size");
  if (par.microbatch_group > 0 && !(par.schedule == models::Schedule::interleaved_1f1b && par.vpp > 1))
    r.fail("training.megatron.microbatch_group_size_per_vp_stage",
           "groups the micro-batches of the interleaved schedule only",
           "set parallel.pipeline_schedule: interleaved-1f1b with virtual_pipeline_stages > 1, or drop the key");
  if (par.schedule == models::Schedule::interleaved_1f1b && par.vpp > 1) {
    // Megatron-core's rules (schedules.py forward_backward_pipelining_with_interleaving):
    // groups of N in [pp, m] micro-batches, the last one 0 or at least pp. With N = pp, its
    // default, m must be a multiple of pp (as in Megatron-LM).
    const int n = models::microbatch_group_size(par);
    const auto m = static_cast<int>(m_count);
    if (par.microbatch_group > 0 && (n < par.pp || n > m))
      r.fail("training.megatron.microbatch_group_size_per_vp_stage",
             fmt::format("{} is outside [pipeline_parallel, micro-batches] = [{}, {}]", n, par.pp, m),
             "Megatron-core requires it too");
    const std::string why = schedule_requirement(par.schedule, par.pp, m, par.vpp, par.microbatch_group);
    if (!why.empty())
      r.fail("training.global_batch_size", fmt::format("implies {} micro-batches: {}", m_count, why),
             par.microbatch_group > 0 ? "Megatron-core requires it too"
                                      : "use a multiple of pipeline_parallel (Megatron requires it too), or set "
                                        "training.megatron.microbatch_group_size_per_vp_stage");
  }
}

// Sequence and context parallelism.
void validate_sequence(const hw::StrictReader& r, const Scenario& s) {
  const auto& m = s.model;
  const auto& par = s.plan.par;
  if (par.sequence_parallel && par.tp == 1) r.fail("parallel.sequence_parallel", "needs parallel.tensor_parallel > 1");
  if (par.sequence_parallel && (m.seq_length / par.cp) % par.tp != 0)
    r.fail("parallel.sequence_parallel",
           fmt::format("model.seq_length / context_parallel ({}) is not divisible by tensor_parallel ({})",
                       m.seq_length / par.cp, par.tp));
  if (par.cp > 1 && m.seq_length % (2 * par.cp) != 0)
    r.fail("parallel.context_parallel",
           fmt::format(
               "model.seq_length ({}) must be divisible by 2 × context_parallel = {} (load-balanced causal chunks)",
               m.seq_length, 2 * par.cp));
  // By head all-to-all (Ulysses: DeepSpeed's, Megatron's --cp-comm-type a2a) each rank takes
  // heads / cp of the tensor-parallel rank's query heads and kv groups.
  if (par.cp_heads && par.tp > 0 && m.num_attention_heads % par.tp == 0 && m.num_query_groups % par.tp == 0)
    for (const auto& [count, what] : {std::pair{m.num_attention_heads, "model.num_attention_heads"},
                                      std::pair{m.num_query_groups, "model.num_query_groups"}})
      if ((count / par.tp) % par.cp != 0)
        r.fail("parallel.context_parallel",
               fmt::format("{}: by head all-to-all (Ulysses) each rank takes {} / tensor_parallel = {} / {} = {} "
                           "heads over context_parallel = {}, which does not divide them",
                           par.cp, what, count, par.tp, count / par.tp, par.cp),
               "a context_parallel that divides them, or training.megatron.cp_comm_type p2p / allgather");
}

void validate_experts(const hw::StrictReader& r, const Scenario& s) {
  const auto& m = s.model;
  const auto& par = s.plan.par;
  if (par.ep > 1) {
    if (!m.moe) r.fail("parallel.expert_parallel", fmt::format("{} needs a MoE model (model.moe)", par.ep));
    if (m.moe->num_experts % par.ep != 0)
      r.fail("parallel.expert_parallel",
             fmt::format("{} does not divide model.moe.num_experts ({})", par.ep, m.moe->num_experts));
    if (par.expert_tp() == par.tp && (par.dp * par.cp) % par.ep != 0)
      r.fail("parallel.expert_parallel",
             fmt::format("{} must divide data_parallel × context_parallel ({})", par.ep, par.dp * par.cp),
             "experts are sharded across the data-parallel ranks, as in Megatron-LM; or set "
             "parallel.expert_tensor_parallel: 1 to fold them over the tensor-parallel ranks too");
  }
  if (par.etp > 0 && par.etp != par.tp) {
    const char* key = "parallel.expert_tensor_parallel";
    if (par.tp % par.etp != 0)
      r.fail(key, fmt::format("{} does not divide tensor_parallel ({})", par.etp, par.tp),
             "a divisor of tensor_parallel: 1 (each expert whole on its GPU) up to tensor_parallel");
    if (!m.moe) r.fail(key, fmt::format("{} needs a MoE model (model.moe)", par.etp));
    if (!par.sequence_parallel)
      r.fail(key, fmt::format("{} other than tensor_parallel ({}) needs parallel.sequence_parallel", par.etp, par.tp),
             "Megatron-core runs MoE with tensor parallelism only under sequence parallelism");
    if (par.tp % par.etp == 0 && (par.tp / par.etp * par.dp * par.cp) % par.ep != 0)
      r.fail("parallel.expert_parallel",
             fmt::format("{} must divide tensor_parallel / expert_tensor_parallel × data_parallel × context_parallel "
                         "({})",
                         par.ep, par.tp / par.etp * par.dp * par.cp));
  }
  if (m.moe && m.moe->ffn_hidden_size % par.tp != 0)
    r.fail("parallel.tensor_parallel",
           fmt::format("{} does not divide model.moe.ffn_hidden_size ({})", par.tp, m.moe->ffn_hidden_size));
}

// Precision and offload, which need the hardware or ZeRO to support them.
void validate_features(const hw::StrictReader& r, const Scenario& s) {
  const auto& par = s.plan.par;
  if (par.precision == models::Precision::fp8 && s.cluster.gpu.peak_fp8 <= 0)
    r.fail("training.precision", fmt::format("fp8 needs a GPU with FP8 tensor cores; {} has none", s.cluster.gpu.name),
           "use bf16, or an h100/h200/b200");
  if (par.offload_params && par.zero_stage != 3)
    r.fail("parallel.offload_params", "parameter offload needs parallel.zero_stage: 3 (as in ZeRO-Infinity)");
}

}  // namespace

void validate(const Scenario& s) {
  const auto r = reader(s.file);
  validate_model(r, s.model);
  validate_layout(r, s);
  const auto& par = s.plan.par;
  if (par.zero_stage < 0 || par.zero_stage > 3)  // before the framework's limits on valid stages
    r.fail("parallel.zero_stage", fmt::format("{} is not a ZeRO stage (0, 1, 2 or 3)", par.zero_stage));
  validate_framework(r, s);
  validate_pipeline(r, s);
  validate_batches(r, s);
  validate_sequence(r, s);
  validate_experts(r, s);
  validate_features(r, s);
}

}  // namespace ptsim::sim
