/*
 * Tests of the lean first-order replay (src/ad/prepared.c): a program of arithmetic, rows of
 * one result and at most two arguments (cr__lrow) and comparisons (cr__lguard) keeps neither
 * its 64-byte program nor its replay tape once prepared, and its reverse pass clears each
 * adjoint as it reads it instead of clearing them all at each call. Checked: the memory a
 * prepared gradient holds against one recording of the same function; gradients over many
 * calls at changing points, with rows of one and two arguments, constants on either side and
 * comparisons, against central differences of the same function in plain C; a comparison
 * that fails between good calls; a row of three arguments (not lean) in the same program.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

#define FD_RTOL 1e-8
#define NX      6

/* Bytes a context holds now and at most. */
typedef struct meter {
    size_t now, peak;
} meter;

static void *metered_realloc(void *env, void *ptr, size_t old_size, size_t new_size)
{
    meter *m = env;
    if (new_size == 0) {
        free(ptr);
        m->now -= old_size;
        return NULL;
    }
    void *q = realloc(ptr, new_size);
    if (q != NULL) {
        m->now = m->now - old_size + new_size;
        if (m->now > m->peak)
            m->peak = m->now;
    }
    return q;
}

/* A loop of steps mixing the arithmetic rows, rows of one and two arguments (exp, sin,
 * hypot, max), constants on both sides, and a comparison per step on the inputs only
 * (x[j] > -10: true at every point used); three: one muladd per step (three arguments). */
typedef struct loop_env {
    long steps;
    bool three;
} loop_env;

static double loop_c(const loop_env *e, const double *x)
{
    double s = 0.0;
    for (long k = 0; k < e->steps; k++) {
        double a = x[k % NX], b = x[(k + 1) % NX];
        double t = exp(0.1 * sin(a * s)) + hypot(a, 2.0 - b) / (1.5 + b * b);
        s = 0.5 * (s + fmax(t, a) - 0.25 * t);
        if (e->three)
            s = s * a + b;
    }
    return s;
}

static cr_status loop_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    const loop_env *e = env;
    (void)n;
    (void)m;
    cr_var s = cr_const(0.0);
    for (long k = 0; k < e->steps; k++) {
        cr_var a = x[k % NX], b = x[(k + 1) % NX];
        if (!cr_tape_cmp(t, a, CR_CMP_GT, cr_const(-10.0)))
            return CR_EDOMAIN;
        cr_var u = cr_exp(t, cr_mul(t, cr_const(0.1), cr_sin(t, cr_mul(t, a, s))));
        cr_var h = cr_hypot(t, a, cr_sub(t, cr_const(2.0), b));
        cr_var tt = cr_add(t, u, cr_div(t, h, cr_add(t, cr_const(1.5), cr_mul(t, b, b))));
        s = cr_mul(t, cr_const(0.5),
                   cr_sub(t, cr_add(t, s, cr_max(t, tt, a)), cr_mul(t, cr_const(0.25), tt)));
        if (e->three)
            s = cr_muladd(t, s, a, b);
    }
    y[0] = s;
    return cr_tape_status(t);
}

static cr_status loop_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    y[0] = loop_c(env, x);
    return CR_OK;
}

static void point(double *x, int i)
{
    for (int j = 0; j < NX; j++)
        x[j] = 0.3 + 0.2 * j + 0.15 * sin(1.7 * i + j);
}

/* Value and gradient of p at several points in turn against the plain C loop. */
static void check_calls(fixture *f, cr_prepared *p, loop_env *e, int npts)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    for (int i = 0; i < npts; i++) {
        double x[NX], y, g[NX], fd[NX];
        point(x, i % 3); /* (back to earlier points: a left-over adjoint would show there) */
        assert_int_equal(cr_prepared_value_and_gradient(p, x, NX, &y, g), CR_OK);
        assert_close(y, loop_c(e, x), 1e-13);
        assert_int_equal(cr_fd_jacobian(&m, NULL, loop_fd, e, x, NX, 1, f->arena, fd, NULL), CR_OK);
        cr_arena_reset(f->arena);
        for (int j = 0; j < NX; j++)
            assert_close(g[j], fd[j], FD_RTOL);
    }
}

static void test_calls_lean_and_not(void **state)
{
    fixture *f = *state;
    for (int three = 0; three < 2; three++) {
        loop_env e = {40, three != 0};
        double x0[NX];
        point(x0, 5);
        cr_prepared *p;
        assert_int_equal(cr_prepare_gradient(f->ctx, NULL, loop_t, &e, x0, NX, &p), CR_OK);
        check_calls(f, p, &e, 7);
        cr_prepared_free(p);
    }
}

/* A comparison that fails (x[0] made -20) between good calls: CR_EDOMAIN naming it, and the
 * next calls right. */
static void test_failed_comparison(void **state)
{
    fixture *f = *state;
    loop_env e = {25, false};
    double x[NX], y, g[NX];
    point(x, 0);
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, loop_t, &e, x, NX, &p), CR_OK);
    check_calls(f, p, &e, 2);
    x[0] = -20.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, x, NX, &y, g), CR_EDOMAIN);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "-20 > -10"));
    check_calls(f, p, &e, 3);
    cr_prepared_free(p);
}

/* What a lean prepared gradient holds against the most one recording and sweep of the same
 * function held (a long loop: the fixed parts do not count). */
static void test_memory(void **state)
{
    (void)state;
    meter mt = {0, 0};
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = metered_realloc, .alloc_env = &mt};
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    loop_env e = {20000, false};
    double x[NX], y, g[NX];
    point(x, 1);
    size_t base = mt.now;
    mt.peak = base;
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_value_and_gradient(t, loop_t, &e, x, NX, &y, g), CR_OK);
    size_t recording = mt.peak - base;
    cr_tape_free(t);
    base = mt.now;
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(ctx, NULL, loop_t, &e, x, NX, &p), CR_OK);
    assert_int_equal(cr_prepared_value_and_gradient(p, x, NX, &y, g), CR_OK);
    size_t held = mt.now - base;
    if (held > recording)
        print_message("prepared gradient holds %zu bytes, one recording %zu\n", held, recording);
    assert_true(held <= recording);
    cr_prepared_free(p);
    assert_int_equal(mt.now, base);
    cr_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_calls_lean_and_not, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_failed_comparison, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
