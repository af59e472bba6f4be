"""Samplers as torch's ``torch.utils.data``: the order in which a
:class:`~dynnets.utils.data.DataLoader` visits a dataset's indices, and how
they are grouped into batches.

The random samplers draw from the ``generator`` they are given (a
``numpy.random.Generator``, e.g. :class:`dynnets.Generator`), else from
:data:`dynnets.default_generator`, read when an epoch's iteration starts: so
``dynnets.manual_seed(s)`` before a training run repeats its shuffles. The
orders are numpy's, not torch's (a different generator).
"""
from __future__ import annotations

import itertools

import numpy as np

from ...random import generator as _as_generator

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]


def _positive_int(owner, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{owner}: {name} should be a positive integer value, but got {name}={value!r}")
    return int(value)


def _bool(owner, name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{owner}: {name} should be a boolean value, but got {name}={value!r}")
    return bool(value)


class Sampler:
    """Base class: an iterable of dataset indices (or, for a batch sampler, of lists of them)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Sampler should implement __iter__")


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """The indices in random order (a new permutation at each iteration).

    Parameters
    ----------
    data_source : sized
    replacement : bool
        Draw ``num_samples`` indices independently (with repeats).
    num_samples : int, optional
        Default ``len(data_source)``; without replacement, more than that
        gives whole permutations one after another, then part of one.
    generator : numpy.random.Generator, optional
        Default :data:`dynnets.default_generator`.
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = _bool("RandomSampler", "replacement", replacement)
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None:
            _positive_int("RandomSampler", "num_samples", num_samples)

    @property
    def num_samples(self):
        # read at each use: the dataset may change size between epochs
        return len(self.data_source) if self._num_samples is None else int(self._num_samples)

    def __iter__(self):
        n = len(self.data_source)
        rng = _as_generator(self.generator)
        m = self.num_samples
        if self.replacement:
            yield from rng.integers(0, n, m).tolist()
            return
        for _ in range(m // n):
            yield from rng.permutation(n).tolist()
        if m % n:
            yield from rng.permutation(n)[:m % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in random order (a new permutation at each iteration)."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _as_generator(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices ``0..len(weights)-1`` drawn with probabilities
    proportional to ``weights`` (as ``torch.multinomial``)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        self.num_samples = _positive_int("WeightedRandomSampler", "num_samples", num_samples)
        self.replacement = _bool("WeightedRandomSampler", "replacement", replacement)
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights should be a 1d sequence but given weights have "
                             f"shape {w.shape}")
        if w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be finite, non-negative and not all zero")
        if not self.replacement and self.num_samples > np.count_nonzero(w):
            raise ValueError(f"WeightedRandomSampler: cannot draw {self.num_samples} samples without replacement "
                             f"from {np.count_nonzero(w)} indices of nonzero weight")
        self.weights = w
        self.generator = generator

    def __iter__(self):
        rng = _as_generator(self.generator)
        p = self.weights / self.weights.sum()
        yield from rng.choice(len(p), self.num_samples, replace=self.replacement, p=p).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``; the last one shorter
    unless ``drop_last``.

    Examples
    --------
    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        self.sampler = sampler
        self.batch_size = _positive_int("BatchSampler", "batch_size", batch_size)
        self.drop_last = _bool("BatchSampler", "drop_last", drop_last)

    def __iter__(self):
        it = iter(self.sampler)
        bs = self.batch_size
        while True:
            batch = list(itertools.islice(it, bs))
            if not batch or (len(batch) < bs and self.drop_last):
                return
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

