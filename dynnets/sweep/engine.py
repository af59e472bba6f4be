"""The engine of a sweep: the Dask client (a local cluster or an existing
scheduler), the sweep folder's records, and :func:`run_all` (resumable; every
result written once, by the driver)."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

from .. import io as dio
from .grid import SWEEP_FORMAT, SweepError, WORKER_ENV
from .runner import execute, train_run


# --------------------------------------------------------------------------
# the engine
# --------------------------------------------------------------------------


def _lock(out):
    """Hold ``OUT/.sweep.lock`` while a sweep writes there: two sweeps into one folder would race."""
    import fcntl
    out.mkdir(parents=True, exist_ok=True)
    f = open(out / ".sweep.lock", "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise SweepError(f"--out '{out}': another sweep is writing into this folder") from None
    return f


def _read_finished(out, keys):
    """Records in ``OUT/runs`` for ``keys`` (unreadable files count as missing)."""
    found = {}
    d = out / "runs"
    if not d.is_dir():
        return found
    for key in keys:
        p = d / f"{key}.json"
        if not p.is_file():
            continue
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("key") == key and rec.get("status") in ("ok", "failed"):
            found[key] = rec
    return found


def _lost_record(run, exc):
    """The record of a run that Dask could not finish (e.g. its worker died ``retries`` + 1 times)."""
    return {"format": SWEEP_FORMAT, **{k: run[k] for k in ("key", "name", "kind", "label", "seed", "axes")},
            "status": "failed", "error": f"{type(exc).__name__}: {' '.join(str(exc).split())}",
            "traceback": "", "seconds": None, "worker": None,
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def _summary_line(rec):
    where = ", ".join(f"{k}={v}" for k, v in rec["axes"].items())
    head = f"{rec['label']}" + (f" [{where}]" if where else "") + f" seed {rec['seed']}"
    if rec["status"] != "ok":
        return f"{head}: FAILED {rec['error']}"
    r = rec["result"]
    parts = []
    for split in ("dev", "test"):
        if split in r:
            parts.append(f"{split} fine {100 * r[split]['root_fine']:.2f} binary {100 * r[split]['root_binary']:.2f}")
    w = rec.get("worker") or {}
    return f"{head}: " + "; ".join(parts) + f" ({rec['seconds']:.1f} s, pid {w.get('pid')})"


@contextlib.contextmanager
def dask_client(workers=None, scheduler=None, retries=2, connect_timeout=10.0, log=None):
    """A Dask ``Client``: of a new ``LocalCluster`` (``workers`` processes,
    default one per core, configured as the module docstring says), or
    connected to the scheduler at ``scheduler``; closed (with its cluster) on exit.

    Raises :class:`SweepError` when Dask is not installed or the scheduler
    cannot be reached within ``connect_timeout`` seconds.
    """
    log = log or (lambda s: print(s, flush=True))
    workers = _default_workers() if workers is None else workers
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise SweepError("Dask is not installed: pip install 'dask[distributed]' (the 'sweep' extra), or pass "
                         "--workers 0 to run in this process") from None
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=connect_timeout)
        except Exception as exc:       # OSError, TimeoutError, ValueError for a malformed address
            msg = " ".join(str(exc).split()) or type(exc).__name__
            raise SweepError(f"--scheduler {scheduler}: cannot reach a Dask scheduler ({msg})") from None
        try:
            n = len(client.scheduler_info().get("workers", {}))
            log(f"sweep: Dask scheduler {scheduler}, {n} worker{'s' if n != 1 else ''} now"
                + ("; the runs wait until workers connect" if n == 0 else ""))
            yield client
        finally:
            client.close()
        return
    # Dask's default MALLOC_TRIM_THRESHOLD_=65536 (so workers hand freed memory
    # back to the OS) also pins glibc's mmap threshold at 128 KiB: each array
    # of a 300/150 model is then a fresh mmap, page faults and all. A
    # Tree-LSTM SST epoch trained in 5.33 s with it, 3.74 s without (measured
    # in one process).
    env = {k: v for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}).items()
           if k != "MALLOC_TRIM_THRESHOLD_"}
    env.update(WORKER_ENV)
    # the nanny sets these in this process's environment before it spawns a
    # worker; they are put back when the cluster closes
    saved = {k: os.environ.get(k) for k in env}
    config = {"distributed.nanny.pre-spawn-environ": env,
              # one run per worker at a time: a run never waits behind another on a busy worker
              "distributed.scheduler.worker-saturation": 1.0,
              "distributed.scheduler.allowed-failures": retries}
    import logging
    with dask.config.set(config):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=logging.ERROR)
    try:
        client = Client(cluster)
        try:
            import importlib.util
            info = client.scheduler_info()
            dash = (f"dashboard {client.dashboard_link}" if "dashboard" in info.get("services", {})
                    else "no dashboard")
            if importlib.util.find_spec("bokeh") is None:
                dash += " (its pages need bokeh: pip install 'bokeh>=3.1')"
            log(f"sweep: LocalCluster of {workers} worker process{'es' if workers != 1 else ''}, 1 thread each, "
                f"scheduler {cluster.scheduler_address}; {dash}")
            yield client
        finally:
            client.close()
    finally:
        cluster.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _worker_plugin():
    """A Dask ``WorkerPlugin`` that freezes the garbage collector when its worker closes.

    A worker ends with the parsed treebank and the imported modules alive;
    frozen, the collections of interpreter shutdown skip them (closing a
    2-worker cluster after each worker parsed SST: 4.0 s without, 0.16 s
    with, measured).
    """
    from distributed.diagnostics.plugin import WorkerPlugin

    class FreezeAtExit(WorkerPlugin):
        name = "dynnets-freeze-at-exit"

        def teardown(self, worker):
            import gc
            gc.freeze()

    return FreezeAtExit()


def _default_workers():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_all(runs, data, out, *, workers=None, scheduler=None, client=None, progress=True, skip_failed=False,
            retries=2, connect_timeout=10.0, runner=None, on_result=None, log=None):
    """Run ``runs`` (from :func:`plan`) on ``data``, writing each record to
    ``OUT/runs/<key>.json`` as it finishes; skip runs with a record already.

    Parameters
    ----------
    workers : int or None
        0: in this process, serially; N: a LocalCluster of N worker
        processes; None: one per core (ignored with ``scheduler``/``client``).
    scheduler : str or None
        Address of an existing Dask scheduler.
    client : distributed.Client, optional
        An existing client (its cluster is used as is).
    skip_failed : bool
        Keep recorded failures instead of running them again.
    retries : int
        Reschedules of a run whose worker died (local cluster) and Dask
        ``retries=`` of a task.
    on_result : callable(record, records), optional
        Called in the driver after each new record is written; ``records``
        maps key -> record of every finished run so far.
    log : callable(str), optional
        Status lines (default: print to stdout).

    Returns
    -------
    (records, stats)
        ``records``: key -> record of every run that has one (in ``runs``
        order); ``stats``: counts (``reused``, ``ran``, ``failed``) and seconds.
    """
    runner = runner or train_run
    log = log or (lambda s: print(s, flush=True))
    out = Path(out)
    keys = [r.key for r in runs]
    lock = _lock(out)
    try:
        done = _read_finished(out, keys)
        if not skip_failed:
            done = {k: v for k, v in done.items() if v["status"] == "ok"}
        pending = [r for r in runs if r.key not in done]
        stats = {"runs": len(runs), "reused": len(done), "ran": 0, "failed": 0, "seconds": 0.0,
                 "engine": "in-process" if (workers == 0 and scheduler is None and client is None) else "dask"}
        if done:
            log(f"sweep: {len(done)} of {len(runs)} runs finished earlier (in {out / 'runs'}), {len(pending)} to run")
        t0 = time.perf_counter()
        if pending:
            bar = _bar(len(pending), progress)

            def record(rec):
                dio.atomic_write_text(out / "runs" / f"{rec['key']}.json", json.dumps(rec, indent=1, sort_keys=True))
                done[rec["key"]] = rec
                stats["ran"] += 1
                stats["failed"] += rec["status"] != "ok"
                line = _summary_line(rec)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"done {stats['ran'] - stats['failed']}, failed {stats['failed']}, "
                                        f"remaining {len(pending) - stats['ran']}")
                    bar.write(line, file=sys.stdout)
                else:
                    log(line)
                if on_result is not None:
                    on_result(rec, {k: done[k] for k in keys if k in done})

            try:
                if stats["engine"] == "in-process":
                    for r in pending:
                        record(execute(r.to_dict(), data, runner))
                else:
                    _run_dask(pending, data, runner, record, workers, scheduler, client, retries, connect_timeout,
                              log)
            finally:
                if bar is not None:
                    bar.close()
        stats["seconds"] = round(time.perf_counter() - t0, 3)
        return {k: done[k] for k in keys if k in done}, stats
    finally:
        lock.close()


def _bar(total, enabled):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc="sweep", unit="run", file=sys.stderr, dynamic_ncols=True, smoothing=0.0)


def _run_dask(pending, data, runner, record, workers, scheduler, client, retries, connect_timeout, log):
    if client is not None:
        ctx = contextlib.nullcontext(client)
    else:
        ctx = dask_client(workers, scheduler, retries, connect_timeout, log)
    with ctx as c:
        from distributed import as_completed
        c.register_plugin(_worker_plugin())
        payload = c.scatter(data, broadcast=True, hash=False)
        by_future = {}
        for r in pending:
            f = c.submit(execute, r.to_dict(), payload, runner, key=f"dynnets-run-{r.key}", pure=False,
                         retries=retries)
            by_future[f] = r
        try:
            for f in as_completed(list(by_future)):
                run = by_future[f]
                if f.status == "finished":
                    rec = f.result()
                else:                      # the scheduler gave up on it (e.g. KilledWorker)
                    rec = _lost_record(run.to_dict(), f.exception())
                record(rec)
                f.release()
        finally:
            c.cancel([f for f in by_future if not f.done()])
