#!/usr/bin/python3
"""Writes the PyTorch golden data of tests/sort_scan_test.cpp into tests/data/sort/sort.safetensors.

Inputs are "in.<name>". For every case <case> of the C++ test's tables: "<case>.out" holds
torch.cumsum's / torch.cumprod's result, "<case>.values" and "<case>.indices" torch.sort's
(stable=True, the order td always gives), "<case>.indices" alone torch.argsort's, and for topk
"<case>.values" torch.topk's values and "<case>.indices" the indices td documents: those of a
stable sort cut at k (equal values keep their order), which torch.topk's indices match wherever
the values differ ("<case>.torch_indices", checked where the row has no ties).
Run: /usr/bin/python3 make_sort_golden.py (needs only torch).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import save  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "sort")

NAN = float("nan")
INF = float("inf")


def main():
    torch.manual_seed(0)
    out = {}
    ins = {}

    # ---- inputs ----
    ins["f32"] = torch.randn(4, 5)
    ins["f64"] = torch.randn(3, 4, 5, dtype=torch.float64)
    ins["i64"] = torch.randint(-5, 6, (3, 4))
    ins["bool"] = torch.tensor([True, False, True, True, False, True])
    ins["scalar"] = torch.tensor(2.5)
    ins["scalar_i64"] = torch.tensor(7)
    ins["long_rows"] = torch.randn(3, 200)  # float32 rounding of a long scan
    # ties, NaN, infinities and signed zeros
    ins["ties"] = torch.tensor([[3.0, 1.0, NAN, 1.0, -0.0, 0.0, 3.0, NAN, -INF],
                                [2.0, 2.0, 2.0, INF, -1.0, NAN, 0.0, -0.0, 2.0],
                                [5.0, -5.0, 5.0, -5.0, 5.0, 1.0, 1.0, 1.0, 1.0]])
    ins["ties_i64"] = torch.randint(0, 4, (4, 10))
    ins["distinct"] = torch.randperm(40).reshape(4, 10).float() * 0.5 - 7
    nan_row = ins["distinct"].clone()
    nan_row[1, 3] = NAN
    nan_row[2, 0] = NAN
    ins["distinct_nan"] = nan_row
    ins["f64_3d"] = torch.randn(3, 5, 4, dtype=torch.float64)
    ins["f64_3d"][0, 2, 1] = ins["f64_3d"][0, 4, 1]  # a tie along dim 1
    out.update({"in." + k: v for k, v in ins.items()})

    # ---- cumsum / cumprod: (case, input, dim, dtype) ----
    scans = [
        ("cumsum.f32_dim0", "f32", 0, None),
        ("cumsum.f32_dim1", "f32", 1, None),
        ("cumsum.f32_dimneg1", "f32", -1, None),
        ("cumsum.f64_dim1", "f64", 1, None),
        ("cumsum.f64_dimneg3", "f64", -3, None),
        ("cumsum.i64_dim1", "i64", 1, None),
        ("cumsum.i64_dim0", "i64", 0, None),
        ("cumsum.bool", "bool", 0, None),
        ("cumsum.scalar", "scalar", 0, None),
        ("cumsum.scalar_i64", "scalar_i64", -1, None),
        ("cumsum.long_rows", "long_rows", 1, None),
        ("cumsum.f32_to_f64", "f32", 1, torch.float64),
        ("cumsum.i64_to_f32", "i64", 0, torch.float32),
        ("cumsum.f32_to_i64", "f32", 0, torch.int64),
        ("cumsum.ties_nan", "ties", 1, None),
        ("cumprod.f32_dim1", "f32", 1, None),
        ("cumprod.f64_dim2", "f64", 2, None),
        ("cumprod.i64_dim0", "i64", 0, None),
        ("cumprod.bool", "bool", 0, None),
        ("cumprod.i64_to_f64", "i64", 1, torch.float64),
    ]
    for case, name, dim, dtype in scans:
        fn = torch.cumsum if case.startswith("cumsum") else torch.cumprod
        out[case + ".out"] = fn(ins[name], dim, dtype=dtype)

    # ---- sort / argsort: (case, input, dim, descending) ----
    sorts = [
        ("sort.ties_asc", "ties", -1, False),
        ("sort.ties_desc", "ties", -1, True),
        ("sort.ties_dim0_asc", "ties", 0, False),
        ("sort.ties_dim0_desc", "ties", 0, True),
        ("sort.i64_asc", "ties_i64", 1, False),
        ("sort.i64_desc", "ties_i64", 1, True),
        ("sort.bool_asc", "bool", 0, False),
        ("sort.bool_desc", "bool", -1, True),
        ("sort.f64_3d_dim1", "f64_3d", 1, False),
        ("sort.f64_3d_dim1_desc", "f64_3d", -2, True),
        ("sort.scalar", "scalar", 0, False),
        ("sort.long_rows", "long_rows", -1, True),
        ("argsort.ties_asc", "ties", 1, False),
        ("argsort.ties_desc", "ties", 1, True),
        ("argsort.i64_dim0", "ties_i64", 0, False),
        ("argsort.f64_3d_dim2_desc", "f64_3d", 2, True),
    ]
    for case, name, dim, desc in sorts:
        v, i = torch.sort(ins[name], dim=dim, descending=desc, stable=True)
        if case.startswith("argsort"):
            out[case + ".indices"] = torch.argsort(ins[name], dim=dim, descending=desc,
                                                   stable=True)
            assert torch.equal(out[case + ".indices"], i)
        else:
            out[case + ".values"] = v
            out[case + ".indices"] = i

    # ---- topk: (case, input, k, dim, largest) ----
    topks = [
        ("topk.distinct_largest", "distinct", 3, -1, True),
        ("topk.distinct_smallest", "distinct", 3, -1, False),
        ("topk.distinct_dim0", "distinct", 2, 0, True),
        ("topk.distinct_nan_largest", "distinct_nan", 4, 1, True),
        ("topk.distinct_nan_smallest", "distinct_nan", 4, 1, False),
        ("topk.k0", "distinct", 0, 1, True),
        ("topk.k_all", "distinct", 10, 1, True),
        ("topk.k_all_smallest", "distinct_nan", 10, -1, False),
        ("topk.ties_largest", "ties", 4, 1, True),
        ("topk.ties_smallest", "ties", 5, 1, False),
        ("topk.i64_largest", "ties_i64", 3, 1, True),
        ("topk.f64_3d_dim1", "f64_3d", 2, 1, False),
        ("topk.long_rows", "long_rows", 7, 1, True),
    ]
    for case, name, k, dim, largest in topks:
        x = ins[name]
        v, ti = torch.topk(x, k, dim=dim, largest=largest, sorted=True)
        sv, si = torch.sort(x, dim=dim, descending=largest, stable=True)
        want_i = si.narrow(dim, 0, k)
        assert torch.equal(torch.isnan(v), torch.isnan(sv.narrow(dim, 0, k)))
        out[case + ".values"] = v
        out[case + ".indices"] = want_i
        out[case + ".torch_indices"] = ti

    os.makedirs(OUT, exist_ok=True)
    save(out, os.path.join(OUT, "sort.safetensors"))


if __name__ == "__main__":
    main()
