/*
 * Tests of prepared gradients (record once, replay at new inputs): gradients at new points
 * against Rosenbrock's hand-derived gradient and against central differences of functions
 * in plain C (rows with constants, tuple results, three-argument rows, repeated operands,
 * overlays); no allocation during replays; comparisons recorded with cr_tape_cmp that come
 * out otherwise fail the replay instead of giving the other branch's gradient; a rule kept
 * as a pullback is replayed; shape changes and inputs made inside the function are refused;
 * allocation failures while preparing.
 */
#include <math.h>
#include <stdio.h>

#include "test_alloc.h"
#include "test_rosen.h"
#include "test_util.h"

#define FD_RTOL 1e-8

static void test_rosenbrock_replay(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    enum { N = 300 };
    double x[N], g[N], want[N], y;
    for (size_t i = 0; i < N; i++)
        x[i] = 0.5;
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(ctx, NULL, rosen_t, NULL, x, N, &p), CR_OK);
    size_t allocs = c.allocs;
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < N; i++)
            x[i] = 0.3 + 0.6 * sin(0.7 * (double)i + round);
        assert_int_equal(cr_prepared_value_and_gradient(p, x, N, &y, g), CR_OK);
        rosen_grad(x, N, want);
        double fy = 0;
        for (size_t i = 0; i + 1 < N; i++)
            fy += 100 * pow(x[i + 1] - x[i] * x[i], 2) + pow(1 - x[i], 2);
        assert_close(y, fy, 1e-13);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], want[i], 1e-12);
    }
    assert_int_equal(c.allocs, allocs); /* replays allocate nothing */
    /* Another number of inputs */
    assert_int_equal(cr_prepared_value_and_gradient(p, x, N - 1, &y, g), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(ctx), "prepared for 300 inputs, 299 given");
    cr_prepared_free(p);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

/* k(x) = pow(x0, 3) sin(x1) + muladd(x0, x1, x2) x2 + 2.5 x0 x0 + sincos(x1) product
 *        + exp(x2) / 4 - (x1 - x1) */
static double k_c(const double *x)
{
    return pow(x[0], 3) * sin(x[1]) + (x[0] * x[1] + x[2]) * x[2] + 2.5 * x[0] * x[0] +
           sin(x[1]) * cos(x[1]) + exp(x[2]) / 4;
}

static cr_status k_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = k_c(x);
    return CR_OK;
}

static cr_status k_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var pa[2] = {x[0], cr_const(3.0)}, ma[3] = {x[0], x[1], x[2]}, sc[2];
    cr_var a = cr_mul(t, cr_tape_call1(t, &cr_fn_pow, pa, 2), cr_sin(t, x[1]));
    cr_var b = cr_mul(t, cr_tape_call1(t, &cr_fn_muladd, ma, 3), x[2]);
    cr_var c = cr_mul(t, cr_const(2.5), cr_mul(t, x[0], x[0]));
    cr_tape_call(t, &cr_fn_sincos, &x[1], 1, sc, 2);
    cr_var d = cr_add(t, cr_mul(t, sc[0], sc[1]), cr_div(t, cr_exp(t, x[2]), cr_const(4.0)));
    y[0] = cr_sub(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_sub(t, x[1], x[1]));
    return cr_tape_status(t);
}

static void test_rows_replay(void **state)
{
    fixture *f = *state;
    const double x0[3] = {0.4, 1.1, -0.3};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, k_t, NULL, x0, 3, &p), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    const double pts[][3] = {{0.4, 1.1, -0.3}, {1.3, -0.2, 0.8}, {-0.9, 2.0, 0.1}};
    for (size_t i = 0; i < 3; i++) {
        double y, g[3], fd[3];
        assert_int_equal(cr_prepared_value_and_gradient(p, pts[i], 3, &y, g), CR_OK);
        assert_close(y, k_c(pts[i]), 1e-14);
        assert_int_equal(cr_fd_jacobian(&m, NULL, k_fd, NULL, pts[i], 3, 1, f->arena, fd, NULL),
                         CR_OK);
        for (size_t j = 0; j < 3; j++)
            assert_close(g[j], fd[j], FD_RTOL);
    }
    cr_prepared_free(p);
}

/* h(x) = x^2 if x > 0 else -x^3, branching through the tape */
static cr_status branchy(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    if (cr_tape_cmp(t, x[0], CR_CMP_GT, cr_const(0.0)))
        y[0] = cr_mul(t, x[0], x[0]);
    else
        y[0] = cr_neg(t, cr_mul(t, x[0], cr_mul(t, x[0], x[0])));
    return cr_tape_status(t);
}

static void test_branch_guard(void **state)
{
    fixture *f = *state;
    double x = 1.0, y, g;
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, branchy, NULL, &x, 1, &p), CR_OK);
    x = 2.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(y, 4.0, 0);
    assert_close(g, 4.0, 0);
    /* The other branch: refused, nothing written. */
    x = -1.0;
    y = g = 42.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "-1 > 0");
    assert_contains(cr_ctx_errmsg(f->ctx), "prepare it again");
    assert_true(y == 42.0 && g == 42.0);
    /* Still usable where the recording holds. */
    x = 3.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(g, 6.0, 0);
    cr_prepared_free(p);
    /* Prepared on the other side, the other branch is checked the same way. */
    x = -2.0;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, branchy, NULL, &x, 1, &p), CR_OK);
    x = -1.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(g, -3.0, 0);
    x = 0.5;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_EDOMAIN);
    cr_prepared_free(p);
}

/* clampish(x) = 2 if x < 0.5 else x^2: a branch that makes the output a constant */
static cr_status clampish(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    if (cr_tape_cmp(t, x[0], CR_CMP_LT, cr_const(0.5)))
        y[0] = cr_const(2.0);
    else
        y[0] = cr_mul(t, x[0], x[0]);
    return cr_tape_status(t);
}

/* A constant output still depends on the comparisons that chose it: a replay where one
 * comes out otherwise is refused (it used to return the constant and a zero gradient). */
static void test_branch_to_constant(void **state)
{
    fixture *f = *state;
    double x = 0.0, y, g, v = 1.0, hv;
    cr_prepared *p, *ph;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, clampish, NULL, &x, 1, &p), CR_OK);
    assert_int_equal(cr_prepare_hvp(f->ctx, NULL, clampish, NULL, &x, 1, &ph), CR_OK);
    x = 0.25;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    ASSERT_DBL(y, 2.0);
    ASSERT_DBL(g, 0.0);
    assert_int_equal(cr_prepared_hvp(ph, &x, 1, &v, &hv, &y, &g), CR_OK);
    ASSERT_DBL(y, 2.0);
    ASSERT_DBL(g, 0.0);
    ASSERT_DBL(hv, 0.0);
    x = 1.0;
    y = g = hv = 42.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "the comparison 1 < 0.5");
    assert_true(y == 42.0 && g == 42.0);
    assert_int_equal(cr_prepared_hvp(ph, &x, 1, &v, &hv, &y, &g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "the comparison 1 < 0.5");
    assert_true(y == 42.0 && g == 42.0 && hv == 42.0);
    assert_int_equal(cr_prepared_value_and_gradient(ph, &x, 1, &y, &g), CR_EDOMAIN);
    x = -3.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    ASSERT_DBL(y, 2.0);
    assert_int_equal(cr_prepared_hvp(ph, &x, 1, &v, &hv, &y, &g), CR_OK);
    ASSERT_DBL(hv, 0.0);
    cr_prepared_free(p);
    cr_prepared_free(ph);
}

/* A pullback replayed; refusals: inputs made inside the function */
static cr_status twice_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(2 * args[0].u.f64);
    return CR_OK;
}
static const cr_function twice_fn = {.name = "twice", .arity = 1, .primal = twice_primal};

static cr_status twice_pb(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                          void *env)
{
    (void)nx;
    (void)arena;
    (void)env;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(2 * dy->u.f64);
    return CR_OK;
}

static cr_status twice_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){twice_pb, NULL, "twice_pullback", 2};
    return twice_primal(arena, fv, args, nargs, y);
}

static cr_status uses_twice(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    cr_value *tw = env;
    y[0] = cr_tape_call1(t, tw, x, 1);
    return cr_tape_status(t);
}

static cr_status twice_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_add(t, x[0], x[0]);
    return cr_tape_status(t);
}

static cr_status own_input(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, x[0], cr_tape_input(t, 2.0));
    return cr_tape_status(t);
}

static void test_refusals(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    static const cr_argspec a1[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &twice_fn, .nargs = 1, .args = a1, .rrule = twice_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    cr_value tw = cr_value_function(&twice_fn, NULL);
    double x = 1.5, y, g;
    cr_prepared *p;
    /* A rule kept as a pullback is replayed by calling its rrule again (more in
     * tests/test_prepared_generic.c). */
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, uses_twice, &tw, &x, 1, &p), CR_OK);
    x = 3.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(y, 6.0, 0);
    assert_close(g, 2.0, 0);
    cr_prepared_free(p);
    /* Through an overlay too. */
    cr_engine *eng2;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng2), CR_OK);
    assert_int_equal(cr_engine_overlay(eng2, &twice_fn, twice_ad, 1, NULL), CR_OK);
    assert_int_equal(cr_prepare_gradient(f->ctx, eng2, uses_twice, &tw, &x, 1, &p), CR_OK);
    x = 4.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(y, 8.0, 0);
    assert_close(g, 2.0, 0);
    cr_prepared_free(p);
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, own_input, NULL, &x, 1, &p), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "made 1 input of its own");
    cr_engine_free(eng2);
    cr_engine_free(eng);
}

static void test_prepare_fault_injection(void **state)
{
    (void)state;
    bool passed = false;
    for (size_t n = 1; n < 100 && !passed; n++) {
        counter c = {.fail_at = n};
        cr_ctx *ctx;
        cr_ctx_params cp = {
            .struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
        if (cr_ctx_new(&cp, &ctx) != CR_OK)
            continue;
        double x[50], g[50], want[50], y;
        for (size_t i = 0; i < 50; i++)
            x[i] = cos((double)i);
        cr_prepared *p;
        cr_status st = cr_prepare_gradient(ctx, NULL, rosen_t, NULL, x, 50, &p);
        if (st == CR_OK) {
            assert_int_equal(cr_prepared_value_and_gradient(p, x, 50, &y, g), CR_OK);
            rosen_grad(x, 50, want);
            for (size_t i = 0; i < 50; i++)
                assert_close(g[i], want[i], 1e-13);
            cr_prepared_free(p);
            passed = true;
        } else {
            assert_int_equal(st, CR_ENOMEM);
            assert_null(p);
        }
        cr_ctx_free(ctx);
        assert_int_equal(c.live, 0);
    }
    assert_true(passed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rosenbrock_replay),
        cmocka_unit_test_setup_teardown(test_rows_replay, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_branch_guard, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_branch_to_constant, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_prepare_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
