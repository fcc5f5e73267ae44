#include "sim/tools/zero_report.h"

#include <fmt/format.h>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>

#include "hw/gpu_catalog.h"
#include "hw/net/layout.h"
#include "hw/strict_yaml.h"
#include "models/params.h"
#include "sim/core/network_cost.h"

namespace ptsim::sim {
namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (b >= 1000 && u < 5) b /= 1000, ++u;
  return fmt::format("{:.3g} {}", b, units[u]);
}

std::string human_count(double n) {
  if (n >= 1e12) return fmt::format("{:.3g} T", n / 1e12);
  if (n >= 1e9) return fmt::format("{:.4g} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.4g} M", n / 1e6);
  return fmt::format("{:.0f}", n);
}

std::string human_seconds(double s) {
  if (s >= 1) return fmt::format("{:.3g} s", s);
  if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
  return fmt::format("{:.3g} us", s * 1e6);
}

const char* stage_name(int s) {
  switch (s) {
    case 0:
      return "0 (DP)";
    case 1:
      return "1 (P_os)";
    case 2:
      return "2 (P_os+g)";
    default:
      return "3 (P_os+g+p)";
  }
}

}  // namespace

ClusterConfig default_cluster(const std::string& gpu, int num_gpus) {
  auto g = hw::find_gpu(gpu);
  if (!g) {
    std::vector<std::string> names;
    for (const auto& x : hw::gpu_catalog()) names.push_back(x.name);
    throw std::invalid_argument(fmt::format("--gpu: unknown GPU '{}' (did you mean '{}'? `ptsim list gpus` lists them)",
                                            gpu, hw::closest_match(gpu, names)));
  }
  if (num_gpus < 1) throw std::invalid_argument(fmt::format("number of GPUs must be >= 1, got {}", num_gpus));
  ClusterConfig c;
  c.gpu = *g;
  c.num_gpus = num_gpus;
  // The scenario defaults (sim/io/scenario_file.cpp read_cluster): DGX-style nodes of 8 on
  // NVSwitch, 8 × 200 Gb/s NICs per node, full-bisection fat tree.
  c.gpus_per_node = std::gcd(num_gpus, 8);
  c.nics_per_node = c.gpus_per_node;
  c.intra_bandwidth = c.gpu.nvlink_bandwidth;
  c.nic_bandwidth = 200e9 / 8;
  return c;
}

ZeroReport zero_report(const ZeroReportInput& in) {
  if (in.dp < 1) throw std::invalid_argument(fmt::format("--dp must be >= 1, got {}", in.dp));
  if (in.stages.empty()) throw std::invalid_argument("--stages: give at least one ZeRO stage (0..3)");
  for (std::size_t i = 0; i < in.stages.size(); ++i) {
    if (in.stages[i] < 0 || in.stages[i] > 3)
      throw std::invalid_argument(fmt::format("--stages: ZeRO stage must be 0, 1, 2 or 3, got {}", in.stages[i]));
    if (std::count(in.stages.begin(), in.stages.end(), in.stages[i]) > 1)
      throw std::invalid_argument(fmt::format("--stages: stage {} is listed twice", in.stages[i]));
  }
  ZeroReport r;
  r.model = in.model.name;
  r.params = in.params > 0 ? in.params : static_cast<double>(models::count_params(in.model).total);
  r.dp = in.dp;
  r.precision = std::string(models::to_string(in.precision));
  r.bytes_per_element = models::state_bytes_per_param(in.precision, models::StateLayout::deepspeed).params;
  const double S = r.params * r.bytes_per_element;  // Ψ in bytes
  const double n = in.dp;
  const double f = (n - 1) / n;

  Layout layout(in.tp, 1, in.dp, in.pp, 1, in.cluster.gpus_per_node);
  if (in.cluster.num_gpus != layout.world())
    throw std::invalid_argument(fmt::format("cluster has {} GPUs but tp × dp × pp = {} × {} × {} = {}",
                                            in.cluster.num_gpus, in.tp, in.dp, in.pp, layout.world()));
  NetworkModel net(in.cluster, layout);
  r.cluster = fmt::format("{} x {}; {}", in.cluster.num_gpus, in.cluster.gpu.name, net.topology().description());
  const GroupShape group = layout.shape(Dim::dp, 0);
  auto time_of = [&](CollectiveKind c) { return net.stage_seconds(c, Dim::dp, group, S); };

  for (int stage : in.stages) {
    ZeroStageReport s;
    s.stage = stage;
    if (stage == 0) {
      s.collectives.push_back({"all-reduce", 1, S, time_of(CollectiveKind::all_reduce)});
    } else if (stage <= 2) {
      s.collectives.push_back({"reduce-scatter", 1, S, time_of(CollectiveKind::reduce_scatter)});
      s.collectives.push_back({"all-gather", 1, S, time_of(CollectiveKind::all_gather)});
    } else {
      s.collectives.push_back({"all-gather", 2, S, time_of(CollectiveKind::all_gather)});  // forward + backward
      s.collectives.push_back({"reduce-scatter", 1, S, time_of(CollectiveKind::reduce_scatter)});
    }
    for (const auto& c : s.collectives) {
      // Ring: a GPU sends and receives (N−1)/N of the buffer per reduce-scatter or
      // all-gather, 2(N−1)/N per all-reduce (nccl-tests PERFORMANCE.md).
      const double per = (c.kind == "all-reduce" ? 2 * f : f) * c.bytes_each;
      s.sent_bytes += c.count * per;
      s.received_bytes += c.count * per;
      s.time_s += c.count * c.time_each;
    }
    s.volume_psi = S > 0 ? s.sent_bytes / S : 0;
    s.memory = models::zero_model_state_bytes(r.params, in.dp, stage, in.precision, models::StateLayout::deepspeed);
    r.stages.push_back(std::move(s));
  }
  return r;
}

std::string zero_report_markdown(const ZeroReport& r) {
  std::string o;
  o += fmt::format("## ZeRO communication volume: {}\n\n", r.model);
  o += fmt::format(
      "Ψ = {} parameters × {} bytes per element ({}) = {}; N = {} data-parallel GPUs; "
      "per GPU, per iteration. Times on: {}.\n\n",
      human_count(r.params), r.bytes_per_element, r.precision, human_bytes(r.params * r.bytes_per_element), r.dp,
      r.cluster);
  o += "| ZeRO stage | collectives per iteration | sent / GPU | received / GPU | volume | params | grads | "
       "optimizer | model states / GPU | comm time |\n";
  o += "|---|---|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& s : r.stages) {
    std::string colls;
    for (const auto& c : s.collectives)
      colls += fmt::format("{}{} × {} of {}", colls.empty() ? "" : " + ", c.count, c.kind, human_bytes(c.bytes_each));
    const double paper = s.stage == 3 ? 3 : 2;
    o += fmt::format("| {}{} | {} | {} | {} | {:.4f} Ψ ({}Ψ·(N−1)/N) | {} | {} | {} | {} | {} |\n", stage_name(s.stage),
                     s.stage == 1 ? " [^zero1]" : "", colls, human_bytes(s.sent_bytes), human_bytes(s.received_bytes),
                     s.volume_psi, paper, human_bytes(s.memory.params), human_bytes(s.memory.grads),
                     human_bytes(s.memory.optimizer), human_bytes(s.memory.total()), human_seconds(s.time_s));
  }
  o += "\nVolume per the ZeRO paper (Rajbhandari et al. SC'20 §7): 2Ψ for DP, ZeRO-1 and ZeRO-2, 3Ψ for ZeRO-3, "
       "each × (N−1)/N. Model states (§3.1, §5; K = 12 bytes of fp32 Adam state per parameter in mixed precision): "
       "(2+2+K)Ψ, 2Ψ+2Ψ+KΨ/N, 2Ψ+(2+K)Ψ/N, (2+2+K)Ψ/N.\n\n";
  o += "[^zero1]: Some notes give ZeRO-1 3Ψ, counting an all-reduce of the gradients (2Ψ) plus an all-gather of the "
       "updated parameters (Ψ). But a ring all-reduce *is* a reduce-scatter (Ψ) followed by an all-gather (Ψ); "
       "with the optimizer state sharded, each GPU only updates its own 1/N of the parameters, so it only needs "
       "its 1/N of the reduced gradients — the reduce-scatter. The all-gather half of the all-reduce is replaced "
       "by the all-gather of the updated parameters, so ZeRO-1 moves Ψ + Ψ = 2Ψ·(N−1)/N per GPU, exactly as "
       "plain data parallelism (ZeRO §7.2.1; Megatron-LM's distributed optimizer does the same).\n";
  return o;
}

std::string zero_report_csv(const ZeroReport& r) {
  std::string o =
      "model,params,dp,bytes_per_element,stage,collectives,sent_bytes,received_bytes,volume_psi,params_bytes,"
      "grads_bytes,optimizer_bytes,total_bytes,time_s\n";
  for (const auto& s : r.stages) {
    std::string colls;
    for (const auto& c : s.collectives)
      colls += fmt::format("{}{} x{} of {:.0f} B", colls.empty() ? "" : "; ", c.kind, c.count, c.bytes_each);
    o += fmt::format("{},{:.0f},{},{},{},\"{}\",{:.0f},{:.0f},{:.6f},{:.0f},{:.0f},{:.0f},{:.0f},{:.6g}\n", r.model,
                     r.params, r.dp, r.bytes_per_element, s.stage, colls, s.sent_bytes, s.received_bytes, s.volume_psi,
                     s.memory.params, s.memory.grads, s.memory.optimizer, s.memory.total(), s.time_s);
  }
  return o;
}

std::string zero_report_json(const ZeroReport& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["params"] = r.params;
  j["dp"] = r.dp;
  j["bytes_per_element"] = r.bytes_per_element;
  j["precision"] = r.precision;
  j["cluster"] = r.cluster;
  j["stages"] = nlohmann::json::array();
  for (const auto& s : r.stages) {
    nlohmann::json st;
    st["stage"] = s.stage;
    st["collectives"] = nlohmann::json::array();
    for (const auto& c : s.collectives)
      st["collectives"].push_back(
          {{"kind", c.kind}, {"count", c.count}, {"bytes_each", c.bytes_each}, {"time_s", c.time_each}});
    st["sent_bytes"] = s.sent_bytes;
    st["received_bytes"] = s.received_bytes;
    st["volume_psi"] = s.volume_psi;
    st["memory"] = {{"params", s.memory.params},
                    {"grads", s.memory.grads},
                    {"optimizer", s.memory.optimizer},
                    {"total", s.memory.total()}};
    st["time_s"] = s.time_s;
    j["stages"].push_back(std::move(st));
  }
  return j.dump(2) + "\n";
}

}  // namespace ptsim::sim
