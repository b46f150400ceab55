"""rustytorch.io: reading and writing data files. read_idx (IDX dataset files, plain or gzip, read
by the library); safetensors files of named tensors (save_file, load_file, load_metadata,
write_atomically: _safetensors); and save / load, checkpoints of nested structures that PyTorch
scripts write with torch.save and read with torch.load (serialization, which also reads PyTorch's
own zip checkpoints)."""
from ._C import read_idx  # noqa: F401  (re-exported)
from ._safetensors import load_file, load_metadata, save_file, write_atomically  # noqa: F401
from .serialization import load, save  # noqa: F401
