"""The selection and layout primitives (``dynnets/autograd/primitives/select.py``:
gather_nd, boolean_mask, argwhere, top_k, tile, pad, stop_gradient) against
PyTorch's equivalents, through the TF1 names of :mod:`dynnets.static` (which
work on eager tensors too): values, dtypes and gradients, eager and static
(known and unknown placeholder dimensions), float64 and float32."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets.static as tf  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)

F = torch.nn.functional
CASES = [(m, d) for m in C.MODES for d in C.FLOATS]
IDS = [f"{m}-{np.dtype(d).name}" for m, d in CASES]


@pytest.mark.parametrize("mode,dtype", CASES, ids=IDS)
def test_gather_nd(mode, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 2)).astype(dtype)
    idx = np.array([[[0, 1], [2, 3]], [[0, 1], [1, 0]]])          # (2, 2, 2): a repeated pair accumulates
    # the index depth (the last dimension of the indices) must be known when the graph is built
    C.check(lambda a, i: tf.gather_nd(a, i), lambda a, i: a[i[..., 0], i[..., 1]], [x, idx], diff=(0,), mode=mode,
            unknown=[(True, True, True), (True, True, False)])


def _check_sized_by_values(dn_fn, torch_fn, inputs, mode, diff=(0,)):
    """C.check for an op whose output size depends on a mask's values: in a
    graph that dimension is unknown even where the inputs' shapes are known,
    so "static" mode runs as "static-unknown" with every dimension known."""
    if mode == "static":
        C.check(dn_fn, torch_fn, inputs, diff=diff, mode="static-unknown", unknown=[(False,) * np.ndim(a)
                                                                                    for a in inputs])
    else:
        C.check(dn_fn, torch_fn, inputs, diff=diff, mode=mode)


@pytest.mark.parametrize("mode,dtype", CASES, ids=IDS)
def test_boolean_mask(mode, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 2)).astype(dtype)
    m2 = rng.random((3, 4)) > 0.4
    m1 = np.array([True, False, True, True])
    _check_sized_by_values(lambda a, m: tf.boolean_mask(a, m), lambda a, m: a[m], [x, m2], mode)
    _check_sized_by_values(lambda a, m: tf.boolean_mask(a, m, axis=1), lambda a, m: a[:, m], [x, m1], mode)


@pytest.mark.parametrize("mode", C.MODES)
def test_argwhere(mode):
    c = np.random.default_rng(2).random((3, 4)) > 0.5
    _check_sized_by_values(lambda m: tf.where(m), lambda m: torch.argwhere(m), [c], mode, diff=())


@pytest.mark.parametrize("mode,dtype", CASES, ids=IDS)
def test_top_k(mode, dtype):
    rng = np.random.default_rng(3)
    x = (rng.permutation(15).reshape(3, 5) + rng.uniform(0, 0.5, (3, 5))).astype(dtype)   # no ties
    # TF1's indices are int32, torch's int64: the values of both are compared, the dtype is TF1's
    C.check(lambda a: tf.nn.top_k(a, k=3), lambda a: tuple(torch.topk(a, 3)), [x], diff=(0,), mode=mode,
            check_dtype=False)


@pytest.mark.parametrize("mode,dtype", CASES, ids=IDS)
def test_tile(mode, dtype):
    x = np.random.default_rng(4).standard_normal((2, 3)).astype(dtype)
    C.check(lambda a: tf.tile(a, [2, 3]), lambda a: torch.tile(a, (2, 3)), [x], diff=(0,), mode=mode)


@pytest.mark.parametrize("mode,dtype", CASES, ids=IDS)
def test_pad(mode, dtype):
    x = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(dtype)
    # torch's pad lists the last dimension first
    C.check(lambda a: tf.pad(a, [[0, 0], [1, 2], [2, 1]], constant_values=0.5),
            lambda a: F.pad(a, (2, 1, 1, 2), value=0.5), [x], diff=(0,), mode=mode)
    C.check(lambda a: tf.pad(a, [[0, 0], [1, 2], [3, 2]], mode="REFLECT"),
            lambda a: F.pad(a, (3, 2, 1, 2), mode="reflect"), [x], diff=(0,), mode=mode)


@pytest.mark.parametrize("mode,dtype", CASES, ids=IDS)
def test_stop_gradient(mode, dtype):
    x = np.random.default_rng(6).standard_normal((2, 3)).astype(dtype)
    C.check(lambda a: a * tf.stop_gradient(a), lambda a: a * a.detach(), [x], diff=(0,), mode=mode)


@pytest.mark.parametrize("mode,dtype", CASES, ids=IDS)
def test_ensure_shape(mode, dtype):
    """TF1's tf.ensure_shape (no torch counterpart): the identity, its gradient too."""
    x = np.random.default_rng(7).standard_normal((2, 3)).astype(dtype)
    C.check(lambda a: a * tf.ensure_shape(a, [None, 3]), lambda a: a * a, [x], diff=(0,), mode=mode)
