"""The multi-tensor ops under PyTorch's names (rustytorch._foreach_norm, rustytorch._foreach_mul_)
against numpy float64 references, beside torch.* where it is importable, their argument errors,
and nn.utils.clip_grad_norm_ on them."""
import math

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn
from conftest import assert_close, to_numpy

ORDS = [2, 1, math.inf, 0, 3.0, 0.5, -math.inf]
RTOL = {rt.float64: 1e-12, rt.float32: 1e-5, rt.bfloat16: 1.6e-2, rt.float16: 2e-3}


def arrays(seed=0):
    """Arrays of odd shapes: 1-d, 2-d, 0-d, one larger than a CUDA chunk of 65536 elements."""
    rng = np.random.default_rng(seed)
    shapes = [(7,), (3, 5), (), (65536 + 33,), (1,), (129, 4)]
    return [rng.standard_normal(s) for s in shapes]


def test_norms_match_numpy(device):
    for dtype in RTOL:
        data = arrays()
        tensors = [rt.tensor(a, dtype=dtype, device=device) for a in data]
        tensors[1] = tensors[1].t()  # non-contiguous
        data[1] = data[1].T
        for ord in ORDS:
            norms = rt._foreach_norm(tensors, ord)
            assert isinstance(norms, tuple) and len(norms) == len(tensors)
            for t, n, a in zip(tensors, norms, data):
                assert n.dim() == 0 and n.dtype == dtype and n.device == t.device
                # From the values the tensor holds, rounded to dtype (past float16's range: inf).
                expected = to_numpy(rt.tensor(np.linalg.norm(to_numpy(t).ravel(), ord), dtype=dtype))
                assert_close(n, expected, rtol=RTOL[dtype], atol=0)


def test_norm_keywords_and_empty_tensors(device):
    x = rt.tensor([3.0, -4.0], device=device)
    empty = rt.zeros(0, 3, device=device)
    (a,) = rt._foreach_norm((x,), ord=1)
    assert a.item() == 7.0
    (b,) = rt._foreach_norm([x.bfloat16()], dtype=rt.float32)
    assert b.dtype == rt.float32 and b.item() == 5.0
    assert [n.item() for n in rt._foreach_norm([empty, x], 2)] == [0.0, 5.0]
    with pytest.raises(rt.IndexError, match=r"_foreach_norm\] tensor 0 is empty"):
        rt._foreach_norm([empty, x], math.inf)


def test_norm_is_differentiable(device):
    rng = np.random.default_rng(4)
    a = rt.tensor(rng.standard_normal((3, 4)), device=device, requires_grad=True)
    b = rt.tensor(rng.standard_normal(5), device=device, requires_grad=True)
    for ord in [2, 1, 3.0, math.inf]:
        assert rt.autograd.gradcheck(lambda x, y: rt.stack(rt._foreach_norm([x, y], ord)), (a, b))


def test_mul_in_place_matches_numpy(device):
    for dtype in [rt.float32, rt.float64, rt.bfloat16]:
        data = arrays(1)
        tensors = [rt.tensor(a, dtype=dtype, device=device) for a in data]
        held = tensors[3]
        before = [to_numpy(t) for t in tensors]
        assert rt._foreach_mul_(tensors, 0.5) is None
        for t, b in zip(tensors, before):
            assert_close(t, b * 0.5, rtol=0, atol=0)  # halving is exact
        rt._foreach_mul_(tensors, rt.tensor(-3.0, device=device, dtype=dtype))
        for t, b in zip(tensors, before):
            assert_close(t, b * -1.5, rtol=RTOL[dtype], atol=0)
        assert held is tensors[3]
    ints = [rt.tensor([1, 2]), rt.tensor([3])]
    rt._foreach_mul_(ints, 2)
    assert ints[0].tolist() == [2, 4] and ints[1].tolist() == [6]


def test_mul_of_a_column_writes_through(device):
    base = rt.arange(12.0, device=device).reshape(3, 4)
    rt._foreach_mul_([base[:, 1]], 10)
    expected = np.arange(12.0).reshape(3, 4)
    expected[:, 1] *= 10
    assert_close(base, expected, rtol=0, atol=0)


def test_argument_errors(device):
    x = rt.ones(2, device=device)
    with pytest.raises(TypeError, match=r"_foreach_norm\(\): argument 'self' must be a list or tuple of Tensors"):
        rt._foreach_norm(x)
    with pytest.raises(TypeError, match=r"_foreach_norm\(\): element 1 of argument 'self' must be a Tensor, not int"):
        rt._foreach_norm([x, 3])
    with pytest.raises(rt.DTypeError, match=r"\[_foreach_norm\] tensor 1 \(shape \[2, 3\], on .*\) has dtype int64"):
        rt._foreach_norm([x, rt.zeros(2, 3, dtype=rt.int64, device=device)])
    with pytest.raises(rt.ValueError, match=r"\[_foreach_norm\] expects a non-empty list"):
        rt._foreach_norm([])
    with pytest.raises(TypeError, match=r"_foreach_mul_\(\): other must be a Tensor or a number, got str"):
        rt._foreach_mul_([x], "2")
    with pytest.raises(rt.ShapeError, match=r"\[_foreach_mul_\] the scalar must be a 0-d tensor"):
        rt._foreach_mul_([x], rt.ones(1, device=device))
    with pytest.raises(rt.DTypeError, match=r"\[_foreach_mul_\] tensor 0 \(shape \[2\]\) has dtype int64"):
        rt._foreach_mul_([rt.ones(2, dtype=rt.int64, device=device)], 0.5)
    leaf = rt.ones(3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[_foreach_mul_\] tensor 1 \(shape \[3\]\) is a leaf that requires grad"):
        rt._foreach_mul_([x, leaf], 2.0)
    assert x.tolist() == [1.0, 1.0]  # every tensor is checked before any is written
    with rt.no_grad():
        rt._foreach_mul_([leaf], 2.0)
    assert leaf.tolist() == [2.0, 2.0, 2.0]


def test_beside_torch():
    torch = pytest.importorskip("torch")
    data = arrays(2)
    for rdtype, tdtype in [(rt.float32, torch.float32), (rt.float64, torch.float64), (rt.bfloat16, torch.bfloat16),
                           (rt.float16, torch.float16)]:
        ours = [rt.tensor(a, dtype=rdtype) for a in data]
        theirs = [torch.tensor(a, dtype=tdtype) for a in data]
        for ord in [2, 1, math.inf, 0, 3.0]:
            n_ours, n_theirs = rt._foreach_norm(ours, ord), torch._foreach_norm(theirs, ord)
            for a, b in zip(n_ours, n_theirs):
                assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
                np.testing.assert_allclose(to_numpy(a), b.double().numpy(), rtol=RTOL[rdtype])
        rt._foreach_mul_(ours, rt.tensor(0.75, dtype=rdtype))
        torch._foreach_mul_(theirs, torch.tensor(0.75, dtype=tdtype))
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(to_numpy(a), b.double().numpy())


def small_model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.Tanh(), lib.nn.Linear(8, 3))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm_matches_numpy(device, norm_type):
    model = small_model(rt).to(device)
    x = rt.tensor(np.random.default_rng(5).standard_normal((10, 6)), dtype=rt.float32, device=device)
    (model(x) ** 2).sum().backward()
    before = [to_numpy(p.grad) for p in model.parameters()]
    total_expected = np.linalg.norm(np.concatenate([g.ravel() for g in before]), norm_type)
    max_norm = total_expected / 3
    total = nn.utils.clip_grad_norm_((p for p in model.parameters()), max_norm, norm_type=norm_type)
    assert total.dim() == 0 and total.dtype == rt.float32
    assert_close(total, total_expected, rtol=1e-5, atol=0)
    for p, g in zip(model.parameters(), before):
        assert_close(p.grad, g * (max_norm / (total_expected + 1e-6)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm_beside_torch(norm_type):
    torch = pytest.importorskip("torch")
    ours, theirs = small_model(rt), torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for q, p in zip(theirs.parameters(), ours.parameters()):
            q.copy_(torch.from_numpy(to_numpy(p)))
    x = np.random.default_rng(6).standard_normal((10, 6)).astype(np.float32)
    (ours(rt.from_numpy(x)) ** 2).sum().backward()
    (theirs(torch.from_numpy(x)) ** 2).sum().backward()
    n_ours = nn.utils.clip_grad_norm_(ours.parameters(), 0.5, norm_type=norm_type)
    n_theirs = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5, norm_type=norm_type, foreach=True)
    np.testing.assert_allclose(n_ours.item(), n_theirs.item(), rtol=1e-6)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(to_numpy(p.grad), q.grad.double().numpy(), rtol=1e-5, atol=1e-7)
