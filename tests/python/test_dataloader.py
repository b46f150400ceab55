"""utils.data: DataLoader with and without worker processes (order, content, seeded shuffling,
worker errors, timeouts, persistent workers, IterableDataset sharding, no process left behind),
samplers, datasets, random_split and default_collate / default_convert against PyTorch's types."""
import collections
import gc
import multiprocessing
import os
import random
import time

import numpy as np
import pytest

import rustytorch as rt
from rustytorch.utils.data import (
    BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler, SequentialSampler,
    Subset, SubsetRandomSampler, TensorDataset, WeightedRandomSampler, default_collate, default_convert,
    get_worker_info, random_split,
)

Point = collections.namedtuple("Point", ["x", "y"])


@pytest.fixture(autouse=True)
def no_leftover_workers():
    yield
    gc.collect()
    assert multiprocessing.active_children() == []


def generator(seed):
    return rt.Generator().manual_seed(seed)


def flat(batches):
    """A loader's output as nested Python values (tensors as (dtype, values)), for exact comparison."""
    if isinstance(batches, rt.Tensor):
        return (str(batches.dtype), batches.tolist())
    if isinstance(batches, dict):
        return {k: flat(v) for k, v in batches.items()}
    if isinstance(batches, (list, tuple)):
        return type(batches).__name__, [flat(b) for b in batches]
    return batches


def sample(i, lib=rt):
    """Sample i mixes every type default_collate handles (its tensor from lib: rustytorch or torch)."""
    return {"t": lib.full((2,), float(i)), "a": np.arange(3, dtype=np.int32) + i, "f": 0.5 * i, "i": i,
            "b": i % 2 == 0, "s": f"s{i}", "p": Point(i, np.float32(i)), "l": [i, (i, -i)]}


class Samples(Dataset):
    def __len__(self):
        return 11

    def __getitem__(self, i):
        return sample(i)


class Failing(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError(f"sample {i} is broken")
        return i


class Missing(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"a": 1}["b"] if i == 1 else i


class BadShapes(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return rt.stack([rt.zeros(2), rt.zeros(3)])


class Slow(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            time.sleep(3)
        return i


class Dies(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 1:
            os._exit(3)
        return i


class Unpicklable(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return lambda: i


class Pid(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return os.getpid()


class RandomDraws(Dataset):
    """Each sample: the worker's id and seed, and one draw from each random source."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = get_worker_info()
        return info.id, info.seed, rt.rand(1).item(), float(np.random.rand()), random.random()


class Shards(IterableDataset):
    """range(start, end), split between the workers as PyTorch's documentation does it."""

    def __init__(self, start, end):
        self.start, self.end = start, end

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.start, self.end))
        per_worker = -(-(self.end - self.start) // info.num_workers)
        begin = self.start + info.id * per_worker
        return iter(range(begin, min(begin + per_worker, self.end)))

    def __len__(self):
        return self.end - self.start


@pytest.mark.parametrize("batch_size, drop_last", [(3, False), (3, True), (1, False)])
def test_workers_deliver_the_batches_of_the_main_process_in_order(batch_size, drop_last):
    expected = [flat(b) for b in DataLoader(Samples(), batch_size=batch_size, drop_last=drop_last)]
    got = [flat(b) for b in DataLoader(Samples(), batch_size=batch_size, drop_last=drop_last, num_workers=3,
                                       prefetch_factor=1)]
    assert got == expected and len(expected) == len(DataLoader(Samples(), batch_size=batch_size, drop_last=drop_last))
    first = expected[0] if batch_size == 3 else None
    if first is not None:
        assert first == flat(default_collate([sample(i) for i in range(3)]))


def test_collate_types_are_pytorch_s():
    batch = default_collate([sample(i) for i in range(3)])
    assert batch["t"].dtype == rt.float32 and batch["t"].shape == (3, 2)
    assert batch["a"].dtype == rt.int32 and batch["a"].tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 4]]
    assert batch["f"].dtype == rt.float64 and batch["f"].tolist() == [0.0, 0.5, 1.0]
    assert batch["i"].dtype == rt.int64 and batch["b"].dtype == rt.bool and batch["b"].tolist() == [True, False, True]
    assert batch["s"] == ["s0", "s1", "s2"]
    assert isinstance(batch["p"], Point) and batch["p"].y.dtype == rt.float32 and batch["p"].x.dtype == rt.int64
    assert isinstance(batch["l"], list) and isinstance(batch["l"][1], list) and batch["l"][1][1].tolist() == [0, -1, -2]
    with pytest.raises(ValueError, match="same length"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="object"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="dtype <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])
    with pytest.raises(rt.ShapeError):
        default_collate([rt.zeros(2), rt.zeros(3)])
    converted = default_convert({"a": np.arange(2), "t": (np.float64(1.5), "x"), "p": Point(np.ones(1), 2)})
    assert converted["a"].dtype == rt.int64 and isinstance(converted["t"], list)
    assert converted["t"][0].dtype == rt.float64 and converted["t"][1] == "x" and converted["p"].x.tolist() == [1.0]


def test_collate_matches_pytorch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate

    def normalized(x, tensor_type):
        if isinstance(x, tensor_type):
            return ("tensor", str(x.dtype).split(".")[-1], x.tolist())
        if isinstance(x, dict):
            return {k: normalized(v, tensor_type) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x).__name__, [normalized(v, tensor_type) for v in x]
        return x

    ours = default_collate([sample(i) for i in range(4)])
    theirs = torch_collate([sample(i, torch) for i in range(4)])
    assert normalized(ours, rt.Tensor) == normalized(theirs, torch.Tensor)


def test_tensor_dataset_batches_equal_collated_samples(device):
    x, y = rt.randn(10, 3, device=device), rt.arange(10, device=device)
    ds = TensorDataset(x, y)
    fast = list(DataLoader(ds, batch_size=4, sampler=[9, 0, 3, 3, 7, 1]))
    slow = list(DataLoader(ds, batch_size=4, sampler=[9, 0, 3, 3, 7, 1], collate_fn=lambda b: default_collate(b)))
    assert isinstance(fast[0], list) and [flat(b) for b in fast] == [flat(b) for b in slow]
    assert fast[0][1].tolist() == [9, 0, 3, 3] and str(fast[0][0].device) == str(x.device)
    with pytest.raises(rt.ShapeError, match=r"\(3,\), \(4,\)"):
        TensorDataset(rt.zeros(3), rt.zeros(4))


def test_seeded_shuffle_is_reproducible_and_the_same_with_workers():
    ds = TensorDataset(rt.arange(23))
    orders = [[b[0].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=generator(7),
                                                 num_workers=w)] for w in (0, 2, 0)]
    assert orders[0] == orders[1] == orders[2]
    order = sum(orders[0], [])
    assert sorted(order) == list(range(23)) and order != list(range(23))
    other = sum((b[0].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=generator(8))), [])
    assert other != order
    loader = DataLoader(ds, batch_size=23, shuffle=True, generator=generator(7))
    assert [b[0].tolist() for b in loader] != [b[0].tolist() for b in loader]  # each epoch a new order
    rt.manual_seed(3)
    a = [b[0].tolist() for b in DataLoader(ds, batch_size=23, shuffle=True)]
    rt.manual_seed(3)
    assert a == [b[0].tolist() for b in DataLoader(ds, batch_size=23, shuffle=True)]


def test_worker_seeds_differ_and_follow_the_generator():
    def draws(seed):
        return [[t.tolist() for t in b] for b in DataLoader(RandomDraws(), batch_size=2, num_workers=2,
                                                             generator=generator(seed))]

    first = draws(0)
    assert first == draws(0) and first != draws(1)
    (ids, seeds, *values), (ids2, seeds2, *values2) = first
    assert ids == [0, 0] and ids2 == [1, 1] and seeds2[0] == seeds[0] + 1
    assert all(len(set(a + b)) == 4 for a, b in zip(values, values2))


def test_worker_exception_is_reraised_with_the_worker_traceback():
    loader = DataLoader(Failing(), batch_size=2, num_workers=2)
    got = []
    with pytest.raises(ValueError) as info:
        for b in loader:
            got.append(b.tolist())
    assert got == [[0, 1], [2, 3]]
    message = str(info.value)
    assert "Caught ValueError in DataLoader worker process 0" in message
    assert "sample 5 is broken" in message and "in __getitem__" in message and "Traceback" in message
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 1"):
        list(DataLoader(Missing(), batch_size=1, num_workers=2))
    with pytest.raises(rt.ShapeError, match="stack"):
        list(DataLoader(BadShapes(), num_workers=1))
    with pytest.raises(ValueError, match="sample 5 is broken"):
        list(DataLoader(Failing(), batch_size=2))
    del info


def test_unpicklable_samples_raise_instead_of_hanging():
    with pytest.raises(Exception, match="DataLoader worker process 0"):
        list(DataLoader(Unpicklable(), batch_size=None, num_workers=1, timeout=20))


def test_timeout_and_dead_workers_raise():
    start = time.monotonic()
    with pytest.raises(rt.Error, match="timeout=0.3"):
        list(DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.3))
    with pytest.raises(rt.Error, match="exit code 3"):
        list(DataLoader(Dies(), batch_size=1, num_workers=1, timeout=20))
    assert time.monotonic() - start < 10
    fast = DataLoader(Slow(), batch_size=1, sampler=[0, 1, 3], num_workers=1, timeout=20)
    assert [b.item() for b in fast] == [0, 1, 3]


def test_workers_stop_when_the_iterator_is_deleted_unless_persistent():
    it = iter(DataLoader(Pid(), batch_size=1, num_workers=2))
    pids = {next(it).item(), next(it).item()}
    assert len(pids) == 2 and {p.pid for p in multiprocessing.active_children()} == pids
    del it
    gc.collect()
    assert multiprocessing.active_children() == []

    loader = DataLoader(Pid(), batch_size=2, num_workers=2, persistent_workers=True)
    epochs = [[b.tolist() for b in loader] for _ in range(2)]
    partial = next(iter(loader)).tolist()  # an abandoned epoch, then a full one
    assert epochs[0] == epochs[1] == [b.tolist() for b in loader] and partial == epochs[0][0]
    assert len(multiprocessing.active_children()) == 2
    non_persistent = DataLoader(Pid(), batch_size=4, num_workers=1)
    assert next(iter(non_persistent)).tolist() != next(iter(non_persistent)).tolist()
    del loader, non_persistent


def test_iterable_dataset_with_workers_is_sharded_by_worker_info():
    assert [b.tolist() for b in DataLoader(Shards(0, 10), batch_size=2)] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    # each worker's batches in turn, PyTorch's order
    got = [b.tolist() for b in DataLoader(Shards(0, 10), batch_size=2, num_workers=2)]
    assert got == [[0, 1], [5, 6], [2, 3], [7, 8], [4], [9]]
    assert [b.tolist() for b in DataLoader(Shards(0, 10), batch_size=2, num_workers=2, drop_last=True)] == [
        [0, 1], [5, 6], [2, 3], [7, 8]]
    assert list(DataLoader(Shards(0, 5), batch_size=None, num_workers=3)) == [0, 2, 4, 1, 3]
    loader = DataLoader(Shards(0, 6), batch_size=4, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in loader] == [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]]
    assert len(DataLoader(Shards(0, 10), batch_size=4)) == 3
    del loader


def test_worker_init_fn_and_spawned_workers():
    seen = multiprocessing.get_context("fork").Queue()
    list(DataLoader(Pid(), num_workers=2, worker_init_fn=seen.put))
    assert sorted([seen.get(timeout=5), seen.get(timeout=5)]) == [0, 1]
    ds = TensorDataset(rt.arange(6).reshape(3, 2).to(rt.bfloat16), rt.tensor([True, False, True]))
    got = list(DataLoader(ds, batch_size=2, num_workers=1, multiprocessing_context="spawn", timeout=60))
    assert [flat(b) for b in got] == [flat(b) for b in DataLoader(ds, batch_size=2)]


class Tensors(Dataset):
    """Tensors of every kind that must cross processes intact."""

    def __len__(self):
        return 1

    def __getitem__(self, i):
        base = rt.arange(12, dtype=rt.float64).reshape(3, 4)
        return {"t": base.t(), "bf16": base.to(rt.bfloat16), "f16": base.to(rt.float16), "u8": base.to(rt.uint8),
                "b": base > 5, "scalar": rt.tensor(2.5), "empty": rt.zeros(0, 3),
                "grad": rt.ones(2, requires_grad=True)}


def test_tensors_cross_processes_intact():
    (local,), (remote,) = (list(DataLoader(Tensors(), batch_size=None, num_workers=w)) for w in (0, 1))
    for k in local:
        assert remote[k].dtype == local[k].dtype and remote[k].shape == local[k].shape, k
        assert remote[k].tolist() == local[k].tolist() and remote[k].requires_grad == local[k].requires_grad, k


def test_pin_memory():
    ds = TensorDataset(rt.arange(4))
    if rt.cuda.is_available():
        batch = next(iter(DataLoader(ds, batch_size=2, pin_memory=True, num_workers=1)))
        assert batch[0].is_pinned() and batch[0].tolist() == [0, 1]
    else:
        with pytest.warns(UserWarning, match="pin_memory"):
            batch = next(iter(DataLoader(ds, batch_size=2, pin_memory=True)))
        assert batch[0].tolist() == [0, 1] and not batch[0].is_pinned()


def test_samplers():
    ds = list(range(10))
    assert list(SequentialSampler(ds)) == ds
    perm = list(RandomSampler(ds, generator=generator(1)))
    assert sorted(perm) == ds and perm == list(RandomSampler(ds, generator=generator(1)))
    more = list(RandomSampler(ds, num_samples=25, generator=generator(1)))
    assert len(more) == 25 and sorted(more[:10]) == ds and sorted(more[10:20]) == ds and more[:10] == perm
    drawn = list(RandomSampler(ds, replacement=True, num_samples=70, generator=generator(2)))
    assert len(drawn) == 70 and set(drawn) <= set(ds) and len(set(drawn)) < 70
    assert sorted(SubsetRandomSampler([3, 5, 9], generator=generator(0))) == [3, 5, 9]
    weighted = list(WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 40, generator=generator(3)))
    assert len(weighted) == 40 and set(weighted) == {1, 3}
    assert sorted(WeightedRandomSampler([1, 1, 1, 0], 3, replacement=False, generator=generator(3))) == [0, 1, 2]
    assert list(BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]] and len(BatchSampler(range(7), 3, True)) == 2
    loader = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 4, False))
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [b.tolist() for b in DataLoader(ds, sampler=SubsetRandomSampler([0, 2]), batch_size=5)] in (
        [[0, 2]], [[2, 0]])
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(ds, 0, False)
    with pytest.raises(ValueError, match="num_samples"):
        RandomSampler(ds, num_samples=0)
    with pytest.raises(rt.ShapeError):
        WeightedRandomSampler([[1.0]], 1)


def test_random_split_lengths_and_fractions():
    parts = random_split(range(10), [3, 7], generator=generator(0))
    assert [len(p) for p in parts] == [3, 7] and sorted(list(parts[0]) + list(parts[1])) == list(range(10))
    again = random_split(range(10), [3, 7], generator=generator(0))
    assert list(again[0]) == list(parts[0])
    # floor each fraction, then deal the remainder one by one from the first split on
    assert [len(p) for p in random_split(range(10), [0.33, 0.33, 0.34])] == [4, 3, 3]
    assert [len(p) for p in random_split(range(11), [0.5, 0.5])] == [6, 5]
    assert [len(p) for p in random_split(range(7), [0.1, 0.2, 0.3, 0.4])] == [1, 2, 2, 2]
    with pytest.warns(UserWarning, match="empty"):
        assert [len(p) for p in random_split(range(2), [0.1, 0.1, 0.8])] == [1, 0, 1]
    with pytest.raises(ValueError, match="sum to 9"):
        random_split(range(10), [4, 5])
    with pytest.raises(ValueError, match="between 0 and 1"):
        random_split(range(10), [1.5, -0.5])


def test_random_split_matches_pytorch_lengths():
    torch = pytest.importorskip("torch")
    for n, fractions in [(10, [0.33, 0.33, 0.34]), (101, [0.7, 0.2, 0.1]), (5, [0.25] * 4), (3, [1.0])]:
        ours = [len(p) for p in random_split(range(n), fractions)]
        assert ours == [len(p) for p in torch.utils.data.random_split(range(n), fractions)]


def test_datasets():
    a, b = TensorDataset(rt.arange(3)), TensorDataset(rt.arange(10, 12))
    cat = a + b
    assert isinstance(cat, ConcatDataset) and len(cat) == 5 and [cat[i][0].item() for i in range(-5, 5)] == [
        0, 1, 2, 10, 11] * 2
    with pytest.raises(IndexError):
        cat[5]
    sub = Subset(cat, [4, 0])
    assert len(sub) == 2 and sub[0][0].item() == 11 and [s[0].item() for s in sub.__getitems__([1, 0])] == [0, 11]
    assert [b[0].tolist() for b in DataLoader(sub, batch_size=2)] == [[11, 0]]
    chained = Shards(0, 2) + Shards(5, 7)
    assert isinstance(chained, ChainDataset) and list(chained) == [0, 1, 5, 6] and len(chained) == 4
    with pytest.raises(ValueError, match="IterableDataset"):
        ConcatDataset([Shards(0, 2)])


def test_loader_argument_errors():
    ds = TensorDataset(rt.arange(4))
    for kwargs, match in [(dict(num_workers=-1), "num_workers"), (dict(timeout=-1), "timeout"),
                          (dict(timeout=1), "num_workers > 0"), (dict(prefetch_factor=2), "prefetch_factor"),
                          (dict(persistent_workers=True), "persistent_workers"),
                          (dict(sampler=[0, 1], shuffle=True), "sampler"),
                          (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler"),
                          (dict(batch_size=None, drop_last=True), "drop_last")]:
        with pytest.raises(ValueError, match=match):
            DataLoader(ds, **kwargs)
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Shards(0, 3), shuffle=True)
    loader = DataLoader(ds, batch_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        loader.batch_size = 3
