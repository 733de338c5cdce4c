/*
 * chainrules-bench-scalar: the cost of each taped (reverse) and forward (dual) scalar
 * operation relative to its primal, for the scalar rows of <math.h>. One line per figure,
 * `name value unit`, medians of several runs, ratios measured in the same run:
 *
 *   tape_ratio_F   (record F on a tape) / (call F), per operation
 *   dual_ratio_F   (F on a one-direction dual) / (call F), per operation
 *   sweep_ns_F     reverse sweep over one recorded F, nanoseconds per operation
 *
 * Each derivative is first checked against a central difference of the primal.
 * Never a test: run it by hand (BENCHMARKS.md). Usage: chainrules-bench-scalar [NAME...]
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <chainrules.h>
#include <chainrules/dual.h>
#include <chainrules/tape.h>

#include "bench_util.h"

#define BATCH 1024
#define REPS  400
#define RUNS  7

typedef struct op {
    const char *name;
    const cr_value *fn;
    double (*primal)(double);
    double lo, hi; /* inputs are spread over [lo, hi] */
} op;

static const op k_ops[] = {
    {"sin", &cr_fn_sin, sin, -3, 3},           {"cos", &cr_fn_cos, cos, -3, 3},
    {"tan", &cr_fn_tan, tan, -1.4, 1.4},       {"asin", &cr_fn_asin, asin, -0.9, 0.9},
    {"acos", &cr_fn_acos, acos, -0.9, 0.9},    {"atan", &cr_fn_atan, atan, -3, 3},
    {"sinh", &cr_fn_sinh, sinh, -3, 3},        {"cosh", &cr_fn_cosh, cosh, -3, 3},
    {"tanh", &cr_fn_tanh, tanh, -3, 3},        {"asinh", &cr_fn_asinh, asinh, -3, 3},
    {"acosh", &cr_fn_acosh, acosh, 1.5, 4},    {"atanh", &cr_fn_atanh, atanh, -0.9, 0.9},
    {"exp", &cr_fn_exp, exp, -3, 3},           {"exp2", &cr_fn_exp2, exp2, -3, 3},
    {"expm1", &cr_fn_expm1, expm1, -3, 3},     {"log", &cr_fn_log, log, 0.1, 4},
    {"log2", &cr_fn_log2, log2, 0.1, 4},       {"log10", &cr_fn_log10, log10, 0.1, 4},
    {"log1p", &cr_fn_log1p, log1p, -0.5, 4},   {"sqrt", &cr_fn_sqrt, sqrt, 0.1, 4},
    {"cbrt", &cr_fn_cbrt, cbrt, 0.1, 4},       {"erf", &cr_fn_erf, erf, -2, 2},
    {"erfc", &cr_fn_erfc, erfc, -2, 2},        {"tgamma", &cr_fn_tgamma, tgamma, 0.5, 4},
    {"lgamma", &cr_fn_lgamma, lgamma, 0.5, 4},
};

static double g_x[BATCH];
static volatile double g_sink;

static void fill_inputs(const op *o)
{
    for (int i = 0; i < BATCH; i++)
        g_x[i] = o->lo + (o->hi - o->lo) * ((double)i + 0.5) / BATCH;
}

/* ns per primal call. */
static double time_primal(const op *o)
{
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double s = 0, t0 = bench_now_ns();
        for (int k = 0; k < REPS; k++)
            for (int i = 0; i < BATCH; i++)
                s += o->primal(g_x[i]);
        t[r] = (bench_now_ns() - t0) / (REPS * BATCH);
        g_sink = s;
    }
    return bench_median(t, RUNS);
}

/* ns per recorded operation: (inputs + ops) - (inputs only), per op; and ns per op of
 * the reverse sweep. Returns -1 on failure. */
static double time_taped(cr_tape *tp, const op *o, double *sweep_ns)
{
    static cr_var in[BATCH], out[BATCH];
    static double grad[BATCH];
    double t_full[RUNS], t_in[RUNS], t_sw[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = bench_now_ns();
        for (int k = 0; k < REPS; k++) {
            cr_tape_reset(tp);
            cr_tape_inputs(tp, g_x, BATCH, in);
        }
        t_in[r] = bench_now_ns() - t0;
        t0 = bench_now_ns();
        for (int k = 0; k < REPS; k++) {
            cr_tape_reset(tp);
            cr_tape_inputs(tp, g_x, BATCH, in);
            for (int i = 0; i < BATCH; i++)
                out[i] = cr_tape_call1(tp, o->fn, &in[i], 1);
        }
        t_full[r] = bench_now_ns() - t0;
        if (cr_tape_status(tp) != CR_OK)
            return -1;
        /* One sweep seeded on every output: the vjp with unit seeds. */
        static double ones[BATCH];
        for (int i = 0; i < BATCH; i++)
            ones[i] = 1.0;
        t0 = bench_now_ns();
        for (int k = 0; k < 20; k++)
            if (cr_tape_vjp(tp, out, ones, BATCH, in, BATCH, grad) != CR_OK)
                return -1;
        t_sw[r] = (bench_now_ns() - t0) / (20.0 * BATCH);
    }
    *sweep_ns = bench_median(t_sw, RUNS);
    double full = bench_median(t_full, RUNS), inputs = bench_median(t_in, RUNS);
    return (full - inputs) / (REPS * BATCH);
}

static double time_dual(const op *o)
{
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double s = 0, t0 = bench_now_ns();
        for (int k = 0; k < REPS; k++)
            for (int i = 0; i < BATCH; i++) {
                cr_dual x = cr_dual_var(g_x[i], 0), y;
                if (cr_dual_call(NULL, NULL, o->fn, &x, 1, &y, 1) != CR_OK)
                    return -1;
                s += y.d[0];
            }
        t[r] = (bench_now_ns() - t0) / (REPS * BATCH);
        g_sink = s;
    }
    return bench_median(t, RUNS);
}

/* The taped gradient and the dual derivative at a point against a central difference. */
static int check(cr_tape *tp, const op *o)
{
    double x = 0.5 * (o->lo + o->hi) + 0.1 * (o->hi - o->lo), h = 1e-6;
    double fd = (o->primal(x + h) - o->primal(x - h)) / (2 * h), g = NAN;
    cr_tape_reset(tp);
    cr_var v = cr_tape_input(tp, x);
    cr_var y = cr_tape_call1(tp, o->fn, &v, 1);
    if (cr_tape_gradient(tp, y, &v, 1, &g) != CR_OK || !(fabs(g - fd) <= 1e-6 * (1 + fabs(fd)))) {
        fprintf(stderr, "chainrules-bench-scalar: %s: taped derivative %.17g, FD %.17g: %s\n",
                o->name, g, fd, cr_tape_errmsg(tp));
        return 1;
    }
    cr_dual d = cr_dual_var(x, 0), r;
    if (cr_dual_call(NULL, NULL, o->fn, &d, 1, &r, 1) != CR_OK ||
        !(fabs(r.d[0] - fd) <= 1e-6 * (1 + fabs(fd)))) {
        fprintf(stderr, "chainrules-bench-scalar: %s: dual derivative %.17g, FD %.17g\n", o->name,
                r.d[0], fd);
        return 1;
    }
    return 0;
}

static int wanted(int argc, char **argv, const char *name)
{
    if (argc <= 1)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    cr_ctx *ctx;
    cr_tape *tp;
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_tape_new(ctx, NULL, &tp) != CR_OK) {
        fprintf(stderr, "chainrules-bench-scalar: out of memory\n");
        return 1;
    }
    int rc = 0;
    for (size_t k = 0; k < sizeof k_ops / sizeof k_ops[0]; k++) {
        const op *o = &k_ops[k];
        if (!wanted(argc, argv, o->name))
            continue;
        if (check(tp, o) != 0) {
            rc = 1;
            continue;
        }
        fill_inputs(o);
        double p = time_primal(o), sweep = NAN;
        double taped = time_taped(tp, o, &sweep);
        double dual = time_dual(o);
        if (taped < 0 || dual < 0) {
            fprintf(stderr, "chainrules-bench-scalar: %s failed: %s\n", o->name,
                    cr_tape_errmsg(tp));
            rc = 1;
            continue;
        }
        printf("tape_ratio_%s %.2f x\n", o->name, taped / p);
        printf("dual_ratio_%s %.2f x\n", o->name, dual / p);
        printf("sweep_ns_%s %.2f ns\n", o->name, sweep);
    }
    cr_tape_free(tp);
    cr_ctx_free(ctx);
    return rc;
}
