#!/usr/bin/python3
"""Writes the PyTorch golden data of tests/einsum_attention_test.cpp into
tests/data/einsum/einsum_attention.safetensors.

einsum: for every case <name> of einsum_cases() and 40 of random_einsum_cases(), "einsum.<name>.equation" holds the equation as
int64 character codes, "einsum.<name>.in<i>" the operands and "einsum.<name>.out" what
torch.einsum returns for them.

scaled_dot_product_attention: torch 1.13 has no public F.scaled_dot_product_attention, so for
every case <name> "sdpa.<name>.out" is computed from the math reference of PyTorch 2.x's
documentation (softmax(q @ k^T * scale + bias) @ v with torch ops), and cross-checked against
torch 1.13's private F._scaled_dot_product_attention where that takes the case (no scale
argument, no float mask). The arguments are "sdpa.<name>.q", ".k", ".v", ".mask" (if any),
".scale" (0-d float64, if given) and ".causal" (0-d bool).
Run: /usr/bin/python3 make_einsum_attention_golden.py (needs only torch).
"""
import math
import os
import random
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_modules_golden  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "einsum")


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def einsum_cases():
    ri = lambda *s: torch.randint(-5, 6, s)  # noqa: E731
    return [
        ("mm", "ij,jk->ik", [r(3, 4), r(4, 5)]),
        ("bmm", "bij,bjk->bik", [r(2, 3, 4), r(2, 4, 5)]),
        ("scores", "bhqd,bhkd->bhqk", [r(2, 3, 4, 5), r(2, 3, 6, 5)]),
        ("weights_v", "bhqk,bhkd->bhqd", [r(2, 3, 4, 6), r(2, 3, 6, 5)]),
        ("dot", "i,i->", [r(7), r(7)]),
        ("transpose", "ij->ji", [r(3, 4)]),
        ("sum_all", "ij->", [r(3, 4)]),
        ("row_dot", "bi,bi->b", [r(5, 6), r(5, 6)]),
        ("outer", "i,j->ij", [r(3), r(4)]),
        ("hadamard", "i,i->i", [r(6), r(6)]),
        ("frobenius", "ij,ij->", [r(3, 4), r(3, 4)]),
        ("matvec", "ij,j->i", [r(3, 4), r(4)]),
        ("batch_matvec", "bij,j->bi", [r(2, 3, 4), r(4)]),
        ("x_wt", "ij,kj->ik", [r(3, 4), r(5, 4)]),
        ("out_permuted", "ij,jk->ki", [r(3, 4), r(4, 5)]),
        ("permuted_batch", "ibj,bjk->bik", [r(3, 2, 4), r(2, 4, 5)]),
        ("ellipsis_mm", "...ij,...jk->...ik", [r(2, 3, 4, 5), r(3, 5, 2)]),
        ("ellipsis_implicit", "...ij,...jk", [r(2, 3, 4), r(2, 4, 5)]),
        ("ellipsis_summed", "...i->i", [r(2, 3, 4)]),
        ("ellipsis_middle", "i...j->j...i", [r(2, 3, 4, 5)]),
        ("ellipsis_single_implicit", "i...", [r(2, 3, 4)]),
        ("ellipsis_broadcast", "...,...->...", [r(3, 1), r(2)]),
        ("ellipsis_empty", "...ij,jk->...ik", [r(3, 4), r(4, 2)]),
        ("ellipsis_out_only", "ij->...ji", [r(3, 4)]),
        ("trace", "ii->", [r(4, 4)]),
        ("diagonal", "ii->i", [r(4, 4)]),
        ("diagonal3", "iii->i", [r(3, 3, 3)]),
        ("diagonal_mixed", "iij->ji", [r(3, 3, 2)]),
        ("diagonal_pairs", "ijij->ij", [r(2, 3, 2, 3)]),
        ("diagonal_two_operands", "ii,i->i", [r(4, 4), r(4)]),
        ("implicit_mm", "ij,jk", [r(3, 4), r(4, 5)]),
        ("implicit_trace", "ii", [r(3, 3)]),
        ("implicit_sorted", "ba", [r(3, 4)]),
        ("implicit_upper", "Ab,bc", [r(3, 4), r(4, 2)]),
        ("upper_lower", "aB,Bc->ac", [r(3, 4), r(4, 2)]),
        ("letter_broadcast", "ij,jk->ik", [r(2, 1), r(3, 4)]),
        ("letter_broadcast_kept", "ij,ij->i", [r(2, 3), r(2, 1)]),
        ("batch_broadcast", "bij,bjk->bik", [r(1, 3, 4), r(5, 4, 2)]),
        ("three_chain", "ij,jk,kl->il", [r(2, 3), r(3, 4), r(4, 5)]),
        ("three_trace", "ab,bc,ca->", [r(2, 3), r(3, 4), r(4, 2)]),
        ("three_batch", "bi,bj,b->bij", [r(4, 2), r(4, 3), r(4)]),
        ("kept_for_later", "ij,jk,k->i", [r(2, 3), r(3, 4), r(4)]),
        ("private_sum", "ijk,jl->il", [r(2, 3, 4), r(3, 5)]),
        ("spaces", " i j , j k -> i k ", [r(3, 4), r(4, 5)]),
        ("scalars", ",i->i", [torch.tensor(1.5), r(3)]),
        ("scalar_alone", "", [torch.tensor(2.5)]),
        ("empty_inner", "ij,jk->ik", [r(2, 0), r(0, 3)]),
        ("empty_outer", "ij,jk->ik", [r(0, 4), r(4, 3)]),
        ("float64", "bij,bjk->bik", [r(2, 3, 4, dtype=torch.float64),
                                     r(2, 4, 5, dtype=torch.float64)]),
        ("int64", "ij,jk->ik", [ri(3, 4), ri(4, 5)]),
        ("int64_dot", "i,i->", [ri(6), ri(6)]),
    ]


def random_einsum_cases(count):
    """Equations drawn at random (fixed seed): 1-3 operands, diagonals, '...', size-1 dims,
    implicit and explicit outputs; only those torch.einsum takes."""
    rng = random.Random(1)
    letters = "abcdXY"
    cases = []
    while len(cases) < count:
        size = {c: rng.randint(1, 4) for c in letters}
        ell = [rng.randint(1, 3) for _ in range(rng.randint(0, 2))]
        terms, ops, seen = [], [], []
        for _ in range(rng.randint(1, 3)):
            subs = [rng.choice(letters) for _ in range(rng.randint(0, 3))]
            shape = []
            for c in subs:  # a repeated letter keeps its size within the operand
                first = subs.index(c)
                shape.append(shape[first] if first < len(shape) else
                             (1 if rng.random() < 0.15 else size[c]))
            text = "".join(subs)
            if rng.random() < 0.35:
                k = rng.randint(0, len(ell))
                own = [1 if rng.random() < 0.2 else d for d in ell[len(ell) - k:]]
                at = rng.randint(0, len(subs))
                text = text[:at] + "..." + text[at:]
                shape = shape[:at] + own + shape[at:]
            terms.append(text)
            ops.append(torch.randn(tuple(shape)))
            seen += subs
        eq = ",".join(terms)
        if rng.random() < 0.7:
            out = sorted(set(seen), key=lambda c: rng.random())[:rng.randint(0, len(set(seen)))]
            out = "".join(out)
            if "..." in eq and rng.random() < 0.8:
                at = rng.randint(0, len(out))
                out = out[:at] + "..." + out[at:]
            eq += "->" + out
        try:
            torch.einsum(eq, *ops)
        except RuntimeError:
            continue
        cases.append(("random%02d" % len(cases), eq, ops))
    return cases


def sdpa_reference(q, k, v, mask=None, causal=False, scale=None):
    """PyTorch 2.x's documented math of F.scaled_dot_product_attention (without dropout)."""
    L, S = q.size(-2), k.size(-2)
    factor = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=q.dtype)
    if causal:
        assert mask is None
        keep = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)
        bias.masked_fill_(keep.logical_not(), float("-inf"))
    if mask is not None:
        if mask.dtype == torch.bool:
            bias = bias.masked_fill(mask.logical_not(), float("-inf"))
        else:
            bias = bias + mask.to(q.dtype)
    w = q @ k.transpose(-2, -1) * factor
    w = w + bias
    w = torch.softmax(w, dim=-1)
    return w @ v


def sdpa_cases():
    some_keys = torch.rand(4, 5) > 0.4
    some_keys[:, 0] = True  # every query sees a key
    none_row = some_keys.clone()
    none_row[2] = False  # query 2 sees no key: its row is NaN
    heads_mask = torch.rand(2, 1, 4, 5) > 0.3
    heads_mask[..., 1] = True
    return [
        ("basic", dict(q=r(2, 3, 4, 8), k=r(2, 3, 5, 8), v=r(2, 3, 5, 6))),
        ("two_dims", dict(q=r(4, 8), k=r(5, 8), v=r(5, 3))),
        ("bool_mask", dict(q=r(2, 3, 4, 8), k=r(2, 3, 5, 8), v=r(2, 3, 5, 6), mask=some_keys)),
        ("bool_mask_heads", dict(q=r(2, 3, 4, 8), k=r(2, 3, 5, 8), v=r(2, 3, 5, 6),
                                 mask=heads_mask)),
        ("float_mask", dict(q=r(2, 3, 4, 8), k=r(2, 3, 5, 8), v=r(2, 3, 5, 6),
                            mask=r(2, 3, 4, 5))),
        ("float64_mask", dict(q=r(2, 4, 8), k=r(2, 5, 8), v=r(2, 5, 6),
                              mask=r(4, 5, dtype=torch.float64))),
        ("masked_row", dict(q=r(2, 4, 8), k=r(2, 5, 8), v=r(2, 5, 6), mask=none_row)),
        ("causal", dict(q=r(2, 3, 4, 8), k=r(2, 3, 4, 8), v=r(2, 3, 4, 6), causal=True)),
        ("causal_fewer_queries", dict(q=r(2, 3, 8), k=r(2, 5, 8), v=r(2, 5, 6), causal=True)),
        ("causal_more_queries", dict(q=r(2, 5, 8), k=r(2, 3, 8), v=r(2, 3, 6), causal=True)),
        ("scale", dict(q=r(2, 3, 4, 8), k=r(2, 3, 5, 8), v=r(2, 3, 5, 6), scale=0.3)),
        ("scale_with_mask", dict(q=r(2, 4, 8), k=r(2, 5, 8), v=r(2, 5, 6), mask=some_keys,
                                 scale=1.7)),
        ("broadcast_leading", dict(q=r(2, 1, 4, 8), k=r(3, 5, 8), v=r(1, 3, 5, 6))),
        ("float64", dict(q=r(2, 4, 8, dtype=torch.float64), k=r(2, 5, 8, dtype=torch.float64),
                         v=r(2, 5, 3, dtype=torch.float64))),
    ]


def main():
    torch.manual_seed(0)
    out = {}
    for name, eq, ops in einsum_cases() + random_einsum_cases(40):
        p = "einsum." + name
        out[p + ".equation"] = torch.tensor([ord(c) for c in eq], dtype=torch.int64)
        for i, t in enumerate(ops):
            out[p + ".in%d" % i] = t
        out[p + ".out"] = torch.einsum(eq, *ops)

    checked = 0
    for name, c in sdpa_cases():
        p = "sdpa." + name
        want = sdpa_reference(c["q"], c["k"], c["v"], c.get("mask"), c.get("causal", False),
                              c.get("scale"))
        mask = c.get("mask")
        if c.get("scale") is None and (mask is None or mask.dtype == torch.bool):
            old, _ = F._scaled_dot_product_attention(c["q"], c["k"], c["v"], mask, 0.0, False,
                                                     c.get("causal", False))
            assert torch.allclose(old, want, rtol=1e-5, atol=1e-6, equal_nan=True), name
            checked += 1
        for key in ("q", "k", "v", "mask"):
            if c.get(key) is not None:
                out[p + "." + key] = c[key]
        if c.get("scale") is not None:
            out[p + ".scale"] = torch.tensor(c["scale"], dtype=torch.float64)
        out[p + ".causal"] = torch.tensor(c.get("causal", False))
        out[p + ".out"] = want
    print("sdpa cases cross-checked against torch 1.13's private function:", checked)

    make_modules_golden.OUT = OUT
    os.makedirs(OUT, exist_ok=True)
    make_modules_golden.save("einsum_attention", out)


if __name__ == "__main__":
    main()
