// Import of nccl-tests logs (github.com/NVIDIA/nccl-tests: all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf, sendrecv_perf, broadcast_perf, reduce_perf) into the
// collective part of a cost table: users already have these logs from their real cluster.
#pragma once

#include <string>
#include <vector>

#include "hw/cost_table.h"

namespace ptsim::calibration {

struct NcclTestsLog {
  std::string op;  // cost-table op name: all-reduce, all-gather, reduce-scatter, all-to-all, send-recv, ...
  int ranks = 0;   // number of "#  Rank N ..." device lines
  std::vector<hw::CollectivePoint> points;  // algorithm "nccl"; out-of-place time; bytes = `size`
};

// Maps "all_reduce_perf" / "all_reduce" / "alltoall" ... to the table's op name; "" if unknown.
std::string nccl_tests_op_name(const std::string& test_name);

// Parses one log. Data rows are
//   size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong
// (out-of-place then in-place, times in us); '#' lines and NCCL INFO lines are skipped; a
// row of another length (truncated) or a line over 4096 characters is an error.
// The op is `op` when given, else the "# Collective test starting: X_perf" header, else
// `source`'s file name (e.g. all_gather_perf.log), else what the rows say; it must agree
// with the rows (redop column, root column, busbw/algbw = 2(n-1)/n for all-reduce,
// (n-1)/n for all-gather/reduce-scatter/all-to-all, 1 for broadcast/reduce/send-recv),
// and the file name must agree with the header. Throws std::invalid_argument naming
// `source` (and the line) on bad input.
NcclTestsLog parse_nccl_tests(const std::string& text, const std::string& source, const std::string& op = {});
NcclTestsLog load_nccl_tests(const std::string& path, const std::string& op = {});

}  // namespace ptsim::calibration
