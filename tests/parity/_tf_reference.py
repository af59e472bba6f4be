"""TensorFlow 1's maths for ``scripts/tf_rnn_text_classifier.py``, written
out in torch (float64), to check the TF1 script's losses without TensorFlow.

Everything follows TF 1.15's definitions, not dynnets': ``BasicLSTMCell``
(one ``kernel`` over ``[x, h]``, gates i, j, f, o, ``forget_bias`` added to
f, one bias), ``GRUCell`` (``r`` applied to ``h`` *before* the candidate's
product, ``h' = u h + (1 - u) c``), ``BasicRNNCell``; ``dynamic_rnn`` with
``sequence_length`` (zero outputs and the state carried past each length);
``softmax_cross_entropy_with_logits``; ``l2_loss = sum(t**2) / 2``; and
``AdamOptimizer`` (``lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)``,
``var -= lr_t m / (sqrt(v) + eps)``, the embedding's sparse gradient
updating every row's moments as the dense rule does). The loss a step fetches
is the loss before that step's update.

The initial variables come from the script's ``--dump_init`` (TF1's names and
layouts, or dynnets' ``weight_ih`` / ``weight_hh`` / ``bias_ih`` / ``bias_hh``
cells, converted: TF1's kernel is ``concat([weight_ih, weight_hh], 1).T``
with the LSTM gates reordered i, g, f, o -> i, j, f, o). A cell holding two
bias variables is trained as two (``split_bias``): the sum is TF1's bias,
but each variable takes its own optimizer step, which is what the script's
graph does; ``split_bias=False`` merges them into TF1's one bias variable.
"""
from __future__ import annotations

import numpy as np
import torch


def _find(init, *suffixes):
    for name in init:
        base = name.split(":")[0]
        if any(base.endswith(s) for s in suffixes):
            return np.asarray(init[name], dtype=np.float64)
    return None


def tf1_variables(init, cell_type, hidden, split_bias=True):
    """TF1-layout float64 tensors from the dumped initial variables; with
    dynnets' two biases and ``split_bias``, the second of each is ``<name>_2``."""
    H = hidden
    v = {"W_text": _find(init, "W_text"), "W": _find(init, "/W", "W"), "b": _find(init, "output/b", "/b")}
    if cell_type == "gru":
        gk, gb = _find(init, "gates/kernel"), _find(init, "gates/bias")
        if gk is None:
            w_ih, w_hh = _find(init, "weight_ih"), _find(init, "weight_hh")
            b_ih, b_hh = _find(init, "bias_ih"), _find(init, "bias_hh")
            gk = np.concatenate([w_ih[:2 * H], w_hh[:2 * H]], 1).T
            ck = np.concatenate([w_ih[2 * H:], w_hh[2 * H:]], 1).T
            if split_bias:
                gb, cb = b_ih[:2 * H], b_ih[2 * H:]
                v.update(gates_bias_2=b_hh[:2 * H], candidate_bias_2=b_hh[2 * H:])
            else:
                gb, cb = b_ih[:2 * H] + b_hh[:2 * H], b_ih[2 * H:] + b_hh[2 * H:]
        else:
            ck, cb = _find(init, "candidate/kernel"), _find(init, "candidate/bias")
        v.update(gates_kernel=gk, gates_bias=gb, candidate_kernel=ck, candidate_bias=cb)
    else:
        k, b = _find(init, "kernel"), _find(init, "cell/bias", "lstm_cell/bias", "rnn_cell/bias")
        if k is None:
            w_ih, w_hh = _find(init, "weight_ih"), _find(init, "weight_hh")
            b_ih, b_hh = _find(init, "bias_ih"), _find(init, "bias_hh")
            k = np.concatenate([w_ih, w_hh], 1).T
            perm = np.arange(k.shape[1])
            if cell_type == "lstm":       # PyTorch's gate order i, f, g, o -> TF1's i, j (= g), f, o
                perm = np.concatenate([np.arange(0, H), np.arange(2 * H, 3 * H), np.arange(H, 2 * H),
                                       np.arange(3 * H, 4 * H)])
            k = k[:, perm]
            if split_bias:
                b = b_ih[perm]
                v["bias_2"] = b_hh[perm]
            else:
                b = (b_ih + b_hh)[perm]
        v.update(kernel=k, bias=b)
    missing = [n for n, a in v.items() if a is None]
    if missing:
        raise KeyError(f"tf_reference: no initial value for {missing} among {sorted(init)}")
    return {n: torch.tensor(a, dtype=torch.float64, requires_grad=True) for n, a in v.items()}


def _bias(v, name):
    return v[name] + v[name + "_2"] if name + "_2" in v else v[name]


def _step(cell_type, v, x, state, forget_bias=1.0):
    if cell_type == "lstm":
        c, h = state
        z = torch.cat([x, h], 1) @ v["kernel"] + _bias(v, "bias")
        i, j, f, o = torch.chunk(z, 4, dim=1)
        c2 = c * torch.sigmoid(f + forget_bias) + torch.sigmoid(i) * torch.tanh(j)
        h2 = torch.tanh(c2) * torch.sigmoid(o)
        return h2, (c2, h2)
    if cell_type == "gru":
        h = state
        value = torch.sigmoid(torch.cat([x, h], 1) @ v["gates_kernel"] + _bias(v, "gates_bias"))
        r, u = torch.chunk(value, 2, dim=1)
        c = torch.tanh(torch.cat([x, r * h], 1) @ v["candidate_kernel"] + _bias(v, "candidate_bias"))
        h2 = u * h + (1 - u) * c
        return h2, h2
    h = state
    h2 = torch.tanh(torch.cat([x, h], 1) @ v["kernel"] + _bias(v, "bias"))
    return h2, h2


def loss_fn(v, x_batch, y_batch, cell_type, hidden, l2_reg_lambda):
    x = torch.as_tensor(np.asarray(x_batch, dtype=np.int64))
    y = torch.as_tensor(np.asarray(y_batch, dtype=np.float64))
    B, T = x.shape
    length = (x != 0).sum(1)
    emb = v["W_text"][x]
    zeros = torch.zeros(B, hidden, dtype=torch.float64)
    state = (zeros, zeros) if cell_type == "lstm" else zeros
    outputs = []
    for t in range(T):
        out, new = _step(cell_type, v, emb[:, t], state)
        alive = (t < length).to(torch.float64)[:, None]
        outputs.append(out * alive)
        if cell_type == "lstm":
            state = tuple(alive * n + (1 - alive) * s for n, s in zip(new, state))
        else:
            state = alive * new + (1 - alive) * state
    seq = torch.stack(outputs, 1)
    last = seq.reshape(-1, hidden)[torch.arange(B) * T + (length - 1)]
    logits = last @ v["W"] + v["b"]
    xent = -(y * torch.log_softmax(logits, 1)).sum(1)
    l2 = (v["W"] ** 2).sum() / 2 + (v["b"] ** 2).sum() / 2
    loss = xent.mean() + l2_reg_lambda * l2
    acc = (logits.argmax(1) == y.argmax(1)).double().mean()
    return loss, acc


def train(init, batches, cell_type, hidden, l2_reg_lambda, lr, beta1=0.9, beta2=0.999, eps=1e-8, split_bias=True):
    """The per-step (loss, accuracy) of the TF1 script's training loop, and
    the final variables."""
    v = tf1_variables(init, cell_type, hidden, split_bias)
    m = {n: torch.zeros_like(p) for n, p in v.items()}
    s = {n: torch.zeros_like(p) for n, p in v.items()}
    out = []
    for t, (x_batch, y_batch) in enumerate(batches, start=1):
        loss, acc = loss_fn(v, x_batch, y_batch, cell_type, hidden, l2_reg_lambda)
        grads = torch.autograd.grad(loss, list(v.values()))
        lr_t = lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
        with torch.no_grad():
            for (n, p), g in zip(v.items(), grads):
                m[n].mul_(beta1).add_((1 - beta1) * g)
                s[n].mul_(beta2).add_((1 - beta2) * g * g)
                p -= lr_t * m[n] / (torch.sqrt(s[n]) + eps)
        out.append((float(loss), float(acc)))
    return out, v
