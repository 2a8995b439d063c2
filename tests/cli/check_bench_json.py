#!/usr/bin/env python3
"""Runs `tdvmap bench ... --json` and checks the JSON: an array with one object per workload
holding the documented fields. With --expect-flops N first, each workload's gflops times its
vmap_us must give N float operations (counted by hand for its model).
Usage: check_bench_json.py [--expect-flops N] TDVMAP BENCH-ARGS..."""
import json
import subprocess
import sys

NUMBERS = ("vmap_us", "loop_us", "chunk8_us", "gflops", "peak_mb")


def main(argv):
    flops = None
    if argv[0] == "--expect-flops":
        flops, argv = float(argv[1]), argv[2:]
    proc = subprocess.run([argv[0], "bench", "--json"] + argv[1:], capture_output=True, text=True,
                          timeout=600)
    sys.stdout.write(proc.stdout + proc.stderr)
    problems = []
    if proc.returncode != 0:
        problems.append(f"exit status {proc.returncode}")
    try:
        data = json.loads(proc.stdout)
    except ValueError as e:
        data = None
        problems.append(f"not JSON: {e}")
    if data is not None:
        if not isinstance(data, list) or not data:
            problems.append("not a non-empty array")
        else:
            for obj in data:
                if not isinstance(obj.get("name"), str):
                    problems.append(f"no name in {obj}")
                for k in NUMBERS:
                    if not isinstance(obj.get(k), (int, float)) or obj[k] < 0:
                        problems.append(f"{obj.get('name')}: {k} missing or negative")
                for k in ("vmap_us", "loop_us", "chunk8_us", "gflops"):
                    if isinstance(obj.get(k), (int, float)) and obj[k] <= 0:
                        problems.append(f"{obj.get('name')}: {k} is not positive")
                if flops is not None and isinstance(obj.get("gflops"), (int, float)):
                    got = obj["gflops"] * obj["vmap_us"] * 1e3
                    if abs(got - flops) > 1e-6 * flops:
                        problems.append(f"{obj.get('name')}: {got} float operations, not {flops}")
                out = obj.get("out")
                if not isinstance(out, list) or not all(isinstance(d, int) for d in out):
                    problems.append(f"{obj.get('name')}: out is not a list of ints")
    for p in problems:
        print("PROBLEM:", p)
    print("EXPECT FAILED" if problems else "ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
