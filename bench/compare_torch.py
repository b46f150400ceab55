"""rustytorch against PyTorch, in one process on one device: dispatch cost, pointwise ops,
LayerNorm, softmax, cross-entropy, GEMMs, causal attention, small training steps, GPT-2 training
(fp32 with TF32, and bf16 autocast, whose note also gives PyTorch's time under torch.compile where
it works) and allocator churn. Every workload gets identical inputs (numpy, fixed seeds) on both
sides, a check that the outputs agree, then interleaved timing (ours, torch, ours, ...) after
warm-up: the median of --reps, with CUDA events on the GPU and perf_counter on the CPU. The table
gives the ratio PyTorch time / ours against the goal, our fraction of the physical floor (bytes /
copy bandwidth or FLOPs / matmul rate, both measured at start) and the GPU clocks before -> after.
Workloads whose features rustytorch lacks print "not yet"; without PyTorch only our numbers are
printed.

    python bench/compare_torch.py                          # full run on the GPU
    python bench/compare_torch.py --device cpu --quick     # smoke run with tiny sizes
    python bench/compare_torch.py --only gemm --json out.json
"""
import argparse
import json
import os
import platform
import sys
import time

# bench/python instead of bench/ (whose torch/ folder would shadow PyTorch)
sys.path[0] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python")

from compare import harness, ops, training  # noqa: E402

COLUMNS = ("workload", "ours", "PyTorch", "ratio", "goal", "met", "floor", "check", "clocks", "note")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run (use on the CPU)")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per side (median)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--only", help="run the workloads whose name contains this (case-insensitive)")
    p.add_argument("--json", help="write every number to this file")
    p.add_argument("--dispatch-ops", type=int, help="tiny adds per side (default 10^5, 10^4 with --quick)")
    p.add_argument("--gpt-batches", type=int, nargs="+", default=[8, 32], help="GPT-2 training batch sizes")
    p.add_argument("--churn-steps", type=int, default=200, help="GPT steps of the allocator-churn workload")
    args = p.parse_args()
    if args.dispatch_ops is None:
        args.dispatch_ops = 10_000 if args.quick else 100_000
    return args


def load_sides(device):
    import rustytorch as rt
    if device == "cuda" and not rt.cuda.is_available():
        sys.exit(f"rustytorch has no CUDA here ({rt.cuda._cuda.unavailable_reason()}); run with --device cpu --quick")
    sides = [harness.Side("rustytorch", rt, device)]
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: our numbers only", file=sys.stderr)
        return sides
    if device == "cuda" and not torch.cuda.is_available():
        print("PyTorch has no CUDA here: our numbers only", file=sys.stderr)
        return sides
    return sides + [harness.Side("torch", torch, device)]


def run_workload(ctx, workload):
    row = {"workload": workload.name, "goal": workload.goal, "note": workload.note}
    if workload.run is None:
        return {**row, "status": workload.status}
    before = harness.gpu_clocks() if ctx.cuda else "n/a"
    t0 = time.perf_counter()
    try:
        row.update(workload.run(ctx))
    except Exception as e:  # a failing workload becomes a row; the others still run
        row.update(status="error", note=f"{type(e).__name__}: {e}".splitlines()[0][:160])
    for side in ctx.sides:
        side.release()
    row["clocks"] = f"{before}->{harness.gpu_clocks()}" if ctx.cuda else "n/a"
    row["seconds"] = time.perf_counter() - t0
    ours, theirs = row.get("ours"), row.get("torch")
    if isinstance(ours, float) and isinstance(theirs, float):
        row["ratio"] = theirs / ours
        if isinstance(workload.goal, float):
            row["met"] = row["ratio"] >= workload.goal and row.get("check") != "FAIL"
    if isinstance(ours, float) and row.get("floor_ms"):
        row["floor_fraction"] = row["floor_ms"] / ours
    return row


def fmt_time(ms):
    if not isinstance(ms, float):
        return ms or "-"
    return f"{ms * 1e3:.2f} us" if ms < 1 else f"{ms:.2f} ms"


def cells(row):
    goal = row["goal"]
    status = row.get("status")
    check = row.get("check", "-")
    if check == "FAIL":
        check = f"FAIL {row['error']:.1e}"
    met = row.get("met")
    return {
        "workload": row["workload"],
        "ours": status or fmt_time(row.get("ours")),
        "PyTorch": "-" if status else fmt_time(row.get("torch")),
        "ratio": f"{row['ratio']:.2f}x" if "ratio" in row else "-",
        "goal": f">={goal:g}x" if isinstance(goal, float) else (goal or "-"),
        "met": "-" if met is None else ("yes" if met else "NO"),
        "floor": f"{100 * row['floor_fraction']:.0f}%" if "floor_fraction" in row else "-",
        "check": "-" if status == "not yet" or status == "n/a" else check,
        "clocks": row.get("clocks", "-"),
        "note": row.get("note", ""),
    }


def print_table(rows):
    table = [dict(zip(COLUMNS, COLUMNS))] + [cells(r) for r in rows]
    widths = {c: max(len(str(t[c])) for t in table) for c in COLUMNS}
    for i, t in enumerate(table):
        print("  ".join(str(t[c]).ljust(widths[c]) for c in COLUMNS).rstrip())
        if i == 0:
            print("  ".join("-" * widths[c] for c in COLUMNS))


def describe(ctx):
    names = {s.name: f"{s.name} {s.lib.__version__}" for s in ctx.sides}
    if ctx.cuda:
        device = ctx.sides[-1].lib.cuda.get_device_properties(0)
        device = device["name"] if isinstance(device, dict) else device.name
    else:
        device = f"{platform.processor() or platform.machine()} CPU, {os.cpu_count()} cores"
    f = ctx.floors
    rates = ", ".join(f"{k} {v / 1e12:.3g}" for k, v in f["matmul_FLOPps"].items())
    print(f"{' vs '.join(names.values())} on {device}{' (quick sizes)' if ctx.args.quick else ''}")
    print(f"floors ({f['source']}): copy {f['copy_Bps'] / 1e9:.0f} GB/s; matmul TFLOP/s {rates}")
    print(f"median of {ctx.args.reps} interleaved reps after {ctx.args.warmup} warm-up; ratio = PyTorch time / "
          f"ours; floor = physical floor time / our time; clocks = SM/memory MHz before->after\n", flush=True)
    return {"device": device, "versions": names}


def main():
    start = time.perf_counter()
    args = parse_args()
    if args.device == "cpu":
        # Both libraries run OpenMP (PyTorch its bundled libgomp, rustytorch the system's); idle
        # threads of one spinning would steal the cores of the other.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    ctx = harness.Context(load_sides(args.device), args)
    workloads = ops.workloads(ctx) + training.workloads(ctx)
    if args.only:
        workloads = [w for w in workloads if args.only.lower() in w.name.lower()]
    clocks = harness.gpu_clocks() if ctx.cuda else "n/a"
    ctx.floors = harness.measure_floors(ctx)
    info = describe(ctx)
    rows = []
    for w in workloads:
        print(f"[{time.strftime('%H:%M:%S')}] {w.name}", file=sys.stderr, flush=True)
        rows.append(run_workload(ctx, w))
    print_table(rows)
    met = [r["met"] for r in rows if r.get("met") is not None]
    print(f"\ngoals met: {sum(met)} of {len(met)} decided; {time.perf_counter() - start:.0f} s in all")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**info, "args": vars(args), "time_unit": "ms", "floors": ctx.floors, "clocks_start": clocks,
                       "clocks_end": harness.gpu_clocks() if ctx.cuda else "n/a", "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
