#!/usr/bin/env python3
"""The small sizes of GradBench's evals, checked in-tree: no GradBench copy, no numpy.

    gradbench_check.py --tool 'COMMAND' [--only EVAL,...]

Runs the tool binary (chainrules-gradbench or chainrules-gradbench-tape) over GradBench's
protocol (start, define, evaluate, end; one JSON message per line) on the smallest size of
every eval's default configuration, and checks each answer against a reference written here
from the eval's documented math (GradBench's evals/*/README.md and the definitions in its
cpp/gradbench/evals/*.hpp): primal values against that math, derivatives against its
central differences (second differences for kmeans' Hessian diagonal), particle's and
saddle's answers against the values GradBench's evals expect. Exit status 0 when every
answer is within tolerance, 1 otherwise.

Inputs are generated as the evals generate them: lse, llsq, det, kmeans and ode draw
`np.random.rand` after `np.random.seed(31337)` (NumPy's legacy MT19937, reproduced below
bit for bit with Python's own Mersenne Twister and NumPy's integer seeding); ba reads
ADBench's ba1 file (five lines, written below); hello, particle and saddle have fixed
inputs. Three differ, and the check says so: gmm draws from NumPy's `default_rng(31337)`
(PCG64 and a ziggurat normal) whose tables are not reproduced, so the same distributions
come from the legacy generator (its polar normal); lstm's eval draws its parameters
without a seed, from a text file, so the parameters come from the seeded generator and the
text is a fixed sentence; ht reads a hand model of GradBench's data (its small model's
vertices file is 87 KB), so a small model of the same structure (GradBench's 22 bones and
their parents, 5 fingers) is generated, with 60 vertices and 12 correspondences.
"""

import argparse
import json
import math
import random
import shlex
import subprocess
import sys

# ---------------------------------------------------------------- inputs


def numpy_legacy(seed):
    """A random.Random in the state of NumPy's np.random.seed(seed) (init_genrand).

    Its random() then returns what np.random.rand returns: both are MT19937's genrand_res53.
    """
    mt = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
    r = random.Random()
    r.setstate((3, tuple(mt) + (624,), None))
    return r


class Gauss:
    """NumPy's legacy normal (legacy_gauss: the polar method, one value kept)."""

    def __init__(self, rng):
        self.rng, self.kept = rng, None

    def __call__(self):
        if self.kept is not None:
            v, self.kept = self.kept, None
            return v
        while True:
            x1 = 2.0 * self.rng.random() - 1.0
            x2 = 2.0 * self.rng.random() - 1.0
            r2 = x1 * x1 + x2 * x2
            if 0.0 < r2 < 1.0:
                break
        f = math.sqrt(-2.0 * math.log(r2) / r2)
        self.kept = f * x1
        return f * x2


# ---------------------------------------------------------------- references (the evals' math)


def lse_f(x):
    a = max(x)
    return math.log(math.fsum(math.exp(v - a) for v in x)) + a


def llsq_f(x, n):
    total = 0.0
    for i in range(n):
        t = -1.0 + i * 2.0 / (n - 1)
        s = (t > 0) - (t < 0)
        total += (s - sum(xj * t**j for j, xj in enumerate(x))) ** 2
    return total / 2.0


def det_f(a, ell):
    """The determinant by Gaussian elimination with partial pivoting (not the minors)."""
    m = [a[i * ell : (i + 1) * ell] for i in range(ell)]
    det = 1.0
    for c in range(ell):
        p = max(range(c, ell), key=lambda r: abs(m[r][c]))
        if m[p][c] == 0.0:
            return 0.0
        if p != c:
            m[p], m[c] = m[c], m[p]
            det = -det
        det *= m[c][c]
        for r in range(c + 1, ell):
            f = m[r][c] / m[c][c]
            m[r] = [m[r][j] - f * m[c][j] for j in range(ell)]
    return det


def ode_f(x, s):
    """RK4 on y' = (x0, x1 y0, ..., x_{n-1} y_{n-2}), y(0) = 0, over [0, 2] in s steps."""
    n = len(x)

    def fun(y):
        return [x[0]] + [x[i] * y[i - 1] for i in range(1, n)]

    h = 2.0 / s
    y = [0.0] * n
    for _ in range(s):
        k1 = fun(y)
        k2 = fun([y[i] + h * k1[i] / 2 for i in range(n)])
        k3 = fun([y[i] + h * k2[i] / 2 for i in range(n)])
        k4 = fun([y[i] + h * k3[i] for i in range(n)])
        y = [y[i] + h * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]) / 6 for i in range(n)]
    return y


def kmeans_f(points, cents):
    return sum(min(sum((p[j] - c[j]) ** 2 for j in range(len(p))) for c in cents)
               for p in points)


def logsumexp(v):
    a = max(v)
    return a + math.log(sum(math.exp(t - a) for t in v))


def gmm_f(inp, alpha, mu, q, l):
    d, k, n = inp["d"], inp["k"], inp["n"]
    x, gamma, m = inp["x"], inp["gamma"], inp["m"]
    total = 0.0
    for xi in x:
        terms = []
        for ik in range(k):
            c = [xi[j] - mu[ik][j] for j in range(d)]
            # Q: exp(q) on the diagonal, l below it (column by column)
            qc = [math.exp(q[ik][j]) * c[j] for j in range(d)]
            idx = 0
            for i in range(d):
                for j in range(i + 1, d):
                    qc[j] += l[ik][idx] * c[i]
                    idx += 1
            terms.append(alpha[ik] + sum(q[ik]) - 0.5 * sum(v * v for v in qc))
        total += logsumexp(terms)
    nn = d + m + 1
    lgd = 0.25 * d * (d - 1) * math.log(math.pi) + sum(
        math.lgamma(0.5 * nn + 0.5 * (1 - j)) for j in range(1, d + 1))
    cst = nn * d * (math.log(gamma) - 0.5 * math.log(2)) - lgd
    prior = 0.0
    for ik in range(k):
        fro = sum(math.exp(v) ** 2 for v in q[ik]) + sum(v * v for v in l[ik])
        prior += 0.5 * gamma * gamma * fro - m * sum(q[ik])
    return (-n * d * 0.5 * math.log(2 * math.pi) + total - n * logsumexp(alpha)
            - prior + k * cst)


def ba_project(cam, X):
    """ADBench's projection: Rodrigues rotation, then radial distortion."""
    r, c, f, x0, kap = cam[0:3], cam[3:6], cam[6], cam[7:9], cam[9:11]
    p = [X[i] - c[i] for i in range(3)]
    th2 = sum(v * v for v in r)
    cross = [r[1] * p[2] - r[2] * p[1], r[2] * p[0] - r[0] * p[2], r[0] * p[1] - r[1] * p[0]]
    if th2 != 0.0:
        th = math.sqrt(th2)
        w = [v / th for v in r]
        wx = [w[1] * p[2] - w[2] * p[1], w[2] * p[0] - w[0] * p[2], w[0] * p[1] - w[1] * p[0]]
        tmp = sum(w[i] * p[i] for i in range(3)) * (1 - math.cos(th))
        rot = [p[i] * math.cos(th) + wx[i] * math.sin(th) + w[i] * tmp for i in range(3)]
    else:
        rot = [p[i] + cross[i] for i in range(3)]
    u = [rot[0] / rot[2], rot[1] / rot[2]]
    rsq = u[0] ** 2 + u[1] ** 2
    lf = 1 + kap[0] * rsq + kap[1] * rsq * rsq
    return [u[i] * lf * f + x0[i] for i in range(2)]


def ba_err(v, feat):
    """The two reprojection errors of one observation; v = camera (11), point (3), w."""
    proj = ba_project(v[0:11], v[11:14])
    return [v[14] * (proj[i] - feat[i]) for i in range(2)]


def lstm_f(l, b, main, extra, state, seq):
    """GradBench's lstm objective (cpp/gradbench/evals/lstm.hpp)."""

    def sig(t):
        return 1 / (1 + math.exp(-t))

    st = [list(r) for r in state]  # rows: layer i hidden 2i, cell 2i+1
    total, count = 0.0, 0
    for t in range(len(seq) - 1):
        out = [seq[t][i] * extra[0][i] for i in range(b)]
        for li in range(l):
            w, bias = main[2 * li], main[2 * li + 1]
            hid, cell = st[2 * li], st[2 * li + 1]
            for i in range(b):
                fg = sig(out[i] * w[i] + bias[i])
                ig = sig(hid[i] * w[b + i] + bias[b + i])
                og = sig(out[i] * w[2 * b + i] + bias[2 * b + i])
                ch = math.tanh(hid[i] * w[3 * b + i] + bias[3 * b + i])
                cell[i] = cell[i] * fg + ig * ch
                hid[i] = og * math.tanh(cell[i])
            out = hid
        y = [out[i] * extra[1][i] + extra[2][i] for i in range(b)]
        lse = math.log(sum(math.exp(v) for v in y) + 2)
        total += sum(seq[t + 1][i] * (y[i] - lse) for i in range(b))
        count += b
    return -total / count


# ---------------------------------------------------------------- ht (GradBench's ht.hpp)

HT_PARENTS = [-1, 0, 1, 2, 3, 0, 5, 6, 7, 0, 9, 10, 11, 0, 13, 14, 15, 0, 17, 18, 19, 0]
HT_NAMES = ["Root", "thumb1", "thumb2", "thumb3", "thumb4", "index1", "index2", "index3",
            "index4", "middle1", "middle2", "middle3", "middle4", "ring1", "ring2", "ring3",
            "ring4", "pinky1", "pinky2", "pinky3", "pinky4", "wrist"]


def mat_mul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))]
            for i in range(len(a))]


def angle_axis_rot(aa):
    n = math.sqrt(sum(v * v for v in aa))
    if n < 1e-4:
        return [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    x, y, z = (v / n for v in aa)
    s, c = math.sin(n), math.cos(n)
    return [[x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s],
            [x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s],
            [x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c]]


def euler_rot(xzy):
    tx, ty, tz = xzy[0], xzy[2], xzy[1]
    rx = [[1, 0, 0], [0, math.cos(tx), -math.sin(tx)], [0, math.sin(tx), math.cos(tx)]]
    ry = [[math.cos(ty), 0, math.sin(ty)], [0, 1, 0], [-math.sin(ty), 0, math.cos(ty)]]
    rz = [[math.cos(tz), -math.sin(tz), 0], [math.sin(tz), math.cos(tz), 0], [0, 0, 1]]
    return mat_mul(rz, mat_mul(ry, rx))


def ht_pose_params(theta, nbones):
    """The columns of GradBench's pose parameters: global rotation, scale 1, translation,
    then one (x, z, y) Euler triple per bone; theta's 20 finger angles go to bones 2-4 of
    each finger (two angles on the finger's first)."""
    pp = [list(theta[0:3]), [1.0, 1.0, 1.0], list(theta[3:6])]
    pp += [[0.0, 0.0, 0.0] for _ in range(nbones)]
    i_theta, i_pose = 6, 5
    for _ in range(5):
        for i in range(2, 5):
            pp[i_pose][0] = theta[i_theta]
            i_theta += 1
            if i == 2:
                pp[i_pose][1] = theta[i_theta]
                i_theta += 1
            i_pose += 1
        i_pose += 1
    return pp


def ht_vertices(model, theta):
    nb = len(model["bone_names"])
    pp = ht_pose_params(theta, nb)
    rel = []
    for i in range(nb):
        t = [[1.0 if r == c else 0.0 for c in range(4)] for r in range(4)]
        r3 = euler_rot(pp[i + 3])
        for r in range(3):
            t[r][0:3] = r3[r]
        rel.append(mat_mul(model["base_relatives"][i], t))
    absm = []
    for i in range(nb):
        p = model["parents"][i]
        absm.append(rel[i] if p == -1 else mat_mul(absm[p], rel[i]))
    tr = [mat_mul(absm[i], model["inverse_base_absolutes"][i]) for i in range(nb)]
    verts = []
    for v, w in zip(model["base_positions"], model["weights"]):
        acc = [0.0, 0.0, 0.0]
        for i in range(nb):
            if w[i] != 0.0:
                for r in range(3):
                    acc[r] += w[i] * sum(tr[i][r][c] * v[c] for c in range(4))
        verts.append(acc)
    if model["is_mirrored"]:
        for v in verts:
            v[0] = -v[0]
    rot = angle_axis_rot(pp[0])
    return [[sum(rot[r][c] * pp[1][c] * v[c] for c in range(3)) + pp[2][r] for r in range(3)]
            for v in verts]


def ht_f(inp, theta, us=None):
    data = inp["data"]
    verts = ht_vertices(data["model"], theta)
    tris = data["model"]["triangles"]
    out = []
    for i, (pt, ci) in enumerate(zip(data["points"], data["correspondences"])):
        if us is None:
            v = verts[ci]
        else:
            a, b, c = (verts[j] for j in tris[ci])
            u0, u1 = us[i]
            v = [u0 * a[r] + u1 * b[r] + (1 - u0 - u1) * c[r] for r in range(3)]
        out += [pt[r] - v[r] for r in range(3)]
    return out


def ht_input(rng, complicated):
    """A small hand model of GradBench's structure and a few correspondences."""
    nb, nv, npts = len(HT_NAMES), 60, 12

    def rigid():
        r = angle_axis_rot([rng.uniform(-0.5, 0.5) for _ in range(3)])
        t = [rng.uniform(-1, 1) for _ in range(3)]
        return [r[0] + [t[0]], r[1] + [t[1]], r[2] + [t[2]], [0.0, 0.0, 0.0, 1.0]]

    rel = [rigid() for _ in range(nb)]
    absm = []
    for i in range(nb):
        p = HT_PARENTS[i]
        absm.append(rel[i] if p == -1 else mat_mul(absm[p], rel[i]))
    inv = []
    for m in absm:  # the inverse of a rigid transform
        rt = [[m[c][r] for c in range(3)] for r in range(3)]
        t = [-sum(rt[r][c] * m[c][3] for c in range(3)) for r in range(3)]
        inv.append([rt[0] + [t[0]], rt[1] + [t[1]], rt[2] + [t[2]], [0.0, 0.0, 0.0, 1.0]])
    pos, weights = [], []
    for _ in range(nv):
        pos.append([rng.uniform(-1, 1) for _ in range(3)] + [1.0])
        w = [0.0] * nb
        bones = rng.sample(range(nb), 2)
        a = rng.random()
        w[bones[0]], w[bones[1]] = a, 1 - a
        weights.append(w)
    tris = [[rng.randrange(nv) for _ in range(3)] for _ in range(2 * nv)]
    theta = [rng.uniform(-0.3, 0.3) for _ in range(26)]
    model = {"bone_names": HT_NAMES, "parents": HT_PARENTS, "base_relatives": rel,
             "inverse_base_absolutes": inv, "base_positions": pos, "weights": weights,
             "triangles": tris, "is_mirrored": False}
    corr = [rng.randrange(2 * nv if complicated else nv) for _ in range(npts)]
    points = [[rng.uniform(-1, 1) for _ in range(3)] for _ in range(npts)]
    inp = {"theta": theta, "us": [],
           "data": {"model": model, "correspondences": corr, "points": points}}
    if complicated:
        inp["us"] = [[rng.uniform(0, 0.5), rng.uniform(0, 0.5)] for _ in range(npts)]
    return inp


# ---------------------------------------------------------------- the protocol


class Tool:
    def __init__(self, cmd):
        self.p = subprocess.Popen(shlex.split(cmd), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.id = 0

    def send(self, msg):
        msg = {"id": self.id} | msg
        self.id += 1
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"the tool ended without answering {msg['kind']}")
        resp = json.loads(line)
        if resp.get("id") != msg["id"]:
            raise RuntimeError(f"answer id {resp.get('id')} for message {msg['id']}")
        return resp

    def evaluate(self, module, function, inp):
        if isinstance(inp, dict):  # hello's input is a number, sent as it is
            inp = inp | {"min_runs": 1, "min_seconds": 0}
        r = self.send({"kind": "evaluate", "module": module, "function": function,
                       "input": inp})
        if not r.get("success"):
            raise RuntimeError(f"{module}.{function} failed: {r.get('error')}")
        if not any(t.get("name") == "evaluate" for t in r.get("timings", [])):
            raise RuntimeError(f"{module}.{function}: no evaluate timing")
        return r["output"]

    def end(self):
        self.send({"kind": "end"})
        try:
            return self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return "no exit 30 s after end"


# ---------------------------------------------------------------- checks

FAILS = []


def close(what, got, want, tol):
    """Records a failure unless |got - want| <= tol (1 + |want|)."""
    if not (isinstance(got, (int, float)) and abs(got - want) <= tol * (1 + abs(want))):
        FAILS.append(f"{what}: {got!r}, expected {want!r}")


def cdiff(f, x, i, h):
    """Central difference of f along coordinate i of the list x."""
    xp, xm = list(x), list(x)
    xp[i] += h
    xm[i] -= h
    return (f(xp) - f(xm)) / (2 * h)


def spread(n, count):
    """count indices spread over range(n), the ends included."""
    if n <= count:
        return list(range(n))
    return sorted({round(i * (n - 1) / (count - 1)) for i in range(count)})


def check_hello(tool):
    x = 1.0
    for _ in range(4):
        y = tool.evaluate("hello", "square", x)
        close(f"hello square({x})", y, x * x, 1e-15)
        x2 = tool.evaluate("hello", "double", y)
        close(f"hello double({y})", x2, cdiff(lambda v: v[0] * v[0], [y], 0, 1e-3), 1e-9)
        x = x2


def check_lse(tool):
    rng = numpy_legacy(31337)
    x = [rng.random() for _ in range(2500)]
    close("lse primal n=2500", tool.evaluate("lse", "primal", {"x": x}), lse_f(x), 1e-12)
    g = tool.evaluate("lse", "gradient", {"x": x})
    for i in spread(len(x), 12):
        close(f"lse gradient[{i}]", g[i], cdiff(lse_f, x, i, 1e-4), 1e-8)


def check_llsq(tool):
    rng = numpy_legacy(31337)
    n, x = 16, [rng.random() for _ in range(128)]
    inp = {"x": x, "n": n}
    close("llsq primal n=16,m=128", tool.evaluate("llsq", "primal", inp), llsq_f(x, n), 1e-10)
    g = tool.evaluate("llsq", "gradient", inp)
    for i in spread(len(x), 12):
        close(f"llsq gradient[{i}]", g[i], cdiff(lambda v: llsq_f(v, n), x, i, 1e-5), 1e-6)


def check_det(tool):
    rng = numpy_legacy(31337)
    ell = 5
    a = [rng.random() for _ in range(ell * ell)]
    inp = {"A": a, "ell": ell}
    close("det primal 5", tool.evaluate("det", "primal", inp), det_f(a, ell), 1e-12)
    g = tool.evaluate("det", "gradient", inp)
    for i in range(ell * ell):
        close(f"det gradient[{i}]", g[i], cdiff(lambda v: det_f(v, ell), a, i, 1e-5), 1e-8)


def check_ode(tool):
    rng = numpy_legacy(31337)
    x, s = [rng.random() for _ in range(1000)], 1
    inp = {"x": x, "s": s}
    y = tool.evaluate("ode", "primal", inp)
    want = ode_f(x, s)
    for i in spread(len(x), 12):
        close(f"ode primal[{i}]", y[i], want[i], 1e-12)
    g = tool.evaluate("ode", "gradient", inp)
    for i in spread(len(x), 12):  # the gradient of the last component
        close(f"ode gradient[{i}]", g[i], cdiff(lambda v: ode_f(v, s)[-1], x, i, 1e-5), 1e-8)


def check_kmeans(tool):
    rng = numpy_legacy(31337)
    k, n, d = 10, 1000, 8
    points = [[rng.random() for _ in range(d)] for _ in range(n)]
    cents = [list(p) for p in points[-k:]]
    inp = {"points": points, "centroids": cents}
    close("kmeans cost", tool.evaluate("kmeans", "cost", inp), kmeans_f(points, cents), 1e-12)
    dirs = tool.evaluate("kmeans", "dir", inp)
    h = 1e-4
    for c in spread(k, 4):
        for j in spread(d, 3):

            def f(t):
                cc = [list(r) for r in cents]
                cc[c][j] += t
                return kmeans_f(points, cc)

            f0, fp, fm = f(0.0), f(h), f(-h)
            jac, hess = (fp - fm) / (2 * h), (fp - 2 * f0 + fm) / (h * h)
            close(f"kmeans dir[{c}][{j}]", dirs[c][j], jac / hess, 1e-5)


def check_gmm(tool):
    rng = numpy_legacy(31337)
    gauss = Gauss(rng)
    d, k, n = 2, 5, 1000
    inp = {"d": d, "k": k, "n": n, "x": [[gauss() for _ in range(d)] for _ in range(n)],
           "m": 0, "gamma": 1.0, "alpha": [gauss() for _ in range(k)],
           "mu": [[rng.random() for _ in range(d)] for _ in range(k)],
           "q": [[gauss() for _ in range(d)] for _ in range(k)],
           "l": [[gauss() for _ in range(d * (d - 1) // 2)] for _ in range(k)]}
    names = ["alpha", "mu", "q", "l"]
    want = gmm_f(inp, *(inp[v] for v in names))
    close("gmm objective d=2,k=5", tool.evaluate("gmm", "objective", inp), want, 1e-10)
    jac = tool.evaluate("gmm", "jacobian", inp)
    for name in names:
        flat = [v for r in inp[name] for v in r] if name != "alpha" else list(inp[name])
        width = 1 if name == "alpha" else len(inp[name][0])
        got = jac[name] if name == "alpha" else [v for r in jac[name] for v in r]

        def f(v, name=name, width=width):
            args = {m: inp[m] for m in names}
            args[name] = v if name == "alpha" else [v[i:i + width] for i in range(0, len(v), width)]
            return gmm_f(inp, *(args[m] for m in names))

        for i in range(len(flat)):
            close(f"gmm jacobian {name}[{i}]", got[i], cdiff(f, flat, i, 1e-5), 1e-6)


BA1 = {"n": 49, "m": 7776, "p": 31843,
       "cam": [-0.758453, -1.109613, -0.845551, 34.556073, 39.676747, 53.881673, 419.194514,
               5.864426, -8.518870, 0.087812, 0.002739],
       "x": [7.203245, 0.001144, 3.023326], "w": 0.417022, "feat": [271.760969, 834.209256]}


def check_ba(tool):
    inp = BA1
    v = inp["cam"] + inp["x"] + [inp["w"]]
    out = tool.evaluate("ba", "objective", inp)
    want = ba_err(v, inp["feat"])
    for i in range(2):
        close(f"ba reproj_error[{i}]", out["reproj_error"]["elements"][i], want[i], 1e-10)
    close("ba reproj_error repeated", out["reproj_error"]["repeated"], inp["p"], 0)
    close("ba w_err", out["w_err"]["element"], 1 - inp["w"] ** 2, 1e-14)
    close("ba w_err repeated", out["w_err"]["repeated"], inp["p"], 0)
    jac = tool.evaluate("ba", "jacobian", inp)
    n, m, p = inp["n"], inp["m"], inp["p"]
    # CSR of the (2p + p) x (11n + 3m + p) Jacobian: rows of 15 entries, then one per weight
    cols = list(range(11)) + [11 * n + j for j in range(3)] + [11 * n + 3 * m]
    for r in range(30):
        close(f"ba jacobian rows[{r}]", jac["rows"][r], 15 * r, 0)
        close(f"ba jacobian cols[{r}]", jac["cols"][r], cols[r % 15], 0)
    close("ba jacobian rows[last]", jac["rows"][30], 31 * p, 0)
    close("ba jacobian cols[last]", jac["cols"][30], 11 * n + 3 * m + p - 1, 0)
    for row in range(2):
        for j in range(15):
            h = 1e-6 * max(1.0, abs(v[j]))
            want = cdiff(lambda u: ba_err(u, inp["feat"])[row], v, j, h)
            close(f"ba jacobian vals[{row * 15 + j}]", jac["vals"][row * 15 + j], want, 1e-5)
    close("ba jacobian vals[last]", jac["vals"][30], cdiff(lambda u: 1 - u[0] ** 2, [inp["w"]], 0,
                                                           1e-6), 1e-8)


def check_ht(tool):
    for complicated in (False, True):
        rng = numpy_legacy(31337)
        inp = ht_input(rng, complicated)
        us = inp["us"] or None
        what = "ht complicated" if complicated else "ht simple"
        out = tool.evaluate("ht", "objective", inp)
        want = ht_f(inp, inp["theta"], us)
        for i in range(len(want)):
            close(f"{what} objective[{i}]", out[i], want[i], 1e-10)
        jac = tool.evaluate("ht", "jacobian", inp)
        # GradBench's layout: one row per residual; columns (u0, u1) when complicated, then theta
        ncols = 28 if complicated else 26
        if len(jac) != len(want) or any(len(r) != ncols for r in jac):
            FAILS.append(f"{what} jacobian: shape {len(jac)} x {len(jac[0]) if jac else 0}")
            continue
        for c in range(26):
            fp = ht_f(inp, [t + 1e-6 * (i == c) for i, t in enumerate(inp["theta"])], us)
            fm = ht_f(inp, [t - 1e-6 * (i == c) for i, t in enumerate(inp["theta"])], us)
            for r in range(len(want)):
                close(f"{what} jacobian[{r}][{c}]", jac[r][c + ncols - 26],
                      (fp[r] - fm[r]) / 2e-6, 1e-6)
        if complicated:
            for j in range(2):
                up = [list(u) for u in us]
                um = [list(u) for u in us]
                for u in up:
                    u[j] += 1e-6
                for u in um:
                    u[j] -= 1e-6
                fp, fm = ht_f(inp, inp["theta"], up), ht_f(inp, inp["theta"], um)
                for r in range(len(want)):
                    close(f"{what} jacobian[{r}][{j}] (u{j})", jac[r][j],
                          (fp[r] - fm[r]) / 2e-6, 1e-6)


LSTM_TEXT = ("The quick brown fox jumps over the lazy dog, then rests; a long sentence of "
             "plain ASCII letters gives every bit of a character a chance to be one or zero.")


def check_lstm(tool):
    rng = numpy_legacy(31337)
    text = LSTM_TEXT
    l, c = 2, len(text)
    b = math.ceil(math.log2(max(ord(ch) for ch in text)))
    seq = [[float(bit) for bit in bin(ord(ch))[2:].zfill(b)] for ch in text[:c]]
    state = [[rng.random() for _ in range(b)] for _ in range(2 * l)]
    main = [[rng.random() for _ in range(4 * b)] for _ in range(2 * l)]
    extra = [[rng.random() for _ in range(b)] for _ in range(3)]
    inp = {"main_params": main, "extra_params": extra, "state": state, "sequence": seq}
    close(f"lstm objective l={l},c={c}", tool.evaluate("lstm", "objective", inp),
          lstm_f(l, b, main, extra, state, seq), 1e-12)
    jac = tool.evaluate("lstm", "jacobian", inp)
    flat = [v for r in main for v in r] + [v for r in extra for v in r]
    nm = len(main) * 4 * b

    def f(v):
        mm = [v[i:i + 4 * b] for i in range(0, nm, 4 * b)]
        ee = [v[nm + i:nm + i + b] for i in range(0, 3 * b, b)]
        return lstm_f(l, b, mm, ee, state, seq)

    if len(jac) != len(flat):
        FAILS.append(f"lstm jacobian: {len(jac)} entries, expected {len(flat)}")
        return
    for i in spread(len(flat), 40):
        close(f"lstm jacobian[{i}]", jac[i], cdiff(f, flat, i, 1e-5), 1e-7)


def check_particle(tool):
    for fn in ("rr", "ff", "fr", "rf"):  # evals/particle: the expected answer
        close(f"particle {fn}", tool.evaluate("particle", fn, {"w": 0.0}), 0.2071918746486116,
              1e-4)


def check_saddle(tool):
    want = [8.246324826140356e-06] * 4
    for fn in ("rr", "ff", "fr", "rf"):  # evals/saddle: the expected answer
        got = tool.evaluate("saddle", fn, {"start": [1.0, 1.0]})
        for i in range(4):
            close(f"saddle {fn}[{i}]", got[i] if isinstance(got, list) and len(got) == 4
                  else None, want[i], 1e-4)


CHECKS = {"hello": check_hello, "lse": check_lse, "llsq": check_llsq, "det": check_det,
          "ode": check_ode, "kmeans": check_kmeans, "gmm": check_gmm, "ba": check_ba,
          "ht": check_ht, "lstm": check_lstm, "particle": check_particle,
          "saddle": check_saddle}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--only", default="", help="comma-separated evals (default: all)")
    args = ap.parse_args()
    names = [e for e in args.only.split(",") if e] or list(CHECKS)
    tool = Tool(args.tool)
    start = tool.send({"kind": "start", "eval": "check"})
    if not isinstance(start.get("tool"), str):
        FAILS.append(f"start: no tool name in {start}")
    for name in names:
        if not tool.send({"kind": "define", "module": name}).get("success"):
            FAILS.append(f"define {name}: not defined")
            continue
        n = len(FAILS)
        try:
            CHECKS[name](tool)
        except (RuntimeError, KeyError, TypeError, IndexError) as e:
            FAILS.append(f"{name}: {e!r}")
        print(f"{name}: {'ok' if len(FAILS) == n else 'FAILED'}", flush=True)
    if tool.end() != 0:
        FAILS.append("the tool did not exit with status 0 after end")
    for f in FAILS[:50]:
        print("FAILED:", f)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
