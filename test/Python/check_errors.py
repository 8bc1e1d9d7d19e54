#!/usr/bin/env python3
"""stepc.export's errors name the construct and the model's source line
(test/Python/export.test): an op with no lowering, a branch on a tensor's
value, a shape that depends on data, a non-scalar loss, a custom
autograd.Function (its backward would be lost) and an argument stepc
cannot honour."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import stepc


class Cumsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return torch.cumprod(x @ self.w, dim=1).mean()  # LINE-CUMSUM


class Branch(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        y = x @ self.w
        if y.sum() > 0:  # LINE-BRANCH
            return y.mean()
        return -y.mean()


class Dynamic(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        y = x @ self.w
        return y[y > 0].sum()  # LINE-DYNAMIC


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        self.seen.add_(1)  # LINE-BUFFER
        return (x @ self.w).mean()


class NotScalar(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return x @ self.w


class TwoSmoothings(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        t = torch.zeros(2, dtype=torch.long)
        return (F.cross_entropy(x @ self.w, t, label_smoothing=0.1) +
                F.cross_entropy(x @ self.w, t, label_smoothing=0.2))


class WeightedSmoothing(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        t = torch.zeros(2, dtype=torch.long)
        return F.cross_entropy(x @ self.w, t, weight=torch.ones(4), label_smoothing=0.1)


class SharpSoftplus(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return F.softplus(x @ self.w, threshold=5.0).mean()  # LINE-SOFTPLUS


class OneNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return F.normalize(x @ self.w, p=1.0, dim=-1).sum()  # LINE-NORM


class OverlappingConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, kernel_size=3, padding=1)

    def forward(self, x):
        return self.conv(x.view(2, 1, 2, 2)).mean()  # LINE-CONV


class NanWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        with torch.no_grad():
            self.w[1, 2] = float("inf")

    def forward(self, x):
        return (x @ self.w).mean()


class Frozen(nn.Module):
    """Every parameter frozen: nothing to train (one frozen among trained
    ones exports; test/Python/export.test's LoRA)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        self.base = nn.Linear(4, 4)
        self.requires_grad_(False)

    def forward(self, x):
        return self.base(x @ self.w).mean()


class RoundSTE(torch.autograd.Function):
    """A straight-through rounding: its backward is the identity, which a
    trace of its forward (round, gradient zero) would lose."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)  # LINE-FUNCTION

    @staticmethod
    def backward(ctx, grad):
        return grad


class CustomFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return RoundSTE.apply(x @ self.w).mean()


class EmbeddingByFrequency(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 4, scale_grad_by_freq=True)

    def forward(self, x):
        return self.emb((x.abs() * 3).long()).mean()  # LINE-FREQ


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 4, batch_first=True)

    def forward(self, x):
        return self.rnn(x.view(2, 1, 4))[0].mean()


class BatchNormed(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(x @ self.w).mean()


def line_of(tag):
    for i, text in enumerate(open(__file__), 1):
        if f"# {tag}" in text and "def line_of" not in text:
            return i
    raise AssertionError(tag)


x = torch.randn(2, 4)
for model, expect in ((Cumsum(), ["aten.cumprod", f"check_errors.py:{line_of('LINE-CUMSUM')}"]),
                      (Branch(), ["data-dependent control flow",
                                  f"check_errors.py:{line_of('LINE-BRANCH')}"]),
                      (Dynamic(), ["a dynamic shape", "aten.index",
                                   f"check_errors.py:{line_of('LINE-DYNAMIC')}"]),
                      (Counter(), ["updates buffer 'seen' in place",
                                   f"check_errors.py:{line_of('LINE-BUFFER')}"]),
                      (NotScalar(), ["scalar loss"]),
                      (TwoSmoothings(), ["different label_smoothing (0.1, 0.2)"]),
                      (WeightedSmoothing(), ["label_smoothing on a cross-entropy other than"]),
                      (SharpSoftplus(), ["threshold 5.0",
                                         f"check_errors.py:{line_of('LINE-SOFTPLUS')}"]),
                      (OneNorm(), ["a 1.0-norm", f"check_errors.py:{line_of('LINE-NORM')}"]),
                      (OverlappingConv(), ["stride [1, 1], padding [1, 1]",
                                           f"check_errors.py:{line_of('LINE-CONV')}"]),
                      (Frozen(), ["every parameter (3) is frozen (requires_grad=False): the step would train nothing"]),
                      (NanWeight(), ["parameter 'w' holds inf at element 6"]),
                      (CustomFunction(), ["torch.autograd.Function 'RoundSTE'",
                                          f"check_errors.py:{line_of('LINE-FUNCTION')}"]),
                      (EmbeddingByFrequency(), ["scale_grad_by_freq=True",
                                                f"check_errors.py:{line_of('LINE-FREQ')}"]),
                      (Recurrent(), ["LSTM 'rnn'", "nn.LSTMCell"]),
                      (BatchNormed(), ["BatchNorm in training mode", "nn.LayerNorm"])):
    try:
        stepc.export(model, (x,), sys.argv[1])
    except stepc.ExportError as e:
        message = str(e)
        missing = [m for m in expect if m not in message]
        if missing:
            sys.exit(f"FAIL: {type(model).__name__}: {missing} not in: {message}")
        print(f"{type(model).__name__}: {message}")
    else:
        sys.exit(f"FAIL: {type(model).__name__} exported")
# An output that is a file is named before any tracing.
open(sys.argv[1] + ".file", "w").close()
try:
    stepc.export(NanWeight(), (x,), sys.argv[1] + ".file")
except stepc.ExportError as e:
    print(f"output: {e}")
else:
    sys.exit("FAIL: exported into a file")
print("ok")
