#!/usr/bin/env python3
"""Tests of bench/gradbench_table.py on the result files of tests/tools/gradbench_table/.

    gradbench_table_test.py [PATH/TO/gradbench_table.py]

The fixture is four results directories written by hand in the format of
tools/gradbench/run.py --summary and bench/gradbench.sh's load.txt:

- core0: lse of chainrules-c and manual at n=10 and n=20; chainrules-c's gradient at n=20
  is marked invalid;
- core1: det of chainrules-c and manual at ell 5; manual's gradient failed;
- repeat: chainrules-c's lse at n=10 again;
- new: chainrules-c's det again.

The expected figures are worked out from the fixture's timings by hand (each function's time
is the mean of its evaluate timings; the ratio is derivative / primal):

- chainrules-c, lse, n=10: 400 / mean(100, 300) = 2 in core0, 300 / 100 = 3 in repeat:
  median 2.5, range 2 - 3; times: the medians 150 ns and 350 ns;
- manual, lse: 500 / 500 = 1 at n=10, 3000 / 2000 = 1.5 at n=20 (median 1.25);
- chainrules-c, det: mean(8, 12) ms / 2 ms = 5 in core1, 7 ms / 1 ms = 7 in new.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "gradbench_table")
SCRIPT = os.path.join(HERE, "..", "..", "bench", "gradbench_table.py")


def run(*args, plot=None):
    cmd = [sys.executable, SCRIPT, "--tools", "chainrules-c", "manual"]
    cmd += list(args)
    if plot:
        cmd += ["--plot-data", plot]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return out


def section(out, title):
    """The Markdown table under the heading `## title`, as a list of {column: cell}."""
    lines = out.split("\n")
    i = next(k for k, l in enumerate(lines) if l.startswith("## " + title))
    rows = []
    head = None
    for line in lines[i + 1 :]:
        if line.startswith("## "):
            break
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if head is None:
            head = cells
        else:
            rows.append(dict(zip(head, cells)))
    return rows


def d(name):
    return os.path.join(FIXTURE, name)


class Table(unittest.TestCase):
    def test_combines_directories(self):
        out = run("--results", d("core0"), d("core1"))
        rows = section(out, "Per size")
        self.assertEqual([(r["eval"], r["size"]) for r in rows],
                         [("det", "5"), ("lse", "n=10"), ("lse", "n=20")])
        det = rows[0]
        self.assertEqual(det["chainrules-c primal"], "2 ms")
        self.assertEqual(det["chainrules-c derivative"], "10 ms")
        self.assertEqual(det["chainrules-c ratio"], "5")
        # manual's gradient failed: no ratio, no ratio over manual's
        self.assertEqual(det["manual derivative"], "-")
        self.assertEqual(det["manual ratio"], "-")
        self.assertEqual(det["chainrules-c / manual"], "-")
        n10, n20 = rows[1], rows[2]
        self.assertEqual(n10["chainrules-c ratio"], "2")
        self.assertEqual(n10["manual ratio"], "1")
        self.assertEqual(n10["chainrules-c / manual"], "2")
        # the invalid gradient is not timed
        self.assertEqual(n20["chainrules-c primal"], "1 us")
        self.assertEqual(n20["chainrules-c derivative"], "-")
        self.assertEqual(n20["chainrules-c ratio"], "-")
        self.assertEqual(n20["manual ratio"], "1.5")
        med = {r["eval"]: r for r in section(out, "Median")}
        self.assertEqual(med["lse"]["manual (here)"], "1.25")
        self.assertEqual(med["lse"]["chainrules-c (here)"], "2")
        self.assertEqual(med["det"]["chainrules-c (here)"], "5")
        self.assertEqual(med["det"]["manual (here)"], "-")

    def test_repeats_give_median_and_range(self):
        with tempfile.TemporaryDirectory() as tmp:
            plot = os.path.join(tmp, "plot.json")
            out = run("--results", d("core0"), d("core1"), d("repeat"), plot=plot)
            with open(plot) as f:
                p = json.load(f)
        n10 = next(r for r in section(out, "Per size") if r["size"] == "n=10")
        self.assertEqual(n10["chainrules-c ratio"], "2.5 (2 - 3)")
        self.assertEqual(n10["chainrules-c primal"], "150 ns")
        self.assertEqual(n10["chainrules-c derivative"], "350 ns")
        self.assertEqual(n10["chainrules-c / manual"], "2.5")
        self.assertAlmostEqual(p["medians"]["lse"]["chainrules-c (here)"], 2.5)
        self.assertAlmostEqual(p["medians"]["lse"]["manual (here)"], 1.25)
        self.assertEqual(p["ranges"]["lse"]["manual (here)"], [1.0, 1.5])
        val = {(r["tool"], r["eval"]): r for r in section(out, "Validation")}
        lse = val[("chainrules-c", "lse (2 runs)")]
        self.assertEqual((lse["sizes"], lse["valid"], lse["invalid"]), ("2", "5", "1"))
        det = val[("manual", "det")]
        self.assertEqual((det["valid"], det["failed (function)"]), ("1", "1 (gradient)"))

    def test_replace_takes_the_newer_run_only(self):
        out = run("--results", d("core0"), d("core1"), "--replace", d("new"))
        det = next(r for r in section(out, "Per size") if r["eval"] == "det")
        self.assertEqual(det["chainrules-c ratio"], "7")
        self.assertEqual(det["chainrules-c primal"], "1 ms")
        # manual's det is not in the replacing directory: kept from core1
        self.assertEqual(det["manual primal"], "1 ms")
        val = {(r["tool"], r["eval"]) for r in section(out, "Validation")}
        self.assertIn(("chainrules-c", "det"), val)
        self.assertNotIn(("chainrules-c", "det (2 runs)"), val)

    def test_load_averages(self):
        out = run("--results", d("core0"), d("core1"))
        rows = section(out, "Load average")
        self.assertEqual(len(rows), 2)
        lse = next(r for r in rows if r["eval"] == "lse")
        self.assertEqual(lse["results"], "core0")
        self.assertEqual(lse["start (UTC)"], "2026-01-02T10:00:00Z")
        self.assertEqual(lse["end (UTC)"], "2026-01-02T10:05:00Z")
        self.assertEqual(lse["load at start"], "1.50 2.00 2.50")
        self.assertEqual(lse["load at end"], "3.50 2.10 2.40")
        det = next(r for r in rows if r["eval"] == "det -l 5")
        self.assertEqual(det["results"], "core1")
        # one directory without load.txt: no section at all
        out = run("--results", d("repeat"))
        self.assertNotIn("## Load average", out)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].endswith(".py"):
        SCRIPT = sys.argv.pop(1)
    unittest.main(verbosity=2)
