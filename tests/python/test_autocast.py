"""Autocast as PyTorch scripts use it: `with torch.autocast(device_type, dtype=torch.bfloat16):`
around the forward pass, the policy op by op (compared with PyTorch's CUDA autocast on the GPU),
gradients in float32 on float32 parameters, the cast cache, nesting, decorators, threads, and the
errors of bad regions."""
import threading
import warnings

import numpy as np
import pytest

import rustytorch as rt
import rustytorch.nn.functional as F
from conftest import assert_close, to_numpy


def _data(shape, seed, dtype=rt.float32, device="cpu", positive=False):
    x = np.random.default_rng(seed).standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.5
    return rt.tensor(x, dtype=dtype, device=device)


def _lower_ops(d):
    a, b = _data((4, 6), 0, device=d), _data((6, 5), 1, device=d)
    w, bias = _data((5, 6), 2, device=d), _data((5,), 3, device=d)
    a3, b3 = _data((2, 4, 6), 4, device=d), _data((2, 6, 3), 5, device=d)
    img, kernel = _data((1, 2, 6, 6), 6, device=d), _data((3, 2, 3, 3), 7, device=d)
    q = _data((1, 2, 4, 8), 8, device=d)
    return {
        "matmul": lambda lib, t: lib.matmul(t(a), t(b)),
        "@": lambda lib, t: t(a) @ t(b),
        "mm": lambda lib, t: lib.mm(t(a), t(b)),
        "bmm": lambda lib, t: lib.bmm(t(a3), t(b3)),
        "linear": lambda lib, t: lib.nn.functional.linear(t(a), t(w), t(bias)),
        "conv2d": lambda lib, t: lib.nn.functional.conv2d(t(img), t(kernel), padding=1),
        "conv1d": lambda lib, t: lib.nn.functional.conv1d(t(a3), t(_data((3, 4, 3), 9, device=d))),
        "sdpa": lambda lib, t: lib.nn.functional.scaled_dot_product_attention(t(q), t(q), t(q), is_causal=True),
        "einsum": lambda lib, t: lib.einsum("ij,jk->ik", t(a), t(b)),
    }


def _float32_ops(d):
    x, y = _data((4, 6), 0, rt.bfloat16, d), _data((4, 6), 1, rt.bfloat16, d)
    pos = _data((4, 6), 2, rt.bfloat16, d, positive=True)
    img = _data((2, 4, 3, 3), 3, rt.bfloat16, d)
    target = rt.tensor([0, 5, 2, 3], device=d)
    return {
        "softmax": lambda lib, t: lib.softmax(t(x), -1),
        "log_softmax": lambda lib, t: lib.nn.functional.log_softmax(t(x), dim=-1),
        "layer_norm": lambda lib, t: lib.nn.functional.layer_norm(t(x), (6,)),
        "group_norm": lambda lib, t: lib.nn.functional.group_norm(t(img), 2),
        "cross_entropy": lambda lib, t: lib.nn.functional.cross_entropy(t(x), t(target)),
        "nll_loss": lambda lib, t: lib.nn.functional.nll_loss(t(x), t(target)),
        "mse_loss": lambda lib, t: lib.nn.functional.mse_loss(t(x), t(y)),
        "l1_loss": lambda lib, t: lib.nn.functional.l1_loss(t(x), t(y)),
        "smooth_l1_loss": lambda lib, t: lib.nn.functional.smooth_l1_loss(t(x), t(y)),
        "huber_loss": lambda lib, t: lib.nn.functional.huber_loss(t(x), t(y)),
        "kl_div": lambda lib, t: lib.nn.functional.kl_div(t(x), t(pos), reduction="batchmean"),
        "bce_with_logits": lambda lib, t: lib.nn.functional.binary_cross_entropy_with_logits(t(x), t(y).sigmoid()),
        "cosine_similarity": lambda lib, t: lib.nn.functional.cosine_similarity(t(x), t(y)),
        "norm": lambda lib, t: t(x).norm(),
        "sum": lambda lib, t: t(x).sum(),
        "prod": lambda lib, t: t(x).prod(1),
        "cumsum": lambda lib, t: t(x).cumsum(1),
        "logsumexp": lambda lib, t: t(x).logsumexp(1),
        "exp": lambda lib, t: t(x).exp(),
        "log": lambda lib, t: t(pos).log(),
        "log1p": lambda lib, t: t(pos).log1p(),
        "expm1": lambda lib, t: t(x).expm1(),
        "rsqrt": lambda lib, t: t(pos).rsqrt(),
        "reciprocal": lambda lib, t: t(pos).reciprocal(),
        "pow": lambda lib, t: t(pos).pow(t(y)),
        "pow scalar": lambda lib, t: t(pos) ** 2.5,
        "softplus": lambda lib, t: lib.nn.functional.softplus(t(x)),
    }


def _unchanged_ops(d):
    x, wide = _data((4, 6), 0, rt.bfloat16, d), _data((4, 6), 1, device=d)
    return {
        "relu": (lambda lib, t: lib.relu(t(x)), "bfloat16"),
        "gelu": (lambda lib, t: lib.nn.functional.gelu(t(x)), "bfloat16"),
        "mean": (lambda lib, t: t(x).mean(), "bfloat16"),
        "dropout eval": (lambda lib, t: lib.nn.functional.dropout(t(x), training=False), "bfloat16"),
        "add bf16 + f32": (lambda lib, t: t(x) + t(wide), "float32"),
        "cat": (lambda lib, t: lib.cat([t(x), t(wide)]), "float32"),
        "stack": (lambda lib, t: lib.stack([t(wide), t(x)]), "float32"),
        "addcmul": (lambda lib, t: lib.addcmul(t(wide), t(x), t(x)), "float32"),
    }


def _rt(t):
    return t


def _dtype_name(t):
    return str(t.dtype).split(".")[-1]


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_products_convolutions_and_attention_run_in_the_low_dtype(device, low):
    for name, op in _lower_ops(device).items():
        with rt.autocast(device, dtype=getattr(rt, low)):
            assert _dtype_name(op(rt, _rt)) == low, name
        assert op(rt, _rt).dtype == rt.float32, name


def test_range_hungry_ops_run_in_float32(device):
    with rt.autocast(device, dtype=rt.bfloat16):
        for name, op in _float32_ops(device).items():
            assert op(rt, _rt).dtype == rt.float32, name


def test_other_ops_keep_or_promote_their_input_dtypes(device):
    with rt.autocast(device, dtype=rt.bfloat16):
        for name, (op, expected) in _unchanged_ops(device).items():
            assert _dtype_name(op(rt, _rt)) == expected, name


def test_an_explicit_dtype_wins_over_the_float32_rule(device):
    x = _data((4, 6), 0, device=device)
    with rt.autocast(device, dtype=rt.bfloat16):
        assert x.softmax(-1, dtype=rt.bfloat16).dtype == rt.bfloat16
        assert F.log_softmax(x, dim=-1, dtype=rt.bfloat16).dtype == rt.bfloat16
        assert x.sum(dtype=rt.bfloat16).dtype == rt.bfloat16
        assert x.cumsum(0, dtype=rt.float64).dtype == rt.float64
        assert x.to(rt.bfloat16).sum().dtype == rt.float32


def test_the_policy_matches_pytorchs_cuda_autocast(device):
    """On the GPU, every op above gives PyTorch's output dtype (PyTorch's CPU lists differ from its
    CUDA lists; rustytorch follows the CUDA lists on every device)."""
    torch = pytest.importorskip("torch")
    if device != "cuda" or not torch.cuda.is_available():
        pytest.skip("PyTorch's CUDA autocast policy is compared on a GPU")

    def to_torch(t):
        return torch.from_numpy(to_numpy(t)).to(device=device, dtype=getattr(torch, _dtype_name(t)))

    tables = [(_lower_ops(device), rt.bfloat16, torch.bfloat16), (_float32_ops(device), rt.bfloat16, torch.bfloat16)]
    for table, ours, theirs in tables:
        for name, op in table.items():
            with rt.autocast(device, dtype=ours):
                mine = _dtype_name(op(rt, _rt))
            with torch.autocast(device, dtype=theirs):
                expected = str(op(torch, to_torch).dtype).split(".")[-1]
            assert mine == expected, name
    for name, (op, _) in _unchanged_ops(device).items():
        with rt.autocast(device, dtype=rt.bfloat16):
            mine = _dtype_name(op(rt, _rt))
        with torch.autocast(device, dtype=torch.bfloat16):
            assert mine == str(op(torch, to_torch).dtype).split(".")[-1], name


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_residual_arithmetic_of_float32_and_low_dtype_outputs_is_exact(device, low):
    """x + sublayer(x) with x float32 and the sublayer's output in the autocast dtype (and -, *, the
    16-bit operand first or second, broadcast): float32 results equal to float32 arithmetic on the
    16-bit values, bit for bit, and the 16-bit operand's gradient in its own dtype, as in PyTorch."""
    x = _data((3, 5, 8), 0, device=device)
    with rt.autocast(device, dtype=getattr(rt, low)):
        h = F.linear(x, _data((8, 8), 1, device=device))  # the autocast dtype
    bias = _data((8,), 2, device=device).to(getattr(rt, low))
    x64, h64, bias64 = (to_numpy(t.float()).astype(np.float32) for t in (x, h, bias))
    cases = {"x + h": (lambda: x + h, x64 + h64), "h - x": (lambda: h - x, h64 - x64),
             "x * bias": (lambda: x * bias, x64 * bias64), "bias + x": (lambda: bias + x, bias64 + x64)}
    for name, (op, expected) in cases.items():
        got = op()
        assert got.dtype == rt.float32, name
        assert np.array_equal(to_numpy(got), expected), name
    xs, hs = x.detach().requires_grad_(), h.detach().requires_grad_()
    (xs * hs).sum().backward()
    assert xs.grad.dtype == rt.float32 and hs.grad.dtype == getattr(rt, low)
    assert np.array_equal(to_numpy(xs.grad), h64)
    assert np.array_equal(to_numpy(hs.grad.float()), to_numpy(x.to(getattr(rt, low)).float()))  # rounded once


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_residual_arithmetic_matches_pytorchs(device, low):
    """The same float32 / 16-bit arithmetic in PyTorch: equal results and gradients, bit for bit."""
    torch = pytest.importorskip("torch")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("PyTorch has no GPU here")
    x = _data((3, 5, 8), 0, device=device)
    h, bias = _data((3, 5, 8), 1, device=device).to(getattr(rt, low)), _data((8,), 2, device=device).to(getattr(rt, low))

    def to_torch(t):
        return torch.from_numpy(to_numpy(t.float())).to(device=device, dtype=getattr(torch, _dtype_name(t)))

    for name, op in {"x + h": lambda x, h, b: x + h, "h - x": lambda x, h, b: h - x,
                     "x * b": lambda x, h, b: x * b, "b + x": lambda x, h, b: b + x}.items():
        ours = [t.detach().requires_grad_() for t in (x, h, bias)]
        theirs = [to_torch(t).requires_grad_() for t in (x, h, bias)]
        mine, expected = op(*ours), op(*theirs)
        assert np.array_equal(to_numpy(mine), expected.detach().cpu().numpy()), name
        mine.sum().backward()
        expected.sum().backward()
        for a, b in zip(ours, theirs):
            if b.grad is not None:
                assert _dtype_name(a.grad) == str(b.grad.dtype).split(".")[-1], name
                assert np.array_equal(to_numpy(a.grad.float()), b.grad.float().cpu().numpy()), name


class _Net(rt.nn.Module):
    def __init__(self, vocab=11, width=16):
        super().__init__()
        self.embed = rt.nn.Embedding(vocab, width)
        self.norm = rt.nn.LayerNorm(width)
        self.hidden = rt.nn.Linear(width, width)
        self.head = rt.nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied, as GPT models tie them

    def forward(self, ids):
        h = self.embed(ids)
        h = h + F.gelu(self.hidden(self.norm(h)))
        return self.head(self.norm(h))


def test_a_training_step_under_autocast_is_close_to_float32_and_grads_are_float32(device):
    rt.manual_seed(0)
    model = _Net().to(device)
    ids = rt.tensor(np.random.default_rng(1).integers(0, 11, (4, 7)), device=device)
    grads = {}
    for mode in ("bf16", "fp32"):
        model.zero_grad()
        with rt.autocast(device, dtype=rt.bfloat16, enabled=mode == "bf16"):
            logits = model(ids)
            loss = F.cross_entropy(logits.view(-1, 11), ids.view(-1))
        assert logits.dtype == (rt.bfloat16 if mode == "bf16" else rt.float32)
        assert loss.dtype == rt.float32
        loss.backward()
        grads[mode] = {n: p.grad.clone() for n, p in model.named_parameters()}
        assert all(g.dtype == rt.float32 for g in grads[mode].values())
    for name, g in grads["bf16"].items():
        scale = float(grads["fp32"][name].abs().max())
        assert_close(g, grads["fp32"][name], rtol=0, atol=0.05 * scale + 1e-6)


def test_loss_is_close_to_pytorchs_autocast_run_from_the_same_weights():
    """A linear-relu-linear classifier (ops whose rules PyTorch's CPU lists share with its CUDA
    lists) trained three SGD steps under CPU bfloat16 autocast in both libraries."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((32, 10)) * 0.3, rng.standard_normal((5, 32)) * 0.3
    x, y = rng.standard_normal((16, 10)), rng.integers(0, 5, 16)
    losses = {}
    for lib in (rt, torch):
        model = lib.nn.Sequential(lib.nn.Linear(10, 32, bias=False), lib.nn.ReLU(), lib.nn.Linear(32, 5, bias=False))
        with lib.no_grad():
            model[0].weight.copy_(lib.tensor(w1, dtype=lib.float32))
            model[2].weight.copy_(lib.tensor(w2, dtype=lib.float32))
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        xs, ys = lib.tensor(x, dtype=lib.float32), lib.tensor(y)
        losses[lib.__name__] = []
        for _ in range(3):
            with lib.autocast("cpu", dtype=lib.bfloat16):
                loss = lib.nn.functional.cross_entropy(model(xs), ys)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[lib.__name__].append(loss.item())
    np.testing.assert_allclose(losses["rustytorch"], losses["torch"], rtol=2e-2)


def test_each_weight_is_cast_once_per_region_and_the_cache_empties_on_exit(device):
    model = _Net().to(device)
    ids = rt.tensor([[1, 2, 3]], device=device)
    before = rt._C._autocast_stats()["casts"]
    with rt.autocast(device, dtype=rt.bfloat16):
        model(ids)
        first = rt._C._autocast_stats()["casts"] - before
        model(ids)  # the same weights again: all from the cache
        again = rt._C._autocast_stats()["casts"] - before - first
        cached = rt._C._autocast_stats()["cached"]
    # the hidden layer's weight and bias and the tied head weight (the embedding runs in float32)
    assert cached == 3
    # per forward: the cached weights once, plus the activations entering the two linears and
    # the layer norms' bf16 input (the second one)
    assert again == first - cached
    assert rt._C._autocast_stats()["cached"] == 0


def test_nested_regions_decorators_and_the_older_spellings(device):
    a, b = _data((2, 3), 0, device=device), _data((3, 2), 1, device=device)

    @rt.autocast(device, dtype=rt.bfloat16)
    def product():
        return a @ b

    assert product().dtype == rt.bfloat16
    assert not rt.is_autocast_enabled(device)
    with rt.amp.autocast(device, dtype=rt.bfloat16):
        assert rt.is_autocast_enabled(device) and rt.get_autocast_dtype(device) == rt.bfloat16
        with rt.autocast(device, enabled=False):
            assert (a @ b).dtype == rt.float32
            with rt.autocast(device, dtype=rt.float16):
                assert (a @ b).dtype == rt.float16
        assert (a @ b).dtype == rt.bfloat16
    assert (a @ b).dtype == rt.float32
    region = rt.autocast(device, dtype=rt.bfloat16)
    with region:
        with region:  # one object entered twice (a decorated recursive function)
            assert (a @ b).dtype == rt.bfloat16
        assert (a @ b).dtype == rt.bfloat16
    assert not rt.is_autocast_enabled(device)
    assert rt.cuda.amp.autocast is not None and rt.get_autocast_dtype("cuda") == rt.float16


def test_regions_belong_to_their_thread():
    seen = []
    with rt.autocast("cpu", dtype=rt.bfloat16):
        t = threading.Thread(target=lambda: seen.append(rt.is_autocast_enabled("cpu")))
        t.start()
        t.join()
        assert rt.is_autocast_enabled("cpu")
    assert seen == [False]


def test_checkpointed_blocks_replay_under_their_region(device):
    lin = rt.nn.Linear(8, 8).to(device)
    x = _data((4, 8), 0, device=device).requires_grad_()
    grads = []
    for use_checkpoint in (False, True):
        lin.zero_grad()
        with rt.autocast(device, dtype=rt.bfloat16):
            h = rt.utils.checkpoint.checkpoint(lin, x) if use_checkpoint else lin(x)
            loss = (h.float() ** 2).sum()
        loss.backward()
        grads.append(lin.weight.grad.clone())
    assert rt.equal(grads[0], grads[1])


def test_bad_regions_say_what_to_do():
    with pytest.raises(rt.ValueError, match="device_type"):
        rt.autocast("cuda:0")
    with pytest.raises(TypeError, match="device_type"):
        rt.autocast(rt.device("cpu"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        region = rt.autocast("cpu", dtype=rt.float32)
    assert any("not supported" in str(w.message) for w in caught)
    with region:
        assert not rt.is_autocast_enabled("cpu")
    p = _data((3,), 0).sigmoid()
    with rt.autocast("cpu", dtype=rt.bfloat16):
        with pytest.raises(rt.DTypeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, p)
    assert F.binary_cross_entropy(p, p).dtype == rt.float32
