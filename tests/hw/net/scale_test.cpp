// Scale: a 16,384-GPU 3-tier fat tree builds quickly in modest memory, and a few
// thousand concurrent flows route and share links through FlowNetwork.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "hw/net/cluster.h"
#include "hw/net/collective_time.h"
#include "hw/net/flow_network.h"
#include "hw/net/routing.h"

namespace ptsim::hw::net {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(Scale, FatTree16kGpus) {
  ClusterNetSpec s;
  s.num_gpus = 16384;  // 2048 DGX nodes, 16384 NICs, radix 64
  auto t0 = std::chrono::steady_clock::now();
  Topology t = build_cluster(s);
  const double build_s = seconds_since(t0);
  // 16384 NICs / 32 = 512 leaves > 64 -> 3 tiers: 16 pods x 32 spines, 32 x 32 cores.
  // Vertices: 2048 x 21 + 512 + 512 + 1024 = 45056.
  EXPECT_EQ(t.num_gpus(), 16384);
  EXPECT_EQ(t.num_vertices(), 45056u);
  // Cables: 2048 x 24 + 16384 + 512 x 32 + 512 x 32 = 98304 -> 196608 links.
  EXPECT_EQ(t.num_links(), 196608u);

  t0 = std::chrono::steady_clock::now();
  Router r(t);
  FlowNetwork net(t);
  std::vector<LinkId> path;
  // 4096 flows of 64 MiB from rank 4i: odd i to the same GPU 5 nodes on (the next
  // leaf, through a spine, or the next pod near a pod boundary), even i to the GPU 1024 nodes on (another pod, through
  // a core).
  const double S = 64.0 * 1024 * 1024;
  for (int i = 0; i < 4096; ++i) {
    const int src = 4 * i, dst = (src + 8 * (i % 2 ? 5 : 1024)) % 16384;
    r.route(t.gpu(src), t.gpu(dst), 0, path);
    ASSERT_EQ(path.size(),
              i % 2 && (src / 8 % 128) < 123 ? 8u : 10u);  // +5 nodes stays in the pod (128 nodes) unless near its end
    net.add_flow(path, S, 0, 2);
  }
  const double route_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const double end = net.run_until_idle();
  const double run_s = seconds_since(t0);
  std::printf("16k fat tree: build %.3f s, route 4096 flows %.3f s, run %.3f s (%zu distance tables)\n", build_s,
              route_s, run_s, r.distance_tables_computed());
  // Every byte delivered; no flow beats its 25 GB/s NIC: S / 25 GB/s + 2 us.
  EXPECT_NEAR(net.tag_bytes(2), 4096 * S, 4096.0);
  EXPECT_GE(end, S / 25e9 + 2e-6 - 1e-12);
  // Budgets (brief: build < 1 s); loose enough for a shared 2-core machine.
  EXPECT_LT(build_s, 2.0);
  EXPECT_LT(route_s + run_s, 20.0);
}

}  // namespace
}  // namespace ptsim::hw::net
