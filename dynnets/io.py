"""Checkpoints: ``save(obj, f)`` / ``load(f)``, written atomically (torch's
``torch.save`` / ``torch.load``, with torch 2.6+'s ``weights_only=True`` default).

The file is an ``.npz`` archive with a JSON index. What torch users save
most (state dicts of models and optimizers, tensors, arrays, numbers,
strings, None, ``argparse.Namespace`` and nested dicts, lists and tuples of
these) is stored as plain arrays and JSON: no pickle, safe to load from
anyone. Anything else (a whole ``nn.Module``, an ``Optimizer``, any other
object) is pickled, as ``torch.save`` does, into one separate member of the
same archive, and the index records each such object's type and place.
:func:`load` refuses those by default (``weights_only=True``, as torch 2.6+:
unpickling can run arbitrary code) with an error naming the types, and
unpickles them with ``weights_only=False``, for a file you trust.

Every file of the package is written by :func:`atomic_write` (through
:func:`save`, :func:`atomic_write_bytes`, :func:`atomic_write_text`): into a
temporary file beside the target, then renamed over it, so a reader sees the
old file or the new one, never a part. A process killed mid-write (``kill
-9``, a power cut) leaves its temporary file behind; its name,
``.<target>.<host>-<pid>.<random>.tmp``, says who wrote it, and every later
write into that folder removes those whose writer is gone (same host, no
process with that pid). Temporary files of a live process, or of another
host sharing the folder, are left alone. :func:`temp_dir_beside` and
:func:`replace_dir` do the same for a whole folder (``dynnets train``'s run
folder).

Files and folders get the permissions a plain ``open()`` / ``mkdir()`` would
give them: a new file ``0o666`` and a new folder ``0o777``, less the umask
(and as the folder's default ACL says, since the kernel applies both at
creation); a file that already exists keeps its permission bits. The module
needs only the standard library and numpy, so :mod:`dynnets.data` writes
through it too (a file holding tensors imports :mod:`dynnets.autograd` to
load them, and only then).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import re
import secrets
import shutil
import socket
import stat
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

__all__ = ["save", "load", "atomic_write", "atomic_write_bytes", "atomic_write_text", "write_json",
           "remove_stale_temp_files", "temp_dir_beside", "replace_dir", "NotACheckpointError",
           "WeightsOnlyError"]

_META = "__dynnets_meta__"
# the random part of a temporary name: 8 characters of [a-z0-9_] (mkstemp's
# alphabet, so that files left by plain mkstemp writers are recognised too)
_TAGGED = re.compile(r"^\.(?P<target>.+)\.(?P<host>[A-Za-z0-9_-]+)-(?P<pid>[0-9]+)\.[a-z0-9_]{8}\.tmp$")
_UNTAGGED = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp$")


class NotACheckpointError(ValueError):
    """The file is not one :func:`save` wrote (another format, or damaged)."""


def _host():
    return re.sub(r"[^A-Za-z0-9-]", "_", socket.gethostname())[:40] or "host"


def _pid_alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # another user's live process
        return True
    except OverflowError:
        return False
    return True


def remove_stale_temp_files(folder, target=None):
    """Remove the temporary files in ``folder`` left by writers that died mid-write.

    A tagged temporary file (see the module docstring) is stale when it names
    this host and a pid with no live process. An untagged one
    (``.<target>.<random>.tmp``, as plain ``tempfile.mkstemp`` writers name
    them) is removed only for ``target``, the file about to be replaced.
    Returns the names removed.
    """
    host = _host()
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for e in entries:
        name = e.name
        if not (name.startswith(".") and name.endswith(".tmp")):
            continue
        m = _TAGGED.match(name)
        if m is not None:
            stale = m["host"] == host and not _pid_alive(int(m["pid"]))
        else:
            m = _UNTAGGED.match(name)
            stale = m is not None and target is not None and m["target"] == target
        if stale:
            with contextlib.suppress(FileNotFoundError, PermissionError):
                if e.is_dir(follow_symlinks=False):
                    if m.re is not _TAGGED:
                        continue
                    shutil.rmtree(e.path)
                else:
                    os.unlink(e.path)
                removed.append(name)
    return removed


def temp_dir_beside(path):
    """A new empty folder beside ``path``, tagged like :func:`atomic_write`'s
    temporary files (so :func:`remove_stale_temp_files` removes it once its
    writer is gone); stale ones of dead writers are removed first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(path.parent)
    return _create_beside(path, lambda tmp: os.mkdir(tmp, 0o777))[0]


def _create_beside(path, create):
    """``(tmp, create(tmp))`` for a new tagged temporary name ``tmp`` beside
    ``path`` (retried on a name clash).

    Not :func:`tempfile.mkstemp` / ``mkdtemp``: they create with mode 0600 /
    0700, and fixing that afterwards with chmod needs the umask, which can
    only be read by setting it, a race with other threads creating files.
    ``os.open(..., 0o666)`` and ``os.mkdir(..., 0o777)`` let the kernel apply
    the umask (and a default ACL) as it does for ``open()``.
    """
    prefix = f".{path.name}.{_host()}-{os.getpid()}."
    for _ in range(100):
        tmp = path.parent / f"{prefix}{secrets.token_hex(4)}.tmp"
        try:
            return tmp, create(tmp)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path} after 100 tries")


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def replace_dir(src, dst):
    """Move folder ``src`` to ``dst``, replacing a folder there whole.

    Two renames in ``dst``'s parent: the old folder into a tagged temporary
    folder (removed after), ``src`` into its place; if the second fails the
    first is undone. Between the two, for microseconds, ``dst`` does not
    exist; at no time does it hold a mix of the two.
    """
    src, dst = Path(src), Path(dst)
    if not dst.exists():
        os.rename(src, dst)
        return
    hold = temp_dir_beside(dst)
    os.rename(dst, hold / dst.name)
    try:
        os.rename(src, dst)
    except BaseException:
        os.rename(hold / dst.name, dst)
        raise
    shutil.rmtree(hold, ignore_errors=True)


def _where(prefix):
    return prefix.rstrip(".") or "top level"


def _flatten(obj, prefix, arrays, pickled):
    """Nested dicts/lists of arrays and plain values -> flat arrays + JSON
    skeleton; what has no safe encoding is appended to ``pickled`` and the
    skeleton records its type and place."""
    if isinstance(obj, dict):
        if all(_key_ok(k) for k in obj):
            node = {"__dict__": [[_flatten_key(k), _flatten(v, f"{prefix}{k}.", arrays, pickled)]
                                 for k, v in obj.items()]}
            if isinstance(obj, OrderedDict):
                node["ordered"] = True
            return node
    elif isinstance(obj, (list, tuple)):
        return {"__list__" if isinstance(obj, list) else "__tuple__":
                [_flatten(v, f"{prefix}{i}.", arrays, pickled) for i, v in enumerate(obj)]}
    elif getattr(type(obj), "_is_tensor", False):
        # a dynnets Tensor (or Parameter) comes back as one, with its requires_grad, as torch.load's do
        from .autograd.tensor import Parameter     # loaded already: obj is a Tensor
        node = _flatten(np.asarray(obj), prefix, arrays, pickled)
        node["tensor"] = "parameter" if isinstance(obj, Parameter) else "tensor"
        node["requires_grad"] = bool(obj.requires_grad)
        return node
    elif isinstance(obj, (np.ndarray, np.generic)) and not obj.dtype.hasobject:
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(obj)
        return {"__array__": key, "scalar": True} if isinstance(obj, np.generic) else {"__array__": key}
    elif obj is None or type(obj) in (bool, int, float, str):
        return {"__value__": obj}
    elif type(obj) is argparse.Namespace and all(type(k) is str for k in vars(obj)):
        # a training script's args, saved beside the weights (dasguptar/treelstm.pytorch)
        return {"__namespace__": [[k, _flatten(v, f"{prefix}{k}.", arrays, pickled)] for k, v in vars(obj).items()]}
    elif type(obj) in (set, frozenset) and all(_key_ok(v) for v in obj):
        return {"__set__" if type(obj) is set else "__frozenset__": [_flatten_key(v) for v in obj]}
    elif type(obj) is complex:
        return {"__complex__": [obj.real, obj.imag]}
    elif type(obj) in (bytes, bytearray):
        key = f"a{len(arrays)}"
        arrays[key] = np.frombuffer(bytes(obj), dtype=np.uint8)
        return {"__bytes__": key, "mutable": type(obj) is bytearray}
    # no safe encoding: pickled, as torch.save pickles everything (load refuses it unless weights_only=False)
    pickled.append(obj)
    return {"__pickled__": len(pickled) - 1, "type": _type_name(obj), "where": _where(prefix)}


def _type_name(obj):
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _key_ok(k):
    """Whether dict key (or set element) ``k`` has a safe encoding: a string,
    an int, a float, a bool, None or a tuple of these."""
    if k is None or type(k) in (str, bool, int, float):
        return True
    return type(k) is tuple and all(_key_ok(x) for x in k)


def _flatten_key(k):
    """A dict key: a string as itself, else (an int, a float, a bool, None, a
    tuple of these) tagged, so that it comes back with its type."""
    if isinstance(k, str):
        return k
    if isinstance(k, tuple):
        return {"__key__": {"__tuple__": [_flatten_key(x) for x in k]}}
    return {"__key__": {"__value__": k}}


def _unflatten_key(k):
    if isinstance(k, str):
        return k
    node = k["__key__"] if "__key__" in k else k
    if "__tuple__" in node:
        return tuple(_unflatten_key(x) for x in node["__tuple__"])
    return node["__value__"]


def _unflatten(node, arrays, objects):
    if "__dict__" in node:
        items = ((_unflatten_key(k), _unflatten(v, arrays, objects)) for k, v in node["__dict__"])
        return OrderedDict(items) if node.get("ordered") else dict(items)
    if "__list__" in node:
        return [_unflatten(v, arrays, objects) for v in node["__list__"]]
    if "__tuple__" in node:
        return tuple(_unflatten(v, arrays, objects) for v in node["__tuple__"])
    if "__array__" in node:
        a = arrays[node["__array__"]]
        kind = node.get("tensor")
        if kind is not None:
            # deferred: a file of plain arrays (dynnets.data's) loads without the autograd package
            from .autograd.tensor import Parameter, wrap_array
            if kind == "parameter":
                return Parameter(a, requires_grad=bool(node.get("requires_grad")))
            return wrap_array(a, requires_grad=bool(node.get("requires_grad")) and a.dtype.kind == "f")
        return a[()] if node.get("scalar") else a
    if "__namespace__" in node:
        return argparse.Namespace(**{k: _unflatten(v, arrays, objects) for k, v in node["__namespace__"]})
    if "__set__" in node or "__frozenset__" in node:
        items = (_unflatten_key(k) for k in node.get("__set__", node.get("__frozenset__")))
        return set(items) if "__set__" in node else frozenset(items)
    if "__complex__" in node:
        return complex(*node["__complex__"])
    if "__bytes__" in node:
        raw = arrays[node["__bytes__"]].tobytes()
        return bytearray(raw) if node.get("mutable") else raw
    if "__pickled__" in node:
        return objects[node["__pickled__"]]
    return node["__value__"]


def _pickled_nodes(node, out):
    """Every ``__pickled__`` entry of the skeleton ``node``, in file order."""
    if isinstance(node, dict):
        if "__pickled__" in node:
            out.append(node)
            return out
        for k, v in node.items():
            if k in ("__dict__", "__namespace__"):
                for _, item in v:
                    _pickled_nodes(item, out)
            elif k in ("__list__", "__tuple__"):
                for item in v:
                    _pickled_nodes(item, out)
    return out


def atomic_write(path, write):
    """Write ``path`` atomically: ``write(f)`` fills a binary file object
    that replaces ``path`` when ``write`` returns (nothing changes if it raises)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(path.parent, path.name)
    tmp, fd = _create_beside(path, lambda t: os.open(t, _CREATE, 0o666))
    try:
        with os.fdopen(fd, "wb") as f:
            _keep_mode(path, tmp)
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


def _keep_mode(path, tmp):
    """Give ``tmp`` the permission bits of the file ``path`` when it exists:
    ``open(path, "w")`` keeps an existing file's mode, and so does its atomic
    replacement."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode):
        os.chmod(tmp, stat.S_IMODE(st.st_mode) & 0o777)


def atomic_write_bytes(path, data: bytes):
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path, text: str):
    atomic_write_bytes(path, text.encode("utf-8"))


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    return o


def write_json(path, obj):
    """Write ``obj`` as indented JSON, atomically (results files); numpy
    scalars and arrays become numbers and lists, paths strings."""
    atomic_write_text(path, json.dumps(_jsonable(obj), indent=1, sort_keys=False) + "\n")
    return Path(path)


def _is_file(f):
    return hasattr(f, "write") or hasattr(f, "read")


_PICKLE = "__dynnets_pickle__"


class WeightsOnlyError(pickle.UnpicklingError):
    """:func:`load` with ``weights_only=True`` (the default) met pickled
    objects in the file (torch 2.6+ raises ``pickle.UnpicklingError`` too)."""


def save(obj, f, pickle_module=pickle, pickle_protocol=2):
    """Save any object, as ``torch.save``: tensors, arrays and plain values
    safely, anything else pickled.

    What torch users save most is stored without a pickle, and loads with
    the default ``load(f)``: a model's ``state_dict()``, an optimizer's
    ``state_dict()`` (integer keys stay integers), checkpoint dicts mixing
    them with epochs, scores, names and None, an ``argparse.Namespace`` of
    such values (a script's args), sets, complex numbers and bytes. Tensors
    and Parameters load back as such (with ``requires_grad``), numpy arrays
    as arrays, numpy scalars as numpy scalars, an ``OrderedDict`` as one.

    Any other object (a whole ``nn.Module``, an ``Optimizer``, an instance of
    your own class, a dict with keys of another type) is pickled, as torch
    pickles it, into a separate member of the archive; :func:`load` then
    needs ``weights_only=False`` (torch 2.6+'s rule). All such objects of one
    file share one pickle, so a Parameter that two of them hold comes back
    as one object; a tensor both in a pickled object and in the safe part
    (``{"model": model, "sd": model.state_dict()}``) comes back as two.
    Pickled tensors keep their values and ``requires_grad``, not ``.grad``
    nor their place in a graph (as torch's).

    Parameters
    ----------
    obj : object
    f : str, path or binary file object
        A path is written atomically (a temporary file in the same folder,
        renamed over ``f``), so a crash mid-save never leaves a corrupt
        checkpoint; a file object is written as it is.
    pickle_module : module, default :mod:`pickle`
        What pickles the objects without a safe encoding; needs ``dumps``.
    pickle_protocol : int, default 2 (torch's)
    """
    arrays = {}
    pickled = []
    skel = _flatten(obj, "", arrays, pickled)
    if pickled:
        arrays[_PICKLE] = np.frombuffer(pickle_module.dumps(pickled, protocol=pickle_protocol), dtype=np.uint8)
    arrays[_META] = np.frombuffer(json.dumps(skel).encode("utf-8"), dtype=np.uint8)
    if _is_file(f):
        np.savez(f, **arrays)
        return
    atomic_write(f, lambda fh: np.savez(fh, **arrays))


def _check_map_location(map_location):
    """``map_location`` may only keep things on the CPU (where they are)."""
    if map_location is None or callable(map_location):
        # torch's usual callable, ``lambda storage, loc: storage``, keeps storages where they are; a file
        # here holds nothing but CPU arrays, so there is no storage to hand it
        return
    from .devices import check_device
    targets = map_location.values() if isinstance(map_location, dict) else [map_location]
    for t in targets:
        check_device(t, "load(map_location=)")


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Load what :func:`save` wrote (as ``torch.load``, torch 2.6+'s defaults).

    Parameters
    ----------
    f : str, path or binary file object
    map_location : None, "cpu", device, dict or callable
        Everything loads onto the CPU; a target other than the CPU raises
        :class:`~dynnets.devices.DeviceUnavailableError`. A callable (torch's
        ``lambda storage, loc: storage``) is accepted and not called: there
        are no storages to map.
    pickle_module : module, optional
        What unpickles (default :mod:`pickle`); needs ``loads``.
    weights_only : bool, optional
        None (the default) means True, or False when ``pickle_module`` is
        given (torch 2.6+'s rule).
        True: only what :func:`save` stores without a pickle (tensors,
        arrays, numbers, strings, None, Namespaces and containers of these);
        a file holding pickled objects raises :class:`WeightsOnlyError` (a
        ``pickle.UnpicklingError``) naming their types and places, and
        nothing is unpickled. False: the pickled objects are unpickled too;
        unpickling can run arbitrary code, so pass it only for a file you
        trust (one you wrote).
    mmap
        torch's argument, accepted: arrays are read into memory.
    **pickle_load_args
        Passed to ``pickle_module.loads`` (``encoding=``...) with
        ``weights_only=False``.

    Raises
    ------
    FileNotFoundError
    NotACheckpointError (a ValueError)
        The file is not an ``.npz`` archive, has no dynnets metadata, or is damaged.
    WeightsOnlyError (a pickle.UnpicklingError)
        ``weights_only`` is true and the file holds pickled objects.
    """
    _check_map_location(map_location)
    if weights_only is None:
        weights_only = pickle_module is None        # torch's default: an explicit pickle_module means False
    elif weights_only and pickle_module is not None:
        raise ValueError("load: weights_only=True with an explicit pickle_module: the weights-only loader "
                         "unpickles nothing (as torch, which raises too); pass weights_only=False to use it")
    unpickle = None
    if not weights_only:
        pm = pickle if pickle_module is None else pickle_module
        unpickle = lambda raw: pm.loads(raw, **pickle_load_args)     # noqa: E731
    if _is_file(f):
        name = getattr(f, "name", None) or type(f).__name__
        return _load_from(f, name, unpickle)
    path = Path(f)
    if not path.exists():
        raise FileNotFoundError(f"load: no checkpoint at {path}")
    return _load_from(path, path, unpickle)


def _refuse_pickles(path, nodes):
    found = ", ".join(f"{n['type']} (at {n['where']})" for n in nodes[:8])
    more = f" and {len(nodes) - 8} more" if len(nodes) > 8 else ""
    raise WeightsOnlyError(
        f"load: weights only load failed: {path} holds pickled objects: {found}{more}. With weights_only=True "
        f"(the default, as torch 2.6+) load reads only tensors, arrays, numbers, strings, Namespaces and "
        f"containers of them. Pass weights_only=False only if you trust the source of the file: unpickling can "
        f"run arbitrary code. (To save weights that always load safely, save model.state_dict() and "
        f"optimizer.state_dict() instead of the objects.)")


def _load_from(src, path, unpickle):
    # np.load takes anything that is not a zip or .npy file for a pickle and
    # then advises allow_pickle=True, which would run code from the file
    if not zipfile.is_zipfile(src):
        raise NotACheckpointError(f"load: {path} is not a dynnets checkpoint (not an .npz archive)")
    if hasattr(src, "seek"):
        src.seek(0)
    try:
        with np.load(src, allow_pickle=False) as z:
            if _META not in z.files:
                raise NotACheckpointError(f"load: {path} is not a dynnets checkpoint (an .npz archive without "
                                          f"dynnets metadata; arrays: {', '.join(z.files[:5]) or 'none'})")
            skel = json.loads(bytes(z[_META]).decode("utf-8"))
            nodes = _pickled_nodes(skel, [])
            if nodes and unpickle is None:
                _refuse_pickles(path, nodes)
            raw = bytes(z[_PICKLE]) if nodes else None
            arrays = {k: z[k] for k in z.files if k not in (_META, _PICKLE)}
    except (NotACheckpointError, WeightsOnlyError):
        raise
    except (ValueError, KeyError, TypeError, EOFError, OSError, zipfile.BadZipFile) as exc:
        # a damaged archive, object arrays (pickles), or metadata not written by save()
        detail = " ".join(str(exc).split())[:120]
        if "pickle" in detail:
            detail = "it holds object arrays (pickled Python objects), which dynnets never writes"
        else:
            detail = f"{type(exc).__name__}: {detail}"
        raise NotACheckpointError(f"load: {path} is not a dynnets checkpoint, or is damaged ({detail})") from None
    # outside the handler above: an error raised while unpickling (a class that no longer exists) is the
    # caller's to see as it is
    objects = unpickle(raw) if nodes else ()
    return _unflatten(skel, arrays, objects)
