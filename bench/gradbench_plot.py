#!/usr/bin/env python3
"""Draws the GradBench results table (bench/gradbench.sh, docs/gradbench.md) as an SVG plot.

    gradbench_plot.py PLOT_JSON OUT.svg

PLOT_JSON is written by `bench/gradbench_table.py --plot-data`. Per eval, one horizontal
bar per column: the median over the sizes of derivative time / primal time, log scale; the
tools run here carry a line from the smallest to the largest ratio over the sizes. Drawn
with matplotlib (Debian's python3-matplotlib, `tools/deps.sh bench`) when it can be
imported, else by the small SVG writer below (the same bars, without the ranges' axis
labels' typesetting).
"""

import json
import math
import sys

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
          "#7b4173"]
TITLE = "derivative time / primal time (median over the sizes; lines: range here)"


def plot_matplotlib(d, path):
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "chainrules-gradbench"  # reproducible ids
    plt.rcParams["svg.fonttype"] = "none"  # text as text: a smaller file
    evals, cols = d["evals"], d["columns"]
    rows = sum(len([c for c in cols if c in d["medians"][e]]) for e in evals)
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.16 * rows + 0.3 * len(evals)))
    y, ticks, labels, seen = 0.0, [], [], set()
    for e in evals:
        present = [c for c in cols if c in d["medians"][e]]
        top = y
        for c in present:
            v = d["medians"][e][c]
            i = cols.index(c)
            ax.barh(y, v, height=0.9, color=COLORS[i % len(COLORS)],
                    label=None if c in seen else c, hatch="//" if "nightly" in c else None,
                    edgecolor="white", linewidth=0)
            seen.add(c)
            ax.text(v * 1.05, y, f"{v:.3g}", va="center", fontsize=5.5)
            r = d["ranges"].get(e, {}).get(c)
            if r:
                ax.plot(r, [y, y], color="black", linewidth=0.8)
            y += 1
        ticks.append((top + y - 1) / 2)
        labels.append(e)
        y += 1.2
    ax.set_xscale("log")
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.axvline(1, color="#999", linewidth=0.6)
    ax.grid(axis="x", which="major", color="#ddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_title(TITLE, fontsize=10)
    ax.set_xlabel("derivative / primal", fontsize=8)
    handles, names = ax.get_legend_handles_labels()
    order = sorted(range(len(names)), key=lambda i: cols.index(names[i]))
    ax.legend([handles[i] for i in order], [names[i] for i in order], fontsize=7,
              loc="upper center", bbox_to_anchor=(0.5, -0.04), ncol=4, frameon=False)
    note = f"GradBench nightly: {d['nightly']}" if d.get("nightly") else ""
    fig.text(0.01, 0.005, note, fontsize=6)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})


def plot_svg(d, path):
    """The hand-written fallback: grouped horizontal bars, log scale."""
    evals, cols, medians = d["evals"], d["columns"], d["medians"]
    bar, gap, left, width = 9, 14, 190, 560
    vals = [v for m in medians.values() for v in m.values() if v and v > 0]
    lo = min([0.5] + [v / 1.5 for v in vals])
    hi = max([10.0] + [v * 1.5 for v in vals])

    def xpos(v):
        return left + width * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    rows = []
    y = 40
    for e in evals:
        present = [c for c in cols if c in medians[e]]
        h = bar * len(present)
        rows.append(f'<text x="{left - 8}" y="{y + h / 2 + 4}" text-anchor="end" '
                    f'font-size="12">{e}</text>')
        for c in present:
            v = medians[e][c]
            col = COLORS[cols.index(c) % len(COLORS)]
            rows.append(f'<rect x="{left}" y="{y}" width="{max(1, xpos(v) - left):.1f}" '
                        f'height="{bar - 1}" fill="{col}"><title>{e}: {c} {v:.3g}</title></rect>')
            r = d["ranges"].get(e, {}).get(c)
            if r:
                rows.append(f'<line x1="{xpos(r[0]):.1f}" y1="{y + bar / 2:.1f}" '
                            f'x2="{xpos(r[1]):.1f}" y2="{y + bar / 2:.1f}" stroke="black"/>')
            y += bar
        y += gap
    ticks = []
    t = 10 ** math.floor(math.log10(lo))
    while t <= hi:
        for m in (1, 2, 5):
            v = t * m
            if lo <= v <= hi:
                ticks.append(f'<line x1="{xpos(v):.1f}" y1="30" x2="{xpos(v):.1f}" y2="{y}" '
                             f'stroke="#ddd"/><text x="{xpos(v):.1f}" y="24" font-size="10" '
                             f'text-anchor="middle">{v:g}</text>')
        t *= 10
    legend = []
    for i, c in enumerate(cols):
        lx, ly = left + (i % 3) * 190, y + 20 + 16 * (i // 3)
        legend.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" '
                      f'fill="{COLORS[i % len(COLORS)]}"/><text x="{lx + 14}" y="{ly}" '
                      f'font-size="11">{c}</text>')
    height = y + 30 + 16 * ((len(cols) + 2) // 3)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 30}" '
           f'height="{height}" font-family="sans-serif">\n'
           f'<rect width="100%" height="100%" fill="white"/>\n'
           f'<text x="{left}" y="12" font-size="12">{TITLE}</text>\n'
           + "\n".join(ticks + rows + legend) + "\n</svg>\n")
    with open(path, "w") as f:
        f.write(svg)


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        d = json.load(f)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        plot_svg(d, sys.argv[2])
        return 0
    plot_matplotlib(d, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
