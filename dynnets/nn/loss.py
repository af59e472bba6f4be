"""Loss modules with PyTorch's names and arguments: ``CrossEntropyLoss``,
``NLLLoss``, ``MSELoss`` (and the functions ``nll_loss``, ``mse_loss``).

Inputs follow PyTorch: class scores (N, C), a single example (C,), or
(N, C, d1, ...) with targets (N, d1, ...) (the class axis second, e.g. one
score per token of a padded batch). ``reduction`` is ``'mean'``, ``'sum'``
or ``'none'``. A class ``weight`` (C,) is a constant (a buffer in the
state_dict, as PyTorch); ``ignore_index`` drops the rows whose target equals
it. With class weights or ignored rows, ``'mean'`` divides by the total
weight of the rows kept, ``sum_i w[y_i]``, as PyTorch does.

One difference from PyTorch: when every row is ignored (total weight 0),
``'mean'`` gives 0 with a zero gradient, where PyTorch gives nan.
"""
from __future__ import annotations

import numpy as np

from ..autograd import ops
from ..autograd.tensor import Tensor
from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "nll_loss", "mse_loss"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(who, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{who}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _symbolic(x):
    return getattr(x, "_is_symbolic", False)


def _float_input(who, x, what="input"):
    # a static Value (also what ds.trace records with) stays symbolic; only
    # plain arrays are wrapped
    if not isinstance(x, Tensor) and not _symbolic(x):
        x = Tensor(np.asarray(x))
    if x.dtype.kind != "f":
        raise TypeError(f"{who}: {what} must be floating-point, got dtype {x.dtype}")
    return x


def _weight(who, weight):
    if weight is None:
        return None
    w = np.asarray(weight.data if isinstance(weight, Tensor) else weight)
    if w.ndim != 1 or w.dtype.kind not in "fiu":
        raise ValueError(f"{who}: weight must be a 1-D array of per-class weights, got shape {w.shape} and "
                         f"dtype {w.dtype}")
    return w


def _rows(who, x, target, probabilities):
    """Scores as (rows, C), targets as (rows,) ints or (rows, C) probabilities,
    and the shape of the 'none' output."""
    shape = tuple(x.shape)
    nd = len(shape)
    if nd == 0:
        raise ValueError(f"{who}: input must be (C,), (N, C) or (N, C, d1, ...), got a scalar")
    C = shape[0] if nd == 1 else shape[1]
    if nd == 1:
        out_shape, want = (), (() if not probabilities else (C,))
    else:
        out_shape = (shape[0],) + shape[2:]
        want = shape if probabilities else out_shape
    if tuple(target.shape) != want:
        kind = "class probabilities" if probabilities else "class indices"
        raise ValueError(f"{who}: target.shape={tuple(target.shape)} does not match input.shape={shape} "
                         f"(expected {want} for {kind})")
    if nd == 1:
        x2 = ops.reshape(x, 1, C)
    elif nd == 2:
        x2 = x
    else:
        # the class axis last, so each position is one row
        x2 = ops.reshape(ops.transpose(x, 0, *range(2, nd), 1), -1, C)
    if probabilities:
        if nd == 1:
            t2 = ops.reshape(target, 1, C)
        elif nd == 2:
            t2 = target
        else:
            t2 = ops.reshape(ops.transpose(target, 0, *range(2, nd), 1), -1, C)
    elif _symbolic(target):
        t2 = ops.astype(ops.reshape(target, -1), np.int64)
    else:
        t2 = np.asarray(target).reshape(-1).astype(np.int64, copy=False)
    return x2, t2, out_shape, C


def _target_array(target):
    """A target's array, or the symbolic value itself."""
    if isinstance(target, Tensor):
        return target.data
    return target if _symbolic(target) else np.asarray(target)


def _class_targets(who, target):
    t = _target_array(target)
    if np.dtype(t.dtype).kind not in "iu":
        raise TypeError(f"{who}: target must hold integer class indices (or, for CrossEntropyLoss, float class "
                        f"probabilities shaped as the input), got dtype {t.dtype}")
    return t


def _kept(who, t, C, weight, ignore_index, dtype):
    """Targets with ignored rows set to class 0, each row's weight w[y_i] (0
    if ignored), and which rows are kept."""
    if _symbolic(t):
        return _kept_symbolic(who, t, C, weight, ignore_index, dtype)
    keep = t != ignore_index
    t0 = np.where(keep, t, 0)
    bad = (t0 < 0) | (t0 >= C)
    if bad.any():
        raise ValueError(f"{who}: target {int(t0[bad][0])} is out of range for {C} classes "
                         f"(ignore_index={ignore_index})")
    if weight is not None and weight.shape != (C,):
        raise ValueError(f"{who}: weight.shape={weight.shape} does not match the {C} classes of the input")
    w = keep.astype(dtype) if weight is None else np.where(keep, weight[t0], 0).astype(dtype)
    return t0, w, keep


def _kept_symbolic(who, t, C, weight, ignore_index, dtype):
    """:func:`_kept` of symbolic targets, as graph ops: the rows' weights and
    kept flags are values of the graph. An out-of-range target is caught when
    the graph runs, by the ``take`` of its class weight (a negative one is
    sent past the end first, since ``take`` accepts negative indices)."""
    if weight is not None and weight.shape != (C,):
        raise ValueError(f"{who}: weight.shape={weight.shape} does not match the {C} classes of the input")
    keep = ops.not_equal(t, np.asarray(ignore_index, dtype=np.int64))
    t0 = ops.where(keep, t, np.zeros((), dtype=np.int64))
    checked = ops.where(ops.less(t0, np.zeros((), dtype=np.int64)), np.asarray(C, dtype=np.int64), t0)
    cw = np.ones(C, dtype=dtype) if weight is None else weight.astype(dtype)
    w = ops.astype(keep, dtype) * ops.take(cw, checked)
    return t0, w, keep


def _total(w):
    """The total row weight: a float, or a graph value for symbolic weights."""
    return ops.sum(w) if _symbolic(w) else float(w.sum())


def _reduce(losses, reduction, out_shape, total):
    """Per-row (already weighted) losses reduced; 'mean' divides by ``total``
    (0 when the total is 0: then every row's loss is 0 too)."""
    if reduction == "none":
        return ops.reshape(losses, *out_shape)
    s = ops.sum(losses)
    if reduction == "sum":
        return s
    if _symbolic(total):
        one = np.ones((), dtype=total.dtype)
        return s / ops.where(ops.greater(total, np.zeros((), dtype=total.dtype)), total, one)
    return s * (1.0 / total if total > 0 else 0.0)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of log-probabilities ``input`` (as
    ``torch.nn.functional.nll_loss``): row i contributes ``-w[y_i] input[i, y_i]``."""
    return _nll("nll_loss", input, target, weight, ignore_index, reduction)


def _nll(who, input, target, weight, ignore_index, reduction):
    _check_reduction(who, reduction)
    x = _float_input(who, input)
    x2, t, out_shape, C = _rows(who, x, _class_targets(who, target), False)
    t0, w, _ = _kept(who, t, C, _weight(who, weight), ignore_index, x.dtype)
    if _symbolic(t0):
        # a one-hot product picks x2[i, t0[i]] without knowing the targets
        onehot = ops.astype(ops.equal(ops.reshape(t0, -1, 1), np.arange(C, dtype=np.int64)), x.dtype)
        picked = ops.sum(x2 * onehot, axis=1)
    else:
        picked = ops.getitem(x2, (np.arange(len(t0)), t0))
    return _reduce(picked * (-w), reduction, out_shape, _total(w))


def mse_loss(input, target, reduction="mean"):
    """Squared error ``(input - target)^2``, averaged, summed or per element (as
    ``torch.nn.functional.mse_loss``). The shapes must be equal (PyTorch
    broadcasts them with a warning; here that is an error)."""
    return _mse("mse_loss", input, target, reduction)


def _mse(who, input, target, reduction):
    _check_reduction(who, reduction)
    x = _float_input(who, input)
    y = target if isinstance(target, Tensor) or _symbolic(target) else np.asarray(target)
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"{who}: target.shape={tuple(y.shape)} does not match input.shape={tuple(x.shape)}")
    d = x - y
    sq = d * d
    if reduction == "none":
        return sq
    return ops.sum(sq) if reduction == "sum" else ops.mean(sq)


class _Loss(Module):
    def __init__(self, reduction):
        super().__init__()
        self.reduction = _check_reduction(type(self).__name__, reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class _WeightedLoss(_Loss):
    def __init__(self, weight, reduction):
        super().__init__(reduction)
        w = _weight(type(self).__name__, weight)
        if w is None:
            self.weight = None
        else:
            self.register_buffer("weight", w)


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross-entropy of class scores (as ``torch.nn.CrossEntropyLoss``).

    Parameters
    ----------
    weight : (C,) array or None
        Per-class weights (a constant, saved as a buffer).
    ignore_index : int, default -100
        Rows whose target is this class index are dropped (class-index targets only).
    reduction : {'mean', 'sum', 'none'}
    label_smoothing : float in [0, 1]
        The target becomes ``(1 - eps) * onehot + eps / C``; with class
        indices the loss is ``(1 - eps) * nll + eps / C * sum_c -w_c log p_c``,
        reduced as PyTorch does (the smoothing term of ``'mean'`` is divided
        by the kept rows' total weight too).

    ``forward(input, target)``: ``input`` scores (N, C), (C,) or (N, C, d1, ...);
    ``target`` integer class indices (N,), () or (N, d1, ...), or class
    probabilities of the input's shape (then ``'mean'`` divides by the
    number of rows, N * d1 * ..., and ``ignore_index`` does not apply).
    Without weight, ignored rows or smoothing, class-index targets run the
    one fused ``softmax_cross_entropy`` kernel.
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(weight, reduction)
        if not isinstance(ignore_index, (int, np.integer)) or isinstance(ignore_index, bool):
            raise ValueError(f"CrossEntropyLoss: ignore_index must be an integer, got {ignore_index!r}")
        if not isinstance(label_smoothing, (int, float, np.floating)) or not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing!r}")
        self.ignore_index = int(ignore_index)
        self.label_smoothing = float(label_smoothing)

    def forward(self, input, target):
        who = "CrossEntropyLoss"
        x = _float_input(who, input)
        t_arr = _target_array(target)
        if np.dtype(t_arr.dtype).kind == "f":
            return self._probabilities(x, target)
        x2, t, out_shape, C = _rows(who, x, _class_targets(who, t_arr), False)
        t0, w, keep = _kept(who, t, C, self.weight, self.ignore_index, x.dtype)
        eps = self.label_smoothing
        if eps == 0.0:
            if self.weight is None and not _symbolic(keep) and keep.all():
                if self.reduction == "none":
                    return ops.reshape(ops.cross_entropy(x2, t0, reduction="none"), *out_shape)
                return ops.cross_entropy(x2, t0, reduction=self.reduction)
            return _reduce(ops.cross_entropy(x2, t0, mask=w, reduction="none"), self.reduction, out_shape,
                           _total(w))
        logp = ops.log_softmax(x2, axis=1)
        cw = np.ones(C, dtype=x.dtype) if self.weight is None else self.weight.astype(x.dtype)
        kept = ops.astype(keep, x.dtype) if _symbolic(keep) else keep.astype(x.dtype)
        smooth = ops.sum(logp * cw, axis=1) * (-kept)
        nll = ops.cross_entropy(x2, t0, mask=w, reduction="none")
        rows = nll * (1.0 - eps) + smooth * (eps / C)
        return _reduce(rows, self.reduction, out_shape, _total(w))

    def _probabilities(self, x, target):
        who = "CrossEntropyLoss"
        p = target if isinstance(target, Tensor) or _symbolic(target) else np.asarray(target, dtype=x.dtype)
        x2, p2, out_shape, C = _rows(who, x, p, True)
        if self.weight is not None and self.weight.shape != (C,):
            raise ValueError(f"{who}: weight.shape={self.weight.shape} does not match the {C} classes of the input")
        eps = self.label_smoothing
        if eps:
            p2 = p2 * (1.0 - eps) + eps / C
        if self.weight is not None:
            p2 = p2 * self.weight.astype(x.dtype)
        rows = -ops.sum(ops.log_softmax(x2, axis=1) * p2, axis=1)
        return _reduce(rows, self.reduction, out_shape, x2.shape[0])

    def extra_repr(self):
        s = super().extra_repr()
        if self.ignore_index != -100:
            s += f", ignore_index={self.ignore_index}"
        if self.label_smoothing:
            s += f", label_smoothing={self.label_smoothing}"
        return s


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities (as ``torch.nn.NLLLoss``);
    combine with ``log_softmax`` for a cross-entropy.

    Parameters
    ----------
    weight : (C,) array or None
    ignore_index : int, default -100
    reduction : {'mean', 'sum', 'none'}

    ``forward(input, target)``: ``input`` (N, C), (C,) or (N, C, d1, ...)
    log-probabilities, ``target`` class indices (N,), () or (N, d1, ...).
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(weight, reduction)
        if not isinstance(ignore_index, (int, np.integer)) or isinstance(ignore_index, bool):
            raise ValueError(f"NLLLoss: ignore_index must be an integer, got {ignore_index!r}")
        self.ignore_index = int(ignore_index)

    def forward(self, input, target):
        return _nll("NLLLoss", input, target, self.weight, self.ignore_index, self.reduction)


class MSELoss(_Loss):
    """Mean squared error (as ``torch.nn.MSELoss``): ``(input - target)^2``
    reduced by ``reduction``; input and target of the same shape."""

    def __init__(self, reduction="mean"):
        super().__init__(reduction)

    def forward(self, input, target):
        return _mse("MSELoss", input, target, self.reduction)
