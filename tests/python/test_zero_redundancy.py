"""distributed.optim.ZeroRedundancyOptimizer: PyTorch's partition (hand-computed and against torch's),
the errors, one rank (bit for bit a plain optimizer, hyperparameters following param_groups and a
scheduler, add_param_group, a GradScaler, the state_dict round trip), and two gloo ranks training a
Linear stack on different batches with gradients averaged by all_reduce (or DistributedDataParallel)
for several optimizers, with and without parameters_as_bucket_view: the same parameters as one plain
optimizer on the averaged gradients, bitwise equal on both ranks, each rank holding the state of its
partition only, the state consolidated on one rank and loaded into a plain optimizer, and a full
state loaded into a new one (also against torch's ZeroRedundancyOptimizer when torch is importable).

Ranks run this file as a script (python test_zero_redundancy.py SCENARIO OUT MODULE)."""
import copy
from datetime import timedelta
from importlib import import_module

import numpy as np
import pytest

import rustytorch as rt
import rustytorch.distributed as dist
from rustytorch.distributed.optim import ZeroRedundancyOptimizer
from rustytorch.distributed.optim.zero_redundancy_optimizer import _partition_parameters

from dist_launch import needs_gloo, rank_main, run_scenario



# ----------------------------------------------------------------------------------------------------
# The partition and the errors.
# ----------------------------------------------------------------------------------------------------
SIZES = [[10, 3, 7, 7, 2], [5, 1]]  # two groups of 1-d parameters with these numbers of elements


def _indexed_partition(param_groups, partition):
    index = {p: i for i, p in enumerate(p for g in param_groups for p in g["params"])}
    return [[[index[p] for p in ps] for ps in groups] for groups in partition]


@pytest.mark.parametrize("world, expected", [
    (1, [[[0, 2, 3, 1, 4], [5, 6]]]),
    (2, [[[0, 1, 4], [6]], [[2, 3], [5]]]),          # largest first, to the rank with the fewest elements
    (3, [[[0], [6]], [[2, 1], []], [[3, 4], [5]]]),  # ties go to the lowest rank
])
def test_partition(world, expected):
    groups = [{"params": [rt.zeros(n) for n in sizes]} for sizes in SIZES]
    assert _indexed_partition(groups, _partition_parameters(groups, world)) == expected


@pytest.mark.parametrize("world", [2, 3, 4])
def test_partition_is_pytorchs(world):
    torch = pytest.importorskip("torch")
    TorchZeRO = import_module("torch.distributed.optim").ZeroRedundancyOptimizer
    shapes = [[(4, 3), (3,), (2, 6), (12,), (5,), (1,)], [(7,), (2, 2), (4,), (4, 4)], [(3, 3)]]
    ours = [{"params": [rt.zeros(*s) for s in group]} for group in shapes]
    theirs = [{"params": [torch.zeros(*s) for s in group]} for group in shapes]
    # PyTorch's method on an instance that holds only what it reads (no process group needed)
    partitioner = object.__new__(TorchZeRO)
    partitioner.world_size, partitioner.param_groups, partitioner._partition_parameters_cache = world, theirs, []
    expected = [[g["params"] for g in groups] for groups in partitioner._partition_parameters()]
    assert (_indexed_partition(ours, _partition_parameters(ours, world))
            == _indexed_partition(theirs, expected))


def test_errors_without_a_group():
    params = [rt.nn.Parameter(rt.zeros(2))]
    with pytest.raises(ValueError, match="overlap_with_ddp=True is not supported"):
        ZeroRedundancyOptimizer(params, rt.optim.SGD, overlap_with_ddp=True, lr=0.1)
    with pytest.raises(ValueError, match="same dense type.*float32 on cpu and .*float64 on cpu"):
        ZeroRedundancyOptimizer([rt.zeros(2, requires_grad=True), rt.zeros(2, dtype=rt.float64, requires_grad=True)],
                                rt.optim.SGD, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        ZeroRedundancyOptimizer([], rt.optim.SGD, lr=0.1)
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        ZeroRedundancyOptimizer(params, rt.optim.SGD, lr=0.1)


# ----------------------------------------------------------------------------------------------------
# One rank, in this process.
# ----------------------------------------------------------------------------------------------------
@pytest.fixture
def one_rank():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5))
    dist.init_process_group(store=store, rank=0, world_size=1, timeout=timedelta(seconds=5))
    try:
        yield
    finally:
        dist.destroy_process_group()


def _twin_models(seed=0):
    rt.manual_seed(seed)
    model = rt.nn.Sequential(rt.nn.Linear(4, 6), rt.nn.Tanh(), rt.nn.Linear(6, 3))
    return model, copy.deepcopy(model)


def _loss(model, step):
    x = rt.randn(5, 4, generator=rt.Generator().manual_seed(step))
    return (model(x) - 1).pow(2).mean()


def _assert_same(a, b):
    for p, q in zip(a.parameters(), b.parameters()):
        assert rt.equal(p, q), (p, q)


@needs_gloo
def test_one_rank_is_the_plain_optimizer(one_rank):
    model, twin = _twin_models()
    zero = ZeroRedundancyOptimizer(model.parameters(), rt.optim.Adam, lr=0.05, betas=(0.8, 0.99))
    plain = rt.optim.Adam(twin.parameters(), lr=0.05, betas=(0.8, 0.99))
    assert zero.param_groups[0]["betas"] == (0.8, 0.99) and zero.param_groups[0]["eps"] == 1e-8  # the local defaults
    assert zero.defaults == {"lr": 0.05, "betas": (0.8, 0.99)}
    assert zero.world_size == 1 and zero.rank == 0 and zero.global_rank == 0
    schedulers = [rt.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5) for o in (zero, plain)]
    for step in range(5):
        losses = []
        for m, opt, sched in zip((model, twin), (zero, plain), schedulers):
            def closure(m=m, opt=opt):
                opt.zero_grad()
                loss = _loss(m, step)
                loss.backward()
                return loss
            losses.append(opt.step(closure).item())
            sched.step()
        assert losses[0] == losses[1]
        _assert_same(model, twin)
    assert zero.param_groups[0]["lr"] == plain.param_groups[0]["lr"] == 0.05 * 0.5 ** 2
    zero.step()  # the scheduler's lr reaches the local optimizer
    assert zero.optim.param_groups[0]["lr"] == 0.05 * 0.5 ** 2
    zero.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    zero.zero_grad()
    assert all(p.grad is None for p in model.parameters())


@needs_gloo
def test_one_rank_add_param_group_and_grad_scaler(one_rank):
    model, twin = _twin_models(1)
    extra = [rt.nn.Linear(3, 2) for _ in range(2)]
    extra[1].load_state_dict(extra[0].state_dict())
    kwargs = dict(lr=0.01, weight_decay=0.1, fused=True)
    zero = ZeroRedundancyOptimizer(model.parameters(), rt.optim.AdamW, **kwargs)
    plain = rt.optim.AdamW(twin.parameters(), **kwargs)
    scalers = [rt.amp.GradScaler("cpu", init_scale=2.0 ** 10) for _ in range(2)]
    for step in range(4):
        if step == 2:
            zero.add_param_group({"params": extra[0].parameters(), "lr": 0.02})
            plain.add_param_group({"params": extra[1].parameters(), "lr": 0.02})
            assert zero.param_groups[1]["betas"] == (0.9, 0.999) and zero.param_groups[1]["lr"] == 0.02
            assert len(zero.optim.param_groups) == 2
        for m, head, opt, scaler in zip((model, twin), extra, (zero, plain), scalers):
            opt.zero_grad()
            loss = _loss(m, step) + (head(m(rt.ones(1, 4))).sum() if step >= 2 else 0)
            if step == 1:
                loss = loss * float("inf")  # an overflow: both skip the step
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        for a, b in zip(list(model.parameters()) + list(extra[0].parameters()),
                        list(twin.parameters()) + list(extra[1].parameters())):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=0, atol=1e-6)
    assert scalers[0].get_scale() == scalers[1].get_scale() == 2.0 ** 9
    zero.consolidate_state_dict()
    assert sorted(zero.state_dict()["state"]) == sorted(plain.state_dict()["state"]) == list(range(6))


@needs_gloo
def test_one_rank_state_dict(one_rank):
    model, twin = _twin_models(2)
    zero = ZeroRedundancyOptimizer(
        [{"params": model[0].parameters(), "lr": 0.2}, {"params": model[2].parameters()}],
        rt.optim.SGD, lr=0.1, momentum=0.9)
    with pytest.raises(rt.Error, match=r"not been consolidated.*consolidate_state_dict\(to=0\)"):
        zero.state_dict()
    with pytest.raises(ValueError, match="to=1 is not a rank"):
        zero.consolidate_state_dict(to=1)
    for step in range(2):
        zero.zero_grad()
        _loss(model, step).backward()
        zero.step()
    zero.consolidate_state_dict(to=0)
    saved = zero.state_dict()
    plain = rt.optim.SGD([{"params": twin[0].parameters(), "lr": 0.2}, {"params": twin[2].parameters()}],
                         lr=0.1, momentum=0.9)
    plain.load_state_dict(saved)
    fresh = ZeroRedundancyOptimizer(
        [{"params": twin[0].parameters(), "lr": 0.2}, {"params": twin[2].parameters()}], rt.optim.SGD, lr=0.5)
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0]["momentum"] == 0.9 and fresh.param_groups[1]["lr"] == 0.1
    assert [(g["lr"], g["momentum"]) for g in fresh.optim.param_groups] == [(0.2, 0.9), (0.1, 0.9)]
    for p, q in zip(model.parameters(), twin.parameters()):
        buffer = zero.optim.state[p]["momentum_buffer"]
        assert rt.equal(plain.state[q]["momentum_buffer"], buffer)
        assert rt.equal(fresh.optim.state[q]["momentum_buffer"], buffer)
        assert fresh.optim.state[q]["momentum_buffer"] is not buffer
    with pytest.raises(ValueError, match="2 parameter groups"):
        ZeroRedundancyOptimizer(twin.parameters(), rt.optim.SGD, lr=0.1).load_state_dict(saved)


# ----------------------------------------------------------------------------------------------------
# Two ranks: the ranks' side (rustytorch or torch as `torch`), then the tests.
# ----------------------------------------------------------------------------------------------------
# (optimizer, its arguments, parameters_as_bucket_view, two parameter groups, the gradients averaged by
# DistributedDataParallel instead of all_reduce)
CONFIGS = [
    ("SGD", {"lr": 0.1, "momentum": 0.9}, False, False, False),
    ("Adam", {"lr": 0.01}, True, False, False),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1, "fused": True}, False, True, False),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "nesterov": True}, True, True, False),
    ("Adam", {"lr": 0.01, "amsgrad": True}, True, False, True),
]
STEPS = 3
# Parameter sizes: Linear(6, 8), Linear(8, 5), Linear(5, 4) with a frozen bias, and an unused Linear(3, 3).
PARTITION = {False: [[[0, 6, 1, 5]], [[2, 4, 3, 7]]], True: [[[0], [4]], [[1], [2, 6, 3, 5, 7]]]}
WITH_STATE = [0, 1, 2, 3, 4]  # neither the frozen bias (5) nor the unused layer (6, 7) gets a gradient


def _model(torch):
    """The Linear stack and its parameters (the unused layer's last), from numpy's fixed values."""
    nn = torch.nn
    layers = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 5), nn.Tanh(), nn.Linear(5, 4))
    unused = nn.Linear(3, 3)
    params = list(layers.parameters()) + list(unused.parameters())
    rng = np.random.RandomState(0)
    with torch.no_grad():
        for p in params:
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.5, dtype=torch.float32))
    layers[4].bias.requires_grad_(False)
    return layers, params


def _groups(params, kwargs, two_groups):
    if not two_groups:
        return params
    return [{"params": params[:2], "lr": kwargs["lr"] / 2}, {"params": params[2:]}]


def _backward(torch, model, step, rank):
    x = torch.tensor(np.random.RandomState(100 + 10 * step + rank).standard_normal((4, 6)), dtype=torch.float32)
    ((model(x) - 1) ** 2).mean().backward()


def _reference_step(torch, model, params, opt, step, world):
    """One step of the plain optimizer on the average of the world batches' gradients."""
    grads = []
    for rank in range(world):
        opt.zero_grad()
        _backward(torch, model, step, rank)
        grads.append([None if p.grad is None else p.grad.clone() for p in params])
    for i, p in enumerate(params):
        if grads[0][i] is not None:
            p.grad = sum((g[i] for g in grads[1:]), grads[0][i]) / world
    opt.step()
    opt.zero_grad()


def _zero_step(torch, dist, model, params, zero, step, ddp=None):
    _backward(torch, ddp or model, step, dist.get_rank())
    for p in params:
        if p.grad is not None and ddp is None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
    zero.step()
    zero.zero_grad()


def _numel(state):
    return sum(v.numel() for s in state.values() for v in s.values() if hasattr(v, "numel"))


def _max_diff(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a, b))


def _same_state(torch, a, b, params_a, params_b):
    """Whether two optimizers hold the same state (to 1e-6) and hyperparameters."""
    for p, q in zip(params_a, params_b):
        sa, sb = a.state.get(p, {}), b.state.get(q, {})
        if sorted(sa) != sorted(sb):
            return False
        for k in sa:
            if isinstance(sa[k], torch.Tensor):
                if not torch.allclose(sa[k].float(), sb[k].float(), rtol=0, atol=1e-6):
                    return False
            elif sa[k] != sb[k]:
                return False
    strip = lambda o: [{k: v for k, v in g.items() if k != "params"} for g in o.param_groups]  # noqa: E731
    return strip(a) == strip(b)


def scenario_zero(torch, dist, out):
    ZeRO = import_module(torch.__name__ + ".distributed.optim").ZeroRedundancyOptimizer
    rank, world = dist.get_rank(), dist.get_world_size()
    for n, (name, kwargs, bucket, two_groups, ddp) in enumerate(CONFIGS):
        cls = getattr(torch.optim, name)
        (model, params), (ref_model, ref_params) = _model(torch), _model(torch)
        wrapped = torch.nn.parallel.DistributedDataParallel(model) if ddp else None
        index = {p: i for i, p in enumerate(params)}
        zero = ZeRO(_groups(params, kwargs, two_groups), cls, parameters_as_bucket_view=bucket, **kwargs)
        ref = cls(_groups(ref_params, kwargs, two_groups), **kwargs)
        for step in range(STEPS):
            _zero_step(torch, dist, model, params, zero, step, wrapped)
            _reference_step(torch, ref_model, ref_params, ref, step, world)
        res = out[str(n)] = {
            "params": [p.tolist() for p in params], "diff": _max_diff(params, ref_params),
            "owned": [[index[p] for p in g["params"]] for g in zero.optim.param_groups],
            "with_state": sorted(index[p] for p, s in zero.optim.state.items() if s),
            "state_numel": _numel(zero.optim.state), "ref_state_numel": _numel(ref.state)}
        to = n % world
        zero.consolidate_state_dict(to=to)
        if rank == to:  # the full state, loaded into a plain optimizer
            other_model, other_params = _model(torch)
            plain = cls(_groups(other_params, kwargs, two_groups), **kwargs)
            plain.load_state_dict(zero.state_dict())
            res["consolidated"] = _same_state(torch, plain, ref, other_params, ref_params)
        # A new ZeroRedundancyOptimizer loads the plain optimizer's state and steps on with it.
        loaded_model, loaded_params = _model(torch)
        with torch.no_grad():
            for p, q in zip(loaded_params, ref_params):
                p.copy_(q)
        loaded = ZeRO(_groups(loaded_params, kwargs, two_groups), cls, parameters_as_bucket_view=bucket, **kwargs)
        loaded.load_state_dict(copy.deepcopy(ref.state_dict()))
        loaded_index = {p: i for i, p in enumerate(loaded_params)}
        res["loaded_with_state"] = sorted(loaded_index[p] for p, s in loaded.optim.state.items() if s)
        _zero_step(torch, dist, loaded_model, loaded_params, loaded, STEPS)
        _reference_step(torch, ref_model, ref_params, ref, STEPS, world)
        res["loaded_params"] = [p.tolist() for p in loaded_params]
        res["loaded_diff"] = _max_diff(loaded_params, ref_params)


def _check_zero(results):
    for n, (name, kwargs, bucket, two_groups, ddp) in enumerate(CONFIGS):
        per_rank = [r[str(n)] for r in results]
        what = f"{name} {kwargs} bucket_view={bucket} two_groups={two_groups} ddp={ddp}"
        assert per_rank[0]["params"] == per_rank[1]["params"], what  # bitwise the same on both ranks
        assert per_rank[0]["loaded_params"] == per_rank[1]["loaded_params"], what
        assert [r["owned"] for r in per_rank] == PARTITION[two_groups], what
        for r, got in enumerate(per_rank):
            assert got["diff"] <= 1e-6 and got["loaded_diff"] <= 1e-6, (what, got["diff"], got["loaded_diff"])
            owned = [i for g in got["owned"] for i in g]
            assert got["with_state"] == sorted(i for i in owned if i in WITH_STATE), what
            assert got["loaded_with_state"] == got["with_state"], what
        assert sum(r["state_numel"] for r in per_rank) == per_rank[0]["ref_state_numel"] > 0, what
        assert per_rank[n % 2]["consolidated"] is True and "consolidated" not in per_rank[1 - n % 2], what
    return results


@needs_gloo
def test_two_ranks_train_like_one_plain_optimizer(tmp_path):
    _check_zero(run_scenario(__file__, "zero", 2, tmp_path))


@needs_gloo
def test_two_ranks_as_torch(tmp_path):
    pytest.importorskip("torch")
    ours = _check_zero(run_scenario(__file__, "zero", 2, tmp_path))
    theirs = _check_zero(run_scenario(__file__, "zero", 2, tmp_path, module="torch"))
    for n in range(len(CONFIGS)):
        for rank in range(2):
            a, b = ours[rank][str(n)], theirs[rank][str(n)]
            assert a["owned"] == b["owned"] and a["with_state"] == b["with_state"]
            for key in ("params", "loaded_params"):
                for p, q in zip(a[key], b[key]):
                    np.testing.assert_allclose(p, q, rtol=0, atol=1e-5, err_msg=f"{CONFIGS[n]} {key}")


if __name__ == "__main__":
    rank_main(globals())
