#!/usr/bin/env python3
"""compare_torch.py: chainrules-bench's engine figures written with PyTorch.

The functions of chainrules-bench (bench/chainrules_bench.c) in PyTorch, CPU, float64, one
thread, each in its natural PyTorch form, timed as chainrules-bench times them: each ratio
is the median of 7 pairs (the primal, then the AD call) timed in alternation; each per-call
figure is the median of 7 runs of many calls. Every derivative is first checked against
the hand-written one of bench/compare_ref.c (the same as chainrules-bench's), called
through ctypes; a failed check ends the script with status 1.

Two primals: `_ratio` figures are over the same function in PyTorch without gradients
(torch.no_grad(), the same tensor operations); `_c_ratio` figures are over the plain C
loop of compare_ref.c (the primal of chainrules-bench's ratios), compiled by this script
with `cc -O3` (CC overrides) and timed in alternation like the other primal.

Figures, one `name value unit` line each:

  torch_chain_loop_ns_per_op  the chain t = t + x[k % 1000] * exp(sin(t)) as a Python loop
                              over 0-dim tensors (the 1000 inputs made separate tensors
                              that require grad, 4 operations per step, the gradients
                              stacked into one tensor), 2500 steps instead of 250000
                              (1/100: a step costs microseconds): forward +
                              torch.autograd.grad, ns per operation
  torch_chain_loop_ratio      that over the same loop under torch.no_grad()
  torch_chain_loop_c_ratio    that over the plain C loop of 2500 steps
  torch_rosen_array_ratio     Rosenbrock, n = 1e6, with tensor operations
                              (100 * (x[1:] - x[:-1]**2)**2 + (1 - x[:-1])**2).sum():
                              forward + torch.autograd.grad, over the same under no_grad
  torch_rosen_array_c_ratio   the same over the plain C loop (chainrules' rosen_array_ratio
                              and rosen_loop_ratio divide by this loop)
  torch_rosen_loop_ns_per_op  Rosenbrock as a Python loop over 0-dim tensors (as the
                              chain), n = 1e4 instead of 1e6 (1/100), ns per operation
                              (8 per term)
  torch_rosen_loop_c_ratio    that over the plain C loop of n = 1e4
  torch_hvp_ratio             Rosenbrock, n = 1e5, tensor operations: H v by double
                              backward (torch.autograd.grad with create_graph=True, then
                              the gradient of <g, v>), over the same function under no_grad
  torch_hvp_c_ratio           the same over the plain C loop
  torch_hvp_functional_c_ratio  torch.autograd.functional.hvp, over the plain C loop
  torch_sum3_ns               a[0] + a[1] + a[2] of a length-30 tensor: forward +
                              torch.autograd.grad, per call
  torch_sum3_primal_ns        the forward alone under no_grad, per call
  torch_mse_ns                ((x - y)**2).sum() / 30 over 30 points, per call
  torch_mse_primal_ns         the forward alone under no_grad, per call
  torch_mse_loop_ns           mse as a Python loop over 0-dim tensors (91 operations, as
                              chainrules' mse_loop_ns), per call

PyTorch records its graph at each call: it has no form that records once and replays
(chainrules' prepared figures, ADOL-C's taped-once ones).

Usage: /usr/bin/python3 bench/compare_torch.py [figure...]   (no figure: all of them)
Not part of ctest; needs python3-torch (Debian) and a C compiler.
"""

import ctypes
import os
import subprocess
import sys
import tempfile
import time

try:
    import torch
except ImportError:
    sys.exit("compare_torch.py: no torch module for %s (Debian: python3-torch; run it with "
             "/usr/bin/python3)" % sys.executable)

RUNS = 7
CHAIN_N = 1000
CHAIN_STEPS = 2500  # chainrules-bench: 250000
ROSEN_N = 1000000
ROSEN_LOOP_N = 10000  # chainrules-bench: 1e6
HVP_N = 100000
SMALL_N = 30
SMALL_CALLS = 2000  # per timed run

F64 = torch.float64
_here = os.path.dirname(os.path.abspath(__file__))
_dp = ctypes.POINTER(ctypes.c_double)


def load_ref(tmpdir):
    """Compiles compare_ref.c into a shared library and declares its functions."""
    so = os.path.join(tmpdir, "compare_ref.so")
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-std=c11", "-O3", "-fPIC", "-shared", "-o", so,
                    os.path.join(_here, "compare_ref.c"), "-lm"], check=True)
    lib = ctypes.CDLL(so)
    L, D, Int = ctypes.c_long, ctypes.c_double, ctypes.c_int
    sig = {
        "cmp_chain_inputs": (None, [_dp]),
        "cmp_chain_primal": (D, [_dp, L]),
        "cmp_chain_grad": (Int, [_dp, L, _dp]),
        "cmp_rosen_inputs": (None, [_dp, _dp, L]),
        "cmp_rosen_primal": (D, [_dp, L]),
        "cmp_rosen_grad": (None, [_dp, L, _dp]),
        "cmp_rosen_hvp": (None, [_dp, _dp, L, _dp]),
        "cmp_small_inputs": (None, [_dp, _dp]),
        "cmp_mse_grad": (None, [_dp, _dp, L, _dp]),
        "cmp_mismatch": (L, [_dp, _dp, L, D]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


def ptr(t):
    """The address of a contiguous float64 tensor's data, for the C functions."""
    assert t.dtype == F64 and t.is_contiguous()
    return ctypes.cast(t.data_ptr(), _dp)


def vec(n):
    return torch.zeros(n, dtype=F64)


_sink = 0.0


def median(v):
    return sorted(v)[len(v) // 2]


def median_ratio(num, den):
    """num / den timed in alternation, the median of RUNS pairs (chainrules-bench's)."""
    global _sink
    _sink = float(num()) + float(den())  # warm up
    r = []
    for _ in range(RUNS):
        t0 = time.perf_counter_ns()
        _sink = float(den())
        t1 = time.perf_counter_ns()
        _sink += float(num())
        t2 = time.perf_counter_ns()
        r.append((t2 - t1) / (t1 - t0))
    return median(r)


def median_time(run):
    """The median time of RUNS runs of run, in ns."""
    global _sink
    _sink = float(run())  # warm up
    t = []
    for _ in range(RUNS):
        t0 = time.perf_counter_ns()
        _sink = float(run())
        t.append(time.perf_counter_ns() - t0)
    return median(t)


class CheckFailed(Exception):
    pass


def check(ref, what, got, want, rtol):
    got = got.detach().contiguous()
    i = ref.cmp_mismatch(ptr(got), ptr(want), got.numel(), rtol)
    if i >= 0:
        raise CheckFailed("%s[%d] = %.17g, hand-written %.17g"
                          % (what, i, got[i].item(), want[i].item()))


# ---- chain -----------------------------------------------------------------------------

def chain_value(xs, steps):
    t = torch.zeros((), dtype=F64)
    for k in range(steps):
        t = t + xs[k % CHAIN_N] * torch.exp(torch.sin(t))
    return t


def fig_chain(ref, out):
    x = vec(CHAIN_N)
    ref.cmp_chain_inputs(ptr(x))
    want = vec(CHAIN_N)
    if ref.cmp_chain_grad(ptr(x), CHAIN_STEPS, ptr(want)) != 0:
        raise MemoryError
    def f(xs):
        return chain_value(xs, CHAIN_STEPS)

    check(ref, "torch chain gradient", grad_of_scalars(f, x)[1], want, 1e-9)

    def ad():
        return grad_of_scalars(f, x)[1][0]

    def primal():
        with torch.no_grad():
            return f(x.unbind(0))

    xp = ptr(x)

    def c_primal():
        return ref.cmp_chain_primal(xp, CHAIN_STEPS)

    out["torch_chain_loop_ns_per_op"] = median_time(ad) / (4 * CHAIN_STEPS)
    out["torch_chain_loop_ratio"] = median_ratio(ad, primal)
    out["torch_chain_loop_c_ratio"] = median_ratio(ad, c_primal)


# ---- Rosenbrock ----------------------------------------------------------------------------

def rosen_array(x):
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


def rosen_loop(xs):
    s = torch.zeros((), dtype=F64)
    for i in range(len(xs) - 1):
        a = xs[i + 1] - xs[i] * xs[i]
        b = 1.0 - xs[i]
        s = s + (100.0 * (a * a) + b * b)
    return s


def grad_of(f, x):
    """f(x) and its gradient, x a tensor."""
    xg = x.detach().requires_grad_()
    y = f(xg)
    (g,) = torch.autograd.grad(y, xg)
    return y, g


def grad_of_scalars(f, x):
    """f(xs) and its gradient as a tensor, xs a list of 0-dim tensors made from x: the form
    of a scalar loop. (Views of x, x.unbind() or x[i], made backward slower per operation
    as n grew: 30 us per operation at n = 1e4 against 7 with separate tensors.)"""
    xs = [torch.tensor(v, dtype=F64, requires_grad=True) for v in x.tolist()]
    y = f(xs)
    return y, torch.stack(torch.autograd.grad(y, xs))


def rosen_setup(ref, n, with_v=False):
    x, v = vec(n), vec(n)
    ref.cmp_rosen_inputs(ptr(x), ptr(v), n)
    return (x, v) if with_v else x


def fig_rosen_array(ref, out):
    x = rosen_setup(ref, ROSEN_N)
    want = vec(ROSEN_N)
    ref.cmp_rosen_grad(ptr(x), ROSEN_N, ptr(want))
    check(ref, "torch rosenbrock gradient", grad_of(rosen_array, x)[1], want, 1e-12)

    def ad():
        return grad_of(rosen_array, x)[1][0]

    def primal():
        with torch.no_grad():
            return rosen_array(x)

    xp = ptr(x)

    def c_primal():
        return ref.cmp_rosen_primal(xp, ROSEN_N)

    out["torch_rosen_array_ratio"] = median_ratio(ad, primal)
    out["torch_rosen_array_c_ratio"] = median_ratio(ad, c_primal)


def fig_rosen_loop(ref, out):
    n = ROSEN_LOOP_N
    x = rosen_setup(ref, n)
    want = vec(n)
    ref.cmp_rosen_grad(ptr(x), n, ptr(want))
    check(ref, "torch rosenbrock loop gradient", grad_of_scalars(rosen_loop, x)[1], want, 1e-12)

    def ad():
        return grad_of_scalars(rosen_loop, x)[1][0]

    xp = ptr(x)

    def c_primal():
        return ref.cmp_rosen_primal(xp, n)

    out["torch_rosen_loop_ns_per_op"] = median_time(ad) / (8 * (n - 1))
    out["torch_rosen_loop_c_ratio"] = median_ratio(ad, c_primal)


def hvp_double_backward(x, v):
    xg = x.detach().requires_grad_()
    (g,) = torch.autograd.grad(rosen_array(xg), xg, create_graph=True)
    (hv,) = torch.autograd.grad(g, xg, grad_outputs=v)
    return hv


def hvp_functional(x, v):
    return torch.autograd.functional.hvp(rosen_array, x, v)[1]


def fig_hvp(ref, out):
    x, v = rosen_setup(ref, HVP_N, with_v=True)
    want = vec(HVP_N)
    ref.cmp_rosen_hvp(ptr(x), ptr(v), HVP_N, ptr(want))
    check(ref, "torch rosenbrock hvp", hvp_double_backward(x, v), want, 1e-12)
    check(ref, "torch rosenbrock functional hvp", hvp_functional(x, v), want, 1e-12)

    def primal():
        with torch.no_grad():
            return rosen_array(x)

    xp = ptr(x)

    def c_primal():
        return ref.cmp_rosen_primal(xp, HVP_N)

    def ad():
        return hvp_double_backward(x, v)[0]

    def ad_functional():
        return hvp_functional(x, v)[0]

    out["torch_hvp_ratio"] = median_ratio(ad, primal)
    out["torch_hvp_c_ratio"] = median_ratio(ad, c_primal)
    out["torch_hvp_functional_c_ratio"] = median_ratio(ad_functional, c_primal)


# ---- small functions -------------------------------------------------------------------------

def sum3(a):
    return a[0] + a[1] + a[2]


def mse(x, y):
    return ((x - y) ** 2).sum() / SMALL_N


def mse_loop(xs, y):
    ys = y.tolist()
    s = torch.zeros((), dtype=F64)
    for i in range(SMALL_N):
        d = xs[i] - ys[i]
        s = s + d * d
    return s / SMALL_N


def per_call(f, x):
    """ns per call of f(x) over SMALL_CALLS calls. The inputs stay (chainrules-bench moves
    them by 1e-9 at each call, which costs nothing in C but a tensor operation here; PyTorch
    keeps nothing from one call to the next)."""
    def run():
        s = 0.0
        for _ in range(SMALL_CALLS):
            s += float(f(x))
        return s
    return median_time(run) / SMALL_CALLS


def fig_small(ref, out):
    x, y = vec(SMALL_N), vec(SMALL_N)
    ref.cmp_small_inputs(ptr(x), ptr(y))
    want3 = vec(SMALL_N)
    want3[:3] = 1.0
    wantm = vec(SMALL_N)
    ref.cmp_mse_grad(ptr(x), ptr(y), SMALL_N, ptr(wantm))
    check(ref, "torch sum3 gradient", grad_of(sum3, x)[1], want3, 1e-15)
    check(ref, "torch mse gradient", grad_of(lambda t: mse(t, y), x)[1], wantm, 1e-15)
    check(ref, "torch mse loop gradient", grad_of_scalars(lambda t: mse_loop(t, y), x)[1], wantm,
          1e-15)

    def grad_call(f):
        return lambda t: grad_of(f, t)[1][0]

    def grad_scalars_call(f):
        return lambda t: grad_of_scalars(f, t)[1][0]

    def primal_call(f):
        def call(t):
            with torch.no_grad():
                return f(t)
        return call

    out["torch_sum3_ns"] = per_call(grad_call(sum3), x)
    out["torch_sum3_primal_ns"] = per_call(primal_call(sum3), x)
    out["torch_mse_ns"] = per_call(grad_call(lambda t: mse(t, y)), x)
    out["torch_mse_primal_ns"] = per_call(primal_call(lambda t: mse(t, y)), x)
    out["torch_mse_loop_ns"] = per_call(grad_scalars_call(lambda t: mse_loop(t, y)), x)


# (figure names, the function computing them); units: x for _ratio, ns otherwise
FIGURES = [
    (("torch_chain_loop_ns_per_op", "torch_chain_loop_ratio", "torch_chain_loop_c_ratio"),
     fig_chain),
    (("torch_rosen_array_ratio", "torch_rosen_array_c_ratio"), fig_rosen_array),
    (("torch_rosen_loop_ns_per_op", "torch_rosen_loop_c_ratio"), fig_rosen_loop),
    (("torch_hvp_ratio", "torch_hvp_c_ratio", "torch_hvp_functional_c_ratio"), fig_hvp),
    (("torch_sum3_ns", "torch_sum3_primal_ns", "torch_mse_ns", "torch_mse_primal_ns",
      "torch_mse_loop_ns"), fig_small),
]


def main(argv):
    known = [n for names, _ in FIGURES for n in names]
    for a in argv:
        if a not in known:
            print("compare_torch.py: no figure %s" % a, file=sys.stderr)
            return 2
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        ref = load_ref(tmp)
        for names, fn in FIGURES:
            if argv and not any(n in argv for n in names):
                continue
            out = {}
            try:
                fn(ref, out)
            except CheckFailed as e:
                print("compare_torch.py: %s" % e, file=sys.stderr)
                return 1
            for n in names:
                if argv and n not in argv:
                    continue
                unit = "x" if n.endswith("_ratio") else "ns"
                print("%s %.2f %s" % (n, out[n], unit) if unit == "x"
                      else "%s %.1f %s" % (n, out[n], unit), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
