#!/usr/bin/env python3
"""The GradBench results table and plot (bench/gradbench.sh, docs/gradbench.md).

    gradbench_table.py --results DIR [DIR ...] [--replace DIR ...]
                       [--tools chainrules-c chainrules-c-tape manual]
                       [--nightly GIT_DIR] [--plot-data FILE]

Reads DIR/TOOL.TAG.summary (tools/gradbench/run.py --summary) of every results directory
and prints Markdown: for every eval and size, each tool's primal and derivative time (the
mean of the evaluate timings of the message, as GradBench's scorer computes them) and
their ratio; then per eval the median ratio over the sizes, beside GradBench's published
nightly ratios (read from the nightly branch of the clone GIT_DIR:
evals/EVAL/summary.json). The per-size table ends with each tool's ratio over the
reference's (`manual` when it is among the tools, else the last one). --plot-data writes
the medians and ranges as JSON for bench/gradbench_plot.py.

Several directories: the tools and evals of each are combined (e.g. two streams of evals
run on two cores). A tool's eval found in more than one --results directory (the same
TOOL.TAG.summary) is a repeat: a size's times are the median over the repeats, its ratio
the median of the repeats' ratios, followed by their range in parentheses. A tool's eval
found in a --replace directory is taken from the --replace directories only (a newer run
of some evals, e.g. after a change of their objective, replacing the older rows). When a
directory holds load.txt (bench/gradbench.sh), the table ends with the load averages at
the start and the end of every eval.
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


def summaries(results, replace, tools):
    """[(tool, tag, [path, ...])]: every tool's eval, with its repeats' summary files."""
    def found(dirs, tool):
        out = {}
        for d in dirs:
            for path in sorted(glob.glob(os.path.join(d, f"{tool}.*.summary"))):
                tag = os.path.basename(path)[len(tool) + 1 : -len(".summary")]
                out.setdefault(tag, []).append(path)
        return out

    out = []
    for tool in tools:
        base, new = found(results, tool), found(replace or [], tool)
        base.update(new)
        out += [(tool, tag, base[tag]) for tag in sorted(base)]
    return out


def load(files):
    """({label: {desc: {tool: [{function: mean_ns}, one per repeat]}}}, labels in order)."""
    data = {}
    order = []
    for tool, tag, paths in files:
        label = label_of(tag)
        if label not in data:
            data[label] = {}
            order.append(label)
        for path in paths:
            runs = {}
            with open(path) as f:
                for line in f:
                    r = json.loads(line)
                    if not r["success"] or not r["evaluate_ns"] or r["valid"] is False:
                        continue
                    mean = sum(r["evaluate_ns"]) / len(r["evaluate_ns"])
                    desc = r["description"] or "-"
                    runs.setdefault(desc, {})[r["function"]] = mean
            for desc, fns in runs.items():
                data[label].setdefault(desc, {}).setdefault(tool, []).append(fns)
    return data, order


def validation(files):
    """Markdown lines: per tool and eval, the evaluations valid, invalid and failed."""
    lines = ["| tool | eval | sizes | valid | invalid | failed (function) |", "|---|---|---|---|---|---|"]
    for tool, tag, paths in files:
        ok = bad = 0
        failed, sizes = [], []
        for path in paths:
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
        rep = f" ({len(paths)} runs)" if len(paths) > 1 else ""
        lines.append(f"| {tool} | {label_of(tag)}{rep} | {len(sizes)} | {ok} | {bad} | {fl} |")
    return lines


def loads(dirs):
    """Markdown lines: per results directory and eval, the time and the load averages (1, 5,
    15 minutes) at its start and end (DIR/load.txt), or [] when no directory has one."""
    rows = []
    for d in dirs:
        path = os.path.join(d, "load.txt")
        if not os.path.exists(path):
            continue
        begun = {}
        with open(path) as f:
            for line in f:
                parts = [p.strip() for p in line.split("|")]
                if len(parts) < 2 or len(parts[0].split(" ", 2)) < 3:
                    continue
                when, what, name = parts[0].split(" ", 2)
                avg = parts[1].removeprefix("load ").strip()
                if what == "start":
                    begun[name] = (when, avg)
                elif what == "end" and name in begun:
                    t0, a0 = begun.pop(name)
                    rows.append(f"| {name} | {os.path.basename(os.path.normpath(d))} | "
                                f"{t0} | {when} | {a0} | {avg} |")
        for name, (t0, a0) in begun.items():
            rows.append(f"| {name} | {os.path.basename(os.path.normpath(d))} | {t0} | "
                        f"(not ended) | {a0} | - |")
    if not rows:
        return []
    return ["| eval | results | start (UTC) | end (UTC) | load at start | load at end |",
            "|---|---|---|---|---|---|"] + rows


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


def fmt_rr(rs):
    """The median of a size's repeated ratios, and their range when repeated."""
    if not rs:
        return "-"
    if len(rs) == 1:
        return fmt_r(rs[0])
    return f"{fmt_r(statistics.median(rs))} ({fmt_r(min(rs))} - {fmt_r(max(rs))})"


def med(v):
    return statistics.median(v) if v else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True, nargs="+")
    ap.add_argument("--replace", nargs="*", default=[])
    ap.add_argument("--tools", nargs="+", default=["chainrules-c", "chainrules-c-tape", "manual"])
    ap.add_argument("--nightly", help="GradBench clone with the nightly branch")
    ap.add_argument("--plot-data", help="JSON file for bench/gradbench_plot.py")
    args = ap.parse_args()
    files = summaries(args.results, args.replace, args.tools)
    data, order = load(files)
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
            rs = {}
            for t in args.tools:
                reps = per_tool.get(t, [])
                ps = [f[pf] for f in reps if f.get(pf)]
                ds = [f[df] for f in reps if f.get(df)]
                rr = [f[df] / f[pf] for f in reps if f.get(pf) and f.get(df)]
                r = med(rr)
                if r is not None:
                    ratios[t].append(r)
                rs[t] = r
                row += [fmt_t(med(ps)), fmt_t(med(ds)), fmt_rr(rr)]
            for t in others:
                row.append(fmt_r(rs[t] / rs[ref]) if rs[t] and rs[ref] else "-")
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
                for t, reps in per_tool.items():
                    cells = []
                    for v in ("ff", "rf", "fr", "rr"):
                        ts = [f[v] for f in reps if f.get(v)]
                        c = fmt_t(med(ts))
                        if len(ts) > 1:
                            c += f" ({fmt_t(min(ts))} - {fmt_t(max(ts))})"
                        cells.append(c)
                    print(f"| {label} | {t} | " + " | ".join(cells) + " |")
    print("\n## Validation\n")
    print("\n".join(validation(files)))
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
    lo = loads(args.results + args.replace)
    if lo:
        print("\n## Load average (1, 5, 15 minutes) at the start and the end of each eval\n")
        print("\n".join(lo))
    if args.plot_data:
        labels = [l for l in order if medians.get(l)]
        with open(args.plot_data, "w") as f:
            json.dump({"evals": labels, "columns": cols, "medians": medians, "ranges": ranges,
                       "nightly": commit}, f, indent=1)


if __name__ == "__main__":
    main()
