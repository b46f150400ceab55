"""What runs in a DataLoader worker process, and what crosses between it and the main process:
the worker loop (fetch and collate the batches it is sent, in its own seeded RNG state), WorkerInfo
and get_worker_info(), exceptions carried back with the worker's traceback, and tensors pickled
as their bytes (multiprocessing's ForkingPickler learns rustytorch tensors here; they are rebuilt
on their device in the receiving process)."""
import dataclasses
import os
import queue
import random
import sys
import traceback
from multiprocessing.reduction import ForkingPickler

import numpy as np

from ... import _C
from .collate import default_collate
from .dataset import TensorDataset

#: Seconds between a worker's checks that its parent is still alive (and the main process's checks
#: that its workers are).
POLL_INTERVAL = 0.5


def _rebuild_tensor(data, dtype, shape, device, requires_grad):
    t = _C.frombuffer(data, dtype=dtype).reshape(shape) if len(data) else _C.empty(shape, dtype=dtype)
    if device != "cpu":
        t = t.to(device)
    return t.requires_grad_(True) if requires_grad else t


def _reduce_tensor(t):
    return _rebuild_tensor, (bytearray(t.detach()._raw_bytes()), t.dtype, tuple(t.shape), str(t.device),
                            t.requires_grad)


ForkingPickler.register(_C.Tensor, _reduce_tensor)


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """What get_worker_info() returns inside a worker: its id, the number of workers, its seed
    (base seed + id, also given to random, numpy and rustytorch) and its copy of the dataset."""
    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info = None


def get_worker_info():
    """This worker's WorkerInfo in a DataLoader worker process, None in the main process."""
    return _worker_info


class _KeyErrorMessage(str):
    """A KeyError's message printed as is (KeyError would print the repr of a multi-line traceback)."""

    def __repr__(self):
        return self


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process with the worker's traceback."""

    def __init__(self, worker_id):
        exc_type = sys.exc_info()[0]
        self.exc_type = exc_type
        self.msg = (f"Caught {exc_type.__name__} in DataLoader worker process {worker_id}.\nOriginal "
                    + traceback.format_exc())

    def reraise(self):
        msg = _KeyErrorMessage(self.msg) if self.exc_type is KeyError else self.msg
        try:
            exc = self.exc_type(msg)
        except Exception:
            exc = RuntimeError(msg)
        try:
            raise exc
        finally:
            del exc  # a local referring to the exception would keep its frames (and the iterator) in a cycle


@dataclasses.dataclass(frozen=True)
class IterableEnd:
    """A worker's copy of an IterableDataset is exhausted."""
    worker_id: int


@dataclasses.dataclass(frozen=True)
class ResumeIteration:
    """Persistent workers: start a new pass over the dataset."""


class MapFetcher:
    """Samples of a map-style dataset for an index (or a list of them, collated). A TensorDataset
    with default_collate is batched by one index_select per tensor."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        self.tensor_batches = (auto_collation and collate_fn is default_collate and isinstance(dataset, TensorDataset)
                               and type(dataset).__getitem__ is TensorDataset.__getitem__)

    def fetch(self, index):
        if self.tensor_batches:
            rows = _C.from_numpy(np.asarray(index, dtype=np.int64))
            return [t.index_select(0, rows.to(t.device)) for t in self.dataset.tensors]
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.collate_fn(self.dataset.__getitems__(index))
        return self.collate_fn([self.dataset[i] for i in index])


class IterableFetcher:
    """The next sample (or batch of len(index) samples, collated) of an iterable dataset; raises
    StopIteration at its end (and for a short last batch under drop_last)."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        data = []
        for _ in index:
            try:
                data.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last):
    return (IterableFetcher if iterable else MapFetcher)(dataset, auto_collation, collate_fn, drop_last)


def _seed_everything(seed, worker_id, base_seed):
    random.seed(seed)
    _C.manual_seed(seed)
    # numpy takes 32-bit words: mix worker id and base seed (the same words PyTorch's workers use)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed & 0xFFFFFFFF, base_seed >> 32, 0]).generate_state(4))


def _pickled(idx, data, worker_id):
    """(idx, data) as ForkingPickler bytes, pickled here so that an unpicklable result becomes the
    error it raised instead of being lost in the queue's feeder thread."""
    try:
        return bytes(ForkingPickler.dumps((idx, data)))
    except Exception:
        error = ExceptionWrapper(worker_id)
        try:
            return bytes(ForkingPickler.dumps((idx, error)))
        except Exception:
            error.exc_type = RuntimeError  # the exception's class itself cannot be pickled
            return bytes(ForkingPickler.dumps((idx, error)))


def worker_loop(iterable, dataset, index_queue, result_queue, done_event, auto_collation, collate_fn, drop_last,
                base_seed, init_fn, worker_id, num_workers):
    """Serves (task index, sample index or batch) requests from index_queue until it gets None, its
    parent dies, or (after done_event) the main process stops reading. Results go to result_queue
    as pickled (task index, data | ExceptionWrapper | IterableEnd)."""
    global _worker_info
    parent = os.getppid()
    try:
        _C.set_num_threads(1)
        seed = base_seed + worker_id
        _seed_everything(seed, worker_id, base_seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_error = ExceptionWrapper(worker_id)
        ended = False
        while os.getppid() == parent:
            try:
                request = index_queue.get(timeout=POLL_INTERVAL)
            except queue.Empty:
                if done_event.is_set():
                    break
                continue
            if request is None:
                break
            if isinstance(request, ResumeIteration):
                result_queue.put(_pickled(request, None, worker_id))
                ended = False
                fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
                continue
            if done_event.is_set() or ended:
                continue
            idx, index = request
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if not iterable:
                        data = ExceptionWrapper(worker_id)
                    else:
                        data, ended = IterableEnd(worker_id), True
                except Exception:
                    data = ExceptionWrapper(worker_id)
            result_queue.put(_pickled(idx, data, worker_id))
            del data, request
    except KeyboardInterrupt:
        pass
    finally:
        _worker_info = None
    if done_event.is_set():
        result_queue.cancel_join_thread()
        result_queue.close()
