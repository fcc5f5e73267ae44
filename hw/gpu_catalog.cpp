#include "hw/gpu_catalog.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <stdexcept>

namespace ptsim::embedded {
extern const char gpus_yaml[];
}

namespace ptsim::hw {

// Asked once or twice per kernel costed (a plan search costs millions): string_view
// comparisons of the short names, which compile to a length test and one word compare.
FlopsPerSecond GpuSpec::peak(std::string_view precision) const {
  if (precision == "bf16") return peak_bf16;
  if (precision == "fp16") return peak_fp16;
  if (precision == "fp32") return peak_fp32;
  if (precision == "tf32") return peak_tf32;
  if (precision == "fp8") return peak_fp8;
  throw std::invalid_argument(fmt::format("unknown precision '{}'", precision));
}

namespace {

// attention_shape: one entry per flash kernel the GPU runs (its default and each of
// attention_kernels), each with every field of GpuSpec::AttentionShape.
std::map<std::string, GpuSpec::AttentionShape> parse_attention_shapes(const GpuSpec& s, const YAML::Node& node) {
  std::map<std::string, GpuSpec::AttentionShape> out;
  if (node && !node.IsMap())
    throw std::invalid_argument(
        fmt::format("gpu '{}': attention_shape must map each flash kernel to its shape", s.name));
  std::vector<std::string> kernels{s.attention_kernel};
  for (const auto& [name, rate] : s.attention_kernels) kernels.push_back(name);
  for (const std::string& k : kernels) {
    const YAML::Node e = node ? node[k] : YAML::Node();
    if (!e || !e.IsMap())
      throw std::invalid_argument(fmt::format("gpu '{}': attention_shape has no entry for kernel '{}'", s.name, k));
    const auto field = [&](const char* key, bool positive) {
      if (!e[key]) throw std::invalid_argument(fmt::format("gpu '{}': attention_shape.{} lacks '{}'", s.name, k, key));
      const double v = e[key].as<double>();
      if (!(positive ? v > 0 : v >= 0))
        throw std::invalid_argument(fmt::format("gpu '{}': attention_shape.{}.{} is {}, must be {}", s.name, k, key, v,
                                                positive ? "> 0" : ">= 0"));
      return v;
    };
    out[k] = {field("backward", true), field("seq_half", false), field("backward_seq_half", false),
              field("causal", true), field("causal_seq_half", false)};
  }
  for (const auto& entry : node) {
    const std::string k = entry.first.as<std::string>();
    if (!out.count(k))
      throw std::invalid_argument(
          fmt::format("gpu '{}': attention_shape names kernel '{}', which the GPU does not run", s.name, k));
  }
  return out;
}

}  // namespace

std::vector<GpuSpec> parse_gpu_catalog(const std::string& yaml_text) {
  const YAML::Node root = YAML::Load(yaml_text);
  std::vector<GpuSpec> out;
  for (const auto& g : root["gpus"]) {
    GpuSpec s;
    s.name = g["name"].as<std::string>();
    if (g["aliases"]) s.aliases = g["aliases"].as<std::vector<std::string>>();
    s.description = g["description"].as<std::string>("");
    const auto peak = g["peak"];
    auto rate = [&](const char* k) { return peak[k] ? parse_flops_rate(peak[k].as<std::string>()) : 0.0; };
    s.peak_fp32 = rate("fp32");
    s.peak_tf32 = rate("tf32");
    s.peak_fp16 = rate("fp16");
    s.peak_bf16 = rate("bf16");
    s.peak_fp8 = rate("fp8");
    s.hbm = parse_bytes(g["hbm"].as<std::string>());
    s.hbm_bandwidth = parse_bandwidth(g["hbm_bandwidth"].as<std::string>());
    s.nvlink_bandwidth = parse_bandwidth(g["nvlink_bandwidth"].as<std::string>());
    s.nvlink_efficiency = g["nvlink_efficiency"].as<double>(1.0);
    s.pcie_bandwidth = parse_bandwidth(g["pcie_bandwidth"].as<std::string>());
    s.tdp = parse_power(g["tdp"].as<std::string>());
    const std::string adam = g["host_adam_rate"].as<std::string>();
    s.host_adam_params_per_s = std::stod(adam) * 1e9;  // "N Gparam/s"
    s.matmul_best = g["matmul_best"].as<double>();
    s.nvls = g["nvls"].as<bool>(false);
    s.sm_count = g["sm_count"].as<int>();
    s.launch_overhead = parse_seconds(g["launch_overhead"].as<std::string>());
    s.blas_workspace = parse_bytes(g["blas_workspace"].as<std::string>());
    s.te_workspace = parse_bytes(g["te_workspace"].as<std::string>());
    s.gemm_tile_k = g["gemm_tile_k"].as<int>();
    s.gemm_stages = g["gemm_stages"].as<int>();
    s.attention_kernel = g["attention_kernel"].as<std::string>();
    if (const auto a = g["attention_kernels"]) s.attention_kernels = a.as<std::map<std::string, double>>();
    if (s.sm_count < 1 || s.gemm_tile_k < 1 || s.gemm_stages < 0)
      throw std::invalid_argument(
          fmt::format("gpu '{}': sm_count, gemm_tile_k must be >= 1, gemm_stages >= 0", s.name));
    s.attention_shapes = parse_attention_shapes(s, g["attention_shape"]);
    if (const auto e = g["efficiency"]) {
      s.efficiency.gemm = e["gemm"].as<double>();
      s.efficiency.attention = e["attention"].as<double>();
      s.efficiency.memory = e["memory"].as<double>();
    }
    if (const auto kept = g["efficiency_not_fitted"]) {
      for (const auto& k : kept.as<std::vector<std::string>>()) {
        auto& nf = s.efficiency_not_fitted;
        bool* flag = k == "gemm" ? &nf.gemm : k == "attention" ? &nf.attention : k == "memory" ? &nf.memory : nullptr;
        if (!flag)
          throw std::invalid_argument(
              fmt::format("gpu '{}': efficiency_not_fitted lists '{}', expected gemm, attention or memory", s.name, k));
        *flag = true;
      }
    }
    if (g["sources"]) s.sources = g["sources"].as<std::vector<std::string>>();
    out.push_back(std::move(s));
  }
  return out;
}

const std::vector<GpuSpec>& gpu_catalog() {
  // Parsed once; immutable afterwards (a cache of embedded data, not mutable state).
  static const std::vector<GpuSpec> catalog = parse_gpu_catalog(ptsim::embedded::gpus_yaml);
  return catalog;
}

std::optional<GpuSpec> find_gpu(const std::string& name) {
  for (const auto& g : gpu_catalog()) {
    if (g.name == name) return g;
    for (const auto& a : g.aliases)
      if (a == name) return g;
  }
  return std::nullopt;
}

}  // namespace ptsim::hw
