"""Kernel profile of the GPT-2 training step: the GPU time of every kernel of a few steps, for
rustytorch and PyTorch side by side, grouped into the step's parts (GEMMs, attention, layer norm,
GELU, cross-entropy, the optimizer, copies, ...).

PyTorch's profiler (CUPTI) sees every kernel launched in the process, so one trace of each side's
steps measures both libraries the same way. Needs torch on a CUDA machine; builds nothing:

    PYTHONPATH=build/gpu/python python3 bench/python/profile_step.py --dtype bf16 --batch 8

prints, per part, the GPU milliseconds per step and the share of the step, then the heaviest
kernels of each side.
"""
import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__)))

from compare import harness, training  # noqa: E402

# (part, pattern over the lower-cased kernel name), first match wins. Names differ between the two
# libraries (cuBLASLt's and cuDNN's kernels are shared), so each part lists both spellings.
PARTS = [
    ("attention", r"attention|flash|fmha|sdpa|efficient_attention"),
    ("gemm", r"gemm|cutlass|sm90_xmma|nvjet|cublas|ampere_|sm80_|splitk"),
    ("cross-entropy", r"cross_entropy|nll_loss|log_softmax|logsoftmax|softmax"),
    ("layer norm", r"layer_norm|layernorm|norm_rows|gammabeta"),
    ("gelu", r"gelu"),
    ("optimizer", r"adam|multi_tensor|foreach|sgd|fused_step"),
    ("gradient clipping", r"norm|clip|non_finite|amp_"),
    ("embedding", r"embedding|index_select|gather|scatter|indexing_backward|sort|radix"),
    ("reductions", r"reduce|sum|mean|amax"),
    ("casts and copies", r"copy|cast|convert|contiguous|transpose|permute|cat|fn::identity"),
    ("pointwise", r"elementwise|pointwise|vectorized|unrolled|binary|unary|add|mul|fill|where"),
]


def part_of(name):
    lower = name.lower()
    for part, pattern in PARTS:
        if re.search(pattern, lower):
            return part
    return "other"


def profile_side(side, run, steps, warmup):
    """{kernel name: [total GPU us over `steps` steps, launches]} of side's step."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warmup):
        run()
    side.sync()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run()
        side.sync()
        torch.cuda.synchronize()
    kernels = collections.defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:  # kernels, memcpys and memsets
            kernels[event.name][0] += event.device_time
            kernels[event.name][1] += 1
    return kernels


def summarize(kernels, steps):
    """{part: ms per step} and the total."""
    parts = collections.Counter()
    for name, (us, _) in kernels.items():
        parts["copies (memcpy/memset)" if name.startswith(("Memcpy", "Memset")) else part_of(name)] += us
    return {k: v / steps / 1e3 for k, v in parts.items()}, sum(parts.values()) / steps / 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16", help="bf16 autocast or fp32 + TF32")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=3, help="profiled steps (averaged)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--top", type=int, default=15, help="heaviest kernels listed per side")
    p.add_argument("--side", choices=["both", "rustytorch", "torch"], default="both")
    args = p.parse_args()

    import numpy as np
    import rustytorch as rt
    import torch
    sides = [harness.Side("rustytorch", rt, "cuda"), harness.Side("torch", torch, "cuda")]
    ctx = harness.Context(sides, argparse.Namespace(quick=False, device="cuda"))
    autocast = "bfloat16" if args.dtype == "bf16" else None
    models = training.gpt_models(ctx, fused=autocast is not None)
    config = training.gpt_config(ctx)[1]
    data = np.random.default_rng(1).integers(0, config.vocab, (args.batch, config.context + 1))
    results = {}
    with harness.matmul_precision(sides, "high"):
        for side in sides:
            if args.side not in ("both", side.name):
                continue
            model, opt = models[side.name]
            tokens = side.tensor(data)
            run = training.step_run(side, model, opt, tokens[:, :-1], tokens[:, 1:], clip=1.0, autocast=autocast)
            results[side.name] = profile_side(side, run, args.steps, args.warmup)

    summaries = {name: summarize(k, args.steps) for name, k in results.items()}
    names = list(summaries)
    parts = sorted({p for s, _ in summaries.values() for p in s}, key=lambda p: -max(s.get(p, 0) for s, _ in
                                                                                         summaries.values()))
    print(f"GPT-2 124M step, {args.dtype}, B={args.batch} T={config.context}: GPU ms per step "
          f"(mean of {args.steps} profiled steps)")
    print(f"| part | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for part in parts:
        cells = [f"{summaries[n][0].get(part, 0):.2f} ({100 * summaries[n][0].get(part, 0) / summaries[n][1]:.0f}%)"
                 for n in names]
        print(f"| {part} | " + " | ".join(cells) + " |")
    print("| total | " + " | ".join(f"{summaries[n][1]:.2f}" for n in names) + " |")
    print("| kernels per step | " + " | ".join(f"{sum(c for _, c in results[n].values()) / args.steps:.0f}"
                                             for n in names) + " |")
    for name, kernels in results.items():
        print(f"\n{name}: heaviest kernels (ms per step, launches per step)")
        for kname, (us, count) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:args.top]:
            print(f"  {us / args.steps / 1e3:7.3f} ms {count / args.steps:6.0f}x  [{part_of(kname)}] {kname[:110]}")


if __name__ == "__main__":
    main()
