"""The thread count of the BLAS libraries in this process, for the duration of a call.

:func:`dynnets.train.train`, :func:`~dynnets.train.evaluate` and
:func:`~dynnets.train.predict` (and so every ``dynnets`` command) run inside
:func:`blas_threads` with one thread by default (``TrainConfig.blas_threads``).
The models multiply small matrices (a minibatch's tree level, one node, one
time step): splitting such a product over threads costs more than it saves,
and on a loaded machine each multi-threaded product waits for a busy core.
Measured from Python, a Tree-LSTM (300/150) on the samples, 200 steps:
``benchmarks/bench_blas_threads.py`` (figures in docs/howto/installed-use.md).

The BLAS in play is numpy's: the Numba kernels call no BLAS (they leave the
products to numpy, see :mod:`dynnets.autograd.kernels`), so SciPy is not
needed and not loaded. threadpoolctl limits every BLAS library loaded in the
process when the block starts and restores each one's count after it.
"""
from __future__ import annotations

import contextlib

__all__ = ["blas_threads", "blas_thread_counts"]


@contextlib.contextmanager
def blas_threads(n):
    """Run the block with every loaded BLAS library on ``n`` threads, restored after.

    Parameters
    ----------
    n : int or None
        Threads; ``None`` or 0 leaves the thread counts as they are.
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise ValueError(f"blas_threads: expected a thread count >= 0 or None, got {n!r}")
    if not n:
        yield
        return
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=n, user_api="blas"):
        yield


def blas_thread_counts():
    """``{library file name: threads}`` of every BLAS library loaded in this process."""
    from threadpoolctl import threadpool_info
    return {d["filepath"].rsplit("/", 1)[-1]: d["num_threads"] for d in threadpool_info()
            if d.get("user_api") == "blas"}
