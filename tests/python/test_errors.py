"""C++ errors arrive as Python exceptions of the matching built-in types, message intact."""
import pytest

import rustytorch as rt


def test_error_types_and_messages():
    with pytest.raises(ValueError, match=r"\[matmul\]"):
        rt.ones(2, 3) @ rt.ones(4, 5)
    with pytest.raises(rt.ShapeError):
        rt.ones(2, 3) + rt.ones(4)
    with pytest.raises(TypeError):
        rt.ones(2, dtype=rt.bool).exp_()
    with pytest.raises(IndexError, match="dim"):
        rt.ones(2).sum(3)
    assert issubclass(rt.ShapeError, rt.Error) and issubclass(rt.Error, RuntimeError)
    assert issubclass(rt.DTypeError, TypeError) and issubclass(rt.IndexError, IndexError)
    assert issubclass(rt.OutOfMemoryError, RuntimeError)


def test_cuda_request_without_gpu_names_the_reason():
    if rt.cuda.is_available():
        pytest.skip("a GPU is available")
    with pytest.raises(rt.DeviceError, match="CUDA"):
        rt.ones(2, device="cuda")
    with pytest.raises(rt.DeviceError):
        rt.cuda.synchronize()


def test_bad_arguments():
    with pytest.raises(TypeError):
        rt.zeros("a")
    with pytest.raises(ValueError):
        rt.device("tpu")
    with pytest.raises(ValueError):
        rt.cross_entropy(rt.ones(2, 3), rt.tensor([0, 1]), reduction="avg")
