#include "models/parallelism.h"

#include <stdexcept>
#include <string>

namespace ptsim::models {

namespace {

template <class E, std::size_t N>
std::string_view name_in(const Spelling<E> (&table)[N], E value, const char* enum_name) {
  for (const auto& s : table)
    if (s.value == value) return s.name;
  throw std::invalid_argument(std::string("unknown ") + enum_name + " value " +
                              std::to_string(static_cast<int>(value)));
}

}  // namespace

std::string_view to_string(Precision p) { return name_in(kPrecisionNames, p, "Precision"); }
std::string_view to_string(Recompute r) { return name_in(kRecomputeNames, r, "Recompute"); }
std::string_view to_string(Schedule s) { return name_in(kScheduleNames, s, "Schedule"); }
std::string_view to_string(AttentionImpl a) { return name_in(kAttentionImplNames, a, "AttentionImpl"); }
std::string_view to_string(StateLayout l) { return name_in(kStateLayoutNames, l, "StateLayout"); }

double compute_bytes(Precision p) {
  switch (p) {
    case Precision::fp32:
      return 4.0;
    case Precision::fp16:
    case Precision::bf16:
      return 2.0;
    case Precision::fp8:
      return 1.0;  // E4M3/E5M2 GEMM operands (Transformer Engine)
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
