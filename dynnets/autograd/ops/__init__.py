"""Every public op, once. Each is a thin call of :func:`~dynnets.autograd.engine.bind`
on a primitive from the table; composites (``square``, ``split``, ``dropout``,
``min``...) are written in primitives. The functions work on eager tensors and
on symbolic static-graph values alike, because both go through ``bind``; the
methods and operators of both (``x + y``, ``x.sum()``) are these functions,
declared in :class:`dynnets.autograd.tensor_ops.TensorOps`.

The ops are split by domain, as the primitives are; this package is the one
namespace that holds them all (``from dynnets.autograd import ops`` then
``ops.matmul``), and each op is defined in one module:

=================  ===========================================================
``arguments``      the argument conventions the ops share (torch's ``dim=``
                   beside numpy's ``axis=``, integer and number arguments)
``elementwise``    arithmetic, maths, comparisons, rounding, logical ops,
                   dtype conversions, PyTorch's type promotion (``promoted``)
``array``          shapes, views, joins and splits, basic indexing, ``where``
``indexing``       gathers, scatters, masks, index sets
``reductions``     sums, means, extrema, logical reductions, sorting, scans
``linalg``         matrix products, ``einsum``
``nn``             softmaxes, losses, embedding, dropout, activations
``cells``          the fused recurrent cells (one step)
``seq``            whole sequences, tree levels and ragged batches
``random``         torch's sampling on eager tensors (``bernoulli``,
                   ``normal_``...), from a generator
``fused``          the fused encoder-layer ops (``linear_act``,
                   ``linear_split``, ``add_layer_norm``)
=================  ===========================================================

The package sits below :mod:`~dynnets.autograd.tensor` (whose class body
refers to it), so it never names the Tensor class: a non-differentiable
argument (an index, a mask, a condition) given as a tensor is read through
:func:`~dynnets.autograd.ops.arguments.array_of`. Tensor creation
(``tensor``, ``zeros``...) lives in :mod:`~dynnets.autograd.creation`.
"""
from __future__ import annotations

from .arguments import shape_tuple
from .elementwise import *  # noqa: F401,F403
from .array import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .cells import *  # noqa: F401,F403
from .seq import *  # noqa: F401,F403
from .random import *  # noqa: F401,F403
from .fused import *  # noqa: F401,F403
# the engine's names, importable from here as they always were (``ops.bind``)
from ..engine import bind, bind1, bind2, bind_first  # noqa: F401
from ..values import as_operand, is_interpreted, require_concrete  # noqa: F401
from ...devices import check_device  # noqa: F401

# what ``from dynnets import *`` brings: ``round``, ``all``, ``any`` stay out (they
# would shadow the builtins; ``dynnets.round`` etc. are imported by name), and so do
# the helpers (``promoted``, ``shape_tuple``, ``size``...)
__all__ = [
    "add", "sub", "mul", "div", "pow", "neg", "matmul", "linear", "exp", "log", "tanh", "sigmoid", "relu", "sqrt",
    "abs", "clip", "maximum", "minimum", "where", "square", "sum", "mean", "max", "min", "argmax", "less",
    "less_equal", "greater", "greater_equal", "equal", "not_equal", "reshape", "transpose", "broadcast_to",
    "getitem", "take", "concat", "cat", "stack", "split", "split_rows", "softmax", "log_softmax", "cross_entropy",
    "embedding", "dropout", "lstm_cell", "gru_cell", "tree_lstm_cell", "tree_lstm_leaf", "lstm_seq", "gru_seq",
    "rnn_seq", "tree_lstm_levels", "tree_lstm_levels_packed", "tree_rnn_levels", "childsum_levels",
    "tree_lstm_node", "tree_lstm_leaf_node", "astype", "flatten", "squeeze", "unsqueeze", "permute", "clone",
    "argmin", "MaxMin", "gelu", "leaky_relu", "gather", "masked_fill", "clamp", "clamp_min", "clamp_max", "chunk",
    "array_split", "norm", "einsum", "bmm", "sin", "cos", "sign", "dot", "mm", "std", "var", "eq", "ne", "lt", "le",
    "gt", "ge", "allclose", "numel", "t", "remainder", "fmod", "floor_divide", "narrow", "sort", "argsort", "topk",
    "cumsum", "unbind", "index_select", "SortResult", "Size", "logical_not", "logical_and", "logical_or",
    "logical_xor", "log1p", "expm1", "logsumexp", "prod", "isnan", "isinf", "isfinite", "outer", "addmm", "baddbmm",
    "addbmm", "scatter", "scatter_add", "index_add", "flip", "tril", "triu", "nonzero", "unique", "bincount",
    "ragged_offsets", "pack_sequences", "unpack_sequences", "ragged_attention", "linear_act", "linear_split",
    "add_layer_norm"
]
