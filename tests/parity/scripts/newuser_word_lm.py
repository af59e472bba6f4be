"""Word-level language model, in the style of pytorch/examples
``word_language_model`` (``model.py``, ``data.py``, ``main.py``).

Its habits: a ``Dictionary``/``Corpus`` turning text into
``torch.tensor(ids).type(torch.int64)`` and ``torch.cat``; ``batchify`` with
``narrow``, ``view(bsz, -1).t().contiguous()``; ``get_batch`` slices;
``repackage_hidden`` detaching the carried state (truncated BPTT);
``init_hidden`` from ``next(self.parameters()).new_zeros``; tied encoder and
decoder weights (``self.decoder.weight = self.encoder.weight``);
``nn.init.uniform_``; ``model.zero_grad()``; ``clip_grad_norm_``; the
hand-written update ``p.data.add_(p.grad, alpha=-lr)``; the learning rate
divided by 4 when validation stops improving; the best model saved with
``torch.save(model.state_dict(), f)`` into an open file; and a second,
tutorial-style loop: the two-layer net of "Learning PyTorch with Examples"
(``two_layer_net_autograd.py``) updated under ``torch.no_grad()`` with
``w -= lr * w.grad`` and ``w.grad.zero_()``.
"""
import argparse
import math
import os

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------- data.py
class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, 'train.txt'))
        self.valid = self.tokenize(os.path.join(path, 'valid.txt'))

    def tokenize(self, path):
        assert os.path.exists(path)
        with open(path, 'r', encoding="utf8") as f:
            for line in f:
                words = line.split() + ['<eos>']
                for word in words:
                    self.dictionary.add_word(word)
        with open(path, 'r', encoding="utf8") as f:
            idss = []
            for line in f:
                words = line.split() + ['<eos>']
                ids = []
                for word in words:
                    ids.append(self.dictionary.word2idx[word])
                idss.append(torch.tensor(ids).type(torch.int64))
            ids = torch.cat(idss)
        return ids


# ---------------------------------------------------------------- model.py
class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ['LSTM', 'GRU']:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {'RNN_TANH': 'tanh', 'RNN_RELU': 'relu'}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError('When using the tied flag, nhid must be equal to emsize')
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == 'LSTM':
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        else:
            return weight.new_zeros(self.nlayers, bsz, self.nhid)


# ---------------------------------------------------------------- main.py
def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def two_layer_net(dtype, device, steps, init):
    N, D_in, H, D_out = 16, 10, 8, 3
    rng = np.random.RandomState(0)
    x = torch.tensor(rng.randn(N, D_in), device=device, dtype=dtype)
    y = torch.tensor(rng.randn(N, D_out), device=device, dtype=dtype)
    w1 = torch.randn(D_in, H, device=device, dtype=dtype, requires_grad=True)
    w2 = torch.randn(H, D_out, device=device, dtype=dtype, requires_grad=True)
    if init is not None:
        w1 = torch.tensor(init["w1"], device=device, dtype=dtype, requires_grad=True)
        w2 = torch.tensor(init["w2"], device=device, dtype=dtype, requires_grad=True)
    learning_rate = 1e-3
    losses = []
    for t in range(steps):
        y_pred = x.mm(w1).clamp(min=0).mm(w2)
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            w1 -= learning_rate * w1.grad
            w2 -= learning_rate * w2.grad
            w1.grad.zero_()
            w2.grad.zero_()
    return losses


def main(argv=None):
    parser = argparse.ArgumentParser(description='PyTorch RNN/LSTM/GRU Language Model')
    parser.add_argument('--data', type=str, required=True, help='location of the data corpus')
    parser.add_argument('--model', type=str, default='LSTM', help='type of network (RNN_TANH, RNN_RELU, LSTM, GRU)')
    parser.add_argument('--emsize', type=int, default=200)
    parser.add_argument('--nhid', type=int, default=200)
    parser.add_argument('--nlayers', type=int, default=2)
    parser.add_argument('--lr', type=float, default=20)
    parser.add_argument('--clip', type=float, default=0.25)
    parser.add_argument('--epochs', type=int, default=40)
    parser.add_argument('--batch_size', type=int, default=20, metavar='N')
    parser.add_argument('--bptt', type=int, default=35)
    parser.add_argument('--dropout', type=float, default=0.2)
    parser.add_argument('--tied', action='store_true')
    parser.add_argument('--seed', type=int, default=1111)
    parser.add_argument('--save', type=str, default='model.pt')
    parser.add_argument('--init', default=None, help='.npz state_dict to start from (the parity test)')
    parser.add_argument('--dump_init', default=None)
    parser.add_argument('--dtype', default='float')
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    corpus = Corpus(args.data)
    eval_batch_size = 4
    train_data = batchify(corpus.train, args.batch_size, device)
    val_data = batchify(corpus.valid, eval_batch_size, device)

    ntokens = len(corpus.dictionary)
    model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied).to(device)
    model = model.to(getattr(torch, args.dtype))
    if args.dump_init:
        state = {k: v.numpy() for k, v in model.state_dict().items()}
        rng = np.random.RandomState(1)
        state["w1"], state["w2"] = rng.randn(10, 8), rng.randn(8, 3)
        np.savez(args.dump_init, **state)
    init = dict(np.load(args.dump_init)) if args.dump_init else None
    if args.init:
        init = dict(np.load(args.init))
        model.load_state_dict({k: torch.from_numpy(v) for k, v in init.items() if k not in ("w1", "w2")})
    criterion = nn.NLLLoss()
    step_losses = []

    def evaluate(data_source):
        model.eval()
        total_loss = 0.
        hidden = model.init_hidden(eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i, args.bptt)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    def train(lr):
        model.train()
        hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i, args.bptt)
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            step_losses.append(loss.item())

    lr = args.lr
    best_val_loss = None
    val_losses = []
    for epoch in range(1, args.epochs + 1):
        train(lr)
        val_loss = evaluate(val_data)
        val_losses.append(val_loss)
        print('| end of epoch {:3d} | valid loss {:5.2f} | valid ppl {:8.2f}'.format(
            epoch, val_loss, math.exp(val_loss)))
        if not best_val_loss or val_loss < best_val_loss:
            with open(args.save, 'wb') as f:
                torch.save(model.state_dict(), f)
            best_val_loss = val_loss
        else:
            lr /= 4.0
    with open(args.save, 'rb') as f:
        model.load_state_dict(torch.load(f))
        if args.model in ['RNN_TANH', 'RNN_RELU', 'LSTM', 'GRU']:
            model.rnn.flatten_parameters()
    best = evaluate(val_data)
    tied = model.decoder.weight is model.encoder.weight
    two_layer = two_layer_net(getattr(torch, args.dtype), device, 50, init)
    return {"losses": step_losses, "val_losses": val_losses, "best": best, "lr": lr, "tied": tied,
            "n_params": sum(p.numel() for p in model.parameters()), "two_layer_losses": two_layer}


if __name__ == "__main__":
    main()
