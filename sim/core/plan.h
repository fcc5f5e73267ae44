// A parallel plan: the models' Parallelism plus what only the replay needs.
#pragma once
#include <cstdint>

#include "models/parallelism.h"

namespace ptsim::sim {

struct Plan {
  models::Parallelism par;
  std::int64_t global_batch_size = 1;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  bool overlap_p2p = true;  // PP send/recv on their own stream, overlapping compute

  int world_size() const { return par.dp * par.tp * par.pp * par.cp; }
};

}  // namespace ptsim::sim
