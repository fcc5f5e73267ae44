#include "hw/net/busbw.h"

#include <fmt/format.h>
#include <stdexcept>

namespace ptsim::hw::net {

double busbw_factor(CollectiveKind kind, int n) {
  if (n < 1) throw std::invalid_argument(fmt::format("busbw: group size must be >= 1, got {}", n));
  const double nn = n;
  switch (kind) {
    case CollectiveKind::all_reduce:
      return 2 * (nn - 1) / nn;
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_gather:
    case CollectiveKind::all_to_all:
      return (nn - 1) / nn;
    case CollectiveKind::broadcast:
    case CollectiveKind::send_recv:
      return 1;
  }
  return 1;
}

BytesPerSecond algbw(Bytes bytes, Seconds seconds) {
  if (!(seconds > 0)) throw std::invalid_argument(fmt::format("algbw: time must be > 0, got {}", seconds));
  return bytes / seconds;
}

BytesPerSecond busbw(CollectiveKind kind, int n, Bytes bytes, Seconds seconds) {
  return algbw(bytes, seconds) * busbw_factor(kind, n);
}

Bytes wire_bytes_per_rank(CollectiveKind kind, int n, Bytes bytes) { return busbw_factor(kind, n) * bytes; }

}  // namespace ptsim::hw::net
