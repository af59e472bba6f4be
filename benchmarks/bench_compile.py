"""Time of the first call of every kernel in ``dynnets.autograd.kernels``.

Each run is a fresh interpreter that imports the kernels and calls every one
once on small float32 inputs, then once on float64 inputs; the first call pays
for compilation (cold) or for loading Numba's on-disk cache (warm).

    python benchmarks/bench_compile.py            # warm: reuse the cache
    python benchmarks/bench_compile.py --cold     # delete kernels' cache first
    python benchmarks/bench_compile.py --cold --repeat 3   # medians of 3 runs
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
KERNELS_PY = ROOT / "dynnets" / "autograd" / "kernels.py"
DTYPES = ("float32", "float64")


def _args(name, dtype, B=2, H=3, C=5, V=4):
    """Small inputs with the right shapes and dtypes (values do not matter)."""
    import numpy as np

    rng = np.random.default_rng(0)

    def f(*shape):
        return rng.standard_normal(shape).astype(dtype)

    ids = rng.integers(0, V, size=B).astype(np.int64)
    targets = rng.integers(0, C, size=B).astype(np.int64)
    table = {
        "lstm_cell_fwd": lambda: (f(4 * H, B), f(4 * H, B), f(4 * H), f(4 * H), f(B, H)),
        "lstm_cell_bwd": lambda: (f(B, H), f(B, H), f(B, 5 * H), f(B, H)),
        "gru_cell_fwd": lambda: (f(B, 3 * H), f(B, 3 * H), f(B, H)),
        "gru_cell_bwd": lambda: (f(B, H), f(B, 3 * H), f(B, 3 * H), f(B, H)),
        "embedding_bwd": lambda: (ids, f(B, H), V),
        "softmax_cross_entropy_fwd": lambda: (f(B, C), targets, f(B)),
        "softmax_cross_entropy_bwd": lambda: (f(B, C), targets, f(B), f(B)),
        "softmax_fwd": lambda: (f(B, C),),
        "log_softmax_fwd": lambda: (f(B, C),),
        "outer_sum_fwd": lambda: (f(B, H), f(B, C)),
    }
    if name not in table:
        raise SystemExit(f"bench_compile: no inputs for kernel {name!r}; add them to _args")
    return table[name]()


def child():
    """Runs in the fresh interpreter; prints one JSON line of timings (s)."""
    t0 = time.perf_counter()
    import numba  # noqa: F401
    import numpy  # noqa: F401

    t1 = time.perf_counter()
    from dynnets.autograd import kernels

    t2 = time.perf_counter()
    calls = {dt: {} for dt in DTYPES}
    for dt in DTYPES:
        for name in kernels.__all__:
            args = _args(name, dt)
            s = time.perf_counter()
            getattr(kernels, name)(*args)
            calls[dt][name] = time.perf_counter() - s
    out = {"import_numba": t1 - t0, "import_kernels": t2 - t1, "calls": calls}
    print(json.dumps(out))


def cache_files():
    """Numba cache files (index .nbi and data .nbc) of kernels.py."""
    dirs = [KERNELS_PY.parent / "__pycache__"]
    if os.environ.get("NUMBA_CACHE_DIR"):
        dirs += [p for p in Path(os.environ["NUMBA_CACHE_DIR"]).rglob("autograd") if p.is_dir()]
    return [p for d in dirs if d.is_dir() for p in d.glob("kernels.*.nb[ic]")]


def run_once(cold):
    if cold:
        for p in cache_files():
            p.unlink()
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("NUMBA_DISABLE_JIT", None)
    start = time.perf_counter()
    res = subprocess.run(
        [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=False
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
    ap.add_argument("--cold", action="store_true", help="delete kernels.py's Numba cache first")
    ap.add_argument("--repeat", type=int, default=1, help="fresh processes; medians reported")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        child()
        return

    runs = [run_once(opts.cold) for _ in range(opts.repeat)]
    med = statistics.median
    names = list(runs[0]["calls"]["float32"])
    mode = "cold (cache cleared)" if opts.cold else "warm (on-disk cache)"
    print(f"first call of each kernel, {mode}, median of {len(runs)} fresh process(es), ms")
    print(f"{'kernel':<22}{'float32':>10}{'float64':>10}")
    for name in names:
        row = [med(r["calls"][dt][name] for r in runs) * 1e3 for dt in DTYPES]
        print(f"{name:<22}{row[0]:>10.1f}{row[1]:>10.1f}")
    totals = [med(sum(r["calls"][dt].values()) for r in runs) for dt in DTYPES]
    print(f"{'total':<22}{totals[0] * 1e3:>10.1f}{totals[1] * 1e3:>10.1f}")
    print(f"import numpy+numba   {med(r['import_numba'] for r in runs) * 1e3:8.1f} ms")
    print(f"import kernels       {med(r['import_kernels'] for r in runs) * 1e3:8.1f} ms")
    print(f"process wall time    {med(r['wall'] for r in runs):8.2f} s")
    print(f"cache files now      {len(cache_files())}")


if __name__ == "__main__":
    main()
