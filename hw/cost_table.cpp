#include "hw/cost_table.h"

#include "hw/input_file.h"
#include "hw/errors.h"
#include "hw/yaml_limits.h"
#include "hw/strict_yaml.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <unistd.h>
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
#include <tuple>
#include <type_traits>

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
  auto hi = std::lower_bound(pts.begin(), pts.end(), lx, [](const auto& p, double v) { return p.first < v; });
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
std::optional<double> interpolate_residual(const std::vector<LogResidual>& pts, const std::vector<double>& query) {
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
// The file format, described once: each section's rows are a list of fields (key, where
// the value lives in the row, what a valid value is), and one reader and one writer
// walk those lists.

// What a valid value is, beyond its type (which the member gives).
enum class Check {
  none,
  positive,      // numbers: finite and > 0; whole numbers: >= 1
  non_negative,  // finite and >= 0
  not_empty,     // strings
  dtype,         // strings: one of kDtypes
};

const std::vector<std::string> kDtypes = {"bf16", "fp16", "fp8", "fp32"};

// One field of a row. `Path` is the chain of member pointers from the row to the value
// (two for the attention shape nested in an AttentionPoint). A std::optional member is
// optional in the file and written only when set.
template <auto... Path>
struct Field {
  const char* key;
  Check check = Check::none;
  bool required = true;
  const char* fallback = nullptr;  // strings: the value when the key is absent
  bool quoted = false;             // strings: always written "double-quoted"

  template <class Row>
  static auto& in(Row& row) {
    return (row.*....*Path);
  }
};

constexpr auto kDeviceFields = std::tuple{
    Field<&DeviceInfo::name>{.key = "name", .required = false},
    Field<&DeviceInfo::sm_count>{.key = "sm_count", .check = Check::non_negative, .required = false},
    Field<&DeviceInfo::sm_clock_mhz>{.key = "sm_clock_mhz", .check = Check::non_negative, .required = false},
    Field<&DeviceInfo::memory_clock_mhz>{.key = "memory_clock_mhz", .check = Check::non_negative, .required = false},
    Field<&DeviceInfo::driver_version>{.key = "driver", .required = false, .quoted = true},
    Field<&DeviceInfo::cuda_version>{.key = "cuda", .required = false, .quoted = true},
    Field<&DeviceInfo::nccl_version>{.key = "nccl", .required = false, .quoted = true},
    Field<&DeviceInfo::cudnn_version>{.key = "cudnn", .required = false, .quoted = true},
};

constexpr auto kGemmPointFields = std::tuple{
    Field<&GemmPoint::m>{"m", Check::positive},
    Field<&GemmPoint::n>{"n", Check::positive},
    Field<&GemmPoint::k>{"k", Check::positive},
    Field<&GemmPoint::dtype>{"dtype", Check::dtype},
    Field<&GemmPoint::seconds>{"seconds", Check::positive},
};

constexpr auto kGemmFitFields = std::tuple{
    Field<&GemmFit::dtype>{"dtype", Check::dtype},
    Field<&GemmFit::overhead_s>{"overhead_s", Check::non_negative},
    Field<&GemmFit::seconds_per_flop>{"seconds_per_flop", Check::positive},
    Field<&GemmFit::seconds_per_byte>{"seconds_per_byte", Check::non_negative},
    Field<&GemmFit::tile_m>{"tile_m", Check::positive},
    Field<&GemmFit::tile_n>{"tile_n", Check::positive},
    Field<&GemmFit::sm_count>{"sm_count", Check::positive},
};

constexpr auto kAttentionPointFields = std::tuple{
    Field<&AttentionPoint::shape, &AttentionShape::batch_heads>{"batch_heads", Check::positive},
    Field<&AttentionPoint::shape, &AttentionShape::seq_q>{"seq_q", Check::positive},
    Field<&AttentionPoint::shape, &AttentionShape::seq_kv>{"seq_kv", Check::positive},
    Field<&AttentionPoint::shape, &AttentionShape::head_dim>{"head_dim", Check::positive},
    Field<&AttentionPoint::shape, &AttentionShape::causal>{"causal"},
    Field<&AttentionPoint::dtype>{"dtype", Check::dtype},
    Field<&AttentionPoint::impl>{"impl", Check::not_empty},
    Field<&AttentionPoint::fwd_seconds>{"fwd_seconds", Check::positive},
    Field<&AttentionPoint::bwd_seconds>{"bwd_seconds", Check::positive},
};

// bwd_overhead_s and bwd_seconds_per_flop come together or not at all (read_row checks).
constexpr auto kAttentionFitFields = std::tuple{
    Field<&AttentionFit::dtype>{"dtype", Check::dtype},
    Field<&AttentionFit::impl>{"impl"},
    Field<&AttentionFit::fwd_overhead_s>{"fwd_overhead_s", Check::non_negative},
    Field<&AttentionFit::fwd_seconds_per_flop>{"fwd_seconds_per_flop", Check::positive},
    Field<&AttentionFit::bwd_overhead_s>{"bwd_overhead_s", Check::non_negative},
    Field<&AttentionFit::bwd_seconds_per_flop>{"bwd_seconds_per_flop", Check::positive},
};

constexpr auto kMembwPointFields = std::tuple{
    Field<&MembwPoint::bytes>{"bytes", Check::positive},
    Field<&MembwPoint::seconds>{"seconds", Check::positive},
};

constexpr auto kMembwFitFields = std::tuple{
    Field<&MembwFit::latency_s>{"latency_s", Check::non_negative},
    Field<&MembwFit::bandwidth_bytes_per_s>{"bandwidth_bytes_per_s", Check::positive},
};

constexpr auto kCollectivePointFields = std::tuple{
    Field<&CollectivePoint::op>{"op"},
    Field<&CollectivePoint::ranks>{"ranks", Check::positive},
    Field<&CollectivePoint::algorithm>{.key = "algorithm", .required = false, .fallback = "nccl"},
    Field<&CollectivePoint::bytes>{"bytes", Check::positive},
    Field<&CollectivePoint::seconds>{"seconds", Check::positive},
};

constexpr auto kCollectiveFitFields = std::tuple{
    Field<&CollectiveFit::op>{"op"},
    Field<&CollectiveFit::ranks>{"ranks", Check::positive},
    Field<&CollectiveFit::algorithm>{.key = "algorithm", .required = false, .fallback = "nccl"},
    Field<&CollectiveFit::alpha_s>{"alpha_s", Check::non_negative},
    Field<&CollectiveFit::beta_s_per_byte>{"beta_s_per_byte", Check::non_negative},
};

// The measurement sections in file order: name, points, the key of the fits and the fits
// (a list, or for membw a single fit). `t` is a CostTable, const or not.
template <class Table, class Visit>
void for_each_section(Table& t, Visit&& visit) {
  visit("gemm", t.gemm, kGemmPointFields, "fits", t.gemm_fits, kGemmFitFields);
  visit("attention", t.attention, kAttentionPointFields, "fits", t.attention_fits, kAttentionFitFields);
  visit("membw", t.membw, kMembwPointFields, "fit", t.membw_fit, kMembwFitFields);
  visit("collective", t.collectives, kCollectivePointFields, "fits", t.collective_fits, kCollectiveFitFields);
}

template <class Fields>
std::vector<std::string> keys_of(const Fields& fields) {
  return std::apply([](const auto&... f) { return std::vector<std::string>{f.key...}; }, fields);
}

// ---------------------------------------------------------------------------------------
// Reading.

template <class T>
void read_value(const StrictReader& r, const YAML::Node& n, const std::string& key, Check check, T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    value = check == Check::dtype ? r.choice(n, key, kDtypes) : r.string(n, key);
    if (check == Check::not_empty && value.empty()) r.fail(key, "must not be empty");
  } else if constexpr (std::is_same_v<T, bool>) {
    value = r.boolean(n, key);
  } else if constexpr (std::is_same_v<T, int>) {
    value = r.integer(n, key, check == Check::positive ? 1 : 0);
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    value = r.int64(n, key, check == Check::positive ? 1 : 0);
  } else if constexpr (std::is_same_v<T, double>) {
    value = check == Check::positive ? r.positive(n, key) : r.non_negative(n, key);
  } else {
    static_assert(std::is_same_v<T, std::optional<double>>);
    value = check == Check::positive ? r.positive(n, key) : r.non_negative(n, key);
  }
}

template <class Row, class Fields>
Row read_row(const StrictReader& r, const YAML::Node& n, const std::string& path, const Fields& fields) {
  r.check_keys(n, path, keys_of(fields));
  Row row;
  std::apply(
      [&](const auto&... f) {
        auto read = [&](const auto& field) {
          auto& value = field.in(row);
          using T = std::decay_t<decltype(value)>;
          const YAML::Node v = n[field.key];
          if (!v && (!field.required || std::is_same_v<T, std::optional<double>>)) {
            if constexpr (std::is_same_v<T, std::string>)
              if (field.fallback) value = field.fallback;
            return;
          }
          read_value(r, v, key_path(path, field.key), field.check, value);
        };
        (read(f), ...);
      },
      fields);
  if constexpr (std::is_same_v<Row, AttentionFit>)
    if (row.bwd_overhead_s.has_value() != row.bwd_seconds_per_flop.has_value())
      r.fail(key_path(path, row.bwd_overhead_s ? "bwd_seconds_per_flop" : "bwd_overhead_s"), "missing");
  return row;
}

template <class Row, class Fields>
void read_rows(const StrictReader& r, const YAML::Node& n, const std::string& path, const Fields& fields,
               std::vector<Row>& rows) {
  if (!n) return;
  if (!n.IsSequence()) r.fail(path, "expected a list");
  for (std::size_t i = 0; i < n.size(); ++i) rows.push_back(read_row<Row>(r, n[i], item_path(path, i), fields));
}

template <class Row, class Fields>
void read_rows(const StrictReader& r, const YAML::Node& n, const std::string& path, const Fields& fields,
               std::optional<Row>& row) {
  if (n) row = read_row<Row>(r, n, path, fields);
}

// ---------------------------------------------------------------------------------------
// Writing.

template <class Row, class Fields>
void write_row(YAML::Emitter& out, const Row& row, const Fields& fields) {
  std::apply(
      [&](const auto&... f) {
        auto write = [&](const auto& field) {
          const auto& value = field.in(row);
          if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::optional<double>>) {
            if (value) out << YAML::Key << field.key << YAML::Value << *value;
          } else if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
            out << YAML::Key << field.key << YAML::Value;
            if (field.quoted) out << YAML::DoubleQuoted;
            out << value;
          } else {
            out << YAML::Key << field.key << YAML::Value << value;
          }
        };
        (write(f), ...);
      },
      fields);
}

template <class Row, class Fields>
void write_rows(YAML::Emitter& out, const char* key, const Fields& fields, const std::vector<Row>& rows) {
  out << YAML::Key << key << YAML::Value << YAML::BeginSeq;
  for (const auto& row : rows) {
    out << YAML::Flow << YAML::BeginMap;
    write_row(out, row, fields);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

template <class Row, class Fields>
void write_rows(YAML::Emitter& out, const char* key, const Fields& fields, const std::optional<Row>& row) {
  if (!row) return;
  out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
  write_row(out, *row, fields);
  out << YAML::EndMap;
}

template <class T>
bool present(const std::vector<T>& rows) {
  return !rows.empty();
}
template <class T>
bool present(const std::optional<T>& row) {
  return row.has_value();
}

}  // namespace

bool is_valid_dtype(std::string_view dtype) {
  return std::find(kDtypes.begin(), kDtypes.end(), dtype) != kDtypes.end();
}

Flops attention_flops(const AttentionShape& s, bool backward) {
  // Dao 2023 (FlashAttention-2), §4.1: forward FLOPs = 4·seqlen²·head_dim·heads (per batch),
  // halved with the causal mask; backward = 2.5 × forward.
  double f = 4.0 * static_cast<double>(s.batch_heads) * static_cast<double>(s.seq_q) * static_cast<double>(s.seq_kv) *
             static_cast<double>(s.head_dim);
  if (s.causal) f *= 0.5;
  return backward ? 2.5 * f : f;
}

GemmWaves gemm_waves(std::int64_t m, std::int64_t n, int count, int tile_m, int tile_n, int sm_count) {
  if (m <= 0 || n <= 0 || count <= 0 || tile_m <= 0 || tile_n <= 0 || sm_count <= 0)
    throw std::invalid_argument(fmt::format("wave_efficiency: bad arguments m={} n={} count={} tile={}x{} sms={}", m, n,
                                            count, tile_m, tile_n, sm_count));
  GemmWaves w;
  w.tiles = static_cast<double>(count) * static_cast<double>((m + tile_m - 1) / tile_m) *
            static_cast<double>((n + tile_n - 1) / tile_n);
  w.waves = std::ceil(w.tiles / sm_count);
  return w;
}

double wave_efficiency(std::int64_t m, std::int64_t n, int tile_m, int tile_n, int sm_count) {
  const GemmWaves w = gemm_waves(m, n, 1, tile_m, tile_n, sm_count);
  return w.tiles / (w.waves * sm_count);
}

Seconds GemmFit::predict(std::int64_t m, std::int64_t n, std::int64_t k) const {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const double bytes =
      (static_cast<double>(m) * k + static_cast<double>(k) * n + static_cast<double>(m) * n) * dtype_bytes(dtype);
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
                                                              bool backward, std::string_view only) const {
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
    if (!only.empty() && impl != only) continue;
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
      pts.push_back(
          {{std::log(double(p.shape.batch_heads)), std::log(double(p.shape.seq_q)), std::log(double(p.shape.seq_kv))},
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

std::optional<Seconds> CostTable::attention_seconds(const AttentionShape& shape, std::string_view dtype, bool backward,
                                                    std::string_view impl) const {
  if (auto e = fastest_attention(shape, dtype, backward, impl)) return e->seconds;
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
    check_yaml_depth(yaml_text, source, "cost table");
    root = YAML::Load(yaml_text);
  } catch (const InputError& e) {  // this function's contract: std::invalid_argument naming the file
    throw std::invalid_argument(e.what());
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(fmt::format("{}: not valid YAML: {}", source, e.what()));
  }
  const StrictReader r([&source](const std::string& key, const std::string& what, const std::string& hint) {
    throw std::invalid_argument(fmt::format("{}: key '{}': {}", source, key, with_hint(what, hint)));
  });
  if (!root.IsDefined() || root.IsNull())
    throw std::invalid_argument(fmt::format("{}: the cost table is empty", source));
  r.check_unique_keys(root);
  r.check_keys(root, "", {"format", "name", "backend", "date", "device", "gemm", "attention", "membw", "collective"});
  const auto format = r.string(root["format"], "format");
  if (format != kFormat) r.fail("format", fmt::format("unsupported format '{}' (expected {})", format, kFormat));

  CostTable t;
  t.name = r.string(root["name"], "name");
  if (t.name.empty()) r.fail("name", "must not be empty");
  if (root["backend"]) t.backend = r.string(root["backend"], "backend");
  if (root["date"]) t.date = r.string(root["date"], "date");
  if (const auto d = root["device"]) t.device = read_row<DeviceInfo>(r, d, "device", kDeviceFields);
  for_each_section(t, [&](const char* name, auto& points, const auto& point_fields, const char* fits_key, auto& fits,
                          const auto& fit_fields) {
    const auto s = root[name];
    if (!s) return;
    r.check_keys(s, name, {"points", fits_key});
    read_rows(r, s["points"], key_path(name, "points"), point_fields, points);
    read_rows(r, s[fits_key], key_path(name, fits_key), fit_fields, fits);
  });
  return t;
}

CostTable load_cost_table(const std::string& path) {
  return parse_cost_table(read_input_file(path, "cost table", kMaxCostTableBytes), path);
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
  write_row(out, t.device, kDeviceFields);
  out << YAML::EndMap;
  for_each_section(t, [&](const char* name, const auto& points, const auto& point_fields, const char* fits_key,
                          const auto& fits, const auto& fit_fields) {
    if (!present(points) && !present(fits)) return;
    out << YAML::Key << name << YAML::Value << YAML::BeginMap;
    write_rows(out, "points", point_fields, points);
    write_rows(out, fits_key, fit_fields, fits);
    out << YAML::EndMap;
  });
  out << YAML::EndMap;
  if (!out.good())
    throw std::runtime_error(fmt::format("cost table '{}': YAML emitter error: {}", t.name, out.GetLastError()));
  return std::string(out.c_str()) + "\n";
}

void save_cost_table(const CostTable& table, const std::string& path) {
  write_file_atomically(path, cost_table_to_yaml(table));
}

}  // namespace ptsim::hw
