"""SGD, Adam and AdamW with PyTorch's implementation flags: foreach and fused (one multi-tensor update
per parameter group) bit for bit equal to the per-parameter loop (foreach=False), capturable steps
(step counts and the learning rate in tensors) equal to plain ones, float32 master weights of 16-bit
parameters, checkpoints across capturable and plain optimizers, PyTorch's flag errors; against
PyTorch's CPU implementations when it is installed, else numpy float64 references."""
import inspect
import math

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn, optim
from conftest import to_numpy

STEPS = 4
CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.01, momentum=0.8, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.9), amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.02, weight_decay=0.1, amsgrad=True)),
]


def make_model(lib, device, dtype="float32"):
    """A small model with fixed weights (the same in rustytorch and PyTorch)."""
    model = lib.nn.Sequential(lib.nn.Linear(5, 7), lib.nn.Tanh(), lib.nn.Linear(7, 3), lib.nn.LayerNorm(3))
    rng = np.random.default_rng(0)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    return model.to(device=device, dtype=getattr(lib, dtype))


def train(lib, name, kwargs, device="cpu", steps=STEPS, dtype="float32", model=None, opt=None, skip=True):
    """The model's parameters (numpy) and the optimizer after `steps` steps on a fixed batch; with skip,
    the last layer's bias has no gradient in the first step, so step counts differ between parameters."""
    model = model or make_model(lib, device, dtype)
    opt = opt or getattr(lib.optim, name)(model.parameters(), **kwargs)
    x = lib.tensor(np.random.default_rng(1).standard_normal((8, 5)).astype(np.float32)).to(device, getattr(lib, dtype))
    for s in range(steps):
        opt.zero_grad()
        model(x * (1 + s)).pow(2).mean().backward()
        if s == 0 and skip:
            model[2].bias.grad = None
        opt.step()
    return [to_numpy(p) if lib is rt else p.detach().double().numpy() for p in model.parameters()], opt


def assert_same(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name, kwargs", CASES)
def test_foreach_and_fused_are_bitwise_the_per_parameter_loop(name, kwargs, device):
    loop, loop_opt = train(rt, name, dict(kwargs, foreach=False), device)
    for flags in (dict(foreach=True), dict(fused=True), dict()):
        ours, opt = train(rt, name, dict(kwargs, **flags), device)
        assert_same(ours, loop)
        for p, q in zip(opt.param_groups[0]["params"], loop_opt.param_groups[0]["params"]):
            assert set(opt.state[p]) == set(loop_opt.state[q])
            for key, value in loop_opt.state[q].items():
                if isinstance(value, rt.Tensor):
                    np.testing.assert_array_equal(to_numpy(opt.state[p][key]), to_numpy(value))


@pytest.mark.parametrize("name, kwargs", CASES)
def test_multi_tensor_paths_match_pytorch(name, kwargs):
    torch = pytest.importorskip("torch")
    for flags in (dict(foreach=True), dict(fused=True)):
        # (PyTorch's fused SGD cannot take parameters of which only some have momentum buffers.)
        ours, _ = train(rt, name, dict(kwargs, **flags), skip=False)
        theirs, _ = train(torch, name, dict(kwargs, **flags), skip=False)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def reference_adamw(params, grads_fn, lr, betas, eps, wd, steps):
    """numpy float64 AdamW on a list of arrays."""
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t in range(1, steps + 1):
        for i, g in enumerate(grads_fn(t - 1)):
            params[i] = params[i] * (1 - lr * wd)
            m[i] = betas[0] * m[i] + (1 - betas[0]) * g
            v[i] = betas[1] * v[i] + (1 - betas[1]) * g * g
            denom = np.sqrt(v[i]) / math.sqrt(1 - betas[1] ** t) + eps
            params[i] = params[i] - lr / (1 - betas[0] ** t) * m[i] / denom
    return params


def test_fused_adamw_follows_the_float64_rule(device):
    shapes = [(3, 4), (5,), (70001,)]  # the last is larger than a CUDA chunk
    init = [np.random.default_rng(i).standard_normal(s) for i, s in enumerate(shapes)]
    grads = [[np.random.default_rng(100 + 10 * t + i).standard_normal(s) for i, s in enumerate(shapes)]
             for t in range(3)]
    params = [nn.Parameter(rt.tensor(w, device=device)) for w in init]
    opt = optim.AdamW((p for p in params), lr=0.01, weight_decay=0.1, fused=True)
    for t in range(3):
        for p, g in zip(params, grads[t]):
            p.grad = rt.tensor(g, device=device)
        opt.step()
    expected = reference_adamw([w.copy() for w in init], lambda t: grads[t], 0.01, (0.9, 0.999), 1e-8, 0.1, 3)
    for p, e in zip(params, expected):
        np.testing.assert_allclose(to_numpy(p), e, rtol=1e-10, atol=1e-12)
    assert opt.state[params[0]]["step"].dtype == rt.float32 and opt.state[params[0]]["step"].item() == 3


def test_fused_step_counts_count_in_place_and_are_checked(device):
    p = nn.Parameter(rt.ones(5, device=device))
    opt = optim.AdamW([p], lr=0.01, fused=True)
    p.grad = rt.ones(5, device=device)
    opt.step()
    count = opt.state[p]["step"]
    opt.step()
    assert count.item() == 2 and opt.state[p]["step"].item() == 2  # the kept tensor counts on
    # A count a user puts in by hand must already be a float32 tensor on the parameter's device.
    opt.state[p]["step"] = rt.tensor(2.0, dtype=rt.float64, device=device)
    with pytest.raises(ValueError, match="step 0 must be a 1-element float32 tensor"):
        opt.step()
    # Through load_state_dict any form converts.
    sd = opt.state_dict()
    sd["state"][0]["step"] = 7
    opt.load_state_dict(sd)
    opt.step()
    assert opt.state[p]["step"].dtype == rt.float32 and opt.state[p]["step"].item() == 8


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_capturable_with_a_tensor_lr_equals_the_plain_run(name, device):
    lr = rt.tensor(0.01, device=device)
    plain, _ = train(rt, name, dict(lr=lr.item(), amsgrad=True), device)
    for flags in (dict(foreach=True), dict(foreach=False), dict(fused=True)):
        ours, opt = train(rt, name, dict(lr=lr, amsgrad=True, capturable=True, **flags), device)
        assert_same(ours, plain)
        step = opt.state[opt.param_groups[0]["params"][0]]["step"]
        assert isinstance(step, rt.Tensor) and step.dtype == rt.float32 and step.device.type == device
        assert step.item() == STEPS
    # The learning rate changes in place (as a schedule does for a captured step): the next step uses it.
    p = nn.Parameter(rt.ones(3, device=device))
    opt = optim.Adam([p], lr=lr.clone(), capturable=True)
    p.grad = rt.ones(3, device=device)
    opt.step()
    opt.param_groups[0]["lr"].fill_(0.5)
    opt.step()
    q = nn.Parameter(rt.ones(3, device=device))
    ref = optim.Adam([q], lr=lr.item())
    q.grad = rt.ones(3, device=device)
    ref.step()
    ref.param_groups[0]["lr"] = 0.5
    ref.step()
    np.testing.assert_array_equal(to_numpy(p), to_numpy(q))


@pytest.mark.parametrize("name, kwargs", [("AdamW", dict(lr=0.01, amsgrad=True)),
                                          ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True))])
def test_master_weights_keep_float32_copies_of_bfloat16_parameters(name, kwargs, device):
    low, low_opt = train(rt, name, dict(kwargs, master_weights=True, fused=True), device, dtype="bfloat16")
    params = low_opt.param_groups[0]["params"]
    assert all(p.dtype == rt.bfloat16 for p in params)
    masters = [low_opt.state[p]["master_param"] for p in params]
    assert all(m.dtype == rt.float32 for m in masters)
    for p, m in zip(params, masters):  # the parameter is its master rounded
        np.testing.assert_array_equal(to_numpy(p), to_numpy(m.to(rt.bfloat16)))
    state_keys = {k for k, v in low_opt.state[params[0]].items() if isinstance(v, rt.Tensor) and k != "step"}
    assert all(low_opt.state[params[0]][k].dtype == rt.float32 for k in state_keys)
    # The masters move away from the bfloat16 grid, and follow the float32 run closely.
    assert any(not np.array_equal(to_numpy(m), to_numpy(m.to(rt.bfloat16))) for m in masters)
    plain, _ = train(rt, name, kwargs, device)
    for m, f in zip(masters, plain):
        np.testing.assert_allclose(to_numpy(m), f, rtol=0.05, atol=0.05)
    # A checkpoint keeps the masters in float32, and a reloaded optimizer continues bit for bit.
    saved = low_opt.state_dict()
    assert saved["state"][0]["master_param"].dtype == rt.float32
    model = make_model(rt, device, "bfloat16")
    with rt.no_grad():
        for q, p in zip(model.parameters(), params):
            q.copy_(p)
    opt = getattr(optim, name)(model.parameters(), **dict(kwargs, master_weights=True, fused=True))
    opt.load_state_dict(saved)
    assert opt.state[model[0].weight]["master_param"].dtype == rt.float32
    for q, p in zip(model.parameters(), params):
        q.grad = p.grad = rt.ones_like(p)
    opt.step()
    low_opt.step()
    assert_same([to_numpy(q) for q in model.parameters()], [to_numpy(p) for p in params])
    for q, p in zip(model.parameters(), params):
        np.testing.assert_array_equal(to_numpy(opt.state[q]["master_param"]),
                                      to_numpy(low_opt.state[p]["master_param"]))


def test_checkpoints_move_between_capturable_and_plain_optimizers():
    """As in PyTorch, the loaded hyperparameters (capturable included) replace the optimizer's, and
    each step count takes the form they ask for; the run continues as if uninterrupted."""
    for saved_flags, loading_flags in ((dict(), dict(capturable=True)), (dict(capturable=True), dict()),
                                       (dict(fused=True), dict())):
        uninterrupted, _ = train(rt, "AdamW", dict(lr=0.01, **saved_flags), steps=STEPS)
        model = make_model(rt, "cpu")
        opt = optim.AdamW(model.parameters(), lr=0.01, **saved_flags)
        x = rt.tensor(np.random.default_rng(1).standard_normal((8, 5)).astype(np.float32))
        for s in range(STEPS):
            if s == 2:
                saved = opt.state_dict()
                opt = optim.AdamW(model.parameters(), lr=0.5, **loading_flags)
                opt.load_state_dict(saved)
                group = opt.param_groups[0]
                assert group["lr"] == 0.01 and group["capturable"] == saved_flags.get("capturable", False)
                step = opt.state[model[0].weight]["step"]
                assert isinstance(step, rt.Tensor) == bool(saved_flags), (saved_flags, step)
            opt.zero_grad()
            model(x * (1 + s)).pow(2).mean().backward()
            if s == 0:
                model[2].bias.grad = None
            opt.step()
        assert_same([to_numpy(p) for p in model.parameters()], uninterrupted)


def test_state_dict_layout_matches_pytorch_for_fused_adamw():
    torch = pytest.importorskip("torch")

    def layout(lib):
        _, opt = train(lib, "AdamW", dict(lr=0.01, fused=True), steps=2)
        sd = opt.state_dict()
        groups = [{k: v for k, v in g.items() if k != "master_weights"} for g in sd["param_groups"]]
        steps = {i: (sorted(s), s["step"].dtype == lib.float32, float(s["step"])) for i, s in sd["state"].items()}
        return groups, steps

    ours, theirs = layout(rt), layout(torch)
    assert ours[0] == theirs[0] and ours[1] == theirs[1]


def test_signatures_keep_pytorchs_arguments():
    for cls in (optim.Adam, optim.AdamW, optim.SGD):
        params = inspect.signature(cls).parameters
        assert {"foreach", "fused", "maximize", "differentiable"} <= set(params)
        assert all(params[k].kind is inspect.Parameter.KEYWORD_ONLY for k in ("foreach", "fused", "maximize"))
    assert "capturable" in inspect.signature(optim.AdamW).parameters
    assert inspect.signature(optim.AdamW).parameters["weight_decay"].default == 1e-2
    # The positional order stays PyTorch's.
    p = nn.Parameter(rt.ones(2, dtype=rt.float64))
    opt = optim.Adam([p], 0.01, (0.8, 0.9), 1e-6, 0.1, True)
    assert opt.param_groups[0]["betas"] == (0.8, 0.9) and opt.param_groups[0]["amsgrad"]
    sgd = optim.SGD([p], 0.1, 0.9, 0.0, 0.01, True)
    assert sgd.param_groups[0]["nesterov"] and sgd.param_groups[0]["weight_decay"] == 0.01
    assert optim.AdamW([p], fused=True)._step_supports_amp_scaling
    assert not getattr(optim.AdamW([p]), "_step_supports_amp_scaling", False)


def test_flag_errors():
    p = nn.Parameter(rt.ones(2))
    for cls in (optim.SGD, optim.Adam, optim.AdamW):
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
            cls([p], lr=0.1, foreach=True, fused=True)
        with pytest.raises(rt.ValueError, match="differentiable=True is not supported"):
            cls([p], lr=0.1, differentiable=True)
    with pytest.raises(rt.DTypeError, match=r"`fused=True` requires all the params to be floating point.*int64"):
        optim.AdamW([rt.zeros(3, dtype=rt.int64)], fused=True)
    with pytest.raises(rt.DTypeError, match="fused=True"):
        optim.SGD([{"params": [p]}, {"params": [rt.zeros(2, dtype=rt.int32)], "fused": True}], lr=0.1)
    with pytest.raises(rt.ValueError, match="lr as a Tensor is not supported for capturable=False and foreach=True"):
        optim.Adam([p], lr=rt.tensor(0.1), foreach=True)
    with pytest.raises(rt.ValueError, match="Tensor lr must be 1-element"):
        optim.SGD([p], lr=rt.tensor([0.1, 0.2]))
    # found_inf needs step counts on the device (a fused or capturable optimizer).
    opt = optim.Adam([p], lr=0.1)
    opt.found_inf = rt.zeros(())
    p.grad = rt.ones(2)
    with pytest.raises(rt.ValueError, match="found_inf needs the step counts in tensors"):
        opt.step()


def test_schedules_change_a_tensor_lr_in_place():
    p = nn.Parameter(rt.ones(2))
    lr = rt.tensor(0.1)
    opt = optim.AdamW([p], lr=lr, capturable=True)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        p.grad = rt.ones(2)
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] is lr and lr.item() == pytest.approx(0.0125)
    assert opt.param_groups[0]["initial_lr"].item() == pytest.approx(0.1)
