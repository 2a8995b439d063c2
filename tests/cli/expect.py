#!/usr/bin/env python3
"""Runs a command and checks its exit status and output, for ctest.
Usage: expect.py [--status N] [--stdout REGEX]... [--no-stdout REGEX]... [--stderr REGEX]...
                 [--stdin FILE] -- COMMAND ARGS...
A nonzero --status also requires the one-line 'tdvmap: error: ...' message on stderr and no
sign of a crash. Prints the command's output, then 'EXPECT FAILED' on failure."""
import re
import subprocess
import sys


def main(argv):
    if "--" not in argv:
        print(__doc__)
        return 2
    split = argv.index("--")
    opts, cmd = argv[:split], argv[split + 1:]
    status, want_out, no_out, want_err = 0, [], [], []
    for flag, value in zip(opts[::2], opts[1::2]):
        if flag == "--status":
            status = int(value)
        elif flag == "--stdout":
            want_out.append(value)
        elif flag == "--no-stdout":
            no_out.append(value)
        elif flag == "--stderr":
            want_err.append(value)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    sys.stdout.write(proc.stdout)
    sys.stdout.write(proc.stderr)
    problems = []
    if proc.returncode != status:
        problems.append(f"exit status {proc.returncode}, expected {status}")
    for r in want_out:
        if not re.search(r, proc.stdout, re.M):
            problems.append(f"stdout does not match {r!r}")
    for r in no_out:
        if re.search(r, proc.stdout, re.M):
            problems.append(f"stdout matches {r!r}")
    for r in want_err:
        if not re.search(r, proc.stderr, re.M):
            problems.append(f"stderr does not match {r!r}")
    if status != 0:
        if not re.match(r"tdvmap: error: \S", proc.stderr):
            problems.append("stderr does not start with 'tdvmap: error: ...'")
    for sign in ("terminate called", "Aborted", "Segmentation", "AddressSanitizer", "runtime error:"):
        if sign in proc.stderr:
            problems.append(f"stderr shows a crash: {sign!r}")
    for p in problems:
        print("PROBLEM:", p)
    print("EXPECT FAILED" if problems else "ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
