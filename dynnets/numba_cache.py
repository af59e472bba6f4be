"""Numba's on-disk cache made safe for several processes at once.

dynnets compiles its kernels with ``@njit(cache=True)`` so that a process
loads them from ``__pycache__`` instead of compiling them again. Several
processes share that cache: the Dask workers of a sweep, the subprocesses of
the test suite, a training run started while another one compiles, two
checkouts of different versions installed in turn. Numba's cache file
(``numba.core.caching.IndexDataCacheFile``, numba 0.59-0.68) is not safe for
that: ``save`` reads the index, picks the first free data-file number, writes
the index, then the data, with no lock. Two processes that save at once pick
the same number, so the index can end up pointing one signature at the other
signature's machine code; and a process running an older version of a kernel
file treats the newer index as stale and reuses its numbers, so a reader of
the newer index can load the older code. Either way a kernel silently
computes something else (seen here: a float32 kernel whose rows came out
wrong until its cache was deleted). See numba/numba#4807 and #10128.

:func:`install` replaces ``IndexDataCacheFile.save`` with one that

* never reuses a data-file name: each saved overload gets a fresh name (the
  data is written and renamed into place before the index refers to it), so
  an index entry can only ever point at the code it was saved with;
* holds an exclusive ``fcntl`` lock on a lock file beside the index while it
  re-reads the index, adds its entry and writes it back, so concurrent saves
  do not drop each other's entries;
* removes, under the same lock, this function's data files that the index no
  longer names (replaced entries, older versions' code), so the cache does not
  grow. A process still holding an older index then fails to open the file and
  Numba treats that as a cache miss and compiles.

Where the lock cannot be taken (no ``fcntl``, a read-only folder) saves still
get fresh names, which keeps every entry correct; only the clean-up is skipped.
``load`` is Numba's own: it reads the index, then the file it names.
"""
from __future__ import annotations

import contextlib
import os
import uuid

__all__ = ["install", "installed", "generated_dir", "generated_kernel"]

_STATE = {"installed": False}


@contextlib.contextmanager
def _locked(path):
    """An exclusive lock on ``path`` (created if needed); yields False where none can be taken."""
    try:
        import fcntl
    except ImportError:          # not POSIX
        yield False
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)             # closing the descriptor releases the lock


def _save(self, key, data):
    """``IndexDataCacheFile.save``: add one overload without reusing a file name."""
    prefix = self._index_name[:-len(".nbi")] + "."
    with _locked(self._index_path + ".lock") as locked:
        overloads = self._load_index()
        name = f"{prefix}{uuid.uuid4().hex[:12]}.nbc"
        self._save_data(name, data)
        overloads[key] = name
        self._save_index(overloads)
        if not locked:
            return
        keep = set(overloads.values())
        try:
            entries = os.listdir(self._cache_path)
        except OSError:
            return
        for f in entries:
            if f.startswith(prefix) and f.endswith(".nbc") and f not in keep and ".tmp." not in f:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self._cache_path, f))


def install():
    """Patch Numba's cache file class (once; a no-op if Numba's internals differ)."""
    if _STATE["installed"]:
        return True
    try:
        from numba.core import caching
    except ImportError:
        return False
    cls = getattr(caching, "IndexDataCacheFile", None)
    needed = ("_load_index", "_save_index", "_save_data", "_index_name", "_index_path", "_cache_path")
    if cls is None or not all(hasattr(cls, n) for n in needed[:3]):
        return False
    # the three instance attributes are set in __init__; check them on a probe
    probe = cls.__new__(cls)
    try:
        cls.__init__(probe, "/nonexistent", "probe", b"")
    except Exception:
        return False
    if not all(hasattr(probe, n) for n in needed[3:]):
        return False
    _STATE["numba_save"] = cls.save
    cls.save = _save
    _STATE["installed"] = True
    return True


def installed():
    """True once :func:`install` has patched Numba's cache."""
    return _STATE["installed"]


def generated_dir(kind):
    """The folder of generated kernel modules of ``kind``: ``kind`` under
    ``$DYNNETS_CACHE_DIR`` or ``~/.cache/dynnets``."""
    root = os.environ.get("DYNNETS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "dynnets")
    return os.path.join(root, kind)


def generated_kernel(kind, tag, src):
    """The function ``kernel`` of the generated module source ``src``, defined
    in a file of the cache folder (``$DYNNETS_CACHE_DIR`` or
    ``~/.cache/dynnets``, subfolder ``kind``; the file named ``tag`` and a
    hash of ``src``, written atomically) so that Numba's ``cache=True`` can
    keep its machine code beside it and a later process loads that instead
    of compiling again. None where the folder is unusable or
    ``DYNNETS_NO_DISK_CACHE`` is set (the caller then compiles in memory)."""
    if os.environ.get("DYNNETS_NO_DISK_CACHE"):
        return None
    import hashlib
    import importlib.util
    import sys

    from .io import atomic_write_text
    digest = hashlib.sha1(src.encode()).hexdigest()[:20]
    path = os.path.join(generated_dir(kind), f"{tag}_{digest}.py")
    try:
        if not os.path.exists(path):
            atomic_write_text(path, src)
        name = f"_dynnets_{kind}_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        # Numba's cache re-imports the defining module by name when it loads machine code
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod.kernel
    except OSError:
        return None
