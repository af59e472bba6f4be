"""TF1's ``TensorShape`` and ``Dimension`` for graph values.

``Value.shape`` and ``Value.get_shape()`` give a :class:`TensorShape`: a
tuple of the dimensions (ints, ``None`` where unknown), so every use of a
shape as a tuple keeps working (``==`` with a tuple or a list, slicing,
``None in shape``, ``np.zeros(shape)``), with TF1's methods on top
(``as_list()``, ``ndims``, ``dims``, ``is_fully_defined()``,
``num_elements()``...).

An index gives a :class:`Dimension`: for a known size an ``int`` subclass
(``.value``, ``int(d)``, arithmetic and comparisons as the int). For an
unknown size, ``get_shape()[i]`` gives TF1's ``Dimension(None)`` (``.value``
is None), while ``.shape[i]`` gives ``None`` itself, so the library's and
users' ``x.shape[i] is None`` tests keep their meaning (a deliberate
difference from TF1, where ``x.shape[i]`` is ``Dimension(None)`` too).
Iterating ``get_shape()`` gives Dimensions, as TF1; iterating ``.shape``
gives the plain ints and ``None``.

Cost: building a TensorShape is one tuple copy; the tuple's own C methods
serve iteration, ``len``, ``in`` and hashing.
"""
from __future__ import annotations

__all__ = ["Dimension", "TensorShape", "dimension_value", "as_shape"]


class Dimension(int):
    """A known dimension of a :class:`TensorShape` (TF1's ``Dimension``):
    the int itself, with ``.value``. ``Dimension(None)`` is the unknown
    dimension (:class:`UnknownDimension`)."""

    __slots__ = ()

    def __new__(cls, value):
        if value is None or isinstance(value, UnknownDimension):
            return UNKNOWN_DIMENSION
        return super().__new__(cls, value.value if isinstance(value, Dimension) else value)

    @property
    def value(self):
        return int(self)

    # repr and str stay the int's (TF1: Dimension(6)), so messages that format a dimension read as before

    def is_compatible_with(self, other):
        other = dimension_value(other)
        return other is None or other == int(self)


class UnknownDimension:
    """TF1's ``Dimension(None)``: ``.value`` is None; comparisons give
    ``None`` (unknown), as TF1's; ``int()`` of it raises."""

    __slots__ = ()
    value = None

    def __repr__(self):
        return "Dimension(None)"

    def __int__(self):
        raise TypeError("int() of Dimension(None): the dimension is unknown while the graph is built (use "
                        "tf.shape(x)[i] for its value at run time)")

    __index__ = __int__

    def __eq__(self, other):
        return None

    def __ne__(self, other):
        return None

    def __hash__(self):
        return hash(None)

    def is_compatible_with(self, other):
        return True


UNKNOWN_DIMENSION = object.__new__(UnknownDimension)
_new_int = int.__new__


def dimension_value(d):
    """``d``'s size as an int or None (``tf.compat.dimension_value``)."""
    return d.value if isinstance(d, (Dimension, UnknownDimension)) else d


class TensorShape(tuple):
    """The static shape of a graph value, as TF1's ``TensorShape``: a tuple
    of ints and ``None`` with TF1's methods (see the module docstring)."""

    __slots__ = ()
    _tf1_unknown = False        # get_shape()'s subclass: Dimension(None) for an unknown dimension

    def __getitem__(self, k):
        v = tuple.__getitem__(self, k)
        if type(k) is slice:
            return type(self)(v)
        if v is None:
            return UNKNOWN_DIMENSION if self._tf1_unknown else None
        return _new_int(Dimension, v)        # Dimension(v) without its checks: v is an int

    def __eq__(self, other):
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = tuple.__hash__

    def __repr__(self):
        return f"TensorShape({list(tuple.__iter__(self))})"

    def __str__(self):
        # TF1's str: (?, 3); also how dynnets' messages print shapes
        dims = ["?" if d is None else str(d) for d in tuple.__iter__(self)]
        return "(" + dims[0] + ",)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"

    @property
    def ndims(self):
        return len(self)

    rank = ndims

    @property
    def dims(self):
        return [Dimension(d) for d in tuple.__iter__(self)]

    def as_list(self):
        """The dimensions as a list of ints and None."""
        return list(tuple.__iter__(self))

    def is_fully_defined(self):
        return not tuple.__contains__(self, None)

    def num_elements(self):
        """The number of elements, or None when a dimension is unknown."""
        n = 1
        for d in tuple.__iter__(self):
            if d is None:
                return None
            n *= d
        return n

    def is_compatible_with(self, other):
        other = as_shape(other)
        return len(other) == len(self) and all(a is None or b is None or a == b
                                               for a, b in zip(tuple.__iter__(self), tuple.__iter__(other)))

    def assert_is_compatible_with(self, other):
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self.as_list()} and {as_shape(other).as_list()} are incompatible")

    def assert_has_rank(self, rank):
        if len(self) != rank:
            raise ValueError(f"Shape {self.as_list()} must have rank {rank}")

    def with_rank(self, rank):
        self.assert_has_rank(rank)
        return self

    def merge_with(self, other):
        """The shape that both shapes describe (known dimensions of either); ValueError if they differ."""
        other = as_shape(other)
        self.assert_is_compatible_with(other)
        return TensorShape(a if a is not None else b for a, b in zip(tuple.__iter__(self), tuple.__iter__(other)))

    def concatenate(self, other):
        return TensorShape(self.as_list() + as_shape(other).as_list())


class TF1TensorShape(TensorShape):
    """``get_shape()``'s TensorShape: an unknown dimension indexes and
    iterates as ``Dimension(None)``, a known one as a :class:`Dimension`."""

    __slots__ = ()
    _tf1_unknown = True

    def __iter__(self):
        return iter([Dimension(d) for d in tuple.__iter__(self)])


def as_shape(shape):
    """``shape`` (a TensorShape, tuple or list of ints, None and Dimensions) as a TensorShape."""
    if isinstance(shape, TensorShape):
        return shape
    return TensorShape(dimension_value(d) for d in shape)
