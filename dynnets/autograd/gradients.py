"""``torch.autograd.grad``: the gradients of outputs with respect to chosen
inputs, returned rather than accumulated into ``.grad``. It runs the one
reverse sweep (:func:`~dynnets.autograd.backprop.backward`) with the inputs as
its targets, around which it saves and restores their gradients."""
from __future__ import annotations

import numpy as np

from .backprop import backward
from .gradtypes import LAZY_TYPES, densify
from .tensor import NO_DOUBLE_BACKWARD, Tensor, wrap_array

__all__ = ["grad"]


def _tensors(where, what, x):
    seq = (x,) if isinstance(x, Tensor) else tuple(x)
    for i, t in enumerate(seq):
        if not isinstance(t, Tensor):
            raise TypeError(f"{where}: {what}[{i}] must be a tensor, got {type(t).__name__}")
    return seq


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, as
    ``torch.autograd.grad``: sum over outputs of the vector-Jacobian products
    with ``grad_outputs``, returned as a tuple with one tensor per input;
    no ``.grad`` is changed.

    Parameters
    ----------
    outputs : Tensor or sequence of Tensors
    inputs : Tensor or sequence of Tensors
        Leaves or not; each must require grad.
    grad_outputs : None, Tensor or sequence (Tensor, array or None)
        The vector for each output, of its shape; None for a scalar output
        (ones).
    retain_graph : bool or None
        Keep the graph for another backward (default: ``create_graph``).
    create_graph : bool
        True raises NotImplementedError (no double backward here).
    allow_unused : bool or None
        An input the outputs do not depend on is an error unless True
        (then its gradient is None, or zeros with ``materialize_grads``).
    is_grads_batched : bool
        True raises NotImplementedError.
    materialize_grads : bool
        Zeros, not None, for unused inputs (implies ``allow_unused``).

    Returns
    -------
    tuple of Tensor or None
        ``grads[i]`` has ``inputs[i]``'s shape and dtype.
    """
    if create_graph:
        raise NotImplementedError(NO_DOUBLE_BACKWARD.format(op="autograd.grad"))
    if is_grads_batched:
        raise NotImplementedError("autograd.grad: is_grads_batched=True is not supported; loop over the "
                                  "grad_outputs (or use dynnets' autobatch)")
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError("autograd.grad: materialize_grads=True needs allow_unused=True (or None)")
    outs = _tensors("autograd.grad", "outputs", outputs)
    ins = _tensors("autograd.grad", "inputs", inputs)
    if grad_outputs is None:
        gos = (None,) * len(outs)
    else:
        gos = (grad_outputs,) if isinstance(grad_outputs, (Tensor, np.ndarray)) else tuple(grad_outputs)
    if len(gos) != len(outs):
        raise ValueError(f"autograd.grad: grad_outputs has {len(gos)} entries, outputs {len(outs)}")
    for i, t in enumerate(ins):
        if not t.requires_grad:
            raise RuntimeError(f"autograd.grad: inputs[{i}] does not require grad")
    for i, o in enumerate(outs):
        if not o.requires_grad:
            raise RuntimeError(f"autograd.grad: outputs[{i}] does not require grad and does not have a grad_fn")
    keep = create_graph if retain_graph is None else bool(retain_graph)
    saved = [t.raw_grad for t in ins]
    try:
        for t in ins:
            t.raw_grad = None
        for k, (o, go) in enumerate(zip(outs, gos)):
            backward(o, go, keep or k < len(outs) - 1, ins)
        res = []
        for i, t in enumerate(ins):
            g = t.raw_grad
            if g is None:
                if not allow_unused:
                    raise RuntimeError(f"autograd.grad: inputs[{i}] was not used in the graph of the outputs; "
                                       f"pass allow_unused=True if this is the desired behavior")
                res.append(wrap_array(np.zeros_like(t.numpy())) if materialize_grads else None)
                continue
            if type(g) in LAZY_TYPES:
                g = densify(g)
            res.append(wrap_array(np.asarray(g)))
    finally:
        for t, g in zip(ins, saved):
            t.raw_grad = g
    return tuple(res)
