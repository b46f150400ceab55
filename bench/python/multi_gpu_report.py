"""The multi-GPU goals from the JSON files of bench/python/multi_gpu.py in a folder (what the
multigpu stage of scripts/gpu_check.sh writes): all_reduce bus bandwidth against PyTorch at every
size, DDP scaling from 1 to N GPUs and against PyTorch's DDP, the loss of the N-GPU run against a
1-GPU run of the same global batch, and the optimizer memory ZeRO-1 saves.

  python bench/python/multi_gpu_report.py LOGDIR"""
import glob
import json
import os
import sys


def load(folder, pattern):
    paths = sorted(glob.glob(os.path.join(folder, pattern)))
    return [json.load(open(p)) for p in paths]


def main(folder):
    for run in load(folder, "allreduce_*.json"):
        rows = [r for r in run["rows"] if "torch" in r["bus_GBps"]]
        worst = min(rows, key=lambda r: r["bus_GBps"]["ours"] / r["bus_GBps"]["torch"])
        ratio = worst["bus_GBps"]["ours"] / worst["bus_GBps"]["torch"]
        print(f"allreduce {run['world']} GPUs: lowest ratio {ratio:.2f}x at {worst['MiB']} MiB {worst['dtype']} "
              f"(goal >= 0.95x at every size: {'met' if ratio >= 0.95 else 'NOT met'})")
        for r in run["rows"]:
            if r["MiB"] == 1024:
                print(f"allreduce 1 GiB {r['dtype']}: " +
                      ", ".join(f"{k} {v:.0f} GB/s" for k, v in r["bus_GBps"].items()))
    runs = {(d["world"], d["rows"][0]["zero"], d["rows"][0]["batch_per_rank"]): d["rows"][0]
            for d in load(folder, "ddp_*.json")}
    one = {k[2]: v for k, v in runs.items() if k[0] == 1 and not k[1]}
    for (world, zero, batch), row in sorted(runs.items()):
        if world == 1 or zero:
            continue
        base = one.get(batch)
        for side, tps in row["tok_per_s"].items():
            if base and side in base["tok_per_s"]:
                eff = tps / (world * base["tok_per_s"][side])
                goal = 0.95 if world == 2 else 0.90
                print(f"scaling {side} 1 -> {world} GPUs at batch {batch}/GPU: {eff:.1%} "
                      f"(goal >= {goal:.0%}: {'met' if eff >= goal else 'NOT met'})" if side == "ours" else
                      f"scaling {side} 1 -> {world} GPUs at batch {batch}/GPU: {eff:.1%}")
        if "torch" in row["tok_per_s"]:
            r = row["tok_per_s"]["ours"] / row["tok_per_s"]["torch"]
            print(f"scaling ours vs torch DDP on {world} GPUs: {r:.2f}x (goal >= 1.0x: {'met' if r >= 1 else 'NOT met'})")
        same_global = one.get(world * batch)
        if same_global:
            a, b = row["first_losses"]["ours"], same_global["first_losses"]["ours"]
            worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
            print(f"scaling losses {world} GPUs vs 1 GPU at global batch {world * batch}: {a} vs {b} "
                  f"(largest relative difference {worst:.2e}; bf16 noise about 1e-2)")
        zero_row = runs.get((world, True, batch))
        if zero_row and row["peak_GiB_rank"].get("ours") and zero_row["peak_GiB_rank"].get("ours"):
            state = 2 * 4 * row["params"] / 2 ** 30  # AdamW's exp_avg and exp_avg_sq in float32
            saved = row["peak_GiB_rank"]["ours"] - zero_row["peak_GiB_rank"]["ours"]
            print(f"zero-1 on {world} GPUs: peak {zero_row['peak_GiB_rank']['ours']:.2f} vs "
                  f"{row['peak_GiB_rank']['ours']:.2f} GiB per GPU, {saved / state:.0%} of the optimizer state "
                  f"({state:.2f} GiB) saved (goal >= 40%: {'met' if saved >= 0.4 * state else 'NOT met'})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
