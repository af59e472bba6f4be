"""Ragged (packed) attention against torch 2.13: padded
``scaled_dot_product_attention`` with a key mask (values and gradients, float64),
and the packed layout against torch's jagged nested tensors."""
import numpy as np
import pytest
import torch

import dynnets as dn


@pytest.mark.parametrize("method", [None, "kernel"])
def test_matches_torch_padded_scaled_dot_product_attention_with_mask(method):
    rng = np.random.default_rng(5)
    lens, heads, D = [4, 1, 6, 3], 3, 5
    off = dn.ragged_offsets(lens)
    N = int(off[-1])
    Q, K, V, G = (rng.standard_normal((N, heads * D)) for _ in range(4))
    q, k, v = (dn.tensor(a, requires_grad=True) for a in (Q, K, V))
    y = dn.ragged_attention(q, k, v, off, num_heads=heads, method=method)
    (y * dn.tensor(G)).sum().backward()

    B, T = len(lens), max(lens)
    mask = np.arange(T)[None] < np.array(lens)[:, None]              # True at real tokens (SDPA's convention)

    def padded(a):
        p = np.zeros((B, T, heads * D))
        p[mask] = a
        return torch.tensor(p.reshape(B, T, heads, D).transpose(0, 2, 1, 3).copy(), requires_grad=True)
    qt, kt, vt = padded(Q), padded(K), padded(V)
    yt = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=torch.tensor(mask)[:, None, None, :])
    yt = yt.permute(0, 2, 1, 3).reshape(B, T, heads * D)
    gp = np.zeros((B, T, heads * D))
    gp[mask] = G
    (yt * torch.tensor(gp)).sum().backward()
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy()[mask], rtol=1e-10, atol=1e-12)
    for a, t in ((q, qt), (k, kt), (v, vt)):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy().transpose(0, 2, 1, 3).reshape(B, T, -1)[mask],
                                   rtol=1e-9, atol=1e-12)


def test_packed_layout_is_torch_jagged_nested_tensor_values_and_offsets():
    rng = np.random.default_rng(2)
    seqs = [rng.standard_normal((n, 3)) for n in (2, 5, 1)]
    packed, off = dn.pack_sequences([dn.tensor(s) for s in seqs])
    nt = torch.nested.nested_tensor([torch.tensor(s) for s in seqs], layout=torch.jagged)
    np.testing.assert_array_equal(packed.numpy(), nt.values().numpy())
    np.testing.assert_array_equal(off, nt.offsets().numpy())
    np.testing.assert_array_equal(dn.ragged_offsets([2, 5, 1]), nt.offsets().numpy())
    for part, t in zip(dn.unpack_sequences(packed, off), nt.unbind()):
        np.testing.assert_array_equal(part.numpy(), t.numpy())
