"""CUDA graphs as PyTorch scripts use them (import rustytorch as torch): a whole training step of an
MLP with dropout and a capturable Adam captured with torch.cuda.graph and replayed equals the eager
steps bit for bit, as does an fp16 step with a GradScaler and fused AdamW; make_graphed_callables
gives the eager outputs and gradients; host reads inside a capture raise GraphCaptureError; and
without a GPU the API is there and says why it cannot run."""
import copy

import pytest

import rustytorch as torch
import rustytorch.nn as nn
import rustytorch.nn.functional as F

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="CUDA is not available: " + torch._C._cuda.unavailable_reason())


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))


def mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10)).cuda()


def train_step(model, opt, x, y, scaler=None):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16, enabled=scaler is not None):
        loss = F.cross_entropy(model(x), y)
    if scaler is None:
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return loss


def batches(n):
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(32, 64, generator=g).cuda(), torch.randint(0, 10, (32,), generator=g).cuda())
            for _ in range(n)]


@needs_cuda
@pytest.mark.parametrize("kind", ["adam_capturable", "adamw_fused_grad_scaler"])
def test_a_captured_training_step_replays_the_eager_steps(kind):
    torch.manual_seed(0)
    graphed_model = mlp()
    eager_model = copy.deepcopy(graphed_model)

    def make(model):
        if kind == "adam_capturable":
            return torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True), None
        return torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True), torch.amp.GradScaler("cuda")

    opt, scaler = make(graphed_model)
    eager_opt, eager_scaler = make(eager_model)
    data = batches(6)
    static_x, static_y = data[0][0].clone(), data[0][1].clone()
    # Warm-up on a side stream (PyTorch's recipe), the same steps for both models.
    torch.manual_seed(1)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            train_step(graphed_model, opt, static_x, static_y, scaler)
    torch.cuda.current_stream().wait_stream(s)
    torch.manual_seed(1)
    for _ in range(3):
        train_step(eager_model, eager_opt, static_x, static_y, eager_scaler)

    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = train_step(graphed_model, opt, static_x, static_y, scaler)
    assert g.kernel_count > 20

    torch.manual_seed(2)
    graphed_losses = []
    for x, y in data:
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        graphed_losses.append(static_loss.clone())
    torch.manual_seed(2)
    eager_losses = [train_step(eager_model, eager_opt, x, y, eager_scaler).detach() for x, y in data]
    for i, (a, b) in enumerate(zip(graphed_losses, eager_losses)):
        assert same(a, b), f"step {i}: graphed loss {a.item()} != eager {b.item()}"
    assert not same(graphed_losses[1], graphed_losses[2])
    for (name, p), q in zip(graphed_model.named_parameters(), eager_model.parameters()):
        assert same(p, q), name
    if scaler is not None:
        assert scaler.get_scale() == eager_scaler.get_scale()


@needs_cuda
def test_graphed_step_trains_as_the_eager_steps():
    torch.manual_seed(0)
    graphed_model = mlp()
    eager_model = copy.deepcopy(graphed_model)
    opts = [torch.optim.Adam(m.parameters(), lr=torch.tensor(1e-3, device="cuda"), capturable=True)
            for m in (graphed_model, eager_model)]
    step = torch.cuda.graphed_step(lambda x, y: train_step(graphed_model, opts[0], x, y))
    data = batches(7)
    torch.manual_seed(4)
    graphed = []
    for i, (x, y) in enumerate(data):
        opts[0].param_groups[0]["lr"].fill_(1e-3 / (i + 1))
        graphed.append(step(x, y).clone())
    assert step.graph is not None and step.graph.kernel_count > 20
    torch.manual_seed(4)
    for i, ((x, y), loss) in enumerate(zip(data, graphed)):
        opts[1].param_groups[0]["lr"].fill_(1e-3 / (i + 1))
        assert same(loss, train_step(eager_model, opts[1], x, y).detach()), f"step {i}"
    for p, q in zip(graphed_model.parameters(), eager_model.parameters()):
        assert same(p, q)
    with pytest.raises(ValueError, match=r"an input of shape \[16, 64\]"):
        step(data[0][0][:16], data[0][1][:16])


@needs_cuda
def test_graphed_step_takes_nested_inputs_and_refuses_changed_constants():
    w = torch.randn(8, 8, device="cuda")
    step = torch.cuda.graphed_step(lambda batch, scale: {"y": (batch["x"] @ w) * scale}, warmup=1)
    xs = [torch.randn(4, 8, device="cuda") for _ in range(3)]
    for x in xs:  # warm-up, capture, replay
        out = step({"x": x}, 2.0)
        assert same(out["y"], (x @ w) * 2.0)
    with pytest.raises(ValueError, match="arguments other than tensors differ"):
        step({"x": xs[0]}, 3.0)


@needs_cuda
def test_make_graphed_callables_gives_the_eager_outputs_and_gradients():
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32)).cuda()
    eager = copy.deepcopy(block)
    sample = torch.randn(16, 32, device="cuda", requires_grad=True)
    graphed = torch.cuda.make_graphed_callables(block, (sample,))
    for step in range(3):
        x = torch.randn(16, 32, device="cuda", requires_grad=True)
        x_eager = x.detach().clone().requires_grad_(True)
        out = graphed(x)
        want = eager(x_eager)
        assert same(out, want), f"step {step}"
        out.square().sum().backward()
        want.square().sum().backward()
        assert same(x.grad, x_eager.grad)
        for p, q in zip(block.parameters(), eager.parameters()):
            assert same(p.grad, q.grad)
    block.eval()  # another training state: the module runs eagerly
    assert same(block(sample), eager.eval()(sample))


@needs_cuda
def test_host_reads_inside_a_capture_raise_and_leave_it_usable(capsys):
    x = torch.ones(8, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = x * 4
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * 4
        assert torch.cuda.is_current_stream_capturing()
        for read in (lambda: y.sum().item(), lambda: y.tolist(), lambda: y.cpu(), lambda: print(y),
                     torch.cuda.synchronize, lambda: torch.tensor([1.0, 2.0], device="cuda")):
            with pytest.raises(torch.GraphCaptureError, match="CUDA graph"):
                read()
        with pytest.raises(RuntimeError):  # PyTorch's scripts catch RuntimeError
            y.sum().item()
    g.replay()
    assert y.tolist() == [4.0] * 8


@needs_cuda
def test_an_error_inside_a_capture_abandons_it():
    x = torch.ones(1 << 20, device="cuda")
    g = torch.cuda.CUDAGraph()
    with pytest.raises(ZeroDivisionError):
        with torch.cuda.graph(g):
            y = x * 2
            1 / 0
    assert not torch.cuda.is_current_stream_capturing()
    with pytest.raises(torch.GraphCaptureError, match="nothing is captured"):
        g.replay()
    with torch.cuda.graph(g):
        y = x * 3
    g.replay()
    assert y[0].item() == 3.0
    g.reset()
    del y
    torch.cuda.empty_cache()
    assert torch.cuda.memory_stats()["private_pool_reserved_bytes.current"] == 0


@needs_cuda
def test_capture_on_the_default_stream_is_refused():
    g = torch.cuda.CUDAGraph()
    with pytest.raises(torch.GraphCaptureError, match="default stream"):
        g.capture_begin()
    with pytest.raises(ValueError, match="capture_error_mode"):
        with torch.cuda.graph(g, capture_error_mode="loose"):
            pass


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_without_cuda_the_graph_api_says_why():
    g = torch.cuda.CUDAGraph()
    with pytest.raises(torch.DeviceError, match="CUDA is not available"):
        torch.cuda.is_current_stream_capturing()
    assert torch.cuda.graph_pool_handle() != torch.cuda.graph_pool_handle()
    with pytest.raises(torch.DeviceError, match="CUDA is not available"):
        g.capture_begin()
    with pytest.raises(torch.DeviceError, match="CUDA is not available"):
        with torch.cuda.graph(g):
            pass
    with pytest.raises((torch.DeviceError, torch.GraphCaptureError)):  # a CUDA build: nothing is captured
        g.replay()
