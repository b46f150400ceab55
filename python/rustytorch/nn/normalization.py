"""Normalization layers: BatchNorm1d/2d (running statistics as buffers), LayerNorm, GroupNorm and
RMSNorm, with PyTorch's arguments, parameter names and reprs."""
import numbers

from .. import _C
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class _BatchNorm(Module):
    _input_dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(_C.empty(num_features, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        if affine and bias:
            self.bias = Parameter(_C.empty(num_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _C.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", _C.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", _C.zeros((), dtype=_C.int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self):
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        if input.dim() not in self._input_dims:
            raise _C.ShapeError(f"{type(self).__name__}: expected a {' or '.join(map(str, self._input_dims))}-d input, "
                                f"got shape {list(input.shape)}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / self.num_batches_tracked.item()
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization over [N, C] or [N, C, L] inputs."""

    _input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization over [N, C, H, W] inputs."""

    _input_dims = (4,)


def _affine_parameters(module, shape, affine, bias, device, dtype):
    """Registers the affine map of a normalization layer: weight (ones) when affine, bias (zeros)
    when affine and bias; None for those left out."""
    module.register_parameter("weight", Parameter(_C.ones(shape, device=device, dtype=dtype)) if affine else None)
    module.register_parameter("bias", Parameter(_C.zeros(shape, device=device, dtype=dtype)) if affine and bias else None)


def _shape_tuple(normalized_shape):
    return (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else tuple(normalized_shape)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, device, dtype)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalizes num_groups groups of channels of each sample, then a per-channel affine map."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise _C.ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                                f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine_parameters(self, num_channels, affine, bias, device, dtype)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) over the trailing normalized_shape dims, times weight (ones)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_C.ones(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
