"""torch's scaffolding names against torch's CPU build: device strings
(parsed, printed, compared, refused), the CUDA and cuDNN answers,
``Variable`` and the deprecated ``clip_grad_norm``."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
from dynnets.autograd import Variable  # noqa: E402


@pytest.mark.parametrize("spec", ["cpu", "cuda", "cuda:0", "cuda:3", "mps", "meta", "cpu:0", ("cuda", 2), ("cpu", 0),
                                  "gpu", "cuda:x", "cuda:-1", "CPU", "cpu:0:1", "", ":0"])
def test_device_strings(spec):
    args = spec if isinstance(spec, tuple) else (spec,)
    try:
        want = torch.device(*args)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            dn.device(*args)
        return
    got = dn.device(*args)
    assert (repr(got), str(got), got.type, got.index) == (repr(want), str(want), want.type, want.index)
    assert (got == dn.device("cpu")) == (want == torch.device("cpu"))


def test_cuda_answers():
    assert dn.cuda.is_available() == torch.cuda.is_available() is False
    assert dn.cuda.device_count() == torch.cuda.device_count() == 0
    assert dn.cuda.manual_seed(1) is torch.cuda.manual_seed(1) is None
    assert dn.cuda.manual_seed_all(1) is torch.cuda.manual_seed_all(1) is None
    for name in ("current_device", "synchronize"):
        with pytest.raises(AssertionError):
            getattr(torch.cuda, name)()
        with pytest.raises(AssertionError):
            getattr(dn.cuda, name)()
    for name in ("enabled", "deterministic", "benchmark"):
        assert getattr(dn.backends.cudnn, name) == getattr(torch.backends.cudnn, name)
    assert dn.backends.mps.is_available() == torch.backends.mps.is_available()


def test_variable():
    for requires_grad in (False, True):
        t = torch.tensor([1.0, 2.0], requires_grad=True) * 2
        d = dn.tensor([1.0, 2.0], requires_grad=True) * 2
        tv, dv = torch.autograd.Variable(t, requires_grad=requires_grad), Variable(d, requires_grad=requires_grad)
        assert (tv.requires_grad, tv.is_leaf, tv is t) == (dv.requires_grad, dv.is_leaf, dv is d)
        np.testing.assert_array_equal(np.asarray(dv), tv.detach().numpy())
    assert isinstance(torch.ones(1), torch.autograd.Variable) and isinstance(dn.ones(1), Variable)


def test_clip_grad_norm_warning_and_value():
    tp = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    tp.grad = torch.full((3,), 10.0, dtype=torch.float64)
    dp = dn.nn.Parameter(np.ones(3))
    dp.grad = dn.tensor(np.full(3, 10.0))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        want = torch.nn.utils.clip_grad_norm([tp], 2.0)
        got = dn.nn.utils.clip_grad_norm([dp], 2.0)
    assert [x.category for x in w] == [FutureWarning, FutureWarning]
    assert float(got) == pytest.approx(float(want))
    np.testing.assert_allclose(dp.grad.data, tp.grad.numpy(), rtol=1e-12)


def _kinds(x, tensor_type):
    """The structure of a loaded object: container types, key types, tensors as 'T<dtype>/<requires_grad>'."""
    if isinstance(x, tensor_type):
        return f"T{np.asarray(x.detach() if hasattr(x, 'detach') else x).dtype}/{x.requires_grad}"
    if isinstance(x, dict):
        return (type(x).__name__, [(type(k).__name__, k, _kinds(v, tensor_type)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_kinds(v, tensor_type) for v in x])
    return (type(x).__name__, x)


def test_save_load_give_back_what_torchs_do(tmp_path):
    import collections

    def build(lib, tensor):
        f32 = np.float32
        return {"epoch": 3, "best": 0.81, "name": "m", "none": None,
                "weights": collections.OrderedDict(w=tensor(np.array([[1.0, 2.0]], f32)), b=tensor(np.ones(1, f32))),
                "state": {0: {"step": 2, "buf": tensor(np.zeros(2))}, 1: {"step": 2}},
                "hist": [1.5, (2, "x")], "ids": tensor(np.array([1, 2], dtype=np.int64))}

    torch.save(build(torch, torch.tensor), tmp_path / "t.pt")
    dn.save(build(dn, dn.tensor), tmp_path / "d.pt")
    want = _kinds(torch.load(tmp_path / "t.pt"), torch.Tensor)
    got = _kinds(dn.load(tmp_path / "d.pt"), dn.Tensor)
    assert got == want
