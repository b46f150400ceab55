"""rustytorch.io: read_idx (IDX dataset files, plain or gzip, read by the library), and tensors to and
from safetensors files (8-byte little-endian header length, a JSON
header naming each tensor's dtype, shape and byte range, then the data).

save_file writes atomically (write_atomically: a temporary file in the same directory, fsync,
rename), so an
interrupted save never damages an existing file. load_file memory-maps the file copy-on-write (no
read of the data until it is touched) after checking every header entry: a truncated, corrupted or
hostile file raises CheckpointError naming the file and the tensor, without crashing and without
allocating what the header claims."""
import json
import mmap
import os
import struct
import tempfile

from . import _C
from ._C import read_idx  # noqa: F401  (re-exported)

_DTYPES = {
    "BOOL": _C.bool, "U8": _C.uint8, "I8": _C.int8, "I32": _C.int32, "I64": _C.int64, "F16": _C.float16,
    "BF16": _C.bfloat16, "F32": _C.float32, "F64": _C.float64,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024  # bytes; the format's own limit


def _fail(filename, what):
    raise _C.CheckpointError(f"[safetensors] {filename}: {what}")


def save_file(tensors, filename, metadata=None):
    """Writes a dict of name -> tensor (any device; stored row-major) with optional string metadata."""
    if not isinstance(tensors, dict):
        raise TypeError(f"save_file: expected a dict of name -> tensor, got {type(tensors).__name__}")
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("save_file: metadata must map strings to strings")
        header["__metadata__"] = dict(metadata)
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise TypeError(f"save_file: tensor names must be strings other than '__metadata__', got {name!r}")
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"save_file: '{name}' is a {type(t).__name__}, not a tensor")
        data = t._raw_bytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)

    def write(f):
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for blob in blobs:
            f.write(blob)

    write_atomically(filename, write)


def write_atomically(filename, write):
    """Calls write(binary file) on a temporary file beside filename, syncs it and renames it over
    filename: readers see the old file or the whole new one, never a part."""
    directory = os.path.dirname(os.path.abspath(filename))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, filename)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _read_header(filename, f, size):
    if size < 8:
        _fail(filename, f"the file has {size} bytes, fewer than the 8-byte header length")
    (n,) = struct.unpack("<Q", f.read(8))
    if n > _MAX_HEADER or n > size - 8:
        _fail(filename, f"the header claims {n} bytes but the file has {size - 8} after the length "
                        f"(limit {_MAX_HEADER}): truncated or not a safetensors file")
    try:
        header = json.loads(f.read(n).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        _fail(filename, f"the header is not valid JSON ({e})")
    if not isinstance(header, dict):
        _fail(filename, "the header is not a JSON object")
    return n, header


def _check_entries(filename, header, data_size):
    """(name, dtype, shape, begin, end) for every tensor, after checking dtype, shape, byte range,
    size and overlaps."""
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            _fail(filename, f"tensor '{name}': its header entry is not an object")
        dtype = _DTYPES.get(info.get("dtype"))
        if dtype is None:
            _fail(filename, f"tensor '{name}': unsupported dtype {info.get('dtype')!r}")
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                  for s in shape):
            _fail(filename, f"tensor '{name}': shape {shape!r} is not a list of non-negative integers")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            _fail(filename, f"tensor '{name}': data_offsets {offsets!r} is not a pair of integers")
        begin, end = offsets
        if not 0 <= begin <= end <= data_size:
            _fail(filename, f"tensor '{name}': bytes [{begin}, {end}) lie outside the {data_size} bytes of data")
        numel = 1
        for s in shape:
            numel *= s
        if numel * dtype.itemsize != end - begin:
            _fail(filename, f"tensor '{name}': shape {shape} of {dtype} needs {numel * dtype.itemsize} bytes, "
                            f"the header gives {end - begin}")
        entries.append((name, dtype, shape, begin, end))
    ordered = sorted(entries, key=lambda e: (e[3], e[4]))
    for prev, cur in zip(ordered, ordered[1:]):
        if cur[3] < prev[4]:
            _fail(filename, f"tensors '{prev[0]}' and '{cur[0]}' overlap in the file")
    return entries


def load_file(filename, device="cpu"):
    """The dict of name -> tensor stored in a safetensors file, memory-mapped (copy-on-write: writes
    to the tensors never reach the file), then moved to device."""
    try:
        f = open(filename, "rb")
    except OSError as e:
        raise _C.CheckpointError(f"[safetensors] {filename}: cannot open ({e.strerror})") from e
    with f:
        size = os.fstat(f.fileno()).st_size
        n, header = _read_header(filename, f, size)
        entries = _check_entries(filename, header, size - 8 - n)
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if size > 0 and entries else None
    out = {}
    for name, dtype, shape, begin, end in entries:
        if end == begin:
            t = _C.empty(*shape, dtype=dtype)
        else:
            t = _C.frombuffer(mapped, dtype=dtype, count=(end - begin) // dtype.itemsize,
                              offset=8 + n + begin).reshape(shape)
        out[name] = t if str(device) == "cpu" else t.to(device)
    return out


def load_metadata(filename):
    """The string metadata stored in a safetensors file's header (empty when none)."""
    with open(filename, "rb") as f:
        _, header = _read_header(filename, f, os.fstat(f.fileno()).st_size)
    return dict(header.get("__metadata__", {}))


def save(obj, f):
    """Saves a dict of name -> tensor (e.g. a module's state_dict()) to the path f, as safetensors."""
    if not isinstance(obj, dict):
        raise TypeError("rustytorch.save stores a dict of name -> tensor (such as a state_dict) in the "
                        f"safetensors format; got {type(obj).__name__}")
    save_file(dict(obj), os.fspath(f))


def load(f, map_location="cpu"):
    """The dict of tensors rustytorch.save (or any safetensors writer) stored at the path f."""
    return load_file(os.fspath(f), device=map_location or "cpu")
