"""``batchable_call``: one application of a traced per-signature plan (the
primitive behind :func:`dynnets.batchable`; the plan and the decorator are
in :mod:`dynnets.autograd.batchable`, which builds plans with the static
compiler, so the table does not depend on it).

``batchable_call(*per_instance, *params, plan=)``: ``plan`` is one traced
signature of a decorated function. It gives ``name``, ``n_inst`` (the
per-instance inputs come first), ``in_avals`` (their trailing shapes and
dtypes: an input holds the rows of one or more instances stacked along axis
0), ``param_avals`` (shapes and dtypes of the Parameters, shared by every
instance), ``out_avals`` (the outputs' trailing shapes and dtypes: each
output has the inputs' rows), ``run(arrays) -> tuple of arrays`` and
``gradients(g, arrays, out) -> tuple`` (one gradient or None per input).
The batching rule stacks the per-instance inputs and shares the Parameters,
so N same-plan applications under :func:`dynnets.autobatch` are one call.
"""
from __future__ import annotations

from .core import Aval, BatchRule, ShapeError, defprim, dtype_of, fits, fmt_shape

__all__ = ["batchable_call_p"]


def _impl(*arrays, plan):
    return plan.run(arrays)


def _shape(*avals, plan):
    n = plan.n_inst
    if len(avals) != n + len(plan.param_avals):
        raise ShapeError(f"batchable_call: {plan.name} takes {n} per-instance inputs and {len(plan.param_avals)} "
                         f"Parameters, got {len(avals)} inputs")
    rows = None
    for k in range(n):
        a = avals[k]
        shp = a.shape
        want_trail, want_dt = plan.in_avals[k]
        if shp is None or len(shp) != len(want_trail) + 1 or tuple(shp[1:]) != want_trail:
            raise ShapeError(f"batchable_call: {plan.name}: input {k} should be of shape "
                             f"{fmt_shape((None,) + want_trail)} (rows of instances), got "
                             f"{fmt_shape(shp)}")
        if dtype_of(a) != want_dt:
            raise ShapeError(f"batchable_call: {plan.name}: input {k} should be of dtype {want_dt}, got "
                             f"{dtype_of(a)}")
        r = shp[0]
        if r is not None:
            if rows is not None and r != rows:
                raise ShapeError(f"batchable_call: {plan.name}: input {k} has {r} rows, input 0 {rows}: every "
                                 f"per-instance input has the instances' rows")
            rows = r
    for (shape, dt), a in zip(plan.param_avals, avals[n:]):
        if a.shape is None or not fits(tuple(a.shape), shape) or dtype_of(a) != dt:
            raise ShapeError(f"batchable_call: {plan.name}: a Parameter of shape {fmt_shape(shape)} and dtype "
                             f"{dt} was given an array of shape {fmt_shape(a.shape)} and dtype {dtype_of(a)}")
    return tuple(Aval((rows,) + trail, dt) for trail, dt in plan.out_avals)


def _joint_vjp(g, inputs, out, plan):
    return plan.gradients(g, inputs, out)


def _attr_key(plan):
    return plan


def _per_instance(plan):
    return tuple(range(plan.n_inst))


batchable_call_p = defprim("batchable_call", _impl, _shape, joint_vjp=_joint_vjp, multiple_results=True,
                           attr_key=_attr_key, batch=BatchRule("rows", _per_instance))
