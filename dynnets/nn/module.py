"""``Module``: PyTorch's conventions for composing parameters.

Assigning a :class:`Parameter` or a :class:`Module` to an attribute registers
it; ``parameters()`` / ``named_parameters()`` walk the tree with dotted names;
``state_dict()`` gives tensors on the parameters' and buffers' memory
(torch's names and order) and ``load_state_dict()`` copies tensors or numpy
arrays in;
``to(dtype)`` / ``double()`` / ``float()`` / ``half()`` convert the
floating-point parameters and buffers in place (the Parameter objects stay,
so an optimizer built before keeps them); ``apply(fn)`` visits the children,
then the module, as torch.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from ..autograd.gradtypes import RowSparse
from ..autograd.primitives import DTypeError
from ..autograd.engine import no_grad
from ..autograd.tensor import Parameter, Tensor, wrap_array
from ..devices import DeviceUnavailableError
from ..random import generator

__all__ = ["Module", "Parameter", "check_device", "check_float_input", "IncompatibleKeys", "StateDictError",
           "as_generator", "float_dtype", "positive_int", "uniform_"]


class IncompatibleKeys(NamedTuple):
    """What :meth:`Module.load_state_dict` returns (torch's ``_IncompatibleKeys``):
    the module's keys the state_dict lacked, and its keys the module has not."""

    missing_keys: list
    unexpected_keys: list

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


class StateDictError(RuntimeError, KeyError, ValueError):
    """:meth:`Module.load_state_dict` failed: torch raises a RuntimeError
    with this message; it is also the KeyError (missing or unexpected keys)
    and ValueError (a size mismatch) that earlier dynnets versions raised."""

    __str__ = RuntimeError.__str__          # not KeyError's, which would quote the message

_DEVICE_NAMES = ("cpu", "cuda", "mps", "xpu", "meta", "hip", "xla", "npu", "ipu", "hpu", "vulkan", "mtia")


def _device_string(device):
    """``device`` as a string if it looks like one ('cpu', 'cuda:0', a torch.device), else None."""
    if isinstance(device, str):
        name = device.split(":")[0]
        return device if name in _DEVICE_NAMES else None
    if type(device).__name__ == "device" and hasattr(device, "type"):
        return str(device)
    return None


def check_device(owner, device):
    """Accept PyTorch's ``device=`` when it is None or the CPU; any other
    device raises a ValueError naming ``owner`` (dynnets computes on the CPU,
    with numpy and Numba)."""
    if device is None:
        return
    name = _device_string(device)
    if name is None or name.split(":")[0] != "cpu":
        raise DeviceUnavailableError(f"{owner}: device={device!r} is not available: dynnets computes on the CPU "
                                     f"only (device=None or 'cpu')")


def check_float_input(owner, x, like, what="input", like_what="the layer's parameters have"):
    """``x`` (an array-like becomes an array) after checking that its dtype is
    that of the layer's parameter ``like``: a layer never promotes its input
    silently (torch raises "mat1 and mat2 must have the same dtype"). The
    DTypeError names ``owner`` and both dtypes."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        x = np.asarray(x)
        dt = x.dtype
    want = like.dtype
    if dt != want:
        dt, want = np.dtype(dt), np.dtype(want)
        layer = "the layer" if like_what.startswith("the layer") else "the weight"
        fix = (f"cast the {what} (x.to(dn.{want.name}); a numpy array: x.astype(np.{want.name})) or {layer} "
               f"(.to(dn.{dt.name}))" if dt.kind == "f" else
               f"cast the {what} (x.to(dn.{want.name}); a numpy array: x.astype(np.{want.name}))")
        raise DTypeError(f"{owner}: {what} has dtype {dt}, but {like_what} dtype {want}; they must be the same, as "
                         f"in torch (no silent promotion): {fix}")
    return x


# the checks of constructor arguments and the initialisation that every layer shares (the layers,
# cells, RNNs, convolutions and attention import them from here)
def as_generator(rng):
    """``rng`` if it is a ``numpy.random.Generator``, the default generator
    (:func:`dynnets.manual_seed`) for None, else ``default_rng(rng)`` (a seed
    or a ``SeedSequence``)."""
    return generator(rng)


def float_dtype(owner, dtype):
    """``np.dtype(dtype)`` (float32 for None, PyTorch's default dtype),
    checked to be a floating-point type (the error names ``owner``)."""
    dt = np.dtype(np.float32 if dtype is None else dtype)
    if dt.kind != "f":
        raise TypeError(f"{owner}: dtype must be a floating-point type, got {dt}")
    return dt


def positive_int(owner, name, value, allow_zero=False):
    """``value`` as an int, checked to be a positive (or, with ``allow_zero``,
    non-negative) integer; the error names ``owner`` and the argument ``name``."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < (0 if allow_zero else 1):
        want = "a non-negative" if allow_zero else "a positive"
        raise ValueError(f"{owner}: {name} must be {want} integer, got {value!r}")
    return int(value)


def uniform_(gen, shape, bound, dtype):
    """U(-bound, bound) samples of ``shape`` as a new array of ``dtype``."""
    return gen.uniform(-bound, bound, shape).astype(dtype)


class Module:
    """Base class of layers and models (as ``torch.nn.Module``)."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "training", True)

    # --- registration -----------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call Module.__init__() before assigning attributes")
        params, modules, buffers = self._parameters, self._modules, self._buffers
        for d in (params, modules, buffers):
            d.pop(name, None)
        if isinstance(value, Parameter):
            params[name] = value
        elif isinstance(value, Module):
            modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for d in (self._parameters, self._modules, self._buffers):
            d.pop(name, None)
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is None:
            object.__setattr__(self, name, None)
            return
        setattr(self, name, param if isinstance(param, Parameter) else Parameter(param))

    def register_buffer(self, name, tensor, persistent=True):
        """A non-trainable array saved in ``state_dict`` (as torch buffers).
        Only persistent buffers exist here (``persistent=False`` raises)."""
        if not persistent:
            raise ValueError(f"{type(self).__name__}.register_buffer: persistent=False (a buffer left out of the "
                             f"state_dict) is not supported; keep {name!r} as a plain attribute instead")
        arr = tensor.numpy() if isinstance(tensor, Tensor) else np.asarray(tensor)
        self._buffers[name] = arr
        object.__setattr__(self, name, arr)

    def add_module(self, name, module):
        setattr(self, name, module)

    # --- traversal ----------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) pairs, this module first, then each child's
        subtree in registration order (as torch). A module reached twice is
        listed once unless ``remove_duplicate=False``; ``memo`` is a set of
        modules to skip (and it collects the ones listed)."""
        seen = set() if memo is None else memo
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if remove_duplicate:
                if m in seen:
                    continue
                seen.add(m)
            yield name, m
            children = list(m._modules.items())
            for cname, child in reversed(children):
                if child is not None:
                    stack.append((f"{name}.{cname}" if name else cname, child))

    def modules(self, remove_duplicate=True):
        for _, m in self.named_modules(remove_duplicate=remove_duplicate):
            yield m

    def children(self):
        return (m for _, m in self.named_children())

    def named_children(self):
        """(name, child) pairs; a child registered under two names is listed once (as torch)."""
        seen = set()
        for n, m in self._modules.items():
            if m is not None and m not in seen:
                seen.add(m)
                yield n, m

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, Parameter) pairs in registration order; shared
        parameters are listed once unless ``remove_duplicate=False``."""
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mname, m in mods:
            for pname, p in m._parameters.items():
                if p is None or (remove_duplicate and id(p) in seen):
                    continue
                seen.add(id(p))
                yield (f"{mname}.{pname}" if mname else pname), p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mname, m in mods:
            for bname, b in m._buffers.items():
                if remove_duplicate and id(b) in seen:
                    continue
                seen.add(id(b))
                yield (f"{mname}.{bname}" if mname else bname), b

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # --- modes and gradients ----------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none or p.raw_grad is None:
                p.raw_grad = None
            else:
                p.raw_grad = np.zeros_like(p.numpy())

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad = bool(requires_grad)
        return self

    def apply(self, fn):
        """Call ``fn(module)`` on every child (recursively, each child's
        children first), then on this module; returns self (as torch, e.g.
        ``model.apply(init_weights)``)."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # --- dtype and device ---------------------------------------------------------------
    def to(self, *args, **kwargs):
        """Convert the floating-point parameters and buffers (as torch's
        ``Module.to``): ``to(dtype)``, ``to(device)``, ``to(tensor)`` (its
        dtype), or keywords ``device=``, ``dtype=``, ``non_blocking=``. The
        device must be None or 'cpu' (then it changes nothing); the dtype a
        floating-point type. Parameters are converted in place (the same
        Parameter objects, their gradients too), integer buffers are left
        alone. Returns self."""
        device, dtype = self._to_args(args, kwargs)
        check_device(f"{type(self).__name__}.to", device)
        if dtype is not None:
            self._convert(dtype, f"{type(self).__name__}.to")
        return self

    def _to_args(self, args, kwargs):
        who = f"{type(self).__name__}.to"
        extra = set(kwargs) - {"device", "dtype", "non_blocking", "memory_format"}
        if extra:
            raise TypeError(f"{who}: unexpected keyword argument(s) {sorted(extra)}; torch's are device=, dtype=, "
                            f"non_blocking=")
        device, dtype = kwargs.get("device"), kwargs.get("dtype")
        rest = list(args)
        if rest and isinstance(rest[-1], (bool, np.bool_)):
            rest.pop()                       # non_blocking: nothing is asynchronous here
        if len(rest) > 2:
            raise TypeError(f"{who}: expected to(device=None, dtype=None), to(dtype) or to(tensor), got "
                            f"{len(args)} positional arguments")
        for a in rest:
            if a is None:
                continue
            if isinstance(a, Tensor) or type(a) is np.ndarray:
                dtype = a.dtype
            elif _device_string(a) is not None:
                device = a
            else:
                try:
                    dtype = np.dtype(a)
                except TypeError:
                    raise TypeError(f"{who}: {a!r} is neither a device ('cpu') nor a numpy dtype "
                                    f"(np.float32, np.float64)") from None
        return device, dtype

    def _convert(self, dtype, who):
        dt = np.dtype(dtype)
        if dt.kind != "f":
            raise TypeError(f"{who}: only floating-point dtypes are accepted (as torch), got {dt}")
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                d = p.numpy()
                if d.dtype.kind != "f" or d.dtype == dt:
                    continue
                p.data = d.astype(dt)
                g = p.raw_grad
                if type(g) is np.ndarray:
                    p.raw_grad = g.astype(dt)
                elif type(g) is RowSparse:
                    p.raw_grad = RowSparse(g.rows, np.asarray(g.values).astype(dt), g.shape)
            for name, b in list(m._buffers.items()):
                if isinstance(b, np.ndarray) and b.dtype.kind == "f" and b.dtype != dt:
                    m._buffers[name] = b.astype(dt)
                    object.__setattr__(m, name, m._buffers[name])
            m._cast_constants(dt)

    def _cast_constants(self, dtype):
        """Recast the module's own dtype-specific constants (e.g. a zero
        bias); called by :meth:`to` after the parameters were converted."""

    def double(self):
        """``to(np.float64)``."""
        return self.to(np.float64)

    def float(self):
        """``to(np.float32)``."""
        return self.to(np.float32)

    def half(self):
        """``to(np.float16)``, where every layer of the module computes in
        float16; a layer whose fused kernels take float32/float64 only (the
        recurrent cells and layers) raises a TypeError naming it."""
        for name, m in self.named_modules():
            if not m._supports_half:
                where = f" (submodule {name!r})" if name else ""
                raise TypeError(f"{type(self).__name__}.half: {type(m).__name__}{where} computes in float32 or "
                                f"float64 only (its fused kernels); use .float() or .double()")
        return self.to(np.float16)

    #: Whether the module computes in float16 (see :meth:`half`).
    _supports_half = True

    def cpu(self):
        """Returns self: everything is on the CPU already."""
        return self

    def cuda(self, device=None):
        """Raises: dynnets computes on the CPU only."""
        raise DeviceUnavailableError(f"{type(self).__name__}.cuda: CUDA is not available: dynnets computes on the "
                                     f"CPU only")

    # --- state ----------------------------------------------------------------------
    def _state_items(self, prefix):
        """(dotted name, module, attribute, is_parameter) of every parameter
        and buffer, as torch's ``state_dict`` walks: a module's own
        parameters, its buffers, then each child's under the child's name. A
        submodule registered under two parents (or two names) is listed under
        every path, as torch lists it: not deduplicated."""
        stack = [(prefix, self)]
        while stack:
            pre, m = stack.pop()
            for name, p in m._parameters.items():
                if p is not None:
                    yield pre + name, m, name, True
            for name in m._buffers:
                yield pre + name, m, name, False
            for cname, child in reversed(list(m._modules.items())):
                if child is not None:
                    stack.append((f"{pre}{cname}.", child))

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Ordered mapping of dotted names to the parameters and buffers, as
        ``torch.nn.Module.state_dict``.

        Each value is a tensor on the parameter's (or buffer's) own memory,
        cut from the graph (``p.detach()``): ``m.state_dict()["weight"].copy_(emb)``
        changes the model, as in torch, and a later step changes the values
        (copy them, ``{k: v.clone() ...}``, to keep a snapshot). With
        ``keep_vars=True`` the values are the Parameters themselves.
        Order and names are torch's (see :meth:`_state_items`), so a torch
        state_dict's keys match.

        Parameters
        ----------
        destination : dict, optional
            Filled and returned (default: a new ``OrderedDict``).
        prefix : str
            Put before every name.
        keep_vars : bool
        """
        if args:
            # torch's deprecated positional form state_dict(destination, prefix, keep_vars)
            if len(args) > 3:
                raise TypeError(f"{type(self).__name__}.state_dict: takes at most 3 positional arguments "
                                f"(destination, prefix, keep_vars), got {len(args)}")
            destination, prefix, keep_vars = (tuple(args) + (destination, prefix, keep_vars)[len(args):])[:3]
        out = OrderedDict() if destination is None else destination
        for key, m, name, is_param in self._state_items(prefix):
            if is_param:
                p = m._parameters[name]
                out[key] = p if keep_vars else p.detach()
            else:
                out[key] = wrap_array(m._buffers[name])         # np.asarray: the buffer's own memory
        return out

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy ``state_dict``'s values (tensors or numpy arrays) into this
        module's parameters and buffers, as ``torch.nn.Module.load_state_dict``.

        The values are copied in place (the Parameter objects, which
        optimizers hold, stay), cast to each parameter's dtype, through the
        same in-place path as ``Tensor.copy_`` under ``no_grad`` (so a value
        saved for a pending backward that this overwrites makes that backward
        raise). Every key and shape is checked before anything is copied: a
        failed load leaves the module as it was.

        Parameters
        ----------
        state_dict : mapping of str to Tensor or array
        strict : bool
            Missing or unexpected keys raise (as torch); with False they are
            only reported.
        assign : bool
            torch's flag to take the given tensors instead of copying; only
            False is supported.

        Returns
        -------
        IncompatibleKeys
            ``(missing_keys, unexpected_keys)``, a named tuple as torch's.

        Raises
        ------
        StateDictError (a RuntimeError, as torch's; also a KeyError and a ValueError)
            Missing or unexpected keys (``strict``), or a value whose shape
            differs from the model's, with torch's message.
        """
        if assign:
            raise ValueError(f"{type(self).__name__}.load_state_dict: assign=True is not supported (the "
                             f"parameters are copied into in place, assign=False)")
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"{type(self).__name__}.load_state_dict: expected a mapping of names to tensors or "
                            f"arrays, got {type(state_dict).__name__}")
        own = OrderedDict((k, (m, name, is_param)) for k, m, name, is_param in self._state_items(""))
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict.keys() if k not in own]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        todo = []
        for k, (m, name, is_param) in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            arr = v.numpy() if isinstance(v, Tensor) else np.asarray(v)
            cur = m._parameters[name].numpy() if is_param else m._buffers[name]
            if arr.shape != cur.shape:
                errors.append(f"size mismatch for {k}: copying a param with shape {arr.shape} from checkpoint, "
                              f"the shape in current model is {cur.shape}.")
                continue
            if arr.dtype.kind not in "biufc":
                errors.append(f"While copying the parameter named \"{k}\", expected a tensor or an array of "
                              f"numbers from checkpoint but received dtype {arr.dtype}")
                continue
            todo.append((m, name, is_param, cur, arr))
        if errors:
            raise StateDictError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                                 + "\n\t".join(errors))
        with no_grad():
            for m, name, is_param, cur, arr in todo:
                if is_param:
                    m._parameters[name].copy_(arr)
                elif cur.flags.writeable:
                    wrap_array(cur).copy_(arr)
                else:
                    # a read-only buffer (registered from a broadcast view) cannot take the values in place
                    m._buffers[name] = arr.astype(cur.dtype, copy=True)
                    object.__setattr__(m, name, m._buffers[name])
        return IncompatibleKeys(missing, unexpected)

    # --- calling ----------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def num_parameters(self):
        return int(sum(p.numpy().size for p in self.parameters()))

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        if len(lines) == 1:
            return lines[0] + ")"
        return "\n".join(lines) + "\n)"
