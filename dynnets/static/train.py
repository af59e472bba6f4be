"""Optimizers for static graphs, with TF1's names (``tf.train.*``).

``opt.minimize(loss)`` builds the gradient subgraph (:func:`gradients`) and
one effectful *apply* node that updates every Variable in place when the
returned train op runs. The update rules are the eager optimizers' own
functions (:func:`dynnets.nn.optim.sgd_update`, ``adagrad_update``,
``adam_update``: PyTorch's maths, one copy), so a static and an eager model
trained with the same settings take the same steps:

* ``GradientDescentOptimizer``: ``w -= lr * (g + weight_decay * w)``;
* ``AdagradOptimizer``: ``acc += g*g; w -= lr * g / (sqrt(acc) + epsilon)``
  (TF1's defaults ``initial_accumulator_value=0.1``, ``epsilon=0``; pass
  ``initial_accumulator_value=0, epsilon=1e-10`` for PyTorch's);
* ``AdamOptimizer``: bias-corrected moments,
  ``w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + epsilon)`` (epsilon after
  the bias correction, as PyTorch; TF1 adds its "epsilon hat" before).

Row-sparse gradients (embedding lookups) are applied to the looked-up rows
only, where the maths allows (no weight decay; Adam with ``lazy=True``), as in
the eager optimizers; otherwise they are densified first.

Slot variables (accumulators, moments, Adam's step) are Variables of the
graph created by ``minimize``/``apply_gradients``, so, as in TF1, create the
train op before ``global_variables_initializer()``.

The rest of ``tf.train`` lives beside: ``Saver``, ``latest_checkpoint``,
``get_checkpoint_state``, ``import_meta_graph`` (:mod:`.saver`),
``write_graph``, ``export_meta_graph`` (:mod:`.export`).
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd.primitives import Aval, ShapeError, fmt_shape
from ..nn.optim import adagrad_update, adam_update, sgd_update
from .backward import sparse_gradients
from .export import export_meta_graph, register_optimizer, write_graph
from .graph import GraphError, Operation, StaticPrimitive, Value, Variable, trainable_variables
from .saver import Saver, checkpoint_exists, get_checkpoint_state, import_meta_graph, latest_checkpoint

__all__ = ["Optimizer", "GradientDescentOptimizer", "AdagradOptimizer", "AdamOptimizer", "Saver", "latest_checkpoint",
           "get_checkpoint_state", "checkpoint_exists", "write_graph", "export_meta_graph", "import_meta_graph"]


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


apply_p = StaticPrimitive("apply_gradients", _apply_impl, _apply_shape, effect=True)


class Optimizer:
    """Base class: ``compute_gradients``, ``apply_gradients``, ``minimize``.

    ``learning_rate`` may be a Python number or a scalar Value (e.g. a
    placeholder fed each step).
    """

    _slot_names: tuple = ()

    def __init__(self, learning_rate, weight_decay=0.0, name="Optimizer"):
        if not isinstance(learning_rate, Value) and not learning_rate >= 0:
            raise ValueError(f"{name}: learning_rate must be non-negative, got {learning_rate}")
        if not weight_decay >= 0:
            raise ValueError(f"{name}: weight_decay must be non-negative, got {weight_decay}")
        self.learning_rate = learning_rate
        self.weight_decay = float(weight_decay)
        self.name = name
        self._slots = {}

    def compute_gradients(self, loss, var_list=None):
        """``[(gradient, variable)]``; a gradient is ``None`` where the loss does
        not depend on the variable, and may be row-sparse (``grad.sparse``)."""
        if not isinstance(loss, Value):
            raise TypeError(f"{self.name}.compute_gradients: loss must be a graph value, got {loss!r}")
        var_list = trainable_variables(loss.graph) if var_list is None else list(var_list)
        if not var_list:
            raise ValueError(f"{self.name}.compute_gradients: no variables to optimise")
        for v in var_list:
            if not isinstance(v, Variable):
                raise TypeError(f"{self.name}.compute_gradients: {v!r} is not a Variable")
        if loss.shape not in ((), (1,)):
            raise ValueError(f"{self.name}.compute_gradients: loss must be a scalar, got shape {fmt_shape(loss.shape)}")
        return list(zip(sparse_gradients(loss, var_list), var_list))

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

    def apply_gradients(self, grads_and_vars, name=None):
        """The train op: one node updating every variable in place."""
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
        return graph._append(apply_p, tuple(ins), attrs, out, name=name or self.name, cls=Operation)

    def _extra_slots(self, graph):
        return ()

    def minimize(self, loss, var_list=None, name=None):
        """``apply_gradients(compute_gradients(loss, var_list))``."""
        return self.apply_gradients(self.compute_gradients(loss, var_list), name=name)

    def get_slot(self, var, name):
        return self._slots[var][name]

    def _apply(self, S, grads, vars, lr):
        raise NotImplementedError


class GradientDescentOptimizer(Optimizer):
    """``w -= learning_rate * (g + weight_decay * w)``; row-sparse gradients
    update only their rows when ``weight_decay`` is 0."""

    def __init__(self, learning_rate, weight_decay=0.0, name="GradientDescent"):
        super().__init__(learning_rate, weight_decay, name)

    def _apply(self, S, grads, vars, lr):
        wd = self.weight_decay
        for v, g in zip(vars, grads):
            sgd_update(S[v.index], g, lr, wd)


class AdagradOptimizer(Optimizer):
    """Adagrad: ``acc += g*g; w -= lr * g / (sqrt(acc) + epsilon)`` with
    ``g += weight_decay * w``. Defaults are TF1's."""

    _slot_names = ("accumulator",)

    def __init__(self, learning_rate, initial_accumulator_value=0.1, epsilon=0.0, weight_decay=0.0,
                 name="Adagrad"):
        super().__init__(learning_rate, weight_decay, name)
        if not initial_accumulator_value >= 0 or not epsilon >= 0:
            raise ValueError(f"{name}: initial_accumulator_value and epsilon must be non-negative")
        if initial_accumulator_value == 0 and epsilon == 0:
            raise ValueError(f"{name}: with initial_accumulator_value=0 epsilon must be > 0 (0/0 otherwise)")
        self.initial_accumulator_value = float(initial_accumulator_value)
        self.epsilon = float(epsilon)

    def _slot_init(self, var, slot):
        return np.full(var.initial_value.shape, self.initial_accumulator_value, var.initial_value.dtype)

    def _apply(self, S, grads, vars, lr):
        wd = self.weight_decay
        eps = self.epsilon
        for v, g in zip(vars, grads):
            adagrad_update(S[v.index], S[self._slots[v]["accumulator"].index], g, lr, eps, wd)


class AdamOptimizer(Optimizer):
    """Adam with bias correction (PyTorch's placement of epsilon).

    ``lazy=True`` applies row-sparse gradients to their rows only (moments of
    other rows are not decayed), as ``dynnets.nn.optim.Adam(lazy=True)``;
    otherwise they are densified, which is what TF1's AdamOptimizer computes.
    """

    _slot_names = ("m", "v")

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, weight_decay=0.0, lazy=False,
                 name="Adam"):
        super().__init__(learning_rate, weight_decay, name)
        if not (0 <= beta1 < 1 and 0 <= beta2 < 1) or not epsilon >= 0:
            raise ValueError(f"{name}: need 0 <= beta1, beta2 < 1 and epsilon >= 0")
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.epsilon = float(epsilon)
        self.lazy = bool(lazy)
        self._step = {}

    def _extra_slots(self, graph):
        st = self._step.get(graph)
        if st is None:
            st = Variable(np.zeros((), np.int64), name=f"{self.name}/step", trainable=False, graph=graph)
            self._step[graph] = st
        return (st,)

    def _apply(self, S, grads, vars, lr):
        b1, b2, eps, wd = self.beta1, self.beta2, self.epsilon, self.weight_decay
        step = S[self._step[vars[0].graph].index]
        step += 1
        t = int(step)
        step_size = lr / (1.0 - b1 ** t)
        sqrt_bc2 = math.sqrt(1.0 - b2 ** t)
        for v, g in zip(vars, grads):
            sl = self._slots[v]
            adam_update(S[v.index], S[sl["m"].index], S[sl["v"].index], g, b1, b2, step_size, sqrt_bc2, eps, wd,
                        self.lazy)



# what a graph file stores of each optimizer: its constructor's arguments
register_optimizer(GradientDescentOptimizer, ("learning_rate", "weight_decay", "name"))
register_optimizer(AdagradOptimizer, ("learning_rate", "initial_accumulator_value", "epsilon", "weight_decay", "name"))
register_optimizer(AdamOptimizer, ("learning_rate", "beta1", "beta2", "epsilon", "weight_decay", "lazy", "name"))
