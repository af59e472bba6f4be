"""Creation functions, devices, dtypes and the legacy tensor types against
torch's CPU build (issue 22 section 3): the dtype and shape torch gives (and
the values, where they are not random) with ``device=`` given as a string or
a device object, the same refusals of a CUDA device, ``Tensor.to`` /
``cuda`` / ``device`` / ``is_cuda`` / ``type``, ``x.new(...)``, the legacy
constructors and ``isinstance`` checks with them, and the default dtype."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
from dynnets.devices import DeviceUnavailableError  # noqa: E402

from ._common import assert_close, numpy_dtype  # noqa: E402

#: (name, positional args, keyword args), each called as torch.<name> and dn.<name>
DETERMINISTIC = [
    ("tensor", ([1, 2],), {}), ("tensor", ([1.5, 2],), {}), ("tensor", ([[True, False]],), {}),
    ("tensor", (np.array([1.0, 2.0]),), {}), ("tensor", ([1, 2],), {"dtype": "float64"}),
    ("as_tensor", ([1, 2],), {}), ("as_tensor", (np.arange(3.0),), {}),
    ("zeros", (2, 3), {}), ("zeros", ((2, 3),), {"dtype": "int64"}), ("ones", (4,), {}),
    ("ones", ([2, 2],), {"dtype": "float64"}), ("empty", (2, 3), {}), ("empty", ((0, 2),), {"dtype": "int64"}),
    ("full", ((2, 2), 7), {}), ("full", ((2,), 1.5), {}), ("full", ((3,), True), {}),
    ("full", ((2,), 2.7), {"dtype": "int64"}),
    ("arange", (5,), {}), ("arange", (1, 2.5, 0.5), {}), ("arange", (0, 10, 3), {}), ("arange", (), {"end": 4}),
    ("arange", (2, 5), {"dtype": "float64"}),
    ("linspace", (0, 1, 5), {}), ("linspace", (-3.7, 11.2, 101), {"dtype": "float64"}),
    ("linspace", (0, 10, 5), {"dtype": "int64"}), ("linspace", (2, 2, 1), {}), ("linspace", (0, 1, 0), {}),
    ("logspace", (0, 2, 3), {}), ("logspace", (-1.5, 1.2, 7), {"base": 2.0, "dtype": "float64"}),
    ("eye", (3,), {}), ("eye", (2, 4), {"dtype": "float64"}), ("eye", (3, 1), {"dtype": "int64"}),
]

LIKE = [("zeros_like", (), {}), ("ones_like", (), {}), ("empty_like", (), {}), ("full_like", (2.7,), {}),
        ("zeros_like", (), {"dtype": "float64"}), ("full_like", (3,), {"dtype": "float32"})]

RANDOM = [("randn", (2, 3), {}), ("randn", ((4,),), {"dtype": "float64"}), ("rand", (3, 2), {}),
          ("rand", (5,), {"dtype": "float64"}), ("randint", (10, (3, 2)), {}), ("randint", (3, 10, (4,)), {}),
          ("randint", (), {"low": 0, "high": 5, "size": (2,)}), ("randint", (10, (2,)), {"dtype": "float32"}),
          ("randperm", (6,), {}), ("randperm", (4,), {"dtype": "float64"})]


def _kw(kw, lib):
    out = dict(kw)
    if "dtype" in out:
        out["dtype"] = getattr(lib, out["dtype"])
    return out


def _devices(lib):
    return ["cpu", "cpu:0", lib.device("cpu"), None]


@pytest.mark.parametrize("name,args,kw", DETERMINISTIC + RANDOM,
                         ids=[f"{n}{a}{k}".replace(" ", "") for n, a, k in DETERMINISTIC + RANDOM])
def test_creation_takes_device_and_gives_torchs_dtype_shape_and_values(name, args, kw):
    for k in range(4):
        t = getattr(torch, name)(*args, **_kw(kw, torch), device=_devices(torch)[k])
        d = getattr(dn, name)(*args, **_kw(kw, dn), device=_devices(dn)[k])
        assert isinstance(d, dn.Tensor) and d.device == dn.device("cpu")
        assert d.dtype == numpy_dtype(t.dtype) and tuple(d.shape) == tuple(t.shape), (d.dtype, t.dtype, d.shape)
    if name not in ("empty", "randn", "rand", "randint", "randperm"):
        want = t.numpy()
        assert_close(d.numpy(), want, want.dtype if want.dtype.kind == "f" else np.float64, name)
    for dev in ("cuda", "cuda:0", dn.device("cuda", 1)):
        tdev = dev if isinstance(dev, str) else torch.device("cuda", 1)
        with pytest.raises((AssertionError, RuntimeError)):
            getattr(torch, name)(*args, **_kw(kw, torch), device=tdev)
        with pytest.raises(DeviceUnavailableError, match=f"{name}: device 'cuda(:0|:1)?' is not available"):
            getattr(dn, name)(*args, **_kw(kw, dn), device=dev)


@pytest.mark.parametrize("name,args,kw", LIKE, ids=[f"{n}{a}{k}" for n, a, k in LIKE])
@pytest.mark.parametrize("src", [np.arange(6, dtype=np.int64).reshape(2, 3), np.ones((3,), np.float32)])
def test_like_functions(name, args, kw, src):
    t = getattr(torch, name)(torch.tensor(src), *args, **_kw(kw, torch), device="cpu")
    d = getattr(dn, name)(dn.tensor(src), *args, **_kw(kw, dn), device="cpu")
    assert d.dtype == numpy_dtype(t.dtype) and tuple(d.shape) == tuple(t.shape)
    if name != "empty_like":
        np.testing.assert_array_equal(d.numpy(), t.numpy())
    with pytest.raises(DeviceUnavailableError):
        getattr(dn, name)(dn.tensor(src), *args, **_kw(kw, dn), device="cuda")


@pytest.mark.parametrize("name", ["rand_like", "randn_like"])
def test_random_like_functions(name):
    src = np.ones((2, 3), np.float64)
    t = getattr(torch, name)(torch.tensor(src))
    d = getattr(dn, name)(dn.tensor(src), generator=dn.Generator().manual_seed(3))
    assert d.dtype == numpy_dtype(t.dtype) and tuple(d.shape) == tuple(t.shape)
    with pytest.raises(TypeError, match=f"{name}: dtype must be a floating-point type"):
        getattr(dn, name)(dn.tensor([1, 2]))


def test_random_draws_repeat_with_the_seed_and_the_generator():
    draws = [lambda **g: dn.randn(3, 2, **g), lambda **g: dn.rand(4, **g), lambda **g: dn.randint(0, 100, (5,), **g),
             lambda **g: dn.randperm(20, **g), lambda **g: dn.rand_like(dn.ones(3), **g),
             lambda **g: dn.randn_like(dn.ones(3), **g)]
    for draw in draws:
        dn.manual_seed(7)
        a = draw().numpy()
        b = draw().numpy()
        dn.manual_seed(7)
        np.testing.assert_array_equal(draw().numpy(), a)         # the default generator, as torch.manual_seed
        assert not np.array_equal(a, b)
        g1, g2 = dn.Generator().manual_seed(5), dn.Generator().manual_seed(5)
        np.testing.assert_array_equal(draw(generator=g1).numpy(), draw(generator=g2).numpy())
    assert sorted(dn.randperm(50).tolist()) == list(range(50))
    r = dn.randint(3, 7, (1000,)).numpy()
    assert r.min() == 3 and r.max() == 6
    u = dn.rand(1000).numpy()
    assert 0 <= u.min() and u.max() < 1
    with pytest.raises(TypeError, match="randn: got both generator= and rng="):
        dn.randn(2, generator=dn.Generator(), rng=1)


@pytest.mark.parametrize("call", [
    lambda lib: lib.randint(5, 5, (2,)), lambda lib: lib.randint(10), lambda lib: lib.randperm(-1),
    lambda lib: lib.eye(-1), lambda lib: lib.linspace(0, 1, -1), lambda lib: lib.zeros(2, requires_grad=False).new(-1),
    lambda lib: lib.randint(0, 5, (2,), requires_grad=True), lambda lib: lib.rand(2, dtype=lib.int64),
    lambda lib: lib.arange(5, 0), lambda lib: lib.arange(0, 5, 0), lambda lib: lib.tensor([1, 2], requires_grad=True),
    lambda lib: lib.set_default_dtype(lib.int64),
])
def test_bad_creation_arguments_raise_as_torchs(call):
    with pytest.raises((RuntimeError, ValueError, TypeError)):
        call(torch)
    with pytest.raises((RuntimeError, ValueError, TypeError)):
        call(dn)


def test_tensor_device_attributes_and_to():
    for lib in (torch, dn):
        x = lib.tensor([1.0, 2.0])
        assert str(x.device) == "cpu" and repr(x.device) == "device(type='cpu')" and x.is_cuda is False
        assert x.get_device() == -1
        assert x.device == lib.device("cpu") and x.device.type == "cpu" and x.device.index is None
        assert x.to("cpu") is x and x.to(lib.device("cpu")) is x and x.to(x.device) is x
        assert x.to("cpu", lib.float64).dtype == lib.float64 and x.to(lib.device("cpu"), lib.int64).dtype == lib.int64
        assert x.to(lib.tensor([1])).dtype == lib.int64               # to(other): other's dtype (and device)
        assert x.to(device="cpu", dtype=lib.float64).dtype == lib.float64
        dev = lib.device("cuda" if lib.cuda.is_available() else "cpu")
        assert x.to(dev) is x                                         # the usual torch idiom picks the CPU
        for bad in (lambda: x.cuda(), lambda: x.to("cuda"), lambda: x.to(lib.device("cuda:0")),
                    lambda: x.to("cuda", lib.float64)):
            with pytest.raises(AssertionError):
                bad()
    with pytest.raises(DeviceUnavailableError, match="Tensor.cuda: no CUDA device"):
        dn.ones(1).cuda()
    assert dn.ones(1).to(torch.device("cpu")).device == dn.device("cpu")  # another library's device object


LEGACY = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
          "ByteTensor", "BoolTensor"]


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_constructors_and_isinstance(name):
    T, D = getattr(torch, name), getattr(dn, name)
    for args in ([1, 0, 2],), ([[1.5, 2.0], [0.0, 1.0]],), (np.array([3, 1]),), ((2, 3),), (2, 3), (0,), ():
        t, d = T(*args), D(*args)
        assert type(d) is dn.Tensor and d.dtype == numpy_dtype(t.dtype) and tuple(d.shape) == tuple(t.shape)
        if not (args and isinstance(args[0], int)):               # sizes: torch leaves the values unset
            np.testing.assert_array_equal(d.numpy(), t.numpy())
    assert T(2, device="cpu").shape == D(2, device="cpu").shape
    with pytest.raises(DeviceUnavailableError):
        D(2, device="cuda")
    for bad in ((2.5,), (-1,)):
        with pytest.raises((TypeError, RuntimeError)):
            T(*bad)
        with pytest.raises((TypeError, ValueError)):
            D(*bad)
    for dt in ("float32", "float64", "int64", "int32", "uint8", "bool"):
        tx, dx = torch.zeros(2, dtype=getattr(torch, dt)), dn.zeros(2, dtype=getattr(dn, dt))
        assert isinstance(dx, D) == isinstance(tx, T), (name, dt)
        assert isinstance(dx, dn.Tensor) and not isinstance(np.zeros(2), D)
    assert dn.tensor([1, 2]).type(D).dtype == numpy_dtype(torch.tensor([1, 2]).type(T).dtype)


def test_legacy_tensor_of_a_tensor():
    t, d = torch.LongTensor(torch.tensor([1, 2])), dn.LongTensor(dn.tensor([1, 2]))
    np.testing.assert_array_equal(d.numpy(), t.numpy())
    with pytest.raises(TypeError):
        torch.LongTensor(torch.tensor([1.5]))
    with pytest.raises(TypeError, match="LongTensor: expected a tensor of dtype int64"):
        dn.LongTensor(dn.tensor([1.5]))


def test_type_strings_and_conversions():
    for data in ([1, 2], [1.0], [True], np.array([1], np.float64), np.array([1], np.uint8), np.array([1], np.int32)):
        t, d = torch.tensor(data), dn.tensor(data)
        assert d.type() == t.type()
        for target in ("torch.FloatTensor", "torch.LongTensor", "torch.DoubleTensor"):
            assert d.type(target).dtype == numpy_dtype(t.type(target).dtype)
        for dt in ("float64", "int32", "bool"):
            assert d.type(getattr(dn, dt)).dtype == numpy_dtype(t.type(getattr(torch, dt)).dtype)
        assert d.is_floating_point() == t.is_floating_point() == dn.is_floating_point(d)
    x = dn.tensor([1.0])
    assert x.type(dn.float32) is x
    with pytest.raises(DeviceUnavailableError):
        x.type("torch.cuda.FloatTensor")
    with pytest.raises(ValueError, match="Tensor.type: invalid type 'torch.Nonsense'"):
        x.type("torch.Nonsense")


def test_tensor_new():
    for src in ([1, 2], [1.5]):
        t, d = torch.tensor(src), dn.tensor(src)
        for args in ((2, 3), ([4, 5.5],), ()):
            tn, dn_ = t.new(*args), d.new(*args)
            assert dn_.dtype == numpy_dtype(tn.dtype) and tuple(dn_.shape) == tuple(tn.shape)
            if args and not isinstance(args[0], int):
                np.testing.assert_array_equal(dn_.numpy(), tn.numpy())
        assert tuple(d.new_empty(2, 2).shape) == tuple(t.new_empty(2, 2).shape)
        assert d.new_empty((3,)).dtype == numpy_dtype(t.new_empty((3,)).dtype)


def test_default_dtype():
    assert dn.get_default_dtype() == numpy_dtype(torch.get_default_dtype()) == np.float32
    dn.set_default_dtype(dn.float32)
    with pytest.raises(NotImplementedError, match="set_default_dtype: dynnets' default dtype is float32 and cannot "
                                                  "be changed"):
        dn.set_default_dtype(dn.float64)
    with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
        dn.set_default_dtype(dn.int64)
    assert dn.is_tensor(dn.ones(1)) and not dn.is_tensor(np.ones(1)) and torch.is_tensor(torch.ones(1))


def test_a_torch_device_script_runs_on_the_cpu():
    # the idiom of nearly every torch script, written for dynnets as `import dynnets as torch`
    torch_ = dn
    device = torch_.device("cuda" if torch_.cuda.is_available() else "cpu")
    model = torch_.nn.Linear(3, 2).to(device)
    x = torch_.randn(4, 3, device=device)
    y = torch_.tensor([0, 1, 1, 0], device=device)
    loss = torch_.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
    loss.backward()
    assert model.weight.grad.device == device and loss.item() > 0


def test_every_device_refusal_is_caught_as_torchs_is():
    # torch built without CUDA raises AssertionError (RuntimeError for some calls): an `except` written for
    # torch catches dynnets' refusal of tensors and modules alike
    calls = [lambda lib: lib.zeros(2, device="cuda"), lambda lib: lib.ones(2).cuda(),
             lambda lib: lib.ones(2).to("cuda"), lambda lib: lib.nn.Linear(2, 2).cuda(),
             lambda lib: lib.nn.Linear(2, 2).to("cuda"), lambda lib: lib.nn.Linear(2, 2, device="cuda")]
    for call in calls:
        with pytest.raises(AssertionError):
            call(torch)
        with pytest.raises(AssertionError):
            call(dn)
        with pytest.raises(RuntimeError):
            call(dn)


#: (name, call(lib, a32, b64)) where torch refuses operands of two float dtypes; its elementwise ops promote
MIXED_REFUSED = [
    ("matmul", lambda lib, a, b: lib.matmul(a, b)), ("@", lambda lib, a, b: a @ b),
    ("mm", lambda lib, a, b: lib.mm(a, b)), ("bmm", lambda lib, a, b: lib.bmm(a[None], b[None])),
    ("dot", lambda lib, a, b: lib.dot(a[0], b[:, 0])), ("einsum", lambda lib, a, b: lib.einsum("ij,jk->ik", a, b)),
    ("F.linear weight", lambda lib, a, b: lib.nn.functional.linear(a, b.T)),
    ("F.linear bias", lambda lib, a, b: lib.nn.functional.linear(a, a.T[:3], b[:3, 0])),
    ("F.binary_cross_entropy", lambda lib, a, b: lib.nn.functional.binary_cross_entropy(
        lib.sigmoid(a), lib.sigmoid(b.T))),
    ("int32 @ int64", lambda lib, a, b: lib.ones(2, 2, dtype=lib.int32) @ lib.ones(2, 2, dtype=lib.int64)),
]
MIXED_PROMOTED = [
    ("add", lambda lib, a, b: a + b.T), ("mul", lambda lib, a, b: a * b.T), ("maximum", lambda lib, a, b: lib.maximum(a, b.T)),
    ("where", lambda lib, a, b: lib.where(a > 0, a, b.T)), ("cat", lambda lib, a, b: lib.cat([a, b.T])),
    ("mse_loss", lambda lib, a, b: lib.nn.functional.mse_loss(a, b.T)),
]


@pytest.mark.parametrize("name,call", MIXED_REFUSED + MIXED_PROMOTED, ids=[n for n, _ in MIXED_REFUSED + MIXED_PROMOTED])
def test_mixed_float_dtypes_refused_or_promoted_as_torch(name, call):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 3))
    ta, tb, da, db = torch.tensor(a), torch.tensor(b), dn.tensor(a), dn.tensor(b)
    if (name, call) in MIXED_REFUSED:
        with pytest.raises(RuntimeError):
            call(torch, ta, tb)
        with pytest.raises(TypeError, match="dtype"):
            call(dn, da, db)
    else:
        want, got = call(torch, ta, tb), call(dn, da, db)
        assert got.dtype == numpy_dtype(want.dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
