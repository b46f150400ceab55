"""Mixed-precision training parity of rustytorch with PyTorch. A GPT-2-shaped model (the class of
rustytorch.train.gpt, built in each library by gpt_class(nn, F), every run starting from the same
rustytorch-initialized weights) trains for --steps steps on the same batches in both libraries:
with the forward and the loss under bf16 autocast, and under fp16 autocast with a GradScaler
(unscale_ before clipping, then step and update). Both use AdamW (GPT-2's betas, weight decay 0.1
on the matrices, fused on CUDA on both sides), gradient clipping at 1.0, float32 parameters and
the trainer's warm-up + cosine learning rate. The batches come from a random Markov chain over
1024 token ids with 8 successors each, so the loss falls from ln(vocab) towards ln(1024) ~ 6.9 (the
token frequencies) and then ln(8) ~ 2.1 (the successors): the comparison follows a moving curve,
not a plateau. The GradScaler runs with PyTorch's defaults (init scale 2^16, growth every 2000
steps); its exact backoff and growth rule against PyTorch's is the subject of the scripted CPU test
(tests/python/test_grad_scaler.py), --growth-interval exercises it here too.

Prints, per dtype, a table of both libraries' losses per step and their difference, the final max
|diff| and PASS or FAIL; for fp16 also both GradScaler scale sequences, which must be equal (the
same steps overflow and are skipped in both). --out writes every curve as JSON.

Tolerance. bf16 keeps 8 significant bits (unit roundoff 2^-9 ~ 2e-3, fp16 2^-11), so one rounding
moves a value by ~0.2%; a loss of ~10.8 is a mean over B*T tokens, whose independent rounding
errors mostly cancel (PyTorch's own bf16 and fp32 losses agree to ~1e-5 relative at the first
step), but every step feeds its rounding into the weights, and AdamW amplifies those differences as
any chaotic trajectory does: a GPT-2-sized model at this learning rate has single-step loss spikes
(to ~19, recovered the next step) whose step depends on the last bits of the weights. On the H200
both libraries' fp32 runs spiked at the same step to within 1e-3, while PyTorch's bf16 run spiked
at a step where its fp32 run and rustytorch's bf16 run did not. A maximum over the steps therefore
measures where the spikes fell, not the implementation; the check uses the typical step instead.
PyTorch trains a third time in fp32 and N = median over the steps of |PyTorch amp loss - PyTorch
fp32 loss| is how far rounding alone moves the curve at a typical step. Two correct
implementations of the same recipe differ from each other by roundings of that size (independent
ones: ~sqrt(2) N), so the check is

    median over the steps of |ours - PyTorch| <= 2 N + 0.002
    |mean of ours - mean of PyTorch over the last 10 steps| <= 2 N + 0.002

where the absolute 0.002 keeps a run whose noise happens to be tiny from failing over last-bit
differences. A wrong policy moves the curve by more at every step: a loss of ~10.8 computed in
bf16 is off by up to 0.03 (half of bf16's spacing 0.0625 between 8 and 16), a softmax or layer norm
in bf16 shifts the whole curve. The maxima are printed too, and for fp16 both GradScaler scale
sequences (equal unless a rounding-dependent spike overflowed in one library only). The fp32 runs
of both libraries are compared at every step (printed, not judged: they agree to ~1e-3 at most).

    python bench/python/amp_parity.py --device cuda --steps 50                 # 12 x 768, T=256, B=8
    python bench/python/amp_parity.py --device cuda --preset gpt2 --dtype bf16  # GPT-2 small, T=1024
    python bench/python/amp_parity.py --device cpu --preset cpu --steps 5       # smoke run
"""
import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, replace

# Both libraries run OpenMP on the CPU; idle threads of one spinning would steal the other's cores.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

import rustytorch as rt  # noqa: E402
from rustytorch.train import gpt  # noqa: E402
from rustytorch.train.loop import warmup_cosine  # noqa: E402

#: The default: GPT-2 small's shape (12 layers, 12 heads, 768 wide, padded vocabulary) at context 256.
PRESETS = {"gpt2-t256": replace(gpt.PRESETS["gpt2"], context=256), **gpt.PRESETS}
MARKOV_STATES, MARKOV_SUCCESSORS = 1024, 8
ABS_TOL = 0.002
LAST_STEPS = 10  # the window of the final-loss comparison


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--dtype", default="both", choices=["bf16", "fp16", "both"])
    p.add_argument("--preset", default="gpt2-t256", choices=list(PRESETS),
                   help="model shape (gpt2-t256: GPT-2 small at context 256; gpt2: context 1024)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=6e-4, help="peak learning rate (6e-4, GPT-2 small's)")
    p.add_argument("--growth-interval", type=int, default=2000,
                   help="the GradScaler's growth interval (2000, PyTorch's; a small one makes overflows)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the curves and the verdict to this JSON file")
    args = p.parse_args()
    if args.steps < 1 or args.batch < 1:
        p.error(f"--steps and --batch must be positive, got {args.steps} and {args.batch}")
    return args


def markov_batches(steps, batch, context, vocab, seed):
    """[steps, batch, context + 1] int64 tokens of a random first-order Markov chain: each of the
    first min(vocab, 1024) ids is followed by one of 8 successors of its own."""
    rng = np.random.default_rng(seed)
    states = min(vocab, MARKOV_STATES)
    successors = rng.integers(0, states, (states, MARKOV_SUCCESSORS))
    tokens = np.empty((steps * batch, context + 1), np.int64)
    tokens[:, 0] = rng.integers(0, states, steps * batch)
    choices = rng.integers(0, MARKOV_SUCCESSORS, (steps * batch, context))
    for t in range(context):
        tokens[:, t + 1] = successors[tokens[:, t], choices[:, t]]
    return tokens.reshape(steps, batch, context + 1)


def initial_weights(config, seed):
    """The model's initial state dict as numpy arrays, from rustytorch's initialization."""
    rt.manual_seed(seed)
    model = gpt.GPT(config)
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def train(lib, device, config, weights, data, dtype, lr, growth_interval):
    """{"loss": [per step], "scale": [the GradScaler's scale each step used], "seconds"} of one
    run of lib (rustytorch or torch) in dtype ("fp32", "bf16" or "fp16")."""
    model = gpt.gpt_class(lib.nn, lib.nn.functional)(config)
    model.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in weights.items()})
    model.to(device)
    opt = lib.optim.AdamW(gpt.parameter_groups(model, 0.1), lr=lr, betas=(0.9, 0.95), eps=1e-8,
                          fused=device == "cuda")
    autocast_dtype = {"fp32": None, "bf16": lib.bfloat16, "fp16": lib.float16}[dtype]
    scaler = lib.amp.GradScaler(device, growth_interval=growth_interval, enabled=dtype == "fp16")
    steps = len(data)
    losses, scales = [], []
    t0 = time.perf_counter()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = warmup_cosine(step, lr, max(1, steps // 10), steps, floor=0.1)
        tokens = lib.from_numpy(data[step]).to(device)
        x, y = tokens[:, :-1], tokens[:, 1:]
        with lib.autocast(device, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            logits = model(x)
            loss = lib.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        scales.append(scaler.get_scale())
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return {"loss": losses, "scale": scales, "seconds": time.perf_counter() - t0}


def max_abs_diff(a, b):
    """max |a - b| over the steps; inf when either has a non-finite loss."""
    d = np.abs(np.asarray(a) - np.asarray(b))
    return float(d.max()) if np.isfinite(d).all() else math.inf


def runs_of_scale(scales):
    """A scale sequence as 'value x count' runs: '65536 x 3, 32768 x 47'."""
    runs = []
    for s in scales:
        if runs and runs[-1][0] == s:
            runs[-1][1] += 1
        else:
            runs.append([s, 1])
    return ", ".join(f"{s:.0f} x {n}" for s, n in runs)


def median_abs_diff(a, b):
    """median |a - b| over the steps; inf when either has a non-finite loss."""
    d = np.abs(np.asarray(a) - np.asarray(b))
    return float(np.median(d)) if np.isfinite(d).all() else math.inf


def judge(dtype, ours, theirs, reference):
    """The verdict of one dtype: ours and theirs (PyTorch) against PyTorch's fp32 reference run."""
    noise = median_abs_diff(theirs["loss"], reference["loss"])
    tol = 2 * noise + ABS_TOL
    typical = median_abs_diff(ours["loss"], theirs["loss"])
    final = abs(float(np.mean(ours["loss"][-LAST_STEPS:])) - float(np.mean(theirs["loss"][-LAST_STEPS:])))
    return {"median_abs_diff": typical, "final_mean_diff": final, "max_abs_diff": max_abs_diff(ours["loss"], theirs["loss"]),
            "noise": noise, "tolerance": tol, "scales_equal": ours["scale"] == theirs["scale"],
            "passed": typical <= tol and final <= tol}


def print_table(dtype, ours, theirs, reference):
    print(f"\n{dtype}: loss per step (torch fp32 = the noise reference)")
    print(f"{'step':>5}  {'ours ' + dtype:>12}  {'torch ' + dtype:>12}  {'ours - torch':>13}  {'torch fp32':>11}  "
          f"{'torch ' + dtype + ' - fp32':>18}")
    for i, (a, b, r) in enumerate(zip(ours["loss"], theirs["loss"], reference["loss"])):
        print(f"{i + 1:>5}  {a:>12.6f}  {b:>12.6f}  {a - b:>+13.2e}  {r:>11.6f}  {b - r:>+18.2e}")


def main():
    args = parse_args()
    import torch

    if args.device == "cuda" and not (rt.cuda.is_available() and torch.cuda.is_available()):
        sys.exit("amp_parity: --device cuda needs CUDA in both rustytorch and PyTorch; use --device cpu")
    config = PRESETS[args.preset]
    data = markov_batches(args.steps, args.batch, config.context, config.vocab, args.seed)
    weights = initial_weights(config, args.seed)
    dtypes = ["bf16", "fp16"] if args.dtype == "both" else [args.dtype]
    # fp32 references at full float32 precision (no TF32) on both sides.
    for lib in (rt, torch):
        lib.set_float32_matmul_precision("highest")
    print(f"amp parity: rustytorch {rt.__version__} vs torch {torch.__version__} on {args.device}; preset "
          f"{args.preset} ({config.layers} layers, {config.heads} heads, {config.embd} wide, context {config.context}, "
          f"vocab {config.vocab}), B={args.batch}, {args.steps} steps, peak lr {args.lr:g}", flush=True)
    libs = {"ours": rt, "torch": torch}
    curves = {}
    for dtype in ["fp32"] + dtypes:
        for name, lib in libs.items():
            curves[f"{name} {dtype}"] = run = train(lib, args.device, config, weights, data, dtype, args.lr, args.growth_interval)
            print(f"  {name} {dtype}: {run['seconds']:.1f} s, final loss {run['loss'][-1]:.4f}", flush=True)
    reference = curves["torch fp32"]
    fp32_diff = max_abs_diff(curves["ours fp32"]["loss"], reference["loss"])
    verdicts = {}
    for dtype in dtypes:
        ours, theirs = curves[f"ours {dtype}"], curves[f"torch {dtype}"]
        print_table(dtype, ours, theirs, reference)
        if dtype == "fp16":
            print(f"GradScaler scale per step: ours  {runs_of_scale(ours['scale'])}")
            print(f"                           torch {runs_of_scale(theirs['scale'])}")
        verdicts[dtype] = v = judge(dtype, ours, theirs, reference)
        scales = "" if dtype != "fp16" else ("; scale sequences equal" if v["scales_equal"] else
                                             "; scale sequences differ")
        print(f"{dtype}: median |ours - torch| = {v['median_abs_diff']:.3e}, last-{LAST_STEPS} mean difference "
              f"{v['final_mean_diff']:.3e}; tolerance 2 x {v['noise']:.3e} (median |torch {dtype} - torch fp32|) + "
              f"{ABS_TOL:g} = {v['tolerance']:.3e}; max |ours - torch| {v['max_abs_diff']:.3e}{scales}: "
              f"{'PASS' if v['passed'] else 'FAIL'}")
    print(f"\nfp32 (not judged): max |ours - torch| = {fp32_diff:.3e}")
    passed = all(v["passed"] for v in verdicts.values())
    print("PASS" if passed else "FAIL")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "config": asdict(config), "curves": curves, "verdicts": verdicts,
                       "fp32_max_abs_diff": fp32_diff, "passed": passed}, f, indent=2)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
