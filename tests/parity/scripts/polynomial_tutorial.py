# -*- coding: utf-8 -*-
"""
Fitting y = sin(x) with a third order polynomial, four ways
----------------------------------------------------------

Written in the style of the PyTorch tutorials' "Learning PyTorch with
Examples" (``beginner_source/examples_autograd/polynomial_autograd.py``,
``examples_nn/polynomial_nn.py``,
``polynomial_optim.py``, ``polynomial_module.py``): the same idioms, one file.

The parity test runs this file as written with PyTorch and, with its import
lines changed to ``import dynnets as torch``, with dynnets; ``--init`` gives
both the same starting coefficients.
"""
import argparse
import math

import numpy as np
import torch


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="polynomial regression, the tutorial way")
    parser.add_argument("--variant", default="autograd",
                        choices=["autograd", "nn", "optim", "module"])
    parser.add_argument("--steps", default=2000, type=int)
    parser.add_argument("--dtype", default="float", help="torch dtype name: float or float64")
    parser.add_argument("--optim", default="SGD", help="optimizer for --variant optim: SGD or RMSprop")
    parser.add_argument("--init", default=None, help=".npz of starting weights (the parity test's)")
    parser.add_argument("--save", default=None, help="where to torch.save the final state")
    return parser.parse_args(argv)


class Polynomial3(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(()))
        self.b = torch.nn.Parameter(torch.randn(()))
        self.c = torch.nn.Parameter(torch.randn(()))
        self.d = torch.nn.Parameter(torch.randn(()))

    def forward(self, x):
        return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

    def string(self):
        return f'y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + {self.d.item()} x^3'


def run_autograd(args, dtype, device, init):
    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)

    a = torch.randn((), device=device, dtype=dtype, requires_grad=True)
    b = torch.randn((), device=device, dtype=dtype, requires_grad=True)
    c = torch.randn((), device=device, dtype=dtype, requires_grad=True)
    d = torch.randn((), device=device, dtype=dtype, requires_grad=True)
    if init is not None:
        a = torch.tensor(init["a"], device=device, dtype=dtype, requires_grad=True)
        b = torch.tensor(init["b"], device=device, dtype=dtype, requires_grad=True)
        c = torch.tensor(init["c"], device=device, dtype=dtype, requires_grad=True)
        d = torch.tensor(init["d"], device=device, dtype=dtype, requires_grad=True)

    losses = []
    learning_rate = 1e-6
    for t in range(args.steps):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        if t % 100 == 99:
            print(t, loss.item())
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            # Manually zero the gradients after updating weights
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    print(f'Result: y = {a.item()} + {b.item()} x + {c.item()} x^2 + {d.item()} x^3')
    return losses, [a.item(), b.item(), c.item(), d.item()]


def run_nn(args, dtype, device, init, use_optim):
    x = torch.linspace(-math.pi, math.pi, 2000, dtype=dtype)
    y = torch.sin(x)

    # (x, x^2, x^3): x.unsqueeze(-1) has shape (2000, 1) and p (3,), so broadcasting gives (2000, 3)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)

    model = torch.nn.Sequential(
        torch.nn.Linear(3, 1),
        torch.nn.Flatten(0, 1)
    )
    model = model.to(dtype)
    if init is not None:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in init.items()})
    loss_fn = torch.nn.MSELoss(reduction='sum')

    if use_optim:
        if args.optim == "RMSprop":
            learning_rate = 1e-3
            optimizer = torch.optim.RMSprop(model.parameters(), lr=learning_rate)
        else:
            learning_rate = 1e-6
            optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    else:
        learning_rate = 1e-6

    losses = []
    for t in range(args.steps):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        if t % 100 == 99:
            print(t, loss.item())
        losses.append(loss.item())
        if use_optim:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        else:
            model.zero_grad()
            loss.backward()
            with torch.no_grad():
                for param in model.parameters():
                    param -= learning_rate * param.grad

    linear_layer = model[0]
    print(f'Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + '
          f'{linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3')
    if args.save:
        torch.save(model.state_dict(), args.save)
    return losses, [linear_layer.bias.item()] + linear_layer.weight.detach().flatten().tolist()


def run_module(args, dtype, device, init):
    x = torch.linspace(-math.pi, math.pi, 2000, dtype=dtype)
    y = torch.sin(x)

    model = Polynomial3()
    model.to(dtype)
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    criterion = torch.nn.MSELoss(reduction='sum')
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    losses = []
    for t in range(args.steps):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        if t % 100 == 99:
            print(t, loss.item())
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f'Result: {model.string()}')
    if args.save:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": args.steps},
                   args.save)
    return losses, [model.a.item(), model.b.item(), model.c.item(), model.d.item()]


def main(argv=None):
    args = parse_args(argv)
    dtype = getattr(torch, args.dtype)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    init = dict(np.load(args.init)) if args.init else None
    if args.variant == "autograd":
        losses, coef = run_autograd(args, dtype, device, init)
    elif args.variant in ("nn", "optim"):
        losses, coef = run_nn(args, dtype, device, init, use_optim=args.variant == "optim")
    else:
        losses, coef = run_module(args, dtype, device, init)
    return {"losses": losses, "coefficients": coef}


if __name__ == "__main__":
    main()
