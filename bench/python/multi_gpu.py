"""Data-parallel benchmarks of rustytorch beside PyTorch, in one run on the same devices: every rank
(started by rtx-run or torchrun, one process per GPU) joins a process group of each library and
times both, interleaved.

  allreduce  all_reduce bus bandwidth, 1 MiB to --max-mib, float32 and bfloat16
             (bus bandwidth = bytes * 2 (N - 1) / N / time, as nccl-tests reports it)
  ddp        a nanoGPT-style GPT-2 (tests/python/gpt_script.py) in DistributedDataParallel: bf16
             autocast, fused AdamW, clip 1.0, per-rank batch --batch; tok/s over all ranks, the
             losses of each step, and the per-rank peak memory; --zero wraps AdamW in
             ZeroRedundancyOptimizer on both sides

  rtx-run --nproc-per-node 2 bench/python/multi_gpu.py allreduce --json out.json
  rtx-run --nproc-per-node 2 bench/python/multi_gpu.py ddp --batch 8 --json ddp2.json

Rank 0 prints the table and writes --json. --device cpu (gloo, tiny sizes) checks the script itself
on a machine without GPUs; --only ours runs rustytorch alone."""
import argparse
import json
import os
import statistics
import sys
from datetime import timedelta

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "python"))

from compare.harness import Side  # noqa: E402


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", choices=["allreduce", "ddp"])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--only", choices=["ours", "both"], default="both")
    p.add_argument("--max-mib", type=int, default=4096, help="largest all_reduce size in MiB")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--batch", type=int, default=8, help="per-rank batch (ddp)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per side (ddp)")
    p.add_argument("--preset", choices=["gpt2", "tiny"], default="gpt2")
    p.add_argument("--zero", action="store_true", help="ZeroRedundancyOptimizer around AdamW (ddp)")
    p.add_argument("--json")
    return p.parse_args()


def sides(args):
    """A Side per library, each with its own default process group (ours on MASTER_PORT, torch's on
    MASTER_PORT + 1), on this rank's device."""
    import rustytorch as rt
    import rustytorch.distributed as rdist
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = f"cuda:{local}" if args.device == "cuda" else "cpu"
    backend = "nccl" if args.device == "cuda" else "gloo"
    if args.device == "cuda":
        rt.cuda.set_device(local)
    rdist.init_process_group(backend, timeout=timedelta(minutes=5))
    out = [Side("ours", rt, device)]
    out[0].dist = rdist
    if args.only == "both":
        import torch
        import torch.distributed as tdist
        if args.device == "cuda":
            torch.cuda.set_device(local)
        addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1
        tdist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rdist.get_rank(),
                                 world_size=rdist.get_world_size(), timeout=timedelta(minutes=5))
        side = Side("torch", torch, device)
        side.dist = tdist
        out.append(side)
    for s in out:
        s.cuda = args.device == "cuda"
    return out


def interleaved_ms(all_sides, runs, reps):
    """Median ms of each side's run, timed alternately after a warm-up (every rank times its own; the
    slowest rank's median is the result, taken with an all_reduce MAX on the first side's group)."""
    for s in all_sides:
        runs[s.name]()
        s.sync()
    times = {s.name: [] for s in all_sides}
    for _ in range(reps):
        for s in all_sides:
            s.dist.barrier()
            times[s.name].append(s.time_ms(runs[s.name]))
    first = all_sides[0]
    med = first.lib.tensor([statistics.median(times[s.name]) for s in all_sides], dtype=first.lib.float64)
    med = med.to(first.device)
    first.dist.all_reduce(med, op=first.dist.ReduceOp.MAX)
    return dict(zip((s.name for s in all_sides), med.cpu().tolist()))


def allreduce(args, all_sides):
    world = all_sides[0].dist.get_world_size()
    rows = []
    mib = 1
    while mib <= args.max_mib:
        for dtype in ("float32", "bfloat16"):
            n = mib * 2 ** 20 // (4 if dtype == "float32" else 2)
            runs = {}
            for s in all_sides:
                t = s.lib.ones(n, dtype=getattr(s.lib, dtype), device=s.device)
                runs[s.name] = (lambda s=s, t=t: s.dist.all_reduce(t))
            ms = interleaved_ms(all_sides, runs, args.reps)
            bus = {k: mib * 2 ** 20 * 2 * (world - 1) / world / (v / 1e3) / 1e9 for k, v in ms.items()}
            rows.append({"MiB": mib, "dtype": dtype, "ms": ms, "bus_GBps": bus})
            del runs
        mib *= 4 if mib < 64 else 2
    return rows


def ddp(args, all_sides):
    import gpt_script
    world = all_sides[0].dist.get_world_size()
    rank = all_sides[0].dist.get_rank()
    if args.preset == "gpt2":
        shape = gpt_script.GPTConfig(block_size=1024, vocab_size=50304, n_layer=12, n_head=12, n_embd=768,
                                     dropout=0.0, bias=False)
    else:
        shape = gpt_script.GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0,
                                     bias=False)
    T = shape.block_size
    rng = np.random.default_rng(1234)
    # Global batches; rank r takes rows [r B, (r + 1) B) of each.
    data = [rng.integers(0, shape.vocab_size, (world * args.batch, T + 1)) for _ in range(4)]
    ours = all_sides[0].lib
    ours.manual_seed(0)
    source = gpt_script.build(ours)(shape)
    state = {k: v.detach().cpu().numpy() for k, v in source.state_dict().items()}
    runs, losses, peaks = {}, {}, {}
    for s in all_sides:
        lib = s.lib
        model = source if s is all_sides[0] else gpt_script.build(lib)(shape)
        if s is not all_sides[0]:
            model.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in state.items()})
        model.to(s.device)
        ddp_model = lib.nn.parallel.DistributedDataParallel(
            model, device_ids=[int(os.environ.get("LOCAL_RANK", 0))] if s.cuda else None)
        groups = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cuda" if s.cuda else "cpu")
        if args.zero:
            from_lib = __import__(lib.__name__ + ".distributed.optim", fromlist=["ZeroRedundancyOptimizer"])
            opt = from_lib.ZeroRedundancyOptimizer(
                [{"params": g["params"], "weight_decay": g["weight_decay"]} for g in groups.param_groups],
                optimizer_class=lib.optim.AdamW, lr=6e-4, betas=(0.9, 0.95), fused=s.cuda)
        else:
            opt = groups
        batches = [(lib.from_numpy(d[rank * args.batch:(rank + 1) * args.batch, :-1].copy()).to(s.device),
                    lib.from_numpy(d[rank * args.batch:(rank + 1) * args.batch, 1:].copy()).to(s.device))
                   for d in data]
        step = {"i": 0}
        losses[s.name] = []

        def run(s=s, lib=lib, m=ddp_model, opt=opt, batches=batches, step=step):
            x, y = batches[step["i"] % len(batches)]
            step["i"] += 1
            with lib.autocast("cuda" if s.cuda else "cpu", dtype=lib.bfloat16):
                _, loss = m(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            return loss
        runs[s.name] = run
        # The first steps' losses averaged over the ranks: the loss of the global batch, to compare
        # with a 1-rank run of batch world * --batch (the same global batches).
        for _ in range(3):
            loss = run().detach().float().reshape(1)
            s.dist.all_reduce(loss, op=s.dist.ReduceOp.AVG)
            losses[s.name].append(float(loss.item()))
        if s.cuda:
            lib.cuda.reset_peak_memory_stats()
    ms = interleaved_ms(all_sides, runs, args.steps)
    for s in all_sides:
        if s.cuda:
            peaks[s.name] = s.lib.cuda.max_memory_allocated() / 2 ** 30
    tokens = world * args.batch * T
    return [{"world": world, "batch_per_rank": args.batch, "zero": args.zero, "ms": ms,
             "params": sum(p.numel() for p in source.parameters()),
             "tok_per_s": {k: tokens / (v / 1e3) for k, v in ms.items()}, "first_losses": losses,
             "peak_GiB_rank": peaks}]


def main():
    args = parse()
    all_sides = sides(args)
    rows = allreduce(args, all_sides) if args.workload == "allreduce" else ddp(args, all_sides)
    if all_sides[0].dist.get_rank() == 0:
        world = all_sides[0].dist.get_world_size()
        print(f"{args.workload} on {world} rank(s), device {args.device}")
        for r in rows:
            if args.workload == "allreduce":
                bus = r["bus_GBps"]
                ratio = f"  {bus['ours'] / bus['torch']:.2f}x" if "torch" in bus else ""
                print(f"{r['MiB']:>6} MiB {r['dtype']:>8}: " +
                      "  ".join(f"{k} {v:8.1f} GB/s" for k, v in bus.items()) + ratio)
            else:
                tps = r["tok_per_s"]
                ratio = f"  {tps['ours'] / tps['torch']:.2f}x" if "torch" in tps else ""
                print("tok/s " + "  ".join(f"{k} {v:,.0f}" for k, v in tps.items()) + ratio +
                      f"; first losses {r['first_losses']}; peak GiB/rank {r['peak_GiB_rank']}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"workload": args.workload, "world": world, "rows": rows}, f, indent=1)
    for s in all_sides:
        s.dist.destroy_process_group()


if __name__ == "__main__":
    main()
