"""A new user's MLP classifier with early stopping, the way a course
exercise or a quick baseline is written.

Its habits (beyond ``newuser_mlp.py``'s): ``torch.randn``-free synthetic data
from numpy turned into tensors with ``torch.from_numpy(...).float()`` and
``.long()``; ``TensorDataset`` and ``DataLoader(shuffle=True,
generator=torch.Generator().manual_seed(s))``; a flat ``nn.Sequential`` of
``Linear``, ``LayerNorm``, ``ReLU``, ``Dropout``; SGD with momentum and
weight decay; the validation accuracy as ``(pred == y).sum().item() /
len(y)`` with ``pred = logits.argmax(1)``; early stopping that keeps
``copy.deepcopy(model.state_dict())`` of the best epoch and a patience
counter, then ``model.load_state_dict(best_state)``; the final numbers in
``torch.no_grad()``: test accuracy, a per-class accuracy from ``y == c``
masks and ``torch.softmax(...).max(dim=1)`` confidences.
"""
import argparse
import copy

import numpy as np

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def make_blobs(n, n_features, n_classes, seed):
    rng = np.random.RandomState(seed)
    centers = rng.randn(n_classes, n_features) * 1.5
    y = rng.randint(0, n_classes, size=n)
    x = centers[y] + rng.randn(n, n_features)
    return x, y


def build_model(n_features, hidden, n_classes, dropout):
    return nn.Sequential(
        nn.Linear(n_features, hidden),
        nn.LayerNorm(hidden),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, n_classes),
    )


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        pred = model(x).argmax(1)
    return (pred == y).sum().item() / len(y)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--features", type=int, default=6)
    p.add_argument("--classes", type=int, default=3)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init", default=None)
    p.add_argument("--dump_init", default=None)
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    x, y = make_blobs(args.n, args.features, args.classes, args.seed)
    x_t, y_t = torch.from_numpy(x).float(), torch.from_numpy(y).long()
    n_train, n_val = int(0.6 * args.n), int(0.2 * args.n)
    x_train, y_train = x_t[:n_train], y_t[:n_train]
    x_val, y_val = x_t[n_train:n_train + n_val], y_t[n_train:n_train + n_val]
    x_test, y_test = x_t[n_train + n_val:], y_t[n_train + n_val:]

    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(args.seed))
    model = build_model(args.features, args.hidden, args.classes, args.dropout)
    if args.dump_init:
        np.savez(args.dump_init, **{k: v.numpy() for k, v in model.state_dict().items()})
    if args.init:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(args.init).items()})

    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)

    losses, val_accs = [], []
    best_acc, best_state, best_epoch, bad_epochs = -1.0, None, -1, 0
    for epoch in range(args.epochs):
        model.train()
        running = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            running += loss.item() * xb.size(0)
        val_acc = accuracy(model, x_val, y_val)
        val_accs.append(val_acc)
        print(f"epoch {epoch}: train loss {running / len(loader.dataset):.4f} val acc {val_acc:.3f}")
        if val_acc > best_acc:
            best_acc, best_epoch, bad_epochs = val_acc, epoch, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad_epochs += 1
            if bad_epochs >= args.patience:
                print(f"early stopping at epoch {epoch}")
                break

    last_w = model[0].weight.detach().clone()
    model.load_state_dict(best_state)
    restored = not torch.equal(model[0].weight, last_w) or best_epoch == len(val_accs) - 1

    test_acc = accuracy(model, x_test, y_test)
    with torch.no_grad():
        probs = torch.softmax(model(x_test), dim=1)
        conf, pred = probs.max(dim=1)
    per_class = []
    for c in range(args.classes):
        mask = y_test == c
        per_class.append((pred[mask] == c).float().mean().item() if mask.sum() > 0 else float("nan"))
    return {"losses": losses, "val_accs": val_accs, "best_epoch": best_epoch, "test_acc": test_acc,
            "per_class": per_class, "mean_conf": conf.mean().item(), "restored": bool(restored),
            "epochs_run": len(val_accs)}


if __name__ == "__main__":
    main()
