/*
 * Tests of cr_tape_value_and_gradient_arrays (reset, array inputs, record, sweep in one call):
 * value and gradients of functions of one and of several arrays (f64 and f32, strided,
 * more inputs than fit on the stack) against central differences of the same functions in
 * plain C, the same numbers as the steps called one by one, nothing allocated once the tape
 * has held the recording, allocation failures, and every refusal with its message.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <chainrules/kernel.h>

#include "test_alloc.h"
#include "test_util.h"

/* Central differences (five points) of a plain-C function of the n values x. */
typedef double (*plain_fn)(const double *x, size_t n, const void *env);

static void fd_grad(plain_fn f, const void *env, double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double xi = x[i], h = 1e-4 * fmax(1.0, fabs(xi)), fv[4];
        const double s[4] = {2, 1, -1, -2};
        for (int k = 0; k < 4; k++) {
            x[i] = xi + s[k] * h;
            fv[k] = f(x, n, env);
        }
        x[i] = xi;
        g[i] = (8 * (fv[1] - fv[2]) - (fv[0] - fv[3])) / (12 * h);
    }
}

#define SQDIFF(x) cr_k_sq(cr_k_sub(x[0], x[1]))
CR_KERNEL(sqdiff, 2, SQDIFF);

enum { N = 12 };

/* mse of x against env's target, as a fused kernel, / N */
static cr_status mse_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    cr_kin in[2] = {cr_kin_arr(xs[0], 0), cr_kin_arr(cr_av_const(env), 0)};
    *y = cr_div(t, cr_av_kernel_sum(t, &sqdiff, in, 2, N), cr_const((double)N));
    return cr_tape_status(t);
}

static double target[N];

static double mse_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (x[i] - target[i]) * (x[i] - target[i]);
    return s / (double)n;
}

/* Σ_j (j + 1) Σ_i sin(x_j[i]) x_j[i] over the n inputs of N elements, through the array rules
 * (a broadcast and a dot product per input) */
static cr_status sums_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)env;
    cr_var s = cr_const(0.0);
    for (size_t j = 0; j < n; j++) {
        cr_avar S = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(xs[j]));
        s = cr_add(t, s, cr_mul(t, cr_const((double)(j + 1)), cr_av_dot(t, S, xs[j])));
    }
    *y = s;
    return cr_tape_status(t);
}

static double sums_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = 0;
    for (size_t k = 0; k < n; k++)
        s += (double)(k / N + 1) * sin(x[k]) * x[k];
    return s;
}

static void set_up(double *x, size_t n)
{
    for (size_t i = 0; i < N; i++)
        target[i] = cos(0.5 * (double)i);
    for (size_t i = 0; i < n; i++)
        x[i] = 0.3 + 0.8 * sin(0.7 * (double)i + 0.1);
}

/* m inputs and m gradient arrays: vectors of N over x and g, one after the other. */
static void vectors(double *x, double *g, size_t m, cr_array *xa, cr_array *ga, const cr_array **xs,
                    cr_array **gs)
{
    for (size_t j = 0; j < m; j++) {
        xa[j] = cr_array_vector(x + j * N, N);
        ga[j] = cr_array_vector(g + j * N, N);
        xs[j] = &xa[j];
        gs[j] = &ga[j];
    }
}

/* One array, recorded again at each call on one tape: value and gradient against central
 * differences and against the steps called one by one; a dense gradient array full of NaN
 * is written everywhere. */
static void test_one_array(void **state)
{
    fixture *f = *state;
    double x[N], g[N], g2[N], want[N], y, y2;
    set_up(x, N);
    cr_array ta = cr_array_vector(target, N), xa = cr_array_vector(x, N);
    cr_array ga = cr_array_vector(g, N), g2a = cr_array_vector(g2, N);
    cr_array *gp = &ga, *g2p = &g2a;
    const cr_array *xs[1] = {&xa};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    for (int round = 0; round < 3; round++) {
        x[round] += 0.25; /* new inputs each time */
        for (size_t i = 0; i < N; i++)
            g[i] = (double)NAN;
        assert_ok(t, cr_tape_value_and_gradient_arrays(t, mse_fn, &ta, xs, 1, &y, &gp));
        assert_close(y, mse_c(x, N, NULL), 1e-14);
        fd_grad(mse_c, NULL, x, N, want);
        for (size_t i = 0; i < N; i++)
            ASSERT_CLOSE(g[i], want[i], 1e-8);
        /* the steps one by one: the same bits */
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_var yv;
        assert_ok(t, mse_fn(t, &X, 1, &yv, &ta));
        assert_ok(t, cr_tape_gradient_arrays(t, yv, NULL, 0, NULL, &X, 1, &g2p));
        y2 = yv.v;
        assert_true(y == y2);
        assert_memory_equal(g, g2, sizeof g);
    }
    /* y may be NULL */
    assert_ok(t, cr_tape_value_and_gradient_arrays(t, mse_fn, &ta, xs, 1, NULL, &gp));
    assert_memory_equal(g, g2, sizeof g);
    cr_tape_free(t);
}

/* Ten inputs (more than the call keeps on its stack), of f64 and f32, dense and strided,
 * with gradient arrays of f64, f32 and strided layouts. */
static void test_many_arrays(void **state)
{
    fixture *f = *state;
    enum { M = 10 };
    double x[M * N], want[M * N], xst[2 * N], g[M * N], gst[2 * N], y;
    float x32[N], g32[N];
    set_up(x, M * N);
    for (size_t i = 0; i < N; i++) {
        x32[i] = (float)x[N + i];
        x[N + i] = (double)x32[i]; /* the function of input 1 is at its f32 values */
        xst[2 * i] = x[2 * N + i];
        xst[2 * i + 1] = 99.0;
        gst[2 * i + 1] = -5.0;
    }
    cr_array xa[M], ga[M];
    const cr_array *xs[M];
    cr_array *gs[M];
    size_t shape = N;
    ptrdiff_t two = 2;
    vectors(x, g, M, xa, ga, xs, gs);
    assert_int_equal(cr_array_view_init(&xa[1], x32, CR_DT_F32, 1, &shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&ga[1], g32, CR_DT_F32, 1, &shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&xa[2], xst, CR_DT_F64, 1, &shape, &two), CR_OK);
    assert_int_equal(cr_array_view_init(&ga[2], gst, CR_DT_F64, 1, &shape, &two), CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_ok(t, cr_tape_value_and_gradient_arrays(t, sums_fn, NULL, xs, M, &y, gs));
    assert_close(y, sums_c(x, M * N, NULL), 1e-7); /* input 1's rules run in f32 */
    fd_grad(sums_c, NULL, x, M * N, want);
    for (size_t i = 0; i < N; i++) {
        g[N + i] = (double)g32[i];
        g[2 * N + i] = gst[2 * i];
        ASSERT_DBL(gst[2 * i + 1], -5.0); /* the gaps untouched */
    }
    for (size_t i = 0; i < M * N; i++)
        ASSERT_CLOSE(g[i], want[i], i / N == 1 ? 1e-6 : 1e-8);
    cr_tape_free(t);
}

/* Once the tape has held the recording, a call allocates nothing. */
static void test_no_allocation(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    enum { M = 9 }; /* past the stack's few: the inputs' variables come from the arena */
    double x[M * N], g[M * N], y;
    set_up(x, M * N);
    cr_array xa[M], ga[M];
    const cr_array *xs[M];
    cr_array *gs[M];
    vectors(x, g, M, xa, ga, xs, gs);
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    assert_ok(t, cr_tape_value_and_gradient_arrays(t, sums_fn, NULL, xs, M, &y, gs));
    size_t before = c.allocs;
    for (int k = 0; k < 3; k++) {
        x[k] += 0.1;
        assert_ok(t, cr_tape_value_and_gradient_arrays(t, sums_fn, NULL, xs, M, &y, gs));
    }
    assert_int_equal(c.allocs, before);
    assert_close(y, sums_c(x, M * N, NULL), 1e-12);
    cr_tape_free(t);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

/* The k-th allocation failing, for every k until the call succeeds: the allocation status,
 * then the same tape gives the reference answer; nothing leaks. */
static void test_allocation_failures(void **state)
{
    (void)state;
    enum { M = 9 };
    double x[M * N], g[M * N], ref[M * N], yref = 0, y;
    set_up(x, M * N);
    cr_array xa[M], ga[M];
    const cr_array *xs[M];
    cr_array *gs[M];
    vectors(x, g, M, xa, ga, xs, gs);
    bool done = false;
    for (size_t k = 1; !done && k < 200; k++) {
        counter c = {0};
        cr_ctx *ctx;
        cr_ctx_params cp = {
            .struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
        assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
        cr_tape *t;
        assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
        c.fail_at = c.allocs + k;
        cr_status st = cr_tape_value_and_gradient_arrays(t, sums_fn, NULL, xs, M, &y, gs);
        c.fail_at = 0;
        if (st == CR_OK) {
            done = true;
        } else {
            assert_true(st == CR_ENOMEM || st == CR_EARENA);
            assert_ok(t, cr_tape_value_and_gradient_arrays(t, sums_fn, NULL, xs, M, &y, gs));
        }
        if (k == 1) {
            yref = y;
            memcpy(ref, g, sizeof ref);
        }
        assert_true(y == yref);
        assert_memory_equal(g, ref, sizeof ref);
        cr_tape_free(t);
        cr_ctx_free(ctx);
        assert_int_equal(c.live, 0);
    }
    assert_true(done);
}

static cr_status failing_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)t;
    (void)xs;
    (void)n;
    (void)env;
    *y = cr_const(1.0);
    return CR_EDOMAIN;
}

/* Refusals: the status and a message naming the call; nothing written; the tape usable. */
static void test_errors(void **state)
{
    fixture *f = *state;
    double x[N], g[N], y = 7.0;
    set_up(x, N);
    cr_array ta = cr_array_vector(target, N), xa = cr_array_vector(x, N);
    cr_array ga = cr_array_vector(g, N), *gp = &ga;
    const cr_array *xs[1] = {&xa};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_value_and_gradient_arrays(NULL, mse_fn, &ta, xs, 1, &y, &gp),
                     CR_EINVAL);
    assert_int_equal(cr_tape_value_and_gradient_arrays(t, NULL, &ta, xs, 1, &y, &gp), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_value_and_gradient_arrays: NULL function");
    assert_int_equal(cr_tape_value_and_gradient_arrays(t, mse_fn, &ta, NULL, 1, &y, &gp),
                     CR_EINVAL);
    assert_int_equal(cr_tape_value_and_gradient_arrays(t, mse_fn, &ta, xs, 1, &y, NULL), CR_EINVAL);
    assert_int_equal(cr_tape_value_and_gradient_arrays(t, mse_fn, &ta, xs, 0, &y, &gp), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "no inputs");
    const cr_array *none[1] = {NULL};
    assert_int_equal(cr_tape_value_and_gradient_arrays(t, mse_fn, &ta, none, 1, &y, &gp),
                     CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "input 0 is NULL");
    int64_t ints[N] = {0};
    size_t shape = N;
    cr_array ia;
    assert_int_equal(cr_array_view_init(&ia, ints, CR_DT_I64, 1, &shape, NULL), CR_OK);
    const cr_array *bad[1] = {&ia};
    assert_int_equal(cr_tape_value_and_gradient_arrays(t, mse_fn, &ta, bad, 1, &y, &gp), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "input 0 is not a float array");
    assert_true(y == 7.0);
    /* f's own failure: the tape fails with it */
    assert_int_equal(cr_tape_value_and_gradient_arrays(t, failing_fn, NULL, xs, 1, &y, &gp),
                     CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "the recorded function failed");
    assert_true(y == 7.0);
    /* a gradient array of another shape */
    double g5[5];
    cr_array g5a = cr_array_vector(g5, 5), *g5p = &g5a;
    assert_int_equal(cr_tape_value_and_gradient_arrays(t, mse_fn, &ta, xs, 1, &y, &g5p), CR_ESHAPE);
    /* and the tape still works */
    assert_ok(t, cr_tape_value_and_gradient_arrays(t, mse_fn, &ta, xs, 1, &y, &gp));
    assert_close(y, mse_c(x, N, NULL), 1e-14);
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_array, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_many_arrays, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_no_allocation),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
