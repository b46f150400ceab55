"""The timing harness: one Side per library on the device, identical inputs from numpy, the
agreement check, interleaved timing (CUDA events on the GPU, perf_counter on the CPU), the physical
floors (copy bandwidth and matmul rate) and the GPU clocks."""
import contextlib
import gc
import math
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np


class Side:
    """One library (rustytorch or torch) on one device."""

    def __init__(self, name, lib, device):
        self.name, self.lib, self.F, self.device = name, lib, lib.nn.functional, device
        self.cuda = device == "cuda"

    def sync(self):
        if self.cuda:
            self.lib.cuda.synchronize()

    def tensor(self, array, dtype=None, requires_grad=False):
        """The numpy array on the device, converted there to dtype (a name such as "bfloat16")."""
        t = self.lib.from_numpy(np.ascontiguousarray(array)).to(self.device)
        if dtype is not None:
            t = t.to(getattr(self.lib, dtype))
        return t.requires_grad_() if requires_grad else t

    def time_ms(self, fn):
        """Device time of one call of fn: CUDA events around it on the GPU, wall time on the CPU."""
        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
        start, end = self.lib.cuda.Event(enable_timing=True), self.lib.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def release(self):
        gc.collect()
        if self.cuda:
            self.lib.cuda.synchronize()
            self.lib.cuda.empty_cache()


@dataclass
class Context:
    sides: list
    args: object
    floors: dict = field(default_factory=dict)
    cache: dict = field(default_factory=dict)

    @property
    def cuda(self):
        return self.args.device == "cuda"

    def size(self, full, quick):
        return quick if self.args.quick else full


@dataclass
class Workload:
    """A row of the table. goal: the least ratio (PyTorch time / ours) aimed at, or a text for rows
    that decide "met" themselves. run(ctx) returns {"ours", "torch" (ms, or text), "check",
    "floor_ms", "note", "met", ...}; without run the row is `status` ("not yet", "n/a") and note
    says why."""
    name: str
    goal: object
    run: Optional[Callable] = None
    status: str = ""
    note: str = ""


def randn(shape, seed, scale=1.0):
    """Standard normal float32 values (never zeros); large arrays repeat a 2^24-value block."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    n = math.prod(shape)
    block = np.random.default_rng(seed).standard_normal(min(n, 1 << 24), dtype=np.float32)
    return (np.resize(block, n) * np.float32(scale)).reshape(shape)


def integers(high, shape, seed):
    return np.random.default_rng(seed).integers(0, high, shape, dtype=np.int64)


def to_numpy(outputs):
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return [t.detach().float().cpu().numpy() for t in outputs]


def relative_error(a, b):
    """||a - b|| / ||b||; inf for different shapes or non-finite values."""
    if a.shape != b.shape:
        return math.inf
    error = float(np.linalg.norm(a - b)) / max(float(np.linalg.norm(b)), 1e-30)
    return error if math.isfinite(error) else math.inf


def agreement(outputs, tol):
    """("ok" or "FAIL", worst relative L2 error) of ours against torch; ("-", None) without torch."""
    if "torch" not in outputs:
        return "-", None
    ours, theirs = outputs["rustytorch"], outputs["torch"]
    errors = [relative_error(a, b) for a, b in zip(ours, theirs)] if len(ours) == len(theirs) else [math.inf]
    worst = max(errors)
    return ("ok" if worst <= tol else "FAIL"), worst


def interleaved(ctx, runs, timer=None, reps=None):
    """{side: [ms per rep]}: warm-up, then reps alternating between the sides (ours, torch, ...).
    timer(side, run) -> ms; default: the device time of one call."""
    timer = timer or (lambda side, fn: side.time_ms(fn))
    for side in ctx.sides:
        for _ in range(ctx.args.warmup):
            runs[side.name]()
        side.sync()
    times = {side.name: [] for side in ctx.sides}
    for _ in range(reps or ctx.args.reps):
        for side in ctx.sides:
            times[side.name].append(timer(side, runs[side.name]))
    return times


def check_runs(runs, tol, checks=1):
    """{"check", "error"} of `checks` consecutive calls of each side's run."""
    outputs = {name: [a for _ in range(checks) for a in to_numpy(run())] for name, run in runs.items()}
    check, error = agreement(outputs, tol)
    return {"check": check, "error": error}


def measure(ctx, setup, tol, checks=1):
    """Builds run = setup(side) on each side, checks the runs agree, then times them interleaved."""
    runs = {side.name: setup(side) for side in ctx.sides}
    result = check_runs(runs, tol, checks)
    return {**result, **medians(interleaved(ctx, runs))}


def medians(times):
    return {("ours" if name == "rustytorch" else name): statistics.median(t) for name, t in times.items()}


def libraries(matmul_precision="high"):
    """{"rustytorch": rustytorch, "torch": torch when installed}, each with that float32 matmul precision."""
    import rustytorch
    libs = {"rustytorch": rustytorch}
    try:
        import torch
        libs["torch"] = torch
    except ImportError:
        pass
    for lib in libs.values():
        lib.set_float32_matmul_precision(matmul_precision)
    return libs


@contextlib.contextmanager
def matmul_precision(sides, precision):
    """set_float32_matmul_precision(precision) on every side for a with-block, restored after."""
    saved = [side.lib.get_float32_matmul_precision() for side in sides]
    for side in sides:
        side.lib.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        for side, value in zip(sides, saved):
            side.lib.set_float32_matmul_precision(value)


def gpu_clocks():
    """"SM/memory MHz" of the first GPU, from nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return "/".join(v.strip() for v in out.splitlines()[0].split(","))
    except (OSError, subprocess.SubprocessError, IndexError):
        return "?"


def _median_ms(side, fn, reps=10):
    fn()
    side.sync()
    return statistics.median(side.time_ms(fn) for _ in range(reps))


def measure_floors(ctx):
    """Copy bandwidth (bytes/s, read + write) and matmul rates (FLOP/s per precision): with torch
    (else rustytorch) on the GPU, with numpy on the CPU."""
    if not ctx.cuda:
        return _numpy_floors(ctx)
    side = next((s for s in ctx.sides if s.name == "torch"), ctx.sides[0])
    lib = side.lib
    src = lib.ones(1 << 28, device="cuda")
    dst = lib.empty(1 << 28, device="cuda")
    floors = {"source": side.name, "copy_Bps": 2 * src.numel() * 4 / (_median_ms(side, lambda: dst.copy_(src)) / 1e3)}
    del src, dst
    n = 8192
    rates = {}
    for name, dtype, precision in (("bf16", lib.bfloat16, "highest"), ("fp32", lib.float32, "highest"),
                                   ("tf32", lib.float32, "high")):
        a, b = lib.randn(n, n, device="cuda").to(dtype), lib.randn(n, n, device="cuda").to(dtype)
        with matmul_precision([side], precision):
            rates[name] = 2 * n ** 3 / (_median_ms(side, lambda: a @ b) / 1e3)
    floors["matmul_FLOPps"] = rates
    side.release()
    return floors


def _numpy_floors(ctx):
    n = ctx.size(1 << 28, 1 << 24)
    src, dst = np.ones(n, np.float32), np.empty(n, np.float32)
    copy_s = statistics.median(_wall(lambda: np.copyto(dst, src)) for _ in range(5))
    m = ctx.size(4096, 1024)
    a, b = randn((m, m), 0), randn((m, m), 1)
    rate = 2 * m ** 3 / statistics.median(_wall(lambda: a @ b) for _ in range(5))
    return {"source": "numpy", "copy_Bps": 2 * n * 4 / copy_s,
            "matmul_FLOPps": {"bf16": rate, "fp32": rate, "tf32": rate}}


def _wall(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bytes_floor_ms(ctx, nbytes):
    return nbytes / ctx.floors["copy_Bps"] * 1e3


def flops_floor_ms(ctx, flops, precision):
    return flops / ctx.floors["matmul_FLOPps"][precision] * 1e3
