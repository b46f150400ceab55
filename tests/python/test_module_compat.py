"""nn.Module as PyTorch scripts use it: tied weights through to()/half()/cuda(), optimizers built
before a conversion, buffers re-assigned as attributes, clipping over a generator, load_state_dict's
checks and result, traversal options, and forward/backward hooks. Compared with PyTorch where it is
installed, with numpy float64 otherwise."""
import copy
import math

import numpy as np
import pytest

import rustytorch as rt
import rustytorch.nn as nn
from conftest import assert_close, to_numpy


class TiedLM(nn.Module):
    """The GPT-2 pattern: the embedding and the classifier share one weight."""

    def __init__(self, vocab=11, dim=6):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        self.register_buffer("mask", rt.ones(4))

    def forward(self, idx):
        return self.lm_head(self.proj(self.wte(idx)).tanh())


@pytest.mark.parametrize("convert", ["double", "half", "bfloat16", "float", "to_dtype", "to_kw", "to_device"])
def test_conversions_keep_parameters_and_ties(convert, device):
    model = TiedLM()
    before = list(model.parameters())
    opt = rt.optim.SGD(model.parameters(), lr=0.1)
    if convert == "to_dtype":
        out = model.to(rt.float64)
    elif convert == "to_kw":
        out = model.to(device=device, dtype=rt.float64)
    elif convert == "to_device":
        out = model.to(device)
    else:
        out = getattr(model, convert)()
    assert out is model
    after = list(model.parameters())
    assert len(after) == len(before) == 3  # the tied weight is one parameter
    assert all(a is b for a, b in zip(before, after))
    assert model.wte.weight is model.lm_head.weight
    assert all(p is q for p, q in zip(opt.param_groups[0]["params"], after))
    assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf for p in after)
    assert len(model.state_dict()) == 5  # the tied weight under both names, and the buffer
    assert model.state_dict()["wte.weight"].data_ptr() == model.state_dict()["lm_head.weight"].data_ptr()


def test_optimizer_built_before_to_trains_the_converted_model(device):
    rt.manual_seed(0)
    model = TiedLM()
    opt = rt.optim.AdamW(model.parameters(), lr=1e-2)
    model.to(device).double()
    idx = rt.tensor([[1, 2, 3], [4, 5, 6]], device=device)
    w0 = to_numpy(model.lm_head.weight)
    loss = model(idx).square().mean()
    loss.backward()
    opt.step()
    assert str(model.lm_head.weight.device).startswith(device)
    assert model.lm_head.weight.dtype == rt.float64
    assert not np.allclose(to_numpy(model.lm_head.weight), w0)  # the optimizer updated the live tensor


def test_gradient_moves_with_the_parameter():
    lin = nn.Linear(3, 2)
    lin(rt.randn(4, 3)).sum().backward()
    g = to_numpy(lin.weight.grad)
    lin.double()
    assert lin.weight.grad.dtype == rt.float64
    assert_close(lin.weight.grad, g)


def test_integer_buffers_keep_their_dtype_and_int_dtypes_are_refused():
    bn = nn.BatchNorm1d(3)
    bn.half()
    assert bn.num_batches_tracked.dtype == rt.int64 and bn.running_mean.dtype == rt.float16
    with pytest.raises(TypeError, match="floating point"):
        bn.to(rt.int64)


def test_reassigned_buffer_stays_registered():
    class Stats(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("running", rt.zeros(3))
            self.register_buffer("scratch", rt.zeros(2), persistent=False)

    m = Stats()
    m.running = rt.full((3,), 2.0)
    m.scratch = rt.ones(2)
    assert [n for n, _ in m.named_buffers()] == ["running", "scratch"]
    assert list(m.state_dict()) == ["running"]
    assert_close(m.state_dict()["running"], [2.0, 2.0, 2.0])
    m.double()
    assert m.running.dtype == rt.float64
    with pytest.raises(TypeError, match="buffer 'running'"):
        m.running = 3.0
    m.running = None
    assert "running" not in m.state_dict()


def test_assigning_a_plain_tensor_to_a_parameter_raises():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="parameter 'weight'"):
        lin.weight = rt.zeros(2, 2)
    lin.bias = None
    assert [n for n, _ in lin.named_parameters()] == ["weight"]


def _grads(model):
    return [to_numpy(p.grad) for p in model.parameters()]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm_takes_a_generator(norm_type, device):
    rt.manual_seed(1)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).to(device).double()
    (model(rt.randn(9, 5, device=device, dtype=rt.float64)) ** 2).sum().backward()
    before = _grads(model)
    flat = np.concatenate([g.ravel() for g in before])
    expected_total = np.linalg.norm(flat, ord=norm_type)
    max_norm = expected_total / 4
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type=norm_type)
    assert total.dim() == 0
    np.testing.assert_allclose(total.item(), expected_total, rtol=1e-12)
    scale = max_norm / (expected_total + 1e-6)
    for g, after in zip(before, _grads(model)):
        np.testing.assert_allclose(after, g * scale, rtol=1e-12)
    # the gradients are scaled in place: a reference taken before still sees the result
    grad = next(model.parameters()).grad
    nn.utils.clip_grad_norm_(iter(model.parameters()), max_norm / 2, norm_type=norm_type)
    np.testing.assert_allclose(to_numpy(grad), to_numpy(next(model.parameters()).grad))


def test_clip_grad_norm_edge_cases():
    p = nn.Parameter(rt.ones(3))
    assert nn.utils.clip_grad_norm_([p], 1.0).item() == 0.0  # no gradients
    p.grad = rt.full((3,), 0.1)
    nn.utils.clip_grad_norm_(p, 10.0)  # a single tensor; below the limit: unchanged
    assert_close(p.grad, [0.1, 0.1, 0.1])
    p.grad = rt.tensor([float("inf"), 1.0, 1.0])
    with pytest.raises(rt.ValueError, match="clip_grad_norm_"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    with pytest.raises(TypeError, match="clip_grad_norm_"):
        nn.utils.clip_grad_norm_([p, 3], 1.0)


def test_clip_grad_value_and_parameter_vectors():
    model = nn.Linear(3, 2)
    model(rt.randn(5, 3) * 10).sum().backward()
    nn.utils.clip_grad_value_(model.parameters(), 0.5)
    assert all(to_numpy(p.grad).max() <= 0.5 and to_numpy(p.grad).min() >= -0.5 for p in model.parameters())
    vec = nn.utils.parameters_to_vector(model.parameters())
    assert vec.shape == (8,)
    nn.utils.vector_to_parameters(vec * 2, model.parameters())
    assert_close(nn.utils.parameters_to_vector(model.parameters()), to_numpy(vec) * 2)
    with pytest.raises(rt.ShapeError):
        nn.utils.vector_to_parameters(rt.zeros(7), model.parameters())


def test_load_state_dict_checks_everything_before_copying():
    src, dst = TiedLM(), TiedLM()
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert tuple(result) == ([], [])
    assert_close(dst.proj.weight, src.proj.weight)

    fresh = TiedLM()
    before = to_numpy(fresh.proj.weight)
    bad = dict(src.state_dict())
    bad["lm_head.weight"] = rt.zeros(3, 3)
    with pytest.raises(rt.ShapeError, match="lm_head.weight"):
        fresh.load_state_dict(bad)
    np.testing.assert_array_equal(to_numpy(fresh.proj.weight), before)  # nothing was copied

    partial = {k: v for k, v in src.state_dict().items() if k != "mask"}
    partial["extra"] = rt.zeros(1)
    with pytest.raises(RuntimeError, match="mask"):
        fresh.load_state_dict(partial)
    np.testing.assert_array_equal(to_numpy(fresh.proj.weight), before)
    missing, unexpected = fresh.load_state_dict(partial, strict=False)
    assert missing == ["mask"] and unexpected == ["extra"]
    assert_close(fresh.proj.weight, src.proj.weight)


def test_traversal_and_lookup():
    model = TiedLM()
    names = [n for n, _ in model.named_parameters()]
    assert names == ["wte.weight", "proj.weight", "proj.bias"]
    all_names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    assert all_names == ["wte.weight", "proj.weight", "proj.bias", "lm_head.weight"]
    assert model.get_submodule("proj") is model.proj
    assert model.get_submodule("") is model
    assert model.get_parameter("proj.bias") is model.proj.bias
    assert model.get_buffer("mask") is model.mask
    with pytest.raises(AttributeError, match="nope"):
        model.get_submodule("proj.nope")
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    assert len(list(seq.modules())) == 3
    assert len(list(seq.named_modules(remove_duplicate=False))) == 4
    assert len(list(seq.parameters())) == 2
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())
    with pytest.raises(KeyError):
        model.register_buffer("a.b", rt.zeros(1))


def test_zero_grad_in_place_and_to_none():
    lin = nn.Linear(2, 2)
    lin(rt.ones(1, 2)).sum().backward()
    grad = lin.weight.grad
    lin.zero_grad(set_to_none=False)
    assert lin.weight.grad is not None and to_numpy(grad).sum() == 0
    lin.zero_grad()
    assert lin.weight.grad is None


def test_forward_hooks_and_removal():
    lin = nn.Linear(3, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 1)
    x = rt.randn(4, 3)
    expected = to_numpy(x) * 2 @ to_numpy(lin.weight).T + to_numpy(lin.bias) + 1
    assert_close(lin(x), expected, rtol=1e-5, atol=1e-6)
    assert calls == [(4, 2)]
    h1.remove()
    h2.remove()
    assert_close(lin(x), to_numpy(x) @ to_numpy(lin.weight).T + to_numpy(lin.bias), rtol=1e-5, atol=1e-6)
    with lin.register_forward_hook(lambda m, a, k, out: out * 0, with_kwargs=True):
        assert to_numpy(lin(x)).sum() == 0
    assert to_numpy(lin(x)).sum() != 0


def test_full_backward_hooks_see_and_replace_gradients():
    lin = nn.Linear(3, 2).double()
    seen = {}

    def hook(module, grad_input, grad_output):
        seen["in"] = [to_numpy(g) for g in grad_input]
        seen["out"] = [to_numpy(g) for g in grad_output]
        return (grad_input[0] * 10,)

    handle = lin.register_full_backward_hook(hook)
    x = rt.randn(4, 3, dtype=rt.float64, requires_grad=True)
    (lin(x) * 3).sum().backward()
    np.testing.assert_allclose(seen["out"][0], np.full((4, 2), 3.0))
    np.testing.assert_allclose(seen["in"][0], np.full((4, 2), 3.0) @ to_numpy(lin.weight))
    np.testing.assert_allclose(to_numpy(x.grad), seen["in"][0] * 10)
    handle.remove()
    x.grad = None
    (lin(x) * 3).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), seen["in"][0])

    scaled = []
    lin.register_full_backward_pre_hook(lambda m, go: scaled.append(1) or (go[0] * 0.5,))
    x.grad = None
    (lin(x) * 3).sum().backward()
    assert scaled == [1]
    np.testing.assert_allclose(to_numpy(x.grad), seen["in"][0] * 0.5)


def test_backward_hook_without_input_gradients():
    lin = nn.Linear(3, 2)
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go[0].shape)))
    lin(rt.randn(4, 3)).sum().backward()
    assert seen == [((None,), (4, 2))]


def test_deepcopy_keeps_tied_weights():
    model = TiedLM()
    twin = copy.deepcopy(model)
    assert twin.wte.weight is twin.lm_head.weight
    assert twin.wte.weight is not model.wte.weight
    assert_close(twin.proj.weight, model.proj.weight)


def test_against_pytorch_module_semantics():
    torch = pytest.importorskip("torch")

    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = lib.nn.Linear(4, 4)
                self.b = lib.nn.Linear(4, 4)
                self.b.weight = self.a.weight
                self.register_buffer("count", lib.zeros(()))

            def forward(self, x):
                return self.b(self.a(x).tanh())

        return Net()

    ours, theirs = build(rt), build(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    ours.load_state_dict({k: rt.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    ours(rt.from_numpy(x)).square().sum().backward()
    theirs(torch.from_numpy(x)).square().sum().backward()
    n_ours = nn.utils.clip_grad_norm_(ours.parameters(), 0.1)
    n_theirs = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.1)
    np.testing.assert_allclose(n_ours.item(), n_theirs.item(), rtol=1e-6)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(to_numpy(p.grad), q.grad.double().numpy(), rtol=1e-5, atol=1e-7)
