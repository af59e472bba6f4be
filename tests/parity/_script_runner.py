"""Run a script of ``tests/parity/scripts`` as its author wrote it, with
PyTorch or -- its import lines rewritten, nothing else -- with dynnets.

The rewrite is the "import aliasing" of issue 22: ``import torch`` becomes
``import dynnets as torch``, ``import torch.nn as nn`` becomes ``import
dynnets.nn as nn``, ``from torch.utils.data import X`` becomes ``from
dynnets.utils.data import X`` (likewise every ``torch.<sub>``), and
``import tensorflow as tf`` becomes ``import dynnets.static as tf``. Every
other line runs unchanged. ``edits`` (``(old, new, why)`` triples) change the
source further: the parity tests keep, per script, the edits today's dynnets
still needs, each with the gap it works around, so that the list is the
record of what a user would have to change.

A script defines ``main(argv)`` returning a dict of its per-step losses and
final numbers; :func:`run` executes the (rewritten) source as a fresh module
and calls it (or ``call(module, argv)``, e.g. :func:`tf_app_run`).

Shuffling is the one randomness the two libraries cannot share through a
state_dict, so during a run each library's ``randperm`` and
``RandomSampler`` draw their permutations from
``numpy.random.default_rng(shuffle_seed)`` (a fresh stream per run, so the
torch run and the dynnets run see the same sequence). The originals still run
first with the caller's arguments, so a signature gap still shows. An edit
standing in for a missing ``randperm`` calls ``__parity_perm__(n)``, which
draws from the same stream.
"""
from __future__ import annotations

import contextlib
import io
import re
import sys
import types
from pathlib import Path

import numpy as np

SCRIPTS = Path(__file__).resolve().parent / "scripts"

_IMPORT = re.compile(r"^(?P<indent>\s*)import\s+(?P<mod>torch|tensorflow)\b(?P<sub>(\.\w+)*)(?P<rest>.*)$")
_FROM = re.compile(r"^(?P<indent>\s*)from\s+(?P<mod>torch|tensorflow)\b(?P<sub>(\.\w+)*)\s+import\s+(?P<rest>.*)$")


def _target(mod, sub):
    return ("dynnets" if mod == "torch" else "dynnets.static") + sub


def alias(source: str) -> tuple[str, int]:
    """``source`` with its torch / tensorflow imports pointed at dynnets, and
    the number of lines changed (the one edit the hidden check allows for free)."""
    out, changed = [], 0
    for line in source.splitlines():
        m = _IMPORT.match(line)
        if m:
            ind, rest = m["indent"], m["rest"]
            if " as " in rest:
                line = f"{ind}import {_target(m['mod'], m['sub'])}{rest}"
            elif m["sub"]:
                # `import torch.nn` binds `torch`, with torch.nn loaded
                line = f"{ind}import {_target(m['mod'], m['sub'])}; import {_target(m['mod'], '')} as {m['mod']}{rest}"
            else:
                line = f"{ind}import {_target(m['mod'], '')} as {m['mod']}{rest}"
            changed += 1
        else:
            m = _FROM.match(line)
            if m:
                line = f"{m['indent']}from {_target(m['mod'], m['sub'])} import {m['rest']}"
                changed += 1
        out.append(line)
    return "\n".join(out) + "\n", changed


def apply_edits(text: str, edits) -> str:
    """``text`` with each ``(old, new, why)`` of ``edits`` applied (every
    occurrence of ``old``); an ``old`` that is not there is an error, so an
    edit list cannot go stale silently."""
    for old, new, why in edits:
        if old not in text:
            raise AssertionError(f"edit not applicable ({why}): {old!r} is not in the script")
        text = text.replace(old, new)
    return text


def source(name: str, lib: str, edits=()) -> str:
    text = (SCRIPTS / name).read_text(encoding="utf-8")
    if lib == "dynnets":
        text, _ = alias(text)
    elif lib != "torch":
        raise ValueError(lib)
    return apply_edits(text, edits)


@contextlib.contextmanager
def _shared_shuffles(lib, seed):
    """Both libraries' randperm and RandomSampler draw from one fresh numpy
    stream while inside (see the module docstring); yields the stream."""
    stream = np.random.default_rng(seed)
    undo = []

    def patch(obj, name, value):
        undo.append((obj, name, obj.__dict__[name] if name in obj.__dict__ else None))
        setattr(obj, name, value)

    if lib == "torch":
        import torch as T
        import torch.utils.data as data

        def to_lib(perm, like):
            return T.from_numpy(perm).to(like.dtype)
    else:
        import dynnets as T
        import dynnets.utils.data as data

        def to_lib(perm, like):
            return T.from_numpy(perm.astype(np.asarray(like).dtype))

    if hasattr(T, "randperm"):
        orig = T.randperm

        def randperm(n, *args, **kwargs):
            got = orig(n, *args, **kwargs)
            return to_lib(stream.permutation(n), got)
        patch(T, "randperm", randperm)

    orig_iter = data.RandomSampler.__iter__

    def __iter__(self):
        if getattr(self, "replacement", False):
            yield from orig_iter(self)
            return
        yield from stream.permutation(len(self.data_source)).tolist()
    patch(data.RandomSampler, "__iter__", __iter__)
    try:
        yield stream
    finally:
        for obj, name, old in reversed(undo):
            if old is None:
                delattr(obj, name)
            else:
                setattr(obj, name, old)


@contextlib.contextmanager
def _global_state_kept():
    """The process-wide state a script may change (as real scripts do:
    ``torch.manual_seed``, ``np.random.seed``, ``random.seed``,
    ``torch.backends.cudnn.deterministic = True``) is put back afterwards,
    so that later tests see the defaults."""
    import random

    import torch

    import dynnets as dn
    import dynnets.random as dnr

    cudnn = [(m, {k: getattr(m, k) for k in ("enabled", "deterministic", "benchmark") if hasattr(m, k)})
             for m in (torch.backends.cudnn, dn.backends.cudnn)]
    states = (torch.get_rng_state(), dnr.default_generator.bit_generator.state, np.random.get_state(),
              random.getstate(), torch.get_default_dtype(), torch.get_num_threads())
    try:
        yield
    finally:
        for m, flags in cudnn:
            for k, v in flags.items():
                setattr(m, k, v)
        torch.set_rng_state(states[0])
        dnr.default_generator.bit_generator.state = states[1]
        np.random.set_state(states[2])
        random.setstate(states[3])
        torch.set_default_dtype(states[4])
        torch.set_num_threads(states[5])


def run(name: str, lib: str, argv, edits=(), quiet: bool = True, shuffle_seed: int = 0, call=None):
    """Execute ``scripts/<name>`` (aliased when ``lib == 'dynnets'``, then
    changed by ``edits``) as a fresh module and return ``main(argv)`` (or
    ``call(module, argv)``); its printing is swallowed unless ``quiet`` is
    False. Tracebacks show the file on disk, so edits keep their line count."""
    path = SCRIPTS / name
    mod = types.ModuleType(f"parity_script_{path.stem}_{lib}")
    mod.__file__ = str(path)
    code = compile(source(name, lib, edits), str(path), "exec")
    sink = io.StringIO() if quiet else sys.stdout
    old_path = list(sys.path)
    sys.path.insert(0, str(SCRIPTS))
    sys.modules[mod.__name__] = mod          # so that pickle finds the script's classes
    try:
        with contextlib.redirect_stdout(sink), _global_state_kept(), _shared_shuffles(lib, shuffle_seed) as stream:
            mod.__dict__["__parity_perm__"] = stream.permutation
            exec(code, mod.__dict__)
            if call is not None:
                return call(mod, list(argv))
            return mod.main(list(argv))
    finally:
        sys.path[:] = old_path
        sys.modules.pop(mod.__name__, None)


def tf_app_run(monkeypatch):
    """A ``call`` for :func:`run` that starts a TF1 script as ``python
    script.py --flag ...`` does: ``tf.app.run()`` parses the flags and exits
    with what ``main`` returns (here the script's results, to which the
    module is added as ``"__module__"``). Each call gets fresh
    ``tf.flags.FLAGS`` (TF1's are process-wide, and a script defines its flags
    when it is imported)."""
    import dynnets.static.app as app
    import dynnets.static.flags as flags

    fresh = flags.FlagValues()
    monkeypatch.setattr(flags, "FLAGS", fresh)
    monkeypatch.setattr(app, "FLAGS", fresh)

    def call(mod, argv):
        try:
            mod.tf.app.run(main=mod.main, argv=[mod.__file__] + argv)
        except SystemExit as e:
            result = e.code
            if isinstance(result, dict):
                result["__module__"] = mod
            return result
        raise AssertionError("tf.app.run returned instead of exiting")
    return call
