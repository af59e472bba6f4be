"""dn.set_num_threads / dn.get_num_threads (torch's names): one count for
numpy's BLAS and for dynnets' own threads (Numba's count, which the ragged
attention reads), and blas_threads() setting both for a block."""
import numba
import pytest

import dynnets as dn
from dynnets.blas import blas_thread_counts, blas_threads


@pytest.fixture
def restore_threads():
    from threadpoolctl import threadpool_limits
    numba_before = numba.get_num_threads()
    with threadpool_limits(limits=None, user_api="blas") as limits:
        yield
        limits.restore_original_limits()
    numba.set_num_threads(numba_before)


@pytest.mark.parametrize("n", [1, 2])
def test_set_num_threads_sets_blas_and_numba(restore_threads, n):
    dn.set_num_threads(n)
    assert dn.get_num_threads() == n
    assert set(blas_thread_counts().values()) == {n}
    assert numba.get_num_threads() == min(n, numba.config.NUMBA_NUM_THREADS)


def test_more_threads_than_numba_started_caps_numba_only(restore_threads):
    n = numba.config.NUMBA_NUM_THREADS + 3
    dn.set_num_threads(n)
    assert dn.get_num_threads() == n                # as torch: the count set is the count read
    assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS


@pytest.mark.parametrize("bad, err, msg", [(0, ValueError, "expected a positive int, got 0"),
                                           (-2, ValueError, "expected a positive int, got -2"),
                                           (1.5, TypeError, "expected a positive int, got float 1.5"),
                                           (True, TypeError, "expected a positive int, got bool True")])
def test_set_num_threads_rejects_what_torch_rejects(restore_threads, bad, err, msg):
    with pytest.raises(err, match="set_num_threads: " + msg):
        dn.set_num_threads(bad)


def test_blas_threads_block_sets_numba_threads_and_restores_them(restore_threads):
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    with blas_threads(1):
        assert numba.get_num_threads() == 1
        assert set(blas_thread_counts().values()) == {1}
    assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS
    with pytest.raises(KeyError), blas_threads(1):
        raise KeyError("x")
    assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS
