#include "sim/io/svg_timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "hw/units.h"
#include "sim/io/report_html_parts.h"

namespace ptsim::sim::html {
namespace {

// Colours as the compare page's stacked bar (compare_html.cpp) where they name the same
// thing: compute blue, recompute olive, TP orange, CP brown, EP red, PP green, DP purple,
// bubble grey.
constexpr std::array<TimelineCatInfo, kNumTimelineCats> kCats = {{
    {"forward", "#1f77b4"},
    {"backward", "#17becf"},
    {"recompute", "#bcbd22"},
    {"optimizer", "#e377c2"},
    {"TP", "#ff7f0e"},
    {"CP", "#8c564b"},
    {"EP", "#d62728"},
    {"PP", "#2ca02c"},
    {"DP / ZeRO", "#9467bd"},
    {"forward step (waiting)", "#d4e4f4"},
    {"backward step (waiting)", "#d2f0f3"},
    {"bubble / idle", "#c7c7c7"},
}};

constexpr int kLeft = 120, kRight = 70, kLegendH = 24;
constexpr int kMarkH = 11, kComputeH = 18, kGap = 2, kCommH = 10, kRowGap = 9;
constexpr int kRowH = kMarkH + kComputeH + kGap + kCommH + kRowGap;

bool is_comm(TimelineCat c) { return c >= TimelineCat::tp && c <= TimelineCat::dp; }

// What the spans of one category in one pixel column add up to (for colour and tooltip).
struct Cell {
  double busy = 0;  // seconds inside the column
  int ops = 0;      // spans starting in the column
  double bytes = 0, seconds = 0;
  int label = -1;   // the spans' label, -2 when they differ
  int mb_lo = -1, mb_hi = -1, layer_lo = -1, layer_hi = -1;

  void add_start(const Span& s) {
    ++ops;
    bytes += s.bytes;
    seconds += to_seconds(s.end - s.start);
    label = label == -1 ? s.label : (label == s.label ? label : -2);
    if (s.microbatch >= 0) {
      mb_lo = mb_lo < 0 ? s.microbatch : std::min(mb_lo, s.microbatch);
      mb_hi = std::max(mb_hi, s.microbatch);
    }
    if (s.layer >= 0) {
      layer_lo = layer_lo < 0 ? s.layer : std::min(layer_lo, s.layer);
      layer_hi = std::max(layer_hi, s.layer);
    }
  }
  void merge(const Cell& o) {
    if (o.ops == 0) return;
    ops += o.ops;
    bytes += o.bytes;
    seconds += o.seconds;
    label = label == -1 ? o.label : (label == o.label ? label : -2);
    if (o.mb_lo >= 0) mb_lo = mb_lo < 0 ? o.mb_lo : std::min(mb_lo, o.mb_lo), mb_hi = std::max(mb_hi, o.mb_hi);
    if (o.layer_lo >= 0)
      layer_lo = layer_lo < 0 ? o.layer_lo : std::min(layer_lo, o.layer_lo), layer_hi = std::max(layer_hi, o.layer_hi);
  }
};

using Column = std::array<Cell, kNumTimelineCats>;

struct Step {  // a run of compute-stream spans of one (phase, micro-batch)
  bool forward;
  int microbatch;
  Tick start, end;
};

std::string range_text(int lo, int hi) { return lo == hi ? std::to_string(lo) : fmt::format("{}–{}", lo, hi); }

// 1, 2 or 5 times a power of ten: about `target` intervals over `total`.
double nice_step(double total, int target) {
  const double raw = total / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

class Drawer {
 public:
  Drawer(const Simulation& sim, int width) : sim_(sim), width_(width) {
    total_ = std::max(1e-12, sim.result.iteration_time_s);
    px_s_ = total_ / width_;
  }

  void row(int index, int rank, int stage, const std::vector<const Span*>& spans) {
    const int y = kLegendH + index * kRowH;
    out_ += fmt::format(R"(<text x="4" y="{}">stage {} · rank {}</text>)", y + kMarkH + 13, stage, rank);
    std::vector<Column> compute(static_cast<std::size_t>(width_)), comm(static_cast<std::size_t>(width_));
    std::vector<Step> steps;
    for (const Span* s : spans) {
      const TimelineCat c = timeline_cat(*s);
      auto& cols = is_comm(c) ? comm : compute;
      const double a = to_seconds(s->start), b = to_seconds(s->end);
      const int x0 = column(a);
      cols[static_cast<std::size_t>(x0)][static_cast<std::size_t>(c)].add_start(*s);
      for (int x = x0; x < width_ && x * px_s_ < b; ++x) {
        const double lo = std::max(a, x * px_s_), hi = std::min(b, (x + 1) * px_s_);
        if (hi > lo) cols[static_cast<std::size_t>(x)][static_cast<std::size_t>(c)].busy += hi - lo;
      }
      if (s->stream == 0 && (s->phase == SpanPhase::forward || s->phase == SpanPhase::backward)) {
        const bool fwd = s->phase == SpanPhase::forward;
        if (!steps.empty() && steps.back().forward == fwd && steps.back().microbatch == s->microbatch)
          steps.back().end = std::max(steps.back().end, s->end);
        else
          steps.push_back({fwd, s->microbatch, s->start, s->end});
      }
    }
    // The step each compute column lies in (most overlap wins), for shading and marks.
    std::vector<int> step_of(static_cast<std::size_t>(width_), -1);
    std::vector<double> step_overlap(static_cast<std::size_t>(width_), 0);
    for (std::size_t k = 0; k < steps.size(); ++k) {
      const double a = to_seconds(steps[k].start), b = to_seconds(steps[k].end);
      for (int x = column(a); x < width_ && x * px_s_ < b; ++x) {
        const double o = std::min(b, (x + 1) * px_s_) - std::max(a, x * px_s_);
        if (o > step_overlap[static_cast<std::size_t>(x)])
          step_overlap[static_cast<std::size_t>(x)] = o, step_of[static_cast<std::size_t>(x)] = static_cast<int>(k);
      }
    }
    lane(compute, y + kMarkH, kComputeH, /*comm=*/false, step_of, steps);
    lane(comm, y + kMarkH + kComputeH + kGap, kCommH, /*comm=*/true, step_of, steps);
    marks(steps, y);
  }

  std::string axis(int rows, int* ticks) {
    const int y = kLegendH + rows * kRowH;
    std::string a = fmt::format(R"(<g class="axis"><line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#333"/>)", kLeft,
                                kLeft + width_, y, y);
    const double step = nice_step(total_, 10);
    *ticks = 0;
    for (int k = 0; k * step <= total_ * (1 + 1e-9); ++k) {
      const double t = k * step;
      const double x = kLeft + t / px_s_;
      a += fmt::format(
          R"(<line class="tick" x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="#333"/><text x="{0:.1f}" y="{3}" text-anchor="middle">{4}</text>)",
          x, y, y + 5, y + 17, k == 0 ? std::string("0") : escape(format_seconds(t)));
      ++*ticks;
    }
    return a + "</g>";
  }

  std::string legend() const {
    std::string g = R"(<g class="legend">)";
    double x = kLeft;
    for (TimelineCat c : drawn_order()) {
      const auto& info = timeline_cat_info(c);
      g += fmt::format(R"(<rect x="{:.0f}" y="5" width="12" height="12" fill="{}" stroke="#666"/>)", x, info.colour);
      g += fmt::format(R"(<text x="{:.0f}" y="15">{}</text>)", x + 16, escape(info.name));
      x += 16 + 6.2 * static_cast<double>(std::string(info.name).size()) + 14;
    }
    return g + "</g>";
  }

  std::vector<TimelineCat> drawn_order() const {
    std::vector<TimelineCat> v;
    for (int c = 0; c < kNumTimelineCats; ++c)
      if (drawn_.count(static_cast<TimelineCat>(c))) v.push_back(static_cast<TimelineCat>(c));
    return v;
  }
  const std::string& body() const { return out_; }

 private:
  int column(double t) const { return std::clamp(static_cast<int>(t / px_s_), 0, width_ - 1); }

  // Runs of equal colour along one lane, one rect each, with the run's tooltip.
  void lane(const std::vector<Column>& cols, int y, int h, bool comm, const std::vector<int>& step_of,
            const std::vector<Step>& steps) {
    if (comm)
      out_ += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="#ffffff" stroke="#dddddd"/>)", kLeft, y,
                          width_, h);
    int run_cat = -1, run_step = -1, run_start = 0;
    Cell run;
    auto flush = [&](int x) {
      if (run_cat >= 0) emit(static_cast<TimelineCat>(run_cat), run, run_step, steps, run_start, x, y, h);
    };
    for (int x = 0; x <= width_; ++x) {
      int cat = -1, st = -1;
      if (x < width_) {
        const Column& col = cols[static_cast<std::size_t>(x)];
        double sum = 0, best = 0;
        for (int c = 0; c < kNumTimelineCats; ++c) {
          sum += col[static_cast<std::size_t>(c)].busy;
          if (col[static_cast<std::size_t>(c)].busy > best) best = col[static_cast<std::size_t>(c)].busy, cat = c;
        }
        if (!comm && sum < 0.5 * px_s_) cat = -1;
        if (comm && sum <= 0) cat = -1;
        if (!comm && cat < 0) {
          st = step_of[static_cast<std::size_t>(x)];
          cat = st < 0 ? static_cast<int>(TimelineCat::idle)
                       : static_cast<int>(steps[static_cast<std::size_t>(st)].forward ? TimelineCat::forward_step
                                                                                     : TimelineCat::backward_step);
        }
      }
      if (cat != run_cat || st != run_step) {
        flush(x);
        run_cat = cat, run_step = st, run_start = x;
        run = Cell{};
      }
      if (x < width_ && cat >= 0) {
        // Spans starting here of the run's category count for its tooltip.
        run.merge(cols[static_cast<std::size_t>(x)][static_cast<std::size_t>(cat)]);
      }
    }
  }

  void emit(TimelineCat c, const Cell& cell, int step, const std::vector<Step>& steps, int x0, int x1, int y, int h) {
    drawn_.insert(c);
    const auto& info = timeline_cat_info(c);
    std::string tip;
    if (c == TimelineCat::idle) {
      tip = "bubble / idle";
    } else if (c == TimelineCat::forward_step || c == TimelineCat::backward_step) {
      const Step& s = steps[static_cast<std::size_t>(step)];
      tip = fmt::format("{} micro-batch {}: waiting (see the communication lane)", s.forward ? "forward" : "backward",
                        s.microbatch);
    } else {
      const auto& labels = sim_.program.labels;
      tip = info.name;
      if (cell.ops == 1 && cell.label >= 0)
        tip += ": " + labels[static_cast<std::size_t>(cell.label)];
      else if (cell.ops > 0)
        tip += fmt::format(": {} ops{}", cell.ops,
                           cell.label >= 0 ? " of " + labels[static_cast<std::size_t>(cell.label)] : std::string());
      if (cell.mb_lo >= 0) tip += ", micro-batch " + range_text(cell.mb_lo, cell.mb_hi);
      if (cell.layer_lo >= 0) tip += ", layer " + range_text(cell.layer_lo, cell.layer_hi);
      if (cell.bytes > 0) tip += ", " + format_bytes(cell.bytes);
      if (cell.ops > 0) tip += ", " + format_seconds(cell.seconds);
    }
    tip += fmt::format(" [{} – {}]", format_seconds(x0 * px_s_), format_seconds(x1 * px_s_));
    out_ += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}</title></rect>)", kLeft + x0,
                        y, x1 - x0, h, info.colour, escape(tip));
  }

  // Micro-batch marks above the compute lane: a tick at every step's start, the
  // micro-batch number where there is room (F forward, B backward).
  void marks(const std::vector<Step>& steps, int y) {
    double last_text = -1e9;
    for (const Step& s : steps) {
      const double x = kLeft + to_seconds(s.start) / px_s_;
      const double w = to_seconds(s.end - s.start) / px_s_;
      out_ += fmt::format(R"(<line class="mb" x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="#555"/>)", x,
                          y + kMarkH - 4, y + kMarkH);
      const std::string text = fmt::format("{}{}", s.forward ? "F" : "B", s.microbatch);
      const double need = 6.0 * static_cast<double>(text.size()) + 2;
      if (w >= need && x >= last_text) {
        out_ += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="9">{}</text>)", x + 1, y + kMarkH - 2, text);
        last_text = x + need;
      }
    }
  }

  const Simulation& sim_;
  int width_;
  double total_, px_s_;
  std::string out_;
  std::set<TimelineCat> drawn_;
};

}  // namespace

const TimelineCatInfo& timeline_cat_info(TimelineCat c) { return kCats[static_cast<std::size_t>(c)]; }

TimelineCat timeline_cat(const Span& s) {
  if (s.dim != kComputeSpan) {
    switch (static_cast<Dim>(s.dim)) {
      case Dim::tp:
        return TimelineCat::tp;
      case Dim::cp:
        return TimelineCat::cp;
      case Dim::ep:
      case Dim::etp:  // the experts' own tensor-parallel collectives
        return TimelineCat::ep;
      case Dim::pp:
        return TimelineCat::pp;
      default:  // dp and edp, and the model-parallel gradient-norm sync (not traced)
        return TimelineCat::dp;
    }
  }
  if (s.flags & kRecompute) return TimelineCat::recompute;
  if (s.phase == SpanPhase::epilogue) return TimelineCat::optimizer;
  if (s.phase == SpanPhase::backward) return TimelineCat::backward;
  return TimelineCat::forward;  // forward steps, and the prologue's parameter loads
}

Timeline svg_timeline(const Simulation& sim, const Layout& layout, int width) {
  // Rows: the traced ranks by stage, then rank.
  std::map<std::pair<int, int>, std::vector<const Span*>> by_rank;
  for (const auto& s : sim.spans) by_rank[{layout.coords(s.rank).pp, s.rank}].push_back(&s);
  for (auto& [key, spans] : by_rank)
    std::stable_sort(spans.begin(), spans.end(), [](const Span* a, const Span* b) { return a->start < b->start; });
  Drawer d(sim, std::max(100, width));
  int index = 0;
  for (const auto& [key, spans] : by_rank) d.row(index++, key.second, key.first, spans);
  Timeline t;
  t.rows = index;
  const std::string axis = d.axis(index, &t.ticks);
  t.legend = d.drawn_order();
  const int height = kLegendH + index * kRowH + 24;
  t.svg = fmt::format(
      R"(<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11" shape-rendering="crispEdges">)",
      kLeft + std::max(100, width) + kRight, height);
  t.svg += d.legend() + d.body() + axis + "</svg>";
  return t;
}

}  // namespace ptsim::sim::html
