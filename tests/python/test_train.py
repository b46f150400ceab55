"""The bundled trainers (rtx-train): command line, short runs of each trainer, exact resume after
Ctrl-C, checkpoints that survive a kill during saving, and the Bible text cleanup."""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import io, nn, optim
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
    for word in ("--preset", "--generate", "--temperature", "--top-k", "--max-steps", "--device", "gpt2"):
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


def test_gpt_trains_samples_and_generates_from_the_saved_run(tmp_path):
    text = tmp_path / "psalm.txt"
    text.write_text("The LORD is my shepherd; I shall not want.\n"
                    "He maketh me to lie down in green pastures: he leadeth me beside the still waters.\n" * 40)
    out = str(tmp_path / "gpt")
    result = rtx_train("gpt", "--device", "cpu", "--text", str(text), "--max-steps", "12", "--layers", "1",
                       "--embd", "32", "--heads", "2", "--context", "16", "--vocab", "300", "--batch-size", "4",
                       "--log-every", "4", "--eval-every", "6", "--eval-batches", "2", "--sample-tokens", "8",
                       "--prompt", "The LORD", "--out", out)
    assert "validation loss" in result.stdout and "The LORD" in result.stdout
    rows = metrics(out)
    assert rows[-1]["loss"] < rows[0]["loss"]
    assert all(r["unit"] == "tok/s" for r in rows)
    assert [r["step"] for r in metrics(out, "eval")] == [6, 12]
    sampled = rtx_train("gpt", "--device", "cpu", "--generate", "He maketh", "--tokens", "10", "--out", out).stdout
    assert sampled.startswith("He maketh")
    again = rtx_train("gpt", "--device", "cpu", "--generate", "He maketh", "--tokens", "10", "--out", out).stdout
    assert sampled == again  # the sample's seed is --seed


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
