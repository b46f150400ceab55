"""Attention layers: MultiheadAttention, TransformerEncoderLayer and TransformerEncoder, with
PyTorch's arguments, parameter and submodule names, initialization, mask conventions (a True in a
bool mask is masked out, a float mask is added to the scores) and input/output shapes."""
import copy
import math

from .. import _C
from . import functional as F
from . import init
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm
from .parameter import Parameter


def _float_mask(mask, name, op, dtype):
    """A bool mask as a float one (-inf where True, 0 elsewhere); a float mask as it is."""
    if mask is None:
        return None
    if not isinstance(mask, _C.Tensor):
        raise TypeError(f"{op}: {name} must be a tensor, got {type(mask).__name__}")
    if mask.dtype == _C.bool:
        return _C.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    if not mask.is_floating_point():
        raise _C.DTypeError(f"{op}: only bool and floating types of {name} are supported, got {mask.dtype}")
    return mask


def _pad_key(mask):
    """A float mask with one more key (last dim), not masked: the key add_bias_kv or
    add_zero_attn appends."""
    return _C.cat([mask, _C.zeros(*mask.shape[:-1], 1, dtype=mask.dtype, device=mask.device)], -1)


class MultiheadAttention(Module):
    """Attention of query [L, N, E] over key [S, N, kdim] and value [S, N, vdim] ([N, L, E] ...
    with batch_first; [L, E], [S, kdim], [S, vdim] unbatched) with num_heads heads of
    embed_dim // num_heads features. forward returns (output like query, weights [N, L, S]
    averaged over heads, [N, num_heads, L, S] with average_attn_weights=False, or None when
    need_weights=False)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise _C.ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater than 0, got "
                                f"embed_dim={embed_dim} and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise _C.ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be divisible by num_heads "
                                f"{num_heads}")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = dropout, batch_first
        self.add_zero_attn = add_zero_attn

        def new(*shape):
            return Parameter(_C.empty(shape, device=device, dtype=dtype))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = new(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = new(embed_dim, embed_dim)
            self.k_proj_weight = new(embed_dim, self.kdim)
            self.v_proj_weight = new(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = new(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k, self.bias_v = new(1, 1, embed_dim), new(1, 1, embed_dim)
        else:
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _check_shapes(self, query, key, value, key_padding_mask, attn_mask):
        """Whether the call is batched, after checking every shape against the query's."""
        op = "MultiheadAttention"
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, _C.Tensor):
                raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
        shapes = f"query {list(query.shape)}, key {list(key.shape)} and value {list(value.shape)}"
        if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
            raise _C.ShapeError(f"{op}: expects 3-D (batched) or 2-D (unbatched) query, key and value, got {shapes}")
        batched = query.dim() == 3
        if query.shape[-1] != self.embed_dim or key.shape[-1] != self.kdim or value.shape[-1] != self.vdim:
            raise _C.ShapeError(f"{op}: expects query, key and value with {self.embed_dim}, {self.kdim} and "
                                f"{self.vdim} features (embed_dim, kdim, vdim), got {shapes}")
        seq = 1 if batched and self.batch_first else 0
        if key.shape[:-1] != value.shape[:-1] or (batched and key.shape[1 - seq] != query.shape[1 - seq]):
            raise _C.ShapeError(f"{op}: key and value must have the same sequence length and the query's batch "
                                f"size, got {shapes}")
        length, source = query.shape[seq], key.shape[seq]
        batch = query.shape[1 - seq] if batched else 1
        if key_padding_mask is not None:
            expected = (batch, source) if batched else (source,)
            if tuple(key_padding_mask.shape) != expected:
                raise _C.ShapeError(f"{op}: key_padding_mask must have shape {list(expected)} for {shapes}, got "
                                    f"{list(key_padding_mask.shape)}")
        if attn_mask is not None:
            allowed = [(length, source), (batch * self.num_heads, length, source)]
            if tuple(attn_mask.shape) not in allowed:
                raise _C.ShapeError(f"{op}: attn_mask must have shape {list(allowed[0])} or {list(allowed[1])} "
                                    f"(batch * num_heads, L, S) for {shapes}, got {list(attn_mask.shape)}")
        return batched

    def _project(self, query, key, value):
        """q, k and v [N, L or S, embed_dim] from the input projections."""
        b = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None,) * 3
        if not self._qkv_same_embed_dim:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        elif query is key and key is value:
            return F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, -1)
        else:
            weights = self.in_proj_weight.chunk(3)
        return tuple(F.linear(x, w, bias) for x, w, bias in zip((query, key, value), weights, b))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        op = "MultiheadAttention"
        batched = self._check_shapes(query, key, value, key_padding_mask, attn_mask)
        key_padding_mask = _float_mask(key_padding_mask, "key_padding_mask", op, query.dtype)
        if is_causal and attn_mask is None:
            raise _C.ValueError(f"{op}: is_causal=True is a hint that attn_mask is the causal mask and needs that "
                                f"attn_mask")
        if is_causal and key_padding_mask is None and not need_weights:
            attn_mask = None
        else:
            attn_mask = _float_mask(attn_mask, "attn_mask", op, query.dtype)
            is_causal = is_causal and key_padding_mask is None

        q, k, v = self._project(query, key, value)
        if not batched:
            q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
        elif not self.batch_first:
            q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        batch, length, source = q.shape[0], q.shape[1], k.shape[1]
        heads, head_dim = self.num_heads, self.head_dim
        if attn_mask is not None:
            attn_mask = attn_mask.reshape(1, 1, length, source) if attn_mask.dim() == 2 else \
                attn_mask.reshape(batch, heads, length, source)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.reshape(batch, 1, 1, source)
        masks = [m for m in (attn_mask, key_padding_mask) if m is not None]
        if self.bias_k is not None:
            k = _C.cat([k, self.bias_k.expand(batch, 1, self.embed_dim)], 1)
            v = _C.cat([v, self.bias_v.expand(batch, 1, self.embed_dim)], 1)
            masks = [_pad_key(m) for m in masks]
        q, k, v = (t.reshape(batch, t.shape[1], heads, head_dim).transpose(1, 2) for t in (q, k, v))
        if self.add_zero_attn:
            zeros = _C.zeros(batch, heads, 1, head_dim, dtype=k.dtype, device=k.device)
            k, v = _C.cat([k, zeros], 2), _C.cat([v, zeros], 2)
            masks = [_pad_key(m) for m in masks]
        mask = masks[0] + masks[1] if len(masks) == 2 else masks[0] if masks else None
        dropout_p = self.dropout if self.training else 0.0

        if need_weights:
            scores = _C.matmul(q * math.sqrt(1.0 / head_dim), k.transpose(-2, -1))
            weights = F.softmax(scores if mask is None else scores + mask, -1)
            if dropout_p > 0:
                weights = F.dropout(weights, dropout_p, True)
            out = _C.matmul(weights, v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
            weights = None
        # [N, H, L, D] -> [L, N, E] (or [N, L, E]) before the output projection, so the output is contiguous
        seq_first = batched and not self.batch_first
        out = (out.permute(2, 0, 1, 3) if seq_first else out.transpose(1, 2)).reshape(
            *((length, batch) if seq_first else (batch, length)), self.embed_dim)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            out = out.squeeze(0)
            weights = None if weights is None else weights.squeeze(0)
        return out, weights


def _activation_fn(activation, op):
    """A layer's activation: 'relu', 'gelu' or a callable."""
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if isinstance(activation, str):
        raise _C.ValueError(f"{op}: activation should be 'relu' or 'gelu' (or a callable), not {activation!r}")
    if not callable(activation):
        raise TypeError(f"{op}: activation must be 'relu', 'gelu' or a callable, got {type(activation).__name__}")
    return activation


def _generate_square_subsequent_mask(size, device=None, dtype=None):
    """The causal float mask: 0 on and below the diagonal, -inf above."""
    return _C.full((size, size), float("-inf"), device=device, dtype=dtype).triu(1)


def _detect_is_causal_mask(mask, is_causal, size):
    """is_causal when given; else whether mask equals the causal mask of size x size."""
    if is_causal is not None or mask is None:
        return bool(is_causal)
    causal = _generate_square_subsequent_mask(size, device=mask.device, dtype=mask.dtype)
    return tuple(mask.shape) == tuple(causal.shape) and bool((mask == causal).all().item())


def _clones(layer, num_layers, op, name):
    """num_layers deep copies of layer (each starts with the same parameters), as a ModuleList."""
    if not isinstance(layer, Module):
        raise TypeError(f"{op}: {name} must be a Module, got {type(layer).__name__}")
    if not isinstance(num_layers, int) or num_layers < 0:
        raise _C.ValueError(f"{op}: num_layers must be a non-negative int, got {num_layers!r}")
    return ModuleList(copy.deepcopy(layer) for _ in range(num_layers))


def _sequence_length(layers, x):
    """The length of x's sequence dim, as the stack's first layer reads x (batch_first or not)."""
    batch_first = layers[0].self_attn.batch_first if len(layers) else False
    return x.shape[1 if batch_first and x.dim() == 3 else 0]


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block (linear1, activation, dropout, linear2), each with
    a residual connection and a LayerNorm: after the residual (post-norm, the default) or at the
    block's input with norm_first."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **factory)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation_fn(activation, "TransformerEncoderLayer")

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        op = "TransformerEncoderLayer"
        src_key_padding_mask = _float_mask(src_key_padding_mask, "src_key_padding_mask", op, src.dtype)
        src_mask = _float_mask(src_mask, "src_mask", op, src.dtype)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer (layers.0, layers.1, ...; each starts with the same
    parameters) applied in turn, then norm when given. enable_nested_tensor and mask_check are
    accepted for PyTorch's signature; there is no nested-tensor path, so padded positions keep
    their computed values."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers, "TransformerEncoder", "encoder_layer")
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        op = "TransformerEncoder"
        src_key_padding_mask = _float_mask(src_key_padding_mask, "src_key_padding_mask", op, src.dtype)
        mask = _float_mask(mask, "mask", op, src.dtype)
        is_causal = _detect_is_causal_mask(mask, is_causal, _sequence_length(self.layers, src))
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        if self.norm is not None:
            output = self.norm(output)
        return output
