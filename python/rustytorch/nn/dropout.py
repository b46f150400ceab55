"""Dropout layers: elementwise, per channel (1d, 2d, 3d) and alpha dropout; identity in eval mode."""
from .. import _C
from . import functional as F
from .module import Module


class _DropoutNd(Module):
    _function = staticmethod(F.dropout)

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0 <= p <= 1:
            raise _C.ValueError(f"{type(self).__name__}: dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return self._function(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    pass


class Dropout1d(_DropoutNd):
    _function = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    _function = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    _function = staticmethod(F.dropout3d)


class AlphaDropout(_DropoutNd):
    _function = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    _function = staticmethod(F.feature_alpha_dropout)
