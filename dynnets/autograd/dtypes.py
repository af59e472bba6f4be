"""The kernels' input convention as plain-Python predicates: the Numba kernels
are compiled for C-contiguous float32 or float64 arrays of one dtype, and
the primitives and gradient types check that before they call one."""
from __future__ import annotations

import numpy as np

__all__ = ["F32", "F64", "is_kernel_float", "same_float"]


F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def is_kernel_float(dt):
    """The float dtypes the Numba kernels are compiled for."""
    return dt == F32 or dt == F64


def same_float(*arrays):
    """True when all arrays are C-contiguous numpy arrays of one float dtype
    (float32 or float64), the kernels' input convention."""
    dt = arrays[0].dtype
    if dt != F32 and dt != F64:           # dtype objects: comparing with np.float32 converts it each time
        return False
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != dt or not a.flags.c_contiguous:
            return False
    return True
