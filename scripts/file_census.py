#!/usr/bin/env python3
"""A census of damaged files: saves a file of each format rustytorch reads (a rustytorch.save
checkpoint, a PyTorch checkpoint when torch is importable, an IDX file plain and gzip-compressed, a
BPE tokenizer), damages each many times at random (flipped bits, overwritten bytes, truncations,
deleted, duplicated or inserted chunks) and loads every damaged copy in a worker subprocess with a
timeout, counting the outcomes:

    same       loads, equal to the original (the damage changed nothing that is read)
    changed    loads, with different contents (formats without a checksum cannot tell)
    refused    a typed error (rustytorch.CheckpointError and the other rustytorch errors)
    untyped    any other exception (a bug)
    crash      the worker died (a signal)
    hang       no answer within the timeout

Prints a table and exits non-zero on any untyped error, crash or hang, or on a checkpoint that loads
changed. Damaged files of those outcomes are kept with --keep DIR.

    PYTHONPATH=build/dev/python python3 scripts/file_census.py [--mutations 500] [--seed 0] [--timeout 20]"""
import argparse
import collections
import gzip
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import textwrap

# The worker: reads "<format> <original> <damaged>" lines, answers "<outcome> <detail>" lines.
WORKER = textwrap.dedent("""
    import sys
    import rustytorch as rt

    def load(fmt, path):
        if fmt in ("checkpoint", "pytorch"):
            return rt.load(path, map_location="cpu")
        if fmt.startswith("idx"):
            return rt.io.read_idx(path)
        return rt.text.BPETokenizer.load(path).to_str()

    def same(a, b):
        if isinstance(a, rt.Tensor):
            return (isinstance(b, rt.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                    and a.requires_grad == b.requires_grad and a._raw_bytes() == b._raw_bytes())
        if isinstance(a, dict):
            return (type(a) is type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a))
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return type(a) is type(b) and (a == b or a != a and b != b)

    originals = {}
    for line in sys.stdin:
        fmt, original, damaged = line.split()
        if original not in originals:
            originals[original] = load(fmt, original)
        try:
            loaded = load(fmt, damaged)
            answer = "same -" if same(originals[original], loaded) else "changed -"
        except rt.Error as e:
            answer = "refused " + type(e).__name__
        except Exception as e:
            answer = "untyped " + type(e).__name__
        print(answer, flush=True)
""")


def make_originals(directory):
    """{format: path} of the undamaged files."""
    import numpy as np
    import rustytorch as rt

    files = {}
    model = rt.nn.Sequential(rt.nn.Linear(8, 16), rt.nn.LayerNorm(16), rt.nn.Linear(16, 4))
    optimizer = rt.optim.AdamW(model.parameters(), lr=1e-3)
    model(rt.randn(3, 8)).sum().backward()
    optimizer.step()
    files["checkpoint"] = os.path.join(directory, "ckpt.pt")
    rt.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": 10,
             "config": {"betas": (0.9, 0.95), "dtype": rt.bfloat16, "mask": rt.tensor([True, False])}},
            files["checkpoint"])
    try:
        import torch
    except ImportError:
        pass
    else:
        files["pytorch"] = os.path.join(directory, "torch.pt")
        net = torch.nn.Linear(8, 4)
        torch.save({"model": net.state_dict(), "step": 3, "view": net.weight.t()}, files["pytorch"])
    images = np.random.default_rng(0).integers(0, 256, size=(6, 16, 16), dtype=np.uint8)
    idx = bytes([0, 0, 0x08, 3]) + b"".join(int(d).to_bytes(4, "big") for d in images.shape) + images.tobytes()
    files["idx"] = os.path.join(directory, "images.idx")
    with open(files["idx"], "wb") as f:
        f.write(idx)
    files["idx.gz"] = os.path.join(directory, "images.idx.gz")
    with open(files["idx.gz"], "wb") as f:
        f.write(gzip.compress(idx, mtime=0))
    files["bpe"] = os.path.join(directory, "tokenizer.bpe")
    rt.text.BPETokenizer.train("In the beginning God created the heaven and the earth. " * 40, 320).save(files["bpe"])
    return files


def damage(data, rng):
    """data with one random kind of damage."""
    data = bytearray(data)
    kind = rng.choice(("flip", "overwrite", "truncate", "chunk"))
    if kind == "flip":
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "overwrite":
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
    elif kind == "truncate":
        del data[rng.randrange(len(data)):]
    else:
        start = rng.randrange(len(data))
        end = min(len(data), start + rng.randint(1, 64))
        action = rng.choice(("delete", "duplicate", "insert"))
        if action == "delete":
            del data[start:end]
        elif action == "duplicate":
            data[start:start] = data[start:end]
        else:
            data[start:start] = bytes(rng.randrange(256) for _ in range(end - start))
    return bytes(data)


class Worker:
    """The worker subprocess, restarted after a crash or a hang."""

    def __init__(self, timeout):
        self.timeout, self.process = timeout, None

    def ask(self, line):
        if self.process is None:
            self.process = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], self.timeout)
        answer = self.process.stdout.readline() if ready else ""
        if answer:
            return answer.split()
        if ready:  # end of output: the worker died
            rc = self.process.wait()
            self.process = None
            return ["crash", f"signal{-rc}" if rc < 0 else f"exit{rc}"]
        self.process.kill()
        self.process.wait()
        self.process = None
        return ["hang", f">{self.timeout}s"]

    def close(self):
        if self.process is not None:
            self.process.stdin.close()
            self.process.wait()


OUTCOMES = ("same", "changed", "refused", "untyped", "crash", "hang")
BAD = ("untyped", "crash", "hang")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutations", type=int, default=500, help="damaged copies of each file (default 500)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds a load may take (default 20)")
    parser.add_argument("--keep", help="directory to keep the damaged files of bad outcomes in")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    worker = Worker(args.timeout)
    counts = collections.OrderedDict()
    failed = False
    with tempfile.TemporaryDirectory(prefix="rtx_census_") as tmp:
        for fmt, original in make_originals(tmp).items():
            with open(original, "rb") as f:
                data = f.read()
            counts[fmt] = collections.Counter()
            details = collections.Counter()
            damaged = os.path.join(tmp, "damaged-" + os.path.basename(original))
            for i in range(args.mutations):
                with open(damaged, "wb") as f:
                    f.write(damage(data, rng))
                outcome, detail = worker.ask(f"{fmt} {original} {damaged}")
                counts[fmt][outcome] += 1
                if outcome != "same" and outcome != "changed":
                    details[f"{outcome} {detail}"] += 1
                if outcome in BAD or (outcome == "changed" and fmt == "checkpoint"):
                    failed = True
                    if args.keep:
                        os.makedirs(args.keep, exist_ok=True)
                        shutil.copy(damaged, os.path.join(args.keep, f"{fmt}-{i}-{outcome}"))
            print(f"{fmt} ({len(data)} bytes): " + ", ".join(f"{k} {n}" for k, n in sorted(details.items())))
    worker.close()
    print()
    print(f"{'format':12s}" + "".join(f"{o:>9s}" for o in OUTCOMES) + f"{'total':>9s}")
    for fmt, c in counts.items():
        print(f"{fmt:12s}" + "".join(f"{c[o]:9d}" for o in OUTCOMES) + f"{sum(c.values()):9d}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
