"""rustytorch._inductor: a home for `import torch._inductor.config as config`; see its config."""
from . import config
