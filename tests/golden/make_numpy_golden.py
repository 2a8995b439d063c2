#!/usr/bin/python3
"""NumPy files for tests/numpy_files_test.cpp and the tdvmap CLI tests, written by NumPy itself.

Run from anywhere: /usr/bin/python3 tests/golden/make_numpy_golden.py
Writes tests/data/numpy/: one .npy per case (dtypes td reads as they are or converts, C and
Fortran order, 0-d and empty arrays), mixed.npz (np.savez) and compressed.npz
(np.savez_compressed), expected.safetensors: every array as td should load it (float16 as
float32, the integer dtypes as int64), keyed by the case's name; and the CLI's mlp_shared input
(tests/data/cli) as mlp_shared_input.npy (Fortran order) and .npz.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "numpy")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(0)
    cases = {
        "f4": rng.standard_normal((2, 3)).astype("<f4"),
        "f8": rng.standard_normal((3,)).astype("<f8"),
        "i8": rng.integers(-2**40, 2**40, (2, 2)).astype("<i8"),
        "b1": rng.integers(0, 2, (2, 3)).astype(bool),
        "f2": rng.standard_normal((4,)).astype("<f2"),
        "i4": rng.integers(-2**31, 2**31, (3,)).astype("<i4"),
        "i2": rng.integers(-2**15, 2**15, (3,)).astype("<i2"),
        "i1": rng.integers(-128, 128, (3,)).astype("i1"),
        "u1": rng.integers(0, 256, (3,)).astype("u1"),
        "fortran": np.asfortranarray(rng.standard_normal((2, 3, 4)).astype("<f4")),
        "scalar": np.array(1.5, dtype="<f8"),
        "empty": np.zeros((0, 3), dtype="<f4"),
    }
    expected = {}
    for name, a in cases.items():
        np.save(os.path.join(OUT, f"{name}.npy"), a)
        as_td = a.astype(np.float32) if a.dtype == np.float16 else a
        if a.dtype.kind in "iu":
            as_td = a.astype(np.int64)
        expected[name] = torch.from_numpy(as_td.copy(order="C"))  # ascontiguousarray makes 0-d 1-d
    np.savez(os.path.join(OUT, "mixed.npz"), x=cases["f4"], mask=cases["b1"], **{"a.b": cases["i4"]})
    np.savez_compressed(os.path.join(OUT, "compressed.npz"), y=cases["f8"], z=cases["fortran"])
    safetensors_io.save(expected, os.path.join(OUT, "expected.safetensors"))
    # the CLI's mlp_shared input as .npy (Fortran order) and .npz, for `tdvmap run --input`
    cli = os.path.join(os.path.dirname(OUT), "cli")
    x = safetensors_io.load(os.path.join(cli, "mlp_shared.input.safetensors"))["input"].numpy()
    np.save(os.path.join(OUT, "mlp_shared_input.npy"), np.asfortranarray(x))
    np.savez(os.path.join(OUT, "mlp_shared_input.npz"), input=x)


if __name__ == "__main__":
    main()
