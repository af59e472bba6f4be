"""Layers with PyTorch's names, parameter shapes and initialisation.

Constructors take PyTorch's arguments in PyTorch's order (``device`` only
``None`` or ``'cpu'``; ``dtype`` a numpy float type, ``None`` for float32),
and, keyword-only, ``rng=`` (a seed or a ``numpy.random.Generator``) so
initialisation is reproducible. Without ``rng=`` the
weights come from the default generator, which ``dynnets.manual_seed(seed)``
seeds (as ``torch.manual_seed``; see :mod:`dynnets.random`). Samples are drawn
in float64 and then cast, so the same seed gives the same numbers (up to
rounding) in float32 and float64.
"""
from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from ..autograd import ops
from ..autograd.tensor import Tensor
from ..random import generator
from . import functional as F
from .module import Module, Parameter, check_device, check_float_input

__all__ = ["Linear", "Embedding", "Dropout", "Sequential", "ModuleList", "Identity", "Tanh", "ReLU", "Sigmoid",
           "as_generator", "GELU", "LeakyReLU", "Flatten", "Unflatten", "Softmax", "LogSoftmax"]


def as_generator(rng):
    """``rng`` if it is a ``numpy.random.Generator``, the default generator
    (:func:`dynnets.manual_seed`) for None, else ``default_rng(rng)`` (a seed
    or a ``SeedSequence``)."""
    return generator(rng)


def float_dtype(owner, dtype):
    """``np.dtype(dtype)`` (float32 for None, PyTorch's default dtype),
    checked to be a floating-point type (the error names ``owner``)."""
    dt = np.dtype(np.float32 if dtype is None else dtype)
    if dt.kind != "f":
        raise TypeError(f"{owner}: dtype must be a floating-point type, got {dt}")
    return dt


def positive_int(owner, name, value, allow_zero=False):
    """``value`` as an int, checked to be a positive (or, with ``allow_zero``,
    non-negative) integer; the error names ``owner`` and the argument ``name``."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < (0 if allow_zero else 1):
        want = "a non-negative" if allow_zero else "a positive"
        raise ValueError(f"{owner}: {name} must be {want} integer, got {value!r}")
    return int(value)


def uniform_(gen, shape, bound, dtype):
    """U(-bound, bound) samples of ``shape`` as a new array of ``dtype``."""
    return gen.uniform(-bound, bound, shape).astype(dtype)


class Linear(Module):
    """Affine map ``y = x W^T + b`` (as ``torch.nn.Linear``).

    Parameters
    ----------
    in_features, out_features : int
    bias : bool
        Whether to learn an additive bias.
    device : None or 'cpu'
    dtype : numpy float dtype, default float32
    rng : int, Generator or None (keyword-only)
        Source of the initial weights (None: the default generator,
        :func:`dynnets.manual_seed`; weight drawn before bias).

    Attributes
    ----------
    weight : Parameter, shape (out_features, in_features)
        Initialised as PyTorch does, ``kaiming_uniform_(a=sqrt(5))``, which
        works out to U(-1/sqrt(in_features), 1/sqrt(in_features)).
    bias : Parameter, shape (out_features,), or None
        U(-1/sqrt(in_features), 1/sqrt(in_features)).

    Notes
    -----
    Shapes: input (..., in_features) -> output (..., out_features), of the
    layer's dtype: an input of another dtype (an integer array, float32 into
    a float64 layer) raises :class:`~dynnets.autograd.primitives.DTypeError`
    naming the layer and both dtypes, as torch raises (cast it first, e.g.
    ``x.astype(np.float32)``, or the layer with ``.to(dtype)``).
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, *, rng=None):
        super().__init__()
        self.in_features = positive_int("Linear", "in_features", in_features, allow_zero=True)
        self.out_features = positive_int("Linear", "out_features", out_features, allow_zero=True)
        check_device("Linear", device)
        dt = float_dtype("Linear", dtype)
        gen = as_generator(rng)
        # kaiming_uniform(a=sqrt(5)): gain = sqrt(2/(1+a^2)) = sqrt(1/3), bound = sqrt(3)*gain/sqrt(fan_in)
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = Parameter(uniform_(gen, (out_features, in_features), bound, dt))
        if bias:
            self.bias = Parameter(uniform_(gen, (out_features,), bound, dt))
        else:
            self.bias = None
            self._zero_bias = np.zeros((), dtype=dt)

    def forward(self, x):
        """x (..., in_features) -> (..., out_features)."""
        w = self.weight
        # numpy caches dtype objects, so the usual case is one identity test: the check costs ~0.2 us of
        # a 2.5 us call on a (1, 8) float32 input (measured), ~0.1 us less than calling the general one
        if getattr(x, "dtype", None) is not w.dtype:
            x = check_float_input("Linear", x, w)
        return ops.linear(x, w, self.bias if self.bias is not None else self._zero_bias)

    def _cast_constants(self, dtype):
        if self.bias is None:
            self._zero_bias = np.zeros((), dtype=dtype)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors (as ``torch.nn.Embedding``,
    arguments in its order).

    Parameters
    ----------
    num_embeddings, embedding_dim : int
    padding_idx : int or None
        If given, that row is initialised to zeros and receives no gradient
        in eager mode (its value is still returned by lookups, as in
        PyTorch). Negative values count from the end. With symbolic
        (static-graph) ids the ids are unknown when the graph is built, so the
        lookup is not masked there.
    max_norm : float or None
        Looked-up rows with a larger ``norm_type``-norm are rescaled to it in
        place before each lookup (eager), as PyTorch.
    norm_type : float, default 2
    scale_grad_by_freq : bool
        Not supported (True raises).
    sparse : bool
        Accepted: the gradient is always row-sparse inside (see ``weight``).
    _weight : array or None
        The initial table (PyTorch's private argument; prefer :meth:`from_pretrained`).
    _freeze : bool
        With ``_weight``: ``weight.requires_grad = False``.
    device : None or 'cpu'
    dtype : numpy float dtype, default float32
    rng : int, Generator or None (keyword-only)
        Source of the initial weights (None: the default generator,
        :func:`dynnets.manual_seed`).

    Attributes
    ----------
    weight : Parameter, shape (num_embeddings, embedding_dim)
        Initialised N(0, 1), as PyTorch. Its gradient is a
        :class:`~dynnets.autograd.RowSparse` holding only the rows looked up,
        so an optimizer step costs only those rows (see :mod:`dynnets.optim`).

    Shapes: integer ids of any shape (...) -> (..., embedding_dim).
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None, *,
                 rng=None):
        super().__init__()
        self.num_embeddings = positive_int("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = positive_int("Embedding", "embedding_dim", embedding_dim)
        self.padding_idx = self._check_padding(padding_idx, num_embeddings)
        if max_norm is not None and (isinstance(max_norm, (bool, np.bool_))
                                     or not isinstance(max_norm, (int, float, np.integer, np.floating))
                                     or not max_norm > 0):
            raise ValueError(f"Embedding: max_norm must be a positive number or None, got {max_norm!r}")
        if scale_grad_by_freq:
            raise ValueError("Embedding: scale_grad_by_freq=True is not supported")
        self.max_norm = None if max_norm is None else float(max_norm)
        self.norm_type = float(norm_type)
        self.scale_grad_by_freq = False
        self.sparse = bool(sparse)
        check_device("Embedding", device)
        if _weight is None:
            dt = float_dtype("Embedding", dtype)
            w = as_generator(rng).standard_normal((num_embeddings, embedding_dim)).astype(dt)
            if self.padding_idx is not None:
                w[self.padding_idx] = 0
        else:
            w = _weight.numpy() if isinstance(_weight, Tensor) else np.asarray(_weight)
            if w.shape != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: _weight.shape={w.shape} does not match (num_embeddings, "
                                 f"embedding_dim)=({num_embeddings}, {embedding_dim})")
            if dtype is not None:
                w = w.astype(float_dtype("Embedding", dtype), copy=False)
            float_dtype("Embedding", w.dtype)
        self.weight = Parameter(w)
        if _freeze:
            self.weight.requires_grad = False

    @staticmethod
    def _check_padding(padding_idx, n):
        if padding_idx is None:
            return None
        if not isinstance(padding_idx, (int, np.integer)) or not -n <= padding_idx < n:
            raise ValueError(f"Embedding: padding_idx must be an integer in [-{n}, {n}) for num_embeddings={n}, "
                             f"got {padding_idx!r}")
        return int(padding_idx) % n

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False, *, dtype=None):
        """An Embedding whose weight is a copy of ``embeddings`` (V, D)
        (PyTorch's arguments in its order).

        ``freeze=True`` (the default, as PyTorch) sets
        ``weight.requires_grad = False``. ``dtype`` defaults to that of
        ``embeddings`` (float32 for non-float input). The padding row keeps its
        given values (it is not zeroed) but receives no gradient.
        """
        arr = embeddings.numpy() if isinstance(embeddings, Tensor) else np.asarray(embeddings)
        if arr.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D (num_embeddings, embedding_dim), "
                             f"got shape {arr.shape}")
        if dtype is None:
            dtype = arr.dtype if arr.dtype.kind == "f" else np.float32
        w = np.array(arr, dtype=float_dtype("Embedding.from_pretrained", dtype), copy=True)
        return cls(arr.shape[0], arr.shape[1], padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=w, _freeze=freeze)

    def forward(self, ids):
        """ids (...) integers -> (..., embedding_dim)."""
        return F.embedding(ids, self.weight, self.padding_idx, self.max_norm, self.norm_type)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        return s


class Dropout(Module):
    """Inverted dropout (as ``torch.nn.Dropout``): in training mode each element
    is zeroed with probability ``p`` and the rest scaled by 1/(1-p); in eval
    mode it is the identity.

    Parameters
    ----------
    p : float in [0, 1]
    inplace : bool
        As torch: in training mode the mask is applied to the input itself,
        which is returned (see :func:`dynnets.nn.functional.dropout`).
    rng : int, Generator or None (keyword-only)
        Draws the masks. A Generator is used as is (shared with the caller), a
        seed makes a private one, so a run with the same seed repeats. None
        (the default): each training-mode call draws its mask from the default
        generator at that moment (as PyTorch), so ``dynnets.manual_seed``
        fixes the masks even when called after the module was built.
    """

    def __init__(self, p=0.5, inplace=False, *, rng=None):
        super().__init__()
        if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.floating)) \
                or not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)
        self.inplace = bool(inplace)
        self.rng = None if rng is None else as_generator(rng)

    def forward(self, x):
        """x (any shape) -> same shape."""
        return F.dropout(x, self.p, self.training, self.inplace, generator=self.rng)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Identity(Module):
    """Returns its input."""

    def forward(self, x):
        return x


class Tanh(Module):
    """Elementwise tanh."""

    def forward(self, x):
        return ops.tanh(x)


class ReLU(Module):
    """Elementwise max(x, 0) (as ``torch.nn.ReLU``). ``inplace=True`` writes
    the result into the input and returns it, as torch (see
    :func:`dynnets.nn.functional.relu`)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)

    def forward(self, x):
        return F.relu(x, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    """Elementwise logistic function 1 / (1 + exp(-x))."""

    def forward(self, x):
        return ops.sigmoid(x)


class Sequential(Module):
    """Modules applied in order (as ``torch.nn.Sequential``).

    ``Sequential(m0, m1, ...)`` names the children "0", "1", ...;
    ``Sequential(OrderedDict(name=module, ...))`` keeps the given names.
    Indexing with an int returns a child, with a slice a new Sequential of
    the same (shared) children.
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            items = list(modules[0].items())
        else:
            items = [(str(i), m) for i, m in enumerate(modules)]
        for name, m in items:
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: child {name!r} must be a Module, got {type(m).__name__}")
            self.add_module(name, m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        mods = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(mods[idx]))
        n = len(mods)
        if not -n <= idx < n:
            raise IndexError(f"Sequential: index {idx} is out of range for {n} modules")
        return mods[idx][1]

    def append(self, module):
        if not isinstance(module, Module):
            raise TypeError(f"Sequential.append: expected a Module, got {type(module).__name__}")
        self.add_module(str(len(self._modules)), module)
        return self

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(Module):
    """A list of modules whose parameters are registered (as
    ``torch.nn.ModuleList``); children are named "0", "1", ..."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _check(self, m):
        if not isinstance(m, Module):
            raise TypeError(f"ModuleList: elements must be Modules, got {type(m).__name__}")
        return m

    def _index(self, idx):
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"ModuleList: index {idx} is out of range for {n} modules")
        return idx % n

    def _renumber(self, mods):
        for name in list(self._modules):
            delattr(self, name)
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])
        return mods[self._index(idx)]

    def __setitem__(self, idx, module):
        self.add_module(str(self._index(idx)), self._check(module))

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[self._index(idx)]
        self._renumber(mods)

    def append(self, module):
        self.add_module(str(len(self._modules)), self._check(module))
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, self._check(module))
        self._renumber(mods)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(): iterate over it and call the modules")


class GELU(Module):
    """GELU ``x * Phi(x)`` (``approximate='tanh'``: its tanh approximation), as ``torch.nn.GELU``."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return ops.gelu(x, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class LeakyReLU(Module):
    """``x`` where positive, else ``negative_slope * x``, as ``torch.nn.LeakyReLU``.
    ``inplace=True`` writes the result into the input and returns it, as torch."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = float(negative_slope)
        self.inplace = bool(inplace)

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Flatten(Module):
    """Dimensions ``start_dim..end_dim`` merged into one (as ``torch.nn.Flatten``;
    by default every dimension but the batch's first)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        for name, v in (("start_dim", start_dim), ("end_dim", end_dim)):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"Flatten: {name} must be an integer, got {v!r}")
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def forward(self, input):
        return ops.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Dimension ``dim`` split into ``unflattened_size`` (as ``torch.nn.Unflatten``;
    one size may be -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"Unflatten: dim must be an integer (named dimensions are not supported), got {dim!r}")
        if not isinstance(unflattened_size, (tuple, list)) or not unflattened_size or not all(
                isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) for s in unflattened_size):
            raise TypeError(f"Unflatten: unflattened_size must be a non-empty tuple of integers, got "
                            f"{unflattened_size!r}")
        self.dim, self.unflattened_size = int(dim), tuple(int(s) for s in unflattened_size)

    def forward(self, input):
        shp = tuple(input.shape)
        nd = len(shp)
        if not -nd <= self.dim < nd:
            raise ValueError(f"Unflatten: dim={self.dim} is out of range for an input with {nd} dimensions")
        d = self.dim % nd
        sizes = self.unflattened_size
        if -1 not in sizes and shp[d] is not None and int(np.prod(sizes)) != shp[d]:
            raise ValueError(f"Unflatten: unflattened_size {sizes} does not multiply to input.shape[{d}]={shp[d]} "
                             f"(input.shape={shp})")
        return ops.reshape(input, *shp[:d], *sizes, *shp[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Softmax(Module):
    """Softmax along ``dim`` (as ``torch.nn.Softmax``; without ``dim``,
    torch's deprecated implicit choice, with its warning)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim`` (as ``torch.nn.LogSoftmax``)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


def _check_key(owner, key, what):
    """A ModuleDict / ParameterDict key, checked as torch's ``add_module``
    checks a name: a non-empty string without '.' (the dotted names of
    ``state_dict`` would be ambiguous)."""
    if not isinstance(key, str):
        raise TypeError(f"{owner}: {what} name should be a string, got {type(key).__name__}")
    if "." in key:
        raise KeyError(f"{owner}: {what} name can't contain \".\", got {key!r}")
    if key == "":
        raise KeyError(f"{owner}: {what} name can't be empty string \"\"")
    return key


def _pairs(owner, items):
    """``(key, value)`` pairs of a mapping or of an iterable of pairs (as torch's ``update``)."""
    if hasattr(items, "keys"):
        return [(k, items[k]) for k in items.keys()]
    out = []
    for i, kv in enumerate(items):
        kv = tuple(kv) if isinstance(kv, (list, tuple)) else kv
        if not isinstance(kv, tuple) or len(kv) != 2:
            raise ValueError(f"{owner}.update: element #{i} should be a (key, value) pair, got {kv!r}")
        out.append(kv)
    return out


class _DictMixin:
    """The mapping methods ModuleDict and ParameterDict share, over the
    ordered dict ``self._store()`` (``_modules`` / ``_parameters``)."""

    def __getitem__(self, key):
        try:
            return self._store()[key]
        except KeyError:
            raise KeyError(f"{type(self).__name__}: no entry {key!r} (keys: {list(self._store())})") from None

    def __getattr__(self, name):
        # torch's Module.__getattr__: md.name finds the entry (methods and attributes come first)
        store = self.__dict__.get(self._STORE)
        if store is not None and name in store:
            return store[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    def __delitem__(self, key):
        del self._store()[key]

    def __len__(self):
        return len(self._store())

    def __iter__(self):
        return iter(self._store())

    def __contains__(self, key):
        return key in self._store()

    def keys(self):
        return self._store().keys()

    def items(self):
        return self._store().items()

    def values(self):
        return self._store().values()

    def clear(self):
        self._store().clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def update(self, items):
        for k, v in _pairs(type(self).__name__, items):
            self[k] = v

    def _store(self):
        return self.__dict__[self._STORE]


class ModuleDict(_DictMixin, Module):
    """Modules by name, registered as children in insertion order (as
    ``torch.nn.ModuleDict``): ``md["enc"]``, ``md.enc``, ``md["dec"] = m``,
    ``keys()``, ``items()``, ``values()``, ``update()``, ``pop()``; the
    state_dict names are ``"<key>.<parameter>"``.

    Parameters
    ----------
    modules : mapping or iterable of (str, Module) pairs, optional
    """

    _STORE = "_modules"

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        _check_key("ModuleDict", key, "module")
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: {key!r} must be a Module, got {type(module).__name__}")
        self._modules[key] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(): call its modules")


def _as_parameter(owner, value):
    """torch's ParameterList/Dict: a Parameter stays itself, a tensor (or an array) becomes a Parameter."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor) or isinstance(value, np.ndarray):
        return Parameter(value)
    raise TypeError(f"{owner}: expected a Parameter or a Tensor, got {type(value).__name__}")


class ParameterList(Module):
    """A list of Parameters, registered as ``"0"``, ``"1"``, ... (as
    ``torch.nn.ParameterList``); a plain tensor is made a Parameter (on its
    memory, as torch's).

    Parameters
    ----------
    values : iterable of Parameters or Tensors, optional
    """

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def _index(self, idx):
        n = len(self._parameters)
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise TypeError(f"ParameterList: indices must be integers or slices, got {type(idx).__name__}")
        if not -n <= idx < n:
            raise IndexError(f"ParameterList: index {idx} is out of range for {n} parameters")
        return idx % n

    def __getitem__(self, idx):
        ps = list(self._parameters.values())
        if isinstance(idx, slice):
            return ParameterList(ps[idx])
        return ps[self._index(idx)]

    def __setitem__(self, idx, value):
        self._parameters[str(self._index(idx))] = _as_parameter("ParameterList", value)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def append(self, value):
        self._parameters[str(len(self._parameters))] = _as_parameter("ParameterList", value)
        return self

    def extend(self, values):
        if isinstance(values, Tensor):
            raise TypeError("ParameterList.extend: expected an iterable of Parameters, got a single Tensor")
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return ", ".join(f"({i}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
                         for i, p in enumerate(self))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward(): use its parameters")


class ParameterDict(_DictMixin, Module):
    """Parameters by name, in insertion order (as ``torch.nn.ParameterDict``):
    ``pd["w"]``, ``pd.w``, ``pd["b"] = tensor`` (made a Parameter),
    ``keys()``, ``items()``, ``values()``, ``update()``, ``pop()``.

    Parameters
    ----------
    parameters : mapping or iterable of (str, Parameter) pairs, optional
    """

    _STORE = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        _check_key("ParameterDict", key, "parameter")
        self._parameters[key] = _as_parameter("ParameterDict", value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward(): use its parameters")


class LayerNorm(Module):
    """Layer normalisation over the trailing ``normalized_shape`` dimensions,
    as ``torch.nn.LayerNorm`` (see :func:`dynnets.nn.functional.layer_norm`).

    Parameters
    ----------
    normalized_shape : int or sequence of int
    eps : float
    elementwise_affine : bool
        Learn ``weight`` (ones) and ``bias`` (zeros), each of shape
        ``normalized_shape``.
    bias : bool
        With ``elementwise_affine``, whether to learn the bias (torch >= 2.1).
    device : None or 'cpu'
    dtype : numpy float dtype, default float32

    Notes
    -----
    Shapes: input ``(..., *normalized_shape)`` -> output of the same shape, of the
    layer's dtype (another dtype raises, as :class:`Linear`).
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
        self.normalized_shape = tuple(positive_int("LayerNorm", "normalized_shape", d) for d in ns)
        self.eps = float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        check_device("LayerNorm", device)
        dt = float_dtype("LayerNorm", dtype)
        self._dtype = dt
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype=dt))
            self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dt)) if bias else None
        else:
            self.weight = None
            self.bias = None

    def forward(self, input):
        if self.weight is not None and getattr(input, "dtype", None) is not self.weight.dtype:
            input = check_float_input("LayerNorm", input, self.weight)
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


__all__ += ["LayerNorm"]


# --- activations, similarities and BatchNorm1d (branch i22-torch-b) ------------------

class _Activation(Module):
    """A module applying ``F.<fn>`` with its keyword arguments, as torch's
    activation modules (their ``__init__`` arguments are ``fn``'s)."""

    fn = None
    args = ()

    def forward(self, input):
        return type(self).fn(input, *(getattr(self, a) for a in self.args))

    def extra_repr(self):
        return ", ".join(f"{a}={getattr(self, a)!r}" for a in self.args if a != "inplace" or self.inplace)


class Softplus(_Activation):
    """``F.softplus(input, beta, threshold)`` as ``torch.nn.Softplus``."""
    fn, args = staticmethod(F.softplus), ("beta", "threshold")

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = float(beta), float(threshold)


class ELU(_Activation):
    """``F.elu(input, alpha)`` as ``torch.nn.ELU``."""
    fn, args = staticmethod(F.elu), ("alpha", "inplace")

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = float(alpha), bool(inplace)


class SELU(_Activation):
    """``F.selu`` as ``torch.nn.SELU``."""
    fn, args = staticmethod(F.selu), ("inplace",)

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)


class SiLU(_Activation):
    """``F.silu`` (``x * sigmoid(x)``) as ``torch.nn.SiLU``."""
    fn, args = staticmethod(F.silu), ("inplace",)

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)


class Mish(_Activation):
    """``F.mish`` as ``torch.nn.Mish``."""
    fn, args = staticmethod(F.mish), ("inplace",)

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)


class Hardtanh(_Activation):
    """``F.hardtanh(input, min_val, max_val)`` as ``torch.nn.Hardtanh`` (its
    deprecated ``min_value`` / ``max_value`` override the bounds, with a
    warning, as torch's)."""
    fn, args = staticmethod(F.hardtanh), ("min_val", "max_val", "inplace")

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        import warnings
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning,
                          stacklevel=2)
            max_val = max_value
        if not max_val > min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val, self.max_val, self.inplace = float(min_val), float(max_val), bool(inplace)


class ReLU6(Hardtanh):
    """``F.relu6`` (``hardtanh(input, 0, 6)``) as ``torch.nn.ReLU6``."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Softsign(_Activation):
    """``F.softsign`` as ``torch.nn.Softsign``."""
    fn = staticmethod(F.softsign)

    def __init__(self):
        super().__init__()


class LogSigmoid(_Activation):
    """``F.logsigmoid`` as ``torch.nn.LogSigmoid``."""
    fn = staticmethod(F.logsigmoid)

    def __init__(self):
        super().__init__()


class CosineSimilarity(Module):
    """``F.cosine_similarity(x1, x2, dim, eps)`` as ``torch.nn.CosineSimilarity``."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = int(dim), float(eps)

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)

    def extra_repr(self):
        return f"dim={self.dim}, eps={self.eps}"


class PairwiseDistance(Module):
    """``F.pairwise_distance(x1, x2, p, eps, keepdim)`` as ``torch.nn.PairwiseDistance``."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = float(p), float(eps), bool(keepdim)

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)

    def extra_repr(self):
        return f"p={self.norm}, eps={self.eps}, keepdim={self.keepdim}"


class BatchNorm1d(Module):
    """Batch normalisation of (N, C) or (N, C, L) input over its channels C,
    as ``torch.nn.BatchNorm1d`` (see :func:`dynnets.nn.functional.batch_norm`).

    Parameters
    ----------
    num_features : int
        C.
    eps : float
    momentum : float or None
        The running statistics' update factor; None: their cumulative
        average (factor ``1 / num_batches_tracked``).
    affine : bool
        Learn ``weight`` (ones) and ``bias`` (zeros), of shape (C,).
    track_running_stats : bool
        Keep the buffers ``running_mean`` (zeros), ``running_var`` (ones)
        and ``num_batches_tracked`` (int64 0), torch's names in the
        state_dict, and normalise with them in eval mode; without them
        every mode uses the batch's statistics.
    device : None or 'cpu'
    dtype : numpy float dtype, default float32
    bias : bool
        With ``affine``, whether to learn the bias.

    The buffers are numpy arrays updated in place (``state_dict`` tensors
    share their memory), as dynnets' other buffers.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features = positive_int("BatchNorm1d", "num_features", num_features)
        self.eps = float(eps)
        self.momentum = None if momentum is None else float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        check_device("BatchNorm1d", device)
        dt = float_dtype("BatchNorm1d", dtype)
        c = self.num_features
        if self.affine:
            self.weight = Parameter(np.ones(c, dtype=dt))
            self.bias = Parameter(np.zeros(c, dtype=dt)) if bias else None
        else:
            self.weight = None
            self.bias = None
        if self.track_running_stats:
            self.register_buffer("running_mean", np.zeros(c, dtype=dt))
            self.register_buffer("running_var", np.ones(c, dtype=dt))
            self.register_buffer("num_batches_tracked", np.zeros((), dtype=np.int64))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean[...] = 0
            self.running_var[...] = 1
            self.num_batches_tracked[...] = 0

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            from ..autograd import no_grad
            with no_grad():
                self.weight.fill_(1.0)
                if self.bias is not None:
                    self.bias.zero_()

    def forward(self, input):
        nd = len(input.shape)
        if nd not in (2, 3):
            raise ValueError(f"BatchNorm1d: expected 2D or 3D input (got {nd}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm1d: input.shape[1]={input.shape[1]} does not match num_features="
                             f"{self.num_features}")
        like = self.weight if self.weight is not None else self.running_mean
        if like is not None and getattr(input, "dtype", None) != like.dtype:
            input = check_float_input("BatchNorm1d", input, like)
        momentum = self.momentum
        if self.training and self.track_running_stats:
            np.add(self.num_batches_tracked, 1, out=self.num_batches_tracked)
            if momentum is None:
                momentum = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or not self.track_running_stats
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, use_batch,
                            0.0 if momentum is None else momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")
