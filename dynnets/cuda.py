"""``dynnets.cuda``: torch's CUDA queries, answered for a CPU-only library.

``is_available()`` is False and ``device_count()`` 0, so the usual
``if torch.cuda.is_available():`` branches take their CPU side. Seeding
(``manual_seed``, ``manual_seed_all``, ``seed``, ``seed_all``) and
``empty_cache`` do nothing, as torch's do where no GPU is initialised: there
is no GPU generator to seed, so the CPU stream (:func:`dynnets.manual_seed`)
is unchanged. What needs a GPU (``current_device``, ``set_device``,
``synchronize``, ``get_device_name``...) raises
:class:`~dynnets.devices.DeviceUnavailableError`, as torch built without
CUDA does.
"""
from __future__ import annotations

from .devices import DeviceUnavailableError

__all__ = ["is_available", "device_count", "is_initialized", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "initial_seed", "empty_cache", "current_device", "set_device", "synchronize", "get_device_name",
           "get_device_properties", "init"]


def is_available():
    """False: dynnets computes on the CPU only."""
    return False


def device_count():
    """0 GPUs."""
    return 0


def is_initialized():
    """False: there is no CUDA context to initialise."""
    return False


def _check_seed(seed, where):
    try:
        return int(seed)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: seed must be an integer, got {type(seed).__name__} {seed!r}") from None


def manual_seed(seed):
    """Nothing to seed (no GPU generator); the seed must still be an integer.
    :func:`dynnets.manual_seed` seeds the CPU generator, as in torch."""
    _check_seed(seed, "cuda.manual_seed")


def manual_seed_all(seed):
    """Nothing to seed (no GPU generators); see :func:`manual_seed`."""
    _check_seed(seed, "cuda.manual_seed_all")


def seed():
    """Nothing to seed (no GPU generator)."""


def seed_all():
    """Nothing to seed (no GPU generators)."""


def empty_cache():
    """Nothing to release: no GPU memory is held (torch's is a no-op too
    before CUDA is initialised)."""


def _unavailable(name):
    raise DeviceUnavailableError(f"cuda.{name}: no CUDA device: dynnets computes on the CPU only "
                                 f"(dynnets.cuda.is_available() is False)")


def initial_seed():
    _unavailable("initial_seed")


def current_device():
    _unavailable("current_device")


def set_device(device):
    _unavailable("set_device")


def synchronize(device=None):
    _unavailable("synchronize")


def get_device_name(device=None):
    _unavailable("get_device_name")


def get_device_properties(device):
    _unavailable("get_device_properties")


def init():
    _unavailable("init")
