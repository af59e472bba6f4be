"""Learning-rate schedulers with PyTorch's names, arguments and semantics
(``torch.optim.lr_scheduler``): ``StepLR``, ``MultiStepLR``, ``ExponentialLR``,
``CosineAnnealingLR``, ``LambdaLR`` and ``ReduceLROnPlateau``; importable as
``dynnets.optim.lr_scheduler`` and ``dynnets.nn.optim.lr_scheduler``.

A scheduler writes ``optimizer.param_groups[i]["lr"]``, which every optimizer
of :mod:`dynnets.optim` reads anew at each step. As in PyTorch:

* construction with ``last_epoch=-1`` records each group's ``"initial_lr"``
  (the ``base_lrs``) and takes the first step, to epoch 0, which leaves the
  learning rates as they are; resuming with ``last_epoch >= 0`` needs the
  groups' ``"initial_lr"`` (restored by ``optimizer.load_state_dict``);
* ``step()`` after each epoch's ``optimizer.step()`` advances ``last_epoch``
  by one and sets the new rates; ``get_last_lr()`` lists them;
* the rates are computed by PyTorch's recursive formulas (each from the
  group's current ``"lr"``), so a rate changed by hand between steps carries
  on from the new value, and the numbers agree with PyTorch's to the last bit
  (tested over many steps). ``step(epoch)`` (deprecated in PyTorch, with a
  warning) jumps to ``epoch`` by the closed form where one exists;
* ``state_dict()`` holds every attribute but the optimizer (for
  ``LambdaLR``, the state of callable objects, not of functions);
  ``load_state_dict()`` restores it.

``ReduceLROnPlateau.step(metrics)`` multiplies the rates by ``factor`` when
``metrics`` has not improved for more than ``patience`` steps.
"""
from __future__ import annotations

import math
import types
import warnings

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR", "ReduceLROnPlateau"]

_EPOCH_WARNING = ("The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
                  "possible (as in PyTorch): call `scheduler.step()` without it")


def _check_optimizer(who, optimizer):
    # by what a scheduler uses, not by class: dynnets.nn.optim imports this
    # module (to expose it as optim.lr_scheduler), so it cannot import that one
    groups = getattr(optimizer, "param_groups", None)
    if not isinstance(groups, list) or not all(isinstance(g, dict) and "lr" in g for g in groups):
        raise TypeError(f"{who}: optimizer must be a dynnets.optim Optimizer (param_groups with an 'lr' each), "
                        f"got {type(optimizer).__name__}")


class LRScheduler:
    """Base class of the schedulers (as ``torch.optim.lr_scheduler.LRScheduler``):
    subclasses define :meth:`get_lr` (the recursive form) and, where one
    exists, ``_closed_form`` (for ``step(epoch)``).

    Parameters
    ----------
    optimizer : Optimizer
    last_epoch : int, default -1
        The index of the last epoch; -1 starts a schedule, a value >= 0
        resumes one (the param groups must then hold ``"initial_lr"``).
    """

    def __init__(self, optimizer, last_epoch=-1):
        who = type(self).__name__
        _check_optimizer(who, optimizer)
        if isinstance(last_epoch, bool) or not isinstance(last_epoch, int) or last_epoch < -1:
            raise ValueError(f"{who}: last_epoch must be an integer >= -1, got {last_epoch!r}")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"{who}: param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                                   f"with last_epoch={last_epoch}; load the optimizer's state_dict first, or start "
                                   f"with last_epoch=-1")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        """The learning rates of the epoch ``last_epoch`` (just advanced to)."""
        raise NotImplementedError

    def get_last_lr(self):
        """The learning rate of each param group set by the last :meth:`step`."""
        return self._last_lr

    def step(self, epoch=None):
        """Advance to the next epoch (or, deprecated, to ``epoch``) and set
        each group's ``"lr"``. Call it after ``optimizer.step()``."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
            self.last_epoch = epoch
            closed = getattr(self, "_closed_form", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _group_lrs(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Every attribute but the optimizer (as PyTorch)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restore what :meth:`state_dict` returned."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"{type(self).__name__}.load_state_dict: expected a dict, got "
                            f"{type(state_dict).__name__}")
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """Multiply each group's learning rate by ``gamma`` every ``step_size``
    epochs: ``lr = base_lr * gamma ** (epoch // step_size)``.

    Parameters
    ----------
    optimizer : Optimizer
    step_size : int
    gamma : float, default 0.1
    last_epoch : int, default -1
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if isinstance(step_size, bool) or not isinstance(step_size, int) or step_size < 1:
            raise ValueError(f"StepLR: step_size must be a positive integer, got {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]

    def _closed_form(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply each group's learning rate by ``gamma`` at each epoch of
    ``milestones``: ``lr = base_lr * gamma ** (number of milestones <= epoch)``
    (a milestone listed twice counts twice, as torch's ``Counter``).

    Parameters
    ----------
    optimizer : Optimizer
    milestones : iterable of int
        Epoch indices (torch requires them increasing; any order works here).
    gamma : float, default 0.1
    last_epoch : int, default -1
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        counts = {}
        for m in milestones:
            if isinstance(m, bool) or not isinstance(m, int):
                raise TypeError(f"MultiStepLR: milestones must be integers (epoch indices), got {m!r}")
            counts[m] = counts.get(m, 0) + 1
        # a plain dict (torch: a Counter), so that state_dict() saves and loads without a pickle
        self.milestones = counts
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        n = self.milestones.get(self.last_epoch, 0)
        if not n:
            return self._group_lrs()
        return [lr * self.gamma ** n for lr in self._group_lrs()]

    def _closed_form(self):
        n = sum(c for m, c in self.milestones.items() if m <= self.last_epoch)
        return [base * self.gamma ** n for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply each group's learning rate by ``gamma`` every epoch:
    ``lr = base_lr * gamma ** epoch``.

    Parameters
    ----------
    optimizer : Optimizer
    gamma : float
    last_epoch : int, default -1
    """

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]

    def _closed_form(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing (Loshchilov & Hutter 2017, SGDR without restarts):
    ``lr = eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2``,
    computed as PyTorch does, recursively from the current rate (past
    ``T_max`` it rises again, periodically).

    Parameters
    ----------
    optimizer : Optimizer
    T_max : int
        Half the period, in epochs.
    eta_min : float, default 0
    last_epoch : int, default -1
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if isinstance(T_max, bool) or not isinstance(T_max, int) or T_max < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be a positive integer, got {T_max!r}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._group_lrs()
        if self._step_count == 1 and e > 0:
            return [lo + (base - lo) * (1 + math.cos(e * math.pi / T)) / 2 for base in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [lr + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                    for base, lr in zip(self.base_lrs, self._group_lrs())]
        return [(1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (lr - lo) + lo
                for lr in self._group_lrs()]

    def _closed_form(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)`` for each group.

    Parameters
    ----------
    optimizer : Optimizer
    lr_lambda : callable or list of callables
        One function of the epoch index, or one per param group.
    last_epoch : int, default -1
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer("LambdaLR", optimizer)
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"LambdaLR: expected {n} lr_lambdas (one per param group), got {len(lr_lambda)}")
            fns = list(lr_lambda)
        else:
            fns = [lr_lambda] * n
        for f in fns:
            if not callable(f):
                raise TypeError(f"LambdaLR: lr_lambda must be callable (epoch -> factor), got {type(f).__name__}")
        self.lr_lambdas = fns
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * f(self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        """As the base class, with ``"lr_lambdas"`` holding the attributes of
        callable objects and None for functions and lambdas (which cannot be
        saved), as PyTorch."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else dict(f.__dict__)
                            for f in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict):
        sd = dict(state_dict)
        saved = sd.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        super().load_state_dict(sd)
        for f, st in zip(self.lr_lambdas, saved):
            if st is not None:
                f.__dict__.update(st)


class ReduceLROnPlateau(LRScheduler):
    """Multiply the learning rates by ``factor`` when a metric stops improving
    (as ``torch.optim.lr_scheduler.ReduceLROnPlateau``).

    Parameters
    ----------
    optimizer : Optimizer
    mode : {'min', 'max'}
        Whether the metric should decrease or increase.
    factor : float < 1, default 0.1
    patience : int, default 10
        The number of steps without improvement tolerated; the rate drops on
        the next one.
    threshold : float, default 1e-4
    threshold_mode : {'rel', 'abs'}
        An improvement beats ``best * (1 -+ threshold)`` ('rel') or
        ``best -+ threshold`` ('abs').
    cooldown : int, default 0
        Steps after a reduction during which bad steps are not counted.
    min_lr : float or list of floats, default 0
        A lower bound per param group.
    eps : float, default 1e-8
        Reductions smaller than this are skipped.

    ``step(metrics)`` after each evaluation (``metrics`` a number or 0-d tensor).
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        who = "ReduceLROnPlateau"
        if not factor < 1.0:
            raise ValueError(f"{who}: factor must be < 1.0, got {factor!r}")
        _check_optimizer(who, optimizer)
        self.factor = factor
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"{who}: expected {n} min_lrs (one per param group), got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * n
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = self._group_lrs()
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        """Whether metric ``a`` improves on ``best`` by the threshold."""
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if self.threshold_mode == "rel" else best + self.threshold)

    def step(self, metrics, epoch=None):
        """Record ``metrics`` for the next epoch (or, deprecated, for ``epoch``)
        and reduce the rates after more than ``patience`` bad epochs."""
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._group_lrs()

    def _reduce_lr(self):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimizer has {len(groups)} param groups, "
                                   f"min_lr lists {len(self.min_lrs)}; set min_lrs to one per group")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, group in enumerate(groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                group["lr"] = new

    def get_lr(self):
        return self._group_lrs()

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
