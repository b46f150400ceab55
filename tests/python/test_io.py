"""safetensors files: round trips of every dtype, interop with the safetensors package both ways,
memory mapping, atomic writes, and hostile files that must raise CheckpointError (never crash)."""
import json
import struct

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import io, nn
from conftest import to_numpy


def test_round_trip_every_dtype(tmp_path, device):
    tensors = {f"t_{dt}": rt.arange(12, device=device).to(dt).reshape(3, 4) for dt in
               (rt.float32, rt.float64, rt.float16, rt.bfloat16, rt.int64, rt.int32, rt.int16, rt.int8, rt.uint8,
                rt.bool)}
    tensors["scalar"] = rt.tensor(2.5, device=device)
    tensors["empty"] = rt.zeros(0, 3, device=device)
    tensors["strided"] = rt.arange(20.0, device=device).reshape(4, 5).t()
    path = tmp_path / "all.safetensors"
    io.save_file(tensors, str(path), metadata={"step": "7"})
    loaded = io.load_file(str(path), device=device)
    assert set(loaded) == set(tensors)
    for k, v in tensors.items():
        assert loaded[k].dtype == v.dtype and loaded[k].shape == v.shape
        np.testing.assert_array_equal(to_numpy(loaded[k]), to_numpy(v))
    assert io.load_metadata(str(path)) == {"step": "7"}


def test_interop_with_the_safetensors_package(tmp_path):
    st = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed")
    a = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.array([1, 2, 3], dtype=np.int64),
         "s": np.array([-32768, 5, 32767], dtype=np.int16)}
    st.save_file(a, str(tmp_path / "theirs.safetensors"))
    ours = io.load_file(str(tmp_path / "theirs.safetensors"))
    for name, array in a.items():
        np.testing.assert_array_equal(ours[name].numpy(), array)
    io.save_file({"x": rt.linspace(0, 1, 5), "m": rt.eye(3, dtype=rt.float64), "s": rt.tensor([-3, 4], dtype=rt.int16)},
                 str(tmp_path / "ours.safetensors"))
    theirs = st.load_file(str(tmp_path / "ours.safetensors"))
    np.testing.assert_allclose(theirs["x"], np.linspace(0, 1, 5), rtol=1e-6)
    np.testing.assert_array_equal(theirs["m"], np.eye(3))
    assert theirs["s"].dtype == np.int16 and theirs["s"].tolist() == [-3, 4]


def test_save_load_state_dict_and_copy_on_write(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    path = tmp_path / "model.safetensors"
    rt.save(model.state_dict(), path)
    other = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    other.load_state_dict(rt.load(path))
    for (ka, a), (kb, b) in zip(model.state_dict().items(), other.state_dict().items()):
        assert ka == kb
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
    loaded = rt.load(path)
    before = path.read_bytes()
    loaded["0.weight"].fill_(123.0)  # writes to the mapping stay in memory
    assert path.read_bytes() == before
    with pytest.raises(TypeError):
        rt.save([1, object()], path)


def test_save_is_atomic(tmp_path):
    path = tmp_path / "keep.safetensors"
    io.save_file({"a": rt.ones(3)}, str(path))
    original = path.read_bytes()

    def fails_midway(f):
        f.write(b"\0" * 1000)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        io.write_atomically(str(path), fails_midway)
    assert path.read_bytes() == original
    assert [p.name for p in tmp_path.iterdir()] == ["keep.safetensors"]


def write_raw(path, header, data=b"", length=None):
    encoded = json.dumps(header).encode() if isinstance(header, dict) else header
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded) if length is None else length))
        f.write(encoded)
        f.write(data)


HOSTILE = {
    "huge_header_length": (dict(), b"", 1 << 62, "header claims"),
    "bad_json": (b"{not json", b"", None, "JSON"),
    "bad_dtype": ({"a": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, None, "dtype"),
    "out_of_range": ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8, None, "outside"),
    "size_mismatch": ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None, "needs"),
    "overlap": ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                 "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12, None, "overlap"),
    "negative_shape": ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4, None, "shape"),
    "huge_shape": ({"a": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 4]}}, b"\0" * 4, None,
                   "needs"),
    "not_an_object": (b"[1, 2]", b"", None, "object"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_files_raise_checkpoint_error(tmp_path, case):
    header, data, length, needle = HOSTILE[case]
    path = tmp_path / f"{case}.safetensors"
    write_raw(path, header, data, length)
    with pytest.raises(rt.CheckpointError, match=needle) as info:
        io.load_file(str(path))
    assert str(path) in str(info.value)


def test_truncated_and_missing_files(tmp_path):
    path = tmp_path / "t.safetensors"
    io.save_file({"a": rt.ones(100)}, str(path))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(rt.CheckpointError, match="'a'"):
        io.load_file(str(path))
    path.write_bytes(b"\1\2")
    with pytest.raises(rt.CheckpointError, match="fewer than"):
        io.load_file(str(path))
    with pytest.raises(rt.CheckpointError, match="cannot open"):
        io.load_file(str(tmp_path / "missing.safetensors"))
