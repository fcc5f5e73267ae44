#!/usr/bin/env python3
"""Compute next to a collective's CTAs, measured: the check behind hw::KernelDesc::reserved_sms.

NCCL runs a collective as one CTA per channel (src/enqueue.cc), each CTA holding an SM for the
collective's duration. ptsim models a GEMM running meanwhile as keeping the tile cuBLAS chose
for the whole GPU but going in waves over the SMs left, and a memory-bound kernel as unchanged.
With one GPU there is no collective to run, so a "holder" kernel stands in for it: R CTAs of
512 threads with 96 KiB of shared memory each (a cuBLAS Hopper GEMM CTA cannot share an SM with
one), spinning on clock64() for longer than the measured work. The probe times bf16 GEMMs of
training shapes and a large device copy alone and beside R held SMs (events, median of 5 runs
of 10 kernels each, random inputs); then every bf16 shape of `ptsim calibrate`'s sweep
(calibration/sweep.cpp) alone and beside 16 held SMs (a DGX's 8 NICs x 2 NCCL channels).
It also measures how a bf16 GEMM's rate settles when it runs back to back for 3 s (the
clocks under the power limit; `ptsim calibrate --warmup-seconds`). Writes JSON.

usage: sm_contention.py OUT.json
"""
import json
import statistics
import sys

import cupy
import torch

HOLD_SMEM = 96 * 1024
HOLD_THREADS = 512
HOLD_SRC = r"""
extern "C" __global__ void hold(long long cycles, int* sink) {
  extern __shared__ int smem[];
  const long long t0 = clock64();
  smem[threadIdx.x] = threadIdx.x;
  while (clock64() - t0 < cycles) {}
  if (threadIdx.x == 0 && smem[1] == -1) sink[0] = 1;
}
"""


def timed(fn, stream, reps=10):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps / 1e3


def bf16_matmul(m, n, k):
    """C[m x n] = A[m x k] B[k x n] on random bf16 operands, as a call."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return lambda: torch.matmul(a, b, out=c)


class Holder:
    """R SMs held by the spinning kernel on its own stream while `fn` is timed on `stream`."""

    def __init__(self, stream, clock_hz):
        self.kernel = cupy.RawKernel(HOLD_SRC, "hold")
        self.kernel.max_dynamic_shared_size_bytes = HOLD_SMEM
        self.sink = cupy.zeros(1, dtype=cupy.int32)
        self.stream = stream
        self.clock_hz = clock_hz

    def time_beside(self, fn, work_stream, held, spin_s, reps):
        torch.cuda.synchronize()
        with cupy.cuda.ExternalStream(self.stream.cuda_stream):
            self.kernel((held,), (HOLD_THREADS,), (cupy.int64(int(spin_s * self.clock_hz)), self.sink),
                        shared_mem=HOLD_SMEM)
        with torch.cuda.stream(work_stream):
            torch.cuda._sleep(200000)  # let the holder's CTAs take their SMs first
        t = timed(fn, work_stream, reps)
        torch.cuda.synchronize()
        return t


def main():
    out_path = sys.argv[1]
    dev = torch.cuda.get_device_properties(0)
    sms = dev.multi_processor_count
    work_stream = torch.cuda.Stream()
    holder = Holder(torch.cuda.Stream(), 1.98e9)  # H100 SXM boost clock; the spin only has to outlast the work

    def gemm_case(m, n, k):
        return bf16_matmul(m, n, k), 2.0 * m * n * k

    def copy_case(nbytes):
        src = torch.randn(nbytes // 4, device="cuda", dtype=torch.float32)
        dst = torch.empty_like(src)
        return (lambda: dst.copy_(src)), 0.0

    cases = [
        ("gemm 8192x8192x8192", *gemm_case(8192, 8192, 8192)),
        ("gemm 4096x6144x12288 (GPT-3 175B mlp-up, tp 8, 2 seqs)", *gemm_case(4096, 6144, 12288)),
        ("gemm 2048x4608x12288 (GPT-3 175B qkv, tp 8)", *gemm_case(2048, 4608, 12288)),
        ("gemm 16384x7168x8192 (Llama 70B-class mlp-up, tp 4)", *gemm_case(16384, 7168, 8192)),
        ("copy 2 GiB", *copy_case(2 << 30)),
    ]
    rows = []
    for label, fn, flops in cases:
        for _ in range(3):
            timed(fn, work_stream)
        alone = statistics.median(timed(fn, work_stream) for _ in range(5))
        row = {"case": label, "alone_s": alone, "tflops_alone": flops / alone / 1e12 if flops else None, "held": {}}
        for held in (8, 16, 24, 32):
            t = statistics.median(holder.time_beside(fn, work_stream, held, alone * 10 * 3, 10) for _ in range(5))
            row["held"][held] = {"seconds": t, "ratio": t / alone,
                                 "sm_ratio": sms / (sms - held)}
        rows.append(row)
    settle = settling_curve(work_stream)
    sweep = sweep_held(work_stream, holder, held=16)
    result = {"device": dev.name, "sms": sms, "torch": torch.__version__, "cuda": torch.version.cuda,
              "hold": {"threads": HOLD_THREADS, "smem_bytes": HOLD_SMEM}, "rows": rows,
              "settle": settle, "sweep_held16": sweep}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{dev.name}, {sms} SMs: time beside R held SMs / time alone (SMs/(SMs-R) in brackets)")
    for r in rows:
        tf = f" {r['tflops_alone']:.0f} TFLOP/s" if r["tflops_alone"] else ""
        cells = "  ".join(f"R={h}: {v['ratio']:.3f} [{v['sm_ratio']:.3f}]" for h, v in r["held"].items())
        print(f"{r['case']}: {r['alone_s'] * 1e3:.3f} ms{tf} | {cells}")
    print("bf16 8192^3 back to back, TFLOP/s by time since the first launch:",
          "  ".join(f"{w}: {v:.0f}" for w, v in settle.items()))
    print("calibration sweep shapes, bf16, time beside 16 held SMs / alone, by 128x256 tiles per SM:")
    buckets = {}
    for r in sweep:
        waves = r["tiles_128x256"] / sms
        key = "<=1" if waves <= 1 else "1-2" if waves <= 2 else "2-4" if waves <= 4 else "4-8" if waves <= 8 else ">8"
        buckets.setdefault(key, []).append(r["ratio"])
    for key in ("<=1", "1-2", "2-4", "4-8", ">8"):
        v = sorted(buckets.get(key, []))
        if v:
            print(f"  waves {key:>4}: n={len(v):3d}  min {v[0]:.3f}  median {statistics.median(v):.3f}  max {v[-1]:.3f}")


def settling_curve(stream, seconds=3.0):
    m = n = k = 8192
    fn = bf16_matmul(m, n, k)
    torch.cuda.synchronize()
    count = int(seconds / 1.3e-3)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(count + 1)]
    with torch.cuda.stream(stream):
        events[0].record()
        for i in range(count):
            fn()
            events[i + 1].record()
    events[-1].synchronize()
    edges = [0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0]
    sums = {e: [0.0, 0] for e in edges}
    for i in range(count):
        t_end = events[0].elapsed_time(events[i + 1]) / 1e3
        dt = events[i].elapsed_time(events[i + 1]) / 1e3
        for e in edges:
            if t_end <= e:
                sums[e][0] += dt
                sums[e][1] += 1
                break
    flops = 2.0 * m * n * k
    return {f"<={e}s": flops * cnt / tot / 1e12 for e, (tot, cnt) in sums.items() if cnt}


def sweep_shapes():
    out, seen = [], set()
    for h in (1024, 2048, 4096, 8192, 12288):
        for t in (2048, 4096, 8192, 16384):
            for din, dout in ((h, 3 * h), (h, h), (h, 4 * h), (4 * h, h), (h, 32768)):
                for shape in ((t, dout, din), (t, din, dout), (din, dout, t)):
                    if shape not in seen:
                        seen.add(shape)
                        out.append(shape)
    return out


def sweep_held(stream, holder, held):
    rows = []
    for m, n, k in sweep_shapes():
        fn = bf16_matmul(m, n, k)
        for _ in range(3):
            fn()
        alone = statistics.median(timed(fn, stream, 5) for _ in range(3))
        spin_s = alone * 5 * 4 + 2e5 / holder.clock_hz
        t = statistics.median(holder.time_beside(fn, stream, held, spin_s, 5) for _ in range(3))
        tiles = -(-m // 128) * -(-n // 256)
        rows.append({"m": m, "n": n, "k": k, "alone_s": alone, "held_s": t, "ratio": t / alone,
                     "tiles_128x256": tiles, "tflops_alone": 2.0 * m * n * k / alone / 1e12})
        del fn  # free the operands before the next shape's
    return rows


if __name__ == "__main__":
    main()
