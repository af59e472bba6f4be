# -*- coding: utf-8 -*-
"""
PyTorch: defining new autograd Functions
----------------------------------------

y = a + b * P3(c + d * x) fitted to sin(x), with the Legendre polynomial P3
written as a ``torch.autograd.Function`` with a hand-written backward, in the
style of the PyTorch tutorials'
``beginner_source/examples_autograd/polynomial_custom_function.py``.
"""
import argparse
import math

import torch


class LegendrePolynomial3(torch.autograd.Function):
    """P3(x) = 1/2 (5x^3 - 3x) with its derivative written by hand."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


def run(args, dtype, device):
    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)

    a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)

    losses = []
    learning_rate = 5e-6
    for t in range(args.steps):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
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
            a.grad.zero_()
            b.grad.zero_()
            c.grad.zero_()
            d.grad.zero_()
    print(f'Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)')
    return losses, [a.item(), b.item(), c.item(), d.item()]


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", default=2000, type=int)
    parser.add_argument("--dtype", default="float")
    args = parser.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    device = torch.device("cpu")
    # device = torch.device("cuda:0")  # Uncomment this to run on GPU
    losses, coef = run(args, dtype, device)
    return {"losses": losses, "coefficients": coef}


if __name__ == "__main__":
    main()
