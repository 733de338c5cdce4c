/*
 * Tests of prepared Hessian-vector products (cr_prepare_hvp, cr_prepared_hvp): value,
 * gradient and H v at several new points and directions against central differences of the
 * same functions in plain C (the gradient of f, and H v as the derivative of that gradient
 * along v, both by the library's finite differences), and against cr_tape_hvp on a fresh
 * second-order recording; Rosenbrock (arithmetic rows), a function of named rows (sin, exp,
 * log, division, negation, the real-only atan2, the two-result sincos), a branch through
 * cr_tape_cmp that holds or flips, a zero-adjoint function, a constant output; no
 * allocation after the first call; allocation failures at every point; every refusal and bad
 * argument, after which the prepared H v still works.
 */
#include <math.h>
#include <string.h>

#include "test_alloc.h"
#include "test_fault_hook.h"
#include "test_fdhvp.h"
#include "test_polar.h"
#include "test_rosen.h"
#include "test_util.h"

#define MAXN 8

/* ---- The functions ----------------------------------------------------------------------- */

static cr_status rosen_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    y[0] = rosen_value(x, n);
    return CR_OK;
}

/* sin(x0 x1) + exp(x2) / (1 + x0^2) + log(x1^2 + x2^2 + 0.5) x0 - x2 / x1 + 3 / x1
 * + atan2(x0, x1 + 2) + s c x1 with (s, c) = sincos(x2 - x0), + (2 - x0) / 3 */
static double mix_c(const double *x)
{
    double s = sin(x[2] - x[0]), c = cos(x[2] - x[0]);
    return sin(x[0] * x[1]) + exp(x[2]) / (1 + x[0] * x[0]) +
           log(x[1] * x[1] + x[2] * x[2] + 0.5) * x[0] - x[2] / x[1] + 3.0 / x[1] +
           atan2(x[0], x[1] + 2.0) + s * c * x[1] + (2.0 - x[0]) / 3.0;
}

static cr_status mix_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = mix_c(x);
    return CR_OK;
}

static cr_status mix_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var a = cr_sin(t, cr_mul(t, x[0], x[1]));
    cr_var b = cr_div(t, cr_exp(t, x[2]), cr_add(t, cr_const(1.0), cr_mul(t, x[0], x[0])));
    cr_var q = cr_add(t, cr_add(t, cr_mul(t, x[1], x[1]), cr_mul(t, x[2], x[2])), cr_const(0.5));
    cr_var c = cr_mul(t, cr_log(t, q), x[0]);
    cr_var d = cr_neg(t, cr_div(t, x[2], x[1]));
    cr_var e = cr_div(t, cr_const(3.0), x[1]);
    cr_var at[2] = {x[0], cr_add(t, x[1], cr_const(2.0))};
    cr_var f = cr_tape_call1(t, &cr_fn_atan2, at, 2);
    cr_var u = cr_sub(t, x[2], x[0]), sc[2];
    if (cr_tape_call(t, &cr_fn_sincos, &u, 1, sc, 2) != CR_OK)
        return cr_tape_status(t);
    cr_var g = cr_mul(t, cr_mul(t, sc[0], sc[1]), x[1]);
    cr_var h = cr_div(t, cr_sub(t, cr_const(2.0), x[0]), cr_const(3.0));
    y[0] = cr_add(t, cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_add(t, e, f)),
                  cr_add(t, g, h));
    return cr_tape_status(t);
}

/* x0 x1 > 0.5 ? x0^3 x1 + exp(x1) : sin(x0) x1^2, branching through cr_tape_cmp */
static double branch_c(const double *x)
{
    return x[0] * x[1] > 0.5 ? x[0] * x[0] * x[0] * x[1] + exp(x[1]) : sin(x[0]) * x[1] * x[1];
}

static cr_status branch_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = branch_c(x);
    return CR_OK;
}

static cr_status branch_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    if (cr_tape_cmp(t, cr_mul(t, x[0], x[1]), CR_CMP_GT, cr_const(0.5)))
        y[0] = cr_add(t, cr_mul(t, cr_mul(t, cr_mul(t, x[0], x[0]), x[0]), x[1]), cr_exp(t, x[1]));
    else
        y[0] = cr_mul(t, cr_sin(t, x[0]), cr_mul(t, x[1], x[1]));
    return cr_tape_status(t);
}

/* ---- Checks ------------------------------------------------------------------------------ */

/* H v of f on a fresh second-order recording at x. */
static void tape_hvp(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, const double *x, size_t n,
                     const double *v, double *hv, double *y, double *g)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER, .engine = eng};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    static cr_var xs[256];
    cr_var out;
    assert_true(n <= 256);
    assert_ok(t, cr_tape_record(t, f, NULL, x, n, xs, &out, 1));
    assert_ok(t, cr_tape_hvp(t, out, xs, n, v, hv, g));
    *y = out.v;
    cr_tape_free(t);
}

/* At each point and along ndirs directions: value, gradient and H v from p against central
 * differences of the plain C function fc, and against cr_tape_hvp on a fresh recording. */
static void check_points(cr_ctx *ctx, cr_prepared *p, cr_ad_fn f, cr_fd_vec_fn fc,
                         const double (*pts)[MAXN], size_t npts, size_t n, unsigned ndirs,
                         double fd_tol)
{
    cr_arena *arena;
    assert_int_equal(cr_arena_new(ctx, 0, &arena), CR_OK);
    for (size_t k = 0; k < npts; k++) {
        for (unsigned d = 0; d < ndirs; d++) {
            double v[MAXN], hv[MAXN], g[MAXN], y, want[MAXN], gw[MAXN], yw, th[MAXN], tg[MAXN], ty;
            direction(n, d + 3 * (unsigned)k, v);
            assert_int_equal(cr_prepared_hvp(p, pts[k], n, v, hv, &y, g), CR_OK);
            fdref r = {fc, NULL, pts[k], v, n, arena};
            assert_int_equal(fc(pts[k], n, &yw, 1, NULL), CR_OK);
            assert_close(y, yw, 1e-14);
            fd_grad(&r, pts[k], gw);
            fd_hvp(&r, want);
            tape_hvp(ctx, NULL, f, pts[k], n, v, th, &ty, tg);
            assert_true(ty == y);
            for (size_t j = 0; j < n; j++) {
                ASSERT_CLOSE(g[j], gw[j], 1e-8 * (1 + fabs(gw[j])));
                ASSERT_CLOSE(hv[j], want[j], fd_tol * (1 + fabs(want[j])));
                assert_close(g[j], tg[j], 1e-14);
                ASSERT_CLOSE(hv[j], th[j], 1e-12 * (1 + fabs(th[j])));
            }
            cr_arena_reset(arena);
        }
    }
    cr_arena_free(arena);
}

static void test_rosenbrock(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    double x0[6] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(ctx, NULL, rosen_t, NULL, x0, 6, &p), CR_OK);
    const double pts[4][MAXN] = {{-1.2, 1.0, 0.3, 0.8, -0.4, 1.1},
                                 {1.0, 1.0, 1.0, 1.0, 1.0, 1.0},
                                 {0.7, -0.3, 2.1, 0.05, -1.6, 0.9},
                                 {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}};
    check_points(ctx, p, rosen_t, rosen_fd, pts, 4, 6, 3, 1e-7);
    /* The same prepared H v gives gradients too. */
    double y, g[6], yw;
    assert_int_equal(cr_prepared_value_and_gradient(p, pts[2], 6, &y, g), CR_OK);
    assert_int_equal(rosen_fd(pts[2], 6, &yw, 1, NULL), CR_OK);
    assert_close(y, yw, 1e-14);
    /* y and grad may be NULL. */
    double v[6], hv[6], hv2[6];
    direction(6, 1, v);
    assert_int_equal(cr_prepared_hvp(p, pts[0], 6, v, hv, NULL, NULL), CR_OK);
    assert_int_equal(cr_prepared_hvp(p, pts[0], 6, v, hv2, &y, g), CR_OK);
    for (size_t j = 0; j < 6; j++)
        assert_true(hv[j] == hv2[j]);
    cr_prepared_free(p);
    cr_ctx_free(ctx);
}

static void test_named_rows(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    double x0[3] = {0.4, 1.3, -0.2};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(ctx, NULL, mix_t, NULL, x0, 3, &p), CR_OK);
    const double pts[4][MAXN] = {
        {0.4, 1.3, -0.2}, {-0.9, 0.6, 0.8}, {1.7, -0.8, 0.3}, {0.2, 2.5, -1.4}};
    check_points(ctx, p, mix_t, mix_fd, pts, 4, 3, 3, 1e-7);
    cr_prepared_free(p);
    cr_ctx_free(ctx);
}

/* pow(x, c) at x < 0 with integer c: second derivatives by differences of the partials
 * where the complex step would sit on the branch cut of log (see tape.c, cr__row_hessian). */
static double negpow_c(const double *x)
{
    return pow(x[0], 3) * x[1] + pow(x[1], -2);
}

static cr_status negpow_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = negpow_c(x);
    return CR_OK;
}

static cr_status negpow_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var a[2] = {x[0], cr_const(3.0)}, b[2] = {x[1], cr_const(-2.0)};
    y[0] = cr_add(t, cr_mul(t, cr_tape_call1(t, &cr_fn_pow, a, 2), x[1]),
                  cr_tape_call1(t, &cr_fn_pow, b, 2));
    return cr_tape_status(t);
}

static void test_branch_cut(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    double x0[2] = {0.6, 1.1};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(ctx, NULL, negpow_t, NULL, x0, 2, &p), CR_OK);
    const double pts[3][MAXN] = {{-0.5, -0.8}, {-1.3, 0.7}, {0.9, -1.6}};
    check_points(ctx, p, negpow_t, negpow_fd, pts, 3, 2, 3, 1e-7);
    cr_prepared_free(p);
    cr_ctx_free(ctx);
}

static void test_branch(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    double x0[2] = {1.1, 0.9};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(ctx, NULL, branch_t, NULL, x0, 2, &p), CR_OK);
    const double same[3][MAXN] = {{1.1, 0.9}, {2.0, 0.4}, {-1.5, -0.8}};
    check_points(ctx, p, branch_t, branch_fd, same, 3, 2, 2, 1e-7);
    /* The comparison flips: refused, nothing written; then usable again. */
    const double flip[2] = {0.3, 0.9};
    double v[2] = {0.6, -0.8}, hv[2] = {42, 42}, g[2] = {42, 42}, y = 42;
    assert_int_equal(cr_prepared_hvp(p, flip, 2, v, hv, &y, g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(ctx), "was true when recorded and is false at these inputs");
    assert_true(hv[0] == 42 && hv[1] == 42 && g[0] == 42 && g[1] == 42 && y == 42);
    check_points(ctx, p, branch_t, branch_fd, same + 1, 1, 2, 1, 1e-7);
    cr_prepared_free(p);
    /* Prepared on the other side: the other branch's H v. */
    assert_int_equal(cr_prepare_hvp(ctx, NULL, branch_t, NULL, flip, 2, &p), CR_OK);
    const double other[2][MAXN] = {{0.3, 0.9}, {-0.4, 1.7}};
    check_points(ctx, p, branch_t, branch_fd, other, 2, 2, 2, 1e-7);
    cr_prepared_free(p);
    cr_ctx_free(ctx);
}

/* x sin(x) with sin zero-adjoint: the same as a fresh second-order recording (sin(x) a
 * constant there) at each point */
static cr_status zrow_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var s = cr_tape_call1(t, &cr_fn_sin, x, 1);
    y[0] = cr_add(t, cr_mul(t, cr_mul(t, x[0], s), x[1]), cr_mul(t, cr_exp(t, x[1]), s));
    return cr_tape_status(t);
}

static void test_zero_adjoint(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_engine *eng;
    assert_int_equal(cr_engine_new(ctx, NULL, &eng), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(eng, cr_fn_sin.u.func.fn), CR_OK);
    double x[2] = {0.4, -0.3};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(ctx, eng, zrow_t, NULL, x, 2, &p), CR_OK);
    const double pts[3][2] = {{0.4, -0.3}, {1.9, 0.7}, {-2.2, 1.4}};
    for (size_t k = 0; k < 3; k++) {
        double v[2] = {0.8, -1.3}, hv[2], g[2], y, th[2], tg[2], ty;
        assert_int_equal(cr_prepared_hvp(p, pts[k], 2, v, hv, &y, g), CR_OK);
        tape_hvp(ctx, eng, zrow_t, pts[k], 2, v, th, &ty, tg);
        assert_true(y == ty);
        for (size_t j = 0; j < 2; j++) {
            assert_close(g[j], tg[j], 1e-14);
            ASSERT_CLOSE(hv[j], th[j], 1e-13 * (1 + fabs(th[j])));
        }
        /* sin's value is evaluated again: it is not the recorded constant */
        assert_close(y, pts[k][0] * sin(pts[k][0]) * pts[k][1] + exp(pts[k][1]) * sin(pts[k][0]),
                     1e-14);
    }
    cr_prepared_free(p);
    cr_engine_free(eng);
    cr_ctx_free(ctx);
}

/* A constant output: zeros. */
static cr_status const_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)t;
    (void)x;
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_const(2.5);
    return CR_OK;
}

static void test_constant_output(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    double x[2] = {1, 2}, v[2] = {1, 1}, hv[2] = {9, 9}, g[2] = {9, 9}, y = 0;
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(ctx, NULL, const_t, NULL, x, 2, &p), CR_OK);
    assert_int_equal(cr_prepared_hvp(p, x, 2, v, hv, &y, g), CR_OK);
    assert_true(y == 2.5 && hv[0] == 0 && hv[1] == 0 && g[0] == 0 && g[1] == 0);
    cr_prepared_free(p);
    cr_ctx_free(ctx);
}

/* ---- Refusals and bad arguments ---------------------------------------------------------- */

static cr_status polar_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value polar = cr_value_function(&polar_fn, NULL);
    cr_var rt[2];
    if (cr_tape_call(t, &polar, x, 2, rt, 2) != CR_OK)
        return cr_tape_status(t);
    y[0] = cr_mul(t, rt[0], rt[1]);
    return cr_tape_status(t);
}

/* Array functions of scalar inputs: x1 sum(sin.(x0 .* b)) + sum(exp.(x1 .* b) .* b) x0, with
 * b a constant array; broadcasts and sums recorded as kernels, the 2-norm of x0 .* b
 * through its rule (which has its own second-order form). */
static double k_b[5] = {0.1, -0.2, 0.3, 0.4, -0.5};

static cr_status array_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    static cr_array B; /* a constant's array lives as long as the prepared H v */
    B = cr_array_vector(k_b, 5);
    cr_avar bc = cr_av_const(&B);
    cr_avar a = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(x[0]), cr_targ_arr(bc));
    cr_var s1 = cr_mul(t, cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(a))), x[1]);
    cr_avar e = cr_av_broadcast1(
        t, &cr_fn_exp,
        cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(x[1]), cr_targ_arr(bc))));
    cr_var s2 = cr_mul(t, cr_av_dot(t, e, bc), x[0]);
    cr_targ na[1] = {cr_targ_arr(a)};
    y[0] = cr_add(t, cr_add(t, s1, s2), cr_tape_acall_s(t, &cr_fn_norm, na, 1));
    return cr_tape_status(t);
}

static cr_status array_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    double s1 = 0, s2 = 0, nn = 0;
    for (size_t i = 0; i < 5; i++) {
        s1 += sin(x[0] * k_b[i]);
        s2 += exp(x[1] * k_b[i]) * k_b[i];
        nn += x[0] * k_b[i] * x[0] * k_b[i];
    }
    y[0] = x[1] * s1 + s2 * x[0] + sqrt(nn);
    return CR_OK;
}

/* Array functions and kernels of scalar inputs are replayed: their rules or loops again,
 * then their forward and second-order steps. */
static void test_array_functions(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    double x0[2] = {0.7, 0.4};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(ctx, NULL, array_t, NULL, x0, 2, &p), CR_OK);
    const double pts[3][MAXN] = {{0.7, 0.4}, {-1.3, 2.2}, {2.5, -0.6}};
    check_points(ctx, p, array_t, array_fd, pts, 3, 2, 3, 1e-7);
    /* The first-order replay on the same p, after the second-order calls. */
    double y, g[2], yw, gw[2];
    assert_int_equal(cr_prepared_value_and_gradient(p, pts[1], 2, &y, g), CR_OK);
    cr_prepared *q;
    assert_int_equal(cr_prepare_gradient(ctx, NULL, array_t, NULL, x0, 2, &q), CR_OK);
    assert_int_equal(cr_prepared_value_and_gradient(q, pts[1], 2, &yw, gw), CR_OK);
    assert_true(y == yw && g[0] == gw[0] && g[1] == gw[1]);
    cr_prepared_free(q);
    cr_prepared_free(p);
    cr_ctx_free(ctx);
}

/* norm(x0 .* B, x1): norm with a variable exponent has no second-order form. */
static cr_status norm_p_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const cr_array *B = env;
    cr_avar a = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(x[0]), cr_targ_arr(cr_av_const(B)));
    cr_targ args[2] = {cr_targ_arr(a), cr_targ_var(x[1])};
    y[0] = cr_tape_acall_s(t, &cr_fn_norm, args, 2);
    return cr_tape_status(t);
}

static cr_status arr_only_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    *y = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(xs[0])));
    return cr_tape_status(t);
}

static void test_refusals(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    double x[2] = {0.7, 0.4};
    cr_prepared *p;
    /* A scalar rule kept as a pullback (test_prepared_hvp_pullback.c): replayed with the
     * second derivatives a second-order tape records for it. */
    cr_engine *eng;
    assert_int_equal(cr_engine_new(ctx, NULL, &eng), CR_OK);
    static const cr_argspec f64_2[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &polar_fn,
                       .nargs = 2,
                       .args = f64_2,
                       .rrule = polar_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    assert_int_equal(cr_prepare_hvp(ctx, eng, polar_t, NULL, x, 2, &p), CR_OK);
    {
        const double x2[2] = {-1.2, 0.5}, v2[2] = {0.3, -0.9};
        double hv2[2], g2[2], y2, th[2], tg[2], ty;
        assert_int_equal(cr_prepared_hvp(p, x2, 2, v2, hv2, &y2, g2), CR_OK);
        tape_hvp(ctx, eng, polar_t, x2, 2, v2, th, &ty, tg);
        assert_true(y2 == ty);
        for (size_t j = 0; j < 2; j++) {
            ASSERT_CLOSE(hv2[j], th[j], 1e-12);
            ASSERT_CLOSE(g2[j], tg[j], 1e-14);
        }
    }
    cr_prepared_free(p);
    /* The same function's first-order prepared gradient is fine. */
    assert_int_equal(cr_prepare_gradient(ctx, eng, polar_t, NULL, x, 2, &p), CR_OK);
    cr_engine_free(eng);
    /* ... and is not a prepared H v. */
    double v[2] = {1, 0}, hv[2] = {42, 42};
    assert_int_equal(cr_prepared_hvp(p, x, 2, v, hv, NULL, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(ctx), "cr_prepared_hvp: prepared with cr_prepare_gradient, "
                                        "which is first order; prepare it with cr_prepare_hvp");
    assert_true(hv[0] == 42 && hv[1] == 42);
    cr_prepared_free(p);

    /* Array functions without a second-order form: refused as f records them, as a
     * second-order tape refuses them. */
    double b[5] = {0.1, -0.2, 0.3, 0.4, -0.5};
    cr_array B = cr_array_vector(b, 5);
    p = (cr_prepared *)&x;
    assert_int_equal(cr_prepare_hvp(ctx, NULL, norm_p_t, &B, x, 2, &p), CR_EUNIMPL);
    assert_null(p);
    assert_contains(cr_ctx_errmsg(ctx),
                    "norm: no second-order form on the tape: the exponent p is a variable");
    /* ... which a first-order prepared gradient replays. */
    assert_int_equal(cr_prepare_gradient(ctx, NULL, norm_p_t, &B, x, 2, &p), CR_OK);
    cr_prepared_free(p);
    /* Arrays prepared for cr_prepared_value_and_gradient_arrays: not a prepared H v. */
    const cr_array *xs[1] = {&B};
    assert_int_equal(cr_prepare_gradient_arrays(ctx, NULL, arr_only_t, NULL, xs, 1, &p), CR_OK);
    assert_int_equal(cr_prepared_hvp(p, x, 2, v, hv, NULL, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(ctx), "prepared with cr_prepare_gradient_arrays, which is "
                                        "first order; prepare it with cr_prepare_hvp_arrays");
    cr_prepared_free(p);
    /* Prepared for H v of arrays: cr_prepared_hvp_arrays, not cr_prepared_hvp. */
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, arr_only_t, NULL, xs, 1, &p), CR_OK);
    assert_int_equal(cr_prepared_hvp(p, x, 2, v, hv, NULL, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(ctx),
                    "cr_prepared_hvp: prepared for arrays; call cr_prepared_hvp_arrays");
    assert_true(hv[0] == 42 && hv[1] == 42);
    cr_prepared_free(p);

    /* What cr_prepare_gradient refuses, named for cr_prepare_hvp. */
    assert_int_equal(cr_prepare_hvp(ctx, NULL, rosen_t, NULL, x, 2, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(ctx), "cr_prepare_hvp: out is NULL");
    p = (cr_prepared *)&x;
    assert_int_equal(cr_prepare_hvp(ctx, NULL, NULL, NULL, x, 2, &p), CR_EINVAL);
    assert_null(p);
    assert_contains(cr_ctx_errmsg(ctx), "cr_prepare_hvp: NULL function or inputs");
    assert_int_equal(cr_prepare_hvp(ctx, NULL, rosen_t, NULL, NULL, 2, &p), CR_EINVAL);
    assert_int_equal(cr_prepare_hvp(NULL, NULL, rosen_t, NULL, x, 2, &p), CR_EINVAL);
    cr_ctx_free(ctx);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    double x[3] = {0.3, -0.5, 1.2}, v[3] = {1, 2, 3}, hv[3] = {42, 42, 42}, g[3] = {42, 42, 42};
    double y = 42;
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(ctx, NULL, rosen_t, NULL, x, 3, &p), CR_OK);
    assert_int_equal(cr_prepared_hvp(NULL, x, 3, v, hv, &y, g), CR_EINVAL);
    assert_int_equal(cr_prepared_hvp(p, NULL, 3, v, hv, &y, g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(ctx), "cr_prepared_hvp: NULL x, v or hv");
    assert_int_equal(cr_prepared_hvp(p, x, 3, NULL, hv, &y, g), CR_EINVAL);
    assert_int_equal(cr_prepared_hvp(p, x, 3, v, NULL, &y, g), CR_EINVAL);
    assert_int_equal(cr_prepared_hvp(p, x, 2, v, hv, &y, g), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(ctx), "cr_prepared_hvp: prepared for 3 inputs, 2 given");
    v[1] = NAN;
    assert_int_equal(cr_prepared_hvp(p, x, 3, v, hv, &y, g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(ctx), "cr_prepared_hvp: direction 1 is nan, not a finite number");
    v[1] = 2;
    v[2] = INFINITY;
    assert_int_equal(cr_prepared_hvp(p, x, 3, v, hv, &y, g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(ctx), "direction 2 is inf");
    for (size_t j = 0; j < 3; j++)
        assert_true(hv[j] == 42 && g[j] == 42);
    assert_true(y == 42);
    /* Still usable. */
    v[2] = 3;
    cr_arena *arena;
    assert_int_equal(cr_arena_new(ctx, 0, &arena), CR_OK);
    fdref r = {rosen_fd, NULL, x, v, 3, arena};
    double want[3];
    fd_hvp(&r, want);
    assert_int_equal(cr_prepared_hvp(p, x, 3, v, hv, &y, g), CR_OK);
    for (size_t j = 0; j < 3; j++)
        ASSERT_CLOSE(hv[j], want[j], 1e-7 * (1 + fabs(want[j])));
    cr_arena_free(arena);
    cr_prepared_free(p);
    cr_ctx_free(ctx);
}

/* ---- Memory ------------------------------------------------------------------------------ */

/* Rosenbrock with a branch and a zero-adjoint sin per term (the GENERIC records' primals go
 * to the arena on the first call). */
static cr_status big_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_sub(t, x[i + 1], cr_mul(t, x[i], x[i]));
        cr_var b = cr_sub(t, cr_const(1.0), x[i]);
        cr_var z = cr_tape_call1(t, &cr_fn_sin, &x[i], 1);
        if (cr_tape_cmp(t, x[i], CR_CMP_GT, cr_const(-5.0)))
            s = cr_add(t, s, cr_mul(t, cr_const(100.0), cr_mul(t, a, a)));
        s = cr_add(t, s, cr_add(t, cr_mul(t, b, b), cr_mul(t, z, cr_exp(t, x[i + 1]))));
    }
    y[0] = s;
    return cr_tape_status(t);
}

enum { BIG_N = 200 };

static void big_point(double *x, double *v, int round)
{
    for (size_t i = 0; i < BIG_N; i++) {
        x[i] = 0.3 + 0.6 * sin(0.7 * (double)i + round);
        v[i] = cos(0.3 * (double)i - round);
    }
}

/* No allocation after the first call. */
static void test_no_allocation(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    cr_engine *eng;
    assert_int_equal(cr_engine_new(ctx, NULL, &eng), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(eng, cr_fn_sin.u.func.fn), CR_OK);
    static double x[BIG_N], v[BIG_N], hv[BIG_N], g[BIG_N], th[BIG_N], tg[BIG_N];
    double y, ty;
    big_point(x, v, 0);
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(ctx, eng, big_t, NULL, x, BIG_N, &p), CR_OK);
    assert_int_equal(cr_prepared_hvp(p, x, BIG_N, v, hv, &y, g), CR_OK);
    size_t allocs = c.allocs;
    for (int round = 1; round < 4; round++) {
        big_point(x, v, round);
        assert_int_equal(cr_prepared_hvp(p, x, BIG_N, v, hv, &y, g), CR_OK);
        assert_int_equal(c.allocs, allocs);
        tape_hvp(ctx, eng, big_t, x, BIG_N, v, th, &ty, tg);
        allocs = c.allocs;
        assert_true(y == ty);
        for (size_t j = 0; j < BIG_N; j++) {
            assert_close(g[j], tg[j], 1e-13);
            ASSERT_CLOSE(hv[j], th[j], 1e-12 * (1 + fabs(th[j])));
        }
    }
    cr_prepared_free(p);
    cr_engine_free(eng);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

/* Allocation failures at every point of preparing and of the first call: CR_ENOMEM, nothing
 * leaks, and a failed call is followed by a good one, which agrees with a context that does
 * not fail. (The zero-adjoint sin is evaluated through its row, which needs no memory: here
 * the first call allocates nothing.) */
typedef struct fault_env {
    double x[BIG_N], v[BIG_N], hv[BIG_N], g[BIG_N], want[BIG_N], gw[BIG_N], y, yw;
    cr_engine *eng;
} fault_env;

static void fault_setup(cr_ctx *ctx, void *env)
{
    fault_env *e = env;
    assert_int_equal(cr_engine_new(ctx, NULL, &e->eng), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(e->eng, cr_fn_sin.u.func.fn), CR_OK);
}

static cr_status fault_prepare(cr_ctx *ctx, void *env, cr_prepared **p)
{
    fault_env *e = env;
    return cr_prepare_hvp(ctx, e->eng, big_t, NULL, e->x, BIG_N, p);
}

static cr_status fault_call(cr_prepared *p, void *env)
{
    fault_env *e = env;
    return cr_prepared_hvp(p, e->x, BIG_N, e->v, e->hv, &e->y, e->g);
}

static void fault_check(void *env)
{
    fault_env *e = env;
    assert_true(e->y == e->yw);
    for (size_t i = 0; i < BIG_N; i++)
        assert_true(e->hv[i] == e->want[i] && e->g[i] == e->gw[i]);
}

static void fault_teardown(void *env)
{
    cr_engine_free(((fault_env *)env)->eng);
}

static void test_fault_injection(void **state)
{
    (void)state;
    static fault_env e;
    big_point(e.x, e.v, 2);
    {
        cr_ctx *clean;
        assert_int_equal(cr_ctx_new(NULL, &clean), CR_OK);
        fault_setup(clean, &e);
        cr_prepared *p;
        assert_int_equal(cr_prepare_hvp(clean, e.eng, big_t, NULL, e.x, BIG_N, &p), CR_OK);
        assert_int_equal(cr_prepared_hvp(p, e.x, BIG_N, e.v, e.want, &e.yw, e.gw), CR_OK);
        cr_prepared_free(p);
        fault_teardown(&e);
        cr_ctx_free(clean);
    }
    const fault_case fc = {.setup = fault_setup,
                           .prepare = fault_prepare,
                           .call = fault_call,
                           .check = fault_check,
                           .teardown = fault_teardown,
                           .prepare_earena = true,
                           .max_runs = 399};
    fault_tally n = fault_each_allocation(&fc, &e);
    assert_true(n.failed_prepare > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rosenbrock),      cmocka_unit_test(test_named_rows),
        cmocka_unit_test(test_branch),          cmocka_unit_test(test_zero_adjoint),
        cmocka_unit_test(test_constant_output), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bad_arguments),   cmocka_unit_test(test_no_allocation),
        cmocka_unit_test(test_fault_injection), cmocka_unit_test(test_branch_cut),
        cmocka_unit_test(test_array_functions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
