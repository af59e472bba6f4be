"""Fused encoder-layer ops (issue 25 §3): a product with its bias and
activation, an in-projection split into q, k, v, and a residual with its
post-norm, each one primitive (:mod:`dynnets.autograd.primitives.fused`) so
a packed Transformer layer is 7 dispatches instead of 13."""
from __future__ import annotations

from .. import primitives as P
from ..engine import bind

__all__ = ["linear_act", "linear_split", "add_layer_norm"]


def linear_act(x, weight, bias, activation="relu"):
    """``activation(x @ weight.T + bias)`` as one primitive (``linear_act``):
    ``relu(F.linear(x, weight, bias))`` or ``gelu(...)`` (exact, erf) with one
    dispatch and one temporary.

    Parameters
    ----------
    x : (..., in_features)
    weight : (out_features, in_features)
    bias : (out_features,)
    activation : 'relu' or 'gelu'

    Returns
    -------
    (..., out_features)
    """
    return bind(P.linear_act_p, x, weight, bias, activation=activation)


def linear_split(x, weight, bias, chunks=3):
    """``F.linear(x, weight, bias).chunk(chunks, -1)`` as one primitive
    (``linear_split``), each part C-contiguous: the q, k, v of a packed
    in-projection (torch's ``in_proj_weight`` (3E, E)) without three slices.

    Parameters
    ----------
    x : (..., in_features)
    weight : (chunks * out, in_features)
    bias : (chunks * out,)
    chunks : int

    Returns
    -------
    tuple of ``chunks`` tensors (..., out)
    """
    return bind(P.linear_split_p, x, weight, bias, chunks=int(chunks))


def add_layer_norm(x, residual, weight, bias, eps=1e-5):
    """``F.layer_norm(x + residual, (D,), weight, bias, eps)`` as one
    primitive (``add_layer_norm``): a residual connection and its post-norm
    (torch's ``nn.TransformerEncoderLayer`` with ``norm_first=False``).

    Parameters
    ----------
    x, residual : (..., D), the same shape (no broadcasting)
    weight, bias : (D,)
    eps : float

    Returns
    -------
    (..., D)
    """
    return bind(P.add_layer_norm_p, x, residual, weight, bias, eps=float(eps))

