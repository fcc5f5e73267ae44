#include "hw/cost_table.h"

#include "hw/strict_yaml.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace ptsim::hw {
namespace {

constexpr const char* kFormat = "ptsim-cost-table/1";

double dtype_bytes(std::string_view dtype) {
  if (dtype == "fp8") return 1;
  if (dtype == "bf16" || dtype == "fp16") return 2;
  return 4;
}

// ---------------------------------------------------------------------------------------
// Interpolation helpers.

// Piecewise-linear interpolation of log(y) against log(x) through (x, y) pairs; nullopt
// when x lies outside [min x, max x]. Repeated x values are averaged (in log space).
std::optional<double> interpolate_loglog(std::vector<std::pair<double, double>> xy, double x) {
  if (xy.empty() || !(x > 0)) return std::nullopt;
  std::sort(xy.begin(), xy.end());
  std::vector<std::pair<double, double>> pts;  // (log x, mean log y)
  for (std::size_t i = 0; i < xy.size();) {
    std::size_t j = i;
    double sum = 0;
    while (j < xy.size() && xy[j].first == xy[i].first) sum += std::log(xy[j++].second);
    pts.emplace_back(std::log(xy[i].first), sum / static_cast<double>(j - i));
    i = j;
  }
  const double lx = std::log(x);
  // A relative tolerance so a query equal to a measured size is "inside" despite rounding.
  constexpr double kEps = 1e-12;
  if (lx < pts.front().first - kEps || lx > pts.back().first + kEps) return std::nullopt;
  if (pts.size() == 1) return std::exp(pts.front().second);
  auto hi = std::lower_bound(pts.begin(), pts.end(), lx,
                             [](const auto& p, double v) { return p.first < v; });
  if (hi == pts.end()) return std::exp(pts.back().second);
  if (hi == pts.begin()) return std::exp(hi->second);
  auto lo = std::prev(hi);
  const double t = (lx - lo->first) / (hi->first - lo->first);
  return std::exp(lo->second + t * (hi->second - lo->second));
}

// A measured point for multi-dimensional interpolation: coordinates in log space and
// log(measured / base), where base is the fit (or FLOPs when there is no fit).
struct LogResidual {
  std::vector<double> coords;
  double log_ratio;
};

// Inverse-distance-weighted (Shepard, power 2) log-ratio at `query` when it lies inside the
// bounding box of the points in log space; nullopt outside. Exact at a measured point.
std::optional<double> interpolate_residual(const std::vector<LogResidual>& pts,
                                           const std::vector<double>& query) {
  if (pts.empty()) return std::nullopt;
  constexpr double kEps = 1e-9;
  for (std::size_t d = 0; d < query.size(); ++d) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto& p : pts) {
      lo = std::min(lo, p.coords[d]);
      hi = std::max(hi, p.coords[d]);
    }
    if (query[d] < lo - kEps || query[d] > hi + kEps) return std::nullopt;
  }
  double wsum = 0, vsum = 0;
  for (const auto& p : pts) {
    double d2 = 0;
    for (std::size_t d = 0; d < query.size(); ++d) d2 += (p.coords[d] - query[d]) * (p.coords[d] - query[d]);
    if (d2 < kEps * kEps) return p.log_ratio;
    wsum += 1.0 / d2;
    vsum += p.log_ratio / d2;
  }
  return vsum / wsum;
}

// ---------------------------------------------------------------------------------------
// YAML reading with key paths in every message.

[[noreturn]] void fail(const std::string& source, const std::string& key, const std::string& what) {
  throw std::invalid_argument(fmt::format("{}: key '{}': {}", source, key, what));
}

struct Reader {
  const std::string& source;

  void check_keys(const YAML::Node& node, const std::string& path,
                  std::initializer_list<const char*> allowed) const {
    if (!node.IsMap()) fail(source, path, "expected a mapping");
    const std::vector<std::string> keys(allowed.begin(), allowed.end());
    if (const auto u = unknown_key(node, keys)) {
      std::string list;
      for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
      fail(source, path.empty() ? u->key : path + "." + u->key,
           "unknown key, did you mean '" + u->suggestion + "'? (allowed: " + list + ")");
    }
  }

  template <typename T>
  T get(const YAML::Node& node, const std::string& path, const char* key) const {
    const std::string full = path.empty() ? key : path + "." + key;
    const YAML::Node v = node[key];
    if (!v) fail(source, full, "missing");
    try {
      return v.as<T>();
    } catch (const YAML::Exception&) {
      fail(source, full, fmt::format("cannot read '{}' as the expected type", YAML::Dump(v)));
    }
  }

  template <typename T>
  T get_or(const YAML::Node& node, const std::string& path, const char* key, T fallback) const {
    return node[key] ? get<T>(node, path, key) : fallback;
  }

  double positive(const YAML::Node& node, const std::string& path, const char* key) const {
    const double v = get<double>(node, path, key);
    if (!(v > 0) || !std::isfinite(v))
      fail(source, path + "." + key, fmt::format("must be a positive finite number, got {}", v));
    return v;
  }

  double non_negative(const YAML::Node& node, const std::string& path, const char* key) const {
    const double v = get<double>(node, path, key);
    if (!(v >= 0) || !std::isfinite(v))
      fail(source, path + "." + key, fmt::format("must be a non-negative finite number, got {}", v));
    return v;
  }

  std::int64_t dim(const YAML::Node& node, const std::string& path, const char* key) const {
    const auto v = get<std::int64_t>(node, path, key);
    if (v <= 0) fail(source, path + "." + key, fmt::format("must be a positive integer, got {}", v));
    return v;
  }

  std::string dtype(const YAML::Node& node, const std::string& path) const {
    auto d = get<std::string>(node, path, "dtype");
    if (!is_valid_dtype(d)) fail(source, path + ".dtype", fmt::format("unknown dtype '{}' (bf16, fp16, fp8, fp32)", d));
    return d;
  }

  YAML::Node seq(const YAML::Node& node, const std::string& path, const char* key) const {
    const YAML::Node v = node[key];
    if (!v) return YAML::Node(YAML::NodeType::Sequence);
    if (!v.IsSequence()) fail(source, path + "." + key, "expected a list");
    return v;
  }
};

std::string idx(const std::string& path, std::size_t i) { return fmt::format("{}[{}]", path, i); }

// ---------------------------------------------------------------------------------------
// YAML writing.

void emit_double(YAML::Emitter& out, const char* key, double v) { out << YAML::Key << key << YAML::Value << v; }

}  // namespace

bool is_valid_dtype(std::string_view dtype) {
  return dtype == "bf16" || dtype == "fp16" || dtype == "fp8" || dtype == "fp32";
}

Flops attention_flops(const AttentionShape& s, bool backward) {
  // Dao 2023 (FlashAttention-2), §4.1: forward FLOPs = 4·seqlen²·head_dim·heads (per batch),
  // halved with the causal mask; backward = 2.5 × forward.
  double f = 4.0 * static_cast<double>(s.batch_heads) * static_cast<double>(s.seq_q) *
             static_cast<double>(s.seq_kv) * static_cast<double>(s.head_dim);
  if (s.causal) f *= 0.5;
  return backward ? 2.5 * f : f;
}

double wave_efficiency(std::int64_t m, std::int64_t n, int tile_m, int tile_n, int sm_count) {
  if (m <= 0 || n <= 0 || tile_m <= 0 || tile_n <= 0 || sm_count <= 0)
    throw std::invalid_argument(fmt::format("wave_efficiency: bad arguments m={} n={} tile={}x{} sms={}", m, n,
                                            tile_m, tile_n, sm_count));
  const double tiles = static_cast<double>((m + tile_m - 1) / tile_m) * static_cast<double>((n + tile_n - 1) / tile_n);
  const double waves = std::ceil(tiles / sm_count);
  return tiles / (waves * sm_count);
}

Seconds GemmFit::predict(std::int64_t m, std::int64_t n, std::int64_t k) const {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const double bytes = (static_cast<double>(m) * k + static_cast<double>(k) * n + static_cast<double>(m) * n) *
                       dtype_bytes(dtype);
  return overhead_s + seconds_per_flop * flops / wave_efficiency(m, n, tile_m, tile_n, sm_count) +
         seconds_per_byte * bytes;
}

std::optional<Seconds> AttentionFit::predict(const AttentionShape& shape, bool backward) const {
  if (!backward) return fwd_overhead_s + fwd_seconds_per_flop * attention_flops(shape, false);
  if (!bwd_overhead_s || !bwd_seconds_per_flop) return std::nullopt;
  return *bwd_overhead_s + *bwd_seconds_per_flop * attention_flops(shape, true);
}

// ---------------------------------------------------------------------------------------
// Lookups.

std::optional<Seconds> CostTable::gemm_seconds(std::int64_t m, std::int64_t n, std::int64_t k,
                                               std::string_view dtype) const {
  if (m <= 0 || n <= 0 || k <= 0)
    throw std::invalid_argument(fmt::format("gemm_seconds: dimensions must be positive, got {}x{}x{}", m, n, k));
  const GemmFit* fit = nullptr;
  for (const auto& f : gemm_fits)
    if (f.dtype == dtype) fit = &f;
  auto base = [&](std::int64_t mm, std::int64_t nn, std::int64_t kk) {
    return fit ? fit->predict(mm, nn, kk) : 2.0 * double(mm) * double(nn) * double(kk);
  };
  std::vector<LogResidual> pts;
  for (const auto& p : gemm)
    if (p.dtype == dtype)
      pts.push_back({{std::log(double(p.m)), std::log(double(p.n)), std::log(double(p.k))},
                     std::log(p.seconds / base(p.m, p.n, p.k))});
  if (auto r = interpolate_residual(pts, {std::log(double(m)), std::log(double(n)), std::log(double(k))}))
    return base(m, n, k) * std::exp(*r);
  if (fit) return fit->predict(m, n, k);
  return std::nullopt;
}

std::optional<AttentionEstimate> CostTable::fastest_attention(const AttentionShape& shape, std::string_view dtype,
                                                              bool backward) const {
  if (shape.batch_heads <= 0 || shape.seq_q <= 0 || shape.seq_kv <= 0 || shape.head_dim <= 0)
    throw std::invalid_argument(fmt::format("attention_seconds: bad shape bh={} sq={} skv={} d={}", shape.batch_heads,
                                            shape.seq_q, shape.seq_kv, shape.head_dim));
  std::set<std::string> impls;
  for (const auto& p : attention)
    if (p.dtype == dtype) impls.insert(p.impl);
  for (const auto& f : attention_fits)
    if (f.dtype == dtype) impls.insert(f.impl);

  std::optional<AttentionEstimate> best;
  for (const auto& impl : impls) {
    const AttentionFit* fit = nullptr;
    for (const auto& f : attention_fits)
      if (f.dtype == dtype && f.impl == impl) fit = &f;
    auto base = [&](const AttentionShape& s) -> std::optional<double> {
      if (fit) return fit->predict(s, backward);
      return attention_flops(s, backward);
    };
    // Only points with the same head dim and mask are interpolated between: they run
    // different kernels (or tile shapes), so they are not neighbours in shape space.
    std::vector<LogResidual> pts;
    for (const auto& p : attention) {
      if (p.dtype != dtype || p.impl != impl || p.shape.head_dim != shape.head_dim || p.shape.causal != shape.causal)
        continue;
      const std::optional<double> t = backward ? p.bwd_seconds : std::optional<double>(p.fwd_seconds);
      const auto b = base(p.shape);
      if (!t || !b) continue;
      pts.push_back({{std::log(double(p.shape.batch_heads)), std::log(double(p.shape.seq_q)),
                      std::log(double(p.shape.seq_kv))},
                     std::log(*t / *b)});
    }
    std::optional<double> t;
    if (auto r = interpolate_residual(pts, {std::log(double(shape.batch_heads)), std::log(double(shape.seq_q)),
                                            std::log(double(shape.seq_kv))})) {
      if (auto b = base(shape)) t = *b * std::exp(*r);
    }
    if (!t && fit) t = fit->predict(shape, backward);
    if (t && (!best || *t < best->seconds)) best = AttentionEstimate{*t, impl};
  }
  return best;
}

std::optional<Seconds> CostTable::attention_seconds(const AttentionShape& shape, std::string_view dtype,
                                                    bool backward) const {
  if (auto e = fastest_attention(shape, dtype, backward)) return e->seconds;
  return std::nullopt;
}

std::optional<Seconds> CostTable::membw_seconds(Bytes bytes) const {
  if (!(bytes > 0)) throw std::invalid_argument(fmt::format("membw_seconds: bytes must be positive, got {}", bytes));
  std::vector<std::pair<double, double>> xy;
  for (const auto& p : membw) xy.emplace_back(p.bytes, p.seconds);
  if (auto t = interpolate_loglog(std::move(xy), bytes)) return t;
  if (membw_fit) return membw_fit->predict(bytes);
  return std::nullopt;
}

std::optional<Seconds> CostTable::collective_seconds(std::string_view op, int ranks, Bytes bytes) const {
  if (!(bytes > 0) || ranks < 1)
    throw std::invalid_argument(fmt::format("collective_seconds: bad ranks={} bytes={}", ranks, bytes));
  std::set<std::string> algorithms;
  for (const auto& p : collectives)
    if (p.op == op && p.ranks == ranks) algorithms.insert(p.algorithm);
  for (const auto& f : collective_fits)
    if (f.op == op && f.ranks == ranks) algorithms.insert(f.algorithm);
  std::optional<Seconds> best;
  for (const auto& alg : algorithms) {
    std::vector<std::pair<double, double>> xy;
    for (const auto& p : collectives)
      if (p.op == op && p.ranks == ranks && p.algorithm == alg) xy.emplace_back(p.bytes, p.seconds);
    std::optional<Seconds> t = interpolate_loglog(std::move(xy), bytes);
    if (!t)
      for (const auto& f : collective_fits)
        if (f.op == op && f.ranks == ranks && f.algorithm == alg) t = f.predict(bytes);
    if (t && (!best || *t < *best)) best = t;
  }
  return best;
}

// ---------------------------------------------------------------------------------------
// Parsing.

CostTable parse_cost_table(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(fmt::format("{}: not valid YAML: {}", source, e.what()));
  }
  const Reader r{source};
  r.check_keys(root, "", {"format", "name", "backend", "date", "device", "gemm", "attention", "membw", "collective"});
  const auto format = r.get<std::string>(root, "", "format");
  if (format != kFormat) fail(source, "format", fmt::format("unsupported format '{}' (expected {})", format, kFormat));

  CostTable t;
  t.name = r.get<std::string>(root, "", "name");
  if (t.name.empty()) fail(source, "name", "must not be empty");
  t.backend = r.get_or<std::string>(root, "", "backend", "");
  t.date = r.get_or<std::string>(root, "", "date", "");
  if (const auto d = root["device"]) {
    r.check_keys(d, "device", {"name", "sm_count", "sm_clock_mhz", "memory_clock_mhz", "driver", "cuda", "nccl", "cudnn"});
    t.device.name = r.get_or<std::string>(d, "device", "name", "");
    t.device.sm_count = r.get_or<int>(d, "device", "sm_count", 0);
    t.device.sm_clock_mhz = r.get_or<double>(d, "device", "sm_clock_mhz", 0);
    t.device.memory_clock_mhz = r.get_or<double>(d, "device", "memory_clock_mhz", 0);
    t.device.driver_version = r.get_or<std::string>(d, "device", "driver", "");
    t.device.cuda_version = r.get_or<std::string>(d, "device", "cuda", "");
    t.device.nccl_version = r.get_or<std::string>(d, "device", "nccl", "");
    t.device.cudnn_version = r.get_or<std::string>(d, "device", "cudnn", "");
  }

  if (const auto g = root["gemm"]) {
    r.check_keys(g, "gemm", {"points", "fits"});
    const auto pts = r.seq(g, "gemm", "points");
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const auto p = pts[i];
      const auto path = idx("gemm.points", i);
      r.check_keys(p, path, {"m", "n", "k", "dtype", "seconds"});
      t.gemm.push_back({r.dim(p, path, "m"), r.dim(p, path, "n"), r.dim(p, path, "k"), r.dtype(p, path),
                        r.positive(p, path, "seconds")});
    }
    const auto fits = r.seq(g, "gemm", "fits");
    for (std::size_t i = 0; i < fits.size(); ++i) {
      const auto f = fits[i];
      const auto path = idx("gemm.fits", i);
      r.check_keys(f, path, {"dtype", "overhead_s", "seconds_per_flop", "seconds_per_byte", "tile_m", "tile_n", "sm_count"});
      GemmFit gf;
      gf.dtype = r.dtype(f, path);
      gf.overhead_s = r.non_negative(f, path, "overhead_s");
      gf.seconds_per_flop = r.positive(f, path, "seconds_per_flop");
      gf.seconds_per_byte = r.non_negative(f, path, "seconds_per_byte");
      gf.tile_m = static_cast<int>(r.dim(f, path, "tile_m"));
      gf.tile_n = static_cast<int>(r.dim(f, path, "tile_n"));
      gf.sm_count = static_cast<int>(r.dim(f, path, "sm_count"));
      t.gemm_fits.push_back(gf);
    }
  }

  if (const auto a = root["attention"]) {
    r.check_keys(a, "attention", {"points", "fits"});
    const auto pts = r.seq(a, "attention", "points");
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const auto p = pts[i];
      const auto path = idx("attention.points", i);
      r.check_keys(p, path, {"batch_heads", "seq_q", "seq_kv", "head_dim", "causal", "dtype", "impl", "fwd_seconds",
                             "bwd_seconds"});
      AttentionPoint ap;
      ap.shape = {r.dim(p, path, "batch_heads"), r.dim(p, path, "seq_q"), r.dim(p, path, "seq_kv"),
                  r.dim(p, path, "head_dim"), r.get<bool>(p, path, "causal")};
      ap.dtype = r.dtype(p, path);
      ap.impl = r.get<std::string>(p, path, "impl");
      if (ap.impl.empty()) fail(source, path + ".impl", "must not be empty");
      ap.fwd_seconds = r.positive(p, path, "fwd_seconds");
      if (p["bwd_seconds"]) ap.bwd_seconds = r.positive(p, path, "bwd_seconds");
      t.attention.push_back(ap);
    }
    const auto fits = r.seq(a, "attention", "fits");
    for (std::size_t i = 0; i < fits.size(); ++i) {
      const auto f = fits[i];
      const auto path = idx("attention.fits", i);
      r.check_keys(f, path, {"dtype", "impl", "fwd_overhead_s", "fwd_seconds_per_flop", "bwd_overhead_s",
                             "bwd_seconds_per_flop"});
      AttentionFit af;
      af.dtype = r.dtype(f, path);
      af.impl = r.get<std::string>(f, path, "impl");
      af.fwd_overhead_s = r.non_negative(f, path, "fwd_overhead_s");
      af.fwd_seconds_per_flop = r.positive(f, path, "fwd_seconds_per_flop");
      if (f["bwd_overhead_s"] || f["bwd_seconds_per_flop"]) {
        af.bwd_overhead_s = r.non_negative(f, path, "bwd_overhead_s");
        af.bwd_seconds_per_flop = r.positive(f, path, "bwd_seconds_per_flop");
      }
      t.attention_fits.push_back(af);
    }
  }

  if (const auto m = root["membw"]) {
    r.check_keys(m, "membw", {"points", "fit"});
    const auto pts = r.seq(m, "membw", "points");
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const auto path = idx("membw.points", i);
      r.check_keys(pts[i], path, {"bytes", "seconds"});
      t.membw.push_back({r.positive(pts[i], path, "bytes"), r.positive(pts[i], path, "seconds")});
    }
    if (const auto f = m["fit"]) {
      r.check_keys(f, "membw.fit", {"latency_s", "bandwidth_bytes_per_s"});
      t.membw_fit = MembwFit{r.non_negative(f, "membw.fit", "latency_s"),
                             r.positive(f, "membw.fit", "bandwidth_bytes_per_s")};
    }
  }

  if (const auto c = root["collective"]) {
    r.check_keys(c, "collective", {"points", "fits"});
    const auto pts = r.seq(c, "collective", "points");
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const auto p = pts[i];
      const auto path = idx("collective.points", i);
      r.check_keys(p, path, {"op", "ranks", "algorithm", "bytes", "seconds"});
      t.collectives.push_back({r.get<std::string>(p, path, "op"), static_cast<int>(r.dim(p, path, "ranks")),
                               r.get_or<std::string>(p, path, "algorithm", "nccl"), r.positive(p, path, "bytes"),
                               r.positive(p, path, "seconds")});
    }
    const auto fits = r.seq(c, "collective", "fits");
    for (std::size_t i = 0; i < fits.size(); ++i) {
      const auto f = fits[i];
      const auto path = idx("collective.fits", i);
      r.check_keys(f, path, {"op", "ranks", "algorithm", "alpha_s", "beta_s_per_byte"});
      t.collective_fits.push_back({r.get<std::string>(f, path, "op"), static_cast<int>(r.dim(f, path, "ranks")),
                                   r.get_or<std::string>(f, path, "algorithm", "nccl"),
                                   r.non_negative(f, path, "alpha_s"), r.non_negative(f, path, "beta_s_per_byte")});
    }
  }
  return t;
}

CostTable load_cost_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot open cost table: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_cost_table(ss.str(), path);
}

std::string cost_table_to_yaml(const CostTable& t) {
  YAML::Emitter out;
  // 17 significant digits: a double survives the round trip unchanged.
  out.SetDoublePrecision(17);
  out << YAML::BeginMap;
  out << YAML::Key << "format" << YAML::Value << kFormat;
  out << YAML::Key << "name" << YAML::Value << t.name;
  out << YAML::Key << "backend" << YAML::Value << t.backend;
  out << YAML::Key << "date" << YAML::Value << t.date;
  out << YAML::Key << "device" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << t.device.name;
  out << YAML::Key << "sm_count" << YAML::Value << t.device.sm_count;
  emit_double(out, "sm_clock_mhz", t.device.sm_clock_mhz);
  emit_double(out, "memory_clock_mhz", t.device.memory_clock_mhz);
  out << YAML::Key << "driver" << YAML::Value << YAML::DoubleQuoted << t.device.driver_version;
  out << YAML::Key << "cuda" << YAML::Value << YAML::DoubleQuoted << t.device.cuda_version;
  out << YAML::Key << "nccl" << YAML::Value << YAML::DoubleQuoted << t.device.nccl_version;
  out << YAML::Key << "cudnn" << YAML::Value << YAML::DoubleQuoted << t.device.cudnn_version;
  out << YAML::EndMap;

  if (!t.gemm.empty() || !t.gemm_fits.empty()) {
    out << YAML::Key << "gemm" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "points" << YAML::Value << YAML::BeginSeq;
    for (const auto& p : t.gemm) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "m" << YAML::Value << p.m << YAML::Key << "n" << YAML::Value
          << p.n << YAML::Key << "k" << YAML::Value << p.k << YAML::Key << "dtype" << YAML::Value << p.dtype;
      emit_double(out, "seconds", p.seconds);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::Key << "fits" << YAML::Value << YAML::BeginSeq;
    for (const auto& f : t.gemm_fits) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "dtype" << YAML::Value << f.dtype;
      emit_double(out, "overhead_s", f.overhead_s);
      emit_double(out, "seconds_per_flop", f.seconds_per_flop);
      emit_double(out, "seconds_per_byte", f.seconds_per_byte);
      out << YAML::Key << "tile_m" << YAML::Value << f.tile_m << YAML::Key << "tile_n" << YAML::Value << f.tile_n
          << YAML::Key << "sm_count" << YAML::Value << f.sm_count << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;
  }

  if (!t.attention.empty() || !t.attention_fits.empty()) {
    out << YAML::Key << "attention" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "points" << YAML::Value << YAML::BeginSeq;
    for (const auto& p : t.attention) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "batch_heads" << YAML::Value << p.shape.batch_heads
          << YAML::Key << "seq_q" << YAML::Value << p.shape.seq_q << YAML::Key << "seq_kv" << YAML::Value
          << p.shape.seq_kv << YAML::Key << "head_dim" << YAML::Value << p.shape.head_dim << YAML::Key << "causal"
          << YAML::Value << p.shape.causal << YAML::Key << "dtype" << YAML::Value << p.dtype << YAML::Key << "impl"
          << YAML::Value << p.impl;
      emit_double(out, "fwd_seconds", p.fwd_seconds);
      if (p.bwd_seconds) emit_double(out, "bwd_seconds", *p.bwd_seconds);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::Key << "fits" << YAML::Value << YAML::BeginSeq;
    for (const auto& f : t.attention_fits) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "dtype" << YAML::Value << f.dtype << YAML::Key << "impl"
          << YAML::Value << f.impl;
      emit_double(out, "fwd_overhead_s", f.fwd_overhead_s);
      emit_double(out, "fwd_seconds_per_flop", f.fwd_seconds_per_flop);
      if (f.bwd_overhead_s && f.bwd_seconds_per_flop) {
        emit_double(out, "bwd_overhead_s", *f.bwd_overhead_s);
        emit_double(out, "bwd_seconds_per_flop", *f.bwd_seconds_per_flop);
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;
  }

  if (!t.membw.empty() || t.membw_fit) {
    out << YAML::Key << "membw" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "points" << YAML::Value << YAML::BeginSeq;
    for (const auto& p : t.membw) {
      out << YAML::Flow << YAML::BeginMap;
      emit_double(out, "bytes", p.bytes);
      emit_double(out, "seconds", p.seconds);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    if (t.membw_fit) {
      out << YAML::Key << "fit" << YAML::Value << YAML::Flow << YAML::BeginMap;
      emit_double(out, "latency_s", t.membw_fit->latency_s);
      emit_double(out, "bandwidth_bytes_per_s", t.membw_fit->bandwidth_bytes_per_s);
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }

  if (!t.collectives.empty() || !t.collective_fits.empty()) {
    out << YAML::Key << "collective" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "points" << YAML::Value << YAML::BeginSeq;
    for (const auto& p : t.collectives) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "op" << YAML::Value << p.op << YAML::Key << "ranks"
          << YAML::Value << p.ranks << YAML::Key << "algorithm" << YAML::Value << p.algorithm;
      emit_double(out, "bytes", p.bytes);
      emit_double(out, "seconds", p.seconds);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::Key << "fits" << YAML::Value << YAML::BeginSeq;
    for (const auto& f : t.collective_fits) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "op" << YAML::Value << f.op << YAML::Key << "ranks"
          << YAML::Value << f.ranks << YAML::Key << "algorithm" << YAML::Value << f.algorithm;
      emit_double(out, "alpha_s", f.alpha_s);
      emit_double(out, "beta_s_per_byte", f.beta_s_per_byte);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;
  }
  out << YAML::EndMap;
  if (!out.good()) throw std::runtime_error(fmt::format("cost table '{}': YAML emitter error: {}", t.name, out.GetLastError()));
  return std::string(out.c_str()) + "\n";
}

void save_cost_table(const CostTable& table, const std::string& path) {
  write_file_atomically(path, cost_table_to_yaml(table));
}

}  // namespace ptsim::hw
