"""ZeroRedundancyOptimizer (ZeRO stage 1, torch.distributed.optim.ZeroRedundancyOptimizer): every rank
of a process group holds the optimizer state of only its partition of the parameters, steps that
partition with a local optimizer of the given class, then each rank's updated parameters are
broadcast from it to the others.

The partition is PyTorch's: group by group, the parameters largest first, each to the rank with the
fewest elements so far (counted over all groups), so every rank computes the same one. The full
state is gathered on one rank (consolidate_state_dict) as a plain optimizer's state_dict."""
import io

from ... import _C
from ...optim.optimizer import Optimizer
from ...serialization import load, save
from .. import _group, broadcast, get_global_rank, get_rank, get_world_size, group, recv, send


class ZeroRedundancyOptimizer(Optimizer):
    """Wraps optimizer_class (built with **defaults) so that its state is sharded across the ranks of
    process_group (the default group when None). param_groups hold every parameter, with the local
    optimizer's hyperparameters; `optim` is the local optimizer of this rank's partition.

    parameters_as_bucket_view=True broadcasts each rank's parameters in one flat buffer per device
    (packed on the owner, copied back into the parameters on the others) instead of one broadcast
    per parameter; the parameters keep their own memory. overlap_with_ddp=True is not supported."""

    def __init__(self, params, optimizer_class, process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, **defaults):
        if overlap_with_ddp:
            raise _C.ValueError("ZeroRedundancyOptimizer: overlap_with_ddp=True is not supported: rustytorch's "
                                "DistributedDataParallel has no communication hook to run the step in; use "
                                "overlap_with_ddp=False and call step() after backward")
        self._initialized = False
        super().__init__(params, defaults)
        self.process_group = group.WORLD if process_group is None else process_group
        self.world_size = get_world_size(self.process_group)
        self.rank = get_rank(self.process_group)
        if self.rank < 0:
            raise _C.ValueError("ZeroRedundancyOptimizer: this process is not a member of process_group")
        self.global_rank = get_global_rank(self.process_group, self.rank)
        self._default_device = _first_parameter(self.param_groups).device  # consolidation's messages go there
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self._partition = _partition_parameters(self.param_groups, self.world_size)
        self.optim = optimizer_class(
            [dict(g, params=params) for g, params in zip(self.param_groups, self._partition[self.rank])], **defaults)
        _sync_param_groups(self.optim.param_groups, self.param_groups)
        self._all_state_dicts = []
        self._initialized = True

    @property
    def _step_supports_amp_scaling(self):
        """False: a GradScaler unscales the gradients and checks them for infs itself (the local
        optimizer sees only its partition)."""
        return False

    def add_param_group(self, param_group):
        """Adds param_group and re-partitions (the earlier groups keep their ranks): call it on every rank."""
        super().add_param_group(param_group)
        try:
            _check_same_dense_type(self.param_groups)
        except _C.ValueError:
            self.param_groups.pop()
            raise
        if self._initialized:
            self._partition = _partition_parameters(self.param_groups, self.world_size)
            self.optim.add_param_group(dict(self.param_groups[-1], params=self._partition[self.rank][-1]))
            _sync_param_groups(self.optim.param_groups[-1:], self.param_groups[-1:])

    def step(self, closure=None, **kwargs):
        """Steps this rank's partition with the local optimizer (after copying the hyperparameters of
        param_groups into it, so that a scheduler's changes apply), then broadcasts every rank's
        parameters from it; returns the closure's loss."""
        _sync_param_groups(self.param_groups, self.optim.param_groups)
        loss = self.optim.step(**kwargs) if closure is None else self.optim.step(closure=closure, **kwargs)
        _sync_param_groups(self.optim.param_groups, self.param_groups)
        self._sync_params()
        return loss

    def _sync_params(self):
        """Broadcasts each rank's trainable parameters from it (parameters with requires_grad=False are
        never updated and not sent): one asynchronous broadcast per parameter, or with
        parameters_as_bucket_view the C++ coalesced broadcast, one flat buffer per rank and device."""
        works = []
        for rank, groups in enumerate(self._partition):
            params = [p for ps in groups for p in ps if p.requires_grad]
            if not self.parameters_as_bucket_view:
                works += [broadcast(p.detach(), group=self.process_group, async_op=True, group_src=rank)
                          for p in params]
            elif params:
                _C._distributed.broadcast_coalesced(_group(self.process_group), params,
                                                    sum(p.nbytes for p in params), rank)
        for work in works:
            work.wait()

    def consolidate_state_dict(self, to=0):
        """Gathers every rank's local optimizer state on rank `to` (a rank of process_group) for
        state_dict() there; call it on every rank."""
        if not 0 <= to < self.world_size:
            raise _C.ValueError(f"ZeroRedundancyOptimizer.consolidate_state_dict: to={to} is not a rank of the "
                                f"process group (world size {self.world_size})")
        _sync_param_groups(self.param_groups, self.optim.param_groups)
        data = _encode(self.optim.state_dict())
        device, pg = self._default_device, self.process_group
        self._all_state_dicts = []
        if self.rank != to:
            send(_C.full((1,), len(data), dtype=_C.int64, device=device), group=pg, group_dst=to)
            send(_C.frombuffer(bytearray(data), dtype=_C.uint8).to(device), group=pg, group_dst=to)
            return
        for rank in range(self.world_size):
            received = data
            if rank != to:
                size = _C.zeros(1, dtype=_C.int64, device=device)
                recv(size, group=pg, group_src=rank)
                message = _C.empty(int(size.item()), dtype=_C.uint8, device=device)
                recv(message, group=pg, group_src=rank)
                received = message.cpu().numpy().tobytes()
            self._all_state_dicts.append(load(io.BytesIO(received), map_location="cpu"))

    def state_dict(self):
        """The full optimizer state as of the last consolidate_state_dict() to this rank, in a plain
        optimizer's layout (state keyed by the index of the parameter over all groups)."""
        if not self._all_state_dicts:
            raise _C.Error(f"[ZeroRedundancyOptimizer.state_dict] the optimizer state has not been consolidated on "
                           f"this rank: call consolidate_state_dict(to={self.rank}) on all ranks first")
        state_dict = super().state_dict()
        index = {p: i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        for local, groups in zip(self._all_state_dicts, self._partition):
            for local_group, params in zip(local["param_groups"], groups):
                for i, p in zip(local_group["params"], params):
                    if i in local["state"]:
                        state_dict["state"][index[p]] = local["state"][i]
        state_dict["state"] = dict(sorted(state_dict["state"].items()))
        return state_dict

    def load_state_dict(self, state_dict):
        """Loads a full optimizer state (from state_dict(), or from a plain optimizer of optimizer_class
        over the same parameter groups): the hyperparameters into every group, and into the local
        optimizer the state of this rank's parameters."""
        super().load_state_dict({"state": {}, "param_groups": state_dict["param_groups"]})
        saved = {i: p for saved_group, g in zip(state_dict["param_groups"], self.param_groups)
                 for i, p in zip(saved_group["params"], g["params"])}
        local_index = {p: i for i, p in enumerate(p for ps in self._partition[self.rank] for p in ps)}
        groups, start = [], 0
        for g, params in zip(self.param_groups, self._partition[self.rank]):
            groups.append(dict(g, params=list(range(start, start + len(params)))))
            start += len(params)
        state = {local_index[saved[key]]: value for key, value in state_dict["state"].items()
                 if key in saved and saved[key] in local_index}
        self.optim.load_state_dict({"state": state, "param_groups": groups})


def _partition_parameters(param_groups, world_size):
    """PyTorch's partition, [rank][group index] -> parameters: each group's parameters sorted by size
    (largest first, ties in their order), each given to the rank with the fewest elements so far
    (the lowest such rank), the counts running over all groups."""
    sizes = [0] * world_size
    partition = [[] for _ in range(world_size)]
    for g in param_groups:
        per_rank = [[] for _ in range(world_size)]
        for p in sorted(g["params"], key=lambda t: t.numel(), reverse=True):
            rank = sizes.index(min(sizes))
            per_rank[rank].append(p)
            sizes[rank] += p.numel()
        for rank, params in enumerate(per_rank):
            partition[rank].append(params)
    return partition


def _sync_param_groups(source, destination):
    """Copies every hyperparameter (every key but 'params') of the source groups into the destination groups."""
    for src, dst in zip(source, destination):
        dst.update((k, v) for k, v in src.items() if k != "params")


def _first_parameter(param_groups):
    for g in param_groups:
        if g["params"]:
            return g["params"][0]
    raise _C.ValueError("ZeroRedundancyOptimizer got an empty parameter list (every parameter group is empty)")


def _check_same_dense_type(param_groups):
    params = [p for g in param_groups for p in g["params"]]
    for p in params[1:]:
        if p.dtype != params[0].dtype or p.device.type != params[0].device.type:
            raise _C.ValueError("ZeroRedundancyOptimizer only supports using the same dense type for all parameters "
                                f"but got both {params[0].dtype} on {params[0].device.type} and {p.dtype} on "
                                f"{p.device.type}")


def _encode(obj):
    """obj as rustytorch.save writes it, in bytes."""
    buffer = io.BytesIO()
    save(obj, buffer)
    return buffer.getvalue()
