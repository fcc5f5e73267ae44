#include "calibration/nccl_tests_import.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
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
  static constexpr std::pair<const char*, const char*> kNames[] = {
      {"all_reduce", "all-reduce"}, {"all_gather", "all-gather"}, {"reduce_scatter", "reduce-scatter"},
      {"alltoall", "all-to-all"},   {"sendrecv", "send-recv"},    {"broadcast", "broadcast"},
      {"reduce", "reduce"}};  // "reduce" last: it is a prefix of the others' names
  for (const auto& [tag, op] : kNames)
    if (n.find(tag) != std::string::npos) return op;
  return "";
}

NcclTestsLog parse_nccl_tests(const std::string& text, const std::string& source) {
  NcclTestsLog log;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  int rank_lines = 0, ngpus = 0, nthreads = 1;
  while (std::getline(in, line)) {
    ++line_no;
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
        log.op = nccl_tests_op_name(test);
        if (log.op.empty())
          throw std::invalid_argument(fmt::format("{}:{}: unknown nccl-tests program '{}'", source, line_no, test));
      }
      for (std::size_t i = 0; i + 1 < tok.size(); ++i) {
        long long v = 0;
        if (tok[i] == "nGpus" && parse_int(tok[i + 1], v)) ngpus = static_cast<int>(v);
        if (tok[i] == "nThread" && parse_int(tok[i + 1], v)) nthreads = static_cast<int>(v);
      }
      if (tok.size() >= 3 && (tok[0] == "#" && tok[1] == "Rank")) ++rank_lines;
      continue;
    }
    long long size = 0, count = 0;
    if (tok.size() < 12 || !parse_int(tok[0], size) || !parse_int(tok[1], count)) continue;  // NCCL INFO etc.
    // With the root column (nccl-tests ≥ 2.10) the row has 13 fields, without it 12.
    const std::size_t time_col = tok.size() >= 13 ? 5 : 4;
    double time_us = 0;
    if (!parse_double(tok[time_col], time_us) || !(time_us > 0))
      throw std::invalid_argument(
          fmt::format("{}:{}: cannot read the out-of-place time '{}' (us)", source, line_no, tok[time_col]));
    if (size <= 0) continue;  // 0-byte rows carry no bandwidth information
    log.points.push_back({"", 0, "nccl", static_cast<double>(size), time_us * 1e-6});
  }
  if (log.op.empty()) log.op = nccl_tests_op_name(std::filesystem::path(source).filename().string());
  if (log.op.empty())
    throw std::invalid_argument(
        fmt::format("{}: cannot tell which collective this is: no '# Collective test "
                    "starting:' line and the file name names none (e.g. all_reduce_perf.log)",
                    source));
  log.ranks = rank_lines > 0 ? rank_lines : ngpus * nthreads;
  if (log.ranks <= 0)
    throw std::invalid_argument(
        fmt::format("{}: no '#  Rank' or '# nThread .. nGpus ..' header lines: rank count unknown", source));
  if (log.points.empty())
    throw std::invalid_argument(fmt::format("{}: no data rows (size count type ... time)", source));
  for (auto& p : log.points) {
    p.op = log.op;
    p.ranks = log.ranks;
  }
  return log;
}

NcclTestsLog load_nccl_tests(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot open nccl-tests log: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_nccl_tests(ss.str(), path);
}

}  // namespace ptsim::calibration
