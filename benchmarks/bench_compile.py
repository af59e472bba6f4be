"""Time of the first call of every kernel in ``dynnets.autograd.kernels``
and ``dynnets.autograd.kernels_tree``.

Each run is a fresh interpreter that imports both kernel modules and calls
every kernel once on small float32 inputs, then once on float64 inputs; the
first call pays for compilation (cold) or for loading Numba's on-disk cache
(warm). Each module is reported with its own table and totals.

    python benchmarks/bench_compile.py            # warm: reuse the cache
    python benchmarks/bench_compile.py --cold     # delete both modules' caches first
    python benchmarks/bench_compile.py --cold --repeat 3   # medians of 3 runs
    python benchmarks/bench_compile.py --modules kernels_tree   # one module
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AUTOGRAD = ROOT / "dynnets" / "autograd"
MODULES = ("kernels", "kernels_tree")
DTYPES = ("float32", "float64")


def _args(name, dtype, seed=0, B=2, H=3, C=5, V=4):
    """Small inputs with the right shapes and dtypes (values do not matter to
    the timings; ``seed`` fixes them all the same)."""
    import numpy as np

    rng = np.random.default_rng(seed)

    def f(*shape):
        return rng.standard_normal(shape).astype(dtype)

    ids = rng.integers(0, V, size=B).astype(np.int64)
    targets = rng.integers(0, C, size=B).astype(np.int64)
    N, lo = 8, 5
    left, right = np.array([0, 3]), np.array([1, 0])        # a level of two binary nodes
    ptr, idx = np.array([3, 6, 7]), np.array([0, 1, 2, 4])  # a level of two n-ary nodes

    def z(*shape):
        return np.zeros(shape, dtype)

    table = {
        "embedding_bwd": lambda: (ids, f(B, H), V),
        "softmax_cross_entropy_fwd": lambda: (f(B, C), targets, f(B)),
        "softmax_cross_entropy_bwd": lambda: (f(B, C), targets, f(B), f(B)),
        "softmax_fwd": lambda: (f(B, C),),
        "log_softmax_fwd": lambda: (f(B, C),),
        "outer_sum_fwd": lambda: (f(B, H), f(B, C)),
        # kernels_tree
        "lstm_cell_fwd": lambda: (f(4 * H, B), f(4 * H, B), f(4 * H), f(4 * H), f(B, H)),
        "lstm_cell_bwd": lambda: (f(B, H), f(B, H), f(B, 5 * H), f(B, H)),
        "gru_cell_fwd": lambda: (f(B, 3 * H), f(B, 3 * H), f(B, H)),
        "gru_cell_bwd": lambda: (f(B, H), f(B, 3 * H), f(B, 3 * H), f(B, H)),
        "gather_pairs": lambda: (f(N, H), left, right, z(2, 2 * H)),
        "scatter_pairs_add": lambda: (f(2, 2 * H), left, right, f(N, H)),
        "tree_lstm_levels_fwd": lambda: (f(2, 5 * H), f(5 * H), f(N, H), left, right, lo, f(N, H), z(2, 5 * H)),
        "tree_lstm_levels_bwd": lambda: (f(N, H), f(N, H), f(2, 5 * H), f(N, H), left, right, lo, z(2, 5 * H)),
        "tanh_rows_fwd": lambda: (f(2, H), f(H), lo, f(N, H)),
        "tanh_rows_bwd": lambda: (f(N, H), f(N, H), lo, z(2, H)),
        "childsum_gather": lambda: (f(N, H), ptr, idx, z(2, H), z(4, H)),
        "childsum_levels_fwd": lambda: (f(2, 3 * H), f(4, H), f(3 * H), f(H), f(N, H), ptr, idx, lo, f(N, H),
                                        z(2, 3 * H), z(4, H)),
        "childsum_levels_bwd": lambda: (f(N, H), f(N, H), f(2, 3 * H), f(4, H), f(N, H), ptr, idx, lo,
                                        z(2, 3 * H), z(4, H)),
        "childsum_scatter_add": lambda: (f(2, H), f(4, H), ptr, idx, f(N, H)),
        "lstm_seq_fwd": lambda: (f(2, 4 * H), f(4 * H), f(N, H), 1, 4, f(N, H), f(N, 4 * H)),
        "lstm_seq_bwd": lambda: (f(N, H), f(N, H), f(N, 4 * H), f(N, H), 1, 4, 2, f(N, 4 * H)),
        "gru_seq_fwd": lambda: (f(2, 3 * H), f(2, 3 * H), f(N, H), 1, 4, f(N, 3 * H)),
        "gru_seq_bwd": lambda: (f(N, H), f(N, 3 * H), f(N, 3 * H), f(N, H), 1, 4, 2, f(N, 3 * H), f(N, 3 * H)),
        "tree_lstm_node_fwd": lambda: (f(2, 5 * H), f(5 * H), f(2, 2 * H), f(2, 2 * H), z(2, 2 * H), z(2, 5 * H)),
        "tree_lstm_node_bwd": lambda: (f(2, 2 * H), f(2, 5 * H), f(2, 2 * H), f(2, 2 * H), f(2, 2 * H),
                                       z(2, 5 * H), z(2, 2 * H), z(2, 2 * H)),
        "tree_lstm_leaf_node_fwd": lambda: (f(2, 3 * H), f(3 * H), z(2, 2 * H), z(2, 3 * H)),
        "tree_lstm_leaf_node_bwd": lambda: (f(2, 2 * H), f(2, 3 * H), f(2, 2 * H), z(2, 3 * H)),
        "tree_lstm_node_fwd_mv": lambda: (f(2, 2 * H), f(2, 2 * H), f(2 * H, 5 * H), f(5 * H), z(2, 2 * H),
                                          z(2, 5 * H), z(2, 2 * H)),
        "tree_lstm_leaf_node_fwd_mv": lambda: (f(2, 4), f(4, 3 * H), f(3 * H), z(2, 2 * H), z(2, 3 * H)),
        "tree_lstm_cell_fwd": lambda: (f(2, 5 * H), f(5 * H), f(2, H), f(2, H), z(2, H), z(2, H), z(2, 5 * H)),
        "tree_lstm_cell_bwd": lambda: (f(2, H), f(2, H), f(2, 5 * H), f(2, H), f(2, H), f(2, H), z(2, 5 * H),
                                       z(2, H), z(2, H)),
        "tree_lstm_leaf_fwd": lambda: (f(2, 3 * H), f(3 * H), z(2, H), z(2, H), z(2, 3 * H)),
        "tree_lstm_leaf_bwd": lambda: (f(2, H), f(2, H), f(2, 3 * H), f(2, H), z(2, 3 * H)),
    }
    if name not in table:
        raise SystemExit(f"bench_compile: no inputs for kernel {name!r}; add them to _args")
    return table[name]()


def child(modules, seed):
    """Runs in the fresh interpreter; prints one JSON line of timings (s)."""
    import importlib

    t0 = time.perf_counter()
    import numba  # noqa: F401
    import numpy  # noqa: F401

    t1 = time.perf_counter()
    # one figure for all: importing either module imports the dynnets package, which imports both
    mods = [importlib.import_module(f"dynnets.autograd.{mod}") for mod in modules]
    out = {"import_numba": t1 - t0, "import_kernels": time.perf_counter() - t1, "calls": {}}
    for mod, m in zip(modules, mods):
        calls = out["calls"][mod] = {dt: {} for dt in DTYPES}
        for dt in DTYPES:
            for name in m.__all__:
                args = _args(name, dt, seed)
                s = time.perf_counter()
                getattr(m, name)(*args)
                calls[dt][name] = time.perf_counter() - s
    print(json.dumps(out))


def cache_files(mod):
    """Numba cache files (index .nbi and data .nbc) of module ``mod``."""
    dirs = [AUTOGRAD / "__pycache__"]
    if os.environ.get("NUMBA_CACHE_DIR"):
        dirs += [p for p in Path(os.environ["NUMBA_CACHE_DIR"]).rglob("autograd") if p.is_dir()]
    return [p for d in dirs if d.is_dir() for p in d.glob(f"{mod}.*.nb[ic]")]


def run_once(cold, modules, seed):
    if cold:
        for mod in modules:
            for p in cache_files(mod):
                p.unlink()
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("NUMBA_DISABLE_JIT", None)
    start = time.perf_counter()
    res = subprocess.run(
        [sys.executable, __file__, "--child", "--modules", ",".join(modules), "--seed", str(seed)], env=env, capture_output=True,
        text=True, check=False
    )
    wall = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f"bench_compile: child failed:\n{res.stderr}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["wall"] = wall
    return out


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cold", action="store_true", help="delete the modules' Numba caches first")
    ap.add_argument("--repeat", type=int, default=1, help="fresh processes; medians reported")
    ap.add_argument("--modules", default=",".join(MODULES),
                    help=f"comma-separated kernel modules to time (default {','.join(MODULES)})")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kernels' inputs (default 0)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    modules = [m for m in opts.modules.split(",") if m]
    bad = [m for m in modules if m not in MODULES]
    if bad or not modules:
        ap.error(f"--modules: {bad or opts.modules!r} not among {', '.join(MODULES)}")
    if opts.child:
        child(modules, opts.seed)
        return

    runs = [run_once(opts.cold, modules, opts.seed) for _ in range(opts.repeat)]
    med = statistics.median
    mode = "cold (cache cleared)" if opts.cold else "warm (on-disk cache)"
    print(f"first call of each kernel, {mode}, median of {len(runs)} fresh process(es), ms")
    for mod in modules:
        names = list(runs[0]["calls"][mod]["float32"])
        print(f"\n{mod}.py")
        print(f"{'kernel':<28}{'float32':>10}{'float64':>10}")
        for name in names:
            row = [med(r["calls"][mod][dt][name] for r in runs) * 1e3 for dt in DTYPES]
            print(f"{name:<28}{row[0]:>10.1f}{row[1]:>10.1f}")
        totals = [med(sum(r["calls"][mod][dt].values()) for r in runs) for dt in DTYPES]
        print(f"{'total':<28}{totals[0] * 1e3:>10.1f}{totals[1] * 1e3:>10.1f}")
        print(f"cache files now {len(cache_files(mod)):>12}")
    print()
    print(f"import numpy+numba   {med(r['import_numba'] for r in runs) * 1e3:8.1f} ms")
    print(f"import kernels       {med(r['import_kernels'] for r in runs) * 1e3:8.1f} ms (with the dynnets package)")
    print(f"process wall time    {med(r['wall'] for r in runs):8.2f} s")


if __name__ == "__main__":
    main()
