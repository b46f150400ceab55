"""nn: module registration, state_dict keys and round trips, train/eval, to(), layers against
numpy references, init statistics, clip_grad_norm_ and attention (float32 under allow_tf32 too)."""
import math
from collections import OrderedDict

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn
from rustytorch.nn import functional as F
from conftest import assert_close, to_numpy


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.head(self.drop(F.relu(self.bn(self.conv(x)))))


def test_registration_and_state_dict_keys():
    net = Net()
    keys = list(net.state_dict())
    assert keys == ["conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                    "bn.num_batches_tracked", "head.1.weight", "head.1.bias"]
    assert [n for n, _ in net.named_parameters()] == ["conv.weight", "conv.bias", "bn.weight", "bn.bias",
                                                      "head.1.weight", "head.1.bias"]
    assert sum(p.numel() for p in net.parameters()) == 4 * 9 + 4 + 4 + 4 + 64 * 3 + 3
    assert len(list(net.children())) == 4 and len(list(net.modules())) == 7
    assert "Linear(in_features=64, out_features=3, bias=True)" in repr(net)


def test_state_dict_round_trip_and_strictness():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and np.array_equal(to_numpy(va), to_numpy(vb))
    state = a.state_dict()
    state["extra"] = rt.zeros(1)
    with pytest.raises(RuntimeError, match="unexpected"):
        b.load_state_dict(state)
    missing, unexpected = b.load_state_dict(state, strict=False)
    assert missing == [] and unexpected == ["extra"]
    bad = a.state_dict()
    bad["conv.weight"] = rt.zeros(1)
    with pytest.raises(RuntimeError, match="shape"):
        b.load_state_dict(bad)


def test_train_eval_batchnorm_and_dropout():
    rt.manual_seed(0)
    net = Net()
    x = rt.randn(8, 1, 4, 4)
    net.train()
    net(x)
    assert net.bn.num_batches_tracked.item() == 1
    assert not np.allclose(to_numpy(net.bn.running_mean), 0)
    net.eval()
    assert not net.bn.training and not net.drop.training
    np.testing.assert_array_equal(to_numpy(net(x)), to_numpy(net(x)))


def test_module_to_dtype_and_zero_grad(device):
    net = Net().to(device).double()
    assert all(p.dtype == rt.float64 and p.device.type == device for p in net.parameters())
    assert net.bn.num_batches_tracked.dtype == rt.int64
    out = net(rt.randn(2, 1, 4, 4, dtype=rt.float64, device=device)).sum()
    out.backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_layers_against_numpy():
    rt.manual_seed(1)
    lin = nn.Linear(5, 3).double()
    x = np.random.default_rng(0).standard_normal((4, 5))
    w, b = to_numpy(lin.weight), to_numpy(lin.bias)
    assert_close(lin(rt.tensor(x)), x @ w.T + b, rtol=1e-12)
    bound = 1 / math.sqrt(5)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    ln = nn.LayerNorm(5).double()
    z = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    assert_close(ln(rt.tensor(x)), z, rtol=1e-8, atol=1e-10)
    emb = nn.Embedding(10, 3, padding_idx=0)
    assert to_numpy(emb.weight)[0].tolist() == [0, 0, 0]
    assert emb(rt.tensor([[1, 2], [0, 9]])).shape == (2, 2, 3)
    assert_close(nn.ReLU()(rt.tensor(x)), np.maximum(x, 0))
    assert_close(nn.Sigmoid()(rt.tensor(x)), 1 / (1 + np.exp(-x)), rtol=1e-12)
    ce = nn.CrossEntropyLoss(label_smoothing=0.1)
    logits, target = rt.tensor(x), rt.tensor([0, 4, 2, 1])
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    expected = np.mean(-0.9 * logp[np.arange(4), [0, 4, 2, 1]] - 0.1 * logp.mean(1))
    assert_close(ce(logits, target), expected, rtol=1e-10)
    assert_close(nn.MSELoss()(logits, logits * 0), np.mean(x * x), rtol=1e-12)


def test_containers():
    seq = nn.Sequential(OrderedDict([("a", nn.Linear(2, 3)), ("act", nn.Tanh()), ("b", nn.Linear(3, 1))]))
    assert list(seq.state_dict()) == ["a.weight", "a.bias", "b.weight", "b.bias"]
    assert seq(rt.randn(4, 2)).shape == (4, 1) and len(seq) == 3 and isinstance(seq[1], nn.Tanh)
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(list(ml.parameters())) == 6 and len(ml[1:]) == 2
    md = nn.ModuleDict({"x": nn.Linear(1, 1)})
    assert "x" in md and list(md.state_dict()) == ["x.weight", "x.bias"]


def test_init_statistics():
    rt.manual_seed(3)
    w = rt.empty(512, 256)
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(to_numpy(w).std() - math.sqrt(2 / 256)) < 0.005
    nn.init.xavier_uniform_(w)
    bound = math.sqrt(6 / (512 + 256))
    assert np.abs(to_numpy(w)).max() <= bound + 1e-7 and to_numpy(w).std() > bound / 2
    nn.init.trunc_normal_(w, std=1.0, a=-1.0, b=1.0)
    assert np.abs(to_numpy(w)).max() <= 1.0
    nn.init.zeros_(w)
    assert to_numpy(w).sum() == 0


def test_clip_grad_norm():
    p1, p2 = nn.Parameter(rt.zeros(3)), nn.Parameter(rt.zeros(4))
    p1.grad, p2.grad = rt.full((3,), 3.0), rt.full((4,), 4.0)
    total = nn.utils.clip_grad_norm_([p1, p2], 1.0)
    assert total.item() == pytest.approx(math.sqrt(27 + 64), rel=1e-6)
    norm = math.sqrt((to_numpy(p1.grad) ** 2).sum() + (to_numpy(p2.grad) ** 2).sum())
    assert norm == pytest.approx(1.0, rel=1e-4)


def test_scaled_dot_product_attention_causal():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)) for _ in range(3))
    out = F.scaled_dot_product_attention(rt.tensor(q), rt.tensor(k), rt.tensor(v), is_causal=True)
    scores = q @ k.transpose(0, 1, 3, 2) / 2.0
    scores = np.where(np.tril(np.ones((5, 5), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    assert_close(out, weights @ v, rtol=1e-10)


def test_grouped_query_attention(device):
    """enable_gqa as a Llama-style block calls it: 8 query heads over 2 key/value heads, causal, bf16
    and float64, forward and gradients against repeating each key/value head for its 4 query heads."""
    rng = np.random.default_rng(6)
    B, Hq, Hkv, T, D = 2, 8, 2, 19, 16
    q, k, v, g = rng.standard_normal((B, Hq, T, D)), rng.standard_normal((B, Hkv, T, D)), \
        rng.standard_normal((B, Hkv, T, D)), rng.standard_normal((B, Hq, T, D))
    for dtype, tol in ((rt.float64, 1e-10), (rt.bfloat16, 3e-2)):
        def leaves():
            return [rt.tensor(a, dtype=dtype, device=device, requires_grad=True) for a in (q, k, v)]
        tq, tk, tv = leaves()
        out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True, enable_gqa=True)
        out.backward(rt.tensor(g, dtype=dtype, device=device))
        rq, rk, rv = leaves()
        ref = F.scaled_dot_product_attention(rq, rk.repeat_interleave(4, dim=1), rv.repeat_interleave(4, dim=1),
                                             is_causal=True)
        ref.backward(rt.tensor(g, dtype=dtype, device=device))
        assert out.shape == (B, Hq, T, D)
        for got, want in ((out, ref), (tq.grad, rq.grad), (tk.grad, rk.grad), (tv.grad, rv.grad)):
            assert_close(got, to_numpy(want), rtol=tol, atol=tol)
    mask = rt.tensor(rng.standard_normal((B, 1, T, T)), device=device)
    masked = F.scaled_dot_product_attention(rt.tensor(q, device=device), rt.tensor(k, device=device),
                                            rt.tensor(v, device=device), attn_mask=mask, enable_gqa=True)
    expected = F.scaled_dot_product_attention(rt.tensor(q, device=device),
                                              rt.tensor(k, device=device).repeat_interleave(4, dim=1),
                                              rt.tensor(v, device=device).repeat_interleave(4, dim=1), attn_mask=mask)
    assert_close(masked, to_numpy(expected), rtol=1e-10)
    with pytest.raises(rt.ShapeError, match="multiple of the key and value heads"):
        F.scaled_dot_product_attention(rt.randn(1, 3, 4, 8), rt.randn(1, 2, 4, 8), rt.randn(1, 2, 4, 8),
                                       enable_gqa=True)


def test_grouped_query_attention_like_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    q, k, v = rng.standard_normal((2, 6, 9, 8)), rng.standard_normal((2, 3, 9, 8)), rng.standard_normal((2, 3, 9, 8))
    theirs = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                                              is_causal=True, enable_gqa=True)
    ours = F.scaled_dot_product_attention(rt.tensor(q), rt.tensor(k), rt.tensor(v), is_causal=True, enable_gqa=True)
    assert_close(ours, theirs.numpy(), rtol=1e-10)


def test_float32_attention_follows_allow_tf32(device):
    """float32 attention as a GPT block calls it (heads split off one projection by view and
    transpose, causal) with torch.backends.cuda.matmul.allow_tf32 set as scripts set it: exact
    float32 without it, TF32's precision with it (on CUDA it then runs on tensor cores and differs
    from the exact result), forward and input gradient against float64."""
    B, T, H, D = 2, 70, 3, 64
    x = np.random.default_rng(4).standard_normal((B, T, 3 * H * D))
    g = np.random.default_rng(5).standard_normal((B, H, T, D))

    def run(dtype, dev, allow_tf32):
        saved = rt.backends.cuda.matmul.allow_tf32
        rt.backends.cuda.matmul.allow_tf32 = allow_tf32
        try:
            xt = rt.tensor(x, dtype=dtype, device=dev, requires_grad=True)
            q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in xt.split(H * D, dim=2))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.backward(rt.tensor(g, dtype=dtype, device=dev))
            return to_numpy(out), to_numpy(xt.grad)
        finally:
            rt.backends.cuda.matmul.allow_tf32 = saved

    reference = run(rt.float64, "cpu", False)
    exact, tf32 = run(rt.float32, device, False), run(rt.float32, device, True)
    for got, want in zip(exact, reference):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    for got, want in zip(tf32, reference):
        np.testing.assert_allclose(got, want, rtol=3e-3, atol=3e-3)
    if device == "cuda":
        assert not np.array_equal(tf32[0], exact[0])
