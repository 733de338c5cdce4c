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
 * Usage: chainrules-bench [figure...]   (no argument: all figures)
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <chainrules.h>

#define RUNS 7

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

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
            return NAN;
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
            return NAN;
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
            return NAN;
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
            return NAN;
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
        fprintf(stderr, "chainrules-bench: sin pullback %.17g differs from FD %.17g\n",
                dx[1].u.f64, fd);
        return 1;
    }
    return 0;
}

static double time_per_op(kernel_fn k, long n)
{
    double t[RUNS];
    k(n / 10); /* warm up */
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ns();
        g_sink = k(n);
        t[r] = (now_ns() - t0) / (double)n;
        if (isnan(g_sink))
            return NAN;
    }
    return median(t, RUNS);
}

static const struct {
    const char *name;
    kernel_fn fn;
    long n;
} k_figures[] = {
    {"primal_sin_ns", k_primal_sin, 2000000},
    {"lookup_sin_ns", k_lookup_sin, 2000000},
    {"frule_sin_ns", k_frule_sin, 1000000},
    {"rrule_sin_ns", k_rrule_sin, 1000000},
    {"rrule_mul_ns", k_rrule_mul, 1000000},
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
    cr_arena_free(g_arena);
    cr_ctx_free(g_ctx);
    return 0;
}
