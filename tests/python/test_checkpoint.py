"""rustytorch.save / rustytorch.load as PyTorch scripts use them: training checkpoints resumed
bit-identically, nested structures, tied weights stored once, map_location in every form, plain
safetensors files, PyTorch's own zip checkpoints (written by torch when it is installed, and built
here with pickle + zipfile so that CI tests the loader too), copy.deepcopy, and hostile files."""
import argparse
import copy
import enum
import gc
import io
import json
import math
import os
import pickle
import zipfile
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn, optim
from conftest import to_numpy

KEY = "rustytorch.checkpoint"


def make_model(device, seed):
    rt.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)


def train_step(model, opt, step, device):
    x = rt.tensor(np.random.default_rng(step).standard_normal((5, 4)), dtype=rt.float32, device=device)
    opt.zero_grad()
    (model(x) ** 2).mean().backward()
    opt.step()


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    rt.save(obj, buffer)
    buffer.seek(0)
    return rt.load(buffer, **load_kwargs)


# ---- training checkpoints ---------------------------------------------------------------------

@pytest.mark.parametrize("target", ["path", "bytesio", "open_file"])
def test_resumed_training_matches_the_uninterrupted_run(tmp_path, device, target):
    model = make_model(device, seed=0)
    opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    for step in range(3):
        train_step(model, opt, step, device)
    checkpoint = {"model": model.state_dict(), "optimizer": opt.state_dict(), "iter_num": 3,
                  "best_val_loss": 1.5, "config": {"n_layer": 2, "lr": 1e-2, "name": "tiny", "betas": (0.9, 0.95)}}
    path = tmp_path / "ckpt.pt"
    if target == "path":
        rt.save(checkpoint, path)
        source = str(path)
    elif target == "bytesio":
        source = io.BytesIO()
        rt.save(checkpoint, source)
        source.seek(0)
    else:
        with open(path, "wb") as f:
            rt.save(checkpoint, f)
        source = open(path, "rb")
    train_step(model, opt, 3, device)  # the uninterrupted run goes on

    ckpt = rt.load(source, map_location=device)
    if target == "open_file":
        source.close()
    resumed = make_model(device, seed=1)
    resumed_opt = optim.AdamW(resumed.parameters(), lr=0.5)
    resumed.load_state_dict(ckpt["model"])
    resumed_opt.load_state_dict(ckpt["optimizer"])
    train_step(resumed, resumed_opt, 3, device)
    for a, b in zip(model.parameters(), resumed.parameters()):
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
    assert ckpt["iter_num"] == 3 and ckpt["best_val_loss"] == 1.5
    assert ckpt["config"] == {"n_layer": 2, "lr": 1e-2, "name": "tiny", "betas": (0.9, 0.95)}
    assert type(ckpt["model"]) is OrderedDict and list(ckpt["model"]) == list(model.state_dict())
    assert list(ckpt["optimizer"]["state"]) == [0, 1, 2, 3]  # int keys, as optimizer state dicts have
    assert resumed_opt.param_groups[0]["lr"] == 1e-2


def test_the_file_is_plain_safetensors_with_the_structure_in_json(tmp_path):
    model = nn.Linear(3, 2)
    path = tmp_path / "m.pt"
    rt.save({"model": model.state_dict(), "step": 7}, path)
    entries = rt.io.load_file(str(path))
    assert sorted(entries) == ["model.bias", "model.weight"]
    np.testing.assert_array_equal(to_numpy(entries["model.weight"]), to_numpy(model.weight))
    structure = json.loads(rt.io.load_metadata(str(path))[KEY])
    assert structure["locations"] == {"model.weight": "cpu", "model.bias": "cpu"}
    assert structure["root"]["items"][1] == ["step", 7]


def test_other_safetensors_readers_open_checkpoints(tmp_path):
    st = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed")
    rt.save({"w": rt.arange(6.0).reshape(2, 3), "nested": [rt.ones(2, dtype=rt.int64)]}, tmp_path / "c.pt")
    theirs = st.load_file(str(tmp_path / "c.pt"))
    np.testing.assert_array_equal(theirs["w"], np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(theirs["nested.0"], np.ones(2, dtype=np.int64))


def test_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    rt.save({"a": rt.ones(3)}, path)
    original = path.read_bytes()

    def fails_midway(tensors, f, metadata=None):
        f.write(b"\0" * 1000)
        raise OSError("disk full")

    monkeypatch.setattr(rt._safetensors, "write", fails_midway)
    with pytest.raises(OSError, match="disk full"):
        rt.save({"a": rt.zeros(1000)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == original and os.listdir(tmp_path) == ["ckpt.pt"]


# ---- structures -------------------------------------------------------------------------------

def test_bare_tensors_lists_and_nested_tuples(device):
    t = rt.arange(6.0, device=device).reshape(2, 3)
    loaded = round_trip(t)
    assert isinstance(loaded, rt.Tensor) and loaded.device == t.device
    np.testing.assert_array_equal(to_numpy(loaded), np.arange(6.0).reshape(2, 3))
    tensors = round_trip([t, t * 2, rt.zeros(0, device=device)])
    assert isinstance(tensors, list) and len(tensors) == 3 and tensors[2].shape == (0,)
    np.testing.assert_array_equal(to_numpy(tensors[1]), 2 * np.arange(6.0).reshape(2, 3))
    nested = round_trip((1, (2.5, (t, "x")), ((),)))
    assert nested[0] == 1 and nested[1][0] == 2.5 and nested[1][1][1] == "x" and nested[2] == ((),)
    np.testing.assert_array_equal(to_numpy(nested[1][1][0]), np.arange(6.0).reshape(2, 3))


def test_every_value_kind_comes_back_equal():
    obj = OrderedDict([
        (0, None), (1, True), (2, -(2 ** 70)), ("f", 0.1), ("neg_zero", -0.0), ("inf", float("inf")),
        ("-inf", -math.inf), ("nan", math.nan), ("s", "héllo ✓"), ((1, "k"), "tuple key"), (2.5, "float key"),
        (None, "none key"), ("dtypes", [rt.float32, rt.bfloat16, rt.int64, rt.bool]),
        ("devices", (rt.device("cpu"), rt.device("cuda:1"))), ("empty", {}), ("list", []),
    ])
    loaded = round_trip(obj)
    assert type(loaded) is OrderedDict and list(loaded) == list(obj)
    for k in obj:
        if k == "nan":
            assert math.isnan(loaded[k])
        else:
            assert loaded[k] == obj[k] and type(loaded[k]) is type(obj[k]), k
    assert math.copysign(1.0, loaded["neg_zero"]) == -1.0
    assert loaded["dtypes"][1] is rt.bfloat16


@pytest.mark.parametrize("dtype", [rt.float32, rt.float64, rt.float16, rt.bfloat16, rt.int64, rt.int32, rt.int16,
                                   rt.int8, rt.uint8, rt.bool])
def test_tensors_of_every_dtype_and_layout(device, dtype):
    base = rt.arange(24, device=device).reshape(2, 3, 4).to(dtype)
    obj = {"contiguous": base, "transposed": base.transpose(0, 2), "sliced": base[:, 1:, ::2], "scalar": base[1, 2, 3]}
    loaded = round_trip(obj)
    for k, v in obj.items():
        assert loaded[k].dtype == dtype and loaded[k].shape == v.shape and loaded[k].device == v.device
        np.testing.assert_array_equal(to_numpy(loaded[k]), to_numpy(v))


def test_requires_grad_and_parameters():
    p = nn.Parameter(rt.ones(2, 2))
    frozen = nn.Parameter(rt.zeros(3), requires_grad=False)
    t = rt.ones(3, requires_grad=True)
    loaded = round_trip({"p": p, "frozen": frozen, "t": t, "t_detached": t.detach()})
    assert type(loaded["p"]) is rt.Tensor and loaded["p"].requires_grad and loaded["p"].is_leaf
    assert not loaded["frozen"].requires_grad
    assert loaded["t"].requires_grad and not loaded["t_detached"].requires_grad
    assert loaded["t"].data_ptr() == loaded["t_detached"].data_ptr()  # one memory, two requires_grad


def test_tied_weights_are_stored_once_and_shared_after_loading(tmp_path):
    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(50, 16)
            self.lm_head = nn.Linear(16, 50, bias=False)
            self.lm_head.weight = self.wte.weight

    model = TinyGPT()
    rt.save(model.state_dict(), tmp_path / "tied.pt")
    rt.save({k: v.clone() for k, v in model.state_dict().items()}, tmp_path / "untied.pt")
    assert sorted(rt.io.load_file(str(tmp_path / "tied.pt"))) == ["wte.weight"]
    assert os.path.getsize(tmp_path / "untied.pt") - os.path.getsize(tmp_path / "tied.pt") >= 50 * 16 * 4
    state = rt.load(tmp_path / "tied.pt")
    assert state["wte.weight"] is state["lm_head.weight"]
    fresh = TinyGPT()
    fresh.load_state_dict(state)
    assert fresh.lm_head.weight is fresh.wte.weight
    np.testing.assert_array_equal(to_numpy(fresh.lm_head.weight), to_numpy(model.wte.weight))


def test_shared_tensors_and_partial_views():
    x = rt.arange(6.0).reshape(2, 3)
    loaded = round_trip({"a": x, "b": [x, {"again": x}], "row": x[1], "t": x.t()})
    assert loaded["a"] is loaded["b"][0] is loaded["b"][1]["again"]
    loaded["a"].fill_(7.0)
    # Views sharing memory only in part are stored as separate tensors.
    np.testing.assert_array_equal(to_numpy(loaded["row"]), [3.0, 4.0, 5.0])
    np.testing.assert_array_equal(to_numpy(loaded["t"]), np.arange(6.0).reshape(2, 3).T)


def test_flat_safetensors_files_load_as_dicts(tmp_path, device):
    path = str(tmp_path / "flat.safetensors")
    rt.io.save_file({"a": rt.arange(3.0), "b": rt.eye(2, dtype=rt.int64)}, path)
    loaded = rt.load(path, map_location=device)
    assert type(loaded) is dict and list(loaded) == ["a", "b"] and loaded["b"].device == rt.device(device)
    np.testing.assert_array_equal(to_numpy(loaded["b"]), np.eye(2))


# ---- map_location -----------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["none", "str", "device", "dict", "callable", "callable_none"])
def test_map_location_forms(device, form):
    saved = {"w": rt.arange(4.0, device=device), "i": rt.ones(2, dtype=rt.int32)}
    where = {"none": None, "str": device, "device": rt.device(device), "dict": {"cpu": device},
             "callable": lambda t, location: t.to(device), "callable_none": lambda t, location: None}[form]
    loaded = round_trip(saved, map_location=where)
    # None, and a callable that returns None, leave each tensor where it was saved.
    expect = (device, "cpu") if form in ("none", "callable_none") else (device, device)
    assert (str(loaded["w"].device.type), str(loaded["i"].device.type)) == expect
    np.testing.assert_array_equal(to_numpy(loaded["w"]), np.arange(4.0))


def test_map_location_callable_sees_each_saved_location_once():
    x = rt.arange(3.0)
    calls = []
    loaded = round_trip({"a": x, "b": x, "c": rt.ones(1)},
                        map_location=lambda t, location: calls.append((tuple(t.shape), location)) or t)
    assert sorted(calls) == [((1,), "cpu"), ((3,), "cpu")] and loaded["a"] is loaded["b"]
    with pytest.raises(TypeError, match="map_location returned a str"):
        round_trip({"a": x}, map_location=lambda t, location: "cpu")
    with pytest.raises(TypeError, match="map_location must be"):
        round_trip({"a": x}, map_location=3)


def write_checkpoint(path, tensors, structure):
    rt.io.save_file(tensors, str(path), metadata={KEY: json.dumps(structure)})


def cuda_saved_file(path):
    """A checkpoint whose tensor was saved on cuda:0 (written by hand: it may run without a GPU)."""
    write_checkpoint(path, {"w": rt.arange(3.0)}, {"version": 1, "locations": {"w": "cuda:0"}, "root": {
        "kind": "dict", "items": [["w", {"kind": "tensor", "entry": "w", "requires_grad": False}]]}})


def test_cuda_tensors_need_map_location_without_cuda(tmp_path):
    path = tmp_path / "cuda.pt"
    cuda_saved_file(path)
    if rt.cuda.is_available():
        assert rt.load(path)["w"].device == rt.device("cuda:0")
    else:
        with pytest.raises(rt.CheckpointError, match="map_location") as info:
            rt.load(path)
        assert str(path) in str(info.value) and "cuda:0" in str(info.value)
    for where in ("cpu", rt.device("cpu"), {"cuda:0": "cpu"}, lambda t, location: t):
        loaded = rt.load(path, map_location=where)["w"]
        assert loaded.device == rt.device("cpu")
        np.testing.assert_array_equal(to_numpy(loaded), [0.0, 1.0, 2.0])


# ---- copy.deepcopy ----------------------------------------------------------------------------

def test_deepcopy_of_tensors(device):
    t = rt.arange(4.0, device=device).requires_grad_()
    (t * t).sum().backward()
    c = copy.deepcopy(t)
    assert c is not t and c.requires_grad and c.is_leaf and c.dtype == t.dtype and c.device == t.device
    np.testing.assert_array_equal(to_numpy(c.grad), 2 * np.arange(4.0))
    with rt.no_grad():
        t.add_(1.0)
    np.testing.assert_array_equal(to_numpy(c), np.arange(4.0))  # its own memory
    a, b = copy.deepcopy([t, t])
    assert a is b
    integers = copy.deepcopy(rt.arange(3, device=device).t())
    assert integers.dtype == rt.int64 and not integers.requires_grad
    with pytest.raises(rt.ValueError, match="leaves"):
        copy.deepcopy(t * 2)


def test_deepcopy_of_parameters_and_subclasses():
    p = nn.Parameter(rt.ones(3))
    p.grad = rt.ones(3)
    c = copy.deepcopy(p)
    assert type(c) is nn.Parameter and c.requires_grad and c.grad is None  # as PyTorch's Parameter
    assert not copy.deepcopy(nn.Parameter(rt.ones(1), requires_grad=False)).requires_grad
    with pytest.raises(TypeError, match="state_dict"):
        pickle.dumps(p)

    class Tagged(rt.Tensor):
        pass

    t = Tagged(rt.ones(2))
    t.tag = {"name": "x"}
    c = copy.deepcopy(t)
    assert type(c) is Tagged and c.tag == {"name": "x"} and c.tag is not t.tag


def test_deepcopy_of_modules_keeps_tied_weights():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(10, 4)
            self.lm_head = nn.Linear(4, 10, bias=False)
            self.lm_head.weight = self.wte.weight

    model = Tied()
    clone = copy.deepcopy(model)
    assert clone.lm_head.weight is clone.wte.weight and clone.wte.weight is not model.wte.weight
    assert type(clone.wte.weight) is nn.Parameter
    with rt.no_grad():
        clone.wte.weight.fill_(0.0)
    assert to_numpy(model.wte.weight).any()
    assert len(list(clone.parameters())) == len(list(model.parameters())) == 1


def test_deepcopy_of_optimizer_state_dicts():
    model = nn.Linear(3, 2)
    opt = optim.AdamW(model.parameters())
    model(rt.ones(1, 3)).sum().backward()
    opt.step()
    best = copy.deepcopy(opt.state_dict())
    before = to_numpy(best["state"][0]["exp_avg"])
    model(rt.ones(1, 3)).sum().backward()
    opt.step()
    np.testing.assert_array_equal(to_numpy(best["state"][0]["exp_avg"]), before)
    assert best["state"][0]["step"] == 1 and best["param_groups"][0]["params"] == [0, 1]


# ---- errors -----------------------------------------------------------------------------------

def test_save_refuses_what_it_cannot_store(tmp_path):
    with pytest.raises(TypeError, match=r"obj\['config'\]\['f'\] is a builtins.builtin_function"):
        rt.save({"config": {"f": print}}, tmp_path / "x.pt")
    loop = [1]
    loop.append(loop)
    with pytest.raises(rt.ValueError, match="contains itself"):
        rt.save(loop, tmp_path / "x.pt")
    deep = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(rt.ValueError, match="deeper than"):
        rt.save(deep, tmp_path / "x.pt")
    with pytest.raises(TypeError, match="path or a binary file"):
        rt.save({}, 3)
    assert not os.path.exists(tmp_path / "x.pt")


# ---- objects of trusted classes ----------------------------------------------------------------

@dataclass
class GPTConfig:
    block_size: int = 1024
    n_layer: int = 12
    bias: bool = True
    betas: tuple = (0.9, 0.95)


class Rebuilt:
    """A class whose __setstate__ the loader calls, as pickle does."""

    def __init__(self, scale):
        self.scale = scale

    def __setstate__(self, state):
        self.__dict__.update(state, rebuilt=True)


def test_config_objects_load_once_their_class_is_trusted(tmp_path):
    # build-nanogpt's checkpoint: the state dict, its config dataclass, the step and the val loss.
    model = nn.Linear(3, 2)
    checkpoint = {"model": model.state_dict(), "config": GPTConfig(n_layer=2), "step": 5, "val_loss": 3.25,
                  "args": argparse.Namespace(lr=6e-4, device="cpu", extra=Rebuilt(2.0))}
    path = tmp_path / "model_00005.pt"
    rt.save(checkpoint, path)
    with pytest.raises(rt.CheckpointError, match=r"test_checkpoint\.GPTConfig.*add_safe_globals\(\[GPTConfig\]\)"):
        rt.load(path)
    with rt.serialization.safe_globals([GPTConfig, argparse.Namespace]):
        with pytest.raises(rt.CheckpointError, match=r"test_checkpoint\.Rebuilt"):
            rt.load(path)
    assert rt.serialization.get_safe_globals() == []
    rt.serialization.add_safe_globals([GPTConfig, argparse.Namespace, Rebuilt])
    try:
        loaded = rt.load(path)
    finally:
        rt.serialization.clear_safe_globals()
    assert type(loaded["config"]) is GPTConfig and loaded["config"] == GPTConfig(n_layer=2)
    assert loaded["args"].lr == 6e-4 and loaded["args"].device == "cpu"
    assert loaded["args"].extra.scale == 2.0 and loaded["args"].extra.rebuilt is True
    assert loaded["step"] == 5 and loaded["val_loss"] == 3.25
    np.testing.assert_array_equal(to_numpy(loaded["model"]["weight"]), to_numpy(model.weight))
    with pytest.raises(TypeError, match="not a class"):
        rt.serialization.add_safe_globals([print])


def test_object_state_keeps_tensors_shared_and_refuses_what_cannot_load(tmp_path):
    w = rt.ones(3)
    holder = argparse.Namespace(weight=w, again=w, nested=argparse.Namespace())
    with rt.serialization.safe_globals([argparse.Namespace]):
        loaded = round_trip({"w": w, "holder": holder})
    assert loaded["holder"].weight is loaded["w"] and loaded["holder"].again is loaded["w"]
    assert vars(loaded["holder"].nested) == {}

    class Local:
        pass

    with pytest.raises(TypeError, match="defined inside a function"):
        rt.save({"x": Local()}, tmp_path / "x.pt")
    loop = argparse.Namespace()
    loop.me = loop
    with pytest.raises(rt.ValueError, match=r"obj\['me'\] is an object that contains itself"):
        rt.save(loop, tmp_path / "x.pt")
    with pytest.raises(TypeError, match=r"obj\['when'\] is a test_checkpoint\.Color; a checkpoint holds"):
        rt.save({"when": Color.RED}, tmp_path / "x.pt")
    # A subclass of a built-in container keeps data outside its attributes: refused, not saved empty.
    with pytest.raises(TypeError, match=r"obj\['size'\] is a rustytorch\.Size;"):
        rt.save({"size": rt.ones(2, 3).shape}, tmp_path / "x.pt")
    with pytest.raises(TypeError, match=r"obj\['counts'\] is a collections\.Counter"):
        rt.save({"counts": __import__("collections").Counter("ab")}, tmp_path / "x.pt")
    assert not os.path.exists(tmp_path / "x.pt")


class Color(enum.Enum):
    RED = 1


def test_torch_checkpoints_with_config_objects(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"config": GPTConfig(block_size=64), "w": torch.ones(2)}, tmp_path / "ckpt.pt")
    with pytest.raises(rt.CheckpointError, match=r"test_checkpoint\.GPTConfig.*add_safe_globals\(\[GPTConfig\]\)"):
        rt.load(tmp_path / "ckpt.pt")
    with rt.serialization.safe_globals([GPTConfig]):
        loaded = rt.load(tmp_path / "ckpt.pt")
        with torch.serialization.safe_globals([GPTConfig]):
            theirs = torch.load(tmp_path / "ckpt.pt")
    assert loaded["config"] == theirs["config"] == GPTConfig(block_size=64)


def tensor_node(entry, requires_grad=False):
    return {"kind": "tensor", "entry": entry, "requires_grad": requires_grad}


def nested_lists(depth):
    node = 1
    for _ in range(depth):
        node = {"kind": "list", "items": [node]}
    return node


HOSTILE_STRUCTURES = {
    "not_json": ("{nope", "not valid JSON"),
    "no_root": ({"version": 1, "locations": {}}, "root"),
    "newer_version": ({"version": 99, "locations": {}, "root": 1}, "version 99"),
    "unknown_kind": ({"version": 1, "locations": {}, "root": {"kind": "set", "items": []}}, "unknown structure node"),
    "bare_json_list": ({"version": 1, "locations": {}, "root": [1, 2]}, "JSON list"),
    "missing_tensor": ({"version": 1, "locations": {"w": "cpu"}, "root": tensor_node("nope")}, "'nope'"),
    "missing_location": ({"version": 1, "locations": {}, "root": tensor_node("w")}, "no saved location"),
    "bad_requires_grad": ({"version": 1, "locations": {"i": "cpu"}, "root": tensor_node("i", True)}, "cannot require"),
    "unhashable_key": ({"version": 1, "locations": {}, "root": {"kind": "dict", "items": [
        [{"kind": "list", "items": []}, 1]]}}, "cannot be a dict key"),
    "bad_pair": ({"version": 1, "locations": {}, "root": {"kind": "dict", "items": [[1]]}}, "pair"),
    "too_deep": ({"version": 1, "locations": {}, "root": nested_lists(150)}, "deeper than"),
    "json_bomb": ("[" * 100000, "not valid JSON"),
    "bad_device": ({"version": 1, "locations": {}, "root": {"kind": "device", "name": "tpu:0"}}, "not a device"),
    "bad_location": ({"version": 1, "locations": {"w": "tpu"}, "root": tensor_node("w")}, "cannot place"),
    "untrusted_object": ({"version": 1, "locations": {}, "root": {"kind": "object", "class": "os.system",
                                                                    "state": {"kind": "dict", "items": []}}},
                         "os.system, which rustytorch.load rebuilds only"),
    "object_without_state": ({"version": 1, "locations": {}, "root": {"kind": "object", "class": "x.Y"}},
                             "needs a string 'class'"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_STRUCTURES))
def test_hostile_structures_raise_checkpoint_error(tmp_path, case):
    structure, needle = HOSTILE_STRUCTURES[case]
    path = tmp_path / f"{case}.pt"
    text = structure if isinstance(structure, str) else json.dumps(structure)
    rt.io.save_file({"w": rt.ones(2), "i": rt.ones(2, dtype=rt.int64)}, str(path), metadata={KEY: text})
    with pytest.raises(rt.CheckpointError, match=needle) as info:
        rt.load(path)
    assert str(path) in str(info.value)


def test_corrupt_files_raise_checkpoint_error(tmp_path):
    path = tmp_path / "c.pt"
    rt.save({"w": rt.ones(100)}, path)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(rt.CheckpointError, match="'w'") as info:
        rt.load(path)
    assert str(path) in str(info.value)
    for garbage, needle in ((b"", "fewer than"), (b"\xff" * 64, "header claims"),
                            (b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02", "legacy")):
        path.write_bytes(garbage)
        with pytest.raises(rt.CheckpointError, match=needle):
            rt.load(path)
    with pytest.raises(rt.CheckpointError, match="never imports or runs"):
        rt.load(io.BytesIO(data), weights_only=False)
    with pytest.raises(FileNotFoundError):
        rt.load(tmp_path / "missing.pt")


# ---- PyTorch's zip format, built here -----------------------------------------------------------

class Global:
    """module.name, pickled as a GLOBAL opcode (the module need not exist here)."""

    def __init__(self, module, name):
        self.module, self.name = module, name


class Call:
    """func(*args), pickled as REDUCE (memoized: one Call reached twice unpickles to one object)."""

    def __init__(self, func, *args):
        self.func, self.args = func, args


class Ref:
    """An object pickled as the persistent id pid."""

    def __init__(self, pid):
        self.pid = pid


def storage_ref(key, storage_type, numel, location="cpu", module="torch"):
    return Ref(("storage", Global(module, storage_type), key, location, numel))


class TorchPickler(pickle._Pickler):
    """Writes pickles the way torch.save does (protocol 2, storages as persistent ids), without torch."""
    dispatch = pickle._Pickler.dispatch.copy()

    def save_global_ref(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())

    def save_call(self, obj):
        self.save(obj.func)
        self.save(obj.args)
        self.write(pickle.REDUCE)
        self.memoize(obj)

    dispatch[Global] = save_global_ref
    dispatch[Call] = save_call

    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, Ref) else None


def rebuild(storage, offset, size, stride, requires_grad=False):
    return Call(Global("torch._utils", "_rebuild_tensor_v2"), storage, offset, tuple(size), tuple(stride),
                requires_grad, Call(Global("collections", "OrderedDict")))


def write_pt(obj, storages, byteorder=b"little", records=None, compress=()):
    """A torch.save-style zip (as bytes) holding obj's pickle and the storages' bytes."""
    pkl = io.BytesIO()
    TorchPickler(pkl, protocol=2).dump(obj)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        entries = {"archive/data.pkl": pkl.getvalue(), "archive/byteorder": byteorder, "archive/version": b"3\n"}
        entries.update({f"archive/data/{k}": v for k, v in storages.items()})
        entries.update(records or {})
        for name, data in entries.items():
            z.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if name in compress else zipfile.ZIP_STORED)
    return out.getvalue()


def bfloat16_bytes(values, order="<"):
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(order + "u2").tobytes()


def state_dict_pickle():
    """A state dict over three storages: a float32 one that three views share, bfloat16 and int64."""
    s0 = storage_ref("0", "FloatStorage", 12)
    s1, s2 = storage_ref("1", "BFloat16Storage", 3), storage_ref("2", "LongStorage", 2)
    weight = rebuild(s0, 0, (3, 4), (4, 1))
    return OrderedDict([
        ("w", weight), ("w_again", weight), ("wt", rebuild(s0, 0, (4, 3), (1, 4))), ("row", rebuild(s0, 5, (3,), (2,))),
        ("h", rebuild(s1, 0, (3,), (1,))), ("steps", rebuild(s2, 1, (), ())),
        ("p", Call(Global("torch._utils", "_rebuild_parameter"), rebuild(s2, 0, (2,), (1,)), False,
                   Call(Global("collections", "OrderedDict")))),
        ("meta", {"iter": 10, "loss": 1.5, "name": "gpt", "shape": Call(Global("torch", "Size"), (2, 3)),
                  "dtype": Global("torch", "bfloat16"), "device": Call(Global("torch", "device"), "cuda", 1)}),
    ])


@pytest.mark.parametrize("order", ["<", ">"])
def test_pytorch_zip_checkpoints_built_here(tmp_path, device, order):
    storages = {"0": np.arange(12, dtype=order + "f4").tobytes(), "1": bfloat16_bytes([1.0, -2.0, 0.5], order),
                "2": np.array([7, 9], dtype=order + "i8").tobytes()}
    path = tmp_path / "model.pth"
    path.write_bytes(write_pt(state_dict_pickle(), storages, byteorder=b"little" if order == "<" else b"big"))
    sd = rt.load(path, map_location=device)
    assert type(sd) is OrderedDict and list(sd) == ["w", "w_again", "wt", "row", "h", "steps", "p", "meta"]
    a = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(to_numpy(sd["w"]), a)
    np.testing.assert_array_equal(to_numpy(sd["wt"]), a.T)
    np.testing.assert_array_equal(to_numpy(sd["row"]), [5.0, 7.0, 9.0])
    assert sd["wt"].stride() == (1, 4) and sd["row"].storage_offset() == 5 and sd["w"] is sd["w_again"]
    assert sd["h"].dtype == rt.bfloat16 and sd["steps"].dtype == rt.int64 and sd["steps"].shape == ()
    np.testing.assert_array_equal(to_numpy(sd["h"]), [1.0, -2.0, 0.5])
    assert sd["steps"].item() == 9 and to_numpy(sd["p"]).tolist() == [7, 9]
    assert sd["meta"] == {"iter": 10, "loss": 1.5, "name": "gpt", "shape": (2, 3), "dtype": rt.bfloat16,
                          "device": rt.device("cuda:1")}
    assert sd["w"].device == rt.device(device)
    sd["w"].fill_(-1.0)  # the views share one storage
    np.testing.assert_array_equal(to_numpy(sd["wt"]), -np.ones((4, 3)))
    np.testing.assert_array_equal(to_numpy(sd["row"]), [-1.0, -1.0, -1.0])


@pytest.mark.parametrize("storage, module, dtype, values", [
    ("DoubleStorage", "torch", rt.float64, np.array([0.1, -2.5], dtype="<f8")),
    ("HalfStorage", "torch", rt.float16, np.array([0.5, -3.0], dtype="<f2")),
    ("IntStorage", "torch", rt.int32, np.array([-7, 2 ** 30], dtype="<i4")),
    ("ShortStorage", "torch", rt.int16, np.array([-32768, 32767], dtype="<i2")),
    ("CharStorage", "torch", rt.int8, np.array([-128, 127], dtype="i1")),
    ("ByteStorage", "torch", rt.uint8, np.array([0, 255], dtype="u1")),
    ("BoolStorage", "torch", rt.bool, np.array([True, False])),
    ("UntypedStorage", "torch.storage", rt.uint8, np.array([1, 2], dtype="u1")),
])
def test_pytorch_zip_storage_dtypes(storage, module, dtype, values):
    data = write_pt([rebuild(storage_ref("0", storage, 2, module=module), 0, (2,), (1,))], {"0": values.tobytes()})
    (t,) = rt.load(io.BytesIO(data), weights_only=True)
    assert t.dtype == dtype
    np.testing.assert_array_equal(to_numpy(t), values)


def test_pytorch_zip_map_location_and_cuda_storages():
    data = write_pt({"w": rebuild(storage_ref("0", "FloatStorage", 2, location="cuda:0"), 0, (2,), (1,))},
                    {"0": np.array([1.0, 2.0], dtype="<f4").tobytes()})
    seen = []
    loaded = rt.load(io.BytesIO(data), map_location=lambda t, location: seen.append(location) or t)
    assert seen == ["cuda:0"] and loaded["w"].device == rt.device("cpu")
    assert rt.load(io.BytesIO(data), map_location={"cuda:0": "cpu"})["w"].tolist() == [1.0, 2.0]
    if not rt.cuda.is_available():
        with pytest.raises(rt.CheckpointError, match="map_location='cpu'"):
            rt.load(io.BytesIO(data))


def forbidden(obj, storages=None, **kw):
    return io.BytesIO(write_pt(obj, storages or {}, **kw))


HOSTILE_PT = {
    "os_system": (lambda: forbidden(Call(Global("os", "system"), "echo pwned")), "os.system"),
    "class_instance": (lambda: forbidden(Call(Global("__main__", "Evil"))), "__main__.Evil"),
    "builtins_eval": (lambda: forbidden(Call(Global("builtins", "eval"), "1")), "builtins.eval"),
    "complex64": (lambda: forbidden(rebuild(storage_ref("0", "ComplexFloatStorage", 1), 0, (1,), (1,)),
                                    {"0": b"\0" * 8}), "complex64"),
    "uint16": (lambda: forbidden(Call(Global("torch._utils", "_rebuild_tensor_v3"))), "uint16"),
    "missing_storage": (lambda: forbidden(rebuild(storage_ref("7", "FloatStorage", 1), 0, (1,), (1,))),
                        "archive/data/7"),
    "short_storage": (lambda: forbidden(rebuild(storage_ref("0", "FloatStorage", 4), 0, (4,), (1,)), {"0": b"\0" * 8}),
                      "16 bytes"),
    "view_out_of_bounds": (lambda: forbidden(rebuild(storage_ref("0", "FloatStorage", 2), 1, (2,), (1,)),
                                             {"0": b"\0" * 8}), "does not fit"),
    "not_a_storage": (lambda: forbidden(rebuild("0", 0, (1,), (1,))), "where a storage belongs"),
    "bad_persistent_id": (lambda: forbidden(Ref(("module", "x"))), "unexpected persistent id"),
    "compressed": (lambda: forbidden({"a": 1}, compress=("archive/data.pkl",)), "compressed"),
    "bad_byteorder": (lambda: forbidden({"a": 1}, byteorder=b"middle"), "byteorder"),
    "no_data_pkl": (lambda: io.BytesIO(zip_of({"archive/other.pkl": b"x"})), "data.pkl"),
    "truncated_zip": (lambda: io.BytesIO(write_pt({"a": 1}, {})[:-30]), "zip"),
    "corrupt_pickle": (lambda: io.BytesIO(zip_of({"archive/data.pkl": b"\x80\x02}q\x00(X"})), "the pickle is damaged"),
    # Views whose extent overflows 64 bits, and offsets at the end of int64: outside the storage.
    "view_overflowing_int64": (lambda: forbidden(rebuild(storage_ref("0", "FloatStorage", 2), 0, (2 ** 62, 2),
                                                         (2 ** 62, 1)), {"0": b"\0" * 8}), "does not fit"),
    "offset_at_int64_max": (lambda: forbidden(rebuild(storage_ref("0", "FloatStorage", 2), 2 ** 63 - 1, (2,), (1,)),
                                              {"0": b"\0" * 8}), "does not fit"),
    # A 5-byte LONG_BINPUT that would grow the unpickler's memo table to 2^31 entries (16 GiB).
    "memo_index": (lambda: io.BytesIO(zip_of({"archive/data.pkl": b"\x80\x02}r\xff\xff\xff\x7f."})),
                   "memo entry 2147483647"),
    # Protocol 5's BYTEARRAY8, claiming 2^60 bytes (allocated before the unpickler reads them).
    "bytearray8": (lambda: io.BytesIO(zip_of({"archive/data.pkl": b"\x80\x05\x96" + (1 << 60).to_bytes(8, "little")})),
                   "the pickle is damaged .*bytearray8"),
    "bytearray8_small": (lambda: io.BytesIO(zip_of({"archive/data.pkl": b"\x80\x05\x96\x01" + b"\0" * 7 + b"x."})),
                         "BYTEARRAY8"),
}


def zip_of(records):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in records.items():
            z.writestr(name, data)
    return out.getvalue()


def test_failed_pytorch_loads_free_their_unpickler():
    # The rebuild function is on the unpickler's stack when the forbidden global stops it.
    make = lambda: forbidden(rebuild(Call(Global("os", "system"), "x"), 0, (1,), (1,)))  # noqa: E731
    for _ in range(3):
        with pytest.raises(rt.CheckpointError, match="os.system"):
            rt.load(make())
    gc.collect()
    kinds = (rt._torch_format._Unpickler, rt._torch_format._Rebuilder)
    assert not [o for o in gc.get_objects() if isinstance(o, kinds)]


@pytest.mark.parametrize("case", sorted(HOSTILE_PT))
def test_hostile_pytorch_files_raise_checkpoint_error(case):
    make, needle = HOSTILE_PT[case]
    with pytest.raises(rt.CheckpointError, match=needle) as info:
        rt.load(make())
    assert "<BytesIO>" in str(info.value)


# ---- PyTorch's zip format, written by torch -----------------------------------------------------

class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_checkpoints_written_by_torch(tmp_path):
    torch = pytest.importorskip("torch")
    base = torch.arange(12.0).reshape(3, 4)
    state = OrderedDict([
        ("f32", base), ("f64", base.double()), ("f16", base.half()), ("bf16", base.bfloat16()), ("i64", base.long()),
        ("i32", base.int()), ("i8", base.char()), ("u8", base.byte()), ("bool", base > 5), ("t", base.t()),
        ("row", base[1, 1:]), ("same", base), ("p", torch.nn.Parameter(torch.ones(2))), ("empty", torch.zeros(0, 3)),
        ("meta", {"iter": 3, "loss": 0.25, "name": "run", "dims": [1, 2], "size": base.shape, "dtype": torch.float16}),
    ])
    torch.save(state, tmp_path / "model.pt")
    ours = rt.load(tmp_path / "model.pt")
    assert list(ours) == list(state)
    for k, v in state.items():
        if isinstance(v, torch.Tensor):
            np.testing.assert_array_equal(to_numpy(ours[k]), v.detach().double().numpy())
            assert ours[k].stride() == v.stride() and ours[k].storage_offset() == v.storage_offset(), k
            assert str(ours[k].dtype).split(".")[1] == str(v.dtype).split(".")[1]
    assert ours["same"] is ours["f32"] and ours["p"].requires_grad
    assert ours["meta"] == {"iter": 3, "loss": 0.25, "name": "run", "dims": [1, 2], "size": (3, 4),
                            "dtype": rt.float16}
    ours["f32"].fill_(0.0)
    assert to_numpy(ours["t"]).sum() == 0 and to_numpy(ours["row"]).sum() == 0

    model = torch.nn.Linear(3, 2)
    torch.save({"model": model.state_dict(), "opt": torch.optim.AdamW(model.parameters()).state_dict()},
               tmp_path / "ckpt.pt")
    ckpt = rt.load(str(tmp_path / "ckpt.pt"), map_location="cpu")
    mine = nn.Linear(3, 2)
    mine.load_state_dict(ckpt["model"])
    np.testing.assert_allclose(to_numpy(mine.weight), model.weight.detach().double().numpy())


def test_torch_files_with_forbidden_globals(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"x": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(rt.CheckpointError, match=r"posix\.system|os\.system"):
        rt.load(tmp_path / "evil.pt")
    torch.save({"config": OrderedDict(a=1), "counter": __import__("collections").Counter("ab")},
               tmp_path / "counter.pt")
    with pytest.raises(rt.CheckpointError, match=r"collections\.Counter"):
        rt.load(tmp_path / "counter.pt")
    torch.save({"x": torch.ones(1)}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(rt.CheckpointError, match="legacy"):
        rt.load(tmp_path / "legacy.pt")
