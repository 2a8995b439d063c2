#!/usr/bin/env python3
"""Runs `tdvmap run ... --out OUT` and compares OUT with the expected outputs (rtol 1e-5).
Usage: run_case.py TDVMAP OUT EXPECTED -- RUN-ARGS..."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_safetensors  # noqa: E402


def main(argv):
    split = argv.index("--")
    tdvmap, out, expected = argv[:split]
    if os.path.exists(out):
        os.remove(out)
    cmd = [tdvmap, "run"] + argv[split + 1:] + ["--out", out]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    sys.stdout.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        print(f"EXPECT FAILED: exit status {proc.returncode}")
        return 1
    problems = compare_safetensors.compare(out, expected)
    for p in problems:
        print("MISMATCH:", p)
    print("EXPECT FAILED" if problems else "match")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
