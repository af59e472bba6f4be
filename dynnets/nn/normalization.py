"""Normalisation layers: LayerNorm (``torch.nn.modules.normalization``) and
BatchNorm1d (``torch.nn.modules.batchnorm``)."""
from __future__ import annotations

import numpy as np

from . import functional as F
from .module import Module, Parameter, check_device, check_float_input, float_dtype, positive_int

__all__ = ["LayerNorm", "BatchNorm1d"]


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
