#include "hw/net/nccl_tuning.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <stdexcept>

namespace ptsim::hw::net {
namespace {

constexpr int kAlgos = 7, kProtos = 3;
enum Hw { kNvlink, kPci, kNet };
using PerAlgo = std::array<std::array<double, kProtos>, kAlgos>;  // [algo][proto], µs

int idx(NcclAlgo a) { return static_cast<int>(a); }
int idx(NcclProto p) { return static_cast<int>(p); }
int log2i(double x) { return x < 1 ? -1 : std::bit_width(static_cast<unsigned long long>(x)) - 1; }

// baseLat (µs), rows Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT
// (PAT has no row: its latency is a formula of its own).
PerAlgo base_latency(NcclVersion v) {
  // v2.18.3-1 tuning.cc: Tree {6.8, 14.0, 0}, Ring {6.6, 14.0, 8.4}, CollNet {6.8, 14.0, 0},
  // NVLS and NVLS-tree Simple 23.
  if (v.minor <= 18)
    return {{{6.8, 14.0, 0}, {6.6, 14.0, 8.4}, {6.8, 14.0, 0}, {6.8, 14.0, 0}, {0, 0, 23}, {0, 0, 23}}};
  // v2.19.3-1 .. v2.22.3-1: NVLS moved its base latency into hwLat; Tree Simple 0.
  if (v.minor <= 22) return {{{6.8, 14.0, 0}, {6.6, 14.0, 8.4}}};
  // v2.23.4-1 .. v2.30.7-1: Tree Simple 8.4 (from v2.28.3-1 PAT's 8 µs base sits in this table too).
  return {{{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}}};
}

// hwLat (µs) per hop kind: [NVLink, PCI, NET][algo][LL, LL128, Simple].
std::array<PerAlgo, 3> hop_latency(NcclVersion v) {
  // Tree Simple per hop: 4 / 6 / 14 in v2.18.3-1, 28 everywhere in v2.19–v2.22,
  // 4 / 4 / 14 from v2.23.4-1. NVLS on NVLink: 0 (v2.18), 23 (v2.19–2.20), 25 (v2.21+);
  // NVLS / NVLS-tree on the network 18 / 19 (v2.18), 18 / 14 (v2.19 to v2.28.7-1), 18 / 20.9
  // (v2.28.9-1 on). CollNet rows as in v2.23.4-1 (direct 3.7 / 3.7 / 31, chain 2.8 / 2.8 /
  // 30). Ring and Tree LL, LL128 and Ring Simple are the same in every version read.
  const double tree_s_nvl = v.minor <= 18 ? 4 : v.minor <= 22 ? 28 : 4;
  const double tree_s_pci = v.minor <= 18 ? 6 : v.minor <= 22 ? 28 : 4;
  const double tree_s_net = v.minor <= 18 ? 14 : v.minor <= 22 ? 28 : 14;
  const double nvls_nvl = v.minor <= 18 ? 0 : v.minor <= 20 ? 23 : 25;
  const double nvls_tree_net = v.minor <= 18 ? 19 : v.at_least(28, 9) ? 20.9 : 14;
  std::array<PerAlgo, 3> h{};
  h[kNvlink] = {{{.6, 1.25, tree_s_nvl}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, nvls_nvl}, {0, 0, nvls_nvl}}};
  h[kPci] = {{{1.0, 1.9, tree_s_pci}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}}};
  h[kNet] = {{{5.0, 8.5, tree_s_net}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, nvls_tree_net}}};
  return h;
}

// Per-architecture caps (GB/s): llMaxBws, perChMaxRingLL128Bws, perChMaxTreeLL128Bws,
// perChMaxTreeBws and (v2.28+) perChMaxNVLSTreeBws, columns 1 node / 2 nodes / more, rows
// Volta, Ampere, Hopper, Blackwell. NCCL indexes them by compute capability (>= 100
// Blackwell from v2.25.1-1; before, Blackwell took Hopper's rows). Hopper's LL row was
// Ampere's until v2.20.3-1 (v2.21.5-1: 141 / 45 / 35). Blackwell's rows: twice Hopper's in
// v2.25.1-1 .. v2.27.7-1; from v2.28.3-1 its own Tree rows (LL128 55.6 / 31.67 / 20, Simple
// 70 / 42.8 / 24), its ring LL128 row 73.4 (2 × 36.7) in v2.28.3-1, 73.4 / 34.6 / 73.4 from
// v2.28.7-1, 34.5 / 34.6 / 34.5 in v2.29.2-1 .. v2.29.3-1, 40 from v2.29.7-1; its NVLS-tree
// row 96 / 43.1 (2 / more nodes) in v2.28.3-1 .. v2.28.7-1, 96 / 43.8 from v2.28.9-1, 96 / 80
// from v2.30.3-1 (Hopper 57.7 / 45.5).
struct Caps {
  double ll_max, ring_ll128_per_ch, tree_ll128_per_ch, tree_per_ch, nvls_tree_per_ch;
};
Caps caps(GpuArch arch, CpuVendor cpu, int n_nodes, NcclVersion v) {
  const int col = n_nodes <= 2 ? n_nodes - 1 : 2;
  static constexpr double ll[4][3] = {
      {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {2 * 141.0, 2 * 45.0, 2 * 35.0}};
  static constexpr double ring128[3][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}};
  static constexpr double tree128[3][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}};
  static constexpr double tree[3][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}};
  static constexpr double nvls_tree_hopper[3] = {0, 57.7, 45.5};
  int a = static_cast<int>(arch);
  if (arch == GpuArch::blackwell && !v.at_least(25)) a = static_cast<int>(GpuArch::hopper);
  // Multi-node LL is capped by the CPU's row (index 1 for AMD, else 0); one node by the GPU's.
  int ll_row = n_nodes == 1 ? a : cpu == CpuVendor::amd ? 1 : 0;
  if (!v.at_least(21) && ll_row == 2) ll_row = 1;
  if (a < 3) return {ll[ll_row][col], ring128[a][col], tree128[a][col], tree[a][col], nvls_tree_hopper[col]};
  // Blackwell's own rows (v2.25+).
  if (!v.at_least(28)) {
    const int h = static_cast<int>(GpuArch::hopper);
    return {ll[ll_row][col], 2 * ring128[h][col], 2 * tree128[h][col], 2 * tree[h][col], 0};
  }
  static constexpr double tree128_b[3] = {55.6, 31.67, 20.0};
  static constexpr double tree_b[3] = {70.0, 42.8, 24.0};
  double ring128_b = 2 * 36.7;
  if (v.at_least(29, 7))
    ring128_b = 40.0;
  else if (v.at_least(29))
    ring128_b = col == 1 ? 34.6 : 34.5;
  else if (v.at_least(28, 7) && col == 1)
    ring128_b = 34.6;
  const double nvls_tree_b[3] = {0, 96.0, v.at_least(30) ? 80.0 : v.at_least(28, 9) ? 43.8 : 43.1};
  return {ll[ll_row][col], ring128_b, tree128_b[col], tree_b[col], nvls_tree_b[col]};
}

// Tree all-reduce correction by log2(bytes / 64), 64 B .. 256 MB, [LL, LL128, Simple]
// (treeCorrectionFactor, v2.23.4-1 ncclTopoGetAlgoTime); v2.29.2-1 added a 24th column
// (512 MB: 1.0, 1.0, .9), which only its NVLS-tree correction on Blackwell reaches.
constexpr double kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

bool available(CollectiveKind kind, NcclAlgo a, NcclProto p, const NcclComm& c, NcclVersion v) {
  const bool simple = p == NcclProto::simple;
  if (p == NcclProto::ll128 && !c.nvlink) return false;  // LL128 only on NVLink systems (v2.23.4-1)
  // LL128 by compute capability: 7.0, 8.0 and 9.0 up to v2.24.3-1, 10.0 from v2.25.1-1.
  if (p == NcclProto::ll128 && c.arch == GpuArch::blackwell && !v.at_least(25)) return false;
  const bool rs_ag = kind == CollectiveKind::reduce_scatter || kind == CollectiveKind::all_gather;
  switch (a) {
    case NcclAlgo::ring:
      return true;
    case NcclAlgo::tree:
      return kind == CollectiveKind::all_reduce;
    case NcclAlgo::collnet_direct:  // from v2.24.3-1 only on NVSwitch systems (algoEnable, nvsCount)
      if (v.at_least(24) && !c.nvswitch) return false;
      [[fallthrough]];
    case NcclAlgo::collnet_chain:
      return kind == CollectiveKind::all_reduce && simple && c.collnet && c.n_nodes > 1;
    // Across nodes only with CollNet (v2.23.4-1 algoEnable), and there all-reduce only: its
    // all-gather / reduce-scatter need the CollNet plugin's iallgather / ireducescatter (not
    // modelled; tuning.cc zeroes them otherwise).
    case NcclAlgo::nvls:
      return simple && c.nvls &&
             (c.n_nodes == 1 ? kind == CollectiveKind::all_reduce || rs_ag
                             : c.collnet && kind == CollectiveKind::all_reduce);
    case NcclAlgo::nvls_tree:
      return simple && c.nvls && kind == CollectiveKind::all_reduce && c.n_nodes > 1;
    case NcclAlgo::pat:  // v2.23: one GPU per node only
      return simple && rs_ag && v.minor >= 23 && c.n_nodes == c.n_ranks;
  }
  return false;
}

}  // namespace

namespace {

// NCCL's NVLS / NVLS-tree bus bandwidth (GB/s) from v2.28.3-1: the NVLS graph's per-channel
// intra-node bandwidth times nvlsEfficiency (Hopper 0.85, Blackwell 0.74) and (channels −
// 1) / channels, doubled for all-reduce (two operations pipelined) or times (ppn − 1) / ppn
// for all-gather / reduce-scatter; the inter-node side (doubled for NVLS-tree on two nodes)
// and NVLS-tree's per-channel cap bound it. ptsim does not run NCCL's NVLS graph search: its
// channels are the node's GPUs (one NVLS head each, the "Pattern 5, crossNic 0, nChannels
// 8" of the H100 dump in NVIDIA/nccl#1197) and its intra-node total the ring's; inside one
// node the inter-node side does not bind (the search raises the NVLS graph's bwInter to up
// to twice its bwIntra, search.cc: 40 / 60 in that dump).
double nvls_bus_gbs(CollectiveKind kind, NcclAlgo a, const NcclComm& c, const Caps& cap) {
  const double nch = std::max(2.0, c.ppn());
  const double eff = c.arch == GpuArch::blackwell ? 0.74 : 0.85;
  double intra = c.bus_bw_intra / 1e9 * eff * (nch - 1) / nch;
  intra *= kind == CollectiveKind::all_reduce ? 2.0 : (c.ppn() - 1) / c.ppn();
  if (c.n_nodes == 1) return intra;
  double inter = c.bus_bw_inter / 1e9 * (a == NcclAlgo::nvls_tree && c.n_nodes <= 2 ? 2 : 1);
  if (a == NcclAlgo::nvls_tree) inter = std::min(inter, nch * cap.nvls_tree_per_ch);
  return std::min(intra, inter);
}

// NCCL's bandwidth (GB/s) of (a, p): bus bandwidth with the protocol's efficiency,
// converted to the bandwidth that divides the whole buffer (ncclTopoTuneModel).
double bandwidth_gbs(CollectiveKind kind, NcclAlgo a, NcclProto p, const NcclComm& c, NcclVersion v, int nsteps) {
  const double intra = c.bus_bw_intra / 1e9, inter = c.bus_bw_inter / 1e9;
  const int nn = c.n_nodes;
  const double ch = c.n_channels;
  const Caps cap = caps(c.arch, c.cpu, nn, v);
  const bool ar = kind == CollectiveKind::all_reduce;
  const bool rs_ag = kind == CollectiveKind::reduce_scatter || kind == CollectiveKind::all_gather;
  const bool nvls_any = a == NcclAlgo::nvls || a == NcclAlgo::nvls_tree;
  double bus = nn == 1 ? intra : std::min(intra, inter);
  if (a == NcclAlgo::nvls_tree) bus = std::min(intra, nn <= 2 ? inter : inter / 2);
  // v2.27.3-1: an NVLS all-gather / reduce-scatter moves (ppn − 1) / ppn of the buffer
  // through the switch (inside one node only here: see available()).
  if (a == NcclAlgo::nvls && rs_ag && v.at_least(27)) bus = intra * (c.ppn() - 1) / c.ppn();
  if (nvls_any && v.at_least(28)) bus = nvls_bus_gbs(kind, a, c, cap);
  if (a == NcclAlgo::ring && p == NcclProto::ll)  // LL: half the wire carries flags; 1/4 or 1/3 before v2.21
    bus = std::min(cap.ll_max, bus * (v.minor >= 21 ? 0.5 : (nn > 1 || ar) ? 0.25 : 1.0 / 3.0));
  if (a == NcclAlgo::ring && p == NcclProto::ll128)  // 120 of 128 bytes; 0.7 at one GPU per node before v2.23
    bus = std::min(bus * (v.minor < 23 && c.ppn() < 2 ? 0.7 : 0.92), ch * cap.ring_ll128_per_ch);
  if (a == NcclAlgo::tree) bus = std::min(bus * .92, ch * cap.tree_per_ch);
  if (a == NcclAlgo::tree && p == NcclProto::ll) bus = std::min(bus / 3.8, cap.ll_max);
  if (a == NcclAlgo::tree && p == NcclProto::ll128)
    bus = std::min(bus * (nn == 1 ? 7.0 / 9.0 : 120.0 / 128.0), ch * cap.tree_ll128_per_ch);
  if (a == NcclAlgo::pat) bus *= v.at_least(24) ? .75 : .85;  // .85 in v2.23.4-1, .75 from v2.24.3-1
  if (a == NcclAlgo::collnet_direct) {  // GPU / NIC ratio penalty (v2.23.4-1)
    double f = c.ppn() / ch;
    f -= (f - 1) / 2;
    bus /= f;
    if (c.arch == GpuArch::hopper || c.arch == GpuArch::blackwell) bus *= .85;
  }
  if (a == NcclAlgo::collnet_chain && v.minor <= 18) bus *= .75;
  // Bus to algorithm bandwidth; from v2.20 not for the non-ring all-gather / reduce-scatter.
  if (v.minor >= 20 && a != NcclAlgo::ring && rs_ag) return bus;
  if (a == NcclAlgo::ring) return bus * c.n_ranks / nsteps;
  // From v2.28.3-1 NVLS and NVLS-tree convert as the ring does (nRanks / nsteps).
  if (nvls_any && v.at_least(28)) return bus * c.n_ranks / nsteps;
  if (a == NcclAlgo::nvls) return bus * 5.0 / 6.0;
  if (a == NcclAlgo::nvls_tree) return bus * (v.minor <= 18 ? .70 * nn / (2.0 * (nn - 1)) : 5.0 / 6.0);
  return bus * .5;
}

// NCCL's latency (µs) of (a, p), before the per-call ring plateau factor.
double latency_us(CollectiveKind kind, NcclAlgo a, NcclProto p, const NcclComm& c, NcclVersion v, int nsteps) {
  const auto base = base_latency(v);
  const auto hw = hop_latency(v);
  const int ia = idx(a), ip = idx(p);
  const int nn = c.n_nodes, ppn = c.n_ranks / c.n_nodes;
  double intra = hw[c.nvlink ? kNvlink : kPci][ia][ip];
  // From v2.23 a communicator with one GPU per node pays Tree's network latency.
  const double inter = (v.minor >= 23 && ppn == 1) ? hw[kNet][idx(NcclAlgo::tree)][ip] : hw[kNet][ia][ip];
  double lat = base[ia][ip];
  switch (a) {
    case NcclAlgo::ring: {
      if (kind == CollectiveKind::broadcast)  // a pipelined chain: one hop latency
        return lat + hw[nn == 1 ? (c.nvlink ? kNvlink : kPci) : kNet][ia][ip];
      // Each step on a network hop posts a send (getNetOverhead): 1 µs, 2 µs on AMD
      // x86; 3× for Simple.
      if (nn > 1) {
        const double post = c.cpu == CpuVendor::amd ? 2.0 : 1.0;
        intra = std::max(intra, p == NcclProto::simple ? 3 * post : post);
      }
      const bool ar = kind == CollectiveKind::all_reduce;
      const int inter_steps = nn == 1 ? 0 : ar ? 2 * (nn - 1) : nn - 1;
      return lat + (nsteps - inter_steps) * intra + inter_steps * inter;
    }
    case NcclAlgo::tree:
      return lat + 2 * ((ppn - 1) * intra + log2i(nn) * inter);
    case NcclAlgo::collnet_direct:
      return lat + 2 * (std::min(1, ppn - 1) * intra + (ppn - 1) * (v.minor <= 18 ? 0.5 : 0.4)) + inter;
    case NcclAlgo::collnet_chain:
      return lat + 2 * (ppn - 1) * intra + inter;
    case NcclAlgo::nvls:
      if (v.minor <= 18) return lat + (nn > 1 ? inter : 0);
      return intra + (nn > 1 ? inter : 0);
    case NcclAlgo::nvls_tree:
      if (v.minor <= 18) return lat + 2 * (nn - 1) * inter;
      return lat + intra + 2 * log2i(nn) * inter;
    case NcclAlgo::pat:  // base 8, log latency, and a linear part (v2.23.4-1)
      return 8 + log2i(nn) * (inter / 3.5) + c.n_ranks * 2.8;
  }
  return lat;
}

}  // namespace

int nccl_channels(int nics_per_node) { return std::max(2, 2 * nics_per_node); }

GpuArch nccl_gpu_arch(std::string_view n, bool nvls) {
  if (n.starts_with("v100")) return GpuArch::volta;
  if (n.starts_with("b") || n.starts_with("gb")) return GpuArch::blackwell;
  if (nvls || n.starts_with("h1") || n.starts_with("h2")) return GpuArch::hopper;
  return GpuArch::ampere;
}

int nccl_first_minor(GpuArch arch) { return arch == GpuArch::blackwell ? 25 : kMinNcclMinor; }

NcclVersion parse_nccl_version(std::string_view text) {
  const std::string_view range = "accepted: 2.18 to 2.30, e.g. \"2.23\" or \"2.28.3\"";
  int major = 0, minor = 0, patch = -1;
  const char* end = text.data() + text.size();
  auto r = std::from_chars(text.data(), end, major);
  bool ok = r.ec == std::errc{} && r.ptr != end && *r.ptr == '.';
  if (ok) {
    r = std::from_chars(r.ptr + 1, end, minor);
    ok = r.ec == std::errc{};
    if (ok && r.ptr != end) {  // a patch level
      ok = *r.ptr == '.' && r.ptr + 1 != end && r.ptr[1] != '-';
      if (ok) r = std::from_chars(r.ptr + 1, end, patch);
      ok = ok && r.ec == std::errc{} && r.ptr == end;
    }
  }
  if (!ok) throw std::invalid_argument(fmt::format("'{}' is not a NCCL version ({})", text, range));
  if (major != 2 || minor < kMinNcclMinor || minor > kMaxNcclMinor)
    throw std::invalid_argument(fmt::format("NCCL {} is not modelled ({})", text, range));
  return {minor, patch};
}

std::string_view to_string(NcclAlgo a) {
  static constexpr std::string_view names[] = {"tree",      "ring", "collnet_direct", "collnet_chain", "nvls",
                                               "nvls_tree", "pat"};
  return names[idx(a)];
}
std::string_view to_string(NcclProto p) {
  static constexpr std::string_view names[] = {"LL", "LL128", "Simple"};
  return names[idx(p)];
}

std::vector<NcclEstimate> nccl_estimates(CollectiveKind kind, const NcclComm& c, Bytes bytes, NcclVersion v) {
  if (kind == CollectiveKind::all_to_all || kind == CollectiveKind::send_recv)
    throw std::invalid_argument(fmt::format("NCCL's tuner does not time {} (point-to-point)", to_string(kind)));
  if (c.n_ranks < 1 || c.n_nodes < 1 || c.n_ranks % c.n_nodes != 0 || c.n_channels < 1 || !(c.bus_bw_intra > 0) ||
      (c.n_nodes > 1 && !(c.bus_bw_inter > 0)) || bytes < 0)
    throw std::invalid_argument(fmt::format("NCCL model: bad communicator ({} ranks on {} nodes, {} channels)",
                                            c.n_ranks, c.n_nodes, c.n_channels));
  if (c.n_ranks == 1) return {NcclEstimate{}};
  const int n = c.n_ranks;
  const bool ar = kind == CollectiveKind::all_reduce;
  const int nsteps = ar ? 2 * (n - 1) : kind == CollectiveKind::broadcast ? n : n - 1;
  std::vector<NcclEstimate> out;
  for (int ia = 0; ia < kAlgos; ++ia)
    for (int ip = 0; ip < kProtos; ++ip) {
      const auto a = static_cast<NcclAlgo>(ia);
      const auto p = static_cast<NcclProto>(ip);
      if (!available(kind, a, p, c, v)) continue;
      double bw = bandwidth_gbs(kind, a, p, c, v, nsteps);
      double lat = latency_us(kind, a, p, c, v, nsteps);
      if (!(bw > 0)) continue;
      const int log_size = log2i(bytes / 64);  // ncclTopoGetAlgoTime (v2.23.4-1)
      if (a == NcclAlgo::tree && ar && log_size >= 0 && log_size < 23) bw *= kTreeCorrection[ip][log_size];
      // v2.29.2-1: NVLS-tree all-reduce on Blackwell with an x86 host takes the same correction.
      if (a == NcclAlgo::nvls_tree && ar && v.at_least(29) && c.arch == GpuArch::blackwell && c.cpu != CpuVendor::arm &&
          log_size >= 0 && log_size < 24)
        bw *= kTreeCorrection[ip][log_size];
      // "Plateau effect of ring": multi-node Simple all-reduce with >= 64 B per channel and rank.
      if (a == NcclAlgo::ring && p == NcclProto::simple && c.n_nodes > 1 && ar && bytes / (c.n_channels * n) >= 64)
        lat *= c.arch == GpuArch::volta ? 1.9 : 1.4;
      out.push_back({a, p, lat * 1e-6, bw * 1e9, lat * 1e-6 + bytes / (bw * 1e9)});
    }
  return out;
}

std::optional<NcclEstimate> nccl_choose(CollectiveKind kind, const NcclComm& comm, Bytes bytes, NcclVersion v,
                                        std::optional<NcclAlgo> only) {
  std::optional<NcclEstimate> best;
  for (const auto& e : nccl_estimates(kind, comm, bytes, v)) {
    if (only && e.algo != *only && comm.n_ranks > 1) continue;
    if (!best || e.time < best->time) best = e;
  }
  return best;
}

}  // namespace ptsim::hw::net
