"""Training checkpoints as safetensors files: the model's state dict ("model.<key>"), the optimizer's
tensor state ("optim.<param index>.<name>") and, in the metadata, everything else as JSON (step,
data position, RNG state, optimizer hyperparameters and step counts, the GradScaler's state). Files
are written atomically and only the newest `keep` are kept, so a run killed while saving still has
its previous checkpoint."""
import glob
import json
import math
import os

import rustytorch as rt
from .. import io

_PATTERN = "checkpoint-{:08d}.safetensors"
_IMPLEMENTATION_FLAGS = ("foreach", "fused", "capturable")


def save(directory, step, model, optimizer, progress, keep=3, scaler=None):
    tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
    state = optimizer.state_dict()
    scalars = {}
    for index, entries in state["state"].items():
        for name, value in entries.items():
            if isinstance(value, rt.Tensor):
                tensors[f"optim.{index}.{name}"] = value
            else:
                scalars.setdefault(str(index), {})[name] = value
    groups = [{k: (list(v) if isinstance(v, tuple) else v.item() if isinstance(v, rt.Tensor) else v)
               for k, v in g.items()} for g in state["param_groups"]]  # a tensor lr (--cuda-graph) as a number
    metadata = {"progress": json.dumps(progress), "rng": json.dumps(list(rt.get_rng_state())),
                "optim": json.dumps({"param_groups": groups, "scalars": scalars})}
    if scaler is not None:
        metadata["scaler"] = json.dumps(scaler.state_dict())
    path = os.path.join(directory, _PATTERN.format(step))
    io.save_file(tensors, path, metadata=metadata)
    for old in sorted(glob.glob(os.path.join(directory, "checkpoint-*.safetensors")))[:-keep]:
        os.remove(old)
    return path


def latest(directory):
    """The newest checkpoint in directory, or None."""
    found = sorted(glob.glob(os.path.join(directory, "checkpoint-*.safetensors")))
    return found[-1] if found else None


def load(path, model, optimizer, scaler=None):
    """Restores model, optimizer, scaler (when given) and the RNG from path; returns the saved
    progress dict. The file is read into memory (not mapped): a later save may rewrite it while
    the restored run lives. A checkpoint that is incomplete or holds values a run cannot use
    raises CheckpointError naming the file and the field."""
    tensors = io.load_file(path, mmap=False)
    metadata = io.load_metadata(path)
    optim = _json_field(path, metadata, "optim", dict)
    rng = _json_field(path, metadata, "rng", list)
    progress = _json_field(path, metadata, "progress", dict)
    _check_progress(path, progress)
    groups = _optimizer_groups(path, optim)
    scalars = optim.get("scalars")
    if not isinstance(scalars, dict):
        _fail(path, "optim.scalars", "is missing or not an object")
    model.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    state = {}
    try:
        for key, value in tensors.items():
            if key.startswith("optim."):
                _, index, name = key.split(".", 2)
                state.setdefault(int(index), {})[name] = value
        for index, entries in scalars.items():
            state.setdefault(int(index), {}).update(entries)
    except (ValueError, TypeError, AttributeError) as e:
        _fail(path, "optim state", f"is malformed ({e})")
    optimizer.load_state_dict({"state": state, "param_groups": groups})
    if scaler is not None:
        # A checkpoint without scaler state comes from a run without a scaler: a disabled one
        # loads {} as a no-op, an enabled one refuses it.
        scaler.load_state_dict(_json_field(path, metadata, "scaler", dict) if "scaler" in metadata else {})
    if len(rng) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in rng):
        _fail(path, "rng", f"must be [seed, offset] integers, got {rng!r}")
    rt.set_rng_state(tuple(rng))
    return progress


def _fail(path, field, what):
    raise rt.CheckpointError(f"checkpoint {path}: field '{field}' {what}; the file is not a checkpoint this trainer "
                             "wrote (resume from another one, or start a new run)")


def _json_field(path, metadata, name, kind):
    if name not in metadata:
        _fail(path, name, "is missing")
    try:
        value = json.loads(metadata[name])
    except (ValueError, RecursionError) as e:
        _fail(path, name, f"is not valid JSON ({type(e).__name__})")
    if not isinstance(value, kind):
        _fail(path, name, f"must be a JSON {'object' if kind is dict else 'array'}, got {type(value).__name__}")
    return value


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_progress(path, progress):
    """step is required; the loop's time and window_losses are checked where present."""
    step = progress.get("step")
    if not (isinstance(step, int) and not isinstance(step, bool) and step >= 0):
        _fail(path, "progress.step", f"must be a nonnegative integer, got {step!r}")
    if "time" in progress and not (_is_number(progress["time"]) and progress["time"] >= 0):
        _fail(path, "progress.time", f"must be a nonnegative number, got {progress['time']!r}")
    losses = progress.get("window_losses", [])
    if not (isinstance(losses, list) and all(_is_number(x) for x in losses)):
        _fail(path, "progress.window_losses", f"must be a list of numbers, got {losses!r}")


def _optimizer_groups(path, optim):
    """The saved parameter groups, checked, without the implementation flags: those belong to this
    process (a CPU run may resume on a GPU), so the optimizer's own stay."""
    groups = optim.get("param_groups")
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        _fail(path, "optim.param_groups", "is missing or not a list of objects")
    out = []
    for i, g in enumerate(groups):
        field = f"optim.param_groups[{i}]"
        for key in ("lr", "eps", "weight_decay"):
            if key in g and not (_is_number(g[key]) and g[key] >= 0):
                _fail(path, f"{field}.{key}", f"must be a nonnegative number, got {g[key]!r}")
        betas = g.get("betas")
        if "betas" in g and not (isinstance(betas, list) and len(betas) == 2 and
                                 all(_is_number(b) and 0 <= b < 1 for b in betas)):
            _fail(path, f"{field}.betas", f"must be two numbers in [0, 1), got {betas!r}")
        if not isinstance(g.get("params"), list):
            _fail(path, f"{field}.params", "is missing or not a list")
        out.append({k: (tuple(v) if k == "betas" else v) for k, v in g.items() if k not in _IMPLEMENTATION_FLAGS})
    return out
