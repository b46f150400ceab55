"""rustytorch.distributed's nccl backend and backend=None's group (gloo for CPU tensors, nccl for CUDA
tensors): what a build says about NCCL and how it refuses without it; the CPU half of backend=None
across 2 processes (and its CUDA half with two GPUs); on one GPU, a one-rank nccl group in this process
(every collective and dtype, non-contiguous tensors, a producer on a side stream, an input freed while
NCCL still reads it, errors, TORCH_NCCL_BLOCKING_WAIT); with two GPUs, two processes (every collective
and dtype against numpy references, point-to-point, subgroups, and a killed rank that the other sees
as DistBackendError within the timeout, with and without blocking wait).

Ranks run this file as a script (python test_distributed_nccl.py SCENARIO OUT), started with
subprocess over 127.0.0.1 on a free port, each run bounded by a timeout and killed on failure."""
import json
import os
import signal
import sys
import time
from datetime import timedelta

import pytest
from dist_launch import free_port, load_results, needs_gloo, run_ranks, torchrun_env
from test_distributed import check_results, collectives, expected_collectives

import rustytorch as rt
import rustytorch.distributed as dist

RUN_TIMEOUT = 120
N_GPUS = rt.cuda.device_count()
NO_GPU = "no CUDA device: " + rt._C._cuda.unavailable_reason()
needs_nccl = pytest.mark.skipif(not dist.is_nccl_available(),
                                reason="this build has no nccl backend (build with CUDA and NCCL)")
needs_gpu = pytest.mark.skipif(not dist.is_nccl_available() or N_GPUS < 1,
                               reason=NO_GPU if N_GPUS < 1 else "this build has no nccl backend")
needs_two_gpus = pytest.mark.skipif(not dist.is_nccl_available() or N_GPUS < 2,
                                    reason=f"needs 2 CUDA devices and NCCL, found {N_GPUS} device(s)")


def _slow_ones(device):
    """A 4096 x 4096 float32 matrix of ones made by 40 exact products on the current stream: a producer
    that keeps the GPU busy for tens of milliseconds."""
    m = rt.full((4096, 4096), 1.0 / 4096, device=device)
    x = rt.ones(4096, 4096, device=device)
    for _ in range(40):
        x = x @ m
    return x


# ----------------------------------------------------------------------------------------------------
# The ranks' side: scenarios run in the child processes.
# ----------------------------------------------------------------------------------------------------
def scenario_cpu_half(out):
    """backend None (or "cpu:gloo,cuda:nccl"): CPU tensors on gloo, and CUDA tensors on nccl when each
    rank has a GPU."""
    rank = dist.get_rank()
    out["backend"] = [dist.get_backend(), dist.get_backend(dist.new_group([0, 1]))]
    collectives(rt, dist, out, "cpu")
    if rt.cuda.device_count() >= dist.get_world_size():
        rt.cuda.set_device(rank)
        collectives(rt, dist, out, f"cuda:{rank}", prefix="cuda/")


def scenario_gpu(out):
    rank = dist.get_rank()
    rt.cuda.set_device(rank)  # after init_process_group: the communicator is made at the first collective
    out["backend"] = [dist.get_backend()]
    collectives(rt, dist, out, f"cuda:{rank}")
    pair = dist.new_group([0, 1])
    t = rt.full((2,), float(rank + 1), device=f"cuda:{rank}")
    dist.all_reduce(t, group=pair, op=dist.ReduceOp.MAX)
    out["sub/all_reduce"] = t.cpu().tolist()
    with pytest.raises(rt.DeviceError, match="the nccl backend takes CUDA tensors"):
        dist.all_reduce(rt.ones(2))


def scenario_killed_peer(out):
    """Rank 1 is killed after one all_reduce; rank 0 keeps reducing until the group fails."""
    rank = dist.get_rank()
    rt.cuda.set_device(rank)
    t = rt.ones(1000, device=f"cuda:{rank}")
    dist.all_reduce(t)
    out["first"] = t[0].item()
    rt.cuda.synchronize()
    if rank == 1:
        json.dump(out, open(sys.argv[2] + f".{rank}", "w"))
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        for _ in range(1000):  # the peer is gone before or during one of these
            dist.all_reduce(t)
            rt.cuda.synchronize()  # returns once the watchdog has aborted the communicator
        out["error"] = None
    except Exception as e:  # noqa: BLE001
        out["error"] = [type(e).__name__, str(e), isinstance(e, dist.DistError)]
    out["elapsed"] = time.monotonic() - start


def _child_main():
    scenario, out_path = sys.argv[1], sys.argv[2]
    backend = os.environ["RTX_TEST_BACKEND"] or None
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=int(os.environ.get("RTX_TEST_TIMEOUT", 30))))
    out = {}
    globals()["scenario_" + scenario](out)
    json.dump(out, open(out_path + f".{dist.get_rank()}", "w"))
    dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------------
# The test side.
# ----------------------------------------------------------------------------------------------------
def _run(scenario, world, tmp_path, backend="", extra_env=None, killed=()):
    """Runs scenario in world processes; returns each rank's results. Ranks in killed may die by SIGKILL."""
    port = free_port()
    out = str(tmp_path / scenario)
    envs = [dict(torchrun_env(rank, world, port), RTX_TEST_BACKEND=backend, **(extra_env or {}))
            for rank in range(world)]
    run_ranks([__file__, scenario, out], envs, RUN_TIMEOUT, scenario, killed)
    return load_results(out, world)


# ----------------------------------------------------------------------------------------------------
# Every build.
# ----------------------------------------------------------------------------------------------------
def test_build_says_whether_it_has_nccl():
    assert isinstance(dist.is_nccl_available(), bool)
    assert not dist.is_initialized()
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5))
    if not dist.is_nccl_available():
        for backend in ("nccl", "cuda:nccl", "cpu:gloo,cuda:nccl"):
            with pytest.raises(dist.DistBackendError, match="no nccl backend.*RTX_WITH_NCCL"):
                dist.init_process_group(backend, store=store, rank=0, world_size=1)
    elif N_GPUS == 0:
        with pytest.raises(dist.DistBackendError, match="backend 'nccl' needs a CUDA device"):
            dist.init_process_group("nccl", store=store, rank=0, world_size=1)
    with pytest.raises(ValueError, match="unknown backend 'mpi'; rustytorch has 'gloo', 'nccl'"):
        dist.init_process_group("mpi", store=store, rank=0, world_size=1)
    assert not dist.is_initialized()


@needs_gloo
def test_backend_none_is_gloo_plus_nccl_when_built():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5))
    dist.init_process_group(store=store, rank=0, world_size=1, timeout=timedelta(seconds=5))
    try:
        # As PyTorch: backend None is "undefined" (gloo for CPU tensors, nccl for CUDA tensors).
        assert dist.get_backend() == ("undefined" if dist.is_nccl_available() else "gloo")
        t = rt.tensor([1.0, 2.0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        assert t.tolist() == [1.0, 2.0]
        dist.barrier()
    finally:
        dist.destroy_process_group()


@needs_nccl
@needs_gloo
@pytest.mark.parametrize("backend", ["", "cpu:gloo,cuda:nccl"])
def test_backend_none_two_ranks(tmp_path, backend):
    results = _run("cpu_half", 2, tmp_path, backend=backend)
    for rank, got in enumerate(results):
        name = backend or "undefined"
        assert got["backend"] == [name, name]
        check_results(got, expected_collectives(rank, 2), rank)
        if N_GPUS >= 2:
            check_results(got, expected_collectives(rank, 2, prefix="cuda/"), rank)


# ----------------------------------------------------------------------------------------------------
# One GPU: a one-rank nccl group in this process.
# ----------------------------------------------------------------------------------------------------
@pytest.fixture
def nccl_one_rank(monkeypatch, request):
    blocking = getattr(request, "param", "0")
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", blocking)  # read when the group is made
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=20))
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, timeout=timedelta(seconds=20))
    yield
    dist.destroy_process_group()


@needs_gpu
def test_one_rank_every_collective_and_dtype(nccl_one_rank):
    assert dist.get_backend() == "nccl" and dist.get_world_size() == 1
    out = {}
    collectives(rt, dist, out, "cuda")
    check_results(out, {k: v for k, v in expected_collectives(0, 1).items() if not k.startswith("p2p/")}, 0)
    work = dist.barrier(async_op=True)
    assert work.wait() and work.is_completed() and work.is_success()


@needs_gpu
def test_one_rank_non_contiguous_tensors(nccl_one_rank):
    src = rt.arange(12, dtype=rt.float32, device="cuda").reshape(3, 4)
    base = src.clone()
    dist.all_reduce(base.t())
    assert base.cpu().tolist() == src.cpu().tolist()
    out = rt.zeros(3, 4, device="cuda")
    dist.all_gather_into_tensor(out.t(), src.t())
    assert out.t().cpu().tolist() == src.t().cpu().tolist()
    parts = [rt.zeros(4, 3, device="cuda").t()]
    dist.all_gather(parts, src)
    assert parts[0].cpu().tolist() == src.cpu().tolist()
    recv = rt.zeros(4, 3, device="cuda")
    dist.all_to_all_single(recv.t(), src, input_split_sizes=[3])
    assert recv.t().cpu().tolist() == src.cpu().tolist()


@needs_gpu
def test_one_rank_collective_runs_after_a_producer_on_a_side_stream(nccl_one_rank):
    side = rt.cuda.Stream()
    with rt.cuda.stream(side):
        out = rt.zeros(4096 * 4096, device="cuda")
        work = dist.all_gather_into_tensor(out, _slow_ones("cuda") + 6, async_op=True)
        assert not work.is_completed()  # the producer still runs; the host was not blocked
        work.wait()  # the side stream waits for the collective
        assert bool((out == 7).all().item())


@needs_gpu
def test_one_rank_input_freed_while_nccl_reads_it(nccl_one_rank):
    rt.cuda.empty_cache()
    n = 1024 * 4096  # a size no other tensor here has
    out = rt.zeros(n, device="cuda")
    producer = _slow_ones("cuda")
    inp = (producer[:1024] + 6).reshape(-1)
    memory = inp.data_ptr()
    work = dist.all_gather_into_tensor(out, inp, async_op=True)
    del inp  # its memory stays reserved for the NCCL stream until the collective is done
    other = rt.full((n,), -5.0, device="cuda")
    assert other.data_ptr() != memory
    work.wait()
    assert bool((out == 7).all().item())


@needs_gpu
@pytest.mark.parametrize("nccl_one_rank", ["0", "1"], indirect=True)
def test_one_rank_wait_blocks_the_host_only_with_blocking_wait(nccl_one_rank):
    out = rt.zeros(4096 * 4096, device="cuda")
    work = dist.all_gather_into_tensor(out, _slow_ones("cuda"), async_op=True)
    assert work.wait()
    blocking = os.environ["TORCH_NCCL_BLOCKING_WAIT"] == "1"
    assert work.is_completed() == blocking  # without it, wait() only orders the current stream
    rt.cuda.synchronize()
    assert work.is_completed() and work.is_success()
    assert work.result()[0].data_ptr() == out.data_ptr()


@needs_gpu
def test_one_rank_errors(nccl_one_rank):
    x = rt.ones(4, device="cuda")
    with pytest.raises(rt.DeviceError, match=r"\[all_reduce\] the nccl backend takes CUDA tensors, got one on cpu; "
                                             r"use the gloo backend for CPU tensors, or backend=None for both"):
        dist.all_reduce(rt.ones(4))
    with pytest.raises(rt.DTypeError, match=r"\[all_reduce\] ReduceOp.AVG needs a floating-point tensor, got int64"):
        dist.all_reduce(rt.ones(2, dtype=rt.int64, device="cuda"), op=dist.ReduceOp.AVG)
    with pytest.raises(rt.ShapeError, match=r"\[all_gather\] output shape \[3\] != input shape \[4\]"):
        dist.all_gather([rt.zeros(3, device="cuda")], x)
    with pytest.raises(rt.DTypeError, match=r"\[all_gather_into_tensor\] output dtype float64 != input dtype float32"):
        dist.all_gather_into_tensor(rt.zeros(4, dtype=rt.float64, device="cuda"), x)
    with pytest.raises(ValueError, match=r"\[isend\] rank 1 is not in the group"):
        dist.isend(x, dst=1)
    with pytest.raises(ValueError, match=r"\[send\] dst rank 0 is this rank"):
        dist.send(x, dst=0)
    if N_GPUS >= 2:
        dist.all_reduce(x)  # the group's device is cuda:0 now
        with pytest.raises(rt.DeviceError, match="this nccl group works on cuda:0, got a tensor on cuda:1"):
            dist.all_reduce(rt.ones(4, device="cuda:1"))
    dist.all_reduce(x)  # the group still works
    assert x.cpu().tolist() == [1.0] * 4


# ----------------------------------------------------------------------------------------------------
# Two GPUs: two processes.
# ----------------------------------------------------------------------------------------------------
@needs_two_gpus
def test_two_ranks_every_collective(tmp_path):
    results = _run("gpu", 2, tmp_path, backend="nccl")
    for rank, got in enumerate(results):
        assert got["backend"] == ["nccl"]
        check_results(got, expected_collectives(rank, 2), rank)
        assert got["sub/all_reduce"] == [2.0, 2.0]


@needs_two_gpus
@pytest.mark.parametrize("blocking", ["0", "1"])
def test_two_ranks_killed_peer_raises_within_timeout(tmp_path, blocking):
    results = _run("killed_peer", 2, tmp_path, backend="nccl", killed=(1,),
                   extra_env={"RTX_TEST_TIMEOUT": "8", "TORCH_NCCL_BLOCKING_WAIT": blocking})
    assert results[1]["first"] == 2.0
    name, message, is_dist_error = results[0]["error"]
    assert is_dist_error and name == "DistBackendError", message
    assert "[all_reduce] rank 0 of an nccl group of 2 (world ranks [0, 1])" in message, message
    assert "did not complete within 8 s" in message or "failed on the group's communicator" in message, message
    assert results[0]["elapsed"] < 8 + 3


if __name__ == "__main__":
    _child_main()


@needs_gpu
def test_one_rank_ddp_on_cuda_equals_the_plain_model(nccl_one_rank):
    """DistributedDataParallel over nccl on one GPU (tiny buckets, bf16 autocast, fused AdamW, clipping,
    bucket views): the same parameters as the unwrapped model, inputs moved by device_ids."""
    def make():
        rt.manual_seed(0)
        return rt.nn.Sequential(rt.nn.Linear(32, 64), rt.nn.GELU(), rt.nn.Linear(64, 8)).cuda()

    plain, wrapped = make(), make()
    ddp = rt.nn.parallel.DistributedDataParallel(wrapped, device_ids=[0], bucket_cap_mb=0.002,
                                                 gradient_as_bucket_view=True)
    assert len(ddp._bucket_indices()) > 2
    opts = [rt.optim.AdamW(m.parameters(), lr=1e-2, fused=True) for m in (plain, ddp)]
    for step in range(3):
        x = rt.randn(16, 32)  # on the CPU: DDP moves it to device_ids[0]
        for model, opt in zip((plain, ddp), opts):
            with rt.autocast("cuda", dtype=rt.bfloat16):
                loss = model(x.cuda() if model is plain else x).float().square().mean()
            loss.backward()
            rt.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=False)
    for p, q in zip(plain.parameters(), wrapped.parameters()):
        assert rt.equal(p, q)
