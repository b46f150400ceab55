"""The Tensor methods and top-level API that PyTorch scripts touch: Size, repeat/tile, einsum,
isclose/allclose/equal, scatter_, nonzero/argwhere/masked_select/where(cond), floor division,
x.type(), randint's forms, Generator, backends, inference_mode, the default dtype, finfo/iinfo,
compile and repr. Checked against numpy float64 references, gradcheck, and PyTorch when it is
importable."""
import copy
import pickle

import numpy as np
import pytest

import rustytorch as rt
from conftest import assert_close, to_numpy

rng = np.random.default_rng(5)


def leaf(shape, device, positive=False):
    x = rng.standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.5
    return rt.tensor(x, dtype=rt.float64, device=device, requires_grad=True)


@pytest.fixture
def default_float64():
    """The default dtype set to float64 for one test, and float32 again after it."""
    rt.set_default_dtype(rt.float64)
    try:
        yield
    finally:
        rt.set_default_dtype(rt.float32)


# ---- Size -------------------------------------------------------------------------------------------

def test_size_is_a_tuple_printed_like_pytorch():
    x = rt.zeros(2, 3, 4)
    s = x.shape
    assert isinstance(s, rt.Size) and isinstance(s, tuple) and isinstance(x.size(), rt.Size)
    assert repr(s) == str(s) == "rustytorch.Size([2, 3, 4])" and repr(rt.Size()) == "rustytorch.Size([])"
    assert s == (2, 3, 4) and x.size(1) == 3 and type(x.size(-1)) is int
    assert s.numel() == 24 == x.numel() and rt.Size([]).numel() == 1
    assert type(s[1:]) is rt.Size and s[1:] == (3, 4) and type(s[0]) is int
    assert type(s + (5,)) is rt.Size and type((1,) + s) is rt.Size and type(s * 2) is rt.Size
    batch, *rest = s
    assert batch == 2 and rest == [3, 4]
    assert pickle.loads(pickle.dumps(s)) == s and type(pickle.loads(pickle.dumps(s))) is rt.Size
    assert rt.Size([np.int64(3), rt.tensor(2)]) == (3, 2)
    with pytest.raises(TypeError, match="item 0 is 'float'"):
        rt.Size([1.5])


def test_size_is_accepted_where_a_tuple_is(device):
    x = rt.arange(24, device=device).reshape(2, 3, 4)
    assert rt.zeros(x.shape, device=device).shape == x.shape
    assert x.view(x.shape[0], -1).shape == (2, 12) and x.reshape(x.shape[1:] + (2,)).shape == (3, 4, 2)
    assert x[0].expand(x.shape).shape == x.shape and np.zeros(x.shape).shape == (2, 3, 4)
    assert rt.randn(x.shape, device=device).shape == x.shape and rt.full(x.shape, 2.0).shape == x.shape


# ---- repeat and tile --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 1)), ((2, 3), (3, 1, 2)), ((3,), (2, 2)), ((), (3,)),
                                        ((2, 1), (1, 1)), ((2, 3), (0, 2))])
def test_repeat_matches_numpy_tile(device, shape, reps):
    a = rng.standard_normal(shape)
    x = rt.tensor(a, dtype=rt.float64, device=device)
    assert_close(x.repeat(*reps), np.tile(a, reps))
    assert_close(x.repeat(reps), np.tile(a, reps))
    assert_close(x.repeat(rt.Size(reps)), np.tile(a, reps))


def test_repeat_copies_and_is_differentiable(device):
    x = rt.ones(2, 2, device=device)
    y = x.repeat(1, 1)
    y[0, 0] = 5.0
    assert x[0, 0].item() == 1.0
    assert rt.autograd.gradcheck(lambda t: t.repeat(2, 1, 3), (leaf((2, 3), device),))
    assert rt.autograd.gradcheck(lambda t: t.t().repeat(2, 2), (leaf((2, 3), device),))


def test_tile_pads_dims_with_ones(device):
    a = rng.standard_normal((2, 3, 2))
    x = rt.tensor(a, dtype=rt.float64, device=device)
    assert_close(x.tile((2,)), np.tile(a, (2,)))
    assert_close(rt.tile(x, (2, 1, 1, 2)), np.tile(a, (2, 1, 1, 2)))
    assert_close(x.tile(2, 2), np.tile(a, (2, 2)))
    assert rt.autograd.gradcheck(lambda t: rt.tile(t, (3,)), (leaf((2, 2), device),))


def test_repeat_errors():
    with pytest.raises(rt.ShapeError, match=r"\[repeat\] 1 repeats \[2\] for a tensor of shape \[2, 3\]"):
        rt.zeros(2, 3).repeat(2)
    with pytest.raises(rt.ValueError, match="nonnegative"):
        rt.zeros(2).repeat(-1)
    with pytest.raises(TypeError):
        rt.zeros(2).repeat(1.5)


# ---- einsum -----------------------------------------------------------------------------------------

EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("iij->j", [(2, 2, 3)]), ("i,i", [(3,), (3,)]), ("i,j", [(2,), (3,)]),
    ("i,j->", [(2,), (3,)]), ("i->", [(4,)]), ("ij->ji", [(2, 3)]), (",->", [(), ()]), ("Ab,bA", [(2, 3), (3, 2)]),
    ("ba,ab", [(2, 3), (3, 2)]), ("i j , j k -> i k", [(2, 3), (3, 4)]), ("...ij,...jk", [(5, 2, 3), (3, 4)]),
    ("...ii->...i", [(2, 3, 3)]), ("ij...,jk...->ik...", [(2, 3, 4), (3, 5, 4)]), ("...,...", [(2,), (3, 1)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]), ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ijk->kji", [(2, 3, 4)]), ("i,i,i->i", [(3,), (3,), (3,)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM)
def test_einsum_matches_numpy(device, equation, shapes):
    arrays = [rng.standard_normal(s) for s in shapes]
    tensors = [rt.tensor(a, dtype=rt.float64, device=device) for a in arrays]
    expected = np.einsum(equation.replace(" ", ""), *arrays)
    assert_close(rt.einsum(equation, *tensors), expected, rtol=1e-10, atol=1e-12)
    assert_close(rt.einsum(equation, tensors), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("equation,shapes,full", [("ij,jk->ik", [(2, 1), (3, 4)], [(2, 3), (3, 4)]),
                                                  ("ij,ij->ij", [(2, 3), (1, 3)], [(2, 3), (2, 3)]),
                                                  ("bij,bjk->bik", [(1, 2, 3), (4, 3, 2)], [(4, 2, 3), (4, 3, 2)])])
def test_einsum_broadcasts_size_one_dims(device, equation, shapes, full):
    arrays = [rng.standard_normal(s) for s in shapes]
    expected = np.einsum(equation, *[np.broadcast_to(a, f) for a, f in zip(arrays, full)])
    got = rt.einsum(equation, *[rt.tensor(a, dtype=rt.float64, device=device) for a in arrays])
    assert_close(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("equation,shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]),
                                             ("...ij,...jk", [(2, 2, 3), (3, 2)]), ("bn,anm,bm->ba",
                                                                                    [(2, 3), (2, 3, 2), (2, 2)]),
                                             ("ij,ij->ij", [(2, 3), (1, 3)])])
def test_einsum_gradients(device, equation, shapes):
    inputs = tuple(leaf(s, device) for s in shapes)
    assert rt.autograd.gradcheck(lambda *t: rt.einsum(equation, *t), inputs)


def test_einsum_sublist_form_and_dtypes():
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    ta, tb = rt.tensor(a, dtype=rt.float64), rt.tensor(b, dtype=rt.float64)
    assert_close(rt.einsum(ta, [0, 1], tb, [1, 2], [0, 2]), a @ b)
    assert_close(rt.einsum(ta, [Ellipsis, 1], tb, [1, 2]), a @ b)
    ints = rt.einsum("ij,jk", rt.ones(2, 3, dtype=rt.int64), rt.ones(3, 4, dtype=rt.int64))
    assert ints.dtype == rt.int64 and ints.tolist() == [[3] * 4] * 2
    assert rt.einsum("ij,jk", rt.ones(2, 3), rt.ones(3, 4)).dtype == rt.float32


@pytest.mark.parametrize("equation,shapes,message", [
    ("ij->ii", [(2, 2)], "output subscript i appears more than once"),
    ("ij->k", [(2, 2)], "output subscript k does not appear"),
    ("ij,jk->ik", [(2, 3), (4, 5)], "subscript j has size 4 for operand 1"),
    ("ijk", [(2, 2)], r"subscripts in the equation \(3\) does not match the number of dimensions \(2\)"),
    ("ij,jk", [(2, 3)], "has 2 operand"),
    ("i.j", [(2, 2)], "not part of any ellipsis"),
    ("i1", [(2, 2)], "invalid subscript given at index 1"),
    ("ii", [(2, 3)], "subscript i has size 3 for operand 0 which does not broadcast with previously seen size 2"),
    ("ii", [(1, 3)], "subscript i is repeated for operand 0 but the sizes don't match, 3 != 1"),
])
def test_einsum_errors(equation, shapes, message):
    with pytest.raises(rt.ValueError, match=r"^\[einsum\] .*" + message):
        rt.einsum(equation, *[rt.zeros(s) for s in shapes])


def test_einsum_dtype_mismatch():
    with pytest.raises(rt.DTypeError, match="float32, rustytorch.float64"):
        rt.einsum("ij,jk", rt.zeros(2, 3), rt.zeros(3, 4, dtype=rt.float64))


def test_einsum_like_pytorch():
    torch = pytest.importorskip("torch")
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((3, 2)), rng.standard_normal((4, 2, 3))
    for eq, ops in [("Ab,bA", (a, b)), ("bA,Ab", (b, a)), ("ij,jk", (a, b)), ("...ij->...ji", (c,)),
                    ("ij,kij", (a, c)), ("zab,ba", (c, b))]:
        ours = rt.einsum(eq, *[rt.tensor(x, dtype=rt.float64) for x in ops])
        theirs = torch.einsum(eq, *[torch.tensor(x) for x in ops])
        assert tuple(ours.shape) == tuple(theirs.shape), eq
        np.testing.assert_allclose(to_numpy(ours), theirs.numpy(), rtol=1e-10, atol=1e-12)


# ---- isclose, allclose, equal -----------------------------------------------------------------------

def test_isclose_matches_numpy(device):
    a = np.array([1.0, 1.0 + 1e-6, 1.0 + 1e-3, np.inf, -np.inf, np.nan, 0.0, 1e-9])
    b = np.array([1.0, 1.0, 1.0, np.inf, np.inf, np.nan, 1e-9, 0.0])
    ta, tb = rt.tensor(a, device=device), rt.tensor(b, device=device)
    assert to_numpy(rt.isclose(ta, tb)).tolist() == np.isclose(a, b).tolist()
    assert to_numpy(ta.isclose(tb, equal_nan=True)).tolist() == np.isclose(a, b, equal_nan=True).tolist()
    assert to_numpy(rt.isclose(ta, tb, rtol=0, atol=0)).tolist() == (a == b).tolist()
    assert to_numpy(rt.isclose(ta, tb, rtol=1e-2, atol=0.1)).tolist() == np.isclose(a, b, 1e-2, 0.1).tolist()
    ints = rt.isclose(rt.tensor([1, 2, 100], device=device), rt.tensor([1, 3, 101], device=device), rtol=0.01)
    assert to_numpy(ints).tolist() == [True, False, True]
    assert to_numpy(rt.isclose(rt.tensor([True, False]), rt.tensor([True, True]))).tolist() == [True, False]


def test_allclose_and_equal(device):
    x = rt.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    assert rt.allclose(x, x + 1e-7) and not rt.allclose(x, x + 1e-3) and x.allclose(x * (1 + 1e-6))
    assert rt.allclose(rt.ones(2, 3, device=device), rt.ones(3, device=device))  # broadcasts
    assert rt.allclose(rt.tensor([float("nan")]), rt.tensor([float("nan")]), equal_nan=True)
    assert not rt.allclose(rt.tensor([float("nan")]), rt.tensor([float("nan")]))
    assert rt.equal(x, x.clone()) and x.equal(x) and not rt.equal(x, x.t())
    assert not rt.equal(rt.ones(2), rt.ones(3)) and not rt.equal(rt.ones(2), rt.ones(1, 2))
    assert rt.equal(rt.tensor([1, 2]), rt.tensor([1.0, 2.0])) and rt.equal(rt.zeros(0), rt.zeros(0))
    assert not rt.equal(rt.tensor([float("nan")]), rt.tensor([float("nan")]))


def test_isclose_errors():
    with pytest.raises(rt.DTypeError, match=r"\[isclose\] input has dtype rustytorch.float32 but other has "
                                            r"rustytorch.float64"):
        rt.isclose(rt.zeros(1), rt.zeros(1, dtype=rt.float64))
    with pytest.raises(rt.ValueError, match="rtol=-1"):
        rt.isclose(rt.zeros(1), rt.zeros(1), rtol=-1)
    with pytest.raises(TypeError):
        rt.isclose(rt.zeros(1), 0.0)


# ---- scatter_ ---------------------------------------------------------------------------------------

def test_scatter_in_place(device):
    index = rt.tensor([[0, 1, 2], [2, 0, 0]], device=device)
    src = rt.arange(1.0, 7.0, device=device).reshape(2, 3)
    x = rt.zeros(3, 3, device=device)
    assert x.scatter_(0, index, src) is x
    expected = np.zeros((3, 3))
    expected[0, 0], expected[1, 1], expected[2, 2], expected[2, 0], expected[0, 1], expected[0, 2] = 1, 2, 3, 4, 5, 6
    assert_close(x, expected)
    y = rt.ones(3, 3, device=device)
    y.scatter_(1, index, 2.5)
    assert_close(y, [[2.5, 2.5, 2.5], [2.5, 1, 2.5], [1, 1, 1]])
    z = rt.zeros(3, device=device)
    z.scatter_(0, rt.tensor([0, 0, 2], device=device), rt.tensor([1.0, 2.0, 4.0], device=device), reduce="add")
    assert_close(z, [3, 0, 4])
    z.scatter_(0, rt.tensor([1, 1], device=device), 2.5, reduce="add")
    assert_close(z, [3, 5, 4])
    w = rt.zeros(3, device=device)
    assert w.scatter_add_(0, rt.tensor([2, 2], device=device), rt.tensor([1.0, 2.0], device=device)) is w
    assert_close(w, [0, 0, 3])


def test_scatter_in_place_gradients(device):
    index = rt.tensor([[0, 2], [1, 0]], device=device)

    def f(x, src):
        out = x * 1.0
        out.scatter_(1, index, src)
        return out

    assert rt.autograd.gradcheck(f, (leaf((2, 3), device), leaf((2, 2), device)))
    x = rt.ones(2, 2, requires_grad=True)
    with pytest.raises(rt.Error, match="leaf"):
        x.scatter_(0, rt.tensor([[0, 1]]), 1.0)
    with pytest.raises(rt.ValueError, match="reduce must be None or 'add', got 'multiply'"):
        rt.zeros(2).scatter_(0, rt.tensor([0]), rt.ones(1), reduce="multiply")


# ---- nonzero, argwhere, where(cond), masked_select ----------------------------------------------------

@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), (2, 0, 3), (0,)])
def test_nonzero_matches_numpy(device, shape):
    a = rng.integers(-1, 2, size=shape).astype(np.float64)
    x = rt.tensor(a, device=device)
    expected = np.argwhere(a)
    got = rt.nonzero(x)
    assert got.dtype == rt.int64 and tuple(got.shape) == expected.shape
    assert to_numpy(got).tolist() == expected.tolist() and to_numpy(x.argwhere()).tolist() == expected.tolist()
    parts = x.nonzero(as_tuple=True)
    assert isinstance(parts, tuple) and len(parts) == len(shape)
    for part, ref in zip(parts, np.nonzero(a)):
        assert to_numpy(part).tolist() == ref.tolist()
    for part, ref in zip(rt.where(x != 0), np.nonzero(a)):
        assert to_numpy(part).tolist() == ref.tolist()


def test_nonzero_of_bool_nan_and_zero_dim(device):
    x = rt.tensor([[True, False], [False, True]], device=device)
    assert to_numpy(x.nonzero()).tolist() == [[0, 0], [1, 1]]
    assert to_numpy(rt.tensor([0.0, float("nan"), -0.0], device=device).nonzero()).tolist() == [[1]]
    assert tuple(rt.tensor(5, device=device).nonzero().shape) == (1, 0)
    assert tuple(rt.tensor(0, device=device).nonzero().shape) == (0, 0)
    (only,) = rt.nonzero(rt.tensor(3.0, device=device), as_tuple=True)
    assert to_numpy(only).tolist() == [0]


def test_masked_select(device):
    a = rng.standard_normal((3, 4))
    m = a > 0.2
    x = rt.tensor(a, device=device)
    assert_close(rt.masked_select(x, rt.tensor(m, device=device)), a[m])
    row = np.array([True, False, True, True])
    assert_close(x.masked_select(rt.tensor(row, device=device)), a[np.broadcast_to(row, a.shape)])
    assert_close(x[rt.tensor(m, device=device)], a[m])  # mask indexing runs through nonzero
    mask = rt.tensor(m, device=device)
    assert rt.autograd.gradcheck(lambda t: t.masked_select(mask), (leaf((3, 4), device),))
    with pytest.raises(rt.DTypeError, match=r"\[masked_select\] mask must be a bool tensor, got dtype int64"):
        rt.masked_select(x, rt.tensor([1, 0, 1, 0], device=device))
    with pytest.raises(rt.ShapeError, match="masked_select"):
        rt.masked_select(x, rt.tensor([True, False], device=device))


# ---- floor division ----------------------------------------------------------------------------------

def test_floor_divide_ints(device):
    a = np.array([7, -7, 7, -7, 0, 5, -1, 9], dtype=np.int64)
    b = np.array([2, 2, -2, -2, 3, 5, 3, -4], dtype=np.int64)
    ta, tb = rt.tensor(a, device=device), rt.tensor(b, device=device)
    assert to_numpy(ta // tb).tolist() == (a // b).tolist()
    assert to_numpy(rt.floor_divide(ta, tb)).tolist() == (a // b).tolist()
    assert to_numpy(ta // 3).tolist() == (a // 3).tolist() and to_numpy(20 // tb).tolist() == (20 // b).tolist()
    small = rt.tensor([-128, 100, -5], dtype=rt.int8, device=device)
    assert to_numpy(small // rt.tensor([-1, 7, 2], dtype=rt.int8, device=device)).tolist() == [-128, 14, -3]
    assert (ta // tb).dtype == rt.int64 and (small // 2).dtype == rt.int8
    if device == "cpu":  # PyTorch raises on the CPU only; CUDA gives 0
        with pytest.raises(rt.ValueError, match="ZeroDivisionError"):
            rt.tensor([5], device=device) // 0
    else:
        assert to_numpy(rt.tensor([5], device=device) // 0).tolist() == [0]


def test_floor_divide_floats(device):
    a = np.array([1.0, -5.5, 5.5, 7.0, -7.0, 0.0, -0.0, 1.0, np.inf, 3.0])
    b = np.array([0.1, 2.0, -2.0, 0.5, 0.5, 3.0, 3.0, 0.0, 2.0, -0.0])
    ta, tb = rt.tensor(a, device=device), rt.tensor(b, device=device)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.floor_divide(a, b)
    got = to_numpy(ta // tb)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    assert (rt.tensor([5], device=device) // 2.5).dtype == rt.float32
    assert_close(rt.tensor([5], device=device) // 2.5, [2.0])
    x = rt.tensor([7.5, -3.0], device=device)
    x //= 2
    assert_close(x, [3.0, -2.0])
    i = rt.tensor([7, -3], device=device)
    i //= rt.tensor([2, 2], device=device)
    assert to_numpy(i).tolist() == [3, -2]


def test_floor_divide_gradient_is_zero_and_bool_is_refused(device):
    a = rt.tensor([[1.3, -2.7, 4.1]], dtype=rt.float64, device=device, requires_grad=True)
    b = rt.tensor([0.7, 1.9, -1.1], dtype=rt.float64, device=device, requires_grad=True)
    assert rt.autograd.gradcheck(lambda x, y: x // y, (a, b))
    (a // b).sum().backward()
    assert to_numpy(a.grad).tolist() == [[0.0, 0.0, 0.0]] and to_numpy(b.grad).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(rt.DTypeError, match="floor_divide"):
        rt.tensor([True], device=device) // rt.tensor([True], device=device)


def test_floor_divide_like_pytorch():
    torch = pytest.importorskip("torch")
    a = rng.standard_normal(50) * 10
    b = rng.standard_normal(50) * 3
    np.testing.assert_array_equal(to_numpy(rt.tensor(a) // rt.tensor(b)),
                                  (torch.tensor(a, dtype=torch.float32) // torch.tensor(b, dtype=torch.float32))
                                  .double().numpy())
    ia, ib = rng.integers(-50, 50, 50), rng.integers(1, 9, 50) * rng.choice([-1, 1], 50)
    assert (rt.tensor(ia) // rt.tensor(ib)).tolist() == (torch.tensor(ia) // torch.tensor(ib)).tolist()


# ---- x.type() ------------------------------------------------------------------------------------------

def test_type_names_and_conversions(device):
    names = {rt.float32: "Float", rt.float64: "Double", rt.float16: "Half", rt.bfloat16: "BFloat16",
             rt.int64: "Long", rt.int32: "Int", rt.int8: "Char", rt.uint8: "Byte", rt.bool: "Bool"}
    prefix = "rustytorch.cuda." if device == "cuda" else "rustytorch."
    for dtype, name in names.items():
        assert rt.zeros(1, dtype=dtype, device=device).type() == prefix + name + "Tensor"
    x = rt.tensor([1.5, 2.5], device=device)
    assert x.type(rt.int64).dtype == rt.int64 and x.type(rt.int64).device == x.device
    assert x.type(prefix + "DoubleTensor").dtype == rt.float64 and x.type(prefix + "DoubleTensor").device == x.device
    assert x.type("torch.LongTensor").device.type == "cpu" and x.type("rustytorch.LongTensor").tolist() == [1, 2]
    with pytest.raises(rt.ValueError, match=r"\[type\] invalid type 'rustytorch.ComplexTensor'"):
        x.type("rustytorch.ComplexTensor")
    with pytest.raises(TypeError):
        x.type(3)


# ---- randint and Generator -------------------------------------------------------------------------------

def test_randint_forms(device):
    for t in [rt.randint(10, (3,), device=device), rt.randint(3, 10, (3,), device=device),
              rt.randint(10, size=(3,), device=device), rt.randint(high=10, size=(3,), device=device),
              rt.randint(low=3, high=10, size=(3,), device=device), rt.randint(0, 10, size=rt.Size([3]))]:
        assert t.shape == (3,) and t.dtype == rt.int64
    low = rt.randint(3, 10, (1000,), device=device)
    assert 3 <= low.min().item() and low.max().item() < 10
    assert rt.randint(5, (2, 2), dtype=rt.float32).dtype == rt.float32
    with pytest.raises(TypeError, match="size must be a tuple of ints, got int"):
        rt.randint(10, 3)


def test_generator_reproduces_the_default_generator_and_leaves_it_alone(device):
    rt.manual_seed(123)
    expected = rt.rand(5, device=device)
    after = rt.rand(5, device=device)
    rt.manual_seed(123)
    g = rt.Generator()
    assert g.manual_seed(123) is g and g.initial_seed() == 123 and g.device == rt.device("cpu")
    assert rt.equal(rt.rand(5, generator=g, device=device), expected)
    # Drawing from g did not advance the default generator.
    assert rt.equal(rt.rand(5, device=device), expected)
    assert rt.equal(rt.rand(5, generator=g, device=device), after)
    state = g.get_state()
    draws = [rt.randn(4, generator=g, device=device), rt.randint(0, 100, (4,), generator=g, device=device),
             rt.randperm(6, generator=g, device=device)]
    assert g.set_state(state) is g
    again = [rt.randn(4, generator=g, device=device), rt.randint(0, 100, (4,), generator=g, device=device),
             rt.randperm(6, generator=g, device=device)]
    assert all(rt.equal(a, b) for a, b in zip(draws, again))


def test_generator_is_accepted_by_every_random_function(device):
    x = rt.zeros(3, 4, device=device)
    p = rt.full((3, 4), 0.5, device=device)
    w = rt.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], device=device)
    calls = [
        lambda g: rt.rand(3, 4, generator=g, device=device), lambda g: rt.randn(3, 4, generator=g, device=device),
        lambda g: rt.rand_like(x, generator=g), lambda g: rt.randn_like(x, generator=g),
        lambda g: rt.randint(10, (3, 4), generator=g, device=device), lambda g: rt.randperm(12, generator=g),
        lambda g: rt.bernoulli(p, generator=g), lambda g: p.bernoulli(generator=g),
        lambda g: rt.multinomial(w, 2, generator=g), lambda g: w.multinomial(4, True, generator=g),
        lambda g: x.clone().normal_(0, 2, generator=g), lambda g: x.clone().uniform_(-1, 1, generator=g),
    ]
    default_state = rt.get_rng_state()
    for call in calls:
        first = call(rt.Generator().manual_seed(7))
        second = call(rt.Generator().manual_seed(7))
        assert rt.equal(first, second)
        rt.manual_seed(7)
        assert rt.equal(call(None), first)
        rt.set_rng_state(default_state)
    g = rt.Generator().manual_seed(7)
    before = rt.get_rng_state()
    for call in calls:
        call(g)
    assert rt.get_rng_state() == before


def test_generator_seeds_copies_and_default():
    g = rt.Generator(device="cpu")
    seed = g.seed()
    assert isinstance(seed, int) and g.initial_seed() == seed
    assert rt.Generator().manual_seed(-1).initial_seed() == 2 ** 64 - 1
    assert rt.Generator().manual_seed(2 ** 64 - 1).initial_seed() == 2 ** 64 - 1
    with pytest.raises(rt.ValueError, match=r"\[manual_seed\] the seed must be an int"):
        rt.Generator().manual_seed(2 ** 64)
    g.manual_seed(3)
    rt.rand(2, generator=g)
    for twin in (copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert twin.get_state() == g.get_state()
        assert rt.equal(rt.rand(3, generator=twin), rt.rand(3, generator=copy.deepcopy(g)))
    rt.manual_seed(11)
    assert rt.default_generator.initial_seed() == 11 == rt.initial_seed()
    assert rt.manual_seed(12).initial_seed() == 12
    rt.default_generator.manual_seed(13)
    assert rt.initial_seed() == 13


def test_cuda_seeding_sets_the_shared_generator():
    # The calls of training scripts (nanoGPT's sample.py seeds both; checkpoints keep the CUDA state);
    # they work without a GPU, as PyTorch's seeding does.
    rt.manual_seed(1337)
    want = rt.rand(4)
    rt.manual_seed(1337)
    rt.cuda.manual_seed(1337)
    assert rt.equal(rt.rand(4), want)
    for seed_fn in (rt.cuda.manual_seed, rt.cuda.manual_seed_all):
        assert seed_fn(21) is None
        assert rt.initial_seed() == 21 == rt.cuda.initial_seed()
    rt.cuda.seed_all()
    assert isinstance(rt.cuda.initial_seed(), int)
    state = rt.cuda.get_rng_state()
    first = rt.rand(5)
    rt.cuda.set_rng_state(state)
    assert rt.equal(rt.rand(5), first)
    states = rt.cuda.get_rng_state_all()
    assert len(states) == max(rt.cuda.device_count(), 1) and all(s == rt.get_rng_state() for s in states)
    second = rt.rand(5)
    rt.cuda.set_rng_state_all(states)
    assert rt.equal(rt.rand(5), second)


# ---- backends, inference_mode, compile, small functions ------------------------------------------------

def test_backends_switches():
    assert rt.backends.cuda.matmul.allow_tf32 is False and rt.backends.cudnn.allow_tf32 is False
    try:
        rt.backends.cuda.matmul.allow_tf32 = True
        assert rt.get_float32_matmul_precision() == "high" and rt.backends.cudnn.allow_tf32
        rt.backends.cudnn.allow_tf32 = False
        assert rt.get_float32_matmul_precision() == "highest"
        rt.backends.cudnn.deterministic = True
        assert rt.are_deterministic_algorithms_enabled() and rt.backends.cudnn.deterministic
    finally:
        rt.set_float32_matmul_precision("highest")
        rt.use_deterministic_algorithms(False)
    import rustytorch.backends.cudnn as cudnn
    cudnn.benchmark = True
    assert rt.backends.cudnn.benchmark is True and rt.backends.cudnn.enabled is True
    cudnn.benchmark = False
    assert rt.backends.mps.is_available() is False


def flushed_products(lib):
    """What lib computes from subnormal float32 inputs: a small tensor, one large enough to span every
    CPU thread, and a product of normal numbers whose result is subnormal."""
    tiny = np.array([1e-40, 1e-39, 1.0], dtype=np.float32)
    large = np.full(1 << 17, 1e-40, dtype=np.float32)
    return ((lib.from_numpy(tiny) * 0.5).numpy(), (lib.from_numpy(large) * 0.5).numpy(),
            (lib.tensor([1e-30], dtype=lib.float32) * 1e-10).numpy())


def test_set_flush_denormal():
    if not rt.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode")
    try:
        small, large, product = flushed_products(rt)
        np.testing.assert_array_equal(small, [0, 0, 0.5])
        assert not large.any() and product[0] == 0
    finally:
        assert rt.set_flush_denormal(False)
    small, large, product = flushed_products(rt)
    np.testing.assert_array_equal(small, np.array([1e-40, 1e-39, 1.0], dtype=np.float32) * np.float32(0.5))
    assert (large == np.float32(1e-40) * np.float32(0.5)).all() and product[0] != 0


def test_set_flush_denormal_like_torch():
    torch = pytest.importorskip("torch")
    results = {}
    for lib in (rt, torch):
        assert lib.set_flush_denormal(True)
        try:
            results[lib.__name__] = flushed_products(lib)
        finally:
            lib.set_flush_denormal(False)
    for ours, theirs in zip(results["rustytorch"], results["torch"]):
        np.testing.assert_array_equal(ours, theirs)
    assert rt.backends.cuda.is_built() == rt._C.built_with_cuda()
    assert rt.backends.cudnn.is_available() == (rt._C._built_with_cudnn and rt.cuda.is_available())


def test_inference_mode():
    assert not rt.is_inference_mode_enabled()
    x = rt.ones(2, requires_grad=True)
    with rt.inference_mode():
        assert rt.is_inference_mode_enabled() and not rt.is_grad_enabled()
        assert not (x * 2).requires_grad
        with rt.inference_mode(False):
            assert not rt.is_inference_mode_enabled() and rt.is_grad_enabled()
            assert (x * 2).requires_grad
        assert rt.is_inference_mode_enabled()
    assert not rt.is_inference_mode_enabled() and rt.is_grad_enabled()
    with rt.no_grad(), rt.inference_mode(mode=False):
        assert rt.is_grad_enabled()
    assert rt.is_grad_enabled()

    @rt.inference_mode
    def bare():
        return rt.is_inference_mode_enabled(), (x * 2).requires_grad

    @rt.inference_mode()
    def called():
        return rt.is_inference_mode_enabled()

    @rt.inference_mode(False)
    def disabled():
        return rt.is_inference_mode_enabled()

    assert bare() == (True, False) and called() is True
    with rt.inference_mode():
        assert disabled() is False
    with pytest.raises(KeyError):
        with rt.inference_mode():
            raise KeyError
    assert not rt.is_inference_mode_enabled() and rt.is_grad_enabled()


def test_compile_is_an_identity():
    model = rt.nn.Linear(2, 2)
    assert rt.compile(model) is model and rt.compile(model, mode="max-autotune", fullgraph=True) is model

    @rt.compile
    def f(x):
        return x + 1

    @rt.compile(mode="reduce-overhead", dynamic=False)
    def g(x):
        return x * 2

    assert f(rt.tensor(1.0)).item() == 2.0 and g(rt.tensor(1.0)).item() == 2.0 and g.__name__ == "g"


def test_compiler_settings_and_functions_scripts_use_around_compile():
    # As llm.c's train_gpt2.py and others write them: settings tested with hasattr, then set.
    import rustytorch._inductor.config as config
    assert not hasattr(config, "a_setting_never_set")
    if not hasattr(config, "coordinate_descent_tuning"):
        config.coordinate_descent_tuning = True
    config.triton.unique_kernel_names = True
    assert config.coordinate_descent_tuning is True and config.triton.unique_kernel_names is True
    rt._dynamo.config.cache_size_limit = 64
    assert rt._dynamo.config.cache_size_limit == 64
    rt._dynamo.reset()
    rt.compiler.reset()
    rt.compiler.cudagraph_mark_step_begin()
    assert rt.compiler.is_compiling() is False and rt._dynamo.is_compiling() is False

    @rt.compiler.disable
    def eager(x):
        return x + 1

    @rt._dynamo.disable(recursive=False)
    def also_eager(x):
        return x * 2

    x = rt.ones(3)
    rt._dynamo.mark_dynamic(x, 0)
    assert eager(x).tolist() == [2.0] * 3 and also_eager(x).tolist() == [2.0] * 3


def test_version_facts():
    assert rt.version.__version__ == rt.__version__ and rt.version.hip is None
    if rt._C.built_with_cuda():
        major, minor = rt.version.cuda.split(".")
        assert int(major) >= 11 and int(minor) >= 0
    else:
        assert rt.version.cuda is None
    if rt._C._built_with_cudnn:
        assert rt.backends.cudnn.version() >= 8000
    else:
        assert rt.backends.cudnn.version() is None


def test_cuda_memory_figures_read_zero_without_a_gpu():
    # The last line of many training scripts, run on the CPU.
    if rt.cuda.is_available():
        assert rt.cuda.memory_stats()["allocated_bytes.all.current"] == rt.cuda.memory_allocated() >= 0
        return
    assert rt.cuda.memory_stats() == {}
    assert rt.cuda.max_memory_allocated() == rt.cuda.memory_allocated() == 0
    assert rt.cuda.memory_reserved() == rt.cuda.max_memory_reserved() == 0


def test_small_functions():
    x = rt.zeros(2, 3)
    assert rt.is_tensor(x) and rt.is_tensor(rt.nn.Parameter(x)) and not rt.is_tensor([1])
    assert rt.numel(x) == 6 and rt.is_floating_point(x) and not rt.is_floating_point(rt.zeros(1, dtype=rt.int64))
    assert rt.long == rt.int64 and rt.float == rt.float32 and rt.double == rt.float64 and rt.half == rt.float16


# ---- default dtype ---------------------------------------------------------------------------------------

def test_default_dtype_changes_what_creation_and_promotion_give(default_float64, device):
    assert rt.get_default_dtype() == rt.float64
    for t in [rt.tensor([1.0]), rt.tensor(2.5), rt.zeros(2, device=device), rt.ones(2), rt.empty(2),
              rt.randn(2, device=device), rt.rand(2), rt.arange(0.5, 2.0), rt.full((2,), 1.5), rt.linspace(0, 1, 3),
              rt.eye(2), rt.tensor([1, 2], device=device) / 2, rt.tensor([1, 2]) * 2.5, rt.tensor(1).exp(),
              rt.where(rt.tensor([True]), 1.0, 0.0), rt.zeros(2, 3).new_zeros(2), rt.as_tensor([0.5])]:
        assert t.dtype == rt.float64
    assert rt.tensor([1, 2]).dtype == rt.int64 and rt.arange(3).dtype == rt.int64
    assert rt.tensor(np.float32(1.0)).dtype == rt.float32 and rt.zeros(2, dtype=rt.float32).dtype == rt.float32
    assert repr(rt.tensor([1.0])) == "tensor([1.])" and repr(rt.tensor([1.0], dtype=rt.float32)) == \
        "tensor([1.], dtype=rustytorch.float32)"
    assert repr(rt.zeros(0)) == "tensor([])" and repr(rt.zeros(0, dtype=rt.float32)) == \
        "tensor([], dtype=rustytorch.float32)"


def test_default_dtype_round_trip_and_errors():
    assert rt.get_default_dtype() == rt.float32
    try:
        for dtype in (rt.float16, rt.bfloat16, rt.float64):
            rt.set_default_dtype(dtype)
            assert rt.get_default_dtype() == dtype and rt.zeros(1).dtype == dtype and rt.tensor([1.5]).dtype == dtype
        with pytest.raises(TypeError, match=r"\[set_default_dtype\] only floating-point types can be the default "
                                            r"dtype, got int64"):
            rt.set_default_dtype(rt.int64)
        assert rt.get_default_dtype() == rt.float64
    finally:
        rt.set_default_dtype(rt.float32)
    assert rt.zeros(1).dtype == rt.float32 and rt.tensor([1.5]).dtype == rt.float32


# ---- finfo and iinfo -------------------------------------------------------------------------------------

def test_finfo_and_iinfo_values():
    f32 = rt.finfo(rt.float32)
    assert (f32.bits, f32.eps, f32.max, f32.min) == (32, 2.0 ** -23, float(np.finfo(np.float32).max),
                                                     -float(np.finfo(np.float32).max))
    assert f32.tiny == f32.smallest_normal == 2.0 ** -126 and f32.resolution == 1e-06 and f32.dtype == "float32"
    bf = rt.finfo(rt.bfloat16)
    assert (bf.bits, bf.eps, bf.max, bf.tiny, bf.resolution) == (16, 0.0078125, 3.3895313892515355e+38,
                                                                 1.1754943508222875e-38, 0.01)
    assert (rt.finfo(rt.float16).max, rt.finfo(rt.float16).resolution) == (65504.0, 0.001)
    assert rt.finfo(rt.float64).eps == np.finfo(np.float64).eps and rt.finfo().dtype == "float32"
    assert (rt.iinfo(rt.int64).max, rt.iinfo(rt.int64).min) == (2 ** 63 - 1, -2 ** 63)
    assert (rt.iinfo(rt.uint8).bits, rt.iinfo(rt.uint8).max, rt.iinfo(rt.int8).min) == (8, 255, -128)
    assert rt.iinfo(rt.int32).dtype == "int32" and rt.iinfo(rt.int32).max == 2 ** 31 - 1
    for bad, call in [(rt.int32, rt.finfo), (rt.float32, rt.iinfo), (rt.bool, rt.iinfo)]:
        with pytest.raises(TypeError):
            call(bad)


def test_finfo_iinfo_like_pytorch():
    torch = pytest.importorskip("torch")
    for name in ["float16", "bfloat16", "float32", "float64"]:
        ours, theirs = rt.finfo(getattr(rt, name)), torch.finfo(getattr(torch, name))
        for attr in ["bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"]:
            assert getattr(ours, attr) == getattr(theirs, attr), (name, attr)
        assert repr(ours) == repr(theirs)
    for name in ["uint8", "int8", "int16", "int32", "int64"]:
        ours, theirs = rt.iinfo(getattr(rt, name)), torch.iinfo(getattr(torch, name))
        assert (ours.bits, ours.max, ours.min, ours.dtype) == (theirs.bits, theirs.max, theirs.min, theirs.dtype)
        assert repr(ours) == repr(theirs)


def test_int16_tensors_against_numpy():
    a = np.array([[-32768, -2, 0], [7, 300, 32767]], dtype=np.int16)
    t = rt.from_numpy(a)
    assert t.dtype == rt.int16 == rt.short and t.numpy().dtype == np.int16
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal((t + 1).numpy(), a + np.int16(1))  # wraps as int16 does
    np.testing.assert_array_equal((t * 3).numpy(), a * np.int16(3))
    assert t.sum().item() == a.astype(np.int64).sum() and t.sum().dtype == rt.int64
    np.testing.assert_array_equal(t.float().numpy(), a.astype(np.float32))
    np.testing.assert_array_equal(rt.tensor([1.7, -2.9, 40000.0]).short().numpy(),
                                  np.array([1, -2, 40000 - 65536], dtype=np.int16))
    assert (rt.tensor([1, 2], dtype=rt.uint8) + rt.tensor([1, 2], dtype=rt.int8)).dtype == rt.int16
    assert rt.promote_types(rt.int16, rt.int32) == rt.int32 and rt.ones(2, dtype=rt.short).type() == "rustytorch.ShortTensor"
    assert rt.arange(5, dtype=rt.int16).tolist() == [0, 1, 2, 3, 4]


def test_view_as_another_dtype_reads_the_same_bytes():
    # llm.c's train_gpt2.py writes bfloat16 weights as `t.view(torch.int16).numpy().tobytes()`.
    w = rt.tensor([[1.5, -2.25, 3.0], [0.1, 1e4, -7.5]], dtype=rt.bfloat16)
    bits = w.view(rt.int16)
    assert bits.dtype == rt.int16 and bits.shape == (2, 3) and not bits.requires_grad
    f32 = w.float().numpy()
    np.testing.assert_array_equal(bits.numpy(), (f32.view(np.uint32) >> 16).astype(np.uint16).view(np.int16))
    x = rt.tensor([[1.0, -2.0, 0.5], [3.0, 4.0, 5.0]])
    np.testing.assert_array_equal(x.view(rt.int16).numpy(), x.numpy().view(np.int16))
    np.testing.assert_array_equal(x.view(rt.uint8).view(rt.float32).numpy(), x.numpy())
    np.testing.assert_array_equal(x[:, 1:].view(rt.int16).numpy(), x.numpy()[:, 1:].view(np.int16))
    assert x.view(rt.int32).data_ptr() == x.data_ptr()
    assert rt.equal(x.view(dtype=rt.int32), x.view(rt.int32)) and x.view(size=(3, 2)).shape == (3, 2)
    with pytest.raises(rt.ShapeError, match="last dimension must have stride 1"):
        x.t().view(rt.int16)
    with pytest.raises(TypeError):
        rt.zeros(rt.int32)  # a dtype is never a size


def test_view_dtype_like_pytorch():
    torch = pytest.importorskip("torch")
    cases = [
        lambda m: m.tensor([[1.5, -2.25, 3.0]], dtype=m.bfloat16).view(m.int16),
        lambda m: m.tensor([[1.0, 2.0], [3.0, -4.0]]).view(m.int16),
        lambda m: m.tensor([[1.0, 2.0, 3.0, 4.0]])[:, 2:].view(m.float16),
        lambda m: m.tensor([1, 2, 3, 4, 5, 6], dtype=m.int16).view(m.float32),
        lambda m: m.tensor([[1, 2], [3, 4]], dtype=m.int16).view(m.bfloat16),
        lambda m: m.tensor(1.0).view(m.int32),
        lambda m: m.arange(8, dtype=m.uint8).view(m.int64),
        lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]).view(m.float64),
    ]
    for case in cases:
        ours, theirs = case(rt), case(torch)
        assert repr(ours) == repr(theirs).replace("torch.", "rustytorch.")
        assert ours.stride() == theirs.stride() and ours.storage_offset() == theirs.storage_offset()


# ---- repr --------------------------------------------------------------------------------------------------

def test_repr_names():
    assert repr(rt.float64) == str(rt.float64) == "rustytorch.float64"
    assert str(rt.device("cuda", 0)) == "cuda:0" and repr(rt.device("cuda", 0)) == "device(type='cuda', index=0)"
    assert repr(rt.device("cpu")) == "device(type='cpu')"
    assert repr(rt.ones(2, dtype=rt.float64)) == "tensor([1., 1.], dtype=rustytorch.float64)"
    assert repr(rt.ones(2, dtype=rt.int32)) == "tensor([1, 1], dtype=rustytorch.int32)"
    assert repr(rt.ones(2, dtype=rt.int64)) == "tensor([1, 1])" and repr(rt.ones(1, dtype=rt.bool)) == "tensor([True])"
    a = rt.ones(2, requires_grad=True)
    assert repr(a) == "tensor([1., 1.], requires_grad=True)"
    assert repr(a * 2) == "tensor([2., 2.], grad_fn=<MulBackward0>)" and (a * 2).grad_fn.name() == "MulBackward0"
    assert repr(a.sum()) == "tensor(2., grad_fn=<SumBackward0>)"
    assert repr(a.log1p().double()).endswith("dtype=rustytorch.float64, grad_fn=<ToCopyBackward0>)")
    assert repr(rt.zeros(0, 3, dtype=rt.int64)) == "tensor([], size=(0, 3), dtype=rustytorch.int64)"


def test_repr_like_pytorch():
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((2, 3))
    cases = [
        lambda m: m.tensor(a, dtype=m.float64), lambda m: m.tensor([1, 2], dtype=m.int32),
        lambda m: m.tensor([1.5, 2.0], dtype=m.float16), lambda m: m.zeros(0, dtype=m.float64),
        lambda m: m.zeros(2, 0), lambda m: m.arange(12).reshape(3, 4), lambda m: m.tensor(3.25, dtype=m.float64),
        lambda m: m.ones(2, requires_grad=True) * 3, lambda m: m.ones(2, requires_grad=True).exp(),
        lambda m: (m.ones(2, 3, requires_grad=True) + 1).sum(), lambda m: m.ones(3, requires_grad=True)[0],
        lambda m: m.ones(2, 3, requires_grad=True).view(6),
        lambda m: m.ones(2, requires_grad=True).double(), lambda m: m.ones(2, requires_grad=True).log1p(),
        lambda m: m.ones(2, 3, requires_grad=True).softmax(-1),
        lambda m: m.ones(2, 3, requires_grad=True).mm(m.ones(3, 2)), lambda m: m.ones(2, requires_grad=True).relu(),
        lambda m: m.ones(2, 3, requires_grad=True).unsqueeze(0), lambda m: m.ones(2, 2, requires_grad=True)[:, 1:],
        lambda m: m.ones(2, requires_grad=True) ** 2, lambda m: m.ones(1000, requires_grad=True) * 2,
        lambda m: m.tensor([[1.5, float("nan")], [float("inf"), -2]]), lambda m: m.tensor([1e-5, 1e5]),
        lambda m: m.nn.functional.cross_entropy(m.ones(2, 3, requires_grad=True), m.tensor([0, 1])),
        lambda m: m.nn.functional.max_pool2d(m.ones(1, 1, 2, 2, requires_grad=True), 2),
        lambda m: m.nn.functional.layer_norm(m.ones(2, 3, requires_grad=True), (3,)),
        lambda m: m.ones(2, 3, requires_grad=True).index_select(0, m.tensor([1])),
        lambda m: m.rand(40, 40, dtype=m.float64) * 0,
    ]
    for case in cases:
        assert repr(case(rt)) == repr(case(torch)).replace("torch.", "rustytorch.")
    assert repr(rt.Size([2, 3])) == repr(torch.Size([2, 3])).replace("torch.", "rustytorch.")
    for dtype in ["float16", "bfloat16", "int8", "int16", "short", "uint8", "bool"]:
        assert repr(getattr(rt, dtype)) == repr(getattr(torch, dtype)).replace("torch.", "rustytorch.")


def test_cuda_functions_take_devices_as_pytorch_does():
    """set_device and the per-device functions take an int, "cuda:K" or a device, as nanoGPT's
    `torch.cuda.set_device(f"cuda:{local_rank}")` passes it; a CPU device is refused."""
    from rustytorch.cuda import _index
    assert [_index(3), _index("cuda:1"), _index(rt.device("cuda", 2)), _index(None)] == [3, 1, 2, -1]
    with pytest.raises(ValueError, match="Expected a cuda device"):
        rt.cuda.set_device("cpu")
    if rt.cuda.is_available():
        rt.cuda.set_device(f"cuda:{rt.cuda.current_device()}")
        rt.cuda.synchronize("cuda:0")
        rt.cuda.reset_peak_memory_stats(rt.device("cuda", 0))
    else:
        with pytest.raises(rt.DeviceError):
            rt.cuda.set_device("cuda:0")
