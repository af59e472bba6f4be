"""A new user's character-level GRU language model, in the style of the
char-rnn ports researchers write from Karpathy's min-char-rnn and the
PyTorch "generating names" tutorial.

Its habits: a character vocabulary with a ``<pad>`` id; the text stream cut
into ``batch_size`` rows (``torch.tensor(ids, dtype=torch.long)``), the last
chunk padded and masked by ``CrossEntropyLoss(ignore_index=pad)``;
``nn.Embedding`` -> ``nn.GRU(batch_first=True)`` -> ``nn.Linear`` with the
logits reshaped ``logits.view(-1, vocab)`` against ``targets.reshape(-1)``;
the hidden state carried across chunks and cut with ``hidden.detach()``;
``model.train()`` / ``model.eval()``; ``clip_grad_norm_``; Adam with a
``StepLR`` stepped per epoch; evaluation under ``torch.no_grad()`` summing
``loss.item() * n_tokens`` over non-pad tokens, perplexity with ``math.exp``;
greedy generation from a prompt with ``argmax(dim=-1)`` and
``unsqueeze(0)``; ``torch.save(model.state_dict(), path)`` of the best model,
reloaded at the end.
"""
import argparse
import math
import os

import numpy as np

import torch
import torch.nn as nn


class CharVocab:
    def __init__(self, text):
        self.itos = ["<pad>"] + sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    def encode(self, s):
        return [self.stoi[c] for c in s if c in self.stoi]

    def decode(self, ids):
        return "".join(self.itos[i] for i in ids)

    def __len__(self):
        return len(self.itos)


def make_batches(ids, batch_size, seq_len, pad):
    """(inputs, targets) chunks of shape (batch_size, <= seq_len): each row
    a contiguous slice of the stream; the tail padded with ``pad``."""
    data = torch.tensor(ids, dtype=torch.long)
    row = int(math.ceil((len(data) - 1) / batch_size))
    total = row * batch_size + 1
    if total > len(data):
        data = torch.cat([data, torch.full((total - len(data),), pad, dtype=torch.long)])
    inputs = data[:-1].view(batch_size, row)
    targets = data[1:].view(batch_size, row)
    chunks = []
    for start in range(0, row, seq_len):
        end = min(start + seq_len, row)
        chunks.append((inputs[:, start:end], targets[:, start:end]))
    return chunks


class CharGRU(nn.Module):
    def __init__(self, vocab_size, emb_dim, hidden_dim, num_layers, dropout, pad):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad)
        self.gru = nn.GRU(emb_dim, hidden_dim, num_layers=num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(hidden_dim, vocab_size)
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim

    def forward(self, x, hidden=None):
        emb = self.drop(self.embed(x))
        out, hidden = self.gru(emb, hidden)
        logits = self.fc(self.drop(out))
        return logits, hidden

    def init_hidden(self, batch_size):
        return torch.zeros(self.num_layers, batch_size, self.hidden_dim)


def evaluate(model, chunks, criterion, pad, batch_size):
    model.eval()
    total, count = 0.0, 0
    hidden = model.init_hidden(batch_size)
    with torch.no_grad():
        for x, y in chunks:
            logits, hidden = model(x, hidden)
            loss = criterion(logits.view(-1, logits.size(-1)), y.reshape(-1))
            n = (y != pad).sum().item()
            total += loss.item() * n
            count += n
    return total / count


def generate(model, vocab, prompt, length):
    model.eval()
    ids = vocab.encode(prompt)
    with torch.no_grad():
        x = torch.tensor(ids, dtype=torch.long).unsqueeze(0)
        logits, hidden = model(x)
        out = []
        for _ in range(length):
            next_id = logits[0, -1].argmax(dim=-1)
            out.append(int(next_id))
            logits, hidden = model(next_id.view(1, 1), hidden)
    return vocab.decode(out)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--emb_dim", type=int, default=16)
    p.add_argument("--hidden_dim", type=int, default=32)
    p.add_argument("--num_layers", type=int, default=1)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--batch_size", type=int, default=4)
    p.add_argument("--seq_len", type=int, default=25)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--clip", type=float, default=0.5)
    p.add_argument("--max_chars", type=int, default=1200)
    p.add_argument("--save", default="char_gru.pt")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--init", default=None)
    p.add_argument("--dump_init", default=None)
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    with open(os.path.join(args.data, "train.txt")) as f:
        train_text = f.read()[:args.max_chars]
    with open(os.path.join(args.data, "valid.txt")) as f:
        valid_text = f.read()[:args.max_chars // 3]
    vocab = CharVocab(train_text)
    pad = vocab.stoi["<pad>"]
    train_chunks = make_batches(vocab.encode(train_text), args.batch_size, args.seq_len, pad)
    valid_chunks = make_batches(vocab.encode(valid_text), args.batch_size, args.seq_len, pad)

    model = CharGRU(len(vocab), args.emb_dim, args.hidden_dim, args.num_layers, args.dropout, pad)
    if args.dump_init:
        np.savez(args.dump_init, **{k: v.numpy() for k, v in model.state_dict().items()})
    if args.init:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(args.init).items()})
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)

    criterion = nn.CrossEntropyLoss(ignore_index=pad)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

    losses, val_losses, grad_norms = [], [], []
    best_val = float("inf")
    for epoch in range(args.epochs):
        model.train()
        hidden = model.init_hidden(args.batch_size)
        for x, y in train_chunks:
            hidden = hidden.detach()
            optimizer.zero_grad()
            logits, hidden = model(x, hidden)
            loss = criterion(logits.view(-1, len(vocab)), y.reshape(-1))
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            losses.append(loss.item())
            grad_norms.append(float(norm))
        scheduler.step()
        val_loss = evaluate(model, valid_chunks, criterion, pad, args.batch_size)
        val_losses.append(val_loss)
        print(f"epoch {epoch + 1} | lr {scheduler.get_last_lr()[0]:.5f} | valid loss {val_loss:.3f} "
              f"| ppl {math.exp(val_loss):.2f}")
        if val_loss < best_val:
            best_val = val_loss
            torch.save(model.state_dict(), args.save)

    model.load_state_dict(torch.load(args.save))
    best_ppl = math.exp(evaluate(model, valid_chunks, criterion, pad, args.batch_size))
    sample = generate(model, vocab, "the ", 12)
    return {"losses": losses, "val_losses": val_losses, "grad_norms": grad_norms, "best_ppl": best_ppl,
            "lr": optimizer.param_groups[0]["lr"], "n_params": n_params, "sample": sample}


if __name__ == "__main__":
    main()
