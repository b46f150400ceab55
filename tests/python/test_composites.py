"""Ops built from other ops: elementwise (nan_to_num, logit, xlogy, copysign, float_power, fmax/fmin, heaviside,
signbit, ...), statistics (var_mean, aminmax, nansum, kthvalue, median, quantile, ...), joining and splitting
(atleast_nd, hstack, tensor_split, block_diag, cartesian_prod, ...) and matrices (diag, tril_indices, kron,
tensordot, cross, cdist, rot90, ...), called as scripts call them: against numpy float64 references, and against
PyTorch itself where installed."""
import itertools
import warnings

import numpy as np
import pytest

import rustytorch as rt
from conftest import assert_close, gradcheck, t64, to_numpy

rng = np.random.default_rng(11)
EDGES = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.25, 0.5])


def test_elementwise_against_numpy(device):
    t = t64(EDGES, device)
    assert_close(rt.nan_to_num(t), np.nan_to_num(EDGES))
    assert_close(t.nan_to_num(nan=1.0, posinf=2.0, neginf=-3.0), np.nan_to_num(EDGES, nan=1.0, posinf=2.0, neginf=-3.0))
    assert_close(t.float().nan_to_num(), np.nan_to_num(EDGES.astype(np.float32)), rtol=0)
    u = t.clone()
    assert u.nan_to_num_(posinf=9.0) is u
    assert_close(u, np.nan_to_num(EDGES, posinf=9.0))
    assert_close(rt.signbit(t), np.signbit(EDGES))
    assert_close(t.float().signbit(), np.signbit(EDGES))
    assert_close(rt.isposinf(t), np.isposinf(EDGES))
    assert_close(t.isneginf(), np.isneginf(EDGES))
    b = np.array([-1.0, 2.0, -0.0, -0.0, -3.0, 0.0, np.inf, -np.inf])
    c = rt.copysign(t, t64(b, device))
    assert_close(c, np.copysign(EDGES, b))
    assert_close(t.copysign(-1), np.copysign(EDGES, -1.0))
    assert_close(rt.copysign(3, t), np.copysign(3.0, EDGES))
    a = rng.uniform(-3, 3, (3, 4))
    ta = t64(a, device)
    assert_close(rt.fmax(t, t64(b, device)), np.fmax(EDGES, b))
    assert_close(t.fmin(t64(b, device)), np.fmin(EDGES, b))
    assert_close(rt.fmax(t, 0.75), np.fmax(EDGES, 0.75))
    assert_close(rt.fmin(ta, ta.t()[:1].t()), np.fmin(a, a[:, :1]))
    assert_close(rt.heaviside(ta.round(), t64(0.5, device)), np.heaviside(np.round(a), 0.5))
    assert_close(ta.round().heaviside(ta), np.heaviside(np.round(a), a))
    assert_close(rt.frac(ta), np.modf(a)[0])
    assert_close(ta.frac(), a - np.trunc(a))
    assert_close(rt.deg2rad(ta * 60), np.deg2rad(a * 60))
    assert_close(ta.rad2deg(), np.rad2deg(a))
    p = rng.uniform(0.02, 0.98, (3, 4))
    tp = t64(p, device)
    assert_close(rt.logit(tp), np.log(p / (1 - p)))
    assert_close(tp.logit(eps=0.1), np.log(np.clip(p, 0.1, 0.9) / (1 - np.clip(p, 0.1, 0.9))))
    w = tp.clone()
    assert w.logit_() is w and np.allclose(to_numpy(w), np.log(p / (1 - p)))
    x = np.array([0.0, 0.0, 0.0, 2.0, 3.0, -1.0, np.nan])
    y = np.array([0.0, np.nan, np.inf, 0.0, np.e, 4.0, 1.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log(y))
    assert_close(rt.xlogy(t64(x, device), t64(y, device)), expected)
    assert_close(rt.xlogy(2, tp), 2 * np.log(p))
    assert_close(tp.xlogy(3.0), p * np.log(3.0))
    v = tp.clone()
    assert v.xlogy_(tp) is v and np.allclose(to_numpy(v), p * np.log(p))
    assert_close(rt.float_power(ta.float(), 2), np.float_power(a.astype(np.float32), 2), rtol=1e-6)
    assert_close(tp.float_power(ta), np.float_power(p, a))
    assert_close(rt.float_power(2, ta), np.float_power(2.0, a))
    assert rt.equal(rt.sgn(ta), rt.sign(ta)) and rt.equal(ta.sgn(), ta.sign())
    assert_close(c.signbit(), np.signbit(np.copysign(EDGES, b)))  # -0.0 results and NaN results alike


def test_elementwise_dtypes(device):
    i = rt.tensor([1, 2, -3], device=device)
    assert rt.xlogy(i, i).dtype == rt.float32 and rt.xlogy(i, 2).dtype == rt.float32
    assert rt.xlogy(i.float(), i.double()).dtype == rt.float64
    assert rt.float_power(i, 2).dtype == rt.float64 and rt.float_power(i.float(), i.float()).dtype == rt.float64
    assert rt.signbit(i).dtype == rt.bool and rt.signbit(i).tolist() == [False, False, True]
    assert rt.isposinf(i).dtype == rt.bool and not rt.isposinf(i).any().item()
    assert rt.deg2rad(i).dtype == rt.float32 and rt.logit(i).dtype == rt.float32
    assert rt.copysign(i, -1).dtype == rt.float32 and rt.copysign(i, -1).tolist() == [-1.0, -2.0, -3.0]
    assert rt.fmax(i, rt.tensor([0, 5, 0], device=device)).dtype == rt.int64
    assert rt.fmax(i, 1.5).dtype == rt.float32 and rt.nan_to_num(i).dtype == rt.int64
    assert rt.frac(i.half()).dtype == rt.float16 and rt.heaviside(i, i).dtype == rt.int64


def test_statistics_against_numpy(device):
    a = rng.standard_normal((4, 5))
    t = t64(a, device)
    var, mean = rt.var_mean(t, 1)
    assert_close(var, a.var(1, ddof=1))
    assert_close(mean, a.mean(1))
    std, mean = rt.std_mean(t, dim=(0, 1), unbiased=False, keepdim=True)
    assert_close(std, a.std(keepdims=True))
    assert_close(mean, a.mean(keepdims=True))
    var, _ = rt.var_mean(t, 0, correction=0)
    assert_close(var, a.var(0))
    mm = rt.aminmax(t, dim=1, keepdim=True)
    assert_close(mm.min, a.min(1, keepdims=True))
    assert_close(mm.max, a.max(1, keepdims=True))
    lo, hi = t.aminmax()
    assert lo.dim() == 0 and lo.item() == a.min() and hi.item() == a.max()
    n = a.copy()
    n[0, 1] = n[2, 3] = np.nan
    n[3] = np.nan
    tn = t64(n, device)
    assert_close(rt.nansum(tn), np.nansum(n))
    assert_close(tn.nansum(1, keepdim=True), np.nansum(n, 1, keepdims=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_close(rt.nanmean(tn, dim=1), np.nanmean(n, 1))
        assert_close(tn.nanmean(), np.nanmean(n))
    assert rt.nansum(tn.float(), dtype=rt.float64).dtype == rt.float64 and tn.float().nanmean().dtype == rt.float32
    k = t.kthvalue(2, dim=0)
    assert_close(k.values, np.sort(a, 0)[1])
    assert_close(k.indices, np.argsort(a, 0)[1])
    values, indices = rt.kthvalue(t, 5, 1, True)
    assert_close(values, a.max(1, keepdims=True))
    assert_close(indices, a.argmax(1)[:, None])
    assert_close(rt.median(t, 1).values, np.median(a, 1))
    assert_close(t.median(dim=1).indices, np.argsort(a, 1)[:, 2])
    assert_close(t.median(0, keepdim=True).values, np.quantile(a, 0.5, axis=0, method="lower", keepdims=True))
    assert_close(rt.median(t), np.quantile(a, 0.5, method="lower"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_close(rt.nanmedian(tn), np.nanquantile(n, 0.5, method="lower"))
        assert_close(tn.nanmedian(dim=1).values, np.nanquantile(n, 0.5, axis=1, method="lower"))
    assert np.isnan(rt.median(tn).item())
    assert np.isnan(to_numpy(tn.median(1).values)).tolist() == [True, False, True, True]
    assert tn.median(1).indices.tolist()[:3] == [1, int(np.argsort(n[1])[2]), 3]
    qs = [0.0, 0.125, 0.3, 0.375, 0.5, 0.9, 1.0]
    for method in ["linear", "lower", "higher", "midpoint", "nearest"]:
        assert_close(rt.quantile(t, qs, dim=1, interpolation=method), np.quantile(a, qs, axis=1, method=method))
        assert_close(t.quantile(t64(qs, device), interpolation=method), np.quantile(a, qs, method=method))
        assert_close(t[:, :4].quantile(0.5, dim=-1, interpolation=method),
                     np.quantile(a[:, :4], 0.5, axis=-1, method=method))
    assert_close(t.quantile(0.3), np.quantile(a, 0.3))
    assert_close(rt.quantile(t, [0.2, 0.7], dim=0, keepdim=True), np.quantile(a, [0.2, 0.7], axis=0, keepdims=True))
    assert_close(rt.quantile(t, [0.2, 0.7], keepdim=True), np.quantile(a, [0.2, 0.7], keepdims=True))
    assert_close(rt.quantile(tn, 0.4, dim=1), np.quantile(n, 0.4, axis=1))
    assert rt.quantile(t.float(), 0.5).dtype == rt.float32


def test_stacking_against_numpy(device):
    s, v, m = rt.tensor(2.0, device=device), rt.arange(3.0, device=device), rt.arange(6.0, device=device).reshape(2, 3)
    for nd in (1, 2, 3):
        ours, theirs = getattr(rt, f"atleast_{nd}d"), getattr(np, f"atleast_{nd}d")
        for x in (s, v, m):
            assert tuple(ours(x).shape) == theirs(to_numpy(x)).shape
        assert [tuple(r.shape) for r in ours(s, v, m)] == [r.shape for r in theirs(*(to_numpy(x) for x in (s, v, m)))]
        assert isinstance(ours([s, v]), tuple) and len(ours([s, v])) == 2
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    ta, tb = t64(a, device), t64(b, device)
    assert_close(rt.hstack([ta, tb]), np.hstack([a, b]))
    assert_close(rt.hstack((v, v)), np.hstack([np.arange(3.0)] * 2))
    assert_close(rt.vstack([ta, tb[0]]), np.vstack([a, b[0]]))
    assert_close(rt.row_stack((ta, tb)), np.vstack([a, b]))
    assert_close(rt.dstack([ta, tb]), np.dstack([a, b]))
    assert_close(rt.dstack([v, v]), np.dstack([np.arange(3.0)] * 2))
    assert_close(rt.column_stack([ta.t(), v, tb.t()]), np.column_stack([a.T, np.arange(3.0), b.T]))
    bd = rt.block_diag(ta, tb[0], rt.tensor(7.0, device=device))
    expected = np.zeros((4, 7))
    expected[:2, :3], expected[2, 3:6], expected[3, 6] = a, b[0], 7.0
    assert_close(bd, expected)
    assert tuple(rt.block_diag().shape) == (1, 0)
    cp = rt.cartesian_prod(v, rt.tensor([5.0, 6.0], device=device), v[:2])
    assert_close(cp, np.array(list(itertools.product(range(3), [5.0, 6.0], range(2))), dtype=np.float64))
    x = np.arange(14.0).reshape(2, 7)
    tx = t64(x, device)
    assert [p.shape[0] for p in tx.t().tensor_split(rt.tensor([1, 4]))] == [1, 3, 3]
    assert [p.shape[-1] for p in tx.tensor_split(rt.tensor(2), -1)] == [4, 3]
    assert isinstance(rt.tensor_split(tx, 2), tuple)
    # Pieces x[indices[k - 1]:indices[k]] with Python's slice rules, unordered indices too.
    for split in (3, 7, 9, [2, 5], [2, -2], [-10], [0, 20], [], [3, 1]):
        ours, theirs = rt.tensor_split(tx, split, dim=1), np.array_split(x, split, axis=1)
        assert len(ours) == len(theirs), split
        for o, e in zip(ours, theirs):
            assert_close(o, e)


def test_matrix_against_numpy(device):
    a = rng.standard_normal((4, 5))
    t, v = t64(a, device), t64(a[0], device)
    for k in (0, 2, -1, 7):
        assert_close(rt.diag(t, k), np.diag(a, k))
        assert_close(v.diag(k), np.diag(a[0], k))
    assert_close(t.diag(diagonal=-3), np.diag(a, -3))
    assert_close(rt.diag_embed(t), np.stack([np.diag(r) for r in a]))
    assert_close(t.diag_embed(offset=-2), np.stack([np.diag(r, -2) for r in a]))
    assert_close(rt.diag_embed(t, 1, dim1=0, dim2=2), np.stack([np.diag(r, 1) for r in a]).transpose(1, 0, 2))
    assert_close(rt.trace(t), np.trace(a))
    assert_close(t.t().trace(), np.trace(a))
    for rows, cols, off in [(4, 4, 0), (3, 5, 1), (5, 3, -2), (3, 3, 4), (0, 2, 0)]:
        assert_close(rt.tril_indices(rows, cols, off), np.stack(np.tril_indices(rows, off, cols)).reshape(2, -1))
        assert_close(rt.triu_indices(rows, cols, offset=off, device=device),
                     np.stack(np.triu_indices(rows, off, cols)).reshape(2, -1))
    assert rt.tril_indices(3, 3).dtype == rt.int64 and rt.triu_indices(3, 3, dtype=rt.int32).dtype == rt.int32
    assert rt.tril_indices(3, 3, device=device).device.type == device
    b = rng.standard_normal((2, 3))
    tb = t64(b, device)
    assert_close(rt.kron(t, tb), np.kron(a, b))
    assert_close(v.kron(tb), np.kron(a[0], b))
    x, y = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 3, 5))
    tx, ty = t64(x, device), t64(y, device)
    assert_close(rt.tensordot(tx, ty.permute(1, 0, 2)), np.tensordot(x, y.transpose(1, 0, 2)))
    assert_close(rt.tensordot(tx, ty, dims=([1, 2], [1, 0])), np.tensordot(x, y, axes=([1, 2], [1, 0])))
    assert_close(rt.tensordot(tx, ty, dims=[[2], [0]]), np.tensordot(x, y, axes=([2], [0])))
    assert_close(rt.tensordot(v, tb, dims=0), np.tensordot(a[0], b, axes=0))
    assert_close(rt.tensordot(tx, ty, dims=rt.tensor([[1, 2], [1, 0]])), np.tensordot(x, y, axes=([1, 2], [1, 0])))
    c, d = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    tc, td = t64(c, device), t64(d, device)
    assert_close(rt.cross(tc, td), np.cross(c, d))
    assert_close(tc.cross(td, dim=1), np.cross(c, d))
    assert_close(rt.cross(tc.t(), td.t(), dim=0), np.cross(c, d).T)
    assert_close(tc.t().cross(td.t()), np.cross(c, d).T)
    assert_close(rt.cross(tc, td[0]), np.cross(c, d[0]))
    for p in (1.0, 2.0, 3.0, np.inf):
        expected = np.linalg.norm(c[:, None, :] - a[None, :, :3], ord=p, axis=-1)
        assert_close(rt.cdist(tc, t[:, :3], p=p), expected)
    assert_close(rt.cdist(tc[None], td[None], compute_mode="donot_use_mm_for_euclid_dist"),
                 np.linalg.norm(c[:, None] - d[None], axis=-1)[None])
    for k, dims in [(1, (0, 1)), (2, (0, 1)), (-1, (0, 1)), (3, [1, 0]), (5, (-1, -2))]:
        assert_close(rt.rot90(t, k, dims), np.rot90(a, k, dims))
        assert_close(t.rot90(k=k, dims=dims), np.rot90(a, k, dims))
    assert_close(rt.rot90(tx, 1, [0, 2]), np.rot90(x, 1, (0, 2)))
    assert_close(tx.rot90(), np.rot90(x))
    assert tuple(rt.unflatten(tx, 2, (2, 2)).shape) == tuple(rt.unflatten(tx, -1, [2, -1]).shape) == (2, 3, 2, 2)


def test_gradients(device):
    p = rng.uniform(0.1, 0.9, (2, 3))
    a, b = rng.uniform(-2, 2, (2, 3)), rng.uniform(-2, 2, (2, 3))
    distinct = rng.permutation(12).reshape(3, 4) * 0.37 - 2
    cases = [
        (rt.logit, [p]), (lambda x: x.logit(eps=0.2), [p]), (rt.xlogy, [a, p]), (lambda x: rt.xlogy(x, 3), [a]),
        (lambda x: rt.copysign(x, rt.tensor([[-1.0, 2, -0.0], [0.0, 3, -2]], device=x.device)), [a]),
        (rt.fmax, [a, b]), (lambda x, y: x.fmin(y), [a, b]), (lambda x: (x * 2).nan_to_num(posinf=1.0), [a]),
        (lambda x: rt.var_mean(x, 1)[0] + rt.var_mean(x, 1)[1] * 2, [a]), (lambda x: rt.std_mean(x)[0], [a]),
        (lambda x: x.median(1).values, [distinct]), (lambda x: x.kthvalue(2, 0).values, [distinct]),
        (lambda x: rt.quantile(x, [0.25, 0.6], dim=1), [distinct]), (lambda x: x.nanmedian(), [distinct]),
        (lambda x, y: rt.block_diag(x, y[0], y[1, 0]), [a, b]), (rt.kron, [a, b]),
        (lambda x, y: rt.tensordot(x, y, dims=([1], [1])), [a, b]), (lambda x, y: rt.cross(x, y, dim=1), [a, b]),
        (lambda x, y: rt.cdist(x, y), [a, b]), (lambda x, y: rt.cdist(x, y, p=1), [a, b]),
        (lambda x: x.diag_embed(1), [a]), (lambda x: rt.diag(x[0], -1), [a]), (rt.trace, [a]),
        (lambda x: rt.rot90(x, 3), [a]), (lambda x: rt.hstack(x.tensor_split(3, dim=1)[::-1]), [a]),
        (lambda x: rt.vstack([x, x * 2]).sum(0), [a]), (lambda x: rt.cartesian_prod(x[0], x[1]), [a]),
    ]
    for i, (fn, arrays) in enumerate(cases):
        assert gradcheck(fn, arrays, device), i


def test_cdist_self_distance_has_finite_gradient(device):
    # The distance of a row to itself is a kink of the norm; its gradient counts as 0 (as in PyTorch).
    x = t64(rng.standard_normal((3, 2)), device, requires_grad=True)
    rt.cdist(x, x).sum().backward()
    assert np.isfinite(to_numpy(x.grad)).all()


def test_errors():
    t = rt.arange(6.0).reshape(2, 3)
    with pytest.raises(rt.ValueError, match=r"\[quantile\] q values must lie in \[0, 1\]"):
        t.quantile(1.5)
    with pytest.raises(rt.ValueError, match=r"\[quantile\] interpolation"):
        t.quantile(0.5, interpolation="cubic")
    with pytest.raises(rt.DTypeError, match=r"\[quantile\]"):
        rt.quantile(rt.tensor([1, 2]), 0.5)
    with pytest.raises(rt.ShapeError, match=r"\[cross\] needs a dim of size 3"):
        rt.cross(t.t(), t.t(), dim=1)
    with pytest.raises(rt.DTypeError, match=r"\[heaviside\]"):
        rt.heaviside(t, t.int())
    with pytest.raises(rt.ShapeError, match=r"\[tensordot\]"):
        rt.tensordot(t, t, dims=([0], [1]))
    with pytest.raises(rt.IndexError, match=r"\[kthvalue\] k = 4"):
        t.kthvalue(4)
    with pytest.raises(rt.ShapeError, match=r"\[cdist\]"):
        rt.cdist(t, t.t())
    with pytest.raises(rt.ValueError, match=r"\[rot90\]"):
        t.rot90(1, (0, 0))
    with pytest.raises(rt.ShapeError, match=r"\[block_diag\]"):
        rt.block_diag(t[None])
    with pytest.raises(TypeError, match="xlogy"):
        rt.xlogy(t, "2")
    with pytest.raises(rt.ValueError, match=r"\[tensor_split\] sections must be positive"):
        t.tensor_split(0)
    with pytest.raises(rt.DTypeError, match=r"\[nanmean\]"):
        rt.tensor([1, 2]).nanmean()


def _same(ours, theirs, what):
    """ours (rustytorch) against theirs (torch): type, shape, dtype and values, elementwise over tuples."""
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, (tuple, list)) and len(ours) == len(theirs), what
        for o, t in zip(ours, theirs):
            _same(o, t, what)
        return
    assert tuple(ours.shape) == tuple(theirs.shape), (what, tuple(ours.shape), tuple(theirs.shape))
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], (what, ours.dtype, theirs.dtype)
    o = to_numpy(ours)
    e = theirs.detach().double().numpy() if theirs.is_floating_point() else theirs.detach().numpy()
    np.testing.assert_allclose(o.astype(np.float64), e.astype(np.float64), rtol=2e-6, atol=2e-6, equal_nan=True,
                               err_msg=what)
    if o.dtype != bool and theirs.is_floating_point():
        np.testing.assert_array_equal(np.signbit(o[o == 0]), np.signbit(e[e == 0]), err_msg=what)


def test_like_pytorch():
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((3, 4)).astype(np.float32)  # distinct values: indices are defined
    e = EDGES.astype(np.float32)
    n = a.copy()
    n[0, 1] = np.nan
    n[2] = np.nan
    i = np.array([[3, -1, 0], [2, 7, -5]], dtype=np.int64)
    cases = {
        "nan_to_num": lambda m, x, e, n, i: (m.nan_to_num(e), e.nan_to_num(nan=1.0, neginf=-2.0), m.nan_to_num(i)),
        "logit": lambda m, x, e, n, i: (m.logit(x.sigmoid()), x.sigmoid().logit(eps=0.3), m.logit(i), m.logit(e)),
        "xlogy": lambda m, x, e, n, i: (m.xlogy(x, x.abs()), m.xlogy(e, e), m.xlogy(i, i), m.xlogy(2, x.abs()),
                                        x.xlogy(3), m.xlogy(i, 2.5)),
        "copysign": lambda m, x, e, n, i: (m.copysign(x, e[:4]), e.copysign(-0.0), m.copysign(i, -1)),
        "float_power": lambda m, x, e, n, i: (m.float_power(x, 2), m.float_power(i, i.abs()), x.abs().float_power(0.5),
                                              m.float_power(2, i)),
        "fmax_fmin": lambda m, x, e, n, i: (m.fmax(e, e[[1, 0, 3, 2, 5, 4, 7, 6]]), x.fmax(n), m.fmin(i, i.flip(1)),
                                            m.fmin(e, e[[2, 3, 0, 1, 6, 7, 4, 5]])),
        "heaviside": lambda m, x, e, n, i: (m.heaviside(e, e.flip(0)), i.heaviside(i.flip(0))),
        "frac_angles": lambda m, x, e, n, i: (m.frac(x * 3), m.deg2rad(i), x.rad2deg(), m.deg2rad(x)),
        "predicates": lambda m, x, e, n, i: (m.signbit(e), i.signbit(), m.isposinf(e), m.isneginf(i), m.sgn(e[1:])),
        "var_mean": lambda m, x, e, n, i: (m.var_mean(x), m.var_mean(x, 1), m.std_mean(x, 0, keepdim=True),
                                           m.var_mean(x, dim=(0, 1), correction=0), m.std_mean(x, 1, unbiased=False)),
        "aminmax": lambda m, x, e, n, i: (tuple(m.aminmax(x)), tuple(x.aminmax(dim=0)), m.aminmax(x, dim=1).max,
                                          tuple(m.aminmax(i, dim=1, keepdim=True))),
        "nansum": lambda m, x, e, n, i: (m.nansum(n), n.nansum(1), m.nansum(n, 0, keepdim=True), m.nanmean(n, 1),
                                         m.nansum(i), m.nansum(n, dtype=m.float64), n.nanmean(dim=(0, 1))),
        "kthvalue": lambda m, x, e, n, i: (tuple(m.kthvalue(x, 2)), tuple(x.kthvalue(3, 0, True)),
                                           tuple(m.kthvalue(i, 1, 0))),
        "median": lambda m, x, e, n, i: (m.median(x), tuple(x.median(1)), tuple(m.median(x, 0, keepdim=True)),
                                         m.median(i), tuple(m.median(n[:2], 1)), m.median(n), m.median(x[:, :2])),
        "nanmedian": lambda m, x, e, n, i: (m.nanmedian(n), n.nanmedian(1).values, m.nanmedian(x),
                                            tuple(m.nanmedian(n[:2], 1))),
        "quantile": lambda m, x, e, n, i: (m.quantile(x, 0.3), x.quantile(m.tensor([0.1, 0.5, 1.0]), dim=1),
                                           m.quantile(x, m.tensor([0.25, 0.75]), dim=0, keepdim=True),
                                           m.quantile(x, m.tensor(0.5), keepdim=True), m.quantile(n, 0.5, dim=1),
                                           *[m.quantile(x, m.tensor([0.125, 0.375, 0.5, 0.9]), 1, interpolation=s)
                                             for s in ("lower", "higher", "midpoint", "nearest")]),
        "atleast": lambda m, x, e, n, i: (m.atleast_1d(x[0, 0]), m.atleast_2d(x[0]), m.atleast_3d(x),
                                          m.atleast_3d(x[0, 0], x[0]), m.atleast_2d([x, x[0]])),
        "stack": lambda m, x, e, n, i: (m.hstack([x, x]), m.hstack((x[0], e)), m.vstack([x, x[0]]),
                                        m.row_stack([x[0], x[1]]), m.dstack([x, x]), m.column_stack([x[0], x[1], x[2]]),
                                        m.column_stack([x, i[0]]), m.hstack([x, i.t()[:, :1]])),
        "tensor_split": lambda m, x, e, n, i: (m.tensor_split(x, 3, 1), x.tensor_split([1, -1], dim=1),
                                               m.tensor_split(e, 3), e.tensor_split(m.tensor([2, 5])),
                                               m.tensor_split(x, m.tensor(2)), x.tensor_split(5, dim=0)),
        "tensor_split_unordered": lambda m, x, e, n, i: (x.tensor_split([3, 1], 1), m.tensor_split(e, [6, 2, 4])),
        "block_diag": lambda m, x, e, n, i: (m.block_diag(x, e[:2], x[0, 0]), m.block_diag(i, x),
                                             m.block_diag(x[:0], i[0])),
        "cartesian_prod": lambda m, x, e, n, i: (m.cartesian_prod(x[0], x[1, :2]), m.cartesian_prod(x[0]),
                                                 m.cartesian_prod(i[0], i[1], i[0])),
        "diag": lambda m, x, e, n, i: (m.diag(x), x.diag(1), m.diag(x, -2), m.diag(x[0], -1), m.diag(i[0], 2),
                                       m.diag_embed(x), x.diag_embed(2, 0, 2), m.diag_embed(x, -1, dim1=-1, dim2=0),
                                       m.trace(x), m.trace(i)),
        "triangles": lambda m, x, e, n, i: (m.tril_indices(4, 3), m.triu_indices(3, 5, 1), m.tril_indices(5, 5, -2),
                                            m.triu_indices(4, 4, -1, dtype=m.int32), m.tril_indices(0, 3)),
        "kron": lambda m, x, e, n, i: (m.kron(x, x[:2, :2]), x[0].kron(x), m.kron(i, i), m.kron(x[None], x[0])),
        "tensordot": lambda m, x, e, n, i: (m.tensordot(x, x), m.tensordot(x, x.t(), dims=1),
                                            m.tensordot(x, x, dims=([0], [0])), m.tensordot(x[0], x[1], 0),
                                            m.tensordot(x[None], x, dims=([1, 2], [0, 1]))),
        "cross": lambda m, x, e, n, i: (m.cross(x[:, :3], x[:, 1:]), x[:, :3].cross(x[:, 1:], dim=0),
                                        m.cross(x[:, :3], x[:1, 1:], dim=-1), m.cross(i, i.flip(0))),
        "cdist": lambda m, x, e, n, i: (m.cdist(x, x[:2]), m.cdist(x, x[1:], p=1), m.cdist(x, x[:2], p=0.0),
                                        m.cdist(x[None], x[None], p=float("inf")),
                                        m.cdist(x, x[:2], p=3, compute_mode="use_mm_for_euclid_dist")),
        "rot90": lambda m, x, e, n, i: (m.rot90(x), x.rot90(2), m.rot90(x, -1, [1, 0]), m.rot90(x[None], 1, (0, 2)),
                                        m.rot90(i, 3)),
        "unflatten": lambda m, x, e, n, i: (m.unflatten(x, 1, (2, 2)), m.unflatten(x, 0, [3, 1])),
    }
    failures = []  # every mismatch at once
    for name, case in cases.items():
        try:
            ours = case(rt, *(rt.tensor(v) for v in (a, e, n, i)))
            theirs = case(torch, *(torch.tensor(v) for v in (a, e, n, i)))
            _same(ours, theirs, name)
        except Exception as err:  # noqa: BLE001 - reported with the case's name below
            failures.append(f"{name}: {type(err).__name__}: {err}")
    # Named results, in-place forms and the results' types.
    x, tx = rt.tensor(a), torch.tensor(a)
    assert rt.aminmax(x).min.item() == tx.aminmax().min.item()
    assert x.median(0).indices.tolist() == tx.median(0).indices.tolist()
    for op in ("frac_", "deg2rad_", "rad2deg_", "logit_", "nan_to_num_"):
        ours, theirs = x.clone().sigmoid(), tx.clone().sigmoid()
        assert getattr(ours, op)() is ours
        getattr(theirs, op)()
        _same(ours, theirs, op)
    for op in ("copysign_", "xlogy_", "float_power_"):
        ours, theirs = x.double().abs(), tx.double().abs()
        assert getattr(ours, op)(x.flip(0)) is ours
        getattr(theirs, op)(tx.flip(0))
        _same(ours, theirs, op)
    assert not failures, "\n".join(failures)


def test_indexed_fills_products_and_helpers(device):
    a = rng.standard_normal((3, 4))
    t = t64(a, device)
    idx = rt.tensor([2, 0], device=device)
    e = a.copy()
    e[:, [2, 0]] = -1.0
    assert_close(t.index_fill(1, idx, -1.0), e)
    u = t.clone()
    assert u.index_fill_(1, idx, -1.0) is u and np.array_equal(to_numpy(u), e)
    src = rng.standard_normal((2, 4))
    e = a.copy()
    e[[2, 0]] = src
    assert_close(rt.index_copy(t, 0, idx, t64(src, device)), e)
    assert_close(t.clone().index_copy_(0, idx, t64(src, device)), e)
    assert gradcheck(lambda x, s: x.index_copy(0, rt.tensor([2, 0], device=x.device), s), [a, src], device)
    assert gradcheck(lambda x: x.index_fill(1, rt.tensor([1], device=x.device), 0.5), [a], device)
    v, w = rng.standard_normal(4), rng.standard_normal(3)
    assert_close(rt.addmv(t64(w, device), t, t64(v, device), beta=2, alpha=0.5), 2 * w + 0.5 * a @ v)
    assert_close(t.addr(t64(w, device), t64(v, device)), a + np.outer(w, v))
    assert_close(t.ravel(), a.ravel()) and assert_close(t.t().ravel(), a.T.ravel())
    assert_close(rt.broadcast_to(t64(v, device), (2, 4)), np.broadcast_to(v, (2, 4)))
    assert_close(t.msort(), np.sort(a, axis=0))
    assert_close(t.sum_to_size(1, 4), a.sum(0, keepdims=True))
    m = t.clone()
    assert m.fill_diagonal_(7.0) is m
    e = a.copy()
    np.fill_diagonal(e, 7.0)
    assert_close(m, e)
    tall = rt.zeros(7, 3, device=device).fill_diagonal_(1.0, wrap=True)
    e = np.zeros((7, 3))
    np.fill_diagonal(e, 1.0, wrap=True)
    assert_close(tall, e)
    assert not t.is_complex() and t.conj() is t and t.real is t
    with pytest.raises(rt.DTypeError, match="complex"):
        t.imag


def test_helpers_like_pytorch():
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((4, 4))
    for case in (lambda lib, x: x.index_fill(0, lib.tensor([1, 3]), 2.5),
                 lambda lib, x: x.index_copy(1, lib.tensor([0, 2]), x[:, :2] * 2),
                 lambda lib, x: lib.addmv(x[0], x, x[1], beta=0.5, alpha=3),
                 lambda lib, x: x.addr(x[0], x[1], alpha=2),
                 lambda lib, x: x.clone().fill_diagonal_(-1.0),
                 lambda lib, x: x.msort(),
                 lambda lib, x: x.sum_to_size(4, 1)):
        np.testing.assert_allclose(to_numpy(case(rt, rt.tensor(a))), case(torch, torch.tensor(a)).numpy(), rtol=1e-12)


def test_nanquantile(device):
    a = rng.standard_normal((4, 7))
    a[0, 2] = a[1, :3] = a[3, :] = np.nan
    t = t64(a, device)
    for method in ("linear", "lower", "higher", "midpoint", "nearest"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's all-NaN row
            expected = np.nanquantile(a, [0.25, 0.5], axis=1, method=method)
        assert_close(rt.nanquantile(t, [0.25, 0.5], dim=1, interpolation=method), expected)
    assert_close(t.nanquantile(0.5), np.nanquantile(a, 0.5))
    assert gradcheck(lambda x: x.nanquantile(0.3, dim=1), [rng.standard_normal((2, 5))], device)


def test_hsplit_vsplit_dsplit(device):
    a = rng.standard_normal((4, 6, 2))
    t = t64(a, device)
    for name in ("hsplit", "vsplit", "dsplit"):
        for arg in (2, [1, 3]):
            ours, theirs = getattr(rt, name)(t, arg), getattr(np, name)(a, arg)
            assert isinstance(ours, tuple) and len(ours) == len(theirs)
            for o, e in zip(ours, theirs):
                assert_close(o, e)
    assert len(t[0, :, 0].hsplit(3)) == 3  # 1-d: along dim 0
    with pytest.raises(ValueError, match=r"\[hsplit\] cannot split dim 1 of size 6 into 4 equal sections"):
        rt.hsplit(t, 4)
    with pytest.raises(rt.ShapeError, match=r"\[dsplit\] expects a tensor of at least 3 dims"):
        rt.dsplit(t[0], 2)
