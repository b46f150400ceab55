"""Training throughput of the bundled models (rustytorch.train) in rustytorch and, built by the very
same code, in PyTorch: forward, loss, backward and an optimizer step on fixed random inputs (the
trainers' optimizers: Adam for mlp and cnn; AdamW with gradient clipping for gpt). fp32 weights; on
the GPU matmuls use TF32 on both sides. Rounds alternate between the libraries; each reports the
median step time of `--steps` timed steps after warm-up.

    python bench/python/train_throughput.py gpt --preset gpt2 --batch 8 --device cuda
    python bench/python/train_throughput.py cnn --batch 128 --device cpu
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import harness  # noqa: E402


def build(lib, args):
    """(model, optimizer, inputs, targets, units per step, clip) for one library."""
    from rustytorch.train import gpt, vision

    lib.manual_seed(0)
    rng = np.random.default_rng(0)
    if args.model == "gpt":
        base = gpt.PRESETS[args.preset]
        config = gpt.GPTConfig(base.layers, base.heads, base.embd, args.context or base.context, base.vocab)
        model = gpt.gpt_class(lib.nn, lib.nn.functional)(config).to(args.device)
        opt = lib.optim.AdamW(gpt.parameter_groups(model, 0.1), lr=3e-4, betas=(0.9, 0.95))
        data = lib.from_numpy(rng.integers(0, config.vocab, (args.batch, config.context + 1), dtype=np.int64))
        data = data.to(args.device)
        return model, opt, data[:, :-1], data[:, 1:], args.batch * config.context, 1.0
    model = getattr(vision, args.model)(lib.nn).to(args.device)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    x = lib.from_numpy(rng.standard_normal((args.batch, 1, 28, 28), dtype=np.float32)).to(args.device)
    y = lib.from_numpy(rng.integers(0, 10, args.batch, dtype=np.int64)).to(args.device)
    return model, opt, x, y, args.batch, None


def step_times(lib, args):
    sync = lib.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    model, opt, x, y, units, clip = build(lib, args)
    losses, times = [], []
    for i in range(args.warmup + args.steps):
        sync()
        t0 = time.perf_counter()
        out = model(x)
        loss = lib.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if clip:
            lib.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())  # synchronizes
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times), units, losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=["mlp", "cnn", "gpt"])
    p.add_argument("--preset", default="gpt2", help="gpt size (rustytorch.train.gpt.PRESETS)")
    p.add_argument("--context", type=int, help="gpt context (default: the preset's)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    libs = harness.libraries()
    unit = "tok" if args.model == "gpt" else "img"
    print(f"{args.model} {args.preset if args.model == 'gpt' else ''} batch {args.batch} on {args.device}, "
          f"fp32 (TF32 matmuls on the GPU), {args.steps} steps per round")
    best = {}
    for r in range(args.rounds):
        for name, lib in libs.items():
            seconds, units, losses = step_times(lib, args)
            best[name] = (min(best.get(name, (float("inf"),))[0], seconds), units)
            print(f"round {r}: {name:10s} {seconds * 1e3:9.2f} ms/step {units / seconds:11.0f} {unit}/s  "
                  f"loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    line = ", ".join(f"{name} {units / s:.0f} {unit}/s" for name, (s, units) in best.items())
    if "torch" in best:
        line += f"; ratio (torch time / ours) {best['torch'][0] / best['rustytorch'][0]:.2f}x"
    print("best: " + line)


if __name__ == "__main__":
    main()
