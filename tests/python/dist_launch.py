"""Running the ranks of a multi-process test: each rank is `python FILE ARGS...` (a test file run as
a script) over 127.0.0.1 on a free port, all bounded by one timeout, every process still running
killed on the way out, and a rank that exits with a non-zero code failing the test with its output.
rank_main is the ranks' side for files whose scenarios take (torch, dist, out); process_alive tells
the tests that no process is left behind; needs_gloo skips a test on a build without gloo."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta

import pytest

import rustytorch.distributed as _dist

needs_gloo = pytest.mark.skipif(not _dist.is_gloo_available(),
                                reason="this build has no gloo backend (install libgloo-dev and rebuild)")

RENDEZVOUS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env():
    """os.environ without the rendezvous variables a launcher sets."""
    return {k: v for k, v in os.environ.items() if k not in RENDEZVOUS}


def torchrun_env(rank, world, port):
    """clean_env() with torchrun's variables for rank of world, the store on 127.0.0.1:port."""
    env = clean_env()
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    return env


def process_alive(pid):
    """Whether pid runs (a zombie nobody reaps does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def run_ranks(argv, envs, timeout, what, killed=()):
    """Runs [python, *argv] once per environment of envs, all at once, and waits at most timeout
    seconds for all of them (TimeoutExpired past it); each must exit with status 0 (the ranks in
    killed may also die by SIGKILL)."""
    procs = []
    try:
        for env in envs:
            procs.append(subprocess.Popen([sys.executable, *argv], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        deadline = time.monotonic() + timeout
        logs = [p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    failed = [f"rank {rank} of {what} exited with {p.returncode}:\n{log}"
              for rank, (p, log) in enumerate(zip(procs, logs))
              if p.returncode != 0 and not (rank in killed and p.returncode == -signal.SIGKILL)]
    assert not failed, "\n".join(failed)


def load_results(out, world):
    """The JSON each rank wrote to out.<rank> (None for a rank that wrote none)."""
    paths = [f"{out}.{rank}" for rank in range(world)]
    return [json.load(open(path)) if os.path.exists(path) else None for path in paths]


def run_scenario(script, scenario, world, tmp_path, module="rustytorch", timeout=60):
    """Runs `python script scenario OUT module` in world processes joined through env://; returns
    each rank's results."""
    port = free_port()
    out = str(tmp_path / f"{scenario}-{module}")
    run_ranks([script, scenario, out, module], [torchrun_env(rank, world, port) for rank in range(world)],
              timeout, scenario)
    return load_results(out, world)


def rank_main(namespace):
    """The ranks' side of run_scenario: joins a gloo group through env:// (a 20 s timeout), runs
    namespace['scenario_' + SCENARIO](torch, dist, out) with MODULE (rustytorch or torch) as torch,
    and writes out to OUT.<rank> as JSON."""
    scenario, out_path, module = sys.argv[1:4]
    if module == "torch":
        import torch
        import torch.distributed as dist
    else:
        import rustytorch as torch
        import rustytorch.distributed as dist
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    out = {}
    namespace["scenario_" + scenario](torch, dist, out)
    with open(f"{out_path}.{dist.get_rank()}", "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()
