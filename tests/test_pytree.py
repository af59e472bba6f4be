"""dynnets.pytree: the one module that flattens and rebuilds nested
structures (static loops, cond, map_fn/scan, dynamic_rnn states, traces)."""
from collections import namedtuple

import numpy as np
import pytest

import dynnets as dn
import dynnets.static as ds
from dynnets.pytree import TreeDef, tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten

Pair = namedtuple("Pair", "a b")


def test_round_trip_of_every_container_kind():
    x = {"z": [1, (2, 3)], "a": Pair(4, {"k": None}), "m": ()}
    leaves, td = tree_flatten(x)
    # dict leaves in sorted key order; None is a leaf; an empty tuple has none
    assert leaves == [4, None, 1, 2, 3]
    assert td.num_leaves == 5
    back = tree_unflatten(td, leaves)
    assert back == x and list(back) == ["z", "a", "m"]          # the original key order
    assert type(back["a"]) is Pair and type(back["z"]) is list and type(back["z"][1]) is tuple
    assert tree_map(lambda v: None if v is None else v * 10, x)["z"] == [10, (20, 30)]
    assert str(td) == "{'a': (x, {'k': x}), 'm': (), 'z': [x, (x, x)]}"


def test_treedefs_compare_and_hash_by_structure():
    a = tree_structure({"b": [1, 2], "a": 3})
    b = tree_structure({"a": 7, "b": [8, 9]})           # built in another order: the same structure
    assert a == b and hash(a) == hash(b) and isinstance(a, TreeDef)
    assert tree_structure([1, 2]) != tree_structure((1, 2))
    assert tree_structure([1, 2]).same_structure(tree_structure((1, 2)), lists_as_tuples=True)
    assert tree_structure(Pair(1, 2)) != tree_structure((1, 2))
    assert {a: "x"}[b] == "x"


def test_is_leaf_and_errors():
    leaves, td = tree_flatten([(1, 2), [3]], is_leaf=lambda v: isinstance(v, tuple))
    assert leaves == [(1, 2), 3]
    with pytest.raises(ValueError, match=r"tree_unflatten: \[x, \[x\]\] has 2 leaves, got 3 values"):
        td.unflatten([1, 2, 3])
    td = tree_structure([1, {"a": 2}])
    assert td.flatten_up_to([(None, 4), {"a": (5,)}]) == [(None, 4), (5,)]
    with pytest.raises(ValueError, match=r"expected the structure \[x, \{'a': x\}\]"):
        td.flatten_up_to([1, {"b": 2}])
    assert tree_leaves(5) == [5] and tree_structure(5).is_leaf


def test_cond_branches_with_dicts_built_in_different_orders():
    """TF1's nest sorts dict keys, so two branches returning the same keys in
    another order have the same structure (before, cond compared the keys in
    insertion order and refused them)."""
    g = ds.Graph()
    with g.as_default():
        p = ds.placeholder((), np.bool_)
        x = ds.constant(np.float64(2.0))
        out = ds.cond(p, lambda: {"a": x * 1.0, "b": x * 2.0}, lambda: {"b": x * 3.0, "a": x * 4.0})
        with ds.Session() as sess:
            assert sess.run(out, {p: True}) == {"a": 2.0, "b": 4.0}
            assert sess.run(out, {p: False}) == {"a": 8.0, "b": 6.0}


def test_trace_keeps_a_namedtuple_result():
    """A traced function's namedtuple result comes back as that namedtuple
    (before, as a plain tuple), as eager code returns it."""
    step = ds.trace(lambda x: Pair(dn.tanh(x), {"s": x.sum(), "k": 3}))
    got = step(np.array([0.5, -1.0]))
    assert type(got) is Pair and got.b["k"] == 3
    np.testing.assert_allclose(got.a.numpy(), np.tanh([0.5, -1.0]))
    np.testing.assert_allclose(got.b["s"].numpy(), -0.5)


def test_trace_gradient_is_of_the_first_output_as_written():
    """A traced dict result is flattened in sorted key order, but the loss
    whose gradients ``grads_of`` gives is still the first output as written
    (here 'loss', before 'aux')."""
    from dynnets import nn
    lin = nn.Linear(2, 1, dtype=np.float64, rng=0)

    def f(x):
        y = lin(x).sum()
        return {"loss": y, "aux": y * 0.0}

    x = np.arange(6.0).reshape(3, 2)
    out, grads = ds.trace(f, grads_of=lin)(x)
    lin.zero_grad()
    f(dn.tensor(x))["loss"].backward()
    np.testing.assert_allclose(np.asarray(grads[0]), lin.weight.grad.numpy(), rtol=1e-12)
    assert list(out) == ["loss", "aux"]
