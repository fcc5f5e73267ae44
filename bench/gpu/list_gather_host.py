#!/usr/bin/env python3
"""Host time of a list-form ZeRO-3 gather, per rank, measured: the check behind
sim::kEagerOpHostSeconds and ProgramBuilder::list_gather.

DeepSpeed before 0.5.5 gathers each partitioned parameter as a list of per-rank views
(v0.3.14 deepspeed/runtime/zero/partition_parameters.py, _allgather_param):

    flat_tensor = torch.zeros(aligned_param_size, ...).view(-1)
    torch.cuda.synchronize()
    partitions = []
    for i in range(self.world_size):
        partitions.append(flat_tensor.narrow(0, partition_size * i, partition_size))
        if i == torch.distributed.get_rank(group=self.ds_process_group):
            partitions[i].data.copy_(param.ds_tensor.data, non_blocking=True)
    handle = torch.distributed.all_gather(partitions, partitions[self.rank], group=..., async_op=...)

torch.distributed.all_gather checks the list in Python (isinstance, is_complex per tensor)
and hands it to ProcessGroupNCCL::allgather, which gathers into one flat buffer and then, in
the collective's `post` step right after the NCCL call, copies row j of it into view j on the
NCCL stream: for each j, recordStream(view j's storage, nccl stream) and
view[j].copy_(flat[j], non_blocking=True).

With one GPU there is no W-rank group, so each piece is timed on its own with the W views a
real gather would have: (a) DeepSpeed's Python loop, with a real process group for get_rank;
(b) all_gather's Python checks of the list; (c) the C++ post loop, compiled as a PyTorch
extension that does what ProcessGroupNCCL does (the list's conversion to C++ included), on a
side stream, host time and the time until its copies finished; (d) the copies' own GPU time
when they wait behind a long kernel, as they wait behind the gather. Every figure is a median over
repeats, divided by W. Shapes: GPT-3 175B's per-layer weights and a bias (hidden 12288),
fp16, for W in 64, 384, 1536, ROUNDS times (default 5). Each row also times a fixed pure-Python
loop (python_ref_s), so rows where the host ran slower can be told apart. At W = 1536 the
queued figure of the bias rose from 2.0 to 2.5-2.6 us a copy: 1,536 pending copies are likely
more than the stream's launch queue holds, so the host's issue rate mixes in there.

usage: list_gather_host.py OUT.json
"""
import json
import os
import platform
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.cpp_extension import load_inline

POST_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// ProcessGroupNCCL::allgather's post step for one device: the flat result's row j into view j.
void post(std::vector<at::Tensor> views, at::Tensor flat, int64_t stream_ptr) {
  auto stream = c10::cuda::getStreamFromExternal(reinterpret_cast<cudaStream_t>(stream_ptr), flat.device().index());
  c10::cuda::CUDAStreamGuard guard(stream);
  for (size_t j = 0; j < views.size(); ++j) {
    c10::cuda::CUDACachingAllocator::recordStream(views[j].storage().data_ptr(), stream);
    views[j].copy_(flat[j], true);
  }
}
// The list's arrival in C++ alone (pybind's conversion of W tensors), to split it off.
int64_t take(std::vector<at::Tensor> views) { return static_cast<int64_t>(views.size()); }
"""

HIDDEN = 12288
SHAPES = {  # elements of one parameter of a GPT-3 175B layer
    "qkv_weight": 3 * HIDDEN * HIDDEN,
    "fc1_weight": 4 * HIDDEN * HIDDEN,
    "proj_weight": HIDDEN * HIDDEN,
    "qkv_bias": 3 * HIDDEN,
}
WORLDS = [64, 384, 1536]
REPEATS = 7
ROUNDS = int(os.environ.get("ROUNDS", "5"))  # the whole sweep again: the host's speed drifts between runs


def median_s(fn, repeats=REPEATS):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def python_ref():
    """A fixed piece of pure-Python work: how fast the host runs the interpreter right now."""
    total = 0
    for i in range(100000):
        total += i & 7
    return total


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    out_path = sys.argv[1]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    group = dist.new_group([0])
    t0 = time.perf_counter()
    ext = load_inline("list_gather_post", cpp_sources=POST_SRC, functions=["post", "take"], with_cuda=True,
                      extra_cflags=["-O2"], verbose=False)
    build_s = time.perf_counter() - t0
    side = torch.cuda.Stream()
    clock_hz = 2.0e9  # cycles of torch.cuda._sleep per second, at most (H100 SXM: 1,980 MHz)
    rows = []
    for rnd, world, (name, numel) in ((r, w, s) for r in range(ROUNDS) for w in WORLDS for s in SHAPES.items()):
        part = -(-numel // world)
        flat_tensor = torch.zeros(part * world, dtype=torch.float16, device="cuda")
        shard = torch.randn(part, device="cuda").half()
        gathered = torch.randn(world, part, device="cuda").half()  # ProcessGroupNCCL's flat result
        torch.cuda.synchronize()

        def zeros():
            torch.zeros(part * world, dtype=torch.float16, device="cuda").view(-1)

        def ds_loop():
            partitions = []
            for i in range(world):
                partitions.append(flat_tensor.narrow(0, part * i, part))
                if i == dist.get_rank(group=group):
                    partitions[i].data.copy_(shard.data, non_blocking=True)
            return partitions

        views = ds_loop()

        def py_checks():
            if not isinstance(views, list) or not all(isinstance(p, torch.Tensor) for p in views):
                raise TypeError
            [t if not t.is_complex() else torch.view_as_real(t) for t in views]

        def to_cpp():
            ext.take(views)

        def post_host():
            ext.post(views, gathered, side.cuda_stream)

        def post_done():
            ext.post(views, gathered, side.cuda_stream)
            side.synchronize()

        for fn in (zeros, ds_loop, py_checks, to_cpp, post_done):  # warm-up
            fn()
        torch.cuda.synchronize()
        row = {"round": rnd, "python_ref_s": median_s(python_ref), "world": world, "param": name,
               "elements": numel, "partition_bytes": 2 * part}
        row["zeros_s"] = median_s(lambda: (zeros(), torch.cuda.synchronize()))
        row["ds_loop_per_rank_s"] = median_s(ds_loop) / world
        row["py_checks_per_rank_s"] = median_s(py_checks) / world
        row["to_cpp_per_rank_s"] = median_s(to_cpp) / world

        def post_host_s():
            side.synchronize()
            t0 = time.perf_counter()
            post_host()
            t = time.perf_counter() - t0
            side.synchronize()
            return t

        row["post_host_per_rank_s"] = statistics.median(post_host_s() for _ in range(REPEATS)) / world
        row["post_until_copied_per_rank_s"] = median_s(post_done) / world

        def queued_s():
            # The copies wait behind a kernel that outlasts their issue (as they wait behind
            # the gather): the GPU then runs them back to back, and the time from the
            # blocker's end to the last copy's end is the copies' own GPU time.
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            side.synchronize()
            with torch.cuda.stream(side):
                torch.cuda._sleep(int(clock_hz * (world * 20e-6 + 5e-3)))
                start.record()
            post_host()
            with torch.cuda.stream(side):
                stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) / 1e3

        row["queued_copies_gpu_per_rank_s"] = statistics.median(queued_s() for _ in range(REPEATS)) / world
        row["copy_bytes_per_rank"] = 2 * 2 * part
        rows.append(row)
        print(json.dumps(row), flush=True)
        del flat_tensor, gathered, views
        torch.cuda.empty_cache()
    result = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "extension_build_s": build_s,
        "rows": rows,
    }
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, out_path)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
