"""rustytorch.io.read_idx against files written here with numpy (big-endian), plain and gzip."""
import gzip
import os

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import io


def write_idx(path, array, code, compress=False):
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    data = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    with (gzip.open(path, "wb") if compress else open(path, "wb")) as f:
        f.write(data)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("np_dtype, code, rt_dtype", [
    (np.uint8, 0x08, rt.uint8), (np.int8, 0x09, rt.int8), (np.int16, 0x0B, rt.int16),
    (np.int32, 0x0C, rt.int32), (np.float32, 0x0D, rt.float32), (np.float64, 0x0E, rt.float64)])
def test_matches_numpy(tmp_path, np_dtype, code, rt_dtype, compress):
    rng = np.random.default_rng(3)
    info = np.iinfo(np_dtype) if np.issubdtype(np_dtype, np.integer) else None
    array = (rng.integers(info.min, info.max, size=(3, 4, 5), endpoint=True) if info else
             rng.standard_normal((3, 4, 5))).astype(np_dtype)
    path = tmp_path / ("a.idx.gz" if compress else "a.idx")
    write_idx(path, array, code, compress)
    t = io.read_idx(str(path))
    assert t.dtype == rt_dtype and tuple(t.shape) == (3, 4, 5)
    np.testing.assert_array_equal(t.numpy(), array.astype(t.numpy().dtype))


def test_bad_files_raise_checkpoint_error(tmp_path):
    path = tmp_path / "short.idx"
    write_idx(path, np.zeros((4,), np.uint8), 0x08)
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(rt.CheckpointError, match="truncated"):
        io.read_idx(str(path))
    with pytest.raises(rt.CheckpointError, match="cannot open"):
        io.read_idx(str(tmp_path / "missing.idx"))


@pytest.mark.skipif(not os.path.exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"),
                    reason="Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
def test_fashion_mnist_test_labels_are_balanced():
    labels = io.read_idx("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")
    assert tuple(labels.shape) == (10000,)
    assert np.bincount(labels.numpy(), minlength=10).tolist() == [1000] * 10
