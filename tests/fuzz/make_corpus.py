"""Writes the seed corpora of the fuzz targets (corpus/idx, corpus/bpe, corpus/load): valid files
of each format and the hostile cases the readers must refuse (truncated, oversized claims,
duplicate JSON keys, deep nesting, non-string metadata, huge shapes, BOOL bytes other than 0/1,
overlaps, gaps, a wrong checksum, damaged PyTorch zips and pickles). Rerun it after a format changes:

    PYTHONPATH=<build>/python python3 tests/fuzz/make_corpus.py

The PyTorch checkpoint seed is written when torch is importable (e.g. with /opt/torchenv/bin/python);
otherwise the one in the repository stays."""
import collections
import gzip
import io
import json
import os
import struct
import tempfile
import zipfile

import numpy as np

import rustytorch as rt

HERE = os.path.dirname(os.path.abspath(__file__))


def put(kind, name, data):
    """Writes a seed; seeds of fuzz_load.py start with the byte that picks their kind (see its as_file)."""
    os.makedirs(os.path.join(HERE, "corpus", kind), exist_ok=True)
    with open(os.path.join(HERE, "corpus", kind, name), "wb") as f:
        f.write(data)


def idx_file(array, code):
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def idx_corpus():
    cases = {
        "u8_2x3": idx_file(np.arange(6, dtype=np.uint8).reshape(2, 3), 0x08),
        "i8": idx_file(np.array([-128, -1, 127], dtype=np.int8), 0x09),
        "i16": idx_file(np.array([-32768, -2, 258], dtype=np.int16), 0x0B),
        "i32_2x2": idx_file(np.array([[-3, 1], [7, 1 << 30]], dtype=np.int32), 0x0C),
        "f32": idx_file(np.array([1.5, -2.0, np.inf], dtype=np.float32), 0x0D),
        "f64": idx_file(np.array([0.1, np.nan], dtype=np.float64), 0x0E),
        "empty_dim": idx_file(np.zeros((0, 28, 28), dtype=np.uint8), 0x08),
        "truncated": idx_file(np.arange(10, dtype=np.uint8), 0x08)[:-3],
        "trailing": idx_file(np.arange(4, dtype=np.uint8), 0x08) + b"\x01",
        "claims_4GiB": bytes([0, 0, 8, 2]) + (65536).to_bytes(4, "big") * 2 + b"\x01",
        "claims_2e64": bytes([0, 0, 0x0E, 3]) + b"\xff\xff\xff\xff" * 3,
        "bad_magic": b"\x01\x00\x08\x01\x00\x00\x00\x01\x07",
        "rank0": b"\x00\x00\x08\x00",
    }
    for name, data in cases.items():
        put("idx", name, data)
        put("idx", name + ".gz", gzip.compress(data, mtime=0))
    put("idx", "trailer_cut.gz", gzip.compress(cases["u8_2x3"], mtime=0)[:-4])  # data complete, CRC-32 unread
    put("idx", "two_members.gz", gzip.compress(cases["f32"][:9], mtime=0) + gzip.compress(cases["f32"][9:], mtime=0))
    put("idx", "zeros_bomb.gz", gzip.compress(idx_file(np.zeros((64, 64, 16), dtype=np.uint8), 0x08), mtime=0))


def bpe_corpus():
    tok = rt.text.BPETokenizer.train("In the beginning God created the heaven and the earth. " * 20, 300)
    text = tok.to_str().encode()
    put("bpe", "trained", text)
    put("bpe", "bytes_only", rt.text.BPETokenizer().to_str().encode())
    put("bpe", "truncated", text[:len(text) // 2])
    put("bpe", "no_final_newline", text[:-1])
    put("bpe", "bad_version", b"rtx-bpe 2 0\n")
    put("bpe", "undefined_token", b"rtx-bpe 1 1\n256 97\n")
    put("bpe", "repeated_merge", b"rtx-bpe 1 2\n97 98\n97 98\n")
    put("bpe", "leading_zero", b"rtx-bpe 1 1\n097 98\n")


def raw_safetensors(header, data=b""):
    encoded = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(encoded)) + encoded + data


def saved(obj):
    buffer = io.BytesIO()
    rt.save(obj, buffer)
    return buffer.getvalue()


def put_file(name, data):
    put("load", name, b"\0" + data)


def load_corpus():
    w = rt.arange(6.0).reshape(2, 3)
    state = collections.OrderedDict(weight=w, bias=rt.zeros(3, dtype=rt.float16), tied=w)
    put_file("checkpoint", saved({"model": state, "step": 7, "betas": (0.9, 0.95), "lr": float("inf"),
                                     "dtype": rt.bfloat16, "device": rt.device("cpu"), "names": ["a", None, True],
                                     "ids": rt.tensor([1, 2, 3]), "mask": rt.tensor([True, False])}))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plain.safetensors")
        rt.io.save_file({"a": rt.ones(2, 2), "b": rt.arange(3, dtype=rt.int64), "e": rt.zeros(0, 4)}, path,
                        metadata={"step": "3"})
        with open(path, "rb") as f:
            plain = f.read()
    put_file("safetensors", plain)
    put_file("safetensors_truncated", plain[:-5])
    put_file("safetensors_bad_checksum", plain[:-1] + bytes([plain[-1] ^ 1]))
    f32 = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    put_file("no_checksum", raw_safetensors({"a": f32}, b"\0\0\x80?"))
    put_file("duplicate_key", raw_safetensors(b'{"a":{"dtype":"XX","shape":[1],"data_offsets":[0,4]},'
                                                 b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4))
    put_file("metadata_not_string", raw_safetensors({"__metadata__": {"a": 1}}))
    put_file("deep_nesting", raw_safetensors(b"[" * 1100 + b"]" * 1100))
    put_file("shape_2e64", raw_safetensors({"a": {"dtype": "F32", "shape": [0, 2 ** 64], "data_offsets": [0, 0]}}))
    put_file("bool_bytes", raw_safetensors({"m": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}},
                                              b"\x00\x02\xff"))
    put_file("overlap", raw_safetensors({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12))
    put_file("gap", raw_safetensors({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}, b"\0\0"))
    put_file("huge_length", struct.pack("<Q", 1 << 62) + b"{}")
    put_file("structure_unknown_node", raw_safetensors(
        {"__metadata__": {"rustytorch.checkpoint": json.dumps({"version": 1, "locations": {}, "root": {"kind": "x"}})}}))
    structure = {"version": 1, "locations": {"a": "cpu", "b": "cpu"}, "root": {"kind": "dict", "items": [
        ["a", {"kind": "tensor", "entry": "a", "requires_grad": True}], ["b", {"kind": "tensor", "entry": "b",
                                                                              "requires_grad": False}],
        [1, {"kind": "tuple", "items": [0.5, {"kind": "float", "value": "nan"}, None]}],
        ["c", {"kind": "ordered_dict", "items": [["d", {"kind": "dtype", "name": "float16"}],
                                                 ["e", {"kind": "device", "name": "cuda:1"}]]}]]}}
    put("load", "structure", b"\2" + json.dumps(structure).encode())
    # Pickles that made the unpickler allocate gigabytes (found by fuzz_load.py): a memo index of
    # 2^31 - 1 (LONG_BINPUT) and a protocol-5 BYTEARRAY8 claiming 2^60 bytes.
    put("load", "pytorch_pickle_memo_index", b"\1\x80\x02}r\xff\xff\xff\x7f.")
    put("load", "pytorch_pickle_bytearray8", b"\1\x80\x05\x96" + (1 << 60).to_bytes(8, "little") + b".")
    try:
        import torch
    except ImportError:
        return
    buffer = io.BytesIO()
    x = torch.arange(6.0).reshape(2, 3)
    torch.save({"x": x, "xt": x.t(), "n": torch.nn.Parameter(torch.ones(2)), "i": torch.tensor([1, 2])}, buffer)
    put_file("pytorch_zip", buffer.getvalue())
    # zipfile refuses "version needed to extract" 25.5 with NotImplementedError.
    damaged = bytearray(buffer.getvalue())
    central = damaged.find(b"PK\x01\x02")
    damaged[central + 6:central + 8] = (255).to_bytes(2, "little")
    put_file("pytorch_zip_version_25", bytes(damaged))
    # The pickle of a checkpoint whose storages are the fuzz target's records 0..3 (16 float32, 8 int64).
    buffer = io.BytesIO()
    storage = torch.arange(16.0)
    torch.save({"w": storage[:8].view(2, 4), "wt": storage[:8].view(2, 4).t(), "i": torch.arange(8),
                "p": torch.nn.Parameter(storage[8:])}, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        pickle_name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
        put("load", "pytorch_pickle", b"\1" + archive.read(pickle_name))


if __name__ == "__main__":
    idx_corpus()
    bpe_corpus()
    load_corpus()
