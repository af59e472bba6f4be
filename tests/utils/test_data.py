"""``dynnets.utils.data`` on its own (torch's behaviour is compared in
``tests/parity/test_torch_data.py``): shuffling from the default generator
and from ``generator=``, the samplers' draws, workers run in process, the
TensorDataset batch path (values and gradients), the batched-fetch protocol,
and the errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import dynnets as dn
from dynnets.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
                                SequentialSampler, Subset, SubsetRandomSampler, TensorDataset, WeightedRandomSampler,
                                default_collate, get_worker_info, random_split)


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"i": i, "sq": np.float32(i * i)}


def _epoch(loader):
    return [b["i"].tolist() for b in loader]


def test_shuffle_follows_manual_seed_and_differs_between_epochs():
    loader = DataLoader(Squares(10), batch_size=4, shuffle=True)
    dn.manual_seed(5)
    first, second = _epoch(loader), _epoch(loader)
    dn.manual_seed(5)
    assert _epoch(loader) == first and _epoch(loader) == second
    assert first != second
    for ep in (first, second):
        assert sorted(i for b in ep for i in b) == list(range(10)) and [len(b) for b in ep] == [4, 4, 2]
    # the order is numpy's permutation from the default generator
    dn.manual_seed(5)
    assert [i for b in first for i in b] == np.random.default_rng(5).permutation(10).tolist()


def test_shuffle_with_its_own_generator_leaves_the_default_one_alone():
    g = dn.Generator().manual_seed(3)
    loader = DataLoader(Squares(8), batch_size=8, shuffle=True, generator=g)
    dn.manual_seed(0)
    before = dn.default_generator.bit_generator.state
    order = _epoch(loader)[0]
    assert dn.default_generator.bit_generator.state == before
    assert order == np.random.default_rng(3).permutation(8).tolist()


def test_generator_has_torchs_methods():
    a, b = dn.Generator(), dn.Generator()
    assert a.initial_seed() == b.initial_seed() == 67280421310721
    assert a.random() == b.random()                     # an unseeded generator repeats, as torch's
    g = dn.Generator().manual_seed(11)
    assert isinstance(g, np.random.Generator) and g.initial_seed() == 11
    state = g.get_state()
    x = g.random(3)
    np.testing.assert_array_equal(g.set_state(state).random(3), x)
    np.testing.assert_array_equal(x, np.random.default_rng(11).random(3))
    s = g.seed()
    assert g.initial_seed() == s
    with pytest.raises(ValueError, match="non-negative integer"):
        g.manual_seed(-1)
    with pytest.raises(dn.devices.DeviceUnavailableError, match="Generator: device 'cuda'"):
        dn.Generator(device="cuda")


def test_random_sampler_replacement_and_num_samples():
    g = dn.Generator().manual_seed(0)
    many = list(RandomSampler(range(4), num_samples=10, generator=g))
    assert len(many) == 10 and sorted(many[:4]) == sorted(many[4:8]) == [0, 1, 2, 3]
    assert len(set(many[8:])) == 2
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=300, generator=g))
    assert len(drawn) == 300 and set(drawn) == {0, 1, 2}
    assert len(RandomSampler(range(3), replacement=True, num_samples=7)) == 7
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        RandomSampler(range(3), replacement=1)


def test_weighted_and_subset_random_samplers():
    g = dn.Generator().manual_seed(1)
    draws = list(WeightedRandomSampler([0.0, 1.0, 3.0], 4000, generator=g))
    counts = np.bincount(draws, minlength=3)
    assert counts[0] == 0 and 0.70 < counts[2] / 4000 < 0.80
    no_rep = list(WeightedRandomSampler([1, 1, 1, 0], 3, replacement=False, generator=g))
    assert sorted(no_rep) == [0, 1, 2]
    with pytest.raises(ValueError, match="without replacement"):
        WeightedRandomSampler([1, 0], 2, replacement=False)
    with pytest.raises(ValueError, match="1d sequence"):
        WeightedRandomSampler([[1.0]], 1)
    sub = list(SubsetRandomSampler([10, 20, 30], generator=g))
    assert sorted(sub) == [10, 20, 30]


def test_batch_sampler():
    assert list(BatchSampler(SequentialSampler(range(5)), 2, False)) == [[0, 1], [2, 3], [4]]
    assert list(BatchSampler(range(5), 2, True)) == [[0, 1], [2, 3]]
    assert len(BatchSampler(range(5), 2, True)) == 2 and len(BatchSampler(range(5), 2, False)) == 3
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        BatchSampler(range(3), True, False)


def test_workers_run_in_process_with_the_same_batches():
    ref = _epoch(DataLoader(Squares(9), batch_size=2))
    assert _epoch(DataLoader(Squares(9), batch_size=2, num_workers=3, pin_memory=True, prefetch_factor=4,
                             persistent_workers=True, timeout=5)) == ref
    calls = []
    with pytest.warns(UserWarning, match="worker_init_fn is not called"):
        loader = DataLoader(Squares(9), batch_size=2, num_workers=2, worker_init_fn=calls.append)
    assert _epoch(loader) == ref and calls == []
    assert get_worker_info() is None


def test_tensor_dataset_batches_carry_gradients():
    x = dn.tensor(np.arange(12.0).reshape(6, 2), requires_grad=True)
    y = dn.tensor(np.array([0, 1, 0, 1, 1, 0]), dtype=np.int64)
    ds = TensorDataset(x, y)
    assert len(ds) == 6 and [v.tolist() for v in ds[4]] == [[8.0, 9.0], 1]
    loader = DataLoader(ds, batch_size=4, sampler=[5, 1, 1, 3, 0])
    batches = list(loader)
    assert [b[1].tolist() for b in batches] == [[0, 1, 1, 1], [0]]
    assert batches[0][1].dtype == np.int64 and isinstance(batches[0], list)
    dn.sum(batches[0][0] * 2.0).backward()
    np.testing.assert_array_equal(x.grad.data, [[0, 0], [4, 4], [0, 0], [2, 2], [0, 0], [2, 2]])
    with pytest.raises(ValueError, match="size mismatch between tensors"):
        TensorDataset(dn.zeros(3), dn.zeros(4))


def test_batched_fetch_protocol_is_used():
    class Batched(Squares):
        calls = []

        def __getitems__(self, idx):
            self.calls.append(list(idx))
            return [self[i] for i in idx]

    ds = Batched(5)
    assert _epoch(DataLoader(ds, batch_size=3)) == [[0, 1, 2], [3, 4]]
    assert ds.calls == [[0, 1, 2], [3, 4]]
    sub = Subset(ds, [4, 0])
    assert _epoch(DataLoader(sub, batch_size=2)) == [[4, 0]] and ds.calls[-1] == [4, 0]


def test_datasets_compose():
    both = Squares(2) + Squares(3)
    assert isinstance(both, ConcatDataset) and len(both) == 5 and both[4]["i"] == 2 and both[-5]["i"] == 0
    with pytest.raises(ValueError, match="should not exceed dataset length"):
        both[-6]
    with pytest.raises(NotImplementedError, match="should implement __getitem__"):
        Dataset()[0]

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(5))

    with pytest.raises(TypeError, match="concatenating iterable datasets"):
        Stream() + Stream()
    with pytest.raises(TypeError, match="only map-style"):
        ConcatDataset([Squares(1), Stream()])
    assert [b.tolist() for b in DataLoader(Stream(), batch_size=2)] == [[0, 1], [2, 3], [4]]


def test_random_split_is_reproducible_and_disjoint():
    a = random_split(range(10), [0.7, 0.3], generator=dn.Generator().manual_seed(2))
    b = random_split(range(10), [7, 3], generator=dn.Generator().manual_seed(2))
    assert [list(s) for s in a] == [list(s) for s in b]
    assert sorted(list(a[0]) + list(a[1])) == list(range(10))
    dn.manual_seed(4)
    c = random_split(range(10), [5, 5])
    dn.manual_seed(4)
    assert [list(s) for s in random_split(range(10), [5, 5])] == [list(s) for s in c]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        random_split(range(2), [0.0, 1.0])
    assert any("length of split at index 0 is 0" in str(x.message) for x in w)


def test_collate_of_python_numbers_and_strings():
    b = default_collate([{"y": 1, "w": 0.5, "s": "a"}, {"y": 2, "w": 1.5, "s": "b"}])
    assert b["y"].dtype == np.int64 and b["w"].dtype == np.float64 and b["s"] == ["a", "b"]
    with pytest.raises(TypeError, match="found <class 'NoneType'>"):
        default_collate([None])
