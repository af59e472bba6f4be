"""Identity, Linear and Embedding (``torch.nn.modules.linear`` and
``sparse``), with PyTorch's parameter names, shapes and initialisation."""
from __future__ import annotations

import math

import numpy as np

from ..autograd import ops
from ..autograd.tensor import Tensor
from . import functional as F
from .module import (Module, Parameter, as_generator, check_device, check_float_input, float_dtype, positive_int,
                     uniform_)

__all__ = ["Identity", "Linear", "Embedding"]


class Identity(Module):
    """Returns its input."""

    def forward(self, x):
        return x


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
