"""TF1's graph over the compiler core's IR: :class:`Graph` (name scopes,
collections, lookups by name, ``as_default``, ``GraphKeys``), its tensors
(:class:`Value` with TF1's operators and shapes, :class:`Variable`,
:class:`Operation`, :class:`OpInfo`), the default graph and session, and the
constructors (``placeholder``, ``constant``, the initialisers, ``group``,
``assign``).

The equations, values, constants, control dependencies and captures are the
core's (:mod:`dynnets.static.core.graph`, :class:`GraphIR`), which
:class:`Graph` subclasses; this module adds TF1's API and nothing the
compiler reads.

Ops are the eager ops: every function of :mod:`dynnets.autograd.ops` and every
operator works on a symbolic :class:`Value`, because ``bind`` hands any call
with a symbolic argument to :func:`_symbolic_bind`, which runs the primitive's
shape rule at construction time (a shape error is raised where the user wrote
the op, naming it and the line) and appends one equation.

Effectful equations (variable updates, initialisers, ``group``) have
``prim.effect`` set; their implementation receives the session's variable
storage as first argument. Variables' values live in the :class:`Session`
(as in TF1: two sessions on one graph have separate values).
"""
from __future__ import annotations

import contextlib
import re

import numpy as np

from ..autograd import engine as _engine
from ..autograd.primitives import Aval, ShapeError, fmt_shape, run_rule
from ..autograd.tensor import Tensor
from .core.graph import GraphIR, after_p, densified, densify_p, read_after_p, unknown_origin  # noqa: F401
from .value import (OpInfo, Operation, ThreadStack, UnknownShape, Value, active_traces,  # noqa: F401
                    default_sessions, get_default_session, is_symbolic)
from .core.ir import (SOURCES, Eqn, FeedError, GraphError, OpError, OpIndexError, OpTypeError,  # noqa: F401
                      OpValueError, StaticPrimitive, UninitializedVariableError, constant_p, effect_variables,
                      gc_paused, op_error, param_p, placeholder_p, site_str, user_site, variable_p,
                      RunForEffect)
from .dot import to_dot


__all__ = [
    "Graph", "Value", "Variable", "Operation", "Eqn", "StaticPrimitive", "placeholder", "constant",
    "get_default_graph", "reset_default_graph", "global_variables_initializer", "variables_initializer",
    "global_variables", "trainable_variables", "group", "local_variables", "local_variables_initializer", "GraphError", "FeedError",
    "UninitializedVariableError", "OpError", "is_symbolic", "site_str", "densified", "tracing", "gc_paused", "add_op",
    "user_site", "default_sessions", "OpInfo", "get_default_session", "named", "GraphKeys", "UnknownShape",
]


class Variable(Value):
    """A value that persists across :meth:`Session.run` calls (TF1's
    ``tf.Variable``).

    The arguments are TF1's, in TF1's order (the second positional is
    ``trainable``); ``graph=`` (keyword-only) is dynnets' own.

    Parameters
    ----------
    initial_value : array_like or callable
        The value the initialiser assigns (a callable is called once, now).
        Python floats become float32, as in eager dynnets.
    trainable : bool, default True
        Listed by :func:`trainable_variables` (the optimizers' default).
    collections : list of str, optional
        Graph collections to add the variable to.
    name : str, optional
    dtype : numpy dtype, optional
    shape : tuple, optional
        Must be the initial value's shape (a shape that may change is not
        supported, nor are ``validate_shape=False``, ``variable_def`` and
        ``constraint``); ``caching_device``, ``expected_shape``,
        ``import_scope``, ``use_resource``, ``synchronization`` and
        ``aggregation`` are accepted and change nothing.
    graph : Graph, optional
        Defaults to the default graph.
    """

    __slots__ = ("initial_value", "trainable", "index", "_init_op", "local")

    def __init__(self, initial_value=None, trainable=None, collections=None, validate_shape=True, caching_device=None,
                 name=None, variable_def=None, dtype=None, expected_shape=None, import_scope=None, constraint=None,
                 use_resource=None, synchronization=None, aggregation=None, shape=None, *, graph=None):
        if initial_value is None:
            raise ValueError("Variable: initial_value must be specified")
        for arg, v in (("variable_def", variable_def), ("constraint", constraint)):
            if v is not None:
                raise ValueError(f"Variable {name or ''}: {arg}= is not supported")
        if validate_shape is not True:
            raise ValueError(f"Variable {name or ''}: validate_shape=False (a shape that may change) is not supported")
        trainable = True if trainable is None else trainable
        if callable(initial_value):
            initial_value = initial_value()
        if is_symbolic(initial_value):
            initial_value = _evaluate_initial(initial_value, name)
        if isinstance(initial_value, Tensor):
            initial_value = initial_value.numpy()
        arr = _tf1_array(initial_value, dtype)
        arr.setflags(write=False)    # the session copies it at initialisation
        if shape is not None and tuple(shape) != arr.shape:
            raise ValueError(f"Variable {name or ''}: shape={tuple(shape)} does not match the initial value's shape "
                             f"{arr.shape}")
        g = graph if graph is not None else get_default_graph()
        self.initial_value = arr
        self.trainable = bool(trainable)
        self._init_op = None
        # TF1's local variable (metrics' counters): in LOCAL_VARIABLES, not GLOBAL_VARIABLES, so neither
        # global_variables_initializer nor a default Saver sees it (local_variables_initializer initialises it)
        self.local = collections is not None and not isinstance(collections, str) \
            and GraphKeys.LOCAL_VARIABLES in collections and GraphKeys.GLOBAL_VARIABLES not in collections
        g.add_variable(self, name)
        if collections is not None:
            if isinstance(collections, str) or not isinstance(collections, (list, tuple, set)):
                raise TypeError(f"Variable '{self.name}': collections must be a list of collection names, got "
                                f"{collections!r}")
            for c in collections:
                g.add_to_collection(c, self)

    @property
    def initializer(self):
        """The op that initialises this variable alone."""
        if self._init_op is None:
            self._init_op = variables_initializer([self])
        return self._init_op

    def value(self):
        return self

    def read_value(self):
        """This variable's value; inside a ``control_dependencies`` block, as
        it is after the controls ran (TF1's idiom for reading after an update)."""
        return self.graph.values[self.graph.controlled_inputs((self.id,))[0]]

    def assign(self, value):
        """An op setting this variable to ``value``; fetching it gives the new value."""
        return _assign(self, value, "assign")

    def assign_add(self, value):
        return _assign(self, value, "assign_add")

    def assign_sub(self, value):
        return _assign(self, value, "assign_sub")

    def load(self, value, session):
        """Set this variable's value in ``session`` without building an op."""
        session.load_variable(self, value)

    def __repr__(self):
        return f"<Variable '{self.name}' shape={fmt_shape(self.shape)} dtype={self.dtype}>"


def _evaluate_initial(v, name):
    """The value of ``v`` for a Variable's initial value: ``v`` may use
    constants and random ops (each gives its first draw, as in a new session),
    not placeholders or variables."""
    g = v.graph
    need, stack = {}, [v.id]
    while stack:
        e = g.producer[stack.pop()]
        if e.outs[0] in need:
            continue
        if e.prim in (placeholder_p, variable_p, param_p) or getattr(e.prim, "effect", False):
            raise TypeError(f"Variable {name or ''}: initial_value '{v.name}' depends on {e.prim.name} '{e.name}'; "
                            f"an initial value may use constants and random ops only (pass an array, or assign "
                            f"later with var.assign)")
        need[e.outs[0]] = e
        stack.extend(e.ins)
    env = {}
    for k in sorted(need):          # value ids grow in creation order: a topological order
        e = need[k]
        r = e.attrs["value"] if e.prim is constant_p else e.prim.impl(*[env[i] for i in e.ins], **e.attrs)
        for o, x in zip(e.outs, r if e.prim.multiple_results else (r,)):
            env[o] = x
    return np.asarray(env[v.id])


# --------------------------------------------------------------------------
# the graph
# --------------------------------------------------------------------------

class Graph(GraphIR):
    """TF1's graph (``tf.Graph``): the compiler core's :class:`GraphIR`
    (equations, values, ``append_equation``, constants, control
    dependencies, subgraphs and captures, derived graphs) with TF1's API:
    ``as_default``, name scopes (:meth:`name_scope`, :meth:`unique_name`,
    :meth:`get_name_scope`), collections, lookups by name
    (:meth:`get_tensor_by_name`, :meth:`get_operation_by_name`) and the store
    of ``get_variable``'s variables. Its values are TF1's :class:`Value`.
    """

    value_class = Value

    def __init__(self):
        super().__init__()
        self._collections = {}
        self.seed = None            # the graph-level seed (set_random_seed)
        self._var_store = {}        # get_variable's variables by full name
        self._var_sites = {}
        self._scopes = []           # the open variable scopes (innermost last)
        self._scope_counts = {}

    # --- defaults -----------------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self):
        """Make this the default graph inside the ``with`` block."""
        _DEFAULT.append(self)
        try:
            yield self
        finally:
            _DEFAULT.pop()

    # --- names and scopes (TF1's Graph API) -------------------------------------------
    def unique_name(self, name, mark_as_used=True):
        """``name`` inside the open name scope, made unique in this graph
        (``"scope/name"``, then ``"scope/name_1"``...), as TF1's
        ``Graph.unique_name``; ``mark_as_used=False`` returns the name the
        next call would give without reserving it."""
        full = self._prefix + name if self._prefix else name
        if mark_as_used:
            return self._unique_name(full)
        n = self._names.get(full)
        if n is None:
            return full
        while f"{full}_{n}" in self._names:
            n += 1
        return f"{full}_{n}"

    def get_name_scope(self):
        """The open name scope without its trailing slash (``"outer/inner"``,
        ``""`` at the top), as TF1's ``Graph.get_name_scope``."""
        return self._prefix[:-1]

    @contextlib.contextmanager
    def name_scope(self, name):
        """A name scope for the ops created inside, as TF1's
        ``Graph.name_scope``: ``name`` nests in the open scope and is made
        unique (a second ``"block"`` is ``"block_1"``); a name ending in
        ``"/"`` is taken as the full scope, unchanged (TF1's way to re-enter a
        scope); ``None`` or ``""`` leaves every scope (the top level). Yields
        the scope with its trailing slash (``""`` at the top)."""
        old = self._prefix
        if not name:
            self._prefix = ""
        elif name.endswith("/"):
            self._prefix = name
        else:
            self._prefix = self.unique_name(name) + "/"
        try:
            yield self._prefix
        finally:
            self._prefix = old

    # --- get_variable's store (read by :mod:`.variable_scope`) ------------------------
    def current_variable_scope(self):
        """The innermost open variable scope (a
        :class:`~dynnets.static.variable_scope.VariableScope`), or None."""
        return self._scopes[-1] if self._scopes else None

    @contextlib.contextmanager
    def variable_scope_block(self, scope):
        """Open variable scope ``scope`` (its ``name`` is the full name) and
        its name scope (``scope.name`` made unique) for the block."""
        self._scopes.append(scope)
        try:
            with self.name_scope(None):
                prefix = self.unique_name(scope.name)
            with self.name_scope(prefix + "/"):
                yield scope
        finally:
            self._scopes.pop()

    def default_scope_name(self, base):
        """``base`` for the first variable scope made from default name
        ``base``, then ``base_1``, ``base_2``... (TF1's ``default_name``)."""
        n = self._scope_counts.get(base, 0)
        self._scope_counts[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def stored_variable(self, name):
        """(variable, (file, line) where it was created) of ``get_variable``'s
        variable of full name ``name``, or (None, None)."""
        v = self._var_store.get(name)
        return (v, self._var_sites.get(name)) if v is not None else (None, None)

    def store_variable(self, name, var, site):
        """Record ``var`` as ``get_variable``'s variable of full name ``name``."""
        self._var_store[name] = var
        self._var_sites[name] = site

    # --- inspection --------------------------------------------------------------
    def get_operations(self):
        return list(self.eqns)

    def get_value_by_name(self, name):
        for v in self.values:
            if v.name == name:
                return v
        raise KeyError(f"graph has no value named {name!r}")

    def _value_named(self, name):
        for v in self.values:
            if v.name == name:
                return v
        return None

    def get_tensor_by_name(self, name):
        """The value named ``name`` in TF1's ``"<op name>:<output index>"``
        form (``"x:0"``; an op with several results names them ``"op:0"``,
        ``"op:1"``...). A KeyError or ValueError, as TF1's, names what is missing."""
        if not isinstance(name, str):
            raise TypeError(f"get_tensor_by_name: name must be a string, got {type(name).__name__} {name!r}")
        op, sep, idx = name.rpartition(":")
        if not sep or not idx.isdigit():
            raise ValueError(f"The name {name!r} looks like an (invalid) Operation name, not a Tensor. Tensor names "
                             f"must be of the form \"<op_name>:<output_index>\".")
        v = self._value_named(name)
        if v is None and idx == "0":
            v = self._value_named(op)
            if v is not None and self.producer[v.id].prim.multiple_results:
                v = None
        if v is None:
            if self._value_named(op) is None and self._value_named(op + ":0") is None:
                raise KeyError(f"The name {name!r} refers to a Tensor which does not exist. The operation, {op!r}, "
                               f"does not exist in the graph.")
            raise KeyError(f"The name {name!r} refers to a Tensor which does not exist. The operation, {op!r}, "
                           f"exists but has no output {idx}.")
        return v

    def get_operation_by_name(self, name):
        """The op named ``name`` (no ``:k``): an :class:`Operation` (a train op,
        an initialiser, ``group``) is returned as itself, so it can be run; any
        other op as an :class:`OpInfo` (``.name``, ``.type``, ``.inputs``, ``.outputs``)."""
        if not isinstance(name, str):
            raise TypeError(f"get_operation_by_name: name must be a string, got {type(name).__name__} {name!r}")
        if ":" in name:
            raise ValueError(f"The name {name!r} looks like a Tensor name, not an Operation name. Use "
                             f"get_tensor_by_name to get a Tensor.")
        v = self._value_named(name)
        if v is None:
            v = self._value_named(name + ":0")
        if v is None:
            raise KeyError(f"The name {name!r} refers to an Operation not in the graph.")
        if isinstance(v, Operation):
            return v
        return OpInfo(self, self.producer[v.id])

    def element(self, name, what):
        """A fetch or feed key given by name: ``"x:0"`` a value, ``"train"`` an
        Operation (fetches only)."""
        if ":" not in name and what == "fetch":
            op = self.get_operation_by_name(name)
            return op           # an Operation or a pure op's OpInfo: run for None, as TF1
        try:
            return self.get_tensor_by_name(name)
        except (KeyError, ValueError) as e:
            raise type(e)(f"Session.run: cannot {what} {name!r}: {e.args[0]}") from None

    def add_to_collection(self, name, value):
        self._collections.setdefault(name, []).append(value)

    def get_collection(self, name, scope=None):
        """The values in collection ``name`` (TF1's ``Graph.get_collection``):
        ``GraphKeys.GLOBAL_VARIABLES`` and ``TRAINABLE_VARIABLES`` list the
        graph's (trainable) variables, as TF1 fills them; ``scope`` keeps the
        items whose name starts with that regular expression (``re.match``)."""
        extra = self._collections.get(name, ())
        if name in (GraphKeys.GLOBAL_VARIABLES, GraphKeys.TRAINABLE_VARIABLES):
            vs = [v for v in self.variables if not v.local and (v.trainable or name == GraphKeys.GLOBAL_VARIABLES)]
            seen = {id(v) for v in vs}
            items = vs + [x for x in extra if id(x) not in seen]
        else:
            items = list(extra)
        if scope is None:
            return items
        return [x for x in items if isinstance(getattr(x, "name", None), str) and re.match(scope, x.name)]

    def get_all_collection_keys(self):
        return list(self._collections)

    def to_dot(self, **kwargs):
        """This graph as Graphviz DOT text (see :func:`dynnets.static.dot.to_dot` for the options);
        :func:`dynnets.plots.render_dot` turns it into SVG."""
        return to_dot(self, **kwargs)


class GraphKeys:
    """TF1's standard collection names (``tf.GraphKeys``). Every Variable is
    in ``GLOBAL_VARIABLES`` and, if trainable, ``TRAINABLE_VARIABLES``; the
    summaries add themselves to ``SUMMARIES``, the global step to
    ``GLOBAL_STEP``, a ``get_variable`` regularizer's loss to
    ``REGULARIZATION_LOSSES``, ``layers.batch_normalization`` its moving
    statistics' updates to ``UPDATE_OPS``, the ``tf.losses`` their losses to
    ``LOSSES`` and the metrics their counters to ``LOCAL_VARIABLES`` and
    ``METRIC_VARIABLES``; the others hold what code adds."""

    GLOBAL_VARIABLES = "variables"
    VARIABLES = "variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    METRIC_VARIABLES = "metric_variables"
    SUMMARIES = "summaries"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    REGULARIZATION_LOSSES = "regularization_losses"
    GLOBAL_STEP = "global_step"
    TRAIN_OP = "train_op"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    SAVERS = "savers"
    QUEUE_RUNNERS = "queue_runners"
    ACTIVATIONS = "activations"
    WEIGHTS = "weights"
    BIASES = "biases"
    TABLE_INITIALIZERS = "table_initializer"
    ASSET_FILEPATHS = "asset_filepaths"
    EVAL_STEP = "eval_step"


_DEFAULT = ThreadStack()     # graph.as_default() blocks of the calling thread (innermost last)
_GLOBAL = [Graph()]


def get_default_graph():
    """The innermost ``graph.as_default()`` graph, else the global default."""
    return _DEFAULT[-1] if _DEFAULT else _GLOBAL[0]


def reset_default_graph():
    """Replace the global default graph by a new, empty one."""
    if _DEFAULT:
        raise RuntimeError("reset_default_graph: cannot reset inside a graph.as_default() block")
    _GLOBAL[0] = Graph()
    return _GLOBAL[0]


# --------------------------------------------------------------------------
# binding primitives to symbolic values
# --------------------------------------------------------------------------

_TRACE = active_traces     # graphs of the calling thread's active traces (innermost last)


@contextlib.contextmanager
def tracing(g):
    """Inside the block, ops on eager Parameters captured by a trace (and ops
    with no symbolic argument) are added to ``g``."""
    _TRACE.append(g)
    try:
        yield g
    finally:
        _TRACE.pop()


def _graph_of(args, prim):
    """The graph an op on ``args`` goes to: the innermost graph among its
    arguments' and the default graph, when they are nested (a loop body being
    built uses values of the graphs around it)."""
    g = None
    for i, a in enumerate(args):
        if isinstance(a, Value):
            ag = a.graph
            if g is None:
                g = ag
            elif ag is not g:
                if g.encloses(ag):
                    g = ag
                elif not ag.encloses(g):
                    raise GraphError(f"{prim.name}: input {i} '{a.name}' belongs to another graph than the other "
                                     f"inputs")
    if g is None:
        return _TRACE[-1] if _TRACE else get_default_graph()
    d = _DEFAULT[-1] if _DEFAULT else _GLOBAL[0]
    if d is not g and d.parent is not None and g.encloses(d):
        g = d
    return g


def _input_id(g, a, i, prim):
    if isinstance(a, Value):
        if a.graph is not g:
            a = g.capture(a)
        if a.sparse:
            a = densified(a)
        return a.id
    if isinstance(a, Tensor):
        if a.requires_grad and a.is_leaf:
            if not _TRACE or _TRACE[-1] is not g:
                raise GraphError(f"{prim.name}: input {i} is an eager Parameter, which can be captured only "
                                 f"while tracing (dynnets.static.trace)")
            return g.live_param(a).id
        if a.requires_grad:
            raise GraphError(
                f"{prim.name}: input {i} is an eager tensor computed from Parameters that the trace was not "
                f"told about; pass them to trace(..., params=) or grads_of= so they are traced live")
        return g.constant_value(a.numpy()).id
    return g.constant_value(a).id


def _has_symbolic(v):
    if isinstance(v, Value):
        return True
    if isinstance(v, (tuple, list)):
        return any(_has_symbolic(x) for x in v)
    return False


def _symbolic_bind(prim, args, attrs):
    """Append ``prim(*args, **attrs)`` to the graph of its symbolic arguments."""
    g = _graph_of(args, prim)
    for k, v in attrs.items():
        if _has_symbolic(v):
            raise TypeError(f"{prim.name}: attribute {k!r} holds a symbolic value, which has no value while the "
                            f"graph is built (index with dynnets.take / dynnets.static.gather instead)"
                            f"{site_str(user_site())}")
    ins = [_input_id(g, a, i, prim) for i, a in enumerate(args)]
    avals = g.avals
    try:
        out = run_rule(prim, [avals[i] for i in ins], attrs)
    except ShapeError as e:
        raise type(e)(f"{e}{_unknown_hint(g, ins)}{site_str(user_site())}").with_traceback(None) from None
    return g.append_equation(prim, ins, attrs, out, site=user_site())



def _unknown_hint(g, ins):
    """What a shape error of an op with an input of unknown rank adds: which
    input, where it comes from, and what to do."""
    for k, i in enumerate(ins):
        if g.avals[i].shape is None:
            v = g.values[i]
            return (f" ['{v.name}' has an unknown rank{unknown_origin(v)}: give the placeholder a shape, "
                    f"tf.placeholder(dtype, shape=[...]) (shape=[] for a scalar)]")
    return ""


class SymbolicInterpreter:
    """The interpreter that builds graphs: it appends an op applied to
    symbolic values to their graph (see the engine's "interpreters"). A
    :class:`Value` names it in ``__dynnets_interpreter__``, so bind finds it
    from the arguments, as JAX finds the interpreter from its tracers; a
    trace's captured Parameters reach it through the engine's
    ``capture_parameters``."""

    __slots__ = ()
    bind = staticmethod(_symbolic_bind)


SYMBOLIC = SymbolicInterpreter()
Value.__dynnets_interpreter__ = SYMBOLIC
_engine.register_symbolic_interpreter(SYMBOLIC)


def named(v, name):
    """``v`` with TF1's name for an op made with ``name=`` (see
    :meth:`Graph.rename`); ``name=None`` keeps the generated name. A source
    (a placeholder, variable or constant an op handed back unchanged) keeps
    its own name: the name goes to an identity of it, as TF1's new op would
    have it."""
    if name is None or not isinstance(v, Value):
        return v
    g = v.graph
    if g.producer[v.id].prim in SOURCES:
        v = g.append_equation(after_p, (v.id,), {}, g.avals[v.id])
    return g.rename(v, name)


def add_op(prim, *args, name=None, **attrs):
    """Append ``prim(*args, **attrs)`` to the graph its arguments (or the
    default graph) call for, after running its shape rule: how a static-only
    primitive is bound (a table primitive is bound by ``bind``)."""
    g = _graph_of(args, prim)
    ins = [_input_id(g, a, i, prim) for i, a in enumerate(args)]
    try:
        out = run_rule(prim, [g.avals[i] for i in ins], attrs)
    except ShapeError as e:
        raise type(e)(f"{e}{_unknown_hint(g, ins)}{site_str(user_site())}").with_traceback(None) from None
    return g.append_equation(prim, ins, attrs, out, name=name, site=user_site())


# --------------------------------------------------------------------------
# public constructors
# --------------------------------------------------------------------------

def _is_dtype_like(x):
    if x is None or isinstance(x, (list, tuple)):
        return False
    try:
        np.dtype(x)
        return True
    except TypeError:
        return False


def placeholder(dtype=None, shape=None, name=None):
    """A value fed at :meth:`Session.run` time (``tf.placeholder``, in TF1's
    argument order).

    Parameters
    ----------
    dtype : numpy dtype, default float32
    shape : list or tuple, optional
        Dimensions; ``None`` marks one unknown until fed (``[None, 3]``).
        Without a shape the placeholder takes a value of any rank (TF1's
        unknown rank): elementwise ops on it have an unknown rank too, and
        every other op raises an error naming the placeholder and asking for
        a shape (``shape=[]`` for a scalar). dynnets' older order
        ``placeholder(shape, dtype)`` is still accepted.
    name : str, optional
    """
    if not _is_dtype_like(dtype) and dtype is not None and (shape is None or _is_dtype_like(shape)):
        # dynnets' own order, placeholder((None, 3), np.int64): the first argument is a shape
        dtype, shape = shape, dtype
    dt = np.dtype(np.float32 if dtype is None else dtype)
    if shape is not None:
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        if hasattr(shape, "as_list"):
            shape = shape.as_list()
        shape = tuple(None if d is None else int(d) for d in shape)
        if any(d is not None and d < 0 for d in shape):
            raise ValueError(f"placeholder: dimensions must be >= 0 or None, got {shape}")
    g = get_default_graph()
    v = g.append_equation(placeholder_p, (), {}, Aval(shape, dt), name=name or "Placeholder", site=user_site())
    g.placeholders.append(v)
    return v


def _tf1_array(value, dtype):
    """``value`` as the array TF1 makes of it (``make_tensor_proto``): with
    ``dtype``, converted; else a numpy array or scalar keeps its dtype, and
    Python numbers and lists become float32 (floats) or int32 (integers that
    fit in 32 bits, else int64)."""
    if dtype is not None:
        return np.array(value, dtype=dtype)
    arr = np.array(value)
    if not isinstance(value, (np.ndarray, np.generic)):
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype == np.int64:
            small = arr.astype(np.int32)
            if np.array_equal(small, arr):
                arr = small
    return arr


def constant(value, dtype=None, shape=None, name=None, verify_shape=False):
    """A constant node (``tf.constant``, in TF1's argument order). Without
    ``dtype``, Python numbers and lists take TF1's dtypes (float32 for
    floats, int32 for integers that fit, else int64); numpy arrays and scalars
    keep theirs. With ``shape``, a value of as many elements is reshaped and
    a shorter one filled up with its last element (TF1's rule:
    ``constant(0.0, shape=[2, 3])``; an empty value gives zeros), a longer
    one is an error; ``verify_shape`` requires the value to have that shape
    already."""
    if isinstance(value, Tensor):
        value = value.numpy()
    arr = _tf1_array(value, dtype)
    if shape is not None:
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
        n = int(np.prod(shape, dtype=np.int64))
        if verify_shape and arr.shape != shape:
            raise TypeError(f"constant: expected shape {shape}, the value has shape {arr.shape}")
        if arr.size == n:
            arr = arr.reshape(shape)
        elif n == 0:
            arr = np.empty(shape, arr.dtype)         # TF1 ignores the value for an empty shape
        elif arr.size < n:
            # TF1 repeats the last value given (none given: zeros)
            flat = arr.reshape(-1)
            fill = flat[-1] if flat.size else np.zeros((), arr.dtype)
            arr = np.concatenate([flat, np.full(n - flat.size, fill, dtype=arr.dtype)]).reshape(shape)
        else:
            raise ValueError(f"constant: a value of {arr.size} elements cannot make a constant of shape {shape} "
                             f"({n} elements)")
    arr.setflags(write=False)
    g = get_default_graph()
    return g.append_equation(constant_p, (), {"value": arr}, Aval(arr.shape, arr.dtype), name=name or "Const")


def _scoped(vs, scope):
    if scope is None:
        return vs
    if not isinstance(scope, str):
        raise TypeError(f"scope must be a string (a regular expression matched at the start of each variable's "
                        f"name, as TF1's), got {type(scope).__name__}")
    return [v for v in vs if re.match(scope, v.name)]


def _graph_and_scope(scope, graph):
    # TF1's first argument is the scope; dynnets took the graph there first: a Graph passed
    # positionally is still read as the graph
    if isinstance(scope, Graph):
        return scope, None
    return graph or get_default_graph(), scope


def global_variables(scope=None, *, graph=None):
    """The graph's global variables (``tf.global_variables``); ``scope``
    keeps those whose name matches it from the start (``re.match``), as TF1."""
    g, scope = _graph_and_scope(scope, graph)
    return _scoped([v for v in g.variables if not v.local], scope)


def trainable_variables(scope=None, *, graph=None):
    """The graph's trainable variables (``tf.trainable_variables``), filtered
    by ``scope`` as :func:`global_variables`."""
    g, scope = _graph_and_scope(scope, graph)
    return _scoped([v for v in g.variables if v.trainable and not v.local], scope)


# --- effects -------------------------------------------------------------------


def _init_impl(S, vars):
    for v in vars:
        S[v.index] = np.array(v.initial_value, copy=True)


init_p = StaticPrimitive("init_variables", _init_impl, lambda vars: Aval((), None), effect=True,
                         initializer=True)


def variables_initializer(var_list, name="init"):
    """An op that (re)sets every variable in ``var_list`` to its initial value."""
    var_list = list(var_list)
    if not var_list:
        g = get_default_graph()
    else:
        g = var_list[0].graph
    for v in var_list:
        if not isinstance(v, Variable):
            raise TypeError(f"variables_initializer: {v!r} is not a Variable")
        if v.graph is not g:
            raise GraphError(f"variables_initializer: '{v.name}' belongs to another graph")
    return g.append_equation(init_p, (), {"vars": tuple(var_list)}, Aval((), None), name=name, cls=Operation)


def global_variables_initializer(graph=None):
    """An op initialising every variable of the (default) graph that exists now."""
    g = graph or get_default_graph()
    with g.as_default():
        return variables_initializer(global_variables(graph=g))


def local_variables(scope=None, *, graph=None):
    """The graph's local variables (``tf.local_variables``: the ``LOCAL_VARIABLES`` collection), filtered by
    ``scope`` as :func:`global_variables`."""
    g, scope = _graph_and_scope(scope, graph)
    return _scoped(list(g.get_collection(GraphKeys.LOCAL_VARIABLES)), scope)


def local_variables_initializer(graph=None):
    """An op initialising every local variable (``tf.local_variables_initializer``: the metrics' counters)."""
    g = graph or get_default_graph()
    with g.as_default():
        return variables_initializer(local_variables(graph=g))


def _group_impl(S, *args):
    return None


def _group_native(gen, ins, attrs):
    # the native tier runs the effects in plan order already: nothing to compute
    return None


group_p = StaticPrimitive("group", _group_impl, lambda *a: Aval((), None), effect=True, native=_group_native)


def group(*inputs, name="group"):
    """An op that runs all ``inputs`` (as ``tf.group``)."""
    if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
        inputs = tuple(inputs[0])
    g = None
    for x in inputs:
        if not isinstance(x, Value):
            raise TypeError(f"group: {x!r} is not a graph node")
        if g is None:
            g = x.graph
        elif x.graph is not g:
            raise GraphError(f"group: '{x.name}' belongs to another graph")
    g = g or get_default_graph()
    return g.append_equation(group_p, tuple(x.id for x in inputs), {}, Aval((), None), name=name, cls=Operation)



def _assign_impl(S, value, var, mode):
    cur = S[var.index]
    if mode == "assign":
        cur[...] = value
    elif mode == "assign_add":
        cur += value
    else:
        cur -= value
    return cur


def _assign_shape(value, var, mode):
    want = var.graph.avals[var.id]
    if not _shape_fits(tuple(value.shape), want.shape, exact=(mode == "assign")):
        raise ShapeError(f"{mode}: value.shape={fmt_shape(value.shape)} does not match variable '{var.name}'.shape="
                         f"{fmt_shape(want.shape)}")
    return want


_ASSIGN_NATIVE = {"assign": lambda p, e: e, "assign_add": lambda p, e: f"({p} + {e})",
                  "assign_sub": lambda p, e: f"({p} - {e})"}


def _assign_native(gen, ins, attrs):
    """The native tier's ``_assign_impl``: the variable's storage updated in place."""
    var, mode = attrs["var"], attrs["mode"]
    name, dt, shape = gen.storage(var)
    gen.update(var, [gen.op(ins.args[0], dt)], _ASSIGN_NATIVE.get(mode, _ASSIGN_NATIVE["assign_sub"]))
    o = ins.outs[0]
    if o in gen.shape and gen.dtype.get(o) is not None:
        if shape == ():
            gen.scalar(o, f"{name}[()]", dt)
        else:
            gen.bind(o, name)


assign_p = StaticPrimitive("assign", _assign_impl, _assign_shape, effect=True, native=_assign_native)


def _shape_fits(got, want, exact=True):
    if exact:
        return len(got) == len(want) and all(a is None or b is None or a == b for a, b in zip(got, want))
    try:
        np.broadcast_shapes(tuple(1 if d is None else d for d in got), tuple(want))
    except ValueError:
        return False
    return len(got) <= len(want)


def _assign(var, value, mode):
    g = var.graph
    if isinstance(value, Value) and value.graph is not g:
        raise GraphError(f"{mode}: value '{value.name}' belongs to another graph than variable '{var.name}'")
    vid = value.id if isinstance(value, Value) else g.constant_value(np.asarray(value, dtype=var.dtype)).id
    attrs = {"var": var, "mode": mode}
    out = _assign_shape(g.avals[vid], var, mode)
    return g.append_equation(assign_p, (vid,), attrs, out, name=f"{var.name}/{mode}", site=user_site())

