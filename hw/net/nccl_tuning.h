// NCCL's own cost model for one collective: for every algorithm × protocol a
// latency (µs) and a bandwidth (GB/s), time = latency + bytes / bandwidth, and the
// tuner runs the pair with the smallest predicted time. The constants and formulas
// are those of NCCL's src/graph/tuning.cc (ncclTopoTuneModel, ncclTopoGetAlgoTime),
// read in every release tag of github.com/NVIDIA/nccl from v2.18.3-1 to v2.30.7-1 (each
// minor's first tag diffed against the previous minor's, and the 2.28 / 2.29 patch tags,
// whose Blackwell and NVLS-tree constants moved); each figure in nccl_tuning.cpp names the
// version it comes from.
//
// What NCCL's tuner sees is reduced to NcclComm: rank and node counts, the GPU
// generation (it indexes NCCL's per-architecture caps), whether the node's GPUs talk
// over NVLink, the channel count and the bus bandwidth one Simple-protocol ring
// reaches with all channels inside a node and across nodes (NCCL takes these from its
// topology search; ptsim from the cluster's links), and whether NVLink SHARP (NVLS,
// NVSwitch + H100) or in-network reduction (CollNet, SHARP switches) exist.
//
// Versions: "2.18" to "2.30" (cluster.nccl_version), optionally with the patch level
// ("2.28.3"); without one, a minor's latest release read (2.28.9, 2.29.7, 2.30.7). NVLS and
// NVLS-tree are in every one of them; PAT (all-gather / reduce-scatter with one GPU per
// node) from 2.23; Blackwell's own rows of the per-architecture caps from 2.25.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "hw/net/collectives.h"

namespace ptsim::hw::net {

struct NcclVersion {
  int minor = 30;  // 2.minor (kDefaultNcclVersion)
  int patch = -1;  // -1: the minor's latest release
  // At least 2.m.p (a version without a patch level counts as the minor's latest).
  constexpr bool at_least(int m, int p = 0) const { return minor > m || (minor == m && (patch < 0 || patch >= p)); }
};
inline constexpr std::string_view kDefaultNcclVersion = "2.30";  // NCCL v2.30.7-1 (2026-06), the newest read
inline constexpr int kMinNcclMinor = 18, kMaxNcclMinor = 30;
// "2.18" .. "2.30", optionally with a patch level ("2.21.5"); throws
// std::invalid_argument naming the accepted range otherwise.
NcclVersion parse_nccl_version(std::string_view text);

enum class NcclAlgo : std::uint8_t { tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat };
enum class NcclProto : std::uint8_t { ll, ll128, simple };
std::string_view to_string(NcclAlgo a);
std::string_view to_string(NcclProto p);

enum class GpuArch : std::uint8_t { volta, ampere, hopper, blackwell };
// The row of NCCL's per-architecture tables (indexed by compute capability) for a GPU of
// the catalog: by its name (v100*; b*, gb* = Blackwell, compute capability 10.0; h1*, h2*
// or any GPU with NVLink SHARP = Hopper; otherwise Ampere).
GpuArch nccl_gpu_arch(std::string_view gpu_name, bool nvls);
// The first NCCL minor whose tables know the architecture (Blackwell: v2.25.1-1 added its
// rows and enabled LL128 for compute capability 10.0; the others: every version modelled).
int nccl_first_minor(GpuArch arch);
// The host CPU NCCL detects (ncclTopoCpuType): it sets the cost of posting a network
// send (getNetOverhead: 1 µs on Intel x86, 2 µs on AMD x86, 1 µs otherwise, 3× for
// Simple) and which row of llMaxBws caps multi-node LL (AMD's lower row), in every
// version from v2.18.3-1 to v2.30.7-1 (src/graph/tuning.cc).
enum class CpuVendor : std::uint8_t { intel, amd, arm };

struct NcclComm {
  int n_ranks = 1;
  int n_nodes = 1;
  GpuArch arch = GpuArch::ampere;
  CpuVendor cpu = CpuVendor::intel;
  bool nvlink = true;    // GPUs of a node joined by NVLink (else PCIe)
  bool nvswitch = true;  // ... through NVSwitches (else point-to-point NVLink or PCIe)
  int n_channels = 16;
  BytesPerSecond bus_bw_intra = 0;  // Simple ring busbw inside one node, all channels
  BytesPerSecond bus_bw_inter = 0;  // Simple ring busbw across nodes, all channels
  bool nvls = false;                // NVLink SHARP in the node's NVSwitches
  bool collnet = false;             // in-network reduction (SHARP) on the fabric
  double ppn() const { return static_cast<double>(n_ranks) / n_nodes; }
};

struct NcclEstimate {
  NcclAlgo algo = NcclAlgo::ring;
  NcclProto proto = NcclProto::simple;
  Seconds latency = 0;
  BytesPerSecond bandwidth = 0;  // NCCL's "algorithm" bandwidth: time = latency + bytes / bandwidth
  Seconds time = 0;
};

// The channels NCCL runs on a node with `nics_per_node` NICs: one ring / tree per NIC,
// duplicated (src/graph/connect.cc, ncclTopoPostset), so 2 per NIC and at least 2.
// Each channel is one CTA of the collective's kernel (src/enqueue.cc ncclLaunchKernel:
// grid = the plan's channel count), so that many SMs while the collective runs.
int nccl_channels(int nics_per_node);

// Every algorithm × protocol NCCL would consider for `kind` on this communicator in
// version v (kinds: all-reduce, reduce-scatter, all-gather, broadcast; bytes as
// nccl-tests counts them, see collectives.h). Throws std::invalid_argument for other
// kinds or an inconsistent communicator.
std::vector<NcclEstimate> nccl_estimates(CollectiveKind kind, const NcclComm& comm, Bytes bytes, NcclVersion v);
// The pair NCCL's tuner runs: the smallest predicted time, or the fastest protocol
// of `only` when given (NCCL_ALGO forced) and available; nullopt when `only` is not.
std::optional<NcclEstimate> nccl_choose(CollectiveKind kind, const NcclComm& comm, Bytes bytes, NcclVersion v,
                                        std::optional<NcclAlgo> only = std::nullopt);

}  // namespace ptsim::hw::net
