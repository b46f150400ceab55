"""Training workloads: an MLP with Adam, a LeNet-style CNN with SGD, GPT-2 training steps (fp32
weights with TF32 matmuls, and bf16 autocast with fused AdamW, where PyTorch's side is also timed
under torch.compile), and allocator churn over GPT steps of varying shape. Both sides start from
rustytorch's initial weights, loaded into the PyTorch model built by the same code."""
import contextlib
import time

import numpy as np

from .harness import (Context, Workload, check_runs, flops_floor_ms, integers, interleaved, matmul_precision, measure,
                      medians, randn)

TRAIN_TOL = 5e-3
# The bf16 rows compare the losses of two steps, as the fp32 rows do. bf16 rounds each matmul input
# to 8 significant bits (2^-9 ~ 2e-3 relative, against TF32's 2^-12), but a loss is the mean of B*T
# per-token losses whose rounding errors mostly cancel: PyTorch's own bf16 and fp32 losses of these
# steps differ by 1e-6 (preset "cpu", B=2) .. 5e-5 (preset "small") relative, and ours and
# PyTorch's bf16 losses by 7e-6 (preset "cpu"). 1e-3 leaves that noise a factor of 20-100 and still
# catches a loss computed in bf16 rather than float32 (a bf16 loss of ~10 is off by up to 3e-3).
BF16_TRAIN_TOL = 1e-3
CHURN_BATCHES = (1, 2, 4, 8)
CHURN_CONTEXT_DIVISORS = (8, 4, 2, 1)  # T = context / divisor


def workloads(ctx):
    mlp_batch, cnn_batch = ctx.size(256, 32), ctx.size(128, 16)
    label, config = gpt_config(ctx)
    T = config.context
    rows = [
        Workload(f"mlp 784-1024-1024-10 fp32 B={mlp_batch} Adam step", 2.0, lambda c: mlp(c, mlp_batch)),
        Workload(f"lenet cnn fp32 B={cnn_batch} SGD step", 2.0, lambda c: lenet(c, cnn_batch)),
    ]
    for B in ctx.size(ctx.args.gpt_batches, [2]):
        rows.append(Workload(f"{label} train fp32+tf32 B={B} T={T}", None, lambda c, B=B: gpt_train(c, B)))
    for B in ctx.size(ctx.args.gpt_batches, [2]):
        rows.append(Workload(f"{label} train bf16 autocast B={B} T={T}", None,
                             lambda c, B=B: gpt_train(c, B, autocast="bfloat16")))
    B = ctx.size(8, 2)
    rows.append(Workload(f"{label} as a user writes it (nanoGPT script) train bf16 autocast B={B} T={T}",
                         "within 5% of the bundled model", lambda c, B=B: user_gpt_train(c, B)))
    for B in (1, 64):
        rows.append(Workload(f"{label} decode KV cache B={B}", None, status="not yet",
                             note="no KV-cache model in rustytorch.train.gpt"))
    churn_name = f"allocator churn: {label} x{ctx.args.churn_steps} steps of varying B, T"
    goal = "reserved/alloc <= 1.15, 0 mallocs"
    if ctx.cuda:
        rows.append(Workload(churn_name, goal, churn))
    else:
        rows.append(Workload(churn_name, goal, status="n/a", note="the caching allocator is CUDA-only"))
    return rows


def twin_models(ctx, build):
    """{side: model} built by build(nn) on every side, all with rustytorch's initial weights."""
    ours = ctx.sides[0].lib
    ours.manual_seed(0)
    source = build(ours.nn)
    state = {k: v.detach().cpu().numpy() for k, v in source.state_dict().items()}
    models = {"rustytorch": source.to(ctx.sides[0].device)}
    for side in ctx.sides[1:]:
        model = build(side.lib.nn)
        model.load_state_dict({k: side.lib.from_numpy(v.copy()) for k, v in state.items()})
        models[side.name] = model.to(side.device)
    return models


def step_run(side, model, opt, x, y, clip=None, autocast=None):
    """One training step on (x, y), the forward and the loss under autocast to the dtype named
    autocast (e.g. "bfloat16") when given; returns the loss (before the update)."""
    def amp():
        if autocast is None:
            return contextlib.nullcontext()
        return side.lib.autocast(side.device, dtype=getattr(side.lib, autocast))

    def run():
        with amp():
            out = model(x)
            loss = side.F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if clip:
            side.lib.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss
    return run


def classifier(ctx, build, make_opt, x_shape, batch):
    models = twin_models(ctx, build)
    x, y = randn((batch, *x_shape), 1), integers(10, batch, 2)

    def setup(side):
        model = models[side.name]
        return step_run(side, model, make_opt(side.lib, model), side.tensor(x), side.tensor(y))
    return measure(ctx, setup, TRAIN_TOL, checks=2)


def mlp(ctx, batch):
    def build(nn):
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    result = classifier(ctx, build, lambda lib, m: lib.optim.Adam(m.parameters(), lr=1e-3), (784,), batch)
    flops = 6 * batch * (784 * 1024 + 1024 * 1024 + 1024 * 10)
    return {**result, "floor_ms": flops_floor_ms(ctx, flops, "fp32")}


def lenet(ctx, batch):
    def build(nn):
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    optimizer = lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)  # noqa: E731
    return classifier(ctx, build, optimizer, (1, 28, 28), batch)


# ---------------------------------------------------------------------------------------------
# GPT-2

def gpt_config(ctx):
    """(label, GPTConfig): GPT-2 small at full scale, the tiny "cpu" preset with --quick."""
    from rustytorch.train import gpt
    preset = "cpu" if ctx.args.quick else "gpt2"
    return ("gpt-2 124M" if preset == "gpt2" else f"gpt preset '{preset}'"), gpt.PRESETS[preset]


def gpt_models(ctx, fused=False):
    """{side: (model, AdamW)} from the same initial weights and a fresh optimizer (fused: its fused
    implementation) on every call, so that each workload's agreement check starts where both
    libraries agree. The models are built once."""
    from rustytorch.train import gpt
    if "gpt" not in ctx.cache:
        config = gpt_config(ctx)[1]
        models = twin_models(ctx, lambda nn: gpt.gpt_class(nn, nn.functional)(config))
        # copy(): on the CPU numpy() shares the parameters' memory, which the steps update in place.
        initial = {k: v.detach().cpu().numpy().copy() for k, v in models["rustytorch"].state_dict().items()}
        ctx.cache["gpt"] = (models, initial)
    models, initial = ctx.cache["gpt"]
    fresh = {}
    for side in ctx.sides:
        model = models[side.name]
        model.load_state_dict({k: side.lib.from_numpy(v.copy()).to(side.device) for k, v in initial.items()})
        fresh[side.name] = (model, side.lib.optim.AdamW(gpt.parameter_groups(model, 0.1), lr=3e-4, betas=(0.9, 0.95),
                                                        fused=fused))
    return fresh


def gpt_flops(model, tokens, context):
    """6 N per token for the matmul weights (all but the position table) plus causal attention."""
    c = model.config
    n = sum(p.numel() for name, p in model.named_parameters() if "wpe" not in name)
    return 6 * n * tokens + 6 * c.layers * c.embd * context * tokens


def gpt_train(ctx, B, autocast=None):
    """GPT-2 training steps with clipping and AdamW: fp32 with TF32 matmuls, or (autocast="bfloat16")
    the forward and loss under bf16 autocast with fused AdamW, where PyTorch's side is also timed
    with torch.compile(model)."""
    models = gpt_models(ctx, fused=autocast is not None)
    config = gpt_config(ctx)[1]
    T = config.context
    data = integers(config.vocab, (B, T + 1), 1)
    runs, batches = {}, {}
    for side in ctx.sides:
        model, opt = models[side.name]
        tokens = side.tensor(data)
        batches[side.name] = tokens[:, :-1], tokens[:, 1:]
        runs[side.name] = step_run(side, model, opt, *batches[side.name], clip=1.0, autocast=autocast)
    with matmul_precision(ctx.sides, "high"):
        result = check_runs(runs, TRAIN_TOL if autocast is None else BF16_TRAIN_TOL, checks=2)
        for side in ctx.sides:
            side.sync()
            if side.cuda:
                side.lib.cuda.reset_peak_memory_stats()
        result.update(medians(interleaved(ctx, runs)))
    peaks = {side.name: side.lib.cuda.max_memory_allocated() / 2 ** 30 for side in ctx.sides if side.cuda}
    note = "tok/s " + " vs ".join(f"{B * T / (result[k] / 1e3):,.0f}" for k in ("ours", "torch") if k in result)
    if peaks:
        note += "; peak GiB " + " vs ".join(f"{v:.1f}" for v in peaks.values())
    if autocast is not None and len(ctx.sides) > 1:
        side = ctx.sides[1]
        compiled = torch_compile_ms(ctx, side, *models[side.name], *batches[side.name], autocast)
        result["torch_compile"] = compiled
        note += "; torch.compile " + (f"{compiled:.2f} ms" if isinstance(compiled, float) else compiled)
    if autocast is not None:
        ctx.cache[("bundled bf16", B)] = result.get("ours")
    model = models["rustytorch"][0]
    precision = "tf32" if autocast is None else "bf16"
    return {**result, "floor_ms": flops_floor_ms(ctx, gpt_flops(model, B * T, T), precision), "note": note,
            "tokens_per_s": {k: B * T / (result[k] / 1e3) for k in ("ours", "torch") if k in result},
            "peak_allocated_GiB": peaks}


def torch_compile_ms(ctx, side, model, opt, x, y, autocast):
    """Median ms of PyTorch's step with torch.compile(model) (compiled during the warm-up), or why
    torch.compile failed here."""
    try:
        run = step_run(side, side.lib.compile(model), opt, x, y, clip=1.0, autocast=autocast)
        with matmul_precision([side], "high"):
            return medians(interleaved(Context([side], ctx.args), {side.name: run}))[side.name]
    except Exception as e:  # e.g. no C++ compiler or Triton for the generated kernels
        return "failed: " + f"{type(e).__name__}: {e}".splitlines()[0][:100]


def churn(ctx):
    """Per side alone: peak reserved / peak allocated over all steps, and the device allocations
    (cudaMalloc) and allocation retries after the first tenth of the steps."""
    steps = ctx.args.churn_steps
    config = gpt_config(ctx)[1]
    contexts = [config.context // d for d in CHURN_CONTEXT_DIVISORS]
    rng = np.random.default_rng(3)
    shapes = list(zip(rng.choice(CHURN_BATCHES, steps), rng.choice(contexts, steps)))
    data = integers(config.vocab, (steps, max(CHURN_BATCHES), config.context + 1), 2)
    models = gpt_models(ctx)
    stats = {}
    with matmul_precision(ctx.sides, "high"):
        for side in ctx.sides:
            for s in ctx.sides:
                s.release()
            stats[side.name] = churn_side(side, *models[side.name], shapes, data)
    cells = {("ours" if k == "rustytorch" else k): f"{v['ratio']:.2f}, {v['device_allocs']} mallocs"
             for k, v in stats.items()}
    ours = stats["rustytorch"]
    note = "; ".join(f"{k}: {v['seconds']:.0f} s, {v['retries']} retries" for k, v in stats.items())
    return {**cells, "met": ours["ratio"] <= 1.15 and ours["device_allocs"] == 0, "check": "-", "note": note,
            "churn": stats, "batches": CHURN_BATCHES, "contexts": contexts}


def churn_side(side, model, opt, shapes, data):
    cuda = side.lib.cuda
    cuda.reset_peak_memory_stats()
    warm = max(1, len(shapes) // 10)
    t0 = time.perf_counter()
    for i, (B, T) in enumerate(shapes):
        if i == warm:
            side.sync()
            base = cuda.memory_stats()
        tokens = side.tensor(data[i, :B, :T + 1])
        step_run(side, model, opt, tokens[:, :-1], tokens[:, 1:], clip=1.0)()
    side.sync()
    s = cuda.memory_stats()
    return {"ratio": s["reserved_bytes.all.peak"] / s["allocated_bytes.all.peak"],
            "device_allocs": s["num_device_alloc"] - base["num_device_alloc"],
            "retries": s["num_alloc_retries"] - base["num_alloc_retries"],
            "peak_reserved_GiB": s["reserved_bytes.all.peak"] / 2 ** 30,
            "peak_allocated_GiB": s["allocated_bytes.all.peak"] / 2 ** 30, "seconds": time.perf_counter() - t0}


def user_gpt_train(ctx, B):
    """The GPT-2 step of tests/python/gpt_script.py, a nanoGPT-style model written for PyTorch
    (nn.Linear, F.layer_norm, F.scaled_dot_product_attention, nn.GELU, F.cross_entropy, tied
    weights, its own fused AdamW groups) at GPT-2 124M's size, under bf16 autocast with clipping;
    met when our step is within 5% of the bundled model's (the row above, same run)."""
    import importlib
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "python"))
    script = importlib.import_module("gpt_script")
    config = gpt_config(ctx)[1]
    shape = script.GPTConfig(block_size=config.context, vocab_size=config.vocab, n_layer=config.layers,
                             n_head=config.heads, n_embd=config.embd, dropout=0.0, bias=True)
    ours = ctx.sides[0].lib
    ours.manual_seed(0)
    source = script.build(ours)(shape)
    state = {k: v.detach().cpu().numpy() for k, v in source.state_dict().items()}
    data = integers(config.vocab, (B, config.context + 1), 1)
    runs = {}
    for side in ctx.sides:
        model = source if side is ctx.sides[0] else script.build(side.lib)(shape)
        if side is not ctx.sides[0]:
            model.load_state_dict({k: side.lib.from_numpy(v.copy()) for k, v in state.items()})
        model.to(side.device)
        opt = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), side.device)
        x, y = side.tensor(data[:, :-1]), side.tensor(data[:, 1:])  # separate batches, as the script loads them

        def run(side=side, model=model, opt=opt, x=x, y=y):
            with side.lib.autocast(side.device, dtype=side.lib.bfloat16):
                _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            side.lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss
        runs[side.name] = run
    with matmul_precision(ctx.sides, "high"):
        result = check_runs(runs, BF16_TRAIN_TOL, checks=2)
        result.update(medians(interleaved(ctx, runs)))
    bundled = ctx.cache.get(("bundled bf16", B))
    note = "tok/s " + " vs ".join(f"{B * config.context / (result[k] / 1e3):,.0f}" for k in ("ours", "torch")
                                  if k in result)
    if isinstance(bundled, float) and isinstance(result.get("ours"), float):
        note += f"; the bundled model: {bundled:.2f} ms ({100 * (result['ours'] / bundled - 1):+.1f}%)"
        result["met"] = result["ours"] <= 1.05 * bundled and result.get("check") != "FAIL"
    return {**result, "note": note}
