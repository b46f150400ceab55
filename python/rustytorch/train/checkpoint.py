"""Training checkpoints as safetensors files: the model's state dict ("model.<key>"), the optimizer's
tensor state ("optim.<param index>.<name>") and, in the metadata, everything else as JSON (step,
data position, RNG state, optimizer hyperparameters and step counts, the GradScaler's state). Files
are written atomically and only the newest `keep` are kept, so a run killed while saving still has
its previous checkpoint."""
import glob
import json
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
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in state["param_groups"]]
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
    progress dict."""
    tensors = io.load_file(path)
    metadata = io.load_metadata(path)
    model.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    optim = json.loads(metadata["optim"])
    state = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    for index, entries in optim["scalars"].items():
        state.setdefault(int(index), {}).update(entries)
    # The implementation flags belong to this process (a CPU run may resume on a GPU): the optimizer's own stay.
    groups = [{k: (tuple(v) if k == "betas" else v) for k, v in g.items() if k not in _IMPLEMENTATION_FLAGS}
              for g in optim["param_groups"]]
    optimizer.load_state_dict({"state": state, "param_groups": groups})
    if scaler is not None:
        # A checkpoint without scaler state comes from a run without a scaler: a disabled one
        # loads {} as a no-op, an enabled one refuses it.
        scaler.load_state_dict(json.loads(metadata.get("scaler", "{}")))
    rt.set_rng_state(tuple(json.loads(metadata["rng"])))
    return json.loads(metadata["progress"])
