"""Plain-numpy twins of :mod:`dynnets.autograd.kernels_tree`: the specification.

Same names, signatures and output buffers as the kernels, written as readable
vectorised numpy (see the kernels' docstrings for shapes). Scatters use
``np.add.at`` so repeated indices accumulate, as the kernels' sequential loops do.
"""

import numpy as np

__all__ = [
    "gather_pairs",
    "scatter_pairs_add",
    "scatter_rows_add",
    "tree_lstm_levels_fwd",
    "tree_lstm_levels_bwd",
    "tanh_rows_fwd",
    "tanh_rows_bwd",
    "childsum_gather",
    "childsum_levels_fwd",
    "childsum_levels_bwd",
    "childsum_scatter_add",
    "lstm_seq_fwd",
    "lstm_seq_bwd",
    "gru_seq_fwd",
    "gru_seq_bwd",
    "tree_lstm_node_fwd",
    "tree_lstm_node_bwd",
    "tree_lstm_leaf_node_fwd",
    "tree_lstm_leaf_node_bwd",
    "tree_lstm_node_fwd_mv",
    "tree_lstm_leaf_node_fwd_mv",
    "tree_lstm_cell_fwd",
    "tree_lstm_cell_bwd",
    "tree_lstm_leaf_fwd",
    "tree_lstm_leaf_bwd",
    "lstm_cell_fwd",
    "lstm_cell_bwd",
    "gru_cell_fwd",
    "gru_cell_bwd",
]


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def gather_pairs(h_all, left, right, out):
    H = h_all.shape[1]
    out[:, :H] = h_all[left]
    out[:, H:] = h_all[right]


def scatter_pairs_add(g, left, right, dh_all):
    H = dh_all.shape[1]
    np.add.at(dh_all, left, g[:, :H])
    np.add.at(dh_all, right, g[:, H:])


def scatter_rows_add(g, idx, n, dh_all):
    if n > dh_all.shape[0] or g.shape != (idx.shape[0], dh_all.shape[1]) or ((idx < -n) | (idx >= n)).any():
        return False
    np.add.at(dh_all, np.where(idx < 0, idx + n, idx), g)
    return True


def tree_lstm_levels_fwd(z, b, c_all, left, right, lo, h_all, acts):
    n = z.shape[0]
    H = h_all.shape[1]
    a = z + b
    i, fl, fr, o = (_sigmoid(a[:, k * H:(k + 1) * H]) for k in range(4))
    u = np.tanh(a[:, 4 * H:])
    c = i * u + fl * c_all[left] + fr * c_all[right]
    c_all[lo:lo + n] = c
    h_all[lo:lo + n] = o * np.tanh(c)
    acts[:] = np.concatenate([i, fl, fr, o, u], axis=1)


def tree_lstm_levels_bwd(dh_all, dc_all, acts, c_all, left, right, lo, dz):
    n = acts.shape[0]
    H = c_all.shape[1]
    i, fl, fr, o, u = (acts[:, k * H:(k + 1) * H] for k in range(5))
    t = np.tanh(c_all[lo:lo + n])
    dh = dh_all[lo:lo + n]
    dct = dc_all[lo:lo + n] + dh * o * (1 - t * t)
    dz[:] = np.concatenate([dct * u * i * (1 - i), dct * c_all[left] * fl * (1 - fl),
                            dct * c_all[right] * fr * (1 - fr), dh * t * o * (1 - o), dct * i * (1 - u * u)], axis=1)
    np.add.at(dc_all, left, dct * fl)
    np.add.at(dc_all, right, dct * fr)


def tanh_rows_fwd(z, b, lo, h_all):
    h_all[lo:lo + z.shape[0]] = np.tanh(z + b)


def tanh_rows_bwd(dh_all, h_all, lo, dz):
    n = dz.shape[0]
    h = h_all[lo:lo + n]
    dz[:] = dh_all[lo:lo + n] * (1 - h * h)


def _edge_owner(ptr):
    """Row (0..n-1) of the node owning each edge of a level."""
    return np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))


def childsum_gather(h_all, ptr, idx, hsum, hch):
    hch[:] = h_all[idx]
    hsum[:] = 0
    np.add.at(hsum, _edge_owner(ptr), hch)


def childsum_levels_fwd(ziou, zf, b_iou, b_f, c_all, ptr, idx, lo, h_all, acts, facts):
    n = ziou.shape[0]
    H = h_all.shape[1]
    a = ziou + b_iou
    i, o = _sigmoid(a[:, :H]), _sigmoid(a[:, H:2 * H])
    u = np.tanh(a[:, 2 * H:])
    f = _sigmoid(zf + b_f)
    c = i * u
    np.add.at(c, _edge_owner(ptr), f * c_all[idx])
    c_all[lo:lo + n] = c
    h_all[lo:lo + n] = o * np.tanh(c)
    acts[:] = np.concatenate([i, o, u], axis=1)
    facts[:] = f


def childsum_levels_bwd(dh_all, dc_all, acts, facts, c_all, ptr, idx, lo, dziou, dzf):
    n = acts.shape[0]
    H = c_all.shape[1]
    i, o, u = acts[:, :H], acts[:, H:2 * H], acts[:, 2 * H:]
    t = np.tanh(c_all[lo:lo + n])
    dh = dh_all[lo:lo + n]
    dct = dc_all[lo:lo + n] + dh * o * (1 - t * t)
    dziou[:] = np.concatenate([dct * u * i * (1 - i), dh * t * o * (1 - o), dct * i * (1 - u * u)], axis=1)
    de = dct[_edge_owner(ptr)]
    dzf[:] = de * c_all[idx] * facts * (1 - facts)
    np.add.at(dc_all, idx, de * facts)


def childsum_scatter_add(dhsum, dhch, ptr, idx, dh_all):
    np.add.at(dh_all, idx, dhsum[_edge_owner(ptr)] + dhch)


def lstm_seq_fwd(pre, b, c_all, prev, off, h_all, acts):
    n = pre.shape[0]
    H = h_all.shape[1]
    a = pre + b
    i, f, o = _sigmoid(a[:, :H]), _sigmoid(a[:, H:2 * H]), _sigmoid(a[:, 3 * H:])
    g = np.tanh(a[:, 2 * H:3 * H])
    c_prev = c_all[prev:prev + n] if prev >= 0 else 0.0
    c = f * c_prev + i * g
    c_all[off:off + n] = c
    h_all[off:off + n] = o * np.tanh(c)
    acts[off:off + n] = np.concatenate([i, f, g, o], axis=1)


def lstm_seq_bwd(dh_all, dc_all, acts, c_all, prev, off, n, dg):
    H = c_all.shape[1]
    a = acts[off:off + n]
    i, f, g, o = (a[:, k * H:(k + 1) * H] for k in range(4))
    t = np.tanh(c_all[off:off + n])
    dh = dh_all[off:off + n]
    dct = dc_all[off:off + n] + dh * o * (1 - t * t)
    cp = c_all[prev:prev + n] if prev >= 0 else np.zeros_like(dct)
    dg[off:off + n] = np.concatenate([dct * g * i * (1 - i), dct * cp * f * (1 - f), dct * i * (1 - g * g),
                                      dh * t * o * (1 - o)], axis=1)
    if prev >= 0:
        dc_all[prev:prev + n] += dct * f


def gru_seq_fwd(gi, gh, h_all, prev, off, acts):
    n = gi.shape[0]
    H = h_all.shape[1]
    r = _sigmoid(gi[:, :H] + gh[:, :H])
    z = _sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
    nn = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
    hp = h_all[prev:prev + n] if prev >= 0 else 0.0
    h_all[off:off + n] = (1 - z) * nn + z * hp
    acts[off:off + n] = np.concatenate([r, z, nn], axis=1)


def gru_seq_bwd(dh_all, acts, gh, h_all, prev, off, n, dgi, dgh):
    H = h_all.shape[1]
    a = acts[off:off + n]
    r, z, nn = a[:, :H], a[:, H:2 * H], a[:, 2 * H:]
    d = dh_all[off:off + n]
    hp = h_all[prev:prev + n] if prev >= 0 else np.zeros_like(d)
    dp_n = d * (1 - z) * (1 - nn * nn)
    dp_r = dp_n * gh[off:off + n, 2 * H:] * r * (1 - r)
    dp_z = d * (hp - nn) * z * (1 - z)
    dgi[off:off + n] = np.concatenate([dp_r, dp_z, dp_n], axis=1)
    dgh[off:off + n] = np.concatenate([dp_r, dp_z, dp_n * r], axis=1)
    if prev >= 0:
        dh_all[prev:prev + n] += d * z


def tree_lstm_node_fwd(z, b, s_l, s_r, s, acts):
    H = s_l.shape[1] // 2
    a = z + b
    i, fl, fr, o = (_sigmoid(a[:, k * H:(k + 1) * H]) for k in range(4))
    u = np.tanh(a[:, 4 * H:])
    c = i * u + fl * s_l[:, H:] + fr * s_r[:, H:]
    s[:] = np.concatenate([o * np.tanh(c), c], axis=1)
    acts[:] = np.concatenate([i, fl, fr, o, u], axis=1)


def tree_lstm_node_bwd(ds, acts, s_l, s_r, s, dz, ds_l, ds_r):
    H = s.shape[1] // 2
    i, fl, fr, o, u = (acts[:, k * H:(k + 1) * H] for k in range(5))
    t = np.tanh(s[:, H:])
    dh = ds[:, :H]
    dct = ds[:, H:] + dh * o * (1 - t * t)
    dz[:] = np.concatenate([dct * u * i * (1 - i), dct * s_l[:, H:] * fl * (1 - fl), dct * s_r[:, H:] * fr * (1 - fr),
                            dh * t * o * (1 - o), dct * i * (1 - u * u)], axis=1)
    ds_l[:, H:] = dct * fl
    ds_r[:, H:] = dct * fr


def tree_lstm_leaf_node_fwd(z, b, s, acts):
    H = z.shape[1] // 3
    a = z + b
    i, o = _sigmoid(a[:, :H]), _sigmoid(a[:, H:2 * H])
    u = np.tanh(a[:, 2 * H:])
    c = i * u
    s[:] = np.concatenate([o * np.tanh(c), c], axis=1)
    acts[:] = np.concatenate([i, o, u], axis=1)


def tree_lstm_leaf_node_bwd(ds, acts, s, dz):
    H = s.shape[1] // 2
    i, o, u = acts[:, :H], acts[:, H:2 * H], acts[:, 2 * H:]
    t = np.tanh(s[:, H:])
    dh = ds[:, :H]
    dct = ds[:, H:] + dh * o * (1 - t * t)
    dz[:] = np.concatenate([dct * u * i * (1 - i), dh * t * o * (1 - o), dct * i * (1 - u * u)], axis=1)


def tree_lstm_node_fwd_mv(s_l, s_r, w, b, s, acts, hcat):
    H = s_l.shape[1] // 2
    hcat[:] = np.concatenate([s_l[:, :H], s_r[:, :H]], axis=1)
    tree_lstm_node_fwd(hcat @ w, b, s_l, s_r, s, acts)


def tree_lstm_leaf_node_fwd_mv(x, w, b, s, acts):
    tree_lstm_leaf_node_fwd(x @ w, b, s, acts)


def tree_lstm_cell_fwd(z, b, c_l, c_r, h, c, acts):
    H = c_l.shape[1]
    a = z + b
    i, fl, fr, o = (_sigmoid(a[:, k * H:(k + 1) * H]) for k in range(4))
    u = np.tanh(a[:, 4 * H:])
    c[:] = i * u + fl * c_l + fr * c_r
    h[:] = o * np.tanh(c)
    acts[:] = np.concatenate([i, fl, fr, o, u], axis=1)


def tree_lstm_cell_bwd(dh, dc, acts, c_l, c_r, c, dz, dc_l, dc_r):
    H = c.shape[1]
    i, fl, fr, o, u = (acts[:, k * H:(k + 1) * H] for k in range(5))
    t = np.tanh(c)
    dct = dc + dh * o * (1 - t * t)
    dz[:] = np.concatenate([dct * u * i * (1 - i), dct * c_l * fl * (1 - fl), dct * c_r * fr * (1 - fr),
                            dh * t * o * (1 - o), dct * i * (1 - u * u)], axis=1)
    dc_l[:] = dct * fl
    dc_r[:] = dct * fr


def tree_lstm_leaf_fwd(z, b, h, c, acts):
    H = z.shape[1] // 3
    a = z + b
    i, o = _sigmoid(a[:, :H]), _sigmoid(a[:, H:2 * H])
    u = np.tanh(a[:, 2 * H:])
    c[:] = i * u
    h[:] = o * np.tanh(c)
    acts[:] = np.concatenate([i, o, u], axis=1)


def tree_lstm_leaf_bwd(dh, dc, acts, c, dz):
    H = c.shape[1]
    i, o, u = acts[:, :H], acts[:, H:2 * H], acts[:, 2 * H:]
    t = np.tanh(c)
    dct = dc + dh * o * (1 - t * t)
    dz[:] = np.concatenate([dct * u * i * (1 - i), dh * t * o * (1 - o), dct * i * (1 - u * u)], axis=1)


def lstm_cell_fwd(gx, gh, b_ih, b_hh, c_prev):
    """LSTM cell (Hochreiter & Schmidhuber 1997; PyTorch ``LSTMCell``).

    gx = W_ih @ x.T, gh = W_hh @ h_prev.T (4H, B); b_ih, b_hh (4H,);
    c_prev (B, H) -> h, c (B, H), acts (B, 5H) = [i, f, g, o, tanh(c)].
    """
    a = (gx + gh).T + b_ih + b_hh
    a_i, a_f, a_g, a_o = np.split(a, 4, axis=1)
    i, f, g, o = _sigmoid(a_i), _sigmoid(a_f), np.tanh(a_g), _sigmoid(a_o)
    c = f * c_prev + i * g
    t = np.tanh(c)
    return o * t, c, np.concatenate([i, f, g, o, t], axis=1)


def lstm_cell_bwd(dh, dc, acts, c_prev):
    """VJP of :func:`lstm_cell_fwd` -> dgates (B, 4H), dc_prev (B, H), db (4H,)."""
    i, f, g, o, t = np.split(acts, 5, axis=1)
    dc_tot = dc + dh * o * (1 - t * t)
    dgates = np.concatenate(
        [
            dc_tot * g * i * (1 - i),
            dc_tot * c_prev * f * (1 - f),
            dc_tot * i * (1 - g * g),
            dh * t * o * (1 - o),
        ],
        axis=1,
    )
    return dgates, dc_tot * f, dgates.sum(0)


def gru_cell_fwd(gi, gh, h_prev):
    """GRU cell, PyTorch formulation.

    gi, gh (B, 3H) in order r, z, n; h_prev (B, H) -> h (B, H), acts (B, 3H).
    """
    gi_r, gi_z, gi_n = np.split(gi, 3, axis=1)
    gh_r, gh_z, gh_n = np.split(gh, 3, axis=1)
    r = _sigmoid(gi_r + gh_r)
    z = _sigmoid(gi_z + gh_z)
    n = np.tanh(gi_n + r * gh_n)
    h = (1 - z) * n + z * h_prev
    return h, np.concatenate([r, z, n], axis=1)


def gru_cell_bwd(dh, acts, gh, h_prev):
    """VJP of :func:`gru_cell_fwd` -> dgi (B, 3H), dgh (B, 3H), dh_prev (B, H).

    dh_prev is only the direct path ``dh * z``; the path through ``gh`` is the
    caller's (``dgh @ W_hh``).
    """
    r, z, n = np.split(acts, 3, axis=1)
    gh_n = np.split(gh, 3, axis=1)[2]
    dp_n = dh * (1 - z) * (1 - n * n)
    dp_r = dp_n * gh_n * r * (1 - r)
    dp_z = dh * (h_prev - n) * z * (1 - z)
    dgi = np.concatenate([dp_r, dp_z, dp_n], axis=1)
    dgh = np.concatenate([dp_r, dp_z, dp_n * r], axis=1)
    return dgi, dgh, dh * z
