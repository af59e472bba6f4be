"""A sweep's results: aggregation over seeds, the markdown table,
``results.json``/``results.md``/``accuracy.png``, and :func:`sweep` (plan,
run, report)."""
from __future__ import annotations

import json
import os
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

from .. import io as dio
from .dataset import load_data
from .engine import run_all
from .grid import SWEEP_FORMAT
from .planning import plan
from .runner import plain_json


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------

_METRICS = (("root_fine", "fine"), ("root_binary", "binary"), ("all_nodes", "all nodes"))


def _mean_std(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": statistics.mean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else None, "n": len(xs)}


def aggregate(runs, records):
    """Mean and sample standard deviation (ddof=1) over seeds of every
    (model, setting) group, in grid order.

    Each group: ``name``, ``label``, ``kind``, ``axes``, ``seeds`` (of finished
    runs), ``failed`` (seeds), per split present ``dev``/``test`` -> metric ->
    ``{mean, std, n}``, ``best_epoch`` (list), ``seconds`` (mean, max),
    ``sent_per_s``.
    """
    groups = {}
    for r in runs:
        g = groups.setdefault((r.name, json.dumps(r.axes, sort_keys=True)),
                              {"name": r.name, "label": r.label, "kind": r.kind, "axes": r.axes, "runs": []})
        g["runs"].append(records.get(r.key))
    out = []
    for g in groups.values():
        ok = [rec for rec in g["runs"] if rec is not None and rec["status"] == "ok"]
        s = {k: g[k] for k in ("name", "label", "kind", "axes")}
        s["seeds"] = [rec["seed"] for rec in ok]
        s["failed"] = [rec["seed"] for rec in g["runs"] if rec is not None and rec["status"] != "ok"]
        s["missing"] = sum(rec is None for rec in g["runs"])
        for split in ("dev", "test"):
            if ok and all(split in rec["result"] for rec in ok):
                s[split] = {m: _mean_std([rec["result"][split].get(m) for rec in ok]) for m, _ in _METRICS}
        s["best_epoch"] = [rec["result"].get("best_epoch") for rec in ok]
        secs = [rec["seconds"] for rec in ok if rec.get("seconds") is not None]
        s["seconds"] = {"mean": statistics.mean(secs) if secs else None, "max": max(secs) if secs else None}
        s["sent_per_s"] = _mean_std([rec["result"].get("sent_per_s") for rec in ok])
        out.append(s)
    return out


def _pm(d):
    if d is None or d["mean"] is None:
        return "-"
    if d["std"] is None:
        return f"{100 * d['mean']:.2f}"
    return f"{100 * d['mean']:.2f} ± {100 * d['std']:.2f}"


def _fmt_value(v):
    return f"{v:g}" if isinstance(v, float) else str(v)


def markdown(groups, title=None, notes=()):
    """The results table (markdown): one row per group, dev (and test)
    accuracy as mean ± sample std over seeds."""
    splits = [s for s in ("dev", "test") if any(s in g for g in groups)]
    metrics = [(m, lab) for m, lab in _METRICS if any(g.get(s, {}).get(m, {}).get("n") for g in groups for s in splits)]
    with_axes = any(g["axes"] for g in groups)
    head = ["model"] + (["settings"] if with_axes else []) + ["seeds"]
    head += [f"{s} {lab} %" for s in splits for _, lab in metrics] + ["best epochs", "time per run (mean / max)"]
    rows = [head]
    for g in groups:
        n = len(g["seeds"])
        seeds = str(n) + (f" ({len(g['failed'])} failed)" if g["failed"] else "") + \
            (f" ({g['missing']} to run)" if g["missing"] else "")
        row = [g["label"]] + ([", ".join(f"{k}={_fmt_value(v)}" for k, v in g["axes"].items()) or "-"]
                              if with_axes else []) + [seeds]
        row += [_pm(g[s][m]) if s in g else "-" for s in splits for m, _ in metrics]
        row.append(", ".join(_fmt_value(e) for e in g["best_epoch"]) or "-")
        sec = g["seconds"]
        row.append("-" if sec["mean"] is None else
                   (f"{sec['mean']:.1f} / {sec['max']:.1f} s" if sec["max"] < 120 else
                    f"{sec['mean'] / 60:.1f} / {sec['max'] / 60:.1f} min"))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    parts = ([f"# {title}", ""] if title else []) + [*notes, ""] if (title or notes) else []
    return "\n".join(parts + lines) + "\n"


def _machine():
    return {"python": platform.python_version(), "system": platform.system(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def _plot(groups, path):
    """Bars of dev (and test) fine and binary accuracy per group, with the std over seeds."""
    from ..plots.figures import sweep_figure
    names = [g["label"] + ("" if not g["axes"] else " " + ",".join(f"{k}={_fmt_value(v)}" for k, v in
                                                                     g["axes"].items())) for g in groups]
    return sweep_figure(groups, names, _METRICS[:2], path)


def write_results(out, runs, records, data, grid=None, command=None, title=None, notes=(), extra=None):
    """Write ``OUT/results.json`` and ``OUT/results.md``; returns the result dict."""
    out = Path(out)
    groups = aggregate(runs, records)
    res = {"format": SWEEP_FORMAT, "command": command, "data": {"name": data.name, "key": data.key,
                                                                "splits": {k: len(v) for k, v in data.splits().items()},
                                                                "max_sentences": data.max_sentences},
           "grid": grid.to_dict() if grid is not None else None, "machine": _machine(),
           "seeds": sorted({r.seed for r in runs}),
           "complete": all(r.key in records for r in runs),
           "runs": [dict(records[r.key], config={"model": r.model, "train": r.train, "vocab": r.vocab})
                    for r in runs if r.key in records],
           "groups": groups, **(extra or {})}
    dio.atomic_write_text(out / "results.json", json.dumps(plain_json(res), indent=1, sort_keys=True))
    dio.atomic_write_text(out / "results.md", markdown(groups, title, notes))
    return res


def sweep(grid, out, *, workers=None, scheduler=None, client=None, progress=True, skip_failed=False, retries=2,
          connect_timeout=10.0, plots=True, command=None, title=None, notes=(), log=None):
    """Run a :class:`Grid` into the folder ``out`` (see the module docstring).

    Returns
    -------
    dict
        What ``OUT/results.json`` holds (``runs``, ``groups``, ...), plus
        ``files`` (written) and ``stats`` (see :func:`run_all`).
    """
    log = log or (lambda s: print(s, flush=True))
    data = load_data(grid.data, grid.max_sentences)
    runs = plan(grid, data)
    sizes = ", ".join(f"{len(v)} {k}" for k, v in data.splits().items())
    log(f"sweep: {len(runs)} runs ({len(grid.models)} model{'s' if len(grid.models) != 1 else ''} x settings x "
        f"{len(grid.seeds)} seed{'s' if len(grid.seeds) != 1 else ''}) on {data.name} ({sizes} trees) into {out}")
    title = title or "Sweep results"
    notes = list(notes) or [f"`{command}`" if command else "", "",
                            "Mean ± sample standard deviation over seeds; dev figures are of the checkpoint dev "
                            "selected (optimistic)" + ("; test figures are held out." if "test" in data.splits()
                                                       else "; this data has no test split.")]

    def update(rec, records):
        write_results(out, runs, records, data, grid, command, title, notes)

    records, stats = run_all(runs, data, out, workers=workers, scheduler=scheduler, client=client, progress=progress,
                             skip_failed=skip_failed, retries=retries, connect_timeout=connect_timeout,
                             on_result=update, log=log)
    res = write_results(out, runs, records, data, grid, command, title, notes)
    files = [Path(out) / "results.json", Path(out) / "results.md"]
    if plots and res["groups"]:
        from ..plots.figures import have_matplotlib
        if have_matplotlib():
            _plot(res["groups"], Path(out) / "accuracy.png")
            files.append(Path(out) / "accuracy.png")
        else:
            log("sweep: plots skipped: matplotlib is not installed (pip install 'dynnets[plot]')")
    res["files"] = [str(f) for f in files]
    res["stats"] = stats
    return res
