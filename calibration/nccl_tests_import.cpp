#include "calibration/nccl_tests_import.h"

#include <fmt/format.h>

#include "hw/input_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ptsim::calibration {
namespace {

bool parse_int(const std::string& s, long long& out) {
  if (s.empty()) return false;
  std::size_t pos = 0;
  try {
    out = std::stoll(s, &pos);
  } catch (const std::exception&) {
    return false;
  }
  return pos == s.size();
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  std::size_t pos = 0;
  try {
    out = std::stod(s, &pos);
  } catch (const std::exception&) {
    return false;
  }
  return pos == s.size();
}

}  // namespace

std::string nccl_tests_op_name(const std::string& test_name) {
  std::string n = test_name;
  if (const auto slash = n.find_last_of('/'); slash != std::string::npos) n = n.substr(slash + 1);
  for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static constexpr std::pair<const char*, const char*> kNames[] = {
      {"all_reduce", "all-reduce"},
      {"allreduce", "all-reduce"},
      {"all-reduce", "all-reduce"},
      {"all_gather", "all-gather"},
      {"allgather", "all-gather"},
      {"all-gather", "all-gather"},
      {"reduce_scatter", "reduce-scatter"},
      {"reducescatter", "reduce-scatter"},
      {"reduce-scatter", "reduce-scatter"},
      {"alltoall", "all-to-all"},
      {"all_to_all", "all-to-all"},
      {"all-to-all", "all-to-all"},
      {"sendrecv", "send-recv"},
      {"send_recv", "send-recv"},
      {"send-recv", "send-recv"},
      {"broadcast", "broadcast"},
      {"reduce", "reduce"}};  // "reduce" last: a part of the others' names
  for (const auto& [tag, op] : kNames)
    if (n.find(tag) != std::string::npos) return op;
  return "";
}

namespace {

constexpr std::size_t kMaxLineChars = 4096;  // nccl-tests rows are ~150 characters

// What the rows say about the collective: the redop column ("none" for data movement
// only), the root column (>= 0 for rooted collectives) and busbw/algbw, which nccl-tests
// sets to 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all,
// and 1 for broadcast, reduce and send-recv.
struct RowEvidence {
  int rows = 0;
  bool any_redop = false, any_none = false;
  bool root_column = false, any_rooted = false, any_unrooted = false;
  double best_algbw = 0, ratio = 0;  // busbw/algbw of the row with the largest algbw (most digits)
};

struct OpTraits {
  const char* op;
  bool reduces;
  bool rooted;
  int ratio_kind;  // 0: 2(n-1)/n, 1: (n-1)/n, 2: 1
};
constexpr OpTraits kOps[] = {{"all-reduce", true, false, 0},  {"reduce-scatter", true, false, 1},
                             {"reduce", true, true, 2},       {"all-gather", false, false, 1},
                             {"all-to-all", false, false, 1}, {"send-recv", false, false, 2},
                             {"broadcast", false, true, 2}};

// Whether `t` agrees with the evidence for `ranks` ranks.
bool consistent(const OpTraits& t, const RowEvidence& ev, int ranks) {
  if (ev.rows == 0) return true;
  if (t.reduces ? ev.any_none : ev.any_redop) return false;
  if (ev.root_column && (t.rooted ? ev.any_unrooted : ev.any_rooted)) return false;
  if (ev.best_algbw > 0 && ranks > 0) {
    const double n = ranks;
    const double expect = t.ratio_kind == 0 ? 2 * (n - 1) / n : t.ratio_kind == 1 ? (n - 1) / n : 1.0;
    if (std::abs(ev.ratio - expect) > 0.05 * expect + 0.01) return false;
  }
  return true;
}

std::vector<std::string> consistent_ops(const RowEvidence& ev, int ranks) {
  std::vector<std::string> out;
  for (const auto& t : kOps)
    if (consistent(t, ev, ranks)) out.emplace_back(t.op);
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

}  // namespace

NcclTestsLog parse_nccl_tests(const std::string& text, const std::string& source, const std::string& op) {
  NcclTestsLog log;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  int rank_lines = 0, ngpus = 0, nthreads = 1;
  std::string header_op;
  int header_line = 0;
  RowEvidence ev;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.size() > kMaxLineChars)
      throw std::invalid_argument(fmt::format("{}:{}: line of {} characters, more than {}: not an nccl-tests log",
                                              source, line_no, line.size(), kMaxLineChars));
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string t; ls >> t;) tok.push_back(t);
    if (tok.empty()) continue;
    if (tok[0][0] == '#') {
      // Header lines: "# Collective test starting: all_reduce_perf",
      // "# nThread 1 nGpus 8 minBytes ...", "#  Rank  0 Group  0 Pid ... device  0 [...] NVIDIA H100".
      if (const auto at = line.find("Collective test starting:"); at != std::string::npos) {
        std::istringstream name(line.substr(at + std::strlen("Collective test starting:")));
        std::string test;
        name >> test;
        header_op = nccl_tests_op_name(test);
        header_line = line_no;
        if (header_op.empty())
          throw std::invalid_argument(fmt::format("{}:{}: unknown nccl-tests program '{}'", source, line_no, test));
      }
      for (std::size_t i = 0; i + 1 < tok.size(); ++i) {
        long long v = 0;
        if (tok[i] == "nGpus" && parse_int(tok[i + 1], v)) ngpus = static_cast<int>(std::clamp(v, 0LL, 1LL << 24));
        if (tok[i] == "nThread" && parse_int(tok[i + 1], v)) nthreads = static_cast<int>(std::clamp(v, 0LL, 1LL << 16));
      }
      if (tok.size() >= 3 && (tok[0] == "#" && tok[1] == "Rank")) ++rank_lines;
      continue;
    }
    long long size = 0, count = 0;
    if (tok.size() < 2 || !parse_int(tok[0], size) || !parse_int(tok[1], count)) continue;  // NCCL INFO etc.
    // A data row: size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong.
    // With the root column (nccl-tests >= 2.10) the row has 13 fields, without it 12.
    if (tok.size() != 12 && tok.size() != 13)
      throw std::invalid_argument(fmt::format(
          "{}:{}: a data row with {} fields, expected 12 or 13 (size count type redop [root] time algbw busbw "
          "#wrong time algbw busbw #wrong): truncated?",
          source, line_no, tok.size()));
    const bool has_root = tok.size() == 13;
    const std::size_t time_col = has_root ? 5 : 4;
    double time_us = 0;
    if (!parse_double(tok[time_col], time_us) || !(time_us > 0) || !std::isfinite(time_us))
      throw std::invalid_argument(
          fmt::format("{}:{}: cannot read the out-of-place time '{}' (us)", source, line_no, tok[time_col]));
    double algbw = 0, busbw = 0;
    if (!parse_double(tok[time_col + 1], algbw) || !parse_double(tok[time_col + 2], busbw) || !(algbw >= 0) ||
        !(busbw >= 0))
      throw std::invalid_argument(fmt::format("{}:{}: cannot read algbw '{}' / busbw '{}' (GB/s)", source, line_no,
                                              tok[time_col + 1], tok[time_col + 2]));
    ++ev.rows;
    (tok[3] == "none" ? ev.any_none : ev.any_redop) = true;
    if (has_root) {
      long long root = 0;
      if (!parse_int(tok[4], root))
        throw std::invalid_argument(fmt::format("{}:{}: cannot read the root '{}'", source, line_no, tok[4]));
      ev.root_column = true;
      (root >= 0 ? ev.any_rooted : ev.any_unrooted) = true;
    }
    if (algbw > ev.best_algbw && std::isfinite(algbw) && std::isfinite(busbw)) {
      ev.best_algbw = algbw;
      ev.ratio = busbw / algbw;
    }
    if (size <= 0) continue;  // 0-byte rows carry no bandwidth information
    log.points.push_back({"", 0, "nccl", static_cast<double>(size), time_us * 1e-6});
  }
  // nGpus × nThread in 64 bits: both are clamped above, their product is not.
  const long long header_ranks = static_cast<long long>(ngpus) * nthreads;
  if (rank_lines == 0 && header_ranks > (1LL << 20))
    throw std::invalid_argument(
        fmt::format("{}: nGpus × nThread = {} ranks is out of range (at most 1048576)", source, header_ranks));
  log.ranks = rank_lines > 0 ? rank_lines : static_cast<int>(header_ranks);
  if (log.ranks <= 0)
    throw std::invalid_argument(
        fmt::format("{}: no '#  Rank' or '# nThread .. nGpus ..' header lines: rank count unknown", source));
  if (log.points.empty())
    throw std::invalid_argument(fmt::format("{}: no data rows (size count type ... time)", source));

  // The collective: --op, else the header line, else the rows' content; the file name must agree.
  const auto fits = consistent_ops(ev, log.ranks);
  const std::string name_op = nccl_tests_op_name(std::filesystem::path(source).filename().string());
  const std::string evidence = ev.best_algbw > 0
                                   ? fmt::format("the rows (redop, root, busbw/algbw = {:.3f} for {} ranks) fit {}",
                                                 ev.ratio, log.ranks, join(fits))
                                   : fmt::format("the rows (redop, root) fit {}", join(fits));
  if (!op.empty()) {
    if (!contains(fits, op))
      throw std::invalid_argument(fmt::format("{}: --op {} does not match the log: {}", source, op, evidence));
    log.op = op;
  } else if (!header_op.empty()) {
    if (!contains(fits, header_op))
      throw std::invalid_argument(
          fmt::format("{}:{}: the header names {} but {}", source, header_line, header_op, evidence));
    log.op = header_op;
  } else if (!name_op.empty()) {
    if (!contains(fits, name_op))
      throw std::invalid_argument(fmt::format("{}: the file name says {} but {}", source, name_op, evidence));
    log.op = name_op;  // the name picks among the ops the rows fit
  } else if (fits.size() == 1) {
    log.op = fits.front();
  } else {
    throw std::invalid_argument(
        fmt::format("{}: cannot tell which collective this is: no '# Collective test starting:' line, the file name "
                    "names none (e.g. all_reduce_perf.log) and {}; give it with --op",
                    source, evidence));
  }
  if (op.empty() && !name_op.empty() && name_op != log.op)
    throw std::invalid_argument(
        fmt::format("{}: the file name says {} but the log is {} ({})", source, name_op, log.op, "its header line"));
  for (auto& p : log.points) {
    p.op = log.op;
    p.ranks = log.ranks;
  }
  return log;
}

NcclTestsLog load_nccl_tests(const std::string& path, const std::string& op) {
  return parse_nccl_tests(hw::read_input_file(path, "nccl-tests log"), path, op);
}

}  // namespace ptsim::calibration
