/*
 * The engine's API contract at its edges: a call that succeeds on a tape in a caller buffer
 * leaves the context's error as it was (no internal attempt leaves CR_EARENA behind).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "test_util.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_small_buffer_ctx, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_every_size_ctx, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
