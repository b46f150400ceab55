"""The safetensors format: an 8-byte little-endian header length, a JSON header naming each
tensor's dtype, shape and byte range (plus an optional string -> string `__metadata__` map), then
the data, which the tensors' byte ranges cover exactly.

Writing (save_file, and rustytorch.save through write_atomically) goes through a locked temporary
file "<target>.rtx-partial-XXXXXX" beside the target, synced and renamed over it
(rustytorch._C._write_atomically): an interrupted save never damages an existing file, and the next
save into the same directory removes what a killed one left. Every file written carries a CRC-32 in its
metadata (CHECKSUM_KEY) covering the header and the data, which reading verifies when present; other
safetensors readers see an ordinary metadata string.

Reading checks everything before using it: the header's size (at most the format's 100 MB), strict
JSON (no duplicate keys, no runaway nesting), every entry's dtype, shape and byte range, that the
ranges tile the data section, and the checksum; a truncated, corrupted or hostile file raises
CheckpointError naming the file and the tensor, without crashing and without allocating what the
header claims. Bytes of BOOL tensors other than 0 and 1 read as True (frombuffer stores them as 1).

Memory mapping: load_file(mmap=True), its default, maps the file copy-on-write, so the tensors view
the page cache and writes to them never reach the file. The mapping stays valid while the file is
replaced by a rename (as every save here does) or deleted, but not while it is truncated or
rewritten in place by another program: touching a page that is gone then kills the process
(SIGBUS). mmap=False reads the file into memory at once and does not depend on it afterwards."""
import contextlib
import gc
import json
import operator
import mmap as _mmap
import os
import re
import struct
import zlib

from . import _C

_DTYPES = {
    "BOOL": _C.bool, "U8": _C.uint8, "I8": _C.int8, "I16": _C.int16, "I32": _C.int32, "I64": _C.int64, "F16": _C.float16,
    "BF16": _C.bfloat16, "F32": _C.float32, "F64": _C.float64,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_DTYPE_NAMES = {k: k for k in _DTYPES}
_MAX_HEADER = 100_000_000  # bytes: the limit of the safetensors reference implementation
_MAX_DIM = 2 ** 63 - 1
# The metadata key of the checksum: 8 lowercase hex digits of the CRC-32 (zlib.crc32) of the file
# from byte 8 on (header and data), computed with those 8 digits written as "00000000".
CHECKSUM_KEY = "rustytorch.crc32"
_PLACEHOLDER = "00000000"
_HEX8 = re.compile(r"[0-9a-f]{8}\Z")


def _fail(filename, what):
    raise _C.CheckpointError(f"[safetensors] {filename}: {what}")


def _shown(value):
    """A name (as it is) or a value (its repr) for messages, cut to 200 characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _checksum_field(value):
    """The bytes of the checksum's key and value as write() puts them in the header."""
    return f'"{CHECKSUM_KEY}":"{value}"'.encode()


def path_of(filename, op):
    """os.fspath(filename) for a str or os.PathLike; TypeError for anything else (an int would be
    taken for a file descriptor) and rustytorch.ValueError for a NUL byte (the C library would cut
    the path there and open another file)."""
    if not isinstance(filename, (str, os.PathLike)):
        raise TypeError(f"{op}: expected a path (str or os.PathLike), got {type(filename).__name__}")
    path = os.fspath(filename)
    if ("\0" if isinstance(path, str) else b"\0") in path:
        raise _C.ValueError(f"[{op}] path {path!r}: a path cannot contain a NUL byte")
    return path


class DuplicateKeyError(ValueError):
    """A JSON object that repeats a key (args: the key)."""


def _unique_object(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return obj


@contextlib.contextmanager
def _collector_paused():
    """Pauses the garbage collector: the millions of fresh containers a large header makes are no
    garbage, and collecting through them again and again would make reading it quadratic."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def loads_strict(text, object_pairs_hook=_unique_object):
    """json.loads refusing objects that repeat a key (DuplicateKeyError, a ValueError). Raises ValueError
    for invalid JSON and RecursionError for nesting deeper than Python's recursion limit."""
    with _collector_paused():
        return json.loads(text, object_pairs_hook=object_pairs_hook)


def _header_object(pairs):
    """The object_pairs_hook of headers: a tensor entry (an object whose data_offsets is a list, as no
    valid metadata map has) becomes the tuple (dtype, shape, data_offsets), its dtype string shared;
    other objects become dicts. A third of the memory of dicts, for headers of millions of entries."""
    obj = _unique_object(pairs)
    offsets = obj.get("data_offsets")
    if type(offsets) is not list:
        return obj
    dtype = obj.get("dtype")
    return (_DTYPE_NAMES.get(dtype, dtype) if type(dtype) is str else dtype, obj.get("shape"), offsets)


def write(tensors, f, metadata=None):
    """Writes a dict of name -> tensor (any device, any layout; stored row-major) with optional
    string metadata and the checksum to the binary file object f."""
    if not isinstance(tensors, dict):
        raise TypeError(f"save_file: expected a dict of name -> tensor, got {type(tensors).__name__}")
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError("save_file: metadata must map strings to strings")
    meta = {k: v for k, v in (metadata or {}).items() if k != CHECKSUM_KEY}
    meta[CHECKSUM_KEY] = _PLACEHOLDER
    header, blobs, offset = {"__metadata__": meta}, [], 0
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
    crc = zlib.crc32(encoded)
    for blob in blobs:
        crc = zlib.crc32(blob, crc)
    encoded = encoded.replace(_checksum_field(_PLACEHOLDER), _checksum_field(f"{crc:08x}"), 1)
    f.write(struct.pack("<Q", len(encoded)))
    f.write(encoded)
    for blob in blobs:
        f.write(blob)


def atomic_write(filename, write, op):
    """Calls write(binary file object) on a locked temporary file beside filename, syncs it and
    renames it over filename; errors name op."""
    def to_descriptor(fd):
        with os.fdopen(fd, "wb", closefd=False) as f:
            write(f)

    _C._write_atomically(path_of(filename, op), op, to_descriptor)


def write_atomically(filename, write):
    """Calls write(binary file object) on a temporary file beside filename, syncs it and renames it
    over filename: readers see the old file or the whole new one, never a part."""
    atomic_write(filename, write, "write_atomically")


def save_file(tensors, filename, metadata=None):
    """Writes a dict of name -> tensor (any device; stored row-major) with optional string metadata."""
    atomic_write(filename, lambda f: write(tensors, f, metadata), "save_file")


def file_buffer(f, mmap, filename):
    """The contents of the open binary file f as a writable buffer: a copy-on-write memory map (mmap;
    see the contract above) or a bytearray read at once."""
    size = os.fstat(f.fileno()).st_size
    if mmap and size > 0:
        try:
            return _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_COPY)
        except (OSError, ValueError) as e:
            _fail(filename, f"cannot map the file ({e})")
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        n = f.readinto(view[got:])
        if not n:
            break
        got += n
    del view
    del buffer[got:]  # the file shrank meanwhile
    return buffer


def _parse_header(filename, text):
    """(tensor entries, metadata) of the header text."""
    try:
        header = loads_strict(text, _header_object)
    except DuplicateKeyError as e:
        _fail(filename, f"the header has the key {e.args[0]!r} twice in one JSON object")
    except (ValueError, RecursionError) as e:
        _fail(filename, f"the header is not valid JSON ({type(e).__name__}: {e})")
    if not isinstance(header, dict):
        _fail(filename, "the header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        _fail(filename, "__metadata__ is not an object mapping strings to strings")
    for key, value in metadata.items():
        if not isinstance(value, str):
            _fail(filename, f"__metadata__ must map strings to strings; the value of {_shown(key)!r} is not a string")
    return header, metadata


def _read_header(filename, buffer):
    """(header length n, tensor entries, metadata) of the file in buffer."""
    size = len(buffer)
    if size < 8:
        _fail(filename, f"the file has {size} bytes, fewer than the 8-byte header length")
    (n,) = struct.unpack_from("<Q", buffer, 0)
    if n > _MAX_HEADER:
        _fail(filename, f"the header claims {n} bytes, more than the format's limit of {_MAX_HEADER}: corrupt or "
                        "not a safetensors file")
    if n > size - 8:
        _fail(filename, f"the header claims {n} bytes but the file has {size - 8} after the length: truncated or "
                        "not a safetensors file")
    try:
        text = str(memoryview(buffer)[8:8 + n], "utf-8")
    except UnicodeDecodeError as e:
        _fail(filename, f"the header is not UTF-8 text ({e})")
    return (n,) + _parse_header(filename, text)


def _check_entries(filename, header, data_size):
    """[(name, dtype, shape, begin, end)] of every tensor in header order, after checking dtype,
    shape, byte range and size, and that the ranges cover the data section without gaps or overlaps."""
    entries = []
    for name, info in header.items():
        if type(info) is not tuple:
            _fail(filename, f"tensor '{_shown(name)}': its header entry is not an object with dtype, shape and "
                            "data_offsets")
        dtype_name, shape, offsets = info
        dtype = _DTYPES.get(dtype_name) if type(dtype_name) is str else None
        if dtype is None:
            _fail(filename, f"tensor '{_shown(name)}': unsupported dtype {_shown(repr(dtype_name))}")
        if not isinstance(shape, list) or not all(type(s) is int and 0 <= s <= _MAX_DIM for s in shape):
            _fail(filename, f"tensor '{_shown(name)}': shape {_shown(shape)} is not a list of integers in "
                            f"[0, {_MAX_DIM}]")
        if not (len(offsets) == 2 and all(type(o) is int for o in offsets)):
            _fail(filename, f"tensor '{_shown(name)}': data_offsets {_shown(offsets)} is not a pair of integers")
        begin, end = offsets
        if not 0 <= begin <= end <= data_size:
            _fail(filename, f"tensor '{_shown(name)}': bytes [{begin}, {end}) lie outside the {data_size} bytes of data")
        numel = 0 if 0 in shape else 1
        if numel:
            for s in shape:
                numel *= s
                if numel > data_size:  # already too large: multiplying on could take very long
                    break
        if numel * dtype.itemsize != end - begin:
            size = f"{numel * dtype.itemsize} bytes" if numel <= data_size else f"more than the {data_size} bytes of data"
            _fail(filename, f"tensor '{_shown(name)}': shape {_shown(shape)} of {dtype} needs {size}, the header gives {end - begin}")
        entries.append((name, dtype, shape, begin, end))
    position = 0
    for name, _, _, begin, end in sorted(entries, key=operator.itemgetter(3, 4)):
        if begin < position:
            _fail(filename, f"tensor '{_shown(name)}': bytes [{begin}, {end}) overlap another tensor's")
        if begin > position:
            _fail(filename, f"bytes [{position}, {begin}) of the data belong to no tensor")
        position = end
    if position != data_size:
        _fail(filename, f"bytes [{position}, {data_size}) of the data belong to no tensor")
    return entries


def _verify_checksum(filename, buffer, n, value):
    if not _HEX8.match(value):
        _fail(filename, f"the checksum {CHECKSUM_KEY} = {value[:40]!r} is not 8 lowercase hex digits")
    field = _checksum_field(value)
    header = bytes(memoryview(buffer)[8:8 + n])
    at = header.find(field)
    if at < 0 or header.find(field, at + 1) >= 0:
        _fail(filename, f"the header does not hold {CHECKSUM_KEY} once as rustytorch writes it: the header was "
                        "rewritten or damaged")
    view = memoryview(buffer)
    crc = zlib.crc32(view[8:8 + at])
    crc = zlib.crc32(_checksum_field(_PLACEHOLDER), crc)
    crc = zlib.crc32(view[8 + at + len(field):], crc)
    if crc != int(value, 16):
        _fail(filename, f"checksum mismatch: the file's CRC-32 is {crc:08x}, its header says {value}, so its bytes "
                        "changed after it was written (a damaged disk or copy, or another program that rewrote "
                        f"it keeping rustytorch's {CHECKSUM_KEY} metadata)")


def read(buffer, filename):
    """(dict of name -> CPU tensor, metadata dict without the checksum) of the safetensors data in the
    writable buffer (the tensors view the buffer, no copy); filename names the source in errors."""
    with _collector_paused():
        n, header, metadata = _read_header(filename, buffer)
        entries = _check_entries(filename, header, len(buffer) - 8 - n)
        del header  # the parsed JSON: only the checked entries are needed from here on
        if CHECKSUM_KEY in metadata:
            _verify_checksum(filename, buffer, n, metadata.pop(CHECKSUM_KEY))
        return _tensors(filename, buffer, n, entries), metadata


def _tensors(filename, buffer, n, entries):
    """The dict of name -> tensor of checked entries, viewing buffer."""
    out = {}
    for name, dtype, shape, begin, end in entries:
        try:
            if end == begin:
                out[name] = _C.empty(*shape, dtype=dtype)
                continue
            out[name] = _C.frombuffer(buffer, dtype=dtype, count=(end - begin) // dtype.itemsize,
                                      offset=8 + n + begin).reshape(shape)
        except _C.Error as e:
            _fail(filename, f"tensor '{_shown(name)}': cannot make a tensor of shape {_shown(shape)} and {dtype} ({e})")
    return out


def _target_device(device, filename):
    """device (a string, rustytorch.device or CUDA index) as a rustytorch.device."""
    if isinstance(device, _C.device):
        return device
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        device = f"cuda:{device}"
    if not isinstance(device, str):
        raise TypeError(f"[safetensors] {filename}: device must be a string, a rustytorch.device or a CUDA index, "
                        f"got {type(device).__name__}")
    try:
        return _C.device(device)
    except _C.Error as e:
        raise _C.ValueError(f"[safetensors] {filename}: device={device!r} is not a device ({e})") from None


def _open(path):
    try:
        return open(path, "rb")
    except OSError as e:
        raise _C.CheckpointError(f"[safetensors] {path}: cannot open ({e.strerror})") from e


def load_file(filename, device="cpu", *, mmap=True):
    """The dict of name -> tensor stored in a safetensors file, on device. mmap=True (the default)
    maps the file copy-on-write (see the contract in this module's description: the file must not be
    truncated or rewritten in place while the tensors live); mmap=False reads it into memory."""
    path = path_of(filename, "load_file")
    target = _target_device(device, path)
    with _open(path) as f:
        buffer = file_buffer(f, mmap, path)
    tensors, _ = read(buffer, path)
    return {name: t if target.type == "cpu" else t.to(target) for name, t in tensors.items()}


def load_metadata(filename):
    """The string metadata in a safetensors file's header (empty when none; without the checksum,
    which load_file verifies). Reads only the header."""
    path = path_of(filename, "load_metadata")
    with _open(path) as f:
        start = f.read(8)
        n = struct.unpack("<Q", start)[0] if len(start) == 8 else 0
        buffer = start + (f.read(n) if n <= _MAX_HEADER else b"")
    _, _, metadata = _read_header(path, buffer)
    metadata.pop(CHECKSUM_KEY, None)
    return metadata
