"""The fused recurrent cells, one step each: LSTM and GRU (Hochreiter &
Schmidhuber 1997; Cho et al. 2014) and the binary Tree-LSTM (Tai et al. 2015,
eqs. 9-14), as Numba kernels behind one primitive each."""
from __future__ import annotations

from .. import primitives as P
from ..engine import bind, bind_first

__all__ = ["lstm_cell", "gru_cell", "tree_lstm_cell", "tree_lstm_leaf", "tree_lstm_node", "tree_lstm_leaf_node"]


def lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One fused LSTM step (PyTorch ``LSTMCell`` maths); returns (h', c')."""
    h2, c2, _ = bind(P.lstm_cell_p, x, h, c, w_ih, w_hh, b_ih, b_hh)
    return h2, c2


def gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    """One fused GRU step (PyTorch ``GRUCell`` maths); returns h'."""
    return bind_first(P.gru_cell_p, x, h, w_ih, w_hh, b_ih, b_hh)


def tree_lstm_cell(h_l, h_r, c_l, c_r, w, b):
    """Binary Tree-LSTM node(s) (Tai et al. 2015, eqs. 9-14); returns (h, c)."""
    h, c, _ = bind(P.tree_lstm_cell_p, h_l, h_r, c_l, c_r, w, b)
    return h, c


def tree_lstm_leaf(x, w, b):
    """Tree-LSTM leaf node(s) from input ``x``; returns (h, c)."""
    h, c, _ = bind(P.tree_lstm_leaf_p, x, w, b)
    return h, c


def tree_lstm_node(s_l, s_r, w, b):
    """Binary Tree-LSTM node on packed states ``[h | c]`` (n, 2H) -> (n, 2H)."""
    return bind_first(P.tree_lstm_node_p, s_l, s_r, w, b)


def tree_lstm_leaf_node(x, w, b):
    """Tree-LSTM leaf from input rows ``x`` (n, E) -> packed states (n, 2H)."""
    return bind_first(P.tree_lstm_leaf_node_p, x, w, b)
