"""Optimizers in graph files: the classes a file may hold (registered by
:mod:`dynnets.static.train`, exactly those classes, never subclasses), how
an optimizer is written (its class, the constructor arguments that rebuild
it, its slot variables and step counter) and how it is rebuilt from a file's
entry, nothing executed: the class is looked up by name in the registry.
"""
from __future__ import annotations

from ..graph import Value
from .format import ExportError

__all__ = ["register_optimizer", "is_registered", "optimizer_record", "build_optimizer"]

_OPTIMIZERS: dict = {}      # class name -> (class, the constructor arguments that rebuild it)


def register_optimizer(cls, fields):
    """Let files hold optimizers of class ``cls`` (exactly; not subclasses):
    ``fields`` are its constructor's arguments, read back as attributes of
    an instance; its state is read with ``get_slot_names``, ``get_slot`` and
    ``get_step_counter`` and restored with ``set_slots`` and
    ``set_step_counter`` (:class:`dynnets.static.train.Optimizer`'s public
    API). :mod:`dynnets.static.train` registers its optimizers."""
    _OPTIMIZERS[cls.__name__] = (cls, tuple(fields))


def is_registered(opt):
    """Whether a file can hold ``opt``: its class itself is registered."""
    return _OPTIMIZERS.get(type(opt).__name__, (None,))[0] is type(opt)


def optimizer_record(opt, g, value_id, attr, where):
    """The file's entry for optimizer ``opt`` of graph ``g``:
    ``{"class", "config", "slots", "step"}`` (the format in
    :mod:`dynnets.static.export`). ``value_id(v)`` numbers a value of ``g``
    as the file does; ``attr(x, where)`` encodes a constructor argument."""
    cname = type(opt).__name__
    cfg = {}
    for f in _OPTIMIZERS[cname][1]:
        v = getattr(opt, f)
        if isinstance(v, Value):
            if v.graph is not g:
                raise ExportError(f"export: {where}: the optimizer's learning rate '{v.name}' is a value of "
                                  f"another graph")
            cfg[f] = {"value": value_id(v)}
        else:
            cfg[f] = attr(v, f"{where}: optimizer {f}")
    names = opt.get_slot_names()
    slots = []
    for var in g.variables:
        d = {s: opt.get_slot(var, s) for s in names}
        if names and all(sv is not None for sv in d.values()):
            slots.append([value_id(var), {s: value_id(sv) for s, sv in d.items()}])
    step = opt.get_step_counter(g)
    return {"class": cname, "config": cfg, "slots": slots, "step": None if step is None else value_id(step)}


def build_optimizer(rec, k, value, variable, attr, prefix, fail):
    """The optimizer of entry ``rec`` (the file's optimizer ``k``), its slot
    variables and step counter those the file names.

    ``value(i)``: the Value built for the file's value ``i`` (None if not
    built yet); ``variable(i)``: the same, a Variable (else it fails);
    ``attr(x)``: a decoded attribute; ``prefix``: the import's name prefix;
    ``fail(msg)``: raises the reader's error."""
    cls, fields = _OPTIMIZERS.get(rec.get("class"), (None, ()))
    cfg = rec.get("config")
    if cls is None or not isinstance(cfg, dict) or set(cfg) != set(fields):
        fail(f"optimizer {k} must be one of {', '.join(_OPTIMIZERS)} with config keys "
             f"{list(fields)}; got class {rec.get('class')!r}, config {cfg!r:.80}")
    kw = {}
    for f in fields:
        v = cfg[f]
        if f == "learning_rate" and isinstance(v, dict) and "value" in v:
            lr = value(v["value"])
            if lr is None:
                fail(f"optimizer {k}: learning_rate {v!r} is not a value defined before this node")
            kw[f] = lr
        else:
            kw[f] = attr(v)
    if isinstance(kw["name"], str):
        kw["name"] = prefix + kw["name"]
    try:
        opt = cls(**kw)
    except (TypeError, ValueError) as e:
        fail(f"optimizer {k} ({rec['class']}): {e}")
    slots = rec.get("slots", [])
    if not isinstance(slots, list):
        fail(f"optimizer {k}: 'slots' must be a list")
    for item in slots:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], dict)):
            fail(f"optimizer {k}: a slot entry must be [variable id, {{slot name: variable id}}], got {item!r:.80}")
        var = variable(item[0])
        named = {s: variable(sid) for s, sid in item[1].items()}
        try:
            opt.set_slots(var, named)
        except ValueError as e:
            fail(f"optimizer {k}: {e}")
    step = rec.get("step")
    if step is not None:
        counter = variable(step)
        try:
            opt.set_step_counter(counter)
        except ValueError as e:
            fail(f"optimizer {k}: {e}")
    return opt
