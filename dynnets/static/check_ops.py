"""TF1's run-time checks and ``tf.Print``: ops that run when the graph runs.

``tf.assert_equal(x, y)`` and the other ``assert_*`` return an op (an
:class:`~dynnets.static.graph.Operation`) that checks its condition at every
run where it runs: fetch it, or make ops depend on it with
``tf.control_dependencies([...])``, as in TF1. A failed check raises
``tf.errors.InvalidArgumentError`` naming the assertion, its message and the
first values. ``tf.Print(x, data)`` is ``x`` itself, printing ``message`` and
the values of ``data`` to stderr each time it is computed; gradients flow
through it to ``x``.

Both are effects of the graph (they are never folded into constants, merged
or cached by the compile passes), so a check on constant inputs still runs at
run time.
"""
from __future__ import annotations

import sys

import numpy as np

from ..autograd.primitives import Aval
from .graph import Operation, OpValueError, StaticPrimitive, Value, constant, get_default_graph

__all__ = ["Print", "assert_equal", "assert_none_equal", "assert_less", "assert_less_equal", "assert_greater",
           "assert_greater_equal", "assert_positive", "assert_negative", "assert_non_negative",
           "assert_non_positive", "assert_rank", "InvalidArgumentError"]

# TF1's error class for a failed check (and for any op that fails on bad input values)
InvalidArgumentError = OpValueError


def _fmt(a, summarize):
    flat = np.asarray(a).ravel()
    n = len(flat) if summarize is None or summarize < 0 else summarize
    body = " ".join(str(v) for v in flat[:n])
    return "[" + body + ("..." if len(flat) > n else "") + "]"


def _print_impl(S, x, *data, message, summarize, first_n, count):
    if first_n is None or first_n < 0 or count[0] < first_n:
        count[0] += 1
        print(message + "".join(_fmt(d, summarize) for d in data), file=sys.stderr)
    return x


def _print_vjp(g, ins, out, **attrs):
    # the printed data get zeros (not None: the backward pass sums what each input receives)
    return (g,) + tuple(np.zeros_like(d) for d in ins[1:])


print_p = StaticPrimitive("Print", _print_impl, lambda x, *data, **attrs: Aval(tuple(x.shape), x.dtype),
                          effect=True, joint_vjp=_print_vjp)


def _as_value(x):
    return x if isinstance(x, Value) else constant(x)


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):
    """``input_`` itself, printing ``message`` and each of ``data`` (at most
    ``summarize`` elements of each, default 3 as TF1; the first ``first_n``
    times only) to stderr whenever it is computed (``tf.Print``)."""
    g = input_.graph if isinstance(input_, Value) else get_default_graph()
    x = _as_value(input_)
    data = [_as_value(d) for d in (data if isinstance(data, (list, tuple)) else [data])]
    attrs = {"message": "" if message is None else str(message), "summarize": 3 if summarize is None else summarize,
             "first_n": first_n, "count": [0]}
    out = g.append_equation(print_p, (x.id, *[d.id for d in data]), attrs, Aval(tuple(g.avals[x.id].shape), x.dtype),
                            name=name or "Print")
    return out


def _assert_impl(S, *args, test, what, message, summarize, names):
    ok = test(*args)
    if not np.all(ok):
        shown = ", ".join(f"{n} = {_fmt(a, summarize)}" for n, a in zip(names, args))
        raise InvalidArgumentError(f"{message}{': ' if message else ''}assertion failed: {what} did not hold; "
                                   f"{shown}")
    return None


assert_p = StaticPrimitive("Assert", _assert_impl, lambda *args, **attrs: Aval((), None), effect=True)


def _assert(op, test, what, args, names, data, summarize, message, name):
    g = next((a.graph for a in args if isinstance(a, Value)), None) or get_default_graph()
    vals = [_as_value(a) for a in args]
    extra = [] if data is None else [_as_value(d) for d in data]
    attrs = {"test": test, "what": what, "message": "" if message is None else str(message),
             "summarize": 3 if summarize is None else summarize,
             "names": tuple(names) + tuple(f"data[{k}]" for k in range(len(extra)))}
    return g.append_equation(assert_p, tuple(v.id for v in vals + extra), attrs, Aval((), None), name=name or op,
                             cls=Operation)


def _binary_check(op, sym, np_test):
    def check(x, y, data=None, summarize=None, message=None, name=None):
        n = 2

        def test(*args):
            a, b = args[:n]
            return np_test(a, b)
        return _assert(op, test, f"x {sym} y elementwise", [x, y], ["x", "y"], data, summarize, message, name)
    check.__name__ = op
    check.__doc__ = (f"An op that raises InvalidArgumentError at run time unless ``x {sym} y`` for every element "
                     f"(broadcasting), as ``tf.{op}``; run it, or make ops depend on it (control_dependencies).")
    return check


def _unary_check(op, sym, np_test):
    def check(x, data=None, summarize=None, message=None, name=None):
        return _assert(op, lambda a, *rest: np_test(a), f"x {sym} 0 elementwise", [x], ["x"], data, summarize,
                       message, name)
    check.__name__ = op
    check.__doc__ = f"An op checking ``x {sym} 0`` elementwise at run time (``tf.{op}``)."
    return check


assert_equal = _binary_check("assert_equal", "==", np.equal)
assert_none_equal = _binary_check("assert_none_equal", "!=", np.not_equal)
assert_less = _binary_check("assert_less", "<", np.less)
assert_less_equal = _binary_check("assert_less_equal", "<=", np.less_equal)
assert_greater = _binary_check("assert_greater", ">", np.greater)
assert_greater_equal = _binary_check("assert_greater_equal", ">=", np.greater_equal)
assert_positive = _unary_check("assert_positive", ">", lambda a: a > 0)
assert_negative = _unary_check("assert_negative", "<", lambda a: a < 0)
assert_non_negative = _unary_check("assert_non_negative", ">=", lambda a: a >= 0)
assert_non_positive = _unary_check("assert_non_positive", "<=", lambda a: a <= 0)


def assert_rank(x, rank, data=None, summarize=None, message=None, name=None):
    """Check ``x``'s rank: while the graph is built when it is known (a
    ValueError, as TF1), else at run time."""
    nd = x.ndim if isinstance(x, Value) else np.ndim(x)
    if nd is not None:
        if nd != rank:
            raise ValueError(f"assert_rank: {message + ': ' if message else ''}tensor "
                             f"{getattr(x, 'name', 'x')!r} must have rank {rank}, got rank {nd}")
        return _assert("assert_rank", lambda *a: True, "rank", [x], ["x"], data, summarize, message, name)
    return _assert("assert_rank", lambda a, *rest: np.ndim(a) == rank, f"rank(x) == {rank}", [x], ["x"], data,
                   summarize, message, name)
