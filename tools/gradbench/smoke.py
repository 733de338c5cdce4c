#!/usr/bin/env python3
"""Runs the smallest size of every GradBench eval through a tool and its validation.

    smoke.py --gradbench DIR --tool 'COMMAND' [--python PYTHON] [--unimplemented f,g]

First the in-tree check (tests/tools/gradbench_check.py: the small sizes of every eval,
inputs generated here, answers checked against the evals' math and central differences;
Python 3 only), then, when DIR (bench/gradbench.sh --setup prepares it, with GradBench's
`manual` tool built: the evals validate against it) and the evals' Python packages are
there, GradBench's own eval programs and validation (run.py) on the smallest size of every
eval. Exit status 0 when every evaluation is valid, 1 otherwise; without DIR or the
packages, the status of the in-tree check alone.
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The smallest size of each eval's default configuration; the timing loop runs once.
SMALL = [
    ("hello", []),
    ("lse", ["-n", "2500"]),
    ("llsq", ["-n", "16"]),
    ("det", ["-l", "5"]),
    ("kmeans", ["-k", "10", "-n", "1000", "-d", "8"]),
    ("ode", ["-n", "1000", "-s", "1"]),
    ("gmm", ["-d", "2", "-k", "5"]),
    ("ba", ["--min", "1", "--max", "1"]),
    ("ht", ["--min", "1", "--max", "1"]),
    ("ht", ["--min", "1", "--max", "1", "--variant", "simple", "--model", "small"]),
    ("lstm", ["-l", "2", "-c", "1024"]),
    ("particle", []),
    ("saddle", []),
]
ONCE = ["--min-runs", "1", "--min-seconds", "0"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gradbench", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--unimplemented", default="",
                    help="functions the tool may answer with failure (run.py); '' for none")
    args = ap.parse_args()
    check = os.path.join(HERE, "..", "..", "tests", "tools", "gradbench_check.py")
    r = subprocess.run([args.python, check, "--tool", args.tool])
    if r.returncode != 0:
        print(f"FAILED: the in-tree check (status {r.returncode})")
        return 1
    probe = subprocess.run(
        [args.python, "-c", "import numpy, scipy, pydantic, dataclasses_json"],
        capture_output=True,
    )
    if probe.returncode != 0:
        print("GradBench's evals not run: they need python3-numpy, python3-scipy, "
              "python3-pydantic and python3-dataclasses-json")
        return 0
    manual = os.path.join(args.gradbench, "tools", "manual", "bin", "gmm")
    if not os.path.exists(manual):
        print(f"GradBench's evals not run: no GradBench copy with its manual tool built in "
              f"{args.gradbench} (bench/gradbench.sh --setup prepares it)")
        return 0
    bad = []
    for name, extra in SMALL:
        r = subprocess.run(
            [args.python, os.path.join(HERE, "run.py"), "--python", args.python,
             "--gradbench", args.gradbench, "--tool", args.tool, "--eval", name,
             "--timeout", "120", "--unimplemented", args.unimplemented, "--"] + extra + ONCE
        )
        if r.returncode != 0:
            bad.append(f"{name} {' '.join(extra)} (status {r.returncode})")
    for b in bad:
        print(f"FAILED: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
