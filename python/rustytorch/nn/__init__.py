"""rustytorch.nn: modules, parameters, the functional interface, initializers and utilities."""
from . import functional, init, utils  # noqa: F401
from .module import Module  # noqa: F401
from .modules import (  # noqa: F401
    AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten,
    GELU, Identity, LayerNorm, Linear, MaxPool2d, ModuleDict, ModuleList, MSELoss, ReLU, Sequential, Sigmoid, SiLU,
    Softmax, Tanh,
)
from .parameter import Parameter  # noqa: F401
