"""nn.TransformerDecoderLayer, TransformerDecoder and nn.Transformer: state_dict keys, a numpy
float64 reference of a decoder layer, an encoder-decoder trained the way a translation script trains
one, bad input, and (when torch is importable) outputs and every parameter's gradient against
PyTorch's modules holding the same weights."""
import math

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn
from conftest import assert_close
from test_rnn_transformer import compare, compare_grads, layer_norm, mha_reference, params_of, torch_pair

DECODER_LAYER_KEYS = [
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
    "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias", "multihead_attn.out_proj.weight",
    "multihead_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
    "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias"]


def test_state_dict_keys_and_initialization():
    layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16)
    assert list(layer.state_dict()) == DECODER_LAYER_KEYS
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16)
    keys = list(model.state_dict())
    assert keys[0] == "encoder.layers.0.self_attn.in_proj_weight" and "encoder.norm.weight" in keys
    assert [k for k in keys if k.startswith("decoder.layers.0.")] == ["decoder.layers.0." + k for k in DECODER_LAYER_KEYS]
    assert keys[-2:] == ["decoder.norm.weight", "decoder.norm.bias"]
    # Every matrix starts Xavier-uniform: within sqrt(6 / (fan_in + fan_out)).
    w = model.decoder.layers[0].linear1.weight
    assert np.abs(w.detach().numpy()).max() <= math.sqrt(6 / (8 + 16)) + 1e-7
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert_close(mask, np.triu(np.full((3, 3), -np.inf), 1))


def test_decoder_layer_against_numpy(device):
    rt.manual_seed(3)
    rng = np.random.default_rng(3)
    layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0).double().to(device)
    with rt.no_grad():
        for norm in (layer.norm1, layer.norm2, layer.norm3):
            norm.weight.copy_(rt.tensor(rng.standard_normal(8)))
            norm.bias.copy_(rt.tensor(rng.standard_normal(8)))
    p = params_of(layer)
    sub = {name: {k[len(name) + 1:]: v for k, v in p.items() if k.startswith(name + ".")}
           for name in ("self_attn", "multihead_attn")}
    tgt, memory = rng.standard_normal((4, 2, 8)), rng.standard_normal((6, 2, 8))
    causal = np.triu(np.ones((4, 4), bool), 1)
    memory_padding = np.array([[False] * 6, [False] * 4 + [True] * 2])

    def ff(x):
        return np.maximum(x @ p["linear1.weight"].T + p["linear1.bias"], 0) @ p["linear2.weight"].T + p["linear2.bias"]

    h1 = layer_norm(tgt + mha_reference(tgt, tgt, tgt, sub["self_attn"], 2, attn_mask=causal)[0],
                    p["norm1.weight"], p["norm1.bias"])
    h2 = layer_norm(h1 + mha_reference(h1, memory, memory, sub["multihead_attn"], 2,
                                       key_padding_mask=memory_padding)[0], p["norm2.weight"], p["norm2.bias"])
    expected = layer_norm(h2 + ff(h2), p["norm3.weight"], p["norm3.bias"])
    got = layer(rt.tensor(tgt).to(device), rt.tensor(memory).to(device), tgt_mask=rt.tensor(causal).to(device),
                memory_key_padding_mask=rt.tensor(memory_padding).to(device))
    assert_close(got, expected, rtol=1e-9, atol=1e-10)
    layer.norm_first = True
    n1 = layer_norm(tgt, p["norm1.weight"], p["norm1.bias"])
    h1 = tgt + mha_reference(n1, n1, n1, sub["self_attn"], 2)[0]
    n2 = layer_norm(h1, p["norm2.weight"], p["norm2.bias"])
    h2 = h1 + mha_reference(n2, memory, memory, sub["multihead_attn"], 2)[0]
    expected = h2 + ff(layer_norm(h2, p["norm3.weight"], p["norm3.bias"]))
    assert_close(layer(rt.tensor(tgt).to(device), rt.tensor(memory).to(device)), expected, rtol=1e-9, atol=1e-10)


def test_transformer_learns_to_copy(device):
    """A small encoder-decoder trained as translation scripts train one (teacher forcing, a causal
    target mask, cross-entropy, Adam) learns to copy a random token sequence."""
    rt.manual_seed(0)
    vocab, d = 12, 32
    embed, position = nn.Embedding(vocab, d).to(device), nn.Embedding(6, d).to(device)
    model = nn.Transformer(d_model=d, nhead=4, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=64,
                           dropout=0.0, batch_first=True).to(device)
    head = nn.Linear(d, vocab).to(device)
    params = [p for m in (embed, position, model, head) for p in m.parameters()]
    opt = rt.optim.Adam(params, lr=3e-3)
    gen = rt.Generator().manual_seed(1)
    mask = nn.Transformer.generate_square_subsequent_mask(6, device=device)
    for step in range(150):
        src = rt.randint(2, vocab, (16, 6), generator=gen).to(device)
        tgt_in = rt.cat([rt.ones(16, 1, dtype=rt.int64, device=device), src[:, :-1]], 1)  # 1 = start token
        positions = position(rt.arange(6, device=device))
        logits = head(model(embed(src) + positions, embed(tgt_in) + positions, tgt_mask=mask))
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), src.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 0:
            first = loss.item()
    assert first > 2.0 and loss.item() < 0.5 * first, (first, loss.item())


def test_bad_input():
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)
    with pytest.raises(rt.ShapeError, match="same batch size, got 2 and 3"):
        model(rt.zeros(5, 2, 8), rt.zeros(4, 3, 8))
    with pytest.raises(rt.ShapeError, match="must equal d_model"):
        model(rt.zeros(5, 2, 8), rt.zeros(4, 2, 6))
    with pytest.raises(ValueError, match="activation should be 'relu' or 'gelu'"):
        nn.TransformerDecoderLayer(8, 2, activation="tanh")
    with pytest.raises(TypeError, match="decoder_layer must be a Module"):
        nn.TransformerDecoder("layer", 2)


DECODER_CASES = [
    {"batch_first": False, "norm_first": False, "activation": "relu", "masks": "causal"},
    {"batch_first": True, "norm_first": True, "activation": "gelu", "masks": "padding"},
]


@pytest.mark.filterwarnings("ignore:Support for mismatched")  # PyTorch's, for a bool and a float mask
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", DECODER_CASES)
def test_transformer_matches_torch(device, dtype, case):
    torch = pytest.importorskip("torch")
    torch.manual_seed(4)
    rng = np.random.default_rng(4)
    case = dict(case)
    masks = case.pop("masks")
    config = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
                  **case)
    ours, theirs = torch_pair(torch, nn.Transformer(**config), torch.nn.Transformer(**config), device, dtype)
    batch, src_len, tgt_len = 3, 6, 5
    shape = (lambda n: (batch, n, 8)) if case["batch_first"] else (lambda n: (n, batch, 8))
    src, tgt = rng.standard_normal(shape(src_len)), rng.standard_normal(shape(tgt_len))
    extra = {}
    if masks == "causal":
        extra["tgt_mask"] = np.triu(np.full((tgt_len, tgt_len), -np.inf), 1)
    else:
        for name, n in (("src_key_padding_mask", src_len), ("tgt_key_padding_mask", tgt_len),
                        ("memory_key_padding_mask", src_len)):
            extra[name] = rng.random((batch, n)) < 0.3
            extra[name][:, 0] = False
    tdt = getattr(torch, dtype)
    t_in = [torch.tensor(a, dtype=tdt, requires_grad=True) for a in (src, tgt)]
    r_in = [rt.tensor(a).to(device=device, dtype=getattr(rt, dtype)).requires_grad_() for a in (src, tgt)]
    t_out = theirs(*t_in, **{k: torch.tensor(m, dtype=torch.bool if m.dtype == bool else tdt) for k, m in extra.items()})
    r_out = ours(*r_in, **{k: rt.tensor(m).to(device=device, dtype=rt.bool if m.dtype == bool else getattr(rt, dtype))
                           for k, m in extra.items()})
    compare(torch, r_out, t_out, dtype)
    t_out.sin().sum().backward()
    r_out.sin().sum().backward()
    for mine, their in zip(r_in, t_in):
        compare(torch, mine.grad, their.grad, dtype)
    compare_grads(torch, ours, theirs, dtype)
