"""utils.data.DistributedSampler: the indices of each rank without shuffling (against hand-written
lists and torch's sampler), padding and drop_last, shuffling by randperm seeded seed + epoch, the
errors, the DataLoader over it, and a 2-process gloo run whose ranks partition the dataset each epoch.

Ranks run this file as a script (python test_distributed_sampler.py SCENARIO OUT MODULE)."""
import math

import pytest

import rustytorch as rt
import rustytorch.distributed as dist
from rustytorch.utils.data import DataLoader, DistributedSampler, TensorDataset

from dist_launch import needs_gloo, rank_main, run_scenario



def _ranks(n, world, **kwargs):
    """Each rank's indices of a dataset of n items."""
    return [list(DistributedSampler(range(n), num_replicas=world, rank=r, **kwargs)) for r in range(world)]


def _perm(n, seed):
    return rt.randperm(n, generator=rt.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("n, world, drop_last, expected", [
    (10, 3, False, [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]),   # padded with the first indices
    (10, 3, True, [[0, 3, 6], [1, 4, 7], [2, 5, 8]]),             # the tail dropped
    (12, 4, False, [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]),
    (12, 4, True, [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]),
    (2, 5, False, [[0], [1], [0], [1], [0]]),                     # padding longer than the dataset
    (3, 5, True, [[], [], [], [], []]),
    (0, 2, False, [[], []]),
    (7, 1, False, [list(range(7))]),
])
def test_unshuffled_indices(n, world, drop_last, expected):
    got = _ranks(n, world, shuffle=False, drop_last=drop_last)
    assert got == expected
    for r in range(world):
        sampler = DistributedSampler(range(n), num_replicas=world, rank=r, shuffle=False, drop_last=drop_last)
        assert len(sampler) == sampler.num_samples == len(expected[r])
        assert sampler.total_size == world * len(expected[r])


@pytest.mark.parametrize("n, world", [(1, 1), (5, 2), (9, 3), (10, 4), (3, 4), (2, 7), (16, 4), (0, 3)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_unshuffled_indices_match_torch(n, world, drop_last):
    TorchSampler = pytest.importorskip("torch.utils.data.distributed").DistributedSampler
    for r in range(world):
        theirs = TorchSampler(range(n), num_replicas=world, rank=r, shuffle=False, drop_last=drop_last)
        ours = DistributedSampler(range(n), num_replicas=world, rank=r, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs) and ours.total_size == theirs.total_size


def test_shuffle_is_randperm_of_seed_plus_epoch():
    n, world, seed = 11, 3, 5
    for epoch in range(3):
        samplers = [DistributedSampler(range(n), num_replicas=world, rank=r, seed=seed) for r in range(world)]
        for s in samplers:
            s.set_epoch(epoch)
        perm = _perm(n, seed + epoch)
        padded = perm + perm[:world * math.ceil(n / world) - n]
        got = [list(s) for s in samplers]
        assert got == [padded[r::world] for r in range(world)]
        assert sorted(i for g in got for i in g) == sorted(padded) and set(padded) == set(range(n))
        assert [list(s) for s in samplers] == got  # the same order on every pass of one epoch
    orders = []
    for epoch in range(4):
        s = DistributedSampler(range(50), num_replicas=2, rank=0, seed=seed)
        s.set_epoch(epoch)
        orders.append(list(s))
    assert len({tuple(o) for o in orders}) == 4  # every epoch reshuffles
    other_seed = DistributedSampler(range(50), num_replicas=2, rank=0, seed=seed + 100)
    assert list(other_seed) != orders[0]
    dropped = _ranks(n, world, seed=seed, drop_last=True)
    assert dropped == [_perm(n, seed)[:9][r::world] for r in range(world)]


def test_sampler_in_a_dataloader():
    ds = TensorDataset(rt.arange(10) * 10, rt.arange(10))
    sampler = DistributedSampler(ds, num_replicas=3, rank=1, shuffle=False)
    loader = DataLoader(ds, batch_size=3, sampler=sampler)
    assert len(loader) == 2
    batches = [(x.tolist(), y.tolist()) for x, y in loader]
    assert batches == [([10, 40, 70], [1, 4, 7]), ([0], [0])]
    shuffled = DistributedSampler(ds, num_replicas=2, rank=0, seed=7)
    shuffled.set_epoch(2)
    got = [i for _, y in DataLoader(ds, batch_size=4, sampler=shuffled) for i in y.tolist()]
    assert got == _perm(10, 9)[0::2]


def test_errors():
    with pytest.raises(ValueError, match=r"invalid rank 3.*\[0, 2\].*num_replicas=3"):
        DistributedSampler(range(4), num_replicas=3, rank=3)
    with pytest.raises(ValueError, match=r"invalid rank -1.*num_replicas=2"):
        DistributedSampler(range(4), num_replicas=2, rank=-1)
    assert not dist.is_initialized()
    for kwargs in ({}, {"num_replicas": 2}, {"rank": 0}):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            DistributedSampler(range(4), **kwargs)


# ----------------------------------------------------------------------------------------------------
# Two ranks (the ranks' side, then the test).
# ----------------------------------------------------------------------------------------------------
def scenario_epochs(torch, dist, out):
    ds = TensorDataset(torch.arange(11))
    sampler = DistributedSampler(ds, seed=3)  # num_replicas and rank from the default group
    loader = DataLoader(ds, batch_size=4, sampler=sampler)
    out["lengths"] = [sampler.num_replicas, sampler.rank, len(sampler), len(loader)]
    for epoch in range(3):
        sampler.set_epoch(epoch)
        out[f"epoch{epoch}"] = [i for (batch,) in loader for i in batch.tolist()]
    out["drop_last"] = list(DistributedSampler(ds, shuffle=False, drop_last=True))


@needs_gloo
def test_two_ranks_partition_the_dataset_every_epoch(tmp_path):
    results = run_scenario(__file__, "epochs", 2, tmp_path)
    assert [r["lengths"] for r in results] == [[2, 0, 6, 2], [2, 1, 6, 2]]
    epochs = []
    for epoch in range(3):
        got = [r[f"epoch{epoch}"] for r in results]
        perm = _perm(11, 3 + epoch)
        assert got == [(perm + perm[:1])[r::2] for r in range(2)]
        assert sorted(got[0] + got[1]) == sorted(list(range(11)) + perm[:1])  # the dataset plus one repeat
        epochs.append(got)
    assert epochs[0] != epochs[1] != epochs[2] != epochs[0]
    assert [r["drop_last"] for r in results] == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]


if __name__ == "__main__":
    rank_main(globals())
