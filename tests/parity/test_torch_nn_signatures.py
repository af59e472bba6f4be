"""PyTorch's signatures: every name of ``dynnets.nn.functional.__all__``, the
``nn`` module constructors, the optimizers and schedulers, and the Module and
Optimizer methods, against torch's (``inspect.signature``, or torch's
documented signature where inspect cannot read it: builtins, and the
recurrent layers whose ``__init__`` is ``(*args, **kwargs)``).

The rule: a positional argument in torch's position means torch's thing.
For every parameter dynnets accepts positionally, torch's parameter at that
position has the same name and the same default (or both have none).
dynnets may take fewer arguments (a torch argument it lacks raises
TypeError), add keyword-only ones (``rng=``, ``generator=``, ``lazy=``,
``mask=``), and take positional ones past torch's last (a torch habit never
reaches them); the exceptions below say why.
"""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dynnets.nn as dnn  # noqa: E402
import dynnets.nn.functional as DF  # noqa: E402
import dynnets.optim as doptim  # noqa: E402
from dynnets.optim import lr_scheduler as dls  # noqa: E402

TF = torch.nn.functional
_POS = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

#: torch's documented signatures where ``inspect.signature`` reads none (a
#: builtin) or only ``(*args, **kwargs)``: from torch's documentation (2.x).
DOCUMENTED = {
    "F.linear": "input, weight, bias=None",
    "F.gelu": "input, approximate='none'",
    "F.relu_": "input",
    "F.leaky_relu_": "input, negative_slope=0.01",
    "F.one_hot": "tensor, num_classes=-1",
    "nn.RNN": "input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False, "
              "dropout=0.0, bidirectional=False, device=None, dtype=None",
    "nn.GRU": "input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0, "
              "bidirectional=False, device=None, dtype=None",
    "nn.LSTM": "input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0, "
               "bidirectional=False, proj_size=0, device=None, dtype=None",
    # a Module that ignores its arguments: dynnets takes none, so torch's are a TypeError here
    "nn.Identity": "", "nn.Tanh": "", "nn.Sigmoid": "",
}

#: names without a torch counterpart, or whose difference is deliberate, with the reason
NOT_TORCH = {
    "F.lstm_cell": "dynnets' fused cell: (x, h, c, w_ih, w_hh, b_ih, b_hh); torch.lstm_cell takes hx=(h, c) "
                   "second, so a torch call has one argument fewer and raises TypeError",
    "F.gru_cell": "dynnets' fused cell (x, h, w_ih, w_hh, b_ih, b_hh): torch.gru_cell's order (input, hx, w_ih, "
                  "w_hh, b_ih, b_hh), names x/h for input/hx",
    "F.tree_lstm_cell": "dynnets' binary Tree-LSTM node; not in torch",
    "F.tree_lstm_leaf": "dynnets' Tree-LSTM leaf; not in torch",
    "F.lstm_seq": "dynnets' packed LSTM recurrence; not in torch",
    "F.gru_seq": "dynnets' packed GRU recurrence; not in torch",
    "F.rnn_seq": "dynnets' packed Elman recurrence; not in torch",
    "nn.RNNBase": "dynnets' internal base of RNN/GRU/LSTM (use those); torch's takes the mode string first, which "
                  "dynnets rejects as input_size (ValueError)",
    "nn.PositionalEncoding": "not in torch: the PyTorch tutorial's module of that name (d_model, dropout=0.1, "
                             "max_len=5000), tested against it in test_transformer_layers.py",
    "nn.LearnedPositionalEmbedding": "not in torch: a learned position table (max_len, d_model), issue 25",
}

#: positional arguments dynnets takes past torch's last, with the reason
EXTRA_POSITIONAL = {
    "nn.Parameter": {"name"},       # dynnets' third argument, a label; torch.nn.Parameter takes two
}

#: defaults that differ, with the reason
DEFAULTS_DIFFER = {
    ("nn.Parameter", "data"): "required here (dynnets.autograd.tensor's Parameter); torch's Parameter() without "
                              "data is an empty tensor, here a TypeError",
}


def _torch_sig(key, obj):
    if key in DOCUMENTED:
        return inspect.signature(eval(f"lambda {DOCUMENTED[key]}: None"))  # noqa: S307 (test-local literals)
    return inspect.signature(obj)


def _params(sig):
    return [p for p in sig.parameters.values() if p.name != "self"]


def _same_default(a, b):
    if a is inspect.Parameter.empty or b is inspect.Parameter.empty:
        return a is b
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_default(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def compare(key, dn_obj, torch_obj):
    """The differences of ``dn_obj``'s positional arguments from torch's (a list of strings)."""
    dn_sig, t_sig = inspect.signature(dn_obj), _torch_sig(key, torch_obj)
    dn_pos = [p for p in _params(dn_sig) if p.kind in _POS]
    t_params = _params(t_sig)
    t_pos = [p for p in t_params if p.kind in _POS]
    t_var = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in t_params)
    bad = []
    for i, p in enumerate(dn_pos):
        if i >= len(t_pos):
            if not t_var and p.name not in EXTRA_POSITIONAL.get(key, ()):
                bad.append(f"{key}: positional argument {i} {p.name!r} has no torch counterpart: make it "
                           f"keyword-only")
            continue
        q = t_pos[i]
        if p.name != q.name:
            bad.append(f"{key}: positional argument {i} is {p.name!r}, torch's is {q.name!r}")
        elif not _same_default(p.default, q.default) and (key, p.name) not in DEFAULTS_DIFFER:
            bad.append(f"{key}: {p.name} defaults to {p.default!r}, torch's to {q.default!r}")
    # a keyword torch takes that dynnets has under another kind must still be accepted by keyword
    for q in t_params:
        p = dn_sig.parameters.get(q.name)
        if p is not None and p.kind is inspect.Parameter.POSITIONAL_ONLY:
            bad.append(f"{key}: {q.name} is positional-only here, torch takes it by keyword")
    return bad


def _functional_cases():
    out = []
    for name in DF.__all__:
        key = f"F.{name}"
        if key in NOT_TORCH:
            continue
        assert hasattr(TF, name), f"{key} is not in torch.nn.functional: list it in NOT_TORCH with the reason"
        out.append(pytest.param(key, getattr(DF, name), getattr(TF, name), id=key))
    return out


def _module_cases():
    out = []
    for name in dnn.__all__:
        obj = getattr(dnn, name)
        if not isinstance(obj, type):
            continue
        key = f"nn.{name}"
        if key in NOT_TORCH:
            continue
        assert hasattr(torch.nn, name), f"{key} is not in torch.nn: list it in NOT_TORCH with the reason"
        tobj = getattr(torch.nn, name)
        out.append(pytest.param(key, obj, tobj if name == "Parameter" else tobj.__init__, id=key))
    out.append(pytest.param("nn.Embedding.from_pretrained", dnn.Embedding.from_pretrained,
                            torch.nn.Embedding.from_pretrained, id="nn.Embedding.from_pretrained"))
    return out


_MODULE_METHODS = ["train", "eval", "zero_grad", "requires_grad_", "parameters", "named_parameters", "named_modules",
                   "modules", "children", "named_children", "named_buffers", "buffers", "state_dict",
                   "load_state_dict", "register_buffer", "register_parameter", "add_module", "apply", "to", "double",
                   "float", "half", "cpu", "cuda"]
_OPTIMIZER_METHODS = ["zero_grad", "step", "state_dict", "load_state_dict", "add_param_group"]


def _optim_cases():
    out = []
    for name in doptim.__all__:
        obj = getattr(doptim, name)
        if name == "lr_scheduler":
            continue
        key = f"optim.{name}"
        if name == "clip_grad_norm_":
            out.append(pytest.param(key, obj, torch.nn.utils.clip_grad_norm_, id=key))
            continue
        out.append(pytest.param(key, obj, getattr(torch.optim, name).__init__, id=key))
    for name in dls.__all__:
        key = f"lr_scheduler.{name}"
        out.append(pytest.param(key, getattr(dls, name), getattr(torch.optim.lr_scheduler, name).__init__, id=key))
    for m in ("get_last_lr", "step", "state_dict", "load_state_dict"):
        out.append(pytest.param(f"LRScheduler.{m}", getattr(dls.LRScheduler, m),
                                getattr(torch.optim.lr_scheduler.LRScheduler, m), id=f"LRScheduler.{m}"))
    out.append(pytest.param("ReduceLROnPlateau.step", dls.ReduceLROnPlateau.step,
                            torch.optim.lr_scheduler.ReduceLROnPlateau.step, id="ReduceLROnPlateau.step"))
    for m in _OPTIMIZER_METHODS:
        out.append(pytest.param(f"Optimizer.{m}", getattr(doptim.Optimizer, m), getattr(torch.optim.Optimizer, m),
                                id=f"Optimizer.{m}"))
    for m in _MODULE_METHODS:
        out.append(pytest.param(f"Module.{m}", getattr(dnn.Module, m, None), getattr(torch.nn.Module, m),
                                id=f"Module.{m}"))
    return out


@pytest.mark.parametrize("key,dn_obj,torch_obj", _functional_cases() + _module_cases() + _optim_cases())
def test_positional_arguments_mean_torchs(key, dn_obj, torch_obj):
    assert dn_obj is not None, f"{key} is missing"
    bad = compare(key, dn_obj, torch_obj)
    assert not bad, "\n".join(bad)


def test_the_checker_catches_the_old_signatures():
    # the signatures this issue fixed, as they were: the comparison flags each
    def dropout(x, p, rng, training=True):
        pass

    def embedding(weight, ids):
        pass

    def adam(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, lazy=False):
        pass

    def linear_init(self, in_features, out_features, bias=True, rng=None, dtype=np.float32):
        pass

    def mse_init(self, reduction="mean"):
        pass

    assert compare("F.dropout", dropout, TF.dropout)
    assert compare("F.embedding", embedding, TF.embedding)
    assert compare("optim.Adam", adam, torch.optim.Adam.__init__)
    assert compare("nn.Linear", linear_init, torch.nn.Linear.__init__)
    assert compare("nn.MSELoss", mse_init, torch.nn.MSELoss.__init__)


def test_torch_positional_calls_mean_the_same_here():
    # the habits themselves, called positionally as torch code does
    x = np.ones((400, 50), np.float32)
    out = DF.dropout(x, 0.5, True)                      # training, not a seed
    assert 0.4 < (np.asarray(out.numpy()) == 0).mean() < 0.6
    assert DF.dropout(x, 0.5, False) is x               # eval: the identity
    with pytest.raises(TypeError, match="dropout: training must be a bool"):
        DF.dropout(x, 0.5, 7)
    lin = dnn.Linear(3, 2, False)                       # bias=False
    assert lin.bias is None
    emb = dnn.Embedding(10, 4, 0)                       # padding_idx=0
    assert emb.padding_idx == 0 and not emb.weight.numpy()[0].any()
    drop = dnn.Dropout(0.3)
    assert drop.p == 0.3
    assert dnn.Dropout(0.3, True).inplace is True           # inplace=True, as torch
    with pytest.raises(TypeError, match="MSELoss: size_average is PyTorch's deprecated flag"):
        dnn.MSELoss("sum")
    with pytest.warns(UserWarning, match="use reduction='sum' instead"):
        assert dnn.MSELoss(False).reduction == "sum"     # torch's legacy flags, as torch reads them
    with pytest.raises(ValueError, match="LSTM: proj_size=2 is not supported"):
        dnn.LSTM(3, 4, 1, True, False, 0.0, False, 2)
    for dev in ("cuda", "cuda:0", "mps"):
        with pytest.raises(ValueError, match=f"Linear: device='{dev}' is not available"):
            dnn.Linear(3, 2, True, dev)
    assert dnn.Linear(3, 2, True, "cpu", np.float64).weight.dtype == np.float64


# branch i22-torch-b: torch's builtins among the new names (torch's documentation, 2.x)
DOCUMENTED.update({
    "F.softplus": "input, beta=1, threshold=20",
    "F.logsigmoid": "input",
    "F.cosine_similarity": "x1, x2, dim=1, eps=1e-8",
    "F.pairwise_distance": "x1, x2, p=2.0, eps=1e-6, keepdim=False",
})

# issue 25: builtins without an inspectable signature, as torch documents them
DOCUMENTED.update({
    "F.conv1d": "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1",
    "F.conv2d": "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1",
    "F.avg_pool1d": "input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True",
    "F.adaptive_avg_pool1d": "input, output_size",
    "F.scaled_dot_product_attention": "query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, "
                                      "scale=None, enable_gqa=False",
})
DEFAULTS_DIFFER[("nn.TransformerEncoderLayer", "activation")] = \
    "torch's default is its own F.relu function, here dynnets' F.relu: the same activation"
