"""numpy's figures for the CPU workloads of bench_cpu.cpp, measured on the same machine."""
import statistics
import time

import numpy as np


def median_of(fn, reps=20):
    """Median wall time of fn over reps calls, after one warm-up call (as Google Benchmark's median)."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    a = np.ones(1, np.float32)
    t = median_of(lambda: [np.add(a, a) for _ in range(10000)], 5) / 10000
    print(f"tiny add: {t * 1e9:.0f} ns/op")
    n = 1 << 24
    x, y = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    t = median_of(lambda: np.add(x, y))
    print(f"add float32 2^24: {3 * 4 * n / t / 1e9:.2f} GB/s")
    m = np.random.rand(4096, 4096).astype(np.float32)
    t = median_of(lambda: m.sum(axis=1))
    print(f"row sum float32 4096x4096: {4 * m.size / t / 1e9:.2f} GB/s")
    p, q = np.random.rand(1024, 1024).astype(np.float32), np.random.rand(1024, 1024).astype(np.float32)
    t = median_of(lambda: p @ q)
    print(f"sgemm 1024^3: {2 * 1024**3 / t / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
