"""The bundled trainers (rtx-train): command line, short runs of each trainer, exact resume after
Ctrl-C, mixed precision (bf16 autocast, fp16 with a GradScaler, exact resume with the scaler),
checkpoints that survive a kill during saving, and the Bible text cleanup."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import amp, io, nn, optim
from rustytorch.train import checkpoint, gpt, vision

HAVE_FASHION_MNIST = os.path.exists(os.path.join(vision.DATA_DIR, "t10k-labels-idx1-ubyte.gz"))
needs_fashion_mnist = pytest.mark.skipif(not HAVE_FASHION_MNIST, reason=(
    f"Fashion-MNIST is not installed in {vision.DATA_DIR} (apt-get install dataset-fashion-mnist)"))


# One CPU thread: the runs' speed does not matter here and the suite's other tests run beside them.
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def rtx_train(*args, check=True):
    """Runs `python -m rustytorch.train args`; returns the CompletedProcess."""
    cmd = [sys.executable, "-m", "rustytorch.train", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def metrics(out, split="train"):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["split"] == split]


def test_help_describes_the_trainers_and_their_flags():
    text = rtx_train("--help").stdout
    for word in ("mlp", "cnn", "gpt", "--resume", "checkpoint"):
        assert word in text
    text = rtx_train("gpt", "--help").stdout
    for word in ("--preset", "--generate", "--temperature", "--top-k", "--max-steps", "--device", "gpt2", "--dtype"):
        assert word in text


def test_missing_dataset_names_the_path_and_the_package(tmp_path):
    result = rtx_train("mlp", "--device", "cpu", "--data-dir", str(tmp_path / "none"), "--out", str(tmp_path / "run"),
                       check=False)
    assert result.returncode == 2
    assert str(tmp_path / "none") in result.stderr
    assert "apt-get install dataset-fashion-mnist" in result.stderr


def test_generate_without_a_run_says_how_to_make_one(tmp_path):
    result = rtx_train("gpt", "--device", "cpu", "--generate", "In the beginning", "--out", str(tmp_path), check=False)
    assert result.returncode == 2 and "rtx-train gpt --out" in result.stderr


@needs_fashion_mnist
@pytest.mark.parametrize("trainer,steps", [("mlp", 40), ("cnn", 4)])
def test_vision_trainer_learns_and_reports(tmp_path, trainer, steps):
    out = str(tmp_path / trainer)
    result = rtx_train(trainer, "--device", "cpu", "--max-steps", str(steps), "--batch-size", "64", "--log-every", "2",
                       "--out", out)
    assert "test accuracy" in result.stdout and "Ankle boot" in result.stdout and out in result.stdout
    rows = metrics(out)
    assert [r["step"] for r in rows] == list(range(2, steps + 1, 2))
    assert all(r["unit"] == "img/s" and r["throughput"] > 0 for r in rows)
    (final,) = metrics(out, "eval")
    assert final["step"] == steps
    if trainer == "mlp":
        assert final["accuracy"] > 0.6, final  # ten classes: chance is 0.1
    for name in ("config.json", "plot.png", f"checkpoint-{steps:08d}.safetensors"):
        assert os.path.getsize(os.path.join(out, name)) > 0
    with open(os.path.join(out, "config.json")) as f:
        assert json.load(f)["max_steps"] == steps


@needs_fashion_mnist
def test_resume_after_ctrl_c_continues_bit_for_bit(tmp_path):
    args = ["mlp", "--device", "cpu", "--max-steps", "600", "--batch-size", "32", "--log-every", "3",
            "--checkpoint-every", "100000", "--seed", "3"]
    whole, parts = str(tmp_path / "whole"), str(tmp_path / "parts")
    rtx_train(*args, "--out", whole)

    proc = subprocess.Popen([sys.executable, "-m", "rustytorch.train", *args, "--out", parts],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.time() + 120
    while time.time() < deadline:
        if os.path.exists(os.path.join(parts, "metrics.jsonl")) and len(metrics(parts)) >= 7:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    assert "continue with --resume" in stdout
    stopped = int(stdout.split("interrupted at step ")[1].split(":")[0])
    assert 21 <= stopped < 600

    # The flags left out on --resume come from the run's config.json. Rows report the mean loss since
    # the previous row, so the row after the restored step also needs the losses before it.
    result = rtx_train("mlp", "--resume", "--out", parts)
    assert f"resumed from {parts}" in result.stdout
    fields = ("step", "epoch", "loss", "lr")
    assert [[r[k] for k in fields] for r in metrics(parts)] == [[r[k] for k in fields] for r in metrics(whole)]
    assert metrics(parts, "eval") == metrics(whole, "eval")
    a, b = (io.load_file(checkpoint.latest(d)) for d in (whole, parts))
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key].numpy(), b[key].numpy()), key


def test_checkpoint_round_trip_restores_model_optimizer_and_rng(tmp_path):
    rt.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = optim.AdamW(model.parameters(), lr=0.01)
    model(rt.randn(3, 4)).sum().backward()
    opt.step()
    path = checkpoint.save(str(tmp_path), 7, model, opt, {"step": 7})
    expected_next = rt.rand(5)

    rt.manual_seed(1)
    model2 = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt2 = optim.AdamW(model2.parameters(), lr=0.5)
    assert checkpoint.load(path, model2, opt2) == {"step": 7}
    assert np.array_equal(rt.rand(5).numpy(), expected_next.numpy())
    for (k, v), (k2, v2) in zip(model.state_dict().items(), model2.state_dict().items()):
        assert k == k2 and np.array_equal(v.numpy(), v2.numpy())
    assert opt2.param_groups[0]["lr"] == 0.01
    s, s2 = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert s.keys() == s2.keys()
    for i in s:
        assert s[i]["step"] == s2[i]["step"]
        assert np.array_equal(s[i]["exp_avg_sq"].numpy(), s2[i]["exp_avg_sq"].numpy())


_SAVE_FOREVER = textwrap.dedent("""
    import sys
    import rustytorch as rt
    from rustytorch import nn, optim
    from rustytorch.train import checkpoint
    model = nn.Linear(1024, 2048)
    opt = optim.SGD(model.parameters(), lr=0.1)
    step = 0
    while True:
        step += 1
        with rt.no_grad():
            model.weight.fill_(step)
        checkpoint.save(sys.argv[1], step, model, opt, {"step": step}, keep=2)
        print(step, flush=True)
""")


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.13])
def test_a_run_killed_while_saving_leaves_the_previous_checkpoint_loadable(tmp_path, delay):
    proc = subprocess.Popen([sys.executable, "-c", _SAVE_FOREVER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            env=ENV)
    for _ in range(3):
        assert proc.stdout.readline(), "the saving process died"
    time.sleep(delay)
    proc.kill()
    proc.wait()
    path = checkpoint.latest(str(tmp_path))
    step = int(os.path.basename(path)[len("checkpoint-"):-len(".safetensors")])
    model = nn.Linear(1024, 2048)
    opt = optim.SGD(model.parameters(), lr=0.1)
    assert checkpoint.load(path, model, opt) == {"step": step}
    assert float(model.weight.min()) == float(model.weight.max()) == step
    assert len([n for n in os.listdir(tmp_path) if n.startswith("checkpoint-")]) <= 3


def psalm(tmp_path):
    text = tmp_path / "psalm.txt"
    text.write_text("The LORD is my shepherd; I shall not want.\n"
                    "He maketh me to lie down in green pastures: he leadeth me beside the still waters.\n" * 40)
    return str(text)


TINY_GPT = ["--device", "cpu", "--layers", "1", "--embd", "32", "--heads", "2", "--context", "16", "--vocab", "300",
            "--batch-size", "4", "--eval-batches", "2", "--sample-tokens", "8", "--prompt", "The LORD"]


def tiny_gpt_run(tmp_path, out, *flags):
    """A 12-step run of the tiny GPT into tmp_path/out; returns (out, stdout)."""
    out = str(tmp_path / out)
    result = rtx_train("gpt", *TINY_GPT, *flags, "--text", psalm(tmp_path), "--max-steps", "12", "--log-every", "3",
                       "--eval-every", "6", "--out", out)
    return out, result.stdout


@pytest.fixture(scope="module")
def fp32_run(tmp_path_factory):
    return tiny_gpt_run(tmp_path_factory.mktemp("fp32"), "gpt")


def test_gpt_trains_samples_and_generates_from_the_saved_run(fp32_run):
    out, stdout = fp32_run
    assert "validation loss" in stdout and "The LORD" in stdout
    assert "on cpu in fp32" in stdout  # the CPU's default
    rows = metrics(out)
    assert rows[-1]["loss"] < rows[0]["loss"]
    assert all(r["unit"] == "tok/s" and r["dtype"] == "fp32" for r in rows)
    assert [r["step"] for r in metrics(out, "eval")] == [6, 12]
    sampled = rtx_train("gpt", "--device", "cpu", "--generate", "He maketh", "--tokens", "10", "--out", out).stdout
    assert sampled.startswith("He maketh")
    again = rtx_train("gpt", "--device", "cpu", "--generate", "He maketh", "--tokens", "10", "--out", out).stdout
    assert sampled == again  # the sample's seed is --seed


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_gpt_trains_under_cpu_autocast(tmp_path, fp32_run, dtype):
    out, stdout = tiny_gpt_run(tmp_path, dtype, "--dtype", dtype)
    assert f"on cpu in {dtype}" in stdout
    # The loss curve (train rows every 3 steps, evaluations at 6 and 12) follows the fp32 run's
    # within the rounding of the low dtype, and is not the fp32 curve itself.
    rows, reference = metrics(out) + metrics(out, "eval"), metrics(fp32_run[0]) + metrics(fp32_run[0], "eval")
    assert [r["step"] for r in rows] == [r["step"] for r in reference] == [3, 6, 9, 12, 6, 12]
    assert all(r["dtype"] == dtype for r in rows)
    losses, expected = np.array([r["loss"] for r in rows]), np.array([r["loss"] for r in reference])
    np.testing.assert_allclose(losses, expected, rtol=2e-3)
    assert not np.array_equal(losses, expected)
    assert losses[3] < losses[0]
    with open(os.path.join(out, "config.json")) as f:
        assert json.load(f)["dtype"] == dtype
    # The parameters stay float32; fp16 runs save their GradScaler's state.
    path = checkpoint.latest(out)
    assert all(v.dtype == rt.float32 for k, v in io.load_file(path).items() if k.startswith("model."))
    scaler = json.loads(io.load_metadata(path)["scaler"])
    assert (scaler["scale"] == 2.0 ** 16) if dtype == "fp16" else (scaler == {})


def test_fp16_resume_restores_the_scaler_and_continues_exactly(tmp_path):
    args = ["gpt", *TINY_GPT, "--dtype", "fp16", "--text", psalm(tmp_path), "--max-steps", "12", "--log-every", "2",
            "--checkpoint-every", "6", "--eval-every", "6"]
    whole, parts = str(tmp_path / "whole"), str(tmp_path / "parts")
    rtx_train(*args, "--out", whole)
    # The run as it was when its step-6 checkpoint was the newest: resumed from there.
    shutil.copytree(whole, parts)
    os.remove(os.path.join(parts, "checkpoint-00000012.safetensors"))
    result = rtx_train("gpt", "--resume", "--device", "cpu", "--out", parts)  # the device is the process's choice
    assert f"resumed from {parts}" in result.stdout and "in fp16" in result.stdout
    fields = ("step", "epoch", "loss", "lr", "dtype")
    assert [[r[k] for k in fields] for r in metrics(parts)] == [[r[k] for k in fields] for r in metrics(whole)]
    assert metrics(parts, "eval") == metrics(whole, "eval")
    a, b = (checkpoint.latest(d) for d in (whole, parts))
    # Scale and growth tracker (12 clean steps) as in the uninterrupted run.
    assert io.load_metadata(a)["scaler"] == io.load_metadata(b)["scaler"]
    a, b = io.load_file(a), io.load_file(b)
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key].numpy(), b[key].numpy()), key

    result = rtx_train("gpt", "--resume", "--dtype", "bf16", "--out", parts, check=False)
    assert result.returncode == 2
    assert f"the run in {parts} trains in fp16" in result.stderr and "bf16" in result.stderr


def test_checkpoint_round_trip_restores_the_grad_scaler(tmp_path):
    rt.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
    for _ in range(3):  # grows to 8 after two finite steps, then counts one step towards the next growth
        with rt.autocast("cpu", dtype=rt.float16):
            loss = model(rt.randn(3, 4)).float().sum()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 8.0
    path = checkpoint.save(str(tmp_path), 3, model, opt, {"step": 3}, scaler=scaler)

    restored, model2 = amp.GradScaler("cpu"), nn.Linear(4, 2)
    checkpoint.load(path, model2, optim.SGD(model2.parameters(), lr=0.1), restored)
    assert restored.state_dict() == scaler.state_dict()
    assert restored.state_dict()["_growth_tracker"] == 1


def test_checkpoint_round_trip_continues_fused_adamw_exactly(tmp_path, device):
    # The gpt trainer's optimizer on the GPU: fused AdamW, whose step counts are device tensors.
    def build():
        rt.manual_seed(0)
        model = nn.Linear(8, 4).to(device)
        return model, optim.AdamW(model.parameters(), lr=0.01, fused=True)

    def step(model, opt, seed):
        rt.manual_seed(seed)
        opt.zero_grad()
        model(rt.randn(5, 8, device=device)).square().sum().backward()
        opt.step()

    model, opt = build()
    for seed in (1, 2):
        step(model, opt, seed)
    path = checkpoint.save(str(tmp_path), 2, model, opt, {"step": 2})
    step(model, opt, 3)
    resumed, resumed_opt = build()
    checkpoint.load(path, resumed, resumed_opt)
    step(resumed, resumed_opt, 3)
    for a, b in zip(model.parameters(), resumed.parameters()):
        assert np.array_equal(a.detach().cpu().numpy(), b.detach().cpu().numpy())
    assert resumed_opt.param_groups[0]["fused"] is True


def test_gpt_shapes_follow_gpt2():
    config = gpt.GPTConfig(layers=2, heads=2, embd=16, context=8, vocab=300)
    model = gpt.GPT(config)
    names = [n for n, _ in model.named_parameters()]
    assert names[:2] == ["transformer.wte.weight", "transformer.wpe.weight"]
    assert "transformer.h.1.attn.c_attn.weight" in names and "lm_head.weight" not in names  # tied
    logits = model(rt.zeros(3, 8, dtype=rt.int64))
    assert tuple(logits.shape) == (3, 8, 300)
    assert sum(p.numel() for p in model.parameters()) == _parameters(config)
    assert _parameters(gpt.PRESETS["gpt2"]) == 124_475_904  # GPT-2 small with its padded vocabulary


def _parameters(c):
    block = 2 * 2 * c.embd + (3 * c.embd * c.embd + 3 * c.embd) + (c.embd * c.embd + c.embd) \
        + (4 * c.embd * c.embd + 4 * c.embd) + (4 * c.embd * c.embd + c.embd)
    return c.vocab * c.embd + c.context * c.embd + c.layers * block + 2 * c.embd


def test_bible_output_is_cleaned_to_verses():
    raw = ("\nGenesis 1\n\n  1 In the beginning God created the heaven and the earth.\n"
           "  2 And the earth was without form, and void; and darkness was upon the face of\n"
           "the deep.\n\nGenesis 2\n\n  1 Thus the heavens and the earth were finished.\n")
    assert gpt.clean_bible(raw) == ("In the beginning God created the heaven and the earth.\n"
                                    "And the earth was without form, and void; and darkness was upon the face of "
                                    "the deep.\n\nThus the heavens and the earth were finished.\n")


@pytest.mark.skipif(shutil.which("bible") is None, reason="the King James Bible is not installed (apt-get install bible-kjv)")
def test_the_king_james_bible_is_read_whole():
    text = gpt.kjv_text()
    assert text.startswith("In the beginning God created the heaven and the earth.\n")
    assert text.rstrip().endswith("The grace of our Lord Jesus Christ be with you all. Amen.")
    assert not any(line[:1].isdigit() and line.split(" ")[0].isdigit() for line in text.splitlines())
    assert 4_000_000 < len(text) < 4_400_000


def test_a_damaged_checkpoint_raises_checkpoint_error_naming_the_file_and_field(tmp_path):
    """Missing fields, corrupt JSON and unusable hyperparameters are refused on load, before they
    reach the optimizer (where they would fail later, inside step())."""
    rt.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    model(rt.randn(4, 3)).sum().backward()
    opt.step()
    good = checkpoint.save(str(tmp_path), 1, model, opt, {"step": 1, "time": 0.5, "window_losses": [1.0]})
    tensors, metadata = io.load_file(good), io.load_metadata(good)

    def damaged(name, change):
        meta = dict(metadata)
        change(meta)
        path = str(tmp_path / f"{name}.safetensors")
        io.save_file(tensors, path, metadata=meta)
        return path

    def set_group(meta, key, value):
        optim_json = json.loads(meta["optim"])
        optim_json["param_groups"][0][key] = value
        meta["optim"] = json.dumps(optim_json)

    cases = {
        "optim": damaged("no_optim", lambda m: m.pop("optim")),
        "rng": damaged("bad_json", lambda m: m.update(rng="[1, 2")),
        "progress.step": damaged("bad_step", lambda m: m.update(progress=json.dumps({"step": -3}))),
        "optim.param_groups[0].lr": damaged("bad_lr", lambda m: set_group(m, "lr", "fast")),
        "optim.param_groups[0].betas": damaged("bad_betas", lambda m: set_group(m, "betas", [0.9])),
    }
    for field, path in cases.items():
        fresh = nn.Linear(3, 2)
        with pytest.raises(rt.CheckpointError, match=re.escape(f"field '{field}'")) as info:
            checkpoint.load(path, fresh, optim.AdamW(fresh.parameters()))
        assert path in str(info.value)
    fresh = nn.Linear(3, 2)
    assert checkpoint.load(good, fresh, optim.AdamW(fresh.parameters()))["step"] == 1


def test_cuda_graph_on_the_cpu_says_what_it_needs(tmp_path):
    result = rtx_train("gpt", *TINY_GPT, "--cuda-graph", "--text", psalm(tmp_path), "--max-steps", "2",
                       "--out", str(tmp_path / "run"), check=False)
    assert result.returncode == 2
    assert "--cuda-graph captures the step on a GPU: it needs --device cuda, got cpu" in result.stderr


@pytest.mark.skipif(not rt.cuda.is_available(), reason="CUDA is not available")
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_a_cuda_graph_run_trains_as_the_eager_run(tmp_path, dtype):
    """Three eager warm-up steps, then replays of the captured step: the same losses as the eager run
    (fused AdamW, clipping and, in fp16, the GradScaler all inside the graph), a checkpoint that the
    eager trainer resumes."""
    on_gpu = [a if a != "cpu" else "cuda" for a in TINY_GPT] + ["--dtype", dtype, "--dropout", "0.1"]
    runs = {}
    for name, flags in (("eager", []), ("graph", ["--cuda-graph"])):
        out = str(tmp_path / name)
        stdout = rtx_train("gpt", *on_gpu, *flags, "--text", psalm(tmp_path), "--max-steps", "12", "--log-every",
                           "1", "--out", out).stdout
        runs[name] = out
    hit = re.search(r"cuda graph: (\d+) kernels replayed per step, ([\d.]+) launched outside it: ([\d.]+)%", stdout)
    assert hit and int(hit[1]) > 50 and float(hit[3]) >= 80.0, stdout  # a 1-layer model: few kernels per step
    losses = {name: np.array([r["loss"] for r in metrics(out)]) for name, out in runs.items()}
    np.testing.assert_allclose(losses["graph"], losses["eager"], rtol=1e-6)
    assert losses["graph"][-1] < losses["graph"][0]
    rtx_train("gpt", *on_gpu, "--text", psalm(tmp_path), "--max-steps", "14", "--log-every", "1", "--resume",
              "--out", runs["graph"])
    assert [r["step"] for r in metrics(runs["graph"])][-2:] == [13, 14]
