"""Define-then-run static graphs in the TensorFlow 1.x manner, built from the
same primitive table, kernels and VJPs as eager dynnets.

    import dynnets.static as tf

    x = tf.placeholder((None,), name="x")
    y_target = tf.placeholder((None,), name="y")
    w = tf.Variable(0.1); b = tf.Variable(0.3)
    loss = tf.reduce_mean(tf.square(w * x + b - y_target))
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run([train_op, loss], {x: [1, 2, 3, 4], y_target: [2, 4, 6, 8]})

Every dynnets op (``dynnets.linear``, ``dynnets.lstm_cell``...) and operator
works on symbolic values; the TF1 names below are thin aliases. See
:mod:`.graph` (the graph), :mod:`.session` (the user API), :mod:`.passes`
(the compile pipeline), :mod:`.lower` (a program to a plan of instructions),
:mod:`.execute` (the two executors of a plan), :mod:`.control_flow`
(``while_loop``, ``cond``, ``TensorArray``), :mod:`.backward` (symbolic
gradients), :mod:`.train` (optimizers), :mod:`.trace` (from eager code to
a graph), :mod:`.saver` (``train.Saver``: checkpoints), :mod:`.export`
(graphs as files without the code that built them) and :mod:`.graph_util`
(freezing).

Differences from TF1 worth knowing: ``placeholder`` needs a shape (``None``
marks an unknown dimension; TF1's ``placeholder(dtype, shape)`` order is
accepted); a run reads every variable as it was when the run started and
applies updates last (TF1 leaves that order undefined); only placeholders
can be fed; fetched arrays are always the caller's copies; ``==`` on values
is identity (use ``equal``), as in TF1. Random ops (``random_normal``,
``nn.dropout``...) draw new values at every run (see :mod:`.random`).
"""
from __future__ import annotations

import builtins

import numpy as np

from ..autograd import ops as _ops
from ..autograd import tensor as _tensor
from ..autograd.ops import *  # noqa: F401,F403  dynnets' own op names work on symbolic values
from ..autograd.ops import __all__ as _ops_all
from ..autograd.primitives import Aval, ShapeError, dtype_of
from . import graph_util, layers, nn, passes, train
from .array_ops import fill, range, sequence_mask, shape
from .backward import gradients
from .control_flow import TensorArray, cond, while_loop
from .export import ExportError, GraphDef, GraphFormatError, import_graph_def
from .graph import (FeedError, Graph, GraphError, OpInfo, Operation, OpError, StaticPrimitive,
                    UninitializedVariableError, Value, Variable, constant, get_default_graph, get_default_session,
                    global_variables, global_variables_initializer, group, placeholder, reset_default_graph,
                    trainable_variables, variables_initializer)
from .random import (DEFAULT_GRAPH_SEED, constant_initializer, get_seed, glorot_normal_initializer,
                     glorot_uniform_initializer, ones_initializer, random_normal, random_normal_initializer,
                     random_uniform, random_uniform_initializer, set_random_seed, truncated_normal,
                     truncated_normal_initializer, zeros_initializer)
from .saver import CheckpointMismatchError
from .session import InteractiveSession, Session
from .trace import TracedFunction, trace
from .variable_scope import AUTO_REUSE, VariableScope, get_variable, get_variable_scope, name_scope, variable_scope

float16 = np.float16
float32 = np.float32
float64 = np.float64
int32 = np.int32
int64 = np.int64
bool_ = np.bool_

__all__ = [
    "Graph", "Session", "InteractiveSession", "get_default_session", "OpInfo", "layers", "DEFAULT_GRAPH_SEED",
    "random_normal", "truncated_normal", "random_uniform", "set_random_seed", "get_seed", "zeros_initializer",
    "ones_initializer", "constant_initializer", "random_normal_initializer", "truncated_normal_initializer",
    "random_uniform_initializer", "glorot_uniform_initializer", "glorot_normal_initializer", "get_variable",
    "variable_scope", "name_scope", "get_variable_scope", "AUTO_REUSE", "VariableScope", "Value", "Variable",
    "Operation", "placeholder", "constant", "get_default_graph",
    "reset_default_graph", "global_variables_initializer", "variables_initializer", "global_variables",
    "trainable_variables", "group", "gradients", "while_loop", "cond", "TensorArray", "trace", "TracedFunction",
    "nn", "train", "passes", "graph_util", "import_graph_def", "GraphDef", "GraphFormatError", "ExportError",
    "CheckpointMismatchError",
    "ShapeError", "FeedError", "GraphError", "UninitializedVariableError", "OpError",
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "square", "matmul", "add", "subtract", "multiply",
    "divide", "negative", "cast", "gather", "concat", "stack", "reshape", "transpose", "zeros_like", "ones_like",
    "clip_by_value", "float32", "float64", "int32", "int64", "identity", "argmax", "equal", "not_equal", "less",
    "less_equal", "greater", "greater_equal", "shape", "range", "fill", "sequence_mask", *_ops_all,
]


def argmax(x, axis=None, name=None):
    """Index of the maximum (along ``axis``), int64; no gradient."""
    return _named(_ops.argmax(x, axis), name)


def equal(x, y, name=None):
    """Elementwise ``x == y`` (a boolean Value; ``==`` itself stays identity, as in TF1)."""
    return _named(_ops.equal(x, y), name)


def not_equal(x, y, name=None):
    return _named(_ops.not_equal(x, y), name)


def less(x, y, name=None):
    return _named(_ops.less(x, y), name)


def less_equal(x, y, name=None):
    return _named(_ops.less_equal(x, y), name)


def greater(x, y, name=None):
    return _named(_ops.greater(x, y), name)


def greater_equal(x, y, name=None):
    return _named(_ops.greater_equal(x, y), name)


def _axis(axis, reduction_indices):
    if axis is None:
        axis = reduction_indices
    return tuple(axis) if isinstance(axis, list) else axis


def _named(v, name):
    if name is not None and isinstance(v, Value):
        v.name = v.graph._unique_name(name)
    return v


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None, keep_dims=None):
    """Sum over ``axis`` (all axes by default), as ``tf.reduce_sum``."""
    keepdims = keep_dims if keep_dims is not None else keepdims
    return _named(_ops.sum(input_tensor, axis=_axis(axis, reduction_indices), keepdims=keepdims), name)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None, keep_dims=None):
    keepdims = keep_dims if keep_dims is not None else keepdims
    return _named(_ops.mean(input_tensor, axis=_axis(axis, reduction_indices), keepdims=keepdims), name)


def reduce_max(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None, keep_dims=None):
    keepdims = keep_dims if keep_dims is not None else keepdims
    return _named(_ops.max(input_tensor, axis=_axis(axis, reduction_indices), keepdims=keepdims), name)


def reduce_min(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None, keep_dims=None):
    keepdims = keep_dims if keep_dims is not None else keepdims
    return _named(_ops.min(input_tensor, axis=_axis(axis, reduction_indices), keepdims=keepdims), name)


def square(x, name=None):
    return _named(_ops.square(x), name)


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    """``a @ b`` with TF1's transpose flags (2-D)."""
    if transpose_a:
        a = _ops.transpose(a)
    if transpose_b:
        b = _ops.transpose(b)
    return _named(_ops.matmul(a, b), name)


def add(x, y, name=None):
    return _named(_ops.add(x, y), name)


def subtract(x, y, name=None):
    return _named(_ops.sub(x, y), name)


def multiply(x, y, name=None):
    return _named(_ops.mul(x, y), name)


def divide(x, y, name=None):
    return _named(_ops.div(x, y), name)


def negative(x, name=None):
    return _named(_ops.neg(x), name)


def identity(x, name=None):
    """``x`` itself (a graph node gets a new name only when ``name`` is given)."""
    if name is None:
        return x
    # a reshape to the same shape infers at most one unknown dimension; x[...] any number
    same = _ops.reshape(x, *x.shape) if list(x.shape).count(None) <= 1 else _ops.getitem(x, Ellipsis)
    return _named(same, name)


def cast(x, dtype, name=None):
    return _named(_ops.astype(x, dtype), name)


def gather(params, indices, name=None):
    """Rows of ``params`` at integer ``indices`` (axis 0)."""
    return _named(_ops.take(params, indices), name)


def concat(values, axis, name=None):
    return _named(_ops.concat(list(values), axis=axis), name)


def stack(values, axis=0, name=None):
    return _named(_ops.stack(list(values), axis=axis), name)


def reshape(tensor, shape, name=None):
    return _named(_ops.reshape(tensor, *tuple(shape)), name)


def transpose(a, perm=None, name=None):
    return _named(_ops.transpose(a, tuple(perm)) if perm is not None else _ops.transpose(a), name)


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    return _named(_ops.clip(t, clip_value_min, clip_value_max), name)


def _fill_like(x, value):
    return np.full(np.shape(x), value, dtype=np.result_type(x))


fill_like_p = StaticPrimitive("fill_like", _fill_like, lambda x, value: Aval(tuple(x.shape), dtype_of(x)))


def zeros_like(x, name=None):
    """Zeros of ``x``'s shape and dtype (no gradient flows through)."""
    if not isinstance(x, Value):
        return _tensor.zeros_like(x)
    return _named(x.graph._append(fill_like_p, (x.id,), {"value": 0}, Aval(tuple(x.shape), x.dtype)), name)


def ones_like(x, name=None):
    if not isinstance(x, Value):
        return _tensor.ones_like(x)
    return _named(x.graph._append(fill_like_p, (x.id,), {"value": 1}, Aval(tuple(x.shape), x.dtype)), name)


# --------------------------------------------------------------------------
# TF1's meanings where dynnets' own op of the same name (PyTorch's) differs
# --------------------------------------------------------------------------

def split(value, num_or_size_splits, axis=0, num=None, name=None):
    """Parts of ``value`` along ``axis``, as TF1's ``tf.split``: an int is the
    number of equal parts (the dimension must divide evenly), a list the size
    of each (one may be -1, inferred). (Eager ``dynnets.split`` is
    PyTorch's, where an int is the size of each part.) Sizes in a list need
    not know the dimension when the graph is built: they are checked when it
    runs."""
    nd = len(value.shape)
    # (builtins: this module's max and sum are the ops)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -nd <= axis < builtins.max(nd, 1):
        raise ShapeError(f"split: axis {axis!r} is out of range for a value of shape {tuple(value.shape)}")
    ax = int(axis) % nd
    n = value.shape[ax]
    if isinstance(num_or_size_splits, (int, np.integer)) and not isinstance(num_or_size_splits, bool):
        k = int(num_or_size_splits)
        if k <= 0:
            raise ShapeError(f"split: num_or_size_splits must be a positive number of parts, got {k}")
        if n is None:
            raise ShapeError(f"split: dimension {ax} of value.shape={tuple(value.shape)} is unknown when the graph "
                             f"is built, so {k} equal parts cannot be made; pass a list of sizes")
        if n % k:
            raise ShapeError(f"split: dimension {ax} of size {n} is not evenly divisible by {k}")
        sizes = [n // k] * k
    else:
        sizes = [int(s) for s in num_or_size_splits]
        if sizes.count(-1) > 1:
            raise ShapeError(f"split: at most one size can be -1, got {sizes}")
        if -1 in sizes:
            if n is None:
                raise ShapeError(f"split: a size of -1 needs dimension {ax} of value.shape={tuple(value.shape)}, "
                                 f"which is unknown")
            sizes[sizes.index(-1)] = n - (builtins.sum(sizes) + 1)
    if num is not None and num != len(sizes):
        raise ShapeError(f"split: num={num} does not match the {len(sizes)} parts of {num_or_size_splits!r}")
    parts = _ops.split(value, sizes, axis=ax)
    if name is not None:
        for k, p in enumerate(parts):
            _named(p, f"{name}_{k}" if k else name)
    return parts


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None):
    """The norm of ``tensor``, as TF1's ``tf.norm``: a vector norm over all
    elements (``axis=None``) or along an int ``axis`` (``'euclidean'``,
    ``'fro'``, a number, ``np.inf``); over a pair of axes, the Frobenius norm
    (``'euclidean'``/``'fro'``; the other matrix norms are not computed: an
    error). (Eager ``dynnets.norm`` is PyTorch's ``torch.norm``.)"""
    if isinstance(axis, list):
        axis = tuple(axis)
    if isinstance(axis, tuple) and len(axis) == 2 and ord not in ("euclidean", "fro"):
        raise ValueError(f"norm: the matrix norm ord={ord!r} over axis={axis} is not computed by dynnets (only "
                         f"'euclidean'/'fro' over two axes)")
    if isinstance(axis, tuple) and len(axis) > 2:
        raise ValueError(f"norm: axis must be None, an int or a pair of ints, got {axis!r}")
    if ord == "fro" and not (axis is None or isinstance(axis, tuple)):
        raise ValueError("norm: ord='fro' is a matrix norm: give axis=None or a pair of axes")
    p = 2.0 if ord in ("euclidean", "fro") else ord
    return _named(_ops.norm(tensor, p, dim=axis, keepdim=bool(keepdims)), name)
