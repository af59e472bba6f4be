"""Elementwise primitives: arithmetic, transcendental functions, clip, where,
astype; with ``scalar=`` templates where the static compiler fuses them."""
from __future__ import annotations

import numpy as np

from .core import (BATCH_ELEMENTWISE, Aval, DTypeError, NativeUnsupported, PromotionNeeded, ShapeError, broadcast_shapes, check_promotion,
                   defprim, dtype_of, result_type, same_shape, shape_of, ufunc_dtype, unbroadcast)

__all__ = ["add_p", "sub_p", "mul_p", "div_p", "pow_p", "maximum_p", "minimum_p", "neg_p", "exp_p", "log_p", "tanh_p", "sigmoid_p", "relu_p", "sqrt_p", "abs_p", "clip_p", "where_p", "astype_p", "copy_p",
           "sin_p", "cos_p", "sign_p",
           "less_p", "less_equal_p", "greater_p", "greater_equal_p", "equal_p", "not_equal_p"]

def _unary_shape(name, ufunc=None, float_only=True):
    def rule(x):
        if float_only and dtype_of(x).kind != "f":
            if dtype_of(x).kind in "biu":
                # torch computes an integer input in float32 (numpy: float64); the ops cast it
                raise PromotionNeeded(f"{name}: expected a floating-point input, got dtype {dtype_of(x)}; PyTorch "
                                      f"computes it in float32 (the dynnets ops cast it; bound directly: cast "
                                      f"it first, x.float())")
            raise DTypeError(f"{name}: expected a floating-point input, got dtype {dtype_of(x)}")
        return Aval(same_shape(x.shape), dtype_of(x) if ufunc is None else ufunc_dtype(name, ufunc, x))
    rule.__name__ = f"{name}_shape"
    return rule


def _binary_shape(name, ufunc, int_to_float=False):
    """numpy's broadcasting and result dtype, where that is PyTorch's: mixed
    dtypes that the two promote differently (int64 * 1.5, int64 + float32,
    int / int, float32 + a 0-d float64) raise ``PromotionNeeded``, which the
    public ops answer by casting the operands (the implementation stays the
    bare ufunc: no cost for operands of one dtype)."""
    def rule(x, y):
        shape = broadcast_shapes(name, x.shape, y.shape, names=["x", "y"])
        dt = ufunc_dtype(name, ufunc, x, y)
        if dtype_of(x) is not dtype_of(y) or int_to_float:
            check_promotion(name, dt, x, y, int_to_float=int_to_float)
        return Aval(shape, dt)
    rule.__name__ = f"{name}_shape"
    return rule




def _like(g, x):
    """Gradient ``g`` summed down to the shape of input ``x`` (an array or a
    Python scalar): ``unbroadcast(g, shape_of(x))`` with the equal-shape case
    and the shape lookup inline (the add/sub VJPs run once per edge)."""
    try:
        shape = x.shape
    except AttributeError:
        shape = np.shape(x)
    if g.shape == shape:
        return g
    return unbroadcast(g, shape)


_ONE = {}


def _one_minus(x):
    """``1 - x``, the 1 a 0-d array of ``x``'s dtype (cached per dtype): numpy
    converts a Python int operand for ~0.3 us more (measured on a (1, 150)
    float32 array); the result and its dtype are the same."""
    dt = x.dtype
    one = _ONE.get(dt)
    if one is None:
        one = np.ones((), dt)
        one.flags.writeable = False
        _ONE[dt] = one
    return one - x


add_p = defprim(
    "add", np.add, _binary_shape("add", np.add),
    vjp=(lambda g, ins, out: _like(g, ins[0]),
         lambda g, ins, out: _like(g, ins[1])),
    scalar="({0} + {1})", vjp_reads=((), ()), native="({0} + {1})", native_vjp=("{g}", "{g}"),
    batch=BATCH_ELEMENTWISE)

def _sub_shape(x, y, _rule=_binary_shape("sub", np.subtract)):
    # numpy subtracts a bool array from a number (True - 1 = 0); torch and TF1
    # refuse any bool tensor operand, as here
    for n, a in (("x", x), ("y", y)):
        d = getattr(a, "dtype", a)          # (a Python number's aval has the number as its dtype)
        if isinstance(d, bool) or (isinstance(d, np.dtype) and d.kind == "b"):
            raise DTypeError(f"sub: {n} has dtype bool; subtraction with a bool tensor is not supported, as in "
                             f"torch (to invert a mask use ~ or logical_not; else cast it first, x.long())")
    return _rule(x, y)


sub_p = defprim(
    "sub", np.subtract, _sub_shape,
    vjp=(lambda g, ins, out: _like(g, ins[0]),
         lambda g, ins, out: _like(-g, ins[1])),
    scalar="({0} - {1})", vjp_reads=((), ()), native="({0} - {1})", native_vjp=("{g}", "(-{g})"),
    batch=BATCH_ELEMENTWISE)

mul_p = defprim(
    "mul", np.multiply, _binary_shape("mul", np.multiply),
    vjp=(lambda g, ins, out: unbroadcast(g * ins[1], shape_of(ins[0])),
         lambda g, ins, out: unbroadcast(g * ins[0], shape_of(ins[1]))),
    scalar="({0} * {1})", vjp_reads=((1,), (0,)), native="({0} * {1})",
    native_vjp=("({g} * {x1})", "({g} * {x0})"),
    batch=BATCH_ELEMENTWISE)

div_p = defprim(
    "div", np.true_divide, _binary_shape("div", np.true_divide, int_to_float=True),
    vjp=(lambda g, ins, out: unbroadcast(g / ins[1], shape_of(ins[0])),
         lambda g, ins, out: unbroadcast(-g * out / ins[1], shape_of(ins[1]))),
    scalar="({0} / {1})", vjp_reads=((1,), (1, "out")), native="({0} / {1})",
    native_vjp=("({g} / {x1})", "(-{g} * {out} / {x1})"),
    batch=BATCH_ELEMENTWISE)


def _pow_vjp_x(g, ins, out):
    x, y = ins
    # d/dx x**y = y x**(y-1), and 0 wherever y == 0, also at x == 0 where the
    # product is 0 * inf (PyTorch's pow_backward)
    if type(y) is float or type(y) is int:
        if y == 0:
            return np.zeros(shape_of(x), dtype=g.dtype)
        return unbroadcast(g * y * np.power(x, y - 1), shape_of(x))
    with np.errstate(divide="ignore", invalid="ignore"):
        gx = g * y * np.power(x, y - 1)
    return unbroadcast(np.where(y == 0, 0, gx), shape_of(x))


def _pow_vjp_y(g, ins, out):
    x, y = ins
    # d/dy x**y = x**y log(x) in g's dtype (np.log of a Python base would be a
    # float64 scalar, which promotes); at x == 0 it is 0 for y >= 0 and
    # -inf * g for y < 0, NaN for x < 0, as PyTorch's pow_backward_exponent
    xa = np.asarray(x, dtype=g.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        gy = g * out * np.log(xa)
    return unbroadcast(np.where((xa == 0) & (np.asarray(y) >= 0), 0, gy), shape_of(y))


def _pow_fmt(gen, y, dt):
    """``x ** y`` for a weak exponent ``y`` as numpy computes it (its fast
    paths: a square for 2, a square root for 0.5, ...), as a native scalar form."""
    D = gen.dtname(dt)
    if y == 2:
        return lambda x: f"({x} * {x})"
    if y == 1:
        return lambda x: x
    if y == 0.5:
        return lambda x: f"{D}(math.sqrt({x}))"
    if y == -1:
        return lambda x: f"({gen.lit(1, dt)} / {x})"
    if y == 0:
        return lambda x: gen.lit(1, dt)
    return lambda x: f"{D}({x} ** {gen.lit(y, dt)})"


def _pow_native(gen, ins, attrs):
    o = ins.outs[0]
    dt = gen.out_dtype(o)
    xs, ys = ins.args
    if ys not in gen.weak:
        raise NativeUnsupported("pow with an array exponent")
    gen.ew(o, gen.shape[o], [gen.op(xs, dt, inline=True)], _pow_fmt(gen, gen.weak[ys], dt), dt)


def _pow_native_vjp_x(gen, ins, attrs):
    g, xs, ys = ins.args[0], ins.args[1], ins.args[2]
    o = ins.outs[0]
    dt = gen.out_dtype(o)
    if ys not in gen.weak:
        raise NativeUnsupported("the gradient of pow with an array exponent")
    y = gen.weak[ys]
    if y == 0:
        gen.ew(o, gen.shape[o], [(gen.lit(0, dt), ())], gen.same, dt)
        return
    p = _pow_fmt(gen, y - 1, dt)
    yl = gen.lit(y, dt)
    gen.ew(o, gen.shape[g], [gen.op(g, dt, inline=True), gen.op(xs, dt, inline=True)],
           lambda ge, xe: f"({ge} * {yl} * {p(xe)})", dt, acc=gen.shape[o])


pow_p = defprim(
    "pow", np.power, _binary_shape("pow", np.power),
    vjp=(_pow_vjp_x, _pow_vjp_y), vjp_reads=((0, 1), (0, 1, "out")),
    native=_pow_native, native_vjp=(_pow_native_vjp_x, None),
    batch=BATCH_ELEMENTWISE)


def _select_vjp(g, win, tie, shape):
    # Ties split the gradient evenly (the average of both one-sided derivatives).
    # Multiplying by the bool masks, not by 0.5*mask, keeps g's dtype (float32).
    return unbroadcast(g * win + (g * 0.5) * tie, shape)


# An input "wins" unless it loses or ties: ~(x <= y), not x > y, so that where
# either input is NaN both get the whole gradient, as in PyTorch. The scalar
# forms are numpy's: a NaN in either input wins ({0} != {0} is a NaN test),
# and of two equal values the second is returned (maximum(-0.0, 0.0) is 0.0),
# where Python's and Numba's max and min drop a NaN in the second argument.
maximum_p = defprim(
    "maximum", np.maximum, _binary_shape("maximum", np.maximum),
    vjp=(lambda g, ins, out: _select_vjp(g, ~(ins[0] <= ins[1]), ins[0] == ins[1], shape_of(ins[0])),
         lambda g, ins, out: _select_vjp(g, ~(ins[1] <= ins[0]), ins[0] == ins[1], shape_of(ins[1]))),
    scalar="({0} if {0} > {1} or {0} != {0} else {1})", vjp_reads=((0, 1), (0, 1)),
    native="({0} if {0} > {1} or {0} != {0} else {1})",
    native_vjp=("({g} * ({one} if not ({x0} <= {x1}) else {zero}) + ({g} * {half}) * ({one} if {x0} == {x1} else {zero}))",
                "({g} * ({one} if not ({x1} <= {x0}) else {zero}) + ({g} * {half}) * ({one} if {x0} == {x1} else {zero}))"),
    batch=BATCH_ELEMENTWISE)

minimum_p = defprim(
    "minimum", np.minimum, _binary_shape("minimum", np.minimum),
    vjp=(lambda g, ins, out: _select_vjp(g, ~(ins[0] >= ins[1]), ins[0] == ins[1], shape_of(ins[0])),
         lambda g, ins, out: _select_vjp(g, ~(ins[1] >= ins[0]), ins[0] == ins[1], shape_of(ins[1]))),
    scalar="({0} if {0} < {1} or {0} != {0} else {1})", vjp_reads=((0, 1), (0, 1)),
    native="({0} if {0} < {1} or {0} != {0} else {1})",
    native_vjp=("({g} * ({one} if not ({x0} >= {x1}) else {zero}) + ({g} * {half}) * ({one} if {x0} == {x1} else {zero}))",
                "({g} * ({one} if not ({x1} >= {x0}) else {zero}) + ({g} * {half}) * ({one} if {x0} == {x1} else {zero}))"),
    batch=BATCH_ELEMENTWISE)

neg_p = defprim("neg", np.negative, _unary_shape("neg", np.negative, float_only=False),
                vjp=(lambda g, ins, out: -g,), scalar="(-{0})", vjp_reads=((),),
                native="(-{0})", native_vjp=("(-{g})",),
    batch=BATCH_ELEMENTWISE)

# exp, log, tanh, sigmoid and pow have no scalar= template, so the static
# compiler never fuses them: a Numba kernel evaluates them with scalar libm
# calls where numpy's ufuncs are SIMD-vectorised, and a fused exp(a)*b ran at
# 0.5x numpy's speed at 1024 elements, 0.25x from 4096 on (tanh 12-30x slower
# from 4096 on), measured with ``benchmarks/bench_static.py --only fusion``
# (dynnets.static.passes): below FUSE_MIN_SIZE no fusion runs at all.
exp_p = defprim("exp", np.exp, _unary_shape("exp", np.exp),
                vjp=(lambda g, ins, out: g * out,), vjp_reads=(("out",),),
                native="{D}(math.exp({0}))", native_vjp=("({g} * {out})",),
    batch=BATCH_ELEMENTWISE)

log_p = defprim("log", np.log, _unary_shape("log", np.log),
                vjp=(lambda g, ins, out: g / ins[0],), vjp_reads=((0,),),
                native="{D}(math.log({0}))", native_vjp=("({g} / {x0})",),
    batch=BATCH_ELEMENTWISE)

tanh_p = defprim("tanh", np.tanh, _unary_shape("tanh", np.tanh),
                 vjp=(lambda g, ins, out: g * _one_minus(out * out),), vjp_reads=(("out",),),
                 native="{D}(math.tanh({0}))", native_vjp=("({g} * ({one} - {out} * {out}))",),
    batch=BATCH_ELEMENTWISE)


# sin and cos, like exp and tanh, have no scalar= template: numpy's ufuncs are
# SIMD-vectorised where a fused Numba kernel would call scalar libm
sin_p = defprim("sin", np.sin, _unary_shape("sin", np.sin),
                vjp=(lambda g, ins, out: g * np.cos(ins[0]),), vjp_reads=((0,),),
                batch=BATCH_ELEMENTWISE)

cos_p = defprim("cos", np.cos, _unary_shape("cos", np.cos),
                vjp=(lambda g, ins, out: -g * np.sin(ins[0]),), vjp_reads=((0,),),
                batch=BATCH_ELEMENTWISE)


# sign's derivative is 0 where it exists (torch's and TF1's gradient: zeros); numpy's sign keeps NaN, as torch
sign_p = defprim("sign", np.sign, _unary_shape("sign", np.sign, float_only=False),
                 vjp=(lambda g, ins, out: np.zeros_like(g),), vjp_reads=((),),
                 batch=BATCH_ELEMENTWISE)


def _sigmoid(x):
    """Numerically stable logistic function."""
    # exp of a non-positive argument never overflows
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(np.result_type(x), copy=False)


sigmoid_p = defprim("sigmoid", _sigmoid, _unary_shape("sigmoid"),
                    vjp=(lambda g, ins, out: g * out * _one_minus(out),), vjp_reads=(("out",),),
                    # _sigmoid's scalar form: exp of a non-positive argument never overflows
                    native=("({one} / ({one} + {D}(math.exp(-abs({0})))) if {0} >= {zero} else "
                            "{D}(math.exp(-abs({0}))) / ({one} + {D}(math.exp(-abs({0})))))"),
                    native_vjp=("({g} * {out} * ({one} - {out}))",),
    batch=BATCH_ELEMENTWISE)


def _relu(x):
    return np.maximum(x, 0)


# ~(x <= 0), not x > 0: the gradient passes at NaN, as PyTorch's threshold_backward;
# the scalar form is np.maximum(x, 0)'s (NaN stays NaN, -0.0 becomes 0.0)
def _relu_shape(x):
    # integers too, as torch.relu (which keeps their dtype); not bool, which torch refuses
    if dtype_of(x).kind not in "fiu":
        raise DTypeError(f"relu: expected a real numeric input, got dtype {dtype_of(x)}")
    return Aval(same_shape(x.shape), dtype_of(x))


relu_p = defprim("relu", _relu, _relu_shape,
                 vjp=(lambda g, ins, out: g * ~(ins[0] <= 0),), scalar="({0} if {0} > 0.0 or {0} != {0} else 0.0)",
                 vjp_reads=((0,),), native="({0} if {0} > {zero} or {0} != {0} else {zero})",
                 native_vjp=("({g} * ({one} if not ({x0} <= {zero}) else {zero}))",),
    batch=BATCH_ELEMENTWISE)

sqrt_p = defprim("sqrt", np.sqrt, _unary_shape("sqrt", np.sqrt),
                 vjp=(lambda g, ins, out: g / (2 * out),), scalar="math.sqrt({0})", vjp_reads=(("out",),),
                 native="{D}(math.sqrt({0}))", native_vjp=("({g} / ({two} * {out}))",),
    batch=BATCH_ELEMENTWISE)

def _abs_vjp(g, ins, out):
    # sgn(x): 0 at NaN, as PyTorch's abs backward (np.sign gives NaN there, and g * NaN
    # spread it); two comparisons instead of np.sign cost ~1.3x on (512, 300) float64
    x = ins[0]
    return g * (np.greater(x, 0).astype(g.dtype) - np.less(x, 0))


abs_p = defprim("abs", np.abs, _unary_shape("abs", np.abs, float_only=False),
                vjp=(_abs_vjp,), scalar="abs({0})", vjp_reads=((0,),), native="abs({0})",
                # sgn: 0 at 0 and at NaN, as _abs_vjp (PyTorch's)
                native_vjp=("({g} * ({one} if {x0} > {zero} else (-{one} if {x0} < {zero} else {zero})))",),
    batch=BATCH_ELEMENTWISE)


def _clip(x, lo=None, hi=None):
    return np.clip(x, lo, hi)


def _clip_shape(x, lo=None, hi=None):
    if dtype_of(x).kind not in "iuf":
        raise DTypeError(f"clip: expected a real numeric input, got dtype {dtype_of(x)}")
    for nm, v in (("lo", lo), ("hi", hi)):
        if v is not None and (not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool)):
            raise DTypeError(f"clip: {nm} must be a real number or None, got {v!r}")
    if lo is not None and hi is not None and lo > hi:
        raise ShapeError(f"clip: lo={lo} is greater than hi={hi}")
    dt = dtype_of(x)
    if lo is not None:
        dt = ufunc_dtype("clip", np.maximum, Aval((), dt), Aval((), lo))
    if hi is not None:
        dt = ufunc_dtype("clip", np.minimum, Aval((), dt), Aval((), hi))
    bounds = [Aval((), v) for v in (lo, hi) if v is not None]
    # torch.clamp(int64, -0.5, 2.5) is float32 (numpy: float64); a numpy
    # scalar bound counts as a number there (numpy: a float64 array)
    check_promotion("clip", dt, x,
                    *[Aval((), b.dtype.item()) if isinstance(b.dtype, np.generic) else b for b in bounds],
                    names=("x", "lo", "hi") if lo is not None else ("x", "hi"))
    return Aval(same_shape(x.shape), dt)


def _clip_vjp(g, ins, out, lo=None, hi=None):
    x = ins[0]
    m = np.ones(x.shape, dtype=bool)
    if lo is not None:
        m &= x >= lo
    if hi is not None:
        m &= x <= hi
    # where, not g * m: a nan or inf upstream gradient stays out of the clamped
    # elements (torch gives 0 there; nan * 0 is nan)
    return np.where(m, g, np.zeros((), np.result_type(g)))


clip_p = defprim("clip", _clip, _clip_shape, vjp=(_clip_vjp,), vjp_reads=((0,),),
    batch=BATCH_ELEMENTWISE)


def _where_shape(c, x, y):
    if dtype_of(c).kind != "b":
        raise ShapeError(f"where: condition must be boolean, got dtype {dtype_of(c)}")
    dt = result_type(x.dtype, y.dtype)
    if dtype_of(x) is not dtype_of(y):
        check_promotion("where", dt, x, y)
    return Aval(broadcast_shapes("where", c.shape, x.shape, y.shape, names=["condition", "x", "y"]), dt)


where_p = defprim(
    "where", np.where, _where_shape,
    vjp=(None,
         lambda g, ins, out: unbroadcast(np.where(ins[0], g, 0).astype(g.dtype, copy=False), shape_of(ins[1])),
         lambda g, ins, out: unbroadcast(np.where(ins[0], 0, g).astype(g.dtype, copy=False), shape_of(ins[2]))),
    nondiff_args=(0,), vjp_reads=((), (0,), (0,)),
    batch=BATCH_ELEMENTWISE)


def _astype(x, dtype):
    return np.asarray(x).astype(dtype, copy=False)


astype_p = defprim("astype", _astype, lambda x, dtype: Aval(same_shape(x.shape), np.dtype(dtype)),
                   vjp=(lambda g, ins, out, dtype: g.astype(np.asarray(ins[0]).dtype),), vjp_reads=((),),
                   native=lambda gen, ins, attrs: gen.astype_to(ins.outs[0], ins.args[0]),
                   native_vjp=(lambda gen, ins, attrs: gen.astype_to(ins.outs[0], ins.args[0]),),
    batch=BATCH_ELEMENTWISE)


def _copy(x):
    """A C-contiguous copy of ``x`` that shares no memory with it
    (``Tensor.clone``, and ``Tensor.contiguous`` of a strided tensor)."""
    return np.array(x, copy=True, order="C")


copy_p = defprim("copy", _copy, lambda x: Aval(same_shape(x.shape), dtype_of(x)), vjp=(lambda g, ins, out: g,),
                 vjp_reads=((),), native="{0}", native_vjp=("{g}",))


# --------------------------------------------------------------------------
# comparisons: boolean results, no gradient (eager and static alike)
# --------------------------------------------------------------------------


def _comparison(name, ufunc, op):
    def impl(x, y):
        return np.asarray(ufunc(x, y))         # an array also for two scalars: a tensor's data is an array

    def rule(x, y):
        shape = broadcast_shapes(name, same_shape(x.shape), same_shape(y.shape), names=["x", "y"])
        return Aval(shape, np.dtype(bool))
    impl.__name__ = name
    rule.__name__ = f"{name}_shape"
    # the native tier compares scalars (a loop's condition)
    return defprim(name, impl, rule, differentiable=False, batch=BATCH_ELEMENTWISE, native=f"{{0}} {op} {{1}}")


less_p = _comparison("less", np.less, "<")
less_equal_p = _comparison("less_equal", np.less_equal, "<=")
greater_p = _comparison("greater", np.greater, ">")
greater_equal_p = _comparison("greater_equal", np.greater_equal, ">=")
equal_p = _comparison("equal", np.equal, "==")
not_equal_p = _comparison("not_equal", np.not_equal, "!=")


# --------------------------------------------------------------------------
# rounding, remainders and rounded quotients (PyTorch's round, remainder,
# fmod, floor_divide and div(rounding_mode=); issue 22)
# --------------------------------------------------------------------------

class IntegerDivisionByZero(ZeroDivisionError, RuntimeError):
    """An integer division or remainder by zero: a ZeroDivisionError, and a
    RuntimeError as torch's (``RuntimeError: ZeroDivisionError``); numpy
    would give 0 with a warning."""


def _round(x, decimals=0):
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return x.copy()
    if decimals == 0:
        return np.rint(x)                   # half to even, as torch's nearbyint
    # torch's round(decimals=): nearbyint(x * 10^d) / 10^d, or for d < 0
    # nearbyint(x / 10^-d) * 10^-d, the power in x's dtype (numpy multiplies by
    # 10^d for d < 0, which differs in the last bit)
    with np.errstate(over="ignore", invalid="ignore"):
        if decimals > 0:
            p = x.dtype.type(10.0 ** decimals)
            return np.rint(x * p) / p
        p = x.dtype.type(10.0 ** -decimals)
        return np.rint(x / p) * p


def _round_shape(x, decimals=0):
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
        raise DTypeError(f"round: decimals must be an integer, got {decimals!r}")
    kind = dtype_of(x).kind
    if kind not in "iuf":
        raise DTypeError(f"round: expected a real numeric input, got dtype {dtype_of(x)}")
    if kind != "f" and decimals != 0:
        raise DTypeError(f"round: decimals={decimals} needs a floating-point input, got dtype {dtype_of(x)} "
                         f"(as torch)")
    return Aval(tuple(x.shape), dtype_of(x))


# d round(x) / dx = 0 almost everywhere: a zero gradient, as torch's (not an error)
round_p = defprim("round", _round, _round_shape,
                  vjp=(lambda g, ins, out, decimals=0: np.zeros_like(g),), vjp_reads=((),),
                  batch=BATCH_ELEMENTWISE)


def _check_int_divisor(op, x, y):
    """Integer operands with a zero divisor raise, as torch's."""
    ya = np.asarray(y)
    if ya.dtype.kind in "iu" and np.asarray(x).dtype.kind in "iu" and not ya.all():
        raise IntegerDivisionByZero(f"{op}: integer division by zero (other holds a 0)")


def _rounded_binary_shape(name, ufunc):
    numpy_rule = _binary_shape(name, ufunc)

    def rule(x, y, **attrs):
        for nm, a in (("input", x), ("other", y)):
            if dtype_of(a).kind not in "iuf":
                raise DTypeError(f"{name}: {nm} must be a real number (integer or floating point), got dtype "
                                 f"{dtype_of(a)}")
        return numpy_rule(x, y)
    rule.__name__ = f"{name}_shape"
    return rule


def _remainder(x, y):
    _check_int_divisor("remainder", x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.remainder(x, y))


def _fmod(x, y):
    _check_int_divisor("fmod", x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.fmod(x, y))


def _quotient(x, y, mode):
    """``x / y`` rounded down (``mode='floor'``, Python's ``//``) or toward
    zero (``'trunc'``, C's integer division), in the operands' dtype."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.floor_divide(x, y)
        if mode == "floor":
            return np.asarray(q)
        if np.result_type(x, y).kind == "f":
            return np.asarray(np.trunc(np.true_divide(x, y)).astype(q.dtype, copy=False))
        # integers: the floor quotient, one up where it was rounded down below zero
        return np.asarray(q + ((q < 0) & (np.remainder(x, y) != 0)))


def _div_rounded(x, y, mode="floor"):
    _check_int_divisor("floor_divide" if mode == "floor" else "div", x, y)
    return _quotient(x, y, mode)


def _remainder_vjp_y(g, ins, out):
    # torch: -grad * x.div(y, rounding_mode='floor')
    return unbroadcast(-g * _quotient(ins[0], ins[1], "floor"), shape_of(ins[1]))


def _fmod_vjp_y(g, ins, out):
    # torch: -grad * x.div(y, rounding_mode='trunc')
    return unbroadcast(-g * _quotient(ins[0], ins[1], "trunc"), shape_of(ins[1]))


# Python's % (the sign of the divisor), as torch.remainder: numpy's remainder
# is the same fmod-based formula as torch's CPU kernel
remainder_p = defprim("remainder", _remainder, _rounded_binary_shape("remainder", np.remainder),
                      vjp=(lambda g, ins, out: _like(g, ins[0]), _remainder_vjp_y), vjp_reads=((), (0, 1)),
                      batch=BATCH_ELEMENTWISE)

# C's fmod (the sign of the dividend), as torch.fmod
fmod_p = defprim("fmod", _fmod, _rounded_binary_shape("fmod", np.fmod),
                 vjp=(lambda g, ins, out: _like(g, ins[0]), _fmod_vjp_y), vjp_reads=((), (0, 1)),
                 batch=BATCH_ELEMENTWISE)


def _div_rounded_shape(x, y, mode="floor"):
    if mode not in ("floor", "trunc"):
        raise ShapeError(f"div: rounding_mode must be 'floor', 'trunc' or None, got {mode!r}")
    return _rounded_binary_shape("div", np.floor_divide)(x, y)


def _zero_grad(g, ins, out, mode="floor", k=0):
    return np.zeros(shape_of(ins[k]), dtype=g.dtype)


# an integer-valued quotient: a zero gradient, as torch's div(rounding_mode=)
# (torch's floor_divide raises "derivative not implemented" instead)
div_rounded_p = defprim("div_rounded", _div_rounded, _div_rounded_shape,
                        vjp=(_zero_grad, lambda g, ins, out, mode="floor": _zero_grad(g, ins, out, k=1)),
                        vjp_reads=((), ()), batch=BATCH_ELEMENTWISE)

__all__ += ["round_p", "remainder_p", "fmod_p", "div_rounded_p", "IntegerDivisionByZero"]


# --------------------------------------------------------------------------
# log1p and expm1 (branch i22-torch-b): softplus, logsigmoid, elu and selu
# need them accurate near 0, where log(1 + x) and exp(x) - 1 lose every digit
# below 1e-16 (softplus(-50) would be 0 instead of 1.9e-22)
# --------------------------------------------------------------------------

log1p_p = defprim("log1p", np.log1p, _unary_shape("log1p", np.log1p),
                  vjp=(lambda g, ins, out: g / (ins[0] + 1),), vjp_reads=((0,),),
                  batch=BATCH_ELEMENTWISE)

expm1_p = defprim("expm1", np.expm1, _unary_shape("expm1", np.expm1),
                  vjp=(lambda g, ins, out: g * (out + 1),), vjp_reads=(("out",),),
                  batch=BATCH_ELEMENTWISE)

__all__ += ["log1p_p", "expm1_p"]
