#include "models/parallelism.h"

#include <stdexcept>
#include <string>

namespace ptsim::models {

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
    case Precision::fp8: return "fp8";
  }
  throw std::invalid_argument("unknown Precision value " + std::to_string(static_cast<int>(p)));
}

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  throw std::invalid_argument("unknown Recompute value " + std::to_string(static_cast<int>(r)));
}

std::string_view to_string(Schedule s) {
  // Spelled as the scenario key `parallel.pipeline_schedule` (CONTRACT §2).
  switch (s) {
    case Schedule::gpipe: return "gpipe";
    case Schedule::one_f_one_b: return "1f1b";
    case Schedule::interleaved_1f1b: return "interleaved-1f1b";
  }
  throw std::invalid_argument("unknown Schedule value " + std::to_string(static_cast<int>(s)));
}

std::string_view to_string(AttentionImpl a) {
  switch (a) {
    case AttentionImpl::flash: return "flash";
    case AttentionImpl::naive: return "naive";
  }
  throw std::invalid_argument("unknown AttentionImpl value " + std::to_string(static_cast<int>(a)));
}

double compute_bytes(Precision p) {
  switch (p) {
    case Precision::fp32: return 4.0;
    case Precision::fp16:
    case Precision::bf16: return 2.0;
    case Precision::fp8: return 1.0;  // E4M3/E5M2 GEMM operands (Transformer Engine)
  }
  throw std::invalid_argument("unknown Precision value " + std::to_string(static_cast<int>(p)));
}

double activation_element_bytes(Precision p) {
  // Transformer Engine's fp8 recipe casts GEMM inputs to fp8 on the fly; the
  // tensors that flow between modules (and are saved for backward by the
  // non-GEMM ops) stay in the bf16 autocast dtype.
  return p == Precision::fp32 ? 4.0 : 2.0;
}

}  // namespace ptsim::models
