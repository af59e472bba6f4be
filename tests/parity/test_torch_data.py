"""``dynnets.utils.data`` against ``torch.utils.data``: given the same index
order (an explicit sampler or batch sampler), the DataLoaders yield the same
batches: values, dtypes and container types, for samples of every kind
default_collate knows (tensors, numpy arrays and scalars, Python numbers,
strings, dicts, namedtuples, nested lists and tuples); the same lengths, the
same errors for the same misuse, and random_split's sizes."""
from __future__ import annotations

import collections

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

import dynnets as dn  # noqa: E402
from dynnets.utils import data as dud  # noqa: E402

Pair = collections.namedtuple("Pair", "left right")


def _canon(x):
    """A batch as plain data: tensors of either library become ('tensor', dtype name, array)."""
    if isinstance(x, torch.Tensor):
        a = x.numpy()
        return ("tensor", a.dtype.name, a.tolist())
    if isinstance(x, dn.Tensor):
        a = np.asarray(x)
        return ("tensor", a.dtype.name, a.tolist())
    if isinstance(x, (np.ndarray, np.generic)):
        return (type(x).__name__, x.dtype.name, x.tolist())
    if isinstance(x, Pair):
        return ("Pair", [_canon(v) for v in x])
    if isinstance(x, dict):
        return (type(x).__name__, [(k, _canon(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_canon(v) for v in x])
    return (type(x).__name__, x)


class Mixed:
    """Samples of every kind default_collate takes; the same objects for both libraries."""

    def __init__(self, n=11, tensor=None):
        rng = np.random.default_rng(0)
        self.n = n
        self.f32 = rng.standard_normal((n, 2, 3)).astype(np.float32)
        self.i64 = rng.integers(0, 9, (n, 4))
        self.tensor = tensor

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        s = {"x": self.f32[i], "y": int(self.i64[i, 0]), "w": float(self.f32[i, 0, 0]), "name": f"s{i}",
             "flag": bool(i % 2), "np_scalar": np.float32(i) / 2, "np_int": np.int32(i),
             "pair": Pair(self.i64[i], [i, 2.5 * i]), "nested": [(i, "a"), {"k": self.f32[i, 0]}],
             "b": b"raw"}
        if self.tensor is not None:
            s["t"] = self.tensor(self.f32[i, 1])
        return s


def _same(dn_loader, torch_loader):
    got = [_canon(b) for b in dn_loader]
    want = [_canon(b) for b in torch_loader]
    assert got == want
    assert len(dn_loader) == len(torch_loader) == len(want)
    return want


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (11, False), (20, True)])
def test_mixed_samples_in_a_given_order(batch_size, drop_last):
    order = [4, 0, 10, 7, 1, 9, 3, 3, 8]
    want = _same(dud.DataLoader(Mixed(tensor=dn.tensor), batch_size=batch_size, sampler=order, drop_last=drop_last),
                 tud.DataLoader(Mixed(tensor=torch.tensor), batch_size=batch_size, sampler=order,
                                drop_last=drop_last))
    if batch_size == 20:
        assert want == []


def test_default_collate_dtypes_of_python_and_numpy_numbers():
    cases = [[1, 2], [1.0, 2.0], [True, False], [1, 2.5], [2.5, 1], [True, 2],
             [np.float32(1), np.float32(2)], [np.int32(1), np.int32(2)], [np.float64(1.5)], [np.bool_(True)],
             [np.array(1.5), np.array(2.5)], [np.arange(3, dtype=np.int16), np.arange(3, dtype=np.int16)],
             [("a", 1), ("b", 2)], [[1, 2], [3, 4]], [b"x", b"y"]]
    for batch in cases:
        assert _canon(dud.default_collate(batch)) == _canon(tud.default_collate(batch)), batch


def test_collating_tensors_stacks_them_with_their_dtype():
    for dt in (np.float32, np.float64, np.int64, np.int32, np.bool_):
        arrays = [(np.arange(6).reshape(2, 3) + k).astype(dt) for k in range(3)]
        got = dud.default_collate([dn.tensor(a, dtype=dt) for a in arrays])
        want = tud.default_collate([torch.tensor(a) for a in arrays])
        assert _canon(got) == _canon(want)


def test_default_convert_without_batching():
    samples = [np.arange(3.0), 3, (np.float32(2), "s"), {"a": np.ones(2, np.int64)}, [np.zeros(1)]]
    for s in samples:
        assert _canon(dud.default_convert(s)) == _canon(tud.default_convert(s)), s


def test_batch_size_none_yields_converted_samples():
    order = [2, 5, 1]
    _same(dud.DataLoader(Mixed(), batch_size=None, sampler=order),
          tud.DataLoader(Mixed(), batch_size=None, sampler=order))


def test_batch_sampler():
    batches = [[3, 1], [0], [10, 2, 2, 5]]
    _same(dud.DataLoader(Mixed(), batch_sampler=batches), tud.DataLoader(Mixed(), batch_sampler=batches))


@pytest.mark.parametrize("batch_size,drop_last", [(4, False), (4, True), (1, False)])
def test_tensor_dataset(batch_size, drop_last):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((10, 3)).astype(np.float32)
    y = rng.integers(0, 5, 10)
    order = [9, 2, 4, 4, 0, 7, 1]
    _same(dud.DataLoader(dud.TensorDataset(dn.tensor(x), dn.tensor(y, dtype=np.int64)), batch_size=batch_size,
                         sampler=order, drop_last=drop_last),
          tud.DataLoader(tud.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=batch_size,
                         sampler=order, drop_last=drop_last))
    # a sequential epoch too (the default sampler)
    _same(dud.DataLoader(dud.TensorDataset(dn.tensor(x)), batch_size=batch_size, drop_last=drop_last),
          tud.DataLoader(tud.TensorDataset(torch.tensor(x)), batch_size=batch_size, drop_last=drop_last))


def test_subset_and_concat_datasets():
    a, b = Mixed(5), Mixed(4)
    dn_ds = dud.ConcatDataset([dud.Subset(a, [4, 2, 0]), b])
    t_ds = tud.ConcatDataset([tud.Subset(a, [4, 2, 0]), b])
    assert len(dn_ds) == len(t_ds) == 7
    _same(dud.DataLoader(dn_ds, batch_size=2), tud.DataLoader(t_ds, batch_size=2))
    assert _canon(dn_ds[-1]) == _canon(t_ds[-1])


class Stream:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield {"i": i, "v": np.full(2, i, np.float32)}

    def __len__(self):
        return self.n


class DnStream(Stream, dud.IterableDataset):
    pass


class TorchStream(Stream, tud.IterableDataset):
    pass


@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (None, False)])
def test_iterable_dataset(batch_size, drop_last):
    _same(dud.DataLoader(DnStream(7), batch_size=batch_size, drop_last=drop_last),
          tud.DataLoader(TorchStream(7), batch_size=batch_size, drop_last=drop_last))


def _error(make):
    try:
        make()
    except Exception as e:      # noqa: BLE001  the type is what is compared
        return type(e)
    return None


@pytest.mark.parametrize("kwargs", [dict(sampler=[0, 1], shuffle=True), dict(batch_sampler=[[0]], batch_size=2),
                                    dict(batch_sampler=[[0]], drop_last=True), dict(batch_size=None, drop_last=True),
                                    dict(num_workers=-1), dict(batch_size=0), dict(prefetch_factor=2),
                                    dict(persistent_workers=True)])
def test_the_same_misuse_raises_the_same_error(kwargs):
    want = _error(lambda: tud.DataLoader(Mixed(), **kwargs))
    assert want is not None
    assert _error(lambda: dud.DataLoader(Mixed(), **kwargs)) is want


def test_iterable_datasets_refuse_shuffle_and_samplers_as_torch():
    for kw in (dict(shuffle=True), dict(sampler=[0])):
        assert _error(lambda: dud.DataLoader(DnStream(3), **kw)) is _error(lambda: tud.DataLoader(TorchStream(3), **kw))
        assert _error(lambda: dud.DataLoader(DnStream(3), **kw)) is ValueError


def test_collate_errors_are_torchs():
    for batch in ([None, None], [[1, 2], [3]], [np.array(["a"]), np.array(["b"])], [object(), object()]):
        want = _error(lambda: tud.default_collate(batch))
        assert want is not None
        assert _error(lambda: dud.default_collate(batch)) is want, batch


@pytest.mark.parametrize("n,lengths", [(10, [0.5, 0.3, 0.2]), (11, [0.5, 0.5]), (7, [0.34, 0.33, 0.33]),
                                       (10, [3, 7]), (5, [0.0, 1.0])])
def test_random_split_sizes(n, lengths):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = [len(s) for s in tud.random_split(range(n), lengths)]
        got = dud.random_split(range(n), lengths, generator=dn.Generator().manual_seed(0))
    assert [len(s) for s in got] == want
    assert sorted(i for s in got for i in s) == list(range(n))


def test_random_split_bad_lengths_raise_like_torch():
    for lengths in ([3, 3], [0.5, 0.6]):
        assert _error(lambda: dud.random_split(range(10), lengths)) is ValueError
        assert _error(lambda: tud.random_split(range(10), lengths)) is ValueError
    # torch splits [-1, 11] into sizes 9 and 1; a negative length is refused here
    with pytest.raises(ValueError, match="length at index 0"):
        dud.random_split(range(10), [-1, 11])
