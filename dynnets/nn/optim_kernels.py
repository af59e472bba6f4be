"""Optimizer update rules, defined once, and the Numba kernels made from them.

An :class:`UpdateRule` is a dense optimizer update written element by
element: the state arrays it updates beside the parameter, the per-step
scalars it reads, and its steps, each a scalar formula assigned in place to
the parameter ``p`` or to a state array (a later step reads the value an
earlier one wrote). Three readers share that one definition:

* the eager and static optimizers' fused paths (:mod:`dynnets.nn.optim`,
  :mod:`dynnets.static.train`): :func:`rule_kernel` generates one Numba
  loop per rule, dtype and layout (dense flat arrays, or the rows of a 2-D
  parameter for a row-sparse gradient);
* the native plan tier (:mod:`dynnets.static.native`), which writes the
  same formulas into a whole plan's kernel (:func:`rule_steps`);
* the numpy twins, the block rules of :mod:`dynnets.nn.optim`
  (``_adagrad_block``, ``_adam_block``), which the tests compare with the
  kernels (``tests/nn/test_optim_kernels.py``, also under
  ``NUMBA_DISABLE_JIT=1``).

A formula names the parameter ``{p}``, the gradient ``{g}``, the state
arrays and scalars by their names, and ``{D}`` the dtype's constructor
(``np.float32``: ``math.sqrt`` returns a float64 that is cast back, as numpy's
float32 ``sqrt`` rounds). The operations are numpy's block rules' in their
order and precision (a Python float scalar cast to the data's dtype, as
numpy casts a weak scalar), so a kernel matches its twin to within one unit
in the last place (tested).

Kernel conventions (those of :mod:`dynnets.autograd.kernels_tree`): arrays
are C-contiguous, of one float dtype, and not validated (the optimizer checks
them first); results are written in place; scalars arrive as a small array
of the data's dtype (``scal``, in the rule's ``scalars`` order). The
generated source is cached on disk (:func:`dynnets.numba_cache.generated_kernel`),
so a later process loads the machine code.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["UpdateRule", "SGD_RULE", "ADAGRAD_RULE", "ADAM_RULE", "rule_steps", "rule_source", "rule_kernel",
           "adagrad_dense", "adagrad_rows", "adam_dense"]


class UpdateRule(NamedTuple):
    """A dense update rule, element by element (see the module docstring).

    ``name``: a tag (file names of generated kernels); ``slots``: the state
    arrays, in the order kernels take them after the parameter; ``scalars``:
    the per-step scalars, in ``scal`` order; ``steps``: ``(target, formula)``
    pairs run in order, ``target`` ``"p"`` or a slot name."""
    name: str
    slots: tuple
    scalars: tuple
    steps: tuple


SGD_RULE = UpdateRule("sgd", (), ("lr",), (("p", "({p} - {lr} * {g})"),))

ADAGRAD_RULE = UpdateRule(
    "adagrad", ("acc",), ("clr", "eps"),
    (("acc", "({acc} + {g} * {g})"),
     ("p", "({p} - ({g} / ({D}(math.sqrt({acc})) + {eps})) * {clr})")))

# m = m*b1 + (1-b1)*g; v = v*b2 + (g*g)*(1-b2); p -= (m / (sqrt(v) / sqrt_bc2 + eps)) * step_size,
# with c1 = 1 - b1 and c2 = 1 - b2 given as scalars (numpy computes them in float64 first)
ADAM_RULE = UpdateRule(
    "adam", ("m", "v"), ("b1", "b2", "c1", "c2", "step_size", "sqrt_bc2", "eps"),
    (("m", "({m} * {b1} + {c1} * {g})"),
     ("v", "({v} * {b2} + ({g} * {g}) * {c2})"),
     ("p", "({p} - ({m} / ({D}(math.sqrt({v})) / {sqrt_bc2} + {eps})) * {step_size})")))


def rule_steps(rule, D, element, g, scalars):
    """The rule's steps as ``(target, expression)`` pairs: ``element(name)``
    is the expression of the element of ``"p"`` or a slot, ``g`` the
    gradient's element, ``scalars`` the scalars' expressions by name, ``D``
    the dtype's constructor name."""
    names = {"D": D, "g": g, "p": element("p"), **{s: element(s) for s in rule.slots}, **scalars}
    return [(target, formula.format(**names)) for target, formula in rule.steps]


_DT_NAMES = {np.dtype(np.float32): "np.float32", np.dtype(np.float64): "np.float64"}


def rule_source(rule, dtype, rows=False):
    """The module source of the kernel of ``rule`` for float ``dtype``:
    ``kernel(p, *slots, g, scal)`` on flat arrays, or with ``rows``
    ``kernel(p, *slots, rows, vals, scal)`` on the listed rows of 2-D arrays
    (unique rows: a repeated one would be updated twice)."""
    D = _DT_NAMES[np.dtype(dtype)]
    arrays = ["p", *rule.slots]
    head = [f"    {s} = scal[{k}]" for k, s in enumerate(rule.scalars)]
    if rows:
        args = ", ".join(arrays + ["rows", "vals", "scal"])
        head += ["    D = p.shape[1]", "    for k in range(rows.shape[0]):", "        r = rows[k]"]
        head += [f"        {a}r = {a}[r]" for a in arrays]
        head += ["        gr = vals[k]", "        for j in range(D):", "            gj = gr[j]"]
        ind, el, gname = "            ", (lambda a: f"{a}r[j]"), "gj"
    else:
        args = ", ".join(arrays + ["g", "scal"])
        head += ["    for i in range(p.shape[0]):", "        gi = g[i]"]
        ind, el, gname = "        ", (lambda a: f"{a}[i]"), "gi"
    body = [f"{ind}{el(t)} = {e}" for t, e in rule_steps(rule, D, el, gname, {s: s for s in rule.scalars})]
    return ("import math\nimport numpy as np\nfrom numba import njit\n\n\n"
            "@njit(cache=True, error_model=\"numpy\")\n"
            f"def kernel({args}):\n" + "\n".join(head + body) + "\n")


_KERNELS: dict = {}


def rule_kernel(rule, dtype, rows=False):
    """The compiled kernel of :func:`rule_source` (one per rule, dtype and
    layout in a process; its machine code cached on disk)."""
    key = (rule, np.dtype(dtype), rows)
    k = _KERNELS.get(key)
    if k is None:
        from ..numba_cache import generated_kernel
        src = rule_source(rule, dtype, rows)
        k = generated_kernel("optim", f"{rule.name}_{np.dtype(dtype).name}{'_rows' if rows else ''}", src)
        if k is None:
            ns = {}
            exec(compile(src.replace("cache=True", "cache=False"), f"<{rule.name} update>", "exec"), ns)
            k = ns["kernel"]
        _KERNELS[key] = k
    return k


def adagrad_dense(p, acc, g, scal):
    """Dense Adagrad step in place: ``acc += g*g``;
    ``p -= clr * (g / (sqrt(acc) + eps))``.

    Parameters
    ----------
    p, acc, g : (n,) float
        Parameter and accumulator (updated in place) and gradient, flattened.
    scal : (2,) float
        ``(clr, eps)`` in the dtype of ``p``.
    """
    rule_kernel(ADAGRAD_RULE, p.dtype)(p, acc, g, scal)


def adagrad_rows(p, acc, rows, vals, scal):
    """Row-sparse Adagrad step in place on the listed rows only.

    Parameters
    ----------
    p, acc : (V, D) float
        Parameter and accumulator, updated in place on ``rows``.
    rows : (k,) int64
        Unique row indices (a coalesced gradient).
    vals : (k, D) float
        Gradient rows.
    scal : (2,) float
        ``(clr, eps)`` in the dtype of ``p``.
    """
    rule_kernel(ADAGRAD_RULE, p.dtype, rows=True)(p, acc, rows, vals, scal)


def adam_dense(p, m, v, g, scal):
    """Dense Adam step in place (:data:`ADAM_RULE`).

    Parameters
    ----------
    p, m, v, g : (n,) float
        Parameter and moments (updated in place) and gradient, flattened.
    scal : (7,) float
        ``(b1, b2, 1 - b1, 1 - b2, step_size, sqrt_bc2, eps)`` in the dtype of ``p``.
    """
    rule_kernel(ADAM_RULE, p.dtype)(p, m, v, g, scal)
