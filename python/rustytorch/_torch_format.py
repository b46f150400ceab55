"""PyTorch's checkpoint format (what torch.save writes since PyTorch 1.6), read without torch: a zip
archive holding <archive>/data.pkl (the pickled object), <archive>/data/<key> (each storage's raw
bytes), <archive>/byteorder and <archive>/version.

The pickle is read by a restricted unpickler: find_class allows only the globals that describe
tensors and plain data (the tensor and parameter rebuild functions, the typed storage classes,
UntypedStorage, dtypes, torch.Size, torch.device, collections.OrderedDict) and the classes the
program marked as trusted (serialization.add_safe_globals, as for PyTorch's weights-only loads); any
other global raises CheckpointError naming it, so loading never runs code the file names. Each storage becomes one 1-d
tensor (placed as map_location says), and every tensor is an as_strided view of its storage with
the saved sizes, strides and offset, so tensors that shared a storage share memory again."""
import io
import pickle
import pickletools
import sys
import zipfile
from collections import OrderedDict, namedtuple

import numpy as np

from . import _C, _trusted_classes

_TYPED_STORAGES = {
    "DoubleStorage": _C.float64, "FloatStorage": _C.float32, "HalfStorage": _C.float16,
    "BFloat16Storage": _C.bfloat16, "LongStorage": _C.int64, "IntStorage": _C.int32, "CharStorage": _C.int8,
    "ByteStorage": _C.uint8, "BoolStorage": _C.bool, "ShortStorage": _C.int16,
}
_DTYPES = {
    "float64": _C.float64, "float32": _C.float32, "float16": _C.float16, "bfloat16": _C.bfloat16,
    "int64": _C.int64, "int32": _C.int32, "int8": _C.int8, "uint8": _C.uint8, "bool": _C.bool,
    "int16": _C.int16,
}
# torch globals naming element types rustytorch does not have (torch.save rebuilds the tensors of
# the dtypes without a typed storage class, uint16 to uint64 and float8, with _rebuild_tensor_v3).
_UNSUPPORTED = {
    "torch.ComplexFloatStorage": "complex64",
    "torch.ComplexDoubleStorage": "complex128", "torch.complex32": "complex32",
    "torch.complex64": "complex64", "torch.complex128": "complex128", "torch.uint16": "uint16",
    "torch.uint32": "uint32", "torch.uint64": "uint64", "torch.float8_e4m3fn": "float8_e4m3fn",
    "torch.float8_e5m2": "float8_e5m2",
    "torch._utils._rebuild_tensor_v3": "uint16, uint32, uint64 or float8",
}

_StorageType = namedtuple("_StorageType", "dtype")  # what a storage class global unpickles to
_Storage = namedtuple("_Storage", "tensor key")     # what a persistent id unpickles to


class _RestoreError(Exception):
    """Carries (as __cause__) an error of map_location through the unpickler, to be raised as it is."""


def _fail(name, what):
    raise _C.CheckpointError(f"[pytorch] {name}: {what}")


def _read_record(archive, record, size, name):
    """The bytes of an archive record as a bytearray, after checking that the size-byte archive
    really holds them (nothing is allocated for what a corrupt header claims)."""
    try:
        info = archive.getinfo(record)
    except KeyError:
        _fail(name, f"the archive has no record {record}")
    if info.compress_type != zipfile.ZIP_STORED:
        _fail(name, f"record {record} is compressed (method {info.compress_type}); PyTorch stores records "
                    "uncompressed")
    if info.file_size != info.compress_size or info.header_offset + info.compress_size > size:
        _fail(name, f"record {record} claims {info.file_size} bytes at offset {info.header_offset} of a "
                    f"{size}-byte archive: truncated or corrupt")
    try:
        return bytearray(archive.read(info))
    except Exception as e:  # zipfile's reasons for a damaged archive are many (BadZipFile, EOFError, ...)
        _fail(name, f"cannot read record {record} ({type(e).__name__}: {e})")


def _check_pickle(data, name):
    """Reads the pickle's opcodes (pickletools, not executing them) before the unpickler runs, to
    refuse what would make it allocate more than the data can describe: an argument longer than the
    bytes that remain (the unpickler allocates the claimed length first), a memo index no pickle of
    this size can have reached (it grows its memo table to the largest index), and the bytearray and
    out-of-band buffer opcodes of protocol 5, which PyTorch checkpoints never hold."""
    try:
        for opcode, arg, position in pickletools.genops(data):
            if opcode.name in ("BYTEARRAY8", "NEXT_BUFFER", "READONLY_BUFFER"):
                _fail(name, f"the pickle holds a {opcode.name} opcode at byte {position}; PyTorch checkpoints have "
                            "no bytearrays or out-of-band buffers")
            if opcode.name in ("PUT", "BINPUT", "LONG_BINPUT") and not 0 <= arg < len(data):
                _fail(name, f"the pickle stores memo entry {arg} at byte {position}, beyond any a "
                            f"{len(data)}-byte pickle can have")
    except _C.Error:
        raise
    except Exception as e:  # pickletools' reasons for a damaged pickle (ValueError, struct.error, ...)
        _fail(name, f"the pickle is damaged ({type(e).__name__}: {e})")


class _Rebuilder:
    """The storages of one checkpoint and the functions that make its tensors from them, which the
    unpickler hands the pickle. Kept apart from the unpickler: after a failed load, the unpickler's
    stack (where the garbage collector does not look) still holds what find_class returned, and
    bound methods of the unpickler itself there would keep it alive for ever."""

    def __init__(self, archive, prefix, name, size, restore, swap):
        self._archive, self._prefix, self._name, self._size = archive, prefix, name, size
        self._restore, self._swap = restore, swap
        self._storages = {}  # key -> _Storage

    def fail(self, what):
        _fail(self._name, what)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            self.fail(f"unexpected persistent id {repr(pid)[:200]}")
        _, kind, key, location, numel = pid
        if not (isinstance(kind, _StorageType) and isinstance(key, str) and isinstance(location, str)
                and isinstance(numel, int) and not isinstance(numel, bool) and numel >= 0):
            self.fail(f"malformed storage reference {repr(pid)[:200]}")
        storage = self._storages.get(key)
        if storage is None:
            tensor = self._read_storage(key, kind.dtype, numel)
            try:
                tensor = self._restore(tensor, location)
            except Exception as e:
                raise _RestoreError() from e
            storage = self._storages[key] = _Storage(tensor, key)
        elif storage.tensor.dtype != kind.dtype or storage.tensor.numel() != numel:
            self.fail(f"storage '{key}' is referenced as {storage.tensor.numel()} elements of "
                      f"{storage.tensor.dtype} and as {numel} of {kind.dtype}")
        return storage

    def _read_storage(self, key, dtype, numel):
        record = f"{self._prefix}data/{key}"
        data, nbytes = _read_record(self._archive, record, self._size, self._name), numel * dtype.itemsize
        if len(data) != nbytes:
            self.fail(f"storage '{key}' holds {numel} elements of {dtype} ({nbytes} bytes) but its record "
                      f"{record} has {len(data)} bytes")
        if nbytes == 0:
            return _C.empty(0, dtype=dtype)
        if self._swap and dtype.itemsize > 1:
            np.frombuffer(data, dtype=f"u{dtype.itemsize}").byteswap(inplace=True)
        return _C.frombuffer(data, dtype=dtype)

    def rebuild_tensor(self, storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
        if not isinstance(storage, _Storage):
            self.fail(f"_rebuild_tensor_v2 got a {type(storage).__name__} where a storage belongs")
        if metadata:
            self.fail(f"tensor metadata {repr(metadata)[:200]} (e.g. conjugate or negative bits) is not supported")
        try:
            t = storage.tensor.as_strided(size, stride, storage_offset)
        except Exception as e:
            self.fail(f"a tensor of size {repr(size)[:200]}, stride {repr(stride)[:200]} and offset "
                      f"{repr(storage_offset)[:50]} does not fit storage '{storage.key}' of {storage.tensor.numel()} "
                      f"elements ({e})")
        return self._requires_grad(t, requires_grad)

    def rebuild_parameter(self, data, requires_grad, backward_hooks):
        if not isinstance(data, _C.Tensor):
            self.fail(f"_rebuild_parameter got a {type(data).__name__} where a tensor belongs")
        return self._requires_grad(data, requires_grad)

    def _requires_grad(self, t, requires_grad):
        if not isinstance(requires_grad, bool) or (requires_grad and not t.is_floating_point()):
            self.fail(f"a tensor of {t.dtype} has requires_grad={requires_grad!r}")
        return t.requires_grad_(requires_grad)


class _Unpickler(pickle.Unpickler):
    def __init__(self, data, rebuilder):
        super().__init__(io.BytesIO(data))
        self._rebuilder = rebuilder
        self._globals = {
            "torch._utils._rebuild_tensor_v2": rebuilder.rebuild_tensor,
            "torch._utils._rebuild_parameter": rebuilder.rebuild_parameter,
            "torch.storage.UntypedStorage": _StorageType(_C.uint8),
            "collections.OrderedDict": OrderedDict,
            "torch.Size": tuple,
            "torch.device": _C.device,
        }
        self._globals.update({f"torch.{k}": _StorageType(v) for k, v in _TYPED_STORAGES.items()})
        self._globals.update({f"torch.{k}": v for k, v in _DTYPES.items()})

    def find_class(self, module, name):
        found = self._globals.get(f"{module}.{name}") or _trusted_classes.find(f"{module}.{name}")
        if found is not None:
            return found
        if f"{module}.{name}" in _UNSUPPORTED:
            self._rebuilder.fail(f"the checkpoint holds {_UNSUPPORTED[f'{module}.{name}']} data ({module}.{name}); "
                                 "rustytorch has no such dtype")
        self._rebuilder.fail(f"the pickle refers to the global {module}.{name}, which rustytorch does not load: it "
                             "loads tensors, plain data and objects of the classes you mark as trusted, never code; "
                             f"if {name} is a class of yours holding plain data, call "
                             f"rustytorch.serialization.add_safe_globals([{name}]) first")

    def persistent_load(self, pid):
        return self._rebuilder.persistent_load(pid)


def load(source, size, name, restore):
    """The object of the PyTorch zip checkpoint source (a path or a seekable binary stream of size
    bytes), with each storage placed by restore(tensor, location); name names it in errors."""
    try:
        archive = zipfile.ZipFile(source)
    except Exception as e:  # zipfile's reasons for a damaged archive are many (BadZipFile, NotImplementedError, ...)
        raise _C.CheckpointError(f"[pytorch] {name}: not a readable zip archive ({e})") from e
    with archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            _fail(name, f"expected one <archive>/data.pkl record, found {pickles}; not a torch.save checkpoint")
        prefix = pickles[0][:-len("data.pkl")]
        byteorder = sys.byteorder
        if prefix + "byteorder" in archive.namelist():
            byteorder = bytes(_read_record(archive, prefix + "byteorder", size, name)).decode("ascii", "replace")
        if byteorder not in ("little", "big"):
            _fail(name, f"the byteorder record says {byteorder[:20]!r}, not 'little' or 'big'")
        data = _read_record(archive, pickles[0], size, name)
        _check_pickle(data, name)
        unpickler = _Unpickler(data, _Rebuilder(archive, prefix, name, size, restore, byteorder != sys.byteorder))
        try:
            return unpickler.load()
        except _RestoreError as e:
            error = e.__cause__
        except (_C.CheckpointError, _C.OutOfMemoryError):
            raise
        except Exception as e:  # anything else the file's opcodes made the objects do (a setitem on a tensor, ...)
            _fail(name, f"cannot unpickle {pickles[0]} ({type(e).__name__}: {e})")
    raise error  # map_location's own error, outside the handler so that it keeps its traceback alone
