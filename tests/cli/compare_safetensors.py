#!/usr/bin/env python3
"""Compares two safetensors (or .npz) files: same keys, shapes and values within rtol (1e-5).
Pure Python (no torch, no numpy), so ctest can run it anywhere.
Usage: compare_safetensors.py ACTUAL EXPECTED [--rtol R] [--atol A]"""
import ast
import json
import math
import struct
import sys
import zipfile

_FORMATS = {"F32": "f", "F64": "d", "I64": "q", "I32": "i", "BOOL": "?", "U8": "B", "I8": "b"}


_NPY = {"<f4": "f", "<f8": "d", "<i8": "q", "|b1": "?"}


def load_npz(path):
    """{key: (shape, [values])} of an .npz file of C-order .npy members (as td writes them)."""
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            buf = z.read(name)
            assert buf[:6] == b"\x93NUMPY" and buf[6] == 1, name
            (n,) = struct.unpack("<H", buf[8:10])
            header = ast.literal_eval(buf[10:10 + n].decode("latin1"))
            assert not header["fortran_order"], name
            fmt = _NPY[header["descr"]]
            data = buf[10 + n:]
            count = len(data) // struct.calcsize(fmt)
            out[name[:-4]] = (list(header["shape"]), list(struct.unpack(f"<{count}{fmt}", data)))
    return out


def load(path):
    """{key: (shape, [values])} of a safetensors file (8-byte LE length, JSON header, data), or
    of an .npz file."""
    if path.endswith(".npz"):
        return load_npz(path)
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    data = buf[8 + n:]
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        fmt = _FORMATS[info["dtype"]]
        count = (end - begin) // struct.calcsize(fmt)
        out[key] = (list(info["shape"]), list(struct.unpack(f"<{count}{fmt}", data[begin:end])))
    return out


def compare(actual_path, expected_path, rtol=1e-5, atol=1e-6):
    """Returns a list of problems (empty when the files agree)."""
    actual, expected = load(actual_path), load(expected_path)
    problems = []
    if sorted(actual) != sorted(expected):
        problems.append(f"keys differ: {sorted(actual)} vs expected {sorted(expected)}")
    for key in sorted(set(actual) & set(expected)):
        (sa, va), (se, ve) = actual[key], expected[key]
        if sa != se:
            problems.append(f"{key}: shape {sa} vs expected {se}")
            continue
        worst = 0.0
        for a, e in zip(va, ve):
            err = abs(float(a) - float(e))
            if math.isnan(err) or err > atol + rtol * abs(float(e)):
                worst = max(worst, err) if not math.isnan(err) else float("inf")
        if worst:
            problems.append(f"{key}: values differ, max |error| {worst:g} (rtol {rtol})")
    return problems


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    if len(args) != 2:
        print(__doc__)
        return 2
    problems = compare(args[0], args[1], float(opts.get("rtol", 1e-5)), float(opts.get("atol", 1e-6)))
    for p in problems:
        print("MISMATCH:", p)
    print("match" if not problems else "EXPECT FAILED")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
