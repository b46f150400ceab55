"""Creation, dtype inference, metadata, conversions, numpy exchange and printing."""
import os
import subprocess
import sys

import numpy as np
import pytest

import rustytorch as rt
from conftest import assert_close, to_numpy


def test_import_without_gpu_reports_cuda_state():
    assert isinstance(rt.cuda.is_available(), bool)
    assert rt.__version__ == rt._C.__version__
    assert isinstance(rt.utils.cmake_prefix_path, str)


@pytest.mark.parametrize("data, dtype", [
    (1.5, rt.float32), (3, rt.int64), (True, rt.bool), ([1, 2, 3], rt.int64), ([[1.0, 2], [3, 4]], rt.float32),
    (np.arange(4, dtype=np.float64), rt.float64), (np.arange(4, dtype=np.int32), rt.int32),
    (np.float16(2.5), rt.float16), ([True, False], rt.bool),
])
def test_tensor_infers_dtype_like_pytorch(data, dtype):
    t = rt.tensor(data)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(data))


def test_creation_functions(device):
    assert rt.zeros(2, 3, device=device).shape == (2, 3)
    assert rt.zeros((2, 3), device=device).shape == (2, 3)
    assert rt.ones([4], dtype=rt.float64, device=device).dtype == rt.float64
    assert_close(rt.full((2, 2), 7.0, device=device), np.full((2, 2), 7.0))
    assert rt.arange(5).dtype == rt.int64
    assert_close(rt.arange(1, 2, 0.25, device=device), np.arange(1, 2, 0.25))
    assert_close(rt.linspace(0, 1, 5, device=device), np.linspace(0, 1, 5))
    assert_close(rt.eye(3, 4, device=device), np.eye(3, 4))
    x = rt.randn(3, 4, device=device)
    assert_close(rt.zeros_like(x), np.zeros((3, 4)))
    assert rt.ones_like(x, dtype=rt.float64).dtype == rt.float64
    assert rt.full_like(x, 2).device == x.device
    assert rt.empty(0, 3, device=device).numel() == 0


def test_metadata_and_views():
    x = rt.arange(24).reshape(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.size() == (2, 3, 4) and x.size(-1) == 4
    assert x.ndim == 3 and x.dim() == 3 and x.numel() == 24 and len(x) == 2
    assert x.stride() == (12, 4, 1) and x.is_contiguous()
    y = x.transpose(0, 2)
    assert y.shape == (4, 3, 2) and not y.is_contiguous()
    np.testing.assert_array_equal(y.numpy(), np.arange(24).reshape(2, 3, 4).transpose(2, 1, 0))
    np.testing.assert_array_equal(x.T.numpy(), np.arange(24).reshape(2, 3, 4).T)
    assert x.view(6, 4).shape == (6, 4) and x.view(-1).shape == (24,)
    assert x.permute(2, 0, 1).shape == (4, 2, 3) and x.permute((2, 0, 1)).shape == (4, 2, 3)
    assert x.unsqueeze(0).shape == (1, 2, 3, 4) and x.unsqueeze(0).squeeze(0).shape == (2, 3, 4)
    assert x.flatten(1).shape == (2, 12) and x.flatten().unflatten(0, (4, 6)).shape == (4, 6)
    assert x[0].expand(5, 3, 4).shape == (5, 3, 4)


def test_dtype_and_device_conversions(device):
    x = rt.tensor([1.5, -2.5, 3.0]).to(device)
    assert str(x.device).startswith(device)
    assert x.to(rt.float64).dtype == rt.float64
    assert x.double().dtype == rt.float64 and x.half().dtype == rt.float16
    assert x.long().tolist() == [1, -2, 3]
    assert x.to(device, rt.bfloat16).dtype == rt.bfloat16
    assert x.to(dtype=rt.int32, device="cpu").dtype == rt.int32
    assert x.to(rt.zeros(1, dtype=rt.float64)).dtype == rt.float64
    assert x.cpu().device == rt.device("cpu")
    assert x.tolist() == [1.5, -2.5, 3.0]
    assert rt.tensor(2.5).item() == 2.5 and float(rt.tensor(2.5)) == 2.5 and int(rt.tensor(7)) == 7
    with pytest.raises(ValueError):
        float(rt.ones(2))


def test_numpy_exchange_is_zero_copy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = rt.from_numpy(a)
    t[0, 0] = 100.0
    assert a[0, 0] == 100.0
    b = t.numpy()
    b[1, 2] = -1.0
    assert t[1, 2].item() == -1.0
    strided = rt.from_numpy(a[:, ::2])
    np.testing.assert_array_equal(strided.numpy(), a[:, ::2])
    del a
    assert t.sum().item() == 100 + 1 + 2 + 3 + 4 - 1
    with pytest.raises(ValueError, match="negative"):
        rt.from_numpy(np.arange(4.0)[::-1])
    with pytest.raises(TypeError):
        rt.from_numpy(np.zeros(2, dtype=np.complex64))


def test_numpy_refuses_tensors_that_need_care():
    with pytest.raises(ValueError, match="detach"):
        rt.ones(2, requires_grad=True).numpy()
    with pytest.raises(TypeError, match="bfloat16"):
        rt.ones(2, dtype=rt.bfloat16).numpy()
    np.testing.assert_array_equal(np.asarray(rt.ones(2, requires_grad=True)), np.ones(2))


def test_repr_like_pytorch():
    assert repr(rt.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(rt.tensor([1, 2])) == "tensor([1, 2])"
    assert "requires_grad=True" in repr(rt.ones(2, requires_grad=True))
    assert repr(rt.ones(2, dtype=rt.float64)) == "tensor([1., 1.], dtype=rustytorch.float64)"
    assert repr(rt.float32) == "rustytorch.float32"
    assert repr(rt.device("cuda", 1)) == "device(type='cuda', index=1)"
    assert f"{rt.tensor(3.25):.1f}" == "3.2"


def test_random_is_reproducible(device):
    rt.manual_seed(7)
    a = rt.rand(100, device=device)
    rt.manual_seed(7)
    b = rt.rand(100, device=device)
    np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
    assert 0 <= to_numpy(a).min() and to_numpy(a).max() < 1
    p = rt.randperm(10, device=device)
    assert sorted(p.tolist()) == list(range(10))
    r = rt.randint(3, 9, (50,), device=device)
    assert r.dtype == rt.int64 and 3 <= r.min().item() and r.max().item() < 9


def test_dlpack_round_trips_with_numpy_share_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = rt.from_dlpack(a)
    assert t.shape == (3, 4) and t.dtype == rt.float32
    t[0, 0] = 42.0
    assert a[0, 0] == 42.0
    strided = rt.tensor(np.arange(24.0)).reshape(4, 6)[:, ::2]
    b = np.from_dlpack(strided)
    np.testing.assert_array_equal(b, np.arange(24.0).reshape(4, 6)[:, ::2])
    b[1, 1] = -5.0
    assert strided[1, 1].item() == -5.0
    assert strided.__dlpack_device__() == (1, 0)
    for dtype in (rt.int64, rt.int32, rt.uint8, rt.int8, rt.bool, rt.float16, rt.float64):
        x = rt.arange(6).to(dtype)
        np.testing.assert_array_equal(np.from_dlpack(x), x.numpy())
        assert rt.from_dlpack(np.from_dlpack(x)).dtype == dtype
    capsule = rt.ones(3).__dlpack__()
    assert rt.from_dlpack(capsule).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError):
        rt.from_dlpack(capsule)  # consumed already
    with pytest.raises(ValueError, match="detach"):
        rt.ones(2, requires_grad=True).__dlpack__()


@pytest.mark.parametrize("first, second", [("rustytorch", "torch"), ("torch", "rustytorch")])
def test_imports_beside_torch_in_either_order(first, second):
    pytest.importorskip("torch", reason="the shared-process check runs where torch is installed")
    code = f"import {first}, {second}; import torch.nn.functional; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_dlpack_with_torch(device):
    torch = pytest.importorskip("torch", reason="the PyTorch round trip runs where torch is installed")
    x = rt.arange(10, device=device).float().reshape(2, 5)
    tt = torch.from_dlpack(x)
    assert tuple(tt.shape) == (2, 5) and tt.device.type == device
    tt[0, 0] = 7.0
    assert x[0, 0].item() == 7.0
    back = rt.from_dlpack(torch.arange(6, device=tt.device, dtype=torch.bfloat16) * 2)
    assert back.dtype == rt.bfloat16 and back.float().tolist() == [0, 2, 4, 6, 8, 10]
