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

Numba's ``parallel=True`` kernels (the ragged attention's, the layer norm's)
run on Numba's own threads: :func:`set_num_threads` (torch's name) and
:func:`blas_threads` set those too, so one count governs every thread pool
dynnets uses.
"""
from __future__ import annotations

import contextlib

__all__ = ["blas_threads", "blas_thread_counts", "set_num_threads", "get_num_threads"]


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
    import numba
    from threadpoolctl import threadpool_limits
    before = numba.get_num_threads()
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        with threadpool_limits(limits=n, user_api="blas"):
            yield
    finally:
        numba.set_num_threads(before)


def blas_thread_counts():
    """``{library file name: threads}`` of every BLAS library loaded in this process."""
    from threadpoolctl import threadpool_info
    return {d["filepath"].rsplit("/", 1)[-1]: d["num_threads"] for d in threadpool_info()
            if d.get("user_api") == "blas"}


def set_num_threads(n):
    """Use ``n`` threads for intra-op parallelism, as ``torch.set_num_threads``:
    numpy's BLAS (every loaded BLAS library, through threadpoolctl) and Numba's
    parallel kernels.

    Numba cannot start more threads than it was launched with
    (``NUMBA_NUM_THREADS``, the number of cores by default), so its kernels use
    ``min(n, numba.config.NUMBA_NUM_THREADS)``; and its count belongs to the
    calling Python thread (``numba.set_num_threads``), while the BLAS count is
    the whole process's. Results do not depend on ``n``.

    Parameters
    ----------
    n : int
        A positive thread count.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_threads: expected a positive int, got {type(n).__name__} {n!r}")
    if n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n}")
    import numba
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=n, user_api="blas")
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def get_num_threads():
    """The intra-op thread count, as ``torch.get_num_threads``: numpy's BLAS
    threads (the largest count of the loaded BLAS libraries; Numba's count
    where no BLAS library is loaded). After ``set_num_threads(n)`` it is ``n``."""
    counts = blas_thread_counts()
    if counts:
        return max(counts.values())
    import numba
    return numba.get_num_threads()
