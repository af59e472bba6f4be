"""Losses with PyTorch's names, arguments and semantics: the modules
``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``, ``BCELoss``,
``BCEWithLogitsLoss`` and the functions ``cross_entropy``, ``nll_loss``,
``mse_loss``, ``binary_cross_entropy``, ``binary_cross_entropy_with_logits``
(exported by :mod:`dynnets.nn.functional`), positional arguments in torch's
order.

Inputs follow PyTorch: class scores (N, C), a single example (C,), or
(N, C, d1, ...) with targets (N, d1, ...) (the class axis second, e.g. one
score per token of a padded batch). ``reduction`` is ``'mean'``, ``'sum'``
or ``'none'``; PyTorch's deprecated ``size_average`` / ``reduce`` flags
(bools) override it as in PyTorch, with its warning. A class ``weight`` (C,)
is a constant (a buffer in the state_dict, as PyTorch); ``ignore_index``
drops the rows whose target equals it. With class weights or ignored rows,
``'mean'`` divides by the total weight of the rows kept, ``sum_i w[y_i]``, as
PyTorch does; when every row is ignored that is 0/0: nan, with a zero
gradient, as PyTorch.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..autograd import ops
from ..autograd.primitives import DTypeError
from ..autograd.tensor import Tensor, tensor_like
from ..autograd.values import as_operand, as_value, concrete
from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "BCELoss", "BCEWithLogitsLoss", "cross_entropy", "nll_loss",
           "mse_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "KLDivLoss", "kl_div"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(who, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{who}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _reduction(who, size_average, reduce, reduction):
    """``reduction``, or what PyTorch's deprecated ``size_average`` /
    ``reduce`` flags make of it (``_Reduction.legacy_get_string``, with its
    warning). The flags must be bools: a string there (``MSELoss('sum')``, a
    positional habit) would silently mean 'mean' in PyTorch, so it raises."""
    if size_average is None and reduce is None:
        return _check_reduction(who, reduction)
    for name, v in (("size_average", size_average), ("reduce", reduce)):
        if v is not None and not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{who}: {name} is PyTorch's deprecated flag (a bool or None), got {v!r}; pass "
                            f"reduction='mean', 'sum' or 'none' by keyword")
    size_average = True if size_average is None else bool(size_average)
    reduce = True if reduce is None else bool(reduce)
    out = "mean" if size_average and reduce else ("sum" if reduce else "none")
    warnings.warn(f"{who}: size_average and reduce args will be deprecated, please use reduction='{out}' instead.",
                  UserWarning, stacklevel=3)
    return out


def _float_input(who, x, what="input"):
    # a static Value (also what ds.trace records with) stays symbolic; only
    # plain arrays are wrapped
    x = tensor_like(x)
    if x.dtype.kind != "f":
        raise TypeError(f"{who}: {what} must be floating-point, got dtype {x.dtype}")
    return x


def _weight(who, weight):
    if weight is None:
        return None
    w = np.asarray(weight.numpy() if isinstance(weight, Tensor) else weight)
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
    if C is None:
        raise ValueError(f"{who}: the number of classes (input.shape[{0 if nd == 1 else 1}]) must be known when the "
                         f"graph is built, got input.shape={shape}")
    if nd == 1:
        out_shape, want = (), (() if not probabilities else (C,))
    else:
        out_shape = (shape[0],) + shape[2:]
        want = shape if probabilities else out_shape
    got = tuple(target.shape)
    # a static graph's unknown (None) dimensions match any size
    if len(got) != len(want) or not all(a is None or b is None or a == b for a, b in zip(got, want)):
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
    else:
        t2 = ops.astype(ops.reshape(target, -1), np.int64)
    return x2, t2, out_shape, C


def _class_targets(who, target):
    t = as_operand(target)
    if np.dtype(t.dtype).kind not in "iu":
        raise TypeError(f"{who}: target must hold integer class indices (or, for CrossEntropyLoss, float class "
                        f"probabilities shaped as the input), got dtype {t.dtype}")
    return t


def _kept(who, t, C, weight, ignore_index, dtype):
    """Targets with ignored rows set to class 0, each row's weight w[y_i] (0
    if ignored), and which rows are kept: ops, so that eager and static
    targets take this one path. Targets whose values are known now are
    checked now (an out-of-range one raises, naming the loss); a static
    graph's are caught when it runs, by the ``take`` of their class weight
    (a negative one is sent past the end first, since ``take`` accepts
    negative indices)."""
    if weight is not None and weight.shape != (C,):
        raise ValueError(f"{who}: weight.shape={weight.shape} does not match the {C} classes of the input")
    tv = concrete(t)
    if tv is not None:
        tv = np.where(tv != ignore_index, tv, 0)
        bad = (tv < 0) | (tv >= C)
        if bad.any():
            raise ValueError(f"{who}: target {int(tv[bad][0])} is out of range for {C} classes "
                             f"(ignore_index={ignore_index})")
    zero = np.zeros((), dtype=np.int64)
    keep = ops.not_equal(t, np.asarray(ignore_index, dtype=np.int64))
    t0 = ops.where(keep, t, zero)
    checked = ops.where(ops.less(t0, zero), np.asarray(C, dtype=np.int64), t0)
    cw = np.ones(C, dtype=dtype) if weight is None else weight.astype(dtype)
    w = ops.astype(keep, dtype) * ops.take(cw, checked)
    return t0, w, keep


def _reduce(losses, reduction, out_shape, total):
    """Per-row (already weighted) losses reduced; 'mean' divides by ``total``
    (a number, or a 0-d value of the rows' total weight). A total of 0
    (every row ignored, or no rows) gives nan, PyTorch's 0/0, with a zero
    gradient (every row's loss has weight 0)."""
    if reduction == "none":
        if len(out_shape) == 1:
            return losses                   # (N,) already: N may be unknown in a static graph
        if None in out_shape:
            raise ValueError(f"reduction='none': the per-position losses of (N, C, d1, ...) scores are reshaped to "
                             f"(N, d1, ...), which must be known when the graph is built, got {out_shape}")
        return ops.reshape(losses, *out_shape)
    s = ops.sum(losses)
    if reduction == "sum":
        return s
    if isinstance(total, (int, np.integer)):
        return s * (1.0 / total) if total > 0 else s * 0.0 + np.nan
    zero, one = np.zeros((), dtype=total.dtype), np.ones((), dtype=total.dtype)
    has = ops.greater(total, zero)
    return s / ops.where(has, total, one) + ops.where(has, zero, np.full((), np.nan, dtype=total.dtype))


def _ignore_index(who, ignore_index):
    if not isinstance(ignore_index, (int, np.integer)) or isinstance(ignore_index, (bool, np.bool_)):
        raise ValueError(f"{who}: ignore_index must be an integer, got {ignore_index!r}")
    return int(ignore_index)


def _smoothing(who, label_smoothing):
    if isinstance(label_smoothing, (bool, np.bool_)) or \
            not isinstance(label_smoothing, (int, float, np.floating, np.integer)) or \
            not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{who}: label_smoothing must be in [0, 1], got {label_smoothing!r}")
    return float(label_smoothing)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Softmax cross-entropy of class scores, as ``torch.nn.functional.cross_entropy``
    (see :class:`CrossEntropyLoss` for the forms of ``input`` and ``target``).

    Parameters
    ----------
    input : (N, C), (C,) or (N, C, d1, ...) float scores
    target : integer class indices (N,), () or (N, d1, ...), or class
        probabilities of the input's shape
    weight : (C,) array or None
    size_average, reduce : bool or None
        PyTorch's deprecated flags; they override ``reduction``.
    ignore_index : int, default -100
    reduction : {'mean', 'sum', 'none'}
    label_smoothing : float in [0, 1]

    Notes
    -----
    Without weight, ignored rows or smoothing, (N, C) scores with class
    indices run the one fused ``softmax_cross_entropy`` kernel
    (:func:`dynnets.cross_entropy`).
    """
    who = "cross_entropy"
    return _cross_entropy(who, input, target, _weight(who, weight), _ignore_index(who, ignore_index),
                          _reduction(who, size_average, reduce, reduction), _smoothing(who, label_smoothing))


def _cross_entropy(who, input, target, weight, ignore_index, reduction, eps):
    x = _float_input(who, input)
    t_arr = as_operand(target)
    if np.dtype(t_arr.dtype).kind == "f":
        return _probabilities(who, x, target, weight, reduction, eps)
    x2, t, out_shape, C = _rows(who, x, _class_targets(who, t_arr), False)
    t0, w, keep = _kept(who, t, C, weight, ignore_index, x.dtype)
    if eps == 0.0:
        kv = concrete(keep) if weight is None else None
        if kv is not None and kv.all() and kv.size:
            # every row kept, unweighted, values known: the one fused kernel gives the same result
            if reduction == "none":
                return ops.reshape(ops.cross_entropy(x2, t0, reduction="none"), *out_shape)
            return ops.cross_entropy(x2, t0, reduction=reduction)
        return _reduce(ops.cross_entropy(x2, t0, mask=w, reduction="none"), reduction, out_shape, ops.sum(w))
    logp = ops.log_softmax(x2, axis=1)
    cw = np.ones(C, dtype=x.dtype) if weight is None else weight.astype(x.dtype)
    smooth = ops.sum(logp * cw, axis=1) * (-ops.astype(keep, x.dtype))
    nll = ops.cross_entropy(x2, t0, mask=w, reduction="none")
    rows = nll * (1.0 - eps) + smooth * (eps / C)
    return _reduce(rows, reduction, out_shape, ops.sum(w))


def _probabilities(who, x, target, weight, reduction, eps):
    p = as_value(target, x.dtype)
    x2, p2, out_shape, C = _rows(who, x, p, True)
    if weight is not None and weight.shape != (C,):
        raise ValueError(f"{who}: weight.shape={weight.shape} does not match the {C} classes of the input")
    if eps:
        p2 = p2 * (1.0 - eps) + eps / C
    if weight is not None:
        p2 = p2 * weight.astype(x.dtype)
    rows = -ops.sum(ops.log_softmax(x2, axis=1) * p2, axis=1)
    return _reduce(rows, reduction, out_shape, x2.shape[0])


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of log-probabilities ``input`` (as
    ``torch.nn.functional.nll_loss``, arguments in its order): row i
    contributes ``-w[y_i] input[i, y_i]``."""
    who = "nll_loss"
    return _nll(who, input, target, _weight(who, weight), _ignore_index(who, ignore_index),
                _reduction(who, size_average, reduce, reduction))


def _nll(who, input, target, weight, ignore_index, reduction):
    x = _float_input(who, input)
    x2, t, out_shape, C = _rows(who, x, _class_targets(who, target), False)
    t0, w, _ = _kept(who, t, C, weight, ignore_index, x.dtype)
    picked = ops.reshape(ops.gather(x2, 1, ops.reshape(t0, -1, 1)), -1)      # x2[i, t0[i]]
    return _reduce(picked * (-w), reduction, out_shape, ops.sum(w))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Squared error ``(input - target)^2``, averaged, summed or per element (as
    ``torch.nn.functional.mse_loss``, arguments in its order). The shapes
    must be equal (PyTorch broadcasts them with a warning; here that is an
    error). ``weight`` (the input's shape) multiplies each element's error;
    'mean' then divides by ``sum(weight)``, as PyTorch."""
    who = "mse_loss"
    return _mse(who, input, target, _reduction(who, size_average, reduce, reduction), weight)


def _same_shape_target(who, x, target):
    y = as_value(target)
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"{who}: target.shape={tuple(y.shape)} does not match input.shape={tuple(x.shape)}")
    return y


def _elementwise_weight(who, weight, x, what="weight"):
    """A weight that broadcasts to the input's shape, as an array or a value of the graph."""
    if weight is None:
        return None
    w = as_value(weight)
    ws, xs = tuple(w.shape), tuple(x.shape)
    # numpy's rule, a static graph's unknown (None) input dimensions matching anything
    if len(ws) > len(xs) or not all(a == 1 or b is None or a == b for a, b in zip(ws[::-1], xs[::-1])):
        raise ValueError(f"{who}: {what}.shape={tuple(w.shape)} does not broadcast to input.shape={tuple(x.shape)}")
    return w


def _mse(who, input, target, reduction, weight=None):
    x = _float_input(who, input)
    y = _same_shape_target(who, x, target)
    d = x - y
    sq = d * d
    if weight is not None:
        w = _elementwise_weight(who, weight, x)
        if tuple(w.shape) != tuple(x.shape):
            raise ValueError(f"{who}: weight.shape={tuple(w.shape)} must equal input.shape={tuple(x.shape)}")
        sq = sq * w
        if reduction == "mean":
            return ops.sum(sq) / ops.sum(w)
    if reduction == "none":
        return sq
    return ops.sum(sq) if reduction == "sum" else ops.mean(sq)


def _reduce_all(losses, reduction):
    if reduction == "none":
        return losses
    return ops.sum(losses) if reduction == "sum" else ops.mean(losses)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """Binary cross-entropy of logits, as ``torch.nn.functional.binary_cross_entropy_with_logits``:
    per element ``-w (pw t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x)))``,
    then reduced ('mean' over all elements).

    Parameters
    ----------
    input : float array (any shape)
        Logits.
    target : float array of the input's shape
        Targets in [0, 1] (probabilities allowed); they get gradients too.
    weight : array broadcasting to the input's shape, or None
        Per-element rescaling.
    size_average, reduce : bool or None
        PyTorch's deprecated flags.
    reduction : {'mean', 'sum', 'none'}
    pos_weight : array broadcasting to the input's shape (e.g. (C,)), or None
        Weight of the positive term, per class.

    One primitive (``sigmoid_cross_entropy``) computes
    ``(1 - t) x + (1 + (pw - 1) t) log(1 + exp(-x))`` from ``exp(-|x|)`` and
    ``log1p``: no overflow and no loss of tiny values for any ``|x|``.
    """
    who = "binary_cross_entropy_with_logits"
    return _bce_logits(who, input, target, weight, _reduction(who, size_average, reduce, reduction), pos_weight)


def _bce_logits(who, input, target, weight, reduction, pos_weight):
    x = _float_input(who, input)
    t = _float_input(who, _same_shape_target(who, x, target), "target")
    w = _elementwise_weight(who, weight, x)
    pw = _elementwise_weight(who, pos_weight, x, "pos_weight")
    losses = ops.sigmoid_cross_entropy(x, t, pw)
    if w is not None:
        losses = losses * w
    return _reduce_all(losses, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Binary cross-entropy of probabilities, as ``torch.nn.functional.binary_cross_entropy``:
    per element ``-w (t log(x) + (1 - t) log(1 - x))`` with each log clamped
    at -100 (PyTorch's clamp, so x = 0 or 1 gives a finite loss), then reduced;
    the gradients are PyTorch's (one primitive, ``binary_cross_entropy``).
    ``input`` must lie in [0, 1] (checked, as PyTorch, for eager values);
    :func:`binary_cross_entropy_with_logits` is the stable form for logits."""
    who = "binary_cross_entropy"
    return _bce(who, input, target, weight, _reduction(who, size_average, reduce, reduction))


def _bce(who, input, target, weight, reduction):
    x = _float_input(who, input)
    t = _float_input(who, _same_shape_target(who, x, target), "target")
    if np.dtype(t.dtype) != np.dtype(x.dtype):
        # torch refuses ("Found dtype Double but expected Float") where numpy would promote
        raise DTypeError(f"{who}: target has dtype {np.dtype(t.dtype)}, but input has dtype {np.dtype(x.dtype)}; "
                         f"they must be the same, as in torch: cast the target (target.to(input.dtype))")
    w = _elementwise_weight(who, weight, x)
    a = concrete(x)
    if a is not None:       # values known now: checked now, as PyTorch
        if a.size and not (np.all(a >= 0) and np.all(a <= 1)):
            bad = a[~((a >= 0) & (a <= 1))].reshape(-1)[0]
            raise ValueError(f"{who}: every element of input must be in [0, 1] (probabilities; for logits use "
                             f"binary_cross_entropy_with_logits), got {bad}")
    losses = ops.binary_cross_entropy(x, t)
    if w is not None:
        losses = losses * w
    return _reduce_all(losses, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """The Kullback-Leibler divergence ``target * (log(target) - input)`` of
    log-probabilities ``input`` from ``target`` (probabilities, or
    log-probabilities with ``log_target=True``: ``exp(target) * (target -
    input)``), as ``torch.nn.functional.kl_div``; 0 where ``target`` is 0.

    ``reduction``: ``'batchmean'`` (the sum over the batch size
    ``input.shape[0]``: the KL divergence's definition), ``'sum'``,
    ``'none'``, or ``'mean'`` (over every element, with torch's warning
    that this is not the divergence). Gradients flow to both arguments;
    where ``target`` is 0 its own gradient is 0 (torch's is nan: the
    derivative of ``t log t`` is unbounded there).
    """
    who = "kl_div"
    if reduction != "batchmean":
        reduction = _reduction(who, size_average, reduce, reduction)
    elif size_average is not None or reduce is not None:
        reduction = _reduction(who, size_average, reduce, "mean")
    if not isinstance(log_target, (bool, np.bool_)):
        raise TypeError(f"{who}: log_target must be a bool, got {log_target!r}")
    x = _float_input(who, input)
    t = _float_input(who, target, "target")
    if log_target:
        losses = ops.exp(t) * (t - x)
    else:
        # torch's xlogy: 0 where target is 0 (nan for a negative one). The log of 1 there keeps
        # the forward free of log(0) (a static plan would warn on every run); so the gradient
        # of a zero target is 0 here, where torch's is nan
        nz = t != 0
        losses = ops.where(nz, t * (ops.log(ops.where(nz, t, 1.0)) - x), 0.0)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    if reduction != "batchmean":
        return _reduce_all(losses, reduction)
    nd = len(tuple(losses.shape))
    if nd == 0:
        return losses
    if nd == 1:
        return ops.mean(losses)
    # sum / batch size: the mean over axis 0 of the per-row sums (also when the batch size is unknown)
    return ops.mean(ops.sum(losses, tuple(range(1, nd))))


class _Loss(Module):
    def __init__(self, size_average, reduce, reduction):
        super().__init__()
        self.reduction = _reduction(type(self).__name__, size_average, reduce, reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class _WeightedLoss(_Loss):
    def __init__(self, weight, size_average, reduce, reduction):
        super().__init__(size_average, reduce, reduction)
        w = _weight(type(self).__name__, weight)
        if w is None:
            self.weight = None
        else:
            self.register_buffer("weight", w)


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross-entropy of class scores (as ``torch.nn.CrossEntropyLoss``,
    arguments in its order).

    Parameters
    ----------
    weight : (C,) array or None
        Per-class weights (a constant, saved as a buffer).
    size_average, reduce : bool or None
        PyTorch's deprecated flags; they override ``reduction``.
    ignore_index : int, default -100
        Rows whose target is this class index are dropped (class-index targets only).
    reduction : {'mean', 'sum', 'none'}
    label_smoothing : float in [0, 1]
        The target becomes ``(1 - eps) * onehot + eps / C``; with class
        indices the loss is ``(1 - eps) * nll + eps / C * sum_c -w_c log p_c``,
        reduced as PyTorch does (the smoothing term of ``'mean'`` is divided
        by the kept rows' total weight too).

    Notes
    -----
    ``forward(input, target)``: ``input`` scores (N, C), (C,) or (N, C, d1, ...);
    ``target`` integer class indices (N,), () or (N, d1, ...), or class
    probabilities of the input's shape (then ``'mean'`` divides by the
    number of rows, N * d1 * ..., and ``ignore_index`` does not apply).
    Without weight, ignored rows or smoothing, class-index targets run the
    one fused ``softmax_cross_entropy`` kernel. The same as
    :func:`cross_entropy` with these arguments.
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = _ignore_index("CrossEntropyLoss", ignore_index)
        self.label_smoothing = _smoothing("CrossEntropyLoss", label_smoothing)

    def forward(self, input, target):
        return _cross_entropy("CrossEntropyLoss", input, target, self.weight, self.ignore_index, self.reduction,
                              self.label_smoothing)

    def extra_repr(self):
        s = super().extra_repr()
        if self.ignore_index != -100:
            s += f", ignore_index={self.ignore_index}"
        if self.label_smoothing:
            s += f", label_smoothing={self.label_smoothing}"
        return s


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities (as ``torch.nn.NLLLoss``,
    arguments in its order); combine with ``log_softmax`` for a cross-entropy.

    Parameters
    ----------
    weight : (C,) array or None
    size_average, reduce : bool or None
        PyTorch's deprecated flags.
    ignore_index : int, default -100
    reduction : {'mean', 'sum', 'none'}

    Notes
    -----
    ``forward(input, target)``: ``input`` (N, C), (C,) or (N, C, d1, ...)
    log-probabilities, ``target`` class indices (N,), () or (N, d1, ...).
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = _ignore_index("NLLLoss", ignore_index)

    def forward(self, input, target):
        return _nll("NLLLoss", input, target, self.weight, self.ignore_index, self.reduction)


class MSELoss(_Loss):
    """Mean squared error (as ``torch.nn.MSELoss(size_average=None,
    reduce=None, reduction='mean')``): ``(input - target)^2`` reduced by
    ``reduction``; input and target of the same shape. Pass ``reduction`` by
    keyword: the first positional argument is PyTorch's deprecated
    ``size_average`` flag (``MSELoss('sum')`` raises)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)

    def forward(self, input, target):
        return _mse("MSELoss", input, target, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of logits (as ``torch.nn.BCEWithLogitsLoss``);
    see :func:`binary_cross_entropy_with_logits`.

    Parameters
    ----------
    weight : array or None
        Per-element rescaling, broadcast to the input (a buffer).
    size_average, reduce : bool or None
        PyTorch's deprecated flags.
    reduction : {'mean', 'sum', 'none'}
    pos_weight : array or None
        Weight of the positive term, broadcast to the input, e.g. (C,) (a buffer).

    Notes
    -----
    ``forward(input, target)``: logits and targets in [0, 1] of one shape.
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        for name, v in (("weight", weight), ("pos_weight", pos_weight)):
            if v is None:
                object.__setattr__(self, name, None)
            else:
                self.register_buffer(name, v.numpy() if isinstance(v, Tensor) else v)

    def forward(self, input, target):
        return _bce_logits("BCEWithLogitsLoss", input, target, self.weight, self.reduction, self.pos_weight)


class KLDivLoss(_Loss):
    """The Kullback-Leibler divergence (as ``torch.nn.KLDivLoss``); see
    :func:`kl_div`. ``forward(input, target)``: log-probabilities and
    probabilities (log-probabilities with ``log_target=True``).

    Parameters
    ----------
    size_average, reduce : bool or None
        PyTorch's deprecated flags.
    reduction : {'mean', 'batchmean', 'sum', 'none'}
        ``'batchmean'`` is the divergence's definition; ``'mean'`` (torch's
        default) averages over every element, with torch's warning.
    log_target : bool
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        if reduction == "batchmean" and size_average is None and reduce is None:
            Module.__init__(self)
            self.reduction = "batchmean"
        else:
            super().__init__(size_average, reduce, reduction)
        self.log_target = bool(log_target)

    def forward(self, input, target):
        return kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(_Loss):
    """Binary cross-entropy of probabilities in [0, 1] (as ``torch.nn.BCELoss``);
    see :func:`binary_cross_entropy` (:class:`BCEWithLogitsLoss` is the
    stable form for logits).

    Parameters
    ----------
    weight : array or None
        Per-element rescaling, broadcast to the input (a buffer).
    size_average, reduce : bool or None
    reduction : {'mean', 'sum', 'none'}
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if weight is None:
            object.__setattr__(self, "weight", None)
        else:
            self.register_buffer("weight", weight.numpy() if isinstance(weight, Tensor) else weight)

    def forward(self, input, target):
        return _bce("BCELoss", input, target, self.weight, self.reduction)


# --- L1, smooth L1 and Huber losses (branch i22-torch-b) ---------------------------
#
# As mse_loss: input and target of one shape (torch broadcasts them with a
# warning, here that is an error); ``weight`` (torch >= 2.6) of the input's
# shape, with torch's 'mean' for each: l1 divides by sum(weight), huber by the
# number of elements.

def _weighted(who, losses, x, weight, reduction, mean_over_weight):
    if weight is None:
        return _reduce_all(losses, reduction)
    w = _elementwise_weight(who, weight, x)
    if tuple(w.shape) != tuple(x.shape):
        raise ValueError(f"{who}: weight.shape={tuple(w.shape)} must equal input.shape={tuple(x.shape)}")
    losses = losses * w
    if reduction == "mean" and mean_over_weight:
        return ops.sum(losses) / ops.sum(w)
    return _reduce_all(losses, reduction)


def _l1(who, input, target, reduction, weight=None):
    x = _float_input(who, input)
    d = ops.abs(x - _same_shape_target(who, x, target))
    return _weighted(who, d, x, weight, reduction, True)


def _smooth_l1(who, input, target, reduction, beta, scale_by_beta):
    """Huber's function of ``d = input - target``: ``0.5 d^2 / beta`` where
    ``|d| < beta``, else ``|d| - 0.5 beta`` (smooth L1); Huber's loss is that
    times ``beta`` (``scale_by_beta``)."""
    x = _float_input(who, input)
    d = x - _same_shape_target(who, x, target)
    ad = ops.abs(d)
    if scale_by_beta:
        return ops.where(ops.lt(ad, beta), 0.5 * d * d, beta * (ad - 0.5 * beta))
    if beta == 0:
        return ad
    return ops.where(ops.lt(ad, beta), (0.5 / beta) * d * d, ad - 0.5 * beta)


def _beta(who, name, v, positive):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{who}: {name} must be a number, got {v!r}")
    if (v <= 0) if positive else (v < 0):
        raise ValueError(f"{who}: {name} must be {'> 0' if positive else '>= 0'}, got {v}")
    return float(v)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Absolute error ``|input - target|``, averaged, summed or per element, as
    ``torch.nn.functional.l1_loss`` (the gradient at 0 is 0, as torch's)."""
    who = "l1_loss"
    return _l1(who, input, target, _reduction(who, size_average, reduce, reduction), weight)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Smooth L1: ``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``
    (``d = input - target``; ``beta=0``: the L1 loss), as
    ``torch.nn.functional.smooth_l1_loss``."""
    who = "smooth_l1_loss"
    reduction = _reduction(who, size_average, reduce, reduction)
    return _reduce_all(_smooth_l1(who, input, target, reduction, _beta(who, "beta", beta, False), False), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """Huber: ``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``,
    as ``torch.nn.functional.huber_loss``."""
    who = "huber_loss"
    reduction = _check_reduction(who, reduction)
    x = _float_input(who, input)
    losses = _smooth_l1(who, x, target, reduction, _beta(who, "delta", delta, True), True)
    return _weighted(who, losses, x, weight, reduction, False)


class L1Loss(_Loss):
    """Mean absolute error, as ``torch.nn.L1Loss(size_average=None,
    reduce=None, reduction='mean')`` (see :func:`l1_loss`)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)

    def forward(self, input, target):
        return _l1("L1Loss", input, target, self.reduction)


class SmoothL1Loss(_Loss):
    """Smooth L1 loss, as ``torch.nn.SmoothL1Loss(size_average=None,
    reduce=None, reduction='mean', beta=1.0)`` (see :func:`smooth_l1_loss`)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = _beta("SmoothL1Loss", "beta", beta, False)

    def forward(self, input, target):
        return _reduce_all(_smooth_l1("SmoothL1Loss", input, target, self.reduction, self.beta, False),
                           self.reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, beta={self.beta}"


class HuberLoss(_Loss):
    """Huber loss, as ``torch.nn.HuberLoss(reduction='mean', delta=1.0)`` (see :func:`huber_loss`)."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(None, None, reduction)
        self.delta = _beta("HuberLoss", "delta", delta, True)

    def forward(self, input, target):
        return _reduce_all(_smooth_l1("HuberLoss", input, target, self.reduction, self.delta, True),
                           self.reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, delta={self.delta}"


__all__ += ["l1_loss", "smooth_l1_loss", "huber_loss", "L1Loss", "SmoothL1Loss", "HuberLoss"]
