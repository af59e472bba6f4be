"""``DataLoader``: minibatches of a dataset, as ``torch.utils.data.DataLoader``.

A loader takes the indices its sampler gives (in order, or shuffled by a
:class:`~dynnets.utils.data.RandomSampler`), groups them into batches
(:class:`~dynnets.utils.data.BatchSampler`), fetches the samples and merges
each batch with ``collate_fn`` (:func:`default_collate`: torch's rules, giving
dynnets Tensors). Given the same index order, it yields what torch's
DataLoader yields, dtypes included (``tests/parity/test_torch_data.py``).

Workers: loading always runs in the calling process. ``num_workers > 0`` is
accepted and loads the same batches in the same order as ``num_workers=0``
(torch's workers deliver in sampler order too), only without the parallel
processes; ``get_worker_info()`` is None, as in torch's main process.
``worker_init_fn`` is therefore never called (a warning says so), and
``pin_memory``, ``timeout``, ``prefetch_factor``, ``persistent_workers`` and
``multiprocessing_context`` change nothing. The data of a batch should be
cheap to fetch: a model step usually costs more than indexing arrays.
"""
from __future__ import annotations

import collections.abc as cabc
import warnings

import numpy as np

from ...autograd import ops
from ...autograd.tensor import Tensor, wrap_array
from .dataset import IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

_ERR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _python_numbers(batch):
    """``torch.tensor(batch)`` of Python numbers: bools alone stay bool, any
    float makes the batch float32 (torch's default dtype), else int64."""
    kinds = {type(b) for b in batch}
    if kinds <= {bool}:
        return wrap_array(np.array(batch, dtype=np.bool_))
    if any(isinstance(b, float) for b in batch):
        return wrap_array(np.array(batch, dtype=np.float32))
    return wrap_array(np.array(batch, dtype=np.int64))


def default_collate(batch):
    """Merge a list of samples into a batch, as torch's ``default_collate``.

    ========================================  ==========================================
    samples are                               the batch is
    ========================================  ==========================================
    Tensors                                   ``stack(samples)`` (one more leading axis)
    numpy arrays, numpy scalars               a Tensor of the stacked arrays (their dtype)
    Python floats                             a float64 Tensor
    Python ints (bools)                       an int64 (bool) Tensor; a float among
                                              them makes it float32, as torch
    str, bytes                                the list as it is
    dicts (any mapping)                       the same keys, each value collated
    namedtuples                               the same type, each field collated
    tuples, lists (each of the same length)   a list, position by position collated
    ========================================  ==========================================

    Anything else (None, string or object arrays) raises ``TypeError``;
    sequences of different lengths raise ``RuntimeError``, as torch's.
    """
    elem = batch[0]
    tp = type(elem)
    if isinstance(elem, Tensor):
        return ops.stack(list(batch), 0)
    if isinstance(elem, (np.ndarray, np.generic)) and not isinstance(elem, (np.str_, np.bytes_)):
        if elem.dtype.kind in "USO":
            raise TypeError(_ERR.format(elem.dtype))
        return wrap_array(np.stack([np.asarray(b) for b in batch]))
    if tp is float:
        return wrap_array(np.array(batch, dtype=np.float64))
    if isinstance(elem, int):       # bool included, as torch's isinstance rule
        return _python_numbers(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, cabc.Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return tp(out)
        except TypeError:               # a mapping type that cannot be built from a dict
            return out
    if _is_namedtuple(elem):
        return tp(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, cabc.Sequence):
        n = len(elem)
        if any(len(b) != n for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        cols = [default_collate(s) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return cols                 # torch's backward-compatible choice: tuples become lists
        try:
            return tp(cols)
        except TypeError:
            return cols
    raise TypeError(_ERR.format(tp))


def default_convert(data):
    """One sample as a batch of its own (``batch_size=None``), as torch's
    ``default_convert``: numpy arrays and scalars become Tensors (sharing
    memory), containers are converted item by item (tuples become lists),
    everything else is left as it is."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_, np.bytes_)):
        return data if data.dtype.kind in "USO" else wrap_array(np.asarray(data))
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, cabc.Mapping):
        out = {k: default_convert(v) for k, v in data.items()}
        try:
            return type(data)(out)
        except TypeError:
            return out
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, cabc.Sequence):
        out = [default_convert(d) for d in data]
        try:
            return type(data)(out)
        except TypeError:
            return out
    return data


def get_worker_info():
    """None: samples are always loaded in the calling process (see the module docstring)."""
    return None


class DataLoader:
    """Iterate over ``dataset`` in minibatches, as ``torch.utils.data.DataLoader``.

    Parameters
    ----------
    dataset : Dataset or IterableDataset
        Map-style (``__getitem__`` and ``__len__``) or a stream (``__iter__``).
    batch_size : int or None
        Samples per batch (default 1); None yields samples one by one,
        converted by :func:`default_convert` (no batching).
    shuffle : bool
        A new random order every epoch (a :class:`RandomSampler` over
        ``generator``).
    sampler : Sampler or iterable of indices, optional
        The order of the indices; excludes ``shuffle``.
    batch_sampler : iterable of lists of indices, optional
        The batches themselves; excludes ``batch_size``, ``shuffle``,
        ``sampler`` and ``drop_last``.
    num_workers : int
        Accepted; loading runs in this process either way (module docstring).
    collate_fn : callable, optional
        Merges a list of samples into a batch; default :func:`default_collate`.
    drop_last : bool
        Drop the last batch when it is smaller than ``batch_size``.
    generator : numpy.random.Generator, optional
        The shuffling's source; default :data:`dynnets.default_generator`
        (so :func:`dynnets.manual_seed` repeats the epochs' orders).
    pin_memory, timeout, worker_init_fn, multiprocessing_context, prefetch_factor, persistent_workers, pin_memory_device, in_order
        torch's worker and GPU options, accepted and checked as torch checks
        them; they change nothing here.

    Examples
    --------
    >>> ds = TensorDataset(dynnets.arange(10), dynnets.arange(10) * 2)
    >>> [x.tolist() for x, y in DataLoader(ds, batch_size=4)]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("DataLoader: timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing; let "
                             "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if worker_init_fn is not None and num_workers > 0:
            warnings.warn("DataLoader: worker_init_fn is not called: dynnets loads in the calling process, without "
                          "worker processes (see dynnets.utils.data.dataloader)", UserWarning, stacklevel=2)
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.generator = generator
        iterable = isinstance(dataset, IterableDataset)
        self._iterable = iterable
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, but "
                                     f"got {name}={value!r}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")
        if sampler is None and not iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        if iterable and batch_size is not None:
            # checked here, as BatchSampler checks it for map-style datasets
            BatchSampler([], batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        auto = batch_sampler is not None or (iterable and batch_size is not None)
        self._auto_collation = auto
        self.collate_fn = collate_fn if collate_fn is not None else (default_collate if auto else default_convert)

    def __iter__(self):
        if self._iterable:
            return self._iter_stream()
        if self.batch_sampler is None:
            return (self.collate_fn(self.dataset[i]) for i in self.sampler)
        return self._iter_batches()

    def _iter_batches(self):
        ds, collate = self.dataset, self.collate_fn
        fast = type(ds) is TensorDataset and collate is default_collate
        getitems = getattr(ds, "__getitems__", None)
        for idx in self.batch_sampler:
            if fast:
                # the rows of a TensorDataset batch at once: default_collate of the samples, without
                # one indexing and one stack entry per sample
                rows = np.asarray(idx, dtype=np.int64)
                yield [t[rows] if isinstance(t, Tensor) else wrap_array(np.asarray(t)[rows]) for t in ds.tensors]
                continue
            samples = getitems(idx) if getitems else [ds[i] for i in idx]
            yield collate(samples)

    def _iter_stream(self):
        it = iter(self.dataset)
        if not self._auto_collation:
            for x in it:
                yield self.collate_fn(x)
            return
        bs = self.batch_size
        while True:
            batch = []
            for x in it:
                batch.append(x)
                if len(batch) == bs:
                    break
            if not batch or (len(batch) < bs and self.drop_last):
                return
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)
