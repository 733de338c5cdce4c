#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/ (docs/fuzzing.md) from a CR_FUZZ build.

    python3 fuzz/gen_seeds.py build-fuzz

fuzz_eval_json: one request per signature of the built-in registry (arguments of the
matchers' kinds, a matrix and a vector for array matchers), with tangents of the
arguments' shapes and, from a first run of the request through the harness
(FUZZ_EVAL_PRINT), a cotangent of the primal's shape; plus tools/tests/eval_requests.jsonl.
fuzz_rules: for each signature an input that selects it (its index in the first two
bytes) followed by fixed pseudo-random bytes. fuzz_tape: for several tape kinds, a
prologue that makes scalar and array inputs and records a few operations, then each
operation code of fuzz_tape.c (the engine's with a small sub-program), then a gradient.
"""
import json
import os
import random
import subprocess
import sys

F64, F32, C128, INT, BOOL = 0x1, 0x2, 0x4, 0x8, 0x10
A_F64, A_F32, A_C128, A_INT, A_BOOL = 0x20, 0x40, 0x80, 0x100, 0x200
STRUCT, FUNC, NOTHING = 0x400, 0x800, 0x1000

MATRIX = [[1.5, -0.5], [0.25, 2.0]]
VECTOR = [0.5, 1.5, -2.0]
CMATRIX = [[{"re": 1, "im": 0.5}, {"re": 0, "im": 1}], [{"re": -1, "im": 0}, {"re": 2, "im": -1}]]


def arg_forms(mask, shape):
    """(json, dtype, tangent) of an argument for a matcher, or None."""
    if mask & A_F64:
        return (MATRIX if shape == "m" else VECTOR), None, (MATRIX if shape == "m" else VECTOR)
    if mask & F64:
        return 0.7, None, 1.0
    if mask & C128:
        return {"re": 0.5, "im": -0.25}, None, {"re": 1, "im": 0}
    if mask & INT:
        return {"int": 1}, None, None
    if mask & A_F32:
        return (MATRIX if shape == "m" else VECTOR), "f32", (MATRIX if shape == "m" else VECTOR)
    if mask & F32:
        return 0.7, "f32", 1.0
    if mask & A_C128:
        return CMATRIX, None, CMATRIX
    if mask & A_INT:
        return {"int": [1, 0]}, None, None
    if mask & BOOL:
        return True, None, None
    if mask & A_BOOL:
        return [True, False], None, None
    if mask & FUNC:
        return {"fn": "sin"}, None, None
    return None


def cotangent(primal, typ):
    if isinstance(typ, list):
        return [cotangent(p, t) for p, t in zip(primal, typ)]
    if typ.startswith(("i64", "bool", "function")):
        return None
    return primal


TAPE_OPS = ["input", "inputs", "const", "bin", "un", "call", "cmp", "rec", "ainput", "acall",
            "abcast", "areduce", "aslice", "amatmul", "grad", "vjp", "jac", "jvp", "hvp", "hess",
            "agrad", "avjp", "ajvp", "ahvp", "stats", "reset", "clear", "forge", "vg", "record",
            "prep", "prep_arr"]


def tape_seeds(src):
    out = os.path.join(src, "corpus", "fuzz_tape")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(5)
    # first byte: tape kind (first order, forward, second order, both; small blocks; the
    # current tape; a 2 KiB fixed buffer)
    for kind in (0, 1, 2, 3, 8, 16, 4 | 32):
        for o, name in enumerate(TAPE_OPS):
            if kind not in (0, 2) and o % 3:
                continue
            # two inputs, three inputs, an f64 array input, a product, a sine
            pro = [0, 20, 0, 90, 1, 3, 10, 30, 100, 8, 0, 0, 3, 0, 3, 2, 0, 1, 4, 1, 2]
            body = [o] + [rng.randrange(256) for _ in range(24)]
            if name in ("vg", "record", "prep", "prep_arr"):
                sub = [0, 40, 3, 2, 0, 1, 4, 1, 0, 5, 0, 3, 0]
                body = [o, len(sub)] + sub + [rng.randrange(160) for _ in range(24)]
            tail = [TAPE_OPS.index("grad"), 2, 0, 1, 0]
            with open(os.path.join(out, "seq-%02x-%s" % (kind, name)), "wb") as f:
                f.write(bytes([kind] + pro + body + tail))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build-fuzz"
    src = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, FUZZ_RULES_LIST="1")
    sigs = subprocess.run([os.path.join(build, "fuzz", "fuzz_rules"), "-runs=0"], env=env,
                          capture_output=True, text=True, check=True).stdout.split("\n")
    sigs = [s.split() for s in sigs if s.strip()]

    tape_seeds(src)

    # fuzz_rules: the signature's index, as fuzz_below() reads it for this registry size.
    n = len(sigs)
    out = os.path.join(src, "corpus", "fuzz_rules")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(38)
    for s in sigs:
        i = int(s[0])
        head = bytes([i >> 8, i & 255]) if n > 256 else bytes([i])
        body = bytes([0]) + bytes(rng.randrange(256) for _ in range(40))
        with open(os.path.join(out, "sig-%03d-%s" % (i, "".join(c if c.isalnum() else "_" for c in s[1]))), "wb") as f:
            f.write(head + body)

    # fuzz_eval_json: requests, then their cotangents from a first run.
    requests = []
    seen = set()
    for s in sigs:
        name, masks = s[1], [int(m, 16) for m in s[3:]]
        for shape in ("m", "v"):
            forms = [arg_forms(m, shape) for m in masks]
            if any(f is None for f in forms):
                break
            req = {"fn": name, "args": [f[0] for f in forms]}
            if any(f[1] for f in forms):
                req["dtypes"] = [f[1] for f in forms]
            if any(f[2] is not None for f in forms):
                req["tangents"] = [f[2] for f in forms]
            key = json.dumps(req, sort_keys=True)
            if key not in seen:
                seen.add(key)
                requests.append(req)
            if not any(m & (A_F64 | A_F32) for m in masks):
                break
    tmp = os.path.join(build, "fuzz", "seed-requests")
    os.makedirs(tmp, exist_ok=True)
    paths = []
    for k, req in enumerate(requests):
        p = os.path.join(tmp, "%04d" % k)
        with open(p, "w") as f:
            f.write(json.dumps(req) + "\n")
        paths.append(p)
    env = dict(os.environ, FUZZ_EVAL_PRINT="1")
    res = subprocess.run([os.path.join(build, "fuzz", "fuzz_eval_json")] + paths, env=env,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    res = [json.loads(r) for r in res if r.strip()]
    out = os.path.join(src, "corpus", "fuzz_eval_json")
    os.makedirs(out, exist_ok=True)
    for k, (req, r) in enumerate(zip(requests, res)):
        if "primal" in r:
            req["cotangent"] = cotangent(r["primal"], r["type"])
        with open(os.path.join(out, "req-%03d-%s" % (k, "".join(c if c.isalnum() else "_" for c in req["fn"]))), "w") as f:
            f.write(json.dumps(req, separators=(",", ":")) + "\n")
    with open(os.path.join(src, "..", "tools", "tests", "eval_requests.jsonl")) as f:
        for k, line in enumerate(f):
            with open(os.path.join(out, "tool-%02d" % k), "w") as g:
                g.write(line)
    print("fuzz_rules: %d seeds; fuzz_eval_json: %d seeds" % (n, len(requests)))


if __name__ == "__main__":
    main()
