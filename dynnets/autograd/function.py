"""``Function``: custom autograd functions with a hand-written backward, as
``torch.autograd.Function``.

::

    class Exp(dn.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            (y,) = ctx.saved_tensors
            return grad_output * y

    y = Exp.apply(x)

As in torch: ``forward(ctx, *args)`` runs with gradients off and returns a
tensor or a tuple of tensors; ``backward(ctx, *grad_outputs)`` returns one
gradient (a tensor, or None) per argument of ``forward``, also with
gradients off; ``ctx.save_for_backward(*tensors)`` / ``ctx.saved_tensors``,
``ctx.needs_input_grad`` (one bool per argument), ``ctx.mark_non_differentiable``
(those outputs do not require grad; their gradients reach ``backward`` as
zeros), ``ctx.set_materialize_grads(False)`` (None instead of zeros for
outputs no gradient reached), any attribute set on ``ctx``; torch 2's
``setup_context(ctx, inputs, output)`` with a ``forward`` that takes no ctx.
``forward`` and ``backward`` must be static methods; ``apply`` takes
positional arguments only.

How: one primitive of the table, ``custom_function`` (defined here rather
than in :mod:`dynnets.autograd.primitives` because its attributes are the
user's Python class and context, not an op of the library): its forward is
the class's ``forward``, its joint VJP the class's ``backward``. So
``backward()``, gradient accumulation and the in-place version checks treat
it as any other node. Eager mode only: inside ``dn.autobatch()`` or a static
trace (``dynnets.static.trace``, symbolic inputs) ``apply`` raises an error
naming the Function (its Python ``backward`` cannot be batched or compiled,
and tracing its ``forward`` would silently differentiate the forward's ops
instead). The version check is stricter than torch's: a backward raises
when any input or output of the Function, not only a saved tensor, was
changed in place after the call.
"""
from __future__ import annotations

import numpy as np

from .engine import STATE, CaptureInterpreter, bind, interpreter_stack, no_grad
from .primitives.core import Aval, ShapeError, defprim, unbroadcast
from .tensor import Tensor, wrap_array

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx:
    """The ``ctx`` that ``forward`` and ``backward`` of a :class:`Function`
    share (torch's ``FunctionCtx``): saved tensors, flags, and any attribute
    the forward sets (``ctx.alpha = alpha``)."""

    def __init__(self):
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._saved = ()
        self._non_diff = ()

    def save_for_backward(self, *tensors):
        """Keep ``tensors`` (or None) for ``backward``'s :attr:`saved_tensors`."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of type "
                                f"{type(t).__name__} (set it as an attribute of ctx instead)")
        self._saved = tuple(tensors)

    @property
    def saved_tensors(self):
        """The tensors given to :meth:`save_for_backward`, in order."""
        return self._saved

    def mark_non_differentiable(self, *tensors):
        """Outputs (returned by ``forward``) that get no gradient: they do
        not require grad, and ``backward`` receives zeros for them."""
        self._non_diff = self._non_diff + tuple(tensors)

    def set_materialize_grads(self, value):
        """Whether ``backward`` receives zeros (True, the default) or None
        for the outputs no gradient reached."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors):
        """Not supported: an in-place forward (write to a copy and return it instead)."""
        raise NotImplementedError("ctx.mark_dirty: custom Functions that modify their inputs in place are not "
                                  "supported; compute a new tensor in forward and return it")


def _user_forward(fn, ctx, args):
    """``fn``'s forward on ``args`` with gradients off: (outputs as a tuple, single)."""
    with no_grad():
        if fn.setup_context is not Function.setup_context:
            out = fn.forward(*args)
            fn.setup_context(ctx, tuple(args), out)
        else:
            out = fn.forward(ctx, *args)
    single = not isinstance(out, (tuple, list))
    outs = (out,) if single else tuple(out)
    for k, o in enumerate(outs):
        if not isinstance(o, (Tensor, np.ndarray)):
            raise TypeError(f"{fn.__name__}.forward: output {k} is a {type(o).__name__}; a custom Function "
                            f"returns tensors (a tensor or a tuple of them)")
    return outs, single


def _forward_args(arrays, ctx, spec):
    """The arguments of ``forward``: the tensor inputs (new tensors on the
    arrays, requiring grad where the caller's did) in their places among the
    constant ones."""
    n, consts, tensor_pos = spec
    args = [None] * n
    for i, v in consts:
        args[i] = v
    for i, a in zip(tensor_pos, arrays):
        args[i] = wrap_array(np.asarray(a), requires_grad=bool(ctx.needs_input_grad[i]) and np.asarray(a).dtype.kind == "f")
    return args


def _run(arrays, fn, ctx, spec):
    """Run the forward on ``arrays``; remember which outputs are marked non-differentiable."""
    ctx._saved = ()
    ctx._non_diff = ()
    outs, single = _user_forward(fn, ctx, _forward_args(arrays, ctx, spec))
    marked = {id(t) for t in ctx._non_diff}
    ctx._single = single
    ctx._out_nondiff = tuple(id(o) in marked for o in outs)
    return tuple(np.asarray(o) for o in outs)


def _impl(*arrays, fn, ctx, spec):
    pending = ctx.__dict__.pop("_pending", None)
    if pending is not None and len(pending[0]) == len(arrays) and all(a is b for a, b in zip(pending[0], arrays)):
        return pending[1]
    return _run(arrays, fn, ctx, spec)


def _shape(*inputs, fn, ctx, spec):
    # the outputs' shapes are what forward computes: on concrete inputs (an eager call) the rule runs
    # it once, and _impl then returns that result; on abstract ones (a static graph) there is no forward
    if any(isinstance(a, Aval) and None in tuple(a.shape) for a in inputs):
        raise ShapeError(f"custom_function: {fn.__name__} is a custom autograd.Function, which runs in eager mode "
                         f"only (its forward and backward are Python), not in a static graph")
    # an abstract value of known shape (a numpy scalar seen by check_shapes): the forward on zeros of it
    inputs = tuple(np.zeros(a.shape, a.dtype) if isinstance(a, Aval) else a for a in inputs)
    outs = _run(inputs, fn, ctx, spec)
    ctx._pending = (inputs, outs)
    return tuple(Aval(o.shape, o.dtype) for o in outs)


def _joint_vjp(g, inputs, out, fn, ctx, spec):
    n, _, tensor_pos = spec
    grads_out = []
    for k, (gk, o) in enumerate(zip(g, out)):
        if gk is None:
            gk = np.zeros(np.shape(o), np.asarray(o).dtype) if ctx.materialize_grads else None
        grads_out.append(None if gk is None else wrap_array(np.asarray(gk)))
    with no_grad():
        res = fn.backward(ctx, *grads_out)
    res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
    if len(res) != n and not (len(res) > n and all(r is None for r in res[n:])):
        raise RuntimeError(f"function {fn.__name__}Backward returned an incorrect number of gradients "
                           f"(expected {n}, got {len(res)})")
    grads = []
    for i, a in zip(tensor_pos, inputs):
        r = res[i]
        if r is None or not ctx.needs_input_grad[i]:
            grads.append(None)
            continue
        if not isinstance(r, (Tensor, np.ndarray)) and not np.isscalar(r):
            raise TypeError(f"function {fn.__name__}Backward returned a {type(r).__name__} as the gradient of "
                            f"input {i}; expected a tensor or None")
        r = np.asarray(r)
        shape = np.shape(a)
        if r.shape != shape:
            try:
                r = unbroadcast(np.broadcast_to(r, np.broadcast_shapes(r.shape, shape)), shape)
            except ValueError:
                raise ShapeError(f"function {fn.__name__}Backward returned an invalid gradient at index {i} - got "
                                 f"{list(r.shape)} but expected shape compatible with {list(shape)}") from None
            if r.shape != shape:
                raise ShapeError(f"function {fn.__name__}Backward returned an invalid gradient at index {i} - got "
                                 f"{list(r.shape)} but expected shape compatible with {list(shape)}")
        grads.append(r)
    return grads


def _attr_key(fn, ctx, spec):
    # the input check is cached per (Function, constants), not per call's ctx
    return (fn, spec)


custom_function_p = defprim("custom_function", _impl, _shape, joint_vjp=_joint_vjp, multiple_results=True,
                            attr_key=_attr_key)


class Function:
    """Base class of custom autograd functions (``torch.autograd.Function``);
    see the module docstring. Subclass it with static ``forward`` and
    ``backward`` methods and call ``MyFunction.apply(*args)``."""

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{type(self).__name__}: call {type(self).__name__}.apply(...) (custom Functions are "
                           f"not instantiated, as torch's)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` on ``args`` and, when an input requires grad (and
        grad mode is on), record it so that ``backward`` gives the inputs'
        gradients. Returns what ``forward`` returned (a tensor or a tuple)."""
        if kwargs:
            raise TypeError(f"{cls.__name__}.apply: takes positional arguments only (as torch's), got keyword "
                            f"argument(s) {sorted(kwargs)}")
        for a in args:
            if getattr(type(a), "__dynnets_interpreter__", None) is not None:
                raise RuntimeError(f"{cls.__name__}.apply: a custom autograd.Function cannot be traced into a "
                                   f"static graph (dynnets.static.trace): its backward is Python code; call the "
                                   f"function eagerly, or write it with dynnets ops and no custom backward")
        modes = interpreter_stack()
        if any(getattr(i, "deferred", False) for i in modes):
            raise RuntimeError(f"{cls.__name__}.apply: a custom autograd.Function is not supported inside "
                               f"dn.autobatch() (its Python forward and backward cannot be batched); call it "
                               f"outside the context")
        if any(type(i) is CaptureInterpreter for i in modes):
            raise RuntimeError(f"{cls.__name__}.apply: a custom autograd.Function cannot be traced into a static "
                               f"graph (dynnets.static.trace): its backward is Python code")
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and bool(a.requires_grad) for a in args)
        if not STATE.grad_enabled or not any(ctx.needs_input_grad):
            outs, single = _user_forward(cls, ctx, args)
            outs = tuple(o if isinstance(o, Tensor) else wrap_array(np.asarray(o)) for o in outs)
            return outs[0] if single else outs
        tensor_pos = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        consts = tuple((i, a) for i, a in enumerate(args) if not isinstance(a, Tensor))
        res = bind(custom_function_p, *(args[i] for i in tensor_pos), fn=cls, ctx=ctx,
                   spec=(len(args), consts, tensor_pos))
        res = tuple(t.detach() if nd else t for t, nd in zip(res, ctx._out_nondiff))
        return res[0] if ctx._single else res


def once_differentiable(fn):
    """torch's decorator for a ``backward`` that is not differentiable
    itself: backward always runs with gradients off here, so it returns
    ``fn`` unchanged."""
    return fn
