"""Data parallelism for the bundled trainers under rtx-run (or torchrun, or ranks started by hand):
started by a launcher (RANK set), every process joins the default process group (nccl for CUDA, gloo for the CPU),
trains the model wrapped in DistributedDataParallel on its device (cuda:LOCAL_RANK on GPUs), and reads
its part of every global batch. --batch-size is per process, as in PyTorch DDP: a step of N ranks
trains on N * batch-size samples, the same contiguous span of the epoch's shuffled order that a
1-process run with N times the batch size trains on in that step, dealt to the ranks by
DistributedSampler. Rank 0 alone writes the run's files and prints; the others only report errors.
Started without a launcher nothing here changes the run."""
import os
import sys

import numpy as np

import rustytorch as rt
from .. import cuda
from .. import distributed as dist
from ..nn.parallel import DistributedDataParallel
from ..utils.data import DistributedSampler


class Group:
    """This process's place in the run: world_size, rank, local_rank; is_main for rank 0."""

    def __init__(self, world_size=1, rank=0, local_rank=0, device="cpu", distributed=False):
        self.world_size, self.rank, self.local_rank, self.device = world_size, rank, local_rank, device
        self.is_main = rank == 0
        self.distributed = distributed  # in a process group, the model in DistributedDataParallel

    def wrap(self, model):
        """model in DistributedDataParallel (on a GPU, on device_ids=[local_rank]); model itself alone."""
        if not self.distributed:
            return model
        on_gpu = rt.device(self.device).type == "cuda"
        return DistributedDataParallel(model, device_ids=[self.local_rank] if on_gpu else None)

    def part(self, order):
        """This rank's samples of an epoch whose global sample order is `order`: batch i of every rank
        lies in the span [i, i + 1) * world_size * batch_size of order (DistributedSampler's
        interleaving, cut to a multiple of world_size)."""
        if not self.distributed:
            return order
        sampler = DistributedSampler(order, shuffle=False, drop_last=True)
        return order[np.fromiter(iter(sampler), dtype=np.int64, count=len(sampler))]

    def mean(self, values):
        """The float values averaged over the ranks (all_reduce AVG); the values themselves alone."""
        if not self.distributed or not values:
            return values
        t = rt.tensor(values, dtype=rt.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        return t.tolist()

    def any(self, flag):
        """Whether flag is true on some rank (every rank gets the same answer)."""
        if not self.distributed:
            return flag
        t = rt.tensor([int(flag)], dtype=rt.int32, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def close(self):
        if self.distributed:
            dist.destroy_process_group()


def unwrapped(model):
    """The module DistributedDataParallel wraps (model itself when not wrapped): what is evaluated
    and saved, so that checkpoints have the same keys whatever the number of processes."""
    return model.module if isinstance(model, DistributedDataParallel) else model


def setup(args):
    """The Group of this process from WORLD_SIZE, RANK and LOCAL_RANK (LOCAL_RANK defaults to RANK, as
    for ranks started by hand on one machine). Started by a launcher (RANK set, or WORLD_SIZE > 1),
    even as its only process, as nanoGPT's script decides: on CUDA args.device becomes
    cuda:LOCAL_RANK (the current device too); the default process group is initialized; stdout is
    silenced on every rank but 0."""
    world = _env_int("WORLD_SIZE", 1)
    if world <= 1 and os.environ.get("RANK") is None:
        return Group(device=args.device)  # not started by a launcher
    rank = _env_int("RANK", None)
    if rank is None or not 0 <= rank < world:
        raise ValueError(f"WORLD_SIZE is {world}, so RANK must be set to one of 0..{world - 1}, got "
                         f"{os.environ.get('RANK')!r}; start the ranks with rtx-run")
    local_rank = _env_int("LOCAL_RANK", rank)
    device = rt.device(args.device)
    if device.type == "cuda":
        if device.index is not None and device.index != local_rank:
            raise ValueError(f"--device {args.device}: under rtx-run each process trains on cuda:LOCAL_RANK "
                             f"(cuda:{local_rank} here); pass --device cuda, or leave --device out")
        args.device = f"cuda:{local_rank}"
        cuda.set_device(local_rank)
    dist.init_process_group()
    if rank != 0:
        sys.stdout = open(os.devnull, "w")
    return Group(world, rank, local_rank, args.device, distributed=True)


def _env_int(name, default):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"the environment variable {name} must be an integer, got {value!r}") from None
