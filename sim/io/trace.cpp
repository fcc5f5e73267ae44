#include "sim/io/trace.h"

#include <fmt/format.h>
#include <zlib.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <array>
#include <set>
#include <stdexcept>

namespace ptsim::sim {
namespace {

constexpr const char* kRecomputeSuffix = " (recompute)";

// What the span ran: "fwd", "bwd" or "recompute" before the kernel's or collective's name
// (a recomputed kernel's own " (recompute)" suffix dropped); prologue and epilogue work
// (parameter gathers, gradient reduction after the last step, the optimizer) unprefixed.
std::string span_name(const Span& s, const std::string& label) {
  if (s.flags & kRecompute) {
    std::string base = label;
    const std::size_t n = std::string(kRecomputeSuffix).size();
    if (base.size() > n && base.compare(base.size() - n, n, kRecomputeSuffix) == 0) base.resize(base.size() - n);
    return "recompute " + base;
  }
  switch (s.phase) {
    case SpanPhase::forward:
      return "fwd " + label;
    case SpanPhase::backward:
      return "bwd " + label;
    default:
      return label;
  }
}

// The Trace Event "cat" (filterable in Perfetto): the communication's dimension, else
// forward / backward / recompute / optimizer (epilogue) / setup (prologue).
const char* span_category(const Span& s) {
  if (s.dim != kComputeSpan) return to_string(static_cast<Dim>(s.dim));
  if (s.flags & kRecompute) return "recompute";
  switch (s.phase) {
    case SpanPhase::forward:
      return "forward";
    case SpanPhase::backward:
      return "backward";
    case SpanPhase::prologue:
      return "setup";
    case SpanPhase::epilogue:
      return "optimizer";
  }
  return "compute";
}

}  // namespace

// Trace Event Format (the JSON Chrome and Perfetto load): complete events
// ("ph":"X") with microsecond timestamps, one process per rank shown, one thread
// per stream, and flow events ("s" → "f") from each pipeline send to the receiving
// rank. Written directly, event by event: a 1,024-GPU iteration has millions of
// spans, and a JSON tree of them would need gigabytes.
std::string trace_json(const Simulation& sim, const Layout& layout) {
  const auto& labels = sim.program.labels;
  // JSON-escaped names, once per (label, fwd / bwd / recompute / plain).
  std::vector<std::array<std::string, 4>> names(labels.size());
  auto name_of = [&](const Span& s) -> const std::string& {
    const int variant = (s.flags & kRecompute) ? 2
                        : s.phase == SpanPhase::forward  ? 0
                        : s.phase == SpanPhase::backward ? 1
                                                         : 3;
    std::string& n = names[s.label][static_cast<std::size_t>(variant)];
    if (n.empty()) n = nlohmann::json(span_name(s, labels[s.label])).dump();
    return n;
  };
  std::set<std::pair<int, int>> threads;
  std::set<int> traced;
  for (const auto& s : sim.spans) traced.insert(s.rank);
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out.reserve(sim.spans.size() * 150 + 4096);
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  std::uint64_t flow_id = 0;
  for (const auto& s : sim.spans) {
    threads.insert({s.rank, s.stream});
    sep();
    const double ts = static_cast<double>(s.start) / 1e3, dur = static_cast<double>(s.end - s.start) / 1e3;
    fmt::format_to(std::back_inserter(out), R"({{"name":{},"cat":"{}","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f})",
                   name_of(s), span_category(s), s.rank, s.stream, ts, dur);
    bool has_args = false;
    auto arg = [&](const char* key) {
      out += has_args ? "," : ",\"args\":{";
      has_args = true;
      out += key;
    };
    if (s.microbatch >= 0) arg("\"microbatch\":"), fmt::format_to(std::back_inserter(out), "{}", s.microbatch);
    if (s.layer >= 0) arg("\"layer\":"), fmt::format_to(std::back_inserter(out), "{}", s.layer);
    if (s.bytes > 0) arg("\"bytes\":"), fmt::format_to(std::back_inserter(out), "{:.0f}", s.bytes);
    if (s.peer >= 0) arg("\"to_rank\":"), fmt::format_to(std::back_inserter(out), "{}", s.peer);
    out += has_args ? "}}" : "}";
    // A pipeline message: an arrow from the send to the receiver's next slice after arrival
    // (a flow end without "bp":"e" binds to the next slice on its thread).
    if (s.peer >= 0 && traced.count(s.peer)) {
      ++flow_id;
      sep();
      fmt::format_to(std::back_inserter(out),
                     R"({{"name":"pp message","cat":"pp","ph":"s","id":{},"pid":{},"tid":{},"ts":{:.3f}}})", flow_id,
                     s.rank, s.stream, ts);
      sep();
      fmt::format_to(std::back_inserter(out),
                     R"({{"name":"pp message","cat":"pp","ph":"f","id":{},"pid":{},"tid":0,"ts":{:.3f}}})", flow_id,
                     s.peer, static_cast<double>(s.end) / 1e3);
    }
  }
  std::set<int> processes;
  for (const auto& [rank, stream] : threads) processes.insert(rank);
  for (int rank : processes) {
    const Coords c = layout.coords(rank);
    sep();
    fmt::format_to(
        std::back_inserter(out),
        R"x({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {} (pp {}, dp {}, cp {}, tp {})"}}}})x",
        rank, rank, c.pp, c.dp, c.cp, c.tp);
    sep();
    fmt::format_to(std::back_inserter(out),
                   R"({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})", rank, rank);
  }
  for (const auto& [rank, stream] : threads) {
    const std::string name = stream == 0                    ? "compute"
                             : stream - 1 == kGatherChannel ? "dp param gather"
                             : stream - 1 == kExpertGatherChannel
                                 ? "edp param gather"
                                 : std::string(to_string(static_cast<Dim>(stream - 1))) + " comm";
    sep();
    fmt::format_to(std::back_inserter(out),
                   R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})", rank, stream, name);
  }
  // Network summary lines (busiest links and their utilisation) travel with the
  // trace, shown by ui.perfetto.dev under "Info and stats" → metadata.
  const nlohmann::json other = {{"scenario", sim.result.scenario},
                                {"iteration_time_s", sim.result.iteration_time_s},
                                {"network", sim.result.notes}};
  out += "\n],\"otherData\":" + other.dump() + "}\n";
  return out;
}

bool wants_gzip(const std::string& path) { return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0; }

// One deflate stream with a gzip wrapper (windowBits 15 + 16) and zlib's default header:
// modification time 0 and no file name, so equal text gives equal bytes. Fed in pieces of
// at most 1 GiB (zlib counts in 32-bit unsigned).
std::string gzip(const std::string& text) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib: deflateInit2 failed");
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  std::string out;
  std::string buf(1 << 20, '\0');
  std::size_t pos = 0;
  int rc = Z_OK;
  do {
    const std::size_t n = std::min(kPiece, text.size() - pos);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data() + pos));
    z.avail_in = static_cast<uInt>(n);
    pos += n;
    const int flush = pos == text.size() ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf.data());
      z.avail_out = static_cast<uInt>(buf.size());
      rc = deflate(&z, flush);
      if (rc == Z_STREAM_ERROR) {
        deflateEnd(&z);
        throw std::runtime_error("zlib: deflate failed");
      }
      out.append(buf.data(), buf.size() - z.avail_out);
    } while (z.avail_out == 0);
  } while (pos < text.size());
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: deflate did not finish");
  return out;
}

}  // namespace ptsim::sim
