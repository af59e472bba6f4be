"""Define-then-run static graphs in the TensorFlow 1.x manner, built from the
same primitive table, kernels and VJPs as eager dynnets::

    import dynnets.static as tf

    x = tf.placeholder(tf.float32, [None], name="x")
    y_target = tf.placeholder(tf.float32, [None], name="y")
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

Differences from TF1 worth knowing: a run reads every variable as it was when the run started and
applies updates last (TF1 leaves that order undefined), except that ops made
inside ``control_dependencies`` run after their controls and read the
variables those write after the write, as in TF1; only placeholders
can be fed; fetched arrays are always the caller's copies; ``==`` and ``!=``
on values build elementwise ``equal`` / ``not_equal`` nodes (TF2's tensor
equality; in TF1 they were identity) while values still hash by identity
(operations compare by identity). Random ops (``random_normal``,
``nn.dropout``...) draw new values at every run (see :mod:`.random`).
"""
from __future__ import annotations

import builtins

import numpy as np

from ..autograd import ops as _ops
from ..autograd import tensor as _tensor
from ..autograd.ops import *  # noqa: F401,F403  dynnets' own op names work on symbolic values
from ..autograd.ops import __all__ as _ops_all
from ..autograd.primitives import Aval, DTypeError, ShapeError, dtype_of
from . import graph_util, layers, nn, passes, train
from .array_ops import (boolean_mask, ensure_shape, expand_dims, fill, gather, gather_nd, one_hot, ones, pad, range, rank, reshape,
                        reverse_sequence, sequence_mask, shape, size, slice, split, squeeze, stop_gradient, tile,
                        unstack, where, where_v2, zeros)
from .backward import gradients as _gradients
from .control_flow import TensorArray, cond, while_loop
from .functional_ops import map_fn, scan
from . import math_ops as _math
from .math_ops import div, divide, floor_div, floordiv, floormod, mod, truediv, truncatediv, truncatemod
from .tensor_shape import Dimension, TensorShape, dimension_value
from .export import ExportError, GraphDef, GraphFormatError, import_graph_def
from .graph import named as _graph_named
from .graph import (FeedError, Graph, GraphError, GraphKeys, OpInfo, Operation, OpError, StaticPrimitive,
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
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "square", "squared_difference", "matmul", "add", "subtract", "multiply",
    "divide", "negative", "cast", "gather", "concat", "stack", "reshape", "transpose", "zeros_like", "ones_like",
    "clip_by_value", "float32", "float64", "int32", "int64", "identity", "argmax", "equal", "not_equal", "less",
    "less_equal", "greater", "greater_equal", "shape", "size", "rank", "range", "fill", "ensure_shape", "sequence_mask", *_ops_all,
    "zeros", "ones", "unstack", "expand_dims", "tile", "one_hot", "pad", "slice", "gather_nd", "boolean_mask",
    "reduce_any", "reduce_all", "stop_gradient", "clip_by_global_norm", "global_norm", "assign", "assign_add",
    "assign_sub", "control_dependencies", "no_op", "map_fn", "scan", "where", "where_v2", "split", "squeeze",
    "argmin", "reverse_sequence", "add_n", "logical_and", "logical_or", "logical_not", "bool_",
    "div", "truediv", "floordiv", "floor_div", "truncatediv", "mod", "floormod", "truncatemod",
    "TensorShape", "Dimension", "dimension_value",
]


def gradients(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False, gate_gradients=False,
              aggregation_method=None, stop_gradients=None, unconnected_gradients="none"):
    """Symbolic gradients of ``sum(ys)`` with respect to each of ``xs``
    (``tf.gradients``, in TF1's argument order): ``None`` where a y does not
    depend on an x, or zeros with ``unconnected_gradients="zero"``.
    ``stop_gradients`` is not supported (use :func:`stop_gradient` on the
    values); the other arguments are accepted and change nothing."""
    if stop_gradients is not None:
        raise ValueError("gradients: stop_gradients= is not supported; apply tf.stop_gradient to those values")
    if unconnected_gradients not in ("none", "zero"):
        raise ValueError(f"gradients: unconnected_gradients must be 'none' or 'zero', got {unconnected_gradients!r}")
    out = _gradients(ys, xs, grad_ys)
    if unconnected_gradients == "zero":
        xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
        # zeros of a known shape are a constant (fetching them needs no feed of x), as TF1's folded zeros_like
        out = [r if r is not None else zeros(list(x.shape), x.dtype) if None not in x.shape else zeros_like(x)
               for r, x in zip(out, xs)]
    return out


def _arg_axis(op, axis, dimension, x):
    if dimension is not None:
        if axis is not None:
            raise ValueError(f"{op}: cannot specify both 'axis' and 'dimension'")
        axis = dimension
    # TF1 reduces axis 0 when no axis is given (numpy and torch flatten the input instead)
    return 0 if axis is None else axis


def argmax(input, axis=None, name=None, dimension=None, output_type=np.int64):
    """Indices of the maxima along ``axis`` (``tf.argmax``: axis 0 when not
    given, not the flattened input), of ``output_type``; no gradient."""
    out = _ops.argmax(input, _arg_axis("argmax", axis, dimension, input))
    return _named(out if np.dtype(output_type) == np.int64 else _ops.astype(out, output_type), name)


def argmin(input, axis=None, name=None, dimension=None, output_type=np.int64):
    """Indices of the minima along ``axis`` (``tf.argmin``; axis 0 when not given)."""
    out = _ops.argmin(input, _arg_axis("argmin", axis, dimension, input))
    return _named(out if np.dtype(output_type) == np.int64 else _ops.astype(out, output_type), name)


def equal(x, y, name=None):
    """Elementwise ``x == y`` (a boolean Value), as the ``==`` operator."""
    return _named(_math.binary("equal", _ops.eq, x, y), name)


def not_equal(x, y, name=None):
    """Elementwise ``x != y`` (a boolean Value), as ``tf.not_equal``."""
    return _named(_math.binary("not_equal", _ops.not_equal, x, y), name)


def less(x, y, name=None):
    """Elementwise ``x < y`` (a boolean Value), as ``tf.less``."""
    return _named(_math.binary("less", _ops.less, x, y), name)


def less_equal(x, y, name=None):
    """Elementwise ``x <= y`` (a boolean Value), as ``tf.less_equal``."""
    return _named(_math.binary("less_equal", _ops.less_equal, x, y), name)


def greater(x, y, name=None):
    """Elementwise ``x > y`` (a boolean Value), as ``tf.greater``."""
    return _named(_math.binary("greater", _ops.greater, x, y), name)


def greater_equal(x, y, name=None):
    """Elementwise ``x >= y`` (a boolean Value), as ``tf.greater_equal``."""
    return _named(_math.binary("greater_equal", _ops.greater_equal, x, y), name)


def _axis(axis, reduction_indices):
    if axis is None:
        axis = reduction_indices
    return tuple(axis) if isinstance(axis, list) else axis


_named = _graph_named


def _dt(x):
    return dtype_of(x) if hasattr(x, "dtype") else np.asarray(x).dtype


def _not_bool(op, x):
    if _dt(x).kind == "b":
        raise DTypeError(f"{op}: input_tensor has dtype bool, which {op} does not take (cast it first, or use "
                         f"reduce_any / reduce_all)")


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None, keep_dims=None):
    """Sum over ``axis`` (all axes by default), as ``tf.reduce_sum``; an
    integer input keeps its dtype (numpy would widen int32 to int64)."""
    keepdims = keep_dims if keep_dims is not None else keepdims
    _not_bool("reduce_sum", input_tensor)
    out = _ops.sum(input_tensor, axis=_axis(axis, reduction_indices), keepdims=keepdims)
    if _dt(input_tensor).kind in "iu" and out.dtype != _dt(input_tensor):
        out = _ops.astype(out, _dt(input_tensor))
    return _named(out, name)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None, keep_dims=None):
    """Mean over ``axis`` (all axes by default), as ``tf.reduce_mean``: the
    mean of integers is an integer of their dtype, truncated toward zero, as
    TF1 computes it (cast to float first for the fraction)."""
    keepdims = keep_dims if keep_dims is not None else keepdims
    _not_bool("reduce_mean", input_tensor)
    x = input_tensor
    if _dt(x).kind in "iu":
        # in float64, then cast back: the cast truncates toward zero, as TF1's integer mean
        out = _ops.mean(_ops.astype(x, np.float64), axis=_axis(axis, reduction_indices), keepdims=keepdims)
        return _named(_ops.astype(out, _dt(x)), name)
    out = _ops.mean(x, axis=_axis(axis, reduction_indices), keepdims=keepdims)
    return _named(out, name)


def reduce_max(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None, keep_dims=None):
    """Maximum over ``axis`` (all axes by default), as ``tf.reduce_max``; the gradient
    goes to the maximal elements."""
    keepdims = keep_dims if keep_dims is not None else keepdims
    return _named(_ops.max(input_tensor, axis=_axis(axis, reduction_indices), keepdims=keepdims), name)


def reduce_min(input_tensor, axis=None, keepdims=False, name=None, reduction_indices=None, keep_dims=None):
    """Minimum over ``axis`` (all axes by default), as ``tf.reduce_min``; the gradient
    goes to the minimal elements."""
    keepdims = keep_dims if keep_dims is not None else keepdims
    return _named(_ops.min(input_tensor, axis=_axis(axis, reduction_indices), keepdims=keepdims), name)


def square(x, name=None):
    """``x * x`` elementwise, as ``tf.square``."""
    return _named(_ops.square(x), name)


def squared_difference(x, y, name=None):
    """``(x - y) ** 2`` elementwise, broadcasting (``tf.squared_difference``);
    a number or array operand takes the other's dtype, as TF1's."""
    if not _math.is_tensor(x) and not _math.is_tensor(y):
        x = _math.as_graph_value(x)
    return _named(_ops.square(_math.binary("squared_difference", _ops.sub, x, y)), name)


def _swap_last(x):
    nd = len(x.shape)
    if nd < 2:
        raise ValueError(f"matmul: a transposed operand must have at least 2 dimensions, got shape {x.shape}")
    return _ops.transpose(x, tuple(builtins.range(nd - 2)) + (nd - 1, nd - 2))


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False, a_is_sparse=False,
           b_is_sparse=False, name=None):
    """``a @ b`` (``tf.matmul``); the transpose and adjoint flags swap the
    last two dimensions of their operand (batched operands keep their batch
    dimensions first; the adjoint of a real matrix is its transpose)."""
    if transpose_a and adjoint_a or transpose_b and adjoint_b:
        raise ValueError("matmul: only one of transpose_a and adjoint_a (transpose_b and adjoint_b) can be True")
    for flag, x in ((transpose_a or adjoint_a, a), (transpose_b or adjoint_b, b)):
        if flag and dtype_of(x).kind == "c":
            raise TypeError("matmul: complex operands are not supported")
    if transpose_a or adjoint_a:
        a = _swap_last(a)
    if transpose_b or adjoint_b:
        b = _swap_last(b)
    return _named(_ops.matmul(a, b), name)


def add(x, y, name=None):
    """``x + y`` elementwise, broadcast, as ``tf.add``."""
    return _named(_math.binary("add", _ops.add, x, y), name)


def subtract(x, y, name=None):
    """``x - y`` elementwise, broadcast, as ``tf.subtract``."""
    return _named(_math.binary("subtract", _ops.sub, x, y), name)


def multiply(x, y, name=None):
    """``x * y`` elementwise, broadcast, as ``tf.multiply``."""
    return _named(_math.binary("multiply", _ops.mul, x, y), name)


def negative(x, name=None):
    """``-x`` elementwise, as ``tf.negative``."""
    return _named(_ops.neg(x), name)


def identity(x, name=None):
    """``x`` itself (a graph node gets a new name only when ``name`` is
    given, or inside ``control_dependencies``, where the node is what waits
    for the controls)."""
    if name is None and not (isinstance(x, Value) and x.graph.in_control_block):
        return x
    # a reshape to the same shape infers at most one unknown dimension; x[...] any number; a cast to its
    # own dtype any rank, an unknown one too
    if x.ndim is None:
        same = _ops.astype(x, x.dtype)
    else:
        same = _ops.reshape(x, *x.shape) if list(x.shape).count(None) <= 1 else _ops.getitem(x, Ellipsis)
    return _named(same, name)


def cast(x, dtype, name=None):
    """``x`` in ``dtype``, as ``tf.cast``; the gradient flows back through a float result only."""
    return _named(_ops.astype(x, dtype), name)


def concat(values, axis, name=None):
    """``values`` joined along ``axis`` (``tf.concat``, TF1's order)."""
    if isinstance(values, (int, np.integer)) and not isinstance(values, builtins.bool) \
            and isinstance(axis, (list, tuple)):
        raise TypeError(f"concat: the arguments are (values, axis) since TF 1.0; got values={values!r} and a "
                        f"list as axis: TF 0.x's concat(concat_dim, values) order. Write tf.concat(values, "
                        f"axis={values!r})")
    return _named(_ops.concat(list(values), axis=axis), name)


def stack(values, axis=0, name=None):
    """``values`` (equal shapes) stacked along a new axis ``axis``, as ``tf.stack``."""
    return _named(_ops.stack(list(values), axis=axis), name)


def transpose(a, perm=None, name=None):
    """``a`` with its axes permuted by ``perm`` (reversed by default), as ``tf.transpose``."""
    return _named(_ops.transpose(a, tuple(perm)) if perm is not None else _ops.transpose(a), name)


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """``t`` limited to ``[clip_value_min, clip_value_max]``, as ``tf.clip_by_value``."""
    return _named(_ops.clip(t, clip_value_min, clip_value_max), name)


def _fill_like(x, value):
    return np.full(np.shape(x), value, dtype=np.result_type(x))


fill_like_p = StaticPrimitive("fill_like", _fill_like, lambda x, value: Aval(tuple(x.shape), dtype_of(x)))


def _like(x, value, dtype, name):
    if not isinstance(x, Value):
        out = _tensor.zeros_like(x) if value == 0 else _tensor.ones_like(x)
        return out if dtype is None else _ops.astype(out, dtype)
    out = x.graph.append_equation(fill_like_p, (x.id,), {"value": value}, Aval(tuple(x.shape), x.dtype))
    if dtype is not None and np.dtype(dtype) != x.dtype:
        out = _ops.astype(out, dtype)
    return _named(out, name)


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    """Zeros of ``tensor``'s shape, of its dtype or ``dtype`` (``tf.zeros_like``;
    no gradient flows through)."""
    return _like(tensor, 0, dtype, name)


def ones_like(tensor, dtype=None, name=None, optimize=True):
    """Ones of ``tensor``'s shape, of its dtype or ``dtype`` (``tf.ones_like``)."""
    return _like(tensor, 1, dtype, name)


# --------------------------------------------------------------------------
# TF1's names for the elementwise functions (they take name=)
# --------------------------------------------------------------------------

def _unary(op):
    def f(x, name=None):
        return _named(op(x), name)
    f.__name__ = op.__name__
    f.__doc__ = f"``{op.__name__}(x)`` elementwise (``tf.{op.__name__}``)."
    return f


def _binary(op):
    def f(x, y, name=None):
        return _named(_math.binary(op.__name__, op, x, y), name)
    f.__name__ = op.__name__
    f.__doc__ = f"``{op.__name__}(x, y)`` elementwise, broadcasting (``tf.{op.__name__}``)."
    return f


exp, log, sqrt, abs, tanh, sigmoid, sign = (_unary(f) for f in (_ops.exp, _ops.log, _ops.sqrt, _ops.abs, _ops.tanh,
                                                               _ops.sigmoid, _ops.sign))
pow, maximum, minimum = (_binary(f) for f in (_ops.pow, _ops.maximum, _ops.minimum))


def broadcast_to(input, shape, name=None):
    """``input`` broadcast to ``shape`` (numpy's rules), as ``tf.broadcast_to``."""
    return _named(_ops.broadcast_to(input, shape), name)


def logical_not(x, name=None):
    """Elementwise not of a boolean value (``tf.logical_not``)."""
    _is_bool("logical_not", x)
    return _named(_ops.eq(x, False), name)


def logical_and(x, y, name=None):
    """Elementwise and of two boolean values (``tf.logical_and``)."""
    _is_bool("logical_and", x, y)
    return _named(_ops.mul(x, y), name)       # numpy's product of booleans is their conjunction


def logical_or(x, y, name=None):
    """Elementwise or of two boolean values (``tf.logical_or``)."""
    _is_bool("logical_or", x, y)
    return _named(_ops.maximum(x, y), name)


def _is_bool(op, *xs):
    for x in xs:
        if not isinstance(x, (builtins.bool, np.bool_)) and _dt(x).kind != "b":
            raise DTypeError(f"{op}: expected boolean inputs, got dtype {_dt(x)}")


def add_n(inputs, name=None):
    """The elementwise sum of a list of values of one shape (``tf.add_n``)."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("add_n: inputs must be a non-empty list")
    for k, x in enumerate(inputs[1:], 1):
        if tuple(x.shape) != tuple(inputs[0].shape):
            raise ValueError(f"add_n: input {k} has shape {x.shape}, input 0 {inputs[0].shape}; all must be equal")
    if len(inputs) == 1:
        # one input is handed back as it is, or (named) as an identity of that name, as TF1's add_n
        return identity(inputs[0], name=name) if name is not None and isinstance(inputs[0], Value) else inputs[0]
    out = inputs[0]
    for x in inputs[1:]:
        out = _ops.add(out, x)
    return _named(out, name)


# --------------------------------------------------------------------------
# boolean reductions, gradient clipping
# --------------------------------------------------------------------------

def _bool_reduce(op, x, axis, keepdims, reduction_indices, keep_dims, want):
    if _dt(x).kind != "b":
        raise DTypeError(f"{op}: input_tensor must be boolean, got dtype {_dt(x)}")
    keepdims = keep_dims if keep_dims is not None else builtins.bool(keepdims)
    # counts rather than max/min: an empty reduction is then False (any) / True (all), as in TF1
    n = _ops.sum(_ops.astype(_ops.eq(x, want), np.int64), axis=_axis(axis, reduction_indices), keepdims=keepdims)
    return _ops.greater(n, 0) if want else _ops.eq(n, 0)


def reduce_any(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
    """Logical or over ``axis`` (all axes by default) of a boolean value (``tf.reduce_any``)."""
    return _named(_bool_reduce("reduce_any", input_tensor, axis, keepdims, reduction_indices, keep_dims, True), name)


def reduce_all(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
    """Logical and over ``axis`` (all axes by default) of a boolean value (``tf.reduce_all``)."""
    return _named(_bool_reduce("reduce_all", input_tensor, axis, keepdims, reduction_indices, keep_dims, False), name)


def global_norm(t_list, name=None):
    """``sqrt(sum of every element of every tensor squared)`` (``tf.global_norm``);
    ``None`` entries are skipped."""
    ts = [t for t in t_list if t is not None]
    if not ts:
        raise ValueError("global_norm: t_list holds no tensor")
    total = None
    for t in ts:
        sq = _ops.sum(_ops.mul(t, t))
        total = sq if total is None else _ops.add(total, sq)
    return _named(_ops.sqrt(total), name)


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """``(t * clip_norm / max(global_norm, clip_norm) for t in t_list), global_norm``
    (``tf.clip_by_global_norm``): every tensor scaled by one factor so their
    global norm is at most ``clip_norm``; ``None`` entries stay ``None``; an
    infinite norm makes every entry NaN, as in TF1."""
    if isinstance(t_list, (Value, np.ndarray)) or not isinstance(t_list, (list, tuple)):
        raise TypeError(f"clip_by_global_norm: t_list must be a list of tensors, got {type(t_list).__name__}")
    norm = global_norm(t_list) if use_norm is None else use_norm
    inv_clip = _ops.div(1.0, clip_norm) if isinstance(clip_norm, Value) else 1.0 / clip_norm
    # TF1's formula: clip_norm * min(1 / norm, 1 / clip_norm), plus (norm - norm): NaN for an infinite norm
    scale = _ops.add(_ops.mul(clip_norm, _ops.minimum(_ops.div(1.0, norm), inv_clip)), _ops.sub(norm, norm))
    clipped = [None if t is None else _ops.mul(t, _ops.astype(scale, dtype_of(t))) for t in t_list]
    return clipped, norm


# --------------------------------------------------------------------------
# variables and control
# --------------------------------------------------------------------------

def _ref(op, ref):
    if not isinstance(ref, Variable):
        raise TypeError(f"{op}: ref must be a Variable, got {type(ref).__name__}")
    return ref


def assign(ref, value, validate_shape=None, use_locking=None, name=None):
    """An op setting Variable ``ref`` to ``value``; fetching it gives the new
    value (``tf.assign``). The shape cannot change (``validate_shape=False``
    is an error)."""
    if validate_shape is False:
        raise ValueError(f"assign: validate_shape=False (changing the shape of '{ref.name}') is not supported")
    return _named(_ref("assign", ref).assign(value), name)


def assign_add(ref, value, use_locking=None, name=None):
    """An op adding ``value`` to Variable ``ref`` (``tf.assign_add``)."""
    return _named(_ref("assign_add", ref).assign_add(value), name)


def assign_sub(ref, value, use_locking=None, name=None):
    """An op subtracting ``value`` from Variable ``ref`` (``tf.assign_sub``)."""
    return _named(_ref("assign_sub", ref).assign_sub(value), name)


def control_dependencies(control_inputs):
    """``get_default_graph().control_dependencies(control_inputs)``: ops made
    inside the block run after ``control_inputs`` (see
    :meth:`Graph.control_dependencies`)."""
    return get_default_graph().control_dependencies(control_inputs)


def no_op(name=None):
    """An op that does nothing but run the controls of the enclosing
    ``control_dependencies`` blocks (``tf.no_op``)."""
    return group(*get_default_graph().control_inputs(), name=name or "NoOp")


# --------------------------------------------------------------------------
# collections
# --------------------------------------------------------------------------

def get_collection(key, scope=None):
    """The default graph's collection ``key`` (``tf.get_collection``; see
    :class:`GraphKeys` and :meth:`Graph.get_collection`)."""
    return get_default_graph().get_collection(key, scope)


def add_to_collection(name, value):
    """Add ``value`` to the default graph's collection ``name`` (``tf.add_to_collection``)."""
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):
    """Add ``value`` to each of the default graph's collections ``names``."""
    for n in ([names] if isinstance(names, str) else names):
        add_to_collection(n, value)


# TF1's program and session scaffolding (issue 22): ConfigProto and tf.device (accepted, no effect: see
# .config), tf.flags / tf.app.run (over argparse), tf.logging (over logging), tf.summary (TensorBoard files)
from . import app, contrib, flags, summary  # noqa: E402
from . import tf_logging as logging  # noqa: E402
from .config import ConfigProto, GPUOptions, device  # noqa: E402
from .summary import Summary  # noqa: E402

__all__ += ["ConfigProto", "GPUOptions", "device", "flags", "app", "logging", "summary", "Summary", "contrib",
            "GraphKeys", "get_collection", "add_to_collection", "add_to_collections"]


# TF1's meaning where dynnets' own op of the same name (PyTorch's) differs (tf.split: .array_ops)
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
    return _named(_ops.norm(tensor, p, dim=axis, keepdim=builtins.bool(keepdims)), name)


# --- i22-tf1-gaps: tf.losses -------------------------------------------------------------------------
from . import losses  # noqa: E402

__all__ += ["losses"]


# --- i22-tf1-gaps: TF1 names a new-user trial reached for ---------------------------------------------
from . import check_ops as _check_ops  # noqa: E402
from . import metrics  # noqa: E402
from .check_ops import (Print, assert_equal, assert_greater, assert_greater_equal, assert_less,  # noqa: E402
                        assert_less_equal, assert_negative, assert_non_negative, assert_non_positive,
                        assert_none_equal, assert_positive, assert_rank)
from .graph import local_variables, local_variables_initializer  # noqa: E402
from ..autograd.primitives import random_shuffle_p as _random_shuffle_p  # noqa: E402
from .graph import add_op as _add_op  # noqa: E402

# TF1's dtype names (numpy's types); `bool` is TF1's tf.bool, so this module says builtins.bool for Python's
bool = np.bool_  # noqa: A001
int8, int16, uint8, uint16, uint32, uint64 = np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64
double, half, complex64, complex128 = np.float64, np.float16, np.complex64, np.complex128


def to_float(x, name="ToFloat"):
    """``cast(x, float32)`` (TF1's ``tf.to_float``)."""
    return _named(_ops.astype(_math.as_graph_value(x), np.float32), None if name == "ToFloat" else name)


def to_double(x, name="ToDouble"):
    """``cast(x, float64)`` (TF1's ``tf.to_double``)."""
    return _named(_ops.astype(_math.as_graph_value(x), np.float64), None if name == "ToDouble" else name)


def to_int32(x, name="ToInt32"):
    """``cast(x, int32)`` (TF1's ``tf.to_int32``)."""
    return _named(_ops.astype(_math.as_graph_value(x), np.int32), None if name == "ToInt32" else name)


def to_int64(x, name="ToInt64"):
    """``cast(x, int64)`` (TF1's ``tf.to_int64``)."""
    return _named(_ops.astype(_math.as_graph_value(x), np.int64), None if name == "ToInt64" else name)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def tensordot(a, b, axes, name=None):
    """Sum of products over ``axes`` (``tf.tensordot``): an int ``N`` pairs
    the last N axes of ``a`` with the first N of ``b``; a pair of lists pairs
    ``axes[0][k]`` of ``a`` with ``axes[1][k]`` of ``b``. The result has
    ``a``'s free axes, then ``b``'s."""
    a, b = _math.as_graph_value(a), _math.as_graph_value(b)
    na, nb = a.ndim if hasattr(a, "ndim") else np.ndim(a), b.ndim if hasattr(b, "ndim") else np.ndim(b)
    if na is None or nb is None:
        raise ValueError("tensordot: the ranks of a and b must be known while the graph is built")
    if isinstance(axes, (int, np.integer)):
        if not 0 <= axes <= builtins.min(na, nb):
            raise ValueError(f"tensordot: axes={axes} must be in [0, min(rank(a), rank(b))] = [0, {builtins.min(na, nb)}]")
        ax_a, ax_b = list(builtins.range(na - axes, na)), list(builtins.range(axes))
    else:
        if len(axes) != 2:
            raise ValueError(f"tensordot: axes must be an int or a pair of lists of axes, got {axes!r}")
        ax_a, ax_b = ([x] if isinstance(x, (int, np.integer)) else list(x) for x in axes)
        if len(ax_a) != len(ax_b):
            raise ValueError(f"tensordot: axes {ax_a} of a and {ax_b} of b must have the same length")
        ax_a, ax_b = [int(x) % na for x in ax_a], [int(x) % nb for x in ax_b]
    la = list(_LETTERS[:na])
    lb = list(_LETTERS[na:na + nb])
    for i, j in zip(ax_a, ax_b):
        lb[j] = la[i]
    out = [la[i] for i in builtins.range(na) if i not in ax_a] + [lb[j] for j in builtins.range(nb) if j not in ax_b]
    return _named(_ops.einsum(f"{''.join(la)},{''.join(lb)}->{''.join(out)}", a, b), name)


def count_nonzero(input_tensor=None, axis=None, keepdims=None, dtype=np.int64, name=None, reduction_indices=None,
                  keep_dims=None, input=None):
    """The number of non-zero elements over ``axis`` (all by default), of
    ``dtype`` (int64), as ``tf.count_nonzero``."""
    x = _math.as_graph_value(input if input_tensor is None else input_tensor)
    keepdims = keep_dims if keep_dims is not None else builtins.bool(keepdims)
    nz = _ops.astype(_ops.not_equal(x, _dt(x).type(0)), np.int64)
    out = _ops.sum(nz, axis=_axis(axis, reduction_indices), keepdims=keepdims)
    return _named(out if np.dtype(dtype) == np.int64 else _ops.astype(out, dtype), name)


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """``t * clip_norm / max(l2norm(t, axes), clip_norm)`` (``tf.clip_by_norm``):
    ``t`` unchanged where its L2 norm over ``axes`` (all by default) is at
    most ``clip_norm``; a zero ``t`` stays zero with a zero gradient, as TF1's."""
    axes = tuple(axes) if isinstance(axes, list) else axes
    t = _math.as_graph_value(t)
    l2sum = _ops.sum(_ops.mul(t, t), axis=axes, keepdims=True)
    pred = _ops.greater(l2sum, 0)
    # sqrt of 1 where the sum is 0: TF1's guard against a NaN gradient at zero
    safe = _ops.where(pred, l2sum, ones_like(l2sum))
    l2norm = _ops.where(pred, _ops.sqrt(safe), l2sum)
    return _named(_ops.div(_ops.mul(t, clip_norm), _ops.maximum(l2norm, clip_norm)), name)


def random_shuffle(value, seed=None, name=None):
    """``value`` with its first dimension in a random order, drawn again at
    every run (``tf.random_shuffle``), seeded as :func:`random_uniform`; no
    gradient flows through it, as TF1's."""
    value = _math.as_graph_value(value)
    return _add_op(_random_shuffle_p, value, name=name or "random_shuffle", seed=get_seed(seed, value.graph))


def disable_eager_execution():
    """Nothing to do: dynnets.static is TF1's graph mode (``tf.compat.v1.disable_eager_execution``)."""


def disable_v2_behavior():
    """Nothing to do: dynnets.static is TF1 (``tf.compat.v1.disable_v2_behavior``)."""


def _namespace(name, doc, names):
    import sys
    import types
    mod = types.ModuleType(f"{__name__}.{name}", doc)
    here = sys.modules[__name__].__dict__
    for n in names:
        if n in here:
            setattr(mod, n, here[n])
    return mod


# tf.math: TF1 >= 1.13 lists the math functions there too (the same functions)
math = _namespace("math", "TF1's tf.math: the same functions as the top-level names.", [
    "abs", "add", "add_n", "argmax", "argmin", "ceil", "cos", "count_nonzero", "cumsum", "div", "divide", "equal",
    "exp", "floor", "floordiv", "floormod", "greater", "greater_equal", "less", "less_equal", "log", "log1p",
    "logical_and", "logical_not", "logical_or", "maximum", "minimum", "mod", "multiply", "negative", "not_equal",
    "pow", "reduce_all", "reduce_any", "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum",
    "round", "rsqrt", "sigmoid", "sign", "sin", "sqrt", "square", "squared_difference", "subtract", "tanh",
    "truediv", "truncatediv", "truncatemod", "l2_normalize", "softmax", "log_softmax", "top_k", "in_top_k"])
for _n in ("l2_normalize", "softmax", "log_softmax", "top_k", "in_top_k"):
    setattr(math, _n, getattr(nn, _n))
# tf.compat.v1 is this module (TF2 scripts written for TF1 reach it that way); tf.compat.dimension_value
compat = _namespace("compat", "TF1's tf.compat: v1 is dynnets.static itself.", ["dimension_value"])
import sys as _sys  # noqa: E402
compat.v1 = _sys.modules[__name__]

__all__ += ["Print", "assert_equal", "assert_none_equal", "assert_less", "assert_less_equal", "assert_greater",
            "assert_greater_equal", "assert_positive", "assert_negative", "assert_non_negative",
            "assert_non_positive", "assert_rank", "metrics", "local_variables", "local_variables_initializer",
            "int8", "int16", "uint8", "uint16", "uint32", "uint64", "double", "half", "complex64", "complex128",
            "to_float", "to_double", "to_int32", "to_int64", "tensordot", "count_nonzero", "clip_by_norm",
            "random_shuffle", "disable_eager_execution", "disable_v2_behavior", "math", "compat", "errors", "bool"]
errors = _namespace("errors", "TF1's tf.errors: the exception classes.", [])
errors.InvalidArgumentError = _check_ops.InvalidArgumentError
errors.OpError = OpError
