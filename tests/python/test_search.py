"""unique, unique_consecutive, bincount, searchsorted and bucketize, called as scripts call them:
against numpy references on every device, and against PyTorch itself where installed."""
import numpy as np
import pytest

import rustytorch as rt
from conftest import assert_close, to_numpy

rng = np.random.default_rng(11)


def test_unique_against_numpy(device):
    a = rng.integers(0, 6, size=(4, 5))
    t = rt.tensor(a, device=device)
    values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
    assert_close(rt.unique(t), values)
    v, i, c = t.unique(return_inverse=True, return_counts=True)
    assert_close(v, values) and assert_close(c, counts)
    assert i.shape == t.shape and i.dtype == rt.int64
    assert_close(i, inverse.reshape(a.shape))
    assert_close(v[i], a)  # the inverse rebuilds the input
    f = rt.tensor([2.5, float("nan"), -1.0, 2.5, float("nan")], device=device)
    assert_close(rt.unique(f), [-1.0, 2.5, np.nan, np.nan])  # NaNs are distinct
    assert rt.unique(rt.tensor([], device=device)).shape == (0,)
    with pytest.raises(ValueError, match=r"\[unique\] dim"):
        rt.unique(t, dim=0)


def test_unique_consecutive(device):
    t = rt.tensor([1, 1, 2, 2, 3, 1, 1, 2], device=device)
    v, i, c = rt.unique_consecutive(t, return_inverse=True, return_counts=True)
    assert_close(v, [1, 2, 3, 1, 2]) and assert_close(c, [2, 2, 1, 2, 1])
    assert_close(i, [0, 0, 1, 1, 2, 3, 3, 4])
    assert_close(t.reshape(2, 4).unique_consecutive(), [1, 2, 3, 1, 2])


def test_bincount(device):
    x = rng.integers(0, 7, size=50)
    t = rt.tensor(x, device=device)
    assert_close(rt.bincount(t), np.bincount(x))
    assert rt.bincount(t).dtype == rt.int64
    assert_close(t.bincount(minlength=12), np.bincount(x, minlength=12))
    w = rng.standard_normal(50)
    out = rt.bincount(t, weights=rt.tensor(w, dtype=rt.float32, device=device))
    assert out.dtype == rt.float32
    assert_close(out, np.bincount(x, weights=w), rtol=1e-5, atol=1e-5)
    assert rt.bincount(t, weights=rt.tensor(x, device=device)).dtype == rt.float64
    assert rt.bincount(rt.tensor([], dtype=rt.int64, device=device)).shape == (0,)
    with pytest.raises(ValueError, match="non-negative"):
        rt.bincount(rt.tensor([1, -1], device=device))
    with pytest.raises(ValueError, match=r"\[bincount\] expects a 1-d integer"):
        rt.bincount(rt.tensor([1.0], device=device))


def test_searchsorted_against_numpy(device):
    seq = np.sort(rng.integers(0, 10, size=12)).astype(np.float64)
    vals = np.concatenate([rng.uniform(-1, 11, size=9), seq[:4]])  # ties included
    s, v = rt.tensor(seq, device=device), rt.tensor(vals.reshape(13, 1), device=device)
    for side in ("left", "right"):
        expected = np.searchsorted(seq, vals, side=side).reshape(13, 1)
        assert_close(rt.searchsorted(s, v, side=side), expected)
        assert_close(rt.searchsorted(s, v, right=side == "right"), expected)
        assert_close(rt.bucketize(v, s, right=side == "right"), expected)
    assert rt.searchsorted(s, v, out_int32=True).dtype == rt.int32
    assert rt.searchsorted(s, 4.5).shape == ()  # a number gives a 0-d tensor
    # Rows: each row of values searches its own row of the sequence.
    rows = np.sort(rng.standard_normal((3, 6)), axis=1)
    q = rng.standard_normal((3, 4))
    expected = np.stack([np.searchsorted(rows[i], q[i]) for i in range(3)])
    assert_close(rt.searchsorted(rt.tensor(rows, device=device), rt.tensor(q, device=device)), expected)
    # sorter: the order that sorts an unsorted sequence.
    raw = rng.permutation(seq)
    order = rt.argsort(rt.tensor(raw, device=device))
    assert_close(rt.searchsorted(rt.tensor(raw, device=device), v, sorter=order),
                 np.searchsorted(seq, vals).reshape(13, 1))
    # int sequence, float values: compared as floats.
    assert_close(rt.searchsorted(rt.tensor([1, 2, 2, 3], device=device), rt.tensor([2.5], device=device)), [3])
    with pytest.raises(rt.ShapeError, match=r"\[searchsorted\]"):
        rt.searchsorted(rt.tensor(rows, device=device), rt.tensor(q[:2], device=device))
    with pytest.raises(ValueError, match="contradict"):
        rt.searchsorted(s, v, right=True, side="left")


def test_like_pytorch():
    torch = pytest.importorskip("torch")
    a = rng.integers(0, 5, size=(3, 7))
    f = rng.standard_normal(40)
    seq = np.sort(rng.standard_normal(10))
    cases = [
        lambda lib, a=a: lib.unique(lib.tensor(a), return_inverse=True, return_counts=True),
        lambda lib, a=a: lib.tensor(a).flatten().sort().values.unique_consecutive(return_counts=True),
        lambda lib, a=a: lib.bincount(lib.tensor(a).flatten(), minlength=9),
        lambda lib, a=a, f=f: lib.bincount(lib.tensor(a).flatten(), weights=lib.tensor(f[:21])),
        lambda lib, f=f, s=seq: lib.searchsorted(lib.tensor(s), lib.tensor(f), right=True),
        lambda lib, f=f, s=seq: lib.bucketize(lib.tensor(f), lib.tensor(s)),
        lambda lib, s=seq: lib.searchsorted(lib.tensor(s), 0.1, side="right", out_int32=True),
    ]
    for case in cases:
        ours, theirs = case(rt), case(torch)
        ours = ours if isinstance(ours, tuple) else (ours,)
        theirs = theirs if isinstance(theirs, tuple) else (theirs,)
        for o, t in zip(ours, theirs):
            assert str(o.dtype) == str(t.dtype).replace("torch.", "rustytorch.")
            np.testing.assert_array_equal(to_numpy(o), t.numpy())
