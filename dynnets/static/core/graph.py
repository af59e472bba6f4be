"""The compiler core's graph: an append-only list of SSA equations over
value ids (:class:`GraphIR`) and the symbolic handle of one value
(:class:`Value`).

A graph holds equations ``outs = prim(ins, **attrs)`` in creation order
(which is a topological order). ``ins`` and ``outs`` are integer value ids;
every value is produced exactly once (SSA) and an equation is never changed
after it was added, so a compiled plan stays valid however many nodes are
added later. Sources are equations too: placeholders, variables, constants
and *live parameters* (eager Parameters a trace captured, read at every run).

This module is the IR's tables and their one way in
(:meth:`GraphIR.append_equation`), with constants, control dependencies,
subgraphs and captures, and the derived graphs the passes make. TF1's
``Graph`` (name scopes as API, collections, lookups by name,
``as_default``) and its ``Tensor`` operators subclass these in
:mod:`dynnets.static.graph`; nothing here names them.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from ...autograd import gradtypes
from ...autograd.primitives import Aval, ShapeError, dtype_of
from .ir import SOURCES, Eqn, GraphError, StaticPrimitive, constant_p, effect_variables, param_p, placeholder_p, \
    user_site, variable_p

__all__ = ["GraphIR", "Value", "after_p", "read_after_p", "densify_p", "densified", "unknown_origin", "empty_meta"]


class Value:
    """A value of a :class:`GraphIR`: ``graph``, ``id`` (its index in the
    graph's tables), ``name``, ``sparse`` (the run-time value is a row-sparse
    gradient). The TF1 facade's :class:`~dynnets.static.graph.Value` adds the
    tensor API (operators, TF1's shapes, ``eval``)."""

    __slots__ = ("graph", "id", "name", "sparse", "_dense")

    def __init__(self, graph, vid, name, sparse=False):
        self.graph = graph
        self.id = vid
        self.name = name
        self.sparse = sparse        # the runtime value is a RowSparse gradient
        self._dense = None          # its densified value (:func:`densified`), made once

    @property
    def aval(self):
        """The abstract value (shape with None for unknown dims, dtype)."""
        return self.graph.avals[self.id]

    @property
    def shape(self):
        """The shape as a tuple (None for an unknown dimension), or None for an unknown rank."""
        s = self.graph.avals[self.id].shape
        return None if s is None else tuple(s)

    @property
    def dtype(self):
        return dtype_of(self.graph.avals[self.id])

    @property
    def ndim(self):
        s = self.graph.avals[self.id].shape
        return None if s is None else len(s)

    @property
    def op(self):
        """The equation that produces this value."""
        return self.graph.producer[self.id]

    def __repr__(self):
        return f"<{type(self).__name__} '{self.name}' v{self.id}>"


# --------------------------------------------------------------------------
# helper primitives of the IR
# --------------------------------------------------------------------------

def _after_impl(x, *controls):
    return x


def _after_vjp(g, ins, out):
    return (g,) + (None,) * (len(ins) - 1)


# x, taken once the control inputs ran (an op made inside a control_dependencies block)
after_p = StaticPrimitive("control_after", _after_impl, lambda x, *controls: Aval(tuple(x.shape), x.dtype),
                          joint_vjp=_after_vjp)


def _read_after_impl(S, snapshot, *controls, var):
    # an effect, so it runs in creation order among the run's effects, after the controls' writes
    return np.array(S[var.index], copy=True)


def _read_after_shape(snapshot, *controls, var):
    return Aval(tuple(snapshot.shape), snapshot.dtype)


read_after_p = StaticPrimitive("read_after", _read_after_impl, _read_after_shape, effect=True,
                               joint_vjp=_after_vjp)



densify_p = StaticPrimitive("densify", gradtypes.densify, lambda x: Aval(tuple(x.shape), dtype_of(x)))


def densified(v):
    """The dense value of row-sparse gradient ``v`` (one equation per value)."""
    if v._dense is None:
        v._dense = v.graph.append_equation(densify_p, (v.id,), {}, Aval(tuple(v.aval.shape), v.dtype),
                                           name=f"{v.name}/dense")
    return v._dense


def unknown_origin(v):
    """`` (from placeholder 'p', made without a shape)`` for a value of
    unknown rank: the placeholder it comes from."""
    g, stack, seen = v.graph, [v.id], set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        e = g.producer[i]
        if e.prim is placeholder_p and g.avals[i].shape is None:
            return "" if i == v.id else f" (from placeholder '{g.values[i].name}', made without a shape)"
        stack.extend(j for j in e.ins if g.avals[j].shape is None)
    return ""



def empty_meta():
    return {"buffers": {}, "copy_outputs": set()}


# --------------------------------------------------------------------------
# the graph
# --------------------------------------------------------------------------

class GraphIR:
    """An append-only SSA graph of equations.

    ``eqns`` lists the equations in creation order; ``avals[i]`` is value
    ``i``'s abstract value (shape with ``None`` for unknown dims, dtype);
    ``producer[i]`` its equation and ``values[i]`` its symbolic handle.

    The compiler's passes produce *derived* graphs (``root`` is the user's
    graph, ``outputs`` the value ids the program must compute); a pass never
    modifies its input.

    A *subgraph* (a ``while_loop`` body or condition, a ``cond`` branch) is a
    Graph of its own with a ``parent``: ``inputs`` are its placeholder ids in
    argument order and ``outputs`` its results, so it is a function; a value
    of an enclosing graph used inside it is *captured* (:meth:`capture`) as
    one more input placeholder, and ``captures`` lists the (outer value,
    placeholder) pairs in order. ``programs`` caches a subgraph's compiled
    plans (filled by :mod:`.control_flow` when it first runs; not part of
    what the graph computes).

    ``meta`` holds what a pass tells lowering about a derived graph:
    ``"buffers"`` (buffer slot -> (shape, dtype), from the memory plan) and
    ``"copy_outputs"`` (output ids that may alias a buffer, so the plan copies
    them out). A fresh graph, and every graph a pass derives, starts with both
    empty.
    """

    #: the class of the values :meth:`append_equation` makes (the facade's Graph makes TF1's Values)
    value_class = Value

    def __init__(self):
        self.eqns = []
        self.avals = []
        self.values = []
        self.producer = []
        self.outputs = ()
        self.root = self
        self.variables = []
        self.placeholders = []
        self._names = {}
        self._scalar_consts = {}
        self._params = {}
        self.meta = empty_meta()
        self._prefix = ""           # the name prefix of new equations (TF1's name scope: "outer/inner/")
        self.parent = None
        self.inputs = ()
        self.captures = []
        self._captured = {}
        self.programs = {}
        self._control = []          # the open control_dependencies blocks: (control ids, written variables)
        self._after = {}            # (value id, control ids) -> the value read after those controls

    # --- construction -----------------------------------------------------------
    def _unique_name(self, base):
        n = self._names.get(base)
        if n is None:
            self._names[base] = 1
            return base
        while True:
            name = f"{base}_{n}"
            n += 1
            if name not in self._names:
                self._names[base] = n
                self._names[name] = 1
                return name

    def fresh_name(self, full):
        """``full``, a complete op name (no name scope is added), made unique
        in this graph (``"a/b"``, then ``"a/b_1"``...) and reserved: for code
        that names ops itself, as an importer giving a file's names back.
        TF1's scoped form is the facade's ``Graph.unique_name``."""
        return self._unique_name(full)

    def _new_value(self, aval, name, cls, obj=None, sparse=False):
        vid = len(self.avals)
        self.avals.append(aval)
        if obj is None:
            obj = cls.__new__(cls)
        Value.__init__(obj, self, vid, name, sparse)
        self.values.append(obj)
        self.producer.append(None)
        return obj

    def append_equation(self, prim, ins, attrs, out_avals, name=None, cls=None, obj=None, site=None, sparse=False):
        """Append one equation ``outs = prim(*ins, **attrs)``: the compiler
        core's way to add an op whose result avals are already known (graph
        building through ``bind`` computes them with the primitive's rule and
        calls this; loops, gradients, importers and optimizers call it
        directly).

        Parameters
        ----------
        prim : Primitive
        ins : tuple of int
            The ids of the input values (``v.id``), of this graph.
        attrs : dict
        out_avals : Aval, or a tuple of Avals for a multiple-result primitive
        name : str, optional
            The op's name inside the open name scope (made unique); default the primitive's.
        cls : type
            The class of the result (default the graph's ``value_class``; TF1's
            ``Operation`` for an op run for its effect).
        obj : optional
            The Python object the value stands for (a Variable's).
        site : optional
            The user's source line, for error messages.
        sparse : bool
            The run-time value is a row-sparse gradient.

        Returns
        -------
        Value, or a tuple of Values for multiple results. Inside
        ``control_dependencies`` the equation waits for the controls.
        """
        if self is not self.root:
            raise GraphError("cannot add nodes to a derived (compiled) graph")
        if self._control and prim not in SOURCES and prim is not after_p and prim is not read_after_p:
            if ins:
                ins = self.controlled_inputs(ins)
            elif not getattr(prim, "effect", False) and not prim.multiple_results:
                # an op without inputs (a fill, a random draw) waits for the controls through its result
                out = self._append_eqn(prim, ins, attrs, out_avals, name, cls, obj, site, sparse)
                return self._after_controls(out)
        return self._append_eqn(prim, ins, attrs, out_avals, name, cls, obj, site, sparse)

    # the old private name, still called by branches written before append_equation (issue 24);
    # tests/test_layout.py refuses it outside this module
    _append = append_equation

    def _append_eqn(self, prim, ins, attrs, out_avals, name, cls, obj, site, sparse):
        if name and name[-1] == "/":
            name = name[:-1]        # TF1: a name scope given as name= (``name=scope``) names the op itself
        else:
            name = self._unique_name(self._prefix + (name or prim.name) if self._prefix else (name or prim.name))
        if prim.multiple_results:
            vc = self.value_class
            outs = tuple(self._new_value(a, f"{name}:{k}", vc) for k, a in enumerate(out_avals))
        else:
            outs = (self._new_value(out_avals, name, cls or self.value_class, obj, sparse),)
        eqn = Eqn(prim, tuple(ins), tuple(v.id for v in outs), attrs, name, site)
        for v in outs:
            self.producer[v.id] = eqn
        self.eqns.append(eqn)
        return outs if prim.multiple_results else outs[0]

    def rename(self, v, name):
        """Name value ``v`` (and the op that makes it) ``name`` inside the
        open name scope, made unique (``"output/predictions"``,
        ``"output/predictions_1"``...): what TF1 calls an op made with
        ``name=``, so ``get_tensor_by_name`` / ``get_operation_by_name`` find
        it, also after ``import_meta_graph``. Returns ``v``."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string, got {name!r}")
        if name[-1] == "/":         # TF1: ``name=scope`` (a scope from ``name_scope``) is the op's full name
            full = name[:-1]
        else:
            full = self._prefix + name
        if v.name != full and name[-1] != "/":          # (the op's generated name may already be this one: reduce_mean's "mean")
            full = self._unique_name(full)
        v.name = full
        e = self.producer[v.id] if self.producer is not None else None
        if e is not None and len(e.outs) == 1:
            e.name = full
        return v

    def constant_value(self, value):
        """A constant node; Python scalars are kept weak (as numpy does), and
        each distinct scalar is one node per graph (a float by its sign as
        well: -0.0 == 0.0, yet ``1 / (x * -0.0)`` is ``-inf``; a NaN equals
        no other, so each is its own node)."""
        tp = type(value)
        if tp is float or tp is int or tp is bool or value is None:
            key = (tp, value, math.copysign(1.0, value)) if tp is float else (tp, value)
            v = self._scalar_consts.get(key)
            if v is None:
                aval = Aval((), value) if value is not None else Aval((), np.dtype(object))
                v = self.append_equation(constant_p, (), {"value": value}, aval, name="Const")
                self._scalar_consts[key] = v
            return v
        if gradtypes.is_lazy(value):
            raise TypeError(f"a {type(value).__name__} gradient cannot be a graph constant")
        arr = np.array(value, copy=True) if not isinstance(value, np.generic) else value
        if isinstance(arr, np.ndarray):
            arr.setflags(write=False)
        return self.append_equation(constant_p, (), {"value": arr}, Aval(tuple(np.shape(arr)), arr.dtype), name="Const")

    def add_variable(self, var, name):
        """Append the source of variable ``var`` (an object with an
        ``initial_value`` array, which becomes the value's handle) and give
        it its ``index`` in the session's variable storage."""
        aval = Aval(tuple(var.initial_value.shape), var.initial_value.dtype)
        var.index = len(self.variables)
        self.append_equation(variable_p, (), {"var": var}, aval, name=name or "Variable", obj=var, site=user_site())
        self.variables.append(var)

    def live_param(self, p):
        """The live-parameter source for eager tensor ``p`` (one per tensor,
        made when an op of a trace first reads it)."""
        v = self._params.get(id(p))
        if v is None:
            aval = Aval(tuple(p.shape), p.dtype)
            v = self.append_equation(param_p, (), {"param": p}, aval, name=p.name or "param")
            self._params[id(p)] = v
        return v

    def param_value(self, p):
        """The graph's live source for eager Parameter ``p`` (made by a
        trace when an op read it), or None: the value a trace's gradients
        are taken with respect to."""
        return self._params.get(id(p))

    # --- control dependencies -------------------------------------------------------
    @contextlib.contextmanager
    def control_dependencies(self, control_inputs):
        """Inside the block, every new op of this graph runs after the ops and
        values in ``control_inputs`` (which then run whenever it runs), as
        TF1's ``Graph.control_dependencies``: its inputs are taken after the
        controls, and a Variable that a control writes (an ``assign``, a train
        op) is read after that write. ``None`` clears the enclosing blocks'
        controls; blocks nest (their controls add up).

        Ops created before the block are not affected: a run still computes
        them from the variables as they were when it started."""
        if control_inputs is None:
            frame = None
        else:
            if isinstance(control_inputs, Value) or not isinstance(control_inputs, (list, tuple)):
                raise TypeError(f"control_dependencies: control_inputs must be a list of graph values or None, got "
                                f"{type(control_inputs).__name__}")
            ids, written = [], set()
            for c in control_inputs:
                if not isinstance(c, Value):
                    raise TypeError(f"control_dependencies: {c!r} is not a graph value (an op or a tensor)")
                if c.graph is not self:
                    raise GraphError(f"control_dependencies: '{c.name}' belongs to another graph")
                ids.append(c.id)
                written |= self._written_by(c.id)
            frame = (tuple(ids), frozenset(written))
        self._control.append(frame)
        try:
            yield
        finally:
            self._control.pop()

    def control_inputs(self):
        """The control inputs of the open ``control_dependencies`` blocks, as Values."""
        return [self.values[i] for i in self._controls()[0]]

    @property
    def in_control_block(self):
        """Whether new ops of this graph get control dependencies (inside
        :meth:`control_dependencies` with at least one control)."""
        return bool(self._controls()[0])

    def _controls(self):
        """(control ids, ids of the variables they write) of the open blocks."""
        ids, written = [], set()
        for frame in self._control:
            if frame is None:
                ids, written = [], set()
            else:
                ids.extend(i for i in frame[0] if i not in ids)
                written |= frame[1]
        return tuple(ids), written

    def writes(self, v):
        """The ids of the variables that running ``v`` (an op or a value)
        writes: those the effects among its ancestors write."""
        return self._written_by(v.id)

    def _written_by(self, vid):
        """Ids of the variables the effects among ``vid``'s ancestors write."""
        out, seen, stack = set(), set(), [vid]
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            e = self.producer[i]
            if getattr(e.prim, "effect", False) and e.prim is not read_after_p:
                vs = e.attrs.get("vars", ()) if e.prim.initializer else effect_variables(e)
                out.update(v.id for v in vs)
            stack.extend(e.ins)
        return out

    def controlled_inputs(self, ins):
        """``ins`` as the open control blocks see them: each non-constant
        input taken after the controls (a variable they write read after the write)."""
        ctrl, written = self._controls()
        if not ctrl:
            return ins
        out = []
        for i in ins:
            p = self.producer[i].prim
            if p is constant_p or i in ctrl:
                out.append(i)
                continue
            key = (i, ctrl)
            v = self._after.get(key)
            if v is None:
                aval = self.avals[i]
                if p is variable_p and i in written:
                    var = self.values[i]
                    v = self.append_equation(read_after_p, (i,) + ctrl, {"var": var},
                                             Aval(tuple(aval.shape), aval.dtype), name=f"{var.name}/read")
                else:
                    v = self.append_equation(after_p, (i,) + ctrl, {}, aval, name=f"{self.values[i].name}/after")
                self._after[key] = v
            out.append(v.id)
        return tuple(out)

    def _after_controls(self, v):
        ctrl, _ = self._controls()
        if not ctrl:
            return v
        return self.append_equation(after_p, (v.id,) + ctrl, {}, self.avals[v.id], name=f"{v.name}/after")

    # --- subgraphs ------------------------------------------------------------------
    def subgraph(self):
        """A new empty graph nested in this one (see :meth:`capture`)."""
        g = type(self)()
        g.parent = self.root
        return g

    def encloses(self, other):
        """Whether ``other`` is nested (at any depth) inside this graph."""
        p = other.parent
        while p is not None:
            if p is self:
                return True
            p = p.parent
        return False

    def capture(self, v):
        """The placeholder of this subgraph standing for ``v``, a value of an
        enclosing graph (created on first use; through every graph between)."""
        if v.graph is self:
            return v
        if self.parent is None or not v.graph.encloses(self):
            raise GraphError(f"'{v.name}' belongs to a graph that does not enclose this one")
        if v.graph is not self.parent:
            v = self.parent.capture(v)
        ph = self._captured.get(v.id)
        if ph is None:
            if v.graph.avals[v.id].shape is None:
                raise ShapeError(f"'{v.name}' has an unknown rank{unknown_origin(v)}: a while_loop body or cond "
                                 f"branch cannot use it; give the placeholder a shape (tf.placeholder(dtype, "
                                 f"shape=[...]), shape=[] for a scalar)")
            if v.sparse:
                v = densified(v)
            ph = self.append_equation(placeholder_p, (), {}, Aval(tuple(v.aval.shape), v.dtype), name=f"capture/{v.name}")
            self.placeholders.append(ph)
            self._captured[v.id] = ph
            self.captures.append((v, ph))
        return ph


    # --- derived graphs (the compiler's) ------------------------------------------
    def derive(self, eqns, outputs=None, avals=None):
        """A derived graph with other equations (same value ids)."""
        g = type(self).__new__(type(self))
        g.root = self.root
        g.eqns = eqns
        g.outputs = self.outputs if outputs is None else tuple(outputs)
        g.avals = self.avals if avals is None else avals
        g.values = self.root.values
        g.producer = None
        g.variables = self.root.variables
        g.placeholders = self.root.placeholders
        g.meta = empty_meta()
        g.parent = self.root.parent
        g.inputs = self.root.inputs
        g.captures = self.root.captures
        g.programs = self.root.programs
        return g

    def with_outputs(self, outputs):
        """The program 'compute ``outputs`` (Values or ids)' over this graph."""
        ids = []
        for o in outputs:
            if isinstance(o, Value):
                if o.graph is not self.root:
                    raise GraphError(f"with_outputs: '{o.name}' belongs to another graph")
                ids.append(o.id)
            else:
                ids.append(int(o))
        d = self.derive(list(self.eqns), ids)
        if self is self.root:
            d.producer = self.producer      # a full view: the root's value -> equation list applies
        return d

    def producers(self):
        """value id -> equation (the root's list, or a dict for a derived graph)."""
        if self.producer is not None:
            return self.producer
        return {o: e for e in self.eqns for o in e.outs}

    def __len__(self):
        return len(self.eqns)

    def __repr__(self):
        lines = [f"Graph({len(self.eqns)} equations, outputs={['v%d' % o for o in self.outputs]})"]
        lines += ["  " + repr(e) for e in self.eqns[:200]]
        if len(self.eqns) > 200:
            lines.append(f"  ... {len(self.eqns) - 200} more")
        return "\n".join(lines)

