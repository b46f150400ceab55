"""nn.LSTM, GRU, LSTMCell, GRUCell, MultiheadAttention, TransformerEncoderLayer and
TransformerEncoder: state_dict keys, initialization, numpy float64 references, gradcheck, dropout
in train() and eval(), bad input, and (when torch is importable) outputs and every parameter's
gradient against PyTorch's modules holding the same weights."""
import copy
import math

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn
from conftest import assert_close, to_numpy


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def params_of(module):
    return {k: to_numpy(v) for k, v in module.state_dict().items()}


def leaf(array, device):
    return rt.tensor(array).to(device).requires_grad_()


def additive(mask):
    """A numpy mask as the scores' addend: -inf where a bool mask is True, a float mask as it is."""
    return np.where(mask, -np.inf, 0.0) if mask.dtype == bool else mask


# ---- numpy float64 references ---------------------------------------------------------------------

def rnn_reference(mode, x, p, num_layers, bidirectional, h0, c0=None):
    """A stacked LSTM or GRU over x [T, B, in] step by step: (output, h_n, c_n)."""
    steps, directions = x.shape[0], 2 if bidirectional else 1
    hidden = p["weight_hh_l0"].shape[1]
    h_n, c_n, layer_input = [], [], x
    for layer in range(num_layers):
        outputs = []
        for d in range(directions):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w_ih, w_hh = p["weight_ih" + sfx], p["weight_hh" + sfx]
            b_ih, b_hh = p.get("bias_ih" + sfx, 0.0), p.get("bias_hh" + sfx, 0.0)
            h = h0[layer * directions + d]
            c = None if c0 is None else c0[layer * directions + d]
            out = np.zeros((steps,) + h.shape)
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                gx, gh = layer_input[t] @ w_ih.T + b_ih, h @ w_hh.T + b_hh
                if mode == "LSTM":
                    i, f, g, o = np.split(gx + gh, 4, -1)
                    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
                    h = sigmoid(o) * np.tanh(c)
                else:
                    r = sigmoid(gx[:, :hidden] + gh[:, :hidden])
                    z = sigmoid(gx[:, hidden:2 * hidden] + gh[:, hidden:2 * hidden])
                    n = np.tanh(gx[:, 2 * hidden:] + r * gh[:, 2 * hidden:])
                    h = (1 - z) * n + z * h
                out[t] = h
            outputs.append(out)
            h_n.append(h)
            c_n.append(c)
        layer_input = np.concatenate(outputs, -1)
    return layer_input, np.stack(h_n), None if c0 is None else np.stack(c_n)


def mha_reference(q, k, v, p, heads, attn_mask=None, key_padding_mask=None):
    """Packed-projection attention of q [L, B, E] over k, v [S, B, E]: (output, per-head weights)."""
    e = q.shape[-1]
    w, b = p["in_proj_weight"], p["in_proj_bias"]
    proj = [x @ w[i * e:(i + 1) * e].T + b[i * e:(i + 1) * e] for i, x in enumerate((q, k, v))]
    qh, kh, vh = (t.reshape(t.shape[0], t.shape[1], heads, e // heads).transpose(1, 2, 0, 3) for t in proj)
    scores = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(e // heads)
    if attn_mask is not None:
        scores = scores + additive(attn_mask)
    if key_padding_mask is not None:
        scores = scores + additive(key_padding_mask)[:, None, None, :]
    weights = softmax(scores)
    out = (weights @ vh).transpose(2, 0, 1, 3).reshape(q.shape)
    return out @ p["out_proj.weight"].T + p["out_proj.bias"], weights


def layer_norm(x, weight, bias):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * weight + bias


# ---- state dict keys and initialization -----------------------------------------------------------

LSTM_KEYS = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
             "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse", "weight_ih_l1", "weight_hh_l1",
             "bias_ih_l1", "bias_hh_l1", "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse",
             "bias_hh_l1_reverse"]
ENCODER_LAYER_KEYS = ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                      "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                      "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]


def test_state_dict_keys_and_shapes(device):
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True).to(device)
    assert list(lstm.state_dict()) == LSTM_KEYS
    shapes = {k: tuple(v.shape) for k, v in lstm.state_dict().items()}
    assert shapes["weight_ih_l0"] == (16, 3) and shapes["weight_ih_l1_reverse"] == (16, 8)
    assert shapes["weight_hh_l1"] == (16, 4) and shapes["bias_hh_l0_reverse"] == (16,)
    assert [tuple(w.shape) for w in lstm.all_weights[1]] == [(16, 3), (16, 4), (16,), (16,)]
    assert lstm.all_weights[1][0] is lstm.weight_ih_l0_reverse and len(lstm.all_weights) == 4
    gru = nn.GRU(3, 4, num_layers=2, bias=False)
    assert list(gru.state_dict()) == ["weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"]
    assert tuple(gru.weight_ih_l1.shape) == (12, 4)
    assert list(nn.LSTMCell(3, 4).state_dict()) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert list(nn.GRUCell(3, 4, bias=False).state_dict()) == ["weight_ih", "weight_hh"]
    assert list(nn.MultiheadAttention(8, 2).state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                                              "out_proj.bias"]
    mha = nn.MultiheadAttention(8, 2, add_bias_kv=True, kdim=3, vdim=5)
    assert list(mha.state_dict()) == ["q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "bias_k",
                                      "bias_v", "out_proj.weight", "out_proj.bias"]
    assert tuple(mha.k_proj_weight.shape) == (8, 3) and tuple(mha.v_proj_weight.shape) == (8, 5)
    assert mha.in_proj_weight is None and tuple(mha.bias_k.shape) == (1, 1, 8)
    assert list(nn.MultiheadAttention(8, 2, bias=False).state_dict()) == ["in_proj_weight", "out_proj.weight"]
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2, norm=nn.LayerNorm(8))
    assert list(encoder.state_dict()) == ([f"layers.0.{k}" for k in ENCODER_LAYER_KEYS] +
                                          [f"layers.1.{k}" for k in ENCODER_LAYER_KEYS] + ["norm.weight", "norm.bias"])
    assert repr(nn.LSTM(3, 4, 2, batch_first=True, bidirectional=True)) == \
        "LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True)"


def test_initialization():
    rt.manual_seed(0)
    bound = 1 / math.sqrt(20)
    for module in (nn.LSTM(10, 20, num_layers=2, bidirectional=True), nn.GRU(10, 20), nn.LSTMCell(10, 20),
                   nn.GRUCell(10, 20)):
        values = np.concatenate([to_numpy(p).ravel() for p in module.parameters()])
        assert np.abs(values).max() <= bound and values.std() > bound / 2
    mha = nn.MultiheadAttention(16, 4, add_bias_kv=True)
    w = to_numpy(mha.in_proj_weight)
    assert np.abs(w).max() <= math.sqrt(6 / (16 + 48)) and w.std() > math.sqrt(6 / 64) / 3
    assert not to_numpy(mha.in_proj_bias).any() and not to_numpy(mha.out_proj.bias).any()
    assert to_numpy(mha.bias_k).std() > 0
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2)
    first, second = encoder.layers[0], encoder.layers[1]
    assert first is not second and first.linear1.weight is not second.linear1.weight
    assert np.array_equal(to_numpy(first.linear1.weight), to_numpy(second.linear1.weight))
    with rt.no_grad():
        first.linear1.weight.fill_(1.0)
    assert not np.array_equal(to_numpy(first.linear1.weight), to_numpy(second.linear1.weight))


# ---- LSTM and GRU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("layout", ["seq_first", "batch_first", "unbatched"])
@pytest.mark.parametrize("given_state", [True, False])
def test_rnn_against_numpy(device, mode, layout, given_state):
    rt.manual_seed(1)
    rng = np.random.default_rng(1)
    module = getattr(nn, mode)(3, 4, num_layers=2, bidirectional=True, batch_first=layout == "batch_first")
    module = module.double().to(device)
    batch = 1 if layout == "unbatched" else 2
    x = rng.standard_normal((5, batch, 3))
    h0, c0 = rng.standard_normal((2, 4, batch, 4)) if given_state else np.zeros((2, 4, batch, 4))
    lstm = mode == "LSTM"
    out, h_n, c_n = rnn_reference(mode, x, params_of(module), 2, True, h0, c0 if lstm else None)

    def arrange(a, state=False):  # from the reference's [T or layers, B, features] to the layout's
        return a[:, 0] if layout == "unbatched" else a.transpose(1, 0, 2) if layout == "batch_first" and not state \
            else a

    hx = None
    if given_state:
        h, c = (rt.tensor(arrange(a, state=True)).to(device) for a in (h0, c0))
        hx = (h, c) if lstm else h
    got, state = module(rt.tensor(arrange(x)).to(device), hx)
    assert_close(got, arrange(out), rtol=1e-10, atol=1e-12)
    for mine, expected in zip(state if lstm else (state,), (h_n, c_n)):
        assert_close(mine, arrange(expected, state=True), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_cells_against_numpy(device, mode):
    rt.manual_seed(2)
    rng = np.random.default_rng(2)
    cell = getattr(nn, mode + "Cell")(3, 4).double().to(device)
    p = {k + "_l0": v for k, v in params_of(cell).items()}
    x, h, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    _, h1, c1 = rnn_reference(mode, x[None], p, 1, False, h[None], c[None] if mode == "LSTM" else None)
    state = (rt.tensor(h).to(device), rt.tensor(c).to(device)) if mode == "LSTM" else rt.tensor(h).to(device)
    got = cell(rt.tensor(x).to(device), state)
    if mode == "LSTM":
        assert_close(got[0], h1[0], rtol=1e-10, atol=1e-12)
        assert_close(got[1], c1[0], rtol=1e-10, atol=1e-12)
        unbatched = cell(rt.tensor(x[0]).to(device), tuple(s[0] for s in state))
        assert unbatched[0].shape == (4,) and unbatched[1].shape == (4,)
        assert_close(unbatched[0], h1[0, 0], rtol=1e-10, atol=1e-12)
    else:
        assert_close(got, h1[0], rtol=1e-10, atol=1e-12)
        assert_close(cell(rt.tensor(x[0]).to(device), state[0]), h1[0, 0], rtol=1e-10, atol=1e-12)
    zero_state = cell(rt.tensor(x).to(device))
    _, h0, _ = rnn_reference(mode, x[None], p, 1, False, np.zeros((1, 2, 4)), np.zeros((1, 2, 4)))
    assert_close(zero_state[0] if mode == "LSTM" else zero_state, h0[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "LSTMCell", "GRUCell"])
def test_rnn_gradcheck(device, mode):
    rt.manual_seed(3)
    rng = np.random.default_rng(3)
    cell = mode.endswith("Cell")
    module = getattr(nn, mode)(2, 2) if cell else getattr(nn, mode)(2, 2, num_layers=2, bidirectional=True,
                                                                     batch_first=True)
    module = module.double().to(device)
    x = leaf(rng.standard_normal((2, 2) if cell else (2, 3, 2)), device)
    h = leaf(rng.standard_normal((2, 2) if cell else (4, 2, 2)), device)
    c = leaf(rng.standard_normal(tuple(h.shape)), device)
    lstm = mode.startswith("LSTM")

    def flat_outputs(x, h, c):
        out = module(x, (h, c) if lstm else h)
        parts = (list(out) if lstm else [out]) if cell else [out[0], *out[1]] if lstm else list(out)
        return rt.cat([t.reshape(-1) for t in parts])

    weights = rt.tensor(rng.standard_normal(flat_outputs(x, h, c).numel())).to(device)

    def fn(x, h, c, *params):  # gradcheck perturbs the parameters in place, where the module reads them
        return (flat_outputs(x, h, c) * weights).sum().cpu()

    assert rt.autograd.gradcheck(fn, (x, h, c, *module.parameters()))


def test_rnn_dropout_train_and_eval(device):
    rt.manual_seed(4)
    lstm = nn.LSTM(4, 8, num_layers=2, dropout=0.5).to(device)
    plain = nn.LSTM(4, 8, num_layers=2).to(device)
    plain.load_state_dict(lstm.state_dict())
    x = rt.randn(6, 3, 4).to(device)
    train_a, train_b = to_numpy(lstm(x)[0]), to_numpy(lstm(x)[0])
    assert not np.allclose(train_a, train_b)
    lstm.eval()
    assert np.array_equal(to_numpy(lstm(x)[0]), to_numpy(lstm(x)[0]))
    assert_close(lstm(x)[0], plain(x)[0], rtol=0, atol=0)
    with pytest.warns(UserWarning, match="num_layers=1"):
        nn.GRU(4, 8, dropout=0.5)


def test_rnn_bad_input(device):
    lstm = nn.LSTM(3, 4, num_layers=2).to(device)
    with pytest.raises(rt.ShapeError, match=r"LSTM: expected a 2-D \(unbatched\) or 3-D input, got 4-D"):
        lstm(rt.zeros(1, 2, 3, 4).to(device))
    with pytest.raises(rt.ShapeError, match="input_size. Expected 3, got 5"):
        lstm(rt.zeros(2, 1, 5).to(device))
    with pytest.raises(rt.ShapeError, match=r"hidden\[1\] of shape \[2, 1, 4\], got \[1, 1, 4\]"):
        lstm(rt.zeros(2, 1, 3).to(device), (rt.zeros(2, 1, 4).to(device), rt.zeros(1, 1, 4).to(device)))
    with pytest.raises(rt.ShapeError, match="unbatched 2-D input the hidden state must be 2-D"):
        lstm(rt.zeros(2, 3).to(device), (rt.zeros(2, 1, 4).to(device),) * 2)
    with pytest.raises(TypeError, match=r"hx must be a tuple \(h, c\)"):
        lstm(rt.zeros(2, 1, 3).to(device), rt.zeros(2, 1, 4).to(device))
    with pytest.raises(rt.DTypeError, match="LSTM: input dtype rustytorch.float64 does not match weight dtype rustytorch.float32"):
        lstm(rt.zeros(2, 1, 3, dtype=rt.float64).to(device))
    with pytest.raises(rt.ValueError, match="sequence length larger than 0"):
        lstm(rt.zeros(0, 1, 3).to(device))
    assert lstm(rt.zeros(2, 0, 3).to(device))[0].shape == (2, 0, 4)
    with pytest.raises(rt.ShapeError, match=r"GRU: expected hidden of shape \[1, 2, 4\], got \[1, 3, 4\]"):
        nn.GRU(3, 4).to(device)(rt.zeros(5, 2, 3).to(device), rt.zeros(1, 3, 4).to(device))
    with pytest.raises(rt.ShapeError, match=r"GRUCell: expected a hidden state of shape \[2, 4\]"):
        nn.GRUCell(3, 4).to(device)(rt.zeros(2, 3).to(device), rt.zeros(4).to(device))
    with pytest.raises(rt.ShapeError, match="LSTMCell: expected a 1-D"):
        nn.LSTMCell(3, 4).to(device)(rt.zeros(1, 2, 3).to(device))
    with pytest.raises(rt.ValueError, match="proj_size=2 is not supported"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(rt.ValueError, match=r"dropout should be a number in range \[0, 1\]"):
        nn.GRU(3, 4, num_layers=2, dropout=1.5)
    with pytest.raises(rt.ValueError, match="hidden_size must be greater than zero, got 0"):
        nn.LSTM(3, 0)
    with pytest.raises(TypeError, match="num_layers should be of type int"):
        nn.GRU(3, 4, num_layers=2.0)


# ---- MultiheadAttention ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["seq_first", "batch_first", "unbatched"])
@pytest.mark.parametrize("masks", [None, "bool", "float"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_against_numpy(device, layout, masks, need_weights):
    rt.manual_seed(5)
    rng = np.random.default_rng(5)
    mha = nn.MultiheadAttention(8, 2, batch_first=layout == "batch_first").double().to(device)
    with rt.no_grad():
        mha.in_proj_bias.copy_(rt.tensor(rng.standard_normal(24)))
    batch = 1 if layout == "unbatched" else 2
    q, k, v = rng.standard_normal((3, batch, 8)), rng.standard_normal((4, batch, 8)), rng.standard_normal((4, batch, 8))
    attn_mask = key_padding_mask = None
    if masks == "bool":
        attn_mask, key_padding_mask = rng.random((3, 4)) < 0.3, rng.random((batch, 4)) < 0.3
        attn_mask[:, 0] = key_padding_mask[:, 0] = False
    elif masks == "float":
        attn_mask, key_padding_mask = rng.standard_normal((3, 4)), rng.standard_normal((batch, 4))
    out, weights = mha_reference(q, k, v, params_of(mha), 2, attn_mask, key_padding_mask)

    def arrange(a):
        return a[:, 0] if layout == "unbatched" else a.transpose(1, 0, 2) if layout == "batch_first" else a

    kwargs = {}
    if masks:
        kwargs = {"attn_mask": rt.tensor(attn_mask).to(device),
                  "key_padding_mask": rt.tensor(key_padding_mask[0] if layout == "unbatched" else
                                                key_padding_mask).to(device)}
    got, got_weights = mha(*(rt.tensor(arrange(a)).to(device) for a in (q, k, v)), need_weights=need_weights,
                           **kwargs)
    assert_close(got, arrange(out), rtol=1e-10, atol=1e-12)
    if not need_weights:
        assert got_weights is None
        return
    assert_close(got_weights, weights.mean(1)[0] if layout == "unbatched" else weights.mean(1), rtol=1e-10,
                 atol=1e-12)
    per_head = mha(*(rt.tensor(arrange(a)).to(device) for a in (q, k, v)), average_attn_weights=False, **kwargs)[1]
    assert_close(per_head, weights[0] if layout == "unbatched" else weights, rtol=1e-10, atol=1e-12)


def test_mha_causal_and_3d_masks(device):
    rt.manual_seed(6)
    rng = np.random.default_rng(6)
    mha = nn.MultiheadAttention(8, 2).double().to(device)
    x = rt.tensor(rng.standard_normal((5, 2, 8))).to(device)
    causal = np.triu(np.ones((5, 5), bool), 1)
    reference, _ = mha_reference(to_numpy(x), to_numpy(x), to_numpy(x), params_of(mha), 2, causal)
    mask = rt.tensor(causal).to(device)
    for need_weights in (True, False):
        got = mha(x, x, x, attn_mask=mask, is_causal=True, need_weights=need_weights)[0]
        assert_close(got, reference, rtol=1e-10, atol=1e-12)
    per_batch_head = rng.standard_normal((4, 5, 5))
    reference = mha_reference(to_numpy(x), to_numpy(x), to_numpy(x), params_of(mha), 2,
                              per_batch_head.reshape(2, 2, 5, 5))[0]
    assert_close(mha(x, x, x, attn_mask=rt.tensor(per_batch_head).to(device))[0], reference, rtol=1e-10,
                 atol=1e-12)


@pytest.mark.parametrize("config", [{}, {"kdim": 3, "vdim": 5, "add_bias_kv": True, "add_zero_attn": True}])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_gradcheck(device, config, need_weights):
    rt.manual_seed(7)
    rng = np.random.default_rng(7)
    mha = nn.MultiheadAttention(4, 2, batch_first=True, **config).double().to(device)
    q = leaf(rng.standard_normal((2, 2, 4)), device)
    k = leaf(rng.standard_normal((2, 3, config.get("kdim", 4))), device)
    v = leaf(rng.standard_normal((2, 3, config.get("vdim", 4))), device)
    key_padding_mask = rt.tensor([[False, True, False], [False, False, False]]).to(device)
    attn_mask = rt.tensor(rng.standard_normal((2, 3))).to(device)
    out_weights = rt.tensor(rng.standard_normal((2, 2, 4))).to(device)

    def fn(q, k, v, *params):
        out, weights = mha(q, k, v, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                           need_weights=need_weights)
        loss = (out * out_weights).sum()
        return (loss if weights is None else loss + (weights * weights).sum()).cpu()

    assert rt.autograd.gradcheck(fn, (q, k, v, *mha.parameters()))


def test_mha_dropout_train_and_eval(device):
    rt.manual_seed(8)
    mha = nn.MultiheadAttention(8, 2, dropout=0.5).to(device)
    x = rt.randn(6, 2, 8).to(device)
    for need_weights in (True, False):
        a, b = mha(x, x, x, need_weights=need_weights)[0], mha(x, x, x, need_weights=need_weights)[0]
        assert not np.allclose(to_numpy(a), to_numpy(b))
    weights = to_numpy(mha(x, x, x)[1])
    assert not np.allclose(weights.sum(-1), 1.0)  # dropped and rescaled probabilities
    mha.eval()
    eval_out, eval_weights = mha(x, x, x)
    assert_close(eval_weights.sum(-1), np.ones((2, 6)), rtol=1e-5)
    mha.dropout = 0.0
    assert_close(mha(x, x, x, need_weights=False)[0], eval_out, rtol=1e-5, atol=1e-6)


def test_mha_bad_input(device):
    mha = nn.MultiheadAttention(8, 2).to(device)
    x = rt.zeros(3, 2, 8).to(device)
    with pytest.raises(rt.ValueError, match="embed_dim 8 must be divisible by num_heads 3"):
        nn.MultiheadAttention(8, 3)
    with pytest.raises(rt.ShapeError, match=r"3-D \(batched\) or 2-D \(unbatched\).*key \[3, 8\]"):
        mha(x, rt.zeros(3, 8).to(device), x)
    with pytest.raises(rt.ShapeError, match=r"with 8, 8 and 8 features.*value \[3, 2, 5\]"):
        mha(x, x, rt.zeros(3, 2, 5).to(device))
    with pytest.raises(rt.ShapeError, match="query's batch size"):
        mha(x, rt.zeros(3, 1, 8).to(device), rt.zeros(3, 1, 8).to(device))
    with pytest.raises(rt.ShapeError, match=r"key_padding_mask must have shape \[2, 3\].*got \[3, 2\]"):
        mha(x, x, x, key_padding_mask=rt.zeros(3, 2, dtype=rt.bool).to(device))
    with pytest.raises(rt.ShapeError, match=r"attn_mask must have shape \[3, 3\] or \[4, 3, 3\].*got \[2, 3, 3\]"):
        mha(x, x, x, attn_mask=rt.zeros(2, 3, 3).to(device))
    with pytest.raises(rt.DTypeError, match="only bool and floating types of attn_mask are supported, got rustytorch.int64"):
        mha(x, x, x, attn_mask=rt.zeros(3, 3, dtype=rt.int64).to(device))
    with pytest.raises(rt.ValueError, match="is_causal=True .* needs that attn_mask"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(TypeError, match="query must be a tensor"):
        mha([1.0], x, x)


# ---- TransformerEncoderLayer and TransformerEncoder -----------------------------------------------

def test_encoder_layer_against_numpy(device):
    rt.manual_seed(9)
    rng = np.random.default_rng(9)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0).double().to(device)
    with rt.no_grad():
        for p in (layer.norm1.weight, layer.norm1.bias, layer.norm2.weight, layer.norm2.bias):
            p.copy_(rt.tensor(rng.standard_normal(8)))
    p = params_of(layer)
    attn = {k[len("self_attn."):]: v for k, v in p.items() if k.startswith("self_attn.")}
    x = rng.standard_normal((4, 2, 8))
    key_padding_mask = np.array([[False, False, True, True], [False, False, False, False]])
    a, _ = mha_reference(x, x, x, attn, 2, key_padding_mask=key_padding_mask)
    h = layer_norm(x + a, p["norm1.weight"], p["norm1.bias"])
    ff = np.maximum(h @ p["linear1.weight"].T + p["linear1.bias"], 0) @ p["linear2.weight"].T + p["linear2.bias"]
    expected = layer_norm(h + ff, p["norm2.weight"], p["norm2.bias"])
    got = layer(rt.tensor(x).to(device), src_key_padding_mask=rt.tensor(key_padding_mask).to(device))
    assert_close(got, expected, rtol=1e-9, atol=1e-10)
    layer.norm_first = True
    n1 = layer_norm(x, p["norm1.weight"], p["norm1.bias"])
    h = x + mha_reference(n1, n1, n1, attn, 2)[0]
    n2 = layer_norm(h, p["norm2.weight"], p["norm2.bias"])
    expected = h + np.maximum(n2 @ p["linear1.weight"].T + p["linear1.bias"], 0) @ p["linear2.weight"].T + \
        p["linear2.bias"]
    assert_close(layer(rt.tensor(x).to(device)), expected, rtol=1e-9, atol=1e-10)


def test_encoder_masks_and_causal_detection(device):
    rt.manual_seed(10)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu", batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8)).double().to(device)
    x = rt.randn(2, 5, 8, dtype=rt.float64).to(device)
    bool_causal = rt.tensor(np.triu(np.ones((5, 5), bool), 1)).to(device)
    float_causal = rt.tensor(np.triu(np.full((5, 5), -np.inf), 1)).to(device)
    by_bool, by_float = encoder(x, mask=bool_causal), encoder(x, mask=float_causal)
    assert_close(by_bool, by_float, rtol=1e-12, atol=1e-12)
    assert_close(encoder(x, mask=float_causal, is_causal=True), by_bool, rtol=1e-12, atol=1e-12)
    # layer by layer with an explicit non-causal mask equal to the causal one but float -1e9
    soft = rt.tensor(np.triu(np.full((5, 5), -1e9), 1)).to(device)
    manual = x
    for each in encoder.layers:
        manual = each(manual, src_mask=soft)
    assert_close(encoder.norm(manual), by_bool, rtol=1e-9, atol=1e-10)
    # without the mask the result differs
    assert not np.allclose(to_numpy(encoder(x)), to_numpy(by_bool))
    unbatched = encoder(x[0], mask=bool_causal)
    assert_close(unbatched, by_bool[0], rtol=1e-10, atol=1e-12)


def test_encoder_gradcheck(device):
    rt.manual_seed(11)
    rng = np.random.default_rng(11)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0,
                                                               activation="gelu"), 1).double().to(device)
    x = leaf(rng.standard_normal((3, 2, 4)), device)
    mask = rng.random((3, 3)) < 0.3
    mask[:, 0] = False
    mask = rt.tensor(mask).to(device)
    key_padding_mask = rt.tensor([[False, False, True], [False, False, False]]).to(device)
    weights = rt.tensor(rng.standard_normal((3, 2, 4))).to(device)

    def fn(x, *params):
        return (encoder(x, mask=mask, src_key_padding_mask=key_padding_mask) * weights).sum().cpu()

    assert rt.autograd.gradcheck(fn, (x, *encoder.parameters()))


def test_encoder_dropout_train_and_eval(device):
    rt.manual_seed(12)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.3), 2).to(device)
    plain = copy.deepcopy(encoder)
    for layer in plain.layers:
        for m in layer.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
        layer.self_attn.dropout = 0.0
    x = rt.randn(4, 2, 8).to(device)
    assert not np.allclose(to_numpy(encoder(x)), to_numpy(encoder(x)))
    encoder.eval()
    assert_close(encoder(x), plain(x), rtol=1e-6, atol=1e-6)


def test_encoder_bad_input():
    with pytest.raises(rt.ValueError, match="activation should be 'relu' or 'gelu'.*'tanh'"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    with pytest.raises(rt.DTypeError, match="TransformerEncoder: only bool and floating types of mask"):
        nn.TransformerEncoder(layer, 1)(rt.zeros(3, 2, 8), mask=rt.zeros(3, 3, dtype=rt.int64))
    with pytest.raises(rt.ShapeError, match="key_padding_mask must have shape"):
        layer(rt.zeros(3, 2, 8), src_key_padding_mask=rt.zeros(3, dtype=rt.bool))


# ---- against PyTorch ------------------------------------------------------------------------------

def torch_pair(torch, ours, theirs, device, dtype):
    """ours holding theirs' weights (through numpy), both in dtype ('float32' or 'float64')."""
    theirs = theirs.to(getattr(torch, dtype))
    ours = ours.to(device=device, dtype=getattr(rt, dtype))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: rt.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def compare(torch, ours, theirs, dtype):
    tol = 1e-10 if dtype == "float64" else 1e-5
    expected = theirs.detach().to(torch.float64).numpy()
    assert_close(ours, expected, rtol=tol, atol=tol)


def compare_grads(torch, ours, theirs, dtype):
    for (name, mine), (their_name, p) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == their_name and mine.grad is not None, name
        compare(torch, mine.grad, p.grad, dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("layout", ["seq_first", "batch_first", "unbatched"])
def test_rnn_matches_torch(device, dtype, mode, layout):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    config = {"num_layers": 2, "bidirectional": True, "batch_first": layout == "batch_first"}
    ours, theirs = torch_pair(torch, getattr(nn, mode)(3, 5, **config), getattr(torch.nn, mode)(3, 5, **config),
                              device, dtype)
    x = np.random.default_rng(0).standard_normal((4, 3) if layout == "unbatched" else (2, 4, 3))
    tx = torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=True)
    rx = rt.tensor(x).to(device=device, dtype=getattr(rt, dtype)).requires_grad_()
    (t_out, t_state), (r_out, r_state) = theirs(tx), ours(rx)
    t_state, r_state = (t_state, r_state) if mode == "LSTM" else ((t_state,), (r_state,))
    compare(torch, r_out, t_out, dtype)
    for mine, their in zip(r_state, t_state):
        compare(torch, mine, their, dtype)
    (t_out.sin().sum() + sum((s * s).sum() for s in t_state)).backward()
    (r_out.sin().sum() + sum((s * s).sum() for s in r_state)).backward()
    compare(torch, rx.grad, tx.grad, dtype)
    compare_grads(torch, ours, theirs, dtype)


@pytest.mark.parametrize("mode", ["LSTMCell", "GRUCell"])
def test_cells_match_torch(device, mode):
    torch = pytest.importorskip("torch")
    ours, theirs = torch_pair(torch, getattr(nn, mode)(3, 4), getattr(torch.nn, mode)(3, 4), device, "float64")
    x = np.random.default_rng(1).standard_normal((2, 3))
    tx, rx = torch.tensor(x, requires_grad=True), rt.tensor(x).to(device).requires_grad_()
    t_out, r_out = theirs(tx), ours(rx)
    t_out, r_out = (t_out, r_out) if mode == "LSTMCell" else ((t_out,), (r_out,))
    for mine, their in zip(r_out, t_out):
        compare(torch, mine, their, "float64")
    sum(s.sin().sum() for s in t_out).backward()
    sum(s.sin().sum() for s in r_out).backward()
    compare(torch, rx.grad, tx.grad, "float64")
    compare_grads(torch, ours, theirs, "float64")


MHA_CASES = [
    {"batch_first": False, "masks": "bool", "need_weights": True},
    {"batch_first": True, "masks": "float", "need_weights": False},
    {"batch_first": True, "masks": "bool", "need_weights": False, "unbatched": True},
    {"batch_first": False, "masks": "bool3", "need_weights": True, "average_attn_weights": False},
    {"batch_first": True, "masks": None, "need_weights": False, "kdim": 3, "vdim": 5, "add_bias_kv": True,
     "add_zero_attn": True},
    {"batch_first": False, "masks": "float", "need_weights": True, "bias": False, "add_zero_attn": True},
]


@pytest.mark.filterwarnings("ignore:Support for mismatched")  # PyTorch's, for a bool and a float mask
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", MHA_CASES)
def test_mha_matches_torch(device, dtype, case):
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    case = dict(case)
    masks, need_weights = case.pop("masks"), case.pop("need_weights")
    unbatched, average = case.pop("unbatched", False), case.pop("average_attn_weights", True)
    ours, theirs = torch_pair(torch, nn.MultiheadAttention(8, 2, **case), torch.nn.MultiheadAttention(8, 2, **case),
                              device, dtype)
    if theirs.in_proj_bias is not None:
        with torch.no_grad():
            theirs.in_proj_bias.normal_()
        ours.load_state_dict({k: rt.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    batch, length, source = 2, 3, 4

    def shape(seq, features):
        return (seq, features) if unbatched else (batch, seq, features) if case["batch_first"] else \
            (seq, batch, features)

    arrays = [rng.standard_normal(shape(length, 8)), rng.standard_normal(shape(source, case.get("kdim", 8))),
              rng.standard_normal(shape(source, case.get("vdim", 8)))]
    kpm_shape = (source,) if unbatched else (batch, source)
    extra = {}
    if masks in ("bool", "bool3"):
        extra["attn_mask"] = rng.random((length, source) if masks == "bool" else (batch * 2, length, source)) < 0.3
        extra["key_padding_mask"] = rng.random(kpm_shape) < 0.3
        extra["attn_mask"][..., 0] = extra["key_padding_mask"][..., 0] = False
    elif masks == "float":
        extra = {"attn_mask": rng.standard_normal((length, source)), "key_padding_mask": rng.standard_normal(kpm_shape)}
    tdt = getattr(torch, dtype)
    t_in = [torch.tensor(a, dtype=tdt, requires_grad=True) for a in arrays]
    r_in = [rt.tensor(a).to(device=device, dtype=getattr(rt, dtype)).requires_grad_() for a in arrays]
    t_extra = {k: torch.tensor(m, dtype=torch.bool if m.dtype == bool else tdt) for k, m in extra.items()}
    r_extra = {k: rt.tensor(m).to(device=device, dtype=rt.bool if m.dtype == bool else getattr(rt, dtype))
               for k, m in extra.items()}
    t_out, t_w = theirs(*t_in, need_weights=need_weights, average_attn_weights=average, **t_extra)
    r_out, r_w = ours(*r_in, need_weights=need_weights, average_attn_weights=average, **r_extra)
    compare(torch, r_out, t_out, dtype)
    assert (r_w is None) == (t_w is None)
    if t_w is not None:
        compare(torch, r_w, t_w, dtype)
    (t_out.sin().sum() + (0 if t_w is None else (t_w * t_w).sum())).backward()
    (r_out.sin().sum() + (0 if r_w is None else (r_w * r_w).sum())).backward()
    for mine, their in zip(r_in, t_in):
        compare(torch, mine.grad, their.grad, dtype)
    compare_grads(torch, ours, theirs, dtype)


ENCODER_CASES = [
    {"batch_first": False, "norm_first": False, "activation": "relu", "mask": "bool", "kpm": True},
    {"batch_first": True, "norm_first": True, "activation": "gelu", "mask": "causal", "kpm": False},
    {"batch_first": True, "norm_first": False, "activation": "gelu", "mask": "float", "kpm": True, "unbatched": True},
    {"batch_first": False, "norm_first": True, "activation": "relu", "mask": None, "kpm": True, "bias": False},
]


@pytest.mark.filterwarnings("ignore:Support for mismatched")  # PyTorch's, for a bool and a float mask
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", ENCODER_CASES)
def test_encoder_matches_torch(device, dtype, case):
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    case = dict(case)
    mask_kind, kpm, unbatched = case.pop("mask"), case.pop("kpm"), case.pop("unbatched", False)
    config = dict(dim_feedforward=16, dropout=0.0, **case)
    ours, theirs = torch_pair(
        torch, nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, **config), 2, norm=nn.LayerNorm(8)),
        torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, **config), 2, norm=torch.nn.LayerNorm(8),
                                    enable_nested_tensor=False), device, dtype)
    length, batch = 5, 3
    x = rng.standard_normal((length, 8) if unbatched else (batch, length, 8) if case["batch_first"] else
                            (length, batch, 8))
    extra = {}
    if mask_kind == "bool":
        extra["mask"] = rng.random((length, length)) < 0.3
        extra["mask"][:, 0] = False
    elif mask_kind == "float":
        extra["mask"] = rng.standard_normal((length, length))
    elif mask_kind == "causal":
        extra["mask"] = np.triu(np.full((length, length), -np.inf), 1)
    if kpm:
        extra["src_key_padding_mask"] = rng.random((length,) if unbatched else (batch, length)) < 0.3
        extra["src_key_padding_mask"][..., 0] = False
    tdt = getattr(torch, dtype)
    tx = torch.tensor(x, dtype=tdt, requires_grad=True)
    rx = rt.tensor(x).to(device=device, dtype=getattr(rt, dtype)).requires_grad_()
    t_out = theirs(tx, **{k: torch.tensor(m, dtype=torch.bool if m.dtype == bool else tdt) for k, m in extra.items()})
    r_out = ours(rx, **{k: rt.tensor(m).to(device=device, dtype=rt.bool if m.dtype == bool else getattr(rt, dtype))
                        for k, m in extra.items()})
    compare(torch, r_out, t_out, dtype)
    t_out.sin().sum().backward()
    r_out.sin().sum().backward()
    compare(torch, rx.grad, tx.grad, dtype)
    compare_grads(torch, ours, theirs, dtype)
