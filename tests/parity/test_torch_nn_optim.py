"""The optimizers added for PyTorch's names (``AdamW``, ``RMSprop``, Adam's
``amsgrad``, lazy Adam as ``SparseAdam``) and the learning-rate schedulers of
``dynnets.optim.lr_scheduler`` against ``torch.optim`` over several steps, in
float64: parameters equal to rounding, with param groups, row-sparse
gradients, schedulers driving the rates, and state_dict round trips.
"""
from __future__ import annotations

import importlib.util
import math
import os
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets as dn  # noqa: E402
from dynnets import nn  # noqa: E402
from dynnets.optim import lr_scheduler as dls  # noqa: E402

_spec = importlib.util.spec_from_file_location("_parity_common", os.path.join(os.path.dirname(__file__), "_common.py"))
C = sys.modules.get("_parity_common") or importlib.util.module_from_spec(_spec)
if "_parity_common" not in sys.modules:
    sys.modules["_parity_common"] = C
    _spec.loader.exec_module(C)

tls = torch.optim.lr_scheduler
_A = np.random.default_rng(80).standard_normal((4, 3))


def _loss_dn(ws):
    w, v = ws
    return dn.sum(dn.tanh(dn.matmul(dn.tensor(_A), w)) ** 2) + dn.sum(v * v * v) * 0.1 + dn.sum(w * v[0])


def _loss_torch(ws):
    w, v = ws
    return (torch.tanh(torch.tensor(_A) @ w) ** 2).sum() + (v * v * v).sum() * 0.1 + (w * v[0]).sum()


def _pair_params():
    rng = np.random.default_rng(81)
    w0 = [rng.standard_normal((3, 2)), rng.standard_normal((2,))]
    return [dn.Parameter(w.copy()) for w in w0], [torch.nn.Parameter(torch.tensor(w.copy())) for w in w0]


def _step_both(dopt, topt, dws, tws):
    dopt.zero_grad()
    topt.zero_grad()
    _loss_dn(dws).backward()
    _loss_torch(tws).backward()
    dopt.step()
    topt.step()


def _same(dws, tws, what):
    for d, t in zip(dws, tws):
        C.assert_close(d.data, t.detach().numpy(), np.float64, what, rtol=1e-9)


OPTIMIZERS = [
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.05, weight_decay=0.3)),
    ("AdamW", dict(lr=0.05, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, amsgrad=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.02, alpha=0.9, eps=1e-4)),
    ("RMSprop", dict(lr=0.02, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.05)),
    ("SGD", dict()),                                # torch's default lr (1e-3)
]


@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}"
                                                     for n, kw in OPTIMIZERS])
def test_optimizer_steps(name, kw):
    dws, tws = _pair_params()
    dopt, topt = getattr(dn.optim, name)(dws, **kw), getattr(torch.optim, name)(tws, **kw)
    for step in range(8):
        _step_both(dopt, topt, dws, tws)
        _same(dws, tws, f"{name} step {step + 1}")
    # the state holds torch's entries under torch's names
    for d, t in zip(dws, tws):
        tstate = {k: v for k, v in topt.state[t].items() if v is not None}     # torch's SGD keeps a None buffer
        assert set(dopt.state.get(d, {})) == set(tstate)
        for k, v in tstate.items():
            C.assert_close(np.asarray(dopt.state[d][k], np.float64), v.numpy(), np.float64, f"{name} state {k}",
                           rtol=1e-9)


def test_optimizer_positional_arguments_mean_torchs():
    # Adam(params, lr, betas, eps, weight_decay, amsgrad): the sixth is amsgrad (not dynnets' lazy)
    for name, args in (("Adam", (0.05, (0.8, 0.9), 1e-6, 0.1, True)), ("AdamW", (0.05, (0.8, 0.9), 1e-6, 0.1, True)),
                       ("RMSprop", (0.01, 0.9, 1e-6, 0.1, 0.5, True)), ("SGD", (0.05, 0.9, 0.1, 0.01, False)),
                       ("Adagrad", (0.05, 0.1, 0.01, 0.2, 1e-6))):
        dws, tws = _pair_params()
        dopt, topt = getattr(dn.optim, name)(dws, *args), getattr(torch.optim, name)(tws, *args)
        for _ in range(4):
            _step_both(dopt, topt, dws, tws)
        _same(dws, tws, name)


@pytest.mark.parametrize("name", ["AdamW", "RMSprop"])
def test_param_groups(name):
    dws, tws = _pair_params()
    groups = lambda ps: [{"params": [ps[0]], "lr": 0.02, "weight_decay": 0.2}, {"params": [ps[1]]}]  # noqa: E731
    dopt, topt = getattr(dn.optim, name)(groups(dws), lr=0.1), getattr(torch.optim, name)(groups(tws), lr=0.1)
    for _ in range(5):
        _step_both(dopt, topt, dws, tws)
    _same(dws, tws, name)


def _sparse_run(dn_opt, torch_opt, torch_sparse=True):
    """An embedding table trained on a few rows per step: dynnets' row-sparse
    gradient against torch's (sparse=True or dense)."""
    w0 = C.draw(np.random.default_rng(82), (7, 3))
    batches = [np.array([1, 3, 3]), np.array([0, 1]), np.array([6, 6, 6, 2]), np.array([3]), np.array([2, 1])]
    d = nn.Embedding.from_pretrained(w0, freeze=False)
    t = torch.nn.Embedding.from_pretrained(torch.tensor(w0), freeze=False, sparse=torch_sparse)
    dopt, topt = dn_opt(list(d.parameters())), torch_opt(list(t.parameters()))
    cot = C.draw(np.random.default_rng(83), (4, 3))
    for ids in batches:
        dopt.zero_grad()
        topt.zero_grad()
        (d(ids) * cot[:len(ids)]).sum().backward()
        (t(torch.tensor(ids)) * torch.tensor(cot[:len(ids)])).sum().backward()
        dopt.step()
        topt.step()
        C.assert_close(d.weight.data, t.weight.detach().numpy(), np.float64, "embedding table", rtol=1e-9)


@pytest.mark.parametrize("eps", [1e-8, 1e-3, 0.5])
def test_lazy_adam_is_sparse_adam(eps):
    _sparse_run(lambda p: dn.optim.Adam(p, lr=0.1, betas=(0.8, 0.95), eps=eps, lazy=True),
                lambda p: torch.optim.SparseAdam(p, lr=0.1, betas=(0.8, 0.95), eps=eps))


@pytest.mark.parametrize("name,kw", [("AdamW", dict(lr=0.1, weight_decay=0.2)), ("AdamW", dict(lr=0.1, weight_decay=0)),
                                     ("RMSprop", dict(lr=0.05, momentum=0.5, centered=True)),
                                     ("Adam", dict(lr=0.1, amsgrad=True))])
def test_row_sparse_gradients_take_the_dense_step(name, kw):
    _sparse_run(lambda p: getattr(dn.optim, name)(p, **kw), lambda p: getattr(torch.optim, name)(p, **kw),
                torch_sparse=False)


# --------------------------------------------------------------------------
# schedulers
# --------------------------------------------------------------------------

SCHEDULERS = [
    ("StepLR", (3,), dict()),
    ("StepLR", (2,), dict(gamma=0.5)),
    ("ExponentialLR", (0.9,), dict()),
    ("MultiStepLR", ([2, 5, 5, 9],), dict()),
    ("MultiStepLR", ([3, 6],), dict(gamma=0.5)),
    ("CosineAnnealingLR", (5,), dict()),
    ("CosineAnnealingLR", (4,), dict(eta_min=0.01)),
    ("LambdaLR", (lambda e: 1.0 / (1 + e),), dict()),
]


def _sched_ids(cases):
    return [f"{n}-{'-'.join(map(str, a))}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, a, kw in cases]


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW", "Adagrad", "RMSprop"])
@pytest.mark.parametrize("name,args,kw", SCHEDULERS, ids=_sched_ids(SCHEDULERS))
def test_scheduler_drives_every_optimizer(name, args, kw, opt):
    # two groups with their own rates; 14 epochs (past T_max: the cosine rises again); parameters and rates
    # equal to torch's after every step
    dws, tws = _pair_params()
    groups = lambda ps: [{"params": [ps[0]], "lr": 0.2}, {"params": [ps[1]]}]  # noqa: E731
    dopt, topt = getattr(dn.optim, opt)(groups(dws), lr=0.05), getattr(torch.optim, opt)(groups(tws), lr=0.05)
    ds_, ts_ = getattr(dls, name)(dopt, *args, **kw), getattr(tls, name)(topt, *args, **kw)
    assert ds_.get_last_lr() == ts_.get_last_lr() == [0.2, 0.05]
    for epoch in range(14):
        _step_both(dopt, topt, dws, tws)
        ds_.step()
        ts_.step()
        assert ds_.last_epoch == ts_.last_epoch == epoch + 1
        assert ds_.get_last_lr() == ts_.get_last_lr(), f"epoch {epoch + 1}"
        assert [g["lr"] for g in dopt.param_groups] == [g["lr"] for g in topt.param_groups]
        _same(dws, tws, f"{opt} with {name}, epoch {epoch + 1}")
    assert ds_.base_lrs == ts_.base_lrs == [0.2, 0.05]
    assert [g["initial_lr"] for g in dopt.param_groups] == [0.2, 0.05]


@pytest.mark.parametrize("kw", [dict(), dict(mode="max", factor=0.5, patience=1, threshold=0.1, threshold_mode="abs",
                                             cooldown=2, min_lr=[0.01, 0.002]),
                                dict(patience=0, threshold=0.05, min_lr=0.004, eps=1e-3)])
def test_reduce_lr_on_plateau(kw):
    metrics = [1.0, 0.9, 0.95, 0.91, 0.92, 0.899, 0.93, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0, 0.5, 0.6, 0.7,
               0.8, 0.9, 1.0, 1.1, 1.2] + [0.3] * 28
    dws, tws = _pair_params()
    groups = lambda ps: [{"params": [ps[0]], "lr": 0.2}, {"params": [ps[1]]}]  # noqa: E731
    dopt, topt = dn.optim.SGD(groups(dws), lr=0.05), torch.optim.SGD(groups(tws), lr=0.05)
    ds_, ts_ = dls.ReduceLROnPlateau(dopt, **kw), tls.ReduceLROnPlateau(topt, **kw)
    changed = 0
    for k, m in enumerate(metrics):
        _step_both(dopt, topt, dws, tws)
        before = ds_.get_last_lr()
        ds_.step(m)
        ts_.step(torch.tensor(m, dtype=torch.float64))     # a 0-d tensor is a metric too
        changed += before != ds_.get_last_lr()
        assert ds_.get_last_lr() == ts_.get_last_lr(), f"step {k}"
        assert (ds_.best, ds_.num_bad_epochs, ds_.cooldown_counter, ds_.last_epoch) == \
            (ts_.best, ts_.num_bad_epochs, ts_.cooldown_counter, ts_.last_epoch)
        _same(dws, tws, f"ReduceLROnPlateau step {k}")
    assert changed >= 2                            # the rates were reduced, more than once


class _Warmup:
    """A callable object as lr_lambda: its attributes are saved, as torch saves them."""

    def __init__(self, n):
        self.n = n

    def __call__(self, e):
        return min(1.0, (e + 1) / self.n)


def _train_scheduled(lib, ws, name, args, kw, epochs, resume_from=None):
    """SGD with momentum under a scheduler for ``epochs`` epochs (after loading
    ``resume_from`` = (optimizer state, scheduler state)); returns the
    optimizer, scheduler and the rates after each epoch."""
    optim, sched = (dn.optim, dls) if lib is dn else (torch.optim, tls)
    opt = optim.SGD(ws, lr=0.1, momentum=0.9)
    sch = getattr(sched, name)(opt, *args, **kw)
    if resume_from is not None:
        opt.load_state_dict(resume_from[0])
        sch.load_state_dict(resume_from[1])
    lrs = []
    for _ in range(epochs):
        opt.zero_grad()
        (_loss_dn if lib is dn else _loss_torch)(ws).backward()
        opt.step()
        sch.step()
        lrs.append(sch.get_last_lr())
    return opt, sch, lrs


@pytest.mark.parametrize("name,args,kw", SCHEDULERS[:-1] + [("LambdaLR", "warmup", dict())],
                         ids=_sched_ids(SCHEDULERS[:-1]) + ["LambdaLR-object"])
def test_scheduler_state_dict_and_resume(name, args, kw, tmp_path):
    make_args = (lambda n: (_Warmup(n),)) if args == "warmup" else (lambda n: args)
    dws, tws = _pair_params()
    _, _, d_all = _train_scheduled(dn, dws, name, make_args(4), kw, 10)
    _, _, t_all = _train_scheduled(torch, tws, name, make_args(4), kw, 10)
    assert d_all == t_all
    # stop after 4 epochs, save through dn.save / dn.load, resume in a fresh optimizer and scheduler (a
    # LambdaLR's object built with another n: its saved n comes back): the rates and parameters of the
    # uninterrupted run
    ws, _ = _pair_params()
    opt, sch, first = _train_scheduled(dn, ws, name, make_args(4), kw, 4)
    sd = sch.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4 and sd["base_lrs"] == [0.1]
    if name == "LambdaLR":
        assert sd["lr_lambdas"] == [{"n": 4}]
    dn.save({"optimizer": opt.state_dict(), "scheduler": sd}, tmp_path / "ckpt.npz")
    ck = dn.load(tmp_path / "ckpt.npz")
    ws2 = [dn.Parameter(w.numpy().copy()) for w in ws]
    _, sch2, rest = _train_scheduled(dn, ws2, name, make_args(99), kw, 6, resume_from=(ck["optimizer"],
                                                                                        ck["scheduler"]))
    assert first + rest == d_all and sch2.last_epoch == 10
    ref, _ = _pair_params()
    _train_scheduled(dn, ref, name, make_args(4), kw, 10)
    for a, b in zip(ws2, ref):
        np.testing.assert_array_equal(a.data, b.data)


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")
def test_scheduler_resume_with_last_epoch_needs_initial_lr():
    dws, tws = _pair_params()
    with pytest.raises(KeyError):
        tls.StepLR(torch.optim.SGD(tws, lr=0.1), 2, last_epoch=3)
    with pytest.raises(KeyError, match=r"StepLR: param 'initial_lr' is not specified in param_groups\[0\]"):
        dls.StepLR(dn.optim.SGD(dws, lr=0.1), 2, last_epoch=3)
    # with initial_lr set (as a loaded optimizer has it), last_epoch resumes as torch's does
    for last in (2, 3, 5):
        dopt = dn.optim.SGD([{"params": dws, "lr": 0.05, "initial_lr": 0.1}])
        topt = torch.optim.SGD([{"params": tws, "lr": 0.05, "initial_lr": 0.1}])
        for name, args in (("StepLR", (3,)), ("ExponentialLR", (0.5,)), ("CosineAnnealingLR", (4,))):
            d, t = getattr(dls, name)(dopt, *args, last_epoch=last), getattr(tls, name)(topt, *args, last_epoch=last)
            for _ in range(4):
                assert d.get_last_lr() == t.get_last_lr(), (name, last)
                d.step()
                t.step()


def test_scheduler_step_with_epoch_uses_the_closed_form_as_torch():
    dws, tws = _pair_params()
    for name, args in (("StepLR", (3,)), ("ExponentialLR", (0.5,)), ("CosineAnnealingLR", (4,)),
                       ("MultiStepLR", ([2, 5, 5],))):
        d = getattr(dls, name)(dn.optim.SGD(dws, lr=0.1), *args)
        t = getattr(tls, name)(torch.optim.SGD(tws, lr=0.1), *args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for e in (5, 2, 7):
                d.step(e)
                t.step(e)
                assert d.get_last_lr() == t.get_last_lr() and d.last_epoch == e


def test_scheduler_errors_are_clear():
    dws, tws = _pair_params()
    opt = dn.optim.SGD(dws, lr=0.1)
    with pytest.raises(TypeError, match="StepLR: optimizer must be a dynnets.optim Optimizer"):
        dls.StepLR(object(), 2)
    with pytest.raises(ValueError, match="LambdaLR: expected 1 lr_lambdas"):
        dls.LambdaLR(opt, [lambda e: 1.0, lambda e: 1.0])
    for lib, o in ((dls, opt), (tls, torch.optim.SGD(tws, lr=0.1))):
        with pytest.raises(ValueError):
            lib.ReduceLROnPlateau(o, factor=1.0)
        with pytest.raises(ValueError):
            lib.ReduceLROnPlateau(o, mode="up")
    with pytest.raises(ValueError, match="factor must be < 1.0"):
        dls.ReduceLROnPlateau(opt, factor=1.0)


def test_cosine_annealing_values_written_out():
    # the recursive form agrees with the closed form within rounding over two periods
    dws, _ = _pair_params()
    opt = dn.optim.SGD(dws, lr=1.0)
    sch = dls.CosineAnnealingLR(opt, T_max=6, eta_min=0.1)
    for e in range(1, 25):
        sch.step()
        assert sch.get_last_lr()[0] == pytest.approx(0.1 + 0.9 * (1 + math.cos(math.pi * e / 6)) / 2, abs=1e-12)
