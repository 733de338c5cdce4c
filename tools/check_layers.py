#!/usr/bin/env python3
"""Check the library's layering: the include graph of src/ and the file-level call graph
of its object files.

Layers, lowest first (docs/design.md): core < rules < rulesets < testing < ad. A file may
use (include a header of, or call a symbol defined in) its own layer and the layers below
it, never one above, with the exceptions listed in UPWARD_OK (each with its reason). Besides:
- src/ad includes no header of src/rulesets: those are the families' private headers; what
  the engine shares with them lives in a lower layer (src/rules/array_rule_impl.h).
- The files of src/ad form no cycle: with "A calls B" meaning that A's object file uses a
  global symbol that B's defines, the call graph restricted to src/ad is acyclic, so the
  engine reads bottom-up (docs/internals.md lists its order).

The call graph comes from `nm` on the object files of the library (the CMake object library
cr_objects): each defined global symbol names its file, each undefined one a use.

Usage: check_layers.py --root DIR [--objects DIR] [--nm NM] [--print-graph]
       check_layers.py --self-test   (the checks on a made-up tree: each must fail)
  --objects: the object directory of the library (e.g. build/CMakeFiles/cr_objects.dir);
             without it only the include graph is checked.
Exit status 1 on any violation, each printed on its own line.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

LAYERS = ["core", "rules", "rulesets", "testing", "ad"]

# Upward uses that are the design, not a violation: (from file, to file): reason.
UPWARD_OK = {
    ("src/rules/registry.c", "src/rulesets/builtin.c"):
        "the built-in registry indexes the families through their one list, on first use",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(rel):
    parts = rel.split("/")
    if len(parts) >= 3 and parts[0] == "src" and parts[1] in LAYERS:
        return parts[1]
    return None


def rank(layer):
    return LAYERS.index(layer)


def src_files(root):
    out = []
    for layer in LAYERS:
        for ext in ("c", "h"):
            out += glob.glob(os.path.join(root, "src", layer, "**", "*." + ext), recursive=True)
    return sorted(os.path.relpath(p, root) for p in out)


def check_includes(root, problems):
    for rel in src_files(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            target = os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1)))
            if not os.path.exists(os.path.join(root, target)):
                continue  # a generated or public header found on the include path
            a, b = layer_of(rel), layer_of(target)
            if a is None or b is None:
                continue
            if rank(b) > rank(a) and (rel, target) not in UPWARD_OK:
                problems.append("include: %s (%s) includes %s of the higher layer %s"
                                % (rel, a, target, b))
            if a == "ad" and b == "rulesets":
                problems.append("include: %s includes %s, a private header of src/rulesets"
                                % (rel, target))


def object_symbols(objdir, nm, root=None):
    """{source file: (defined globals, undefined symbols)} for the objects under objdir."""
    out = {}
    for obj in sorted(glob.glob(os.path.join(objdir, "**", "*.o"), recursive=True)):
        rel = os.path.relpath(obj, objdir)
        i = rel.find("src/")
        if i < 0 or not rel.endswith(".c.o"):
            continue
        src = rel[i:-2]
        if root is not None and not os.path.exists(os.path.join(root, src)):
            continue  # the object of a source file since removed
        res = subprocess.run([nm, "-P", obj], capture_output=True, text=True, check=True)
        defined, undefined = set(), set()
        for line in res.stdout.splitlines():
            f = line.split()
            if len(f) < 2:
                continue
            name, kind = f[0], f[1]
            if kind == "U":
                undefined.add(name)
            elif kind in "TDBRVWGSC":
                defined.add(name)
        out[src] = (defined, undefined)
    return out


def call_graph(syms):
    owner = {}
    for src, (defined, _) in syms.items():
        for s in defined:
            owner[s] = src
    edges = {}
    for src, (_, undefined) in syms.items():
        for s in undefined:
            dst = owner.get(s)
            if dst is not None and dst != src:
                edges.setdefault(src, {}).setdefault(dst, set()).add(s)
    return edges


def sccs(nodes, succ):
    """Strongly connected components (Tarjan, iterative)."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps


def check_calls(root, objdir, nm, problems, print_graph):
    syms = object_symbols(objdir, nm, root)
    if not syms:
        problems.append("objects: no object file of src/ under %s" % objdir)
        return
    edges = call_graph(syms)
    for a, dsts in sorted(edges.items()):
        for b, names in sorted(dsts.items()):
            la, lb = layer_of(a), layer_of(b)
            if la and lb and rank(lb) > rank(la) and (a, b) not in UPWARD_OK:
                problems.append("call: %s (%s) uses %s of the higher layer %s: %s"
                                % (a, la, b, lb, ", ".join(sorted(names)[:4])))
    ad = sorted(s for s in syms if layer_of(s) == "ad")
    succ = {a: [b for b in edges.get(a, {}) if layer_of(b) == "ad"] for a in ad}
    for comp in sccs(ad, succ):
        if len(comp) > 1:
            detail = []
            for a in comp:
                for b in sorted(succ[a]):
                    if b in comp:
                        names = sorted(edges[a][b])
                        detail.append("%s -> %s (%s)" % (os.path.basename(a), os.path.basename(b),
                                                         ", ".join(names[:3])))
            problems.append("cycle in src/ad: %s; edges: %s" % (" ".join(comp), "; ".join(detail)))
    if print_graph:
        for a in ad:
            print("%s -> %s" % (a, " ".join(sorted(os.path.basename(b) for b in succ[a]))))


def self_test():
    """The include check and the cycle search on made-up inputs; returns the failures."""
    import tempfile
    fails = []
    with tempfile.TemporaryDirectory() as root:
        files = {
            "src/core/a.c": '#include "../ad/x_impl.h"\n',  # upward include
            "src/ad/x_impl.h": "",
            "src/ad/y.c": '#include "../rulesets/array_impl.h"\n',  # private header
            "src/rulesets/array_impl.h": "",
            "src/rules/ok.c": '#include "../core/a.h"\n',  # downward: fine
            "src/core/a.h": "",
        }
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        problems = []
        check_includes(root, problems)
        if not any("src/core/a.c" in p and "higher layer" in p for p in problems):
            fails.append("an include of a higher layer was not reported")
        if not any("src/ad/y.c" in p and "private header" in p for p in problems):
            fails.append("src/ad including a src/rulesets header was not reported")
        if any("src/rules/ok.c" in p for p in problems):
            fails.append("a downward include was reported")
    succ = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
    comps = [c for c in sccs(["a", "b", "c", "d"], succ) if len(c) > 1]
    if comps != [["a", "b", "c"]]:
        fails.append("cycle a -> b -> c -> a found as %r" % comps)
    if [c for c in sccs(["a", "b"], {"a": ["b"]}) if len(c) > 1]:
        fails.append("a cycle reported in an acyclic graph")
    edges = call_graph({"src/ad/p.c": ({"f"}, {"g"}), "src/ad/q.c": ({"g"}, {"f"})})
    if edges != {"src/ad/p.c": {"src/ad/q.c": {"g"}}, "src/ad/q.c": {"src/ad/p.c": {"f"}}}:
        fails.append("call graph from symbols wrong: %r" % edges)
    return fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--objects")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--print-graph", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        fails = self_test()
        for f in fails:
            print("self-test: " + f)
        print("check_layers self-test: %s" % ("FAILED" if fails else "passed"))
        return 1 if fails else 0
    problems = []
    check_includes(args.root, problems)
    if args.objects:
        check_calls(args.root, args.objects, args.nm, problems, args.print_graph)
    for p in problems:
        print(p)
    if problems:
        print("check_layers: %d problem(s)" % len(problems))
        return 1
    print("check_layers: layers and src/ad's call graph in order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
