"""Hostile and damaged files, file paths and file objects: safetensors (load_file, load_metadata,
rustytorch.load), IDX (read_idx) and BPE tokenizer files, interrupted saves and the checksum. Every
bad input must raise a typed rustytorch error (or TypeError for wrong argument types) naming the
problem; cases where a regression could crash the interpreter run in a subprocess."""
import gzip
import io as pyio
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import io
from conftest import to_numpy

CHECKSUM = "rustytorch.crc32"


def run_python(code, *args, timeout=60):
    """(exit status, stdout, stderr) of code run by a fresh interpreter that imports this rustytorch."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)
    return done.returncode, done.stdout, done.stderr


def raw_safetensors(path, header, data=b""):
    encoded = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + data)
    return str(path)


def f32(begin, end, shape=None):
    return {"dtype": "F32", "shape": shape or [(end - begin) // 4], "data_offsets": [begin, end]}


# ---- memory mapping and the files behind it -----------------------------------------------------

def test_truncated_after_loading_without_mmap_keeps_the_tensors(tmp_path):
    path = tmp_path / "w.safetensors"
    io.save_file({"w": rt.arange(1 << 16, dtype=rt.float32)}, str(path))
    rt.save({"w": rt.arange(1 << 16, dtype=rt.float32)}, tmp_path / "ckpt.pt")
    rc, out, err = run_python("""
        import sys, rustytorch as rt
        from rustytorch import io
        a = io.load_file(sys.argv[1], mmap=False)["w"]
        b = rt.load(sys.argv[2])["w"]  # reads into memory by default, as torch.load does
        for p in sys.argv[1:]:
            open(p, "r+b").truncate(8)  # another program rewrites the files in place
        print(float(a.sum()), float(b.sum()))
    """, path, tmp_path / "ckpt.pt")
    expected = float(sum(range(1 << 16)))
    assert rc == 0, err
    assert out.split() == [str(expected)] * 2


def test_mapped_tensors_survive_a_save_over_their_file(tmp_path):
    path = tmp_path / "w.safetensors"
    io.save_file({"w": rt.full((1 << 16,), 2.0)}, str(path))
    rc, out, err = run_python("""
        import sys, rustytorch as rt
        from rustytorch import io
        a = io.load_file(sys.argv[1])["w"]            # memory-mapped (the default)
        b = rt.load(sys.argv[1], mmap=True)["w"]
        io.save_file({"w": rt.zeros(3)}, sys.argv[1])  # saves rename a new file over the old one
        print(float(a.sum()), float(b.sum()), io.load_file(sys.argv[1])["w"].tolist())
    """, path)
    assert rc == 0, err
    assert out.split() == ["131072.0", "131072.0", "[0.0,", "0.0,", "0.0]"]


def test_mmap_needs_a_path(tmp_path):
    with open(tmp_path / "x", "wb"):
        pass
    with pytest.raises(rt.ValueError, match="mmap=True"):
        rt.load(open(tmp_path / "x", "rb"), mmap=True)


# ---- arguments: uninitialised objects, paths, file descriptors, devices --------------------------

def test_uninitialised_tokenizer_raises_type_error():
    rc, out, err = run_python("""
        import rustytorch as rt
        tok = rt.text.BPETokenizer.__new__(rt.text.BPETokenizer)
        calls = [lambda: tok.encode("abc"), lambda: tok.decode([1]), lambda: tok.decode_bytes([1]),
                 lambda: tok.token_bytes(1), lambda: tok.vocab_size, lambda: tok.merges, lambda: tok.to_str(),
                 lambda: tok.save("never.bpe"), lambda: repr(tok), lambda: tok.__getstate__()]
        for call in calls:
            try:
                call()
                print("returned")
            except TypeError as e:
                print("TypeError" if "without __init__" in str(e) else e)
        tok.__setstate__((rt.text.BPETokenizer().to_str(),))  # what copy and pickle do next
        print(tok.vocab_size)
    """)
    assert rc == 0, err
    assert out.split() == ["TypeError"] * 10 + ["256"]


def test_paths_with_a_nul_byte_are_refused(tmp_path):
    good = tmp_path / "f"
    io.save_file({"a": rt.ones(1)}, str(good))
    bad = str(good) + "\0.ignored"
    calls = {
        "read_idx": lambda: io.read_idx(bad),
        "BpeTokenizer.load": lambda: rt.text.BPETokenizer.load(bad),
        "BpeTokenizer.save": lambda: rt.text.BPETokenizer().save(bad),
        "load_file": lambda: io.load_file(bad),
        "load_metadata": lambda: io.load_metadata(bad),
        "save_file": lambda: io.save_file({"a": rt.ones(1)}, bad),
        "rustytorch.save": lambda: rt.save({"a": 1}, bad),
        "rustytorch.load": lambda: rt.load(bad),
        "write_atomically": lambda: io.write_atomically(bad, lambda f: f.write(b"x")),
    }
    for op, call in calls.items():
        with pytest.raises(rt.ValueError, match="NUL byte") as info:
            call()
        assert op in str(info.value) and str(good) in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_file_descriptors_are_not_paths(tmp_path):
    path = tmp_path / "f.safetensors"
    io.save_file({"a": rt.ones(1)}, str(path))
    with open(path, "rb") as f:
        fd = f.fileno()
        for call in (lambda: io.load_file(fd), lambda: io.load_metadata(fd), lambda: io.read_idx(fd),
                     lambda: rt.text.BPETokenizer.load(fd), lambda: rt.load(fd), lambda: io.save_file({}, fd)):
            with pytest.raises(TypeError):
                call()
        os.fstat(fd)  # still open
    # pathlib paths are paths
    assert io.load_file(path)["a"].tolist() == [1.0]


def test_device_and_shape_errors_name_the_file_and_field(tmp_path):
    path = tmp_path / "a.safetensors"
    io.save_file({"a": rt.ones(2)}, str(path))
    with pytest.raises(rt.ValueError, match=r"a\.safetensors: device='banana' is not a device"):
        io.load_file(str(path), device="banana")
    with pytest.raises(TypeError, match="device must be"):
        io.load_file(str(path), device=2.5)
    huge = raw_safetensors(tmp_path / "huge.safetensors", {"a": {"dtype": "F32", "shape": [0, 2 ** 64],
                                                                "data_offsets": [0, 0]}})
    with pytest.raises(rt.CheckpointError, match=r"huge\.safetensors: tensor 'a': shape \[0, 18446744073709551616\]"):
        io.load_file(huge)
    wide = raw_safetensors(tmp_path / "wide.safetensors", {"a": {"dtype": "F32", "shape": [2 ** 40, 2 ** 40, 0],
                                                                "data_offsets": [0, 0]}})
    with pytest.raises(rt.CheckpointError, match=r"wide\.safetensors: tensor 'a': cannot make a tensor"):
        io.load_file(wide)


# ---- the safetensors header ----------------------------------------------------------------------

HEADERS = {
    "duplicate_tensor": (b'{"a":{"dtype":"Q","shape":[1],"data_offsets":[0,4]},'
                         b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4, "key 'a' twice"),
    "duplicate_field": (b'{"a":{"dtype":"F32","shape":[1],"shape":[1],"data_offsets":[0,4]}}', b"\0" * 4,
                        "key 'shape' twice"),
    "duplicate_metadata": (b'{"__metadata__":{"k":"1","k":"2"}}', b"", "key 'k' twice"),
    "metadata_number": ({"__metadata__": {"step": 3}}, b"", "the value of 'step' is not a string"),
    "metadata_nested": ({"__metadata__": {"step": {"a": "b"}}}, b"", "not a string"),
    "metadata_list": ({"__metadata__": ["a"]}, b"", "__metadata__ is not an object"),
    "nested_100000": (b"[" * 100000 + b"]" * 100000, b"", "RecursionError"),
    "nested_objects": (b'{"a":' * 100000 + b"1" + b"}" * 100000, b"", "RecursionError"),
    "huge_integer": (b'{"a":{"dtype":"F32","shape":[' + b"9" * 5000 + b'],"data_offsets":[0,4]}}', b"\0" * 4,
                     "not valid JSON"),
    "not_utf8": (b'{"\xff":{}}', b"", "UTF-8"),
    "unhashable_dtype": ({"a": {"dtype": [1], "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, "dtype"),
    "no_offsets": ({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4, "not an object with dtype, shape"),
    "bool_offset": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [False, 4]}}, b"\0" * 4, "pair of integers"),
    "gap": ({"a": f32(4, 8)}, b"\0" * 8, r"bytes \[0, 4\) of the data belong to no tensor"),
    "trailing": ({"a": f32(0, 4)}, b"\0" * 8, r"bytes \[4, 8\) of the data belong to no tensor"),
    "overlap": ({"a": f32(0, 8), "b": f32(4, 12)}, b"\0" * 12, "overlap"),
    "over_the_limit": (b"{}", b"", "limit of 100000000"),
}


@pytest.mark.parametrize("case", sorted(HEADERS))
def test_bad_headers_raise_checkpoint_error(tmp_path, case):
    header, data, needle = HEADERS[case]
    path = raw_safetensors(tmp_path / f"{case}.safetensors", header, data)
    if case == "over_the_limit":  # a length just over the format's 100 MB, in a small file
        with open(path, "r+b") as f:
            f.write(struct.pack("<Q", 100_000_001))
    for load in (io.load_file, rt.load):
        with pytest.raises(rt.CheckpointError, match=needle) as info:
            load(path)
        assert path in str(info.value)


def test_duplicate_keys_in_the_checkpoint_structure(tmp_path):
    structure = '{"version":1,"version":1,"locations":{},"root":null}'
    path = raw_safetensors(tmp_path / "s.pt", {"__metadata__": {"rustytorch.checkpoint": structure}})
    with pytest.raises(rt.CheckpointError, match="rustytorch.checkpoint has the key 'version' twice"):
        rt.load(path)


def test_many_entries_load_with_the_collector_paused(tmp_path):
    entries = {f"t{i}": {"dtype": "F32", "shape": [0, i], "data_offsets": [0, 0]} for i in range(20000)}
    path = raw_safetensors(tmp_path / "many.safetensors", entries)
    loaded = io.load_file(path)
    assert len(loaded) == 20000 and loaded["t7"].shape == (0, 7)
    import gc
    assert gc.isenabled()


def test_bool_bytes_other_than_0_and_1_read_as_true(tmp_path):
    path = raw_safetensors(tmp_path / "b.safetensors", {"m": {"dtype": "BOOL", "shape": [4], "data_offsets": [0, 4]}},
                           b"\x00\x02\xff\x01")
    before = open(path, "rb").read()
    for m in (io.load_file(path)["m"], io.load_file(path, mmap=False)["m"], rt.load(path)["m"]):
        assert m.tolist() == [False, True, True, True]
        assert (~m).tolist() == [True, False, False, False]
        assert m.to(rt.uint8).tolist() == [0, 1, 1, 1] and int(m.sum()) == 3
    assert open(path, "rb").read() == before  # normalised in memory only


# ---- IDX ------------------------------------------------------------------------------------------

def idx_bytes(array, code):
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def test_gzip_idx_is_decoded_as_it_streams(tmp_path):
    path = tmp_path / "big.idx.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.zeros((32, 1024, 1024), np.uint8), 0x08), compresslevel=1))
    small = tmp_path / "f32.idx.gz"
    values = np.linspace(-1, 1, 3 * 5 * 7, dtype=np.float32).reshape(3, 5, 7)
    small.write_bytes(gzip.compress(idx_bytes(values, 0x0D)))
    rc, out, err = run_python("""
        import resource, sys
        from rustytorch import io
        io.read_idx(sys.argv[2])  # warm up
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t = io.read_idx(sys.argv[1])
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(tuple(t.shape), int(t.sum()), grown // 1024)
    """, path, small)
    assert rc == 0, err
    shape, total, grown_mib = out.rsplit(" ", 2)
    assert shape == "(32, 1024, 1024)" and total == "0"
    assert int(grown_mib) < 40, f"reading a 32 MiB IDX file grew the peak memory by {grown_mib} MiB"
    np.testing.assert_array_equal(io.read_idx(small).numpy(), values)


def test_idx_claims_beyond_the_file_fail_before_allocating(tmp_path):
    plain = tmp_path / "claims.idx"
    plain.write_bytes(bytes([0, 0, 8, 2]) + (65536).to_bytes(4, "big") * 2 + b"\1\2\3")
    with pytest.raises(rt.CheckpointError, match="promises 4294967296 data bytes, the file holds 3"):
        io.read_idx(plain)
    packed = tmp_path / "claims.idx.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    with pytest.raises(rt.CheckpointError, match="more than a gzip file of .* bytes can hold"):
        io.read_idx(packed)
    with pytest.raises(rt.CheckpointError, match="cannot open"):
        io.read_idx(tmp_path)  # a directory
    cut = tmp_path / "cut.idx.gz"  # all the data, but not the gzip trailer that checks it
    cut.write_bytes(gzip.compress(bytes([0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 3]))[:-4])
    with pytest.raises(rt.CheckpointError, match="ends in the middle of its gzip stream"):
        io.read_idx(cut)


def test_idx_hostile_files_in_a_subprocess(tmp_path):
    cases = [bytes([0, 0, 0x0E, 3]) + b"\xff" * 12, bytes([0, 0, 0x0B, 1, 0, 0, 0, 3]) + b"\1" * 5,
             gzip.compress(bytes([0, 0, 8, 1, 0, 0, 0, 9]) + b"\1" * 4)[:-6], b"\x1f\x8b" + b"\xff" * 30]
    paths = []
    for i, data in enumerate(cases):
        paths.append(tmp_path / f"h{i}.idx")
        paths[-1].write_bytes(data)
    rc, out, err = run_python("""
        import sys, rustytorch as rt
        for p in sys.argv[1:]:
            try:
                rt.io.read_idx(p)
                print("loaded")
            except rt.CheckpointError:
                print("refused")
    """, *paths)
    assert rc == 0, err
    assert out.split() == ["refused"] * len(cases)


# ---- saves: temporary files, interrupted saves, the checksum --------------------------------------

def partials(directory, name):
    return sorted(p for p in os.listdir(directory) if p.startswith(name + ".rtx-partial-"))


def test_temporary_files_are_named_after_the_target(tmp_path):
    seen = []
    io.write_atomically(str(tmp_path / "run.json"), lambda f: seen.append(partials(tmp_path, "run.json")))
    assert len(seen[0]) == 1 and len(seen[0][0]) == len("run.json.rtx-partial-") + 6
    assert os.listdir(tmp_path) == ["run.json"]


@pytest.mark.parametrize("saver", ["rustytorch.save", "save_file", "BPETokenizer.save"])
def test_a_killed_save_leaves_the_old_file_and_the_next_save_cleans_up(tmp_path, saver):
    target = tmp_path / "out.bin"
    target.write_bytes(b"previous contents")
    # A save killed (SIGKILL) while it writes: its temporary file stays behind, unlocked.
    rc, _, err = run_python("""
        import os, signal, sys
        from rustytorch import io
        def killed(f):
            f.write(b"half of a file")
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        io.write_atomically(sys.argv[1], killed)
    """, target)
    assert rc == -signal.SIGKILL, err
    assert target.read_bytes() == b"previous contents"
    (stale,) = partials(tmp_path, "out.bin")
    (tmp_path / "notes.rtx-partial-old").write_bytes(b"x")  # not a name saves make: kept
    if saver == "rustytorch.save":
        rt.save({"x": rt.ones(2)}, target)
    elif saver == "save_file":
        io.save_file({"x": rt.ones(2)}, str(target))
    else:
        rt.text.BPETokenizer().save(str(target))
    assert partials(tmp_path, "out.bin") == []
    assert sorted(os.listdir(tmp_path)) == ["notes.rtx-partial-old", "out.bin"]
    # Trainers name each checkpoint anew: a save of another file in the directory cleans up too.
    run_python("""
        import os, signal, sys
        from rustytorch import io
        io.write_atomically(sys.argv[1], lambda f: os.kill(os.getpid(), signal.SIGKILL))
    """, tmp_path / "checkpoint-1.safetensors")
    assert len(partials(tmp_path, "checkpoint-1.safetensors")) == 1
    io.save_file({}, str(tmp_path / "checkpoint-2.safetensors"))
    assert partials(tmp_path, "checkpoint-1.safetensors") == []


def test_a_live_save_keeps_its_temporary_file(tmp_path):
    target = tmp_path / "ckpt.pt"
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys
        from rustytorch import io
        def slow(f):
            f.write(b"new contents")
            print("writing", flush=True)
            sys.stdin.readline()  # holds the save open until told to finish
        io.write_atomically(sys.argv[1], slow)
    """), str(target)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    try:
        assert writer.stdout.readline() == "writing\n"
        (live,) = partials(tmp_path, "ckpt.pt")
        rt.save({"x": 1}, target)  # another save of the same target meanwhile
        assert partials(tmp_path, "ckpt.pt") == [live] and rt.load(target) == {"x": 1}
        writer.communicate("done\n", timeout=30)
    finally:
        writer.kill()
    assert writer.returncode == 0
    assert target.read_bytes() == b"new contents" and os.listdir(tmp_path) == ["ckpt.pt"]


def saved_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    rt.save({"w": rt.arange(6.0).reshape(2, 3), "b": rt.tensor([True, False]), "step": 3,
             "i": rt.tensor([1, 2], dtype=rt.int64)}, path)
    return path


def same(a, b):
    if isinstance(a, rt.Tensor):
        return (isinstance(b, rt.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and np.array_equal(to_numpy(a), to_numpy(b)))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def test_the_checksum_catches_every_flipped_bit(tmp_path):
    path = saved_checkpoint(tmp_path)
    data = path.read_bytes()
    original = rt.load(path)
    outcomes = {"refused": 0, "same": 0, "changed": 0}
    for position in range(len(data)):
        for bit in (0, 7):
            damaged = bytearray(data)
            damaged[position] ^= 1 << bit
            try:
                loaded = rt.load(pyio.BytesIO(damaged))
            except rt.CheckpointError:
                outcomes["refused"] += 1
                continue
            outcomes["same" if same(original, loaded) else "changed"] += 1
    assert outcomes["changed"] == 0, outcomes
    # Only flips inside the checksum's own key name ("rustytorch.crc32" becoming another key) load.
    assert outcomes["same"] <= 2 * len(CHECKSUM), outcomes


def test_the_checksum_is_metadata_other_readers_ignore(tmp_path):
    path = saved_checkpoint(tmp_path)
    header = path.read_bytes()[8:8 + struct.unpack("<Q", path.read_bytes()[:8])[0]]
    assert json.loads(header)["__metadata__"][CHECKSUM] != "00000000"
    assert CHECKSUM not in io.load_metadata(str(path))
    st = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed")
    np.testing.assert_array_equal(st.load_file(str(path))["w"], np.arange(6.0, dtype=np.float32).reshape(2, 3))
    # A re-save that keeps the metadata gets a fresh checksum, not the stale one.
    io.save_file({"x": rt.ones(1)}, str(tmp_path / "again.safetensors"), metadata={CHECKSUM: "deadbeef", "k": "v"})
    assert io.load_metadata(str(tmp_path / "again.safetensors")) == {"k": "v"}
    assert io.load_file(str(tmp_path / "again.safetensors"))["x"].tolist() == [1.0]


def test_wrong_or_malformed_checksums_are_refused(tmp_path):
    body = {"a": f32(0, 4)}
    cases = {"deadbeef": "checksum mismatch", "DEADBEEF": "8 lowercase hex digits", "123": "8 lowercase hex"}
    for value, needle in cases.items():
        path = raw_safetensors(tmp_path / f"{value}.safetensors",
                               json.dumps({"__metadata__": {CHECKSUM: value}, **body},
                                          separators=(",", ":")).encode(), b"\0" * 4)
        with pytest.raises(rt.CheckpointError, match=needle):
            io.load_file(path)
    spaced = raw_safetensors(tmp_path / "spaced.safetensors",
                             json.dumps({"__metadata__": {CHECKSUM: "0" * 8}, **body}).encode(), b"\0" * 4)
    with pytest.raises(rt.CheckpointError, match="rewritten or damaged"):
        io.load_file(spaced)
    unchecked = raw_safetensors(tmp_path / "unchecked.safetensors", body, b"\0\0\x80?")
    assert io.load_file(unchecked)["a"].tolist() == [1.0]
