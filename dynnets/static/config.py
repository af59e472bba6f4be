"""TF1's session configuration and device placement, for code that sets them:
``ConfigProto``, ``GPUOptions`` and ``device``.

``tf.Session(config=tf.ConfigProto(...))`` is accepted: the protocol
buffer's fields can be given, read and set as in TF1 (a misspelt field is an
error, as there), and the session keeps the object as ``sess.config``. None
of them changes a run:

* ``gpu_options`` (``allow_growth``, ``per_process_gpu_memory_fraction``,
  ``visible_device_list``...), ``device_count``, ``allow_soft_placement`` and
  ``log_device_placement``: there is one device, the CPU, and every op is
  placed on it (as TF1 with ``allow_soft_placement=True`` does on a machine
  without a GPU); there are no placements to log.
* ``intra_op_parallelism_threads`` / ``inter_op_parallelism_threads`` are
  not mapped onto the BLAS thread count. TF1 sizes the session's own thread
  pools; a dynnets plan runs on the calling thread, and the only threads
  are numpy's BLAS library's, a process-wide setting that every other
  session and eager op shares. Setting it from a session's constructor
  would change them all until restored, and limiting it per ``Session.run``
  costs about 0.65 ms per run (``threadpoolctl.threadpool_limits``, measured
  here), more than a small plan's whole run. Limit the threads around the
  training loop instead: ``with dynnets.blas.blas_threads(1): ...``.

``with tf.device("/gpu:0"):`` (or ``"/cpu:0"``, ``"/job:worker/task:1"``,
a device function, None) is a no-op context: the ops built inside run on the
CPU, as TF1 places them with soft placement on a machine without a GPU. The
string is checked as TF1's ``DeviceSpec`` parses it, so a malformed one is
an error.
"""
from __future__ import annotations

import contextlib
import re

__all__ = ["ConfigProto", "GPUOptions", "device"]


class _Message:
    """A protocol-buffer-like record: known fields with defaults and types;
    an unknown field, given or set, is an error as with protobuf."""

    _FIELDS: dict = {}          # name -> (type, default)
    __slots__ = ("_values",)

    def __init__(self, **kwargs):
        object.__setattr__(self, "_values", {})
        for name, (tp, default) in self._FIELDS.items():
            if isinstance(tp, type) and issubclass(tp, _Message):
                self._values[name] = tp()
            elif tp is dict:
                self._values[name] = {}
            elif tp is list:
                self._values[name] = []
            else:
                self._values[name] = default
        for k, v in kwargs.items():
            if k not in self._FIELDS:
                raise ValueError(f'Protocol message {type(self).__name__} has no "{k}" field.')
            setattr(self, k, v)

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __setattr__(self, name, value):
        if name not in self._FIELDS:
            raise AttributeError(f"{type(self).__name__} has no field {name!r} (fields: "
                                 f"{', '.join(self._FIELDS)})")
        tp, _ = self._FIELDS[name]
        self._values[name] = _check(type(self).__name__, name, tp, value)

    def __eq__(self, other):
        return type(other) is type(self) and other._values == self._values

    def __repr__(self):
        set_ = [f"{k}={v!r}" for k, v in self._values.items()
                if v != self._FIELDS[k][1] and not (isinstance(v, (_Message, dict, list)) and not _nonempty(v))]
        return f"{type(self).__name__}({', '.join(set_)})"


def _nonempty(v):
    if isinstance(v, _Message):
        return any(x != v._FIELDS[k][1] and not (isinstance(x, (_Message, dict, list)) and not _nonempty(x))
                   for k, x in v._values.items())
    return bool(v)


def _check(owner, name, tp, value):
    bad = TypeError(f"{owner}.{name}: {value!r} has type {type(value).__name__}, but expected "
                    f"{getattr(tp, '__name__', tp)}")
    if tp is bool:
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return bool(value)
        raise bad
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise bad
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise bad
    if tp is str:
        if isinstance(value, str):
            return value
        raise bad
    if tp is dict:
        if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, int) for k, v in value.items()):
            return dict(value)
        raise bad
    if tp is list:
        if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
            return list(value)
        raise bad
    if isinstance(value, tp):
        return tp(**value._values)
    raise bad


class GPUOptions(_Message):
    """TF1's ``tf.GPUOptions``: accepted, no effect (there is no GPU)."""

    _FIELDS = {"per_process_gpu_memory_fraction": (float, 0.0), "allow_growth": (bool, False),
               "allocator_type": (str, ""), "deferred_deletion_bytes": (int, 0), "visible_device_list": (str, ""),
               "polling_active_delay_usecs": (int, 0), "polling_inactive_delay_msecs": (int, 0),
               "force_gpu_compatible": (bool, False)}
    __slots__ = ()


class ConfigProto(_Message):
    """TF1's ``tf.ConfigProto``: accepted by ``Session(config=)``; no field
    changes a run (see the module docstring for each one and why)."""

    _FIELDS = {"device_count": (dict, None), "intra_op_parallelism_threads": (int, 0),
               "inter_op_parallelism_threads": (int, 0), "use_per_session_threads": (bool, False),
               "placement_period": (int, 0), "device_filters": (list, None), "gpu_options": (GPUOptions, None),
               "allow_soft_placement": (bool, False), "log_device_placement": (bool, False),
               "operation_timeout_in_ms": (int, 0), "isolate_session_state": (bool, False),
               "share_cluster_devices_in_session": (bool, False)}
    __slots__ = ()


# TF1's DeviceSpec grammar: /job:<name>/replica:<n>/task:<n>/device:<TYPE>:<n|*>, or the legacy <type>:<n|*>
_PART = re.compile(r"^(?:job:[A-Za-z0-9_.-]*|replica:\d+|task:\d+|device:[A-Za-z_][A-Za-z0-9_]*(?::(?:\d+|\*))?|"
                   r"(?:cpu|gpu|CPU|GPU)(?::(?:\d+|\*))?|(?:cpu|gpu|CPU|GPU)?\*?)$")


def _check_device_string(spec):
    for part in spec.split("/"):
        if part and not _PART.match(part):
            raise ValueError(f"device: unknown attribute {part!r} in {spec!r} (TF1's device strings look like "
                             f"'/cpu:0', '/device:GPU:1', '/job:worker/task:0')")


@contextlib.contextmanager
def device(device_name_or_function):
    """TF1's ``tf.device``: a no-op context; the ops built inside run on the CPU.

    Parameters
    ----------
    device_name_or_function : str, callable or None
        A device string (checked as TF1 parses it: ``"/cpu:0"``,
        ``"/gpu:0"``, ``"/device:GPU:1"``, ``"/job:ps/task:0"``...), a device
        function (as TF1's, called with each op; not called here) or None.
    """
    if isinstance(device_name_or_function, str):
        _check_device_string(device_name_or_function)
    elif device_name_or_function is not None and not callable(device_name_or_function):
        raise TypeError(f"device: expected a device string, a function or None, got "
                        f"{type(device_name_or_function).__name__}")
    yield
