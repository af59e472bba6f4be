"""Numba's on-disk cache shared by several processes (dynnets/numba_cache.py)."""
import multiprocessing as mp
from pathlib import Path
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba.core.caching import IndexDataCacheFile

import dynnets  # noqa: F401  (installs the patch)
from dynnets import numba_cache


def test_installed():
    assert numba_cache.installed()
    assert IndexDataCacheFile.save is numba_cache._save


def _files(d):
    return sorted(p.name for p in d.iterdir() if p.suffix == ".nbc")


def _scenario(save, d):
    """A process of version 1 reads its index; a process of version 2 saves
    (its index sees version 1's as stale); version 1 then opens the file its
    index named. Returns what it read there (None: the file is gone)."""
    v1 = IndexDataCacheFile(str(d), "mod.f-3.py311", b"stamp-1")
    v2 = IndexDataCacheFile(str(d), "mod.f-3.py311", b"stamp-2")
    save(v1, "float32-sig", "float32 code, version 1")
    name = v1._load_index()["float32-sig"]            # a reader of version 1 has the index...
    save(v2, "float64-sig", "float64 code, version 2")
    try:
        return v1._load_data(name)                    # ...and opens the file it names
    except OSError:
        return None


def test_numba_own_save_hands_one_version_the_others_code(tmp_path):
    # the fault the patch removes: Numba's save reuses data-file numbers
    # across source versions, so version 1's index names version 2's code
    got = _scenario(numba_cache._STATE["numba_save"], tmp_path)
    if got == "float32 code, version 1":
        pytest.skip("this Numba no longer reuses data-file names")
    assert got == "float64 code, version 2"


def test_patched_save_never_names_other_code(tmp_path):
    got = _scenario(IndexDataCacheFile.save, tmp_path)
    assert got in ("float32 code, version 1", None)   # its own code, or a miss (then Numba compiles)
    # the stale version's file was cleaned up; the index names only the new one
    v2 = IndexDataCacheFile(str(tmp_path), "mod.f-3.py311", b"stamp-2")
    idx = v2._load_index()
    assert list(idx) == ["float64-sig"] and _files(tmp_path) == [idx["float64-sig"]]
    assert v2.load("float64-sig") == "float64 code, version 2"


def test_replacing_an_entry_removes_the_old_file(tmp_path):
    c = IndexDataCacheFile(str(tmp_path), "m.g-1.py311", b"s")
    c.save("k", "old")
    c.save("k", "new")
    assert c.load("k") == "new" and len(_files(tmp_path)) == 1


def _saver(d, who, n, barrier):
    import dynnets  # noqa: F401
    c = IndexDataCacheFile(d, "m.h-1.py311", b"s")
    barrier.wait()
    for i in range(n):
        c.save(f"{who}-{i}", (who, i))


def test_concurrent_saves_keep_every_entry(tmp_path, monkeypatch):
    # the spawned children import _saver from this module by name (tests.test_numba_cache):
    # the checkout's root must be on the path they inherit, whichever test ran before
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(4)
    ps = [ctx.Process(target=_saver, args=(str(tmp_path), w, 10, barrier)) for w in range(4)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(60)
        assert p.exitcode == 0
    c = IndexDataCacheFile(str(tmp_path), "m.h-1.py311", b"s")
    idx = c._load_index()
    assert sorted(idx) == sorted(f"{w}-{i}" for w in range(4) for i in range(10))
    for k in idx:
        w, i = k.split("-")
        assert c.load(k) == (int(w), int(i))
    assert len(_files(tmp_path)) == 40


CALL = textwrap.dedent("""
    import sys
    import numpy as np
    import dynnets  # noqa: F401
    sys.path.insert(0, sys.argv[1])
    import mod
    x = np.arange(1, 6).astype(sys.argv[2])
    print(repr(float(mod.f(x))), sum(mod.f.stats.cache_hits.values()))
""")


def test_kernels_load_from_a_cache_written_by_other_processes(tmp_path):
    (tmp_path / "mod.py").write_text(textwrap.dedent("""
        from numba import njit
        @njit(cache=True)
        def f(x):
            s = x[0] * 0
            for i in range(x.shape[0]):
                s += x[i] * (i + 1)
            return s
    """))
    (tmp_path / "call.py").write_text(CALL)
    dts = ["int8", "int32", "float32", "float64"]
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "call.py"), str(tmp_path), dt], stdout=subprocess.PIPE,
                              text=True) for dt in dts]
    for p in procs:
        p.wait(120)
    for dt in dts:
        r = subprocess.run([sys.executable, str(tmp_path / "call.py"), str(tmp_path), dt], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        value, hits = r.stdout.split()
        assert float(value) == float((np.arange(1, 6) * np.arange(1, 6)).sum())
        assert int(hits) == 1          # loaded, not compiled
    with open(next(tmp_path.glob("__pycache__/*.nbi")), "rb") as f:
        pickle.load(f)
        _, overloads = pickle.loads(f.read())
    assert len(overloads) == len(dts)
