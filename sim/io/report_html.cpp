#include "sim/io/report_html.h"
#include "sim/io/report_html_parts.h"
#include "sim/io/result_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

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

namespace {
// Colour of a span by what it is: compute, TP/EP/CP collectives, pipeline,
// data-parallel traffic.
const char* colour(const std::string& label, int stream) {
  if (stream != 0) return "#9467bd";
  if (label.rfind("tp", 0) == 0) return "#ff7f0e";
  if (label.rfind("ep", 0) == 0) return "#d62728";
  if (label.rfind("cp", 0) == 0) return "#8c564b";
  if (label.rfind("dp", 0) == 0 || label.rfind("zero", 0) == 0) return "#9467bd";
  if (label.find("recompute") != std::string::npos) return "#bcbd22";
  return "#1f77b4";
}
}  // namespace

std::string timeline_svg(const Simulation& sim, const Layout& layout, int stages) {
  const double width = 1100, row = 22, left = 70;
  const double total = std::max(1e-12, sim.result.iteration_time_s);
  std::map<int, int> row_of_rank;  // first traced rank of each stage
  for (const auto& sp : sim.spans) {
    const Coords c = layout.coords(sp.rank);
    if (c.tp == 0 && c.cp == 0 && c.dp == 0) row_of_rank.emplace(sp.rank, c.pp);
  }
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">)",
      width + left + 10, row * (stages + 1) + 20);
  for (int st = 0; st < stages; ++st) svg += fmt::format(R"(<text x="4" y="{}">stage {}</text>)", row * st + 15, st);
  // Each pixel column of a row shows what occupied most of its time (idle when
  // less than half of it was busy), so the file stays small at any scale.
  const int px = static_cast<int>(width);
  std::vector<std::map<const char*, double>> busy(static_cast<std::size_t>(stages * px));
  const double px_seconds = total / width;
  for (const auto& sp : sim.spans) {
    auto it = row_of_rank.find(sp.rank);
    if (it == row_of_rank.end() || sp.stream != 0) continue;
    const char* fill = colour(sim.program.labels[sp.label], sp.stream);
    const double a = to_seconds(sp.start), b = to_seconds(sp.end);
    for (int x = static_cast<int>(a / px_seconds); x < px && x * px_seconds < b; ++x) {
      const double lo = std::max(a, x * px_seconds), hi = std::min(b, (x + 1) * px_seconds);
      if (hi > lo) busy[static_cast<std::size_t>(it->second * px + x)][fill] += hi - lo;
    }
  }
  for (int r = 0; r < stages; ++r) {
    const char* run = nullptr;
    int run_start = 0;
    for (int x = 0; x <= px; ++x) {
      const char* fill = nullptr;
      if (x < px) {
        double sum = 0, best = 0;
        for (const auto& [f, t] : busy[static_cast<std::size_t>(r * px + x)]) {
          sum += t;
          if (t > best) best = t, fill = f;
        }
        if (sum < 0.5 * px_seconds) fill = nullptr;
      }
      if (fill != run) {
        if (run)
          svg += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>)", left + run_start, row * r + 3,
                             x - run_start, row - 6, run);
        run = fill;
        run_start = x;
      }
    }
  }
  svg += fmt::format(R"(<text x="{}" y="{}">0</text><text x="{}" y="{}" text-anchor="end">{}</text>)", left,
                     row * stages + 15, left + width, row * stages + 15, escape(format_seconds(total)));
  svg += "</svg>";
  return svg;
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

using html::comm_svg;
using html::escape;
using html::memory_svg;
using html::timeline_svg;

std::string report_html(const Scenario& s, const Simulation& sim, const Layout& layout) {
  const Result& r = sim.result;
  std::string html = "<!doctype html><html><head><meta charset=\"utf-8\"><title>ptsim: " + escape(r.scenario) +
                     "</title><style>" + html::kStyle + "</style></head><body>";
  html += "<h1>" + escape(r.scenario) + "</h1>";
  html += fmt::format(
      "<p>{} on {} × {}. Iteration {}, {:.1f} TFLOP/s per GPU, MFU {:.1f} %, bubble {:.1f} %, peak memory {} of {} — "
      "{}.</p>",
      escape(s.model.name), r.world_size, escape(s.cluster.gpu.name), escape(format_seconds(r.iteration_time_s)),
      r.model_tflops_per_gpu, 100 * r.mfu, 100 * r.bubble_fraction, escape(format_bytes(r.peak_bytes)),
      escape(format_bytes(r.capacity_bytes)), r.feasible ? "fits" : "does NOT fit");
  html +=
      "<h2>Pipeline timeline</h2><p>Compute stream of the first rank of each stage: blue compute, orange TP, red EP, "
      "brown CP, olive recompute; gaps are bubbles and exposed communication.</p>";
  html += timeline_svg(sim, layout, r.plan.par.pp);
  html += "<h2>Memory per stage</h2>" + memory_svg(r);
  html += "<h2>Bytes sent per GPU per iteration</h2>" + comm_svg(r);
  html += "<h2>Summary</h2><pre>" + escape(summary_text(r) + warnings_text(r)) + "</pre></body></html>\n";
  return html;
}

}  // namespace ptsim::sim
