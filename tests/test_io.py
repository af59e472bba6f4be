"""Checkpoints: nested save/load round trip, atomicity under a crash mid-save,
clear errors."""

import os

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
    assert set(bo["state"]) == {str(k) for k in sd["state"]}    # integer keys come back as strings
    for k, st in sd["state"].items():
        assert bo["state"][str(k)]["step"] == st["step"] == 2
        np.testing.assert_array_equal(bo["state"][str(k)]["exp_avg_sq"], st["exp_avg_sq"])
    assert (back["epoch"], back["best"], back["name"], back["done"], back["note"]) == (3, 0.25, "tree-lstm",
                                                                                       False, None)
    assert back["history"] == [1.5, 1.25] and back["shape"] == (2, 3)
    assert back["scalar"] == np.float32(2.5)
    np.testing.assert_array_equal(back["nested"]["a"]["b"], np.arange(4))
    # and it loads back into fresh objects
    m2, o2 = _model_and_optimizer()
    m2.load_state_dict(back["model"])
    o2.load_state_dict(back["optimizer"])
    assert o2.state_dict()["param_groups"] == sd["param_groups"]
    assert not _tmp_files(tmp_path)


def test_tensors_are_saved_as_arrays(tmp_path):
    dn.save({"w": dn.tensor([[1.0, 2.0]]), "p": nn.Parameter(np.ones(2))}, tmp_path / "t.npz")
    back = dn.load(tmp_path / "t.npz")
    np.testing.assert_array_equal(back["w"], [[1.0, 2.0]])
    assert isinstance(back["p"], np.ndarray)


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
    with pytest.raises(TypeError, match="save: cannot store a value of type object at model.x"):
        dn.save({"model": {"x": object()}}, tmp_path / "bad.npz")
    assert not (tmp_path / "bad.npz").exists() and not _tmp_files(tmp_path)
