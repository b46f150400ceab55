"""Datasets: Dataset (map-style, indexed), IterableDataset (a stream), TensorDataset, Subset,
ConcatDataset, ChainDataset, and random_split with PyTorch's rounding of fractional lengths."""
import bisect
import itertools
import math
import warnings

from ... import _C


class Dataset:
    """A map-style dataset: __getitem__(index) and usually __len__(). `a + b` concatenates."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read by iterating over it (__iter__). With DataLoader workers each worker iterates
    its own copy; get_worker_info() tells the copy which share of the stream to produce."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors); every tensor has the same first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise _C.ValueError("TensorDataset needs at least one tensor")
        if any(t.dim() == 0 for t in tensors) or any(t.size(0) != tensors[0].size(0) for t in tensors):
            raise _C.ShapeError("TensorDataset: the tensors must share their first dimension, got shapes "
                                + ", ".join(str(tuple(t.shape)) for t in tensors))
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise _C.ValueError("ConcatDataset: datasets must not be empty")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise _C.ValueError("ConcatDataset does not take an IterableDataset; use ChainDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise _C.IndexError(f"ConcatDataset: index {idx} is out of range for length {len(self)}")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        if which == len(self.datasets):
            raise _C.IndexError(f"ConcatDataset: index {idx} is out of range for length {len(self)}")
        return self.datasets[which][idx - (self.cumulative_sizes[which - 1] if which else 0)]


class ChainDataset(IterableDataset):
    """The streams of several iterable datasets, one after the other."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise _C.ValueError(f"ChainDataset only chains IterableDatasets, got a {type(d).__name__}")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    """The samples of dataset at the given indices."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Disjoint random Subsets of the given lengths, or of fractions of len(dataset) summing to 1
    (floored, then the remainder dealt out one by one from the first split on, as PyTorch does).
    The order comes from randperm(generator=generator), the global generator when None."""
    lengths = list(lengths)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise _C.ValueError(f"random_split: fraction {frac} at index {i} is not between 0 and 1")
        counts = [math.floor(n * frac) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, c in enumerate(counts):
            if c == 0:
                warnings.warn(f"random_split: split {i} is empty", stacklevel=2)
        lengths = counts
    if sum(lengths) != n:
        raise _C.ValueError(f"random_split: the lengths {lengths} sum to {sum(lengths)}, but the dataset holds {n} "
                            "samples")
    indices = _C.randperm(n, generator=generator).tolist()
    return [Subset(dataset, indices[end - length:end]) for end, length in zip(itertools.accumulate(lengths), lengths)]
