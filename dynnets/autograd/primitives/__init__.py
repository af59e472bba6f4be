"""The table of primitives: the only home of forward rules, shape rules and gradients.

A package split by domain (as JAX splits its rules and chainer its
``functions/``): :mod:`.core` holds :class:`Primitive`, :func:`defprim`,
:data:`PRIMITIVES`, :class:`Aval`, the errors and the shape/dtype helpers;
:mod:`.elementwise`, :mod:`.reduce`, :mod:`.shape`, :mod:`.index`, :mod:`.array`,
:mod:`.linalg`, :mod:`.nn`, :mod:`.cells`, :mod:`.tree`, :mod:`.seq`, :mod:`.random`
and the others below declare the primitives. Importing this package
imports them all, so :data:`PRIMITIVES` is complete, and
``grep -rn "vjp=" dynnets`` lists every gradient in the project.
"""
from __future__ import annotations

from ..gradtypes import MatmulT, OuterSum, RowSparse  # noqa: F401  (their home is gradtypes)
from .array import *  # noqa: F401,F403
from .cells import *  # noqa: F401,F403
from .core import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .random import *  # noqa: F401,F403
from .seq import *  # noqa: F401,F403
from .select import *  # noqa: F401,F403
from .tree import *  # noqa: F401,F403
from .scatter import *  # noqa: F401,F403
from .call import *  # noqa: F401,F403
from .norm import *  # noqa: F401,F403  (issue 25)
from .conv import *  # noqa: F401,F403  (issue 25)
from .attention import *  # noqa: F401,F403  (issue 25)
from .ragged import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403  (issue 24: split from array)
from .shape import *  # noqa: F401,F403  (issue 24: split from array)
from .index import *  # noqa: F401,F403  (issue 24: split from array)
from .fused import *  # noqa: F401,F403  (issue 25 §3)
