"""Optimizers and schedulers step by step against numpy implementations of PyTorch's update rules."""
import math

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn, optim
from conftest import to_numpy


def grads_for(step):
    return np.random.default_rng(step).standard_normal(4)


def run(opt_factory, steps=5):
    p = nn.Parameter(rt.tensor([1.0, -2.0, 3.0, 0.5], dtype=rt.float64))
    opt = opt_factory([p])
    for s in range(steps):
        opt.zero_grad()
        p.grad = rt.tensor(grads_for(s))
        opt.step()
    return to_numpy(p), opt


def reference_sgd(lr, momentum=0.0, dampening=0.0, wd=0.0, nesterov=False, steps=5):
    p, buf = np.array([1.0, -2.0, 3.0, 0.5]), None
    for s in range(steps):
        d = grads_for(s) + wd * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
    return p


def reference_adam(lr, b1, b2, eps, wd, decoupled, amsgrad, steps=5):
    p = np.array([1.0, -2.0, 3.0, 0.5])
    m, v, vmax = np.zeros(4), np.zeros(4), np.zeros(4)
    for t in range(1, steps + 1):
        g = grads_for(t - 1)
        if wd and decoupled:
            p = p * (1 - lr * wd)
        elif wd:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        denom = np.sqrt(vmax if amsgrad else v) / math.sqrt(1 - b2 ** t) + eps
        p = p - lr / (1 - b1 ** t) * m / denom
    return p


@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9), dict(momentum=0.9, dampening=0.1, wd=0.01),
                                dict(momentum=0.8, nesterov=True)])
def test_sgd_matches_reference(kw):
    ours, _ = run(lambda ps: optim.SGD(ps, lr=0.1, momentum=kw.get("momentum", 0.0),
                                       dampening=kw.get("dampening", 0.0), weight_decay=kw.get("wd", 0.0),
                                       nesterov=kw.get("nesterov", False)))
    np.testing.assert_allclose(ours, reference_sgd(0.1, **kw), rtol=1e-12)


@pytest.mark.parametrize("cls, wd, amsgrad", [(optim.Adam, 0.0, False), (optim.Adam, 0.1, False),
                                              (optim.AdamW, 0.1, False), (optim.AdamW, 0.01, True)])
def test_adam_matches_reference(cls, wd, amsgrad):
    ours, opt = run(lambda ps: cls(ps, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=wd, amsgrad=amsgrad))
    expected = reference_adam(0.01, 0.9, 0.99, 1e-8, wd, cls is optim.AdamW, amsgrad)
    np.testing.assert_allclose(ours, expected, rtol=1e-10)
    state = opt.state_dict()
    assert state["state"][0]["step"] == 5 and set(state["state"][0]) >= {"exp_avg", "exp_avg_sq"}


def test_optimizer_state_dict_resumes_exactly():
    full, _ = run(lambda ps: optim.Adam(ps, lr=0.05), steps=6)
    p = nn.Parameter(rt.tensor([1.0, -2.0, 3.0, 0.5], dtype=rt.float64))
    opt = optim.Adam([p], lr=0.05)
    for s in range(3):
        p.grad = rt.tensor(grads_for(s))
        opt.step()
    saved = opt.state_dict()
    opt2 = optim.Adam([p], lr=0.05)
    opt2.load_state_dict(saved)
    for s in range(3, 6):
        p.grad = rt.tensor(grads_for(s))
        opt2.step()
    np.testing.assert_allclose(to_numpy(p), full, rtol=1e-12)


def test_param_groups_have_their_own_hyperparameters():
    a, b = nn.Parameter(rt.ones(2)), nn.Parameter(rt.ones(2))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    a.grad, b.grad = rt.ones(2), rt.ones(2)
    opt.step()
    assert a.tolist() == pytest.approx([0.9, 0.9]) and b.tolist() == pytest.approx([0.0, 0.0])
    with pytest.raises(ValueError):
        optim.SGD([], lr=0.1)


def test_schedulers():
    def lrs(make, n=8):
        opt = optim.SGD([nn.Parameter(rt.ones(1))], lr=1.0)
        sched = make(opt)
        out = []
        for _ in range(n):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        return out

    assert lrs(lambda o: optim.lr_scheduler.StepLR(o, 3, 0.5)) == [1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25]
    assert lrs(lambda o: optim.lr_scheduler.MultiStepLR(o, [2, 5], 0.1)) == pytest.approx(
        [1, 1, 0.1, 0.1, 0.1, 0.01, 0.01, 0.01])
    cos = lrs(lambda o: optim.lr_scheduler.CosineAnnealingLR(o, T_max=4))
    assert cos[:5] == pytest.approx([1, (1 + math.cos(math.pi / 4)) / 2, 0.5, (1 + math.cos(3 * math.pi / 4)) / 2, 0])
    assert lrs(lambda o: optim.lr_scheduler.LambdaLR(o, lambda e: 0.9 ** e), 3) == pytest.approx([1, 0.9, 0.81])
    assert lrs(lambda o: optim.lr_scheduler.LinearLR(o, 0.5, 1.0, total_iters=2), 4) == pytest.approx(
        [0.5, 0.75, 1, 1])
    seq = lrs(lambda o: optim.lr_scheduler.SequentialLR(
        o, [optim.lr_scheduler.LinearLR(o, 0.5, 1.0, 2), optim.lr_scheduler.StepLR(o, 2, 0.1)], milestones=[2]), 6)
    assert seq == pytest.approx([0.5, 0.75, 1, 1, 0.1, 0.1])


def test_training_a_small_model_reduces_the_loss(device):
    rt.manual_seed(0)
    x = rt.randn(128, 2, device=device)
    y = (x[:, 0] * x[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    opt = optim.AdamW(model.parameters(), lr=0.05)
    first = None
    for _ in range(150):
        loss = nn.functional.cross_entropy(model(x), y)
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.25 * first
