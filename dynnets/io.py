"""Checkpoints: ``save(state, path)`` / ``load(path)`` in ``.npz``, written atomically."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["save", "load", "atomic_write_bytes", "atomic_write_text"]

_META = "__dynnets_meta__"


def _flatten(obj, prefix, arrays, meta):
    """Nested dicts/lists of arrays and plain values -> flat arrays + JSON skeleton."""
    if isinstance(obj, dict):
        return {"__dict__": [[str(k), _flatten(v, f"{prefix}{k}.", arrays, meta)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"__list__" if isinstance(obj, list) else "__tuple__":
                [_flatten(v, f"{prefix}{i}.", arrays, meta) for i, v in enumerate(obj)]}
    if hasattr(obj, "data") and isinstance(getattr(obj, "data"), np.ndarray):
        obj = obj.data
    if isinstance(obj, (np.ndarray, np.generic)):
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(obj)
        return {"__array__": key}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"__value__": obj}
    raise TypeError(f"save: cannot store a value of type {type(obj).__name__} at {prefix.rstrip('.') or 'top level'}")


def _unflatten(node, arrays):
    if "__dict__" in node:
        return {k: _unflatten(v, arrays) for k, v in node["__dict__"]}
    if "__list__" in node:
        return [_unflatten(v, arrays) for v in node["__list__"]]
    if "__tuple__" in node:
        return tuple(_unflatten(v, arrays) for v in node["__tuple__"])
    if "__array__" in node:
        return arrays[node["__array__"]]
    return node["__value__"]


def _atomic(path, write):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates the file 0600; give it the permissions a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)       # atomic on POSIX: readers see the old file or the new one
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_bytes(path, data: bytes):
    _atomic(path, lambda f: f.write(data))


def atomic_write_text(path, text: str):
    atomic_write_bytes(path, text.encode("utf-8"))


def save(state, path):
    """Save a (nested) dict of arrays/tensors and plain values to ``path`` (.npz).

    The file is written to a temporary file in the same folder and renamed
    over ``path``, so a crash mid-save never leaves a corrupt checkpoint.
    """
    arrays = {}
    skel = _flatten(state, "", arrays, None)
    arrays[_META] = np.frombuffer(json.dumps(skel).encode("utf-8"), dtype=np.uint8)
    _atomic(path, lambda f: np.savez(f, **arrays))


def load(path):
    """Load what :func:`save` wrote."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"load: no checkpoint at {path}")
    with np.load(path, allow_pickle=False) as z:
        if _META not in z.files:
            raise ValueError(f"load: {path} is not a dynnets checkpoint (no metadata)")
        skel = json.loads(bytes(z[_META]).decode("utf-8"))
        arrays = {k: z[k] for k in z.files if k != _META}
    return _unflatten(skel, arrays)
