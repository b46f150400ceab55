"""The in-place draws of other distributions (exponential_, geometric_, log_normal_, cauchy_,
random_) as sampling code calls them: moments and quantiles of 200k draws against the
distributions', the same values on every device for a seed, generators, dtypes and bad parameters."""
import math

import numpy as np
import pytest

import rustytorch as rt
from conftest import to_numpy

N = 200_000


def draws(device, fill, dtype=rt.float64, seed=3):
    rt.manual_seed(seed)
    t = rt.empty(N, dtype=dtype, device=device)
    out = fill(t)
    assert out is t
    return to_numpy(t)


def test_moments(device):
    x = draws(device, lambda t: t.exponential_(2.0))
    assert x.min() >= 0 and abs(x.mean() - 0.5) < 0.01 and abs(x.var() - 0.25) < 0.01
    g = draws(device, lambda t: t.geometric_(0.25))
    assert g.min() == 1 and np.all(g == np.round(g))
    assert abs(g.mean() - 4.0) < 0.05 and abs(g.var() - 12.0) < 0.5  # mean 1/p, variance (1-p)/p^2
    ln = draws(device, lambda t: t.log_normal_(0.5, 0.25))
    assert abs(np.log(ln).mean() - 0.5) < 0.005 and abs(np.log(ln).std() - 0.25) < 0.005
    c = draws(device, lambda t: t.cauchy_(1.0, 2.0))
    assert abs(np.median(c) - 1.0) < 0.05  # no mean; the quartiles are median -+ sigma
    assert abs(np.quantile(c, 0.25) + 1.0) < 0.05 and abs(np.quantile(c, 0.75) - 3.0) < 0.05
    r = draws(device, lambda t: t.random_(3, 9), dtype=rt.int64)
    assert set(np.unique(r)) == set(range(3, 9)) and abs(r.mean() - 5.5) < 0.02
    r = draws(device, lambda t: t.random_(5), dtype=rt.int32)
    assert set(np.unique(r)) == set(range(5))
    u8 = draws(device, lambda t: t.random_(), dtype=rt.uint8)
    assert u8.min() == 0 and u8.max() == 255
    f = draws(device, lambda t: t.random_(), dtype=rt.float32)
    assert f.min() >= 0 and f.max() <= 2 ** 24 and np.all(f == np.round(f))


def test_seeded_and_the_same_on_every_device():
    devices = ["cpu"] + (["cuda"] if rt.cuda.is_available() else [])
    for fill in (lambda t: t.exponential_(), lambda t: t.cauchy_(), lambda t: t.log_normal_(),
                 lambda t: t.geometric_(0.3)):
        runs = [draws(d, fill) for d in devices] + [draws("cpu", fill)]
        for other in runs[1:]:
            np.testing.assert_array_equal(runs[0], other)
        assert not np.array_equal(runs[0], draws("cpu", fill, seed=4))
    g = rt.Generator().manual_seed(7)
    a = rt.empty(5).exponential_(generator=g)
    g.manual_seed(7)
    np.testing.assert_array_equal(to_numpy(a), to_numpy(rt.empty(5).exponential_(generator=g)))


def test_float16_and_bad_parameters():
    h = rt.empty(1000, dtype=rt.float16).exponential_()
    assert h.dtype == rt.float16 and bool(rt.isfinite(h).all())
    with pytest.raises(ValueError, match=r"\[exponential_\] expects lambd > 0"):
        rt.empty(3).exponential_(0.0)
    with pytest.raises(ValueError, match=r"\[geometric_\] expects 0 < p < 1"):
        rt.empty(3).geometric_(1.5)
    with pytest.raises(ValueError, match=r"\[random_\] the range \[0, 300\) does not fit dtype"):
        rt.empty(3, dtype=rt.uint8).random_(300)
    with pytest.raises(rt.DTypeError, match=r"\[cauchy_\] expected a floating dtype"):
        rt.empty(3, dtype=rt.int64).cauchy_()


def test_gumbel_max_sampling_as_scripts_write_it(device):
    """probs / exponential_() then argmax draws category i with probability probs[i] (gpt-fast's
    sampling without a sync)."""
    rt.manual_seed(0)
    probs = rt.tensor([0.1, 0.2, 0.7], device=device)
    picks = [int((probs / rt.empty_like(probs).exponential_(1)).argmax()) for _ in range(3000)]
    freq = np.bincount(picks, minlength=3) / len(picks)
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.03)
    assert math.isclose(freq.sum(), 1.0)
