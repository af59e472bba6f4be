"""Control flow inside static graphs, with TF1's API: :func:`while_loop`,
:func:`cond` and :class:`TensorArray`.

A loop's condition and body and a ``cond``'s branches are *subgraphs*:
:class:`~.graph.Graph` objects of their own (``graph.parent`` is the graph
around them), built once by calling the user's function on placeholders, from
the same primitive table as every other op. A value of an enclosing graph
used inside is captured as one more input. The loop is one equation of the
enclosing graph whose ``cond``/``body`` attributes hold the subgraphs (their
``inputs`` and ``outputs`` say which values are the function's arguments and
results), so a graph with loops is still a list of equations, and a
serialiser can write the subgraphs as nested graphs.

Running a loop: each subgraph is optimised by the same pipeline
(:func:`~.passes.optimize`) and lowered to a plan of its own, cached per
input signature and per the compile options of the session that runs it
(:class:`~.passes.CompileOptions`: the plan's instruction passes them to the
loop), and tiered as the session's plans are, counting iterations as runs:
the first-tier executor, generated code from ``jit_after`` iterations on, the
native tier from ``native_after`` on where the body qualifies
(:mod:`.native`). A body's buffers are written again by the next iteration,
so the memory plan gives none to a value a TensorArray or the loop state
keeps (:func:`~.passes.plan_memory`).

Shapes: a loop variable keeps the shape it enters with, except the
dimensions that ``shape_invariants`` leave unknown (``None``); a body whose
result has another shape is an error naming the variable, when the graph is
built and again with the fed shapes (an unknown entry dimension is fixed for
one run unless ``shape_invariants`` frees it). Where the shape rules cannot
follow a dimension with the fed shapes (through a TensorArray element, whose
shape is not part of a body's input signature), the loop checks the result
after each iteration instead.

Gradients (``gradients``, ``minimize``) flow through loops, conds and
TensorArrays. Strategy, as TF1's stacks: when :func:`~.backward.gradients`
builds a loop's gradient it also builds the body's (``on_gradient``), which
names the forward values the body's VJPs read, chosen per value
(:func:`_stash_set`: cheap elementwise arithmetic, what the fusion pass fuses,
is computed again from its inputs; everything else is kept). From then on
each forward iteration returns those values beside the loop variables (a
stack of references: no copies, since every iteration's results are fresh
arrays), and the gradient loop runs backwards over the stack with one plan
for every iteration, fed the kept values instead of computing the body again
(the memory: :attr:`LoopTrace.stash_nbytes`; before the gradient exists, a
loop keeps its loop variables only and its gradient would recompute each
body). ``back_prop=False`` keeps nothing.

Loop variables grown by rows: a variable the body only extends
(``v = concat([v, rows], axis=0)``) and reads by row (``take(v, i)``), the
states of a Fold-style loop over tree levels, lives in one buffer with room
to grow; an iteration writes its new rows in place (O(rows), where the
concat copied every row so far), every iteration's value is a view of the
buffer (rows once written never change), and its gradient is one buffer
that the gradients of the rows each iteration read are added into
(O(rows read), where a dense gradient of every row so far was built per
iteration). :func:`_find_appends` says which variables qualify.

``cond`` lives in :mod:`.cond` (re-exported here), the helpers that build
both constructs' subgraphs in :mod:`.subgraphs`. Subgraph programs and their
cache: :mod:`.subprogram`; TensorArrays: :mod:`.tensor_array`; nested
structures: :mod:`dynnets.pytree`.
"""
from __future__ import annotations

import numpy as np

from ..autograd import gradtypes
from ..autograd import kernels_tree as KT
from ..autograd.dtypes import is_kernel_float
from ..autograd.primitives import Aval, ShapeError, dtype_of, fixed_arrays, fmt_shape
from ..autograd.primitives.array import concat_p
from ..autograd.primitives.index import take_p
from . import execute, passes
from .backward import gradients, on_gradient
from .graph import SOURCES, Eqn, StaticPrimitive, Value, add_op, constant, placeholder_p
from ..pytree import tree_flatten
from .subprogram import Program, StashedProgram, is_float, program, run, subprogram_stats, zeros_like
from .tensor_array import TensorArray, TensorArrayValue
from .subgraphs import (DEFAULT_OPTIONS, call_in, check_pure, enclosing_graph, leaf_value, own_program,
                        refuse_random)
from .cond import cond, cond_p

I64 = np.dtype(np.int64)

__all__ = ["while_loop", "cond", "TensorArray", "TensorArrayValue", "while_p", "cond_p", "subprogram_stats",
           "LoopTrace"]



# --------------------------------------------------------------------------
# shapes
# --------------------------------------------------------------------------


def _fits(shape, invariant):
    """Whether ``shape`` is at least as specific as ``invariant``."""
    return len(shape) == len(invariant) and all(b is None or a == b for a, b in zip(shape, invariant))


def _compatible(shape, want):
    """Whether a value of (partly unknown) ``shape`` can have shape ``want``."""
    return len(shape) == len(want) and all(a is None or b is None or a == b for a, b in zip(shape, want))


def _shape_change(name, want, got, when):
    return ShapeError(f"while_loop: loop variable '{name}' enters the loop with shape {fmt_shape(want)} but has "
                      f"shape {fmt_shape(got)} after one iteration{' ' + when if when else ''}; to let it change, "
                      f"give it a shape invariant with None where it changes (shape_invariants=)")


# --------------------------------------------------------------------------
# while_loop
# --------------------------------------------------------------------------


class LoopTrace:
    """What one execution of a loop keeps for its gradient: the loop
    variables at the start of every iteration (references: an iteration's
    results are fresh arrays, and the rows of an appended variable are never
    written again) and, once the loop's gradient has been built, the forward
    values its VJPs read, per iteration (``stashes``: TF1's stacks)."""

    __slots__ = ("states", "stashes")
    plan_signature = ((), np.dtype(object))   # what a program fed a trace (an outer loop's gradient) keys it by

    def __init__(self, states, stashes=None):
        self.states = states
        self.stashes = stashes

    @property
    def stash_nbytes(self):
        """Bytes of the stashed forward values (the memory the gradient
        loop's not recomputing the body costs)."""
        return sum(x.nbytes for st in (self.stashes or ()) for x in st if type(x) is np.ndarray)


def _find_appends(bg, n, free, specs):
    """The loop variables the body only extends by rows and reads by row:
    ``v' = concat([v, rows], axis=0)`` with ``v`` read otherwise only by
    ``take(v, indices)`` (a Fold-style loop over tree levels: the states so
    far, the level's new states appended). Such a variable lives in one
    growing buffer: an iteration writes its new rows in place (amortised
    O(rows), where the concat copied all the rows so far) and its gradient
    is one buffer the gradient loop adds the read rows' gradients into
    (O(rows read), where a dense gradient of every row so far was built per
    iteration). The values are the same: rows once written never change, so
    every earlier iteration's view of the buffer still holds its value.
    Returns ``((k, rows id, ((take output id, indices id), ...)), ...)``."""
    prod = {}
    readers = {}
    for e in bg.eqns:
        for o in e.outs:
            prod[o] = e
        for j, i in enumerate(e.ins):
            readers.setdefault(i, []).append((e, j))
    found = []
    outputs = list(bg.outputs)
    for k in range(n):
        spec = specs[k]
        if 0 not in free[k] or len(spec.shape) < 1:
            continue
        vin, vout = bg.inputs[k], bg.outputs[k]
        e = prod.get(vout)
        if (e is None or e.prim is not concat_p or len(e.ins) != 2 or e.ins[0] != vin or e.ins[1] == vin
                or e.attrs.get("axis", 0) not in (0, -len(spec.shape)) or vout in readers
                or outputs.count(vout) != 1 or vin in outputs):
            continue
        x = bg.avals[e.ins[1]]
        if dtype_of(x) != dtype_of(spec) or len(x.shape) != len(spec.shape):
            continue
        reads = []
        for r, j in readers.get(vin, ()):
            if r is e:
                continue
            if r.prim is take_p and j == 0 and r.ins[1] != vin and len(bg.avals[r.ins[1]].shape) == 1:
                reads.append((r.outs[0], r.ins[1]))
            else:
                break
        else:
            found.append((k, e.ins[1], tuple(reads)))
    return tuple(found)


def _appended(a):
    """{loop variable: (rows id, reads)} of a ``while`` equation's attributes."""
    return {k: (x, reads) for k, x, reads in a["appends"]}


def _loop_programs(a, stash=()):
    """The condition and body programs of a ``while`` equation's attributes;
    the body's results are the loop variables (an appended variable's new
    rows in its place) and then the values in ``stash``."""
    n, free = a["n_vars"], a["free"]
    cg, bg = a["cond"], a["body"]
    names = a["names"]
    app = _appended(a)

    def check(opt, key):
        # a result the shape rules cannot pin down (a TensorArray element's shape is not part of the
        # body's input signature, so read(t) + h with h of shape (1, 5) infers (?, 5)) is checked
        # after each iteration instead
        verify = []
        for k, o in enumerate(opt.outputs[:n]):
            got = opt.avals[o]
            want_shape, want_dt = key[k]
            if dtype_of(got) != want_dt:
                raise TypeError(f"while_loop: loop variable '{names[k]}' enters the loop with dtype {want_dt} "
                                f"but has dtype {dtype_of(got)} after one iteration")
            got_shape = tuple(got.shape)
            if k in app:
                # the appended rows: the variable after them has the rows' shape past the first dimension
                got_shape = (None,) + got_shape[1:]
            if not _compatible(got_shape, want_shape):
                raise _shape_change(names[k], want_shape, got_shape, "(with the fed shapes)")
            if not _fits(got_shape, want_shape):
                verify.append((k, tuple(want_shape)))
        return verify

    n_cc = len(cg.inputs) - n
    n_bc = len(bg.inputs) - n
    cprog = program(cg, "fwd", lambda: Program(cg, cg.inputs, cg.outputs, free + ((),) * n_cc))
    outs = tuple(app[k][0] if k in app else o for k, o in enumerate(bg.outputs)) + tuple(stash)
    bprog = program(bg, "fwd+stash" if stash else "fwd",
                     lambda: Program(bg, bg.inputs, outs, free + ((),) * n_bc, check))
    return cprog, bprog


def _split(args, a):
    n, ncc = a["n_vars"], a["n_cond_caps"]
    end = len(args) - (1 if a["has_max"] else 0)
    return args[:n], args[n:n + ncc], args[n + ncc:end], (args[end] if a["has_max"] else None)


def _start_buffers(vars_, a):
    """Each appended variable copied into a buffer with room to grow; the
    loop variable becomes a view of its filled rows."""
    vars_ = list(vars_)
    bufs = {}
    for k, _, _ in a["appends"]:
        v = np.asarray(vars_[k])
        buf = np.empty((max(2 * v.shape[0], 16),) + v.shape[1:], v.dtype)
        buf[:v.shape[0]] = v
        bufs[k] = buf
        vars_[k] = buf[:v.shape[0]]
    return tuple(vars_), bufs


def _append_rows(r, old, bufs, a):
    """The loop variables after an iteration whose results ``r`` hold the
    new rows of the appended variables: written after the rows of ``old``
    (doubling a full buffer: an earlier view keeps the old one)."""
    r = list(r)
    for k, buf in bufs.items():
        x = r[k]
        n0 = old[k].shape[0]
        if x.shape[1:] != buf.shape[1:]:
            raise ShapeError(f"while_loop: loop variable '{a['names'][k]}' has rows of shape "
                             f"{fmt_shape(buf.shape[1:])}, the body appends rows of shape {fmt_shape(x.shape[1:])}")
        n1 = n0 + x.shape[0]
        if n1 > buf.shape[0]:
            grown = np.empty((2 * n1,) + buf.shape[1:], buf.dtype)
            grown[:n0] = buf[:n0]
            bufs[k] = buf = grown
        buf[n0:n1] = x
        r[k] = buf[:n1]
    return tuple(r)


def _while_impl(*args, options=DEFAULT_OPTIONS, **a):
    vars_, ccaps, bcaps, limit = _split(args, a)
    # keep=False: the program running the loop does not read its trace (lower)
    keep = a["back_prop"] and a.get("keep", True)
    n = a["n_vars"]
    # once the loop's gradient exists, the forward keeps the values its VJPs read
    vjp = a["body"].programs.get("vjp") if keep else None
    stash = vjp.stash if vjp is not None else ()
    cprog, bprog = _loop_programs(a, stash)
    if limit is not None:
        limit = int(limit)
    bufs = None
    if a["appends"]:
        vars_, bufs = _start_buffers(vars_, a)
    ce = cprog.entry(vars_ + ccaps, options)
    be = None
    states = []
    stashes = [] if stash else None
    k = 0
    cfn = ce.fn
    while limit is None or k < limit:
        try:
            go = cfn(*vars_, *ccaps)[0]
        except Exception as exc:
            raise execute.explain(ce.plan, exc, {}) from exc
        if not go:
            break
        if be is None:
            be = bprog.entry(vars_ + bcaps, options)
        if keep:
            states.append(vars_)
        r = run(be, vars_ + bcaps)
        if stash:
            stashes.append(r[n:])
            r = r[:n]
        vars_ = r if bufs is None else _append_rows(r, vars_, bufs, a)
        if be.verify:
            for j, want in be.verify:
                if not _fits(np.shape(vars_[j]), want):
                    raise _shape_change(a["names"][j], want, np.shape(vars_[j]), f"(iteration {k + 1})")
        k += 1
    ce.ran(k + 1)
    if be is not None:
        be.ran(k)
    if keep:
        return (*vars_, LoopTrace(states, stashes))
    if a["back_prop"]:
        return (*vars_, None)
    return tuple(vars_)


def _while_shape(*avals, **a):
    n = a["n_vars"]
    vars_ = avals[:n]
    free = a["free"]
    names = a["names"]
    specs = []
    for k, (v, fr) in enumerate(zip(vars_, free)):
        shape = tuple(None if d in fr else s for d, s in enumerate(v.shape))
        specs.append(Aval(shape, dtype_of(v)))
    if a["has_max"]:
        m = avals[-1]
        if tuple(m.shape) != () or dtype_of(m).kind not in "iu":
            raise ShapeError(f"while_loop: maximum_iterations must be an integer scalar, got shape "
                             f"{fmt_shape(m.shape)} dtype {dtype_of(m)}")
    _, ccaps, bcaps, _ = _split(avals, a)
    for role, g, caps in (("cond", a["cond"], ccaps), ("body", a["body"], bcaps)):
        ins = {i: x for i, x in zip(g.inputs, list(specs) + list(caps))}
        try:
            got = passes.infer_shapes(own_program(g), ins)
        except ShapeError as err:
            raise type(err)(f"while_loop {role}: {err}") from None
        outs = [got.avals[o] for o in g.outputs]
        if role == "cond":
            c = outs[0]
            if dtype_of(c) != np.bool_ or tuple(c.shape) != ():
                raise TypeError(f"while_loop: cond must return a boolean scalar, got shape {fmt_shape(c.shape)} "
                                f"dtype {dtype_of(c)}")
            continue
        for k, (o, s) in enumerate(zip(outs, specs)):
            if dtype_of(o) != dtype_of(s):
                raise TypeError(f"while_loop: loop variable '{names[k]}' enters the loop with dtype {dtype_of(s)} "
                                f"but has dtype {dtype_of(o)} after one iteration")
            # while_loop itself holds the declared shapes to TF1's rule (the body's result at least as
            # specific as the loop variable); refined by fed shapes, a dimension the rules cannot follow
            # (through a TensorArray element) is checked at run time (_loop_programs)
            if not _compatible(tuple(o.shape), tuple(s.shape)):
                raise _shape_change(names[k], s.shape, o.shape, "")
    if a["back_prop"]:
        return tuple(specs) + (Aval((), np.dtype(object)),)
    return tuple(specs)


def _while_vjp(g, ins, out, options=DEFAULT_OPTIONS, **a):
    n = a["n_vars"]
    fl, fc = a["float_vars"], a["float_caps"]
    vars_, ccaps, bcaps, _ = _split(ins, a)
    trace = out[n]
    result = [zeros_like(x) if is_float(x) else None for x in ins]
    app = _appended(a)
    # an appended variable's gradient: one buffer for all its rows, the read rows' gradients added in place
    whole = {}
    gv = []
    for k in fl:
        gk = g[k]
        if k in app:
            like = out[k]
            whole[k] = (np.array(gradtypes.dense_like(gk, like), dtype=np.result_type(like), copy=True)
                        if gk is not None else np.zeros(np.shape(like), np.result_type(like)))
            gv.append(None)
        else:
            gv.append(gk if gk is not None else zeros_like(out[k]))
    gc = [None] * len(fc)
    states = trace.states
    if states and fl:
        vjp = _body_vjp(a)
        stashes = trace.stashes
        if not (stashes and vjp.stash_ok):
            refuse_random(a["body"], "while_loop")
        prog = vjp.stashed if stashes else vjp
        # the captures are the same arrays in every iteration and nothing writes them (no effects in
        # control flow): a VJP's derived form of a captured weight is made once for the whole sweep
        with fixed_arrays(bcaps):
            e = None
            last = len(states) - 1
            for it in range(last, -1, -1):
                state = states[it]
                after = states[it + 1] if it < last else out
                for j, k in enumerate(fl):
                    if k in app:
                        gv[j] = whole[k][state[k].shape[0]:after[k].shape[0]]
                args = tuple(state) + tuple(bcaps) + (tuple(stashes[it]) if stashes else ()) + tuple(gv)
                if e is None:
                    e = prog.entry(args, options)
                r = run(e, args)
                for j, k in enumerate(fl):
                    if k in app:
                        for gs, ix in vjp.read_slots[k]:
                            if gs is not None:
                                _add_rows(whole[k], r[ix], r[gs], state[k].shape[0])
                    else:
                        s = vjp.var_slots[j]
                        gv[j] = r[s] if s is not None else zeros_like(state[k])
                for j in range(len(fc)):
                    s = vjp.cap_slots[j]
                    if s is not None:
                        gc[j] = _acc(gc[j], r[s])
            e.ran(len(states))
    for j, k in enumerate(fl):
        result[k] = whole[k][:np.shape(vars_[k])[0]] if k in app else gv[j]
    base = n + a["n_cond_caps"]
    for j, c in enumerate(fc):
        result[base + c] = gradtypes.dense_like(gc[j], bcaps[c]) if gc[j] is not None else zeros_like(bcaps[c])
    return tuple(result)


def _add_rows(whole, idx, rows, n):
    """``whole[idx] += rows`` in place (``idx`` indexed an array of ``n``
    rows, ``n <= len(whole)``), repeated indices adding up."""
    if (type(idx) is np.ndarray and idx.dtype == I64 and idx.ndim == 1 and whole.ndim == 2
            and is_kernel_float(whole.dtype) and whole.flags.c_contiguous and rows.dtype == whole.dtype
            and rows.ndim == 2 and rows.flags.c_contiguous):
        # one pass in order, the index check inside: (15, 300) float32 rows 0.8 us, (118, 300) 2.9 us,
        # against 5.2 / 11.5 us by a sort (to tell distinct rows) and a fancy-index addition (measured)
        if KT.scatter_rows_add(rows, idx, n, whole):
            return
    idx = np.asarray(idx).reshape(-1)
    if not idx.size:
        return
    lo, hi = idx.min(), idx.max()
    if lo < -n or hi >= n:
        raise IndexError(f"while_loop gradient: a gathered row index in [{lo}, {hi}] outside [-{n}, {n})")
    if lo < 0:
        idx = np.where(idx < 0, idx + n, idx)
    s = np.sort(idx)
    if (s[1:] != s[:-1]).all():
        # distinct rows (other shapes and dtypes than the kernel's): fancy-index addition, ~7x faster than np.add.at
        whole[idx] += rows
    else:
        np.add.at(whole, idx, rows)


def _acc(acc, x):
    """``acc + x``, in place once ``acc`` is a sum this loop made; factored
    terms (:class:`~dynnets.autograd.gradtypes.OuterSum`) are collected and
    multiplied out once, by :func:`~dynnets.autograd.gradtypes.dense_like`."""
    if type(x) is gradtypes.OuterSum:
        if acc is None:
            return gradtypes.OuterSum(x.lhs, x.rhs, x.shape, x.base)
        if type(acc) is gradtypes.OuterSum:
            return acc.add(x)
        return gradtypes.OuterSum(x.lhs, x.rhs, x.shape, x.base).add(acc)
    if acc is None:
        return x.copy() if type(x) is np.ndarray else x
    if type(acc) is gradtypes.OuterSum:
        return acc.add(x.copy() if type(x) is np.ndarray else x)
    if type(acc) is np.ndarray and acc.shape == np.shape(x) and np.result_type(acc, x) == acc.dtype:
        acc += x
        return acc
    return acc + x


def _stash_set(body, n_fwd, outputs):
    """The forward values (of the body's first ``n_fwd`` equations) the
    gradient loop is fed, and the derived program computing ``outputs``
    with those values fed instead of computed. Chosen per value: a value
    the VJPs read is kept, unless its primitive is cheap elementwise
    arithmetic (a ``scalar=`` template, what the fusion pass fuses): that
    one is computed again from its own inputs (kept in turn by the same
    rule), so the forward still fuses such chains into one kernel instead
    of writing out every intermediate. Keeping a value costs a reference
    per iteration (its memory: :attr:`LoopTrace.stash_nbytes`)."""
    fwd = body.eqns[:n_fwd]
    made = {o: e for e in fwd if e.prim not in SOURCES for o in e.outs}
    grad_eqns = {id(e) for e in body.eqns[n_fwd:]}
    full = passes.prune(body.with_outputs(outputs))
    want = [i for e in full.eqns if id(e) in grad_eqns for i in e.ins if i in made]
    want += [o for o in outputs if o in made]
    stash, seen = set(), set()
    while want:
        v = want.pop()
        if v in seen:
            continue
        seen.add(v)
        e = made[v]
        if e.prim.scalar is not None and not e.prim.random:
            want.extend(i for i in e.ins if i in made)
        else:
            stash.add(v)
    while True:
        eqns, cut = [], []
        for e in full.eqns:
            if any(o in stash for o in e.outs):
                cut.append(e)
                eqns.extend(Eqn(placeholder_p, (), (o,), {}, f"{body.values[o].name}/stashed")
                            for o in e.outs if o in stash)
            else:
                eqns.append(e)
        prog = passes.prune(body.derive(eqns, outputs))
        needed = {i for e in prog.eqns for i in e.ins} | set(outputs)
        missing = {o for e in cut for o in e.outs if o not in stash and o in needed}
        if not missing:
            return tuple(sorted(stash)), prog
        stash |= missing


def _free_dims(aval):
    return tuple(d for d, s in enumerate(aval.shape) if s is None)


def _body_vjp(a):
    """The body's gradient program (role "vjp", made on first use), of (body
    inputs, output gradients): it runs the body again from an iteration's
    inputs. Its ``stashed`` twin (role "vjp/stashed") is fed the forward
    values its VJPs read (``stash``, ids of the body's values) from what the
    forward kept instead. ``var_slots[j]``: where the gradient of float loop
    variable ``j`` sits in the results (None: none); ``read_slots[k]``:
    (gradient, indices) result positions of each row read of appended
    variable ``k``; ``cap_slots``: the float captures' gradients (the same
    in both programs)."""
    body = a["body"]
    n = a["n_vars"]
    fl, fc = a["float_vars"], a["float_caps"]
    app = _appended(a)

    def make():
        n_fwd = len(body.eqns)
        vals = body.values
        ins = [vals[i] for i in body.inputs]
        outs = [vals[o] for o in body.outputs]
        gys, ys, xs = [], [], []
        for k in fl:
            # an appended variable's output gradient is that of the rows the iteration appended; its
            # input's gradient is that of the rows the iteration read (the takes' outputs)
            y = vals[app[k][0]] if k in app else outs[k]
            gys.append(body.append_equation(placeholder_p, (), {}, Aval(tuple(y.shape), y.dtype),
                                    name=f"gradients/{y.name}/grad_y"))
            ys.append(y)
            if k in app:
                xs += [vals[t] for t, _ in app[k][1]]
            else:
                xs.append(ins[k])
        xs += [ins[n + c] for c in fc]
        # the captures' (weights') gradients may stay factored: the loop adds them over its iterations
        # and densifies the sum once (one product over every iteration's rows, not one per iteration)
        grads = iter(gradients(ys, xs, grad_ys=gys, lazy={ins[n + c].id for c in fc}))
        real = []

        def slot(gr):
            if gr is None:
                return None
            real.append(gr.id)
            return len(real) - 1
        var_slots, read_slots = [], {}
        for k in fl:
            if k in app:
                read_slots[k] = [(slot(next(grads)), ix) for _, ix in app[k][1]]
                var_slots.append(None)
            else:
                var_slots.append(slot(next(grads)))
        cap_slots = [slot(next(grads)) for _ in fc]
        for k, rs in read_slots.items():
            # the indices of each read come back with its gradient (the stashed program is fed them)
            read_slots[k] = [(gs, None if gs is None else slot(vals[ix])) for gs, ix in rs]
        free = a["free"]
        free_in = tuple(free) + ((),) * (len(body.inputs) - n)
        free_gy = tuple(_free_dims(gy) if k in app else free[k] for k, gy in zip(fl, gys))
        gy_ids = tuple(x.id for x in gys)
        # no reused buffers: a factored gradient kept across iterations holds the arrays it was made of
        v = Program(body, tuple(body.inputs) + gy_ids, real, free_in + free_gy, buffers=False)
        v.var_slots, v.read_slots, v.cap_slots = var_slots, read_slots, cap_slots
        v.stash, derived = _stash_set(body, n_fwd, real)
        # the stashed program recomputes nothing random: the forward's draws are what it reads
        v.stash_ok = not any(e.prim.random for e in derived.eqns)
        v.stashed = body.programs["vjp/stashed"] = StashedProgram(
            body, tuple(body.inputs) + v.stash + gy_ids, real, free_in + ((),) * len(v.stash) + free_gy,
            len(body.inputs), v.stash, derived, buffers=False)
        return v
    return program(body, "vjp", make)


while_p = StaticPrimitive("while", _while_impl, _while_shape, multiple_results=True, joint_vjp=_while_vjp,
                          retains_inputs=True, options_arg=True)
while_nograd_p = StaticPrimitive("while", _while_impl, _while_shape, multiple_results=True, retains_inputs=True,
                                 options_arg=True)
on_gradient(while_p, _body_vjp)


def _var_name(x, k):
    if isinstance(x, TensorArray):
        return x.flow.name
    return x.name if isinstance(x, Value) else f"loop_vars[{k}]"


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10, back_prop=True,
               swap_memory=False, name=None, maximum_iterations=None, return_same_structure=False):
    """Repeat ``body`` while ``cond`` is true (TF1's ``tf.while_loop``).

    Parameters
    ----------
    cond : callable
        ``cond(*loop_vars) -> boolean scalar``.
    body : callable
        ``body(*loop_vars) -> loop_vars``: the same structure, dtypes and
        shapes (up to ``shape_invariants``).
    loop_vars : list or tuple
        Values, arrays, Python numbers (int32 / float32, as TF1),
        :class:`TensorArray` objects, or nested lists/tuples/dicts of them.
    shape_invariants : same structure as loop_vars, optional
        A shape per loop variable; ``None`` dimensions may change from one
        iteration to the next (a TensorArray's is ignored: a dynamic-size
        array may always grow).
    parallel_iterations, swap_memory
        Accepted for TF1 compatibility; iterations run one after another and
        in memory here, which computes the same values.
    back_prop : bool
        ``False``: no gradient flows through the loop (it keeps no stack).
    maximum_iterations : int or integer scalar Value, optional
        Stop after this many iterations even if ``cond`` is still true.
    return_same_structure : bool
        ``False`` (TF1's default): a single loop variable comes back alone,
        not in a list.

    Returns
    -------
    The loop variables after the last iteration, in the structure of ``loop_vars``.

    Examples
    --------
    >>> i, total = while_loop(lambda i, s: i < 10, lambda i, s: (i + 1, s + i), [0, 0])
    """
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop: cond and body must be callables")
    if not isinstance(loop_vars, (list, tuple)):
        raise TypeError(f"while_loop: loop_vars must be a list or tuple, got {type(loop_vars).__name__}")
    if not loop_vars:
        raise ValueError("while_loop: loop_vars is empty")
    outer = enclosing_graph(loop_vars)
    leaves, struct = tree_flatten(loop_vars)
    tas = [x if isinstance(x, TensorArray) else None for x in leaves]
    entry = [leaf_value(x, outer, "while_loop") for x in leaves]
    names = tuple(_var_name(x, k) for k, x in enumerate(leaves))
    free = []
    if shape_invariants is not None:
        try:
            inv_leaves = struct.flatten_up_to(shape_invariants)
        except ValueError:
            raise ValueError(f"while_loop: shape_invariants must have the structure of loop_vars, {struct}; "
                             f"got {shape_invariants!r}") from None
    else:
        inv_leaves = [None] * len(leaves)
    for k, (v, inv, ta) in enumerate(zip(entry, inv_leaves, tas)):
        if ta is not None:
            free.append((0,) if ta.dynamic_size else ())
            continue
        if inv is None or isinstance(inv, TensorArray):
            free.append(())
            continue
        inv = tuple(inv.as_list() if hasattr(inv, "as_list") else inv)
        if not _fits(tuple(v.shape), tuple(inv)):
            raise ShapeError(f"while_loop: loop variable '{names[k]}' has shape {fmt_shape(v.shape)}, which does "
                             f"not fit its shape invariant {fmt_shape(inv)}")
        free.append(tuple(d for d, s in enumerate(inv) if s is None))
    free = tuple(free)
    specs = [Aval(tuple(None if d in fr else s for d, s in enumerate(v.shape)), v.dtype) for v, fr in zip(entry, free)]

    def wrap(graph, phs, what):
        vals = []
        for ph, ta in zip(phs, tas):
            vals.append(ta.with_flow(ph) if ta is not None else ph)
        return struct.unflatten(vals)

    def params(graph, role):
        with graph.as_default():
            return [graph.append_equation(placeholder_p, (), {}, s, name=f"{role}/{names[k]}")
                    for k, s in enumerate(specs)]

    cg = outer.subgraph()
    cphs = params(cg, "cond")
    c = call_in(cg, cond, wrap(cg, cphs, "cond"), "while_loop cond")
    if isinstance(c, (bool, np.bool_)):
        raise TypeError("while_loop: cond returned a Python bool; it must return a boolean scalar graph value")
    if isinstance(c, (list, tuple)) and len(c) == 1:
        c = c[0]
    if not isinstance(c, Value):
        raise TypeError(f"while_loop: cond must return a boolean scalar graph value, got {type(c).__name__}")
    c = leaf_value(c, cg, "while_loop cond")
    if c.dtype != np.bool_ or tuple(c.shape) != ():
        raise TypeError(f"while_loop: cond must return a boolean scalar, got shape {fmt_shape(c.shape)} dtype "
                        f"{c.dtype}")
    cg.inputs = tuple(p.id for p in cphs) + tuple(ph.id for _, ph in cg.captures)
    cg.outputs = (c.id,)
    check_pure(cg, "while_loop cond")

    bg = outer.subgraph()
    bphs = params(bg, "body")
    r = call_in(bg, body, wrap(bg, bphs, "body"), "while_loop body")
    if len(loop_vars) == 1 and not isinstance(r, (list, tuple)):
        r = [r]
    rleaves, rstruct = tree_flatten(r)
    if not struct.same_structure(rstruct, lists_as_tuples=True):
        raise ValueError(f"while_loop: body must return the structure of loop_vars, {struct}; it returned "
                         f"{rstruct}")
    outs = []
    out_tas = []
    for k, (x, ta) in enumerate(zip(rleaves, tas)):
        if (ta is None) != (not isinstance(x, TensorArray)):
            raise TypeError(f"while_loop: loop variable '{names[k]}' is "
                            f"{'a TensorArray' if ta is not None else 'a tensor'} but body returned "
                            f"{'a TensorArray' if isinstance(x, TensorArray) else type(x).__name__}")
        out_tas.append(x if ta is not None else None)
        v = leaf_value(x, bg, "while_loop body")
        if v.dtype != specs[k].dtype:
            raise TypeError(f"while_loop: loop variable '{names[k]}' enters the loop with dtype {specs[k].dtype} "
                            f"but has dtype {v.dtype} after one iteration")
        if not _fits(tuple(v.shape), tuple(specs[k].shape)):
            raise ShapeError(f"while_loop: loop variable '{names[k]}' enters the loop with shape "
                             f"{fmt_shape(specs[k].shape)} but has shape {fmt_shape(v.shape)} after one iteration; "
                             f"to let it change, give it a shape invariant with None where it changes "
                             f"(shape_invariants=)")
        outs.append(v)
    bg.inputs = tuple(p.id for p in bphs) + tuple(ph.id for _, ph in bg.captures)
    bg.outputs = tuple(v.id for v in outs)
    check_pure(bg, "while_loop body")
    appends = _find_appends(bg, len(leaves), free, specs)

    ins = list(entry) + [v for v, _ in cg.captures] + [v for v, _ in bg.captures]
    has_max = maximum_iterations is not None
    if has_max:
        m = maximum_iterations
        if not isinstance(m, Value):
            with outer.as_default():
                m = constant(np.asarray(int(m), dtype=np.int64))
        ins.append(m)
    bcap_avals = [v for v, _ in bg.captures]
    attrs = {
        "cond": cg, "body": bg, "n_vars": len(leaves), "n_cond_caps": len(cg.captures), "has_max": has_max,
        "free": free, "names": names, "back_prop": bool(back_prop),
        "float_vars": tuple(k for k, s in enumerate(specs) if dtype_of(s).kind in "fc"),
        "float_caps": tuple(j for j, v in enumerate(bcap_avals) if v.dtype.kind in "fc"),
        "appends": appends,
    }
    with outer.as_default():
        res = add_op(while_p if back_prop else while_nograd_p, *ins, name=name or "while", **attrs)
    res = res[:len(leaves)]
    vals = []
    for v, ta, ota in zip(res, tas, out_tas):
        vals.append(ta.with_flow(v, ota.element_shape if ota is not None else None) if ta is not None else v)
    out = struct.unflatten(vals)
    if not return_same_structure and len(loop_vars) == 1:
        return out[0]
    return out
