"""A new user's BiGRU sentence classifier with additive attention pooling
over a padding mask, in the style of the "Hierarchical Attention Networks"
re-implementations and the attention tutorials.

Its habits: sentences of different lengths padded with
``pad_sequence(batch_first=True)`` in a ``collate_fn``; the lengths as a
tensor; ``pack_padded_sequence(..., lengths.cpu(), batch_first=True,
enforce_sorted=False)`` into a bidirectional ``nn.GRU``, back with
``pad_packed_sequence(total_length=...)``; a padding mask from
``torch.arange(T)[None, :] < lengths[:, None]``; attention scores from a
query vector with ``torch.bmm`` and ``unsqueeze``/``squeeze``,
``masked_fill(~mask, float('-inf'))`` before ``softmax``; the pooled vector
``bmm(weights.unsqueeze(1), outputs).squeeze(1)``; ``BCEWithLogitsLoss`` on
``logits.squeeze(-1)`` against float labels; Adam; ``(torch.sigmoid(logits)
> 0.5).long()`` predictions; the attention weights checked to sum to one.
"""
import argparse
import os

import numpy as np

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset


def read_polarity(path):
    sents, labels = [], []
    for name, label in (("rt-polarity.pos", 1), ("rt-polarity.neg", 0)):
        with open(os.path.join(path, name), encoding="utf8") as f:
            for line in f:
                if line.strip():
                    sents.append(line.split())
                    labels.append(label)
    return sents, labels


class SentDataset(Dataset):
    def __init__(self, sents, labels, vocab):
        self.items = [([vocab.get(w, 1) for w in s], y) for s, y in zip(sents, labels)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        ids, y = self.items[i]
        return torch.tensor(ids, dtype=torch.long), torch.tensor(y, dtype=torch.float)


def collate(batch):
    seqs, ys = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])
    return pad_sequence(seqs, batch_first=True, padding_value=0), lengths, torch.stack(ys)


class AttnClassifier(nn.Module):
    def __init__(self, vocab_size, emb_dim, hidden):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, emb_dim, padding_idx=0)
        self.rnn = nn.GRU(emb_dim, hidden, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * hidden, 2 * hidden)
        self.query = nn.Parameter(torch.randn(2 * hidden) * 0.1)
        self.out = nn.Linear(2 * hidden, 1)

    def forward(self, x, lengths):
        T = x.size(1)
        packed = pack_padded_sequence(self.emb(x), lengths.cpu(), batch_first=True, enforce_sorted=False)
        outputs, _ = self.rnn(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=T)
        keys = torch.tanh(self.proj(outputs))                                      # (B, T, 2H)
        q = self.query.unsqueeze(0).expand(x.size(0), -1).unsqueeze(2)             # (B, 2H, 1)
        scores = torch.bmm(keys, q).squeeze(2)                                     # (B, T)
        mask = torch.arange(T)[None, :] < lengths[:, None]
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=1)
        pooled = torch.bmm(weights.unsqueeze(1), outputs).squeeze(1)               # (B, 2H)
        return self.out(pooled), weights


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--emb_dim", type=int, default=8)
    p.add_argument("--hidden", type=int, default=6)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--init", default=None)
    p.add_argument("--dump_init", default=None)
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    sents, labels = read_polarity(args.data)
    vocab = {"<pad>": 0, "<unk>": 1}
    for s in sents:
        for w in s:
            vocab.setdefault(w, len(vocab))
    data = SentDataset(sents, labels, vocab)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, collate_fn=collate)

    model = AttnClassifier(len(vocab), args.emb_dim, args.hidden)
    if args.dump_init:
        np.savez(args.dump_init, **{k: v.numpy() for k, v in model.state_dict().items()})
    if args.init:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(args.init).items()})
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.BCEWithLogitsLoss()

    losses, accs = [], []
    weights_sum_to_one, padding_weight = True, 0.0
    for epoch in range(args.epochs):
        model.train()
        correct = 0
        for x, lengths, y in loader:
            optimizer.zero_grad()
            logits, weights = model(x, lengths)
            loss = criterion(logits.squeeze(-1), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            preds = (torch.sigmoid(logits.squeeze(-1)) > 0.5).long()
            correct += (preds == y.long()).sum().item()
            weights_sum_to_one &= bool(torch.allclose(weights.sum(dim=1), torch.ones(x.size(0))))
            pad = torch.arange(x.size(1))[None, :] >= lengths[:, None]
            padding_weight = max(padding_weight, weights[pad].abs().max().item() if pad.any() else 0.0)
        accs.append(correct / len(data))
    return {"losses": losses, "accs": accs, "weights_sum_to_one": weights_sum_to_one,
            "padding_weight": padding_weight}


if __name__ == "__main__":
    main()
