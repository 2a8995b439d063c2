#!/usr/bin/python3
"""Writes the PyTorch golden data of tests/loss_test.cpp into tests/data/losses/losses.safetensors.

For every case <name> of CASES: "<name>.input", "<name>.target" and, where the case has them,
"<name>.weight" / "<name>.pos_weight" hold the arguments, and "<name>.out" the loss that
torch.nn.functional computes from them with the case's options (the C++ test repeats the options
under the same name). Also logsumexp's and masked_fill's results ("logsumexp.*", "masked_fill.*").
Run: /usr/bin/python3 make_loss_golden.py (needs only torch).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_modules_golden import DTYPES  # noqa: E402,F401  (same dtype names)
import make_modules_golden  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "losses")


def idx(shape, c, ignore=None):
    t = torch.randint(0, c, shape)
    if ignore is not None:
        t.view(-1)[::3] = ignore  # every third target ignored
    return t


def probs(shape, dim=1):
    return torch.softmax(torch.randn(shape), dim)


def main():
    torch.manual_seed(0)
    out = {}

    def case(name, fn, input, target, weight=None, pos_weight=None, **kw):
        args = {}
        if weight is not None:
            args["weight"] = weight
        if pos_weight is not None:
            args["pos_weight"] = pos_weight
        out[name + ".input"] = input
        out[name + ".target"] = target
        for k, v in args.items():
            out[name + "." + k] = v
        out[name + ".out"] = fn(input, target, **args, **kw)

    x = torch.randn(5, 4) * 2
    y = torch.randn(5, 4) * 2
    for red in ("none", "mean", "sum"):
        case("mse_" + red, F.mse_loss, x, y, reduction=red)
        case("l1_" + red, F.l1_loss, x, y, reduction=red)
        case("smooth_l1_" + red, F.smooth_l1_loss, x, y, reduction=red)
        case("huber_" + red, F.huber_loss, x, y, reduction=red)
    case("mse_broadcast", F.mse_loss, x, y[0], reduction="mean")
    case("smooth_l1_beta", F.smooth_l1_loss, x, y, reduction="sum", beta=0.7)
    case("smooth_l1_beta0", F.smooth_l1_loss, x, y, reduction="sum", beta=0.0)
    case("huber_delta", F.huber_loss, x, y, reduction="none", delta=2.5)

    n, c = 6, 5
    logits = torch.randn(n, c) * 3
    w = torch.rand(c) + 0.2
    t = idx((n,), c)
    ti = idx((n,), c, ignore=-100)
    t7 = idx((n,), c, ignore=2)
    logits_k = torch.randn(3, c, 4, 2)
    tk = idx((3, 4, 2), c, ignore=-100)
    logits_u = torch.randn(c)
    tu = torch.tensor(3)
    p = probs((n, c))
    pk = probs((3, c, 4, 2))
    all_ignored = torch.full((n,), -100, dtype=torch.long)
    for red in ("none", "mean", "sum"):
        case("ce_" + red, F.cross_entropy, logits, t, reduction=red)
        case("ce_w_ign_" + red, F.cross_entropy, logits, ti, weight=w, reduction=red)
        case("ce_ls_" + red, F.cross_entropy, logits, ti, reduction=red, label_smoothing=0.2)
        case("ce_ls_w_" + red, F.cross_entropy, logits, ti, weight=w, reduction=red,
             label_smoothing=0.3)
        case("ce_prob_" + red, F.cross_entropy, logits, p, reduction=red)
        case("ce_prob_w_ls_" + red, F.cross_entropy, logits, p, weight=w, reduction=red,
             label_smoothing=0.25)
        case("ce_kdim_" + red, F.cross_entropy, logits_k, tk, weight=w, reduction=red)
        case("ce_kdim_ls_" + red, F.cross_entropy, logits_k, tk, reduction=red,
             label_smoothing=0.1)
        case("ce_kdim_prob_" + red, F.cross_entropy, logits_k, pk, reduction=red)
        case("nll_" + red, F.nll_loss, torch.log_softmax(logits, 1), t, reduction=red)
        case("nll_w_ign_" + red, F.nll_loss, torch.log_softmax(logits, 1), t7, weight=w,
             reduction=red, ignore_index=2)
        case("nll_kdim_" + red, F.nll_loss, torch.log_softmax(logits_k, 1), tk, weight=w,
             reduction=red)
    case("ce_unbatched", F.cross_entropy, logits_u, tu)
    case("ce_unbatched_prob", F.cross_entropy, logits_u, probs((c,), 0), label_smoothing=0.1)
    case("ce_all_ignored", F.cross_entropy, logits, all_ignored)
    case("ce_all_ignored_w", F.cross_entropy, logits, all_ignored, weight=w)
    case("ce_ignore_custom", F.cross_entropy, logits, t7, ignore_index=2, label_smoothing=0.2)
    case("ce_f64", F.cross_entropy, logits.double(), ti, weight=w.double(), label_smoothing=0.2)

    pr = torch.rand(4, 3)
    pr[0, 0], pr[0, 1] = 0.0, 1.0  # log clamped at -100
    by = torch.rand(4, 3)
    by[1] = torch.tensor([0.0, 1.0, 1.0])
    bw = torch.rand(4, 3) + 0.5
    z = torch.randn(4, 3) * 4
    z[2, 0], z[2, 1] = 120.0, -120.0  # the stable form
    pw = torch.rand(3) * 3
    for red in ("none", "mean", "sum"):
        case("bce_" + red, F.binary_cross_entropy, pr, by, reduction=red)
        case("bce_w_" + red, F.binary_cross_entropy, pr, by, weight=bw, reduction=red)
        case("bcel_" + red, F.binary_cross_entropy_with_logits, z, by, reduction=red)
        case("bcel_w_pw_" + red, F.binary_cross_entropy_with_logits, z, by, weight=bw[0],
             pos_weight=pw, reduction=red)
    lp = torch.log_softmax(torch.randn(4, 5), 1)
    tp = probs((4, 5))
    tp[0, 1] = 0.0  # xlogy(0, 0) = 0
    for red in ("none", "mean", "sum", "batchmean"):
        case("kl_" + red, F.kl_div, lp, tp, reduction=red)
        case("kl_log_" + red, F.kl_div, lp, torch.log(tp + 0.01), reduction=red, log_target=True)

    inf = float("inf")
    ls = torch.tensor([[inf, 1.0, 2.0], [-inf, -inf, -inf], [inf, -inf, 0.0], [1e30, 1.0, -1.0],
                       [0.5, -0.5, 3.0]])
    out["logsumexp.input"] = ls
    out["logsumexp.dim1"] = torch.logsumexp(ls, 1)
    big = torch.randn(3, 4, 5) * 30
    out["logsumexp.big"] = big
    out["logsumexp.big_dims02_keepdim"] = torch.logsumexp(big, (0, 2), keepdim=True)
    mx = torch.randn(2, 3)
    mm = torch.tensor([True, False, True])
    out["masked_fill.input"] = mx
    out["masked_fill.mask"] = mm
    out["masked_fill.out"] = mx.masked_fill(mm, -1.5)
    out["masked_fill.mask2"] = torch.tensor([[[True], [False]]])
    out["masked_fill.out2"] = mx.masked_fill(out["masked_fill.mask2"], 7.0)

    make_modules_golden.OUT = OUT
    os.makedirs(OUT, exist_ok=True)
    make_modules_golden.save("losses", out)


if __name__ == "__main__":
    main()
