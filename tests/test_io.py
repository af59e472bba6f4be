"""Checkpoints: nested save/load round trip, atomicity under a crash mid-save,
clear errors."""

import os
from collections import OrderedDict

import numpy as np
import pytest

import dynnets as dn
from dynnets import io, nn, optim


def _model_and_optimizer():
    model = nn.Sequential(nn.Embedding(10, 3, rng=0), nn.Linear(3, 2, rng=1))
    opt = optim.Adam([{"params": model[0].parameters(), "lr": 0.1}, {"params": model[1].parameters()}],
                     lr=0.01, lazy=True)
    ids, y = np.array([1, 4, 4, 7]), np.array([0, 1, 1, 0])
    for _ in range(2):
        opt.zero_grad()
        dn.cross_entropy(model(ids), y).backward()
        opt.step()
    return model, opt


def _tmp_files(folder):
    return [f for f in os.listdir(folder) if f.endswith(".tmp")]


def test_nested_round_trip(tmp_path):
    model, opt = _model_and_optimizer()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "best": 0.25,
             "name": "tree-lstm", "done": False, "note": None, "history": [1.5, 1.25], "shape": (2, 3),
             "scalar": np.float32(2.5), "nested": {"a": {"b": np.arange(4, dtype=np.int64)}}}
    path = tmp_path / "ckpt.npz"
    dn.save(state, path)
    back = dn.load(path)
    assert set(back) == set(state)
    for k, v in state["model"].items():
        np.testing.assert_array_equal(back["model"][k], v)
        assert back["model"][k].dtype == v.dtype
    assert list(back["model"]) == list(state["model"])          # order kept
    sd, bo = state["optimizer"], back["optimizer"]
    assert bo["param_groups"] == sd["param_groups"]             # hyperparameters incl. betas tuple
    assert set(bo["state"]) == set(sd["state"])                 # integer keys stay integers, as torch.load's
    for k, st in sd["state"].items():
        assert bo["state"][k]["step"] == st["step"] == 2
        np.testing.assert_array_equal(bo["state"][k]["exp_avg_sq"], st["exp_avg_sq"])
    assert (back["epoch"], back["best"], back["name"], back["done"], back["note"]) == (3, 0.25, "tree-lstm",
                                                                                       False, None)
    assert back["history"] == [1.5, 1.25] and back["shape"] == (2, 3)
    assert back["scalar"] == np.float32(2.5) and type(back["scalar"]) is np.float32
    np.testing.assert_array_equal(back["nested"]["a"]["b"], np.arange(4))
    # and it loads back into fresh objects
    m2, o2 = _model_and_optimizer()
    m2.load_state_dict(back["model"])
    o2.load_state_dict(back["optimizer"])
    assert o2.state_dict()["param_groups"] == sd["param_groups"]
    assert not _tmp_files(tmp_path)


def test_tensors_load_back_as_tensors(tmp_path):
    dn.save({"w": dn.tensor([[1.0, 2.0]]), "p": nn.Parameter(np.ones(2)), "a": np.ones(2)}, tmp_path / "t.npz")
    back = dn.load(tmp_path / "t.npz")
    np.testing.assert_array_equal(back["w"].data, [[1.0, 2.0]])
    assert type(back["w"]) is dn.Tensor and not back["w"].requires_grad
    assert type(back["p"]) is nn.Parameter and back["p"].requires_grad and back["p"].dtype == np.float64
    assert type(back["a"]) is np.ndarray


def test_crash_mid_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    model, opt = _model_and_optimizer()
    dn.save({"model": model.state_dict(), "epoch": 1}, path)
    good = path.read_bytes()

    real_savez = np.savez

    def savez_then_crash(f, **arrays):
        # write a real, partial archive into the temporary file, then die
        real_savez(f, **dict(list(arrays.items())[:1]))
        f.write(b"\0" * 100)
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(np, "savez", savez_then_crash)
    model[1].weight.data[...] = 0
    with pytest.raises(OSError, match="disk full"):
        dn.save({"model": model.state_dict(), "epoch": 2}, path)
    monkeypatch.undo()

    assert path.read_bytes() == good
    back = dn.load(path)
    assert back["epoch"] == 1 and np.any(back["model"]["1.weight"] != 0)
    assert not _tmp_files(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]


def test_crash_during_rename_and_interrupt(tmp_path, monkeypatch):
    """A failure after the data is written (at the rename) or a KeyboardInterrupt
    also leaves the old file and no temporary file."""
    path = tmp_path / "run" / "state.npz"
    dn.save({"step": 1}, path)                                  # creates the folder

    def failing_replace(src, dst):
        raise PermissionError("rename refused (simulated)")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(PermissionError):
        dn.save({"step": 2}, path)
    monkeypatch.undo()
    assert dn.load(path)["step"] == 1 and not _tmp_files(path.parent)

    def interrupted(f, **arrays):
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dn.save({"step": 3}, path)
    monkeypatch.undo()
    assert dn.load(path)["step"] == 1 and not _tmp_files(path.parent)


def test_atomic_write_text_crash(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    io.atomic_write_text(path, '{"acc": 0.5}')
    real_fsync = os.fsync

    def fsync_fails(fd):
        real_fsync(fd)
        raise OSError("I/O error (simulated)")

    monkeypatch.setattr(os, "fsync", fsync_fails)
    with pytest.raises(OSError, match="I/O error"):
        io.atomic_write_text(path, '{"acc": 0.9, "partial": ')
    monkeypatch.undo()
    assert path.read_text() == '{"acc": 0.5}'
    assert not _tmp_files(tmp_path)
    io.atomic_write_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"


def test_load_errors(tmp_path):
    missing = tmp_path / "nope" / "ckpt.npz"
    with pytest.raises(FileNotFoundError, match="load: no checkpoint at .*nope/ckpt.npz"):
        dn.load(missing)
    plain = tmp_path / "plain.npz"
    np.savez(plain, a=np.zeros(2))
    with pytest.raises(ValueError, match="is not a dynnets checkpoint"):
        dn.load(plain)
    dn.save({"model": {"x": object()}}, tmp_path / "obj.npz")         # pickled, as torch.save
    with pytest.raises(io.WeightsOnlyError, match=r"pickled objects: object \(at model.x\).*weights_only=False"):
        dn.load(tmp_path / "obj.npz")
    assert not _tmp_files(tmp_path)


def _dead_pid():
    """The pid of a process that has exited (and been reaped)."""
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_temp_files_are_removed_on_the_next_write(tmp_path):
    import subprocess
    import sys
    host = io._host()
    dead = _dead_pid()
    stale = [f".ckpt.npz.{host}-{dead}.ab12cd34.tmp",          # killed mid-save of this file
             f".config.json.{host}-{dead}.zz99yy88.tmp",       # killed mid-save of another file of the folder
             ".ckpt.npz.q1w2e3r4.tmp"]                        # untagged (plain mkstemp name), same target
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = [f".ckpt.npz.{host}-{live.pid}.ab12cd34.tmp",   # a live writer's
                f".ckpt.npz.otherhost-{dead}.ab12cd34.tmp",     # another host's: its pids are not ours to judge
                ".other.json.q1w2e3r4.tmp",                     # untagged, another target
                ".notes.tmp"]                                   # not ours
        for name in stale + kept:
            (tmp_path / name).write_bytes(b"\0" * 1000)
        (tmp_path / f".run.{host}-{dead}.ab12cd34.tmp").mkdir()        # a run folder left by a killed train
        (tmp_path / f".run.{host}-{dead}.ab12cd34.tmp" / "best.npz").write_bytes(b"x")
        dn.save({"epoch": 1}, tmp_path / "ckpt.npz")
        assert sorted(os.listdir(tmp_path)) == sorted(kept + ["ckpt.npz"])
        assert dn.load(tmp_path / "ckpt.npz")["epoch"] == 1
    finally:
        live.kill()
        live.wait()


KILLED_MID_SAVE = r"""
import sys, time
import numpy as np
import dynnets as dn

real_savez = np.savez

def savez_slowly(f, **arrays):
    real_savez(f, **arrays)            # the temporary file now holds a whole archive
    f.flush()
    print("writing", flush=True)
    time.sleep(60)                     # killed here, before the rename

np.savez = savez_slowly
dn.save({"w": np.zeros((256, 1024), np.float32), "epoch": 2}, sys.argv[1])
"""


def test_kill_9_mid_save_leaves_no_orphan_after_the_next_save(tmp_path):
    import signal
    import subprocess
    import sys
    path = tmp_path / "best.npz"
    dn.save({"epoch": 1}, path)
    child = subprocess.Popen([sys.executable, "-c", KILLED_MID_SAVE, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "writing"
        orphans = _tmp_files(tmp_path)
        assert len(orphans) == 1 and os.path.getsize(tmp_path / orphans[0]) > 1_000_000
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert _tmp_files(tmp_path) == orphans                     # what kill -9 leaves behind
    assert dn.load(path)["epoch"] == 1                          # the checkpoint is the old one, whole
    dn.save({"epoch": 3}, path)
    assert sorted(os.listdir(tmp_path)) == ["best.npz"] and dn.load(path)["epoch"] == 3


@pytest.mark.parametrize("content", [b'{"format": "dynnets.checkpoint/1"}', b"\x00garbage\xff" * 10, b"",
                                     b"\x80\x04K\x01."])         # a pickle: never unpickled
def test_load_non_checkpoints_says_not_a_dynnets_checkpoint(tmp_path, content):
    p = tmp_path / "best.npz"
    p.write_bytes(content)
    with pytest.raises(io.NotACheckpointError) as e:
        dn.load(p)
    assert "is not a dynnets checkpoint" in str(e.value) and "pickle" not in str(e.value)


def test_load_npz_without_metadata_or_with_objects(tmp_path):
    p = tmp_path / "plain.npz"
    np.savez(p, a=np.zeros(2))
    with pytest.raises(io.NotACheckpointError, match="without dynnets metadata; arrays: a"):
        dn.load(p)
    np.savez(p, __dynnets_meta__=np.frombuffer(b"not json", np.uint8))
    with pytest.raises(io.NotACheckpointError, match="not a dynnets checkpoint, or is damaged"):
        dn.load(p)
    np.savez(p, __dynnets_meta__=np.frombuffer(b'{"__array__": "a0"}', np.uint8), a0=np.array([{}], object))
    with pytest.raises(io.NotACheckpointError) as e:
        dn.load(p)
    assert "object arrays" in str(e.value) and "allow_pickle" not in str(e.value)


def test_replace_dir(tmp_path):
    old, new = tmp_path / "run", io.temp_dir_beside(tmp_path / "run")
    old.mkdir()
    (old / "a.txt").write_text("old")
    (old / "stale.txt").write_text("old")
    (new / "a.txt").write_text("new")
    io.replace_dir(new, old)
    assert sorted(os.listdir(old)) == ["a.txt"] and (old / "a.txt").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["run"]


# --------------------------------------------------------------------------
# every writer of the package: the permissions of a plain open(), the content,
# no temporary file left when it fails
# --------------------------------------------------------------------------

TREES = ["(3 (2 it) (3 good))", "(1 (2 not) (3 good))"]


def _trees():
    from dynnets.data import parse_tree
    return [parse_tree(s) for s in TREES]


def _write_trees(path):
    from dynnets.data import write_trees
    assert write_trees(path, _trees()) == 2


def _read_trees(path):
    from dynnets.data import read_trees
    return [str(t) for t in read_trees(path)]


def _vocab():
    from dynnets.data import Vocabulary
    return Vocabulary.from_trees(_trees())


def _read_vocab(path):
    from dynnets.data import Vocabulary
    return Vocabulary.load(path).to_dict()


def _save_checkpoint(path):
    from dynnets.models import build_model
    from dynnets.train import save_checkpoint
    v = _vocab()
    save_checkpoint(path, build_model("bow", len(v), embed_dim=4, hidden=4, seed=0), v, epoch=3)


def _read_checkpoint(path):
    from dynnets.train import load_checkpoint
    m = load_checkpoint(path)
    return m.kind, m.checkpoint["epoch"], m.vocab.to_dict(), {k: v.tolist() for k, v in m.state_dict().items()}


def _write_results(path):
    io.write_json(path, {"acc": np.float32(0.5), "sizes": np.arange(3)})


#: writer, reader, the content a reader sees after the writer ran
WRITERS = {
    "write_trees": (_write_trees, _read_trees, lambda: TREES),
    "Vocabulary.save": (lambda p: _vocab().save(p), _read_vocab, lambda: _vocab().to_dict()),
    "checkpoint": (_save_checkpoint, _read_checkpoint, None),
    "results": (_write_results, lambda p: __import__("json").loads(p.read_text()),
                lambda: {"acc": 0.5, "sizes": [0, 1, 2]}),
    "text": (lambda p: io.atomic_write_text(p, "| a |\n"), lambda p: p.read_text(), lambda: "| a |\n"),
}


@pytest.fixture
def umask():
    """Set the process umask for the test (restored after)."""
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


def _mode(path):
    import stat
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002], ids=["022", "077", "002"])
@pytest.mark.parametrize("name", list(WRITERS))
def test_writers_give_the_permissions_of_open(name, mask, tmp_path, umask):
    write, read, want = WRITERS[name]
    umask(mask)
    with open(tmp_path / "plain", "w"):
        pass
    path = tmp_path / "sub" / "out"             # a new folder, as mkdir makes it
    write(path)
    assert _mode(path) == _mode(tmp_path / "plain") == 0o666 & ~mask
    assert _mode(path.parent) == 0o777 & ~mask
    first = read(path)
    if want is not None:
        assert first == want()
    os.chmod(path, 0o640)                        # an existing file keeps its mode, as open("w") keeps it
    write(path)
    assert _mode(path) == 0o640 and read(path) == first
    assert not _tmp_files(path.parent)


@pytest.mark.parametrize("name", list(WRITERS))
def test_writers_leave_the_old_file_and_no_temporary_file_on_failure(name, tmp_path, monkeypatch):
    write, read, _ = WRITERS[name]
    path = tmp_path / "out"
    write(path)
    before, old = path.read_bytes(), read(path)

    def fsync_fails(fd):
        raise OSError("I/O error (simulated)")

    monkeypatch.setattr(os, "fsync", fsync_fails)
    with pytest.raises(OSError, match="I/O error"):
        write(path)
    monkeypatch.undo()
    assert path.read_bytes() == before and read(path) == old
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_write_trees_failing_mid_stream_keeps_the_old_file(tmp_path):
    from dynnets.data import write_trees
    path = tmp_path / "train.txt"
    _write_trees(path)

    def trees_then_fail():
        yield from _trees()
        raise RuntimeError("the generator failed (simulated)")

    with pytest.raises(RuntimeError, match="simulated"):
        write_trees(path, trees_then_fail())
    assert _read_trees(path) == TREES and sorted(os.listdir(tmp_path)) == ["train.txt"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_run_folder_gets_the_permissions_of_mkdir(tmp_path, umask):
    umask(0o027)
    work = io.temp_dir_beside(tmp_path / "run")
    assert _mode(work) == 0o750
    (work / "best.npz").write_bytes(b"x")
    io.replace_dir(work, tmp_path / "run")
    assert _mode(tmp_path / "run") == 0o750 and sorted(os.listdir(tmp_path)) == ["run"]


# --------------------------------------------------------------------------
# what torch users save (issue 22): torch.save / torch.load's round trips
# --------------------------------------------------------------------------

def _same_tree(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b) and all(type(k) is type(j) for k, j in zip(a, b))
        for k in a:
            _same_tree(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same_tree(x, y)
    elif isinstance(a, dn.Tensor):
        assert a.requires_grad == b.requires_grad and a.dtype == b.dtype
        np.testing.assert_array_equal(a.data, b.data)
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b)
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


@pytest.mark.parametrize("obj", [
    {"w": dn.tensor([[1.0, 2.0]], requires_grad=True), "n": 3, "lr": 1e-3, "name": "run", "none": None},
    [dn.tensor([1, 2], dtype=np.int64), (np.arange(3.0), "a", [None, True]), {"deep": {"deeper": [1.5]}}],
    (1, 2.5, "x", np.float16(0.5), np.int32(-4), np.bool_(True)),
    {0: "int key", 1.5: "float key", (2, "b"): "tuple key", None: "none key", True: "bool key", "s": "str key"},
    OrderedDict(b=np.zeros((2, 0)), a=dn.tensor(np.float64(2.0))),
    {"inf": float("inf"), "nan": float("nan"), "big": 2 ** 70, "unicode": "naïve ✓", "bytes_like": np.array([b"ab"])},
    np.arange(6, dtype=np.uint8).reshape(2, 3),
    dn.tensor([True, False]),
    [],
    {},
], ids=["tensors-and-numbers", "nested-list", "tuple-of-scalars", "typed-keys", "ordered", "edge-values", "array",
        "bool-tensor", "empty-list", "empty-dict"])
def test_round_trips_of_what_torch_users_save(obj, tmp_path):
    dn.save(obj, tmp_path / "x.pt")
    _same_tree(obj, dn.load(tmp_path / "x.pt"))


def test_a_model_and_optimizer_state_dict_round_trip_exactly(tmp_path):
    model, opt = _model_and_optimizer()
    dn.save(model.state_dict(), tmp_path / "m.pt")
    dn.save(opt.state_dict(), tmp_path / "o.pt")
    _same_tree(model.state_dict(), dn.load(tmp_path / "m.pt"))
    _same_tree(opt.state_dict(), dn.load(tmp_path / "o.pt"))


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(12, 4, rng=3)
        self.lin = nn.Linear(4, 3, rng=4)

    def forward(self, ids):
        return self.lin(dn.tanh(self.emb(ids)))


def _step(model, opt, k):
    rng = np.random.default_rng(100 + k)
    ids, y = rng.integers(0, 12, 5), rng.integers(0, 3, 5)
    opt.zero_grad()
    loss = dn.cross_entropy(model(ids), y)
    loss.backward()
    opt.step()
    return float(loss.item())


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda ps: optim.Adam(ps, lr=0.01, betas=(0.8, 0.9)),
    lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.01),
], ids=["sgd-momentum", "adam", "adagrad"])
def test_a_checkpoint_restores_training_exactly(make, tmp_path):
    ref = _Net()
    ref_opt = make(ref.parameters())
    ref_losses = [_step(ref, ref_opt, k) for k in range(6)]

    a = _Net()
    a_opt = make(a.parameters())
    for k in range(3):
        _step(a, a_opt, k)
    dn.save({"epoch": 3, "model": a.state_dict(), "optim": a_opt.state_dict(), "best": 0.81}, tmp_path / "ckpt.pt")

    b = _Net()
    for p in b.parameters():                    # other weights and a fresh optimizer: all must come from the file
        p.data[...] = 0.5
    b_opt = make(b.parameters())
    ck = dn.load(tmp_path / "ckpt.pt", map_location="cpu")
    assert (ck["epoch"], ck["best"]) == (3, 0.81)
    b.load_state_dict(ck["model"])
    b_opt.load_state_dict(ck["optim"])
    losses = [_step(b, b_opt, k) for k in range(3, 6)]
    assert losses == ref_losses[3:]
    for (k, v), (_, w) in zip(ref.state_dict().items(), b.state_dict().items()):
        np.testing.assert_array_equal(v, w, err_msg=k)


def test_the_file_is_not_a_pickle(tmp_path):
    import pickle
    path = tmp_path / "ckpt.pt"
    model, opt = _model_and_optimizer()
    dn.save({"model": model.state_dict(), "optim": opt.state_dict(), "t": dn.tensor([1.0])}, path)
    raw = path.read_bytes()
    assert raw[:4] == b"PK\x03\x04"                         # a zip archive
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(raw)
    with np.load(path, allow_pickle=False) as z:            # every member loads without unpickling
        assert all(not z[k].dtype.hasobject for k in z.files)


def test_objects_are_pickled_and_refused_by_default(tmp_path):
    """torch 2.6+: save pickles any object; load (weights_only=True by
    default) refuses it naming the type and the flag; weights_only=False
    unpickles (a file you trust)."""
    import pickle
    model, opt = _model_and_optimizer()
    cases = [(model, r"dynnets.nn.container.Sequential \(at top level\)"),
             ({"a": [1, opt]}, r"dynnets.nn.optim.Adam \(at a.1\)"),
             ({"x": np.array([object()])}, r"numpy.ndarray \(at x\)"),
             ({frozenset(): 1}, r"dict \(at top level\)")]
    for obj, named in cases:
        dn.save(obj, tmp_path / "m.pt")
        for kw in ({}, {"weights_only": True}, {"weights_only": None}):
            with pytest.raises(pickle.UnpicklingError, match=named + r".*Pass weights_only=False only if you trust"):
                dn.load(tmp_path / "m.pt", **kw)
    back = dn.load(tmp_path / "m.pt", weights_only=False)
    assert back == {frozenset(): 1}
    dn.save({"model": model, "optim": opt, "sd": model.state_dict(), "epoch": 3}, tmp_path / "c.pt")
    ck = dn.load(tmp_path / "c.pt", weights_only=False)
    assert isinstance(ck["model"], nn.Sequential) and isinstance(ck["optim"], optim.Adam) and ck["epoch"] == 3
    # one pickle for the file: the optimizer's parameters are the loaded model's
    assert [id(p) for p in ck["optim"].param_groups[1]["params"]] == [id(p) for p in ck["model"][1].parameters()]
    for (k, v), w in zip(model.state_dict().items(), ck["model"].state_dict().values()):
        np.testing.assert_array_equal(np.asarray(v), np.asarray(w), err_msg=k)
    assert set(ck["optim"].state) == set(ck["model"].parameters())
    with pytest.raises(ValueError, match="weights_only=True with an explicit pickle_module"):
        dn.load(tmp_path / "c.pt", pickle_module=pickle, weights_only=True)
    assert isinstance(dn.load(tmp_path / "c.pt", pickle_module=pickle)["model"], nn.Sequential)   # None: False


def test_safe_values_beyond_containers(tmp_path):
    """argparse.Namespace (a script's args), sets, complex numbers and bytes
    load with the default weights_only=True: no pickle in the file."""
    import argparse
    obj = {"args": argparse.Namespace(lr=0.1, dims=[3, 4], name="x", sub=argparse.Namespace(k=None)),
           "s": {1, "a", (2, 3)}, "f": frozenset([1.5]), "c": 1 - 2j, "b": b"\x00ab", "ba": bytearray(b"z")}
    dn.save(obj, tmp_path / "n.pt")
    back = dn.load(tmp_path / "n.pt")
    assert back == obj and type(back["args"]) is argparse.Namespace and type(back["ba"]) is bytearray
    with np.load(tmp_path / "n.pt", allow_pickle=False) as z:
        assert "__dynnets_pickle__" not in z.files


def test_file_objects_and_torchs_load_arguments(tmp_path):
    import io as pyio
    buf = pyio.BytesIO()
    dn.save({"w": dn.tensor([1.0, 2.0]), "k": 1}, buf)
    buf.seek(0)
    back = dn.load(buf, map_location=lambda storage, loc: storage, weights_only=True)
    np.testing.assert_array_equal(back["w"].data, [1.0, 2.0]) and back["k"] == 1
    with open(tmp_path / "f.pt", "wb") as fh:
        dn.save([1, 2], fh)
    with open(tmp_path / "f.pt", "rb") as fh:
        assert dn.load(fh) == [1, 2]
    for ok in ("cpu", dn.device("cpu"), {"cuda:0": "cpu"}, None):
        assert dn.load(tmp_path / "f.pt", map_location=ok) == [1, 2]
    for bad in ("cuda", dn.device("cuda:0"), {"cpu": "cuda:1"}):
        with pytest.raises(dn.devices.DeviceUnavailableError, match="load\\(map_location=\\)"):
            dn.load(tmp_path / "f.pt", map_location=bad)
    with pytest.raises(io.NotACheckpointError, match="not an .npz archive"):
        dn.load(pyio.BytesIO(b"\x80\x04K\x01."))           # a pickle of 1


FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def test_files_written_before_issue_22_still_load():
    """Files the previous version wrote (state_dict values were numpy
    arrays then; tests/fixtures, written by commit ba08054) load into
    today's modules: a `dynnets train` checkpoint through load_checkpoint,
    and a torch-style dict of model and optimizer state dicts."""
    from dynnets.train import load_checkpoint
    want = np.load(os.path.join(FIXTURES, "expected_pre_i22.npz"))
    model = load_checkpoint(os.path.join(FIXTURES, "checkpoint_v1_pre_i22.npz"))
    assert model.checkpoint["epoch"] == 1 and len(model.vocab) > 0
    got = model.state_dict()
    assert sorted(got) == sorted(k[2:] for k in want.files if k.startswith("c."))
    for k, v in got.items():
        np.testing.assert_array_equal(v.numpy(), want["c." + k], err_msg=k)
    ck = dn.load(os.path.join(FIXTURES, "torch_style_pre_i22.pt"))
    assert all(type(v) is np.ndarray for v in ck["model"].values())
    mod = nn.Sequential(nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 1))
    opt = optim.Adam(mod.parameters(), lr=0.01)
    assert mod.load_state_dict(ck["model"]) == ([], [])
    opt.load_state_dict(ck["optim"])
    for k, v in mod.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), want["m." + k], err_msg=k)
    assert opt.state[mod[0].weight]["step"] == 1
