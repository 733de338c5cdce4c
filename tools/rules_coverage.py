#!/usr/bin/env python3
"""Writes docs/rules-coverage.md: the rules of ChainRules.jl, SpecialFunctions.jl's
ChainRulesCore extension and Mooncake.jl, family by family, against this project's registry.

    python3 tools/rules_coverage.py --chainrules DIR --specialfunctions DIR --mooncake DIR \\
        --registry LIST --versions TEXT > docs/rules-coverage.md

DIR are source trees of the three packages (their src/rulesets, ext and src/rules folders are
read); LIST is the output of `chainrules-check --list` (one signature a line); TEXT names the
versions read. Rule names are read from the rule definitions (rrule/frule with
`::typeof(f)`, `@scalar_rule f(...)`, Mooncake's `typeof(f)` in its rule signatures), so
rules defined in loops over names are counted by the loop's variable (`$func`).
tests/rules/test_rules_coverage.c checks that every name the table says is registered here is,
and that no name it lists as missing is registered (then the table is out of date).
"""
import argparse
import os
import re
import sys

# Julia names that are rules here under another name.
ALIASES = {
    "\\": "solve", "/": "/", "*": "*", "+": "+", "-": "-", "^": "pow",
    "Base.literal_pow": "pow", "inv": "inv", "LinearAlgebra.inv!": "inv!",
    "exp": "exp", "LinearAlgebra.exp!": "exp!", "eigen!": "eigen", "eigvals!": "eigvals",
    "lu!": "lu", "mul!": "matmul", "BLAS.dot": "dot", "BLAS.asum": "asum", "BLAS.nrm2": "nrm2",
    "BLAS.gemm!": "gemm", "BLAS.gemv!": "gemv", "LAPACK.trsyl!": "trsyl", "Base.vect": "vect",
    "$findm": "findmax", "broadcasted": "broadcast",
    "Broadcast.instantiate": "broadcast", "copy∘broadcasted": "broadcast",
    "Base.unsafe_getindex": "getindex", "collect∘eachcol": "eachcol",
    "collect∘eachrow": "eachrow", "collect∘eachslice": "eachslice",
    "LinearAlgebra.norm1": "norm", "LinearAlgebra.norm2": "norm",
    "LinearAlgebra.normInf": "norm", "LinearAlgebra.normMinusInf": "norm",
    "LinearAlgebra.normp": "norm", "Statistics.std": "std", "Statistics.var": "var",
    "$func": "matfun_herm", "getrf!": "getrf", "getri!": "getri", "getrs!": "getrs",
    "potrf!": "potrf", "potrs!": "potrs", "trtrs!": "trtrs", "LAPACK.getrf!": "getrf",
    "muladd": "muladd", "fma": "fma", "copy": "broadcast", "abs": "fabs", "angle": "carg",
    "real": "creal", "imag": "cimag", "gamma": "tgamma", "loggamma": "lgamma",
    "besselj0": "j0", "besselj1": "j1", "bessely0": "y0", "bessely1": "y1",
    "BLAS.scal!": "scal", "BLAS.trmv!": "trmv", "BLAS.trsv!": "trsv", "BLAS.trmm!": "trmm",
    "BLAS.trsm!": "trsm", "LAPACK.lacpy!": "lacpy",
}

# Names whose rule here depends on the family (the sparse determinants are their own
# functions).
FAMILY_ALIASES = {
    "ChainRules.jl SparseArrays/sparsematrix": {
        "det": "sparse_det", "logdet": "sparse_logdet", "logabsdet": "sparse_logabsdet"},
}

# Julia names with no C meaning here, and why.
NO_C = {
    "Base.CoreLogging.with_logger": "logging", "task_local_storage": "Julia tasks",
    "merge": "NamedTuple", "getproperty": "fields of factorisation objects (tuples here)",
    "Core.compilerbarrier": "the Julia compiler", "typeassert": "Julia types",
    "AbstractFloat": "a type conversion", "Float32": "a type conversion (f32 arrays and values)",
    "Float64": "a type conversion", "float": "a type conversion", "complex": "a type conversion",
    "one": "a constant", "zero": "a constant", "_unsum": "an internal of ChainRules' sum",
    "∇eachslice": "an internal of ChainRules' eachslice", "∇getindex": "an internal of ChainRules' getindex",
    "mat_mat_scalar": "an internal of ChainRules' 5-argument mul", "mat_vec_scalar": "an internal of ChainRules' 5-argument mul",
    "identity": "identity",
    "ifelse": "the C conditional operator, which chainrules-ad and the tape's select differentiate",
}

FAMILY_NOTES = {
    "Mooncake": "Mooncake's rules are mostly about Julia itself (memory, builtins, foreign calls, "
                "tasks, compiler patches); only its BLAS, LAPACK and a few maths rules have a C "
                "meaning, and those are listed.",
}

# Mooncake names kept (the ones with a C meaning); the others are Julia-language rules.
MOONCAKE_C = {"BLAS.gemm!", "BLAS.gemv!", "BLAS.nrm2", "BLAS.scal!", "BLAS.trmm!", "BLAS.trmv!",
              "BLAS.trsm!", "BLAS.trsv!", "LAPACK.getrf!", "LAPACK.lacpy!", "det", "getrf!",
              "getri!", "getrs!", "logabsdet", "logdet", "potrf!", "potrs!", "trtrs!", "kron",
              "sincosd", "sincospi", "tanpi", "modf", "hypot", "abs2", "sum", "log"}

PAT_TYPEOF = re.compile(r'(?:rrule|frule)\s*\((?:[^()]|\([^()]*\))*?::typeof\(\s*([^)\s]+)\s*\)', re.S)
PAT_SCALAR = re.compile(r'@scalar_rule\s*\(?\s*([A-Za-z_][A-Za-z0-9_!.]*|[-+*/^\\])\s*\(')
PAT_ANY_TYPEOF = re.compile(r'typeof\(\s*([A-Za-z_$][A-Za-z0-9_!.]*)\s*\)')


def read_tree(root, sub, pattern_sets):
    fams = {}
    base = os.path.join(root, sub)
    for d, _, files in os.walk(base):
        for f in sorted(files):
            if not f.endswith(".jl"):
                continue
            path = os.path.join(d, f)
            text = open(path, encoding="utf-8").read()
            names = set()
            for pat in pattern_sets:
                names.update(m.group(1) for m in pat.finditer(text))
            fam = os.path.relpath(path, base)[:-3]
            fams[fam] = sorted(names)
    return fams


def registry_names(path):
    names = set()
    for line in open(path, encoding="utf-8"):
        m = re.match(r'\s*([^\s(]+)\(', line)
        if m:
            names.add(m.group(1))
    return names


def classify(name, ours, family=""):
    short = name.split(".")[-1] if name[0].isalpha() else name
    fam = FAMILY_ALIASES.get(family, {})
    if name in fam and fam[name] in ours:
        return ("here", fam[name])
    if name in NO_C:
        return ("no", NO_C[name])
    if name in ALIASES and ALIASES[name] in ours:
        return ("here", ALIASES[name])
    if short in ours:
        return ("here", short)
    if short in ALIASES and ALIASES[short] in ours:
        return ("here", ALIASES[short])
    return ("missing", "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chainrules", required=True)
    ap.add_argument("--specialfunctions", required=True)
    ap.add_argument("--mooncake", required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--versions", required=True)
    a = ap.parse_args()
    ours = registry_names(a.registry)
    families = []
    cr = read_tree(a.chainrules, "src/rulesets", [PAT_TYPEOF, PAT_SCALAR])
    for fam, names in sorted(cr.items()):
        if names:
            families.append(("ChainRules.jl " + fam, names))
    sf_text = open(os.path.join(a.specialfunctions, "ext", "SpecialFunctionsChainRulesCoreExt.jl"),
                   encoding="utf-8").read()
    sf = set(re.findall(r'@scalar_rule\(\s*([A-Za-z_0-9]+)\(', sf_text))
    sf |= set(re.findall(r'typeof\(([A-Za-z_0-9]+)\)', sf_text))
    families.append(("SpecialFunctions.jl", sorted(sf)))
    mc = read_tree(a.mooncake, "src/rules", [PAT_ANY_TYPEOF])
    mc_c = sorted({n for names in mc.values() for n in names if n in MOONCAKE_C})
    families.append(("Mooncake.jl (rules with a C meaning)", mc_c))

    out = sys.stdout
    out.write("# Rule coverage against ChainRules.jl, SpecialFunctions.jl and Mooncake.jl\n\n")
    out.write("Generated by `tools/rules_coverage.py` (its docstring gives the command) from %s, "
              "against the built-in registry (`chainrules-check --list`). A rule name is counted "
              "*here* when the registry has a function of that name (or of the name in the "
              "mapping below: `\\` is `solve`, `exp` of a matrix `expm`, ...), *no C meaning* when "
              "it is about Julia itself (types, logging, compiler, NamedTuples), and *missing* "
              "otherwise. `tests/rules/test_rules_coverage.c` checks every name of the mapping "
              "against the registry, so the table cannot claim a rule the library lacks, and "
              "every name listed as missing, so it cannot hide one it has.\n\n" % a.versions)
    out.write("| family | rules | here | missing | no C meaning |\n|---|---:|---:|---:|---:|\n")
    rows = []
    total = [0, 0, 0, 0]
    for fam, names in families:
        cls = [classify(n, ours, fam) for n in names]
        h = sum(1 for c in cls if c[0] == "here")
        mi = sum(1 for c in cls if c[0] == "missing")
        no = sum(1 for c in cls if c[0] == "no")
        rows.append((fam, names, cls))
        total = [total[0] + len(names), total[1] + h, total[2] + mi, total[3] + no]
        out.write("| %s | %d | %d | %d | %d |\n" % (fam, len(names), h, mi, no))
    out.write("| **all** | %d | %d | %d | %d |\n\n" % tuple(total))
    out.write("%s\n\nThe library also has families none of these packages has as rules (the "
              "LAPACK-level trsyl and Sylvester/Lyapunov solvers with second-order forms, qr, "
              "opnorm, ...): docs/rules-index.md lists every registered signature.\n\n"
              % FAMILY_NOTES["Mooncake"])
    out.write("Names are counted, not methods: a name is *here* when the registry has a rule for "
              "it, which may not cover every method Julia has. The keyword forms are separate "
              "functions here (`sort(v; rev, by)` is `sort_ex`, `partialsort` with a range "
              "`partialsort_ex`, `unique(A; dims)` `unique_ex`, `repeat(A; inner, outer)` "
              "`repeat_ex`), Mooncake's in-place BLAS routines are functional (`BLAS.scal!` is "
              "`scal`), the pairs of `diagm(k1 => v1, ...)` and `diagm(m, n, k1 => v1, ...)` are "
              "arguments (`diagm(k1, v1, ...)`, `diagm(m, n, k1, v1, ...)`), `norm(x, p)` takes "
              "every p Julia's does (p = 0, p < 0 and -Inf included), `setfield!` and `getfield` "
              "act on struct values described by a `cr_type` (their tangent a MutableTangent, "
              "docs/tangents.md), and the sparse determinants are `sparse_det`, `sparse_logdet` and "
              "`sparse_logabsdet` (docs/rules-arrays.md, docs/rules-linalg.md, "
              "docs/rules-sparse.md).\n\n")
    out.write("## Missing, family by family\n\n")
    for fam, names, cls in rows:
        miss = [n for n, c in zip(names, cls) if c[0] == "missing"]
        no = ["%s (%s)" % (n, c[1]) for n, c in zip(names, cls) if c[0] == "no"]
        if not miss and not no:
            continue
        out.write("- **%s**:" % fam)
        if miss:
            out.write(" missing %s." % ", ".join("`%s`" % n for n in miss))
        if no:
            out.write(" No C meaning: %s." % ", ".join(no))
        out.write("\n")
    out.write("\n## Mapping\n\nEach Julia name counted *here*, with the registry's name "
              "(checked by `tests/rules/test_rules_coverage.c`).\n\n| Julia | here |\n|---|---|\n")
    seen = set()
    for fam, names, cls in rows:
        for n, c in zip(names, cls):
            if c[0] == "here" and (n, c[1]) not in seen:
                seen.add((n, c[1]))
                out.write("| `%s` | `%s` |\n" % (n.replace("|", "\\|"), c[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
