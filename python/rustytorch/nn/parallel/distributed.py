"""DistributedDataParallel: torch.nn.parallel.DistributedDataParallel over rustytorch.distributed.

The module is wrapped, not copied: at construction every rank's parameters and buffers are made equal
to rank 0's; each forward with grad enabled arms the C++ Reducer (rtx::dist::Reducer), which
all-reduces the gradients bucket by bucket while backward runs and writes the averages into .grad
before backward returns. This file only adapts PyTorch's arguments and module protocol to it."""
import contextlib

from ... import _C
from ... import distributed as dist
from ...utils.data.collate import is_tensor, map_nested, tensors_in
from ..module import Module

_d = _C._distributed

# torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES: the first bucket reduced is kept small.
_DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024
# PyTorch's buffer size for the broadcast of module states.
_BROADCAST_BUCKET_BYTES = 250 * 1024 * 1024


def _moved(obj, device):
    """obj with its tensors (nested in mappings and sequences) moved to device."""
    return map_nested(obj, is_tensor, lambda t: t.to(device))


class DistributedDataParallel(Module):
    """Data parallelism across the processes of a group: every rank runs the same module on its own
    batch; backward leaves the gradients averaged over the ranks, so that each rank's optimizer step is
    the same. See docs/distributed.md for what differs from PyTorch."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if dim != 0:
            raise _C.ValueError(f"[DistributedDataParallel] dim={dim}: inputs are not scattered in rustytorch, "
                                "so dim must be 0")
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        params = [p for _, p in named]
        if not params:
            raise _C.ValueError("[DistributedDataParallel] is not needed when a module doesn't have any parameter "
                                "that requires a gradient")
        devices = {str(p.device) for p in params}
        if len(devices) > 1:
            raise _C.ValueError(f"[DistributedDataParallel] the module's parameters are on several devices "
                                f"{sorted(devices)}; rustytorch's DDP wraps a module on one device")
        device = params[0].device
        if device.type == "cpu" and (device_ids is not None or output_device is not None):
            raise _C.ValueError(
                f"[DistributedDataParallel] device_ids and output_device arguments only work with a GPU module, "
                f"but got device_ids {device_ids}, output_device {output_device}, and module parameters on {device}")
        if device_ids is not None and len(device_ids) != 1:
            raise _C.ValueError(f"[DistributedDataParallel] device_ids {device_ids} must list exactly one device: "
                                "one process per GPU")
        if bucket_cap_mb is not None and not bucket_cap_mb > 0:
            raise _C.ValueError(f"[DistributedDataParallel] bucket_cap_mb {bucket_cap_mb} must be positive")
        pg = dist._group(process_group)
        if pg is None:
            raise _C.ValueError("[DistributedDataParallel] this process is not in process_group")

        self.module = module
        self.process_group = pg
        self.device_ids = None if device_ids is None else [_C.device("cuda", d) if isinstance(d, int)
                                                           else _C.device(d) for d in device_ids]
        self.output_device = output_device
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self._module_buffers = list(module.buffers())

        states = params + self._module_buffers
        _d.verify_same_shapes(pg, params, "DistributedDataParallel")
        _d.broadcast_coalesced(pg, states, _BROADCAST_BUCKET_BYTES, 0)
        cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        # A static graph's unused parameters are found the same way as with find_unused_parameters.
        # The first bucket is kept small, and no larger than the cap asked for.
        self.reducer = _d.Reducer(params, pg, max(cap, 1), max(1, min(cap, _DEFAULT_FIRST_BUCKET_BYTES)),
                                  find_unused_parameters or static_graph, gradient_as_bucket_view,
                                  [n for n, _ in named])

    def forward(self, *inputs, **kwargs):
        if self.device_ids is not None:
            inputs, kwargs = _moved(inputs, self.device_ids[0]), _moved(kwargs, self.device_ids[0])
        sync = _C.is_grad_enabled() and self.require_backward_grad_sync
        self.require_forward_param_sync = sync
        if sync and self.broadcast_buffers and self._module_buffers:
            _d.broadcast_coalesced(self.process_group, self._module_buffers, _BROADCAST_BUCKET_BYTES, 0)
        output = self.module(*inputs, **kwargs)
        if sync:
            search = self.find_unused_parameters or self.static_graph
            self.reducer.prepare_for_backward(tensors_in(output) if search else [])
        return output

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward passes only accumulate .grad locally; the first backward after it averages
        the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _bucket_indices(self):
        """The parameter indices of each gradient bucket, in the order they are reduced."""
        return self.reducer.bucket_indices()
