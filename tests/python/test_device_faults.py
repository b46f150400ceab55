"""Bad indices on every device, the way a PyTorch script meets them: the CPU raises rustytorch's
IndexError at the op; CUDA checks on the device without waiting for it and raises at the next
synchronization (.item(), .cpu(), .tolist(), cuda.synchronize()), after which the device is usable
again. Messages name the op, the bad value and the valid range."""
import math
import re

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn
from rustytorch.nn import functional as F


def first_error(device, op, sync):
    """Runs op (which meets a bad index), then sync on its result; returns the IndexError's message,
    raised by op on the CPU and by sync on CUDA, after checking that the device is then clear."""
    if device == "cpu":
        with pytest.raises(rt.IndexError) as info:
            op()
        return str(info.value)
    out = op()
    with pytest.raises(rt.IndexError) as info:
        sync(out)
    message = str(info.value)
    assert "reported at this synchronization" in message
    rt.cuda.synchronize()  # nothing left to report
    return message


# (name, the op on a library `lib` and a device, the synchronization a user meets next, the message)
CASES = [
    ("embedding", lambda lib, d: lib.nn.functional.embedding(lib.tensor([1, 7, 2], device=d), lib.ones(5, 2, device=d)),
     lambda out: out.sum().item(),
     r"\[embedding\] index 7 is out of range for 5 embeddings \(valid indices: 0\.\.4\)"),
    ("cross_entropy",
     lambda lib, d: lib.nn.functional.cross_entropy(lib.zeros(2, 3, device=d), lib.tensor([0, 3], device=d)),
     lambda out: out.item(),
     r"\[cross_entropy\] target 3 is out of bounds for 3 classes \(valid: 0\.\.2, or ignore_index -100\)"),
    ("nll_loss", lambda lib, d: lib.nn.functional.nll_loss(lib.zeros(2, 3, device=d), lib.tensor([-1, 0], device=d)),
     lambda out: rt.cuda.synchronize(),
     r"\[nll_loss\] target -1 is out of bounds for 3 classes"),
    ("gather", lambda lib, d: lib.ones(3, 5, device=d).gather(1, lib.tensor([[0, 7, 1]], device=d)),
     lambda out: out.tolist(),
     r"\[gather\] index 7 is out of bounds for dim 1 with size 5"),
    ("index_select", lambda lib, d: lib.ones(3, 4, device=d).index_select(1, lib.tensor([1, 4], device=d)),
     lambda out: out.cpu(),
     r"\[index_select\] index 4 is out of bounds for dim 1 with size 4"),
    ("scatter_add",
     lambda lib, d: lib.zeros(3, 4, device=d).scatter_add(0, lib.tensor([[3]], device=d), lib.ones(1, 1, device=d)),
     lambda out: rt.cuda.synchronize(),
     r"\[scatter_add\] index 3 is out of bounds for dim 0 with size 3"),
    ("index_add",
     lambda lib, d: lib.zeros(3, 4, device=d).index_add(1, lib.tensor([0, -5], device=d), lib.ones(3, 2, device=d)),
     lambda out: out.cpu().numpy(),
     r"\[index_add\] index -5 is out of bounds for dim 1 with size 4"),
    ("one_hot", lambda lib, d: lib.nn.functional.one_hot(lib.tensor([0, 3], device=d), num_classes=3),
     lambda out: out.sum().item(),
     r"\[one_hot\] class value 3 is out of range for num_classes = 3"),
]


@pytest.mark.parametrize("name, op, sync, message", CASES, ids=[c[0] for c in CASES])
def test_bad_index_raises_at_the_op_or_the_next_synchronization(device, name, op, sync, message):
    assert re.search(message, first_error(device, lambda: op(rt, device), sync))


@pytest.mark.parametrize("name, op, sync, message", CASES, ids=[c[0] for c in CASES])
def test_the_error_is_caught_by_what_catches_pytorchs(name, op, sync, message):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as theirs:
        op(torch, "cpu")
    with pytest.raises(type(theirs.value)):
        op(rt, "cpu")


def test_a_training_step_with_a_bad_token_reports_at_the_loss_and_the_next_step_trains(device):
    rt.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 10)).to(device)
    opt = rt.optim.SGD(model.parameters(), lr=0.1)
    bad = rt.tensor([[1, 2, 10, 3]], device=device)
    tokens = rt.tensor([[1, 2, 9, 3]], device=device)
    targets = rt.tensor([[2, 9, 3, 4]], device=device)
    before = [p.detach().cpu().numpy().copy() for p in model.parameters()]

    def step(x):
        opt.zero_grad()
        loss = F.cross_entropy(model(x).view(-1, 10), targets.view(-1))
        loss.backward()
        opt.step()
        return loss

    message = first_error(device, lambda: step(bad), lambda loss: loss.item())
    assert "[embedding] index 10 is out of range for 10 embeddings" in message
    loss = step(tokens).item()
    assert math.isfinite(loss)
    after = [p.detach().cpu().numpy() for p in model.parameters()]
    assert all(np.isfinite(a).all() for a in after)
    assert any(not np.array_equal(a, b) for a, b in zip(after, before))


def test_skipped_elements_are_zero_and_good_ones_read(device):
    if device == "cpu":
        pytest.skip("the CPU raises at the op and returns nothing")
    w = rt.arange(10.0, device=device).view(5, 2)
    out = F.embedding(rt.tensor([4, 5, 0], device=device), w)
    with pytest.raises(rt.IndexError, match=r"\[embedding\] index 5"):
        rt.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), [[8, 9], [0, 0], [0, 1]])
    picked = rt.arange(6.0, device=device).view(2, 3).gather(1, rt.tensor([[2, 3], [-1, 0]], device=device))
    with pytest.raises(rt.IndexError, match=r"\[gather\] index 3 is out of bounds for dim 1 with size 3"):
        picked.tolist()
    np.testing.assert_array_equal(picked.cpu().numpy(), [[2, 0], [0, 3]])
