"""Datasets as torch's ``torch.utils.data``: ``Dataset``, ``IterableDataset``,
``TensorDataset``, ``ConcatDataset``, ``Subset`` and ``random_split``."""
from __future__ import annotations

import bisect
import itertools
import math
import warnings

from ...random import generator as _as_generator

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset", "random_split"]


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` (and
    ``__len__`` for the default samplers). ``a + b`` concatenates."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Dataset should implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclasses define ``__iter__``. A
    :class:`~dynnets.utils.data.DataLoader` batches it in the order it
    yields (no sampler, no shuffling)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of IterableDataset should implement __iter__")

    def __add__(self, other):
        raise TypeError("IterableDataset: concatenating iterable datasets is not supported "
                        "(ConcatDataset takes map-style datasets)")


def _first_dim(t, k):
    shape = getattr(t, "shape", None)
    if shape is None:
        raise TypeError(f"TensorDataset: argument {k} must be a Tensor or an array, got {type(t).__name__}")
    if len(shape) == 0:
        raise ValueError(f"TensorDataset: argument {k} is 0-d; each tensor needs a first dimension to index")
    return shape[0]


class TensorDataset(Dataset):
    """Samples are the rows of tensors: ``dataset[i] == (t[i] for t in tensors)``
    as a tuple (as ``torch.utils.data.TensorDataset``).

    Parameters
    ----------
    *tensors : Tensor (or numpy array)
        All of the same first dimension, the dataset's length.
    """

    def __init__(self, *tensors):
        sizes = [_first_dim(t, k) for k, t in enumerate(tensors)]
        if sizes and any(s != sizes[0] for s in sizes):
            raise ValueError(f"TensorDataset: size mismatch between tensors: first dimensions {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return _first_dim(self.tensors[0], 0) if self.tensors else 0


class ConcatDataset(Dataset):
    """The samples of several map-style datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for k, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise TypeError(f"ConcatDataset: dataset {k} is an IterableDataset; only map-style datasets "
                                f"can be concatenated")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError(f"ConcatDataset: absolute value of index {idx} should not exceed dataset length "
                                 f"{len(self)}")
            idx = len(self) + idx
        k = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[k - 1] if k else 0
        return self.datasets[k][idx - start]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        # torch's batched-fetch protocol: pass a batch on whole where the dataset takes one
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems:
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def _lengths(lengths, n):
    lengths = list(lengths)
    total = sum(lengths)
    if math.isclose(total, 1) and total <= 1:
        # fractions: floor each, then hand out the remainder one item at a time from the first split
        # (torch's rule, so the same fractions give the same split sizes)
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"random_split: fraction at index {i} is not between 0 and 1")
            sizes.append(int(math.floor(n * frac)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"random_split: length of split at index {i} is 0; this might result in an empty "
                              f"dataset", UserWarning, stacklevel=3)
        return sizes
    for i, size in enumerate(lengths):
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"random_split: length at index {i} must be a non-negative int (or all lengths "
                             f"fractions summing to 1), got {size!r}")
    if total != n:
        raise ValueError(f"random_split: sum of input lengths ({total}) does not equal the length of the input "
                         f"dataset ({n})")
    return lengths


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` at random into non-overlapping :class:`Subset` s.

    Parameters
    ----------
    dataset : Dataset
    lengths : sequence of int, or of float
        The sizes of the splits (summing to ``len(dataset)``), or fractions
        summing to 1 (sizes ``floor(n * f)``, the remainder given one by one
        to the splits in order, as torch).
    generator : numpy.random.Generator, optional
        The permutation's source; default :data:`dynnets.default_generator`
        (seeded by :func:`dynnets.manual_seed`).

    Returns
    -------
    list of Subset
    """
    sizes = _lengths(lengths, len(dataset))
    perm = _as_generator(generator).permutation(sum(sizes)).tolist()
    return [Subset(dataset, perm[end - size:end]) for end, size in zip(itertools.accumulate(sizes), sizes)]

