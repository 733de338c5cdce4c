/*
 * Tests of the prepared program's runs: a program of scalar inputs whose scalar instructions
 * (compiled by the scalar kind and replayed in its own loops) are cut into several runs by
 * array functions, a fused kernel and rules kept as pullbacks (replayed one by one by their
 * node kinds). Values kept in the passes' registers before a cut and read after it, scalar
 * variables read by array functions several runs later, inputs read in every run, and
 * comparisons in a later run that fail at new inputs: the gradient at several points against
 * central differences of the same function in plain C and against recording again on an
 * ordinary tape, H·v against differences of recorded gradients, and allocation failures at
 * every allocation of preparing and of the first call.
 */
#include <math.h>
#include <stdio.h>

#include "test_fault_hook.h"
#include "test_util.h"

#define FD_RTOL 1e-7

static const double k_B[4] = {0.5, -1.0, 0.25, 2.0};

/* Central differences (the library's 5-point method) of a plain function of n variables. */
static void fd_grad(cr_arena *arena, cr_fd_vec_fn f, void *env, const double *x, size_t n,
                    double *g)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, f, env, x, n, 1, arena, g, NULL), CR_OK);
}

/* The function in plain C (runs_t records it):
 *   t = x0 x1;  u = sin(x2)                          run 1: t stays in a register
 *   a = sum(exp.(x2 .* B))                           array functions
 *   w = t + a;  [w > -100]                           run 2: reads t from run 1
 *   h = hypot(t, x0, x2)                             a rule kept as a pullback
 *   r = w u + h;  r = x1 < 2 ? r x1 : r - x1         run 3: a comparison
 *   y = r + sum(r .* B .* B) + x0 x2                 an array function of r, then run 4 */
static double runs_c(const double *x)
{
    double t = x[0] * x[1], u = sin(x[2]), a = 0, sb = 0;
    for (size_t i = 0; i < 4; i++) {
        a += exp(x[2] * k_B[i]);
        sb += k_B[i] * k_B[i];
    }
    double w = t + a;
    double h = sqrt(t * t + x[0] * x[0] + x[2] * x[2]);
    double r = w * u + h;
    r = x[1] < 2 ? r * x[1] : r - x[1];
    return r + r * sb + x[0] * x[2];
}

static cr_status runs_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = runs_c(x);
    return CR_OK;
}

static cr_status runs_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_array B = cr_array_vector((double *)k_B, 4);
    cr_var tt = cr_mul(t, x[0], x[1]);
    cr_var u = cr_sin(t, x[2]);
    cr_var a =
        cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_exp,
                                      cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(x[2]),
                                                                   cr_targ_arr(cr_av_const(&B))))));
    cr_var w = cr_add(t, tt, a);
    if (!cr_tape_cmp(t, w, CR_CMP_GT, cr_const(-100.0)))
        return CR_EDOMAIN; /* (not taken at the test's points) */
    cr_var hx[3] = {tt, x[0], x[2]};
    cr_var h = cr_tape_call1(t, &cr_fn_hypot, hx, 3);
    cr_var r = cr_add(t, cr_mul(t, w, u), h);
    if (cr_tape_cmp(t, x[1], CR_CMP_LT, cr_const(2.0)))
        r = cr_mul(t, r, x[1]);
    else
        r = cr_sub(t, r, x[1]);
    cr_avar rb = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(r), cr_targ_arr(cr_av_const(&B)));
    cr_var s = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(rb), cr_targ_arr(cr_av_const(&B))));
    y[0] = cr_add(t, cr_add(t, r, s), cr_mul(t, x[0], x[2]));
    return cr_tape_status(t);
}

/* The gradient by recording on an ordinary tape and sweeping. */
static void rerecord(cr_ctx *ctx, const double *x, double *y, double *g)
{
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_value_and_gradient(t, runs_t, NULL, x, 3, y, g), CR_OK);
    cr_tape_free(t);
}

static const double k_pts[4][3] = {
    {0.3, 1.2, 0.7}, {-0.8, 0.4, -1.3}, {1.1, 1.9, 0.2}, {0.6, -0.5, 2.1}};

static void test_gradient(void **state)
{
    fixture *f = *state;
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, runs_t, NULL, k_pts[0], 3, &p), CR_OK);
    for (size_t k = 0; k < 4; k++) {
        double y, g[3], fd[3], yr, gr[3];
        assert_int_equal(cr_prepared_value_and_gradient(p, k_pts[k], 3, &y, g), CR_OK);
        assert_close(y, runs_c(k_pts[k]), 1e-13);
        fd_grad(f->arena, runs_fd, NULL, k_pts[k], 3, fd);
        rerecord(f->ctx, k_pts[k], &yr, gr);
        assert_close(y, yr, 1e-14);
        for (size_t j = 0; j < 3; j++) {
            assert_close(g[j], fd[j], FD_RTOL);
            assert_close(g[j], gr[j], 1e-13);
        }
    }
    cr_prepared_free(p);
}

/* A comparison of a later run that comes out otherwise stops the call with CR_EDOMAIN naming
 * it; the next call at a good point is right. */
static void test_guard_in_later_run(void **state)
{
    fixture *f = *state;
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, runs_t, NULL, k_pts[0], 3, &p), CR_OK);
    const double bad[3] = {0.3, 2.5, 0.7};
    double y, g[3], yr, gr[3];
    assert_int_equal(cr_prepared_value_and_gradient(p, bad, 3, &y, g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "comparison 2.5 < 2");
    assert_int_equal(cr_prepared_value_and_gradient(p, k_pts[1], 3, &y, g), CR_OK);
    rerecord(f->ctx, k_pts[1], &yr, gr);
    for (size_t j = 0; j < 3; j++)
        assert_close(g[j], gr[j], 1e-13);
    cr_prepared_free(p);
}

/* H·v of the same program (runs of the scalar kind between array functions and a rule kept
 * as a pullback) against differences of recorded gradients. */
static void test_hvp(void **state)
{
    fixture *f = *state;
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(f->ctx, NULL, runs_t, NULL, k_pts[0], 3, &p), CR_OK);
    cr_tape *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    const double v[3] = {0.4, -1.0, 0.3};
    for (size_t k = 0; k < 4; k++) {
        double hv[3], g[3], y, yr, gr[3];
        assert_int_equal(cr_prepared_hvp(p, k_pts[k], 3, v, hv, &y, g), CR_OK);
        assert_close(y, runs_c(k_pts[k]), 1e-13);
        rerecord(f->ctx, k_pts[k], &yr, gr);
        for (size_t j = 0; j < 3; j++)
            assert_close(g[j], gr[j], 1e-13);
        assert_hvp_by_gradients(u, runs_t, k_pts[k], v, 3, hv);
    }
    cr_tape_free(u);
    cr_prepared_free(p);
}

/* Every allocation of preparing and of the first call fails in turn: CR_ENOMEM, nothing
 * leaked, and a prepared gradient whose first call failed is right at the next call. */
typedef struct fault_env {
    double y, g[3], yw, want[3];
} fault_env;

static cr_status fault_prepare(cr_ctx *ctx, void *env, cr_prepared **p)
{
    (void)env;
    return cr_prepare_gradient(ctx, NULL, runs_t, NULL, k_pts[0], 3, p);
}

static cr_status fault_call(cr_prepared *p, void *env)
{
    fault_env *e = env;
    return cr_prepared_value_and_gradient(p, k_pts[1], 3, &e->y, e->g);
}

static void fault_check(void *env)
{
    fault_env *e = env;
    assert_close(e->y, e->yw, 1e-14);
    for (size_t j = 0; j < 3; j++)
        assert_close(e->g[j], e->want[j], 1e-13);
}

static void test_fault_injection(void **state)
{
    (void)state;
    fault_env e;
    cr_ctx *clean;
    assert_int_equal(cr_ctx_new(NULL, &clean), CR_OK);
    rerecord(clean, k_pts[1], &e.yw, e.want);
    cr_ctx_free(clean);
    const fault_case fc = {
        .prepare = fault_prepare, .call = fault_call, .check = fault_check, .max_runs = 399};
    fault_tally n = fault_each_allocation(&fc, &e);
    assert_true(n.failed_prepare > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gradient, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_guard_in_later_run, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hvp, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
