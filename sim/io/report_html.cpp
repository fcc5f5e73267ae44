#include "sim/io/report_html.h"
#include "sim/io/report_html_parts.h"
#include "sim/io/result_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "hw/units.h"
#include "models/params.h"
#include "sim/core/mixed_cluster.h"
#include "sim/io/svg_time_bars.h"
#include "sim/io/svg_timeline.h"

namespace ptsim::sim {
namespace html {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string memory_svg(const Result& r) {
  const double bar = 28, height = 220, left = 60;
  const double cap = std::max(r.capacity_bytes, r.peak_bytes);
  const char* names[] = {"params", "grads", "optimizer", "activations", "buffers"};
  const char* colours[] = {"#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd"};
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">)",
      left + (bar + 8) * r.per_stage.size() + 160, height + 40);
  const double cap_y = height - height * r.capacity_bytes / cap + 10;
  svg += fmt::format(
      R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="black" stroke-dasharray="4"/><text x="2" y="{:.1f}">{}</text>)",
      left, left + (bar + 8) * r.per_stage.size(), cap_y, cap_y, cap_y + 4, escape(format_bytes(r.capacity_bytes)));
  for (std::size_t i = 0; i < r.per_stage.size(); ++i) {
    const auto& m = r.per_stage[i];
    const double parts[] = {m.params, m.grads, m.optimizer, m.activations, m.buffers};
    double y = height + 10;
    for (int k = 0; k < 5; ++k) {
      const double h = height * parts[k] / cap;
      y -= h;
      svg += fmt::format(
          R"(<rect x="{:.1f}" y="{:.1f}" width="{}" height="{:.1f}" fill="{}"><title>stage {} {}: {}</title></rect>)",
          left + i * (bar + 8), y, bar, h, colours[k], m.stage, names[k], escape(format_bytes(parts[k])));
    }
    svg += fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>)", left + i * (bar + 8) + bar / 2,
                       height + 25, m.stage);
  }
  for (int k = 0; k < 5; ++k)
    svg += fmt::format(R"(<rect x="{}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}">{}</text>)",
                       left + (bar + 8) * r.per_stage.size() + 20, 20 + 16 * k, colours[k],
                       left + (bar + 8) * r.per_stage.size() + 35, 29 + 16 * k, names[k]);
  return svg + "</svg>";
}

std::string comm_svg(const Result& r) {
  const double width = 500, row = 24, left = 40;
  double most = 1;
  for (double b : r.comm_bytes_per_gpu) most = std::max(most, b);
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">)",
      width + left + 120, row * kNumDims + 10);
  for (int d = 0; d < kNumDims; ++d) {
    const double w = width * r.comm_bytes_per_gpu[d] / most;
    svg += fmt::format(
        R"(<text x="4" y="{}">{}</text><rect x="{}" y="{}" width="{:.1f}" height="{}" fill="#17becf"/><text x="{:.1f}" y="{}">{}</text>)",
        row * d + 16, to_string(static_cast<Dim>(d)), left, row * d + 4, w, row - 8, left + w + 4, row * d + 16,
        escape(format_bytes(r.comm_bytes_per_gpu[d])));
  }
  return svg + "</svg>";
}

}  // namespace html

namespace {

using html::escape;

std::string count_text(double n) {
  if (n >= 1e12) return fmt::format("{:.2f} T", n / 1e12);
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f} M", n / 1e6);
  return fmt::format("{:.0f}", n);
}

// What the run was asked: model, batch, cluster, network, cost source, framework, plan.
std::string inputs_panel(const Scenario& s, const Result& r) {
  const auto& m = s.model;
  const auto& c = s.cluster;
  const auto& q = r.plan.par;
  const models::ParamCounts params = models::count_params(m);
  std::vector<std::pair<std::string, std::string>> rows = {
      {"model", m.name},
      {"parameters", params.active != params.total
                         ? fmt::format("{} ({} active per token)", count_text(static_cast<double>(params.total)),
                                       count_text(static_cast<double>(params.active)))
                         : count_text(static_cast<double>(params.total))},
      {"layers × hidden", fmt::format("{} × {}", m.num_layers, m.hidden_size)},
      {"sequence length", fmt::format("{}", m.seq_length)},
      {"batch", fmt::format("global {} = micro {} × {} micro-batches × dp {}", r.plan.global_batch_size,
                            q.micro_batch_size, q.num_microbatches, q.dp)},
      {"precision", std::string(models::to_string(q.precision))},
      {"GPU", gpu_summary(c)},
      {"GPUs", fmt::format("{} ({} per node)", r.world_size, c.gpus_per_node)},
      {"intra-node", fmt::format("{}, {} per GPU", c.intra_fabric, format_bandwidth(c.intra_bandwidth))},
      {"NIC", fmt::format("{} × {} ({:.0f} Gb/s) per node", c.nics_per_node, format_bandwidth(c.nic_bandwidth),
                          c.nic_bandwidth * 8 / 1e9)},
      {"topology", c.oversubscription != 1.0 ? fmt::format("{} ({}:1 oversubscribed)", c.topology, c.oversubscription)
                                             : c.topology},
      {"cost source", r.cost_source},
      {"NCCL", r.nccl_version},
      {"framework", r.framework},
      {"plan",
       fmt::format("tp {} × pp {} × dp {} × cp {}, ep {}{}, vpp {}, {}, zero {}, recompute {}, sp {}", q.tp, q.pp, q.dp,
                   q.cp, q.ep, q.expert_tp() != q.tp ? fmt::format(" (etp {})", q.expert_tp()) : std::string(), q.vpp,
                   models::to_string(q.schedule), q.zero_stage, models::to_string(q.recompute),
                   q.sequence_parallel ? "on" : "off")},
  };
  std::string t = R"(<table class="inputs">)";
  for (const auto& [k, v] : rows)
    t += "<tr><th style=\"text-align:left\">" + escape(k) + "</th><td style=\"text-align:left\">" + escape(v) +
         "</td></tr>";
  return t + "</table>";
}

}  // namespace

using html::comm_svg;
using html::memory_svg;

std::string report_html(const Scenario& s, const Simulation& sim, const Layout& layout) {
  const Result& r = sim.result;
  std::string html = "<!doctype html><html><head><meta charset=\"utf-8\"><title>ptsim: " + escape(r.scenario) +
                     "</title><style>" + html::kStyle + "</style></head><body>";
  html += "<h1>" + escape(r.scenario) + "</h1>";
  html += fmt::format(
      "<p>{} on {} × {}. Iteration {}, {:.0f} tokens/s, {:.1f} TFLOP/s per GPU, MFU {:.1f} %, bubble {:.1f} %, "
      "peak memory {} of {} — {}.</p>",
      escape(s.model.name), r.world_size, escape(s.cluster.mixed() ? "(" + gpu_summary(s.cluster) + ")" : s.cluster.gpu.name),
      escape(format_seconds(r.iteration_time_s)),
      r.tokens_per_s, r.model_tflops_per_gpu, 100 * r.mfu, 100 * r.bubble_fraction, escape(format_bytes(r.peak_bytes)),
      escape(format_bytes(r.capacity_bytes)), r.feasible ? "fits" : "does NOT fit");
  html += "<h2>Inputs</h2>" + inputs_panel(s, r);
  html +=
      "<h2>Where the iteration goes</h2><p>Mean over pipeline stages: compute, recompute, communication the compute "
      "stream waited for per dimension, pipeline bubble (with the gradient-norm wait), and the rest.</p>";
  html += html::time_bars_svg({{r.scenario, &sim}});
  const html::Timeline timeline = html::svg_timeline(sim, layout);
  html += fmt::format(
      "<h2>Timeline</h2><p>{} traced rank{} (<code>--trace-ranks</code>), first of each stage first. Each row: "
      "micro-batch marks (F forward, B backward), the compute lane (kernels; shaded where a step waits, grey where "
      "the rank has no step: pipeline bubble or idle) and its communication lane below. Hover for the op, "
      "micro-batch, layer, bytes and duration.</p>",
      timeline.rows, timeline.rows == 1 ? "" : "s");
  html += timeline.svg;
  html += "<h2>Memory per stage</h2><p>Dashed line: the GPU's HBM.</p>" + memory_svg(r);
  html += "<h2>Bytes sent per GPU per iteration</h2>" + comm_svg(r);
  html += "<h2>Summary</h2><pre>" + escape(summary_text(r) + warnings_text(r.warnings)) + "</pre></body></html>\n";
  return html;
}

}  // namespace ptsim::sim
