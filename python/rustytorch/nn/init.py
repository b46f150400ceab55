"""nn.init: in-place initializers for parameters (all run without recording gradients)."""
import math

from .. import _C
from ..autograd import no_grad


def _fans(t):
    if t.dim() < 2:
        raise ValueError(f"fan in and fan out need a tensor of at least 2 dims, got {t.dim()}")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def calculate_gain(nonlinearity, param=None):
    gains = {"linear": 1.0, "conv2d": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3, "relu": math.sqrt(2.0),
             "selu": 3.0 / 4}
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity not in gains:
        raise ValueError(f"calculate_gain: unsupported nonlinearity '{nonlinearity}'")
    return gains[nonlinearity]


def uniform_(t, a=0.0, b=1.0):
    with no_grad():
        return t.uniform_(a, b)


def normal_(t, mean=0.0, std=1.0):
    with no_grad():
        return t.normal_(mean, std)


def constant_(t, val):
    with no_grad():
        return t.fill_(val)


def zeros_(t):
    return constant_(t, 0.0)


def ones_(t):
    return constant_(t, 1.0)


def xavier_uniform_(t, gain=1.0):
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t, gain=1.0):
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_std(t, a, mode, nonlinearity):
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity)
    return uniform_(t, -bound, bound)


def kaiming_normal_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity))


def trunc_normal_(t, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Normal values redrawn until they fall in [a, b] (rejection, elementwise)."""
    with no_grad():
        t.normal_(mean, std)
        for _ in range(100):
            outside = (t < a) | (t > b)
            if not outside.any().item():
                return t
            fresh = _C.randn(*t.shape, dtype=t.dtype, device=t.device) * std + mean
            t.copy_(_C.where(outside, fresh, t))
        return t.clamp_(a, b)
