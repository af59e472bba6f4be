"""Gradient utilities: global-norm clipping and calling a module with
substituted parameters; packed sequences in :mod:`dynnets.nn.utils.rnn`."""
from __future__ import annotations

import contextlib
import math

import numpy as np

from ...autograd.primitives import RowSparse
from ...autograd.tensor import Tensor, wrap_array
from . import rnn

__all__ = ["clip_grad_norm_", "functional_call", "rnn"]


def _params_list(parameters):
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale gradients so their global norm is at most ``max_norm`` (as
    ``torch.nn.utils.clip_grad_norm_``).

    The norm is taken over all gradients together, as if concatenated into one
    vector. A row-sparse gradient contributes the norm of its coalesced values
    (duplicate rows summed first); its ``raw_grad`` is replaced by the coalesced
    form. Gradients are never modified in place (another tensor may hold the
    same array): each clipped ``p.raw_grad`` is reassigned to a new array.

    Parameters
    ----------
    parameters : Tensor or iterable of Tensors
        Tensors without a gradient are ignored.
    max_norm : float
    norm_type : float
        2.0 (default), any p > 0, or ``math.inf`` (the largest absolute value).
    error_if_nonfinite : bool
        Raise ``RuntimeError`` if the total norm is NaN or inf.

    Returns
    -------
    Tensor, ()
        The total norm of the gradients before clipping, as torch's: a 0-d
        tensor (``.item()`` is the number) in the gradients' dtype; 0.0 when
        no parameter has a gradient. A NaN norm (without
        ``error_if_nonfinite``) makes every gradient NaN, as torch's.
    """
    params = [p for p in _params_list(parameters) if p.raw_grad is not None]
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if max_norm < 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be non-negative, got {max_norm}")
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be positive or inf, got {norm_type}")
    if not params:
        return wrap_array(np.zeros((), np.float32))
    vals = []
    for p in params:
        g = p.raw_grad
        if type(g) is RowSparse:
            g = g.coalesce()
            p.raw_grad = g
            g = g.values
        vals.append(g.reshape(-1))
    if norm_type == math.inf:
        total = max(float(np.max(np.abs(v))) if v.size else 0.0 for v in vals)
    elif norm_type == 2.0:
        # per-tensor dot products in the gradient's dtype (BLAS), summed in Python floats
        total = math.sqrt(sum(float(np.dot(v, v)) for v in vals))
    else:
        total = sum(float(np.sum(np.abs(v) ** norm_type)) for v in vals) ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is {total}; "
                           f"pass error_if_nonfinite=False to clip anyway")
    coef = max_norm / (total + 1e-6)
    # torch multiplies by clamp(coef, max=1): a NaN coefficient (NaN norm) spreads to every gradient
    if coef < 1.0 or coef != coef:
        for p in params:
            g = p.raw_grad
            if type(g) is RowSparse:
                p.raw_grad = RowSparse(g.rows, g.values * coef, g.shape)
            else:
                p.raw_grad = g * coef
    dt = np.result_type(*[v.dtype for v in vals])
    return wrap_array(np.array(total, dtype=dt if dt.kind == "f" else np.float32))


@contextlib.contextmanager
def _substituted(module, params):
    lookup = dict(module.named_modules())
    saved = []
    try:
        for name, value in params.items():
            owner_name, _, attr = name.rpartition(".")
            owner = lookup.get(owner_name)
            if owner is None or attr not in dict(owner.named_parameters(recurse=False)):
                raise KeyError(f"functional_call: {type(module).__name__} has no parameter {name!r}")
            saved.append((owner, attr, owner.__dict__[attr]))
            # bypass Module.__setattr__: the registered Parameter stays registered
            object.__setattr__(owner, attr, value)
        yield
    finally:
        for owner, attr, old in reversed(saved):
            object.__setattr__(owner, attr, old)


def functional_call(module, params, *args, **kwargs):
    """Call ``module(*args, **kwargs)`` with some parameters replaced by the
    tensors in ``params`` (dotted name -> Tensor), as
    ``torch.func.functional_call``. The module is restored afterwards, even on
    error. Useful to check a module's gradients against finite differences::

        names = [n for n, _ in cell.named_parameters()]
        gradcheck(lambda x, *ps: functional_call(cell, dict(zip(names, ps)), x),
                  [x] + [p.data for p in cell.parameters()])
    """
    with _substituted(module, params):
        return module(*args, **kwargs)


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of :func:`clip_grad_norm_` (as torch's, with its
    ``FutureWarning``); ``foreach`` (how torch groups its kernels) changes nothing."""
    import warnings
    warnings.warn("`dynnets.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`dynnets.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)


__all__ += ["clip_grad_norm"]


# --- i22-torch-a ----------------------------------------------------------------------------------------


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clip every gradient elementwise into ``[-clip_value, clip_value]``, as
    ``torch.nn.utils.clip_grad_value_`` (returns None). As
    :func:`clip_grad_norm_`, each clipped ``p.raw_grad`` is reassigned to a
    new array rather than changed in place (another tensor may hold the same
    array); a row-sparse gradient stays row-sparse (its values clipped after
    duplicate rows are summed, so the dense gradient is what is clipped).
    ``foreach`` (how torch groups its kernels) changes nothing.

    Parameters
    ----------
    parameters : Tensor or iterable of Tensors
        Tensors without a gradient are ignored.
    clip_value : float
        Non-negative.
    """
    if isinstance(clip_value, bool) or not isinstance(clip_value, (int, float, np.integer, np.floating)):
        raise TypeError(f"clip_grad_value_: clip_value must be a number, got {type(clip_value).__name__}")
    c = float(clip_value)
    if not c >= 0:
        raise ValueError(f"clip_grad_value_: clip_value must be non-negative, got {clip_value}")
    for p in _params_list(parameters):
        g = p.raw_grad
        if g is None:
            continue
        if type(g) is RowSparse:
            g = g.coalesce()
            p.raw_grad = RowSparse(g.rows, np.clip(g.values, -c, c), g.shape)
        else:
            p.raw_grad = np.clip(g, -c, c)


__all__ += ["clip_grad_value_"]
