"""rustytorch.testing.assert_close and rustytorch.jit, as test files and model code call them:
assert_close passes and fails where PyTorch's does (tolerances by dtype, shapes, dtypes, nested
containers, NaNs) and names the mismatch; jit's decorators leave code running eagerly."""
import math

import pytest

import rustytorch as rt
from rustytorch.testing import assert_close


def test_assert_close_passes_and_fails_like_pytorch():
    x = rt.tensor([1.0, 2.0, 3.0])
    assert_close(x, x + 1e-6)  # within float32's defaults
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 3 \(33.3%\)"):
        assert_close(x, rt.tensor([1.0, 2.1, 3.0]))
    with pytest.raises(AssertionError, match="Greatest absolute difference: 0.0999"):
        assert_close(x, rt.tensor([1.0, 2.1, 3.0]))
    assert_close(x, rt.tensor([1.0, 2.1, 3.0]), rtol=0.0, atol=0.2)
    with pytest.raises(AssertionError, match="'dtype' do not match"):
        assert_close(x, x.double())
    assert_close(x, x.double(), check_dtype=False)
    with pytest.raises(AssertionError, match="'shape' do not match"):
        assert_close(x, x[:2])
    nan = rt.tensor([math.nan, 1.0])
    with pytest.raises(AssertionError):
        assert_close(nan, nan)
    assert_close(nan, nan, equal_nan=True)
    assert_close(rt.tensor([1, 2]), rt.tensor([1, 2]))
    with pytest.raises(AssertionError):
        assert_close(rt.tensor([1, 2]), rt.tensor([1, 3]))  # integers compare exactly
    h = rt.tensor([1.0], dtype=rt.bfloat16)
    assert_close(h, rt.tensor([1.0078], dtype=rt.bfloat16))
    with pytest.raises(ValueError, match="both"):
        assert_close(x, x, rtol=0.1)


def test_assert_close_on_containers_and_numbers():
    state = {"w": rt.ones(2, 2), "nested": [rt.zeros(3), {"b": rt.arange(3)}], "step": 3}
    copy = {"w": rt.ones(2, 2), "nested": [rt.zeros(3), {"b": rt.arange(3)}], "step": 3}
    assert_close(state, copy)
    copy["nested"][1]["b"] = rt.arange(1, 4)
    with pytest.raises(AssertionError, match=r"at \['nested'\]\[1\]\['b'\]"):
        assert_close(state, copy)
    assert_close(1.0, 1.0 + 1e-9)
    with pytest.raises(AssertionError):
        assert_close(1.0, 1.1)
    with pytest.raises(AssertionError, match="both inputs to be tensors"):
        assert_close(rt.ones(1), [1.0])
    with pytest.raises(AssertionError, match="custom"):
        assert_close(rt.ones(1), rt.zeros(1), msg="custom")


def test_like_pytorch():
    torch = pytest.importorskip("torch")
    cases = [([1.0, 2.0], [1.0, 2.00001]), ([1.0, 2.0], [1.0, 2.001]), ([0.0], [1e-6]), ([0.0], [2e-5])]
    for a, b in cases:
        def outcome(lib, testing):
            try:
                testing.assert_close(lib.tensor(a), lib.tensor(b))
                return True
            except AssertionError:
                return False
        assert outcome(rt, rt.testing) == outcome(torch, torch.testing), (a, b)


def test_jit_decorators_leave_code_eager():
    @rt.jit.script
    def gelu(x):
        return x * 0.5 * (1.0 + rt.erf(x / math.sqrt(2.0)))

    x = rt.randn(4)
    assert_close(gelu(x), rt.nn.functional.gelu(x))

    class Block(rt.nn.Module):
        def forward(self, x):
            return self.helper(x) if not rt.jit.is_scripting() else x

        @rt.jit.ignore
        def helper(self, x):
            return x * 2

        @rt.jit.unused
        def unused(self, x):
            return x

    block = rt.jit.script(Block())
    assert_close(block(x), x * 2)
    assert rt.jit.trace(block, (x,)) is block
    assert rt.jit.ignore(drop=True)(gelu) is gelu
    assert not rt.jit.is_tracing() and rt.jit.annotate(int, 3) == 3
    with pytest.raises(NotImplementedError, match="state_dict"):
        rt.jit.save(block, "model.pt")
