// Bandwidth conventions of nccl-tests (NVIDIA/nccl-tests doc/PERFORMANCE.md), so a
// simulated collective can be compared with a user's own nccl-tests output:
//   algbw = S / t
//   busbw = algbw × factor, factor = 2(n−1)/n all-reduce; (n−1)/n reduce-scatter,
//           all-gather, all-to-all; 1 broadcast and send/recv.
// busbw is the per-link bandwidth an optimal ring would need, hence comparable with the
// hardware's peak whatever n is.
#pragma once

#include "hw/net/collectives.h"

namespace ptsim::hw::net {

double busbw_factor(CollectiveKind kind, int n);     // throws on n < 1
BytesPerSecond algbw(Bytes bytes, Seconds seconds);  // throws on seconds <= 0
BytesPerSecond busbw(CollectiveKind kind, int n, Bytes bytes, Seconds seconds);
// Bytes each rank sends on the wire in an optimal algorithm: factor × S
// (CONTRACT §3 comm_bytes_per_gpu: a ring all-reduce sends 2(n−1)/n·S).
Bytes wire_bytes_per_rank(CollectiveKind kind, int n, Bytes bytes);

}  // namespace ptsim::hw::net
