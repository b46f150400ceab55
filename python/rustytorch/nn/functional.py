"""nn.functional: the library's nn ops with PyTorch's signatures, plus composite ones
(scaled_dot_product_attention) built from them."""
import math

from .. import _C

relu = _C.relu
silu = _C.silu
sigmoid = _C.sigmoid
tanh = _C.tanh
gelu = _C.gelu
leaky_relu = _C.leaky_relu
elu = _C.elu
softplus = _C.softplus
softmax = _C.softmax
log_softmax = _C.log_softmax
linear = _C.linear
conv2d = _C.conv2d
max_pool2d = _C.max_pool2d
avg_pool2d = _C.avg_pool2d
adaptive_avg_pool2d = _C.adaptive_avg_pool2d
layer_norm = _C.layer_norm
embedding = _C.embedding
cross_entropy = _C.cross_entropy
nll_loss = _C.nll_loss
mse_loss = _C.mse_loss
binary_cross_entropy_with_logits = _C.binary_cross_entropy_with_logits
one_hot = _C.one_hot


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    return _C.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def dropout(input, p=0.5, training=True, inplace=False):
    out = _C.dropout(input, p, training)
    if inplace:
        input.copy_(out)
        return input
    return out


def relu_(input):
    return input.relu_()


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """softmax(q @ k^T * scale + mask) @ v over the last two dims (composite: the scores are
    materialized). A bool attn_mask keeps the True positions; a float one is added to the scores."""
    L, S = query.size(-2), key.size(-2)
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
        causal = _C.ones(L, S, dtype=_C.bool, device=query.device).tril()
        scores = scores.masked_fill(causal.logical_not(), float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype == _C.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    weights = _C.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = _C.dropout(weights, dropout_p, True)
    return weights @ value
