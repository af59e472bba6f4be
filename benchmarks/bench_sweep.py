"""A sweep serially in one process against the same sweep on a 2-worker LocalCluster.

The grid: 2 models (Tree-LSTM, packed LSTM) x 4 seeds of short SST runs
(``--epochs`` epochs, embeddings 300, hidden 150, Adagrad, one dev
evaluation per epoch), the runs of :mod:`dynnets.sweep`. Two contenders, in
alternating order over ``--repeats`` rounds, each into a fresh folder:

* ``serial``: ``run_all(..., workers=0)``, every run in this process;
* ``dask``: ``run_all`` on a new ``LocalCluster`` of ``--workers`` processes
  (one thread each); its wall time includes starting and closing the cluster.

Reported: wall times (median over rounds), the speed-up, the cluster's start
and close, and the scheduling overhead per run: the worker-seconds of the
dask round that were not spent inside a run (``workers x wall - sum of the
runs' own seconds``, over the number of runs): start-up, data transfer,
idle workers at the end of the grid. Per worker process: its first run
against its later runs of the same model, and the Numba kernels it compiled
and loaded from the on-disk cache (the driver compiled them before).
Figures are identical between the contenders (checked).

Run from the repository root, alone on the machine::

    flock -x /tmp/dynnets-cpu.lock python benchmarks/bench_sweep.py --repeats 3
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, markdown_table, setup  # noqa: E402


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "sst",
                    help="SST folder (default ../shared/data/sst beside the repository)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    seeds = ap.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", default="0-3", help="the runs' seeds: 0-3, 0,2,5 (default 0-3)")
    seeds.add_argument("--seed", type=int, default=None, help="one seed (= --seeds N)")
    a = ap.parse_args()
    if a.seed is not None:
        a.seeds = str(a.seed)
    return a


def main():
    setup(__file__)
    a = parse()
    from dynnets import sweep as sw
    grid = sw.build_grid(models=["treelstm", "lstm"], seeds=a.seeds, data=a.data,
                         sets=[f"epochs={a.epochs}", "embed_dim=300", "hidden=150", "patience=none"])
    data = sw.load_data(grid.data)
    runs = sw.plan(grid, data)
    print(f"# {len(runs)} runs: {', '.join(m.name for m in grid.models)} x seeds {grid.seeds}, {a.epochs} epochs, "
          f"on {data.name}; {a.workers} workers; {a.repeats} rounds")
    quiet = (lambda s: None)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    walls = {"serial": [], "dask": []}
    run_s = {"serial": {}, "dask": {}}      # model -> seconds of each of its runs
    starts, closes, overheads, reference = [], [], [], None
    per_worker = []

    def serial(k):
        t0 = time.perf_counter()
        recs, _ = sw.run_all(runs, data, tmp / f"serial{k}", workers=0, progress=False, log=quiet)
        walls["serial"].append(time.perf_counter() - t0)
        return recs

    def dask(k):
        t0 = time.perf_counter()
        ctx = sw.dask_client(a.workers, log=quiet)
        client = ctx.__enter__()
        t1 = time.perf_counter()
        try:
            recs, _ = sw.run_all(runs, data, tmp / f"dask{k}", client=client, progress=False, log=quiet)
            t2 = time.perf_counter()
        finally:
            ctx.__exit__(None, None, None)
        t3 = time.perf_counter()
        walls["dask"].append(t3 - t0)
        starts.append(t1 - t0)
        closes.append(t3 - t2)
        busy = sum(r["seconds"] for r in recs.values())
        overheads.append((a.workers * (t3 - t0) - busy) / len(runs))
        per_worker.append(recs)
        return recs

    try:
        for k in range(a.repeats):
            order = (serial, dask) if k % 2 == 0 else (dask, serial)
            for f in order:
                recs = f(k)
                for r in recs.values():
                    run_s[f.__name__].setdefault(r["kind"], []).append(r["seconds"])
                figs = {key: (r["result"]["dev"], [h["train_loss"] for h in r["result"]["history"]])
                        for key, r in recs.items()}
                assert all(r["status"] == "ok" for r in recs.values()), [r.get("error") for r in recs.values()]
                if reference is None:
                    reference = figs
                assert figs == reference, "the serial and the dask runs disagree"
            print(f"# round {k + 1}: serial {walls['serial'][-1]:.1f} s, dask {walls['dask'][-1]:.1f} s", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    med = {n: statistics.median(v) for n, v in walls.items()}
    print()
    print(markdown_table(
        ["contender", "wall s (median)", "rounds", "speed-up", "cluster start s", "cluster close s",
         "overhead per run s"],
        [["serial, 1 process", f"{med['serial']:.1f}", " / ".join(f"{x:.1f}" for x in walls["serial"]), "1.00x",
          "-", "-", "-"],
         [f"dask, LocalCluster of {a.workers}", f"{med['dask']:.1f}", " / ".join(f"{x:.1f}" for x in walls["dask"]),
          f"{med['serial'] / med['dask']:.2f}x", f"{statistics.median(starts):.1f}",
          f"{statistics.median(closes):.1f}", f"{statistics.median(overheads):.2f}"]]))
    print()
    print(markdown_table(["model", "run s, serial (median)", "run s, in a dask worker (median)"],
                         [[m, f"{statistics.median(run_s['serial'][m]):.2f}",
                           f"{statistics.median(run_s['dask'][m]):.2f}"] for m in run_s["serial"]]))
    # per worker: first run against its later runs of the same model; kernels compiled / loaded
    rows = []
    for k, recs in enumerate(per_worker, 1):
        by_pid = {}
        for r in sorted(recs.values(), key=lambda r: r["finished"]):
            by_pid.setdefault(r["worker"]["pid"], []).append(r)
        for pid, rs in by_pid.items():
            first = rs[0]
            same = [r["seconds"] for r in recs.values() if r["kind"] == first["kind"] and r is not first]
            rows.append([str(k), str(pid), " ".join(r["kind"] for r in rs), f"{first['seconds']:.1f}",
                         f"{statistics.median(same):.1f}" if same else "-",
                         str(sum(r["worker"]["numba"]["compiled"] for r in rs)),
                         str(sum(r["worker"]["numba"]["loaded"] for r in rs))])
    print()
    print(markdown_table(["round", "worker pid", "its runs in order", "first run s",
                          "other runs of that model s (median)", "kernels compiled", "kernels loaded"], rows))


if __name__ == "__main__":
    main()
