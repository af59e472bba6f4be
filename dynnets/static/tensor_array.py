"""TensorArrays in static graphs (TF1's ``tf.TensorArray``): the API
class, its primitives (new, write, read, stack, unstack, scatter, gather,
size) and :class:`TensorArrayValue`, an array's value at run time
(:mod:`dynnets.static.core.tensor_array_value`: the executors handle it).

A TensorArrayValue is an immutable list of element arrays (``write``
copies the list, which is cheap: pointers, not data). Its gradient is a
TensorArrayValue too (``None`` elements are zeros), added with ``+`` or
``np.add``. The copies make a loop of ``n`` writes cost O(n^2) pointer
copies: right for sequences and tree levels, not for loops of millions of
steps (a loop variable grown by rows, ``concat([v, rows])``, is written in
place instead: :mod:`.control_flow`).
"""
from __future__ import annotations

import numpy as np

from ..autograd.primitives import Aval, ShapeError, dtype_of, fmt_shape
from .core.tensor_array_value import TensorArrayValue
from .graph import StaticPrimitive, Value, add_op, constant

__all__ = ["TensorArray", "TensorArrayValue", "ta_new_p", "ta_write_p", "ta_read_p", "ta_stack_p", "ta_unstack_p",
           "ta_scatter_p", "ta_gather_p", "ta_size_p"]

# --------------------------------------------------------------------------
# TensorArray
# --------------------------------------------------------------------------


def _ta_name(a):
    return f"TensorArray '{a.get('ta_name') or 'TensorArray'}'"


def _index(i, n, a, op):
    i = int(i)
    if i < 0 or (i >= n and not a["dynamic_size"] and op != "read"):
        raise IndexError(f"{_ta_name(a)}: {op} index {i} is out of range for its size {n}"
                         f"{' (the array is not dynamic_size)' if op != 'read' else ''}")
    if op == "read" and i >= n:
        raise IndexError(f"{_ta_name(a)}: read index {i} is out of range for its size {n}")
    return i


def _check_elem(ta, value, a):
    shp = np.shape(value)
    es = ta.element_shape
    if es is not None and es != shp:
        raise ShapeError(f"{_ta_name(a)}: cannot write a value of shape {fmt_shape(shp)}: the elements written so "
                         f"far have shape {fmt_shape(es)}")
    return shp


def _ta_new(*size, dtype, n, **a):
    k = int(size[0]) if size else n
    if k < 0:
        raise ValueError(f"{_ta_name(a)}: size must be >= 0, got {k}")
    return TensorArrayValue([None] * k, dtype)


def _ta_new_shape(*size, dtype, n, **a):
    if size:
        s = size[0]
        if tuple(s.shape) != () or dtype_of(s).kind not in "iu":
            raise ShapeError(f"{_ta_name(a)}: size must be an integer scalar, got shape {fmt_shape(s.shape)} dtype "
                             f"{dtype_of(s)}")
        return Aval((None,), np.dtype(dtype))
    return Aval((None,) if a["dynamic_size"] else (n,), np.dtype(dtype))


def _ta_write(ta, index, value, **a):
    n = len(ta.items)
    i = _index(index, n, a, "write")
    es = _check_elem(ta, value, a)
    items = list(ta.items)
    if i >= n:
        items.extend([None] * (i + 1 - n))
    elif items[i] is not None:
        raise ValueError(f"{_ta_name(a)}: could not write to index {i}: it has already been written to")
    items[i] = value
    return TensorArrayValue(items, ta.dtype, es)


def _flow_shape(flow, a):
    return Aval((None,) if a["dynamic_size"] else tuple(flow.shape), dtype_of(flow))


def _ta_write_shape(flow, index, value, **a):
    _check_index(index, a, "write")
    _check_value(flow, value, a, "write", 0)
    return _flow_shape(flow, a)


def _check_index(index, a, op):
    if tuple(index.shape) != () or dtype_of(index).kind not in "iu":
        raise ShapeError(f"{_ta_name(a)}.{op}: index must be an integer scalar, got shape {fmt_shape(index.shape)} "
                         f"dtype {dtype_of(index)}")


def _check_value(flow, value, a, op, lead):
    if dtype_of(value) != dtype_of(flow):
        raise TypeError(f"{_ta_name(a)}.{op}: the array holds {dtype_of(flow)}, given a value of dtype "
                        f"{dtype_of(value)}")
    es = a.get("element_shape")
    got = tuple(value.shape)[lead:]
    if es is not None and not (len(got) == len(es) and all(x is None or y is None or x == y
                                                            for x, y in zip(got, es))):
        raise ShapeError(f"{_ta_name(a)}.{op}: value elements have shape {fmt_shape(got)}, the array's elements "
                         f"{fmt_shape(es)}")


def _ta_write_vjp(g, ins, out, **a):
    ta, index, value = ins
    i = int(index)
    gi = g.items[i] if g is not None and i < len(g.items) else None
    gflow = None
    if g is not None:
        items = list(g.items[:len(ta.items)])
        items.extend([None] * (len(ta.items) - len(items)))
        if i < len(items):
            items[i] = None
        gflow = TensorArrayValue(items, ta.dtype, ta.element_shape)
    return gflow, None, (gi if gi is not None else np.zeros(np.shape(value), np.result_type(value)))


def _ta_read(ta, index, **a):
    i = _index(index, len(ta.items), a, "read")
    x = ta.items[i]
    if x is None:
        raise ValueError(f"{_ta_name(a)}: could not read from index {i}: it has not yet been written to")
    return x


def _elem_aval(flow, a, op):
    es = a.get("element_shape")
    if es is None:
        raise ShapeError(f"{_ta_name(a)}.{op}: the element shape is unknown; write to the array first or give "
                         f"TensorArray(..., element_shape=)")
    return tuple(es)


def _ta_read_shape(flow, index, **a):
    _check_index(index, a, "read")
    return Aval(_elem_aval(flow, a, "read"), dtype_of(flow))


def _ta_read_vjp(g, ins, out, **a):
    ta, index = ins
    items = [None] * len(ta.items)
    items[int(index)] = g
    return TensorArrayValue(items, ta.dtype, ta.element_shape), None


def _filled(ta, a, op):
    es = ta.element_shape
    if es is None:
        decl = a.get("element_shape")
        if decl is not None and all(d is not None for d in decl):
            es = tuple(decl)
    items = ta.items
    if any(x is None for x in items) or not items:
        if es is None:
            raise ValueError(f"{_ta_name(a)}.{op}: some elements were never written and the element shape is unknown")
        z = np.zeros(es, ta.dtype)
        items = [z if x is None else x for x in items]
    return items, es


def _ta_stack(ta, **a):
    items, es = _filled(ta, a, "stack")
    if not items:
        return np.zeros((0,) + tuple(es), ta.dtype)
    return np.stack(items)


def _ta_stack_shape(flow, **a):
    return Aval((flow.shape[0],) + _elem_aval(flow, a, "stack"), dtype_of(flow))


def _ta_stack_vjp(g, ins, out, **a):
    ta, = ins
    return (TensorArrayValue(list(g), ta.dtype, tuple(np.shape(g))[1:]),)


def _scatter(ta, indices, value, a, op):
    n = len(ta.items)
    items = list(ta.items)
    es = None
    for j, i in enumerate(np.asarray(indices).reshape(-1)):
        i = _index(i, n, a, op)
        v = value[j]
        es = _check_elem(TensorArrayValue([], ta.dtype, es or ta.element_shape), v, a)
        if i >= len(items):
            items.extend([None] * (i + 1 - len(items)))
        elif items[i] is not None:
            raise ValueError(f"{_ta_name(a)}: could not write to index {i}: it has already been written to")
        items[i] = v
    return TensorArrayValue(items, ta.dtype, es or ta.element_shape)


def _ta_unstack(ta, value, **a):
    return _scatter(ta, np.arange(np.shape(value)[0]), value, a, "unstack")


def _ta_unstack_shape(flow, value, **a):
    if len(value.shape) < 1:
        raise ShapeError(f"{_ta_name(a)}.unstack: value must have at least one dimension, got a scalar")
    _check_value(flow, value, a, "unstack", 1)
    if flow.shape[0] is not None and value.shape[0] is not None and value.shape[0] > flow.shape[0] \
            and not a["dynamic_size"]:
        raise ShapeError(f"{_ta_name(a)}.unstack: value has {value.shape[0]} rows, more than the array's size "
                         f"{flow.shape[0]}")
    if a["dynamic_size"] or flow.shape[0] is None:
        return Aval((None,), dtype_of(flow))
    return Aval(tuple(flow.shape), dtype_of(flow))


def _gather_items(g, indices, like, a):
    rows = []
    for i in np.asarray(indices).reshape(-1):
        x = g.items[int(i)] if g is not None and int(i) < len(g.items) else None
        rows.append(np.zeros(np.shape(like)[1:], np.result_type(like)) if x is None else x)
    if not rows:
        return np.zeros(np.shape(like), np.result_type(like))
    return np.stack(rows)


def _cleared(g, indices, ta):
    items = list(g.items[:len(ta.items)]) if g is not None else [None] * len(ta.items)
    items.extend([None] * (len(ta.items) - len(items)))
    for i in np.asarray(indices).reshape(-1):
        if int(i) < len(items):
            items[int(i)] = None
    return TensorArrayValue(items, ta.dtype, ta.element_shape)


def _ta_unstack_vjp(g, ins, out, **a):
    ta, value = ins
    idx = np.arange(np.shape(value)[0])
    return _cleared(g, idx, ta), _gather_items(g, idx, value, a)


def _ta_scatter(ta, indices, value, **a):
    if np.shape(value)[0] != np.size(indices):
        raise ShapeError(f"{_ta_name(a)}.scatter: {np.size(indices)} indices for a value with "
                         f"{np.shape(value)[0]} rows")
    return _scatter(ta, indices, value, a, "scatter")


def _ta_scatter_shape(flow, indices, value, **a):
    if len(indices.shape) != 1 or dtype_of(indices).kind not in "iu":
        raise ShapeError(f"{_ta_name(a)}.scatter: indices must be a vector of integers, got shape "
                         f"{fmt_shape(indices.shape)} dtype {dtype_of(indices)}")
    if len(value.shape) < 1:
        raise ShapeError(f"{_ta_name(a)}.scatter: value must have at least one dimension, got a scalar")
    _check_value(flow, value, a, "scatter", 1)
    return _flow_shape(flow, a)


def _ta_scatter_vjp(g, ins, out, **a):
    ta, indices, value = ins
    return _cleared(g, indices, ta), None, _gather_items(g, indices, value, a)


def _ta_gather(ta, indices, **a):
    idx = np.asarray(indices).reshape(-1)
    n = len(ta.items)
    for i in idx:
        _index(i, n, a, "read")
    items, es = _filled(TensorArrayValue([ta.items[int(i)] for i in idx], ta.dtype, ta.element_shape), a, "gather")
    if not items:
        return np.zeros((0,) + tuple(es), ta.dtype)
    return np.stack(items)


def _ta_gather_shape(flow, indices, **a):
    if len(indices.shape) != 1 or dtype_of(indices).kind not in "iu":
        raise ShapeError(f"{_ta_name(a)}.gather: indices must be a vector of integers, got shape "
                         f"{fmt_shape(indices.shape)} dtype {dtype_of(indices)}")
    return Aval((indices.shape[0],) + _elem_aval(flow, a, "gather"), dtype_of(flow))


def _ta_gather_vjp(g, ins, out, **a):
    ta, indices = ins
    items = [None] * len(ta.items)
    for j, i in enumerate(np.asarray(indices).reshape(-1)):
        i = int(i)
        items[i] = g[j] if items[i] is None else items[i] + g[j]
    return TensorArrayValue(items, ta.dtype, ta.element_shape), None


def _ta_size(ta, **a):
    return np.asarray(len(ta.items), dtype=np.int32)


# a TensorArray holds the arrays written to it (retains_inputs): the memory plan gives them no buffer
ta_new_p = StaticPrimitive("tensor_array", _ta_new, _ta_new_shape, retains_inputs=True)
ta_write_p = StaticPrimitive("tensor_array_write", _ta_write, _ta_write_shape, joint_vjp=_ta_write_vjp,
                             retains_inputs=True)
ta_read_p = StaticPrimitive("tensor_array_read", _ta_read, _ta_read_shape, joint_vjp=_ta_read_vjp)
ta_stack_p = StaticPrimitive("tensor_array_stack", _ta_stack, _ta_stack_shape, joint_vjp=_ta_stack_vjp)
ta_unstack_p = StaticPrimitive("tensor_array_unstack", _ta_unstack, _ta_unstack_shape, joint_vjp=_ta_unstack_vjp,
                               retains_inputs=True)
ta_scatter_p = StaticPrimitive("tensor_array_scatter", _ta_scatter, _ta_scatter_shape, joint_vjp=_ta_scatter_vjp,
                               retains_inputs=True)
ta_gather_p = StaticPrimitive("tensor_array_gather", _ta_gather, _ta_gather_shape, joint_vjp=_ta_gather_vjp)
ta_size_p = StaticPrimitive("tensor_array_size", _ta_size, lambda flow, **a: Aval((), np.dtype(np.int32)))


def _as_value(x, dtype=None):
    if isinstance(x, Value):
        return x
    arr = np.asarray(x, dtype=dtype)
    return constant(arr)


class TensorArray:
    """A list of tensors written and read inside a graph (TF1's
    ``tf.TensorArray``), usable as a ``while_loop`` variable.

    Writes are functional: ``ta.write(i, v)`` returns a new TensorArray (use
    it, as in TF1: ``ta = ta.write(i, v)``); each index may be written once.

    The arguments are TF1's, in TF1's order: ``TensorArray(dtype, size,
    dynamic_size, clear_after_read, tensor_array_name, handle, flow,
    infer_shape, element_shape, colocate_with_first_write_call, name)``.

    Parameters
    ----------
    dtype : numpy dtype
    size : int or integer scalar Value
        The number of elements (0 when omitted).
    dynamic_size : bool
        Writes past the end grow the array.
    clear_after_read : bool, optional
        Accepted; elements are never cleared here, so reading an index twice
        works (TF1's default, True, makes a second read an error).
    tensor_array_name : str, optional
        The array's name (``name`` when omitted).
    handle
        Not supported (an error unless None): ``flow`` alone rebuilds an array.
    flow : Value, optional
        The ``flow`` of another TensorArray: this array then holds its elements.
    infer_shape : bool
        Accepted; the element shape is always taken from ``element_shape`` or
        the first write or unstack, and a write of another shape is an error
        (TF1 with ``infer_shape=False`` accepts elements of different shapes).
    element_shape : tuple, optional
        The shape of every element (``None`` dimensions allowed); otherwise
        taken from the first write or unstack.
    colocate_with_first_write_call : bool
        Accepted; no effect on the CPU.
    name : str, optional
    """

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None, tensor_array_name=None,
                 handle=None, flow=None, infer_shape=True, element_shape=None, colocate_with_first_write_call=True,
                 name=None):
        # dynnets' own order had element_shape, name, flow in 4th-6th place: a call in that order lands in
        # clear_after_read / tensor_array_name / handle, so those are checked (never silently taken)
        for arg, pos, v in (("dynamic_size", 3, dynamic_size), ("clear_after_read", 4, clear_after_read),
                            ("infer_shape", 8, infer_shape),
                            ("colocate_with_first_write_call", 10, colocate_with_first_write_call)):
            if v is not None and not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"TensorArray: {arg} (TF1's argument {pos}) must be a bool or None, got {v!r} "
                                f"(element_shape is TF1's ninth argument: pass it by keyword)")
        if tensor_array_name is not None and not isinstance(tensor_array_name, str):
            raise TypeError(f"TensorArray: tensor_array_name (TF1's argument 5) must be a string, got "
                            f"{tensor_array_name!r}")
        if handle is not None:
            raise ValueError(f"TensorArray: handle= is not supported, got {handle!r} (pass the other array's "
                             f"flow= to rebuild it)")
        self.dtype = np.dtype(dtype)
        self.dynamic_size = bool(dynamic_size)
        self.element_shape = None if element_shape is None else tuple(
            element_shape.as_list() if hasattr(element_shape, "as_list") else element_shape)
        self.name = tensor_array_name or name or "TensorArray"
        if flow is not None:
            if not isinstance(flow, Value):
                raise TypeError(f"TensorArray: flow must be the flow of another TensorArray, got {flow!r}")
            self.flow = flow
            return
        attrs = {"dtype": self.dtype, "n": 0, "dynamic_size": self.dynamic_size, "ta_name": self.name}
        if isinstance(size, Value):
            self.flow = add_op(ta_new_p, size, name=self.name, **attrs)
        else:
            n = 0 if size is None else int(size)
            if n < 0:
                raise ValueError(f"TensorArray '{self.name}': size must be >= 0, got {n}")
            attrs["n"] = n
            self.flow = add_op(ta_new_p, name=self.name, **attrs)

    def with_flow(self, flow, element_shape=None):
        return TensorArray(self.dtype, dynamic_size=self.dynamic_size,
                           element_shape=element_shape if element_shape is not None else self.element_shape,
                           name=self.name, flow=flow)

    def _attrs(self):
        return {"dynamic_size": self.dynamic_size, "ta_name": self.name, "element_shape": self.element_shape}

    def _merge_shape(self, shape, op):
        shape = tuple(shape)
        es = self.element_shape
        if es is None:
            return shape
        if len(es) != len(shape) or any(a is not None and b is not None and a != b for a, b in zip(es, shape)):
            raise ShapeError(f"TensorArray '{self.name}'.{op}: value elements have shape {fmt_shape(shape)}, the "
                             f"array's elements {fmt_shape(es)}")
        return tuple(a if a is not None else b for a, b in zip(es, shape))

    def write(self, index, value, name=None):
        """A TensorArray with ``value`` at ``index``."""
        v = _as_value(value, self.dtype if not isinstance(value, Value) else None)
        es = self._merge_shape(v.shape, "write")
        i = _as_value(index, np.int32)
        flow = add_op(ta_write_p, self.flow, i, v, name=name or f"{self.name}/write", **self._attrs())
        return self.with_flow(flow, es)

    def read(self, index, name=None):
        """The element at ``index``."""
        return add_op(ta_read_p, self.flow, _as_value(index, np.int32), name=name or f"{self.name}/read",
                      **self._attrs())

    def stack(self, name=None):
        """All elements stacked along a new first axis (unwritten ones are
        zeros when the element shape is known)."""
        return add_op(ta_stack_p, self.flow, name=name or f"{self.name}/stack", **self._attrs())

    def unstack(self, value, name=None):
        """A TensorArray whose element ``i`` is ``value[i]``."""
        v = _as_value(value, self.dtype if not isinstance(value, Value) else None)
        if len(v.shape) < 1:
            raise ShapeError(f"TensorArray '{self.name}'.unstack: value must have at least one dimension")
        es = self._merge_shape(v.shape[1:], "unstack")
        flow = add_op(ta_unstack_p, self.flow, v, name=name or f"{self.name}/unstack", **self._attrs())
        return self.with_flow(flow, es)

    def scatter(self, indices, value, name=None):
        """A TensorArray with ``value[j]`` at index ``indices[j]``."""
        v = _as_value(value, self.dtype if not isinstance(value, Value) else None)
        es = self._merge_shape(v.shape[1:], "scatter") if len(v.shape) >= 1 else None
        flow = add_op(ta_scatter_p, self.flow, _as_value(indices, np.int32), v,
                      name=name or f"{self.name}/scatter", **self._attrs())
        return self.with_flow(flow, es)

    def gather(self, indices, name=None):
        """The elements at ``indices``, stacked."""
        return add_op(ta_gather_p, self.flow, _as_value(indices, np.int32), name=name or f"{self.name}/gather",
                      **self._attrs())

    def size(self, name=None):
        """The number of elements (int32 scalar)."""
        return add_op(ta_size_p, self.flow, name=name or f"{self.name}/size", **self._attrs())

    def identity(self):
        return self

    def __repr__(self):
        return (f"<TensorArray '{self.name}' dtype={self.dtype} element_shape="
                f"{None if self.element_shape is None else fmt_shape(self.element_shape)}>")
