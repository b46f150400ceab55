"""amp.GradScaler: PyTorch's dynamic loss scaling. scale() multiplies losses by the scale; unscale_()
divides an optimizer's gradients by it while checking them for inf/NaN (one fused op per device and
dtype, _amp_foreach_non_finite_check_and_unscale_, no host synchronization); step() skips
optimizer.step() when a check found inf/NaN (reading the flag back once) or, for an optimizer that
handles scaling itself (fused: _step_supports_amp_scaling), hands it grad_scale and found_inf and
never synchronizes; update() backs the scale off after an overflow and grows it after
growth_interval clean steps (_amp_update_scale_). The scale and the growth tracker are tensors on
the device, created by the first scale(). Each optimizer goes READY -> UNSCALED -> STEPPED between
updates, with PyTorch's errors for calls out of that order."""
import warnings
from collections import abc, defaultdict
from enum import Enum

from .. import _C, cuda
from ..autograd import no_grad

__all__ = ["OptState", "GradScaler"]


class _PerDevice:
    """A tensor and its copies on the other devices asked for, made once each."""

    def __init__(self, master_tensor):
        self.master = master_tensor
        self._per_device_tensors = {}

    def get(self, device):
        found = self._per_device_tensors.get(device)
        if found is None:
            found = self.master.to(device=device, non_blocking=True, copy=True)
            self._per_device_tensors[device] = found
        return found


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled and not cuda.is_available():
            warnings.warn("GradScaler(device='cuda') is enabled, but CUDA is not available; disabling it",
                          stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise _C.ValueError(f"[GradScaler] growth_factor must be > 1.0 (the scale grows by it), got {growth_factor}")
            if backoff_factor >= 1.0:
                raise _C.ValueError(f"[GradScaler] backoff_factor must be < 1.0 (the scale shrinks by it), got {backoff_factor}")
            self._init_scale = init_scale
            self._scale = None  # made by the first scale()
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_fresh_state)

    def _check_scale_growth_tracker(self, funcname):
        if self._scale is None or self._growth_tracker is None:
            raise _C.Error(f"[GradScaler.{funcname}] no scale exists yet: call scaler.scale(loss) and backward on it "
                           "before this, in the same iteration")
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev):
        self._scale = _C.full((), self._init_scale, dtype=_C.float32, device=dev)
        self._growth_tracker = _C.full((), self._init_growth_tracker, dtype=_C.int32, device=dev)

    def scale(self, outputs):
        """outputs (a tensor, or nested lists/tuples/iterables of tensors) multiplied by the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, _C.Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(device=outputs.device, non_blocking=True)
        stash = []  # the scale's replicator, made at the first tensor

        def apply_scale(val):
            if isinstance(val, _C.Tensor):
                if not stash:
                    if self._scale is None:
                        self._lazy_init_scale_growth_tracker(val.device)
                    stash.append(_PerDevice(self._scale))
                return val * stash[0].get(val.device)
            if isinstance(val, abc.Iterable):
                scaled = map(apply_scale, val)
                return type(val)(scaled) if isinstance(val, (list, tuple)) else scaled
            raise _C.ValueError(f"[GradScaler.scale] expected a tensor or (nested) lists and tuples of tensors, got "
                                f"{type(val).__name__}")

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16):
        per_device_inv_scale = _PerDevice(inv_scale)
        per_device_found_inf = _PerDevice(found_inf)
        per_device_grads = defaultdict(list)  # one list per device: the op groups the dtypes itself
        with no_grad():
            for group in optimizer.param_groups:
                fp16_allowed = allow_fp16 or group.get("master_weights", False)
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    if not fp16_allowed and param.grad.dtype == _C.float16:
                        raise _C.ValueError("[GradScaler.unscale_] float16 gradients cannot be unscaled safely: keep the "
                                            "parameters in float32 (autocast), or give the optimizer master_weights=True")
                    per_device_grads[param.grad.device].append(param.grad)
            for device, grads in per_device_grads.items():
                _C._amp_foreach_non_finite_check_and_unscale_(grads, per_device_found_inf.get(device),
                                                              per_device_inv_scale.get(device))
        return per_device_found_inf._per_device_tensors

    def unscale_(self, optimizer):
        """Divides optimizer's gradients by the scale in place (once per optimizer between updates)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise _C.Error("[GradScaler.unscale_] this optimizer's gradients were already unscaled in this iteration "
                           "(once per update())")
        if optimizer_state["stage"] is OptState.STEPPED:
            raise _C.Error("[GradScaler.unscale_] the optimizer already stepped in this iteration: unscale_ before step()")
        # The reciprocal in float64, as PyTorch computes it.
        inv_scale = self._scale.double().reciprocal().float()
        found_inf = _C.full((), 0.0, dtype=_C.float32, device=self._scale.device)
        optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)
        optimizer_state["stage"] = OptState.UNSCALED

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        if not sum(v.item() for v in optimizer_state["found_inf_per_device"].values()):
            return optimizer.step(*args, **kwargs)
        return None

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) after unscale_ (unless it was called), skipped when the
        gradients held inf/NaN; returns what optimizer.step returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise _C.Error("[GradScaler.step] an enabled scaler cannot step with a closure: call backward yourself, then step")
        self._check_scale_growth_tracker("step")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise _C.Error("[GradScaler.step] this optimizer already stepped in this iteration: call update() between steps")
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            return self._step_scaling_optimizer(optimizer, optimizer_state, *args, **kwargs)
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(optimizer_state["found_inf_per_device"]) == 0:
            raise _C.Error("[GradScaler.step] none of this optimizer's parameters has a gradient to check")
        retval = self._maybe_opt_step(optimizer, optimizer_state, *args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    def _step_scaling_optimizer(self, optimizer, optimizer_state, *args, **kwargs):
        """The step of an optimizer that unscales and skips by itself: for the step, optimizer.grad_scale
        holds the scale (None when unscale_ already ran) and optimizer.found_inf the combined flag."""
        if optimizer_state["stage"] is OptState.READY:
            self._check_inf_per_device(optimizer)
        scale = self._scale
        optimizer.grad_scale = None if optimizer_state["stage"] is OptState.UNSCALED else scale
        optimizer.found_inf = sum(t.to(scale.device, non_blocking=True)
                                  for t in optimizer_state["found_inf_per_device"].values())
        try:
            retval = optimizer.step(*args, **kwargs)
        finally:
            del optimizer.grad_scale
            del optimizer.found_inf
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """Updates the scale from the inf checks of this iteration's steps, or sets it to new_scale (a
        float or a 1-element tensor on the scaler's device type)."""
        if not self._enabled:
            return
        _scale, _growth_tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                self._scale.fill_(new_scale)
            else:
                if not (isinstance(new_scale, _C.Tensor) and new_scale.device.type == self._device
                        and new_scale.numel() == 1 and not new_scale.requires_grad):
                    raise _C.ValueError(f"[GradScaler.update] new_scale must be a number or a one-element {self._device} tensor "
                                        f"that does not require grad, got {new_scale!r}")
                self._scale.copy_(new_scale.reshape(()))
        else:
            found_infs = [found_inf.to(device=_scale.device, non_blocking=True)
                          for state in self._per_optimizer_states.values()
                          for found_inf in state["found_inf_per_device"].values()]
            if not found_infs:
                raise _C.Error("[GradScaler.update] no optimizer stepped through this scaler since the last update()")
            found_inf_combined = found_infs[0]
            for other in found_infs[1:]:
                found_inf_combined += other
            _C._amp_update_scale_(_scale, _growth_tracker, found_inf_combined, self._growth_factor,
                                  self._backoff_factor, self._growth_interval)
        self._per_optimizer_states = defaultdict(_fresh_state)

    def _get_scale_async(self):
        return self._scale

    def get_scale(self):
        """The scale as a Python float (1.0 when disabled); reads it back from the device."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker.item()

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """{'scale', 'growth_factor', 'backoff_factor', 'growth_interval', '_growth_tracker'} as Python
        numbers ({} when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise _C.ValueError("[GradScaler.load_state_dict] the state is empty (a disabled scaler saves none): load it "
                                "into a disabled scaler")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(self._init_growth_tracker)

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise _C.Error("[GradScaler] can be pickled only between iterations (before scale(), or after "
                               "update())")
            # The unpickled instance makes its tensors again from these numbers.
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def _check_inf_per_device(self, optimizer):
        _scale, _ = self._check_scale_growth_tracker("_check_inf_per_device")
        dummy_inv_scale = _C.full((), 1.0, dtype=_C.float32, device=_scale.device)
        found_inf = _C.full((), 0.0, dtype=_C.float32, device=_scale.device)
        self._per_optimizer_states[id(optimizer)]["found_inf_per_device"] = self._unscale_grads_(
            optimizer, dummy_inv_scale, found_inf, True)
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]

    def _found_inf_per_device(self, optimizer):
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]
