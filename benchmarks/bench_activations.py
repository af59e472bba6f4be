"""Gate activations: cost per element and accuracy of the kernels' vectorised
sigmoid/tanh against the alternatives, on blocks the size of one Tree-LSTM
level's gates (rows x 750).

Contenders, per element (ns), each alone and right after a 2-thread BLAS
product (as in a model, where the kernels run between products):

* ``numba libm``     -- a Numba loop calling scalar exp (no SVML: one libm call per element);
* ``numpy``          -- numpy's SIMD ufuncs (``np.exp`` + reciprocal for sigmoid; ``np.tanh``);
* ``vectorised``     -- the kernels' inlined scalar sigmoid (``kernels_tree._sigmoid``), which LLVM vectorises;
* ``vectorised prange`` -- the same over rows with ``parallel=True`` (Numba's threads).

Then the accuracy of the kernels' sigmoid and tanh over the whole finite
range (log-uniform magnitudes, both signs, plus the gate range) in ulp of the
long-double value, and what they return for NaN and ±inf.

    python benchmarks/bench_activations.py
    OPENBLAS_NUM_THREADS=2 OPENBLAS_THREAD_TIMEOUT=20 python benchmarks/bench_activations.py   # as bench_treelstm

It imports the private activation helper on purpose: that helper is what it measures.
"""
import argparse
import os
import time

import numba
import numpy as np
from numba import njit, prange

from dynnets.autograd import kernels_tree as K

_sigmoid, _FM = K._sigmoid, K._FM
JO = dict(fastmath=_FM, nogil=True, error_model="numpy")


@njit(nogil=True)
def libm_sigmoid(x, o):
    for r in range(x.shape[0]):
        for j in range(x.shape[1]):
            v = x[r, j]
            if v >= 0:
                o[r, j] = 1.0 / (1.0 + np.exp(-v))
            else:
                e = np.exp(v)
                o[r, j] = e / (1.0 + e)


@njit(**JO)
def vec_sigmoid(x, o):
    for r in range(x.shape[0]):
        a, b = x[r], o[r]
        for j in range(a.shape[0]):
            b[j] = _sigmoid(a[j])


@njit(parallel=True, **JO)
def par_sigmoid(x, o):
    for r in prange(x.shape[0]):
        a, b = x[r], o[r]
        for j in range(a.shape[0]):
            b[j] = _sigmoid(a[j])


def np_sigmoid(x, o):
    np.negative(x, out=o)
    np.exp(o, out=o)
    o += 1
    np.reciprocal(o, out=o)


CONTENDERS = {"numba libm sigmoid": libm_sigmoid, "numpy sigmoid": np_sigmoid,
              "np.tanh": lambda x, o: np.tanh(x, out=o), "vectorised sigmoid": vec_sigmoid,
              "vectorised prange sigmoid": par_sigmoid}


def time_per_element(f, x, o, blas, n):
    A, W, C = blas
    f(x, o)
    ts = []
    for _ in range(n):
        if A is not None:
            np.matmul(A, W, out=C)
        t = time.perf_counter()
        f(x, o)
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) / x.size * 1e9


def accuracy(dtype, n=200000):
    rng = np.random.default_rng(0)
    fi = np.finfo(dtype)
    mags = np.exp(rng.uniform(np.log(fi.smallest_subnormal), np.log(fi.max), n))
    x = np.concatenate([mags, -mags, rng.uniform(-30, 30, n), rng.uniform(-1, 1, n),
                        np.linspace(-88.5, -86.5, 2000), np.linspace(-709.5, -707.5, 2000)]).astype(dtype)
    x = x[np.isfinite(x)]
    m = x.size
    s, a = np.zeros((1, 2 * m), dtype), np.zeros((1, 3 * m), dtype)
    K.tree_lstm_leaf_node_fwd(np.tile(x, 3)[None, :], np.zeros(3 * m, dtype), s, a)
    h = np.zeros((1, m), dtype)
    K.tanh_rows_fwd(x[None, :].copy(), np.zeros(m, dtype), 0, h)
    xe = x.astype(np.longdouble)
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp(-np.abs(xe))
        refs = {"sigmoid": (a[0, :m], np.where(xe >= 0, 1 / (1 + e), e / (1 + e))),
                "tanh": (h[0], np.tanh(xe)), "np.tanh": (np.tanh(x), np.tanh(xe))}
    for name, (got, ref) in refs.items():
        normal = np.abs(ref) >= fi.tiny
        ulp = np.spacing(np.abs(ref.astype(dtype))).astype(np.longdouble)
        u = (np.abs(got.astype(np.longdouble) - ref) / ulp)[normal]
        print(f"{np.dtype(dtype).name} {name:8s}: max {float(u.max()):.2f} ulp, 99.99% {float(np.quantile(u, 0.9999)):.2f} ulp "
              f"over {normal.sum()} normal results")
    sp, ap = np.zeros((1, 6), dtype), np.zeros((1, 9), dtype)
    special = np.array([np.nan, np.inf, -np.inf], dtype)
    K.tree_lstm_leaf_node_fwd(np.tile(special, 3)[None, :], np.zeros(9, dtype), sp, ap)
    hp = np.zeros((1, 3), dtype)
    K.tanh_rows_fwd(special[None, :].copy(), np.zeros(3, dtype), 0, hp)
    print(f"{np.dtype(dtype).name} nan, inf, -inf -> sigmoid {ap[0, :3]}, tanh {hp[0]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1,4,25,100,200")
    ap.add_argument("--repeats", type=int, default=400, help="timed calls per contender (median)")
    ap.add_argument("--seed", type=int, default=0)
    opts = ap.parse_args()
    rng = np.random.default_rng(opts.seed)
    print(f"# numba {numba.__version__}, {numba.get_num_threads()} threads; OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS')}, OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT')}")
    for dt in (np.float32, np.float64):
        blas = (rng.standard_normal((25, 300)).astype(dt), rng.standard_normal((300, 750)).astype(dt),
                np.empty((25, 750), dt))
        print(f"\n## {np.dtype(dt).name}, ns per element (median of {opts.repeats} calls): alone / right after a BLAS product")
        print("| rows x 750 | " + " | ".join(CONTENDERS) + " |")
        print("|" + " --- |" * (len(CONTENDERS) + 1))
        for rows in map(int, opts.rows.split(",")):
            x = (rng.standard_normal((rows, 750)) * 3).astype(dt)
            o = np.empty_like(x)
            cells = []
            for f in CONTENDERS.values():
                alone = time_per_element(f, x, o, (None, None, None), opts.repeats)
                after = time_per_element(f, x, o, blas, opts.repeats)
                cells.append(f"{alone:.2f} / {after:.2f}")
            print(f"| {rows} | " + " | ".join(cells) + " |")
    print()
    for dt in (np.float32, np.float64):
        accuracy(dt)


if __name__ == "__main__":
    main()
