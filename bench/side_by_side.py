#!/usr/bin/env python3
"""Compare every chainrules-bench figure of two builds, run in alternation.

    bench/side_by_side.py BEFORE AFTER [--rounds N] [--cpu C] [figure ...]

BEFORE and AFTER are two chainrules-bench programs (for instance the Release builds of two
commits). Each round runs both, in alternating order (before first in odd rounds, after
first in even ones), pinned to one core with `taskset -c C` (default 1) and timed on the
thread's CPU clock (CR_BENCH_CPU=1), so that the load of a shared machine falls on both
sides alike. The table gives, for every figure, the median and range of each side over
the rounds and the ratio of the medians (after / before): below 1 is faster (or smaller)
after. Figures are the `name value unit` lines chainrules-bench prints; extra arguments
select figures as they do for chainrules-bench.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys


def run(program, cpu, figures):
    env = dict(os.environ, CR_BENCH_CPU="1")
    cmd = [program] + figures
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cpu)] + cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    values = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            try:
                values[parts[0]] = (float(parts[1]), " ".join(parts[2:]))
            except ValueError:
                pass
    return values


def fmt(x):
    return f"{x:.3g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("figures", nargs="*")
    args = ap.parse_intermixed_args()

    sides = {"before": {}, "after": {}}
    units = {}
    order = []
    for r in range(args.rounds):
        pair = [("before", args.before), ("after", args.after)]
        if r % 2:
            pair.reverse()
        for side, program in pair:
            for name, (value, unit) in run(program, args.cpu, args.figures).items():
                if name not in units:
                    units[name] = unit
                    order.append(name)
                sides[side].setdefault(name, []).append(value)
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)

    print(f"{args.rounds} rounds, alternated, `taskset -c {args.cpu}`, CR_BENCH_CPU=1\n")
    print("| figure | unit | before: median (range) | after: median (range) | after / before |")
    print("|---|---|---|---|---|")
    for name in order:
        b = sides["before"].get(name)
        a = sides["after"].get(name)
        cell = lambda v: (f"{fmt(statistics.median(v))} ({fmt(min(v))}-{fmt(max(v))})"
                          if v else "-")
        ratio = "-"
        if a and b and statistics.median(b) != 0:
            ratio = f"{statistics.median(a) / statistics.median(b):.2f}"
        print(f"| {name} | {units[name]} | {cell(b)} | {cell(a)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
