"""Planning a sweep: every run of a grid validated, resolved (defaults filled in,
``max_len`` percentiles) and keyed (:func:`plan`)."""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field

from .grid import SWEEP_FORMAT, SweepError, VOCAB_SETTINGS
from .runner import train_run


# --------------------------------------------------------------------------
# planning: validation, resolution, keys
# --------------------------------------------------------------------------


_NOT_SETTINGS = {"seed": "the grid's seeds set it (--seeds)", "out_dir": "sweep runs write no run folders",
                 "progress": "the sweep shows one progress bar"}


@dataclass(frozen=True)
class Run:
    """One point of the grid.

    ``model``: every constructor argument of ``kind`` (defaults filled in,
    without ``vocab_size``); ``train``: every ``TrainConfig`` field; ``vocab``:
    ``lowercase`` and ``min_freq``; ``axes``: the values of the grid's axes
    for this run (what tells its group from the others); ``key``: see the
    module docstring.
    """

    key: str
    name: str
    kind: str
    label: str
    seed: int
    model: dict
    train: dict
    vocab: dict
    axes: dict

    def to_dict(self):
        return dataclasses.asdict(self)


def _train_fields():
    from ..train import TrainConfig
    return {f.name for f in dataclasses.fields(TrainConfig)} - set(_NOT_SETTINGS)


class _Models:
    """What each model kind accepts, found by building tiny models (vocabulary
    of 2): a constructor's own check is the authority on its arguments."""

    def __init__(self):
        self._accepts = {}
        self._defaults = {}
        self._configs = {}

    def defaults(self, kind):
        if kind not in self._defaults:
            from ..models import build_model
            self._defaults[kind] = dict(build_model(kind, 2).config)
        return self._defaults[kind]

    def accepts(self, kind, name):
        if (kind, name) not in self._accepts:
            from ..models import build_model
            ok = True
            if name not in self.defaults(kind):
                try:
                    build_model(kind, 2, **{name: self.defaults(kind).get(name)})
                except TypeError as exc:
                    ok = "unexpected keyword argument" not in str(exc)
                except (ValueError, LookupError):
                    ok = True
            self._accepts[(kind, name)] = ok
        return self._accepts[(kind, name)]

    def config(self, kind, kwargs):
        """Every constructor argument of ``kind`` built with ``kwargs`` (the
        constructor checks the values); models that differ only in the seed
        are built once."""
        from ..models import build_model
        seedless = {k: v for k, v in kwargs.items() if k != "seed"}
        memo = json.dumps([kind, seedless], sort_keys=True, default=repr)
        if memo not in self._configs:
            cfg = dict(build_model(kind, 2, **seedless).config)
            cfg.pop("vocab_size", None)
            for k, v in seedless.items():
                # a sequence kind's name fixes its cell and direction
                if k in cfg and cfg[k] != v:
                    raise ValueError(f"{kind} fixes {k}={cfg[k]!r} (its kind name says so); it cannot be {v!r}")
            self._configs[memo] = cfg
        cfg = dict(self._configs[memo])
        if "seed" in kwargs:
            cfg["seed"] = kwargs["seed"]
        return cfg


def _hash(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _runner_name(runner):
    return f"{runner.__module__}.{runner.__qualname__}"


def _resolve_max_len(v, lengths, where):
    if isinstance(v, str):
        if v == "max":
            return max(lengths)
        if v in ("p95", "median"):
            import numpy as np
            return int(math.ceil(np.percentile(lengths, 95 if v == "p95" else 50)))
        raise SweepError(f"{where}: max_len must be a positive integer, max, p95 or median, got {v!r}")
    return v


def plan(grid, data, runner=None):
    """The runs of ``grid`` on ``data`` (a :class:`SweepData`), validated,
    in order (model, then setting combination, then seed).

    Raises :class:`SweepError` (naming the flag or file and line) for an
    unknown model or setting, a bad value or duplicate runs.
    """
    from ..models import MODEL_KINDS
    from ..train import TrainConfig
    runner = runner or train_run
    train_fields = _train_fields()
    probe = _Models()
    where = grid.where
    for m in grid.models:
        if m.kind not in MODEL_KINDS:
            near = difflib.get_close_matches(m.kind, MODEL_KINDS, 1)
            raise SweepError(f"{where.get(('model', m.name), '--models')}: unknown model {m.kind!r} (expected one "
                             f"of {', '.join(MODEL_KINDS)}" + (f"; did you mean {near[0]!r}?)" if near else ")"))

    def check_name(name, kinds, at):
        if name in _NOT_SETTINGS:
            raise SweepError(f"{at}: {name} is not a setting: {_NOT_SETTINGS[name]}")
        if name in train_fields or name in VOCAB_SETTINGS:
            return
        if any(probe.accepts(k, name) for k in kinds):
            return
        known = sorted(train_fields | set(VOCAB_SETTINGS) | {n for k in kinds for n in probe.defaults(k)}
                       - {"vocab_size", "seed"})
        near = difflib.get_close_matches(name, known, 1)
        raise SweepError(f"{at}: unknown setting {name!r}: not an argument of {', '.join(sorted(set(kinds)))}, a "
                         f"TrainConfig field nor a vocabulary option" + (f" (did you mean {near[0]!r}?)" if near
                                                                         else ""))

    kinds = [m.kind for m in grid.models]
    for name in grid.settings:
        check_name(name, kinds, where.get(("setting", name), f"--set {name}"))
    for m in grid.models:
        for name in m.settings:
            check_name(name, [m.kind], where.get(("model setting", m.name, name), f"models.{m.name}.{name}"))

    lengths = [len(t.leaves()) for t in data.splits()["train"]]
    runs = []
    for m in grid.models:
        axes = {k: v for k, v in grid.settings.items()
                if k in train_fields or k in VOCAB_SETTINGS or probe.accepts(m.kind, k)}
        axes.update(m.settings)
        names = list(axes)
        for combo in itertools.product(*(axes[n] for n in names)):
            values = dict(zip(names, combo))

            def blame(msg, m=m, values=values, names=names):
                """Where the setting that ``msg`` names came from (else the model's entry)."""
                for n in sorted(names, key=len, reverse=True):
                    if re.search(rf"\b{re.escape(n)}\b", msg):
                        w = where.get(("model setting", m.name, n)) or where.get(("setting", n)) or f"setting {n}"
                        return f"{w} ({m.name}, {n}={values[n]!r})"
                return f"{where.get(('model', m.name), m.name)} ({m.name})"
            train_kw = {n: v for n, v in values.items() if n in train_fields}
            vocab = dict(VOCAB_SETTINGS)
            vocab.update({n: v for n, v in values.items() if n in VOCAB_SETTINGS})
            if not isinstance(vocab["lowercase"], bool):
                raise SweepError(f"{blame('lowercase')}: lowercase must be true or false")
            if isinstance(vocab["min_freq"], bool) or not isinstance(vocab["min_freq"], int) or vocab["min_freq"] < 1:
                raise SweepError(f"{blame('min_freq')}: min_freq must be a positive integer")
            model_kw = {n: v for n, v in values.items() if n not in train_fields and n not in VOCAB_SETTINGS}
            if "max_len" in model_kw:
                model_kw["max_len"] = _resolve_max_len(model_kw["max_len"], lengths, blame("max_len"))
            for seed in grid.seeds:
                try:
                    tc = TrainConfig(seed=seed, progress=False, **train_kw)
                except (ValueError, TypeError) as exc:
                    raise SweepError(f"{blame(str(exc))}: {exc}") from None
                kw = dict(model_kw, seed=seed)
                for n in train_fields:           # e.g. the padded LSTM's graph optimizer
                    if n not in kw and probe.accepts(m.kind, n):
                        kw[n] = getattr(tc, n)
                try:
                    cfg = probe.config(m.kind, kw)
                except (ValueError, TypeError) as exc:
                    msg = " ".join(str(exc).split())
                    raise SweepError(f"{blame(msg)}: {msg}") from None
                train = tc.to_dict()
                for n in _NOT_SETTINGS:
                    train.pop(n, None)
                full = {"format": SWEEP_FORMAT, "kind": m.kind, "model": cfg, "train": train, "vocab": vocab,
                        "seed": seed, "data": data.key, "runner": _runner_name(runner)}
                runs.append(Run(key=_hash(full)[:20], name=m.name, kind=m.kind, label=m.label, seed=seed, model=cfg,
                                train=train, vocab=vocab, axes={n: values[n] for n in names if len(axes[n]) > 1}))
    seen = {}
    for r in runs:
        if r.key in seen:
            a = seen[r.key]
            raise SweepError(f"the grid holds the same run twice: {a.name} {a.axes} and {r.name} {r.axes} (seed "
                             f"{r.seed}) have one configuration")
        seen[r.key] = r
    return runs
