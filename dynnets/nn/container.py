"""Containers (``torch.nn.modules.container``): Sequential, ModuleList,
ModuleDict, ParameterList and ParameterDict."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..autograd.tensor import Tensor
from .module import Module, Parameter

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


class Sequential(Module):
    """Modules applied in order (as ``torch.nn.Sequential``).

    ``Sequential(m0, m1, ...)`` names the children "0", "1", ...;
    ``Sequential(OrderedDict(name=module, ...))`` keeps the given names.
    Indexing with an int returns a child, with a slice a new Sequential of
    the same (shared) children.
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            items = list(modules[0].items())
        else:
            items = [(str(i), m) for i, m in enumerate(modules)]
        for name, m in items:
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: child {name!r} must be a Module, got {type(m).__name__}")
            self.add_module(name, m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        mods = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(mods[idx]))
        n = len(mods)
        if not -n <= idx < n:
            raise IndexError(f"Sequential: index {idx} is out of range for {n} modules")
        return mods[idx][1]

    def append(self, module):
        if not isinstance(module, Module):
            raise TypeError(f"Sequential.append: expected a Module, got {type(module).__name__}")
        self.add_module(str(len(self._modules)), module)
        return self

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(Module):
    """A list of modules whose parameters are registered (as
    ``torch.nn.ModuleList``); children are named "0", "1", ..."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _check(self, m):
        if not isinstance(m, Module):
            raise TypeError(f"ModuleList: elements must be Modules, got {type(m).__name__}")
        return m

    def _index(self, idx):
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"ModuleList: index {idx} is out of range for {n} modules")
        return idx % n

    def _renumber(self, mods):
        for name in list(self._modules):
            delattr(self, name)
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])
        return mods[self._index(idx)]

    def __setitem__(self, idx, module):
        self.add_module(str(self._index(idx)), self._check(module))

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[self._index(idx)]
        self._renumber(mods)

    def append(self, module):
        self.add_module(str(len(self._modules)), self._check(module))
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, self._check(module))
        self._renumber(mods)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(): iterate over it and call the modules")


def _check_key(owner, key, what):
    """A ModuleDict / ParameterDict key, checked as torch's ``add_module``
    checks a name: a non-empty string without '.' (the dotted names of
    ``state_dict`` would be ambiguous)."""
    if not isinstance(key, str):
        raise TypeError(f"{owner}: {what} name should be a string, got {type(key).__name__}")
    if "." in key:
        raise KeyError(f"{owner}: {what} name can't contain \".\", got {key!r}")
    if key == "":
        raise KeyError(f"{owner}: {what} name can't be empty string \"\"")
    return key


def _pairs(owner, items):
    """``(key, value)`` pairs of a mapping or of an iterable of pairs (as torch's ``update``)."""
    if hasattr(items, "keys"):
        return [(k, items[k]) for k in items.keys()]
    out = []
    for i, kv in enumerate(items):
        kv = tuple(kv) if isinstance(kv, (list, tuple)) else kv
        if not isinstance(kv, tuple) or len(kv) != 2:
            raise ValueError(f"{owner}.update: element #{i} should be a (key, value) pair, got {kv!r}")
        out.append(kv)
    return out


class _DictMixin:
    """The mapping methods ModuleDict and ParameterDict share, over the
    ordered dict ``self._store()`` (``_modules`` / ``_parameters``)."""

    def __getitem__(self, key):
        try:
            return self._store()[key]
        except KeyError:
            raise KeyError(f"{type(self).__name__}: no entry {key!r} (keys: {list(self._store())})") from None

    def __getattr__(self, name):
        # torch's Module.__getattr__: md.name finds the entry (methods and attributes come first)
        store = self.__dict__.get(self._STORE)
        if store is not None and name in store:
            return store[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    def __delitem__(self, key):
        del self._store()[key]

    def __len__(self):
        return len(self._store())

    def __iter__(self):
        return iter(self._store())

    def __contains__(self, key):
        return key in self._store()

    def keys(self):
        return self._store().keys()

    def items(self):
        return self._store().items()

    def values(self):
        return self._store().values()

    def clear(self):
        self._store().clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def update(self, items):
        for k, v in _pairs(type(self).__name__, items):
            self[k] = v

    def _store(self):
        return self.__dict__[self._STORE]


class ModuleDict(_DictMixin, Module):
    """Modules by name, registered as children in insertion order (as
    ``torch.nn.ModuleDict``): ``md["enc"]``, ``md.enc``, ``md["dec"] = m``,
    ``keys()``, ``items()``, ``values()``, ``update()``, ``pop()``; the
    state_dict names are ``"<key>.<parameter>"``.

    Parameters
    ----------
    modules : mapping or iterable of (str, Module) pairs, optional
    """

    _STORE = "_modules"

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        _check_key("ModuleDict", key, "module")
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: {key!r} must be a Module, got {type(module).__name__}")
        self._modules[key] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(): call its modules")


def _as_parameter(owner, value):
    """torch's ParameterList/Dict: a Parameter stays itself, a tensor (or an array) becomes a Parameter."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor) or isinstance(value, np.ndarray):
        return Parameter(value)
    raise TypeError(f"{owner}: expected a Parameter or a Tensor, got {type(value).__name__}")


class ParameterList(Module):
    """A list of Parameters, registered as ``"0"``, ``"1"``, ... (as
    ``torch.nn.ParameterList``); a plain tensor is made a Parameter (on its
    memory, as torch's).

    Parameters
    ----------
    values : iterable of Parameters or Tensors, optional
    """

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def _index(self, idx):
        n = len(self._parameters)
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise TypeError(f"ParameterList: indices must be integers or slices, got {type(idx).__name__}")
        if not -n <= idx < n:
            raise IndexError(f"ParameterList: index {idx} is out of range for {n} parameters")
        return idx % n

    def __getitem__(self, idx):
        ps = list(self._parameters.values())
        if isinstance(idx, slice):
            return ParameterList(ps[idx])
        return ps[self._index(idx)]

    def __setitem__(self, idx, value):
        self._parameters[str(self._index(idx))] = _as_parameter("ParameterList", value)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def append(self, value):
        self._parameters[str(len(self._parameters))] = _as_parameter("ParameterList", value)
        return self

    def extend(self, values):
        if isinstance(values, Tensor):
            raise TypeError("ParameterList.extend: expected an iterable of Parameters, got a single Tensor")
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return ", ".join(f"({i}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
                         for i, p in enumerate(self))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward(): use its parameters")


class ParameterDict(_DictMixin, Module):
    """Parameters by name, in insertion order (as ``torch.nn.ParameterDict``):
    ``pd["w"]``, ``pd.w``, ``pd["b"] = tensor`` (made a Parameter),
    ``keys()``, ``items()``, ``values()``, ``update()``, ``pop()``.

    Parameters
    ----------
    parameters : mapping or iterable of (str, Parameter) pairs, optional
    """

    _STORE = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        _check_key("ParameterDict", key, "parameter")
        self._parameters[key] = _as_parameter("ParameterDict", value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward(): use its parameters")
