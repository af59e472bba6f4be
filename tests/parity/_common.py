"""The parity suite's one comparison: dynnets against PyTorch.

:func:`check` runs a computation written once for dynnets (``dn_fn``, on
Tensors or on static-graph Values) and once for torch (``torch_fn``) on the
same numpy inputs, and compares forward values, output dtypes and the
gradients of ``sum_k sum(out_k * cot_k)`` (random cotangents) with respect to
the inputs listed in ``diff``. ``mode`` selects how dynnets runs:

* ``"eager"``: ``dynnets.Tensor`` leaves and ``backward``;
* ``"static"``: placeholders of the inputs' shapes, ``static.gradients`` and
  ``Session.run`` (three runs, so the generated tier-2 plan runs too), with the
  declared shapes and dtypes of every output and gradient checked against
  what the run returns;
* ``"static-unknown"``: the same with every placeholder dimension ``None``
  (or those ``unknown`` selects);
* ``"static-fused"``: ``"static"`` with fusion and the memory plan on at any
  array size (by default they start at a few thousand elements).

The inputs reach dynnets in the memory layout they are given (see
:func:`layout`); torch always gets contiguous copies, so any difference comes
from dynnets.
"""
from __future__ import annotations

import numpy as np
import torch

import dynnets as dn
import dynnets.static as ds

torch.set_num_threads(1)

FLOATS = (np.float64, np.float32)
MODES = ("eager", "static", "static-unknown")
LAYOUTS = ("contiguous", "transposed", "strided", "reversed", "broadcast")

_TORCH_DT = {np.dtype(np.float64): torch.float64, np.dtype(np.float32): torch.float32,
             np.dtype(np.float16): torch.float16, np.dtype(np.int64): torch.int64,
             np.dtype(np.int32): torch.int32, np.dtype(np.int16): torch.int16, np.dtype(np.int8): torch.int8,
             np.dtype(np.uint8): torch.uint8, np.dtype(np.bool_): torch.bool}
_NUMPY_DT = {v: k for k, v in _TORCH_DT.items()}


def tol(dtype):
    """(rtol, atol) for comparing results of ``dtype``: float64 to about 1e-10
    relative (reordered sums differ in the last bits), float32 to a few hundred
    ulps (a fused kernel and torch evaluate exp/tanh and sum in different orders)."""
    if np.dtype(dtype) == np.float64:
        return 1e-10, 1e-12
    return 2e-5, 2e-6


def to_torch(a, requires_grad=False):
    t = torch.tensor(np.array(a, order="C"))   # (ascontiguousarray makes 0-d arrays 1-d)
    if requires_grad:
        t.requires_grad_(True)
    return t


def torch_dtype(dtype):
    return _TORCH_DT[np.dtype(dtype)]


def numpy_dtype(tdtype):
    return _NUMPY_DT[tdtype]


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------

def draw(rng, shape, dtype=np.float64, domain="real"):
    """Random values of ``shape`` in ``domain``: 'real' (standard normal),
    'pos' (0.5..2), 'unit' (0.1..0.9), 'nonzero' (|x| in 0.5..2, random sign),
    'int' (integers -5..5, of ``dtype``)."""
    shape = tuple(shape)
    if domain == "real":
        a = rng.standard_normal(shape)
    elif domain == "pos":
        a = rng.uniform(0.5, 2.0, shape)
    elif domain == "unit":
        a = rng.uniform(0.1, 0.9, shape)
    elif domain == "nonzero":
        a = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif domain == "int":
        return rng.integers(-5, 6, shape).astype(dtype)
    else:
        raise ValueError(domain)
    return np.asarray(a, dtype=dtype)


def layout(a, kind):
    """``a``'s values (for 'broadcast': new values) in memory layout ``kind``:
    'contiguous'; 'transposed' (Fortran order: the transpose of a C array;
    'strided' where that would be C-contiguous too);
    'strided' (every second element of a larger array along each axis);
    'reversed' (negative strides along axis 0); 'broadcast' (a read-only
    zero-stride view, along the first and last axes, of ``a``'s first
    elements: the values then repeat along those axes, and so tie)."""
    a = np.asarray(a)
    if kind == "contiguous" or a.ndim == 0:
        return a
    if kind == "transposed":
        if a.ndim < 2:
            return layout(a, "strided")
        out = np.ascontiguousarray(a.T).T
        # with size-1 axes a Fortran-order array can be C-contiguous as well
        return layout(a, "strided") if out.flags.c_contiguous else out
    if kind == "strided":
        big = np.zeros(tuple(2 * d for d in a.shape), dtype=a.dtype)
        sl = tuple(slice(None, None, 2) for _ in a.shape)
        big[sl] = a
        return big[sl]
    if kind == "reversed":
        return np.ascontiguousarray(a[::-1])[::-1]
    if kind == "broadcast":
        if a.size == 0:
            return a
        small_shape = tuple(1 if (k == 0 and d > 1) or (k == a.ndim - 1 and d > 1) else d
                            for k, d in enumerate(a.shape))
        small = a[tuple(slice(0, s) for s in small_shape)]
        return np.broadcast_to(small, a.shape)
    raise ValueError(kind)


# --------------------------------------------------------------------------
# running and comparing
# --------------------------------------------------------------------------

def _tuple(out):
    if isinstance(out, (tuple, list)):
        return tuple(out)
    return (out,)


def _is_float(dtype):
    return np.dtype(dtype).kind == "f"


def run_torch(torch_fn, inputs, diff, cots=None, seed=0):
    """(outputs, gradients, cotangents) of ``torch_fn``; gradients are None
    where torch has none for an input; ``cots`` are drawn when not given."""
    ts = [to_torch(a, requires_grad=(k in diff)) for k, a in enumerate(inputs)]
    outs = _tuple(torch_fn(*ts))
    if cots is None:
        rng = np.random.default_rng(seed + 1000)
        cots = [rng.standard_normal(tuple(o.shape)).astype(numpy_dtype(o.dtype))
                if o.dtype.is_floating_point else None for o in outs]
    grads = [None] * len(diff)
    pairs = [(o, c) for o, c in zip(outs, cots) if c is not None and o.requires_grad]
    if diff and pairs:
        g = torch.autograd.grad([o for o, _ in pairs], [ts[k] for k in diff],
                                grad_outputs=[torch.tensor(c) for _, c in pairs], allow_unused=True)
        grads = [None if x is None else x.detach().numpy() for x in g]
    return [o.detach().numpy() for o in outs], grads, cots


def _loss(outs, cots):
    terms = [dn.sum(o * c) for o, c in zip(outs, cots) if c is not None]
    loss = terms[0]
    for t in terms[1:]:
        loss = loss + t
    return loss


def run_eager(dn_fn, inputs, diff, cots):
    ts = [dn.tensor(a, requires_grad=(k in diff)) for k, a in enumerate(inputs)]
    outs = _tuple(dn_fn(*ts))
    for o in outs:
        assert isinstance(o, dn.Tensor), f"dynnets returned {type(o).__name__}, not a Tensor"
    grads = [None] * len(diff)
    if diff and any(c is not None for c in cots):
        _loss(outs, cots).backward()
        grads = [None if ts[k].grad is None else ts[k].grad.data for k in diff]
    return [o.data for o in outs], grads


def _ph_shape(shape, unknown):
    if unknown is None:
        return tuple(shape)
    if unknown is True:
        return (None,) * len(shape)
    return tuple(None if u else d for d, u in zip(shape, unknown))


def run_static(dn_fn, inputs, diff, cots, unknown=None, session_kw=None, runs=3):
    """Build the graph on placeholders (``unknown``: None for known shapes,
    True for all dimensions unknown, or one sequence of flags per input), run
    it ``runs`` times and check every run gives the same arrays, and that the
    declared shapes and dtypes fit the results."""
    g = ds.Graph()
    with g.as_default():
        per = unknown if isinstance(unknown, (list, tuple)) else [unknown] * len(inputs)
        phs = [ds.placeholder(np.asarray(a).dtype, _ph_shape(np.shape(a), u), name=f"in{k}")
               for k, (a, u) in enumerate(zip(inputs, per))]
        outs = _tuple(dn_fn(*phs))
        for o in outs:
            assert isinstance(o, ds.Value), f"dynnets returned {type(o).__name__}, not a static Value"
        grads = []
        if diff and any(c is not None for c in cots):
            grads = ds.gradients(_loss(outs, cots), [phs[k] for k in diff])
        fetch = list(outs) + [x for x in grads if x is not None]
        feed = {p: a for p, a in zip(phs, inputs)}
        with ds.Session(g, **(session_kw or {})) as sess:
            results = [sess.run(fetch, feed) for _ in range(runs)]
    for r in results[1:]:
        for a, b in zip(results[0], r):
            np.testing.assert_array_equal(a, b, err_msg="static: a later run of the same plan differs")
    res = [np.asarray(x) for x in results[0]]
    known = unknown is None
    for v, r in zip(fetch, res):
        declared = tuple(v.shape)
        assert len(declared) == r.ndim and all(d is None or d == s for d, s in zip(declared, r.shape)), \
            f"static: declared shape {declared}, the run returned {r.shape}"
        if known:
            assert None not in declared, f"static: declared shape {declared} has unknown dimensions " \
                                         f"although every input's shape is known"
        assert np.dtype(v.dtype) == r.dtype, f"static: declared dtype {v.dtype}, the run returned {r.dtype}"
    out_vals = res[:len(outs)]
    it = iter(res[len(outs):])
    grad_vals = [None if x is None else next(it) for x in grads] if grads else [None] * len(diff)
    return out_vals, grad_vals


STATIC_FUSED = dict(fuse_min_size=0, memory_min_size=0)


def run_dn(dn_fn, inputs, diff, cots, mode, unknown=True):
    if mode == "eager":
        return run_eager(dn_fn, inputs, diff, cots)
    if mode == "static":
        return run_static(dn_fn, inputs, diff, cots)
    if mode == "static-unknown":
        return run_static(dn_fn, inputs, diff, cots, unknown=unknown)
    if mode == "static-fused":
        return run_static(dn_fn, inputs, diff, cots, session_kw=STATIC_FUSED)
    raise ValueError(mode)


def assert_close(got, want, dtype, what, rtol=None, atol=None):
    r, a = tol(dtype)
    rtol = r if rtol is None else rtol
    atol = a if atol is None else atol
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, torch {want.shape}"
    scale = float(np.max(np.abs(want[np.isfinite(want)]))) if np.isfinite(want).any() else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(1.0, scale), err_msg=what)


def check(dn_fn, torch_fn, inputs, diff=(), mode="eager", unknown=True, seed=0, rtol=None, atol=None,
          grad_rtol=None, grad_atol=None, check_dtype=True):
    """Compare dynnets with torch on ``inputs`` (numpy arrays); see the module
    docstring. ``diff`` lists the input positions to differentiate."""
    diff = tuple(diff)
    want, want_g, cots = run_torch(torch_fn, inputs, diff, seed=seed)
    cots = [None if c is None else c for c in cots]
    got, got_g = run_dn(dn_fn, inputs, diff, cots, mode, unknown=unknown)
    assert len(got) == len(want), f"{len(got)} outputs, torch {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if check_dtype:
            assert np.asarray(g).dtype == w.dtype, f"output {k}: dtype {np.asarray(g).dtype}, torch {w.dtype}"
        assert_close(g, w, w.dtype if _is_float(w.dtype) else np.float64, f"output {k} ({mode})", rtol, atol)
    for k, (g, w) in zip(diff, zip(got_g, want_g)):
        a = np.asarray(inputs[k])
        if w is None and g is None:
            continue
        w = np.zeros(a.shape, a.dtype) if w is None else w
        g = np.zeros(a.shape, a.dtype) if g is None else np.asarray(g)
        assert g.dtype == a.dtype, f"gradient of input {k}: dtype {g.dtype}, the input's {a.dtype}"
        assert_close(g, w, a.dtype, f"gradient of input {k} ({mode})",
                     grad_rtol if grad_rtol is not None else rtol, grad_atol if grad_atol is not None else atol)
