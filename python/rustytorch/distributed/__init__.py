"""rustytorch.distributed: torch.distributed's API over the library's process groups (rtx::dist).

init_process_group (env:// or tcp://host:port, or a Store), the default group and new_group, the
collectives (all_reduce, broadcast, reduce, all_gather, all_gather_into_tensor, reduce_scatter_tensor,
all_to_all_single, barrier), the object collectives (all_gather_object, broadcast_object_list,
gather_object, scatter_object_list), point-to-point send/recv/isend/irecv, the stores (TCPStore, PrefixStore)
and the errors (DistError, DistBackendError, DistStoreError). The gloo backend runs the collectives of
CPU tensors, the nccl backend those of CUDA tensors, and backend=None both (in builds with NCCL; get_backend
then says "undefined", as PyTorch's does); every function here is a thin call into the C++ layer.
"""

from datetime import timedelta

from .. import _C
from . import _objects

_d = _C._distributed

Store = _d.Store
TCPStore = _d.TCPStore
PrefixStore = _d.PrefixStore
ReduceOp = _d.ReduceOp
Work = _d.Work
ProcessGroup = _d.ProcessGroup
DistError = _C.DistError
DistBackendError = _C.DistBackendError
DistStoreError = _C.DistStoreError

# torch.distributed.constants.default_pg_timeout
default_pg_timeout = timedelta(minutes=30)

__all__ = [
    "Store", "TCPStore", "PrefixStore", "ReduceOp", "Work", "ProcessGroup", "DistError", "DistBackendError",
    "DistStoreError", "GroupMember", "group", "is_available", "is_gloo_available", "is_nccl_available",
    "is_mpi_available", "init_process_group", "destroy_process_group", "is_initialized", "get_rank",
    "get_world_size", "get_backend", "get_global_rank", "get_group_rank", "get_process_group_ranks",
    "new_group", "barrier", "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
    "reduce_scatter_tensor", "all_to_all_single", "send", "recv", "isend", "irecv", "all_gather_object",
    "broadcast_object_list", "gather_object", "scatter_object_list",
]


class GroupMember:
    """WORLD: the default group once initialized (else None); NON_GROUP_MEMBER: what new_group returns
    to the processes outside the group."""

    WORLD = None
    NON_GROUP_MEMBER = object()


group = GroupMember


def is_available():
    """True: this build has rustytorch.distributed (the backends it has: is_gloo_available())."""
    return True


def is_gloo_available():
    return _d.is_gloo_available()


def is_nccl_available():
    """Whether this build has the nccl backend (as PyTorch's, whether or not a GPU is visible)."""
    return _d.is_nccl_available()


def is_mpi_available():
    return False


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Joins the default group: through store when given (with rank and world_size), else init_method
    ("env://", the default: MASTER_ADDR, MASTER_PORT, and RANK / WORLD_SIZE or OpenMPI's or Slurm's
    variables; or "tcp://host:port"), where rank 0 serves the store."""
    if store is not None and init_method is not None:
        raise _C.ValueError("[init_process_group] cannot specify both init_method and store")
    if store is not None and (rank < 0 or world_size <= 0):
        raise _C.ValueError("[init_process_group] rank and world_size must be given with store")
    if pg_options is not None:
        raise _C.ValueError("[init_process_group] pg_options is not supported by rustytorch's backends")
    _d.init_process_group(backend or "", init_method or "", rank, world_size,
                          default_pg_timeout if timeout is None else timeout, store)
    GroupMember.WORLD = _d.default_group()


def destroy_process_group(group=None):
    """Leaves the default group (every group when group is None or the default group)."""
    if group is None or group is GroupMember.WORLD:
        GroupMember.WORLD = None
        _d.destroy_process_group()


def is_initialized():
    return _d.is_initialized()


def _group(group):
    """The ProcessGroup of group (None: the default one), or None outside it."""
    if group is None or group is GroupMember.WORLD:
        return _d.default_group()
    if group is GroupMember.NON_GROUP_MEMBER:
        _d.default_group()  # raises before init_process_group
        return None
    return group


def get_rank(group=None):
    pg = _group(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group=None):
    pg = _group(group)
    return -1 if pg is None else pg.size()


def get_backend(group=None):
    pg = _group(group)
    if pg is None:
        raise _C.ValueError("[get_backend] this process is not in the group")
    return pg.name()


def get_process_group_ranks(group):
    """The world ranks of group's members."""
    pg = _group(group)
    return [] if pg is None else list(pg.ranks)


def get_global_rank(group, group_rank):
    pg = _group(group)
    ranks = pg.ranks
    if not 0 <= group_rank < len(ranks):
        raise _C.ValueError(f"[get_global_rank] group rank {group_rank} is not in [0, {len(ranks)})")
    return ranks[group_rank]


def get_group_rank(group, global_rank):
    return _group(group).group_rank(global_rank, "get_group_rank")


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of the given world ranks (all of them when None) with its own communicators, on backend (None:
    the default group's); every process must call it in the same order. Processes outside it get
    GroupMember.NON_GROUP_MEMBER."""
    pg = _d.new_group(list(ranks) if ranks is not None else [], timeout, backend or "")
    return GroupMember.NON_GROUP_MEMBER if pg is None else pg


def _peer(pg, rank, group_rank, what, name):
    """The group rank of a world rank argument (or of group_rank, given instead)."""
    if (rank is None) == (group_rank is None):
        raise _C.ValueError(f"[{what}] give exactly one of {name} and group_{name}")
    return group_rank if group_rank is not None else pg.group_rank(rank, what)


def _done(work, async_op):
    if async_op:
        return work
    work.wait()
    return None


def barrier(group=None, async_op=False, device_ids=None):
    pg = _group(group)
    return None if pg is None else _done(pg.barrier(), async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    pg = _group(group)
    return None if pg is None else _done(pg.all_reduce(tensor, op), async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    pg = _group(group)
    if pg is None:
        return None
    return _done(pg.broadcast(tensor, _peer(pg, src, group_src, "broadcast", "src")), async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    pg = _group(group)
    if pg is None:
        return None
    return _done(pg.reduce(tensor, _peer(pg, dst, group_dst, "reduce", "dst"), op), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    pg = _group(group)
    return None if pg is None else _done(pg.all_gather(list(tensor_list), tensor), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    pg = _group(group)
    return None if pg is None else _done(pg.all_gather_into_tensor(output_tensor, input_tensor), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    pg = _group(group)
    return None if pg is None else _done(pg.reduce_scatter_tensor(output, input, op), async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    pg = _group(group)
    if pg is None:
        return None
    work = pg.all_to_all_single(output, input, list(output_split_sizes or []), list(input_split_sizes or []))
    return _done(work, async_op)


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    pg = _group(group)
    return None if pg is None else pg.send(tensor, _peer(pg, dst, group_dst, "isend", "dst"), tag)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    pg = _group(group)
    if pg is None:
        return None
    if src is None and group_src is None:
        raise _C.ValueError("[irecv] receiving from any source (src=None) is not supported; pass src")
    return pg.recv(tensor, _peer(pg, src, group_src, "irecv", "src"), tag)


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into tensor from src; returns src (-1 outside the group)."""
    pg = _group(group)
    if pg is None:
        return -1
    if src is None and group_src is None:
        raise _C.ValueError("[recv] receiving from any source (src=None) is not supported; pass src")
    peer = _peer(pg, src, group_src, "recv", "src")
    pg.recv(tensor, peer, tag).wait()
    return pg.ranks[peer]


def all_gather_object(object_list, obj, group=None):
    """object_list[r] becomes rank r's obj (picklable), on every rank."""
    pg = _group(group)
    if pg is not None:
        _objects.all_gather_object(pg, object_list, obj)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Every rank's object_list (of one length everywhere) gets src's objects."""
    pg = _group(group)
    if pg is not None:
        _objects.broadcast_object_list(pg, object_list, _peer(pg, src, group_src, "broadcast_object_list", "src"))


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """On dst, object_gather_list[r] becomes rank r's obj; the other ranks pass None."""
    pg = _group(group)
    if pg is None:
        return
    root = _peer(pg, dst, group_dst, "gather_object", "dst")
    if pg.rank() == root and (object_gather_list is None or len(object_gather_list) != pg.size()):
        raise _C.ValueError(f"[gather_object] the destination rank needs an object_gather_list of {pg.size()} "
                            "entries")
    gathered = [None] * pg.size()
    _objects.all_gather_object(pg, gathered, obj)
    if pg.rank() == root:
        object_gather_list[:] = gathered


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None):
    """scatter_object_output_list[0] becomes src's scatter_object_input_list[this rank]."""
    pg = _group(group)
    if pg is None:
        return
    root = _peer(pg, src, group_src, "scatter_object_list", "src")
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise _C.ValueError("[scatter_object_list] scatter_object_output_list must be a list of at least one entry")
    if pg.rank() == root and (scatter_object_input_list is None or len(scatter_object_input_list) != pg.size()):
        raise _C.ValueError(f"[scatter_object_list] the source rank needs a scatter_object_input_list of "
                            f"{pg.size()} entries")
    objects = list(scatter_object_input_list) if pg.rank() == root else [None] * pg.size()
    _objects.broadcast_object_list(pg, objects, root)
    scatter_object_output_list[0] = objects[pg.rank()]
