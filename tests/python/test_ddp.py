"""DistributedDataParallel on the gloo backend, as training scripts use it: 2 processes train a small
model on their halves of each global batch (AdamW, clip_grad_norm_ on a generator, tiny buckets so
that there are many), and must end bitwise equal to each other and equal (to float32 rounding) to one
process training on the whole batch; the same for gradient_as_bucket_view, gradient accumulation under
no_sync, unused parameters with and without find_unused_parameters, buffers and state_dict; and against
torch's DDP where torch is importable.

Ranks run this file as a script (python test_ddp.py SCENARIO OUT MODULE) through dist_launch."""
import importlib.util

import numpy as np
import pytest
from dist_launch import needs_gloo, rank_main, run_scenario

RUN_TIMEOUT = 90
WORLD = 2


# ----------------------------------------------------------------------------------------------------
# The ranks' side, with rustytorch or torch as `torch`.
# ----------------------------------------------------------------------------------------------------
def _model(torch, seed, unused_heads=False):
    """A small model whose parameters come from numpy's generator seeded by seed (the same in both
    libraries)."""
    nn = torch.nn
    model = (_two_heads(torch) if unused_heads else
             nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 16), nn.Tanh(),
                           nn.Linear(16, 3)))
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.tensor(rng.uniform(-0.5, 0.5, tuple(p.shape)).astype(np.float32)))
    return model


def _two_heads(torch):
    nn = torch.nn

    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(6, 8)
            self.a = nn.Linear(8, 3)
            self.b = nn.Linear(8, 3)
            self.never = nn.Linear(8, 3)  # used by no rank

        def forward(self, x, use_b):
            h = torch.tanh(self.body(x))
            return self.a(h) + self.b(h) if use_b else self.a(h)

    return TwoHeads()


def _batches(torch, steps, rows):
    rng = np.random.default_rng(7)
    return [(torch.tensor(rng.standard_normal((rows, 6)).astype(np.float32)),
             torch.tensor(rng.standard_normal((rows, 3)).astype(np.float32))) for _ in range(steps)]


def _flat(module):
    return [p.detach().reshape(-1).tolist() for p in module.parameters()]


def _train(torch, model, batches, rank, world, ddp_kwargs, micro=1):
    """Trains model (wrapped in DDP when ddp_kwargs is not None) on this rank's rows of each batch;
    returns the parameters after each step."""
    net = torch.nn.parallel.DistributedDataParallel(model, **ddp_kwargs) if ddp_kwargs is not None else model
    opt = torch.optim.AdamW(net.parameters(), lr=0.05, weight_decay=0.1)
    history = []
    for x, y in batches:
        opt.zero_grad()
        rows = x.shape[0] // (world if ddp_kwargs is not None else 1)
        start = rank * rows if ddp_kwargs is not None else 0
        xs, ys = x[start:start + rows], y[start:start + rows]
        chunk = rows // micro
        for m in range(micro):
            ctx = net.no_sync() if ddp_kwargs is not None and m < micro - 1 else _null()
            with ctx:
                out = net(xs[m * chunk:(m + 1) * chunk])
                loss = torch.nn.functional.mse_loss(out, ys[m * chunk:(m + 1) * chunk]) / micro
                loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        history.append(_flat(model))
    return history


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def scenario_train(torch, dist, out):
    rank, world = dist.get_rank(), dist.get_world_size()
    batches = _batches(torch, 3, 8)
    # Rank 1 starts from other weights: DDP must copy rank 0's.
    ref = _train(torch, _model(torch, 0), batches, 0, 1, None)
    out["reference"] = ref[-1]
    ref_micro = _train(torch, _model(torch, 0), batches, 0, 1, None, micro=2)
    out["reference_micro"] = ref_micro[-1]
    out["ddp"] = _train(torch, _model(torch, rank), batches, rank, world, {"bucket_cap_mb": 0.0005})[-1]
    if hasattr(torch.nn.parallel.DistributedDataParallel, "_bucket_indices"):
        ddp = torch.nn.parallel.DistributedDataParallel(_model(torch, rank), bucket_cap_mb=0.0005)
        out["buckets"] = ddp._bucket_indices()
    out["ddp_view"] = _train(torch, _model(torch, rank), batches, rank, world,
                             {"bucket_cap_mb": 0.0005, "gradient_as_bucket_view": True})[-1]
    out["ddp_no_sync"] = _train(torch, _model(torch, rank), batches, rank, world, {}, micro=2)[-1]

    # Buffers and state_dict: rank 0's buffers at construction, keys under "module.".
    torch.manual_seed(rank)  # rank 1 starts from other weights
    bn = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.BatchNorm1d(4))
    bn[1].running_mean.add_(float(rank + 1))
    ddp = torch.nn.parallel.DistributedDataParallel(bn)
    out["running_mean"] = bn[1].running_mean.tolist()
    out["weight"] = bn[0].weight.detach().reshape(-1).tolist()
    out["keys"] = sorted(ddp.state_dict().keys())
    ddp(batches[0][0]).sum().backward()
    out["bn_grad"] = bn[0].weight.grad.reshape(-1).tolist()


def scenario_unused(torch, dist, out):
    rank = dist.get_rank()
    x = _batches(torch, 1, 4)[0][0]
    model = _model(torch, 0, unused_heads=True)
    ddp = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    ddp(x, use_b=rank == 1).sum().backward()
    out["a"] = model.a.weight.grad.reshape(-1).tolist()
    out["b"] = model.b.weight.grad.reshape(-1).tolist()
    out["never_is_none"] = model.never.weight.grad is None
    # The local gradients, for the reference: (rank 0's + rank 1's) / 2.
    local = _model(torch, 0, unused_heads=True)
    local(x, use_b=rank == 1).sum().backward()
    out["local_a"] = local.a.weight.grad.reshape(-1).tolist()
    out["local_b"] = (local.b.weight.grad.reshape(-1).tolist() if local.b.weight.grad is not None
                      else [0.0] * local.b.weight.numel())

    strict = torch.nn.parallel.DistributedDataParallel(_model(torch, 0, unused_heads=True))
    try:
        strict(x, use_b=True).sum().backward()
        out["strict_error"] = None
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        out["strict_error"] = f"{type(e).__name__}: {e}"


def scenario_nanogpt(torch, dist, out):
    """nanoGPT's train.py under DDP: the model wrapped as `DDP(model)`, the optimizer from
    `model.module.configure_optimizers`, gradient accumulation by setting
    `model.require_backward_grad_sync` on the last micro-step only, clipping over model.parameters()."""
    import gpt_script
    rank = dist.get_rank()
    config = gpt_script.GPTConfig(block_size=8, vocab_size=32, n_layer=2, n_head=2, n_embd=16)
    model = gpt_script.build(torch)(config)
    rng = np.random.default_rng(0)
    with torch.no_grad():  # the same start in both libraries (DDP then copies rank 0's to every rank)
        for p in model.parameters():
            p.copy_(torch.tensor(rng.normal(0, 0.05, tuple(p.shape)).astype(np.float32)))
    model = torch.nn.parallel.DistributedDataParallel(model)
    raw_model = model.module
    optimizer = raw_model.configure_optimizers(0.1, 6e-3, (0.9, 0.95), "cpu")
    data = np.random.default_rng(1 + rank).integers(0, config.vocab_size, (6, 2, 4, config.block_size + 1))
    losses = []
    for it in range(6):
        for micro_step in range(2):
            model.require_backward_grad_sync = micro_step == 1
            xy = data[it, micro_step]
            _, loss = model(torch.tensor(xy[:, :-1].copy()), torch.tensor(xy[:, 1:].copy()))
            (loss / 2).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    out["losses"] = losses
    out["params"] = [p.detach().reshape(-1).tolist() for p in raw_model.parameters()]


def scenario_mismatch(torch, dist, out):
    rank = dist.get_rank()
    model = torch.nn.Linear(4, 3 + rank)
    try:
        torch.nn.parallel.DistributedDataParallel(model)
        out["error"] = None
    except Exception as e:  # noqa: BLE001
        out["error"] = f"{type(e).__name__}: {e}"


def _run(scenario, tmp_path, module="rustytorch"):
    return run_scenario(__file__, scenario, WORLD, tmp_path, module, timeout=RUN_TIMEOUT)


def _close(a, b, atol=2e-5):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=1e-5)


@needs_gloo
def test_ddp_training_equals_one_process_on_the_whole_batch(tmp_path):
    r0, r1 = _run("train", tmp_path)
    assert len(r0["buckets"]) > 3  # tiny buckets: many all-reduces in flight
    for key in ("ddp", "ddp_view", "ddp_no_sync"):
        assert r0[key] == r1[key], f"{key}: the ranks' parameters differ"
    _close(r0["ddp"], r0["reference"])
    _close(r0["ddp_view"], r0["reference"])
    _close(r0["ddp_no_sync"], r0["reference_micro"])
    # Construction copied rank 0's parameters and buffers to rank 1.
    assert r0["running_mean"] == r1["running_mean"] == [1.0] * 4
    assert r0["weight"] == r1["weight"]
    assert r0["bn_grad"] == r1["bn_grad"]
    assert r0["keys"] == ["module.0.bias", "module.0.weight", "module.1.bias", "module.1.num_batches_tracked",
                          "module.1.running_mean", "module.1.running_var", "module.1.weight"]


@needs_gloo
def test_unused_parameters(tmp_path):
    r0, r1 = _run("unused", tmp_path)
    for r in (r0, r1):
        _close([r["a"]], [(np.asarray(r0["local_a"]) + np.asarray(r1["local_a"])) / 2])
        _close([r["b"]], [(np.asarray(r0["local_b"]) + np.asarray(r1["local_b"])) / 2])
        assert r["never_is_none"]
    assert "find_unused_parameters=True" in r0["strict_error"]
    assert "never.weight (6), never.bias (7)" in r0["strict_error"]


@needs_gloo
def test_nanogpt_ddp_training_loop(tmp_path):
    ours = _run("nanogpt", tmp_path)
    assert ours[0]["params"] == ours[1]["params"]  # the replicas stay bitwise equal
    assert ours[0]["losses"] != ours[1]["losses"]  # each rank trained on its own batches
    if importlib.util.find_spec("torch") is not None:
        theirs = _run("nanogpt", tmp_path, module="torch")
        for rank in range(WORLD):
            np.testing.assert_allclose(ours[rank]["losses"], theirs[rank]["losses"], rtol=2e-4)
        _close(ours[0]["params"], theirs[0]["params"], atol=2e-4)


@needs_gloo
def test_replicas_of_different_models_are_refused(tmp_path):
    for r in _run("mismatch", tmp_path):
        assert r["error"].startswith("ValueError") and "same model" in r["error"]


@needs_gloo
def test_same_results_as_torch_ddp(tmp_path):
    pytest.importorskip("torch")
    ours, theirs = _run("train", tmp_path), _run("train", tmp_path, module="torch")
    for key in ("ddp", "ddp_view", "ddp_no_sync"):
        _close(ours[0][key], theirs[0][key], atol=1e-4)
    assert ours[0]["keys"] == theirs[0]["keys"]


def test_bad_arguments_are_refused_before_any_communication():
    import rustytorch as rt
    from rustytorch.nn.parallel import DistributedDataParallel as DDP
    with pytest.raises(rt.ValueError, match="doesn't have any parameter"):
        DDP(rt.nn.ReLU())
    with pytest.raises(rt.ValueError, match="device_ids"):
        DDP(rt.nn.Linear(2, 2), device_ids=[0])
    with pytest.raises(rt.ValueError, match="not been initialized"):
        DDP(rt.nn.Linear(2, 2))


def test_post_accumulate_grad_hooks_run_after_accumulation():
    import rustytorch as rt
    w = rt.nn.Parameter(rt.ones(3))
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
    # PyTorch's optimizer-in-backward idiom: the hook gets the parameter itself, a dict key.
    m = rt.nn.Linear(3, 2)
    opts = {p: rt.optim.SGD([p], lr=0.1) for p in m.parameters()}

    def step_now(p):
        opts[p].step()
        opts[p].zero_grad()

    for p in m.parameters():
        p.register_post_accumulate_grad_hook(step_now)
    before = m.weight.detach().clone()
    m(rt.ones(1, 3)).sum().backward()
    assert rt.allclose(m.weight.detach(), before - 0.1) and m.weight.grad is None
    w2 = rt.nn.Parameter(rt.ones(2))
    w2.register_post_accumulate_grad_hook(lambda p: 1)
    with pytest.raises(TypeError, match="must return None"):
        (w2 * 2).sum().backward()
    (w * 2).sum().backward()
    (w * 3).sum().backward()
    assert seen == [[2.0] * 3, [5.0] * 3]
    handle.remove()
    (w * 1).sum().backward()
    assert len(seen) == 2
    with pytest.raises(rt.Error, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)


if __name__ == "__main__":
    rank_main(globals())
