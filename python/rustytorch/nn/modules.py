"""The layer classes, gathered from the files holding each kind (PyTorch's nn.modules)."""
from .activation import (  # noqa: F401
    CELU, ELU, GELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish,
    PReLU, ReLU, ReLU6, SELU, Sigmoid, SiLU, Softmax, Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanh,
    Tanhshrink, Threshold,
)
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d  # noqa: F401
from .dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout  # noqa: F401
from .embedding import Embedding  # noqa: F401
from .linear import Flatten, Identity, Linear  # noqa: F401
from .loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss,
)
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RMSNorm  # noqa: F401
from .padding import (  # noqa: F401
    ConstantPad1d, ConstantPad2d, ReflectionPad1d, ReflectionPad2d, ReplicationPad1d, ReplicationPad2d, ZeroPad1d,
    ZeroPad2d,
)
from .pooling import AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d  # noqa: F401
from .shape import PixelShuffle, PixelUnshuffle, Unflatten  # noqa: F401
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
