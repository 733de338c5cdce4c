#!/usr/bin/env python3
"""The GradBench results table and plot (bench/gradbench.sh, docs/gradbench.md).

    gradbench_table.py --results DIR [--tools chainrules-c chainrules-c-tape manual]
                       [--nightly GIT_DIR]
                       [--plot-data FILE]

Reads DIR/TOOL.TAG.summary (tools/gradbench/run.py --summary) and prints Markdown: for
every eval and size, each tool's primal and derivative time (the mean of the evaluate
timings of the message, as GradBench's scorer computes them) and their ratio; then per
eval the median ratio over the sizes, beside GradBench's published nightly ratios (read
from the nightly branch of the clone GIT_DIR: evals/EVAL/summary.json). The per-size table
ends with each tool's ratio over the reference's (`manual` when it is among the tools, else
the last one). --plot-data writes the medians and ranges as JSON for
bench/gradbench_plot.py.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess

PAIRS = {
    "hello": ("square", "double"),
    "lse": ("primal", "gradient"),
    "llsq": ("primal", "gradient"),
    "det": ("primal", "gradient"),
    "ode": ("primal", "gradient"),
    "kmeans": ("cost", "dir"),
    "gmm": ("objective", "jacobian"),
    "ba": ("objective", "jacobian"),
    "ht": ("objective", "jacobian"),
    "lstm": ("objective", "jacobian"),
}
# GradBench's C and C++ tools, whose nightly ratios are shown.
CTOOLS = ["manual", "enzyme", "tapenade", "adol-c", "codipack", "adept", "ad-hpp", "cppad"]
# Other tools run here whose nightly ratios are shown too.
NIGHTLY_OTHERS = ["pytorch"]
NIGHTLY_REF = "ci/refs/heads/nightly"


def label_of(tag):
    name = tag.split("_")[0]
    if name == "ht":
        return "ht (simple, small)" if "variant_simple" in tag else "ht (complicated, big)"
    return name


def load(results, tools):
    """{(label, eval): {desc: {tool: {function: mean_ns}}}}, in file order."""
    data = {}
    order = []
    for tool in tools:
        for path in sorted(glob.glob(os.path.join(results, f"{tool}.*.summary"))):
            tag = os.path.basename(path)[len(tool) + 1 : -len(".summary")]
            label = label_of(tag)
            if label not in data:
                data[label] = {}
                order.append(label)
            with open(path) as f:
                for line in f:
                    r = json.loads(line)
                    if not r["success"] or not r["evaluate_ns"] or r["valid"] is False:
                        continue
                    mean = sum(r["evaluate_ns"]) / len(r["evaluate_ns"])
                    desc = r["description"] or "-"
                    data[label].setdefault(desc, {}).setdefault(tool, {})[r["function"]] = mean
    return data, order


def validation(results, tools):
    """Markdown lines: per tool and eval, the evaluations valid, invalid and failed."""
    lines = ["| tool | eval | sizes | valid | invalid | failed (function) |", "|---|---|---|---|---|---|"]
    for tool in tools:
        for path in sorted(glob.glob(os.path.join(results, f"{tool}.*.summary"))):
            tag = os.path.basename(path)[len(tool) + 1 : -len(".summary")]
            ok = bad = 0
            failed, sizes = [], []
            with open(path) as f:
                for line in f:
                    r = json.loads(line)
                    if r["description"] not in sizes:
                        sizes.append(r["description"])
                    if not r["success"]:
                        failed.append(r["function"])
                    elif r["valid"]:
                        ok += 1
                    else:
                        bad += 1
            fl = f"{len(failed)} ({', '.join(sorted(set(failed)))})" if failed else "0"
            lines.append(f"| {tool} | {label_of(tag)} | {len(sizes)} | {ok} | {bad} | {fl} |")
    return lines


def nightly(git_dir):
    """({eval: {tool: {desc: ratio}}}, commit) from the nightly branch."""
    if not git_dir:
        return {}, None
    out = {}
    try:
        commit = subprocess.run(
            ["git", "-C", git_dir, "log", "-1", "--format=%H %cs %s", NIGHTLY_REF],
            capture_output=True, text=True, check=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return {}, None
    for ev in PAIRS:
        r = subprocess.run(["git", "-C", git_dir, "show", f"{NIGHTLY_REF}:evals/{ev}/summary.json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            continue
        s = json.loads(r.stdout)
        for tool, sizes in s.get("tools", {}).items():
            for desc, pd in sizes.items():
                try:
                    p = pd["primal"]["secs"] * 1e9 + pd["primal"]["nanos"]
                    d = pd["derivative"]["secs"] * 1e9 + pd["derivative"]["nanos"]
                except (KeyError, TypeError):
                    continue
                if p > 0:
                    out.setdefault(ev, {}).setdefault(tool, {})[desc] = d / p
    return out, commit


def fmt_t(ns):
    if ns is None:
        return "-"
    if ns >= 1e9:
        return f"{ns / 1e9:.3g} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3g} us"
    return f"{ns:.3g} ns"


def fmt_r(r):
    return "-" if r is None else f"{r:.3g}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--tools", nargs="+", default=["chainrules-c", "chainrules-c-tape", "manual"])
    ap.add_argument("--nightly", help="GradBench clone with the nightly branch")
    ap.add_argument("--plot-data", help="JSON file for bench/gradbench_plot.py")
    args = ap.parse_args()
    data, order = load(args.results, args.tools)
    night, commit = nightly(args.nightly)

    medians = {}  # label -> {column: median ratio}
    ranges = {}  # label -> {column: [min, max] ratio}
    print("## Per size\n")
    head = ["eval", "size"]
    for t in args.tools:
        head += [f"{t} primal", f"{t} derivative", f"{t} ratio"]
    ref = "manual" if "manual" in args.tools else args.tools[-1]
    others = [t for t in args.tools if t != ref]
    head += [f"{t} / {ref}" for t in others]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for label in order:
        ev = label.split(" ")[0]
        if ev not in PAIRS:
            continue
        pf, df = PAIRS[ev]
        ratios = {t: [] for t in args.tools}
        for desc, per_tool in data[label].items():
            row = [label, desc]
            rs = []
            for t in args.tools:
                f = per_tool.get(t, {})
                p, d = f.get(pf), f.get(df)
                r = d / p if p and d else None
                if r is not None:
                    ratios[t].append(r)
                rs.append(r)
                row += [fmt_t(p), fmt_t(d), fmt_r(r)]
            rr = rs[args.tools.index(ref)]
            for t in others:
                r = rs[args.tools.index(t)]
                row.append(fmt_r(r / rr) if r and rr else "-")
            print("| " + " | ".join(row) + " |")
        medians[label] = {f"{t} (here)": statistics.median(v) for t, v in ratios.items() if v}
        ranges[label] = {f"{t} (here)": [min(v), max(v)] for t, v in ratios.items() if v}
        if not label.startswith("ht (simple"):
            for t in CTOOLS + NIGHTLY_OTHERS:
                v = list(night.get(ev, {}).get(t, {}).values())
                if v:
                    medians[label][f"{t} (nightly)"] = statistics.median(v)

    print("\n## Median derivative / primal ratio over the sizes\n")
    cols = [f"{t} (here)" for t in args.tools] + [
        f"{t} (nightly)" for t in CTOOLS + NIGHTLY_OTHERS]
    cols = [c for c in cols if any(c in m for m in medians.values())]
    print("| eval | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for label in order:
        if label in medians:
            print(f"| {label} | " + " | ".join(fmt_r(medians[label].get(c)) for c in cols) + " |")
    if commit:
        print(f"\nNightly: GradBench's branch nightly, commit {commit}.")
    # particle and saddle: no primal; the time of each variant
    nested = [l for l in order if l in ("particle", "saddle")]
    if nested:
        print("\n## particle and saddle (time per evaluation)\n")
        print("| eval | tool | ff | rf | fr | rr |")
        print("|---|---|---|---|---|---|")
        for label in nested:
            for desc, per_tool in data[label].items():
                for t, f in per_tool.items():
                    print(f"| {label} | {t} | " +
                          " | ".join(fmt_t(f.get(v)) for v in ("ff", "rf", "fr", "rr")) + " |")
    print("\n## Validation\n")
    print("\n".join(validation(args.results, args.tools)))
    print("\n## Range of the ratio over the sizes\n")
    here = [f"{t} (here)" for t in args.tools]
    print("| eval | " + " | ".join(here) + " |")
    print("|---|" + "---|" * len(here))
    for label in order:
        if label in ranges and ranges[label]:
            cells = []
            for c in here:
                r = ranges[label].get(c)
                cells.append(f"{fmt_r(r[0])} - {fmt_r(r[1])}" if r else "-")
            print(f"| {label} | " + " | ".join(cells) + " |")
    if args.plot_data:
        labels = [l for l in order if medians.get(l)]
        with open(args.plot_data, "w") as f:
            json.dump({"evals": labels, "columns": cols, "medians": medians, "ranges": ranges,
                       "nightly": commit}, f, indent=1)


if __name__ == "__main__":
    main()
