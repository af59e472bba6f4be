"""Sweeps (dynnets.sweep): Dask workers give the serial figures, resume, a
killed worker, recorded failures, grid files and keys, one-line errors."""
import json
import os
import signal
import socket

import pytest

from dynnets import cli
from dynnets import sweep as sw
from dynnets.data import samples_dir

pytest.importorskip("distributed")

# a tiny grid: 2 models x 2 seeds, 40 sample trees per split, 1 epoch, width 4
TINY = ["epochs=1", "hidden=4", "embed_dim=4"]


def tiny_grid(models=("treelstm", "lstm"), seeds="0-1", sets=(), max_sentences=40, data=None):
    return sw.build_grid(models=list(models), seeds=seeds, sets=[*TINY, *sets], max_sentences=max_sentences,
                         data=data)


def plan(grid):
    data = sw.load_data(grid.data, grid.max_sentences)
    return data, sw.plan(grid, data)


def figures(rec):
    """What must not depend on where a run ran: metrics and the loss curve (not the timings)."""
    r = rec["result"]
    return (r["dev"], r["test"], r["best_epoch"], [h["train_loss"] for h in r["history"]],
            [h["dev_fine"] for h in r["history"]])


def run_files(out):
    return sorted(p.name for p in (out / "runs").glob("*.json"))


def quiet(_):
    pass


def test_local_cluster_gives_the_serial_figures(tmp_path):
    data, runs = plan(tiny_grid())
    assert len(runs) == 4 and len({r.key for r in runs}) == 4
    serial, st = sw.run_all(runs, data, tmp_path / "serial", workers=0, progress=False, log=quiet)
    assert st["ran"] == 4 and st["engine"] == "in-process"
    assert {rec["worker"]["pid"] for rec in serial.values()} == {os.getpid()}
    dist, st = sw.run_all(runs, data, tmp_path / "dask", workers=2, progress=False, log=quiet)
    assert st["ran"] == 4 and st["engine"] == "dask"
    assert list(dist) == [r.key for r in runs]
    for key in serial:
        assert dist[key]["status"] == "ok"
        assert figures(dist[key]) == figures(serial[key])
    workers = [rec["worker"] for rec in dist.values()]
    assert os.getpid() not in {w["pid"] for w in workers}
    # the environment each worker process got before it started, and the BLAS limit of each run
    assert all(w["numba_threads"] == 1 and set(w["blas_threads"].values()) == {1} for w in workers)
    if os.environ.get("NUMBA_DISABLE_JIT", "0") == "0":
        # the driver compiled (or loaded) every kernel these runs use: workers load them from Numba's cache
        assert sum(w["numba"]["compiled"] for w in workers) == 0
        assert sum(w["numba"]["loaded"] for w in workers) > 0
    assert run_files(tmp_path / "dask") == sorted(f"{k}.json" for k in serial)


def test_resume_runs_only_what_is_missing(tmp_path):
    grid = tiny_grid()
    data, runs = plan(grid)
    seen = []

    def stop_after_two(rec, records):
        seen.append(rec["key"])
        if len(seen) == 2:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        sw.run_all(runs, data, tmp_path, workers=0, progress=False, on_result=stop_after_two, log=quiet)
    assert run_files(tmp_path) == sorted(f"{k}.json" for k in seen)
    before = {k: (tmp_path / "runs" / f"{k}.json").stat().st_mtime_ns for k in seen}
    lines = []
    res = sw.sweep(grid, tmp_path, workers=0, progress=False, plots=False, log=lines.append)
    assert res["stats"]["reused"] == 2 and res["stats"]["ran"] == 2
    assert "2 of 4 runs finished earlier" in " ".join(lines)
    assert {k: (tmp_path / "runs" / f"{k}.json").stat().st_mtime_ns for k in seen} == before
    assert res["complete"] and [r["key"] for r in res["runs"]] == [r.key for r in runs]
    assert [g["seeds"] for g in res["groups"]] == [[0, 1], [0, 1]]
    again = sw.sweep(grid, tmp_path, workers=0, progress=False, plots=False, log=quiet)
    assert again["stats"]["ran"] == 0 and again["stats"]["reused"] == 4
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["complete"] and len(on_disk["runs"]) == 4
    # mean and sample std (ddof=1) over the two seeds
    import statistics
    g = on_disk["groups"][0]
    fine = [r["result"]["dev"]["root_fine"] for r in on_disk["runs"][:2]]
    assert g["dev"]["root_fine"]["mean"] == pytest.approx(statistics.mean(fine))
    assert g["dev"]["root_fine"]["std"] == pytest.approx(statistics.stdev(fine))
    assert "| treelstm" in (tmp_path / "results.md").read_text()


def test_killed_worker_run_is_retried_and_recorded_once(tmp_path):
    # runs long enough (~1 s) to be killed in the middle
    grid = sw.build_grid(models=["treelstm", "lstm"], seeds="0-1", sets=["epochs=2", "hidden=16", "embed_dim=16"],
                         max_sentences=300)
    data, runs = plan(grid)
    reference, _ = sw.run_all(runs, data, tmp_path / "serial", workers=0, progress=False, log=quiet)
    killed = {}
    with sw.dask_client(2, retries=2, log=quiet) as client:
        def kill_one_busy_worker(rec, records):
            if killed:
                return
            busy = {w: keys for w, keys in client.processing().items() if keys}
            pids = client.run(os.getpid)        # runs on each worker's event loop, beside the busy thread
            for w, keys in busy.items():
                pid = pids[w]
                if pid != rec["worker"]["pid"]:
                    killed.update(pid=pid, keys=list(keys))
                    os.kill(pid, signal.SIGKILL)
                    return
        recs, st = sw.run_all(runs, data, tmp_path / "dask", client=client, progress=False,
                              on_result=kill_one_busy_worker, log=quiet)
    assert killed, "no worker was busy when the first run finished"
    assert st["ran"] == 4 and st["failed"] == 0
    assert run_files(tmp_path / "dask") == sorted(f"{r.key}.json" for r in runs)
    for r in runs:
        assert recs[r.key]["status"] == "ok" and figures(recs[r.key]) == figures(reference[r.key])
    lost = [k.removeprefix("dynnets-run-") for k in killed["keys"]]
    assert lost and all(recs[k]["worker"]["pid"] != killed["pid"] for k in lost)   # ran again, elsewhere


def test_a_failing_run_is_recorded_and_run_again(tmp_path):
    # an LSTM has no all-node accuracy to select on: its runs raise, the Tree-LSTM's do not
    grid = tiny_grid(sets=["select=all_nodes"])
    res = sw.sweep(grid, tmp_path, workers=0, progress=False, plots=False, log=quiet)
    status = {(r["kind"], r["seed"]): r["status"] for r in res["runs"]}
    assert status == {("treelstm", 0): "ok", ("treelstm", 1): "ok", ("lstm", 0): "failed", ("lstm", 1): "failed"}
    bad = [r for r in res["runs"] if r["status"] == "failed"]
    assert all("select='all_nodes' is not available" in r["error"] and "Traceback" in r["traceback"] for r in bad)
    assert res["groups"][1]["failed"] == [0, 1] and res["groups"][1]["seeds"] == []
    assert "(2 failed)" in (tmp_path / "results.md").read_text()
    again = sw.sweep(grid, tmp_path, workers=0, progress=False, plots=False, log=quiet)
    assert again["stats"]["reused"] == 2 and again["stats"]["ran"] == 2 and again["stats"]["failed"] == 2
    kept = sw.sweep(grid, tmp_path, workers=0, progress=False, plots=False, skip_failed=True, log=quiet)
    assert kept["stats"]["reused"] == 4 and kept["stats"]["ran"] == 0


def test_grid_file_axes_and_keys(tmp_path):
    toml = tmp_path / "grid.toml"
    toml.write_text('seeds = "0-1"\nmax_sentences = 40\n\n[set]\nepochs = 1\nhidden = [4, 8]\nmax_len = [12, "p95"]\n'
                    '\n[models.lstm]\n\n[models.padded]\nkind = "padded-lstm"\nlabel = "padded"\nlr = 0.02\n')
    grid = sw.build_grid(toml)
    data, runs = plan(grid)
    # max_len is an axis of the padded model only; hidden of both; lr is the padded model's own
    assert [(r.name, len(r.axes)) for r in runs].count(("lstm", 1)) == 4
    padded = [r for r in runs if r.name == "padded"]
    assert len(padded) == 8 and {r.model["max_len"] for r in padded} == {12, sw.planning._resolve_max_len(
        "p95", [len(t.leaves()) for t in data.splits()["train"]], "")}
    assert all(r.model["lr"] == 0.02 == r.train["lr"] and r.model["hidden_size"] in (4, 8) for r in padded)
    js = tmp_path / "grid.json"
    js.write_text(json.dumps({"seeds": [0, 1], "max_sentences": 40, "set": {"epochs": 1, "hidden": [4, 8],
                                                                            "max_len": [12, "p95"]},
                              "models": {"lstm": {}, "padded": {"kind": "padded-lstm", "label": "padded",
                                                                "lr": 0.02}}}))
    assert [r.key for r in plan(sw.build_grid(js))[1]] == [r.key for r in runs]
    # a key covers the data's bytes: one changed label, other keys
    d = tmp_path / "data"
    d.mkdir()
    for split in ("train", "dev", "test"):
        (d / f"{split}.txt").write_bytes((samples_dir() / f"{split}.txt").read_bytes())
    same = plan(sw.build_grid(toml, data=d))[1]
    assert [r.key for r in same] == [r.key for r in runs]
    text = (d / "train.txt").read_text()
    (d / "train.txt").write_text(text.replace("(4 ", "(3 ", 1))
    assert not {r.key for r in plan(sw.build_grid(toml, data=d))[1]} & {r.key for r in runs}


def test_flags_seeds_and_settings():
    assert sw.parse_seeds("0-2,7") == [0, 1, 2, 7] and sw.parse_seeds([3, "5-6"]) == [3, 5, 6]
    assert sw.parse_setting("max_len=12,p95, 35") == ("max_len", [12, "p95", 35])
    assert sw.parse_setting("dropout=0.5") == ("dropout", [0.5])
    assert sw.parse_setting("patience=none") == ("patience", [None])
    for bad in ("4-2", "x", "1,1"):
        with pytest.raises(sw.SweepError, match="--seeds"):
            sw.parse_seeds(bad)


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_sweep_command_tiny(tmp_path, capsys):
    out = tmp_path / "s"
    code, stdout, err = run(["sweep", "--models", "treelstm", "lstm", "--seeds", "0-1", "--set", "epochs=1",
                             "--set", "hidden=4", "--set", "embed_dim=4", "--max-sentences", "30", "--workers", "0",
                             "--out", str(out), "--no-progress"], capsys)
    assert code == 0, err
    assert "4 runs: 0 finished earlier, 4 ran now (0 failed)" in stdout and "| treelstm" in stdout
    assert len(run_files(out)) == 4 and (out / "results.md").is_file()
    code, stdout, _ = run(["sweep", "--models", "treelstm", "lstm", "--seeds", "0-1", "--set", "epochs=1",
                           "--set", "hidden=4", "--set", "embed_dim=4", "--max-sentences", "30", "--workers", "0",
                           "--out", str(out), "--no-progress"], capsys)
    assert code == 0 and "4 runs: 4 finished earlier, 0 ran now" in stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args, fragments", [
    (["--models", "treelsm"], ["--models: unknown model 'treelsm'", "did you mean 'treelstm'"]),
    (["--models", "lstm", "--set", "hiden=4"], ["--set hiden=4: unknown setting 'hiden'", "did you mean 'hidden'"]),
    (["--models", "treelstm", "--set", "mode=fast"], ["--set mode=fast (treelstm, mode='fast')", "mode must be"]),
    (["--models", "lstm", "--set", "epochs=0"], ["--set epochs=0", "epochs must be a positive integer"]),
    (["--models", "lstm", "--set", "seed=1"], ["seed is not a setting", "--seeds"]),
    (["--models", "lstm", "--set", "hidden"], ["--set", "expected NAME=VALUE"]),
    (["--models", "lstm", "--seeds", "3-1"], ["--seeds", "empty"]),
    (["--models", "lstm", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], ["--workers sizes the local"]),
])
def test_bad_grid_is_one_line_before_anything_starts(args, fragments, tmp_path, capsys):
    out = tmp_path / "s"
    code, stdout, err = run(["sweep", *args, "--out", str(out), "--no-progress"], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code != 0 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("dynnets sweep: error: ") or lines[0].startswith("dynnets: error: "), lines[0]
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    assert not (out / "runs").exists()


@pytest.mark.parametrize("name, text, fragments", [
    ("g.toml", 'seeds = "0-1"\n[set]\nhidden = 4 8\n', ["g.toml:3:12: not valid TOML"]),
    ("g.toml", 'seeds = "0-1"\n[set]\nhidden = [4, 8\n', ["g.toml:3: not valid TOML: Unclosed array"]),
    ("g.json", '{"models": ["lstm"],\n "seeds": [0,]}\n', ["g.json:2:", "not valid JSON"]),
    ("g.toml", 'seeds = [0]\nmodels = ["lstm", "treelsm"]\n', ["g.toml:2: unknown model 'treelsm'"]),
    ("g.toml", 'models = ["lstm"]\n\n[set]\nepoch = 2\n', ["g.toml:4: unknown setting 'epoch'",
                                                           "did you mean 'epochs'"]),
    ("g.toml", 'model = ["lstm"]\n', ["g.toml:1: unknown key 'model'", "did you mean 'models'"]),
])
def test_bad_grid_file_names_file_and_line(name, text, fragments, tmp_path, capsys):
    (tmp_path / name).write_text(text)
    code, _, err = run(["sweep", str(tmp_path / name), "--out", str(tmp_path / "s"), "--no-progress"], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1, err
    for f in fragments:
        assert f in lines[0], (f, lines[0])


def test_unparsable_data_and_unreachable_scheduler_are_one_line(tmp_path, capsys):
    d = tmp_path / "data"
    d.mkdir()
    (d / "train.txt").write_text("(3 (2 a) (3 good))\n(3 (2 a) (3 good)\n")
    (d / "dev.txt").write_text("(3 (2 a) (3 good))\n")
    code, _, err = run(["sweep", "--models", "lstm", "--data", str(d), "--out", str(tmp_path / "s")], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "train.txt:2:" in err, err
    address = f"tcp://127.0.0.1:{free_port()}"
    code, _, err = run(["sweep", "--models", "lstm", "--set", "epochs=1", "--max-sentences", "10", "--scheduler",
                        address, "--connect-timeout", "1", "--out", str(tmp_path / "s"), "--no-progress"], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith(f"dynnets sweep: error: --scheduler {address}: cannot reach a Dask scheduler")
    assert not (tmp_path / "s" / "runs").exists()


def test_plot_of_the_groups(tmp_path):
    pytest.importorskip("matplotlib")
    res = sw.sweep(tiny_grid(models=("lstm",), max_sentences=20), tmp_path, workers=0, progress=False, log=quiet)
    assert str(tmp_path / "accuracy.png") in res["files"]
    assert (tmp_path / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("split, content, why", [
    ("train", "", "the file is empty"),
    ("dev", "", "the file is empty"),
    ("train", "\n  \n\n", "its 3 lines are blank"),
])
def test_a_split_with_no_trees_stops_the_sweep_before_any_run(split, content, why, tmp_path, capsys):
    d = tmp_path / "data"
    d.mkdir()
    for s in ("train", "dev"):
        (d / f"{s}.txt").write_text(content if s == split else "(3 (2 a) (3 good))\n")
    out = tmp_path / "s"
    code, _, err = run(["sweep", "--models", "bow", "--set", "epochs=1", "--data", str(d), "--workers", "0",
                        "--out", str(out), "--no-progress"], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1, err
    assert lines[0] == (f"dynnets sweep: error: {d / (split + '.txt')}: no trees in this file ({why}); an SST split "
                        f"file holds one tree per line")
    assert not out.exists()


def test_a_run_s_warnings_go_into_its_record_not_to_stderr(capsys):
    """A diverging run warns (numpy's overflow warnings) at some source lines: its record lists each once."""
    grid = sw.build_grid(models=["bow"], seeds="0", sets=["epochs=1", "lr=1e8", "optimizer=sgd"])
    data, (run_, ) = plan(grid)
    rec = sw.execute(run_.to_dict(), data)
    assert rec["status"] == "failed" and rec["error"].startswith("FloatingPointError: train: the loss became")
    assert any(w.startswith("RuntimeWarning: overflow encountered in ") and "(dynnets/" in w
               for w in rec["warnings"]), rec["warnings"]
    assert len(rec["warnings"]) == len(set(rec["warnings"]))
    assert capsys.readouterr().err == ""
    data, (good, ) = plan(tiny_grid(models=("lstm",), seeds="0"))
    ok = sw.execute(good.to_dict(), data)
    assert ok["status"] == "ok" and "warnings" not in ok
