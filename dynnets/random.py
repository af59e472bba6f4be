"""The default random generator, as ``torch.manual_seed`` / ``torch.default_generator``.

Everything that takes ``rng=`` uses the generator it is given. What is built
or run *without* one draws from :data:`default_generator`, one
``numpy.random.Generator`` (PCG64) for the whole process:

* the initial weights of ``nn.Linear``, ``nn.Embedding``, ``nn.RNNCell`` /
  ``GRUCell`` / ``LSTMCell`` and ``nn.RNN`` / ``GRU`` / ``LSTM``, drawn when the
  module is constructed, in the order of its parameters (``named_parameters()``);
* the masks of ``nn.Dropout`` and of the dropout between the layers of
  ``nn.RNN`` / ``GRU`` / ``LSTM``, drawn at each training-mode call;
* the random creation functions ``randn``, ``rand``, ``randint``,
  ``randperm``, ``rand_like``, ``randn_like`` and ``uniform`` called without
  ``generator=`` (or ``rng=``), as torch's.

So ``manual_seed(s)`` followed by the same constructions and calls repeats
the same numbers, and the stream is that of ``numpy.random.default_rng(s)``:
after ``manual_seed(s)``, ``nn.Linear(3, 4)``'s weight is
``default_rng(s).uniform(-1/sqrt(3), 1/sqrt(3), (4, 3))``. The numbers are
not PyTorch's (a different generator), only its convention.

At import the generator is seeded from fresh OS entropy (``initial_seed()``
tells the seed drawn), so a program that never calls ``manual_seed`` and
passes no ``rng=`` differs from run to run. The models of
:mod:`dynnets.models`, the training loop and the static graphs take their own
``seed=`` and never read this generator; nor does ``dynnets.dropout`` (whose
``rng`` argument is required).
"""
from __future__ import annotations

import numpy as np

__all__ = ["manual_seed", "seed", "initial_seed", "default_generator", "generator"]

#: The process-wide generator; ``manual_seed`` reseeds it in place, so a
#: reference to it stays valid.
default_generator = np.random.Generator(np.random.PCG64())

_state = {"seed": None}


def _reseed(s):
    default_generator.bit_generator.state = np.random.PCG64(s).state
    _state["seed"] = s
    return default_generator


def manual_seed(seed):
    """Seed :data:`default_generator` (as ``torch.manual_seed``) and return it.

    Parameters
    ----------
    seed : int >= 0
        After the call the generator draws exactly what
        ``numpy.random.default_rng(seed)`` would.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"manual_seed: seed must be a non-negative integer, got {seed!r}")
    return _reseed(int(seed))


def seed():
    """Seed :data:`default_generator` from fresh OS entropy and return the
    seed used (as ``torch.seed``)."""
    s = int(np.random.SeedSequence().entropy)
    _reseed(s)
    return s


def initial_seed():
    """The seed :data:`default_generator` was last seeded with (as ``torch.initial_seed``)."""
    return _state["seed"]


def generator(rng=None):
    """The generator an ``rng=`` argument stands for: a ``numpy.random.Generator``
    as is, :data:`default_generator` for None, else ``default_rng(rng)`` (a
    seed or a ``SeedSequence``: a private generator)."""
    if rng is None:
        return default_generator
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


seed()
