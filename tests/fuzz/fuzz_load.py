"""atheris target: rustytorch.load on arbitrary bytes, which covers the readers written in Python:
safetensors files (_safetensors), rustytorch checkpoints (serialization) and PyTorch's zip
checkpoints (_torch_format). Every input must load or raise rustytorch.CheckpointError, and every
tensor loaded must be readable to its last byte; anything else (another exception, a crash, a
hang, memory beyond -rss_limit_mb) is a finding.

Checksums guard the inner formats (rustytorch's CRC-32 the checkpoint structure, zip's CRC-32 the
pickle), so that mutated files would stop there; the first byte of an input therefore picks what
the rest is (see as_file), and the seeds in corpus/load carry it.

    PYTHONPATH=<build>/python python3 tests/fuzz/fuzz_load.py -max_total_time=60 -dict=tests/fuzz/load.dict \\
        <new corpus dir> tests/fuzz/corpus/load"""
import io
import json
import struct
import sys
import zipfile

import atheris

with atheris.instrument_imports(include=["rustytorch", "zipfile"]):
    import rustytorch

WHOLE_FILE, PICKLE, STRUCTURE = range(3)
STORAGE_BYTES = 64  # of each of the storages "0" to "3" around a fuzzed pickle


def pytorch_zip(pickle_bytes):
    """A PyTorch zip checkpoint with this data.pkl and storage records 0..3 of STORAGE_BYTES bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pickle_bytes)
        archive.writestr("archive/byteorder", "little")
        for key in range(4):
            archive.writestr(f"archive/data/{key}", bytes(range(key, key + STORAGE_BYTES)))
    return out.getvalue()


def safetensors_with_structure(text):
    """A safetensors file of tensors 'a' (F32 [2, 2]) and 'b' (I64 [3]) with this checkpoint structure."""
    header = {"__metadata__": {"rustytorch.checkpoint": text},
              "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
              "b": {"dtype": "I64", "shape": [3], "data_offsets": [16, 40]}}
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + bytes(range(40))


def as_file(data):
    """The file a fuzz input stands for: after its first byte, the whole file (WHOLE_FILE), the pickle
    of a PyTorch checkpoint (PICKLE) or the structure JSON of a rustytorch checkpoint (STRUCTURE)."""
    if not data:
        return data
    mode, rest = data[0] % 3, data[1:]
    if mode == PICKLE:
        return pytorch_zip(rest)
    if mode == STRUCTURE:
        return safetensors_with_structure(rest.decode("utf-8", "replace"))
    return rest


def touch(obj):
    """Reads every byte of every tensor in the loaded structure."""
    if isinstance(obj, rustytorch.Tensor):
        obj._raw_bytes()
    elif isinstance(obj, dict):
        for key, value in obj.items():
            touch(key)
            touch(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            touch(value)


def test_one_input(data):
    try:
        loaded = rustytorch.load(io.BytesIO(as_file(data)), map_location="cpu")
    except rustytorch.CheckpointError:
        return
    touch(loaded)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
