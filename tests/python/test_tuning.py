"""Kernel auto-tuning on the GPU as a user meets it: the first process measures the products,
layer norms and convolutions (one with a bias, which the trials overwrite) of a small model step and writes the GPU model's tuning cache under RTX_TUNE_CACHE; the
next starts from that file (measures nothing, gives the same bits); RTX_TUNE=0 uses the built-in
choices and leaves the file alone; a damaged file is measured again. Each process is a fresh
interpreter, since the switch and the cache are read once per process."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rustytorch as rt

pytestmark = pytest.mark.skipif(not rt.cuda.is_available(), reason="CUDA is not available")

STEP = textwrap.dedent("""
    import sys
    import numpy as np
    import rustytorch as torch
    import rustytorch.nn.functional as F

    torch.use_deterministic_algorithms(True)  # cuDNN's convolution gradients are not, otherwise
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((2, 200, 768)).astype(np.float32)).cuda().requires_grad_()
    w1 = torch.tensor(rng.standard_normal((3072, 768)).astype(np.float32) * 0.02).cuda().requires_grad_()
    w2 = torch.tensor(rng.standard_normal((768, 3072)).astype(np.float32) * 0.02).cuda().requires_grad_()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        h = F.layer_norm(x, (768,))
        y = F.linear(F.gelu(F.linear(h, w1)), w2)
    y.float().square().mean().backward()
    img = torch.tensor(rng.standard_normal((8, 3, 32, 32)).astype(np.float32)).cuda().requires_grad_()
    k = torch.tensor(rng.standard_normal((16, 3, 3, 3)).astype(np.float32)).cuda().requires_grad_()
    kb = torch.tensor(rng.standard_normal(16).astype(np.float32)).cuda().requires_grad_()
    c = F.conv2d(img, k, kb, padding=1)
    c.square().sum().backward()
    np.savez(sys.argv[1], c=c.detach().cpu().numpy(), gimg=img.grad.cpu().numpy(), gk=k.grad.cpu().numpy(),
             h=h.float().detach().cpu().numpy(), y=y.float().detach().cpu().numpy(),
             gx=x.grad.cpu().numpy(), g1=w1.grad.cpu().numpy(), g2=w2.grad.cpu().numpy(),
             x=x.detach().cpu().numpy(), w1=w1.detach().cpu().numpy(), w2=w2.detach().cpu().numpy())
""")


def run_step(tmp_path, name, **env):
    script = tmp_path / "step.py"
    script.write_text(STEP)
    out = tmp_path / f"{name}.npz"
    full_env = {**os.environ, "RTX_LOG_LEVEL": "info", **env}
    proc = subprocess.run([sys.executable, str(script), str(out)], env=full_env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return dict(np.load(out)), proc.stderr


def cache_files(directory):
    return sorted(p for p in directory.iterdir() if p.name.startswith("tune-")) if directory.exists() else []


def test_first_process_tunes_and_the_next_reuses_its_choices(tmp_path):
    cache = tmp_path / "cache"
    first, log = run_step(tmp_path, "first", RTX_TUNE_CACHE=str(cache))
    assert "tuned cublaslt" in log and "tuned layer_norm_rows" in log and "tuned cudnn" in log, log
    files = cache_files(cache)
    assert len(files) == 1, files
    text = files[0].read_text()
    kernels = {line.split("\t")[0] for line in text.splitlines() if not line.startswith("#")}
    assert any(k.startswith("cublaslt") for k in kernels) and "layer_norm_rows" in kernels, text
    assert any(k.startswith("cudnn") and k.endswith("_conv2d") for k in kernels), text

    again, log = run_step(tmp_path, "again", RTX_TUNE_CACHE=str(cache))
    assert "tuned" not in log, log
    assert files[0].read_text() == text
    for key in first:
        np.testing.assert_array_equal(again[key], first[key], err_msg=key)

    # The built-in choices: the file stays as it is, the results agree within bf16's rounding.
    builtin, log = run_step(tmp_path, "builtin", RTX_TUNE_CACHE=str(cache), RTX_TUNE="0")
    assert "tuned" not in log, log
    assert files[0].read_text() == text
    for key in first:
        np.testing.assert_allclose(builtin[key], first[key], rtol=3e-2, atol=2e-3, err_msg=key)

    # The tuned forward against float64.
    x, w1, w2 = (first[k].astype(np.float64) for k in ("x", "w1", "w2"))
    h = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    u = h @ w1.T
    y = (0.5 * u * (1 + np.vectorize(__import__("math").erf)(u / np.sqrt(2)))) @ w2.T
    np.testing.assert_allclose(first["h"], h, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(first["y"], y, rtol=5e-2, atol=5e-2 * np.abs(y).max())


def test_a_damaged_cache_is_measured_again(tmp_path):
    cache = tmp_path / "cache"
    run_step(tmp_path, "first", RTX_TUNE_CACHE=str(cache))
    (path,) = cache_files(cache)
    path.write_bytes(b"\x00\xff garbage\tline\n" + path.read_bytes()[: len(path.read_bytes()) // 2])
    _, log = run_step(tmp_path, "second", RTX_TUNE_CACHE=str(cache))
    assert "malformed" in log or "tuned" in log, log
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    assert lines and all(len(ln.split("\t")) == 5 for ln in lines)


def test_an_unwritable_cache_directory_still_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result, log = run_step(tmp_path, "ro", RTX_TUNE_CACHE=str(blocker / "cache"))
    assert "not saved" in log, log
    assert np.isfinite(result["y"]).all()
