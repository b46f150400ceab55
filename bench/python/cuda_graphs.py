"""CUDA graphs side by side with PyTorch's in one process on one GPU, both sides doing the same work:
100 tiny ops (adds on a 1-element tensor) replayed from one graph, per op; and training steps (an
MLP 784-1024-1024-10 at batch 256 with Adam, a LeNet-style CNN at batch 128 with SGD, optionally
GPT-2 124M at batch 8 in bf16 with fused AdamW and clipping) eager and captured whole (forward,
backward, clipping, optimizer step; capturable optimizers on both sides). Every figure is the median
over rounds of the mean time of a run of steps bracketed by synchronizations; the captured step is
checked against the eager one first.

    python bench/python/cuda_graphs.py [--gpt] [--json FILE]
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import harness  # noqa: E402

TINY_OPS = 100


def timed(fn, sync, steps, rounds=7):
    """Median over rounds of the mean seconds per call of `steps` calls."""
    fn()
    sync()
    per_call = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        sync()
        per_call.append((time.perf_counter() - t0) / steps)
    return statistics.median(per_call)


def tiny_ops(lib):
    """(eager, graphed) seconds per op of TINY_OPS adds of a 1-element tensor."""
    x = lib.ones(1, device="cuda")

    def chain():
        y = x
        for _ in range(TINY_OPS):
            y = y + 1
        return y

    eager = timed(chain, lib.cuda.synchronize, 50) / TINY_OPS
    s = lib.cuda.Stream()
    s.wait_stream(lib.cuda.current_stream())
    with lib.cuda.stream(s):
        chain()
    lib.cuda.current_stream().wait_stream(s)
    g = lib.cuda.CUDAGraph()
    with lib.cuda.graph(g):
        out = chain()
    g.replay()
    lib.cuda.synchronize()
    assert out.item() == TINY_OPS + 1, f"{lib.__name__}: the replayed chain gave {out.item()}"
    return eager, timed(g.replay, lib.cuda.synchronize, 200) / TINY_OPS


def mlp(lib):
    nn = lib.nn
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).cuda()
    return model, lib.optim.Adam(model.parameters(), lr=1e-3, capturable=True), (256, 784), 10, None, None


def lenet(lib):
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                          nn.Linear(84, 10)).cuda()
    return model, lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), (128, 1, 28, 28), 10, None, None


def gpt2(lib):
    from rustytorch.train import gpt
    base = gpt.PRESETS["gpt2"]
    config = gpt.GPTConfig(base.layers, base.heads, base.embd, base.context, base.vocab)
    model = gpt.gpt_class(lib.nn, lib.nn.functional)(config).cuda()
    opt = lib.optim.AdamW(gpt.parameter_groups(model, 0.1), lr=3e-4, betas=(0.9, 0.95), fused=True,
                            capturable=True)
    return model, opt, (8, config.context), config.vocab, 1.0, lib.bfloat16


def training_step(lib, make):
    """(eager, graphed) seconds per training step of the model make(lib) builds."""
    lib.manual_seed(0)
    model, opt, shape, classes, clip, amp_dtype = make(lib)
    tokens = amp_dtype is not None
    x = (lib.randint(0, classes, shape, device="cuda") if tokens else lib.randn(*shape, device="cuda"))
    y = lib.randint(0, classes, shape if tokens else shape[:1], device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with lib.autocast("cuda", dtype=amp_dtype or lib.float32, enabled=amp_dtype is not None):
            out = model(x)
            loss = lib.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        if clip:
            lib.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss

    s = lib.cuda.Stream()
    s.wait_stream(lib.cuda.current_stream())
    with lib.cuda.stream(s):
        for _ in range(3):
            step()
    lib.cuda.current_stream().wait_stream(s)
    eager = timed(step, lib.cuda.synchronize, 20)
    g = lib.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with lib.cuda.graph(g):
        static_loss = step()
    g.replay()
    replayed = static_loss.item()
    eager_loss = step().item()
    assert abs(replayed - eager_loss) < 0.05 * abs(eager_loss) + 1e-3, f"replayed {replayed} vs eager {eager_loss}"
    kernels = getattr(g, "kernel_count", None)
    return eager, timed(g.replay, lib.cuda.synchronize, 20), kernels


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpt", action="store_true", help="also the GPT-2 124M bf16 step (about a minute)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    libs = harness.libraries()
    results = {}
    for name, lib in libs.items():
        eager, graphed = tiny_ops(lib)
        results.setdefault("tiny op", {})[name] = {"eager_us": eager * 1e6, "graphed_us": graphed * 1e6}
        print(f"tiny op      {name:10s} eager {eager * 1e6:7.2f} us/op   graphed {graphed * 1e6:7.3f} us/op", flush=True)
    workloads = [("mlp", mlp), ("lenet", lenet)] + ([("gpt2 bf16", gpt2)] if args.gpt else [])
    for workload, make in workloads:
        for name, lib in libs.items():
            eager, graphed, kernels = training_step(lib, make)
            results.setdefault(workload, {})[name] = {"eager_ms": eager * 1e3, "graphed_ms": graphed * 1e3,
                                                      "graph_kernels": kernels}
            print(f"{workload:12s} {name:10s} eager {eager * 1e3:8.3f} ms   graphed {graphed * 1e3:8.3f} ms"
                  + (f"   ({kernels} kernels in the graph)" if kernels else ""), flush=True)
    if "torch" in libs:
        ours, theirs = results["tiny op"]["rustytorch"], results["tiny op"]["torch"]
        print(f"ratios (torch time / ours): tiny op graphed {theirs['graphed_us'] / ours['graphed_us']:.2f}x")
        for workload, _ in workloads:
            ours, theirs = results[workload]["rustytorch"], results[workload]["torch"]
            print(f"  {workload}: ours graphed vs torch eager {theirs['eager_ms'] / ours['graphed_ms']:.2f}x, "
                  f"vs torch graphed {theirs['graphed_ms'] / ours['graphed_ms']:.2f}x, "
                  f"vs ours eager {ours['eager_ms'] / ours['graphed_ms']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
