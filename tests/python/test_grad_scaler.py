"""amp.GradScaler as training scripts use it: a scripted run with inf/NaN gradients at chosen steps
(the scale sequence, the growth tracker and the skipped steps against PyTorch's rule, and against
PyTorch's CPU GradScaler when it is installed), fused optimizers that unscale and skip by themselves
equal to the per-parameter path, checkpoints of model + optimizer + scaler that resume bit for bit,
the two ops underneath against numpy, disabled scalers, and PyTorch's errors for calls out of order."""
import pickle

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn, optim
from rustytorch.amp.grad_scaler import GradScaler, OptState
from conftest import to_numpy

BAD_STEPS = {1, 2, 6}  # the loss is inf (steps 1 and 6) or NaN (step 2) there
STEPS = 10


def make_model(lib, device):
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))
    rng = np.random.default_rng(0)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    return model.to(device)


def batch(lib, device, step):
    return lib.tensor(np.random.default_rng(10 + step).standard_normal((5, 3)).astype(np.float32)).to(device)


def train(lib, device, opt_kwargs, steps=STEPS, unscale=False, model=None, opt=None, scaler=None, first=0):
    """A scripted fp32 run through a GradScaler: (scale after each update, growth tracker after each
    update, whether the parameters changed at each step, final parameters)."""
    model = model or make_model(lib, device)
    opt = opt or lib.optim.AdamW(model.parameters(), **opt_kwargs)
    scaler = scaler or lib.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=3)
    scales, trackers, stepped = [], [], []
    for s in range(first, first + steps):
        before = [p.detach().clone() for p in model.parameters()]
        opt.zero_grad()
        loss = model(batch(lib, device, s)).pow(2).mean()
        if s in BAD_STEPS:
            loss = loss * (float("nan") if s == 2 else float("inf"))
        scaler.scale(loss).backward()
        if unscale:
            scaler.unscale_(opt)  # where a script clips the unscaled gradients
            lib.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        trackers.append(scaler._get_growth_tracker())
        stepped.append(not all(bool((p.detach() == b).all()) for p, b in zip(model.parameters(), before)))
    params = [p.detach().cpu().double().numpy() for p in model.parameters()]
    return scales, trackers, stepped, params


def expected_sequence(init=2.0 ** 10, growth=2.0, backoff=0.5, interval=3):
    """PyTorch's rule: back off and restart after a bad step; grow after `interval` clean steps."""
    scale, tracker, scales, trackers = init, 0, [], []
    for s in range(STEPS):
        if s in BAD_STEPS:
            scale, tracker = scale * backoff, 0
        elif tracker + 1 == interval:
            scale, tracker = scale * growth, 0
        else:
            tracker += 1
        scales.append(scale)
        trackers.append(tracker)
    return scales, trackers


@pytest.mark.parametrize("unscale", [False, True])
def test_scripted_run_follows_pytorchs_rule(device, unscale):
    scales, trackers, stepped, _ = train(rt, device, dict(lr=0.01), unscale=unscale)
    assert (scales, trackers) == expected_sequence()
    assert stepped == [s not in BAD_STEPS for s in range(STEPS)]


def test_scripted_run_matches_pytorch():
    torch = pytest.importorskip("torch")
    for kwargs in (dict(lr=0.01), dict(lr=0.01, fused=True)):
        for unscale in (False, True):
            ours = train(rt, "cpu", kwargs, unscale=unscale)
            theirs = train(torch, "cpu", kwargs, unscale=unscale)
            assert ours[:3] == theirs[:3]
            for a, b in zip(ours[3], theirs[3]):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("unscale", [False, True])
def test_fused_optimizers_unscale_and_skip_by_themselves(device, unscale):
    """grad_scale / found_inf handed to a fused optimizer give the parameters the per-parameter path
    gives (the scales are powers of two, so dividing by them is exact either way)."""
    for name, kwargs in (("AdamW", dict(lr=0.01, amsgrad=True)), ("SGD", dict(lr=0.1, momentum=0.9))):
        def run(**flags):
            model = make_model(rt, device)
            return train(rt, device, None, unscale=unscale, model=model,
                         opt=getattr(optim, name)(model.parameters(), **kwargs, **flags))
        fused, loop = run(fused=True), run(foreach=False)
        assert fused[:3] == loop[:3]
        for a, b in zip(fused[3], loop[3]):
            np.testing.assert_array_equal(a, b)


def test_a_fused_optimizer_loading_a_per_parameter_state_steps_through_the_scaler(device):
    """load_state_dict brings the saved groups' flags back (as PyTorch's does): a checkpoint of a
    per-parameter run loaded into a fused optimizer makes it per-parameter, and the scaler then
    unscales and decides on the host instead of handing it found_inf."""
    model = make_model(rt, device)
    first = optim.AdamW(model.parameters(), lr=0.01, foreach=False)
    train(rt, device, None, steps=2, model=model, opt=first)
    opt = optim.AdamW(model.parameters(), lr=0.01, fused=True)
    assert opt._step_supports_amp_scaling
    opt.load_state_dict(first.state_dict())
    assert not opt._step_supports_amp_scaling
    scales, _, stepped, _ = train(rt, device, None, steps=3, model=model, opt=opt, first=5)
    assert stepped == [True, False, True] and scales == [2.0 ** 10, 2.0 ** 9, 2.0 ** 9]


def test_fused_step_reads_nothing_back_and_leaves_no_attributes():
    model = make_model(rt, "cpu")
    opt = optim.AdamW(model.parameters(), lr=0.01, fused=True)
    scaler = GradScaler("cpu", init_scale=4.0)
    scaler.scale(model(batch(rt, "cpu", 0)).sum()).backward()
    unscaled = [p.grad.detach().clone() / 4.0 for p in model.parameters()]
    scaler.step(opt)
    assert not hasattr(opt, "grad_scale") and not hasattr(opt, "found_inf")
    assert scaler._per_optimizer_states[id(opt)]["stage"] is OptState.STEPPED
    for p, g in zip(model.parameters(), unscaled):  # the fused kernel stores the unscaled gradients
        np.testing.assert_array_equal(to_numpy(p.grad), to_numpy(g))
    assert opt.state[model[0].weight]["step"].item() == 1


def test_checkpoint_of_model_optimizer_and_scaler_resumes_bitwise(tmp_path, device):
    kwargs = dict(lr=0.01, fused=True)
    uninterrupted = train(rt, device, kwargs, steps=8)
    model = make_model(rt, device)
    opt = optim.AdamW(model.parameters(), **kwargs)
    scaler = GradScaler(device, init_scale=2.0 ** 10, growth_interval=3)
    first = train(rt, device, None, steps=5, model=model, opt=opt, scaler=scaler)
    path = tmp_path / "ckpt.safetensors"
    rt.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict(),
             "nested": {"step": 5, "note": [1, (2.5, None)]}}, path)
    ckpt = rt.load(path)
    assert ckpt["scaler"] == scaler.state_dict() and ckpt["nested"] == {"step": 5, "note": [1, (2.5, None)]}
    assert set(ckpt["scaler"]) == {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}
    resumed_model = make_model(rt, device)
    resumed_model.load_state_dict(ckpt["model"])
    resumed_opt = optim.AdamW(resumed_model.parameters(), lr=0.5, fused=True)
    resumed_opt.load_state_dict(ckpt["optimizer"])
    resumed_scaler = GradScaler(device)
    resumed_scaler.load_state_dict(ckpt["scaler"])
    rest = train(rt, device, None, steps=3, model=resumed_model, opt=resumed_opt, scaler=resumed_scaler, first=5)
    assert first[0] + rest[0] == uninterrupted[0] and first[1] + rest[1] == uninterrupted[1]
    for a, b in zip(rest[3], uninterrupted[3]):
        np.testing.assert_array_equal(a, b)


def test_unscale_op_against_numpy(device):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(n) * 64 for n in (7, 0, 70001, 3)]
    dtypes = [rt.float32, rt.float64, rt.float32, rt.bfloat16]
    grads = [rt.tensor(a, dtype=d, device=device) for a, d in zip(arrays, dtypes)]
    expected = [to_numpy(g) / 64 for g in grads]
    found_inf = rt.zeros((), device=device)
    inv_scale = rt.full((), 1 / 64, device=device)
    rt._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    assert found_inf.item() == 0.0
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(to_numpy(g), e)
    for where, bad in ((3, float("inf")), (0, float("nan")), (2, -float("inf"))):
        grads = [rt.tensor(a, dtype=d, device=device) for a, d in zip(arrays, dtypes)]
        grads[where][-1] = bad
        found_inf = rt.zeros((), device=device)
        rt._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
        assert found_inf.item() == 1.0, where
        rt._amp_foreach_non_finite_check_and_unscale_(grads[1:2], found_inf, inv_scale)
        assert found_inf.item() == 1.0  # never reset


def test_update_scale_op_against_the_rule(device):
    scale = rt.full((), 8.0, device=device)
    tracker = rt.zeros((), dtype=rt.int32, device=device)
    expected_scale, expected_tracker = 8.0, 0
    for found in (0, 0, 1, 0, 0, 0, 1, 1):
        out = rt._amp_update_scale_(scale, tracker, rt.full((), float(found), device=device), 4.0, 0.25, 2)
        if found:
            expected_scale, expected_tracker = expected_scale * 0.25, 0
        elif expected_tracker + 1 == 2:
            expected_scale, expected_tracker = expected_scale * 4.0, 0
        else:
            expected_tracker += 1
        assert (out.item(), tracker.item()) == (expected_scale, expected_tracker)
    big = rt.full((), 3e38, device=device)
    rt._amp_update_scale_(big, tracker, rt.zeros((), device=device), 2.0, 0.5, 1)
    assert big.item() == pytest.approx(3e38) and tracker.item() == 0  # no growth into inf


def test_scale_accepts_nested_outputs():
    scaler = GradScaler("cpu", init_scale=4.0)
    a, b, c = rt.ones(2), rt.full((1,), 2.0), rt.tensor(3.0)
    out = scaler.scale([a, (b, [c])])
    assert isinstance(out, list) and isinstance(out[1], tuple) and isinstance(out[1][1], list)
    assert out[0].tolist() == [4.0, 4.0] and out[1][0].tolist() == [8.0] and out[1][1][0].item() == 12.0
    assert [t.item() for t in scaler.scale(t for t in (b, c))] == [8.0, 12.0]  # an iterator stays lazy
    with pytest.raises(ValueError, match="expected a tensor or"):
        scaler.scale([a, 3])


def test_disabled_scaler_is_a_pass_through():
    model = make_model(rt, "cpu")
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", enabled=False)
    loss = model(batch(rt, "cpu", 0)).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    before = model[0].weight.detach().clone()
    scaler.unscale_(opt)
    assert scaler.step(opt) is None and not bool((model[0].weight == before).all())
    scaler.update()
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {} and not scaler.is_enabled()
    scaler.load_state_dict({})


@pytest.mark.skipif(rt.cuda.is_available(), reason="CUDA is available here")
def test_a_cuda_scaler_without_cuda_disables_itself():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = GradScaler()
    assert not scaler.is_enabled() and scaler.get_scale() == 1.0


def test_state_dict_getters_and_pickling():
    scaler = GradScaler("cpu", init_scale=128.0, growth_factor=3.0, backoff_factor=0.25, growth_interval=7)
    assert scaler.get_scale() == 128.0 and scaler._get_growth_tracker() == 0  # before the first scale()
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(), scaler.get_growth_interval()) == (3.0, 0.25, 7)
    scaler.set_growth_factor(4.0)
    scaler.set_backoff_factor(0.5)
    scaler.set_growth_interval(2)
    scaler.scale(rt.ones(1))
    scaler.update(new_scale=64.0)
    scaler.update(new_scale=rt.tensor([32.0]))
    assert scaler.state_dict() == {"scale": 32.0, "growth_factor": 4.0, "backoff_factor": 0.5, "growth_interval": 2,
                                   "_growth_tracker": 0}
    clone = pickle.loads(pickle.dumps(scaler))
    assert clone._scale is None and clone.state_dict() == scaler.state_dict()
    assert clone.scale(rt.ones(1)).item() == 32.0
    other = GradScaler("cpu")
    other.scale(rt.ones(1))
    other.load_state_dict(scaler.state_dict())
    assert other.get_scale() == 32.0 and other.get_growth_interval() == 2
    with pytest.raises(ValueError, match="the state is empty"):
        other.load_state_dict({})
    with pytest.raises(ValueError, match="new_scale must be a number or a one-element"):
        other.update(new_scale=rt.ones(2))


def test_calls_out_of_order_raise_pytorchs_errors():
    model = make_model(rt, "cpu")
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu")
    with pytest.raises(RuntimeError, match="no scale exists yet"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="no scale exists yet"):
        scaler.update()
    scaler.scale(model(batch(rt, "cpu", 0)).sum()).backward()
    with pytest.raises(RuntimeError, match="no optimizer stepped through this scaler"):
        scaler.update()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already unscaled in this iteration"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="cannot step with a closure"):
        scaler.step(opt, closure=lambda: None)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="already stepped in this iteration: call update"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="unscale_ before step"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="can be pickled only between iterations"):
        pickle.dumps(scaler)
    scaler.update()
    with pytest.raises(ValueError, match="growth_factor must be > 1.0"):
        GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(ValueError, match="backoff_factor must be < 1.0"):
        GradScaler("cpu", backoff_factor=1.0)
    # float16 gradients are refused, unless the optimizer keeps float32 master weights.
    half = nn.Parameter(rt.ones(2, dtype=rt.float16))
    half.grad = rt.ones(2, dtype=rt.float16)
    with pytest.raises(ValueError, match="float16 gradients cannot be unscaled"):
        scaler.unscale_(optim.SGD([half], lr=0.1))
    masters = optim.SGD([half], lr=0.1, master_weights=True)
    scaler.unscale_(masters)
    scaler.step(masters)
    assert masters.state[half]["master_param"].dtype == rt.float32
    with pytest.raises(rt.DTypeError, match="only float gradients can be unscaled"):
        rt._amp_foreach_non_finite_check_and_unscale_([rt.ones(2, dtype=rt.int64)], rt.zeros(()), rt.ones(()))
    with pytest.raises(rt.ValueError, match="found_inf must be a 1-element float32 tensor"):
        rt._amp_foreach_non_finite_check_and_unscale_([rt.ones(2)], rt.zeros(2), rt.ones(()))
