"""Layers with PyTorch's names, parameter shapes and initialisation.

Every constructor takes ``rng=`` (a seed or a ``numpy.random.Generator``) so
initialisation is reproducible, and ``dtype=np.float32``. Without ``rng=`` the
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
from ..random import default_generator, generator
from .module import Module, Parameter

__all__ = ["Linear", "Embedding", "Dropout", "Sequential", "ModuleList", "Identity", "Tanh", "ReLU", "Sigmoid",
           "as_generator", "GELU", "LeakyReLU"]


def as_generator(rng):
    """``rng`` if it is a ``numpy.random.Generator``, the default generator
    (:func:`dynnets.manual_seed`) for None, else ``default_rng(rng)`` (a seed
    or a ``SeedSequence``)."""
    return generator(rng)


def float_dtype(owner, dtype):
    """``np.dtype(dtype)``, checked to be a floating-point type (the error names ``owner``)."""
    dt = np.dtype(dtype)
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
    rng : int, Generator or None
        Source of the initial weights (None: the default generator,
        :func:`dynnets.manual_seed`; weight drawn before bias).
    dtype : numpy float dtype, default float32

    Attributes
    ----------
    weight : Parameter, shape (out_features, in_features)
        Initialised as PyTorch does, ``kaiming_uniform_(a=sqrt(5))``, which
        works out to U(-1/sqrt(in_features), 1/sqrt(in_features)).
    bias : Parameter, shape (out_features,), or None
        U(-1/sqrt(in_features), 1/sqrt(in_features)).

    Shapes: input (..., in_features) -> output (..., out_features).
    """

    def __init__(self, in_features, out_features, bias=True, rng=None, dtype=np.float32):
        super().__init__()
        self.in_features = positive_int("Linear", "in_features", in_features, allow_zero=True)
        self.out_features = positive_int("Linear", "out_features", out_features, allow_zero=True)
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
        return ops.linear(x, self.weight, self.bias if self.bias is not None else self._zero_bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors (as ``torch.nn.Embedding``).

    Parameters
    ----------
    num_embeddings, embedding_dim : int
    padding_idx : int or None
        If given, that row is initialised to zeros and receives no gradient
        in eager mode (its value is still returned by lookups, as in
        PyTorch). Negative values count from the end. With symbolic
        (static-graph) ids the ids are unknown when the graph is built, so the
        lookup is not masked there.
    rng : int, Generator or None
        Source of the initial weights (None: the default generator,
        :func:`dynnets.manual_seed`).
    dtype : numpy float dtype, default float32

    Attributes
    ----------
    weight : Parameter, shape (num_embeddings, embedding_dim)
        Initialised N(0, 1), as PyTorch. Its gradient is a
        :class:`~dynnets.autograd.RowSparse` holding only the rows looked up,
        so an optimizer step costs only those rows (see :mod:`dynnets.optim`).

    Shapes: integer ids of any shape (...) -> (..., embedding_dim).
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, rng=None, dtype=np.float32,
                 _weight=None):
        super().__init__()
        self.num_embeddings = positive_int("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = positive_int("Embedding", "embedding_dim", embedding_dim)
        self.padding_idx = self._check_padding(padding_idx, num_embeddings)
        dt = float_dtype("Embedding", dtype)
        if _weight is None:
            w = as_generator(rng).standard_normal((num_embeddings, embedding_dim)).astype(dt)
            if self.padding_idx is not None:
                w[self.padding_idx] = 0
        else:
            w = _weight
        self.weight = Parameter(w)

    @staticmethod
    def _check_padding(padding_idx, n):
        if padding_idx is None:
            return None
        if not isinstance(padding_idx, (int, np.integer)) or not -n <= padding_idx < n:
            raise ValueError(f"Embedding: padding_idx must be an integer in [-{n}, {n}) for num_embeddings={n}, "
                             f"got {padding_idx!r}")
        return int(padding_idx) % n

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, dtype=None):
        """An Embedding whose weight is a copy of ``embeddings`` (V, D).

        ``freeze=True`` (the default, as PyTorch) sets
        ``weight.requires_grad = False``. ``dtype`` defaults to that of
        ``embeddings`` (float32 for non-float input). The padding row keeps its
        given values (it is not zeroed) but receives no gradient.
        """
        arr = embeddings.data if isinstance(embeddings, Tensor) else np.asarray(embeddings)
        if arr.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D (num_embeddings, embedding_dim), "
                             f"got shape {arr.shape}")
        if dtype is None:
            dtype = arr.dtype if arr.dtype.kind == "f" else np.float32
        w = np.array(arr, dtype=float_dtype("Embedding.from_pretrained", dtype), copy=True)
        emb = cls(arr.shape[0], arr.shape[1], padding_idx=padding_idx, dtype=w.dtype, _weight=w)
        emb.weight.requires_grad = not freeze
        return emb

    def forward(self, ids):
        """ids (...) integers -> (..., embedding_dim)."""
        out = ops.embedding(self.weight, ids)
        pad = self.padding_idx
        idx = ids.data if isinstance(ids, Tensor) else ids
        if pad is None or getattr(idx, "_is_symbolic", False) or not out.requires_grad:
            return out
        is_pad = np.asarray(idx) == pad
        if not is_pad.any():
            return out
        # where() passes the gradient only to non-padding positions; the padding
        # row's value enters as a constant, so forward values are unchanged
        return ops.where(is_pad[..., None], self.weight.data[pad], out)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class Dropout(Module):
    """Inverted dropout (as ``torch.nn.Dropout``): in training mode each element
    is zeroed with probability ``p`` and the rest scaled by 1/(1-p); in eval
    mode it is the identity.

    Parameters
    ----------
    p : float in [0, 1]
    rng : int, Generator or None
        Draws the masks. A Generator is used as is (shared with the caller), a
        seed makes a private one, so a run with the same seed repeats. None
        (the default): each training-mode call draws its mask from the default
        generator at that moment (as PyTorch), so ``dynnets.manual_seed``
        fixes the masks even when called after the module was built.
    """

    def __init__(self, p=0.5, rng=None):
        super().__init__()
        if not isinstance(p, (int, float, np.floating)) or not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)
        self.rng = None if rng is None else as_generator(rng)

    def forward(self, x):
        """x (any shape) -> same shape."""
        if not self.training or self.p == 0.0:
            return x
        if self.p == 1.0:
            data = x.data if isinstance(x, Tensor) else np.asarray(x)
            return ops.mul(x, np.zeros(data.shape, dtype=data.dtype))
        return ops.dropout(x, self.p, default_generator if self.rng is None else self.rng, training=True)

    def extra_repr(self):
        return f"p={self.p}"


class Identity(Module):
    """Returns its input."""

    def forward(self, x):
        return x


class Tanh(Module):
    """Elementwise tanh."""

    def forward(self, x):
        return ops.tanh(x)


class ReLU(Module):
    """Elementwise max(x, 0)."""

    def forward(self, x):
        return ops.relu(x)


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

    def __init__(self, modules=()):
        super().__init__()
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
    ``inplace=True`` (torch's memory saving) is accepted; the result is a new
    tensor either way."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = float(negative_slope)
        self.inplace = bool(inplace)

    def forward(self, x):
        return ops.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"
