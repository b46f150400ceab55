"""The Llama-style script of llama_script.py run with `import rustytorch as torch`: it learns, and
trained beside PyTorch from the same weights and batches it gives the same losses."""
import numpy as np
import pytest

import rustytorch
import llama_script

CONFIG = llama_script.LlamaConfig()


def batches_of(lib, device="cpu"):
    data = np.random.default_rng(0).integers(0, CONFIG.vocab_size, size=2048).astype(np.int64)
    data[1::2] = (data[::2] * 7 + 3) % CONFIG.vocab_size  # every other token follows from the one before

    def batches(step):
        ix = np.random.default_rng(step).integers(0, len(data) - CONFIG.block_size - 1, size=8)
        x = np.stack([data[i:i + CONFIG.block_size] for i in ix])
        y = np.stack([data[i + 1:i + 1 + CONFIG.block_size] for i in ix])
        return lib.from_numpy(x).to(device), lib.from_numpy(y).to(device)

    return batches


def test_learns(device):
    torch = rustytorch
    torch.manual_seed(0)
    model = llama_script.build(torch)(CONFIG).to(device)
    losses = llama_script.train(torch, model, batches_of(torch, device), 60)
    assert losses[0] > 3.5 and np.mean(losses[-5:]) < 0.8 * losses[0], losses[::10]


def test_same_losses_as_pytorch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = llama_script.build(torch)(CONFIG)
    ours = llama_script.build(rustytorch)(CONFIG)
    ours.load_state_dict({k: rustytorch.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    their_losses = llama_script.train(torch, theirs, batches_of(torch), 8)
    our_losses = llama_script.train(rustytorch, ours, batches_of(rustytorch), 8)
    np.testing.assert_allclose(our_losses, their_losses, rtol=2e-4)
