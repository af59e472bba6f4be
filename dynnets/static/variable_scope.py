"""TF1's variable sharing: ``get_variable``, ``variable_scope`` (with
``reuse=None | True | AUTO_REUSE``) and ``name_scope``.

``variable_scope("rnn")`` prefixes the names of the variables that
``get_variable`` creates inside it (``"rnn/w"``) and, as a name scope, of
every other node (``"rnn/MatMul"``). ``get_variable`` creates a variable,
or, where the scope reuses, returns the one of that name; the errors are TF1's:
creating a name that exists without reuse, reusing a name that does not
exist, sharing with another shape or dtype. The store of named variables
belongs to the graph.
"""
from __future__ import annotations

import contextlib

import numpy as np

from .graph import GraphKeys, Variable, get_default_graph, is_symbolic, user_site
from .random import glorot_uniform_initializer, zeros_initializer

__all__ = ["get_variable", "variable_scope", "name_scope", "get_variable_scope", "AUTO_REUSE", "VariableScope"]


class _AutoReuse:
    def __repr__(self):
        return "AUTO_REUSE"


#: ``reuse=AUTO_REUSE``: ``get_variable`` creates a variable the first time, returns it after.
AUTO_REUSE = _AutoReuse()


class VariableScope:
    """An open variable scope: ``name`` (full, "" at the top), ``reuse``
    (None, True or AUTO_REUSE), the default ``initializer``, ``dtype`` and
    ``regularizer``."""

    __slots__ = ("name", "reuse", "initializer", "dtype", "regularizer")

    def __init__(self, name, reuse=None, initializer=None, dtype=None, regularizer=None):
        self.name = name
        self.reuse = reuse
        self.initializer = initializer
        self.dtype = dtype
        self.regularizer = regularizer

    def __repr__(self):
        return f"VariableScope(name={self.name!r}, reuse={self.reuse!r})"


_TOP = VariableScope("")


def get_variable_scope():
    """The innermost open variable scope of the default graph."""
    return get_default_graph().current_variable_scope() or _TOP


@contextlib.contextmanager
def name_scope(name, default_name=None, values=None):
    """Prefix the names of the nodes created inside with ``name/`` (a name
    used before gets ``_1``, ``_2``..., as TF1's ``tf.name_scope``);
    ``default_name`` when ``name`` is None. ``values`` is accepted for TF1
    code (the graph is the default graph). Yields the scope with its
    trailing slash (``"block/"``), as TF1: an op created with
    ``name=scope`` is named ``"block"`` itself."""
    if name is None:
        name = default_name
    g = get_default_graph()
    if not name:
        yield g.get_name_scope()
        return
    with g.name_scope(name) as scope:
        yield scope             # with its trailing slash, as TF1's: ``tf.add(a, b, name=scope)`` names the op


@contextlib.contextmanager
def variable_scope(name_or_scope=None, default_name=None, values=None, initializer=None, regularizer=None,
                   caching_device=None, partitioner=None, custom_getter=None, reuse=None, dtype=None,
                   use_resource=None, constraint=None, auxiliary_name_scope=True):
    """A variable scope (as ``tf.variable_scope``, whose argument order this
    follows: the third positional argument is ``values``, not ``reuse``).

    Parameters
    ----------
    name_or_scope : str or VariableScope or None
        The scope's name (nested in the current scope); ``None`` uses
        ``default_name`` made unique (``"dense"``, ``"dense_1"``...).
    values : list, optional
        Accepted for TF1 code (the values' graph is the default graph here).
    caching_device, partitioner, custom_getter, constraint
        Not supported: an error unless None.
    use_resource, auxiliary_name_scope
        Accepted; they change nothing.
    reuse : None, True or AUTO_REUSE
        ``True``: ``get_variable`` returns existing variables (a missing one is
        an error); ``AUTO_REUSE``: creates or returns; ``None``: inherits the
        enclosing scope's (reuse cannot be turned off inside a reusing scope).
    initializer, dtype, regularizer
        Defaults for ``get_variable`` inside the scope.
    """
    for arg, v in (("caching_device", caching_device), ("partitioner", partitioner),
                   ("custom_getter", custom_getter), ("constraint", constraint)):
        if v is not None:
            raise ValueError(f"variable_scope: {arg}= is not supported, got {v!r}")
    if reuse not in (None, True, False) and reuse is not AUTO_REUSE:
        raise ValueError(f"variable_scope: reuse must be None, True, False or AUTO_REUSE, got {reuse!r}")
    g = get_default_graph()
    parent = g.current_variable_scope() or _TOP
    if isinstance(name_or_scope, VariableScope):
        full = name_or_scope.name
        inherit = name_or_scope
    elif name_or_scope is not None:
        if not isinstance(name_or_scope, str) or not name_or_scope:
            raise ValueError(f"variable_scope: name must be a non-empty string, got {name_or_scope!r}")
        full = f"{parent.name}/{name_or_scope}" if parent.name else name_or_scope
        inherit = parent
    else:
        if default_name is None:
            raise TypeError("variable_scope: if name_or_scope is None, default_name must be given")
        base = f"{parent.name}/{default_name}" if parent.name else default_name
        full = g.default_scope_name(base)
        inherit = parent
    if reuse is None or reuse is False:
        reuse = inherit.reuse if inherit.reuse is not False else None
    if parent.reuse is True:
        reuse = True
    scope = VariableScope(full, reuse, initializer if initializer is not None else inherit.initializer,
                          dtype if dtype is not None else inherit.dtype,
                          regularizer if regularizer is not None else inherit.regularizer)
    with g.variable_scope_block(scope):
        yield scope


def _where(site):
    return f"\n\n  File \"{site[0]}\", line {site[1]}" if site else ""


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None, collections=None,
                 caching_device=None, partitioner=None, validate_shape=True, use_resource=None, custom_getter=None,
                 constraint=None):
    """The variable ``name`` of the current variable scope: created (from
    ``initializer``: a callable ``(shape, dtype) -> array``, an array, or a
    value; default the scope's, else Glorot-uniform for floats and zeros for
    integers) or, where the scope reuses, the existing one (as
    ``tf.get_variable``, in TF1's argument order). ``trainable`` defaults to
    True. A ``regularizer`` (or the scope's) is called on a new variable and
    its loss added to ``GraphKeys.REGULARIZATION_LOSSES``, as TF1 does (add
    them to the loss yourself: ``tf.add_n(tf.get_collection(...))``);
    ``collections``, ``partitioner``, ``custom_getter``, ``constraint`` and
    ``validate_shape=False`` are not supported (an error)."""
    for arg, v in (("collections", collections), ("caching_device", caching_device),
                   ("partitioner", partitioner), ("custom_getter", custom_getter), ("constraint", constraint)):
        if v is not None:
            raise ValueError(f"get_variable: {arg}= is not supported, got {v!r}")
    if validate_shape is not True:
        raise ValueError("get_variable: validate_shape=False is not supported")
    trainable = True if trainable is None else trainable
    if not isinstance(name, str) or not name:
        raise ValueError(f"get_variable: name must be a non-empty string, got {name!r}")
    g = get_default_graph()
    scope = g.current_variable_scope() or _TOP
    full = f"{scope.name}/{name}" if scope.name else name
    if dtype is None:
        dtype = scope.dtype
    if shape is not None:
        shape = tuple(shape) if not isinstance(shape, (int, np.integer)) else (int(shape),)
    v, site = g.stored_variable(full)
    if v is not None:
        if scope.reuse is None or scope.reuse is False:
            raise ValueError(f"Variable {full} already exists, disallowed. Did you mean to set reuse=True or "
                             f"reuse=tf.AUTO_REUSE in VarScope? Originally defined at:{_where(site)}")
        if shape is not None and tuple(shape) != tuple(v.shape):
            raise ValueError(f"Trying to share variable {full}, but specified shape {tuple(shape)} and found shape "
                             f"{tuple(v.shape)}.")
        if dtype is not None and np.dtype(dtype) != v.dtype:
            raise ValueError(f"Trying to share variable {full}, but specified dtype {np.dtype(dtype).name} and found "
                             f"dtype {v.dtype.name}.")
        return v
    if scope.reuse is True:
        raise ValueError(f"Variable {full} does not exist, or was not created with tf.get_variable(). Did you mean to "
                         f"set reuse=tf.AUTO_REUSE in VarScope?")
    if initializer is None:
        initializer = scope.initializer
    dt = np.dtype(dtype if dtype is not None else np.float32)
    if initializer is None:
        initializer = glorot_uniform_initializer() if dt.kind == "f" else zeros_initializer()
    if callable(initializer) and not is_symbolic(initializer):
        if shape is None or any(d is None for d in shape):
            raise ValueError(f"Shape of a new variable ({full}) must be fully defined, but instead was "
                             f"{'<unknown>' if shape is None else shape}.")
        value = initializer(shape, dtype=dt)
    else:
        value = initializer
        got = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)
        if shape is not None and tuple(shape) != tuple(got):
            raise ValueError(f"get_variable {full}: the initial value has shape {got}, shape= says {tuple(shape)}")
    with g.name_scope(None):    # the full name is the scope's, not the name scope's
        v = Variable(value, name=full, trainable=trainable, dtype=dt if dtype is not None else None, graph=g)
    g.store_variable(full, v, user_site())
    if regularizer is None:
        regularizer = scope.regularizer
    if regularizer is not None:
        # TF1's name_scope(full + "/Regularizer/"): absolute, whatever name scope is open
        with g.name_scope(None):
            reg_scope = g.unique_name(f"{full}/Regularizer")
        with g.name_scope(reg_scope + "/"):
            loss = regularizer(v)
        if loss is not None:
            g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return v

