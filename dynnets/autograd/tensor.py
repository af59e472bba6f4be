"""``Tensor``: a numpy array with an optional place in the autograd graph.

The arithmetic dunders and op methods (``x + y``, ``x @ w``, ``x.sum()``,
``x[idx]``...) are installed by :mod:`dynnets.autograd.ops`, so every one of
them goes through the primitive table.
"""
from __future__ import annotations

import numpy as np

from .gradtypes import densify
from .primitives.core import ShapeError

__all__ = ["Tensor", "Parameter"]


class Tensor:
    """A numpy array with an optional place in the autograd graph.

    Create tensors with :func:`dynnets.tensor`, :func:`dynnets.zeros` and
    friends. ``.data`` is the numpy array; ``.grad`` is filled by
    :meth:`backward` for leaves with ``requires_grad=True``.
    """

    __slots__ = ("data", "_grad", "requires_grad", "_node", "_idx", "name", "__weakref__")
    __array_priority__ = 1000      # ndarray (op) Tensor defers to Tensor's reflected dunder
    _is_tensor = True

    def __init__(self, data, requires_grad=False, dtype=None, name=None):
        arr = np.asarray(data, dtype=dtype)
        if requires_grad and arr.dtype.kind != "f":
            raise TypeError(f"tensor: only floating-point tensors can require grad, got dtype {arr.dtype}")
        self.data = arr
        self._grad = None
        self.requires_grad = bool(requires_grad)
        self._node = None
        self._idx = 0
        self.name = name

    # --- basic attributes -------------------------------------------------
    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return self.data.ndim

    def __len__(self):
        return len(self.data)

    @property
    def is_leaf(self):
        return self._node is None

    @property
    def grad_fn(self):
        """The recorded :class:`~dynnets.autograd.engine.Node` that produced this tensor
        (``None`` for a leaf), as PyTorch's ``grad_fn``: its ``parents`` lead to the
        inputs' tensors, so the recording can be walked (and drawn) before backward."""
        return self._node

    @property
    def grad(self):
        """The accumulated gradient as a Tensor (``None`` before backward).

        Row-sparse gradients (from :func:`embedding`) are densified here; the
        optimizers read the sparse form directly.
        """
        g = self._grad
        if g is None:
            return None
        return Tensor(densify(g))

    @grad.setter
    def grad(self, value):
        if value is None:
            self._grad = None
        else:
            v = value.data if isinstance(value, Tensor) else np.asarray(value)
            if v.shape != self.data.shape:
                raise ShapeError(f"grad: shape {v.shape} does not match tensor shape {self.data.shape}")
            self._grad = v

    def numpy(self):
        return self.data

    def __array__(self, dtype=None, copy=None):
        if dtype is None:
            return self.data
        return self.data.astype(dtype)

    def item(self):
        if self.data.size != 1:
            raise ValueError(f"item: only a one-element tensor can be converted to a Python scalar, got shape {self.data.shape}")
        return self.data.item()

    def tolist(self):
        return self.data.tolist()

    def detach(self):
        """A new leaf sharing this tensor's data, cut from the graph."""
        t = Tensor.__new__(Tensor)
        t.data = self.data
        t._grad = None
        t.requires_grad = False
        t._node = None
        t._idx = 0
        t.name = None
        return t

    def requires_grad_(self, flag=True):
        if not self.is_leaf:
            raise RuntimeError("requires_grad_: can only change requires_grad of a leaf tensor")
        if flag and self.data.dtype.kind != "f":
            raise TypeError(f"requires_grad_: only floating-point tensors can require grad, got dtype {self.data.dtype}")
        self.requires_grad = bool(flag)
        return self

    def backward(self, gradient=None, retain_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``.

        ``gradient`` is required for a non-scalar tensor (the vector of the
        vector-Jacobian product). The graph is freed afterwards unless
        ``retain_graph=True``.
        """
        _engine_backward(self, gradient, retain_graph)

    def __repr__(self):
        body = np.array2string(self.data, precision=4, separator=", ", threshold=20,
                               prefix="tensor(")
        extra = ""
        if self.data.dtype != np.float32:
            extra += f", dtype={self.data.dtype}"
        if self._node is not None:
            extra += f", grad_fn=<{self._node.prim.name}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    def __bool__(self):
        if self.data.size != 1:
            raise ValueError("The truth value of a tensor with more than one element is ambiguous")
        return bool(self.data)

    def __hash__(self):
        return id(self)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __iter__(self):
        for i in range(len(self.data)):
            yield self[i]


def _engine_backward(root, gradient, retain_graph):
    # replaced by dynnets.autograd.engine.backward when the engine is imported
    # (the engine imports this module, so tensor.py cannot import it at the top;
    # a per-call import statement costs ~0.4 us)
    from .engine import backward
    backward(root, gradient, retain_graph)


class Parameter(Tensor):
    """A leaf tensor that a :class:`dynnets.nn.Module` registers as a parameter.
    ``requires_grad`` defaults to True (as ``torch.nn.Parameter``)."""

    __slots__ = ()

    def __init__(self, data, requires_grad=True, name=None):
        arr = np.array(data.data if isinstance(data, Tensor) else data)
        if arr.dtype.kind != "f":
            arr = arr.astype(np.float32)
        super().__init__(arr, requires_grad=requires_grad, name=name)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


