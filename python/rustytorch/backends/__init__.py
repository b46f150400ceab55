"""rustytorch.backends: the switches of torch.backends that scripts set (cuda.matmul.allow_tf32,
cudnn.allow_tf32, cudnn.benchmark, cudnn.deterministic, cudnn.enabled) and the availability queries
of torch.backends.cuda, cudnn and mps."""
from . import cuda, cudnn, mps  # noqa: F401
