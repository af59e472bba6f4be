"""``dynnets.device``: torch's device objects, for code that names where its tensors live.

dynnets computes on the CPU only. A ``device("cpu")`` is accepted wherever
torch takes a device; a ``device("cuda")`` (or ``"mps"``...) can be built, compared
and printed as torch's can, so ``device = torch.device("cuda" if
torch.cuda.is_available() else "cpu")`` runs unchanged (and picks the CPU),
but placing anything on it is a clear error (:func:`check_device`), never a
silent CPU fallback that would make a user believe a GPU did the work.
"""
from __future__ import annotations

import builtins

__all__ = ["device", "check_device", "DeviceUnavailableError", "DEVICE_TYPES"]

#: The device types torch's device string parser knows (torch 2.13), so a
#: string torch accepts is accepted here too, and a typo is refused as there.
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia",
                "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


class DeviceUnavailableError(RuntimeError, AssertionError, ValueError):
    """A device other than the CPU was asked to hold or compute something.

    Both a ``RuntimeError`` and an ``AssertionError``: torch built without
    CUDA raises ``AssertionError("Torch not compiled with CUDA enabled")``
    for the same request, so an ``except`` written for torch still catches it.
    A ``ValueError`` too: the ``nn`` modules' ``device=`` refusals were
    ValueErrors before every device refusal became this one error."""


def _parse(s):
    typ, sep, idx = s.partition(":")
    if typ not in DEVICE_TYPES:
        raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device string: {s}")
    if not sep:
        return typ, None
    if not idx.isdigit() or (len(idx) > 1 and idx[0] == "0"):
        raise RuntimeError(f"Invalid device string: {s!r}")
    return typ, int(idx)


class device:
    """A device, as ``torch.device``: ``device("cpu")``, ``device("cuda:1")``,
    ``device("cuda", 1)``, ``device(other_device)``; an int ``n`` means
    ``"cuda:n"``.

    Attributes
    ----------
    type : str
        ``"cpu"``, ``"cuda"``, ...
    index : int or None
        The device's ordinal; None means "the current one".

    Equal devices compare equal and hash alike; a device never equals a
    string (as torch: ``device("cpu") == "cpu"`` is False).
    """

    __slots__ = ("_type", "_index")

    def __init__(self, type, index=None):  # noqa: A002  (torch's argument name)
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): an index cannot be given with a device")
            typ, idx = type.type, type.index
        elif isinstance(type, bool):
            raise TypeError(f"device(): expected a string, a device or an int, got bool {type!r}")
        elif isinstance(type, int):
            if index is not None:
                raise TypeError("device(): an index cannot be given with an int device")
            if type < 0:
                raise RuntimeError(f"Device index must not be negative, got {type}")
            typ, idx = "cuda", type
        elif isinstance(type, str):
            typ, idx = _parse(type)
            if index is not None:
                if idx is not None:
                    raise RuntimeError(f"type (string) must not include an index because index was passed "
                                       f"explicitly: {type}")
                if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                    raise RuntimeError(f"Device index must be a non-negative int, got {index!r}")
                idx = index
        else:
            raise TypeError(f"device(): expected a string, a device or an int, got {builtins.type(type).__name__}")
        object.__setattr__(self, "_type", typ)
        object.__setattr__(self, "_index", idx)

    @property
    def type(self):
        return self._type

    @property
    def index(self):
        return self._index

    def __setattr__(self, name, value):
        raise AttributeError(f"device is immutable: cannot set {name!r}")

    def __eq__(self, other):
        if not isinstance(other, device):
            return NotImplemented
        return self._type == other._type and self._index == other._index

    def __hash__(self):
        return hash((self._type, self._index))

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __reduce__(self):
        return (device, (self._type, self._index))


CPU = device("cpu")


def check_device(dev, where):
    """The CPU device that ``dev`` stands for, or a clear error.

    For the ``device=`` arguments of creation functions and ``.to()``:
    None, ``"cpu"``, ``"cpu:0"`` and ``device("cpu")`` are the CPU; any
    other device raises :class:`DeviceUnavailableError` naming ``where``.

    Parameters
    ----------
    dev : None, str, int or device
        (or another library's device object: its ``type`` and ``index``)
    where : str
        The function asking, for the message (``"zeros"``, ``"Tensor.to"``).

    Returns
    -------
    device
        ``device("cpu")``.
    """
    if dev is None:
        return CPU
    if not isinstance(dev, (device, str, int)) and isinstance(getattr(dev, "type", None), str):
        dev = device(dev.type, getattr(dev, "index", None))      # another library's device object (torch's)
    d = dev if isinstance(dev, device) else device(dev)
    if d.type != "cpu" or d.index not in (None, 0):
        raise DeviceUnavailableError(f"{where}: device {str(d)!r} is not available: dynnets computes on the CPU "
                                     f"only (dynnets.cuda.is_available() is False); use device='cpu'")
    return CPU
