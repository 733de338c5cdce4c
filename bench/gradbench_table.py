#!/usr/bin/env python3
"""The GradBench results table and plot (bench/gradbench.sh, docs/gradbench.md).

    gradbench_table.py --results DIR [--tools chainrules-c chainrules-c-tape manual]
                       [--nightly GIT_DIR]
                       [--svg FILE]

Reads DIR/TOOL.TAG.summary (tools/gradbench/run.py --summary) and prints Markdown: for
every eval and size, each tool's primal and derivative time (the mean of the evaluate
timings of the message, as GradBench's scorer computes them) and their ratio; then per
eval the median ratio over the sizes, beside GradBench's published nightly ratios (read
from the nightly branch of the clone GIT_DIR: evals/EVAL/summary.json). The per-size table
ends with each tool's ratio over the reference's (`manual` when it is among the tools, else
the last one).
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
    ap.add_argument("--svg")
    args = ap.parse_args()
    data, order = load(args.results, args.tools)
    night, commit = nightly(args.nightly)

    medians = {}  # label -> {column: median ratio}
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
        if not label.startswith("ht (simple"):
            for t in CTOOLS:
                v = list(night.get(ev, {}).get(t, {}).values())
                if v:
                    medians[label][f"{t} (nightly)"] = statistics.median(v)

    print("\n## Median derivative / primal ratio over the sizes\n")
    cols = [f"{t} (here)" for t in args.tools] + [f"{t} (nightly)" for t in CTOOLS]
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
    if args.svg:
        write_svg(args.svg, order, medians, cols)


def write_svg(path, order, medians, cols):
    """Grouped horizontal bars, log scale: per eval, the median ratio of each column."""
    import math

    labels = [l for l in order if l in medians and medians[l]]
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
              "#7f7f7f", "#bcbd22", "#17becf"]
    bar, gap, left, width = 9, 14, 190, 560
    lo, hi = 0.5, 1000.0
    vals = [v for m in medians.values() for v in m.values() if v and v > 0]
    if vals:
        lo = min(lo, min(vals) / 1.5)
        hi = max(10.0, max(vals) * 1.5)

    def xpos(v):
        return left + width * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    rows = []
    y = 40
    for l in labels:
        present = [c for c in cols if c in medians[l]]
        h = bar * len(present)
        rows.append(f'<text x="{left - 8}" y="{y + h / 2 + 4}" text-anchor="end" '
                    f'font-size="12">{l}</text>')
        for c in present:
            v = medians[l][c]
            col = colors[cols.index(c) % len(colors)]
            rows.append(f'<rect x="{left}" y="{y}" width="{max(1, xpos(v) - left):.1f}" '
                        f'height="{bar - 1}" fill="{col}"><title>{l}: {c} {v:.3g}</title></rect>')
            y += bar
        y += gap
    height = y + 30 + 16 * ((len(cols) + 2) // 3)
    ticks = []
    d = 10 ** math.floor(math.log10(lo))
    while d <= hi:
        for m in (1, 2, 5):
            v = d * m
            if lo <= v <= hi:
                ticks.append(f'<line x1="{xpos(v):.1f}" y1="30" x2="{xpos(v):.1f}" y2="{y}" '
                             f'stroke="#ddd"/><text x="{xpos(v):.1f}" y="24" font-size="10" '
                             f'text-anchor="middle">{v:g}</text>')
        d *= 10
    legend = []
    for i, c in enumerate(cols):
        lx, ly = left + (i % 3) * 190, y + 20 + 16 * (i // 3)
        legend.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" '
                      f'fill="{colors[i % len(colors)]}"/><text x="{lx + 14}" y="{ly}" '
                      f'font-size="11">{c}</text>')
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 30}" '
           f'height="{height}" font-family="sans-serif">\n'
           f'<rect width="100%" height="100%" fill="white"/>\n'
           f'<text x="{left}" y="12" font-size="12">derivative time / primal time '
           f'(median over sizes, log scale)</text>\n'
           + "\n".join(ticks + rows + legend) + "\n</svg>\n")
    with open(path, "w") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
