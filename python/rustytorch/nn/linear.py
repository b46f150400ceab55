"""Identity, Linear and Flatten: the layers that pass features on without a nonlinearity."""
import math

from .. import _C
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class Identity(Module):
    """x unchanged (any constructor arguments are ignored, as in PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


def reset_kaiming_uniform(weight, bias):
    """PyTorch's initialization of Linear and the convolutions: weight kaiming-uniform with
    a = sqrt(5) (uniform on +-1/sqrt(fan_in)), bias uniform on +-1/sqrt(fan_in)."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


class Linear(Module):
    """y = x @ weight.T + bias, weight [out_features, in_features] (uniform in +-1/sqrt(in))."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(_C.empty(out_features, in_features, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(_C.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        reset_kaiming_uniform(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
