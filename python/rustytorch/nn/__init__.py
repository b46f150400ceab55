"""rustytorch.nn: modules, parameters, the functional interface, initializers and utilities."""
from . import functional, init, parallel, utils  # noqa: F401
from .module import Module  # noqa: F401
from .modules import (  # noqa: F401
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AlphaDropout, AvgPool1d, AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss,
    BCEWithLogitsLoss, CELU, ConstantPad1d, ConstantPad2d, Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d,
    CrossEntropyLoss, Dropout, Dropout1d, Dropout2d, Dropout3d, ELU, Embedding, FeatureAlphaDropout, Flatten, GELU,
    GLU, GroupNorm, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, HuberLoss, Identity, KLDivLoss, L1Loss, LayerNorm,
    LeakyReLU, Linear, LogSigmoid, LogSoftmax, MaxPool1d, MaxPool2d, Mish, ModuleDict, ModuleList, MSELoss, NLLLoss,
    ParameterDict, ParameterList, PixelShuffle, PixelUnshuffle, PReLU, ReflectionPad1d, ReflectionPad2d, ReLU,
    ReLU6, ReplicationPad1d, ReplicationPad2d, RMSNorm, SELU, Sequential, Sigmoid, SiLU, SmoothL1Loss, Softmax,
    Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanh, Tanhshrink, Threshold, Unflatten, Upsample,
    UpsamplingBilinear2d, UpsamplingNearest2d, ZeroPad1d, ZeroPad2d,
)
from .parameter import Parameter  # noqa: F401
from .rnn import GRU, GRUCell, LSTM, LSTMCell  # noqa: F401
from .transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer  # noqa: F401
from .transformer_decoder import Transformer, TransformerDecoder, TransformerDecoderLayer  # noqa: F401
