"""Numba kernels for optimizer updates: one pass over the arrays instead of
numpy's chain of whole-array operations and temporaries.

The numpy twins are the block update rules in :mod:`dynnets.nn.optim`
(``_adagrad_block``); ``tests/nn/test_optim_kernels.py`` compares the two,
also under ``NUMBA_DISABLE_JIT=1``.

Conventions (those of :mod:`dynnets.autograd.kernels_tree`): arrays are
C-contiguous, of one float dtype, and not validated (the optimizer checks
them first); results are written in place into the documented buffers; no
module globals, no jitted calls across files. Scalars arrive as a small array
of the data's dtype (``scal``) so that float32 data are updated in float32
arithmetic, the same operations in the same order as the numpy twin, which
they match to within one unit in the last place (tested).
"""

import numpy as np
from numba import njit


@njit(cache=True, error_model="numpy")
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
    clr = scal[0]
    eps = scal[1]
    for i in range(p.shape[0]):
        gi = g[i]
        s = acc[i] + gi * gi
        acc[i] = s
        p[i] = p[i] - (gi / (np.sqrt(s) + eps)) * clr


@njit(cache=True, error_model="numpy")
def adagrad_rows(p, acc, rows, vals, scal):
    """Row-sparse Adagrad step in place on the listed rows only.

    Parameters
    ----------
    p, acc : (V, D) float
        Parameter and accumulator, updated in place on ``rows``.
    rows : (k,) int64
        Unique row indices (a coalesced gradient; a repeated row would be
        updated twice instead of once with the summed gradient).
    vals : (k, D) float
        Gradient rows.
    scal : (2,) float
        ``(clr, eps)`` in the dtype of ``p``.
    """
    clr = scal[0]
    eps = scal[1]
    D = p.shape[1]
    for k in range(rows.shape[0]):
        r = rows[k]
        pr = p[r]
        ar = acc[r]
        gr = vals[k]
        for j in range(D):
            gj = gr[j]
            s = ar[j] + gj * gj
            ar[j] = s
            pr[j] = pr[j] - (gj / (np.sqrt(s) + eps)) * clr
