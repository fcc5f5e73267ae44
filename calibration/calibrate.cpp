#include "calibration/calibrate.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <ostream>
#include <stdexcept>

#include "calibration/fit.h"
#include "calibration/nccl_tests_import.h"
#include "hw/errors.h"

namespace ptsim::calibration {
namespace {

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", tm);
}

void say(std::ostream* os, const std::string& line) {
  if (os) *os << line << '\n' << std::flush;
}

std::string rate(double value, double peak, const char* unit, double scale) {
  if (peak > 0)
    return fmt::format("{:.3g} {} (roofline {:.3g}, {:.0f}%)", value / scale, unit, peak / scale, 100 * value / peak);
  return fmt::format("{:.3g} {}", value / scale, unit);
}

int fail(std::ostream* errors, int code, const std::string& msg) {
  say(errors, msg);
  return code;
}

}  // namespace

std::string slug(const std::string& text) {
  std::string s;
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c))
      s += static_cast<char>(std::tolower(c));
    else if (!s.empty() && s.back() != '-')
      s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s.empty() ? "device" : s;
}

hw::CostTable calibrate(Backend& backend, const Sweep& sweep, const std::string& name, std::ostream* progress) {
  hw::CostTable t;
  t.name = name;
  t.backend = backend.name();
  t.date = utc_now();
  t.device = backend.device();
  say(progress, fmt::format("calibrating '{}' on {} ({} backend)", name, t.device.name, t.backend));

  const auto dtypes = backend.gemm_dtypes();
  const std::size_t n_gemm = sweep.gemm.size() * dtypes.size();
  std::size_t i = 0;
  for (const auto& dtype : dtypes)
    for (const auto& g : sweep.gemm) {
      const double s = backend.gemm(g.m, g.n, g.k, dtype);
      t.gemm.push_back({g.m, g.n, g.k, dtype, s});
      const double flops = 2.0 * double(g.m) * double(g.n) * double(g.k);
      say(progress, fmt::format("[gemm {}/{}] {}x{}x{} {} ({})  {}  {}", ++i, n_gemm, g.m, g.n, g.k, dtype, g.label,
                                format_seconds(s), rate(flops / s, backend.peak_flops(dtype), "TFLOP/s", 1e12)));
    }

  const auto adtypes = backend.attention_dtypes();
  const auto impls = backend.attention_impls();
  const std::size_t n_att = sweep.attention.size() * adtypes.size() * impls.size();
  i = 0;
  for (const auto& dtype : adtypes)
    for (const auto& a : sweep.attention)
      for (const auto& impl : impls) {
        ++i;
        const auto shape_text = fmt::format("bh={} seq={}x{} d={}{}", a.batch_heads, a.seq_q, a.seq_kv, a.head_dim,
                                            a.causal ? " causal" : "");
        const auto r = backend.attention(a, dtype, impl);
        if (!r) {
          say(progress,
              fmt::format("[attention {}/{}] {} {} {}: not supported, skipped", i, n_att, impl, dtype, shape_text));
          continue;
        }
        t.attention.push_back({a, dtype, impl, r->fwd_seconds, r->bwd_seconds});
        say(progress, fmt::format("[attention {}/{}] {} {} {}  fwd {} {}{}", i, n_att, impl, dtype, shape_text,
                                  format_seconds(r->fwd_seconds),
                                  rate(hw::attention_flops(a, false) / r->fwd_seconds, backend.peak_flops(dtype),
                                       "TFLOP/s", 1e12),
                                  r->bwd_seconds ? fmt::format("  bwd {} {}", format_seconds(*r->bwd_seconds),
                                                               rate(hw::attention_flops(a, true) / *r->bwd_seconds,
                                                                    backend.peak_flops(dtype), "TFLOP/s", 1e12))
                                                 : std::string()));
      }

  i = 0;
  for (const Bytes b : sweep.membw_bytes) {
    const double s = backend.membw(b);
    t.membw.push_back({b, s});
    say(progress, fmt::format("[membw {}/{}] {}  {}  {}", ++i, sweep.membw_bytes.size(), format_bytes(b),
                              format_seconds(s), rate(b / s, backend.peak_bandwidth(), "GB/s", 1e9)));
  }

  const int ranks = backend.collective_ranks();
  if (ranks < 2) {
    say(progress, fmt::format("[collective] {} device{} here: collectives need at least 2, sweep skipped "
                              "(import your cluster's nccl-tests logs with --import-nccl-tests)",
                              ranks, ranks == 1 ? "" : "s"));
  } else {
    const auto ops = backend.collective_ops();
    const std::size_t n_coll = ops.size() * sweep.collective_bytes.size();
    i = 0;
    for (const auto& op : ops)
      for (const Bytes b : sweep.collective_bytes) {
        // send-recv is point to point: measured between two ranks.
        const int r = op == "send-recv" ? 2 : ranks;
        const double s = backend.collective(op, r, b);
        t.collectives.push_back({op, r, "nccl", b, s});
        say(progress, fmt::format("[collective {}/{}] {} ranks={} {}  {}  algbw {:.3g} GB/s", ++i, n_coll, op, r,
                                  format_bytes(b), format_seconds(s), b / s / 1e9));
      }
  }

  fit_table(t, backend.gemm_tile(), backend.parallel_units());
  for (const auto& f : t.gemm_fits)
    say(progress, fmt::format("[fit] gemm {}: overhead {}, {:.3g} TFLOP/s at full waves", f.dtype,
                              format_seconds(f.overhead_s), 1e-12 / f.seconds_per_flop));
  for (const auto& f : t.attention_fits)
    say(progress,
        fmt::format("[fit] attention {} {}: fwd {:.3g} TFLOP/s", f.impl, f.dtype, 1e-12 / f.fwd_seconds_per_flop));
  if (t.membw_fit)
    say(progress, fmt::format("[fit] membw: latency {}, {}", format_seconds(t.membw_fit->latency_s),
                              format_bandwidth(t.membw_fit->bandwidth_bytes_per_s)));
  for (const auto& f : t.collective_fits)
    say(progress, fmt::format("[fit] {} ranks={}: alpha {}, {:.3g} GB/s", f.op, f.ranks, format_seconds(f.alpha_s),
                              f.beta_s_per_byte > 0 ? 1e-9 / f.beta_s_per_byte : 0.0));
  return t;
}

int run_calibrate(const CalibrateOptions& o) {
  namespace fs = std::filesystem;
  try {
    if (o.timing.repeats < 1 || o.timing.warmup < 0 || !(o.timing.warmup_seconds >= 0))
      return fail(o.errors, 2,
                  fmt::format("ptsim calibrate: --repeats must be >= 1, --warmup and --warmup-seconds >= 0 "
                              "(got {}, {} and {})",
                              o.timing.repeats, o.timing.warmup, o.timing.warmup_seconds));
    auto name_for = [&](const std::string& path) { return o.name.empty() ? fs::path(path).stem().string() : o.name; };

    if (!o.import_nccl_tests.empty()) {
      if (o.out.empty()) return fail(o.errors, 2, "ptsim calibrate: --import-nccl-tests needs --out FILE");
      std::vector<NcclTestsLog> logs;
      for (const auto& f : o.import_nccl_tests) logs.push_back(load_nccl_tests(f, o.import_op));
      hw::CostTable t;
      if (fs::exists(o.out)) {
        t = hw::load_cost_table(o.out);
        if (!o.name.empty()) t.name = o.name;
        say(o.progress, fmt::format("replacing the collective section of {}", o.out));
      } else {
        t.name = name_for(o.out);
        t.backend = "nccl-tests";
        t.date = utc_now();
      }
      t.collectives.clear();
      for (const auto& log : logs) {
        say(o.progress, fmt::format("[import] {} ranks={}: {} sizes", log.op, log.ranks, log.points.size()));
        t.collectives.insert(t.collectives.end(), log.points.begin(), log.points.end());
      }
      // Only the collective fits are refitted; GEMM/attention fits of an existing table stay.
      auto gemm_fits = t.gemm_fits;
      auto attention_fits = t.attention_fits;
      auto membw_fit = t.membw_fit;
      fit_table(t, 1, 1);
      t.gemm_fits = gemm_fits;
      t.attention_fits = attention_fits;
      t.membw_fit = membw_fit;
      hw::save_cost_table(t, o.out);
      say(o.progress, fmt::format("wrote {} ({} collective points)", o.out, t.collectives.size()));
      return 0;
    }

    std::unique_ptr<Backend> backend;
    Sweep sweep;
    if (o.cpu) {
      backend = make_cpu_backend(o.timing);
      sweep = cpu_sweep(o.quick);
    } else {
      std::string why;
      backend = make_cuda_backend(o.timing, why);
      if (!backend) throw ResourceError(why + " (use --cpu for the CPU backend)");
      sweep = gpu_sweep(o.quick);
    }
    const auto device = backend->device();
    const std::string out =
        !o.out.empty() ? o.out : fmt::format("calibration/tables/{}{}.yaml", o.cpu ? "cpu-" : "", slug(device.name));
    const auto table = calibrate(*backend, sweep, name_for(out), o.progress);
    hw::save_cost_table(table, out);
    say(o.progress, fmt::format("wrote {}", out));
    return 0;
  } catch (const ResourceError& e) {  // no CUDA module, library or device
    return fail(o.errors, 3, e.what());
  } catch (const InputError& e) {  // e.g. --out in a folder that does not exist
    return fail(o.errors, 2, fmt::format("ptsim calibrate: {}", e.what()));
  } catch (const std::invalid_argument& e) {
    return fail(o.errors, 2, fmt::format("ptsim calibrate: {}", e.what()));
  } catch (const std::exception& e) {
    return fail(o.errors, 1, fmt::format("ptsim calibrate: {}", e.what()));
  }
}

}  // namespace ptsim::calibration
