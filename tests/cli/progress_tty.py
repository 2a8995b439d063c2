#!/usr/bin/env python3
"""`tdvmap run`'s progress line: shown when stderr is a terminal (a pseudo-terminal here), not
with --quiet, not when stderr is a pipe. Usage: progress_tty.py TDVMAP WORKDIR (standard library
only; the params file, 60000 sets of Linear(2, 1), is written here)."""
import json
import os
import pty
import re
import struct
import subprocess
import sys

SETS = 60000


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for key, (shape, values) in tensors.items():
        data = struct.pack(f"<{len(values)}f", *values)
        header[key] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def run_on_tty(cmd):
    """Runs cmd with stderr on a pseudo-terminal; returns (status, what it wrote there)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=600), out.decode(errors="replace")


def main(tdvmap, work):
    os.makedirs(work, exist_ok=True)
    params, inp, out = (os.path.join(work, n) for n in
                        ("progress.params.safetensors", "progress.input.safetensors",
                         "progress.out.safetensors"))
    write_safetensors(params, {"weight": ([SETS, 1, 2], [0.5, -0.25] * SETS),
                               "bias": ([SETS, 1], [0.125] * SETS)})
    write_safetensors(inp, {"input": ([3, 2], [1, 2, 3, 4, 5, 6])})
    cmd = [tdvmap, "run", "--model", "Linear(2, 1)", "--params", params, "--input",
           f"input={inp}", "--loop", "--out", out]
    problems = []
    status, text = run_on_tty(cmd)
    print(repr(text[-300:]))
    if status != 0:
        problems.append(f"exit status {status} on a terminal")
    if not re.search(rf"tdvmap: sets {SETS}/{SETS}, [0-9.]+ sets/s, [0-9.]+ s\r?\n", text):
        problems.append("no final progress line on a terminal")
    status, text = run_on_tty(cmd + ["--quiet"])
    if status != 0 or "tdvmap: sets" in text:
        problems.append(f"--quiet: status {status}, stderr {text[-200:]!r}")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or proc.stderr:
        problems.append(f"stderr a pipe: status {proc.returncode}, stderr {proc.stderr[-200:]!r}")
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
