/*
 * Prepared Hessian-vector products of programs with rules kept as pullbacks (user rrules,
 * rrule_via_ad of a user function, hypot of three arguments, evalpoly, a tuple rule): each
 * replay calls the rule again at the new values, its partials from the pullback and their
 * central differences from the rule at x ± h, as a second-order tape records it. Value,
 * gradient and H v at several points other than the recording's, along several directions,
 * against central differences of plain-C versions of the programs and against cr_tape_hvp on
 * a fresh second-order recording; arrays and kernels around such a rule; a rule failing at a
 * new input, on one side (the one-sided difference) and on both sides of it; more variable
 * arguments than a row has; no allocation after the first call; allocation failures at
 * every point of preparing and of the first call.
 */
#include <string.h>

#include "test_alloc.h"
#include "test_fault_hook.h"
#include "test_pullback_rules.h"

#define MAXN WIDE_N

/* The gradient of fc at x by central differences (h = 1e-6: about 1e-9 relative). */
static void fd_grad(double (*fc)(const double *), const double *x, size_t n, double *g)
{
    double xp[MAXN];
    for (size_t j = 0; j < n; j++) {
        const double h = 1e-6;
        memcpy(xp, x, n * sizeof *x);
        xp[j] = x[j] + h;
        double fp = fc(xp);
        xp[j] = x[j] - h;
        g[j] = (fp - fc(xp)) / (2 * h);
    }
}

/* A direction per (point, round): every component nonzero. */
static void direction(double *v, size_t n, size_t i, size_t d)
{
    for (size_t j = 0; j < n; j++)
        v[j] = cos(1.3 * (double)j + 0.7 * (double)i + 2.1 * (double)d) + 0.2;
}

/* cr_prepared_hvp of p at x along v against the references: the value of fc, its gradient and
 * the second differences times v (to rtol, relative to 1 + sum |H_jl v_l|), cr_tape_hvp on a
 * fresh second-order recording of ft (to rounding), and the first-order replay of p. */
static void check_point(fixt *e, cr_prepared *p, cr_ad_fn ft, double (*fc)(const double *),
                        const double *x, const double *v, size_t n, double rtol)
{
    double hv[MAXN], g[MAXN], y, fdg[MAXN];
    assert_int_equal(cr_prepared_hvp(p, x, n, v, hv, &y, g), CR_OK);
    assert_close(y, fc(x), 1e-13);
    fd_grad(fc, x, n, fdg);
    for (size_t j = 0; j < n; j++)
        ASSERT_CLOSE(g[j], fdg[j], 1e-7);
    for (size_t j = 0; j < n; j++) {
        double want = 0, scale = 1;
        for (size_t l = 0; l < n; l++) {
            double hjl = fd_hessian_entry(fc, x, n, j, l);
            want += hjl * v[l];
            scale += fabs(hjl * v[l]);
        }
        if (!(fabs(hv[j] - want) <= rtol * scale)) {
            print_error("hv[%zu] = %.17g, differences give %.17g\n", j, hv[j], want);
            fail();
        }
    }
    /* The second-order tape takes the same differences of the same partials. */
    cr_tape *t = so_tape(e);
    cr_var xs[MAXN], yt;
    double th[MAXN], tg[MAXN];
    assert_int_equal(cr_tape_record(t, ft, NULL, x, n, xs, &yt, 1), CR_OK);
    assert_int_equal(cr_tape_hvp(t, yt, xs, n, v, th, tg), CR_OK);
    assert_close(y, yt.v, 1e-15);
    for (size_t j = 0; j < n; j++) {
        ASSERT_CLOSE(hv[j], th[j], 1e-12);
        ASSERT_CLOSE(g[j], tg[j], 1e-14);
    }
    cr_tape_free(t);
    /* The first-order replay of the same p. */
    double y1, g1[MAXN];
    assert_int_equal(cr_prepared_value_and_gradient(p, x, n, &y1, g1), CR_OK);
    assert_true(y1 == y);
    for (size_t j = 0; j < n; j++)
        ASSERT_CLOSE(g1[j], g[j], 1e-14);
}

/* ft prepared at x0, replayed at the npts points along two directions each. */
static void check_replays(fixt *e, cr_ad_fn ft, double (*fc)(const double *), const double *x0,
                          const double (*pts)[MAXN], size_t npts, size_t n, double rtol)
{
    cr_prepared *p = NULL;
    assert_int_equal(cr_prepare_hvp(e->ctx, e->eng, ft, NULL, x0, n, &p), CR_OK);
    for (size_t i = 0; i < npts; i++)
        for (size_t d = 0; d < 2; d++) {
            double v[MAXN];
            direction(v, n, i, d);
            check_point(e, p, ft, fc, pts[i], v, n, rtol);
        }
    cr_prepared_free(p);
}

/* ---- One, two, three and four variable arguments; constants among them ------------------ */

/* capped(x0 x1) + capped(0.5 x1^2): one variable argument */
static double one_c(const double *x)
{
    return exp(x[0] * x[1]) + exp(0.5 * x[1] * x[1]);
}

static cr_status one_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var a = cr_mul(t, x[0], x[1]), b = cr_mul(t, cr_const(0.5), cr_mul(t, x[1], x[1]));
    y[0] = cr_add(t, cr_tape_call1(t, fv_of(&capped_fn, &f), &a, 1),
                  cr_tape_call1(t, fv_of(&capped_fn, &f), &b, 1));
    return cr_tape_status(t);
}

static void test_one_argument(void **state)
{
    const double x0[2] = {0.3, 0.5};
    const double pts[3][MAXN] = {{0.3, 0.5}, {-0.8, 0.9}, {0.4, -1.2}};
    check_replays(*state, one_t, one_c, x0, pts, 3, 2, 1e-6);
}

/* bump(x0, x1, 0.7 x0): two variable arguments (x0 twice) and a constant position, and f1
 * (test_pullback_rules.h): bump of three variables, and of x0, x0 and a constant */
static double two_c(const double *x)
{
    return bump_c(x[0], x[1], 0.7) * x[1];
}

static cr_status two_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var a[3] = {x[0], x[1], cr_const(0.7)};
    y[0] = cr_mul(t, cr_tape_call1(t, fv_of(&bump_fn, &f), a, 3), x[1]);
    return cr_tape_status(t);
}

static void test_two_and_three_arguments(void **state)
{
    const double x0[3] = {0.7, -0.4, 0.9};
    const double pts[3][MAXN] = {{0.7, -0.4, 0.9}, {-0.5, 0.8, 0.3}, {1.1, 0.2, -0.6}};
    check_replays(*state, two_t, two_c, x0, pts, 3, 2, 1e-6);
    check_replays(*state, f1_t, f1_c, x0, pts, 3, 3, 1e-6);
}

/* sum5 of four variables and a constant (f5), of five variables (f5v); wide of seven
 * variables with two results (f6), of six with one twice and a constant (f7): more
 * variable arguments than a row has */
static void test_many_arguments(void **state)
{
    const double x0[4] = {0.2, 0.9, -0.3, 1.7};
    const double pts[3][MAXN] = {{0.2, 0.9, -0.3, 1.7}, {-1.4, 0.6, 2.2, -0.8}, {3, -2, 1, 0.5}};
    check_replays(*state, f5_t, f5_c, x0, pts, 3, 4, 1e-6);
    const double x5[5] = {0.4, -1.2, 0.8, 1.1, -0.6};
    const double p5[2][MAXN] = {{0.4, -1.2, 0.8, 1.1, -0.6}, {-0.9, 0.3, 1.4, -0.2, 0.7}};
    check_replays(*state, f5v_t, f5v_c, x5, p5, 2, 5, 1e-6);
    const double x7[MAXN] = {0.3, -0.7, 1.1, 0.5, -0.4, 0.9, -1.3};
    const double p7[2][MAXN] = {{0.3, -0.7, 1.1, 0.5, -0.4, 0.9, -1.3},
                                {-0.6, 0.4, 0.8, -1.2, 0.7, -0.3, 0.5}};
    check_replays(*state, f6_t, f6_c, x7, p7, 2, WIDE_N, 1e-6);
    check_replays(*state, f7_t, f7_c, x7, p7, 2, 5, 1e-6);
}

/* ---- Tuples, the built-in rules, rrule_via_ad ---------------------------------------------- */

/* polar (two results, f2) and hypot of three arguments with evalpoly (f3) */
static void test_tuple_and_builtin_rules(void **state)
{
    const double x2[2] = {0.8, 0.6};
    const double p2[3][MAXN] = {{0.8, 0.6}, {-1.5, 0.4}, {0.3, -2.0}};
    check_replays(*state, f2_t, f2_c, x2, p2, 3, 2, 1e-6);
    const double x3[3] = {0.3, -1.1, 0.5};
    const double p3[3][MAXN] = {{0.3, -1.1, 0.5}, {1.2, 0.7, -0.4}, {-0.9, 0.25, 1.6}};
    check_replays(*state, f3_t, f3_c, x3, p3, 3, 3, 1e-6);
}

/* via(a, b): a rule whose rrule is rrule_via_ad of kink, a user function written against the
 * tape (an overlay) that branches on its argument's value: recorded again at each rule call,
 * so each replay takes the branch of its own point. */
static double kink_c(double a, double b)
{
    return a > 0 ? a * a * b + sin(b) : a * b * b + cos(a);
}

static cr_status kink_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var a = x[0], b = x[1];
    y[0] = a.v > 0 ? cr_add(t, cr_mul(t, cr_mul(t, a, a), b), cr_sin(t, b))
                   : cr_add(t, cr_mul(t, cr_mul(t, a, b), b), cr_cos(t, a));
    return cr_tape_status(t);
}

static const cr_function kink_fn = {.name = "kink", .arity = 2};
static const cr_function via_fn = {.name = "via", .arity = 2};

static cr_status via_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)fv;
    (void)udata;
    cr_value k = cr_value_function(&kink_fn, NULL);
    return cr_rrule_via_ad(cfg, arena, &k, args, nargs, y, pb);
}

static cr_status add_via(fixt *e)
{
    static const cr_argspec f64s[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &via_fn, .nargs = 2, .args = f64s, .rrule = via_rrule};
    cr_status st = cr_engine_overlay(e->eng, &kink_fn, kink_ad, 1, NULL);
    return st != CR_OK ? st : cr_engine_from_rrule(e->eng, &def);
}

/* via(x0 x1, x1) + x0 via(x1, 0.5) */
static double via_c(const double *x)
{
    return kink_c(x[0] * x[1], x[1]) + x[0] * kink_c(x[1], 0.5);
}

static cr_status via_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var a[2] = {cr_mul(t, x[0], x[1]), x[1]}, b[2] = {x[1], cr_const(0.5)};
    y[0] = cr_add(t, cr_tape_call1(t, fv_of(&via_fn, &f), a, 2),
                  cr_mul(t, x[0], cr_tape_call1(t, fv_of(&via_fn, &f), b, 2)));
    return cr_tape_status(t);
}

static void test_rrule_via_ad(void **state)
{
    fixt *e = *state;
    assert_int_equal(add_via(e), CR_OK);
    /* prepared where both calls take a > 0; replayed on either side of the branches */
    const double x0[2] = {0.6, 0.8};
    const double pts[4][MAXN] = {{0.6, 0.8}, {-0.7, 0.9}, {0.5, -1.3}, {-1.1, -0.4}};
    check_replays(e, via_t, via_c, x0, pts, 4, 2, 1e-6);
}

/* ---- Arrays and kernels around a rule ------------------------------------------------------ */

static double k_w[3] = {0.3, -0.5, 0.2};

/* bump(sum(sin.(X)), dot(X, w), x0) feeding a broadcast: sum(exp.(X .* r) .* w), r its
 * result; with a scalar input x0 (cr_prepare_hvp) or with X = (x0, x1, x2) as an array input
 * (cr_prepare_hvp_arrays, x0 = X[0] read through dot with e0). */
static double arr_c(const double *x)
{
    double s = 0, d = 0, y = 0;
    for (size_t i = 0; i < 3; i++) {
        s += sin(x[i]);
        d += x[i] * k_w[i];
    }
    double r = bump_c(s, d, x[0]);
    for (size_t i = 0; i < 3; i++)
        y += exp(x[i] * r) * k_w[i];
    return y;
}

static cr_var arr_body(cr_tape *t, cr_avar X, cr_var x0)
{
    static cr_array W;
    W = cr_array_vector(k_w, 3);
    cr_avar w = cr_av_const(&W);
    cr_value f;
    cr_var a[3] = {cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(X))),
                   cr_av_dot(t, X, w), x0};
    cr_var r = cr_tape_call1(t, fv_of(&bump_fn, &f), a, 3);
    cr_avar ex = cr_av_broadcast1(
        t, &cr_fn_exp,
        cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_var(r))));
    return cr_av_dot(t, ex, w);
}

static cr_status arr_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    static cr_array E0;
    static double e0[3] = {1, 0, 0};
    E0 = cr_array_vector(e0, 3);
    *y = arr_body(t, xs[0], cr_av_dot(t, xs[0], cr_av_const(&E0)));
    return cr_tape_status(t);
}

/* The scalar form: X = (x0, x1, x2) made by broadcasting the inputs over unit vectors. */
static cr_status arr_scalar_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    static cr_array U[3];
    static double u[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    cr_avar xi[3];
    for (size_t i = 0; i < 3; i++) {
        U[i] = cr_array_vector(u[i], 3);
        xi[i] = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(x[i]), cr_targ_arr(cr_av_const(&U[i])));
    }
    cr_avar X = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(xi[0]), cr_targ_arr(xi[1]));
    X = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(X), cr_targ_arr(xi[2]));
    y[0] = arr_body(t, X, x[0]);
    return cr_tape_status(t);
}

static void test_arrays(void **state)
{
    fixt *e = *state;
    const double x0[3] = {0.4, -0.3, 0.6};
    const double pts[3][MAXN] = {{0.4, -0.3, 0.6}, {-0.2, 0.5, 0.1}, {0.7, 0.3, -0.5}};
    check_replays(e, arr_scalar_t, arr_c, x0, pts, 3, 3, 1e-6);

    double xb[3], vb[3], hb[3], gb[3];
    memcpy(xb, x0, sizeof xb);
    cr_array X = cr_array_vector(xb, 3), V = cr_array_vector(vb, 3), HV = cr_array_vector(hb, 3),
             G = cr_array_vector(gb, 3);
    const cr_array *xs[1] = {&X}, *vs[1] = {&V};
    cr_array *hvs[1] = {&HV}, *gs[1] = {&G};
    cr_prepared *p = NULL;
    assert_int_equal(cr_prepare_hvp_arrays(e->ctx, e->eng, arr_t, NULL, xs, 1, &p), CR_OK);
    for (size_t i = 0; i < 3; i++) {
        double y, fdg[3];
        memcpy(xb, pts[i], sizeof xb);
        direction(vb, 3, i, 1);
        assert_int_equal(cr_prepared_hvp_arrays(p, xs, 1, vs, hvs, &y, gs), CR_OK);
        assert_close(y, arr_c(xb), 1e-13);
        fd_grad(arr_c, xb, 3, fdg);
        for (size_t j = 0; j < 3; j++) {
            double want = 0;
            for (size_t l = 0; l < 3; l++)
                want += fd_hessian_entry(arr_c, xb, 3, j, l) * vb[l];
            ASSERT_CLOSE(gb[j], fdg[j], 1e-7);
            ASSERT_CLOSE(hb[j], want, 1e-6);
        }
        /* the scalar form prepared once gives the same numbers to rounding */
        cr_prepared *q = NULL;
        double hq[3], gq[3], yq;
        assert_int_equal(cr_prepare_hvp(e->ctx, e->eng, arr_scalar_t, NULL, x0, 3, &q), CR_OK);
        assert_int_equal(cr_prepared_hvp(q, xb, 3, vb, hq, &yq, gq), CR_OK);
        for (size_t j = 0; j < 3; j++) {
            ASSERT_CLOSE(hb[j], hq[j], 1e-11);
            ASSERT_CLOSE(gb[j], gq[j], 1e-13);
        }
        cr_prepared_free(q);
    }
    cr_prepared_free(p);
}

/* ---- Failures at replay time -------------------------------------------------------------- */

/* capped(x0 x1) (f4) where x0 x1 > 1: the rule's status, a message naming it, nothing written,
 * and the next call at good inputs succeeds. */
static void test_rule_fails(void **state)
{
    fixt *e = *state;
    const double x0[2] = {0.5, 0.5}, bad[2] = {1.5, 1.0}, good[2] = {0.6, -0.7};
    const double v[2] = {1.0, -0.5};
    cr_prepared *p = NULL;
    assert_int_equal(cr_prepare_hvp(e->ctx, e->eng, f4_t, NULL, x0, 2, &p), CR_OK);
    double hv[2] = {42, 42}, g[2] = {42, 42}, y = 42;
    assert_int_equal(cr_prepared_hvp(p, bad, 2, v, hv, &y, g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(e->ctx), "prepared Hessian-vector product at these inputs");
    assert_contains(cr_ctx_errmsg(e->ctx), "capped");
    assert_true(hv[0] == 42 && hv[1] == 42 && g[0] == 42 && g[1] == 42 && y == 42);
    check_point(e, p, f4_t, f4_c, good, v, 2, 1e-6);
    /* and again after a failure of the first-order replay */
    assert_int_equal(cr_prepared_value_and_gradient(p, bad, 2, &y, g), CR_EDOMAIN);
    check_point(e, p, f4_t, f4_c, x0, v, 2, 1e-6);
    cr_prepared_free(p);
}

/* capped(x0 x1) at the edge of its domain: the rule fails at x + h, the one-sided difference
 * (error O(h), about 1e-5 relative) */
static void test_domain_edge(void **state)
{
    fixt *e = *state;
    const double x0[2] = {0.5, 0.5};
    const double pts[2][MAXN] = {{1.0 - 1e-9, 1.0}, {1.0, 1.0 - 1e-9}};
    cr_prepared *p = NULL;
    assert_int_equal(cr_prepare_hvp(e->ctx, e->eng, f4_t, NULL, x0, 2, &p), CR_OK);
    for (size_t i = 0; i < 2; i++) {
        double v[2];
        direction(v, 2, i, 0);
        check_point(e, p, f4_t, f4_c, pts[i], v, 2, 1e-4);
    }
    cr_prepared_free(p);
}

/* pinned(x) is defined at 0.5 only: prepared there (a first-order recording), its H v fails on
 * both sides with the rule's status; elsewhere the rule itself fails. The first-order replay
 * at 0.5 works. */
static cr_status pinned_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    y[0] = cr_tape_call1(t, fv_of(&pinned_fn, &f), x, 1);
    return cr_tape_status(t);
}

static void test_both_sides_fail(void **state)
{
    fixt *e = *state;
    const double x = 0.5, v = 1.0, other = 0.7;
    cr_prepared *p = NULL;
    assert_int_equal(cr_prepare_hvp(e->ctx, e->eng, pinned_t, NULL, &x, 1, &p), CR_OK);
    double hv = 42, g = 42, y = 42;
    assert_int_equal(cr_prepared_hvp(p, &x, 1, &v, &hv, &y, &g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(e->ctx),
                    "pinned: no second derivatives in argument 1 at 0.5: the rule fails on "
                    "both sides");
    assert_true(hv == 42 && g == 42 && y == 42);
    assert_int_equal(cr_prepared_hvp(p, &other, 1, &v, &hv, &y, &g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(e->ctx), "pinned");
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(g, 3.0, 1e-15);
    cr_prepared_free(p);
}

/* ---- Memory --------------------------------------------------------------------------------- */

/* A context of the counting allocator with the fixture's rules. */
static void counted(counter *c, fixt *e)
{
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = c};
    assert_int_equal(cr_ctx_new(&cp, &e->ctx), CR_OK);
    assert_int_equal(env_setup_in(e), 0);
    assert_int_equal(add_via(e), CR_OK);
}

static cr_status mix_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    cr_var a = cr_const(0.0), b = a, c = a; /* set by the calls below when they succeed */
    cr_status st = f1_t(t, x, n, &a, m, env);
    if (st == CR_OK)
        st = f2_t(t, x, 2, &b, m, env);
    if (st == CR_OK)
        st = via_t(t, x + 1, 2, &c, m, env);
    if (st != CR_OK) /* (a, b, c may be unset) */
        return st;
    y[0] = cr_add(t, cr_add(t, a, b), c);
    return cr_tape_status(t);
}

static double mix_c(const double *x)
{
    return f1_c(x) + f2_c(x) + via_c(x + 1);
}

/* bump of three variables, polar and via: no allocation after the first call. */
static void test_no_allocation(void **state)
{
    (void)state;
    counter c = {0};
    fixt e;
    counted(&c, &e);
    const double x0[3] = {0.7, -0.4, 0.9};
    double x[3], v[3] = {0.3, 1.0, -0.6}, hv[3], g[3], y;
    cr_prepared *p = NULL;
    assert_int_equal(cr_prepare_hvp(e.ctx, e.eng, mix_t, NULL, x0, 3, &p), CR_OK);
    assert_int_equal(cr_prepared_hvp(p, x0, 3, v, hv, &y, g), CR_OK);
    size_t allocs = c.allocs;
    for (int round = 1; round < 5; round++) {
        for (size_t j = 0; j < 3; j++)
            x[j] = x0[j] + 0.1 * round * (j % 2 ? -1.0 : 1.0);
        assert_int_equal(cr_prepared_hvp(p, x, 3, v, hv, &y, g), CR_OK);
        assert_int_equal(c.allocs, allocs);
        assert_close(y, mix_c(x), 1e-13);
    }
    cr_prepared_free(p);
    env_teardown_in(&e);
    assert_int_equal(c.live, 0);
}

/* Allocation failures at every point of preparing and of the first call: CR_ENOMEM, nothing
 * leaks, and a failed call is followed by a good one, equal to a context that does not fail. */
typedef struct fault_env {
    fixt f;
    double x[3], v[3], hv[3], g[3], y, want[3], gw[3], yw;
} fault_env;

static void fault_setup(cr_ctx *ctx, void *env)
{
    fault_env *e = env;
    e->f.ctx = ctx;
    assert_int_equal(env_setup_in(&e->f), 0);
    assert_int_equal(add_via(&e->f), CR_OK);
}

static cr_status fault_prepare(cr_ctx *ctx, void *env, cr_prepared **p)
{
    fault_env *e = env;
    return cr_prepare_hvp(ctx, e->f.eng, mix_t, NULL, e->x, 3, p);
}

static cr_status fault_call(cr_prepared *p, void *env)
{
    fault_env *e = env;
    return cr_prepared_hvp(p, e->x, 3, e->v, e->hv, &e->y, e->g);
}

static void fault_check(void *env)
{
    fault_env *e = env;
    assert_true(e->y == e->yw);
    for (size_t j = 0; j < 3; j++)
        assert_true(e->hv[j] == e->want[j] && e->g[j] == e->gw[j]);
}

static void fault_teardown(void *env)
{
    cr_engine_free(((fault_env *)env)->f.eng);
}

static void test_fault_injection(void **state)
{
    fixt *f = *state;
    assert_int_equal(add_via(f), CR_OK);
    fault_env e = {.x = {0.7, -0.4, 0.9}, .v = {0.3, 1.0, -0.6}};
    {
        cr_prepared *p = NULL;
        assert_int_equal(cr_prepare_hvp(f->ctx, f->eng, mix_t, NULL, e.x, 3, &p), CR_OK);
        assert_int_equal(cr_prepared_hvp(p, e.x, 3, e.v, e.want, &e.yw, e.gw), CR_OK);
        cr_prepared_free(p);
    }
    const fault_case fc = {.setup = fault_setup,
                           .prepare = fault_prepare,
                           .call = fault_call,
                           .check = fault_check,
                           .teardown = fault_teardown,
                           .prepare_earena = true,
                           .max_runs = 1999};
    fault_tally n = fault_each_allocation(&fc, &e);
    assert_true(n.failed_prepare > 0);
    assert_true(n.failed_call > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_argument, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_two_and_three_arguments, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_many_arguments, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_tuple_and_builtin_rules, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_rrule_via_ad, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_arrays, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_rule_fails, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_domain_edge, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_both_sides_fail, env_setup, env_teardown),
        cmocka_unit_test(test_no_allocation),
        cmocka_unit_test_setup_teardown(test_fault_injection, env_setup, env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
