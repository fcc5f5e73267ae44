// `ptsim calibrate`: sweep the kernels on this machine, fit, write a cost table atomically;
// or import nccl-tests logs into a table's collective section.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "calibration/backend.h"
#include "calibration/sweep.h"
#include "hw/cost_table.h"

namespace ptsim::calibration {

// Options of `ptsim calibrate` (the CLI maps its flags one to one):
//   --out FILE                 -> out
//   --name NAME                -> name
//   --quick                    -> quick
//   --cpu                      -> cpu
//   --import-nccl-tests FILE…  -> import_nccl_tests
//   --warmup N / --repeats N   -> timing.warmup / timing.repeats
//   --warmup-seconds S         -> timing.warmup_seconds (GPU backend only)
struct CalibrateOptions {
  // Where the table goes. Empty: calibration/tables/<device-slug>.yaml (CPU backend:
  // calibration/tables/cpu-<cpu-slug>.yaml), relative to the working directory. Written
  // atomically: an interrupted run leaves the previous file (or none), never half a table.
  std::string out;
  // The table's name (the simulator's `cost_source`). Empty: the file name without .yaml.
  std::string name;
  // A smaller sweep: minutes on a GPU, about a second on the CPU.
  bool quick = false;
  // Measure with the CPU backend instead of the GPU (no CUDA needed; for CI and examples).
  bool cpu = false;
  // Import mode when non-empty: no kernels run; each nccl-tests log becomes collective
  // points (algorithm "nccl") plus α–β fits. If `out` already holds a table, its
  // collective section is replaced and everything else kept; otherwise a new table with
  // backend "nccl-tests" is written. `out` is then required.
  std::vector<std::string> import_nccl_tests;
  // --op: the collective of every imported log (all-reduce, all-gather, ...), when its
  // header and file name do not say; checked against the log's rows.
  std::string import_op;
  TimingConfig timing;
  // Progress lines ("[gemm 3/45] 4096x12288x4096 bf16  1.23 ms  110 TFLOP/s (roofline 989)")
  // and one-line errors go here; nullptr = silent.
  std::ostream* progress = nullptr;
  std::ostream* errors = nullptr;
};

// Exit codes (CONTRACT.md §1): 0 written; 2 bad input (bad option, unreadable or malformed
// nccl-tests log, an output that cannot be written; the message names the file); 3 no CUDA device for a GPU calibration
// ("no CUDA device found: ...", or the CUDA module or a library it needs is missing; one
// line on `errors`); 1 internal error.
int run_calibrate(const CalibrateOptions& options);

// The sweep itself, for tests and callers with their own backend: measures every point of
// `sweep` on `backend`, fits, and returns the table (not written).
hw::CostTable calibrate(Backend& backend, const Sweep& sweep, const std::string& name, std::ostream* progress);

// Lower-case, [a-z0-9-] only: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3".
std::string slug(const std::string& text);

}  // namespace ptsim::calibration
