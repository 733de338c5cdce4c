#!/usr/bin/env python3
"""Find raw products of integer sizes, extents, counts, strides and indices in C sources.

Every product of two integer operands in the .c files of src/ and tools/ (a binary `*`, or `*=`, whose
operands are both of integer type, at least one of them not a constant) must either go through the
checked helpers of src/core/checked.h (which are calls, not `*`, so they are not found) or
be listed in the allow-list with the reason it cannot overflow. The usual reason is the
size invariant (docs/reliability.md, "Sizes"): the product of an existing array's own
extents, or an index below them, fits in ptrdiff_t because the array's element count was
checked when its shape entered the library.

Types are inferred without a compiler, per function: an operand is integer when it is an
integer literal, `sizeof`, a cast to an integer type, a name declared with an integer type
in the function (parameters included) or at file scope, a member declared with an integer
type in a struct of the sources, or a parenthesised expression of such operands. Floating
literals and names declared floating exclude a product.

Allow-list lines: `path | function | product | reason` (product normalised: single spaces);
a product occurring several times in one function is listed once per occurrence. A line
whose function is `*` covers every occurrence of that product, written exactly so, in every
function of the file: for a file that keeps one naming convention throughout (an index
named i, a, b below the order n of a matrix the file has validated, ...), so that the reason
is given once; it is stale when the file has no such product left.
Exit status 1 when a product is not listed or a listed product no longer exists.

Usage: check_products.py [--root DIR] [--allow FILE] [--print-all]
"""
import argparse
import collections
import glob
import os
import re
import sys

INT_TYPES = {
    "size_t", "ptrdiff_t", "int64_t", "uint64_t", "int32_t", "uint32_t", "int16_t",
    "uint16_t", "int8_t", "uint8_t", "intptr_t", "uintptr_t", "int", "long", "short",
    "unsigned", "signed", "char", "lapack_int", "ssize_t", "cr_index", "bool",
}
FLOAT_TYPES = {"double", "float", "cr_complex", "cr_dual", "long double", "_Complex"}
QUALS = {"const", "static", "volatile", "restrict", "register", "inline", "extern"}
KEYWORDS = {
    "return", "sizeof", "case", "if", "while", "for", "switch", "do", "else", "goto",
    "struct", "union", "enum", "typedef", "_Alignof", "alignof", "default", "break",
    "continue",
} | QUALS | INT_TYPES | FLOAT_TYPES | {"void"}

TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[uUlLfF]*)
    | (?P<id>[A-Za-z_]\w*)
    | (?P<op>->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!~<>=]=?|[()\[\]{},;?:.#\\])
    )""",
    re.X,
)


def strip(text):
    """Comments, strings and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append('0' + " " * (j - i - 1) if c == "'" else '""' + " " * (j - i - 2))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def tokens(text):
    toks, line, pos = [], 1, 0
    for m in TOKEN.finditer(text):
        line += text.count("\n", pos, m.start(m.lastgroup))
        pos = m.start(m.lastgroup)
        kind = m.lastgroup
        toks.append((kind, m.group(kind), line))
    return toks


def typedef_names(paths):
    names = set()
    for p in paths:
        t = strip(open(p, encoding="utf-8", errors="replace").read())
        names |= set(re.findall(r"typedef\s+(?:struct|union|enum)?\s*\w*\s*\{[^}]*\}\s*(\w+)", t))
        names |= set(re.findall(r"typedef\s+[^;{]*?\b(\w+)\s*;", t))
        names |= set(re.findall(r"\}\s*(\w+)\s*;", t))
        names |= set(re.findall(r"\b(?:struct|union|enum)\s+(\w+)", t))
    return names


DECL = re.compile(
    r"\b((?:unsigned\s+|signed\s+|long\s+|short\s+)*(?:%s))\s+((?:\**\s*(?:const\s+)?\w+\s*(?:\[[^\]]*\])*\s*(?:=[^,;(){}]*)?,\s*)*\**\s*(?:const\s+)?\w+)"
)


def declared(text, types):
    """Names declared with one of the types in text (pointers to them too: *p is then integer)."""
    pat = re.compile(DECL.pattern % "|".join(sorted(types, key=len, reverse=True)))
    names = set()
    for m in pat.finditer(text):
        for part in m.group(2).split(","):
            part = re.sub(r"=.*", "", part).strip()
            w = [x for x in re.findall(r"\w+", part) if x != "const"]
            if w:
                names.add(w[-1])
    single = re.compile(r"\b(?:%s)\s*[\s*]\s*(?:const\s+)?(\w+)" % "|".join(sorted(types, key=len, reverse=True)))
    names |= set(single.findall(text))
    return names - types - KEYWORDS


def match_back(toks, j, open_, close):
    depth = 0
    while j >= 0:
        if toks[j][1] == close:
            depth += 1
        elif toks[j][1] == open_:
            depth -= 1
            if depth == 0:
                return j
        j -= 1
    return 0


def match_fwd(toks, j, open_, close):
    depth = 0
    while j < len(toks):
        if toks[j][1] == open_:
            depth += 1
        elif toks[j][1] == close:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return len(toks) - 1


def left_operand(toks, i):
    j = i - 1
    while j >= 0:
        v = toks[j][1]
        if v == "]":
            j = match_back(toks, j, "[", "]") - 1
            continue
        if v == ")":
            k = match_back(toks, j, "(", ")")
            if k > 0 and toks[k - 1][0] == "id" and toks[k - 1][1] not in KEYWORDS - {"sizeof"}:
                j = k - 1
                continue
            j = k
            break
        if toks[j][0] in ("id", "num"):
            if j > 0 and toks[j - 1][1] in ("->", "."):
                j -= 2
                continue
            break
        break
    return j


def right_operand(toks, i):
    j = i + 1
    while j < len(toks) and toks[j][1] in ("-", "+", "*", "&", "!", "~", "sizeof"):
        j += 1
    if j < len(toks) and toks[j][1] == "(":
        k = match_fwd(toks, j, "(", ")")
        if toks[i + 1][1] == "sizeof" or k + 1 >= len(toks) or toks[k + 1][0] not in ("id", "num", "op") or toks[k + 1][1] in ("(",):
            j = k
        elif toks[k + 1][0] in ("id", "num") or toks[k + 1][1] == "(":
            j = k + 1  # a cast
        else:
            j = k
    while j + 1 < len(toks):
        nv = toks[j + 1][1]
        if nv == "[":
            j = match_fwd(toks, j + 1, "[", "]")
        elif nv == "(" and toks[j][0] == "id":
            j = match_fwd(toks, j + 1, "(", ")")
        elif nv in ("->", ".") and j + 2 < len(toks):
            j += 2
        else:
            break
    return j


class Scope:
    def __init__(self, ints, floats, members):
        self.ints, self.floats, self.members = ints, floats, members

    def kind(self, toks):
        """'int', 'float', 'const' (an integer constant) or None (unknown) for an operand."""
        vals = [t[1] for t in toks]
        if not vals:
            return None
        if vals[0] == "sizeof" or vals[0] in ("_Alignof", "alignof"):
            return "int"
        if any(t[0] == "num" and re.search(r"[.eEpP]|[fF]$", t[1]) and not t[1].lower().startswith("0x") for t in toks):
            return "float"
        if vals[0] == "(":
            k = 1
            types = []
            while k < len(vals) and vals[k] not in (")",):
                types.append(vals[k])
                k += 1
            if types and all(v in INT_TYPES or v in QUALS or v == "*" for v in types) and k + 1 < len(vals):
                return "int" if "*" not in types else None
            if types and any(v in FLOAT_TYPES for v in types):
                return "float"
        ids = [t for t in toks if t[0] == "id" and t[1] not in KEYWORDS]
        if not ids:
            return "const" if all(t[0] == "num" or t[0] == "op" for t in toks) else None
        if any(t[1] in self.floats for t in ids):
            return "float"
        if vals[0] == "(":
            return "int" if any(self.int_name(toks, k) for k in range(len(toks))) else None
        # the operand's value: the last member of a chain, or the base name of a call/index
        last = None
        k = 0
        while k < len(toks):
            if toks[k][0] == "id":
                if k + 1 < len(toks) and toks[k + 1][1] == "(":
                    return None  # a call: unknown type
                last = k
            if toks[k][1] == "[":
                k = match_fwd(toks, k, "[", "]")
            k += 1
        if last is None:
            return None
        return "int" if self.int_name(toks, last) else None

    def int_name(self, toks, k):
        if toks[k][0] != "id":
            return False
        member = k > 0 and toks[k - 1][1] in ("->", ".")
        return toks[k][1] in (self.members if member else self.ints)


def functions(toks):
    """(name, start, end) of each top-level brace block, name '' for non-functions."""
    out, depth, start = [], 0, 0
    for i, t in enumerate(toks):
        if t[1] == "{":
            if depth == 0:
                name, k = "", i - 1
                if k >= 0 and toks[k][1] == ")":
                    k = match_back(toks, k, "(", ")") - 1
                    if k >= 0 and toks[k][0] == "id":
                        name = toks[k][1]
                        while k > 0 and toks[k - 1][1] not in (";", "}", ")") and toks[k - 1][0] != "op" or (k > 0 and toks[k - 1][1] == "*"):
                            k -= 1
                out.append([name, k if name else i, None])
            depth += 1
        elif t[1] == "}":
            depth -= 1
            if depth == 0 and out:
                out[-1][2] = i
    return [(n, s, e) for n, s, e in out if e is not None]


def join(toks):
    """An operand's text: a space only between two words and around ?, :, + and -."""
    out = ""
    for k, t in enumerate(toks):
        if t[1] in ("?", ":", "+", "-", "==", "!=") and k > 0:
            out += " " + t[1] + " "
        elif k > 0 and t[0] != "op" and toks[k - 1][0] != "op":
            out += " " + t[1]
        else:
            out += t[1]
    return out


def scan(path, rel, members, typedefs):
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    toks = tokens(text)
    int_like = INT_TYPES | {t for t in typedefs if re.search(r"(_t|index|int)$", t) and t not in ("cr_dual_t",)}
    funcs = functions(toks)
    # file scope: everything outside function bodies
    def text_of(a, b):
        return " ".join(t[1] for t in toks[a:b + 1])
    outside = []
    prev = 0
    for _, s, e in funcs:
        outside.append(text_of(prev, s - 1))
        prev = e + 1
    outside.append(text_of(prev, len(toks) - 1))
    file_ints = declared(" ".join(outside), int_like)
    file_floats = declared(" ".join(outside), FLOAT_TYPES)
    owner = [""] * len(toks)
    scopes = [None] * len(toks)
    default = Scope(file_ints - file_floats, file_floats - file_ints, members)
    for name, s, e in funcs:
        body = text_of(s, e)
        ints = declared(body, int_like)
        floats = declared(body, FLOAT_TYPES)
        sc = Scope((file_ints | ints) - floats, (file_floats | floats) - ints, members)
        for k in range(s, e + 1):
            owner[k], scopes[k] = name, sc
    found = []
    for i, t in enumerate(toks):
        if t[1] == "*=" and i > 0:
            a, b = left_operand(toks, i), right_operand(toks, i)
            sc = scopes[i] or default
            ka, kb = sc.kind(toks[a:i]), sc.kind(toks[i + 1:b + 1])
            hexc = any(x[0] == "num" and x[1].lower().startswith("0x") for x in toks[i + 1:b + 1])
            if ka == "int" and kb in ("int", "const") and not hexc:
                found.append((rel, owner[i] or "<file>", join(toks[a:i]) + " *= " + join(toks[i + 1:b + 1]), t[2]))
            continue
        if t[1] != "*" or i == 0:
            continue
        p = toks[i - 1]
        if not (p[0] == "num" or p[1] in (")", "]") or (p[0] == "id" and p[1] not in KEYWORDS and p[1] not in typedefs)):
            continue
        if p[1] == ")":  # a cast to a pointer type: (double *)x, or a function pointer
            k = match_back(toks, i - 1, "(", ")")
            if all(x[0] == "id" and (x[1] in KEYWORDS or x[1] in typedefs) or x[1] == "*" for x in toks[k + 1:i - 1]):
                continue
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if nxt in (")", ",", ";", "=", "const"):  # a declarator: T *, T *const
            continue
        a = left_operand(toks, i)
        b = right_operand(toks, i)
        sc = scopes[i] or default
        ka, kb = sc.kind(toks[a:i]), sc.kind(toks[i + 1:b + 1])
        if any(x[0] == "num" and x[1].lower().startswith("0x") for x in (toks[a:i] + toks[i + 1:b + 1])):
            continue  # hashing and random bits: unsigned arithmetic that wraps by design
        if "float" in (ka, kb) or None in (ka, kb) or (ka == "const" and kb == "const"):
            continue
        # a declaration such as `size_t *p = ...` seen through a typedef we do not know
        if p[0] == "id" and a == i - 1 and i >= 2 and toks[i - 2][1] in ("(", ",", ";", "{", "}") and nxt and toks[i + 1][0] == "id" and i + 2 < len(toks) and toks[i + 2][1] in ("=", ";", ",", ")", "["):
            if toks[i - 2][1] in (";", "{", "}"):
                continue
        prod = join(toks[a:i]) + " * " + join(toks[i + 1:b + 1])
        found.append((rel, owner[i] or "<file>", prod, t[2]))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--allow", default=os.path.join(here, "check_products.allow"))
    ap.add_argument("--print-all", action="store_true", help="print every product found")
    args = ap.parse_args()
    root = args.root
    base_sources = sorted(
        glob.glob(os.path.join(root, "src", "**", "*.c"), recursive=True)
        + glob.glob(os.path.join(root, "src", "**", "*.h"), recursive=True)
        + glob.glob(os.path.join(root, "tools", "*.c"))
    )
    headers = sorted(
        glob.glob(os.path.join(root, "include", "**", "*.h"), recursive=True)
        + glob.glob(os.path.join(root, "src", "**", "*.h"), recursive=True)
        + glob.glob(os.path.join(root, "tools", "*.h"))
    )
    # The library and tools/*.c are read with the types of the library; each program in a
    # folder of tools/ (chainrules-ad, gradbench, ...) with those and its own folder's, so
    # that a tool's struct members do not change what the library's names are.
    groups = [(base_sources, headers)]
    for d in sorted(glob.glob(os.path.join(root, "tools", "*", ""))):
        own = sorted(glob.glob(os.path.join(d, "**", "*.c"), recursive=True))
        if own:
            groups.append((own, headers + sorted(glob.glob(os.path.join(d, "**", "*.h"),
                                                         recursive=True))))
    found = []
    for sources, hdrs in groups:
        typedefs = typedef_names(hdrs + sources)
        int_like = INT_TYPES | {t for t in typedefs if re.search(r"(_t|index)$", t)}
        members, fmembers = set(), set()
        for h in hdrs + sources:
            t = strip(open(h, encoding="utf-8", errors="replace").read())
            for body in re.findall(r"\{([^{}]*)\}", t):
                members |= declared(body, int_like)
                fmembers |= declared(body, FLOAT_TYPES)
        members -= fmembers  # a member name of both kinds: unknown
        for p in sources:
            found += scan(p, os.path.relpath(p, root), members, typedefs)
    if args.print_all:
        for rel, fn, prod, line in found:
            print(f"{rel}:{line} | {fn} | {prod}")
        return 0
    allowed = collections.Counter()
    reasons = {}
    anyfn = {}  # (path, product) -> occurrences seen, for the lines whose function is `*`
    for ln, line in enumerate(open(args.allow, encoding="utf-8"), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [x.strip() for x in line.split(" | ")]
        if len(parts) != 4 or not parts[3]:
            print(f"{args.allow}:{ln}: expected 'path | function | product | reason'")
            return 1
        if parts[1] == "*":
            anyfn[(parts[0], parts[2])] = 0
            continue
        allowed[tuple(parts[:3])] += 1
        reasons[tuple(parts[:3])] = parts[3]
    seen = collections.Counter()
    bad = 0
    for rel, fn, prod, line in found:
        key = (rel, fn, prod)
        if (rel, prod) in anyfn:
            anyfn[(rel, prod)] += 1
            continue
        seen[key] += 1
        if seen[key] > allowed[key]:
            print(f"{rel}:{line}: raw product of integer sizes in {fn}: {prod}")
            bad += 1
    for key, n in sorted(allowed.items()):
        if seen[key] < n:
            print(f"{args.allow}: listed product not found ({n - seen[key]} more than exist): {' | '.join(key)}")
            bad += 1
    for (rel, prod), n in sorted(anyfn.items()):
        if n == 0:
            print(f"{args.allow}: listed product not found: {rel} | * | {prod}")
            bad += 1
    if bad:
        print(f"check_products: {bad} problem(s); use src/core/checked.h, or list the product "
              f"with the reason it cannot overflow in {os.path.relpath(args.allow, root)}")
        return 1
    print(f"check_products: {len(found)} products, all listed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
