"""TF1's tensors over the compiler core's values: :class:`Value` (TF1's
``Tensor``: its shape as TF1 shows it, its operators with TF1's rules, the
in-place methods refused, ``eval``), :class:`Operation` (a node run for its
effect), :class:`OpInfo` (a pure op as TF1's ``Operation`` shows it), and the
per-thread stacks of default sessions and active traces.

The graph these values belong to is :class:`dynnets.static.graph.Graph`;
the value's tables (``graph``, ``id``, ``name``, ``sparse``) are the core's
(:class:`dynnets.static.core.graph.Value`).
"""
from __future__ import annotations

import threading

from ..autograd.primitives import dtype_of, fmt_shape
from ..autograd.tensor import TensorOps
from . import operands as _operands
from .core.graph import Value as IRValue
from .core.ir import RunForEffect
from .tensor_shape import TensorShape, TF1TensorShape

__all__ = ["Value", "Operation", "OpInfo", "UnknownShape", "is_symbolic", "ThreadStack", "default_sessions",
           "get_default_session", "default_session_for", "active_traces"]


class OpInfo:
    """A pure op of a graph as TF1's ``Operation`` shows it: ``name``, ``type``
    (the primitive), ``inputs`` and ``outputs`` (Values). Fetch its outputs for
    their values; fetching the op itself runs it and gives ``None``, as TF1's
    ``sess.run(op)``. Two OpInfos of the same op are equal (the session's plan
    cache keys on them)."""

    __slots__ = ("graph", "eqn")

    def __init__(self, graph, eqn):
        self.graph = graph
        self.eqn = eqn

    def __eq__(self, other):
        return type(other) is OpInfo and other.graph is self.graph and other.eqn is self.eqn

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((id(self.graph), id(self.eqn)))

    def run(self, feed_dict=None, session=None):
        """Run this op in ``session`` or the default session (TF1's ``Operation.run``): ``None``."""
        return default_session_for(self, session, "execute operation", "run").run(self, feed_dict)

    @property
    def name(self):
        return self.eqn.name

    @property
    def type(self):
        return self.eqn.prim.name

    @property
    def inputs(self):
        return [self.graph.values[i] for i in self.eqn.ins]

    @property
    def outputs(self):
        return [self.graph.values[o] for o in self.eqn.outs]

    def __repr__(self):
        return f"<OpInfo '{self.name}' type={self.type}>"


# --------------------------------------------------------------------------
# symbolic values
# --------------------------------------------------------------------------


class UnknownShape:
    """The shape of a value of unknown rank (a placeholder made without a
    shape, and the elementwise ops on it), as TF1's ``TensorShape(None)``:
    ``ndims`` is None, an index gives an unknown dimension (None), and
    ``len``, iteration and ``as_list`` raise, naming the value."""

    __slots__ = ("name",)
    ndims = None
    rank = None
    dims = None

    def __init__(self, name):
        self.name = name

    def _unknown(self, what):
        return ValueError(f"Value '{self.name}' has an unknown rank (it comes from a placeholder made without a "
                          f"shape): cannot {what}; give the placeholder a shape (tf.placeholder(dtype, shape=[...]), "
                          f"shape=[] for a scalar)")

    def __len__(self):
        raise self._unknown("take the length of its shape")

    def __iter__(self):
        raise self._unknown("iterate over its shape")

    def __getitem__(self, k):
        if isinstance(k, slice):
            return self
        return None

    def __bool__(self):
        return True

    def as_list(self):
        raise self._unknown("list its shape (as_list() is not defined on an unknown TensorShape)")

    def is_fully_defined(self):
        return False

    def num_elements(self):
        return None

    def __eq__(self, other):
        return isinstance(other, UnknownShape)

    def __hash__(self):
        return hash(UnknownShape)

    def __repr__(self):
        return "<unknown>"


def _tf1_operator(op, method, tf1=None, reflected=False):
    """Value's operator ``method``: TF1's rule (the non-tensor operand converted
    to the value's dtype, see :mod:`.math_ops`; ``tf1(x, y)`` where TF1's op
    differs from eager dynnets'), or the eager operator inside a trace
    (traced code is eager code, with PyTorch's semantics)."""
    eager = getattr(TensorOps, method)

    def f(self, o):
        if active_traces:
            return eager(self, o)
        o = _operands.convert_operand(op, "x" if reflected else "y", o, dtype_of(self.graph.avals[self.id]))
        if tf1 is None:
            return eager(self, o)
        return getattr(_operands, tf1)(o, self) if reflected else getattr(_operands, tf1)(self, o)
    f.__name__ = method
    return f


class Value(IRValue, TensorOps):
    """A symbolic value of a :class:`Graph` (TF1's ``Tensor``): it has a
    shape (dimensions may be ``None``) and a dtype, and supports every dynnets
    op and operator (:class:`~dynnets.autograd.tensor.TensorOps`, shared with
    eager tensors). Its value exists only inside :meth:`Session.run`."""

    __slots__ = ()
    _is_symbolic = True
    __array_ufunc__ = None          # ndarray (op) Value -> Value's reflected operator
    __array_priority__ = 2000

    @property
    def shape(self):
        s = self.graph.avals[self.id].shape
        return TensorShape(s) if s is not None else UnknownShape(self.name)

    def get_shape(self):
        """TF1's TensorShape (see :mod:`.tensor_shape`): an index gives a
        Dimension (``.value``), ``Dimension(None)`` where unknown."""
        s = self.graph.avals[self.id].shape
        return TF1TensorShape(s) if s is not None else UnknownShape(self.name)

    def __bool__(self):
        raise TypeError(
            f"Value '{self.name}' has no value while the graph is built, so it cannot be used as a Python "
            f"bool: Python control flow in a static graph or a traced function may depend on shapes "
            f"(x.shape), not on values")

    def __len__(self):
        d = self.shape[0] if self.ndim else None
        if d is None:
            raise TypeError(f"len() of Value '{self.name}' with shape {fmt_shape(self.shape)}: first dimension unknown")
        return d

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __index__(self):
        raise TypeError(f"Value '{self.name}' cannot be used as a Python index while the graph is built")

    def __repr__(self):
        return f"<{type(self).__name__} '{self.name}' shape={fmt_shape(self.shape)} dtype={self.dtype}>"

    # TF1's tensors are immutable: torch's in-place ops raise (``v += 1``
    # rebinds v to a new value, as in TF1: Value defines no __iadd__)
    def _immutable(self, op, *args, **kwargs):
        raise TypeError(
            f"{op}: Value '{self.name}' is a static-graph value, which is immutable (TF1's tensors are): build a "
            f"new value (y = y + x, or tf.where for an item assignment), or update a Variable with "
            f"v.assign(...) / v.assign_add(...) / v.assign_sub(...) (tf.assign, tf.assign_add)")

    def add_(self, *args, **kwargs):
        self._immutable("add_")

    def sub_(self, *args, **kwargs):
        self._immutable("sub_")

    def mul_(self, *args, **kwargs):
        self._immutable("mul_")

    def div_(self, *args, **kwargs):
        self._immutable("div_")

    def pow_(self, *args, **kwargs):
        self._immutable("pow_")

    def clamp_(self, *args, **kwargs):
        self._immutable("clamp_")

    clip_ = clamp_

    # TF1's binary operators (graph building only: a few extra calls per node, never per run)
    __add__ = _tf1_operator("add", "__add__")
    __radd__ = _tf1_operator("add", "__radd__", reflected=True)
    __sub__ = _tf1_operator("sub", "__sub__")
    __rsub__ = _tf1_operator("sub", "__rsub__", reflected=True)
    __mul__ = _tf1_operator("mul", "__mul__")
    __rmul__ = _tf1_operator("mul", "__rmul__", reflected=True)
    __pow__ = _tf1_operator("pow", "__pow__")
    __rpow__ = _tf1_operator("pow", "__rpow__", reflected=True)
    __matmul__ = _tf1_operator("matmul", "__matmul__")
    __rmatmul__ = _tf1_operator("matmul", "__rmatmul__", reflected=True)
    __truediv__ = _tf1_operator("truediv", "__truediv__", "truediv")
    __rtruediv__ = _tf1_operator("truediv", "__rtruediv__", "truediv", reflected=True)
    __floordiv__ = _tf1_operator("floordiv", "__floordiv__", "floordiv")
    __rfloordiv__ = _tf1_operator("floordiv", "__rfloordiv__", "floordiv", reflected=True)
    __mod__ = _tf1_operator("floormod", "__mod__", "floormod")
    __rmod__ = _tf1_operator("floormod", "__rmod__", "floormod", reflected=True)
    __lt__ = _tf1_operator("less", "__lt__")
    __le__ = _tf1_operator("less_equal", "__le__")
    __gt__ = _tf1_operator("greater", "__gt__")
    __ge__ = _tf1_operator("greater_equal", "__ge__")

    def fill_(self, *args, **kwargs):
        self._immutable("fill_")

    def zero_(self):
        self._immutable("zero_")

    def copy_(self, *args, **kwargs):
        self._immutable("copy_")

    def __setitem__(self, index, value):
        self._immutable("setitem")

    def eval(self, feed_dict=None, session=None):
        """``session.run(self, feed_dict)`` in ``session`` or the default session
        (inside ``with Session():``, ``sess.as_default()``, or an
        :class:`InteractiveSession`), as TF1's ``Tensor.eval``."""
        return default_session_for(self, session, "evaluate tensor", "eval").run(self, feed_dict)


def is_symbolic(x):
    return getattr(x, "_is_symbolic", False) and isinstance(x, Value)


class ThreadStack(threading.local):
    """A stack with one list per thread, as TF1's default-graph and
    default-session stacks: ``graph.as_default()``, ``with Session()`` and a
    trace in one thread leave every other thread's defaults as they were
    (the global default graph is shared, as in TF1). A list's operations on
    the calling thread's list."""

    def __init__(self):
        self.items = []

    def append(self, x):
        self.items.append(x)

    def pop(self):
        return self.items.pop()

    def remove(self, x):
        self.items.remove(x)

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __contains__(self, x):
        return x in self.items

    def __repr__(self):
        return repr(self.items)


# default sessions of the calling thread (innermost last): with Session(), as_default(), InteractiveSession
default_sessions = ThreadStack()

# graphs of the calling thread's active traces (innermost last): inside one, a Value's operators are eager ones
active_traces = ThreadStack()


def get_default_session():
    """The innermost default session, or None (as ``tf.get_default_session``)."""
    return default_sessions[-1] if default_sessions else None


def default_session_for(v, session, what, method):
    """``session``, else the default session, checked to run ``v`` (``what``/``method`` name the call in errors)."""
    if session is None:
        session = get_default_session()
        if session is None:
            raise ValueError(f"Cannot {what} '{v.name}' using `{method}()`: No default session is registered. "
                             f"Use `with sess.as_default()` or pass an explicit session to "
                             f"`{method}(session=sess)`")
    if session.graph is not v.graph:
        raise ValueError(f"Cannot use the given session to {what} '{v.name}': its graph is different from the "
                         f"session's graph.")
    return session


class Operation(Value, RunForEffect):
    """A node run for its effect (a train op, an initialiser, ``group``):
    fetching it returns ``None``."""

    __slots__ = ()

    # an operation has no value to compare: equality and hashing by identity,
    # as TF's Operation (values compare elementwise)
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def run(self, feed_dict=None, session=None):
        """Run this op in ``session`` or the default session (as TF1's ``Operation.run``)."""
        return default_session_for(self, session, "execute operation", "run").run(self, feed_dict)

    def __repr__(self):
        return f"<Operation '{self.name}'>"
