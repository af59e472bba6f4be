"""A new user's MLP classifier: the everyday PyTorch habits, one file.

``torch.manual_seed``; a ``TensorDataset`` in a ``DataLoader(shuffle=True,
drop_last=True)``; ``nn.Sequential(OrderedDict(...))`` with ``nn.Dropout``
inside a module that keeps its hidden blocks in an ``nn.ModuleList``;
``model.train()`` / ``model.eval()``; ``nn.init.kaiming_uniform_`` through
``model.apply``; SGD with momentum and weight decay;
``optimizer.zero_grad(set_to_none=True)``; ``clip_grad_norm_``; a ``StepLR``
stepped per epoch; accuracy as ``(pred == y).float().mean()``, with
``torch.max(outputs.data, 1)`` and ``(predicted == labels).sum().item()``
(the CIFAR-10 tutorial's), and ``np.mean`` of per-batch numbers; a checkpoint
dict (model, optimizer and scheduler ``state_dict``s, epoch) saved with
``torch.save``, then training resumed from it in a fresh model.
"""
import argparse
from collections import OrderedDict

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


def make_data(n, seed):
    rng = np.random.RandomState(seed)
    centers = rng.randn(3, 4) * 2.0
    labels = rng.randint(0, 3, n)
    points = centers[labels] + rng.randn(n, 4)
    return points.astype(np.float32), labels.astype(np.int64)


class Net(nn.Module):
    def __init__(self, n_in, n_hidden, n_out, n_blocks=2, p=0.2):
        super().__init__()
        self.stem = nn.Sequential(OrderedDict([
            ("fc", nn.Linear(n_in, n_hidden)),
            ("act", nn.ReLU()),
            ("drop", nn.Dropout(p)),
        ]))
        self.blocks = nn.ModuleList([nn.Linear(n_hidden, n_hidden) for _ in range(n_blocks)])
        self.head = nn.Linear(n_hidden, n_out)
        self.p = p

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = F.dropout(F.relu(block(x)), p=self.p, training=self.training)
        return self.head(x)


def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.kaiming_uniform_(m.weight, nonlinearity="relu")
        nn.init.constant_(m.bias, 0.01)


def evaluate(model, loader):
    model.eval()
    correct, total, accs = 0, 0, []
    with torch.no_grad():
        for inputs, labels in loader:
            outputs = model(inputs)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
            accs.append((outputs.argmax(dim=1) == labels).float().mean().item())
    return correct / total, float(np.mean(accs))


def train_epochs(model, optimizer, scheduler, loader, criterion, epochs, clip, losses):
    for epoch in epochs:
        model.train()
        for inputs, labels in loader:
            optimizer.zero_grad(set_to_none=True)
            outputs = model(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip)
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()


def build(args):
    model = Net(4, args.hidden, 3, p=args.dropout)
    model.apply(init_weights)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    return model, optimizer, scheduler


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--seed", default=0, type=int)
    p.add_argument("--hidden", default=16, type=int)
    p.add_argument("--dropout", default=0.2, type=float)
    p.add_argument("--lr", default=0.05, type=float)
    p.add_argument("--epochs", default=4, type=int)
    p.add_argument("--clip", default=1.0, type=float)
    p.add_argument("--checkpoint", default="checkpoint.pt")
    p.add_argument("--init", default=None)
    p.add_argument("--dump_init", default=None)
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    x, y = make_data(240, args.seed)
    train_set = TensorDataset(torch.from_numpy(x[:200]), torch.from_numpy(y[:200]))
    test_set = TensorDataset(torch.tensor(x[200:]), torch.tensor(y[200:]))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, drop_last=True)
    test_loader = DataLoader(test_set, batch_size=16)
    criterion = nn.CrossEntropyLoss()

    model, optimizer, scheduler = build(args)
    if args.dump_init:
        np.savez(args.dump_init, **{k: v.numpy() for k, v in model.state_dict().items()})
    if args.init:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(args.init).items()})

    # same seed, same model: the initialisation is reproducible
    torch.manual_seed(args.seed)
    twin = Net(4, args.hidden, 3, p=args.dropout)
    twin.apply(init_weights)
    torch.manual_seed(args.seed)
    twin2 = Net(4, args.hidden, 3, p=args.dropout)
    twin2.apply(init_weights)
    reproducible = all(torch.equal(a, b) for a, b in zip(twin.parameters(), twin2.parameters()))

    losses = []
    half = args.epochs // 2
    train_epochs(model, optimizer, scheduler, train_loader, criterion, range(half), args.clip, losses)
    torch.save({"epoch": half, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "losses": losses}, args.checkpoint)
    acc_half = evaluate(model, test_loader)

    # resume in fresh objects, as after a restart
    checkpoint = torch.load(args.checkpoint)
    model, optimizer, scheduler = build(args)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    losses = list(checkpoint["losses"])
    train_epochs(model, optimizer, scheduler, train_loader, criterion, range(checkpoint["epoch"], args.epochs),
                 args.clip, losses)
    acc = evaluate(model, test_loader)

    # eval mode turns dropout off: two evaluations agree
    model.eval()
    with torch.no_grad():
        a = model(torch.from_numpy(x[:8]))
        b = model(torch.from_numpy(x[:8]))
    deterministic_eval = bool((a == b).all())
    return {"losses": losses, "accuracy_half": list(acc_half), "accuracy": list(acc),
            "lr": optimizer.param_groups[0]["lr"], "reproducible_init": reproducible,
            "deterministic_eval": deterministic_eval}


if __name__ == "__main__":
    main()
