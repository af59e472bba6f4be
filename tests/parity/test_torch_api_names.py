"""The torch names real code calls most, against torch's own signatures.

For each of the ~150 ``torch.*`` functions and ``Tensor`` methods below:
dynnets has it, and it takes torch's arguments by torch's names:

* positional meaning: each parameter dynnets takes positionally has, at its
  position, the name of torch's parameter there in one of torch's overloads
  (``torch.max(input, dim)`` and ``torch.max(input, other)`` are two);
  where both have a default they agree, and dynnets never requires what
  torch lets go;
* keywords: every argument torch takes by keyword, in any overload, is a
  parameter here too (so ``F.cross_entropy(input=, target=)``,
  ``x.sum(dim=, keepdim=)`` or ``torch.cat(tensors=, dim=)`` mean the
  same), except the few listed in ``UNSUPPORTED`` and ``EXCEPTIONS`` with the
  reason: a call that passes them is a TypeError, never a silent difference;
* dynnets' own extra parameters (numpy's ``axis=``, ``rng=``) are
  keyword-only, so no torch call reaches them by position.

torch's signatures come from ``inspect.signature`` where torch's function is
written in Python, else from its operator schemas
(``torch._C._jit_get_schemas_for_operator('aten::<name>')``, the
authoritative argument names of the C++ functions its Python bindings
expose; ``self`` is ``input`` for the ``torch.*`` functions), else from
``DOCUMENTED`` (torch's documentation, for the bindings that are neither).
"""
from __future__ import annotations

import ast
import inspect
from typing import NamedTuple

import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402

TORCH_FUNCTIONS = [
    # creation
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
    "empty_like", "arange", "linspace", "logspace", "eye", "rand", "randn", "randint", "randperm", "rand_like",
    "randn_like",
    # joining, splitting, shapes, indexing
    "cat", "concat", "stack", "split", "chunk", "squeeze", "unsqueeze", "reshape", "flatten", "transpose",
    "permute", "t", "broadcast_to", "gather", "where", "masked_fill",
    # elementwise
    "abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "pow", "add", "sub", "mul", "div", "neg",
    "square", "clamp", "clip", "clamp_min", "clamp_max", "maximum", "minimum",
    # comparisons
    "eq", "ne", "lt", "le", "gt", "ge", "equal", "allclose",
    # reductions
    "sum", "mean", "std", "var", "max", "min", "argmax", "argmin", "norm",
    # linear algebra, softmaxes
    "matmul", "mm", "bmm", "dot", "einsum", "softmax", "log_softmax",
    # utilities and modes
    "numel", "is_tensor", "is_floating_point", "manual_seed", "seed", "initial_seed", "get_default_dtype",
    "set_default_dtype", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "save", "load",
]

TENSOR_METHODS = [
    # metadata
    "size", "dim", "ndimension", "numel", "nelement", "is_floating_point", "get_device", "item", "tolist", "numpy",
    # shapes
    "view", "view_as", "reshape", "reshape_as", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "t",
    "contiguous", "is_contiguous", "expand", "expand_as", "repeat", "chunk", "split", "gather", "masked_fill",
    # elementwise and reductions
    "abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "pow", "add", "sub", "mul", "div", "neg",
    "square", "clamp", "clip", "eq", "ne", "lt", "le", "gt", "ge", "sum", "mean", "std", "var", "max", "min",
    "argmax", "argmin", "norm", "matmul", "mm", "bmm", "dot", "softmax", "log_softmax",
    # autograd
    "detach", "clone", "backward", "requires_grad_",
    # in place
    "zero_", "fill_", "copy_", "add_", "sub_", "mul_", "div_", "clamp_", "relu_",
    # dtypes, devices, construction
    "float", "double", "half", "long", "int", "bool", "to", "cpu", "cuda", "type", "type_as", "new", "new_zeros",
    "new_ones", "new_full", "new_tensor", "new_empty",
]

#: torch keywords dynnets does not take anywhere, and why (passing one is a TypeError)
UNSUPPORTED = {
    "out": "dynnets ops return new tensors; cat/stack/sum/mean raise a clear error for out=",
    "layout": "dense (strided) tensors only",
    "pin_memory": "no GPU to pin memory for",
    "memory_format": "numpy arrays: C order, no channels-last",
    "names": "named tensors are not supported",
}

#: per name: torch keywords not taken (or named otherwise), and why
EXCEPTIONS = {
    "torch.gather": {"sparse_grad": "the gradient is dense (torch's sparse_grad=True gives a sparse one)"},
    "Tensor.gather": {"sparse_grad": "as torch.gather"},
    "torch.mm": {"out_dtype": "a GPU low-precision option (float16/bfloat16 products into float32)"},
    "Tensor.mm": {"out_dtype": "as torch.mm"},
    "torch.bmm": {"out_dtype": "as torch.mm"},
    "Tensor.bmm": {"out_dtype": "as torch.mm"},
    "Tensor.numpy": {"force": "numpy() never copies (no GPU, no conjugate views)"},
    "Tensor.copy_": {"non_blocking": "nothing is asynchronous on the CPU; pass it to .to() instead"},
    "torch.norm": {"dtype": "cast the input first (x.double().norm())"},
    "Tensor.norm": {"dtype": "as torch.norm"},
    "Tensor.split": {"split_size": "torch's method calls its argument split_size, torch.split "
                                   "split_size_or_sections: dynnets takes the latter in both"},
    "torch.save": {"_use_new_zipfile_serialization": "torch's private flag",
                   "_disable_byteorder_record": "torch's private flag"},
    "torch.load": {"map_location": "a device mapping: dynnets has the CPU only",
                   "mmap": "files are read whole"},
    "Tensor.div_": {"rounding_mode": "true division only (dynnets.div raises for a rounding_mode)"},
    "Tensor.backward": {"inputs": "backward accumulates into every leaf (torch's inputs= restricts it)",
                        "create_graph": "no higher-order gradients"},
}

#: defaults that differ although both have one, and why the calls mean the same
DEFAULTS_DIFFER = {
    ("torch.arange", "start"): "None stands for torch's 0 when end is given; arange() alone stays an error",
    ("Tensor.backward", "retain_graph"): "torch's None means create_graph's value, False without create_graph",
}

#: torch's documented signatures (its documentation, 2.x) for bindings that
#: have neither a Python signature nor an operator schema of the same name
DOCUMENTED = {
    "torch.tensor": ["data, *, dtype=None, device=None, requires_grad=False, pin_memory=False"],
    "torch.as_tensor": ["data, dtype=None, device=None"],
    "torch.from_numpy": ["ndarray, /"],
    "torch.zeros": ["*size, out=None, dtype=None, layout=None, device=None, requires_grad=False"],
    "torch.ones": ["*size, out=None, dtype=None, layout=None, device=None, requires_grad=False"],
    "torch.empty": ["*size, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False, "
                    "memory_format=None"],
    "torch.rand": ["*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False, "
                   "pin_memory=False"],
    "torch.randn": ["*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False, "
                    "pin_memory=False"],
    # documented as (start=0, end, step=1, ...): end alone is arange(end)
    "torch.arange": ["start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, "
                     "requires_grad=False"],
    "torch.randint": ["low=0, high=None, size=None, *, generator=None, out=None, dtype=None, layout=None, "
                      "device=None, requires_grad=False"],
    "torch.is_tensor": ["obj, /"],
    "torch.numel": ["input"],
    "torch.no_grad": [""], "torch.enable_grad": [""], "torch.is_grad_enabled": [""],
    "torch.set_grad_enabled": ["mode"],
    "torch.manual_seed": ["seed"], "torch.seed": [""], "torch.initial_seed": [""],
    "torch.get_default_dtype": [""], "torch.set_default_dtype": ["d"],
    "Tensor.tolist": [""],
    "Tensor.numpy": ["*, force=False"],
    "Tensor.new": ["*args, device=None"],
    "Tensor.type": ["dtype=None, non_blocking=False"],
    "Tensor.to": ["*args, dtype=None, device=None, non_blocking=False, copy=False"],
    "Tensor.cuda": ["device=None, non_blocking=False, memory_format=None"],
    "Tensor.cpu": ["memory_format=None"],
    "Tensor.float": ["memory_format=None"], "Tensor.double": ["memory_format=None"],
    "Tensor.half": ["memory_format=None"], "Tensor.long": ["memory_format=None"],
    "Tensor.int": ["memory_format=None"], "Tensor.bool": ["memory_format=None"],
    "Tensor.ndimension": [""], "Tensor.nelement": [""], "Tensor.get_device": [""],
    "Tensor.is_contiguous": ["memory_format=None"],
    "Tensor.view": ["*shape"], "Tensor.reshape": ["*shape"], "Tensor.permute": ["*dims"],
    "Tensor.expand": ["*sizes"], "Tensor.repeat": ["*repeats"],
    "Tensor.new_zeros": ["*size, dtype=None, device=None, requires_grad=False"],
    "Tensor.new_ones": ["*size, dtype=None, device=None, requires_grad=False"],
    "Tensor.new_empty": ["*size, dtype=None, device=None, requires_grad=False"],
    "Tensor.new_full": ["size, fill_value, *, dtype=None, device=None, requires_grad=False"],
    "Tensor.new_tensor": ["data, *, dtype=None, device=None, requires_grad=False"],
    "Tensor.requires_grad_": ["requires_grad=True"],
    "Tensor.copy_": ["other, non_blocking=False"],      # the binding's name (its documentation says src)
}

#: dynnets parameters that a torch call could reach positionally although
#: torch has none there, with the reason it is harmless
EXTRA_POSITIONAL = {
    "torch.no_grad": {"func": "dynnets' no_grad(f) decorates f without parentheses; torch's no_grad() takes none"},
    "torch.enable_grad": {"func": "as no_grad"},
}

_FACTORY_KEYWORDS = ("dtype", "device")       # torch's Python bindings add requires_grad to the factories


class Param(NamedTuple):
    name: str
    kind: str            # "pos" (positional or keyword), "posonly", "kw" (keyword-only), "var" (*args), "varkw" (**kw)
    default: object      # _EMPTY when required
    seq: bool = False    # a list of ints torch also takes as *args (size, shape, dims)


_EMPTY = inspect.Parameter.empty


def _from_inspect(sig, drop_first):
    params = list(sig.parameters.values())
    if drop_first and params and params[0].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                   inspect.Parameter.POSITIONAL_OR_KEYWORD):
        params = params[1:]
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "posonly", inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos",
             inspect.Parameter.KEYWORD_ONLY: "kw", inspect.Parameter.VAR_POSITIONAL: "var",
             inspect.Parameter.VAR_KEYWORD: "varkw"}
    return [Param(p.name, kinds[p.kind], p.default) for p in params]


def _from_text(text):
    sig = inspect.signature(eval(f"lambda {text}: None"))  # noqa: S307 (test-local literals)
    return _from_inspect(sig, False)


def _from_schema(schema, method):
    out = []
    args = list(schema.arguments)
    for k, a in enumerate(args):
        name = a.name
        if name == "self":
            if method and k == 0:
                continue
            name = "input"
        default = a.default_value if a.has_default_value() else _EMPTY
        out.append(Param(name, "kw" if a.kwarg_only else "pos", default, "int[]" in str(a.type).replace("SymInt",
                                                                                                         "int")))
    return out


def _usable(schema, inplace):
    """Not an out= variant, not an in-place one (unless the method is), not
    TorchScript's arithmetic on Python numbers and lists of the same name."""
    for k, a in enumerate(schema.arguments):
        if a.name == "out" or (a.alias_info is not None and a.alias_info.is_write and not (inplace and k == 0)):
            return False
    if any(a.name == "a" for a in schema.arguments):
        return False                    # TorchScript's eq(a, b) of lists, add(a, b) of numbers...
    return any("Tensor" in str(a.type) for a in schema.arguments)


def torch_overloads(key):
    """torch's overloads of ``key`` ('torch.sum', 'Tensor.sum'): lists of Params."""
    if key in DOCUMENTED:
        return [_from_text(t) for t in DOCUMENTED[key]]
    kind, name = key.split(".")
    method = kind == "Tensor"
    obj = getattr(torch.Tensor if method else torch, name)
    try:
        sig = inspect.signature(obj)
        params = _from_inspect(sig, method)
        if not (len(params) == 2 and params[0].kind == "var" and params[1].kind == "varkw"):
            return [params]
    except (TypeError, ValueError):
        pass
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    usable = [s for s in schemas if _usable(s, name.endswith("_"))]
    if not usable:                      # factories: no tensor argument at all
        usable = [s for s in schemas if _usable(s, False) or not any("Tensor" in str(a.type) for a in s.arguments)]
        usable = [s for s in usable if not any(a.name == "out" for a in s.arguments)]
    schemas = usable
    assert schemas, f"{key}: no signature, operator schema or DOCUMENTED entry"
    out = [_from_schema(s, method) for s in schemas]
    if not method and any(p.name == "device" for o in out for p in o):
        out = [o + [Param("requires_grad", "kw", False)] for o in out]
    return out


def _dn_obj(key):
    kind, name = key.split(".")
    return getattr(dn.Tensor if kind == "Tensor" else dn, name, None)


def _same_default(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return a == b


def compare(key):
    """The differences of dynnets' signature of ``key`` from torch's (a list of strings)."""
    obj = _dn_obj(key)
    if obj is None:
        return [f"{key}: missing in dynnets"]
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []           # a class (no_grad): its constructor is checked by calling it in the tests below
    mine = _from_inspect(sig, key.startswith("Tensor."))
    overloads = torch_overloads(key)
    bad = []
    my_pos = [p for p in mine if p.kind in ("pos", "posonly")]
    my_var = any(p.kind == "var" for p in mine)
    my_varkw = any(p.kind == "varkw" for p in mine)
    names = {p.name for p in mine if p.kind in ("pos", "kw")}
    for i, p in enumerate(my_pos):
        at = [o[i] for o in overloads if i < len(o) and o[i].kind in ("pos", "posonly")]
        if any(q.kind == "posonly" for q in at):
            continue                # torch takes it by position only: its name is no keyword
        if not at:
            if any(q.kind == "var" for o in overloads for q in o[:i + 1]):
                continue            # torch takes any number of positional arguments here
            if p.name not in EXTRA_POSITIONAL.get(key, {}):
                bad.append(f"{key}: positional argument {i} {p.name!r} has no torch counterpart: make it "
                           f"keyword-only")
            continue
        match = [q for q in at if q.name == p.name]
        skip_names = dict(UNSUPPORTED, **EXCEPTIONS.get(key, {}))
        if not match and any(q.name in skip_names for q in at):
            continue
        if not match:
            bad.append(f"{key}: positional argument {i} is {p.name!r}, torch's is "
                       f"{' or '.join(sorted({q.name for q in at}))!r}")
            continue
        for q in match:
            if p.default is _EMPTY and q.default is not _EMPTY and not any(
                    r.name == p.name and r.default is _EMPTY for r in match):
                bad.append(f"{key}: {p.name} is required here, torch's defaults to {q.default!r}")
            elif p.default is not _EMPTY and q.default is not _EMPTY and not _same_default(p.default, q.default) \
                    and not any(_same_default(p.default, r.default) for r in match) \
                    and (key, p.name) not in DEFAULTS_DIFFER and p.name not in skip_names:
                bad.append(f"{key}: {p.name} defaults to {p.default!r}, torch's to {q.default!r}")
    skip = dict(UNSUPPORTED, **EXCEPTIONS.get(key, {}))
    for o in overloads:
        for i, q in enumerate(o):
            if q.kind in ("var", "varkw", "posonly") or q.name in skip or q.name in names or my_varkw:
                continue
            if q.kind == "pos" and my_var and i >= len(my_pos) and q.seq:
                continue            # an int list torch also takes as *sizes: dynnets' *args take it
            if key.startswith("torch.") and i == 0 and q.name == "input" and my_pos:
                bad.append(f"{key}: first argument {my_pos[0].name!r}, torch's is 'input' (torch.{key[6:]}"
                           f"(input=...) fails)")
                continue
            bad.append(f"{key}: torch takes {q.name}= by keyword, dynnets does not (add it, or list it in "
                       f"EXCEPTIONS with the reason)")
    return sorted(set(bad))


_KEYS = [f"torch.{n}" for n in TORCH_FUNCTIONS] + [f"Tensor.{n}" for n in TENSOR_METHODS]


def test_the_list_is_the_size_asked_and_names_torchs():
    assert len(_KEYS) >= 150 and len(set(_KEYS)) == len(_KEYS)
    for key in _KEYS:
        kind, name = key.split(".")
        assert hasattr(torch.Tensor if kind == "Tensor" else torch, name), f"{key} is not torch's"


@pytest.mark.parametrize("key", _KEYS)
def test_exists_with_torchs_argument_names(key):
    bad = compare(key)
    assert not bad, "\n".join(bad)


def test_the_checker_catches_the_old_signatures(monkeypatch):
    # the signatures of dynnets before this test, as they were: each is flagged
    def matmul(x, w):
        pass

    def concat(xs, axis=None, *, dim=None):
        pass

    def sum_(x, axis=None, keepdims=None, *, dim=None, keepdim=None, dtype=None, out=None):
        pass

    def full(shape, value, dtype=None, requires_grad=False):
        pass

    def transpose(self, *axes):
        pass

    for key, fn in (("torch.matmul", matmul), ("torch.cat", concat), ("torch.sum", sum_), ("torch.full", full),
                    ("Tensor.transpose", transpose)):
        kind, name = key.split(".")
        monkeypatch.setattr(dn.Tensor if kind == "Tensor" else dn, name, fn)
        assert compare(key), key
    monkeypatch.delattr(dn, "sin")
    assert compare("torch.sin") == ["torch.sin: missing in dynnets"]


def test_the_mode_classes_and_functions_work_as_torchs():
    x = dn.tensor([1.0], requires_grad=True)
    for ctx in (dn.no_grad(), dn.set_grad_enabled(False)):
        with ctx:
            assert not (x * 2).requires_grad and not dn.is_grad_enabled()
    with dn.no_grad():
        with dn.enable_grad():
            assert (x * 2).requires_grad

    @dn.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad


def test_documented_signatures_match_torchs_keywords():
    # where DOCUMENTED stands in for torch's signature, the keywords it names are accepted by torch
    calls = {
        "torch.tensor": lambda: torch.tensor(data=[1.0], dtype=None, device=None, requires_grad=False),
        "torch.as_tensor": lambda: torch.as_tensor(data=[1.0], dtype=None, device=None),
        "torch.zeros": lambda: torch.zeros(2, dtype=None, device=None, requires_grad=False),
        "torch.rand": lambda: torch.rand(2, generator=None, dtype=None, device=None, requires_grad=False),
        "torch.arange": lambda: torch.arange(start=0, end=3, step=1, dtype=None, device=None, requires_grad=False),
        "torch.randint": lambda: torch.randint(low=0, high=3, size=(2,), generator=None, dtype=None, device=None),
        "Tensor.type": lambda: torch.ones(1).type(dtype=None, non_blocking=False),
        "Tensor.to": lambda: torch.ones(1).to(dtype=torch.float64, device="cpu", non_blocking=False, copy=False),
        "Tensor.new_zeros": lambda: torch.ones(1).new_zeros(2, dtype=None, device=None, requires_grad=False),
        "Tensor.new_full": lambda: torch.ones(1).new_full(size=(2,), fill_value=1.0, dtype=None),
        "Tensor.new_tensor": lambda: torch.ones(1).new_tensor(data=[1.0], dtype=None, requires_grad=False),
        "Tensor.requires_grad_": lambda: torch.ones(1).requires_grad_(requires_grad=True),
        "torch.set_grad_enabled": lambda: torch.set_grad_enabled(mode=True),
        "torch.manual_seed": lambda: torch.manual_seed(seed=0),
        "Tensor.copy_": lambda: torch.ones(1).copy_(other=torch.ones(1), non_blocking=False),
    }
    for key, call in calls.items():
        assert key in DOCUMENTED
        call()
    for text in (t for ts in DOCUMENTED.values() for t in ts):
        ast.parse(f"lambda {text}: None")
