#!/usr/bin/env python3
"""`mpirun -np N tdvmap run ...` against one process: the same output bytes, one --verbose line per
rank naming its sets, per-rank files (--out-shards) that make up the same outputs, and an error
on one rank printed once with every rank failing. Pure Python (standard library).

Usage: mpi_run_check.py TDVMAP OUTDIR CASE NP [MPIRUN-ARGS...]
CASE names one of the cases below (tests/data/cli files, or files this script writes)."""
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_safetensors  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "cli")
# ctest gives the launcher CMake found in TD_MPIEXEC
MPIRUN = [os.environ.get("TD_MPIEXEC", "mpirun"), "--allow-run-as-root", "--oversubscribe",
          "--timeout", "240"]


def write_safetensors(path, tensors):
    """tensors: {key: (shape, dtype "F32"/"I64", [values])}, written in order."""
    header, blobs, offset = {}, [], 0
    for key, (shape, dtype, values) in tensors.items():
        blob = struct.pack(f"<{len(values)}{'f' if dtype == 'F32' else 'q'}", *values)
        header[key] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_npy(path, shape, values):
    head = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(
        f"{d}, " for d in shape)
    head += " " * (63 - (10 + len(head)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode("latin1"))
        f.write(struct.pack(f"<{len(values)}f", *values))


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def rand(rng, shape, scale=0.5):
    return (list(shape), "F32", [rng.uniform(-scale, scale) for _ in range(numel(shape))])


def make_files(case, out):
    """Writes the files a generated case needs; returns the run arguments."""
    rng = random.Random(7)
    if case == "two_dims":  # params.batch_size [2, 3], the sets of the input at dims 1 and 2
        b = [2, 3]
        write_safetensors(f"{out}/params.safetensors", {
            "0.weight": rand(rng, b + [16, 6]), "0.bias": rand(rng, b + [16]),
            "3.weight": rand(rng, b + [3, 16]), "3.bias": rand(rng, b + [3])})
        write_safetensors(f"{out}/x.safetensors", {"x": rand(rng, [4] + b + [6], 2.0)})
        return ["--model", "Sequential(Linear(6, 16), ReLU(), Dropout(0.3), Linear(16, 3))",
                "--params", f"{out}/params.safetensors", "--input", f"input={out}/x.safetensors",
                "--in-dim", "input=1", "--train", "--randomness", "same", "--chunk-size", "2"]
    if case == "conv_bn":  # BatchNorm in training and dropout drawn per set
        s = [5]
        tensors = {"0.weight": rand(rng, s + [4, 2, 3, 3]), "0.bias": rand(rng, s + [4]),
                   "1.weight": rand(rng, s + [4], 1.0), "1.bias": rand(rng, s + [4]),
                   "1.running_mean": rand(rng, s + [4]),
                   "1.running_var": (s + [4], "F32", [1.0 + rng.random() for _ in range(20)]),
                   "1.num_batches_tracked": (s, "I64", [3] * 5),
                   "5.weight": rand(rng, s + [3, 64]), "5.bias": rand(rng, s + [3])}
        write_safetensors(f"{out}/params.safetensors", tensors)
        write_npy(f"{out}/x.npy", [5, 3, 2, 4, 4], rand(rng, [5, 3, 2, 4, 4], 2.0)[2])
        return ["--model", "Sequential(Conv2d(2, 4, 3, padding=1), BatchNorm2d(4), ReLU(), "
                "Dropout(0.2), Flatten(), Linear(64, 3))", "--params", f"{out}/params.safetensors",
                "--input", f"input={out}/x.npy", "--in-dim", "input=0", "--train",
                "--randomness", "different"]
    if case in ("members", "bad_member"):  # one safetensors file per member, in a directory
        whole = compare_safetensors.load(f"{DATA}/mlp_shared.params.safetensors")
        os.makedirs(f"{out}/members", exist_ok=True)
        for i in range(5):
            member = {}
            for key, (shape, values) in whole.items():
                n = numel(shape[1:])
                member[key] = (shape[1:], "F32", values[i * n:(i + 1) * n])
            if case == "bad_member" and i == 4:
                del member["0.bias"]
            write_safetensors(f"{out}/members/m{i}.safetensors", member)
        return ["--model", "Sequential(Linear(6, 16), ReLU(), Dropout(0.1), Linear(16, 3))",
                "--params", f"{out}/members", "--input", f"{DATA}/mlp_shared.input.safetensors"]
    return None


# cases over tests/data/cli's files (5 sets each)
CASES = {
    "mlp_dropout": ["--model", "Sequential(Linear(6, 16), ReLU(), Dropout(0.1), Linear(16, 3))",
                    "--params", f"{DATA}/mlp_shared.params.safetensors",
                    "--input", f"input={DATA}/mlp_shared.input.safetensors",
                    "--train", "--randomness", "different"],
    "per_set": ["--model",
                "Sequential(Linear(6, 16), LayerNorm((16,), eps=1e-5), Tanh(), Linear(16, 3))",
                "--params", f"{DATA}/layernorm_per_set.params.safetensors",
                "--input", f"input={DATA}/layernorm_per_set.input.safetensors",
                "--in-dim", "input=0"],
    # a negative dim: the input is read whole, then sliced
    "per_set_negative_dim": ["--model", "Sequential(Linear(6, 16), LayerNorm((16,), eps=1e-5), "
                             "Tanh(), Linear(16, 3))",
                             "--params", f"{DATA}/layernorm_per_set.params.safetensors",
                             "--input", f"input={DATA}/layernorm_per_set.input.safetensors",
                             "--in-dim", "input=-3"],
    "cnn": ["--model", "Sequential(Conv2d(2, 4, (3, 3), padding=1), ReLU(), MaxPool2d(2), "
            "Flatten(), Linear(16, 3))", "--params", f"{DATA}/cnn.params.safetensors",
            "--input", f"input={DATA}/cnn.input.safetensors"],
    "lstm_tuple": ["--model", "LSTM(4, 6, proj_size=3, bidirectional=True)",
                   "--params", f"{DATA}/lstm_hx.params.safetensors",
                   "--input", f"input={DATA}/lstm_hx.input.safetensors",
                   "--input", f"hx={DATA}/lstm_hx.hx.safetensors",
                   "--in-dim", "input=0", "--in-dim", "hx=0", "--loop"],
    "loss": ["--model", "Sequential(Linear(6, 16), ReLU(), Linear(16, 4))",
             "--params", f"{DATA}/xent_per_set.params.safetensors",
             "--input", f"{DATA}/xent_per_set.input.safetensors",
             "--loss", "cross_entropy", "--target", f"{DATA}/xent_per_set.target.safetensors",
             "--target-in-dim", "0", "--loss-reduction", "none"],
}


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280)
    return proc.returncode, proc.stdout, proc.stderr


def fail(why):
    print("EXPECT FAILED:", why)
    return 1


def main(argv):
    tdvmap, out, case, np_ = argv[0], argv[1], argv[2], int(argv[3])
    mpi_args = argv[4:]
    out = os.path.join(out, f"mpi_{case}_{np_}")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    args = CASES.get(case) or make_files(case, out)
    ranks = MPIRUN + mpi_args + ["-np", str(np_), tdvmap, "run"] + args

    if case == "bad_member":  # only the rank owning member 4 fails: all fail, one message
        status, stdout, stderr = run(ranks + ["--out", f"{out}/many.safetensors"])
        print(stdout + stderr)
        owner = np_ - 1 if np_ <= 5 else 4
        want = (f"tdvmap: error: params files .* has no '0.bias' .* "
                f"\\(on rank {owner} of {np_}\\)")
        if status != 1:
            return fail(f"mpirun exit status {status}, expected 1")
        if len(re.findall(r"tdvmap: error:", stderr)) != 1 or not re.search(want, stderr):
            return fail(f"expected one error line matching {want!r}")
        print("match")
        return 0

    status, stdout, stderr = run([tdvmap, "run"] + args + ["--out", f"{out}/one.safetensors"])
    if status != 0:
        return fail(f"one process: exit status {status}: {stderr}")
    status, stdout, stderr = run(ranks + ["--out", f"{out}/many.safetensors", "--verbose"])
    print(stdout + stderr)
    if status != 0:
        return fail(f"mpirun: exit status {status}")
    with open(f"{out}/one.safetensors", "rb") as a, open(f"{out}/many.safetensors", "rb") as b:
        if a.read() != b.read():
            return fail("the ranks' output differs from one process's, byte for byte")

    # one line per rank, the sets in rank order: contiguous, from 0, sizes within one
    lines = re.findall(r"^rank (\d+) of (\d+): sets \[(\d+), (\d+)\), peak memory [0-9.]+ MiB$",
                       stderr, re.M)
    if sorted(int(r) for r, _, _, _ in lines) != list(range(np_)):
        return fail(f"expected one --verbose line from each of {np_} ranks, got {lines}")
    sets = {int(r): (int(a), int(b)) for r, n, a, b in lines if int(n) == np_}
    total = compare_safetensors.load(f"{out}/one.safetensors")
    first = next(iter(total.values()))[0]
    count = first[0] if case != "two_dims" else first[0] * first[1]
    start = 0
    for r in range(np_):
        a, b = sets.get(r, (-1, -1))
        if a != start or b - a != count // np_ + (1 if r < count % np_ else 0):
            return fail(f"rank {r} computed sets [{a}, {b}); expected them to start at {start} "
                        f"with {count} sets shared among {np_}")
        start = b

    # --out-shards: each rank's file holds its sets; together the whole output
    status, _, stderr = run(ranks + ["--out", f"{out}/part.safetensors", "--out-shards"])
    if status != 0:
        return fail(f"mpirun --out-shards: exit status {status}: {stderr}")
    parts = [compare_safetensors.load(f"{out}/part.rank{r}.safetensors") for r in range(np_)]
    for key, (shape, values) in total.items():
        joined = []
        for r, part in enumerate(parts):
            a, b = sets[r]
            pshape, pvalues = part[key]
            if pshape[0] != b - a:
                return fail(f"rank {r}'s file: '{key}' has shape {pshape}, expected {b - a} sets")
            joined += pvalues
        if joined != values:
            return fail(f"the ranks' files' '{key}' differ from one process's output")
    print("match")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
