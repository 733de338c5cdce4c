/*
 * The engine's API contract at its edges: a call that succeeds on a tape in a caller buffer
 * leaves the context's error as it was (no internal attempt leaves CR_EARENA behind), and
 * the messages of cr_tape_hessian, cr_tape_ajvp, cr_tape_ahvp and the kernel calls name
 * what the caller passed, with the numbers as given (no wrapped arithmetic).
 */
#include <chainrules/kernel.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "test_util.h"

#define SQDIFF(x) cr_k_sq(cr_k_sub(x[0], x[1]))
CR_KERNEL(sqdiff, 2, SQDIFF);

#define SINK(x) cr_k_sin(x[0])
CR_KERNEL(sink, 1, SINK);

/* ---- A successful call leaves the context's error as it was ------------------------------ */

/* y = sum_i x_i sin(x_{i+1}) + x_i^2 over n inputs: a few hundred records. */
static cr_status chain(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i + 1 < n; i++)
        s = cr_add(t, s, cr_add(t, cr_mul(t, x[i], cr_sin(t, x[i + 1])), cr_mul(t, x[i], x[i])));
    y[0] = s;
    return cr_tape_status(t);
}

static double chain_grad(const double *x, size_t n, size_t j)
{
    double g = 0.0;
    if (j + 1 < n)
        g += sin(x[j + 1]) + 2 * x[j];
    if (j > 0)
        g += x[j - 1] * cos(x[j]);
    return g;
}

/* A recording whose first chunk of records does not fit a small caller buffer, which holds a
 * smaller one: the recording and its gradient succeed, and the context has no error, or the
 * earlier one the caller left there. */
static void test_small_buffer_ctx(void **state)
{
    fixture *f = *state;
    enum { N = 12 };
    static unsigned char buf[3072];
    double x[N], g[N], y;
    for (size_t i = 0; i < N; i++)
        x[i] = 0.3 * (double)i - 1.1;
    cr_tape_params tp = {.struct_size = sizeof tp, .buffer = buf, .buffer_size = sizeof buf};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_ctx_clear_error(f->ctx);
    assert_ok(t, cr_tape_value_and_gradient(t, chain, NULL, x, N, &y, g));
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_OK);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "");
    for (size_t j = 0; j < N; j++)
        ASSERT_CLOSE(g[j], chain_grad(x, N, j), 1e-14);
    /* An error the caller left on the context stays as it was. */
    cr_ctx_error(f->ctx, CR_EDOMAIN, "an earlier error");
    assert_ok(t, cr_tape_value_and_gradient(t, chain, NULL, x, N, &y, g));
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EDOMAIN);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "an earlier error");
    cr_tape_free(t);
}

/* Buffers of every size from too small to enough, on a second-order tape: each call that
 * succeeds (recording, gradient, H v, Hessian) leaves the context clean; each failure is
 * CR_EARENA. */
static void test_every_size_ctx(void **state)
{
    fixture *f = *state;
    enum { N = 40 };
    static unsigned char buf[1 << 16];
    double x[N], v[N], g[N], hv[N], H[4 * 4];
    for (size_t i = 0; i < N; i++) {
        x[i] = 0.1 * (double)i - 1.0;
        v[i] = 1.0 - 0.05 * (double)i;
    }
    size_t ok = 0, failed = 0;
    for (size_t size = 512; size <= sizeof buf; size += 16) {
        cr_tape_params tp = {.struct_size = sizeof tp,
                             .flags = CR_TAPE_SECOND_ORDER,
                             .buffer = buf,
                             .buffer_size = size};
        cr_tape *t;
        if (cr_tape_new(f->ctx, &tp, &t) != CR_OK)
            continue;
        cr_ctx_clear_error(f->ctx);
        cr_var xs[N];
        cr_status st = cr_tape_inputs(t, x, N, xs);
        cr_var out;
        if (st == CR_OK)
            st = chain(t, xs, N, &out, 1, NULL);
        if (st == CR_OK) {
            assert_int_equal(cr_ctx_errcode(f->ctx), CR_OK);
            st = cr_tape_gradient(t, out, xs, N, g);
        }
        if (st == CR_OK) {
            assert_int_equal(cr_ctx_errcode(f->ctx), CR_OK);
            st = cr_tape_hvp(t, out, xs, N, v, hv, NULL);
        }
        if (st == CR_OK) {
            assert_int_equal(cr_ctx_errcode(f->ctx), CR_OK);
            st = cr_tape_hessian(t, out, xs, 4, H);
        }
        if (st == CR_OK) {
            assert_int_equal(cr_ctx_errcode(f->ctx), CR_OK);
            for (size_t j = 0; j < N; j++)
                ASSERT_CLOSE(g[j], chain_grad(x, N, j), 1e-14);
            ok++;
        } else {
            assert_int_equal(st, CR_EARENA);
            failed++;
        }
        cr_tape_free(t);
        if (ok == 64)
            break;
    }
    assert_int_equal(ok, 64);
    assert_true(failed > 10);
}

/* ---- Messages -------------------------------------------------------------------------------- */

/* cr_tape_hessian takes no direction: its messages never speak of one. */
static void test_hessian_messages(void **state)
{
    fixture *f = *state;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    const double x0[2] = {0.5, -0.3};
    cr_var x[2];
    assert_ok(t, cr_tape_inputs(t, x0, 2, x));
    cr_var y = cr_mul(t, cr_sin(t, x[0]), x[1]);
    double H[4];
    assert_int_equal(cr_tape_hessian(t, y, x, 2, NULL), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_hessian: H is NULL");
    assert_int_equal(cr_tape_hessian(t, y, NULL, 2, H), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_hessian: xs is NULL");
    /* the tape is as it was */
    assert_ok(t, cr_tape_hessian(t, y, x, 2, H));
    ASSERT_CLOSE(H[0], -sin(0.5) * -0.3, 1e-12);
    ASSERT_CLOSE(H[1], cos(0.5), 1e-12);
    ASSERT_CLOSE(H[2], cos(0.5), 1e-12);
    ASSERT_CLOSE(H[3], 0.0, 1e-12);
    cr_tape_free(t);
}

/* cr_tape_ajvp's arrays are tangents: the inputs' and the outputs'; cr_tape_ahvp's are
 * directions and results. */
static void test_array_sweep_messages(void **state)
{
    fixture *f = *state;
    double a[3] = {1.0, 2.0, 3.0}, d[3] = {0.5, -1.0, 2.0}, o[3], o2[2];
    cr_array A = cr_array_vector(a, 3), D = cr_array_vector(d, 3), O = cr_array_vector(o, 3);
    cr_array O2 = cr_array_vector(o2, 2), D2 = cr_array_vector(d, 2);
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &A);
    cr_kin kx = cr_kin_arr(X, 0);
    cr_avar S = cr_av_kernel(t, &sink, &kx, 1, 3);
    cr_var y = cr_av_dot(t, S, X);
    assert_ok(t, cr_tape_status(t));
    const cr_array *dp[1] = {&D}, *d2p[1] = {&D2}, *np[1] = {NULL};
    cr_array *op[1] = {&O}, *o2p[1] = {&O2}, *nop[1] = {NULL};
    double yd;

    /* cr_tape_ajvp: an output tangent array of another shape, or NULL */
    assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, dp, 1, &y, 1, &yd, &S, 1, o2p), CR_ESHAPE);
    assert_string_equal(cr_ctx_errmsg(f->ctx),
                        "cr_tape_ajvp: output tangent array 0 is (2), its variable is (3)");
    assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, dp, 1, &y, 1, &yd, &S, 1, nop), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp: output tangent array 0 is NULL, "
                                               "structured or not a float array");
    /* an input tangent array of another shape, or NULL */
    assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, d2p, 1, &y, 1, &yd, &S, 1, op), CR_ESHAPE);
    assert_string_equal(cr_ctx_errmsg(f->ctx),
                        "cr_tape_ajvp: tangent array 0 is (2), its variable is (3)");
    assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, np, 1, &y, 1, &yd, &S, 1, op), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx),
                        "cr_tape_ajvp: tangent array 0 is NULL or not a float array");
    /* NULL lists: each named */
    assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, NULL, 1, &y, 1, &yd, &S, 1, op), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp: adot is NULL");
    assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, dp, 1, &y, 1, &yd, &S, 1, NULL), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp: bdot is NULL");
    assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, dp, 1, &y, 1, NULL, &S, 1, op), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp: ydot is NULL");
    /* and the sweep works: d/dt (sin(a + t d) . (a + t d)) */
    assert_ok(t, cr_tape_ajvp(t, NULL, NULL, 0, &X, dp, 1, &y, 1, &yd, &S, 1, op));
    double want = 0.0;
    for (size_t i = 0; i < 3; i++) {
        want += (cos(a[i]) * a[i] + sin(a[i])) * d[i];
        ASSERT_CLOSE(o[i], cos(a[i]) * d[i], 1e-14);
    }
    ASSERT_CLOSE(yd, want, 1e-14);

    /* cr_tape_ahvp: a result array of another shape; a direction array of another shape */
    assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, dp, o2p), CR_ESHAPE);
    assert_string_equal(cr_ctx_errmsg(f->ctx),
                        "cr_tape_ahvp: result array 0 is (2), its variable is (3)");
    assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, d2p, op), CR_ESHAPE);
    assert_string_equal(cr_ctx_errmsg(f->ctx),
                        "cr_tape_ahvp: direction array 0 is (2), its variable is (3)");
    assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, dp, NULL), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_ahvp: ahv is NULL");

    /* cr_tape_gradient_arrays still speaks of gradient arrays */
    assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, o2p), CR_ESHAPE);
    assert_string_equal(cr_ctx_errmsg(f->ctx),
                        "cr_tape_gradient_arrays: gradient array 0 is (2), its variable is (3)");
    cr_tape_free(t);
}

/* Fails on t with st and exactly the message msg; then the tape is reset. */
static void expect_fail(cr_tape *t, cr_status st, const char *msg)
{
    assert_int_equal(cr_tape_status(t), st);
    assert_string_equal(cr_tape_errmsg(t), msg);
    cr_tape_reset(t);
}

/* Kernel calls with an n or an offset too large: n, the offset and the array's length as
 * given, never a sum that wrapped around. */
static void test_kernel_range_messages(void **state)
{
    fixture *f = *state;
    double x[5] = {1, 2, 3, 4, 5};
    cr_array xa = cr_array_vector(x, 5);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    char want[256];

    /* n = SIZE_MAX over an array of 5 */
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_const(1.0)};
    cr_var y = cr_av_kernel_sum(t, &sqdiff, in, 2, SIZE_MAX);
    assert_true(isnan(y.v));
    snprintf(want, sizeof want,
             "kernel sqdiff: argument 0 reads n = %zu elements from offset 0 of a (5) array of 5 "
             "elements: only 5 are left from that offset",
             SIZE_MAX);
    expect_fail(t, CR_ESHAPE, want);

    /* an offset such that offset + n wraps around to a small number */
    X = cr_tape_array_input(t, &xa);
    in[0] = cr_kin_const(1.0);
    in[1] = cr_kin_arr(X, SIZE_MAX - 1);
    cr_avar r = cr_av_kernel(t, &sqdiff, in, 2, 3);
    assert_null(r.a);
    snprintf(want, sizeof want,
             "kernel sqdiff: argument 1 reads n = 3 elements from offset %zu of a (5) array of 5 "
             "elements: the offset is past its end",
             SIZE_MAX - 1);
    expect_fail(t, CR_ESHAPE, want);

    /* an offset at the end reads nothing, and may; one more is past it */
    X = cr_tape_array_input(t, &xa);
    in[1] = cr_kin_arr(X, 5);
    y = cr_av_kernel_sum(t, &sqdiff, in, 2, 0);
    assert_ok(t, cr_tape_status(t));
    ASSERT_DBL(y.v, 0.0);
    in[1] = cr_kin_arr(X, 6);
    y = cr_av_kernel_sum(t, &sqdiff, in, 2, 0);
    expect_fail(t, CR_ESHAPE,
                "kernel sqdiff: argument 1 reads n = 0 elements from offset 6 of a (5) array of 5 "
                "elements: the offset is past its end");

    /* a 2-d array: its shape and its number of elements */
    size_t s23[2] = {2, 3};
    double m[6] = {1, 2, 3, 4, 5, 6};
    cr_array ma;
    assert_int_equal(cr_array_view_init(&ma, m, CR_DT_F64, 2, s23, NULL), CR_OK);
    cr_avar M = cr_tape_array_input(t, &ma);
    in[0] = cr_kin_arr(M, 2);
    in[1] = cr_kin_const(0.0);
    y = cr_av_kernel_sum(t, &sqdiff, in, 2, 5);
    expect_fail(t, CR_ESHAPE,
                "kernel sqdiff: argument 0 reads n = 5 elements from offset 2 of a (2,3) array of "
                "6 elements: only 4 are left from that offset");

    /* no array at all: an n no array of doubles can have */
    cr_var s = cr_tape_input(t, 2.0);
    in[0] = cr_kin_var(s);
    in[1] = cr_kin_const(1.0);
    y = cr_av_kernel_sum(t, &sqdiff, in, 2, SIZE_MAX);
    assert_true(isnan(y.v));
    snprintf(want, sizeof want,
             "kernel sqdiff: n = %zu elements, more than an array of doubles can hold (%zu)",
             SIZE_MAX, (size_t)PTRDIFF_MAX / sizeof(double));
    expect_fail(t, CR_EOVERFLOW, want);
    s = cr_tape_input(t, 2.0);
    in[0] = cr_kin_var(s);
    r = cr_av_kernel(t, &sqdiff, in, 2, (size_t)PTRDIFF_MAX / sizeof(double) + 1);
    assert_null(r.a);
    assert_int_equal(cr_tape_status(t), CR_EOVERFLOW);
    assert_contains(cr_tape_errmsg(t), "kernel sqdiff: n = ");
    cr_tape_reset(t);

    /* a structured array is refused as such (not as a non-contiguous one) */
    cr_array dg = cr_array_vector(x, 3);
    dg.structure = CR_MAT_DIAGONAL;
    in[0] = cr_kin_arr(cr_av_const(&dg), 0);
    in[1] = cr_kin_const(1.0);
    y = cr_av_kernel_sum(t, &sqdiff, in, 2, 3);
    expect_fail(t, CR_EUNIMPL,
                "kernel sqdiff: argument 0 is a diagonal array: kernels read dense arrays");
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_small_buffer_ctx, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_every_size_ctx, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_messages, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_array_sweep_messages, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_kernel_range_messages, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
