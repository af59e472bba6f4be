"""Lazy handles: :class:`LazyTensor` (a small slotted object per recorded
result), the pending node and plan records, and the interning of
(shape, dtype, type) descriptions and signatures as small ints."""
from __future__ import annotations

import threading

import numpy as np

from .. import backprop as _backprop
from .. import engine as _engine
from ..primitives.core import Aval
from ..tensor import Tensor

_DATA = Tensor.__dict__["_data"]          # the array slot behind LazyTensor._data
_get_data = _DATA.__get__
_set_data = _DATA.__set__
_get_grad = Tensor.__dict__["_grad"].__get__
_set_grad = Tensor.__dict__["_grad"].__set__
_get_name = Tensor.__dict__["name"].__get__
_set_name = Tensor.__dict__["name"].__set__
_NDARRAY = np.ndarray
WEAK = (float, int, bool)


class Node:
    """A pending application: its context, plan (primitive, output avals,
    batching kind), inputs, attributes, signature id, depth, its record
    ``index`` (the pending list's, then the context's); ``call`` is None
    until it ran. Its dependencies are in the context's record arrays."""

    __slots__ = ("ab", "plan", "args", "attrs", "sid", "depth", "tag", "call", "pos", "index", "locs", "concs",
                 "where")


class Plan:
    """What every application of one primitive with one input signature
    (shapes, dtypes, input types, attributes, grad mode) shares: the output
    avals from the shape rule, which inputs are per-instance (``kinds``), which
    shared inputs enter the signature by identity (``shared``), the kind of
    batching (``sid``: -1 view, -2 one at a time, else batched)."""

    __slots__ = ("prim", "out", "multi", "kinds", "shared", "sid", "gm", "descs", "diff", "bkey", "last")


# (shape, dtype, type) of an input, and signatures, interned as small ints: the
# plan and signature keys are then tuples of ints, cheap to hash (a dtype's
# hash costs ~75 ns, and a tuple recomputes its items' hashes on every lookup)
_DESC_IDS = {}
DESCS = []
_BKEY_IDS = {}



# the interning tables are shared by the contexts of all threads: a new entry
# is made under a lock (two threads interning at once would give two
# descriptions one id); a lookup needs none
_INTERN = threading.Lock()


def desc_id(shape, dtype, tp):
    d = (shape, dtype, tp)
    i = _DESC_IDS.get(d)
    if i is None:
        with _INTERN:
            i = _DESC_IDS.get(d)
            if i is None:
                i = len(DESCS)
                DESCS.append(d)
                _DESC_IDS[d] = i
    return i


def bkey_id(bk):
    i = _BKEY_IDS.get(bk)
    if i is None:
        with _INTERN:
            i = _BKEY_IDS.get(bk)
            if i is None:
                i = _BKEY_IDS[bk] = len(_BKEY_IDS)
    return i


class Call:
    """A batched call's outputs: per output, its source index and the rows of
    each node (``None``: one row per node, in order)."""

    __slots__ = ("srcs", "rows")


class LazyTensor(Tensor):
    """A tensor recorded inside :func:`autobatch`: shape and dtype are known,
    the value is computed (batched) when first needed. After it is computed it
    behaves as an ordinary tensor, also after its context has ended."""

    __slots__ = ("_pn", "_k", "_desc", "_conc")

    # Tensor's _grad and name slots, read as None until set: recording sets
    # only what it must (requires_grad, _pn, _k, _desc)
    @property
    def _grad(self):
        try:
            return _get_grad(self)
        except AttributeError:
            return None

    @_grad.setter
    def _grad(self, value):
        _set_grad(self, value)

    @property
    def name(self):
        try:
            return _get_name(self)
        except AttributeError:
            return None

    @name.setter
    def name(self, value):
        _set_name(self, value)

    # the array slot, computed on first read (Tensor.data, numpy(), item()... read it)
    @property
    def _data(self):
        try:
            return _get_data(self)
        except AttributeError:
            return self._value()

    @_data.setter
    def _data(self, value):
        _set_data(self, value)

    @property
    def shape(self):
        return DESCS[self._desc][0]

    @property
    def dtype(self):
        return DESCS[self._desc][1]

    @property
    def ndim(self):
        return len(DESCS[self._desc][0])

    def __len__(self):
        shape = DESCS[self._desc][0]
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    @property
    def _node(self):
        return self._eager()._node

    @property
    def _idx(self):
        return self._eager()._idx

    @property
    def is_leaf(self):
        return self._eager()._node is None

    @property
    def grad_fn(self):
        return self._eager()._node

    def backward(self, gradient=None, retain_graph=False):
        _backprop.backward(self._eager(), gradient, retain_graph)

    def detach(self):
        return self._eager().detach()

    def _value(self):
        """The value as a numpy array (forces the context if pending)."""
        pn = self._pn
        if pn.call is None:
            pn.ab.force_for(self)
        d = pn.ab.read_value(self)
        _set_data(self, d)
        return d

    def _eager(self):
        """The value as an ordinary tensor on the tape (a view of its batch
        output), made once."""
        try:
            return self._conc
        except AttributeError:
            pass
        pn = self._pn
        if pn.call is None:
            pn.ab.force_for(self)
        c = self._conc = pn.ab.materialize(self)
        return c


_engine.register_lazy_type(LazyTensor)


def ident(a):
    """How a shared input enters a signature: arrays and tensors by identity,
    Python and numpy scalars by value (their type is in the plan's key)."""
    tp = type(a)
    if tp in WEAK or isinstance(a, np.generic) or a is None:
        return a
    return id(a)


def trail_of(shape):
    return shape[1:] if shape else ()


def nrows(shape):
    return shape[0] if shape else 1


def aval_of(a):
    tp = type(a)
    if tp is LazyTensor:
        d = DESCS[a._desc]
        return Aval(d[0], d[1])
    if isinstance(a, Tensor):
        return a._data
    if tp is _NDARRAY:
        return a
    if tp in WEAK:
        return Aval((), a)
    if a is None:
        return None
    return Aval(np.shape(a), np.asarray(a).dtype)


def shape_of(a):
    if type(a) is LazyTensor:
        return DESCS[a._desc][0]
    return np.shape(a._data if isinstance(a, Tensor) else a)
