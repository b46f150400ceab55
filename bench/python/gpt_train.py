"""Training throughput of the bundled GPT (rustytorch.train.gpt) in rustytorch and, with the very same
model code, in PyTorch: forward, backward, gradient clipping and an AdamW step on fixed random tokens,
fp32 weights with TF32 matmuls on both sides. Rounds alternate between the libraries; each round
reports the median step time of `--steps` timed steps after warm-up.

    python bench/python/gpt_train.py [--preset gpt2] [--batch 8] [--context 1024] [--device cuda]
"""
import argparse
import statistics
import time

import numpy as np


def step_times(lib, device, config, tokens, steps, warmup):
    from rustytorch.train.gpt import gpt_class, parameter_groups

    sync = lib.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    lib.manual_seed(0)
    model = gpt_class(lib.nn, lib.nn.functional)(config).to(device)
    opt = lib.optim.AdamW(parameter_groups(model, 0.1), lr=3e-4, betas=(0.9, 0.95))
    data = lib.from_numpy(tokens).to(device)
    x, y = data[:, :-1], data[:, 1:]
    losses, times = [], []
    for i in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        logits = model(x)
        loss = lib.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())  # synchronizes
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    del model, opt
    return statistics.median(times), losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="gpt2")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--context", type=int)
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()

    import rustytorch as rt
    from rustytorch.train.gpt import PRESETS, GPTConfig

    base = PRESETS[args.preset]
    config = GPTConfig(base.layers, base.heads, base.embd, args.context or base.context, base.vocab)
    tokens = np.random.default_rng(0).integers(0, config.vocab, (args.batch, config.context + 1), dtype=np.int64)
    libs = {"rustytorch": rt}
    rt.set_float32_matmul_precision("high")
    try:
        import torch
        torch.set_float32_matmul_precision("high")
        libs["torch"] = torch
    except ImportError:
        pass
    n_tokens = args.batch * config.context
    print(f"GPT {args.preset}: {config.layers} layers, {config.heads} heads, {config.embd} wide, vocab {config.vocab}, "
          f"batch {args.batch} x {config.context} tokens, fp32 + TF32, on {args.device}")
    best = {}
    for r in range(args.rounds):
        for name, lib in libs.items():
            seconds, losses = step_times(lib, args.device, config, tokens, args.steps, args.warmup)
            best[name] = min(best.get(name, float("inf")), seconds)
            print(f"round {r}: {name:10s} {seconds * 1e3:8.2f} ms/step  {n_tokens / seconds:10.0f} tok/s  "
                  f"loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    if "torch" in best:
        print(f"best: rustytorch {n_tokens / best['rustytorch']:.0f} tok/s, torch {n_tokens / best['torch']:.0f} tok/s, "
              f"ratio (torch time / ours) {best['torch'] / best['rustytorch']:.2f}x")


if __name__ == "__main__":
    main()
