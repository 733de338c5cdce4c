/*
 * chainrules-bench: the library's speed figures, one line each as `name value unit`,
 * medians of several runs. Never a test: run it by hand (see BENCHMARKS.md).
 *
 *   rrule_sin_ns       cr_rrule(sin) through the registry + cr_pullback_call, per call
 *   rrule_mul_ns       the same for the two-argument *
 *   frule_sin_ns       cr_frule(sin) through the registry, per call
 *   lookup_sin_ns      cr_registry_lookup alone
 *   primal_sin_ns      the plain C sin, for scale
 *
 * Engine figures (src/ad), each a ratio to the plain C primal timed in the same run, or a
 * time per call; every one first checks its gradient against a hand-written one:
 *
 *   chain_ratio        1e6 taped scalar ops (t = t + x[k % 1000] * exp(sin(t)), 250000
 *                      steps of sin, exp, *, +): record + reverse sweep / primal
 *   chain_prepared_ratio  the chain prepared once (cr_prepare_gradient), then
 *                      cr_prepared_value_and_gradient / primal
 *   chain_prepared_vs_tape  that prepared call / record + sweep, timed against each other
 *   rosen_loop_ratio   Rosenbrock, n = 1e6, as a scalar loop: record + sweep / primal
 *   rosen_loop_cursor_ratio  the same loop recorded through a recording cursor (tape.h,
 *                      cr_rec_open ... cr_rec_close: the write position in registers)
 *   tape_bytes_per_op  bytes of records per taped operation of that loop
 *   hvp_ratio          Rosenbrock, n = 1e5, array form as one fused kernel
 *                      (cr_av_kernel_sum over offsets 0 and 1 of x) on a second-order tape:
 *                      record + one Hessian-vector product (cr_tape_ahvp) / the plain C loop
 *   hvp_loop_ratio     Rosenbrock, n = 1e5, scalar loop on a second-order tape:
 *                      record + Hessian-vector product / primal
 *   hvp_loop_sweep_ratio  the Hessian-vector product alone on that recording / primal
 *   rosen_loop_prepared_ratio  Rosenbrock, n = 1e6, scalar loop prepared once
 *                      (cr_prepare_gradient), then cr_prepared_value_and_gradient / primal
 *   hvp_prepared_ratio Rosenbrock, n = 1e4, scalar loop prepared once (cr_prepare_hvp):
 *                      one cr_prepared_hvp (value, gradient, H v) / primal
 *   rosen_array_ratio  Rosenbrock, n = 1e6, on an array variable as one fused kernel
 *                      (kernel.h: cr_av_kernel_sum over offsets 0 and 1 of x): record +
 *                      sweep / the plain C loop
 *   rosen_array_unfused_ratio  the same as array operations (slices, broadcasts, sum)
 *   rosen_array_vs_arrays_ratio  the unfused form / the same array operations in plain C
 *                      (one loop and one temporary per operation)
 *   hvp_array_unfused_ratio  Rosenbrock, n = 1e5, as the unfused array operations on a
 *                      second-order tape: record + one Hessian-vector product
 *                      (cr_tape_ahvp) / the plain C loop
 *   hvp_array_prepared_ratio  the fused kernel form of hvp_ratio prepared once
 *                      (cr_prepare_hvp_arrays): one cr_prepared_hvp_arrays (value,
 *                      gradient, H v) / the plain C loop
 *   hvp_array_unfused_prepared_ratio  the same for the unfused array operations
 *   sum3_ns            value_and_gradient of a[1] + a[2] + a[3] of a length-30 input
 *                      (reset, record, sweep), per call
 *   mse_ns             value_and_gradient of mse = sum((x - y)^2) / 30 over 30 points,
 *                      x an array variable, written as one fused kernel sum (kernel.h,
 *                      Julia's fused sum of a broadcast), per call
 *   mse_prepared_ns    the same from a prepared gradient (its kernel's loops run again)
 *   mse_loop_ns        mse written as a scalar loop (91 taped operations), per call
 *   mse_loop_prepared_ns  the scalar loop from a prepared gradient (recorded once, replayed)
 *   mse_array_unfused_ns  mse as unfused array operations (broadcasts and a sum, which the
 *                      tape records as one-operation kernels), per call
 *   mse_array_unfused_prepared_ns  the unfused form from a prepared gradient (its kernels'
 *                      loops run again)
 *
 * Source-transformation figures (bench_st.c, when chainrules-ad is built): st_chain_ratio,
 * st_rosen_loop_ratio, st_rosen_bytes_per_term, st_mse_ns, st_gmm_vs_hand, st_lstm_vs_hand,
 * st_ba_vs_hand and their hand-written references (BENCHMARKS.md).
 *
 * GradBench's gmm and lstm written against the tape API (bench_tape.c, tape_objectives.c):
 * tape_gmm_ratio, prepared_gmm_ratio, prepared_gmm_vs_tape, tape_gmm_bytes_per_op,
 * prepared_gmm_mem_ratio, and the same for lstm (tape_lstm_ratio, ...).
 *
 * Forward-mode figures (bench_dual.c): dual_ba_ratio (the Jacobians of all ba1 blocks on
 * inline duals, in stages / primal), dual_ba_dense_ratio (the same on one 15-direction type)
 * and dual_chain_ratio (one direction through the chain / primal).
 *
 * Usage: chainrules-bench [figure...]   (no argument: all figures)
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <chainrules.h>
#include <chainrules/kernel.h>
#include <chainrules/tape_inline.h>

#include "bench_util.h"

#ifdef CR_BENCH_ST
#include "bench_st.h"
#endif
#ifdef CR_BENCH_DUAL
#include "bench_dual.h"
#endif
#ifdef CR_BENCH_TAPE
#include "bench_tape.h"
#endif

#define RUNS 7

static cr_ctx *g_ctx;
static cr_arena *g_arena;
static volatile double g_sink;

/* Each kernel runs n iterations and returns a checksum so the work cannot be elided. */
typedef double (*kernel_fn)(long n);

static double k_primal_sin(long n)
{
    double s = 0, x = 0.5;
    for (long i = 0; i < n; i++) {
        s += sin(x);
        x += 1e-9;
    }
    return s;
}

static double k_rrule_sin(long n)
{
    double s = 0;
    cr_value x = cr_value_f64(0.5), y;
    cr_pullback pb;
    cr_tangent dy = cr_tangent_f64(1.0), dx[2];
    for (long i = 0; i < n; i++) {
        if ((i & 1023) == 0)
            cr_arena_reset(g_arena);
        x.u.f64 += 1e-9;
        if (cr_rrule(NULL, g_arena, &cr_fn_sin, &x, 1, &y, &pb) != CR_OK ||
            cr_pullback_call(g_arena, &pb, &dy, dx, 2) != CR_OK)
            return (double)NAN;
        s += dx[1].u.f64;
    }
    return s;
}

static double k_rrule_mul(long n)
{
    double s = 0;
    cr_value a[2] = {cr_value_f64(0.5), cr_value_f64(1.5)}, y;
    cr_pullback pb;
    cr_tangent dy = cr_tangent_f64(1.0), dx[3];
    for (long i = 0; i < n; i++) {
        if ((i & 1023) == 0)
            cr_arena_reset(g_arena);
        a[0].u.f64 += 1e-9;
        if (cr_rrule(NULL, g_arena, &cr_fn_mul, a, 2, &y, &pb) != CR_OK ||
            cr_pullback_call(g_arena, &pb, &dy, dx, 3) != CR_OK)
            return (double)NAN;
        s += dx[1].u.f64 + dx[2].u.f64;
    }
    return s;
}

static double k_frule_sin(long n)
{
    double s = 0;
    cr_value x = cr_value_f64(0.5), y;
    cr_tangent d[2] = {cr_tangent_zero(), cr_tangent_f64(1.0)}, dy;
    for (long i = 0; i < n; i++) {
        x.u.f64 += 1e-9;
        if (cr_frule(NULL, g_arena, d, &cr_fn_sin, &x, 1, &y, &dy) != CR_OK)
            return (double)NAN;
        s += dy.u.f64;
    }
    return s;
}

static double k_lookup_sin(long n)
{
    const cr_registry *reg = cr_registry_builtin();
    cr_value x = cr_value_f64(0.5);
    cr_rule_match m;
    double s = 0;
    for (long i = 0; i < n; i++) {
        if (cr_registry_lookup(reg, NULL, CR_MODE_RRULE, &cr_fn_sin, &x, 1, &m) != CR_OK)
            return (double)NAN;
        s += (double)(m.def != NULL);
    }
    return s;
}

/* Checks a kernel's derivative against a central difference of the primal before timing:
 * a benchmark of a wrong gradient is worthless. */
static int check_rules(void)
{
    cr_value x = cr_value_f64(0.7), y;
    cr_pullback pb;
    cr_tangent dy = cr_tangent_f64(1.0), dx[2];
    cr_arena_reset(g_arena);
    if (cr_rrule(NULL, g_arena, &cr_fn_sin, &x, 1, &y, &pb) != CR_OK ||
        cr_pullback_call(g_arena, &pb, &dy, dx, 2) != CR_OK)
        return 1;
    double h = 1e-6, fd = (sin(0.7 + h) - sin(0.7 - h)) / (2 * h);
    if (fabs(dx[1].u.f64 - fd) > 1e-8) {
        fprintf(stderr, "chainrules-bench: sin pullback %.17g differs from FD %.17g\n", dx[1].u.f64,
                fd);
        return 1;
    }
    return 0;
}

static double time_per_op(kernel_fn k, long n)
{
    double t[RUNS];
    k(n / 10); /* warm up */
    for (int r = 0; r < RUNS; r++) {
        double t0 = bench_now_ns();
        g_sink = k(n);
        t[r] = (bench_now_ns() - t0) / (double)n;
        if (isnan(g_sink))
            return (double)NAN;
    }
    return bench_median(t, RUNS);
}

static const struct {
    const char *name;
    kernel_fn fn;
    long n;
} k_figures[] = {
    {"primal_sin_ns", k_primal_sin, 2000000}, {"lookup_sin_ns", k_lookup_sin, 2000000},
    {"frule_sin_ns", k_frule_sin, 1000000},   {"rrule_sin_ns", k_rrule_sin, 1000000},
    {"rrule_mul_ns", k_rrule_mul, 1000000},
};

/* ---- Engine figures ---------------------------------------------------------------------- */

/* Fails the run with a message when a gradient differs from the hand-written one. */
static int check_close(const char *what, const double *got, const double *want, size_t n,
                       double rtol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= rtol * fmax(1.0, fabs(want[i])))) {
            fprintf(stderr, "chainrules-bench: %s[%zu] = %.17g, hand-written %.17g\n", what, i,
                    got[i], want[i]);
            return 1;
        }
    return 0;
}

static double median_time(double (*run)(void *env), void *env, int runs)
{
    double t[RUNS];
    if (runs > RUNS)
        runs = RUNS;
    g_sink = run(env); /* warm up */
    for (int r = 0; r < runs; r++) {
        double t0 = bench_now_ns();
        g_sink = run(env);
        t[r] = bench_now_ns() - t0;
        if (isnan(g_sink))
            return (double)NAN;
    }
    return bench_median(t, runs);
}

/* The ratio of two timings, measured in alternation so that a change of the machine's
 * load affects both alike; the median of RUNS ratios. */
static double median_ratio(double (*num)(void *env), double (*den)(void *env), void *env)
{
    double r[RUNS];
    g_sink = num(env) + den(env); /* warm up */
    for (int i = 0; i < RUNS; i++) {
        double t0 = bench_now_ns();
        g_sink = den(env);
        double t1 = bench_now_ns();
        g_sink += num(env);
        double t2 = bench_now_ns();
        if (isnan(g_sink))
            return (double)NAN;
        r[i] = (t2 - t1) / (t1 - t0);
    }
    return bench_median(r, RUNS);
}

/* chain: t = t + x[k % 1000] * exp(sin(t)), 250000 steps = 1e6 operations */
#define CHAIN_N     1000
#define CHAIN_STEPS 250000L

typedef struct chain_env {
    double x[CHAIN_N];
    double grad[CHAIN_N];
    cr_tape *tape;
    cr_prepared *prep;
} chain_env;

static double chain_primal(void *env)
{
    const double *x = ((chain_env *)env)->x;
    double t = 0.0;
    for (long k = 0; k < CHAIN_STEPS; k++)
        t = t + x[k % CHAIN_N] * exp(sin(t));
    return t;
}

static cr_status chain_taped(cr_tape *tp, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var t = cr_const(0.0);
    for (long k = 0; k < CHAIN_STEPS; k++)
        t = cr_add(tp, t, cr_mul(tp, x[k % CHAIN_N], cr_exp(tp, cr_sin(tp, t))));
    y[0] = t;
    return cr_tape_status(tp);
}

static double chain_gradient(void *env)
{
    chain_env *e = env;
    double y;
    if (cr_tape_value_and_gradient(e->tape, chain_taped, NULL, e->x, CHAIN_N, &y, e->grad) != CR_OK)
        return (double)NAN;
    return y + e->grad[0];
}

/* The adjoint of the chain written by hand: store the t_k, then walk back. */
static void chain_grad_hand(const double *x, double *g)
{
    double *ts = malloc((size_t)CHAIN_STEPS * sizeof *ts);
    double t = 0.0, tbar = 1.0;
    for (long k = 0; k < CHAIN_STEPS; k++) {
        ts[k] = t;
        t = t + x[k % CHAIN_N] * exp(sin(t));
    }
    for (size_t i = 0; i < CHAIN_N; i++)
        g[i] = 0.0;
    for (long k = CHAIN_STEPS - 1; k >= 0; k--) {
        double e = exp(sin(ts[k]));
        g[k % CHAIN_N] += tbar * e;
        tbar *= 1.0 + x[k % CHAIN_N] * e * cos(ts[k]);
    }
    free(ts);
}

static int fig_chain(double *out)
{
    static chain_env e;
    for (size_t i = 0; i < CHAIN_N; i++)
        e.x[i] = 1e-3 * (1.0 + sin((double)i));
    if (cr_tape_new(g_ctx, NULL, &e.tape) != CR_OK)
        return 1;
    double want[CHAIN_N];
    chain_grad_hand(e.x, want);
    if (isnan(chain_gradient(&e)) || check_close("chain gradient", e.grad, want, CHAIN_N, 1e-9))
        return 1;
    *out = median_ratio(chain_gradient, chain_primal, &e);
    cr_tape_free(e.tape);
    return isnan(*out);
}

/* The chain prepared once (cr_prepare_gradient): value and gradient at the inputs replayed. */
static double chain_prepared(void *env)
{
    chain_env *e = env;
    double y;
    if (cr_prepared_value_and_gradient(e->prep, e->x, CHAIN_N, &y, e->grad) != CR_OK)
        return (double)NAN;
    return y + e->grad[0];
}

/* chain_prepared_ratio (against the primal) or chain_prepared_vs_tape (against a recording
 * and its sweep). */
static int chain_prepared_fig(double *out, double (*den)(void *env))
{
    static chain_env e;
    for (size_t i = 0; i < CHAIN_N; i++)
        e.x[i] = 1e-3 * (1.0 + sin((double)i));
    if (cr_tape_new(g_ctx, NULL, &e.tape) != CR_OK ||
        cr_prepare_gradient(g_ctx, NULL, chain_taped, NULL, e.x, CHAIN_N, &e.prep) != CR_OK)
        return 1;
    double want[CHAIN_N];
    chain_grad_hand(e.x, want);
    int err = isnan(chain_prepared(&e)) ||
              check_close("prepared chain gradient", e.grad, want, CHAIN_N, 1e-9);
    if (!err)
        *out = median_ratio(chain_prepared, den, &e);
    cr_prepared_free(e.prep);
    cr_tape_free(e.tape);
    return err || isnan(*out);
}

static int fig_chain_prepared(double *out)
{
    return chain_prepared_fig(out, chain_primal);
}

static int fig_chain_prepared_vs_tape(double *out)
{
    return chain_prepared_fig(out, chain_gradient);
}

/* Rosenbrock, sum 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2 */
typedef struct rosen_env {
    size_t n;
    double *x, *grad, *v, *hv;
    cr_tape *tape;
    cr_var y;
    cr_var *xs;
} rosen_env;

static double rosen_primal(void *env)
{
    const rosen_env *e = env;
    const double *x = e->x;
    double s = 0.0;
    for (size_t i = 0; i + 1 < e->n; i++) {
        double a = x[i + 1] - x[i] * x[i], b = 1.0 - x[i];
        s += 100.0 * a * a + b * b;
    }
    return s;
}

static cr_status rosen_taped(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0), hundred = cr_const(100.0), one = cr_const(1.0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_sub(t, x[i + 1], cr_mul(t, x[i], x[i]));
        cr_var b = cr_sub(t, one, x[i]);
        s = cr_add(t, s, cr_add(t, cr_mul(t, hundred, cr_mul(t, a, a)), cr_mul(t, b, b)));
    }
    y[0] = s;
    return cr_tape_status(t);
}

/* The same loop through a recording cursor (tape.h, cr_rec): the write position stays in
 * registers across the operations. */
static cr_status rosen_taped_rec(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m,
                                 void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0), hundred = cr_const(100.0), one = cr_const(1.0);
    cr_rec r;
    cr_rec_open(&r, t);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_rec_sub(&r, x[i + 1], cr_rec_mul(&r, x[i], x[i]));
        cr_var b = cr_rec_sub(&r, one, x[i]);
        s = cr_rec_add(
            &r, s,
            cr_rec_add(&r, cr_rec_mul(&r, hundred, cr_rec_mul(&r, a, a)), cr_rec_mul(&r, b, b)));
    }
    cr_rec_close(&r);
    y[0] = s;
    return cr_tape_status(t);
}

static double rosen_gradient_with(rosen_env *e, cr_ad_fn f)
{
    double y;
    if (cr_tape_value_and_gradient(e->tape, f, NULL, e->x, e->n, &y, e->grad) != CR_OK)
        return (double)NAN;
    return y + e->grad[0];
}

static double rosen_gradient(void *env)
{
    return rosen_gradient_with(env, rosen_taped);
}

static double rosen_gradient_cursor(void *env)
{
    return rosen_gradient_with(env, rosen_taped_rec);
}

static void rosen_grad_hand(const double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++)
        g[i] = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i];
        g[i] += -400.0 * a * x[i] - 2.0 * (1.0 - x[i]);
        g[i + 1] += 200.0 * a;
    }
}

/* H v of Rosenbrock written by hand (the Hessian is tridiagonal). */
static void rosen_hvp_hand(const double *x, const double *v, size_t n, double *hv)
{
    for (size_t i = 0; i < n; i++)
        hv[i] = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        double hii = 1200.0 * x[i] * x[i] - 400.0 * x[i + 1] + 2.0, hij = -400.0 * x[i];
        hv[i] += hii * v[i] + hij * v[i + 1];
        hv[i + 1] += hij * v[i] + 200.0 * v[i + 1];
    }
}

static int rosen_setup(rosen_env *e, size_t n, uint32_t flags)
{
    e->n = n;
    e->x = malloc(n * sizeof *e->x);
    e->grad = malloc(n * sizeof *e->grad);
    e->v = malloc(n * sizeof *e->v);
    e->hv = malloc(n * sizeof *e->hv);
    e->xs = malloc(n * sizeof *e->xs);
    if (!e->x || !e->grad || !e->v || !e->hv || !e->xs)
        return 1;
    for (size_t i = 0; i < n; i++) {
        e->x[i] = 0.5 + 0.4 * sin(0.37 * (double)i);
        e->v[i] = cos(0.11 * (double)i);
    }
    cr_tape_params p = {.struct_size = sizeof p, .flags = flags};
    return cr_tape_new(g_ctx, &p, &e->tape) != CR_OK;
}

static void rosen_teardown(rosen_env *e)
{
    cr_tape_free(e->tape);
    free(e->x);
    free(e->grad);
    free(e->v);
    free(e->hv);
    free(e->xs);
}

static double g_tape_bytes_per_op = (double)NAN;

/* rosen_loop_ratio (the loop on the tape) or rosen_loop_cursor_ratio (through a cursor). */
static int rosen_loop_fig(double *out, double (*grad)(void *))
{
    rosen_env e;
    int err = rosen_setup(&e, 1000000, 0);
    double *want = malloc(e.n * sizeof *want);
    if (err || want == NULL || isnan(grad(&e)))
        return 1;
    rosen_grad_hand(e.x, e.n, want);
    err = check_close("rosenbrock gradient", e.grad, want, e.n, 1e-12);
    free(want);
    if (err)
        return 1;
    cr_tape_stats st;
    cr_tape_stats_get(e.tape, &st);
    g_tape_bytes_per_op = (double)st.record_bytes / (double)(st.nrecords - st.ninputs);
    *out = median_ratio(grad, rosen_primal, &e);
    rosen_teardown(&e);
    return isnan(*out);
}

static int fig_rosen_loop(double *out)
{
    return rosen_loop_fig(out, rosen_gradient);
}

static int fig_rosen_loop_cursor(double *out)
{
    return rosen_loop_fig(out, rosen_gradient_cursor);
}

static int fig_tape_bytes(double *out)
{
    if (isnan(g_tape_bytes_per_op)) {
        double r;
        if (fig_rosen_loop(&r))
            return 1;
    }
    *out = g_tape_bytes_per_op;
    return 0;
}

static double rosen_hvp_full(void *env)
{
    rosen_env *e = env;
    if (cr_tape_record(e->tape, rosen_taped, NULL, e->x, e->n, e->xs, &e->y, 1) != CR_OK ||
        cr_tape_hvp(e->tape, e->y, e->xs, e->n, e->v, e->hv, NULL) != CR_OK)
        return (double)NAN;
    return e->hv[0];
}

static double rosen_hvp_sweep(void *env)
{
    rosen_env *e = env;
    if (cr_tape_hvp(e->tape, e->y, e->xs, e->n, e->v, e->hv, NULL) != CR_OK)
        return (double)NAN;
    return e->hv[0];
}

static double g_hvp_sweep_ratio = (double)NAN;

static int fig_hvp_loop(double *out)
{
    rosen_env e;
    int err = rosen_setup(&e, 100000, CR_TAPE_SECOND_ORDER);
    double *want = malloc(e.n * sizeof *want);
    if (err || want == NULL || isnan(rosen_hvp_full(&e)))
        return 1;
    rosen_hvp_hand(e.x, e.v, e.n, want);
    err = check_close("rosenbrock hvp", e.hv, want, e.n, 1e-12);
    free(want);
    if (err)
        return 1;
    *out = median_ratio(rosen_hvp_full, rosen_primal, &e);
    g_hvp_sweep_ratio = median_ratio(rosen_hvp_sweep, rosen_primal, &e);
    rosen_teardown(&e);
    return isnan(*out);
}

/* The same loop prepared once for H v (cr_prepare_hvp): value, gradient and H v at the
 * inputs, replayed (hvp_prepared_ratio). */
typedef struct prep_hvp_env {
    rosen_env r;
    cr_prepared *p;
} prep_hvp_env;

static double rosen_prepared_hvp(void *env)
{
    prep_hvp_env *e = env;
    double y;
    if (cr_prepared_hvp(e->p, e->r.x, e->r.n, e->r.v, e->r.hv, &y, e->r.grad) != CR_OK)
        return (double)NAN;
    return y + e->r.hv[0] + e->r.grad[0];
}

static double rosen_primal_p(void *env)
{
    return rosen_primal(&((prep_hvp_env *)env)->r);
}

static int fig_hvp_prepared(double *out)
{
    prep_hvp_env e;
    int err = rosen_setup(&e.r, 10000, 0);
    double *want = malloc(e.r.n * sizeof *want), *gwant = malloc(e.r.n * sizeof *gwant);
    if (err || want == NULL || gwant == NULL ||
        cr_prepare_hvp(g_ctx, NULL, rosen_taped, NULL, e.r.x, e.r.n, &e.p) != CR_OK)
        return 1;
    /* Checked at other inputs than the recording's, against the hand-written H v and
     * gradient. */
    for (size_t i = 0; i < e.r.n; i++)
        e.r.x[i] = 0.4 + 0.5 * cos(0.23 * (double)i);
    err = isnan(rosen_prepared_hvp(&e));
    if (!err) {
        rosen_hvp_hand(e.r.x, e.r.v, e.r.n, want);
        rosen_grad_hand(e.r.x, e.r.n, gwant);
        err = check_close("prepared rosenbrock hvp", e.r.hv, want, e.r.n, 1e-12) ||
              check_close("prepared rosenbrock gradient", e.r.grad, gwant, e.r.n, 1e-12);
    }
    free(want);
    free(gwant);
    if (!err)
        *out = median_ratio(rosen_prepared_hvp, rosen_primal_p, &e);
    cr_prepared_free(e.p);
    rosen_teardown(&e.r);
    return err || isnan(*out);
}

/* Rosenbrock n = 1e6 as a scalar loop prepared once (cr_prepare_gradient), then value and
 * gradient at new inputs (rosen_loop_prepared_ratio; rosen_loop_ratio records at each call). */
static double rosen_prepared_gradient(void *env)
{
    prep_hvp_env *e = env;
    double y;
    if (cr_prepared_value_and_gradient(e->p, e->r.x, e->r.n, &y, e->r.grad) != CR_OK)
        return (double)NAN;
    return y + e->r.grad[0];
}

static int fig_rosen_loop_prepared(double *out)
{
    prep_hvp_env e;
    int err = rosen_setup(&e.r, 1000000, 0);
    double *want = malloc(e.r.n * sizeof *want);
    if (err || want == NULL ||
        cr_prepare_gradient(g_ctx, NULL, rosen_taped, NULL, e.r.x, e.r.n, &e.p) != CR_OK)
        return 1;
    for (size_t i = 0; i < e.r.n; i++) /* checked at other inputs than the recording's */
        e.r.x[i] = 0.4 + 0.5 * cos(0.23 * (double)i);
    err = isnan(rosen_prepared_gradient(&e));
    if (!err) {
        rosen_grad_hand(e.r.x, e.r.n, want);
        err = check_close("prepared rosenbrock gradient", e.r.grad, want, e.r.n, 1e-12);
    }
    free(want);
    if (!err)
        *out = median_ratio(rosen_prepared_gradient, rosen_primal_p, &e);
    cr_prepared_free(e.p);
    rosen_teardown(&e.r);
    return err || isnan(*out);
}

static int fig_hvp_sweep(double *out)
{
    if (isnan(g_hvp_sweep_ratio)) {
        double r;
        if (fig_hvp_loop(&r))
            return 1;
    }
    *out = g_hvp_sweep_ratio;
    return 0;
}

/* Rosenbrock as array operations on the tape (array variables, rules' pullbacks):
 * sum(100 .* (x[1:] .- x[:-1].^2).^2 .+ (1 .- x[:-1]).^2) */
typedef struct rosen_arr_env {
    rosen_env r;
    cr_array xa, ga;
} rosen_arr_env;

static cr_var rosen_array_taped(cr_tape *t, cr_avar X, size_t n)
{
    cr_avar lo = cr_av_slice(t, X, 0, (int64_t)n - 1), hi = cr_av_slice(t, X, 1, (int64_t)n);
    cr_avar a = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_arr(hi),
                                 cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(lo))));
    cr_avar b = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_var(cr_const(1.0)), cr_targ_arr(lo));
    cr_avar s =
        cr_av_broadcast2(t, &cr_fn_add,
                         cr_targ_arr(cr_av_broadcast2(
                             t, &cr_fn_mul, cr_targ_var(cr_const(100.0)),
                             cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(a))))),
                         cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(b))));
    return cr_av_sum(t, s);
}

/* The same as one fused kernel: sum over i < n - 1 of rosen_term(x[i], x[i + 1]). */
#define ROSEN_TERM(x) \
    cr_k_add(cr_k_mul(100.0, cr_k_sq(cr_k_sub(x[1], cr_k_sq(x[0])))), cr_k_sq(cr_k_sub(1.0, x[0])))
CR_KERNEL(rosen_term, 2, ROSEN_TERM);

static double rosen_kernel_gradient(void *env)
{
    rosen_arr_env *e = env;
    cr_tape *t = e->r.tape;
    cr_tape_reset(t);
    cr_avar X = cr_tape_array_input(t, &e->xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
    cr_var y = cr_av_kernel_sum(t, &rosen_term, in, 2, e->r.n - 1);
    cr_array *g = &e->ga;
    if (cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &g) != CR_OK)
        return (double)NAN;
    return y.v + e->r.grad[0];
}

static double rosen_array_gradient(void *env)
{
    rosen_arr_env *e = env;
    cr_tape *t = e->r.tape;
    cr_tape_reset(t);
    cr_avar X = cr_tape_array_input(t, &e->xa);
    cr_var y = rosen_array_taped(t, X, e->r.n);
    cr_array *g = &e->ga;
    if (cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &g) != CR_OK)
        return (double)NAN;
    return y.v + e->r.grad[0];
}

/* The same array operations in plain C, one loop and one temporary per operation: the
 * primal the array form is compared with in rosen_array_vs_arrays_ratio. */
static double *g_tmp[6];

static double rosen_arrays_primal(void *env)
{
    const rosen_arr_env *e = env;
    const double *x = e->r.x;
    size_t m = e->r.n - 1;
    double *sq = g_tmp[0], *a = g_tmp[1], *a2 = g_tmp[2], *b = g_tmp[3], *b2 = g_tmp[4],
           *s = g_tmp[5];
    for (size_t i = 0; i < m; i++)
        sq[i] = x[i] * x[i];
    for (size_t i = 0; i < m; i++)
        a[i] = x[i + 1] - sq[i];
    for (size_t i = 0; i < m; i++)
        a2[i] = a[i] * a[i];
    for (size_t i = 0; i < m; i++)
        a2[i] = 100.0 * a2[i];
    for (size_t i = 0; i < m; i++)
        b[i] = 1.0 - x[i];
    for (size_t i = 0; i < m; i++)
        b2[i] = b[i] * b[i];
    for (size_t i = 0; i < m; i++)
        s[i] = a2[i] + b2[i];
    double r = 0.0;
    for (size_t i = 0; i < m; i++)
        r += s[i];
    return r;
}

static double g_rosen_vs_arrays = (double)NAN;
static double g_rosen_unfused = (double)NAN;

static int fig_rosen_array(double *out)
{
    rosen_arr_env e;
    int err = rosen_setup(&e.r, 1000000, 0);
    double *want = malloc(e.r.n * sizeof *want);
    for (size_t k = 0; k < 6; k++)
        err |= (g_tmp[k] = malloc(e.r.n * sizeof(double))) == NULL;
    if (err || want == NULL)
        return 1;
    e.xa = cr_array_vector(e.r.x, e.r.n);
    e.ga = cr_array_vector(e.r.grad, e.r.n);
    if (isnan(rosen_array_gradient(&e))) {
        fprintf(stderr, "rosen_array: %s\n", cr_tape_errmsg(e.r.tape));
        return 1;
    }
    rosen_grad_hand(e.r.x, e.r.n, want);
    err = check_close("rosenbrock array gradient", e.r.grad, want, e.r.n, 1e-12);
    if (!err && isnan(rosen_kernel_gradient(&e))) {
        fprintf(stderr, "rosen_array (kernel): %s\n", cr_tape_errmsg(e.r.tape));
        err = 1;
    }
    if (!err)
        err = check_close("rosenbrock kernel gradient", e.r.grad, want, e.r.n, 1e-12);
    free(want);
    if (err)
        return 1;
    *out = median_ratio(rosen_kernel_gradient, rosen_primal, &e);
    g_rosen_unfused = median_ratio(rosen_array_gradient, rosen_primal, &e);
    g_rosen_vs_arrays = median_ratio(rosen_array_gradient, rosen_arrays_primal, &e);
    rosen_teardown(&e.r);
    for (size_t k = 0; k < 6; k++)
        free(g_tmp[k]);
    return 0;
}

static int fig_rosen_vs_arrays(double *out)
{
    if (isnan(g_rosen_vs_arrays) && fig_rosen_array(&(double){0}) != 0)
        return 1;
    *out = g_rosen_vs_arrays;
    return 0;
}

static int fig_rosen_unfused(double *out)
{
    if (isnan(g_rosen_unfused) && fig_rosen_array(&(double){0}) != 0)
        return 1;
    *out = g_rosen_unfused;
    return 0;
}

/* The array form of Rosenbrock on a second-order tape: record, then one H v with respect to
 * the array input. */
typedef struct hvp_arr_env {
    rosen_env r;
    cr_array xa, va, hva;
} hvp_arr_env;

static double rosen_array_hvp(void *env)
{
    hvp_arr_env *e = env;
    cr_tape *t = e->r.tape;
    cr_tape_reset(t);
    cr_avar X = cr_tape_array_input(t, &e->xa);
    cr_var y = rosen_array_taped(t, X, e->r.n);
    const cr_array *v = &e->va;
    cr_array *hv = &e->hva;
    if (cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &v, &hv) != CR_OK)
        return (double)NAN;
    return y.v + e->r.hv[0];
}

static int fig_hvp_array_unfused(double *out)
{
    hvp_arr_env e;
    int err = rosen_setup(&e.r, 100000, CR_TAPE_SECOND_ORDER);
    double *want = malloc(e.r.n * sizeof *want);
    if (err || want == NULL)
        return 1;
    e.xa = cr_array_vector(e.r.x, e.r.n);
    e.va = cr_array_vector(e.r.v, e.r.n);
    e.hva = cr_array_vector(e.r.hv, e.r.n);
    if (isnan(rosen_array_hvp(&e))) {
        fprintf(stderr, "hvp_array: %s\n", cr_tape_errmsg(e.r.tape));
        return 1;
    }
    rosen_hvp_hand(e.r.x, e.r.v, e.r.n, want);
    err = check_close("rosenbrock array hvp", e.r.hv, want, e.r.n, 1e-12);
    free(want);
    if (err)
        return 1;
    *out = median_ratio(rosen_array_hvp, rosen_primal, &e);
    rosen_teardown(&e.r);
    return isnan(*out);
}

/* The same as one fused kernel sum (hvp_ratio): record, then one H v. */
static double rosen_kernel_hvp(void *env)
{
    hvp_arr_env *e = env;
    cr_tape *t = e->r.tape;
    cr_tape_reset(t);
    cr_avar X = cr_tape_array_input(t, &e->xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
    cr_var y = cr_av_kernel_sum(t, &rosen_term, in, 2, e->r.n - 1);
    const cr_array *v = &e->va;
    cr_array *hv = &e->hva;
    if (cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &v, &hv) != CR_OK)
        return (double)NAN;
    return y.v + e->r.hv[0];
}

static int fig_hvp(double *out)
{
    hvp_arr_env e;
    int err = rosen_setup(&e.r, 100000, CR_TAPE_SECOND_ORDER);
    double *want = malloc(e.r.n * sizeof *want);
    if (err || want == NULL)
        return 1;
    e.xa = cr_array_vector(e.r.x, e.r.n);
    e.va = cr_array_vector(e.r.v, e.r.n);
    e.hva = cr_array_vector(e.r.hv, e.r.n);
    if (isnan(rosen_kernel_hvp(&e))) {
        fprintf(stderr, "hvp (kernel): %s\n", cr_tape_errmsg(e.r.tape));
        return 1;
    }
    rosen_hvp_hand(e.r.x, e.r.v, e.r.n, want);
    err = check_close("rosenbrock kernel hvp", e.r.hv, want, e.r.n, 1e-12);
    free(want);
    if (err)
        return 1;
    *out = median_ratio(rosen_kernel_hvp, rosen_primal, &e);
    rosen_teardown(&e.r);
    return isnan(*out);
}

/* The same two forms prepared once for H v (cr_prepare_hvp_arrays), then one
 * cr_prepared_hvp_arrays (value, gradient, H v) per call, checked first at other inputs and
 * another direction than the recording's. */
typedef struct hvp_prep_env {
    hvp_arr_env h;
    cr_prepared *p;
    cr_array ga;
} hvp_prep_env;

static cr_status rosen_kernel_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_kin in[2] = {cr_kin_arr(xs[0], 0), cr_kin_arr(xs[0], 1)};
    *y = cr_av_kernel_sum(t, &rosen_term, in, 2, cr_array_numel(xs[0].a) - 1);
    return cr_tape_status(t);
}

static cr_status rosen_unfused_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    *y = rosen_array_taped(t, xs[0], cr_array_numel(xs[0].a));
    return cr_tape_status(t);
}

static double rosen_prepared_ahvp(void *env)
{
    hvp_prep_env *e = env;
    double y;
    const cr_array *x = &e->h.xa, *v = &e->h.va;
    cr_array *hv = &e->h.hva, *g = &e->ga;
    if (cr_prepared_hvp_arrays(e->p, &x, 1, &v, &hv, &y, &g) != CR_OK)
        return (double)NAN;
    return y + e->h.r.hv[0] + e->h.r.grad[0];
}

static int fig_hvp_prep(cr_ad_array_fn f, const char *what, double *out)
{
    hvp_prep_env e = {.p = NULL};
    int err = rosen_setup(&e.h.r, 100000, 0);
    double *want = malloc(e.h.r.n * sizeof *want), *gw = malloc(e.h.r.n * sizeof *gw);
    if (err || want == NULL || gw == NULL)
        return 1;
    e.h.xa = cr_array_vector(e.h.r.x, e.h.r.n);
    e.h.va = cr_array_vector(e.h.r.v, e.h.r.n);
    e.h.hva = cr_array_vector(e.h.r.hv, e.h.r.n);
    e.ga = cr_array_vector(e.h.r.grad, e.h.r.n);
    const cr_array *xs[1] = {&e.h.xa};
    if (cr_prepare_hvp_arrays(g_ctx, NULL, f, NULL, xs, 1, &e.p) != CR_OK) {
        fprintf(stderr, "%s: %s\n", what, cr_ctx_errmsg(g_ctx));
        return 1;
    }
    for (size_t i = 0; i < e.h.r.n; i++) { /* elsewhere than recorded */
        e.h.r.x[i] += 0.1 * cos(0.23 * (double)i);
        e.h.r.v[i] = sin(0.07 * (double)i + 0.3);
    }
    if (isnan(rosen_prepared_ahvp(&e))) {
        fprintf(stderr, "%s: %s\n", what, cr_ctx_errmsg(g_ctx));
        return 1;
    }
    rosen_hvp_hand(e.h.r.x, e.h.r.v, e.h.r.n, want);
    rosen_grad_hand(e.h.r.x, e.h.r.n, gw);
    err = check_close(what, e.h.r.hv, want, e.h.r.n, 1e-12) ||
          check_close(what, e.h.r.grad, gw, e.h.r.n, 1e-12);
    free(want);
    free(gw);
    if (!err)
        *out = median_ratio(rosen_prepared_ahvp, rosen_primal, &e); /* (r first) */
    cr_prepared_free(e.p);
    rosen_teardown(&e.h.r);
    return err || isnan(*out);
}

static int fig_hvp_array_prepared(double *out)
{
    return fig_hvp_prep(rosen_kernel_fn, "prepared kernel hvp", out);
}

static int fig_hvp_array_unfused_prepared(double *out)
{
    return fig_hvp_prep(rosen_unfused_fn, "prepared unfused array hvp", out);
}

/* Small functions: the engine's fixed cost per call, on a length-30 input. */
#define SMALL_N 30

static double k_mse_target[SMALL_N];

static cr_status mse_taped(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i < n; i++) {
        cr_var d = cr_sub(t, x[i], cr_const(k_mse_target[i]));
        s = cr_add(t, s, cr_mul(t, d, d));
    }
    y[0] = cr_div(t, s, cr_const((double)n));
    return cr_tape_status(t);
}

typedef struct small_env {
    cr_tape *tape;
    cr_ad_fn f;
    size_t n;
    double x[SMALL_N], grad[SMALL_N];
} small_env;

#define SMALL_CALLS 100000

static double small_calls(void *env)
{
    small_env *e = env;
    double s = 0, y;
    for (long i = 0; i < SMALL_CALLS; i++) {
        e->x[0] += 1e-9;
        if (cr_tape_value_and_gradient(e->tape, e->f, NULL, e->x, e->n, &y, e->grad) != CR_OK)
            return (double)NAN;
        s += y + e->grad[0];
    }
    return s;
}

static void small_inputs(double *x)
{
    for (size_t i = 0; i < SMALL_N; i++) {
        x[i] = 1.0 + 0.1 * (double)i;
        k_mse_target[i] = sin((double)i);
    }
}

static int fig_small(cr_ad_fn f, const double *want_grad, double *out)
{
    small_env e = {.f = f, .n = SMALL_N};
    small_inputs(e.x);
    if (cr_tape_new(g_ctx, NULL, &e.tape) != CR_OK)
        return 1;
    double y;
    if (cr_tape_value_and_gradient(e.tape, f, NULL, e.x, SMALL_N, &y, e.grad) != CR_OK ||
        check_close("small gradient", e.grad, want_grad, SMALL_N, 1e-15))
        return 1;
    *out = median_time(small_calls, &e, RUNS) / SMALL_CALLS;
    cr_tape_free(e.tape);
    return isnan(*out);
}

/* a[1] + a[2] + a[3] of a length-30 input */
static cr_status sum3_taped(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_add(t, cr_add(t, x[0], x[1]), x[2]);
    return cr_tape_status(t);
}

static int fig_sum3(double *out)
{
    double want[SMALL_N] = {1.0, 1.0, 1.0};
    return fig_small(sum3_taped, want, out);
}

static void mse_grad_hand(const double *x, double *want)
{
    for (size_t i = 0; i < SMALL_N; i++)
        want[i] = 2.0 * (x[i] - k_mse_target[i]) / (double)SMALL_N;
}

static int fig_mse_loop(double *out)
{
    double want[SMALL_N], x[SMALL_N];
    small_inputs(x);
    mse_grad_hand(x, want);
    return fig_small(mse_taped, want, out);
}

typedef struct prep_env {
    cr_prepared *p;
    double x[SMALL_N], grad[SMALL_N];
} prep_env;

static double prepared_calls(void *env)
{
    prep_env *e = env;
    double s = 0, y;
    for (long i = 0; i < SMALL_CALLS; i++) {
        e->x[0] += 1e-9;
        if (cr_prepared_value_and_gradient(e->p, e->x, SMALL_N, &y, e->grad) != CR_OK)
            return (double)NAN;
        s += y + e->grad[0];
    }
    return s;
}

static int fig_mse_loop_prepared(double *out)
{
    prep_env e;
    double want[SMALL_N], y;
    small_inputs(e.x);
    mse_grad_hand(e.x, want);
    if (cr_prepare_gradient(g_ctx, NULL, mse_taped, NULL, e.x, SMALL_N, &e.p) != CR_OK)
        return 1;
    if (cr_prepared_value_and_gradient(e.p, e.x, SMALL_N, &y, e.grad) != CR_OK ||
        check_close("prepared mse gradient", e.grad, want, SMALL_N, 1e-15))
        return 1;
    *out = median_time(prepared_calls, &e, RUNS) / SMALL_CALLS;
    cr_prepared_free(e.p);
    return isnan(*out);
}

/* mse with x an array variable, y a constant array (env), in two forms: the array
 * operations sum((x .- y).^2) / 30, and one fused kernel sum of (x - y)^2, / 30. */
static cr_status mse_array_taped(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    cr_avar d = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_arr(xs[0]), cr_targ_arr(cr_av_const(env)));
    cr_var s = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(d)));
    *y = cr_div(t, s, cr_const((double)SMALL_N));
    return cr_tape_status(t);
}

#define SQDIFF(x) cr_k_sq(cr_k_sub(x[0], x[1]))
CR_KERNEL(sqdiff, 2, SQDIFF);

static cr_status mse_kernel_taped(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    cr_kin in[2] = {cr_kin_arr(xs[0], 0), cr_kin_arr(cr_av_const(env), 0)};
    *y = cr_div(t, cr_av_kernel_sum(t, &sqdiff, in, 2, SMALL_N), cr_const((double)SMALL_N));
    return cr_tape_status(t);
}

typedef struct mse_arr_env {
    cr_ad_array_fn f;
    cr_tape *tape;  /* recorded at each call */
    cr_prepared *p; /* or prepared once */
    double x[SMALL_N], grad[SMALL_N];
    cr_array xa, ya, ga;
} mse_arr_env;

/* One gradient: cr_tape_value_and_gradient_arrays (reset, array input, record f, sweep), or
 * a prepared call. */
static double mse_arr_once(mse_arr_env *e)
{
    double y;
    cr_array *g = &e->ga;
    const cr_array *xs[1] = {&e->xa};
    cr_status st = e->p != NULL
                       ? cr_prepared_value_and_gradient_arrays(e->p, xs, 1, &y, &g)
                       : cr_tape_value_and_gradient_arrays(e->tape, e->f, &e->ya, xs, 1, &y, &g);
    return st == CR_OK ? y : (double)NAN;
}

static double mse_arr_calls(void *env)
{
    mse_arr_env *e = env;
    double s = 0;
    for (long i = 0; i < SMALL_CALLS; i++) {
        e->x[0] += 1e-9;
        s += mse_arr_once(e) + e->grad[0];
    }
    return s;
}

/* ns per gradient call of f over an array of SMALL_N, recorded at each call or prepared
 * once, checked first against the hand-written gradient. */
static int fig_mse_arr(cr_ad_array_fn f, bool prepared, const char *what, double *out)
{
    mse_arr_env e = {.f = f};
    double want[SMALL_N];
    small_inputs(e.x);
    mse_grad_hand(e.x, want);
    e.xa = cr_array_vector(e.x, SMALL_N);
    e.ya = cr_array_vector(k_mse_target, SMALL_N);
    e.ga = cr_array_vector(e.grad, SMALL_N);
    const cr_array *xs[1] = {&e.xa};
    cr_status st = prepared ? cr_prepare_gradient_arrays(g_ctx, NULL, f, &e.ya, xs, 1, &e.p)
                            : cr_tape_new(g_ctx, NULL, &e.tape);
    if (st != CR_OK)
        return 1;
    int err = isnan(mse_arr_once(&e)) || check_close(what, e.grad, want, SMALL_N, 1e-15);
    if (!err)
        *out = median_time(mse_arr_calls, &e, RUNS) / SMALL_CALLS;
    cr_prepared_free(e.p);
    cr_tape_free(e.tape);
    return err || isnan(*out);
}

static int fig_mse_array_unfused(double *out)
{
    return fig_mse_arr(mse_array_taped, false, "array mse gradient", out);
}

static int fig_mse_array_unfused_prepared(double *out)
{
    return fig_mse_arr(mse_array_taped, true, "prepared array mse gradient", out);
}

static int fig_mse(double *out)
{
    return fig_mse_arr(mse_kernel_taped, false, "kernel mse gradient", out);
}

static int fig_mse_prepared(double *out)
{
    return fig_mse_arr(mse_kernel_taped, true, "prepared kernel mse gradient", out);
}

static const struct {
    const char *name;
    int (*fn)(double *out);
    const char *unit;
    const char *fmt;
} k_engine_figures[] = {
    {"chain_ratio", fig_chain, "x", "%s %.2f %s\n"},
    {"chain_prepared_ratio", fig_chain_prepared, "x", "%s %.2f %s\n"},
    {"chain_prepared_vs_tape", fig_chain_prepared_vs_tape, "x", "%s %.2f %s\n"},
    {"rosen_loop_ratio", fig_rosen_loop, "x", "%s %.2f %s\n"},
    {"rosen_loop_cursor_ratio", fig_rosen_loop_cursor, "x", "%s %.2f %s\n"},
    {"tape_bytes_per_op", fig_tape_bytes, "B", "%s %.1f %s\n"},
    {"rosen_array_ratio", fig_rosen_array, "x", "%s %.2f %s\n"},
    {"rosen_array_unfused_ratio", fig_rosen_unfused, "x", "%s %.2f %s\n"},
    {"rosen_array_vs_arrays_ratio", fig_rosen_vs_arrays, "x", "%s %.2f %s\n"},
    {"hvp_ratio", fig_hvp, "x", "%s %.2f %s\n"},
    {"hvp_array_prepared_ratio", fig_hvp_array_prepared, "x", "%s %.2f %s\n"},
    {"hvp_array_unfused_prepared_ratio", fig_hvp_array_unfused_prepared, "x", "%s %.2f %s\n"},
    {"hvp_loop_ratio", fig_hvp_loop, "x", "%s %.2f %s\n"},
    {"hvp_loop_sweep_ratio", fig_hvp_sweep, "x", "%s %.2f %s\n"},
    {"hvp_prepared_ratio", fig_hvp_prepared, "x", "%s %.2f %s\n"},
    {"rosen_loop_prepared_ratio", fig_rosen_loop_prepared, "x", "%s %.2f %s\n"},
    {"hvp_array_unfused_ratio", fig_hvp_array_unfused, "x", "%s %.2f %s\n"},
    {"sum3_ns", fig_sum3, "ns", "%s %.1f %s\n"},
    {"mse_ns", fig_mse, "ns", "%s %.1f %s\n"},
    {"mse_prepared_ns", fig_mse_prepared, "ns", "%s %.1f %s\n"},
    {"mse_loop_ns", fig_mse_loop, "ns", "%s %.1f %s\n"},
    {"mse_loop_prepared_ns", fig_mse_loop_prepared, "ns", "%s %.1f %s\n"},
    {"mse_array_unfused_ns", fig_mse_array_unfused, "ns", "%s %.1f %s\n"},
    {"mse_array_unfused_prepared_ns", fig_mse_array_unfused_prepared, "ns", "%s %.1f %s\n"},
};

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
    if (cr_ctx_new(NULL, &g_ctx) != CR_OK || cr_arena_new(g_ctx, NULL, &g_arena) != CR_OK) {
        fprintf(stderr, "chainrules-bench: out of memory\n");
        return 1;
    }
    if (check_rules() != 0)
        return 1;
    for (size_t i = 0; i < sizeof k_figures / sizeof k_figures[0]; i++) {
        if (!wanted(argc, argv, k_figures[i].name))
            continue;
        double v = time_per_op(k_figures[i].fn, k_figures[i].n);
        if (isnan(v)) {
            fprintf(stderr, "chainrules-bench: %s failed: %s\n", k_figures[i].name,
                    cr_ctx_errmsg(g_ctx));
            return 1;
        }
        printf("%s %.1f ns\n", k_figures[i].name, v);
    }
    for (size_t i = 0; i < sizeof k_engine_figures / sizeof k_engine_figures[0]; i++) {
        if (!wanted(argc, argv, k_engine_figures[i].name))
            continue;
        double v = (double)NAN;
        if (k_engine_figures[i].fn(&v) != 0) {
            fprintf(stderr, "chainrules-bench: %s failed: %s\n", k_engine_figures[i].name,
                    cr_ctx_errmsg(g_ctx));
            return 1;
        }
        printf(k_engine_figures[i].fmt, k_engine_figures[i].name, v, k_engine_figures[i].unit);
    }
#ifdef CR_BENCH_TAPE
    /* gmm and lstm on the tape (bench_tape.c) */
    if (bench_tape(argc, argv) != 0) {
        fprintf(stderr, "chainrules-bench: the tape_gmm/lstm figures failed\n");
        return 1;
    }
#endif
#ifdef CR_BENCH_DUAL
    /* the inline forward mode (bench_dual.c) */
    if (bench_dual(argc, argv) != 0) {
        fprintf(stderr, "chainrules-bench: the dual_* figures failed\n");
        return 1;
    }
#endif
#ifdef CR_BENCH_ST
    /* the derivatives written by chainrules-ad (bench_st.c) */
    if (bench_st(argc, argv) != 0) {
        fprintf(stderr, "chainrules-bench: the st_* figures failed\n");
        return 1;
    }
#endif
    cr_arena_free(g_arena);
    cr_ctx_free(g_ctx);
    return 0;
}
