"""rustytorch.distributed on the gloo backend: every collective and dtype across 2 and 4 processes
(exact results against numpy references, and against torch.distributed when torch is importable),
async ops and their order, barrier, subgroups, point-to-point, the stores, errors before init, a rank
that dies mid-all_reduce, and env:// with torchrun's and OpenMPI's variables.

Ranks run this file as a script (python test_distributed.py SCENARIO OUT MODULE), started with
subprocess over 127.0.0.1 on a free port, each run bounded by a timeout and killed on failure."""
import importlib.util
import json
import os
import sys
import threading
import time
from datetime import timedelta

import numpy as np
import pytest
from dist_launch import clean_env, free_port, load_results, needs_gloo, run_ranks, torchrun_env

import rustytorch as rt
import rustytorch.distributed as dist

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "uint8", "int32", "int64"]
OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG"]
NP = {"float32": np.float64, "float64": np.float64, "float16": np.float64, "bfloat16": np.float64,
      "int8": np.int8, "int16": np.int16, "uint8": np.uint8, "int32": np.int32, "int64": np.int64, "bool": np.bool_}
RUN_TIMEOUT = 90


# ----------------------------------------------------------------------------------------------------
# The ranks' side: scenarios run in the child processes, with rustytorch or torch as `torch`.
# ----------------------------------------------------------------------------------------------------
def _plain(t):
    """A tensor's values as nested lists (float16 and bfloat16 through float32, which holds them exactly)."""
    t = t.cpu()
    if t.is_floating_point() and t.element_size() == 2:
        t = t.float()
    return t.tolist()


def collectives(torch, dist, out, device="cpu", prefix=""):
    """Every collective and dtype on tensors of device, with rustytorch or torch as torch; results under
    prefix + key (expected_collectives gives them)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    for name in DTYPES:
        if name == "int16" and torch.__name__ == "torch":
            continue  # PyTorch's gloo backend has no int16 ("Invalid scalar type"); ours reduces it
        dt = getattr(torch, name)
        x = (torch.arange(6, dtype=torch.int64).reshape(2, 3) + rank).to(dt).to(device)
        for op in OPS:
            if op == "AVG" and not x.is_floating_point():
                continue
            t = x.clone()
            assert dist.all_reduce(t, op=getattr(dist.ReduceOp, op)) is None
            out[f"{prefix}all_reduce/{name}/{op}"] = _plain(t)
        t = x.clone()
        dist.broadcast(t, src=world - 1)
        out[f"{prefix}broadcast/{name}"] = _plain(t)
        t = x.clone()
        dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
        out[f"{prefix}reduce/{name}"] = _plain(t)
        gathered = [torch.zeros(2, 3, dtype=dt, device=device) for _ in range(world)]
        dist.all_gather(gathered, x)
        out[f"{prefix}all_gather/{name}"] = [_plain(g) for g in gathered]
        big = torch.zeros(world * 2, 3, dtype=dt, device=device)
        dist.all_gather_into_tensor(big, x)
        out[f"{prefix}all_gather_into_tensor/{name}"] = _plain(big)
        rs_in = (torch.arange(world * 6, dtype=torch.int64).reshape(world * 2, 3) + rank).to(dt).to(device)
        rs_out = torch.zeros(2, 3, dtype=dt, device=device)
        dist.reduce_scatter_tensor(rs_out, rs_in, op=dist.ReduceOp.SUM)
        out[f"{prefix}reduce_scatter_tensor/{name}"] = _plain(rs_out)
        a2a_in = (torch.arange(world * 2, dtype=torch.int64) + 10 * rank).to(dt).to(device)
        a2a_out = torch.zeros(world * 2, dtype=dt, device=device)
        dist.all_to_all_single(a2a_out, a2a_in)
        out[f"{prefix}all_to_all_single/{name}"] = _plain(a2a_out)
    for op in ("SUM", "PRODUCT", "MAX"):
        flags = torch.tensor([rank == 0, True, False], device=device)
        dist.all_reduce(flags, op=getattr(dist.ReduceOp, op))
        out[f"{prefix}all_reduce/bool/{op}"] = flags.cpu().tolist()
    rows = lambda s, d: s + d + 1  # noqa: E731  (rank s sends s + d + 1 rows of 2 to rank d)
    send = torch.cat([torch.full((rows(rank, d), 2), 1000 * rank + d, dtype=torch.int64, device=device)
                   for d in range(world)])
    recv = torch.zeros(sum(rows(s, rank) for s in range(world)), 2, dtype=torch.int64, device=device)
    dist.all_to_all_single(recv, send, output_split_sizes=[rows(s, rank) for s in range(world)],
                           input_split_sizes=(rows(rank, d) for d in range(world)))
    out[f"{prefix}all_to_all_single/uneven"] = recv.cpu().tolist()
    base = torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3) + rank
    dist.all_reduce(base.t())
    out[f"{prefix}all_reduce/noncontiguous"] = base.cpu().tolist()
    # Async ops run in issue order: SUM then PRODUCT gives sum ** world, the other order would not.
    t = torch.full((4,), float(rank + 1), dtype=torch.float64, device=device)
    w1 = dist.all_reduce(t, async_op=True)
    w2 = dist.all_reduce(t, op=dist.ReduceOp.PRODUCT, async_op=True)
    assert w2.wait() and w1.wait()
    if device == "cpu":  # a CPU wait returns when the work is done (a CUDA one orders the stream)
        assert w1.is_completed() and w2.is_completed() and w1.is_success()
    out[f"{prefix}async/order"] = t.cpu().tolist()
    if world > 1:  # a rank cannot send to itself
        # Point to point, each pair ordered so that no send waits on a receive posted after the peer's
        # own send (NCCL's sends block until matched); tags are accepted (and ignored by nccl).
        token = torch.full((3,), float(rank), dtype=torch.float64, device=device)
        got = torch.zeros(3, dtype=torch.float64, device=device)
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        if rank % 2 == 0:
            dist.send(token, dst=nxt, tag=7)
            src = dist.recv(got, src=prv, tag=7)
        else:
            src = dist.recv(got, src=prv, tag=7)
            dist.send(token, dst=nxt, tag=7)
        out[f"{prefix}p2p/ring"] = [src, got.cpu().tolist()]
    dist.barrier()
    out[f"{prefix}barrier"] = True


def scenario_collectives(torch, dist, out):
    out["rank_world_backend"] = [dist.get_rank(), dist.get_world_size(), dist.get_backend()]
    collectives(torch, dist, out)


def scenario_objects(torch, dist, out):
    """The object collectives with nested, uneven objects (rank r's is r + 1 entries long)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = {"rank": rank, "items": list(range(rank + 1)), "name": "r" * (rank + 1), "t": (rank, 1.5)}
    gathered = [None] * world
    dist.all_gather_object(gathered, mine)
    out["all_gather_object"] = gathered
    objs = [{"from": rank}, [rank] * 3, None] if rank == 1 else [None, None, None]
    dist.broadcast_object_list(objs, src=1)
    out["broadcast_object_list"] = objs
    at_dst = [None] * world if rank == 0 else None
    dist.gather_object(("g", rank), at_dst, dst=0)
    out["gather_object"] = at_dst
    got = [None]
    dist.scatter_object_list(got, [f"to {r}" for r in range(world)] if rank == world - 1 else None, src=world - 1)
    out["scatter_object_list"] = got


def scenario_subgroups(torch, dist, out):
    rank, world = dist.get_rank(), dist.get_world_size()
    odd = dist.new_group([r for r in range(world) if r % 2 == 1])
    even = dist.new_group(ranks=(r for r in range(world) if r % 2 == 0))
    mine = odd if rank % 2 else even
    other = even if rank % 2 else odd
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    out["sub/all_reduce"] = t.tolist()
    assert dist.all_reduce(torch.ones(1), group=other) is None  # not a member: nothing happens
    b = torch.tensor([float(rank)])
    dist.broadcast(b, src=max(dist.get_process_group_ranks(mine)), group=mine)
    out["sub/broadcast"] = b.tolist()
    out["sub/rank_size"] = [dist.get_rank(mine), dist.get_world_size(mine), dist.get_rank(other)]
    out["sub/ranks"] = dist.get_process_group_ranks(mine)
    dist.barrier(group=mine)
    scenario_collectives(torch, dist, out)


def scenario_dead_peer(torch, dist, out):
    rank = dist.get_rank()
    t = torch.ones(1000)
    dist.all_reduce(t)
    out["first"] = t[0].item()
    if rank == 1:
        json.dump(out, open(sys.argv[2] + f".{rank}", "w"))
        os._exit(0)  # dies without leaving the group
    start = time.monotonic()
    try:
        for _ in range(50):  # the peer is gone before or during one of these
            dist.all_reduce(t)
        out["error"] = None
    except Exception as e:  # noqa: BLE001
        out["error"] = [type(e).__name__, str(e), isinstance(e, dist.DistError)]
    out["elapsed"] = time.monotonic() - start


def scenario_stalled_peer(torch, dist, out):
    """Rank 1 stays alive but skips an all_reduce: rank 0 times out, then releases it via the store."""
    rank = dist.get_rank()
    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), timeout=timedelta(seconds=20))
    if rank == 1:
        store.wait(["rank0_done"])
        return
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
        out["error"] = None
    except Exception as e:  # noqa: BLE001
        out["error"] = [type(e).__name__, str(e), isinstance(e, dist.DistError)]
    out["elapsed"] = time.monotonic() - start
    store.set("rank0_done", "1")


def _child_main():
    scenario, out_path, module = sys.argv[1], sys.argv[2], sys.argv[3]
    if module == "torch":
        import torch
        import torch.distributed as backend
    else:
        torch, backend = rt, dist
    _scenario(scenario, out_path, torch, backend)


def _scenario(scenario, out_path, torch, dist):
    if os.environ.get("RTX_TEST_INIT") == "tcp":
        dist.init_process_group("gloo", init_method=os.environ["RTX_TEST_TCP"], rank=int(os.environ["RTX_TEST_RANK"]),
                                world_size=int(os.environ["RTX_TEST_WORLD"]), timeout=timedelta(seconds=20))
    else:
        dist.init_process_group(backend="gloo", timeout=timedelta(seconds=int(os.environ.get("RTX_TEST_TIMEOUT", 20))))
    out = {}
    globals()["scenario_" + scenario](torch, dist, out)
    rank = dist.get_rank()
    json.dump(out, open(out_path + f".{rank}", "w"))
    dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------------
# The test side.
# ----------------------------------------------------------------------------------------------------
def _run(scenario, world, tmp_path, style="torchrun", module="rustytorch", extra_env=None):
    """Runs scenario in world processes; returns each rank's results (None for a rank that left none)."""
    port = free_port()
    out = str(tmp_path / f"{scenario}-{module}")
    envs = []
    for rank in range(world):
        if style == "torchrun":
            env = torchrun_env(rank, world, port)
        elif style == "openmpi":
            env = dict(clean_env(), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMPI_COMM_WORLD_RANK=str(rank),
                       OMPI_COMM_WORLD_SIZE=str(world))
        else:
            env = dict(clean_env(), RTX_TEST_INIT="tcp", RTX_TEST_TCP=f"tcp://127.0.0.1:{port}",
                       RTX_TEST_RANK=str(rank), RTX_TEST_WORLD=str(world))
        envs.append(dict(env, **(extra_env or {})))
    run_ranks([__file__, scenario, out, module], envs, RUN_TIMEOUT, scenario)
    return load_results(out, world)


def _wrap(values, name):
    """values (int64 or float64 numbers) as the dtype name would hold them (integers wrap)."""
    return np.asarray(values).astype(NP[name]).astype(np.float64 if NP[name] is np.float64 else np.int64)


def expected_collectives(rank, world, prefix=""):
    """The results of collectives for rank, from numpy."""
    exp = {}
    xs = [np.arange(6, dtype=np.int64).reshape(2, 3) + r for r in range(world)]
    stack = np.stack(xs)
    for name in DTYPES:
        reds = {"SUM": stack.sum(0), "PRODUCT": stack.prod(0), "MIN": stack.min(0), "MAX": stack.max(0)}
        if NP[name] is np.float64:
            reds["AVG"] = stack.sum(0) / world
        for op, v in reds.items():
            exp[f"all_reduce/{name}/{op}"] = _wrap(v, name)
        exp[f"broadcast/{name}"] = _wrap(xs[world - 1], name)
        exp[f"reduce/{name}"] = _wrap(stack.sum(0) if rank == 0 else xs[rank], name)
        exp[f"all_gather/{name}"] = _wrap(stack, name)
        exp[f"all_gather_into_tensor/{name}"] = _wrap(np.concatenate(xs), name)
        rs = sum(np.arange(world * 6).reshape(world * 2, 3) + r for r in range(world))
        exp[f"reduce_scatter_tensor/{name}"] = _wrap(rs[rank * 2:(rank + 1) * 2], name)
        a2a = np.concatenate([(np.arange(world * 2) + 10 * s)[rank * 2:(rank + 1) * 2] for s in range(world)])
        exp[f"all_to_all_single/{name}"] = _wrap(a2a, name)
    flags = np.array([[r == 0, True, False] for r in range(world)])
    exp["all_reduce/bool/SUM"] = flags.any(0).tolist()
    exp["all_reduce/bool/MAX"] = flags.any(0).tolist()
    exp["all_reduce/bool/PRODUCT"] = flags.all(0).tolist()
    exp["all_to_all_single/uneven"] = np.concatenate([np.full((s + rank + 1, 2), 1000 * s + rank)
                                                      for s in range(world)])
    exp["all_reduce/noncontiguous"] = stack.sum(0).astype(np.float64)
    exp["async/order"] = [float(sum(range(1, world + 1)) ** world)] * 4
    exp["p2p/ring"] = [(rank - 1) % world, [float((rank - 1) % world)] * 3]
    exp["barrier"] = True
    return {prefix + k: v for k, v in exp.items()}


def _expected(rank, world):
    """The reference results of scenario_collectives for rank."""
    return {"rank_world_backend": [rank, world, "gloo"], **expected_collectives(rank, world)}


def check_results(got, exp, rank):
    """Every expected result of rank is in got, equal."""
    for key, value in exp.items():
        assert key in got, f"rank {rank}: no result for {key}"
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(np.asarray(got[key]), value, err_msg=f"rank {rank} {key}")
        else:
            assert got[key] == value, f"rank {rank} {key}: {got[key]} != {value}"


def _check(results, world):
    for rank, got in enumerate(results):
        check_results(got, _expected(rank, world), rank)


@needs_gloo
def test_collectives_two_ranks_env(tmp_path):
    _check(_run("collectives", 2, tmp_path), 2)


@needs_gloo
def test_collectives_and_subgroups_four_ranks_tcp(tmp_path):
    results = _run("subgroups", 4, tmp_path, style="tcp")
    _check(results, 4)
    for rank, got in enumerate(results):
        members = [r for r in range(4) if r % 2 == rank % 2]
        assert got["sub/all_reduce"] == [float(sum(members))]
        assert got["sub/broadcast"] == [float(max(members))]
        assert got["sub/rank_size"] == [members.index(rank), 2, -1]
        assert got["sub/ranks"] == members


@needs_gloo
def test_object_collectives(tmp_path):
    world = 3
    results = _run("objects", world, tmp_path)
    everyone = [{"rank": r, "items": list(range(r + 1)), "name": "r" * (r + 1), "t": [r, 1.5]} for r in range(world)]
    for rank, got in enumerate(results):
        # JSON turns tuples into lists.
        assert got["all_gather_object"] == everyone
        assert got["broadcast_object_list"] == [{"from": 1}, [1, 1, 1], None]
        assert got["gather_object"] == ([["g", r] for r in range(world)] if rank == 0 else None)
        assert got["scatter_object_list"] == [f"to {rank}"]
    if importlib.util.find_spec("torch") is not None:
        assert _run("objects", world, tmp_path, module="torch") == results


@needs_gloo
def test_same_results_as_torch_distributed(tmp_path):
    pytest.importorskip("torch")
    ours = _run("collectives", 2, tmp_path)
    theirs = _run("collectives", 2, tmp_path, module="torch")
    for rank in range(2):
        # PyTorch's gloo runs async ops on two threads, so two in flight on one tensor race there.
        del ours[rank]["async/order"], theirs[rank]["async/order"]
        for key in [k for k in ours[rank] if "/int16" in k]:
            del ours[rank][key]
        if rank != 0:  # PyTorch's gloo leaves partial sums in reduce's non-dst tensors; ours are unchanged
            for results in (ours, theirs):
                for key in [k for k in results[rank] if k.startswith("reduce/")]:
                    del results[rank][key]
        assert ours[rank] == theirs[rank]


@needs_gloo
def test_dead_peer_raises_within_timeout_openmpi_env(tmp_path):
    results = _run("dead_peer", 2, tmp_path, style="openmpi", extra_env={"RTX_TEST_TIMEOUT": "5"})
    assert results[1]["first"] == 2.0
    name, message, is_dist_error = results[0]["error"]
    assert is_dist_error and name == "DistBackendError", message
    assert "all_reduce" in message and "rank 0" in message and "5 s" in message, message
    assert results[0]["elapsed"] < 5 + 2


@needs_gloo
def test_stalled_peer_times_out(tmp_path):
    results = _run("stalled_peer", 2, tmp_path, extra_env={"RTX_TEST_TIMEOUT": "1"})
    name, message, is_dist_error = results[0]["error"]
    assert is_dist_error and name == "DistBackendError", message
    assert "[all_reduce] rank 0" in message and "timeout 1 s" in message, message
    assert 0.9 < results[0]["elapsed"] < 1 + 2


# ----------------------------------------------------------------------------------------------------
# In this process: the stores, errors before init, a peer that never comes.
# ----------------------------------------------------------------------------------------------------
def test_tcp_store_set_get_add_wait_check():
    master = dist.TCPStore("127.0.0.1", 0, world_size=2, is_master=True, timeout=timedelta(seconds=5))
    client = dist.TCPStore("127.0.0.1", master.port, world_size=2, timeout=timedelta(seconds=5))
    client.set("k", "v1")
    assert master.get("k") == b"v1"
    master.set("raw", b"\x00\xffz")
    assert client.get("raw") == b"\x00\xffz"
    assert client.add("n", 3) == 3 and master.add("n", -1) == 2 and client.get("n") == b"2"
    assert client.check(["k", "n"]) and not client.check(["k", "absent"])
    later = threading.Timer(0.2, lambda: master.set("late", "here"))
    later.start()
    assert client.get("late") == b"here"  # blocks until set
    later.join()
    client.wait(["k", "late"], timedelta(seconds=1))
    assert master.num_keys() == 4
    assert client.delete_key("k") and not client.delete_key("k")
    prefixed = dist.PrefixStore("pfx", client)
    prefixed.set("a", "1")
    assert master.get("pfx/a") == b"1" and prefixed.get("a") == b"1"


def test_tcp_store_timeouts_name_the_key():
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=0.3))
    start = time.monotonic()
    with pytest.raises(dist.DistStoreError, match="0.3 s waiting for keys \\['nothing'\\]"):
        master.get("nothing")
    with pytest.raises(dist.DistStoreError, match="'a', 'b'"):
        master.wait(["a", "b"], timedelta(seconds=0.2))
    assert time.monotonic() - start < 3
    master.set("after", "ok")  # the store still works after a timeout
    assert master.get("after") == b"ok"
    assert issubclass(dist.DistStoreError, dist.DistError) and issubclass(dist.DistError, RuntimeError)
    assert issubclass(dist.DistBackendError, dist.DistError) and issubclass(dist.DistError, rt.Error)
    with pytest.raises(dist.DistStoreError, match="could not connect"):
        dist.TCPStore("127.0.0.1", free_port(), timeout=timedelta(seconds=0.2))
    with pytest.raises(TypeError):
        master.set("k", 3)


def test_errors_before_init():
    assert dist.is_available() and not dist.is_initialized()
    msg = "Default process group has not been initialized"
    for call in (lambda: dist.get_rank(), lambda: dist.get_world_size(), lambda: dist.all_reduce(rt.ones(2)),
                 lambda: dist.barrier(), lambda: dist.new_group([0])):
        with pytest.raises(ValueError, match=msg):
            call()
    if not dist.is_nccl_available():
        with pytest.raises(dist.DistBackendError, match="no nccl backend"):
            dist.init_process_group("nccl", init_method="tcp://127.0.0.1:1", rank=0, world_size=1)
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        env = dict(os.environ)
        try:
            os.environ.pop("MASTER_ADDR", None)
            dist.init_process_group("gloo", rank=0, world_size=1)
        finally:
            os.environ.clear()
            os.environ.update(env)


@needs_gloo
def test_peer_that_never_comes_times_out():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=0.5))
    start = time.monotonic()
    with pytest.raises(dist.DistError, match="0.5 s"):
        dist.init_process_group("gloo", store=store, rank=0, world_size=2, timeout=timedelta(seconds=0.5))
    assert time.monotonic() - start < 4 and not dist.is_initialized()


@needs_gloo
def test_single_process_group_and_bad_arguments():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5))
    dist.init_process_group(store=store, rank=0, world_size=1, timeout=timedelta(seconds=5))
    try:
        # backend None: gloo, or (in builds with NCCL) gloo and nccl, which PyTorch calls "undefined"
        backend = "undefined" if dist.is_nccl_available() else "gloo"
        assert dist.is_initialized() and dist.get_backend() == backend and dist.group.WORLD is not None
        t = rt.tensor([1.0, 2.0])
        work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
        assert work.wait() and t.tolist() == [1.0, 2.0]
        with pytest.raises(rt.DTypeError, match="AVG.*int64"):
            dist.all_reduce(rt.tensor([1, 2]), op=dist.ReduceOp.AVG)
        with pytest.raises(ValueError, match=r"\[broadcast\] rank 3 is not in the group"):
            dist.broadcast(t, src=3)
        with pytest.raises(rt.ShapeError, match=r"\[all_gather_into_tensor\]"):
            dist.all_gather_into_tensor(rt.zeros(3), t)
        with pytest.raises(ValueError, match="tensor_list has 2 tensors"):
            dist.all_gather([rt.zeros(2), rt.zeros(2)], t)
        with pytest.raises(ValueError, match="twice"):
            dist.init_process_group(store=store, rank=0, world_size=1)
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized() and dist.group.WORLD is None


if __name__ == "__main__":
    _child_main()
