"""Samplers: the order in which a DataLoader reads a map-style dataset (SequentialSampler,
RandomSampler, SubsetRandomSampler, WeightedRandomSampler) and BatchSampler, which groups indices
into batches. Random orders come from rt.Generator (the generator= argument); without one, each
pass draws a fresh seed from the global generator, as PyTorch does."""
import itertools

from ... import _C
from ..._creation import as_tensor


def _seed_from(generator):
    """A 63-bit seed drawn from generator (the global generator when None)."""
    return int(_C.randint(0, 2 ** 63 - 1, (), generator=generator).item())


class Sampler:
    """Iterates over dataset indices (or, for a batch sampler, lists of them)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices each pass, or num_samples of them; with replacement,
    num_samples indices drawn uniformly."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement must be a bool, got {replacement!r}")
        self.data_source, self.replacement, self._num_samples, self.generator = (
            data_source, replacement, num_samples, generator)
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise _C.ValueError(f"RandomSampler: num_samples must be a positive integer, got {self.num_samples!r}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            generator = _C.Generator().manual_seed(_seed_from(None))
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from _C.randint(0, n, (32,), generator=generator).tolist()
            yield from _C.randint(0, n, (self.num_samples % 32,), generator=generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from _C.randperm(n, generator=generator).tolist()
            yield from _C.randperm(n, generator=generator).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order each pass."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in _C.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probabilities proportional to weights."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise _C.ValueError(f"WeightedRandomSampler: num_samples must be a positive integer, got {num_samples!r}")
        if not isinstance(replacement, bool):
            raise _C.ValueError(f"WeightedRandomSampler: replacement must be a bool, got {replacement!r}")
        weights = as_tensor(weights, dtype=_C.float64)
        if weights.dim() != 1:
            raise _C.ShapeError(f"WeightedRandomSampler: weights must be 1-d, got shape {tuple(weights.shape)}")
        self.weights, self.num_samples, self.replacement, self.generator = weights, num_samples, replacement, generator

    def __iter__(self):
        yield from _C.multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of batch_size indices from sampler; the last one shorter unless drop_last."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise _C.ValueError(f"BatchSampler: batch_size must be a positive integer, got {batch_size!r}")
        if not isinstance(drop_last, bool):
            raise _C.ValueError(f"BatchSampler: drop_last must be a bool, got {drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        it = iter(self.sampler)
        if self.drop_last:
            yield from (list(b) for b in zip(*[it] * self.batch_size))
            return
        batch = list(itertools.islice(it, self.batch_size))
        while batch:
            yield batch
            batch = list(itertools.islice(it, self.batch_size))

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
