"""The arithmetic of a training run (--dtype), as PyTorch's automatic mixed precision recipe has it:
fp32 trains in float32 throughout; bf16 and fp16 run the forward and the loss under autocast in
that dtype while the parameters, gradients and optimizer state stay float32; fp16 also scales the
loss with a GradScaler, so that small gradients do not underflow float16, and skips the steps whose
gradients overflowed. Evaluation runs under the same autocast as training."""
import rustytorch as rt
from .. import amp, cuda

#: --dtype choices and the autocast dtype of each (fp32: no autocast).
AUTOCAST_DTYPES = {"bf16": rt.bfloat16, "fp16": rt.float16, "fp32": None}


def default_dtype(device):
    """bf16 on a GPU that computes in bfloat16 (compute capability 8.0 and later), else fp32."""
    return "bf16" if rt.device(device).type == "cuda" and cuda.is_bf16_supported() else "fp32"


class Precision:
    """The autocast context and the GradScaler of one --dtype on one device. The scaler of fp32 and
    bf16 is disabled: scale() returns the loss, unscale_() does nothing, step() is optimizer.step()."""

    def __init__(self, name, device):
        if name not in AUTOCAST_DTYPES:
            raise ValueError(f"--dtype must be one of {', '.join(AUTOCAST_DTYPES)}, got {name!r}")
        self.name = name
        self.device_type = rt.device(device).type
        self.dtype = AUTOCAST_DTYPES[name]
        self.scaler = amp.GradScaler(self.device_type, enabled=name == "fp16")

    def autocast(self):
        return rt.autocast(self.device_type, dtype=self.dtype, enabled=self.dtype is not None)
