"""Per-op host overhead from Python: a tiny op (1-element add), a tiny forward+backward (mul of
two 1-element leaves, then backward) and a chain of CHAIN tiny muls by weights with one backward
through all of them (time per mul, so the fixed cost of a backward() call is shared as in a
model), for rustytorch and, when installed, PyTorch in the same process on the same device. CUDA
timings are host time per op, taken in batches of 256 timed before the GPU is drained (the launch
queue never fills).

    python bench/python/overhead.py [cpu|cuda]
"""
import sys
import time


def per_op_us(fn, sync, batch=256, batches=40, repeats=7):
    fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        total = 0.0
        for _ in range(batches):
            t0 = time.perf_counter()
            for _ in range(batch):
                fn()
            total += time.perf_counter() - t0
            sync()
        best = min(best, total / (batch * batches) * 1e6)
    return best


CHAIN = 16


def workloads(lib, device, sync):
    a = lib.ones(1, device=device)
    b = lib.ones(1, device=device)
    x = lib.ones(1, device=device, requires_grad=True)
    y = lib.ones(1, device=device, requires_grad=True)
    weights = [lib.ones(1, device=device, requires_grad=True) for _ in range(CHAIN)]

    def fwd_bwd():
        (x * y).sum().backward()

    def chain_fwd_bwd():
        h = a
        for w in weights:
            h = h * w
        h.sum().backward()

    return {"tiny add": per_op_us(lambda: a + b, sync),
            "tiny mul forward+backward": per_op_us(fwd_bwd, sync),
            f"chain of {CHAIN} muls fwd+bwd, per mul": per_op_us(chain_fwd_bwd, sync, batch=16) / CHAIN}


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    import rustytorch as rt
    results = {"rustytorch": workloads(rt, device, rt.cuda.synchronize if device == "cuda" else lambda: None)}
    try:
        import torch
        results["torch"] = workloads(torch, device, torch.cuda.synchronize if device == "cuda" else lambda: None)
    except ImportError:
        pass
    print(f"host time per op from Python on {device} (best of 7, us)")
    for name in results["rustytorch"]:
        row = f"{name:36s} rustytorch {results['rustytorch'][name]:7.2f}"
        if "torch" in results:
            t = results["torch"][name]
            row += f"   torch {t:7.2f}   ratio {t / results['rustytorch'][name]:5.2f}x"
        print(row)


if __name__ == "__main__":
    main()
