"""rustytorch.save / rustytorch.load: checkpoints of nested Python structures (dict, OrderedDict,
list, tuple, tensors, numbers, strings, None, dtypes, devices, and plain objects such as config
dataclasses) as valid safetensors files.

The tensors are the file's named entries (named by their path in the structure, e.g.
"model.wte.weight"); the structure is plain JSON in the `__metadata__` map under
"rustytorch.checkpoint": {"version": 1, "locations": {entry: saved device}, "root": node}. A node is
a JSON string, number, true/false or null for those Python values, or an object with a "kind":
dict / ordered_dict ("items": [[key node, value node], ...]), list / tuple ("items": [nodes]),
tensor ("entry", "requires_grad"), float ("value": "inf", "-inf" or "nan"), dtype / device ("name"),
object ("class": "module.qualname", "state": a dict node of its attributes; loaded only for classes
marked trusted with add_safe_globals, as PyTorch's weights-only loads do).
A tensor reached twice (the same tensor object, or tensors viewing exactly the same memory with the
same shape and strides, such as tied weights in a state dict) is stored once and loads as one tensor
object; views sharing memory only in part are stored separately.

rustytorch.load also reads plain safetensors files (as a dict) and PyTorch's zip checkpoints
(_torch_format), and places the tensors as map_location says, as torch.load does."""
import io
import json
import math
import os
from collections import OrderedDict

from . import _C, _safetensors, _torch_format, _trusted_classes
from ._trusted_classes import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals  # noqa: F401

_KEY = "rustytorch.checkpoint"
_VERSION = 1
_MAX_DEPTH = 100  # nested containers
_ZIP_MAGIC = b"PK\x03\x04"
# torch.save's format before PyTorch 1.6 starts with its magic number pickled with protocol 2.
_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"
_CONTAINERS = {dict: "dict", OrderedDict: "ordered_dict", list: "list", tuple: "tuple"}
_DTYPES = {str(d).rsplit(".", 1)[-1]: d for d in _safetensors._NAMES}
_NON_FINITE = ("inf", "-inf", "nan")


def _where(path):
    return "obj" + "".join(f"[{k!r}]" for k in path)


class _Writer:
    """Turns a Python structure into JSON nodes, collecting its tensors as named entries."""

    def __init__(self):
        self.tensors = {}    # entry name -> tensor
        self.locations = {}  # entry name -> the device it was saved from
        self._entries = {}   # what identifies a tensor's memory -> entry name
        self._open = set()   # ids of the containers being encoded (a container inside itself)

    def node(self, obj, path, depth):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return float(obj) if math.isfinite(obj) else {"kind": "float", "value": repr(float(obj))}
        if isinstance(obj, _C.Tensor):
            return self._tensor(obj, path)
        if isinstance(obj, _C.dtype):
            return {"kind": "dtype", "name": str(obj).rsplit(".", 1)[-1]}
        if isinstance(obj, _C.device):
            return {"kind": "device", "name": str(obj)}
        kind = _CONTAINERS.get(type(obj))
        state = _object_state(obj, path) if kind is None else None
        if kind is None and state is None:
            raise TypeError(f"rustytorch.save: {_where(path)} is a {_trusted_classes.class_name(type(obj))}; "
                            "a checkpoint holds tensors, dict, OrderedDict, list, tuple, int, float, bool, str, "
                            "None, dtypes, devices and objects whose state is their attributes (dataclasses, "
                            "argparse.Namespace)")
        if depth >= _MAX_DEPTH:
            raise _C.ValueError(f"rustytorch.save: {_where(path)} nests containers deeper than {_MAX_DEPTH} levels")
        if id(obj) in self._open:
            raise _C.ValueError(f"rustytorch.save: {_where(path)} is {f'a {kind}' if kind else 'an object'} that "
                                "contains itself")
        self._open.add(id(obj))
        if kind is None:
            node = {"kind": "object", "class": _trusted_classes.class_name(type(obj)),
                    "state": self.node(state, path, depth + 1)}
        elif kind in ("dict", "ordered_dict"):
            node = {"kind": kind, "items": [[self.node(k, path, depth + 1), self.node(v, path + (k,), depth + 1)]
                                            for k, v in obj.items()]}
        else:
            node = {"kind": kind, "items": [self.node(v, path + (i,), depth + 1) for i, v in enumerate(obj)]}
        self._open.discard(id(obj))
        return node

    def _tensor(self, t, path):
        # Tensors without elements have no memory to compare: only the same object is shared.
        memory = (id(t),) if t.numel() == 0 else (str(t.device), str(t.dtype), t.data_ptr(), t.shape, t.stride())
        name = self._entries.get(memory)
        if name is None:
            base = ".".join(str(k) for k in path) or "tensor"
            name, n = base, 1
            while name in self.tensors or name == "__metadata__":
                name, n = f"{base}.{n}", n + 1
            self._entries[memory] = name
            self.tensors[name] = t
            self.locations[name] = str(t.device)
        return {"kind": "tensor", "entry": name, "requires_grad": t.requires_grad}


def _object_state(obj, path):
    """The attributes pickle would save for obj, as a dict, when obj is a plain object (made by
    object.__new__, so no built-in base such as tuple holds data of its own; reduced the default way;
    its state a dict), else None."""
    cls = type(obj)
    if (cls.__new__ is not object.__new__ or cls.__reduce_ex__ is not object.__reduce_ex__ or
            cls.__reduce__ is not object.__reduce__):
        return None
    getstate = getattr(obj, "__getstate__", None)  # every object has one from Python 3.11 on
    state = getstate() if getstate is not None else getattr(obj, "__dict__", None)
    if state is None:
        state = {} if hasattr(obj, "__dict__") else None
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        return None
    if "<locals>" in cls.__qualname__:
        raise TypeError(f"rustytorch.save: {_where(path)} is a {cls.__qualname__}, a class defined inside a function, "
                        "which rustytorch.load could not find by name; define the class at module level, or save "
                        "vars() of the object")
    return dict(state)


def save(obj, f):
    """Saves obj (any nesting of dict, OrderedDict, list, tuple, tensors, Parameters, int, float,
    bool, str, None, dtypes, devices and plain objects such as dataclasses, whose attributes are
    saved) to f: a path (written atomically) or a binary file object."""
    is_path = isinstance(f, (str, os.PathLike))
    if not is_path and not hasattr(f, "write"):
        raise TypeError(f"rustytorch.save: f must be a path or a binary file object, got {type(f).__name__}")
    writer = _Writer()
    root = writer.node(obj, (), 0)
    structure = {"version": _VERSION, "locations": writer.locations, "root": root}
    metadata = {_KEY: json.dumps(structure, separators=(",", ":"), allow_nan=False)}
    if is_path:
        _safetensors.atomic_write(f, lambda out: _safetensors.write(writer.tensors, out, metadata), "rustytorch.save")
    else:
        _safetensors.write(writer.tensors, f, metadata)


def _read_file_object(f):
    """(name for messages, seekable stream, writable buffer of the whole content) of a binary file
    object, read from its current position."""
    if not hasattr(f, "read"):
        raise TypeError(f"rustytorch.load: f must be a path or a binary file object, got {type(f).__name__}")
    data = f.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"rustytorch.load: reading f gave a {type(data).__name__}; open the file in binary mode ('rb')")
    stream = io.BytesIO(data)
    return str(getattr(f, "name", f"<{type(f).__name__}>")), stream, stream.getbuffer()


def _default_restore(name, t, location):
    """t moved to the device the location string names (where it was saved, unless mapped)."""
    try:
        device = _C.device(location)
    except (_C.Error, TypeError) as e:
        raise _C.CheckpointError(f"{name}: cannot place a tensor on {location!r} ({e}); pass map_location to "
                                 "rustytorch.load, e.g. map_location='cpu'") from e
    if device.type == "cuda" and not _C._cuda.is_available():
        raise _C.CheckpointError(
            f"{name}: attempting to load a tensor on {location}, but CUDA is not available "
            f"({_C._cuda.unavailable_reason()}). If you are running on a CPU-only machine, pass "
            "map_location='cpu' (or rustytorch.device('cpu')) to rustytorch.load to map the tensors to the CPU")
    if device.type == "cuda" and device.index >= _C._cuda.device_count():
        raise _C.CheckpointError(f"{name}: attempting to load a tensor on {location}, but there are only "
                                 f"{_C._cuda.device_count()} CUDA devices; pass map_location to rustytorch.load")
    return t if t.device == device else t.to(device)


def _restore_function(map_location, name):
    """restore(tensor as read, saved location string) -> the tensor where map_location puts it,
    with torch.load's rules for None, strings, devices, dicts of locations and callables."""
    if map_location is None:
        return lambda t, location: _default_restore(name, t, location)
    if isinstance(map_location, (str, _C.device)):
        target = str(map_location)
        return lambda t, location: _default_restore(name, t, target)
    if isinstance(map_location, dict):
        mapping = {str(k): str(v) for k, v in map_location.items()}
        return lambda t, location: _default_restore(name, t, mapping.get(location, location))
    if callable(map_location):
        def restore(t, location):
            result = map_location(t, location)
            if result is None:
                return _default_restore(name, t, location)
            if not isinstance(result, _C.Tensor) or result.shape != t.shape or result.dtype != t.dtype:
                got = (f"a tensor of shape {tuple(result.shape)} and {result.dtype}" if isinstance(result, _C.Tensor)
                       else f"a {type(result).__name__}")
                raise TypeError(f"rustytorch.load: map_location returned {got} for a tensor of shape "
                                f"{tuple(t.shape)} and {t.dtype} saved on {location}; return that tensor on any "
                                "device, or None")
            return result
        return restore
    raise TypeError("rustytorch.load: map_location must be None, a device string, a rustytorch.device, a dict of "
                    "location strings or a callable (tensor, location) -> tensor, got "
                    f"{type(map_location).__name__}")


class _Reader:
    """Rebuilds the structure a checkpoint's JSON describes over its tensor entries."""

    def __init__(self, name, entries, restore):
        self._name, self._entries, self._restore = name, entries, restore
        self._restored = {}  # entry name -> the entry where map_location puts it
        self._objects = {}   # (entry name, requires_grad) -> the tensor object handed out
        self._locations = {}

    def fail(self, what):
        raise _C.CheckpointError(f"[checkpoint] {self._name}: {what}")

    def load(self, text):
        try:
            doc = _safetensors.loads_strict(text)
        except _safetensors.DuplicateKeyError as e:
            self.fail(f"the structure in {_KEY} has the key {e.args[0]!r} twice in one JSON object")
        except (ValueError, RecursionError) as e:
            self.fail(f"the structure in {_KEY} is not valid JSON ({type(e).__name__}: {e})")
        if not isinstance(doc, dict) or "root" not in doc:
            self.fail(f"{_KEY} is not an object with a 'root'")
        if doc.get("version") != _VERSION:
            self.fail(f"{_KEY} has version {doc.get('version')!r}; this rustytorch reads version {_VERSION}")
        self._locations = doc.get("locations")
        if not isinstance(self._locations, dict) or not all(isinstance(v, str) for v in self._locations.values()):
            self.fail("'locations' is not a map of tensor names to device strings")
        return self.node(doc["root"], 0)

    def node(self, n, depth):
        if n is None or isinstance(n, (bool, int, float, str)):
            return n
        if not isinstance(n, dict):
            self.fail(f"a structure node is a JSON {type(n).__name__}, not a value or an object with a 'kind'")
        kind = n.get("kind")
        if kind in ("dict", "ordered_dict", "list", "tuple"):
            items = n.get("items")
            if not isinstance(items, list):
                self.fail(f"a {kind} node has no 'items' list")
            if depth >= _MAX_DEPTH:
                self.fail(f"the structure nests containers deeper than {_MAX_DEPTH} levels")
            if kind in ("list", "tuple"):
                values = [self.node(v, depth + 1) for v in items]
                return values if kind == "list" else tuple(values)
            out = {} if kind == "dict" else OrderedDict()
            for item in items:
                if not (isinstance(item, list) and len(item) == 2):
                    self.fail(f"a {kind} item is not a [key, value] pair")
                key, value = self.node(item[0], depth + 1), self.node(item[1], depth + 1)
                try:
                    out[key] = value
                except TypeError:
                    self.fail(f"a {kind} key is a {type(key).__name__}, which cannot be a dict key")
            return out
        if kind == "tensor":
            return self._tensor(n.get("entry"), n.get("requires_grad"))
        if kind == "object":
            return self._object(n.get("class"), n.get("state"), depth)
        if kind == "float" and n.get("value") in _NON_FINITE:
            return float(n["value"])
        if kind == "dtype" and n.get("name") in _DTYPES:
            return _DTYPES[n["name"]]
        if kind == "device" and isinstance(n.get("name"), str):
            try:
                return _C.device(n["name"])
            except _C.Error:
                self.fail(f"{n['name']!r} is not a device")
        self.fail(f"unknown structure node {json.dumps(n)[:200]}")

    def _object(self, name, state, depth):
        if not isinstance(name, str) or not isinstance(state, dict):
            self.fail(f"an object node needs a string 'class' and a dict node 'state', got {name!r} and {state!r}")
        cls = _trusted_classes.find(name)
        if cls is None:
            self.fail(f"it holds an object of class {name}, which rustytorch.load rebuilds only once the class is "
                      f"marked as trusted: call rustytorch.serialization.add_safe_globals([{name.rsplit('.', 1)[-1]}]) "
                      "first, or load inside `with rustytorch.serialization.safe_globals([...]):`")
        if depth >= _MAX_DEPTH:
            self.fail(f"the structure nests containers deeper than {_MAX_DEPTH} levels")
        attributes = self.node(state, depth + 1)
        if not isinstance(attributes, dict) or not all(isinstance(k, str) for k in attributes):
            self.fail(f"the state of a {name} object is not a dict of attribute names")
        obj = cls.__new__(cls)
        setstate = getattr(obj, "__setstate__", None)
        if setstate is not None:
            setstate(attributes)
        else:
            obj.__dict__.update(attributes)
        return obj

    def _tensor(self, entry, requires_grad):
        if not isinstance(entry, str) or not isinstance(requires_grad, bool):
            self.fail(f"a tensor node needs a string 'entry' and a boolean 'requires_grad', got {entry!r} "
                      f"and {requires_grad!r}")
        found = self._objects.get((entry, requires_grad))
        if found is not None:
            return found
        if entry not in self._entries:
            self.fail(f"the structure refers to tensor '{entry}', which the file does not hold")
        if not isinstance(self._locations.get(entry), str):
            self.fail(f"tensor '{entry}' has no saved location")
        t = self._restored.get(entry)
        if t is None:
            t = self._restored[entry] = self._restore(self._entries[entry], self._locations[entry])
        else:
            t = t.detach()  # the same memory, handed out with another requires_grad
        if requires_grad:
            if not t.is_floating_point():
                self.fail(f"tensor '{entry}' of {t.dtype} cannot require grad")
            t.requires_grad_(True)
        self._objects[(entry, requires_grad)] = t
        return t


def load(f, map_location=None, *, weights_only=None, mmap=None):
    """The object rustytorch.save stored in f (a path or a binary file object), a plain safetensors
    file's dict of tensors, or a PyTorch (zip format) checkpoint's object, with the tensors placed
    as map_location says: None (where they were saved), a device string or rustytorch.device, a dict
    of saved location -> target location strings, or a callable (tensor, location) -> tensor or None.
    Saved objects are rebuilt for the classes add_safe_globals marked as trusted (others raise), as
    in PyTorch's default weights-only loads; weights_only=False is refused: rustytorch never imports or
    runs anything a file names. mmap=None or False (as in
    PyTorch) reads the file into memory; mmap=True (f must be a path) maps a safetensors file
    copy-on-write instead, so the CPU tensors view the file: it must then not be truncated or
    rewritten in place while they live (replacing it by a rename, as every save does, is safe)."""
    if weights_only is False:
        raise _C.CheckpointError(
            "rustytorch.load(weights_only=False): rustytorch loads only data (tensors, containers, numbers, "
            "strings, dtypes, devices, objects of the classes add_safe_globals trusts) and never imports or runs "
            "anything a file names, so it has no unrestricted mode; call rustytorch.load without weights_only, "
            "after rustytorch.serialization.add_safe_globals([YourClass]) for the objects the file holds")
    if not isinstance(f, (str, os.PathLike)):
        if mmap:
            raise _C.ValueError(f"rustytorch.load(mmap=True): f must be a path to map, got a {type(f).__name__}")
        name, stream, buffer = _read_file_object(f)
        return _load(name, stream, len(buffer), lambda: buffer, map_location)
    path = _safetensors.path_of(f, "rustytorch.load")
    name = path if isinstance(path, str) else os.fsdecode(path)
    with open(path, "rb") as file:  # a missing file raises FileNotFoundError, as in PyTorch
        size = os.fstat(file.fileno()).st_size
        return _load(name, file, size, lambda: _safetensors.file_buffer(file, bool(mmap), name), map_location)


def _load(name, stream, size, contents, map_location):
    """load() of the size-byte seekable stream (at its start) whose whole content contents() gives
    as a writable buffer."""
    restore = _restore_function(map_location, name)
    head = stream.read(len(_LEGACY_MAGIC))
    stream.seek(-len(head), io.SEEK_CUR)
    if head.startswith(_ZIP_MAGIC):
        return _torch_format.load(stream, size, name, restore)
    if head == _LEGACY_MAGIC:
        raise _C.CheckpointError(
            f"[pytorch] {name}: this is PyTorch's legacy (pre-1.6, non-zip) checkpoint format, which rustytorch "
            "does not read; re-save it with a recent torch.save (the zip format) or as safetensors")
    tensors, metadata = _safetensors.read(contents(), name)
    if _KEY not in metadata:
        return {k: restore(t, "cpu") for k, t in tensors.items()}
    return _Reader(name, tensors, restore).load(metadata[_KEY])
