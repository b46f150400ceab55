"""Kernel auto-tuning on the GPU as a user meets it: the first process measures the products,
layer norms and convolutions (one with a bias, which the trials overwrite) of a small model step and writes the GPU model's tuning cache under RTX_TUNE_CACHE; the
next starts from that file (measures nothing, gives the same bits); RTX_TUNE=0 uses the built-in
choices and leaves the file alone; a damaged file is measured again. Every tiling of the attention
forward and backward, forced through the cache file, gives float64's attention and its gradients. Each process is a fresh
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


ATTENTION = textwrap.dedent("""
    import sys
    import numpy as np
    import rustytorch as torch
    import rustytorch.nn.functional as F

    rng = np.random.default_rng(1)
    out = {}
    # (batch, heads, L, S, head size, causal): both padded head sizes, ragged tiles, masks
    shapes = [(2, 3, 200, 200, 64, True), (1, 2, 130, 70, 128, False), (1, 2, 300, 300, 128, True),
              (2, 2, 77, 77, 40, False)]
    for i, (b, h, L, S, d, causal) in enumerate(shapes):
        arrays = [rng.standard_normal(shape).astype(np.float32) for shape in ((b, h, L, d), (b, h, S, d), (b, h, S, d))]
        q, k, v = (torch.tensor(a).cuda().bfloat16().requires_grad_() for a in arrays)
        g = torch.tensor(rng.standard_normal((b, h, L, d)).astype(np.float32)).cuda().bfloat16()
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        y.backward(g)
        for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("y", y)):
            out[f"{name}{i}"] = t.float().detach().cpu().numpy()
        for name, t in (("q", q), ("k", k), ("v", v)):
            out[f"d{name}{i}"] = t.grad.float().cpu().numpy()
        out[f"causal{i}"] = np.array(causal)
    np.savez(sys.argv[1], **out)
""")


def attention_reference(q, k, v, g, causal):
    """float64 attention and its gradients (dq, dk, dv) at scale 1/sqrt(d)."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    scale = 1 / np.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return p @ v, ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, np.swapaxes(p, -1, -2) @ g


def run_script(tmp_path, source, name, **env):
    script = tmp_path / "script.py"
    script.write_text(source)
    out = tmp_path / f"{name}.npz"
    full_env = {**os.environ, "RTX_LOG_LEVEL": "info", **env}
    proc = subprocess.run([sys.executable, str(script), str(out)], env=full_env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return dict(np.load(out)), proc.stderr


def run_step(tmp_path, name, **env):
    return run_script(tmp_path, STEP, name, **env)


def test_every_attention_tiling_gives_the_reference(tmp_path):
    tuned_cache = tmp_path / "tuned"
    _, log = run_script(tmp_path, ATTENTION, "tuned", RTX_TUNE_CACHE=str(tuned_cache))
    assert "tuned attention_forward" in log and "tuned attention_dkdv" in log, log
    (tuned_file,) = cache_files(tuned_cache)
    lines = tuned_file.read_text().splitlines()
    for kernel in ("attention_forward", "attention_dkdv"):
        assert sum(ln.startswith(kernel + "\t") for ln in lines) == 4, lines

    def forced_line(line, choice):
        fields = line.split("\t")
        if fields[0] == "attention_forward":
            fields[2] = str(choice)  # three tilings
        elif fields[0] == "attention_dkdv":
            fields[2] = str(choice % 2)  # two row counts of the streamed query tiles
        return "\t".join(fields)

    results = []
    for choice in range(3):
        # The tuned file with every attention shape class set to these choices.
        forced = tmp_path / f"forced{choice}"
        forced.mkdir()
        (forced / tuned_file.name).write_text("\n".join(forced_line(ln, choice) for ln in lines) + "\n")
        result, log = run_script(tmp_path, ATTENTION, f"forced{choice}", RTX_TUNE_CACHE=str(forced))
        assert "tuned attention" not in log, log
        results.append(result)
        for i in range(4):
            want = attention_reference(*(result[f"{n}{i}"] for n in "qkvg"), bool(result[f"causal{i}"]))
            for name, ref in zip(("y", "dq", "dk", "dv"), want):
                got = result[f"{name}{i}"]
                err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
                assert err < 1.5e-2, (choice, i, name, err)
    # Forward tilings that stream the same keys per tile (the first two) give the same bits, and so do
    # the dk/dv kernel's row counts.
    for key in results[0]:
        np.testing.assert_array_equal(results[0][key], results[1][key], err_msg=key)


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
