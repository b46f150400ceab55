"""Operator workloads: per-op dispatch cost, pointwise ops, LayerNorm, softmax, cross-entropy,
GEMMs and causal attention. Each setup(side) builds identical inputs on one side and returns the
call that is checked and timed; backward passes use autograd.grad with a fixed output gradient, so
gradients never accumulate between calls."""
import time

from .harness import (Workload, bytes_floor_ms, check_runs, flops_floor_ms, interleaved, integers, matmul_precision,
                      measure, medians, randn)

BF16_TOL = 2e-2
HOST_BATCH = 256


def workloads(ctx):
    size = ctx.size
    n_add = size(1 << 28, 1 << 20)
    norms = size([(65536, 4096), (32768, 768)], [(256, 1024), (128, 768)])
    wide = size((65536, 4096), (256, 1024))
    logits = size((16384, 50304), (32, 50304))
    gemms = size([(8192, 768, 3072), (8192, 3072, 768), (8192, 768, 50304)],
                 [(256, 96, 384), (256, 384, 96), (256, 96, 6288)])
    cube = size(4096, 256)
    attention = size([(8, 12, 1024, 64), (4, 16, 4096, 128)], [(2, 2, 128, 16), (1, 2, 256, 32)])
    dispatch = ctx.args.dispatch_ops
    return [
        Workload(f"dispatch: tiny add x{dispatch} (host/op)", 2.0, lambda c: tiny_add(c, dispatch)),
        Workload(f"dispatch: tiny mul+sum fwd+bwd x{dispatch // 10}", 2.0, lambda c: tiny_graph(c, dispatch // 10)),
        Workload(f"dispatch: tiny backward only x{dispatch // 10}", None,
                 lambda c: tiny_graph(c, dispatch // 10, backward_only=True)),
        Workload(f"add fp32 2^{n_add.bit_length() - 1} elements", 0.95, lambda c: add(c, n_add)),
        Workload(f"gelu(tanh) bf16 {wide[0]}x{wide[1]} fwd+bwd", 0.95, lambda c: gelu(c, wide)),
        *[Workload(f"layernorm bf16 {r}x{k} fwd+bwd", 1.25, lambda c, r=r, k=k: layernorm(c, r, k)) for r, k in norms],
        Workload(f"softmax bf16 {wide[0]}x{wide[1]} fwd", 2.0, lambda c: softmax(c, wide)),
        Workload(f"cross-entropy bf16 {logits[0]}x{logits[1]} fwd+bwd", 2.0, lambda c: cross_entropy(c, logits)),
        *[Workload(f"gemm bf16 {m}x{k}x{n}", 0.97, lambda c, s=(m, k, n): gemm(c, s, "bfloat16")) for m, k, n in gemms],
        Workload(f"gemm fp32 {cube}^3 (exact)", 0.97, lambda c: gemm(c, (cube,) * 3, "float32")),
        *[Workload(f"sdpa causal bf16 {b},{h},{t},{d} fwd+bwd", 0.95, lambda c, s=(b, h, t, d): attention_fwd_bwd(c, s))
          for b, h, t, d in attention],
    ]


# ---------------------------------------------------------------------------------------------
# Dispatch: host time per op from Python, in batches timed before the device is drained

def host_timed(side, prepare, body):
    """A run returning the host ms per op of body(prepare()) over HOST_BATCH ops."""
    def run():
        state = prepare()
        side.sync()
        t0 = time.perf_counter()
        body(state)
        elapsed = time.perf_counter() - t0
        side.sync()
        return elapsed * 1e3 / HOST_BATCH
    return run


def host_measure(ctx, setup, count, tol):
    """setup(side) -> (check_run, prepare, body); times count // HOST_BATCH batches per side."""
    built = {side.name: setup(side) for side in ctx.sides}
    result = check_runs({name: b[0] for name, b in built.items()}, tol)
    runs = {side.name: host_timed(side, *built[side.name][1:]) for side in ctx.sides}
    times = interleaved(ctx, runs, timer=lambda side, run: run(), reps=max(ctx.args.reps, count // HOST_BATCH))
    return {**result, **medians(times)}


def tiny_add(ctx, count):
    def setup(side):
        a, b = side.tensor(randn(1, 1)), side.tensor(randn(1, 2))

        def body(_):
            for _ in range(HOST_BATCH):
                a + b
        return (lambda: a + b), (lambda: None), body
    return host_measure(ctx, setup, count, 1e-6)


def tiny_graph(ctx, count, backward_only=False):
    """(x * y).sum() of two one-element leaves and its backward; backward_only times the backward
    calls of graphs built beforehand."""
    def setup(side):
        x, y = side.tensor(randn(1, 1), requires_grad=True), side.tensor(randn(1, 2), requires_grad=True)

        def check():
            x.grad = None
            (x * y).sum().backward()
            return x.grad

        if backward_only:
            def prepare():
                return [(x * y).sum() for _ in range(HOST_BATCH)]

            def body(losses):
                for loss in losses:
                    loss.backward()
            return check, prepare, body

        def body(_):
            for _ in range(HOST_BATCH):
                (x * y).sum().backward()
        return check, (lambda: None), body
    result = host_measure(ctx, setup, count, 1e-6)
    result["note"] = "fixed cost of one backward() call" if backward_only else ""
    return result


# ---------------------------------------------------------------------------------------------
# Memory-bound ops: floor = bytes a single pass must move / copy bandwidth

def add(ctx, n):
    def setup(side):
        a, b = side.tensor(randn(n, 1)), side.tensor(randn(n, 2))
        return lambda: a + b
    return {**measure(ctx, setup, 1e-6), "floor_ms": bytes_floor_ms(ctx, 12 * n)}


def forward_backward(side, fn, inputs, grad_output=None):
    """A run returning (fn(*inputs), *d/d inputs) for a fixed output gradient."""
    def run():
        out = fn(*inputs)
        return (out, *side.lib.autograd.grad(out, list(inputs), grad_output))
    return run


def gelu(ctx, shape):
    def setup(side):
        x = side.tensor(randn(shape, 1), "bfloat16", True)
        return forward_backward(side, lambda t: side.F.gelu(t, approximate="tanh"), [x],
                                side.tensor(randn(shape, 2), "bfloat16"))
    n = shape[0] * shape[1]  # forward reads x, writes y; backward reads x, dy, writes dx
    return {**measure(ctx, setup, BF16_TOL), "floor_ms": bytes_floor_ms(ctx, 10 * n)}


def layernorm(ctx, rows, cols):
    def setup(side):
        x = side.tensor(randn((rows, cols), 1), "bfloat16", True)
        w = side.tensor(1 + randn(cols, 2, 0.1), "bfloat16", True)
        b = side.tensor(randn(cols, 3, 0.1), "bfloat16", True)
        return forward_backward(side, lambda *t: side.F.layer_norm(t[0], (cols,), t[1], t[2]), [x, w, b],
                                side.tensor(randn((rows, cols), 4), "bfloat16"))
    return {**measure(ctx, setup, BF16_TOL), "floor_ms": bytes_floor_ms(ctx, 10 * rows * cols)}


def softmax(ctx, shape):
    def setup(side):
        x = side.tensor(randn(shape, 1, 2.0), "bfloat16")
        return lambda: side.F.softmax(x, -1)
    return {**measure(ctx, setup, BF16_TOL), "floor_ms": bytes_floor_ms(ctx, 4 * shape[0] * shape[1])}


def cross_entropy(ctx, shape):
    def setup(side):
        logits = side.tensor(randn(shape, 1, 2.0), "bfloat16", True)
        target = side.tensor(integers(shape[1], shape[0], 2))
        return forward_backward(side, lambda t: side.F.cross_entropy(t, target), [logits])
    n = shape[0] * shape[1]  # forward reads the logits; backward reads them and writes their gradient
    return {**measure(ctx, setup, BF16_TOL), "floor_ms": bytes_floor_ms(ctx, 6 * n)}


# ---------------------------------------------------------------------------------------------
# Compute-bound ops: floor = FLOPs / matmul rate

def gemm(ctx, shape, dtype):
    m, k, n = shape

    def setup(side):
        a, b = side.tensor(randn((m, k), 1), dtype), side.tensor(randn((k, n), 2), dtype)
        return lambda: a @ b
    with matmul_precision(ctx.sides, "highest"):
        result = measure(ctx, setup, BF16_TOL if dtype == "bfloat16" else 1e-4)
    precision = "bf16" if dtype == "bfloat16" else "fp32"
    return {**result, "floor_ms": flops_floor_ms(ctx, 2 * m * k * n, precision)}


def attention_fwd_bwd(ctx, shape):
    b, h, t, d = shape

    def setup(side):
        q, k, v = (side.tensor(randn(shape, seed), "bfloat16", True) for seed in (1, 2, 3))
        sdpa = side.F.scaled_dot_product_attention
        return forward_backward(side, lambda *x: sdpa(*x, is_causal=True), [q, k, v],
                                side.tensor(randn(shape, 4), "bfloat16"))
    # causal: half of 4*T^2*D per head forward; backward 2.5x forward
    flops = 7 * b * h * t * t * d
    return {**measure(ctx, setup, 5e-2), "floor_ms": flops_floor_ms(ctx, flops, "bf16")}
