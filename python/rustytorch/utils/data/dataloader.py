"""DataLoader: batches of a dataset in the order of its sampler, read in the main process
(num_workers=0) or by worker processes (fork where available). Workers collate their batches and
send them back pickled (tensors as bytes); the main process hands them out in the order the
num_workers=0 loader would, re-raises a worker's exception with the worker's traceback, honours
timeout, and stops its workers when the iterator is exhausted or deleted (at the loader's end
with persistent_workers)."""
import atexit
import multiprocessing
import queue
import time
import warnings
from multiprocessing.reduction import ForkingPickler

from ... import _C, cuda
from . import _worker
from .collate import default_collate, default_convert, map_nested
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler, _seed_from


class _InfiniteConstantSampler:
    """The sampler of an IterableDataset: None forever (the dataset decides where it ends)."""

    def __iter__(self):
        while True:
            yield None


def _default_context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


class DataLoader:
    _initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise _C.ValueError(f"DataLoader: num_workers must be a non-negative integer, got {num_workers!r}")
        if timeout < 0:
            raise _C.ValueError(f"DataLoader: timeout must be >= 0, got {timeout}")
        if timeout > 0 and num_workers == 0:
            raise _C.ValueError(f"DataLoader: timeout={timeout} bounds the wait for worker processes; it needs "
                                "num_workers > 0")
        if num_workers == 0 and prefetch_factor is not None:
            raise _C.ValueError("DataLoader: prefetch_factor needs num_workers > 0 (leave it None otherwise)")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor <= 0:
            raise _C.ValueError(f"DataLoader: prefetch_factor must be positive, got {prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise _C.ValueError("DataLoader: persistent_workers needs num_workers > 0")
        if multiprocessing_context is not None:
            if num_workers == 0:
                raise _C.ValueError("DataLoader: multiprocessing_context needs num_workers > 0")
            if isinstance(multiprocessing_context, str):
                multiprocessing_context = multiprocessing.get_context(multiprocessing_context)
        if isinstance(dataset, IterableDataset):
            self._iterable = True
            if shuffle not in (None, False):
                raise _C.ValueError(f"DataLoader with an IterableDataset: shuffle must be unset, got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise _C.ValueError("DataLoader with an IterableDataset: sampler and batch_sampler must be unset "
                                    "(the dataset decides the order)")
        else:
            self._iterable = False
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise _C.ValueError("DataLoader: sampler and shuffle=True exclude each other")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise _C.ValueError("DataLoader: batch_sampler excludes batch_size, shuffle, sampler and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise _C.ValueError("DataLoader: batch_size=None (no batching) excludes drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.prefetch_factor, self.timeout = num_workers, prefetch_factor, timeout
        self.pin_memory, self.worker_init_fn, self.persistent_workers = pin_memory, worker_init_fn, persistent_workers
        self.multiprocessing_context = multiprocessing_context
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._iterator = None
        self._initialized = True

    def __setattr__(self, name, value):
        if self._initialized and name in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                          "persistent_workers"):
            raise _C.ValueError(f"DataLoader: {name} cannot be changed after the DataLoader is built")
        super().__setattr__(name, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self._index_sampler)

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if not self.persistent_workers:
            return _MultiProcessIter(self)
        if self._iterator is None or self._iterator._shutdown:
            self._iterator = _MultiProcessIter(self)
        else:
            self._iterator._reset()
        return self._iterator


def _pin(data):
    """data with every tensor in page-locked memory (tensors nested in mappings and sequences)."""
    return map_nested(data, lambda d: hasattr(d, "pin_memory"), lambda d: d.pin_memory())


class _BaseIter:
    """What both iterators share: the loader's settings (no reference to the loader itself, so a
    persistent iterator never keeps it alive), the index stream and the pass's base seed."""

    def __init__(self, loader):
        self._dataset, self._iterable = loader.dataset, loader._iterable
        self._auto_collation, self._drop_last = loader._auto_collation, loader.drop_last
        self._index_sampler, self._collate_fn = loader._index_sampler, loader.collate_fn
        self._num_workers, self._timeout = loader.num_workers, loader.timeout
        if loader.pin_memory and not cuda.is_available():
            warnings.warn("DataLoader: pin_memory=True but CUDA is not available; batches stay in pageable memory",
                          stacklevel=4)
        self._pin_memory = loader.pin_memory and cuda.is_available()
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = _seed_from(loader.generator)  # drawn as PyTorch does, so orders match num_workers=0

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._index_sampler)

    def _deliver(self, data):
        return _pin(data) if self._pin_memory else data


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = _worker.make_fetcher(self._iterable, self._dataset, self._auto_collation, self._collate_fn,
                                             self._drop_last)

    def __next__(self):
        return self._deliver(self._fetcher.fetch(next(self._sampler_iter)))


class _MultiProcessIter(_BaseIter):
    """Sends task (number, indices) to the workers in turn, prefetch_factor tasks per worker ahead,
    and hands the results out in task order, keeping early arrivals until their turn."""

    def __init__(self, loader):
        super().__init__(loader)
        ctx = loader.multiprocessing_context or _default_context()
        self._prefetch_factor, self._persistent = loader.prefetch_factor, loader.persistent_workers
        self._result_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        self._shutdown = False
        try:
            for i in range(self._num_workers):
                index_queue = ctx.Queue()
                index_queue.cancel_join_thread()
                w = ctx.Process(target=_worker.worker_loop, daemon=True, args=(
                    self._iterable, self._dataset, index_queue, self._result_queue, self._done_event,
                    self._auto_collation, self._collate_fn, self._drop_last, self._base_seed, loader.worker_init_fn,
                    i, self._num_workers))
                w.start()
                self._index_queues.append(index_queue)
                self._workers.append(w)
            self._reset(first=True)
        except BaseException:
            self._shutdown_workers()
            raise

    def _reset(self, first=False):
        if not first:
            self._sampler_iter = iter(self._index_sampler)
        self._send_idx = 0  # the next task's number
        self._rcvd_idx = 0  # the task whose result is handed out next
        self._task_info = {}  # task number -> (worker,) while out, (worker, data) once arrived early
        self._workers_status = [True] * self._num_workers
        self._next_worker = 0
        if not first:
            for q in self._index_queues:
                q.put(_worker.ResumeIteration())
            pending = self._num_workers
            while pending:
                idx, _ = self._get_data()
                if isinstance(idx, _worker.ResumeIteration):
                    pending -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker = self._next_worker
            self._next_worker = (worker + 1) % self._num_workers
            if self._workers_status[worker]:
                break
        else:
            return
        self._index_queues[worker].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker,)
        self._send_idx += 1

    def _get_data(self):
        """The next (task number, data) from any worker, watching for dead workers and the timeout."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _worker.POLL_INTERVAL if deadline is None else max(0.0, min(_worker.POLL_INTERVAL,
                                                                            deadline - time.monotonic()))
            try:
                return ForkingPickler.loads(self._result_queue.get(timeout=wait))
            except queue.Empty:
                pass
            dead = [w for w, alive in zip(self._workers, self._workers_status) if alive and not w.is_alive()]
            if dead:
                codes = ", ".join(f"{w.pid} (exit code {w.exitcode})" for w in dead)
                self._shutdown_workers()
                raise _C.Error(f"DataLoader: worker process(es) {codes} exited unexpectedly")
            if deadline is not None and time.monotonic() >= deadline:
                raise _C.Error(f"DataLoader: no batch arrived from the workers within timeout={self._timeout} s")

    def __next__(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info and (len(info) == 2 or self._workers_status[info[0]]):
                    break
                self._task_info.pop(self._rcvd_idx, None)  # sent to a worker whose dataset copy ended
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                _, data = self._task_info.pop(self._rcvd_idx)
                self._rcvd_idx += 1
                return self._process(data)
            idx, data = self._get_data()
            if isinstance(data, _worker.IterableEnd):
                self._workers_status[data.worker_id] = False
                if not self._persistent:
                    self._index_queues[data.worker_id].put(None)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)
                continue
            self._task_info.pop(idx)
            self._rcvd_idx += 1
            return self._process(data)

    def _process(self, data):
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return self._deliver(data)

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        try:
            self._done_event.set()
            for q, w in zip(self._index_queues, self._workers):
                if w.is_alive():
                    q.put(None)
            for w in self._workers:
                w.join(timeout=_worker.POLL_INTERVAL)
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
            self._result_queue.cancel_join_thread()
            self._result_queue.close()
        finally:
            for w in self._workers:
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=_worker.POLL_INTERVAL)
                if w.is_alive():
                    w.kill()
                    w.join()

    def __del__(self):
        # at interpreter exit multiprocessing itself ends the (daemonic) workers
        if hasattr(self, "_shutdown") and not _exiting:
            self._shutdown_workers()


_exiting = False


@atexit.register
def _mark_exiting():
    global _exiting
    _exiting = True
