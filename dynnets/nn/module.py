"""``Module``: PyTorch's conventions for composing parameters.

Assigning a :class:`Parameter` or a :class:`Module` to an attribute registers
it; ``parameters()`` / ``named_parameters()`` walk the tree with dotted names;
``state_dict()`` / ``load_state_dict()`` copy numpy arrays in and out.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..autograd.tensor import Parameter, Tensor

__all__ = ["Module", "Parameter"]


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

    def register_buffer(self, name, array):
        """A non-trainable array saved in ``state_dict`` (as torch buffers)."""
        arr = np.asarray(array)
        self._buffers[name] = arr
        object.__setattr__(self, name, arr)

    def add_module(self, name, module):
        setattr(self, name, module)

    # --- traversal ----------------------------------------------------------------
    def named_modules(self, prefix=""):
        stack = [(prefix, self)]
        seen = set()
        while stack:
            name, m = stack.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            yield name, m
            children = list(m._modules.items())
            for cname, child in reversed(children):
                if child is not None:
                    stack.append((f"{name}.{cname}" if name else cname, child))

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def children(self):
        return iter(m for m in self._modules.values() if m is not None)

    def named_children(self):
        return iter((n, m) for n, m in self._modules.items() if m is not None)

    def named_parameters(self, prefix="", recurse=True):
        """(dotted name, Parameter) pairs in registration order; shared
        parameters are listed once."""
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mname, m in mods:
            for pname, p in m._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mname}.{pname}" if mname else pname), p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self):
        for mname, m in self.named_modules():
            for bname, b in m._buffers.items():
                yield (f"{mname}.{bname}" if mname else bname), b

    # --- modes and gradients ----------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none or p._grad is None:
                p._grad = None
            else:
                p._grad = np.zeros_like(p.data)

    def requires_grad_(self, flag=True):
        for p in self.parameters():
            p.requires_grad = bool(flag)
        return self

    # --- state ----------------------------------------------------------------------
    def state_dict(self):
        """Ordered mapping of dotted names to copies of parameter and buffer arrays."""
        out = OrderedDict()
        for mname, m in self.named_modules():
            for pname, p in m._parameters.items():
                if p is not None:
                    out[f"{mname}.{pname}" if mname else pname] = p.data.copy()
            for bname, b in m._buffers.items():
                out[f"{mname}.{bname}" if mname else bname] = np.array(b, copy=True)
        return out

    def load_state_dict(self, state, strict=True):
        """Copy arrays from ``state`` into this module's parameters and buffers.

        Raises ``KeyError`` listing missing and unexpected keys (with
        ``strict=True``) and ``ValueError`` naming a key whose shape differs.
        Returns ``(missing, unexpected)``.
        """
        own = {}
        for mname, m in self.named_modules():
            for pname, p in m._parameters.items():
                if p is not None:
                    own[f"{mname}.{pname}" if mname else pname] = (m, pname, True)
            for bname in m._buffers:
                own[f"{mname}.{bname}" if mname else bname] = (m, bname, False)
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing keys: {missing}")
            if unexpected:
                parts.append(f"unexpected keys: {unexpected}")
            raise KeyError(f"load_state_dict for {type(self).__name__}: " + "; ".join(parts))
        # check every shape before copying anything, so a failed load leaves the model as it was
        todo = []
        for k, (m, name, is_param) in own.items():
            if k not in state:
                continue
            v = state[k]
            v = v.data if isinstance(v, Tensor) else np.asarray(v)
            cur = m._parameters[name].data if is_param else m._buffers[name]
            if v.shape != cur.shape:
                raise ValueError(f"load_state_dict for {type(self).__name__}: size mismatch for {k}: "
                                 f"checkpoint has shape {v.shape}, the model has {cur.shape}")
            todo.append((m, name, is_param, v, cur))
        for m, name, is_param, v, cur in todo:
            if is_param:
                # in place, so optimizers holding the Parameter keep seeing it
                m._parameters[name].data[...] = v
            else:
                m._buffers[name] = v.astype(cur.dtype, copy=True)
                object.__setattr__(m, name, m._buffers[name])
        return missing, unexpected

    # --- calling ----------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def num_parameters(self):
        return int(sum(p.data.size for p in self.parameters()))

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
