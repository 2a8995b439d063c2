#!/usr/bin/python3
"""Writes the PyTorch golden data of tests/scatter_test.cpp into
tests/data/scatter/scatter.safetensors.

For every case <name> below: "<name>.x", "<name>.index" and, except for the value forms,
"<name>.src" hold the arguments, and "<name>.out" what torch's scatter, scatter_add or
scatter_reduce computes from them (the C++ test repeats op, dim and options under the same name).
scatter's cases write each position at most once: torch leaves the winner of a repeated position
unspecified. Run: /usr/bin/python3 make_scatter_golden.py (needs only torch).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_modules_golden  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "scatter")


def distinct(rows, picks, n):
    """[rows, picks] int64: each row picks distinct values of range(n)."""
    return torch.stack([torch.randperm(n)[:picks] for _ in range(rows)])


def main():
    torch.manual_seed(0)
    out = {}

    def case(name, fn, x, index, src=None):
        out[name + ".x"] = x
        out[name + ".index"] = index
        if src is not None:
            out[name + ".src"] = src
        out[name + ".out"] = fn(x, index, src)

    # scatter: several dims, negative dim, an index smaller than src and x
    case("scatter_dim0", lambda x, i, s: x.scatter(0, i, s),
         torch.randn(3, 5), distinct(5, 2, 3).t().contiguous(), torch.randn(3, 6))
    case("scatter_dim1", lambda x, i, s: x.scatter(1, i, s),
         torch.randn(3, 5), distinct(2, 3, 5), torch.randn(3, 4))
    idx3 = torch.stack([distinct(4, 2, 3).t() for _ in range(2)])  # [2, 2, 4], distinct along dim 1
    case("scatter_3d_neg", lambda x, i, s: x.scatter(-2, i, s),
         torch.randn(2, 3, 4, dtype=torch.float64), idx3, torch.randn(2, 3, 4, dtype=torch.float64))
    case("scatter_int64", lambda x, i, s: x.scatter(0, i, s),
         torch.randint(-50, 50, (4, 3)), distinct(3, 4, 4).t().contiguous(),
         torch.randint(-50, 50, (4, 3)))
    case("scatter_bool", lambda x, i, s: x.scatter(1, i, s),
         torch.zeros(2, 4, dtype=torch.bool), distinct(2, 2, 4),
         torch.tensor([[True, False], [True, True]]))
    # the value form: the scalar cast to x's dtype (repeats are harmless, one value)
    case("scatter_value", lambda x, i, s: x.scatter(1, i, 2.5),
         torch.randn(3, 4), torch.randint(0, 4, (3, 2)))
    case("scatter_value_int", lambda x, i, s: x.scatter(0, i, -2.7),
         torch.randint(0, 9, (3, 4)), torch.randint(0, 3, (2, 4)))
    # 0-d counts as 1-D of size 1
    case("scatter_0d", lambda x, i, s: x.scatter(0, i, s),
         torch.tensor(3.0), torch.tensor(0), torch.tensor(5.0))
    case("scatter_0d_index", lambda x, i, s: x.scatter(0, i, s),
         torch.zeros(3), torch.tensor(1), torch.tensor(5.0))
    # scatter_add: repeated positions accumulate
    case("scatter_add_dup", lambda x, i, s: x.scatter_add(0, i, s),
         torch.randn(3, 4), torch.randint(0, 3, (5, 4)), torch.randn(5, 4))
    case("scatter_add_int64_neg", lambda x, i, s: x.scatter_add(-1, i, s),
         torch.randint(-9, 9, (2, 6)), torch.randint(0, 6, (2, 8)), torch.randint(-9, 9, (2, 9)))
    case("scatter_add_3d", lambda x, i, s: x.scatter_add(2, i, s),
         torch.randn(2, 3, 4, dtype=torch.float64), torch.randint(0, 4, (2, 2, 5)),
         torch.randn(2, 3, 5, dtype=torch.float64))
    case("scatter_add_0d", lambda x, i, s: x.scatter_add(0, i, s),
         torch.tensor(3.0), torch.tensor([0, 0]), torch.tensor([1.5, 2.25]))
    case("scatter_add_bool", lambda x, i, s: x.scatter_add(0, i, s),
         torch.tensor([False, False, True]), torch.tensor([0, 0, 1]),
         torch.tensor([True, True, False]))
    # scatter_reduce, every reduction with and without self
    xr = torch.randn(3, 4)
    ir = torch.randint(0, 3, (6, 4))
    ir[0, 0] = ir[1, 0] = ir[2, 0] = 1  # one element sees three values
    sr = torch.randn(6, 4)
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            name = "scatter_reduce_%s_%s" % (red, "self" if inc else "noself")
            case(name, lambda x, i, s, red=red, inc=inc: x.scatter_reduce(0, i, s, red,
                                                                           include_self=inc),
                 xr, ir, sr)
    # integer mean rounds down
    case("scatter_reduce_mean_int", lambda x, i, s: x.scatter_reduce(1, i, s, "mean"),
         torch.randint(-9, 9, (2, 3)), torch.randint(0, 3, (2, 5)), torch.randint(-9, 9, (2, 5)))
    for inc in (True, False):  # negative sums that do not divide: floor, not truncation
        case("scatter_reduce_mean_int_neg_%s" % ("self" if inc else "noself"),
             lambda x, i, s, inc=inc: x.scatter_reduce(0, i, s, "mean", include_self=inc),
             torch.tensor([0, 0, 5]), torch.tensor([0, 0, 1, 1, 2]),
             torch.tensor([-3, -4, 3, 4, -8]))
    nan = float("nan")
    case("scatter_reduce_amax_nan", lambda x, i, s: x.scatter_reduce(0, i, s, "amax"),
         torch.tensor([1.0, nan, 3.0]), torch.tensor([0, 0, 1, 2]),
         torch.tensor([nan, 5.0, 0.0, 4.0]))

    make_modules_golden.OUT = OUT
    os.makedirs(OUT, exist_ok=True)
    make_modules_golden.save("scatter", out)


if __name__ == "__main__":
    main()
