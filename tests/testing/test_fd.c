/*
 * Tests of the finite-difference engine (chainrules/fd.h): coefficients, adaptive steps and
 * their error estimates, domain limits, Richardson extrapolation, jvp / jacobian / j'vp.
 * References are closed forms of textbook functions (sin, exp, log, ...), not rules.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "chainrules/arena.h"
#include "chainrules/ctx.h"
#include "chainrules/fd.h"

/* ---------------------------------------------------------------------------------- */
/* Scalar test functions with an environment that counts and polices the calls.       */
/* ---------------------------------------------------------------------------------- */

typedef struct probe {
    double (*f)(double);
    double lo, hi; /* allowed open interval of arguments */
    int outside;   /* calls outside (lo, hi) */
    long calls;
    long fail_at; /* if > 0: the fail_at-th call returns fail_status */
    cr_status fail_status;
    double nan_from; /* arguments >= nan_from give NaN */
} probe;

static void probe_init(probe *p, double (*f)(double))
{
    memset(p, 0, sizeof *p);
    p->f = f;
    p->lo = -HUGE_VAL;
    p->hi = HUGE_VAL;
    p->nan_from = HUGE_VAL;
}

static cr_status probe_fn(double x, double *y, void *env)
{
    probe *p = env;
    p->calls++;
    if (!(x > p->lo && x < p->hi))
        p->outside++;
    if (p->fail_at > 0 && p->calls == p->fail_at)
        return p->fail_status;
    *y = x >= p->nan_from ? (double)NAN : p->f(x);
    return CR_OK;
}

static double cube(double x)
{
    return x * x * x;
}

static double recip(double x)
{
    return 1.0 / x;
}

static double zero_fn(double x)
{
    (void)x;
    return 0.0;
}

static double lin(double x)
{
    return 3.0 * x - 1.0;
}

static double mixed(double x)
{
    return exp(-x * x) + sin(3.0 * x);
}

/* |a - b| <= tol, with both values in the message on failure. */
#define assert_near(a, b, tol)                                                       \
    do {                                                                             \
        double a_ = (a), b_ = (b), t_ = (tol);                                       \
        if (!(fabs(a_ - b_) <= t_))                                                  \
            fail_msg("%s = %.17g, %s = %.17g, |diff| = %.3g > %.3g", #a, a_, #b, b_, \
                     fabs(a_ - b_), t_);                                             \
    } while (0)

/* ---------------------------------------------------------------------------------- */
/* The headline requirement                                                            */
/* ---------------------------------------------------------------------------------- */

static void test_central5_sin(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    probe p;
    probe_init(&p, sin);
    double d = 0.0, err = 0.0;
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 1.0, &d, &err), CR_OK);
    assert_near(d, cos(1.0), 1e-13);
    /* The estimate bounds the actual error and is itself small. */
    assert_true(err >= fabs(d - cos(1.0)));
    assert_true(err < 1e-12);
    /* 7 points for the bound, 4 for the estimate (the centre weight is zero). */
    assert_int_equal(p.calls, 11);
}

/* ---------------------------------------------------------------------------------- */
/* Coefficients                                                                        */
/* ---------------------------------------------------------------------------------- */

static void assert_coefs(const cr_fdm *m, const double *grid, const double *coefs, int p,
                         double tol)
{
    assert_int_equal(m->p, p);
    for (int i = 0; i < p; i++) {
        assert_near(m->grid[i], grid[i], 0.0);
        assert_near(m->coefs[i], coefs[i], tol);
    }
}

static void test_coefs_standard(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(3, 1, &m), CR_OK);
    assert_coefs(&m, (const double[]){-1, 0, 1}, (const double[]){-0.5, 0.0, 0.5}, 3, 0.0);
    assert_int_equal(m.q, 1);
    assert_int_equal(m.kind, CR_FD_GRID_CENTRAL);

    /* Neighbourhood weights: f' at x + h, x, x - h from the same three points. */
    const double nbhd[3][3] = {{0.5, -2.0, 1.5}, {-0.5, 0.0, 0.5}, {-1.5, 2.0, -0.5}};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++)
            assert_near(m.coefs_nbhd[k][i], nbhd[k][i], 1e-16);

    assert_int_equal(cr_fdm_central(2, 1, &m), CR_OK);
    assert_coefs(&m, (const double[]){-1, 1}, (const double[]){-0.5, 0.5}, 2, 0.0);

    assert_int_equal(cr_fdm_central(3, 2, &m), CR_OK);
    assert_coefs(&m, (const double[]){-1, 0, 1}, (const double[]){1.0, -2.0, 1.0}, 3, 0.0);

    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_coefs(&m, (const double[]){-2, -1, 0, 1, 2},
                 (const double[]){1.0 / 12, -2.0 / 3, 0.0, 2.0 / 3, -1.0 / 12}, 5, 1e-17);
    /* Multipliers of the error bound: sum |c_i g_i^5| / 5! and sum |c_i|. */
    assert_near(m.bound_mult, (2.0 * 32.0 / 12.0 + 2.0 * 2.0 / 3.0) / 120.0, 1e-16);
    assert_near(m.error_mult, 1.5, 1e-15);

    assert_int_equal(cr_fdm_forward(3, 1, &m), CR_OK);
    assert_int_equal(m.kind, CR_FD_GRID_FORWARD);
    assert_coefs(&m, (const double[]){0, 1, 2}, (const double[]){-1.5, 2.0, -0.5}, 3, 1e-16);

    assert_int_equal(cr_fdm_backward(3, 1, &m), CR_OK);
    assert_int_equal(m.kind, CR_FD_GRID_BACKWARD);
    assert_coefs(&m, (const double[]){-2, -1, 0}, (const double[]){0.5, -2.0, 1.5}, 3, 1e-16);

    assert_int_equal(cr_fdm_forward(4, 2, &m), CR_OK);
    assert_coefs(&m, (const double[]){0, 1, 2, 3}, (const double[]){2.0, -5.0, 4.0, -1.0}, 4,
                 1e-15);

    /* Even central grids skip 0. */
    assert_int_equal(cr_fdm_central(4, 1, &m), CR_OK);
    assert_coefs(&m, (const double[]){-2, -1, 1, 2},
                 (const double[]){1.0 / 12, -2.0 / 3, 2.0 / 3, -1.0 / 12}, 4, 1e-16);

    /* Geometric grid: g -> sign(g) 3^(|g|-1). */
    assert_int_equal(cr_fdm_make(CR_FD_GRID_CENTRAL, 5, 1, CR_FDM_GEOM, &m), CR_OK);
    double g[5] = {-3, -1, 0, 1, 3};
    for (int i = 0; i < 5; i++)
        assert_near(m.grid[i], g[i], 0.0);
    /* Weights for f'(0) on {-3,-1,0,1,3}: 1/48, -9/16, 0, 9/16, -1/48. */
    assert_near(m.coefs[0], 1.0 / 48, 1e-17);
    assert_near(m.coefs[1], -9.0 / 16, 1e-16);
    assert_near(m.coefs[2], 0.0, 0.0);
}

/* The 21-point central first derivative against its closed form
   w_k = (-1)^(k+1) (n!)^2 / (k (n-k)! (n+k)!), n = 10: the recurrence must stay exact to
   the last bit on a grid whose Vandermonde matrix has entries up to 10^20. */
static void test_coefs_high_order(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(21, 1, &m), CR_OK);
    for (int k = 1; k <= 10; k++) {
        long double w = 1.0L / (long double)k;
        for (int j = 1; j <= k; j++)
            w *= (long double)(10 - j + 1) / (long double)(10 + j);
        if (k % 2 == 0)
            w = -w;
        double wd = (double)w;
        assert_near(m.coefs[10 + k], wd, 2.0 * DBL_EPSILON * fabs(wd));
        assert_near(m.coefs[10 - k], -wd, 2.0 * DBL_EPSILON * fabs(wd));
    }
    assert_near(m.coefs[10], 0.0, 0.0);
}

/* Moment conditions sum_i c_i g_i^k = q! [k == q], k < p, for irregular real grids. */
static void test_coefs_custom_grid(void **state)
{
    (void)state;
    cr_fdm m;
    const double g3[] = {-2.0, 0.0, 5.0};
    assert_int_equal(cr_fdm_from_grid(g3, 3, 1, &m), CR_OK);
    assert_int_equal(m.kind, CR_FD_GRID_CUSTOM);
    assert_coefs(&m, g3, (const double[]){-5.0 / 14, 3.0 / 10, 2.0 / 35}, 3, 1e-16);

    const double grids[][6] = {
        {-0.5, 0.25, 1.0, 2.5, -3.0, 4.0},
        {0.1, 0.7, 1.3, 2.0, 2.9, 4.4},
        {-7.0, -3.5, -2.0, -1.0, -0.25, 0.0},
    };
    for (size_t gi = 0; gi < 3; gi++) {
        for (int q = 0; q < 6; q++) {
            assert_int_equal(cr_fdm_from_grid(grids[gi], 6, q, &m), CR_OK);
            double qfact = 1.0;
            for (int j = 2; j <= q; j++)
                qfact *= (double)j;
            for (int k = 0; k < 6; k++) {
                double s = 0.0, scale = 0.0;
                for (int i = 0; i < 6; i++) {
                    double t = m.coefs[i] * pow(grids[gi][i], (double)k);
                    s += t;
                    scale += fabs(t);
                }
                assert_near(s, k == q ? qfact : 0.0, 1e-14 * fmax(scale, 1.0));
            }
        }
    }

    /* FiniteDifferences' test: FiniteDifferenceMethod([-2, 0, 5], 1)(sin, 1) ≈ cos(1). */
    probe p;
    probe_init(&p, sin);
    double d;
    assert_int_equal(cr_fdm_from_grid(g3, 3, 1, &m), CR_OK);
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 1.0, &d, NULL), CR_OK);
    assert_near(d, cos(1.0), 1e-8);
}

static void test_make_invalid(void **state)
{
    (void)state;
    cr_fdm m;
    memset(&m, 0x5a, sizeof m);
    cr_fdm before = m;
    assert_int_equal(cr_fdm_central(3, 3, &m), CR_EINVAL); /* q == p */
    assert_int_equal(cr_fdm_central(3, 4, &m), CR_EINVAL); /* q > p */
    assert_int_equal(cr_fdm_forward(2, 2, &m), CR_EINVAL);
    assert_int_equal(cr_fdm_backward(1, 1, &m), CR_EINVAL);
    assert_int_equal(cr_fdm_central(5, -1, &m), CR_EINVAL);
    assert_int_equal(cr_fdm_central(0, 0, &m), CR_EINVAL);
    assert_int_equal(cr_fdm_central(CR_FD_MAX_POINTS + 1, 1, &m), CR_EINVAL);
    assert_int_equal(cr_fdm_central(5, 1, NULL), CR_EINVAL);
    assert_int_equal(cr_fdm_make(CR_FD_GRID_CUSTOM, 5, 1, 0u, &m), CR_EINVAL);
    assert_int_equal(cr_fdm_make((cr_fd_grid)42, 5, 1, 0u, &m), CR_EINVAL);
    assert_int_equal(cr_fdm_make(CR_FD_GRID_CENTRAL, 5, 1, 0x80u, &m), CR_EINVAL);
    const double dup[] = {0.0, 1.0, 1.0};
    assert_int_equal(cr_fdm_from_grid(dup, 3, 1, &m), CR_EINVAL);
    const double bad[] = {0.0, (double)NAN, 1.0};
    assert_int_equal(cr_fdm_from_grid(bad, 3, 1, &m), CR_EINVAL);
    assert_int_equal(cr_fdm_from_grid(NULL, 3, 1, &m), CR_EINVAL);
    const double ok[] = {0.0, 1.0, 2.0};
    assert_int_equal(cr_fdm_from_grid(ok, 3, 3, &m), CR_EINVAL);
    /* Nothing was written on error. */
    assert_memory_equal(&m, &before, sizeof m);
    /* The largest method builds. */
    assert_int_equal(cr_fdm_central(CR_FD_MAX_POINTS, CR_FD_MAX_POINTS - 1, &m), CR_OK);
}

/* ---------------------------------------------------------------------------------- */
/* Derivatives, steps, error estimates                                                 */
/* ---------------------------------------------------------------------------------- */

static void test_higher_derivatives(void **state)
{
    (void)state;
    struct {
        int p, q;
        double (*f)(double);
        double x, ref, tol;
    } cases[] = {
        {5, 2, sin, 1.0, -0.8414709848078965, 1e-9},
        {7, 2, exp, 1.0, 2.718281828459045, 1e-10},
        {7, 3, sin, 1.0, -0.5403023058681398, 1e-7},
        {9, 3, exp, 0.5, 1.6487212707001282, 1e-8},
        {9, 4, sin, 1.0, 0.8414709848078965, 1e-5},
        {6, 2, log, 2.0, -0.25, 1e-10},
        {8, 3, log, 2.0, 0.25, 1e-8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_fdm m;
        assert_int_equal(cr_fdm_central(cases[i].p, cases[i].q, &m), CR_OK);
        probe p;
        probe_init(&p, cases[i].f);
        double d, err;
        assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, cases[i].x, &d, &err), CR_OK);
        assert_near(d, cases[i].ref, cases[i].tol);
        assert_true(err >= 0.5 * fabs(d - cases[i].ref));
    }
    /* FiniteDifferences' regression test for precision at high orders (issue #64). */
    cr_fdm m;
    assert_int_equal(cr_fdm_central(15, 5, &m), CR_OK);
    cr_fd_opts o = {.struct_size = sizeof o, .adapt = 2};
    probe p;
    probe_init(&p, exp);
    double d;
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, NULL), CR_OK);
    assert_near(d, exp(1.0), 1e-10);
}

/* q = 0 is f(x) itself. */
static void test_order_zero(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(4, 0, &m), CR_OK);
    probe p;
    probe_init(&p, exp);
    double d, err = 1.0;
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 0.3, &d, &err), CR_OK);
    assert_near(d, exp(0.3), 0.0);
    assert_near(err, 0.0, 0.0);
    assert_int_equal(p.calls, 1);
}

/* Polynomials of degree < p have a zero bound: the result is exact up to round-off, and
   the error estimate still scales with |f|. Constant zero gives exactly zero. */
static void test_polynomials_and_zero(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    probe p;
    probe_init(&p, cube);
    double d, err;
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 2.0, &d, &err), CR_OK);
    assert_near(d, 12.0, 1e-12);
    assert_true(err >= fabs(d - 12.0));

    probe_init(&p, lin);
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, -4.0, &d, &err), CR_OK);
    assert_near(d, 3.0, 1e-11);
    assert_true(err >= fabs(d - 3.0));

    probe_init(&p, zero_fn);
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 1.0, &d, &err), CR_OK);
    assert_near(d, 0.0, 0.0);
}

/* The step: a power of two near FiniteDifferences' 0.001065 for central_fdm(5,1) on sin. */
static void test_estimate_step(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    probe p;
    probe_init(&p, sin);
    double h, err;
    assert_int_equal(cr_fd_estimate_step(&m, NULL, probe_fn, &p, 1.0, &h, &err), CR_OK);
    int e;
    assert_near(frexp(h, &e), 0.5, 0.0);
    assert_true(h > 0.001065 / 1.5 && h < 0.001065 * 1.5);
    assert_true(err > 1e-14 && err < 1e-12);
    assert_int_equal(p.calls, 7);

    /* Adaptation changes the step: without it, |f^(5)| <= condition is assumed. */
    cr_fd_opts o = {.struct_size = sizeof o, .adapt = CR_FD_ADAPT_NONE};
    probe_init(&p, sin);
    double h0;
    assert_int_equal(cr_fd_estimate_step(&m, &o, probe_fn, &p, 1.0, &h0, NULL), CR_OK);
    assert_int_equal(p.calls, 0);
    assert_true(h0 != h);

    /* A fixed step is returned as is, and gives exactly cr_fd_apply()'s result. */
    o.adapt = 0;
    o.step = 0.01;
    assert_int_equal(cr_fd_estimate_step(&m, &o, probe_fn, &p, 1.0, &h, NULL), CR_OK);
    assert_near(h, 0.01, 0.0);
    double d1, d2;
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d1, &err), CR_OK);
    assert_int_equal(cr_fd_apply(&m, probe_fn, &p, 1.0, 0.01, &d2), CR_OK);
    assert_near(d1, d2, 0.0);
    /* Truncation error of the 5-point rule at h = 0.01: h^4/30 |f^(5)| ~ 1e-10. */
    assert_true(err > 1e-11 && err < 1e-9);
    assert_true(err >= fabs(d1 - cos(1.0)));
}

/* Adaptation matters: FiniteDifferences' "adaptation improves estimate" test. */
static void test_adaptation_improves(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_forward(5, 1, &m), CR_OK);
    cr_fd_opts o = {.struct_size = sizeof o, .adapt = CR_FD_ADAPT_NONE};
    probe p;
    probe_init(&p, log);
    double d0, d1;
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 0.001, &d0, NULL), CR_OK);
    assert_true(fabs(d0 - 1000.0) > 1.0);
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 0.001, &d1, NULL), CR_OK);
    assert_near(d1, 1000.0, 1e-5);
    assert_int_equal(p.outside, 0);
}

/*
 * The error estimate is an upper bound of the actual error, up to a small factor, and is
 * not vacuous: over several functions, points and methods, actual <= 2 * estimate and the
 * estimate stays within 1e-10 relative.
 */
static void test_error_estimate_bounds(void **state)
{
    (void)state;
    struct {
        double (*f)(double);
        double (*df)(double);
        double x;
    } fns[] = {
        {sin, cos, 1.0},   {sin, cos, 100.0}, {exp, exp, 1.0},  {exp, exp, 20.0},
        {log, recip, 1.0}, {atan, NULL, 1.0}, {erf, NULL, 0.5}, {mixed, NULL, 0.7},
    };
    const cr_fd_grid kinds[] = {CR_FD_GRID_CENTRAL, CR_FD_GRID_FORWARD, CR_FD_GRID_BACKWARD};
    const int ps[] = {3, 5, 7, 10};
    int checked = 0;
    for (size_t fi = 0; fi < sizeof fns / sizeof *fns; fi++) {
        for (int j = 0; j < 8; j++) {
            double x = fns[fi].x * (1.0 + 0.01 * j);
            double ref;
            if (fns[fi].df != NULL)
                ref = fns[fi].df(x);
            else if (fns[fi].f == atan)
                ref = 1.0 / (1.0 + x * x);
            else if (fns[fi].f == erf)
                ref = 2.0 / sqrt(3.14159265358979323846) * exp(-x * x);
            else
                ref = -2.0 * x * exp(-x * x) + 3.0 * cos(3.0 * x);
            for (size_t k = 0; k < 3; k++) {
                for (size_t pi = 0; pi < 4; pi++) {
                    cr_fdm m;
                    assert_int_equal(cr_fdm_make(kinds[k], ps[pi], 1, 0u, &m), CR_OK);
                    probe p;
                    probe_init(&p, fns[fi].f);
                    double d, err;
                    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, x, &d, &err), CR_OK);
                    double actual = fabs(d - ref);
                    if (!(actual <= 2.0 * err) || !(err <= 1e-6 * fabs(ref) + 1e-12))
                        fail_msg("f #%zu at x = %g, grid %d, p = %d: actual %.3g, estimate %.3g",
                                 fi, x, (int)kinds[k], ps[pi], actual, err);
                    checked++;
                }
            }
        }
    }
    assert_int_equal(checked, 8 * 8 * 3 * 4);
}

/* ---------------------------------------------------------------------------------- */
/* Restricted domains                                                                   */
/* ---------------------------------------------------------------------------------- */

static double exp_from_one(double x)
{
    return exp(x);
}

/* Forward at the left edge, backward at the right edge: never a call outside. */
static void test_one_sided_at_domain_edge(void **state)
{
    (void)state;
    cr_fdm m;
    probe p;
    double d, err;
    for (int adapt = -1; adapt <= 3; adapt++) {
        cr_fd_opts o = {.struct_size = sizeof o, .adapt = adapt};
        assert_int_equal(cr_fdm_forward(5, 1, &m), CR_OK);
        probe_init(&p, exp_from_one);
        p.lo = nextafter(1.0, 0.0); /* domain [1, inf) */
        assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, &err), CR_OK);
        assert_int_equal(p.outside, 0);
        assert_true(p.calls > 0);
        if (adapt != CR_FD_ADAPT_NONE)
            assert_near(d, exp(1.0), 1e-10);

        assert_int_equal(cr_fdm_backward(6, 2, &m), CR_OK);
        probe_init(&p, exp_from_one);
        p.hi = nextafter(1.0, 2.0); /* domain (-inf, 1] */
        assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, &err), CR_OK);
        assert_int_equal(p.outside, 0);
        if (adapt != CR_FD_ADAPT_NONE)
            assert_near(d, exp(1.0), 1e-7);
    }
    /* Forward on log near 0 (FiniteDifferences' test) never goes below x. */
    assert_int_equal(cr_fdm_forward(5, 1, &m), CR_OK);
    probe_init(&p, log);
    p.lo = nextafter(1e-3, 0.0);
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 1e-3, &d, &err), CR_OK);
    assert_int_equal(p.outside, 0);
    assert_near(d, 1000.0, 1e-5);
}

/* Central near 0 needs max_range; every level of adaptation honours it. */
static void test_max_range(void **state)
{
    (void)state;
    cr_fdm m;
    probe p;
    double d, err;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);

    /* Without a limit the bound method steps below 0: log gives NaN, hence CR_EDOMAIN. */
    probe_init(&p, log);
    d = 42.0;
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 1e-3, &d, &err), CR_EDOMAIN);
    assert_near(d, 42.0, 0.0);

    const struct {
        int p;
        double x;
    } cases[] = {{5, 1e-3}, {10, 1e-3}, {7, 1e-6}, {3, 1e-8}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int adapt = 0; adapt <= 3; adapt++) {
            double x = cases[i].x, r = 0.9 * x;
            cr_fd_opts o = {.struct_size = sizeof o, .adapt = adapt, .max_range = r};
            assert_int_equal(cr_fdm_central(cases[i].p, 1, &m), CR_OK);
            probe_init(&p, log);
            p.lo = x - r * (1.0 + 1e-12);
            p.hi = x + r * (1.0 + 1e-12);
            assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, x, &d, &err), CR_OK);
            assert_int_equal(p.outside, 0);
            assert_true(fabs(d * x - 1.0) < 1e-6);
            assert_true(fabs(d * x - 1.0) <= 2.0 * err * x);
        }
    }
    /* FiniteDifferences: central_fdm(10, 1, max_range=9e-4)(log, 1e-3) ≈ 1000. */
    assert_int_equal(cr_fdm_central(10, 1, &m), CR_OK);
    cr_fd_opts o = {.struct_size = sizeof o, .max_range = 9e-4};
    probe_init(&p, log);
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1e-3, &d, NULL), CR_OK);
    assert_near(d, 1000.0, 1e-6);

    /* Near a pole: tan at 1.57 (pi/2 - 8e-4). */
    assert_int_equal(cr_fdm_central(7, 1, &m), CR_OK);
    double x = 1.57, pole = 1.5707963267948966;
    o.max_range = 0.9 * (pole - x);
    probe_init(&p, tan);
    p.hi = pole;
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, x, &d, &err), CR_OK);
    assert_int_equal(p.outside, 0);
    double ref = 1.0 / (cos(x) * cos(x));
    assert_true(fabs(d - ref) < 1e-11 * ref);
    assert_true(fabs(d - ref) <= err);
}

/* ---------------------------------------------------------------------------------- */
/* Errors                                                                               */
/* ---------------------------------------------------------------------------------- */

static void test_callback_status_propagates(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    /* Fail at the first call, in the middle of the bound estimation, and in the final
       estimate: the status comes back unchanged and nothing is written. */
    const long fail_at[] = {1, 4, 9, 11};
    const cr_status statuses[] = {CR_ENORULE, CR_EUNIMPL, CR_ENOMEM, CR_EDOMAIN};
    for (size_t i = 0; i < 4; i++) {
        probe p;
        probe_init(&p, sin);
        p.fail_at = fail_at[i];
        p.fail_status = statuses[i];
        double d = 7.0, err = 7.0;
        assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 1.0, &d, &err), statuses[i]);
        assert_int_equal(p.calls, fail_at[i]);
        assert_near(d, 7.0, 0.0);
        assert_near(err, 7.0, 0.0);
    }
    probe p;
    probe_init(&p, sin);
    p.fail_at = 3;
    p.fail_status = CR_EBACKEND;
    double d;
    assert_int_equal(cr_fd_richardson(&m, NULL, probe_fn, &p, 1.0, &d, NULL), CR_EBACKEND);
    probe_init(&p, sin);
    p.fail_at = 2;
    p.fail_status = CR_ESHAPE;
    assert_int_equal(cr_fd_apply(&m, probe_fn, &p, 1.0, 0.1, &d), CR_ESHAPE);
}

static void test_nonfinite_is_edomain(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    probe p;
    double d = 3.0;
    /* NaN only at the far right of the bound method's grid. */
    probe_init(&p, sin);
    p.nan_from = 1.02;
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 1.0, &d, NULL), CR_EDOMAIN);
    assert_near(d, 3.0, 0.0);
    /* Infinity: 1/x at a point whose grid contains 0. */
    probe_init(&p, recip);
    cr_fd_opts o = {.struct_size = sizeof o, .step = 0.5};
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, NULL), CR_EDOMAIN);
    assert_int_equal(cr_fd_apply(&m, probe_fn, &p, 0.5, 0.5, &d), CR_EDOMAIN);
    assert_near(d, 3.0, 0.0);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    cr_fdm m, big;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fdm_central(CR_FD_MAX_POINTS - 1, 1, &big), CR_OK);
    probe p;
    probe_init(&p, sin);
    double d, h;
    assert_int_equal(cr_fd_derivative(NULL, NULL, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    assert_int_equal(cr_fd_derivative(&m, NULL, NULL, &p, 1.0, &d, NULL), CR_EINVAL);
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, 1.0, NULL, NULL), CR_EINVAL);
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, (double)NAN, &d, NULL), CR_EINVAL);
    assert_int_equal(cr_fd_derivative(&m, NULL, probe_fn, &p, HUGE_VAL, &d, NULL), CR_EINVAL);
    cr_fd_opts o = {.struct_size = sizeof o, .max_range = -1.0};
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    o = (cr_fd_opts){.struct_size = sizeof o, .adapt = -2};
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    o = (cr_fd_opts){.struct_size = sizeof o, .condition = -1.0};
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    o = (cr_fd_opts){.struct_size = sizeof o, .factor = (double)NAN};
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    o = (cr_fd_opts){.struct_size = sizeof o + 8};
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    /* A fixed step that would leave max_range. */
    o = (cr_fd_opts){.struct_size = sizeof o, .step = 0.1, .max_range = 0.1};
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    /* Adaptation needs p + 2*adapt points. */
    o = (cr_fd_opts){.struct_size = sizeof o, .adapt = 1};
    assert_int_equal(cr_fd_derivative(&big, &o, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    /* A corrupted method. */
    cr_fdm bad = m;
    bad.p = 0;
    assert_int_equal(cr_fd_derivative(&bad, NULL, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    bad = m;
    bad.q = 5;
    assert_int_equal(cr_fd_derivative(&bad, NULL, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    bad = m;
    bad.flags = 0x80u;
    assert_int_equal(cr_fd_derivative(&bad, NULL, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
    /* cr_fd_apply and cr_fd_estimate_step. */
    assert_int_equal(cr_fd_apply(&m, probe_fn, &p, 1.0, 0.0, &d), CR_EINVAL);
    assert_int_equal(cr_fd_apply(&m, probe_fn, &p, 1.0, -0.1, &d), CR_EINVAL);
    assert_int_equal(cr_fd_apply(&m, probe_fn, &p, 1.0, HUGE_VAL, &d), CR_EINVAL);
    cr_fdm m0;
    assert_int_equal(cr_fdm_central(3, 0, &m0), CR_OK);
    assert_int_equal(cr_fd_estimate_step(&m0, NULL, probe_fn, &p, 1.0, &h, NULL), CR_EINVAL);
    assert_int_equal(cr_fd_estimate_step(&m, NULL, probe_fn, &p, 1.0, NULL, NULL), CR_EINVAL);
    /* The callback never ran: every error above was found before any evaluation. */
    assert_int_equal(p.calls, 0);
    /* Without adaptation the largest method runs. */
    o = (cr_fd_opts){.struct_size = sizeof o, .adapt = CR_FD_ADAPT_NONE};
    assert_int_equal(cr_fd_derivative(&big, &o, probe_fn, &p, 1.0, &d, NULL), CR_OK);
    assert_near(d, cos(1.0), 1e-12);
}

/* An old caller's smaller options struct is read up to its struct_size. */
static void test_opts_struct_size(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    probe p;
    probe_init(&p, sin);
    cr_fd_opts o = {.struct_size = (uint32_t)offsetof(cr_fd_opts, condition),
                    .adapt = CR_FD_ADAPT_NONE,
                    .max_range = -5.0 /* beyond struct_size: ignored */};
    double d;
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, NULL), CR_OK);
    assert_int_equal(p.calls, 4); /* adapt = none was read */
    o.struct_size = 0;            /* 0 means the current size: max_range is read */
    assert_int_equal(cr_fd_derivative(&m, &o, probe_fn, &p, 1.0, &d, NULL), CR_EINVAL);
}

/* ---------------------------------------------------------------------------------- */
/* Richardson extrapolation                                                            */
/* ---------------------------------------------------------------------------------- */

static void test_richardson(void **state)
{
    (void)state;
    cr_fdm m;
    probe p;
    double d, err;

    /* Central (power 2): from the default initial step 10 down to ~1e-3. */
    assert_int_equal(cr_fdm_central(3, 1, &m), CR_OK);
    probe_init(&p, exp);
    assert_int_equal(cr_fd_richardson(&m, NULL, probe_fn, &p, 1.0, &d, &err), CR_OK);
    assert_near(d, exp(1.0), 1e-9);
    assert_true(err >= fabs(d - exp(1.0)));
    assert_true(err <= sqrt(DBL_EPSILON) * d);
    assert_true(p.calls <= 2 * 20);

    /* The symmetric grid's even error expansion (power 2, chosen automatically) converges
       faster than extrapolating in h (power 1). */
    long calls_auto = p.calls;
    cr_fd_richardson_opts r1 = {.struct_size = sizeof r1, .power = 1.0};
    probe_init(&p, exp);
    double d1;
    assert_int_equal(cr_fd_richardson(&m, &r1, probe_fn, &p, 1.0, &d1, NULL), CR_OK);
    assert_near(d1, exp(1.0), 1e-7);
    assert_true(p.calls > calls_auto);

    /* Tighter tolerance, and max_range keeps a one-sided method inside log's domain. */
    assert_int_equal(cr_fdm_backward(2, 1, &m), CR_OK); /* power 1 */
    cr_fd_richardson_opts ro = {.struct_size = sizeof ro,
                                .initial_step = 5.0,
                                .contract = 0.5,
                                .rtol = 1e-13,
                                .breaktol = 2.0,
                                .max_evals = 30,
                                .max_range = 0.5};
    probe_init(&p, log);
    p.lo = 0.5 - 1e-15;
    assert_int_equal(cr_fd_richardson(&m, &ro, probe_fn, &p, 1.0, &d, &err), CR_OK);
    assert_int_equal(p.outside, 0);
    assert_near(d, 1.0, 1e-9);
    assert_true(err >= fabs(d - 1.0) * 0.5);

    /* The tableau is exact for a polynomial once it has enough entries. */
    assert_int_equal(cr_fdm_forward(2, 1, &m), CR_OK);
    probe_init(&p, cube);
    ro = (cr_fd_richardson_opts){.struct_size = sizeof ro, .initial_step = 1.0, .contract = 0.5};
    assert_int_equal(cr_fd_richardson(&m, &ro, probe_fn, &p, 2.0, &d, &err), CR_OK);
    assert_near(d, 12.0, 1e-12);

    /* The default initial step (10) leaves log's domain: CR_EDOMAIN, as documented. */
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    probe_init(&p, log);
    assert_int_equal(cr_fd_richardson(&m, NULL, probe_fn, &p, 1.0, &d, &err), CR_EDOMAIN);

    /* Invalid options. */
    ro = (cr_fd_richardson_opts){.struct_size = sizeof ro, .contract = 1.0};
    assert_int_equal(cr_fd_richardson(&m, &ro, probe_fn, &p, 1.0, &d, &err), CR_EINVAL);
    ro = (cr_fd_richardson_opts){.struct_size = sizeof ro, .max_evals = CR_FD_RICHARDSON_MAX + 1};
    assert_int_equal(cr_fd_richardson(&m, &ro, probe_fn, &p, 1.0, &d, &err), CR_EINVAL);
    ro = (cr_fd_richardson_opts){.struct_size = sizeof ro, .initial_step = -1.0};
    assert_int_equal(cr_fd_richardson(&m, &ro, probe_fn, &p, 1.0, &d, &err), CR_EINVAL);
    cr_fdm m0;
    assert_int_equal(cr_fdm_central(3, 0, &m0), CR_OK);
    assert_int_equal(cr_fd_richardson(&m0, NULL, probe_fn, &p, 1.0, &d, &err), CR_EINVAL);
}

/* ---------------------------------------------------------------------------------- */
/* Vector maps: f(x) = [x0 x1 + sin x2, exp(x0) x2^2], R^3 -> R^2                       */
/* ---------------------------------------------------------------------------------- */

typedef struct vec_env {
    long calls;
    long fail_at;
    cr_status fail_status;
    int nan_output; /* 1-based output index that becomes Inf, or 0 */
    double max_dev; /* largest |x_i - x0_i| seen */
    const double *x0;
} vec_env;

static cr_status vec_fn(const double *x, size_t n, double *y, size_t m, void *env)
{
    vec_env *e = env;
    e->calls++;
    if (n != 3 || m != 2)
        return CR_ESHAPE;
    if (e->x0 != NULL)
        for (size_t i = 0; i < n; i++)
            e->max_dev = fmax(e->max_dev, fabs(x[i] - e->x0[i]));
    if (e->fail_at > 0 && e->calls == e->fail_at)
        return e->fail_status;
    y[0] = x[0] * x[1] + sin(x[2]);
    y[1] = exp(x[0]) * x[2] * x[2];
    if (e->nan_output > 0)
        y[e->nan_output - 1] = HUGE_VAL;
    return CR_OK;
}

static void vec_jacobian(const double *x, double J[2][3])
{
    J[0][0] = x[1];
    J[0][1] = x[0];
    J[0][2] = cos(x[2]);
    J[1][0] = exp(x[0]) * x[2] * x[2];
    J[1][1] = 0.0;
    J[1][2] = 2.0 * exp(x[0]) * x[2];
}

typedef struct arena_fixture {
    cr_ctx *ctx;
    cr_arena *arena;
} arena_fixture;

static int setup_arena(void **state)
{
    static arena_fixture fx;
    if (cr_ctx_new(NULL, &fx.ctx) != CR_OK)
        return -1;
    if (cr_arena_new(fx.ctx, NULL, &fx.arena) != CR_OK)
        return -1;
    *state = &fx;
    return 0;
}

static int teardown_arena(void **state)
{
    arena_fixture *fx = *state;
    cr_arena_free(fx->arena);
    cr_ctx_free(fx->ctx);
    return 0;
}

static void test_jvp_jacobian_jtvp(void **state)
{
    arena_fixture *fx = *state;
    const double x[3] = {0.3, -1.2, 0.8};
    const double v[3] = {0.5, 2.0, -1.0};
    const double ybar[2] = {1.5, -0.25};
    double J[2][3];
    vec_jacobian(x, J);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    vec_env env = {.x0 = x};
    size_t used = cr_arena_used(fx->arena);

    double jv[2], err;
    assert_int_equal(cr_fd_jvp(&m, NULL, vec_fn, &env, x, 3, v, 2, fx->arena, jv, &err), CR_OK);
    for (size_t i = 0; i < 2; i++) {
        double ref = J[i][0] * v[0] + J[i][1] * v[1] + J[i][2] * v[2];
        assert_near(jv[i], ref, 1e-11);
        assert_true(fabs(jv[i] - ref) <= 2.0 * err);
    }
    assert_true(err < 1e-11);
    assert_int_equal(cr_arena_used(fx->arena), used);

    double jac[6];
    assert_int_equal(cr_fd_jacobian(&m, NULL, vec_fn, &env, x, 3, 2, fx->arena, jac, &err), CR_OK);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++) {
            assert_near(jac[i * 3 + j], J[i][j], 1e-11);
            assert_true(fabs(jac[i * 3 + j] - J[i][j]) <= 2.0 * err);
        }
    assert_int_equal(cr_arena_used(fx->arena), used);

    double jtv[3];
    assert_int_equal(cr_fd_jtvp(&m, NULL, vec_fn, &env, x, 3, ybar, 2, fx->arena, jtv, &err),
                     CR_OK);
    for (size_t j = 0; j < 3; j++) {
        double ref = J[0][j] * ybar[0] + J[1][j] * ybar[1];
        assert_near(jtv[j], ref, 1e-11);
        assert_true(fabs(jtv[j] - ref) <= 2.0 * err);
    }
    assert_int_equal(cr_arena_used(fx->arena), used);

    /* Consistency <ybar, J v> == <J^T ybar, v> to FD accuracy. */
    double lhs = ybar[0] * jv[0] + ybar[1] * jv[1];
    double rhs = jtv[0] * v[0] + jtv[1] * v[1] + jtv[2] * v[2];
    assert_near(lhs, rhs, 1e-10);

    /* max_range bounds |t| for every coordinate move. */
    cr_fd_opts o = {.struct_size = sizeof o, .max_range = 1e-3};
    env.max_dev = 0.0;
    assert_int_equal(cr_fd_jacobian(&m, &o, vec_fn, &env, x, 3, 2, fx->arena, jac, NULL), CR_OK);
    assert_true(env.max_dev <= 1e-3 * (1.0 + 1e-12));
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            assert_near(jac[i * 3 + j], J[i][j], 1e-10);

    /* Second directional derivative along v: v^T H_i v for each output. */
    cr_fdm m2;
    assert_int_equal(cr_fdm_central(7, 2, &m2), CR_OK);
    assert_int_equal(cr_fd_jvp(&m2, NULL, vec_fn, &env, x, 3, v, 2, fx->arena, jv, NULL), CR_OK);
    double e0 = exp(x[0]);
    double h0 = 2.0 * v[0] * v[1] - sin(x[2]) * v[2] * v[2];
    double h1 = e0 * (x[2] * x[2] * v[0] * v[0] + 4.0 * x[2] * v[0] * v[2] + 2.0 * v[2] * v[2]);
    assert_near(jv[0], h0, 1e-7);
    assert_near(jv[1], h1, 1e-7);
}

static void test_vector_errors(void **state)
{
    arena_fixture *fx = *state;
    const double x[3] = {0.3, -1.2, 0.8};
    const double v[3] = {0.5, 2.0, -1.0};
    const double ybar[2] = {1.0, 1.0};
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    size_t used = cr_arena_used(fx->arena);
    double out[6] = {9, 9, 9, 9, 9, 9};

    /* Callback status, unchanged, in each function; outputs untouched; scratch released. */
    vec_env env = {.fail_at = 5, .fail_status = CR_ENORULE};
    assert_int_equal(cr_fd_jvp(&m, NULL, vec_fn, &env, x, 3, v, 2, fx->arena, out, NULL),
                     CR_ENORULE);
    env = (vec_env){.fail_at = 30, .fail_status = CR_EUNIMPL};
    assert_int_equal(cr_fd_jacobian(&m, NULL, vec_fn, &env, x, 3, 2, fx->arena, out, NULL),
                     CR_EUNIMPL);
    env = (vec_env){.fail_at = 12, .fail_status = CR_ETANGENT};
    assert_int_equal(cr_fd_jtvp(&m, NULL, vec_fn, &env, x, 3, ybar, 2, fx->arena, out, NULL),
                     CR_ETANGENT);
    for (size_t i = 0; i < 6; i++)
        assert_near(out[i], 9.0, 0.0);
    assert_int_equal(cr_arena_used(fx->arena), used);

    /* Wrong sizes reach the callback, which reports CR_ESHAPE. */
    env = (vec_env){0};
    assert_int_equal(cr_fd_jvp(&m, NULL, vec_fn, &env, x, 2, v, 2, fx->arena, out, NULL),
                     CR_ESHAPE);

    /* A non-finite output: CR_EDOMAIN with a message on the context. */
    cr_ctx_clear_error(fx->ctx);
    env = (vec_env){.nan_output = 2};
    assert_int_equal(cr_fd_jacobian(&m, NULL, vec_fn, &env, x, 3, 2, fx->arena, out, NULL),
                     CR_EDOMAIN);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_EDOMAIN);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "cr_fd_jacobian"));
    assert_int_equal(cr_arena_used(fx->arena), used);

    /* Invalid arguments, found before any call. */
    env = (vec_env){0};
    const double bad[3] = {0.0, (double)NAN, 1.0};
    assert_int_equal(cr_fd_jvp(&m, NULL, vec_fn, &env, x, 3, v, 2, NULL, out, NULL), CR_EINVAL);
    assert_int_equal(cr_fd_jvp(&m, NULL, vec_fn, &env, x, 3, NULL, 2, fx->arena, out, NULL),
                     CR_EINVAL);
    assert_int_equal(cr_fd_jvp(&m, NULL, vec_fn, &env, x, 3, bad, 2, fx->arena, out, NULL),
                     CR_EINVAL);
    assert_int_equal(cr_fd_jacobian(&m, NULL, vec_fn, &env, bad, 3, 2, fx->arena, out, NULL),
                     CR_EINVAL);
    assert_int_equal(cr_fd_jacobian(&m, NULL, NULL, &env, x, 3, 2, fx->arena, out, NULL),
                     CR_EINVAL);
    assert_int_equal(cr_fd_jtvp(&m, NULL, vec_fn, &env, x, 3, bad, 2, fx->arena, out, NULL),
                     CR_EINVAL);
    assert_int_equal(cr_fd_jtvp(&m, NULL, vec_fn, &env, x, 3, ybar, 2, fx->arena, NULL, NULL),
                     CR_EINVAL);
    assert_int_equal(env.calls, 0);

    /* Empty problems succeed without calling f. */
    double err = 1.0;
    assert_int_equal(cr_fd_jacobian(&m, NULL, vec_fn, &env, NULL, 0, 2, fx->arena, NULL, &err),
                     CR_OK);
    assert_near(err, 0.0, 0.0);
    assert_int_equal(cr_fd_jvp(&m, NULL, vec_fn, &env, x, 3, v, 0, fx->arena, NULL, NULL), CR_OK);
    assert_int_equal(env.calls, 0);
}

/* A fixed-buffer arena that is too small: the arena's status comes back, f never runs. */
static void test_scratch_exhausted(void **state)
{
    arena_fixture *fx = *state;
    static unsigned char buffer[64];
    cr_arena_params ap = {.struct_size = sizeof ap, .buffer = buffer, .buffer_size = sizeof buffer};
    cr_arena *small;
    assert_int_equal(cr_arena_new(fx->ctx, &ap, &small), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    const double x[3] = {0.3, -1.2, 0.8};
    double jac[6];
    vec_env env = {0};
    cr_status st = cr_fd_jacobian(&m, NULL, vec_fn, &env, x, 3, 2, small, jac, NULL);
    assert_true(st == CR_EARENA || st == CR_ENOMEM);
    assert_int_equal(env.calls, 0);
    cr_arena_free(small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_central5_sin),
        cmocka_unit_test(test_coefs_standard),
        cmocka_unit_test(test_coefs_high_order),
        cmocka_unit_test(test_coefs_custom_grid),
        cmocka_unit_test(test_make_invalid),
        cmocka_unit_test(test_higher_derivatives),
        cmocka_unit_test(test_order_zero),
        cmocka_unit_test(test_polynomials_and_zero),
        cmocka_unit_test(test_estimate_step),
        cmocka_unit_test(test_adaptation_improves),
        cmocka_unit_test(test_error_estimate_bounds),
        cmocka_unit_test(test_one_sided_at_domain_edge),
        cmocka_unit_test(test_max_range),
        cmocka_unit_test(test_callback_status_propagates),
        cmocka_unit_test(test_nonfinite_is_edomain),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_opts_struct_size),
        cmocka_unit_test(test_richardson),
        cmocka_unit_test_setup_teardown(test_jvp_jacobian_jtvp, setup_arena, teardown_arena),
        cmocka_unit_test_setup_teardown(test_vector_errors, setup_arena, teardown_arena),
        cmocka_unit_test_setup_teardown(test_scratch_exhausted, setup_arena, teardown_arena),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
