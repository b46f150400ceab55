"""rustytorch.amp: automatic mixed precision. autocast regions pick each op's dtype; GradScaler
scales the loss so float16 gradients do not underflow and skips steps whose gradients overflowed."""
from .autocast_mode import autocast  # noqa: F401
from .grad_scaler import GradScaler  # noqa: F401
