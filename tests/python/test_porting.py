"""PyTorch scripts run with `import rustytorch as torch`: the nanoGPT-style script of gpt_script.py
(tied weights, AdamW parameter groups, clipping, a schedule set through param_groups, gradient
accumulation) trained beside PyTorch from the same weights and batches, a checkpoint of model and
optimizer resumed bitwise, PyTorch-written checkpoints loaded, and smaller idioms of tutorials."""
import io
import math

import numpy as np
import pytest

import rustytorch
import gpt_script
from conftest import assert_close, to_numpy

CONFIG = gpt_script.GPTConfig()
BATCH = 4


def make_batches(lib, seed=0):
    """Deterministic (X, Y) batches for (iteration, micro-step), as int64 tensors of `lib`."""
    data = np.random.default_rng(seed).integers(0, CONFIG.vocab_size, size=4096).astype(np.int64)

    def batches(it, micro_step):
        rng = np.random.default_rng(1000 * it + micro_step)
        ix = rng.integers(0, len(data) - CONFIG.block_size - 1, size=BATCH)
        x = np.stack([data[i:i + CONFIG.block_size] for i in ix])
        y = np.stack([data[i + 1:i + 1 + CONFIG.block_size] for i in ix])
        return lib.from_numpy(x), lib.from_numpy(y)

    return batches


def make_model(device, config=CONFIG, seed=1337):
    torch = rustytorch
    torch.manual_seed(seed)
    model = gpt_script.build(torch)(config)
    model.to(device)  # after tying, as scripts do
    return model


def test_the_script_ties_weights_and_counts_parameters(device):
    model = make_model(device)
    assert model.transformer.wte.weight is model.lm_head.weight
    n = CONFIG.n_embd
    per_block = 2 * 2 * n + (n * 3 * n + 3 * n) + (n * n + n) + (n * 4 * n + 4 * n) + (4 * n * n + n)
    expected = CONFIG.vocab_size * n + CONFIG.block_size * n + CONFIG.n_layer * per_block + 2 * n
    assert sum(p.numel() for p in model.parameters()) == expected
    assert model.get_num_params() == expected - CONFIG.block_size * n
    opt = model.configure_optimizers(0.1, 6e-3, (0.9, 0.95), device)
    assert [len(g["params"]) for g in opt.param_groups] == [2 + 4 * CONFIG.n_layer, 2 + 8 * CONFIG.n_layer]


@pytest.mark.parametrize("flash", [True, False])
def test_the_script_learns(device, flash):
    config = gpt_script.GPTConfig(flash=flash)
    model = make_model(device, config)
    opt = model.configure_optimizers(0.1, 6e-3, (0.9, 0.95), device)
    losses = gpt_script.train(rustytorch, model, opt, make_batches(rustytorch), 0, 10, device)
    assert abs(losses[0] - math.log(CONFIG.vocab_size)) < 0.2  # starts at chance
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    out = model.generate(rustytorch.zeros((1, 1), dtype=rustytorch.long, device=device), 20, top_k=5)
    assert out.shape == (1, 21) and out.dtype == rustytorch.int64


def test_the_script_matches_pytorch():
    torch = pytest.importorskip("torch")
    ours = make_model("cpu")
    theirs = gpt_script.build(torch)(CONFIG)
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    assert theirs.transformer.wte.weight is theirs.lm_head.weight
    opt_ours = ours.configure_optimizers(0.1, 6e-3, (0.9, 0.95), "cpu")
    opt_theirs = theirs.configure_optimizers(0.1, 6e-3, (0.9, 0.95), "cpu")
    losses_ours = gpt_script.train(rustytorch, ours, opt_ours, make_batches(rustytorch), 0, 10, "cpu")
    losses_theirs = gpt_script.train(torch, theirs, opt_theirs, make_batches(torch), 0, 10, "cpu")
    np.testing.assert_allclose(losses_ours, losses_theirs, rtol=1e-5)
    for (name, p), (name_t, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == name_t
        np.testing.assert_allclose(to_numpy(p), q.detach().double().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def _checkpoint(model, optimizer, iter_num):
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": iter_num,
            "best_val_loss": 1e9, "config": gpt_script.config_dict(CONFIG)}


@pytest.mark.parametrize("target", ["path", "bytesio"])
def test_a_checkpoint_resumes_bitwise(tmp_path, target, device):
    torch = rustytorch
    batches = make_batches(torch)
    model = make_model(device)
    opt = model.configure_optimizers(0.1, 6e-3, (0.9, 0.95), device)
    gpt_script.train(torch, model, opt, batches, 0, 3, device)
    f = str(tmp_path / "ckpt.pt") if target == "path" else io.BytesIO()
    torch.save(_checkpoint(model, opt, 3), f)
    continued = gpt_script.train(torch, model, opt, batches, 3, 2, device)

    if target == "bytesio":
        f.seek(0)
    ckpt = torch.load(f, map_location=device)
    assert ckpt["iter_num"] == 3 and ckpt["config"] == gpt_script.config_dict(CONFIG)
    resumed_model = make_model(device, seed=7)  # other weights, replaced by the checkpoint's
    resumed_model.load_state_dict(ckpt["model"])
    assert resumed_model.transformer.wte.weight is resumed_model.lm_head.weight
    resumed_opt = resumed_model.configure_optimizers(0.1, 6e-3, (0.9, 0.95), device)
    resumed_opt.load_state_dict(ckpt["optimizer"])
    resumed = gpt_script.train(torch, resumed_model, resumed_opt, batches, ckpt["iter_num"], 2, device)
    assert resumed == continued
    for p, q in zip(model.parameters(), resumed_model.parameters()):
        np.testing.assert_array_equal(to_numpy(p), to_numpy(q))


def test_a_pytorch_checkpoint_loads_into_the_script(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = gpt_script.build(torch)(CONFIG)
    path = str(tmp_path / "torch_ckpt.pt")
    torch.save({"model": theirs.state_dict(), "iter_num": 5}, path)
    ckpt = rustytorch.load(path, map_location="cpu")
    ours = make_model("cpu", seed=3)
    ours.load_state_dict(ckpt["model"])
    x = np.random.default_rng(0).integers(0, CONFIG.vocab_size, size=(2, CONFIG.block_size))
    logits_ours, _ = ours(rustytorch.from_numpy(x), rustytorch.from_numpy(x))
    with torch.no_grad():
        logits_theirs, _ = theirs(torch.from_numpy(x), torch.from_numpy(x))
    np.testing.assert_allclose(to_numpy(logits_ours), logits_theirs.double().numpy(), rtol=1e-4, atol=1e-5)


def test_tutorial_idioms():
    torch = rustytorch
    nn = torch.nn
    # the quickstart's classifier, trained a few steps with the loss function object
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 32), nn.ReLU(), nn.Linear(32, 10))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-1)
    X = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    first = None
    for _ in range(5):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        first = first if first is not None else loss.item()
    assert loss.item() < first
    correct = (pred.argmax(1) == y).type(torch.float).sum().item()
    assert 0 <= correct <= 16
    with torch.no_grad():
        assert not model(X).requires_grad
    # numbers and numpy
    t = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert_close(t @ t.T, np.array([[5.0, 11.0], [11.0, 25.0]]))
    assert t.sum().item() == 10.0 and t.mean(dim=0).tolist() == [2.0, 3.0]
    assert t.shape == (2, 2) and t.size() == (2, 2) and t.size(0) == 2
