"""rustytorch.nn: modules, parameters, the functional interface, initializers and utilities."""
from . import functional, init, parallel, utils  # noqa: F401
from .module import Module  # noqa: F401
from .modules import (  # noqa: F401
    AdaptiveAvgPool2d, AlphaDropout, AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss, BCEWithLogitsLoss, Conv1d, Conv2d,
    ConvTranspose1d, ConvTranspose2d, CrossEntropyLoss, Dropout, Dropout1d, Dropout2d, Dropout3d, ELU, Embedding,
    FeatureAlphaDropout, Flatten, GELU, GroupNorm, Hardtanh, HuberLoss, Identity, KLDivLoss, L1Loss, LayerNorm,
    LeakyReLU, Linear, LogSoftmax, MaxPool2d, Mish, ModuleDict, ModuleList, MSELoss, NLLLoss, ReLU, ReLU6, RMSNorm,
    Sequential, Sigmoid, SiLU, SmoothL1Loss, Softmax, Softplus, Tanh, Upsample, UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from .parameter import Parameter  # noqa: F401
from .rnn import GRU, GRUCell, LSTM, LSTMCell  # noqa: F401
from .transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer  # noqa: F401
