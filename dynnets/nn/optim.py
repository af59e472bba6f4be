"""Optimizers with PyTorch's update rules, param groups and state_dict.

Updates are written into each parameter's array (``p.numpy()``) in place,
so every holder of the array (a tied weight, a static graph's feed,
``p.data``) sees the new values, and gradients are only read, never modified
(another tensor may hold the same array).

State is kept per parameter object, as torch's: after ``p.data = new`` of
another shape, the next step raises naming the state that no longer fits
(torch raises too, at the same parameter: those before it are updated), and
a gradient of the old shape raises likewise (torch broadcasts it where it
can). A new dtype keeps working: the state keeps its own.

Row-sparse gradients
--------------------
An :class:`~dynnets.nn.Embedding` produces a
:class:`~dynnets.autograd.RowSparse` gradient (``p.raw_grad``) that lists only
the rows a batch looked up, possibly repeated. Where the maths allows, a step
then reads and writes only those rows (after summing repeats), so a 20,000 x
300 vocabulary costs no more per step than the rows used:

* ``SGD`` without momentum and without weight decay: ``p[rows] -= lr * g``;
* ``Adagrad`` without weight decay: the accumulator only changes on rows
  whose gradient is nonzero, exactly as PyTorch's sparse Adagrad;
* ``Adam(lazy=True)``: only the touched rows' moments and parameters are
  updated, with PyTorch's ``SparseAdam`` maths (eps added before the bias
  correction; the step counter, and so the bias correction, is per
  parameter). Rows not in the batch keep their moments instead of decaying
  them, which is what makes this differ from dense Adam.

Otherwise (momentum, weight decay, non-lazy Adam, AdamW, RMSprop) the update
touches every row by definition, and the gradient is densified first. The
results of the SGD and Adagrad sparse paths are identical to densifying and
taking the dense step.

Learning rates
--------------
Every step reads ``param_groups[i]["lr"]`` (and the other hyperparameters)
anew, so a change made between steps, by hand or by a scheduler of
:mod:`dynnets.optim.lr_scheduler`, applies to the next step.

Update rules
------------
:func:`sgd_update`, :func:`adagrad_update`, :func:`adam_update` and
:func:`rmsprop_update` update one parameter array in place from a dense or
row-sparse gradient. They are the
only copy of the arithmetic: these optimizers and the static graph's
(:mod:`dynnets.static.train`) both call them, so the two modes take the same
steps, and any array shape works, 0-d included.

Kernels
-------
Adagrad's dense and row-sparse steps and Adam's dense step run as one Numba
pass each when the arrays are C-contiguous float32 or float64 of one dtype:
kernels generated from the update rules of :mod:`dynnets.nn.optim_kernels`
(``ADAGRAD_RULE``, ``ADAM_RULE``: the one definition of each rule, which the
native plan tier of :mod:`dynnets.static` compiles too). Adagrad's chain of
numpy operations took ~600 us per step for an LSTM classifier's 270k dense
weights, the kernel ~40 us (measured on a shared 2-core machine,
``float32``). The numpy block rules (``_adagrad_block``, ``_adam_block``) are
the kernels' twins and the fallback for other arrays (tested to agree within
one unit in the last place).

State
-----
``state_dict()`` returns ``{"state": {index: {name: array or int}},
"param_groups": [{hyperparameters..., "params": [indices]}]}`` with copies of
the state arrays; it round-trips through :func:`dynnets.save` /
:func:`dynnets.load` (integer keys stay integers; a state dict with the keys
as strings, from older files, loads too).
"""
from __future__ import annotations

import math
import sys

import numpy as np

from ..autograd import RowSparse, Tensor
from . import lr_scheduler
from . import optim_kernels as OK
from .utils import clip_grad_norm_

# `from dynnets.nn.optim.lr_scheduler import StepLR` (torch's spelling) works too
sys.modules.setdefault(__name__ + ".lr_scheduler", lr_scheduler)

__all__ = ["Optimizer", "SGD", "Adagrad", "Adam", "AdamW", "RMSprop", "clip_grad_norm_", "lr_scheduler",
           "sgd_update", "adagrad_update", "adam_update", "rmsprop_update"]

class Optimizer:
    """Base class: parameter groups, state, ``zero_grad``, ``state_dict``.

    Parameters
    ----------
    params : iterable of Tensors, or of dicts
        Either the parameters, or param groups: dicts with a ``"params"``
        entry and any hyperparameters that override the defaults for that
        group (e.g. a separate learning rate for embeddings).
    defaults : dict
        Hyperparameters of groups that do not set them.
    """

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.param_groups = []
        self.state = {}
        if isinstance(params, Tensor):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of Tensors or of dicts, "
                            f"got a single Tensor (wrap it in a list)")
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    # --- groups -----------------------------------------------------------------
    def add_param_group(self, param_group):
        """Add a dict with ``"params"`` and optional hyperparameters."""
        group = param_group
        name = type(self).__name__
        if not isinstance(group, dict):
            raise TypeError(f"{name}: a param group must be a dict, got {type(group).__name__}")
        if "params" not in group:
            raise KeyError(f"{name}: a param group needs a 'params' entry")
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        mine = set()
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: parameter {i} of group {len(self.param_groups)} must be a Tensor, "
                                f"got {type(p).__name__}")
            if p.dtype.kind != "f":
                raise TypeError(f"{name}: parameter {i} of group {len(self.param_groups)} has dtype "
                                f"{p.dtype}; only floating-point tensors can be optimized")
            if id(p) in mine:
                raise ValueError(f"{name}: parameter {i} appears twice in group {len(self.param_groups)}")
            if id(p) in seen:
                raise ValueError(f"{name}: parameter {i} of group {len(self.param_groups)} is already in "
                                 f"another param group")
            mine.add(id(p))
        new = {"params": params}
        for k, v in self.defaults.items():
            new[k] = group[k] if k in group else v
        for k, v in group.items():
            if k not in new:
                new[k] = v
        self._check_group(new)
        self.param_groups.append(new)

    def _check_group(self, group):
        """Validate a group's hyperparameters; subclasses raise ValueError."""

    def _bad(self, what, value, want):
        raise ValueError(f"{type(self).__name__}: {what} must be {want}, got {value!r}")

    # --- gradients ----------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Drop every parameter's gradient (or set it to zeros)."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none or p.raw_grad is None:
                    p.raw_grad = None
                else:
                    p.raw_grad = np.zeros_like(p.numpy())

    def step(self, closure=None):
        """One update of every parameter that has a gradient. ``closure``, if
        given, is called first (with gradients enabled) and its loss returned."""
        loss = None
        if closure is not None:
            from ..autograd.engine import enable_grad
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                d = p.numpy()
                if not d.flags.writeable:
                    raise RuntimeError(
                        f"{type(self).__name__}.step: a parameter of shape {d.shape} is read-only: a pending "
                        f"autobatch op reads it (the update would change its input); run the pending ops first "
                        f"(backward(), .numpy(), or leave the dn.autobatch context)")
        for group in self.param_groups:
            self._step_group(group)
        return loss

    def _misfit(self, p, d, g, st):
        """Raise if gradient ``g`` or an array of ``p``'s state ``st`` (None:
        none yet) does not have the shape of ``p``'s array ``d``: ``p.data``
        was replaced by one of another shape. Called by the steps, with a
        shape comparison in front (the parameters before ``p`` are updated
        already, as in torch's step, which raises at the same point)."""
        name = type(self).__name__
        if g.shape != d.shape:
            raise RuntimeError(
                f"{name}.step: the gradient of a parameter has shape {tuple(g.shape)}, the parameter has shape "
                f"{d.shape} (its data was replaced after backward, p.data = ...): compute the gradient again "
                f"(zero_grad(), then backward())")
        for k, v in (st or {}).items():
            if type(v) is np.ndarray and v.shape != d.shape:
                raise RuntimeError(
                    f"{name}.step: the state {k!r} of a parameter has shape {v.shape}, the parameter now has shape "
                    f"{d.shape} (its data was replaced, p.data = ...); as torch's, the state does not follow: make "
                    f"a new optimizer, or load a state_dict that fits")

    def _step_group(self, group):
        raise NotImplementedError

    # --- state ------------------------------------------------------------------
    def state_dict(self):
        """``{"state": {index: {...}}, "param_groups": [...]}`` with parameters
        replaced by their position (counting across groups) and state arrays
        copied."""
        index = {}
        groups = []
        for g in self.param_groups:
            ids = []
            for p in g["params"]:
                index[id(p)] = len(index)
                ids.append(index[id(p)])
            entry = {k: v for k, v in g.items() if k != "params"}
            entry["params"] = ids
            groups.append(entry)
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                st = self.state.get(p)
                if st:
                    state[index[id(p)]] = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in st.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyperparameters and state saved by :meth:`state_dict` (or
        loaded back by :func:`dynnets.load`). The optimizer must have been
        built over the same parameters in the same group structure."""
        name = type(self).__name__
        if not isinstance(state_dict, dict) or "param_groups" not in state_dict or "state" not in state_dict:
            raise ValueError(f"{name}.load_state_dict: expected a dict with 'state' and 'param_groups', "
                             f"got {type(state_dict).__name__}"
                             + (f" with keys {sorted(state_dict)}" if isinstance(state_dict, dict) else ""))
        saved = list(state_dict["param_groups"])
        if len(saved) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: the state has {len(saved)} param groups, "
                             f"the optimizer has {len(self.param_groups)}")
        params = []
        for i, (sg, g) in enumerate(zip(saved, self.param_groups)):
            if len(sg["params"]) != len(g["params"]):
                raise ValueError(f"{name}.load_state_dict: param group {i} has {len(sg['params'])} parameters "
                                 f"in the state and {len(g['params'])} in the optimizer")
            params.extend(zip((int(k) for k in sg["params"]), g["params"]))
        by_index = dict(params)
        new_state = {}
        for k, st in state_dict["state"].items():
            k = int(k)
            if k not in by_index:
                raise ValueError(f"{name}.load_state_dict: state for parameter {k}, which no param group lists")
            p = by_index[k]
            entry = {}
            for sk, v in st.items():
                if isinstance(v, np.ndarray) and v.ndim:
                    if v.shape != p.shape:
                        raise ValueError(f"{name}.load_state_dict: state {sk!r} of parameter {k} has shape "
                                         f"{v.shape}, the parameter has shape {p.shape}")
                    v = np.array(v, dtype=p.dtype, copy=True)
                elif isinstance(v, (np.ndarray, np.generic)):
                    v = v.item()
                entry[sk] = v
            new_state[p] = entry
        for sg, g in zip(saved, self.param_groups):
            for k, v in sg.items():
                if k != "params":
                    g[k] = tuple(v) if isinstance(v, list) else v
        self.state = new_state

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines) + "\n)"


# ---------------------------------------------------------------------------
# update rules: the one copy, used by these optimizers and by the static
# graph's (dynnets.static.train); each updates one parameter array in place
# ---------------------------------------------------------------------------


def _coalesced(g):
    """``g`` (RowSparse) with unique sorted rows; duplicates summed."""
    rows = g.rows
    if rows.size > 1 and not np.all(rows[1:] > rows[:-1]):
        return g.coalesce()
    return g


def _rows_apply(data, rows, states, update, *args):
    """Gather ``rows`` of ``data`` and of each state array, run
    ``update(data_block, *state_blocks, *args)`` on the gathered blocks in
    place, and scatter them back."""
    pb = data[rows]
    blocks = [s[rows] for s in states]
    update(pb, *blocks, *args)
    data[rows] = pb
    for s, b in zip(states, blocks):
        s[rows] = b


def _fused_ok(data, state, g):
    """Whether the Numba kernels may update ``data`` and ``state`` from ``g``:
    C-contiguous float32/float64 arrays of one dtype (a reshape of the
    parameter and state must be a view, since the kernels write into it)."""
    dt = data.dtype
    return (type(g) is np.ndarray and g.dtype == dt and state.dtype == dt and dt in _FUSED_DTYPES
            and data.flags.c_contiguous and state.flags.c_contiguous and g.flags.c_contiguous)


_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

# The block rules run the same arithmetic on whole arrays (a dense step) and on
# gathered rows (a sparse one). On a 0-d block np.sqrt returns a numpy scalar,
# which the in-place steps after it cannot write into, so a 0-d block takes
# np.sqrt(..., out=): only then, because the extra np.empty_like per parameter
# and step costs 4-5% of an Adam step over 20 weight matrices of 64x64.


def _sgd_block(pb, gb, lr):
    pb -= lr * gb


def _adagrad_block(pb, sb, gb, clr, eps):
    sb += gb * gb
    std = np.sqrt(sb) if sb.ndim else np.sqrt(sb, out=np.empty_like(sb))
    std += eps
    np.divide(gb, std, out=std)
    std *= clr
    pb -= std


def _adam_block(pb, mb, vb, gb, b1, b2, step_size, sqrt_bc2, eps):
    mb *= b1
    mb += (1.0 - b1) * gb
    vb *= b2
    sq = gb * gb
    sq *= 1.0 - b2
    vb += sq
    denom = np.sqrt(vb) if vb.ndim else np.sqrt(vb, out=np.empty_like(vb))
    denom /= sqrt_bc2
    denom += eps
    np.divide(mb, denom, out=denom)
    denom *= step_size
    pb -= denom


def _amsgrad_block(pb, mb, vb, wb, gb, b1, b2, step_size, sqrt_bc2, eps):
    """:func:`_adam_block` whose denominator uses ``wb``, the running maximum
    of the second moment (Reddi et al. 2018, AMSGrad; PyTorch's ``amsgrad=True``)."""
    mb *= b1
    mb += (1.0 - b1) * gb
    vb *= b2
    sq = gb * gb
    sq *= 1.0 - b2
    vb += sq
    np.maximum(wb, vb, out=wb)
    denom = np.sqrt(wb) if wb.ndim else np.sqrt(wb, out=np.empty_like(wb))
    denom /= sqrt_bc2
    denom += eps
    np.divide(mb, denom, out=denom)
    denom *= step_size
    pb -= denom


def _rmsprop_block(pb, sb, gb, lr, alpha, eps, ab=None, bb=None, momentum=0.0):
    """PyTorch's RMSprop step on one block, in place: ``sb`` the square
    average, ``ab`` the gradient average (centered) or None, ``bb`` the
    momentum buffer or None. (No new baseline to keep: plain expressions,
    which also hold for 0-d blocks.)"""
    sb *= alpha
    sb += (1.0 - alpha) * (gb * gb)
    if ab is not None:
        ab *= alpha
        ab += (1.0 - alpha) * gb
        avg = np.sqrt(sb - ab * ab)
    else:
        avg = np.sqrt(sb)
    avg = avg + eps
    if bb is not None:
        bb *= momentum
        bb += gb / avg
        pb -= lr * bb
    else:
        pb -= lr * (gb / avg)


def sgd_update(data, g, lr, weight_decay=0.0):
    """One SGD step without momentum, in place: ``data -= lr * (g + weight_decay * data)``.

    Parameters
    ----------
    data : ndarray
        The parameter, updated in place.
    g : ndarray or RowSparse
        Its gradient; a row-sparse one without weight decay updates only its
        rows (duplicates summed), otherwise it is densified.
    lr, weight_decay : float
    """
    if type(g) is RowSparse:
        if not weight_decay:
            g = _coalesced(g)
            _rows_apply(data, g.rows, (), _sgd_block, g.values, lr)
            return
        g = g.to_dense()
    if weight_decay:
        g = g + weight_decay * data
    data -= lr * g                  # _sgd_block, inlined: one call less per parameter and step


def adagrad_update(data, acc, g, clr, eps, weight_decay=0.0):
    """One Adagrad step, in place: with ``g += weight_decay * data``,
    ``acc += g * g``; ``data -= clr * g / (sqrt(acc) + eps)``.

    Parameters
    ----------
    data, acc : ndarray
        The parameter and its accumulator (same shape), updated in place.
    g : ndarray or RowSparse
        The gradient; a row-sparse one without weight decay updates only its
        rows' accumulator and values (PyTorch's sparse Adagrad), otherwise it
        is densified.
    clr : float
        This step's learning rate (after any decay).
    eps, weight_decay : float

    Notes
    -----
    C-contiguous float32/float64 arrays of one dtype take one Numba pass
    (:mod:`dynnets.nn.optim_kernels`); others the numpy rule, the kernels' twin.
    """
    if type(g) is RowSparse:
        if not weight_decay:
            g = _coalesced(g)
            vals = g.values
            if data.ndim == 2 and _fused_ok(data, acc, vals):
                OK.adagrad_rows(data, acc, g.rows, vals, np.array((clr, eps), dtype=data.dtype))
            else:
                _rows_apply(data, g.rows, (acc,), _adagrad_block, vals, clr, eps)
            return
        g = g.to_dense()
    if weight_decay:
        g = g + weight_decay * data
    if _fused_ok(data, acc, g):
        # one pass instead of six whole-array passes and two temporaries:
        # the dense step was ~14% of an LSTM classifier's training step
        OK.adagrad_dense(data.reshape(-1), acc.reshape(-1), g.reshape(-1), np.array((clr, eps), dtype=data.dtype))
    else:
        _adagrad_block(data, acc, g, clr, eps)


def adam_update(data, m, v, g, b1, b2, step_size, sqrt_bc2, eps, weight_decay=0.0, lazy=False, max_v=None,
                decoupled_decay=0.0):
    """One Adam step, in place: with ``g += weight_decay * data``,
    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
    ``data -= step_size * m / (sqrt(v) / sqrt_bc2 + eps)``.

    Parameters
    ----------
    data, m, v : ndarray
        The parameter and its first and second moments, updated in place.
    g : ndarray or RowSparse
        The gradient. A row-sparse one with ``lazy`` updates only its rows
        (the weight decay too) with ``torch.optim.SparseAdam``'s maths, which
        adds eps before the bias correction:
        ``data -= step_size * sqrt_bc2 * m / (sqrt(v) + eps)``. Without
        ``lazy`` (or with ``decoupled_decay``) it is densified and every row's
        moments decay.
    b1, b2, eps, weight_decay : float
    step_size, sqrt_bc2 : float
        ``lr / (1 - b1^t)`` and ``sqrt(1 - b2^t)`` at step t (the bias corrections).
    lazy : bool
    max_v : ndarray or None
        AMSGrad's running maximum of ``v`` (updated in place); the
        denominator then uses it instead of ``v``.
    decoupled_decay : float
        AdamW's decoupled weight decay, ``lr * weight_decay``: ``data`` is
        first multiplied by ``1 - decoupled_decay`` (Loshchilov & Hutter 2019).
    """
    if type(g) is RowSparse:
        if lazy and not decoupled_decay:
            g = _coalesced(g)
            vals = g.values
            if weight_decay:
                vals = vals + weight_decay * data[g.rows]
            # SparseAdam's eps: sqrt(v)/c + eps/c = (sqrt(v) + eps) / c with c = sqrt_bc2
            if max_v is None:
                _rows_apply(data, g.rows, (m, v), _adam_block, vals, b1, b2, step_size, sqrt_bc2, eps / sqrt_bc2)
            else:
                _rows_apply(data, g.rows, (m, v, max_v), _amsgrad_block, vals, b1, b2, step_size, sqrt_bc2,
                            eps / sqrt_bc2)
            return
        g = g.to_dense()
    if decoupled_decay:
        data *= 1.0 - decoupled_decay
    if weight_decay:
        g = g + weight_decay * data
    if max_v is None:
        if _fused_ok(data, m, g) and _fused_ok(data, v, g):
            # ADAM_RULE's kernel: one pass instead of _adam_block's eleven whole-array passes and
            # two temporaries (bench_optim.py --only many: see the README's optimizer figures)
            dt = data.dtype
            OK.rule_kernel(OK.ADAM_RULE, dt)(data.reshape(-1), m.reshape(-1), v.reshape(-1), g.reshape(-1),
                                            np.array((b1, b2, 1.0 - b1, 1.0 - b2, step_size, sqrt_bc2, eps), dt))
        else:
            _adam_block(data, m, v, g, b1, b2, step_size, sqrt_bc2, eps)
    else:
        _amsgrad_block(data, m, v, max_v, g, b1, b2, step_size, sqrt_bc2, eps)


def rmsprop_update(data, square_avg, g, lr, alpha, eps, weight_decay=0.0, momentum=0.0, momentum_buffer=None,
                   grad_avg=None):
    """One RMSprop step in place, as ``torch.optim.RMSprop``: with
    ``g += weight_decay * data``, ``s = alpha s + (1 - alpha) g^2``; centered:
    ``a = alpha a + (1 - alpha) g`` and ``avg = sqrt(s - a^2) + eps``, else
    ``avg = sqrt(s) + eps``; with momentum ``buf = momentum buf + g / avg``
    and ``data -= lr buf``, else ``data -= lr g / avg``.

    Parameters
    ----------
    data, square_avg : ndarray
        The parameter and its square average ``s``, updated in place.
    g : ndarray or RowSparse
        The gradient (a row-sparse one is densified: ``s`` decays on every row).
    lr, alpha, eps, weight_decay, momentum : float
    momentum_buffer : ndarray or None
        Updated in place when ``momentum`` > 0.
    grad_avg : ndarray or None
        The gradient average ``a`` of the centered variant, updated in place.
    """
    if type(g) is RowSparse:
        g = g.to_dense()
    if weight_decay:
        g = g + weight_decay * data
    _rmsprop_block(data, square_avg, g, lr, alpha, eps, grad_avg, momentum_buffer if momentum else None, momentum)


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (as ``torch.optim.SGD``).

    With gradient g (plus ``weight_decay * p`` when weight decay is set):
    ``buf = g`` on the first step, then ``buf = momentum * buf + (1 - dampening) * g``;
    the update direction is ``buf``, or ``g + momentum * buf`` with
    ``nesterov=True``; ``p -= lr * direction``.

    Parameters
    ----------
    params : iterable of Tensors or param-group dicts
    lr : float, default 1e-3 (PyTorch's)
    momentum : float, default 0
    dampening : float, default 0
    weight_decay : float, default 0 (L2 penalty added to the gradient)
    nesterov : bool, default False (needs momentum > 0 and dampening = 0)

    Row-sparse gradients are applied to their rows only when momentum and
    weight decay are 0; otherwise they are densified.
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov))

    def _check_group(self, g):
        if not g["lr"] >= 0:
            self._bad("lr", g["lr"], "non-negative")
        if not g["momentum"] >= 0:
            self._bad("momentum", g["momentum"], "non-negative")
        if not g["weight_decay"] >= 0:
            self._bad("weight_decay", g["weight_decay"], "non-negative")
        if g["nesterov"] and (g["momentum"] <= 0 or g["dampening"] != 0):
            self._bad("nesterov", g["nesterov"], "False unless momentum > 0 and dampening = 0")

    def _step_group(self, group):
        lr = float(group["lr"])
        mom = float(group["momentum"])
        damp = float(group["dampening"])
        wd = float(group["weight_decay"])
        nesterov = bool(group["nesterov"])
        state = self.state
        for p in group["params"]:
            g = p.raw_grad
            if g is None:
                continue
            d = p.numpy()
            if g.shape != d.shape:
                self._misfit(p, d, g, None)
            if not mom:
                sgd_update(d, g, lr, wd)
                continue
            if type(g) is RowSparse:
                g = g.to_dense()
            if wd:
                g = g + wd * d
            st = state.get(p)
            if st is None:
                st = state[p] = {}
            buf = st.get("momentum_buffer")
            if buf is not None and buf.shape != d.shape:
                self._misfit(p, d, g, st)
            if buf is None:
                buf = st["momentum_buffer"] = np.array(g, dtype=d.dtype, copy=True)
            else:
                buf *= mom
                buf += (1.0 - damp) * g if damp else g
            sgd_update(d, g + mom * buf if nesterov else buf, lr)


class Adagrad(Optimizer):
    """Adagrad (Duchi et al. 2011), as ``torch.optim.Adagrad``.

    ``clr = lr / (1 + (t - 1) * lr_decay)`` at step t (counted per parameter);
    ``g += weight_decay * p``; ``sum += g * g``;
    ``p -= clr * g / (sqrt(sum) + eps)``.

    Parameters
    ----------
    params : iterable of Tensors or param-group dicts
    lr : float, default 0.01
    lr_decay : float, default 0
    weight_decay : float, default 0
    initial_accumulator_value : float, default 0 (initial value of ``sum``)
    eps : float, default 1e-10

    A row-sparse gradient without weight decay updates only its rows' ``sum``
    and parameters (PyTorch's sparse Adagrad); with weight decay it is densified.
    """

    def __init__(self, params, lr=0.01, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps))

    def _check_group(self, g):
        for k in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"):
            if not g[k] >= 0:
                self._bad(k, g[k], "non-negative")

    def _step_group(self, group):
        lr = float(group["lr"])
        decay = float(group["lr_decay"])
        wd = float(group["weight_decay"])
        eps = float(group["eps"])
        init = float(group["initial_accumulator_value"])
        state = self.state
        scal = {}           # (clr, eps) per dtype, for the kernels: made once per group, not per parameter
        nd = np.ndarray
        for p in group["params"]:
            g = p.raw_grad
            if g is None:
                continue
            st = state.get(p)
            data = p.numpy()
            if st is None:
                st = state[p] = {"step": 0, "sum": np.full(data.shape, init, dtype=data.dtype)}
            if st["sum"].shape != data.shape or g.shape != data.shape:
                self._misfit(p, data, g, st)
            step = st["step"] = st["step"] + 1
            clr = lr / (1.0 + (step - 1) * decay) if decay else lr
            acc = st["sum"]
            if type(g) is nd and not wd and _fused_ok(data, acc, g):
                # adagrad_update's dense kernel path, inline: the per-parameter
                # Python was ~2 us (measured over 14 small parameters)
                key = (data.dtype, clr)
                sc = scal.get(key)
                if sc is None:
                    sc = scal[key] = np.array((clr, eps), dtype=data.dtype)
                OK.adagrad_dense(data.reshape(-1), acc.reshape(-1), g.reshape(-1), sc)
            else:
                adagrad_update(data, acc, g, clr, eps, wd)


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015) with bias correction, as ``torch.optim.Adam``.

    At step t (counted per parameter), with ``g += weight_decay * p``:
    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
    ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.

    Parameters
    ----------
    params : iterable of Tensors or param-group dicts
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 0 (L2 penalty added to the gradient; for
        decoupled weight decay use :class:`AdamW`)
    amsgrad : bool, default False
        Divide by the running maximum of ``v`` (AMSGrad; state ``max_exp_avg_sq``).
    lazy : bool, default False (keyword only; not in PyTorch)
        For row-sparse gradients, update only the rows in the gradient, with
        ``torch.optim.SparseAdam``'s maths: their moments and parameters;
        rows not looked up keep their moments (they are not decayed) and
        their values; eps is added before the bias correction, as SparseAdam
        does (``p -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)``).
        The step counter t still counts every step of the parameter. With
        weight decay the penalty is added on the touched rows only. Dense
        gradients always take the ordinary dense step. With ``lazy=False`` a
        row-sparse gradient is densified and every row's moments decay,
        exactly as dense Adam.
    """

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 lazy=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, lazy=lazy))

    def _check_group(self, g):
        for k in ("lr", "eps", "weight_decay"):
            if not g[k] >= 0:
                self._bad(k, g[k], "non-negative")
        b = g["betas"]
        if len(b) != 2 or not all(0.0 <= float(x) < 1.0 for x in b):
            self._bad("betas", b, "a pair of numbers in [0, 1)")
        for k in ("amsgrad", "lazy"):
            if not isinstance(g.get(k, False), (bool, np.bool_)):
                self._bad(k, g[k], "a bool")

    def _step_group(self, group):
        lr = float(group["lr"])
        b1, b2 = (float(x) for x in group["betas"])
        eps = float(group["eps"])
        wd = float(group["weight_decay"])
        lazy = bool(group.get("lazy", False))
        amsgrad = bool(group["amsgrad"])
        # AdamW: p *= 1 - lr * wd before the step, and no L2 term in the gradient
        decay, wd = (lr * wd, 0.0) if self._decoupled else (0.0, wd)
        state = self.state
        for p in group["params"]:
            g = p.raw_grad
            if g is None:
                continue
            d = p.numpy()
            st = state.get(p)
            if st is None:
                st = state[p] = {"step": 0, "exp_avg": np.zeros_like(d), "exp_avg_sq": np.zeros_like(d)}
            if st["exp_avg"].shape != d.shape or g.shape != d.shape:
                self._misfit(p, d, g, st)
            if amsgrad and "max_exp_avg_sq" not in st:
                st["max_exp_avg_sq"] = np.zeros_like(d)
            t = st["step"] = st["step"] + 1
            step_size = lr / (1.0 - b1 ** t)
            sqrt_bc2 = math.sqrt(1.0 - b2 ** t)
            adam_update(d, st["exp_avg"], st["exp_avg_sq"], g, b1, b2, step_size, sqrt_bc2, eps, wd, lazy,
                        st["max_exp_avg_sq"] if amsgrad else None, decay)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019), as
    ``torch.optim.AdamW``: at each step ``p *= 1 - lr * weight_decay``, then
    the Adam step of :class:`Adam` without any L2 term in the gradient.

    Parameters
    ----------
    params : iterable of Tensors or param-group dicts
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 0.01 (PyTorch's; decoupled)
    amsgrad : bool, default False

    A row-sparse gradient is densified (the decay moves every row), unless
    weight_decay is 0.
    """

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        Optimizer.__init__(self, params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                              amsgrad=amsgrad))


class RMSprop(Optimizer):
    """RMSprop (Hinton's lecture 6e), as ``torch.optim.RMSprop``.

    With ``g += weight_decay * p``: ``s = alpha s + (1 - alpha) g^2``;
    ``centered``: ``a = alpha a + (1 - alpha) g``, ``avg = sqrt(s - a^2) + eps``,
    else ``avg = sqrt(s) + eps``; with momentum ``buf = momentum buf + g / avg``,
    ``p -= lr buf``, else ``p -= lr g / avg``. (eps is added outside the
    square root, as PyTorch; TF1's RMSPropOptimizer adds it inside.)

    Parameters
    ----------
    params : iterable of Tensors or param-group dicts
    lr : float, default 0.01
    alpha : float, default 0.99
    eps : float, default 1e-8
    weight_decay : float, default 0
    momentum : float, default 0
    centered : bool, default False

    State per parameter: ``step``, ``square_avg``, ``momentum_buffer`` (with
    momentum), ``grad_avg`` (centered). A row-sparse gradient is densified
    (the square average decays on every row).
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered))

    def _check_group(self, g):
        for k in ("lr", "alpha", "eps", "weight_decay", "momentum"):
            if not g[k] >= 0:
                self._bad(k, g[k], "non-negative")
        if not isinstance(g["centered"], (bool, np.bool_)):
            self._bad("centered", g["centered"], "a bool")

    def _step_group(self, group):
        lr = float(group["lr"])
        alpha = float(group["alpha"])
        eps = float(group["eps"])
        wd = float(group["weight_decay"])
        mom = float(group["momentum"])
        centered = bool(group["centered"])
        state = self.state
        for p in group["params"]:
            g = p.raw_grad
            if g is None:
                continue
            d = p.numpy()
            st = state.get(p)
            if st is None:
                st = state[p] = {"step": 0, "square_avg": np.zeros_like(d)}
            if st["square_avg"].shape != d.shape or g.shape != d.shape:
                self._misfit(p, d, g, st)
            if mom > 0 and "momentum_buffer" not in st:
                st["momentum_buffer"] = np.zeros_like(d)
            if centered and "grad_avg" not in st:
                st["grad_avg"] = np.zeros_like(d)
            st["step"] += 1
            rmsprop_update(d, st["square_avg"], g, lr, alpha, eps, wd, mom, st.get("momentum_buffer"),
                           st["grad_avg"] if centered else None)
