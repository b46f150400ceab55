"""Recurrent layers: LSTM and GRU (stacked, optionally bidirectional) and their one-step cells
LSTMCell and GRUCell, with PyTorch's arguments, parameter names, gate order, initialization and
input/output shapes. A layer projects the inputs of all its time steps in one matmul, then loops
over time with one matmul and the gate pointwise ops per step, all public differentiable ops."""
import math
import numbers
import warnings

from .. import _C
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


def _lstm_step(gates_x, state, w_hh, b_hh):
    """One LSTM step from gates_x = x W_ih^T + b_ih and state (h, c): gates i, f, g, o; returns
    (h', c')."""
    h, c = state
    i, f, g, o = (gates_x + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_step(gates_x, state, w_hh, b_hh):
    """One GRU step from gates_x = x W_ih^T + b_ih and state (h,): gates r, z, n with
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn)); returns (h',), h' = (1 - z) * n + z * h."""
    (h,) = state
    x_r, x_z, x_n = gates_x.chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = (x_r + h_r).sigmoid()
    z = (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return (n + z * (h - n),)


# mode: (gates per hidden unit, state tensors, step)
_MODES = {"LSTM": (4, 2, _lstm_step), "GRU": (3, 1, _gru_step)}


def _as_states(name, hx, count):
    """hx (a tuple (h, c) for LSTM, a tensor for GRU) as a tuple of tensors, or None."""
    if hx is None:
        return None
    states = tuple(hx) if count == 2 and isinstance(hx, (tuple, list)) else (hx,)
    if len(states) != count or not all(isinstance(s, _C.Tensor) for s in states):
        raise TypeError(f"{name}: hx must be " + ("a tuple (h, c) of two tensors" if count == 2 else "a tensor") +
                        f", got {type(hx).__name__}")
    return states


def _check_size(name, what, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name}: {what} should be of type int, got {type(value).__name__}")
    if value <= 0:
        raise _C.ValueError(f"{name}: {what} must be greater than zero, got {value}")


def _check_dtype(name, input, weight):
    if input.dtype != weight.dtype:
        raise _C.DTypeError(f"{name}: input dtype {input.dtype} does not match weight dtype {weight.dtype}; convert "
                            f"the input with .to({weight.dtype}) or the module with .to({input.dtype})")


class _RNNBase(Module):
    """The stacked recurrent layer shared by LSTM and GRU (the mode names the cell)."""

    mode = None

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__()
        name = self.mode
        _check_size(name, "input_size", input_size)
        _check_size(name, "hidden_size", hidden_size)
        _check_size(name, "num_layers", num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1:
            raise _C.ValueError(f"{name}: dropout should be a number in range [0, 1] representing the probability "
                                f"of an element being zeroed, got {dropout}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{name}: dropout={dropout} acts between layers, so it has no effect with num_layers=1",
                          stacklevel=2)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional = bidirectional
        directions = 2 if bidirectional else 1
        gate_size = _MODES[self.mode][0] * hidden_size
        self._weight_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = {"weight_ih": (gate_size, layer_input), "weight_hh": (gate_size, hidden_size)}
                if bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                for kind, shape in shapes.items():
                    setattr(self, kind + suffix, Parameter(_C.empty(shape, device=device, dtype=dtype)))
                self._weight_names.append(tuple(kind + suffix if kind in shapes else None
                                                for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")))
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def flatten_parameters(self):
        """PyTorch compacts the weights for cuDNN here; this library uses them where they are, so
        there is nothing to do."""

    @property
    def all_weights(self):
        """The parameters of each layer and direction: [[weight_ih, weight_hh, bias_ih, bias_hh], ...]."""
        return [[w for w in self._weights(i) if w is not None] for i in range(len(self._weight_names))]

    def _weights(self, index):
        return [None if name is None else getattr(self, name) for name in self._weight_names[index]]

    def forward(self, input, hx=None):
        name = self.mode
        count, step = _MODES[name][1:]
        if not isinstance(input, _C.Tensor):
            raise TypeError(f"{name}: input must be a tensor, got {type(input).__name__}")
        if input.dim() not in (2, 3):
            raise _C.ShapeError(f"{name}: expected a 2-D (unbatched) or 3-D input, got {input.dim()}-D of shape "
                                f"{list(input.shape)}")
        states = _as_states(name, hx, count)
        batched = input.dim() == 3
        if not batched:
            if states is not None and any(s.dim() != 2 for s in states):
                raise _C.ShapeError(f"{name}: for an unbatched 2-D input the hidden state must be 2-D, got shapes "
                                    f"{[list(s.shape) for s in states]}")
            input = input.unsqueeze(1)
            states = None if states is None else tuple(s.unsqueeze(1) for s in states)
        elif self.batch_first:
            input = input.transpose(0, 1)
        steps, batch, features = input.shape
        if features != self.input_size:
            raise _C.ShapeError(f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                                f"got {features}")
        if steps == 0:
            raise _C.ValueError(f"{name}: expected a sequence length larger than 0, got an input of shape "
                                f"{list(input.shape)}")
        _check_dtype(name, input, self.weight_ih_l0)
        directions = 2 if self.bidirectional else 1
        shape = (self.num_layers * directions, batch, self.hidden_size)
        if states is None:
            states = (_C.zeros(shape, dtype=input.dtype, device=input.device),) * count
        for k, s in enumerate(states):
            if tuple(s.shape) != shape:
                which = f"hidden[{k}]" if count == 2 else "hidden"
                raise _C.ShapeError(f"{name}: expected {which} of shape {list(shape)}, got {list(s.shape)}")
            _check_dtype(name, s, self.weight_ih_l0)

        final = []
        layer_input = input
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                w_ih, w_hh, b_ih, b_hh = self._weights(index)
                gates_x = F.linear(layer_input, w_ih, b_ih).unbind(0)
                state = tuple(s[index] for s in states)
                hs = [None] * steps
                for t in (range(steps) if direction == 0 else range(steps - 1, -1, -1)):
                    state = step(gates_x[t], state, w_hh, b_hh)
                    hs[t] = state[0]
                outputs.append(_C.stack(hs))
                final.append(state)
            layer_input = outputs[0] if directions == 1 else _C.cat(outputs, -1)
            if self.dropout > 0 and self.training and layer + 1 < self.num_layers:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input
        h_n = tuple(_C.stack([f[k] for f in final]) for k in range(count))
        if not batched:
            output, h_n = output.squeeze(1), tuple(h.squeeze(1) for h in h_n)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, (h_n if count == 2 else h_n[0])

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class LSTM(_RNNBase):
    """Long short-term memory over [T, N, input_size] ([N, T, input_size] with batch_first, or
    [T, input_size] unbatched); forward(input, (h_0, c_0)=None) returns (output, (h_n, c_n))."""

    mode = "LSTM"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        if proj_size != 0:
            raise _C.ValueError(f"LSTM: proj_size={proj_size} is not supported (only proj_size=0)")
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device,
                         dtype)


class GRU(_RNNBase):
    """Gated recurrent unit over [T, N, input_size] ([N, T, input_size] with batch_first, or
    [T, input_size] unbatched); forward(input, h_0=None) returns (output, h_n)."""

    mode = "GRU"


class _RNNCellBase(Module):
    """One step of a recurrent cell: weight_ih [gates * hidden, input], weight_hh [gates * hidden,
    hidden] and, with bias, bias_ih and bias_hh."""

    mode = None

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        name = self.mode + "Cell"
        _check_size(name, "input_size", input_size)
        _check_size(name, "hidden_size", hidden_size)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gate_size = _MODES[self.mode][0] * hidden_size
        self.weight_ih = Parameter(_C.empty(gate_size, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(_C.empty(gate_size, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(_C.empty(gate_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(_C.empty(gate_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = _RNNBase.reset_parameters

    def forward(self, input, hx=None):
        name = self.mode + "Cell"
        count, step = _MODES[self.mode][1:]
        if not isinstance(input, _C.Tensor):
            raise TypeError(f"{name}: input must be a tensor, got {type(input).__name__}")
        if input.dim() not in (1, 2):
            raise _C.ShapeError(f"{name}: expected a 1-D (unbatched) or 2-D input, got {input.dim()}-D of shape "
                                f"{list(input.shape)}")
        if input.shape[-1] != self.input_size:
            raise _C.ShapeError(f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                                f"got {input.shape[-1]}")
        _check_dtype(name, input, self.weight_ih)
        states = _as_states(name, hx, count)
        batched = input.dim() == 2
        shape = (input.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        if states is None:
            states = (_C.zeros(shape, dtype=input.dtype, device=input.device),) * count
        for s in states:
            if tuple(s.shape) != shape:
                raise _C.ShapeError(f"{name}: expected a hidden state of shape {list(shape)} for an input of shape "
                                    f"{list(input.shape)}, got {list(s.shape)}")
            _check_dtype(name, s, self.weight_ih)
        out = step(F.linear(input, self.weight_ih, self.bias_ih), states, self.weight_hh, self.bias_hh)
        return out if count == 2 else out[0]

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class LSTMCell(_RNNCellBase):
    """One LSTM step: forward(input [N, input_size] or [input_size], (h, c)=None) returns (h', c')."""

    mode = "LSTM"


class GRUCell(_RNNCellBase):
    """One GRU step: forward(input [N, input_size] or [input_size], h=None) returns h'."""

    mode = "GRU"
