"""The one registry of model kinds.

A kind is a name (``"treelstm"``, ``"bilstm"``, ``"padded-lstm"``) bound to a
model class and, optionally, constructor arguments the name fixes (a sequence
kind's ``cell`` and ``bidirectional``) and aliases of config names. Everything
that needs to know the kinds reads this registry: :func:`build_model` (and
through it :func:`dynnets.train.load_checkpoint`), the ``dynnets`` command
(``--model`` choices, which model flags apply to which kind), the runs
(:mod:`dynnets.runs`) and the experiment scripts.

Adding a model kind is one registration beside its class::

    @register("mytree")
    class MyTreeModel(TreeModel):
        kind = "mytree"
        ...

in a module that ``dynnets/models/__init__.py`` imports. What the rest of the
package needs to know about a kind comes from its class: the keyword
arguments of its constructor (the config it accepts), ``is_tree`` (a tree
model: ``--mode``, ``--classify``, per-node predictions), ``needs_binary``
(binary trees only), ``is_static`` (a static graph that owns its optimizer
and pads to a fixed length).
"""
from __future__ import annotations

import inspect
from types import MappingProxyType

__all__ = ["register", "build_model", "model_class", "model_kinds", "model_parameters"]


class _Kind:
    __slots__ = ("name", "cls", "preset", "aliases")

    def __init__(self, name, cls, preset, aliases):
        self.name = name
        self.cls = cls
        self.preset = MappingProxyType(dict(preset))
        self.aliases = MappingProxyType(dict(aliases))


_KINDS: dict[str, _Kind] = {}


def register(kind, cls=None, *, aliases=None, **preset):
    """Register model class ``cls`` as ``kind``; a class decorator when ``cls`` is omitted.

    Parameters
    ----------
    kind : str
        The name ``build_model`` and ``dynnets train --model`` take.
    cls : type, optional
        The model class; its constructor is ``cls(vocab_size, **config)``.
    aliases : dict, optional
        Config names accepted for constructor arguments of another name
        (``{"hidden": "hidden_size"}``).
    **preset
        Constructor arguments the kind fixes (``cell="gru", bidirectional=True``);
        a config that repeats them (a checkpoint's) has them ignored.

    Returns
    -------
    cls (or the decorator).

    Raises
    ------
    ValueError
        ``kind`` is registered already, or a preset or alias names no
        constructor argument.
    """
    if cls is None:
        return lambda c: register(kind, c, aliases=aliases, **preset)
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"register: kind must be a non-empty string, got {kind!r}")
    if kind in _KINDS:
        old = _KINDS[kind].cls
        raise ValueError(f"register: model kind {kind!r} is registered already ({old.__module__}.{old.__qualname__})")
    params = _constructor_parameters(cls)
    aliases = dict(aliases or {})
    for name in list(preset) + list(aliases.values()):
        if name not in params:
            raise ValueError(f"register: {cls.__qualname__}() has no argument {name!r} (kind {kind!r})")
    _KINDS[kind] = _Kind(kind, cls, preset, aliases)
    return cls


def _constructor_parameters(cls):
    sig = inspect.signature(cls.__init__)
    return [n for n, p in sig.parameters.items()
            if n not in ("self", "vocab_size") and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _get(kind, who):
    try:
        return _KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"{who}: unknown model kind {kind!r}; expected one of {', '.join(_KINDS)}") from None


def model_kinds(*, tree=None):
    """The registered kinds in registration order; ``tree=True`` / ``False``:
    only the tree models / only the others."""
    return tuple(k for k, v in _KINDS.items() if tree is None or bool(getattr(v.cls, "is_tree", False)) == tree)


def model_class(kind):
    """The class of ``kind`` (shared by kinds that differ in presets:
    ``lstm`` and ``bigru`` are both :class:`~dynnets.models.SequenceClassifier`)."""
    return _get(kind, "model_class").cls


def model_parameters(kind):
    """The config names ``build_model(kind, vocab_size, **config)`` accepts:
    the constructor's keyword arguments, less the ones the kind fixes, plus
    aliases (frozenset)."""
    k = _get(kind, "model_parameters")
    return frozenset(n for n in _constructor_parameters(k.cls) if n not in k.preset) | frozenset(k.aliases)


def build_model(kind, vocab_size, **config):
    """A model by name: ``treelstm``, ``treernn``, ``childsum`` (tree models;
    ``mode="level"`` or ``"recursive"``), ``lstm``, ``gru``, ``rnn``,
    ``bilstm``, ``bigru``, ``birnn`` (sequence classifiers), ``bow`` (mean of
    word vectors, :mod:`dynnets.models.bow`), ``padded-lstm``
    (the static padded baseline, :mod:`dynnets.models.padded`), and any other
    registered kind (:func:`model_kinds`).

    ``config`` holds the constructor's keyword arguments (e.g. ``hidden=150``);
    for a sequence kind, ``cell`` and ``bidirectional`` come from the name.
    """
    k = _get(kind, "build_model")
    config = {k.aliases.get(n, n): v for n, v in config.items() if n not in k.preset}
    return k.cls(vocab_size, **k.preset, **config)
