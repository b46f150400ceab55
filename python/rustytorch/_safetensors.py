"""The safetensors format: an 8-byte little-endian header length, a JSON header naming each
tensor's dtype, shape and byte range (plus an optional string -> string `__metadata__` map), then
the data.

save_file writes atomically (write_atomically: a temporary file in the same directory, fsync,
rename), so an interrupted save never damages an existing file. Reading works on a writable
buffer: load_file memory-maps the file copy-on-write (no read of the data until it is touched), and
read() takes any buffer (e.g. the bytes of a file-like object), after checking every header entry:
a truncated, corrupted or hostile file raises CheckpointError naming the file and the tensor,
without crashing and without allocating what the header claims."""
import json
import mmap
import os
import struct
import tempfile

from . import _C

_DTYPES = {
    "BOOL": _C.bool, "U8": _C.uint8, "I8": _C.int8, "I32": _C.int32, "I64": _C.int64, "F16": _C.float16,
    "BF16": _C.bfloat16, "F32": _C.float32, "F64": _C.float64,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024  # bytes; the format's own limit


def _fail(filename, what):
    raise _C.CheckpointError(f"[safetensors] {filename}: {what}")


def write(tensors, f, metadata=None):
    """Writes a dict of name -> tensor (any device, any layout; stored row-major) with optional
    string metadata to the binary file object f."""
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
    f.write(struct.pack("<Q", len(encoded)))
    f.write(encoded)
    for blob in blobs:
        f.write(blob)


def save_file(tensors, filename, metadata=None):
    """Writes a dict of name -> tensor (any device; stored row-major) with optional string metadata."""
    write_atomically(filename, lambda f: write(tensors, f, metadata))


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


def map_file(f):
    """The contents of the open binary file f as a writable buffer: a copy-on-write memory map
    (writes never reach the file), or an empty bytearray for an empty file."""
    size = os.fstat(f.fileno()).st_size
    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if size > 0 else bytearray()


def _read_header(filename, buffer):
    size = len(buffer)
    if size < 8:
        _fail(filename, f"the file has {size} bytes, fewer than the 8-byte header length")
    (n,) = struct.unpack_from("<Q", buffer, 0)
    if n > _MAX_HEADER or n > size - 8:
        _fail(filename, f"the header claims {n} bytes but the file has {size - 8} after the length "
                        f"(limit {_MAX_HEADER}): truncated or not a safetensors file")
    try:
        header = json.loads(bytes(buffer[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        _fail(filename, f"the header is not valid JSON ({e})")
    if not isinstance(header, dict):
        _fail(filename, "the header is not a JSON object")
    metadata = header.get("__metadata__", {})
    if not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        _fail(filename, "__metadata__ is not a map of strings to strings")
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


def read(buffer, filename):
    """(dict of name -> CPU tensor, metadata dict) of the safetensors data in the writable buffer
    (the tensors view the buffer, no copy); filename names the source in errors."""
    n, header = _read_header(filename, buffer)
    out = {}
    for name, dtype, shape, begin, end in _check_entries(filename, header, len(buffer) - 8 - n):
        if end == begin:
            out[name] = _C.empty(*shape, dtype=dtype)
        else:
            out[name] = _C.frombuffer(buffer, dtype=dtype, count=(end - begin) // dtype.itemsize,
                                      offset=8 + n + begin).reshape(shape)
    return out, dict(header.get("__metadata__", {}))


def load_file(filename, device="cpu"):
    """The dict of name -> tensor stored in a safetensors file, memory-mapped (copy-on-write: writes
    to the tensors never reach the file), then moved to device."""
    try:
        f = open(filename, "rb")
    except OSError as e:
        raise _C.CheckpointError(f"[safetensors] {filename}: cannot open ({e.strerror})") from e
    with f:
        buffer = map_file(f)
    tensors, _ = read(buffer, filename)
    return {name: t if str(device) == "cpu" else t.to(device) for name, t in tensors.items()}


def load_metadata(filename):
    """The string metadata stored in a safetensors file's header (empty when none)."""
    with open(filename, "rb") as f:
        _, header = _read_header(filename, map_file(f))
    return dict(header.get("__metadata__", {}))
