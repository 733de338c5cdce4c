#!/usr/bin/env python3
"""Runs one GradBench eval against one tool, as GradBench's `gradbench run` does.

    run.py --gradbench DIR --eval NAME --tool 'COMMAND ...' [--log FILE] [--summary FILE]
           [--timeout SECONDS] [-- EVAL-ARGS...]

DIR is a copy of GradBench's repository (its python/ and evals/ directories, and
tools/manual built when the eval validates against it). The eval's Python program
(python/gradbench/gradbench/evals/NAME/run.py) runs with DIR as its working directory;
each message it writes is forwarded to the tool, each response of the tool back to the eval,
and both are logged as GradBench's intermediary logs them ({"elapsed": ..., "message": ...}
and {"elapsed": ..., "response": ...}, one per line).

Exit status, as `gradbench run`: 0 success, 1 error, 2 the tool did not define the module,
3 an evaluation failed, 4 an output was invalid, 5 timeout.

Debian's python3-pydantic is version 1; the evals call version 2's model_validate. The
directory pyshim/ next to this script, put on PYTHONPATH, adds it (sitecustomize.py).
"""

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gradbench", required=True, help="GradBench repository copy")
    ap.add_argument("--eval", required=True, help="eval name (evals/NAME)")
    ap.add_argument("--tool", required=True, help="tool command line")
    ap.add_argument("--tool-cwd", help="working directory of the tool")
    ap.add_argument("--log", help="write the session log (JSON lines) here")
    ap.add_argument("--summary", help="write one JSON line per evaluation here")
    ap.add_argument("--timeout", type=float, default=0, help="seconds per response (0: none)")
    ap.add_argument("--python", default=sys.executable, help="python for the eval")
    ap.add_argument("--quiet", action="store_true", help="print only failures")
    ap.add_argument("--unimplemented", default="",
                    help="comma-separated functions the tool is known not to implement: "
                         "their failure is reported but does not fail the run")
    ap.add_argument("eval_args", nargs="*")
    args = ap.parse_args()

    root = os.path.abspath(args.gradbench)
    script = os.path.join(root, "python", "gradbench", "gradbench", "evals", args.eval, "run.py")
    if not os.path.exists(script):
        print(f"run.py: no eval {args.eval} in {root}", file=sys.stderr)
        return 1
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(HERE, "pyshim"), os.path.join(root, "python", "gradbench")]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    ev = subprocess.Popen(
        [args.python, script] + args.eval_args,
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    tool = subprocess.Popen(
        shlex.split(args.tool),
        cwd=args.tool_cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    log = open(args.log, "w") if args.log else None
    summary = open(args.summary, "w") if args.summary else None
    start = time.monotonic_ns()
    pending = {}  # evaluate id -> (function, description, response)
    outcome = 0
    counts = {"valid": 0, "invalid": 0, "failed": 0}

    def record(kind, obj):
        if log:
            line = {"elapsed": {"nanoseconds": time.monotonic_ns() - start}, kind: obj}
            log.write(json.dumps(line) + "\n")

    def timed_readline(proc):
        if args.timeout > 0:
            signal.alarm(int(args.timeout) + 1)
        try:
            return proc.stdout.readline()
        finally:
            if args.timeout > 0:
                signal.alarm(0)

    def on_alarm(signum, frame):
        raise TimeoutError

    signal.signal(signal.SIGALRM, on_alarm)
    try:
        while True:
            line = ev.stdout.readline()
            if not line:
                break
            msg = json.loads(line)
            record("message", msg)
            tool.stdin.write(json.dumps(msg) + "\n")
            tool.stdin.flush()
            if msg.get("kind") == "end":
                break
            rline = timed_readline(tool)
            if not rline:
                print("run.py: the tool closed its output", file=sys.stderr)
                outcome = outcome or 1
                break
            resp = json.loads(rline)
            record("response", resp)
            kind = msg.get("kind")
            if kind == "define" and not resp.get("success"):
                print(f"run.py: the tool does not define {msg.get('module')}: "
                      f"{resp.get('error', '')}", file=sys.stderr)
                outcome = outcome or 2
            elif kind == "evaluate":
                pending[msg["id"]] = (msg.get("function"), msg.get("description", ""), resp)
                if not resp.get("success"):
                    counts["failed"] += 1
                    if msg.get("function") not in args.unimplemented.split(","):
                        outcome = outcome or 3
                    print(f"run.py: {args.eval} {msg.get('function')} "
                          f"{msg.get('description', '')}: FAILED {resp.get('error', '')}",
                          file=sys.stderr)
                    report(summary, args.eval, msg, resp, None)
            elif kind == "analysis":
                fn, desc, r = pending.pop(msg["of"], (None, "", {}))
                valid = bool(msg.get("valid"))
                counts["valid" if valid else "invalid"] += 1
                if not valid:
                    outcome = outcome or 4
                ts = [t["nanoseconds"] for t in r.get("timings", []) if t["name"] == "evaluate"]
                if not valid or not args.quiet:
                    med = sorted(ts)[len(ts) // 2] / 1e9 if ts else float("nan")
                    print(f"{args.eval:8} {fn:10} {desc:28} "
                          f"{'valid' if valid else 'INVALID'} median {med:.6g} s "
                          f"({len(ts)} runs)", flush=True)
                    if not valid:
                        print(msg.get("error", ""), file=sys.stderr)
                report(summary, args.eval, {"function": fn, "description": desc}, r, valid)
            tool_input = json.dumps(resp) + "\n"
            ev.stdin.write(tool_input)
            ev.stdin.flush()
    except TimeoutError:
        print("run.py: timeout waiting for the tool", file=sys.stderr)
        outcome = 5
    except BrokenPipeError:
        outcome = outcome or 1
    finally:
        for p in (tool, ev):
            try:
                p.stdin.close()
            except BrokenPipeError:
                pass
        for p in (tool, ev):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if log:
            log.close()
        if summary:
            summary.close()
    if ev.returncode not in (0, None) and outcome == 0:
        outcome = 1
    print(f"run.py: {args.eval}: {counts['valid']} valid, {counts['invalid']} invalid, "
          f"{counts['failed']} failed", file=sys.stderr)
    return outcome


def report(summary, eval_name, msg, resp, valid):
    if not summary:
        return
    ts = [t["nanoseconds"] for t in resp.get("timings", []) if t["name"] == "evaluate"]
    summary.write(json.dumps({
        "eval": eval_name,
        "function": msg.get("function"),
        "description": msg.get("description", ""),
        "success": bool(resp.get("success")),
        "valid": valid,
        "evaluate_ns": ts,
    }) + "\n")


if __name__ == "__main__":
    sys.exit(main())
