"""RMSprop, Adagrad, the Optimizer base as scripts use it (param_groups, add_param_group, opt.state[p],
state_dict / load_state_dict, zero_grad, closures) and every lr_scheduler over 50 steps: against
numpy float64 transcriptions of PyTorch's documented rules, and against PyTorch when it is installed."""
import bisect
import math

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn, optim
from rustytorch.optim import lr_scheduler
from conftest import to_numpy

STEPS = 20
W0 = np.random.default_rng(0).standard_normal((3, 4))
GRADS = [np.random.default_rng(s + 1).standard_normal((3, 4)) for s in range(STEPS)]


def run_optimizer(lib, name, kwargs, dtype="float64", device="cpu"):
    """W0 after STEPS steps of lib.optim.<name>(**kwargs) with the gradients GRADS."""
    dt = getattr(lib, dtype)
    p = lib.nn.Parameter(lib.tensor(W0, dtype=dt, device=device))
    opt = getattr(lib.optim, name)([p], **kwargs)
    for g in GRADS:
        opt.zero_grad()
        p.grad = lib.tensor(g, dtype=dt, device=device)
        opt.step()
    return p.detach().cpu().double().numpy()


def reference_rmsprop(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                      maximize=False):
    p, sq, avg_g, buf = W0.copy(), np.zeros_like(W0), np.zeros_like(W0), np.zeros_like(W0)
    for g in GRADS:
        g = -g if maximize else g
        g = g + weight_decay * p
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            avg_g = avg_g + (1 - alpha) * (g - avg_g)
            avg = np.sqrt(sq - avg_g * avg_g) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum > 0:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    return p


def reference_adagrad(lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                      maximize=False):
    p, total = W0.copy(), np.full_like(W0, initial_accumulator_value)
    for step, g in enumerate(GRADS, 1):
        g = -g if maximize else g
        g = g + weight_decay * p
        total = total + g * g
        p = p - lr / (1 + (step - 1) * lr_decay) * g / (np.sqrt(total) + eps)
    return p


OPTIMIZER_CASES = [
    ("RMSprop", reference_rmsprop, dict()),
    ("RMSprop", reference_rmsprop, dict(lr=0.05, momentum=0.9)),
    ("RMSprop", reference_rmsprop, dict(centered=True, alpha=0.9)),
    ("RMSprop", reference_rmsprop, dict(centered=True, momentum=0.5, weight_decay=0.1, maximize=True, eps=1e-3)),
    ("Adagrad", reference_adagrad, dict()),
    ("Adagrad", reference_adagrad, dict(lr=0.1, lr_decay=0.05)),
    ("Adagrad", reference_adagrad, dict(weight_decay=0.1, initial_accumulator_value=0.5, maximize=True, eps=1e-3)),
]


@pytest.mark.parametrize("name, reference, kwargs", OPTIMIZER_CASES)
def test_optimizer_follows_the_documented_rule(name, reference, kwargs, device):
    np.testing.assert_allclose(run_optimizer(rt, name, kwargs, device=device), reference(**kwargs), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(run_optimizer(rt, name, kwargs, "float32", device), reference(**kwargs), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("name, reference, kwargs", OPTIMIZER_CASES)
def test_optimizer_matches_pytorch(name, reference, kwargs):
    torch = pytest.importorskip("torch")
    for dtype, tol in (("float64", 1e-12), ("float32", 1e-6)):
        np.testing.assert_allclose(run_optimizer(rt, name, kwargs, dtype), run_optimizer(torch, name, kwargs, dtype),
                                   rtol=tol, atol=tol)


def test_state_names_and_layout_follow_pytorch():
    p, q = nn.Parameter(rt.ones(2)), nn.Parameter(rt.ones(3))
    opt = optim.RMSprop([{"params": [p]}, {"params": q, "lr": 0.5}], momentum=0.9, centered=True)
    p.grad, q.grad = rt.ones(2), rt.ones(3)
    opt.step()
    assert set(opt.state[p]) == {"step", "square_avg", "momentum_buffer", "grad_avg"} and opt.state[p]["step"] == 1
    assert p in opt.state and opt.state[q]["square_avg"].shape == (3,)
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [0, 1] and [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["lr"] == 0.5 and sd["param_groups"][0]["alpha"] == 0.99
    ada = optim.Adagrad([p], initial_accumulator_value=0.25)
    assert ada.state[p]["sum"].tolist() == [0.25, 0.25] and ada.state_dict()["state"][0]["step"] == 0
    assert optim.RMSprop([p]).state_dict()["state"] == {}
    assert repr(optim.RMSprop([p])).startswith("RMSprop (\nParameter Group 0\n    alpha: 0.99\n    centered: False")


@pytest.mark.parametrize("name, kwargs", [("RMSprop", dict(momentum=0.9, centered=True)), ("Adagrad", dict())])
def test_state_dict_layout_matches_pytorch(name, kwargs):
    torch = pytest.importorskip("torch")

    def layout(lib):
        p, q = lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.ones(3))
        opt = getattr(lib.optim, name)([{"params": [p]}, {"params": [q], "lr": 0.5}], **kwargs)
        p.grad = lib.ones(2)
        opt.step()
        sd = opt.state_dict()
        torch_only = {"foreach", "capturable", "differentiable", "fused"}
        groups = [{k: v for k, v in g.items() if k not in torch_only} for g in sd["param_groups"]]
        return groups, {i: (sorted(s), float(s["step"])) for i, s in sd["state"].items()}

    assert layout(rt) == layout(torch)


def test_param_group_lr_set_by_hand_is_used():
    """A hand-written cosine schedule, as scripts write it."""
    p = nn.Parameter(rt.zeros(1, dtype=rt.float64))
    opt = optim.SGD([p], lr=1.0)
    expected = 0.0
    for step in range(5):
        lr = 0.1 * (1 + math.cos(math.pi * step / 5)) / 2
        for g in opt.param_groups:
            g["lr"] = lr
        p.grad = rt.ones(1, dtype=rt.float64)
        opt.step()
        expected -= lr
    assert p.item() == pytest.approx(expected, abs=1e-15)


def test_add_param_group():
    a, b = nn.Parameter(rt.ones(2)), nn.Parameter(rt.ones(2))
    opt = optim.Adagrad([a], lr=0.1)
    group = {"params": b, "lr": 1.0}
    opt.add_param_group(group)
    assert opt.param_groups[1] is group and group["params"] == [b] and group["lr_decay"] == 0.0
    b.grad = rt.ones(2)
    opt.step()
    assert opt.state[b]["step"] == 1 and b.tolist() == pytest.approx([0.0, 0.0], abs=1e-6)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(TypeError, match="dict"):
        opt.add_param_group([a])
    frozen = nn.Parameter(rt.ones(1), requires_grad=False)
    optim.SGD([frozen, a], lr=0.1).step()  # PyTorch accepts parameters that need no gradient
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([a * 2], lr=0.1)
    with pytest.raises(TypeError, match="single tensor"):
        optim.SGD(a, lr=0.1)


def test_load_state_dict_copies_and_resumes_exactly():
    def make():
        p = nn.Parameter(rt.tensor(W0, dtype=rt.float64))
        return p, optim.RMSprop([p], lr=0.01, momentum=0.5, centered=True)

    p, opt = make()
    for g in GRADS[:10]:
        p.grad = rt.tensor(g)
        opt.step()
    saved = opt.state_dict()
    p2, opt2 = make()
    with rt.no_grad():
        p2.copy_(p)
    opt2.load_state_dict(saved)
    saved["state"][0]["square_avg"].fill_(1e6)  # the loaded optimizer shares nothing with the dict
    saved["param_groups"][0]["lr"] = 123.0
    assert opt2.param_groups[0]["params"] == [p2] and opt2.param_groups[0]["lr"] == 0.01
    for g in GRADS[10:]:
        p2.grad = rt.tensor(g)
        opt2.step()
    np.testing.assert_allclose(to_numpy(p2), reference_rmsprop(lr=0.01, momentum=0.5, centered=True), rtol=1e-12)
    p32 = nn.Parameter(rt.zeros(3, 4))
    opt32 = optim.RMSprop([p32], lr=0.01, momentum=0.5, centered=True)
    opt32.load_state_dict(opt2.state_dict())
    assert opt32.state[p32]["grad_avg"].dtype == rt.float32 and opt32.state[p32]["step"] == STEPS
    with pytest.raises(ValueError, match="parameter groups"):
        opt32.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="holds 2 parameters"):
        opt32.load_state_dict({"state": {}, "param_groups": [dict(saved["param_groups"][0], params=[0, 1])]})


def test_zero_grad_and_closure():
    p = nn.Parameter(rt.tensor([1.0, 2.0]))
    opt = optim.Adagrad([p], lr=0.1)
    p.grad = rt.tensor([float("inf"), 3.0])
    grad = p.grad
    opt.zero_grad(set_to_none=False)
    assert grad.tolist() == [0.0, 0.0] and p.grad.tolist() == [0.0, 0.0]  # zeroed in place
    opt.zero_grad()
    assert p.grad is None

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == pytest.approx(5.0) and p.tolist() == pytest.approx([0.9, 1.9], abs=1e-6)


def test_invalid_hyperparameters():
    p = nn.Parameter(rt.ones(1))
    for make in (lambda: optim.RMSprop([p], lr=-1), lambda: optim.RMSprop([p], alpha=-0.1),
                 lambda: optim.Adagrad([p], lr_decay=-1), lambda: optim.Adagrad([p], eps=-1)):
        with pytest.raises(ValueError, match="invalid"):
            make()


# ---- schedulers -------------------------------------------------------------------------------------

N = 50
BASES = (0.1, 0.05)


def trace(lib, make, optimizer="SGD", metrics=None):
    """[lr of each group, momentum (or beta1) of group 0] after each of N steps."""
    ps = [lib.nn.Parameter(lib.zeros(1)), lib.nn.Parameter(lib.zeros(1))]
    kwargs = dict(lr=BASES[0], momentum=0.9) if optimizer == "SGD" else dict(lr=BASES[0])
    opt = getattr(lib.optim, optimizer)([{"params": [ps[0]]}, {"params": [ps[1]], "lr": BASES[1]}], **kwargs)
    scheds = make(lib.optim.lr_scheduler, opt)  # one scheduler, or several that the script steps in turn
    scheds = scheds if isinstance(scheds, tuple) else (scheds,)
    rows = []
    for i in range(N):
        opt.step()
        for sched in scheds:
            sched.step(metrics[i]) if metrics is not None else sched.step()
        g = opt.param_groups[0]
        rows.append(list(scheds[-1].get_last_lr()) + [g["momentum"] if "momentum" in g else g["betas"][0]])
    return np.array(rows)


def cosine(base, e, T, eta_min=0.0):
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * e / T)) / 2


def linear(base, e, start, end, total):
    return base * (start + (end - start) * min(e, total) / total)


def warm_restarts(base, e, T_0, T_mult, eta_min):
    T_i = T_0
    while e >= T_i:
        e, T_i = e - T_i, T_i * T_mult
    return cosine(base, e, T_i, eta_min)


def phased(step, phases, cos):
    """OneCycleLR's value at step: phases are (end step, start value, end value), annealed in turn."""
    start = 0.0
    for i, (end, a, b) in enumerate(phases):
        if step <= end or i == len(phases) - 1:
            t = (step - start) / (end - start)
            return b + (a - b) / 2 * (math.cos(math.pi * t) + 1) if cos else a + (b - a) * t
        start = end


def one_cycle_lr(base, step):
    top = {BASES[0]: 1.0, BASES[1]: 0.5}[base]
    return phased(step, [(0.3 * N - 1, top / 25, top), (N - 1, top, top / 25 / 1e4)], True)


def three_phase_lr(base, step):
    return phased(step, [(0.25 * N - 1, 0.1, 1.0), (0.5 * N - 2, 1.0, 0.1), (N - 1, 0.1, 0.001)], False)


def sequential(base, e):
    if e < 5:
        return linear(base, e, 0.1, 1.0, 5)
    if e < 25:
        return cosine(base, e - 5, 20)
    return base * 0.9 ** (e - 25)


# name -> (scheduler factory, the documented lr of a group with initial lr `base` at epoch e)
SCHEDULES = {
    "StepLR": (lambda L, o: L.StepLR(o, 7, 0.5), lambda b, e: b * 0.5 ** (e // 7)),
    "MultiStepLR": (lambda L, o: L.MultiStepLR(o, [3, 10, 10, 30], 0.3),
                    lambda b, e: b * 0.3 ** bisect.bisect_right([3, 10, 10, 30], e)),
    "ExponentialLR": (lambda L, o: L.ExponentialLR(o, 0.93), lambda b, e: b * 0.93 ** e),
    "CosineAnnealingLR": (lambda L, o: L.CosineAnnealingLR(o, 12, eta_min=0.001),
                          lambda b, e: cosine(b, e, 12, 0.001)),
    "LambdaLR": (lambda L, o: L.LambdaLR(o, lambda e: 1 / (1 + e)), lambda b, e: b / (1 + e)),
    "MultiplicativeLR": (lambda L, o: L.MultiplicativeLR(o, lambda e: 0.97), lambda b, e: b * 0.97 ** e),
    "LinearLR": (lambda L, o: L.LinearLR(o, 0.2, 0.9, total_iters=17), lambda b, e: linear(b, e, 0.2, 0.9, 17)),
    "ConstantLR": (lambda L, o: L.ConstantLR(o, 0.4, 9), lambda b, e: b * (0.4 if e < 9 else 1.0)),
    "PolynomialLR": (lambda L, o: L.PolynomialLR(o, 30, 2.0), lambda b, e: b * (1 - min(e, 30) / 30) ** 2),
    "CosineAnnealingWarmRestarts": (lambda L, o: L.CosineAnnealingWarmRestarts(o, 5, 2, 0.002),
                                    lambda b, e: warm_restarts(b, e, 5, 2, 0.002)),
    "SequentialLR": (lambda L, o: L.SequentialLR(o, [L.LinearLR(o, 0.1, 1.0, 5), L.CosineAnnealingLR(o, 20),
                                                     L.ExponentialLR(o, 0.9)], milestones=[5, 25]), sequential),
    "ChainedScheduler": (lambda L, o: L.ChainedScheduler([L.LinearLR(o, 0.1, 1.0, 5), L.ExponentialLR(o, 0.95)]),
                         lambda b, e: linear(b, e, 0.1, 1.0, 5) * 0.95 ** e),
    "two schedulers stacked": (lambda L, o: (L.StepLR(o, 4, 0.5), L.ExponentialLR(o, 0.9)),
                               lambda b, e: b * 0.5 ** (e // 4) * 0.9 ** e),
    "OneCycleLR": (lambda L, o: L.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=N), one_cycle_lr),
    "OneCycleLR linear three-phase": (
        lambda L, o: L.OneCycleLR(o, max_lr=1.0, epochs=5, steps_per_epoch=10, anneal_strategy="linear",
                                  three_phase=True, pct_start=0.25, div_factor=10.0, final_div_factor=100.0),
        three_phase_lr),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_scheduler_follows_the_documented_rule(name):
    make, rule = SCHEDULES[name]
    lrs = trace(rt, make)[:, :2]
    expected = np.array([[rule(b, e) for b in BASES] for e in range(1, N + 1)])
    np.testing.assert_allclose(lrs, expected, rtol=1e-12, atol=1e-14)


def test_one_cycle_cycles_momentum_inversely():
    sgd = trace(rt, SCHEDULES["OneCycleLR"][0])
    expected = [phased(e, [(0.3 * N - 1, 0.95, 0.85), (N - 1, 0.85, 0.95)], True) for e in range(1, N + 1)]
    np.testing.assert_allclose(sgd[:, 2], expected, rtol=1e-12)
    adam = trace(rt, lambda L, o: L.OneCycleLR(o, max_lr=1.0, total_steps=N, base_momentum=0.8, max_momentum=0.9,
                                               cycle_momentum=True), optimizer="Adam")
    expected = [phased(e, [(0.3 * N - 1, 0.9, 0.8), (N - 1, 0.8, 0.9)], True) for e in range(1, N + 1)]
    np.testing.assert_allclose(adam[:, 2], expected, rtol=1e-12)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_scheduler_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    make = SCHEDULES[name][0]
    np.testing.assert_allclose(trace(rt, make), trace(torch, make), rtol=1e-12, atol=1e-15)


PLATEAU = list(np.cumsum(np.random.default_rng(3).standard_normal(N)) + 10)
PLATEAU_CASES = [dict(), dict(mode="max", factor=0.5, patience=2, threshold=0.01, threshold_mode="abs", cooldown=3,
                              min_lr=[0.01, 0.02]), dict(patience=0, cooldown=1, eps=0.02, min_lr=0.003)]


def reference_plateau(metrics, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel", cooldown=0,
                      min_lr=0.0, eps=1e-8):
    lrs, best, bad, cool = list(BASES), math.inf if mode == "min" else -math.inf, 0, 0
    mins = min_lr if isinstance(min_lr, list) else [min_lr] * 2
    out = []
    for m in metrics:
        if mode == "min":
            better = m < (best * (1 - threshold) if threshold_mode == "rel" else best - threshold)
        else:
            better = m > (best * (1 + threshold) if threshold_mode == "rel" else best + threshold)
        best, bad = (m, 0) if better else (best, bad + 1)
        if cool > 0:
            cool, bad = cool - 1, 0
        if bad > patience:
            lrs = [lr if lr - max(lr * factor, lo) <= eps else max(lr * factor, lo) for lr, lo in zip(lrs, mins)]
            cool, bad = cooldown, 0
        out.append(list(lrs))
    return np.array(out)


@pytest.mark.parametrize("kwargs", PLATEAU_CASES)
def test_reduce_lr_on_plateau(kwargs):
    ours = trace(rt, lambda L, o: L.ReduceLROnPlateau(o, **kwargs), metrics=PLATEAU)
    np.testing.assert_allclose(ours[:, :2], reference_plateau(PLATEAU, **kwargs), rtol=1e-15)
    assert len(set(ours[:, 0])) > 1


@pytest.mark.parametrize("kwargs", PLATEAU_CASES)
def test_reduce_lr_on_plateau_matches_pytorch(kwargs):
    torch = pytest.importorskip("torch")
    ours = trace(rt, lambda L, o: L.ReduceLROnPlateau(o, **kwargs), metrics=[rt.tensor(m) for m in PLATEAU])
    theirs = trace(torch, lambda L, o: L.ReduceLROnPlateau(o, **kwargs), metrics=[torch.tensor(m) for m in PLATEAU])
    np.testing.assert_allclose(ours, theirs, rtol=1e-15)


@pytest.mark.parametrize("name", ["CosineAnnealingLR", "SequentialLR", "OneCycleLR", "LambdaLR"])
def test_scheduler_state_dict_resumes(name):
    make = SCHEDULES[name][0]
    full = trace(rt, make)[:, :2]
    p = nn.Parameter(rt.zeros(1))
    opt = optim.SGD([{"params": [p]}, {"params": [nn.Parameter(rt.zeros(1))], "lr": BASES[1]}], lr=BASES[0],
                    momentum=0.9)
    sched = make(lr_scheduler, opt)
    for _ in range(20):
        opt.step()
        sched.step()
    saved_opt, saved_sched = opt.state_dict(), sched.state_dict()
    assert "optimizer" not in saved_sched
    opt2 = optim.SGD([{"params": [p]}, {"params": [nn.Parameter(rt.zeros(1))], "lr": BASES[1]}], lr=BASES[0],
                     momentum=0.9)
    sched2 = make(lr_scheduler, opt2)
    opt2.load_state_dict(saved_opt)
    sched2.load_state_dict(saved_sched)
    assert sched2.get_last_lr() == list(full[19])
    rest = []
    for _ in range(20, N):
        opt2.step()
        sched2.step()
        rest.append(sched2.get_last_lr())
    np.testing.assert_allclose(np.array(rest), full[20:], rtol=1e-12)


def test_scheduler_errors():
    opt = optim.SGD([nn.Parameter(rt.zeros(1))], lr=0.1)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=3)
    for _ in range(2):
        sched.step()
    with pytest.raises(ValueError, match="total_steps is 3"):
        sched.step()
        sched.step()
    for make, match in [(lambda: lr_scheduler.OneCycleLR(opt, max_lr=1.0), "total_steps"),
                        (lambda: lr_scheduler.OneCycleLR(opt, 1.0, 10, anneal_strategy="exp"), "anneal_strategy"),
                        (lambda: lr_scheduler.OneCycleLR(optim.Adagrad(opt.param_groups[0]["params"]), 1.0, 10),
                         "momentum or betas"),
                        (lambda: lr_scheduler.OneCycleLR(opt, [1.0, 2.0], 10), "one per parameter group"),
                        (lambda: lr_scheduler.ReduceLROnPlateau(opt, mode="mean"), "mode"),
                        (lambda: lr_scheduler.ReduceLROnPlateau(opt, factor=1.5), "factor"),
                        (lambda: lr_scheduler.SequentialLR(opt, [lr_scheduler.StepLR(opt, 2)], [3]), "milestone"),
                        (lambda: lr_scheduler.LinearLR(opt, start_factor=0), "start_factor")]:
        with pytest.raises(ValueError, match=match):
            make()
    with pytest.raises(TypeError, match="not an Optimizer"):
        lr_scheduler.StepLR(object(), 3)
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(optim.SGD([nn.Parameter(rt.zeros(1))], lr=0.1), 3, last_epoch=4)


def test_custom_scheduler_subclass():
    class Halving(lr_scheduler.LRScheduler):
        def get_lr(self):
            return [base * 0.5 ** self.last_epoch for base in self.base_lrs]

    opt = optim.SGD([nn.Parameter(rt.zeros(1))], lr=1.0)
    sched = Halving(opt)
    lrs = []
    for _ in range(3):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs == [0.5, 0.25, 0.125] and issubclass(lr_scheduler._LRScheduler, lr_scheduler.LRScheduler)
