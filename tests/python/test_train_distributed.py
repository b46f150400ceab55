"""The bundled trainers data-parallel under the launcher (python -m rustytorch.distributed.run
--nproc-per-node 2 -m rustytorch.train ...), on the CPU with gloo: a 2-rank MLP run equals a 1-process
run with twice the batch size, rank 0 alone writes the run's files, checkpoints move between 1 and 2
processes, the GPT trainer learns, and a rank that dies or fails stops the whole job."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from dist_launch import needs_gloo, process_alive

from rustytorch import io
from rustytorch.train import checkpoint, vision

pytestmark = needs_gloo

needs_fashion_mnist = pytest.mark.skipif(
    not os.path.exists(os.path.join(vision.DATA_DIR, "t10k-labels-idx1-ubyte.gz")),
    reason=f"Fashion-MNIST is not installed in {vision.DATA_DIR} (apt-get install dataset-fashion-mnist)")

ENV = {**{k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                          "MASTER_PORT")}, "OMP_NUM_THREADS": "1"}
LAUNCH = [sys.executable, "-m", "rustytorch.distributed.run", "--nproc-per-node", "2", "-m", "rustytorch.train"]
SINGLE = [sys.executable, "-m", "rustytorch.train"]

# Dropout off, so that a rank's samples see the same network as in a 1-process run of both ranks' samples.
MLP = ["mlp", "--device", "cpu", "--max-steps", "10", "--log-every", "2", "--checkpoint-every", "4", "--dropout", "0",
       "--seed", "5"]
# Adam's float32 updates of the same batches summed in another order: the parameters (|p| ~ 0.05) agree
# within PARAM_ATOL (most differences seen are below 4e-6). Adam divides by the root of each
# gradient's running square, so where a gradient is a sum that nearly cancels (a pixel that is zero in
# almost every image) the step follows that sum's rounding: a few elements in 10^4 may differ by up
# to PARAM_ATOL_FEW, a tenth of the 10 steps' largest move (10 x lr 1e-3).
PARAM_ATOL = 1e-5
PARAM_ATOL_FEW = 1e-3
PARAM_FEW = 1e-4


def run(cmd, timeout=60):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)
    assert result.returncode == 0, f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


def rows(out, split="train"):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["split"] == split]


def checkpoint_steps(out):
    return sorted(int(n[len("checkpoint-"):-len(".safetensors")]) for n in os.listdir(out) if n.startswith("checkpoint-"))


def assert_same_parameters(out, reference):
    a, b = (io.load_file(checkpoint.latest(d)) for d in (out, reference))
    assert a.keys() == b.keys()
    for key in a:
        if key.startswith("model."):
            got, want = a[key].numpy(), b[key].numpy()
            np.testing.assert_allclose(got, want, rtol=0, atol=PARAM_ATOL_FEW, err_msg=key)
            off = np.abs(got - want) > PARAM_ATOL
            assert off.sum() <= PARAM_FEW * off.size, \
                f"{key}: {off.sum()} of {off.size} elements differ by more than {PARAM_ATOL}"


def assert_same_losses(out, reference):
    got, want = rows(out), rows(reference)
    assert [(r["step"], r["epoch"], r["lr"]) for r in got] == [(r["step"], r["epoch"], r["lr"]) for r in want]
    np.testing.assert_allclose([r["loss"] for r in got], [r["loss"] for r in want], rtol=1e-5)


def without_checkpoints_after(src, dst, step):
    """A copy of the run src as it was when it had saved step (its later checkpoints removed)."""
    shutil.copytree(src, dst)
    for s in checkpoint_steps(dst):
        if s > step:
            os.remove(os.path.join(dst, f"checkpoint-{s:08d}.safetensors"))
    return str(dst)


@pytest.fixture(scope="module")
def mlp_runs(tmp_path_factory):
    """(2 ranks x batch 16, 1 process x batch 32): output directories and the 2-rank run's stdout."""
    base = tmp_path_factory.mktemp("mlp")
    two, one = str(base / "two"), str(base / "one")
    stdout = run(LAUNCH + MLP + ["--batch-size", "16", "--out", two]).stdout
    run(SINGLE + MLP + ["--batch-size", "32", "--out", one])
    return two, one, stdout


@needs_fashion_mnist
def test_two_ranks_train_as_one_process_on_the_same_global_batches(mlp_runs):
    two, one, stdout = mlp_runs
    assert "[rank 0]: mlp: 2 processes, global batch 32 (16 per process)" in stdout
    assert "test accuracy" in stdout and "[rank 1]" not in stdout  # the other ranks are quiet
    # One set of files, written by rank 0: the config, metrics, plot and checkpoints 4, 8 and the last.
    assert sorted(n for n in os.listdir(two) if not n.startswith("checkpoint-")) == \
        ["config.json", "metrics.jsonl", "plot.png"]
    assert checkpoint_steps(two) == [4, 8, 10]
    assert [r["step"] for r in rows(two)] == [2, 4, 6, 8, 10]  # one row per log point, not one per rank
    assert_same_losses(two, one)
    (final,), (expected,) = rows(two, "eval"), rows(one, "eval")
    assert final["step"] == 10
    np.testing.assert_allclose(final["loss"], expected["loss"], rtol=1e-4)  # the whole test set's
    assert abs(final["accuracy"] - expected["accuracy"]) <= 2e-4  # at most two of the 10k images differ
    assert_same_parameters(two, one)


@needs_fashion_mnist
def test_one_rank_under_the_launcher_is_the_plain_run_bit_for_bit(mlp_runs, tmp_path):
    """Started by the launcher, even alone, the trainer runs in a process group with DDP (as nanoGPT's
    script decides); averaging over one rank changes no bit."""
    _, one, _ = mlp_runs
    out = str(tmp_path / "one_rank")
    stdout = run(LAUNCH[:4] + ["1"] + LAUNCH[5:] + MLP + ["--batch-size", "32", "--out", out]).stdout
    assert "mlp: 1 process, global batch 32 (32 per process)" in stdout
    a, b = (io.load_file(checkpoint.latest(d)) for d in (out, one))
    for key in a:
        if key.startswith("model."):
            np.testing.assert_array_equal(a[key].numpy(), b[key].numpy(), err_msg=key)


@needs_fashion_mnist
def test_a_two_rank_checkpoint_resumes_on_one_process(mlp_runs, tmp_path):
    two, one, _ = mlp_runs
    out = without_checkpoints_after(two, tmp_path / "resumed", 4)
    result = run(SINGLE + ["mlp", "--resume", "--batch-size", "32", "--out", out])
    assert "at step 4" in result.stdout
    assert checkpoint_steps(out) == [4, 8, 10]
    assert_same_losses(out, one)
    assert_same_parameters(out, one)


@needs_fashion_mnist
def test_a_one_process_checkpoint_resumes_on_two_ranks(mlp_runs, tmp_path):
    two, one, _ = mlp_runs
    out = without_checkpoints_after(one, tmp_path / "resumed", 8)
    result = run(LAUNCH + ["mlp", "--resume", "--batch-size", "16", "--out", out])
    assert "[rank 0]: resumed from" in result.stdout and "at step 8" in result.stdout
    assert checkpoint_steps(out) == [4, 8, 10]
    assert_same_losses(out, two)
    assert_same_parameters(out, two)


def test_gpt_trains_on_two_ranks(tmp_path):
    text = tmp_path / "psalm.txt"
    text.write_text("The LORD is my shepherd; I shall not want.\n"
                    "He maketh me to lie down in green pastures: he leadeth me beside the still waters.\n" * 40)
    out = str(tmp_path / "gpt")
    stdout = run(LAUNCH + ["gpt", "--preset", "cpu", "--device", "cpu", "--layers", "1", "--embd", "32", "--heads",
                           "2", "--context", "16", "--vocab", "300", "--batch-size", "2", "--eval-batches", "2",
                           "--sample-tokens", "8", "--text", str(text), "--max-steps", "12", "--log-every", "3",
                           "--out", out]).stdout
    assert "gpt: 2 processes, global batch 4 (2 per process)" in stdout and "validation loss" in stdout
    assert "[rank 1]" not in stdout
    assert checkpoint_steps(out) == [12]
    assert {"config.json", "metrics.jsonl", "model.json", "tokenizer.bpe"} <= set(os.listdir(out))
    losses = [r["loss"] for r in rows(out)]
    assert [r["step"] for r in rows(out)] == [3, 6, 9, 12]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert all(r["unit"] == "tok/s" for r in rows(out))


def children(pid):
    """The pids of pid's child processes."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def rank_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    return int(env[b"RANK"])


@needs_fashion_mnist
def test_a_killed_rank_stops_the_job(tmp_path):
    out = str(tmp_path / "run")
    launcher = subprocess.Popen(LAUNCH + ["mlp", "--device", "cpu", "--max-steps", "100000", "--batch-size", "8",
                                          "--log-every", "1", "--out", out],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    ranks = []
    try:
        deadline = time.monotonic() + 30
        while not (os.path.exists(os.path.join(out, "metrics.jsonl")) and rows(out)):  # the ranks train
            assert time.monotonic() < deadline and launcher.poll() is None, "the run did not start training"
            time.sleep(0.05)
        ranks = children(launcher.pid)
        assert len(ranks) == 2
        (victim,) = [p for p in ranks if rank_of(p) == 1]
        os.kill(victim, signal.SIGKILL)
        _, stderr = launcher.communicate(timeout=20)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    assert launcher.returncode == 1
    assert "rtx-run: rank 1 " in stderr and "was killed by SIGKILL" in stderr and "rtx-run: the job failed" in stderr
    left = [p for p in ranks if process_alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"processes left running: {left}"


def test_a_failing_start_on_every_rank_fails_the_job(tmp_path):
    result = subprocess.run(LAUNCH + ["mlp", "--device", "cpu", "--data-dir", str(tmp_path / "none"), "--out",
                                      str(tmp_path / "run")], capture_output=True, text=True, timeout=30, env=ENV)
    assert result.returncode == 1
    assert "exited with code 2" in result.stderr and str(tmp_path / "none") in result.stderr
    assert not os.path.exists(tmp_path / "run")


@needs_fashion_mnist
def test_ctrl_c_stops_every_rank_after_the_same_step_and_rank_0_saves(tmp_path):
    out = str(tmp_path / "run")
    launcher = subprocess.Popen(LAUNCH + ["mlp", "--device", "cpu", "--max-steps", "100000", "--batch-size", "8",
                                          "--log-every", "1", "--checkpoint-every", "100000", "--out", out],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    ranks = []
    try:
        deadline = time.monotonic() + 30
        while not (os.path.exists(os.path.join(out, "metrics.jsonl")) and len(rows(out)) >= 3):
            assert time.monotonic() < deadline and launcher.poll() is None, "the run did not start training"
            time.sleep(0.05)
        ranks = children(launcher.pid)
        launcher.send_signal(signal.SIGINT)  # the launcher forwards it to every rank
        stdout, stderr = launcher.communicate(timeout=20)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    assert launcher.returncode == -signal.SIGINT, stderr
    stopped = int(stdout.split("[rank 0]: interrupted at step ")[1].split(":")[0])
    assert checkpoint_steps(out) == [stopped] and stopped >= 3
    assert "Error" not in stderr  # no rank was left waiting in a collective for one that had stopped
    assert not [p for p in ranks if process_alive(p)]
