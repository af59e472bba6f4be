"""Device and backend scaffolding: ``dynnets.device``, ``dynnets.cuda``,
``dynnets.backends``, ``check_device`` (a clear error for any device but the
CPU), legacy ``autograd.Variable`` and ``nn.utils.clip_grad_norm``.
torch's answers to the same calls are compared in
``tests/parity/test_torch_scaffold.py``."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import dynnets as dn
from dynnets import nn
from dynnets.autograd import Variable
from dynnets.devices import DeviceUnavailableError, check_device


def test_device_objects():
    d = dn.device("cuda:1")
    assert (d.type, d.index, str(d), repr(d)) == ("cuda", 1, "cuda:1", "device(type='cuda', index=1)")
    assert dn.device("cuda", 1) == d == dn.device(d) == dn.device(1) and hash(d) == hash(dn.device("cuda", 1))
    assert dn.device("cpu") != dn.device("cpu", 0) and dn.device("cpu") != "cpu"
    assert {dn.device("cpu"): 1}[dn.device("cpu")] == 1
    assert pickle.loads(pickle.dumps(d)) == d
    with pytest.raises(AttributeError, match="immutable"):
        d.index = 0
    for bad in ("gpu", "cuda:x", "cuda:-1", "cpu:0:1", "CPU", "cuda:01"):
        with pytest.raises(RuntimeError):
            dn.device(bad)
    with pytest.raises(RuntimeError, match="must not include an index"):
        dn.device("cuda:0", 1)
    with pytest.raises(TypeError, match="got float"):
        dn.device(1.0)


def test_check_device_accepts_the_cpu_only():
    for ok in (None, "cpu", "cpu:0", dn.device("cpu"), dn.device("cpu", 0)):
        assert check_device(ok, "zeros") == dn.device("cpu")
    for bad in ("cuda", "cuda:0", dn.device("mps"), 0, "cpu:1"):
        with pytest.raises(DeviceUnavailableError, match=r"zeros: device '.*' is not available.*CPU only"):
            check_device(bad, "zeros")
    # torch's CPU-only build raises AssertionError for the same request: both excepts catch it
    assert issubclass(DeviceUnavailableError, RuntimeError) and issubclass(DeviceUnavailableError, AssertionError)


def test_cuda_and_backends_answer_as_a_cpu_build():
    assert dn.cuda.is_available() is False and dn.cuda.device_count() == 0 and dn.cuda.is_initialized() is False
    state = dn.default_generator.bit_generator.state
    assert dn.cuda.manual_seed(3) is None and dn.cuda.manual_seed_all(3) is None and dn.cuda.empty_cache() is None
    assert dn.default_generator.bit_generator.state == state          # the CPU stream is untouched
    with pytest.raises(TypeError, match="seed must be an integer"):
        dn.cuda.manual_seed("x")
    for fn in (dn.cuda.current_device, dn.cuda.synchronize, dn.cuda.get_device_name):
        with pytest.raises(DeviceUnavailableError, match="no CUDA device"):
            fn()
    cudnn = dn.backends.cudnn
    assert (cudnn.enabled, cudnn.deterministic, cudnn.benchmark) == (True, False, False)
    cudnn.deterministic, cudnn.benchmark = True, True
    try:
        assert cudnn.deterministic is True and cudnn.benchmark is True
    finally:
        cudnn.deterministic, cudnn.benchmark = False, False
    assert cudnn.is_available() is False and dn.backends.mps.is_available() is False
    dev = dn.device("cuda" if dn.cuda.is_available() else "cpu")
    assert dev == dn.device("cpu")


def test_variable_returns_a_detached_tensor_sharing_memory():
    x = dn.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    v = Variable(y)
    assert type(v) is dn.Tensor and v.requires_grad is False and v.is_leaf and v is not y
    assert np.shares_memory(np.asarray(v), np.asarray(y))
    w = Variable(dn.tensor([1.0, 2.0]), requires_grad=True)
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.data, [2.0, 4.0])
    assert isinstance(x, Variable) and isinstance(nn.Parameter(np.zeros(1)), Variable) and not isinstance(3, Variable)
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got numpy.ndarray"):
        Variable(np.ones(2))
    with pytest.warns(UserWarning, match="volatile was removed"):
        Variable(x, volatile=True)
    assert dn.autograd.Variable is Variable


def test_clip_grad_norm_is_the_deprecated_alias():
    p = nn.Parameter(np.ones(3))
    p.grad = dn.tensor(np.full(3, 10.0))
    with pytest.warns(FutureWarning, match="deprecated in favor of `dynnets.nn.utils.clip_grad_norm_`"):
        total = nn.utils.clip_grad_norm([p], 1.0)
    assert total == pytest.approx(np.sqrt(300.0))
    np.testing.assert_allclose(np.linalg.norm(p.grad.data), 1.0, rtol=1e-5)
