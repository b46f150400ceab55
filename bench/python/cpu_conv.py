"""The convolution layers of the CNN trainer's model (rustytorch.train.vision.cnn) on the CPU, forward
and backward as a training step runs them (no input gradient for the first layer, whose input is the
data), in rustytorch and in PyTorch from the same numpy data, at the float32 matmul precision that
train_throughput.py sets ("high", which lets rustytorch run Winograd's algorithm on 3x3 layers).
Each library runs in a process of its own: two OpenMP runtimes in one process spin against each other
when they share a few cores. Rounds alternate between the libraries; each first runs two training
steps of the whole model, then reports the median of --steps timed repetitions of each layer after
warm-up; the best round counts, and the libraries' outputs and gradients are checked against each
other.

    OMP_NUM_THREADS=2 taskset -c 0,1 /opt/torchenv/bin/python bench/python/cpu_conv.py --batch 128
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def conv_layers(batch):
    """(name, input shape, Conv2d, needs an input gradient) of every Conv2d of the CNN, in order."""
    import rustytorch as rt
    from rustytorch.train import vision

    model = vision.cnn(rt.nn)
    x = rt.zeros(batch, 1, 28, 28)
    layers = []
    with rt.no_grad():
        for module in model:
            if isinstance(module, rt.nn.Conv2d):
                layers.append((f"conv{len(layers) + 1}", tuple(x.shape), module, bool(layers)))
            x = module(x)
    return layers


def layer_spec(name, shape, conv, input_grad):
    return dict(name=name, input=list(shape), out_channels=conv.out_channels, kernel=list(conv.kernel_size),
                stride=list(conv.stride), padding=list(conv.padding), dilation=list(conv.dilation),
                groups=conv.groups, bias=conv.bias is not None, input_grad=input_grad)


def train_steps(lib, batch, steps=2):
    """A few forward and backward passes of the whole CNN. They put a library in the state of a
    training run: PyTorch's first-layer convolution, for one, is ten times slower in a process that
    has not yet run a batch norm."""
    from rustytorch.train import vision

    rng = np.random.default_rng(0)
    model = vision.cnn(lib.nn)
    x = lib.from_numpy(rng.standard_normal((batch, 1, 28, 28), dtype=np.float32))
    y = lib.from_numpy(rng.integers(0, 10, batch, dtype=np.int64))
    for _ in range(steps):
        lib.nn.functional.cross_entropy(model(x), y).backward()


def worker(lib_name, specs, precision, steps, warmup, results_path):
    """Times every layer in one library; saves its first results to results_path; prints JSON."""
    lib = __import__(lib_name)
    lib.set_float32_matmul_precision(precision)
    F = lib.nn.functional
    train_steps(lib, specs[0]["input"][0])
    timings, saved = {}, {}
    for spec in specs:
        rng = np.random.default_rng(0)
        c_in = spec["input"][1]
        w_shape = (spec["out_channels"], c_in // spec["groups"], *spec["kernel"])
        x = lib.from_numpy(rng.standard_normal(spec["input"], dtype=np.float32))
        w = lib.from_numpy(rng.standard_normal(w_shape, dtype=np.float32) * 0.1).requires_grad_(True)
        b = lib.from_numpy(rng.standard_normal(spec["out_channels"], dtype=np.float32)) if spec["bias"] else None
        inputs = [t.requires_grad_(True) for t in (x, w, b) if t is not None and (t is not x or spec["input_grad"])]

        def forward():
            return F.conv2d(x, w, b, spec["stride"], spec["padding"], spec["dilation"], spec["groups"])

        grad_out = lib.from_numpy(rng.standard_normal(tuple(forward().shape), dtype=np.float32))

        def step():
            out = forward()
            return [out, *lib.autograd.grad(out, inputs, grad_out)]

        results = step()
        for i, t in enumerate(results):
            saved[f"{spec['name']}.{i}"] = t.detach().numpy()
        times = []
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            step()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        timings[spec["name"]] = statistics.median(times)
    np.savez(results_path, **saved)
    print(json.dumps(timings))


def run_worker(lib_name, args, specs, results_path):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib_name, "--specs", json.dumps(specs),
           "--precision", args.precision, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--results", results_path]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--precision", default="high", choices=["highest", "high", "medium"],
                   help="float32 matmul precision of both libraries (train_throughput.py's: high)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--specs", help=argparse.SUPPRESS)
    p.add_argument("--results", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, json.loads(args.specs), args.precision, args.steps, args.warmup, args.results)
        return

    specs = [layer_spec(*layer) for layer in conv_layers(args.batch)]
    libs = ["rustytorch"]
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0:
        libs.append("torch")
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    print(f"CNN conv layers, batch {args.batch}, float32 (matmul precision {args.precision}), "
          f"OMP_NUM_THREADS={threads}, one process per library, median of {args.steps} steps per round")
    best = {lib: {} for lib in libs}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {lib: os.path.join(tmp, f"{lib}.npz") for lib in libs}
        for r in range(args.rounds):
            for lib in libs:
                timings = run_worker(lib, args, specs, paths[lib])
                for name, seconds in timings.items():
                    best[lib][name] = min(best[lib].get(name, float("inf")), seconds)
                print(f"round {r}: {lib:10s} " + "  ".join(f"{n} {s * 1e3:7.3f} ms" for n, s in timings.items()),
                      flush=True)
        if "torch" in libs:
            ours, theirs = np.load(paths["rustytorch"]), np.load(paths["torch"])
            worst = max(float(np.linalg.norm(ours[k] - theirs[k]) / max(np.linalg.norm(theirs[k]), 1e-30))
                        for k in ours.files)
            print(f"largest relative L2 difference between the libraries' outputs and gradients: {worst:.1e}")
    print(f"\n{'layer':6s} {'input':18s} {'grads':9s} " + " ".join(f"{lib + ' ms':>14s}" for lib in libs)
          + ("   ratio (torch time / ours)" if "torch" in libs else ""))
    for spec in specs:
        name = spec["name"]
        row = f"{name:6s} {str(spec['input']):18s} {'x, w, b' if spec['input_grad'] else 'w, b':9s} "
        row += " ".join(f"{best[lib][name] * 1e3:14.3f}" for lib in libs)
        if "torch" in libs:
            row += f"   {best['torch'][name] / best['rustytorch'][name]:.2f}x"
        print(row)


if __name__ == "__main__":
    main()
