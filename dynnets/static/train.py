"""Optimizers for static graphs, with TF1's names (``tf.train.*``).

``opt.minimize(loss)`` builds the gradient subgraph (:func:`gradients`) and
one effectful *apply* node that updates every Variable in place when the
returned train op runs. The update rules are the eager optimizers' own
functions (:func:`dynnets.nn.optim.sgd_update`, ``adagrad_update``,
``adam_update``: one copy of each), called with TF1's constants:

* ``GradientDescentOptimizer``: ``w -= lr * (g + weight_decay * w)``;
* ``AdagradOptimizer``: ``acc += g*g; w -= lr * g / (sqrt(acc) + epsilon)``
  (TF1's defaults ``initial_accumulator_value=0.1``, ``epsilon=0``; pass
  ``initial_accumulator_value=0, epsilon=1e-10`` for PyTorch's);
* ``AdamOptimizer``: TF1's rule, with its "epsilon hat" (Kingma and Ba 2015,
  the formulation before section 2.1): ``m = b1 m + (1 - b1) g``,
  ``v = b2 v + (1 - b2) g^2``, ``lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)``,
  ``w -= lr_t m / (sqrt(v) + epsilon)``. PyTorch's ``torch.optim.Adam`` (and
  eager ``dynnets.optim.Adam``) adds epsilon after the bias correction,
  ``sqrt(v) / sqrt(1 - b2^t) + epsilon``: the same steps once ``v`` is large
  against ``epsilon``; TF1's are smaller early (while ``sqrt(1 - b2^t)`` is
  small) and for tiny gradients. ``lr_t`` is
  computed in float64 (TF1 computes it in the variable's dtype from float32
  powers ``b1^t``, ``b2^t`` it keeps as variables: a difference in the
  last bits of float32 steps).

``MomentumOptimizer`` and ``RMSPropOptimizer`` have TF1's own update rules
(not PyTorch's, which differ: see their docstrings), and so do their
row-sparse gradients: only the rows looked up change, moments included (TF1's
``sparse_apply_*``). Their updates run on the first two executor tiers; the
third (:mod:`.native`) compiles the update of an optimizer whose class
declares its dense rule (``_rule``, an :class:`~dynnets.nn.optim_kernels.UpdateRule`:
the one definition the eager kernels are generated from too, SGD's, Adagrad's
and Adam's; with ``_native_scalars`` giving the rule's per-step scalars) and
leaves a plan with another one on tier 2.

The constructors take TF1's arguments in TF1's order (``use_locking`` is
accepted and changes nothing: a run applies its updates one after another);
``weight_decay=``, ``lazy=`` and Adagrad's ``epsilon=`` are dynnets'
additions, keyword-only. ``minimize(loss, global_step=)`` and
``apply_gradients(..., global_step=)`` increment ``global_step`` after the
update, as TF1, so a learning rate computed from it (``exponential_decay``,
``piecewise_constant``) uses the step count from before the update.

Row-sparse gradients (embedding lookups) are applied to the looked-up rows
only, where the maths allows (no weight decay; Adam with ``lazy=True``), as in
the eager optimizers; otherwise they are densified first.

Slot variables (accumulators, moments, Adam's step) are Variables of the
graph created by ``minimize``/``apply_gradients``, so, as in TF1, create the
train op before ``global_variables_initializer()``. Read them as in TF1,
``opt.get_slot(var, "m")``, ``opt.get_slot_names()``, ``opt.variables()``
(Adam's step counter: ``opt.get_step_counter(graph)``); the graph importer
gives a rebuilt optimizer the file's slot variables with ``set_slots`` and
``set_step_counter``.

The rest of ``tf.train`` lives beside: ``Saver``, ``latest_checkpoint``,
``get_checkpoint_state``, ``import_meta_graph`` (:mod:`.saver`),
``write_graph``, ``export_meta_graph`` (:mod:`.export`).
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd import ops
from ..autograd.gradtypes import RowSparse
from ..autograd.primitives import Aval, ShapeError, fmt_shape
from ..nn.optim import adagrad_update, adam_update, sgd_update
from ..nn.optim_kernels import ADAGRAD_RULE, ADAM_RULE, SGD_RULE
from .backward import sparse_gradients
from .export import export_meta_graph, register_optimizer, write_graph
from .graph import (GraphError, Operation, StaticPrimitive, Value, Variable, get_default_graph, group, named,
                    trainable_variables)
from .saver import (Saver, checkpoint_exists, get_checkpoint_state, import_meta_graph, latest_checkpoint, list_variables,
                    load_variable)

__all__ = ["Optimizer", "GradientDescentOptimizer", "AdagradOptimizer", "AdamOptimizer", "MomentumOptimizer",
           "RMSPropOptimizer", "exponential_decay", "piecewise_constant", "get_or_create_global_step",
           "get_global_step", "create_global_step", "global_step", "Saver", "latest_checkpoint",
           "get_checkpoint_state", "checkpoint_exists", "write_graph", "export_meta_graph", "import_meta_graph",
           "list_variables", "load_variable"]


def _apply_impl(S, *args, opt, vars, slots, n):
    lr = float(args[n]) if len(args) > n else opt.learning_rate
    opt._apply(S, args[:n], vars, lr)
    return None


def _apply_shape(*avals, opt, vars, slots, n):
    for a, v in zip(avals[:n], vars):
        want = v.graph.avals[v.id]
        if tuple(a.shape) != tuple(want.shape):
            raise ShapeError(f"{opt.name}: gradient shape {fmt_shape(a.shape)} does not match variable '{v.name}' "
                             f"shape {fmt_shape(want.shape)}")
    return Aval((), None)


def _apply_native(gen, ins, kw):
    """The native tier's ``apply_gradients``: the optimizer's update rule
    (its ``_rule``, defined once in :mod:`dynnets.nn.optim_kernels` and run by
    the eager kernels too), element by element in place, each step in
    numpy's order and dtype (Python floats cast to the variable's dtype, as
    numpy casts a weak scalar). The per-step scalars come from the optimizer
    (``_native_scalars``)."""
    opt, vars_, n = kw["opt"], kw["vars"], kw["n"]
    # the class's own rule: a subclass may change _apply, and declares its rule itself
    rule = type(opt).__dict__.get("_rule")
    if rule is None:
        raise gen.Unsupported(f"optimizer {type(opt).__name__}")
    args = ins.args
    if len(args) > n:
        s = args[n]
        if s in gen.weak:
            lr = float(gen.weak[s])
        else:
            if not gen.is_scalar(s) or gen.dtype.get(s) not in gen.FLOATS:
                raise gen.Unsupported("a learning rate that is not a float scalar")
            lr = f"float({gen.expr[s]})"
    else:
        lr = float(opt.learning_rate)
    # lr: a Python float or a float64 kernel expression; scalars_in(dt): the rule's scalars as
    # expressions of dtype dt
    scalars_in = opt._native_scalars(gen, lr, vars_)
    wd = opt.weight_decay
    for k, var in enumerate(vars_):
        gs = args[k]
        if gs in gen.weak:
            raise gen.Unsupported("a Python scalar gradient")
        name, dt, shape = gen.storage(var)
        ge, gshape = gen.op(gs, dt)
        if gshape != shape:
            raise gen.Unsupported(f"a gradient of shape {gshape} for variable '{var.name}' of shape {shape}")
        if wd:
            # g = g + weight_decay * data
            gw = f"gw{k}"
            gen.expr[gw], gen.dtype[gw], gen.shape[gw] = None, dt, shape
            wl = gen.lit(wd, dt)
            gen.ew(gw, shape, [(ge, shape), (name if shape else f"{name}[()]", shape)],
                   lambda a, p: f"({a} + {wl} * {p})", dt)
            if gw in gen.lazy:
                gen.materialize(gw)
            ge = gen.expr[gw]
        arrays = {"p": var}
        for rs, sname in zip(rule.slots, opt._slot_names):
            arrays[rs] = opt._slots[var][sname]
            if gen.storage(arrays[rs])[1] != dt:
                raise gen.Unsupported(f"{type(opt).__name__}: a slot of another dtype than its variable")
        names = {"D": gen.dtname(dt), **scalars_in(dt)}
        for target, formula in rule.steps:
            used = [a for a in rule.slots + ("p",) if a != target and "{" + a + "}" in formula]
            operands = [(ge, shape)] if "{g}" in formula else []
            for a in used:
                el = gen.storage(arrays[a])[0]
                operands.append((el, shape) if shape else (f"{el}[()]", ()))
            keys = (["g"] if "{g}" in formula else []) + used

            def fmt(t, *els, formula=formula, target=target, keys=keys):
                return formula.format(**names, **{target: t}, **dict(zip(keys, els)))
            gen.update(arrays[target], operands, fmt)


apply_p = StaticPrimitive("apply_gradients", _apply_impl, _apply_shape, effect=True, native=_apply_native)


class Optimizer:
    """Base class: ``compute_gradients``, ``apply_gradients``, ``minimize``.

    ``learning_rate`` may be a Python number or a scalar Value (e.g. a
    placeholder fed each step).
    """

    _slot_names: tuple = ()
    # the dense update rule (dynnets.nn.optim_kernels) the native plan tier compiles, its slots
    # those of _slot_names in order; None (or not set by the class itself, a subclass):
    # plans applying this optimizer stay on tier 2
    _rule = None

    def __init__(self, learning_rate, weight_decay=0.0, name="Optimizer"):
        if not isinstance(learning_rate, Value) and not learning_rate >= 0:
            raise ValueError(f"{name}: learning_rate must be non-negative, got {learning_rate}")
        if not weight_decay >= 0:
            raise ValueError(f"{name}: weight_decay must be non-negative, got {weight_decay}")
        self.learning_rate = learning_rate
        self.weight_decay = float(weight_decay)
        self.name = name
        self._slots = {}

    def compute_gradients(self, loss, var_list=None, gate_gradients=1, aggregation_method=None,
                          colocate_gradients_with_ops=False, grad_loss=None):
        """``[(gradient, variable)]``; a gradient is ``None`` where the loss does
        not depend on the variable, and may be row-sparse (``grad.sparse``).
        ``grad_loss`` is the gradient of the loss itself (default 1)."""
        if not isinstance(loss, Value):
            raise TypeError(f"{self.name}.compute_gradients: loss must be a graph value, got {loss!r}")
        var_list = trainable_variables(graph=loss.graph) if var_list is None else list(var_list)
        if not var_list:
            raise ValueError(f"{self.name}.compute_gradients: no variables to optimise")
        for v in var_list:
            if not isinstance(v, Variable):
                raise TypeError(f"{self.name}.compute_gradients: {v!r} is not a Variable")
        if loss.shape not in ((), (1,)):
            raise ValueError(f"{self.name}.compute_gradients: loss must be a scalar, got shape {fmt_shape(loss.shape)}")
        return list(zip(sparse_gradients(loss, var_list, None if grad_loss is None else [grad_loss]), var_list))

    def _make_slots(self, var):
        slots = self._slots.get(var)
        if slots is None:
            slots = {}
            for s in self._slot_names:
                init = self._slot_init(var, s)
                slots[s] = Variable(init, name=f"{var.name}/{self.name}/{s}", trainable=False, graph=var.graph)
            self._slots[var] = slots
        return slots

    def _slot_init(self, var, slot):
        return np.zeros(var.initial_value.shape, var.initial_value.dtype)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The train op: one node updating every variable in place (then
        adding 1 to ``global_step``, an integer Variable, when given)."""
        if global_step is not None:
            _check_step(self.name, global_step)
            update = self.apply_gradients(grads_and_vars, name=f"{name or self.name}/update")
            with global_step.graph.as_default():
                return group(update, global_step.assign_add(np.ones((), global_step.dtype)), name=name or self.name)
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError(f"{self.name}.apply_gradients: no gradients provided for any variable "
                             f"({[v.name for _, v in grads_and_vars]})")
        graph = pairs[0][1].graph
        for g, v in pairs:
            if v.graph is not graph or g.graph is not graph:
                raise GraphError(f"{self.name}.apply_gradients: '{v.name}' belongs to another graph")
        slots = []
        for _, v in pairs:
            slots.extend(self._make_slots(v).values())
        slots.extend(self._extra_slots(graph))
        ins = [g.id for g, _ in pairs]
        if isinstance(self.learning_rate, Value):
            if self.learning_rate.graph is not graph:
                raise GraphError(f"{self.name}: learning_rate '{self.learning_rate.name}' belongs to another graph")
            ins.append(self.learning_rate.id)
        attrs = {"opt": self, "vars": tuple(v for _, v in pairs), "slots": tuple(slots), "n": len(pairs)}
        out = _apply_shape(*[graph.avals[i] for i in ins], **attrs)
        return graph.append_equation(apply_p, tuple(ins), attrs, out, name=name or self.name, cls=Operation)

    def _extra_slots(self, graph):
        return ()

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=1, aggregation_method=None,
                 colocate_gradients_with_ops=False, name=None, grad_loss=None):
        """``apply_gradients(compute_gradients(loss, var_list), global_step)``
        (TF1's argument order: the second is ``global_step``)."""
        if var_list is not None and (isinstance(var_list, Value) or not isinstance(var_list, (list, tuple))):
            raise TypeError(f"{self.name}.minimize: var_list must be a list of Variables, got "
                            f"{type(var_list).__name__}")
        grads = self.compute_gradients(loss, var_list, grad_loss=grad_loss)
        return self.apply_gradients(grads, global_step=global_step, name=name)

    def get_slot(self, var, name):
        """The slot variable ``name`` this optimizer made for ``var``, or None
        when there is none (``var`` not updated by it yet, or ``name`` not one
        of its slots), as TF1's ``Optimizer.get_slot``.

        Parameters
        ----------
        var : Variable
        name : str
            one of :meth:`get_slot_names` (Adam: ``"m"``, ``"v"``)

        Returns
        -------
        Variable or None
            of ``var``'s shape and dtype, not trainable
        """
        slots = self._slots.get(var)
        return None if slots is None else slots.get(name)

    def get_slot_names(self):
        """The names of the slots this optimizer has made, sorted (TF1's
        ``Optimizer.get_slot_names``): ``[]`` before its first
        ``minimize``/``apply_gradients``, then e.g. Adam's ``["m", "v"]``."""
        return sorted({s for slots in self._slots.values() for s in slots})

    def variables(self):
        """The Variables that hold this optimizer's state in the default graph
        (its slot variables and step counter), sorted by name, as TF1's
        ``Optimizer.variables``: what to pass to ``variables_initializer``
        to reset the optimizer, or to a ``Saver`` to keep it."""
        g = get_default_graph()
        out = [v for slots in self._slots.values() for v in slots.values() if v.graph is g]
        step = self.get_step_counter(g)
        if step is not None:
            out.append(step)
        return sorted(out, key=lambda v: v.name)

    def get_step_counter(self, graph=None):
        """The integer scalar Variable counting this optimizer's updates in
        ``graph`` (default: the default graph), or None: an optimizer whose
        rule needs no step count has none (all but Adam, whose bias
        correction reads it)."""
        return None

    def set_slots(self, var, slots):
        """Make existing Variables the slot variables of ``var``: for the graph
        importer (:func:`~dynnets.static.export.import_graph_def`,
        :func:`import_meta_graph`) and other code that
        rebuilds an optimizer whose state is already in the graph, so that its
        train ops update those Variables instead of new ones. Training code
        never needs it: ``apply_gradients`` makes the slots it needs (dynnets'
        own; TF1 has no public equivalent).

        Parameters
        ----------
        var : Variable
            a variable this optimizer has no slots for yet
        slots : dict
            ``{name: Variable}`` with exactly this optimizer's slot names
            (Adam: ``m`` and ``v``), each of ``var``'s graph, shape and dtype
            (the update kernels write a slot with its variable's layout)

        Raises
        ------
        ValueError
            naming the slot and what does not match
        """
        who = f"{self.name}.set_slots"
        if not isinstance(var, Variable):
            raise ValueError(f"{who}: var must be a Variable, got {type(var).__name__}")
        if var in self._slots:
            raise ValueError(f"{who}: '{var.name}' already has slot variables")
        if not isinstance(slots, dict) or set(slots) != set(self._slot_names):
            got = sorted(slots) if isinstance(slots, dict) else type(slots).__name__
            raise ValueError(f"{who}: the slots of '{var.name}' must be named {list(self._slot_names)}, got {got}")
        for s, sv in slots.items():
            if not isinstance(sv, Variable) or sv.graph is not var.graph:
                raise ValueError(f"{who}: slot {s!r} of '{var.name}' must be a Variable of its graph, got {sv!r:.60}")
            if tuple(sv.shape) != tuple(var.shape) or sv.dtype != var.dtype:
                raise ValueError(f"{who}: slot {s!r} '{sv.name}' {fmt_shape(sv.shape)} {sv.dtype} does not match its "
                                 f"variable '{var.name}' {fmt_shape(var.shape)} {var.dtype}")
        self._slots[var] = {s: slots[s] for s in self._slot_names}

    def set_step_counter(self, var):
        """Make Variable ``var`` this optimizer's step counter in its graph (for
        the graph importer, as :meth:`set_slots`); optimizers without a step
        counter (:meth:`get_step_counter` is None: all but Adam) raise
        ValueError."""
        got = f"'{var.name}'" if isinstance(var, Value) else type(var).__name__
        raise ValueError(f"{self.name}.set_step_counter: {type(self).__name__} keeps no step counter, got {got}")

    def _apply(self, S, grads, vars, lr):
        raise NotImplementedError

    @staticmethod
    def _lr_in(gen, lr, dt):
        """The learning rate in dtype ``dt``: a fed one cast, a Python float as a literal."""
        return gen.lit(lr, dt) if type(lr) is float else f"{gen.dtname(dt)}({lr})"


class GradientDescentOptimizer(Optimizer):
    """``w -= learning_rate * (g + weight_decay * w)``; row-sparse gradients
    update only their rows when ``weight_decay`` is 0."""

    _rule = SGD_RULE

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent", *, weight_decay=0.0):
        super().__init__(learning_rate, weight_decay, name)

    def _native_scalars(self, gen, lr, vars):
        return lambda dt: {"lr": self._lr_in(gen, lr, dt)}

    def _apply(self, S, grads, vars, lr):
        wd = self.weight_decay
        for v, g in zip(vars, grads):
            sgd_update(S[v.index], g, lr, wd)


class AdagradOptimizer(Optimizer):
    """Adagrad: ``acc += g*g; w -= lr * g / (sqrt(acc) + epsilon)`` with
    ``g += weight_decay * w``. Defaults are TF1's."""

    _slot_names = ("accumulator",)
    _rule = ADAGRAD_RULE

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad", *,
                 epsilon=0.0, weight_decay=0.0):
        super().__init__(learning_rate, weight_decay, name)
        if not initial_accumulator_value >= 0 or not epsilon >= 0:
            raise ValueError(f"{name}: initial_accumulator_value and epsilon must be non-negative")
        if initial_accumulator_value == 0 and epsilon == 0:
            raise ValueError(f"{name}: with initial_accumulator_value=0 epsilon must be > 0 (0/0 otherwise)")
        self.initial_accumulator_value = float(initial_accumulator_value)
        self.epsilon = float(epsilon)

    def _slot_init(self, var, slot):
        return np.full(var.initial_value.shape, self.initial_accumulator_value, var.initial_value.dtype)

    def _native_scalars(self, gen, lr, vars):
        return lambda dt: {"clr": self._lr_in(gen, lr, dt), "eps": gen.lit(self.epsilon, dt)}

    def _apply(self, S, grads, vars, lr):
        wd = self.weight_decay
        eps = self.epsilon
        for v, g in zip(vars, grads):
            adagrad_update(S[v.index], S[self._slots[v]["accumulator"].index], g, lr, eps, wd)


class AdamOptimizer(Optimizer):
    """Adam as TF1's ``tf.train.AdamOptimizer`` computes it:
    ``lr_t = learning_rate * sqrt(1 - beta2^t) / (1 - beta1^t)``;
    ``w -= lr_t * m / (sqrt(v) + epsilon)`` (epsilon "hat", added before the
    bias correction; PyTorch adds it after: see the module docstring).

    ``lazy=True`` applies row-sparse gradients to their rows only (moments of
    other rows are not decayed), with the same rule (TF1's
    ``tf.contrib.opt.LazyAdamOptimizer``); otherwise they are densified, which
    is what TF1's AdamOptimizer computes.

    ``torch_epsilon=True`` (keyword-only, dynnets' own) adds epsilon after
    the bias correction instead, ``w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t)
    + epsilon)``, as ``torch.optim.Adam`` and eager ``dynnets.optim.Adam`` (whose
    ``lazy=True`` rows keep SparseAdam's epsilon hat): the static models of
    :mod:`dynnets.models` use it to take the eager models' steps.
    """

    _slot_names = ("m", "v")
    _rule = ADAM_RULE

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False, name="Adam", *,
                 weight_decay=0.0, lazy=False, torch_epsilon=False):
        super().__init__(learning_rate, weight_decay, name)
        if not (0 <= beta1 < 1 and 0 <= beta2 < 1) or not epsilon >= 0:
            raise ValueError(f"{name}: need 0 <= beta1, beta2 < 1 and epsilon >= 0")
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.epsilon = float(epsilon)
        self.lazy = bool(lazy)
        self.torch_epsilon = bool(torch_epsilon)
        self._step = {}

    def get_step_counter(self, graph=None):
        """The int64 scalar Variable counting this optimizer's updates in
        ``graph`` (default: the default graph): the ``t`` of its bias
        correction, made by its first ``apply_gradients`` there (None before)."""
        return self._step.get(graph if graph is not None else get_default_graph())

    def set_step_counter(self, var):
        """Make Variable ``var`` (an integer scalar) this optimizer's step counter
        in ``var``'s graph: for the graph importer, as :meth:`Optimizer.set_slots`.

        Raises
        ------
        ValueError
            ``var`` not an integer scalar Variable, or the graph has a counter already
        """
        who = f"{self.name}.set_step_counter"
        if not isinstance(var, Variable) or tuple(var.shape) != () or var.dtype.kind not in "iu":
            got = f"'{var.name}' {fmt_shape(var.shape)} {var.dtype}" if isinstance(var, Value) else type(var).__name__
            raise ValueError(f"{who}: the step counter must be an integer scalar Variable, got {got}")
        if var.graph in self._step:
            raise ValueError(f"{who}: the graph of '{var.name}' has a step counter already, "
                             f"'{self._step[var.graph].name}'")
        self._step[var.graph] = var

    def _extra_slots(self, graph):
        st = self._step.get(graph)
        if st is None:
            st = Variable(np.zeros((), np.int64), name=f"{self.name}/step", trainable=False, graph=graph)
            self._step[graph] = st
        return (st,)

    def _native_scalars(self, gen, lr, vars):
        # the step counter and _apply's step_size and sqrt_bc2, computed in the kernel in float64 as
        # _apply's Python floats, once per run
        sname = gen.storage(self._step[vars[0].graph])[0]
        gen.emit(f"{sname}[()] += 1")
        t = gen.tmp()
        gen.emit(f"{t} = float({sname}[()])")
        lr_e = repr(lr) if type(lr) is float else lr
        step_size, sqrt_bc2 = gen.tmp(), gen.tmp()
        if self.torch_epsilon:
            gen.emit(f"{step_size} = {lr_e} / (1.0 - math.pow({self.beta1!r}, {t}))")
            gen.emit(f"{sqrt_bc2} = math.sqrt(1.0 - math.pow({self.beta2!r}, {t}))")
        else:
            gen.emit(f"{step_size} = {lr_e} * math.sqrt(1.0 - math.pow({self.beta2!r}, {t})) "
                     f"/ (1.0 - math.pow({self.beta1!r}, {t}))")
            gen.emit(f"{sqrt_bc2} = 1.0")

        def scalars(dt):
            D = gen.dtname(dt)
            return {"b1": gen.lit(self.beta1, dt), "b2": gen.lit(self.beta2, dt), "c1": gen.lit(1.0 - self.beta1, dt),
                    "c2": gen.lit(1.0 - self.beta2, dt), "step_size": f"{D}({step_size})",
                    "sqrt_bc2": f"{D}({sqrt_bc2})", "eps": gen.lit(self.epsilon, dt)}
        return scalars

    def _apply(self, S, grads, vars, lr):
        b1, b2, eps, wd = self.beta1, self.beta2, self.epsilon, self.weight_decay
        step = S[self._step[vars[0].graph].index]
        step += 1
        t = int(step)
        # TF1's lr_t, with the bias correction of v folded in: adam_update's rule
        # ``w -= step_size * m / (sqrt(v) / sqrt_bc2 + eps)`` with sqrt_bc2 = 1 is then TF1's
        # ``w -= lr_t * m / (sqrt(v) + eps)`` exactly (a division by 1.0 is exact); its lazy rows
        # take eps / sqrt_bc2 = eps, the same rule
        if self.torch_epsilon:
            step_size, sqrt_bc2 = lr / (1.0 - b1 ** t), math.sqrt(1.0 - b2 ** t)
        else:
            step_size, sqrt_bc2 = lr * math.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t), 1.0
        for v, g in zip(vars, grads):
            sl = self._slots[v]
            adam_update(S[v.index], S[sl["m"].index], S[sl["v"].index], g, b1, b2, step_size, sqrt_bc2, eps, wd,
                        self.lazy)



def _rows(g):
    """A row-sparse gradient's unique rows and their summed values."""
    c = g.coalesce()
    return c.rows, c.values


class MomentumOptimizer(Optimizer):
    """TF1's momentum: ``accum = momentum * accum + g``, then
    ``w -= lr * accum``, or with ``use_nesterov``
    ``w -= lr * g + lr * momentum * accum`` (the accumulator starts at zero).

    PyTorch's ``SGD(momentum=)`` is the same without dampening; a row-sparse
    gradient updates only its rows' accumulator and values, as TF1's
    ``sparse_apply_momentum`` (rows not looked up keep still, where the dense
    rule would carry them on with their momentum).
    """

    _slot_names = ("momentum",)

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False):
        super().__init__(learning_rate, 0.0, name)
        if isinstance(momentum, Value) or not momentum >= 0:
            raise ValueError(f"{name}: momentum must be a non-negative number, got {momentum!r}")
        self.momentum = float(momentum)
        self.use_nesterov = bool(use_nesterov)

    def _apply(self, S, grads, vars, lr):
        m, nesterov = self.momentum, self.use_nesterov
        for v, g in zip(vars, grads):
            w, acc = S[v.index], S[self._slots[v]["momentum"].index]
            if type(g) is RowSparse:
                rows, vals = _rows(g)
                wb, ab = w[rows], acc[rows]
                _momentum_block(wb, ab, vals, lr, m, nesterov)
                w[rows], acc[rows] = wb, ab
            else:
                _momentum_block(w, acc, g, lr, m, nesterov)


def _momentum_block(w, acc, g, lr, m, nesterov):
    acc *= m
    acc += g
    if nesterov:
        w -= g * lr + acc * (m * lr)
    else:
        w -= acc * lr


class RMSPropOptimizer(Optimizer):
    """TF1's RMSProp, exactly:
    ``ms = decay * ms + (1 - decay) * g^2``;
    ``mom = momentum * mom + lr * g / sqrt(ms + epsilon)``; ``w -= mom``.
    With ``centered``, also ``mg = decay * mg + (1 - decay) * g`` and the
    denominator is ``sqrt(ms - mg^2 + epsilon)``. ``ms`` starts at one (TF1's
    choice), ``mom`` and ``mg`` at zero.

    This is not PyTorch's ``RMSprop`` (which starts ``ms`` at zero, adds
    epsilon outside the square root and applies the learning rate after the
    momentum). A row-sparse gradient updates only its rows, as TF1's
    ``sparse_apply_rms_prop``.
    """

    _slot_names = ("rms", "momentum")

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False, centered=False,
                 name="RMSProp"):
        super().__init__(learning_rate, 0.0, name)
        for arg, v in (("decay", decay), ("momentum", momentum), ("epsilon", epsilon)):
            if isinstance(v, Value) or not v >= 0:
                raise ValueError(f"{name}: {arg} must be a non-negative number, got {v!r}")
        self.decay = float(decay)
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.centered = bool(centered)
        if self.centered:
            self._slot_names = ("rms", "momentum", "mg")

    def _slot_init(self, var, slot):
        init = var.initial_value
        return (np.ones if slot == "rms" else np.zeros)(init.shape, init.dtype)

    def _apply(self, S, grads, vars, lr):
        for v, g in zip(vars, grads):
            sl = self._slots[v]
            arrays = [S[v.index], S[sl["rms"].index], S[sl["momentum"].index]]
            if self.centered:
                arrays.append(S[sl["mg"].index])
            if type(g) is RowSparse:
                rows, vals = _rows(g)
                blocks = [a[rows] for a in arrays]
                self._block(*blocks, g=vals, lr=lr)
                for a, b in zip(arrays, blocks):
                    a[rows] = b
            else:
                self._block(*arrays, g=g, lr=lr)

    def _block(self, w, ms, mom, mg=None, *, g, lr):
        d = self.decay
        ms *= d
        ms += (1.0 - d) * (g * g)
        if mg is not None:
            mg *= d
            mg += (1.0 - d) * g
            denom = ms - mg * mg
            denom += self.epsilon
        else:
            denom = ms + self.epsilon
        mom *= self.momentum
        mom += lr * g / np.sqrt(denom)
        w -= mom


# --------------------------------------------------------------------------
# the global step and learning-rate schedules
# --------------------------------------------------------------------------

GLOBAL_STEP = "global_step"     # the collection (and variable name) of the global step, as TF1's GraphKeys


def _check_step(op, step):
    if not isinstance(step, Variable) or step.dtype.kind not in "iu" or tuple(step.shape) != ():
        raise TypeError(f"{op}: global_step must be an integer scalar Variable (tf.train.get_or_create_global_step()), "
                        f"got {step!r}")


def get_global_step(graph=None):
    """The graph's global step Variable, or ``None`` (``tf.train.get_global_step``)."""
    g = graph if graph is not None else get_default_graph()
    found = g.get_collection(GLOBAL_STEP)
    if len(found) > 1:
        raise TypeError(f"get_global_step: the graph has {len(found)} global steps in its 'global_step' collection")
    return found[0] if found else None


def create_global_step(graph=None):
    """A new int64 scalar Variable ``global_step`` at 0, not trainable, in the
    graph's ``global_step`` collection (``tf.train.create_global_step``)."""
    g = graph if graph is not None else get_default_graph()
    if get_global_step(g) is not None:
        raise ValueError("create_global_step: the graph already has a global step")
    with g.as_default():
        step = Variable(np.zeros((), np.int64), name=GLOBAL_STEP, trainable=False, graph=g)
    g.add_to_collection(GLOBAL_STEP, step)
    return step


def get_or_create_global_step(graph=None):
    """The graph's global step, created at 0 the first time (``tf.train.get_or_create_global_step``)."""
    step = get_global_step(graph)
    return step if step is not None else create_global_step(graph)


def global_step(sess, global_step_tensor):
    """The global step's value in ``sess``, as a Python int (``tf.train.global_step``)."""
    return int(sess.run(global_step_tensor))


def _float_step(op, step, dtype):
    if step is None:
        raise ValueError(f"{op}: global_step is required")
    if isinstance(step, Value):
        if step.dtype.kind not in "iuf" or tuple(step.shape) != ():
            raise TypeError(f"{op}: global_step must be a numeric scalar, got '{step.name}' with shape "
                            f"{fmt_shape(step.shape)} and dtype {step.dtype}")
        return ops.astype(step, dtype)
    return np.asarray(step, dtype=dtype)


def _floor(x, dtype):
    t = ops.astype(ops.astype(x, np.int64), dtype)          # truncates toward zero
    return ops.sub(t, ops.astype(ops.less(x, t), dtype))     # one less where x was negative and not whole


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """``learning_rate * decay_rate ** (global_step / decay_steps)``, the
    exponent floored with ``staircase`` (``tf.train.exponential_decay``):
    a scalar Value of ``learning_rate``'s dtype (float32 for a Python
    number), recomputed at every run from the step's value then."""
    lr = learning_rate if isinstance(learning_rate, Value) else np.asarray(
        learning_rate, dtype=np.float32 if type(learning_rate) in (int, float) else None)
    dt = lr.dtype
    if dt.kind != "f":
        raise TypeError(f"exponential_decay: learning_rate must be a float, got dtype {dt}")
    p = ops.div(_float_step("exponential_decay", global_step, dt),
                ops.astype(decay_steps, dt) if isinstance(decay_steps, Value) else np.asarray(decay_steps, dt))
    if staircase:
        p = _floor(p, dt)
    rate = ops.astype(decay_rate, dt) if isinstance(decay_rate, Value) else np.asarray(decay_rate, dt)
    out = ops.mul(lr, ops.pow(rate, p))
    if not isinstance(out, Value):
        raise TypeError("exponential_decay: global_step must be a graph value (a Variable), so that the rate "
                        "follows it")
    return out if name is None else _renamed(out, name)


def piecewise_constant(x, boundaries, values, name=None):
    """``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while
    ``boundaries[i-1] < x <= boundaries[i]``, ``values[-1]`` after the last
    boundary (``tf.train.piecewise_constant``); ``x`` is usually the global step."""
    boundaries, values = list(boundaries), list(values)
    if len(values) != len(boundaries) + 1:
        raise ValueError(f"piecewise_constant: the length of values ({len(values)}) must be one more than the length "
                         f"of boundaries ({len(boundaries)})")
    if not isinstance(x, Value):
        raise TypeError(f"piecewise_constant: x must be a graph value (the global step), got {type(x).__name__}")
    if x.dtype.kind in "iu" and any(isinstance(b, float) and not float(b).is_integer() for b in boundaries):
        raise TypeError(f"piecewise_constant: boundaries {boundaries} must be integers for x '{x.name}' of dtype "
                        f"{x.dtype}")
    vals = [v if isinstance(v, Value) else np.asarray(v, dtype=np.float32 if type(v) is float else None)
            for v in values]
    dts = {v.dtype for v in vals}
    if len(dts) != 1:
        raise TypeError(f"piecewise_constant: values must have one dtype, got {sorted(str(d) for d in dts)}")
    out = vals[-1]
    for b, v in zip(reversed(boundaries), reversed(vals[:-1])):
        out = ops.where(ops.less_equal(x, np.asarray(b, dtype=x.dtype)), v, out)
    return out if name is None else _renamed(out, name)


def _renamed(v, name):
    return named(v, name)


# what a graph file stores of each optimizer: its constructor's arguments
register_optimizer(GradientDescentOptimizer, ("learning_rate", "weight_decay", "name"))
register_optimizer(AdagradOptimizer, ("learning_rate", "initial_accumulator_value", "epsilon", "weight_decay", "name"))
register_optimizer(AdamOptimizer, ("learning_rate", "beta1", "beta2", "epsilon", "weight_decay", "lazy", "torch_epsilon",
                                   "name"))
register_optimizer(MomentumOptimizer, ("learning_rate", "momentum", "use_nesterov", "name"))
register_optimizer(RMSPropOptimizer, ("learning_rate", "decay", "momentum", "epsilon", "centered", "name"))
