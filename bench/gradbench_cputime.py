#!/usr/bin/env python3
"""CPU time of one GradBench eval size, for chainrules-c and GradBench's `manual`.

    gradbench_cputime.py --log RUN.jsonl --size DESCRIPTION --primal F --derivative G
                         [--gradbench build/gradbench] [--tool build/tools/gradbench/chainrules-gradbench]
                         [--manual BIN] [--runs-primal N] [--runs-derivative M] [--repeat R]
                         [--taskset CPU]

On a loaded machine a long evaluation waits for the processor more often than a short one,
so wall-clock ratios of derivative to primal time are inflated; the processor time a
process used (its user time) is not. RUN.jsonl is the log of tools/gradbench/run.py (the
eval's messages); the evaluate messages of the size named DESCRIPTION (e.g. "n=40000",
"hand1_t26_c100") are sent again with min_runs N (or M) and min_seconds 0: to
chainrules-gradbench on standard input, to `manual`'s binary (tools/manual/bin/EVAL, or
--manual BIN: a copy, which a concurrent eval's `define` does not rebuild) as cpp.py runs
it. A function's time per evaluation is the difference between the user times
of the process evaluating it N times and once, divided by N - 1: reading and converting the
input, and converting the answer (a Jacobian of millions of numbers), cancel. The tools
alternate, R times; the output is each tool's primal and derivative time per evaluation and
their ratio, over the repeats (min - max).
"""

import argparse
import json
import os
import resource
import subprocess
import tempfile


def user_time(cmd, stdin=None, cwd=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    with open(os.devnull, "w") as null:
        subprocess.run(cmd, stdin=stdin, stdout=null, cwd=cwd, check=True)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--size", required=True)
    ap.add_argument("--primal", required=True)
    ap.add_argument("--derivative", required=True)
    ap.add_argument("--gradbench", default="build/gradbench")
    ap.add_argument("--tool", default="build/tools/gradbench/chainrules-gradbench")
    ap.add_argument("--manual", help="manual's binary (default GRADBENCH/tools/manual/bin/EVAL)")
    ap.add_argument("--runs-primal", type=int, default=200)
    ap.add_argument("--runs-derivative", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--taskset", default="1")
    a = ap.parse_args()
    msgs = [json.loads(l).get("message") for l in open(a.log)]
    msgs = [m for m in msgs if m]
    head = [m for m in msgs if m.get("kind") in ("start", "define")]
    ev = {m["function"]: m for m in msgs if m.get("kind") == "evaluate"
          and m["input"] is not None and m.get("description") == a.size}
    if a.primal not in ev or a.derivative not in ev:
        raise SystemExit(f"no evaluate messages for {a.size} in {a.log}")
    name = ev[a.primal]["module"]
    tool = os.path.abspath(a.tool)
    manual = os.path.abspath(a.manual) if a.manual else os.path.join(
        os.path.abspath(a.gradbench), "tools", "manual", "bin", name)
    pin = ["taskset", "-c", a.taskset]
    tmp = tempfile.mkdtemp()

    def files(fn, runs):
        m = dict(ev[fn])
        m["input"] = dict(m["input"], min_runs=runs, min_seconds=0)
        proto = os.path.join(tmp, f"{fn}.{runs}.in")
        with open(proto, "w") as f:
            for h in head + [m, {"id": 10 ** 6, "kind": "end"}]:
                f.write(json.dumps(h) + "\n")
        inp = os.path.join(tmp, f"{fn}.{runs}.json")
        with open(inp, "w") as f:
            json.dump(m["input"], f)
        return proto, inp

    cases = {"p1": files(a.primal, 1), "p": files(a.primal, a.runs_primal),
             "d1": files(a.derivative, 1), "d": files(a.derivative, a.runs_derivative)}
    fns = {"p1": a.primal, "p": a.primal, "d1": a.derivative, "d": a.derivative}
    runs = {"p": a.runs_primal, "d": a.runs_derivative}
    res = {"chainrules-c": [], "manual": []}
    for _ in range(a.repeat):
        for t in res:
            u = {}
            for c, (proto, inp) in cases.items():
                if t == "chainrules-c":
                    with open(proto) as f:
                        u[c] = user_time(pin + [tool], stdin=f, cwd=a.gradbench)
                else:
                    u[c] = user_time(pin + [manual, inp, fns[c]], cwd=a.gradbench)
            p = (u["p"] - u["p1"]) / (runs["p"] - 1)
            d = (u["d"] - u["d1"]) / (runs["d"] - 1)
            res[t].append((p, d, d / p if p > 0 else float("nan")))
    for t, v in res.items():
        rng = lambda i: f"{min(x[i] for x in v) * 1e3:.3g} - {max(x[i] for x in v) * 1e3:.3g} ms"
        r = [x[2] for x in v]
        print(f"{t}: primal {rng(0)}, derivative {rng(1)}, ratio {min(r):.3g} - {max(r):.3g}")


if __name__ == "__main__":
    main()
