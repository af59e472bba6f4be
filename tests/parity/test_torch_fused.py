"""The fused encoder-layer ops (issue 25 §3) against the torch compositions
they stand for, float64 values and every gradient, eager and static:
``linear_act`` = ``relu/gelu(F.linear(x, w, b))``, ``linear_split`` =
``F.linear(x, w, b).chunk(c, -1)``, ``add_layer_norm`` =
``F.layer_norm(x + r, (D,), weight, bias, eps)``."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import dynnets as dn

from ._common import check

MODES = ["eager", "static", "static-unknown"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_linear_act(activation, mode):
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 5, 4)), rng.standard_normal((6, 4)), rng.standard_normal(6)
    check(lambda x, w, b: dn.linear_act(x, w, b, activation=activation),
          lambda x, w, b: getattr(TF, activation)(TF.linear(x, w, b)), [x, w, b], diff=(0, 1, 2), mode=mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunks", [1, 3])
def test_linear_split(chunks, mode):
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((7, 4)), rng.standard_normal((3 * chunks, 4)), rng.standard_normal(3 * chunks)
    check(lambda x, w, b: dn.linear_split(x, w, b, chunks=chunks),
          lambda x, w, b: TF.linear(x, w, b).chunk(chunks, -1), [x, w, b], diff=(0, 1, 2), mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_add_layer_norm(mode):
    rng = np.random.default_rng(2)
    x, r = rng.standard_normal((3, 4, 6)), rng.standard_normal((3, 4, 6))
    w, b = rng.standard_normal(6), rng.standard_normal(6)
    check(lambda x, r, w, b: dn.add_layer_norm(x, r, w, b, eps=1e-3),
          lambda x, r, w, b: TF.layer_norm(x + r, (6,), w, b, eps=1e-3), [x, r, w, b], diff=(0, 1, 2, 3), mode=mode)


def test_float32_add_layer_norm_is_torch_s_within_float32_rounding():
    rng = np.random.default_rng(3)
    x, r = (rng.standard_normal((50, 128)).astype(np.float32) for _ in range(2))
    w, b = (rng.standard_normal(128).astype(np.float32) for _ in range(2))
    want = TF.layer_norm(torch.from_numpy(x + r), (128,), torch.from_numpy(w), torch.from_numpy(b)).numpy()
    got = dn.add_layer_norm(x, r, w, b).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
