/*
 * Tests of the record stream of the scalar tape: input records (on a first-order tape,
 * inputs made one after the other share one record that counts them), recorded between
 * operations, across chunk boundaries, one at a time or in bulk, with sweeps whose output
 * is one of the inputs; and the same functions on forward and second-order tapes (one
 * record per input). Gradients, Jacobian-vector and Hessian-vector products are checked
 * against central finite differences of the same functions written in plain C.
 */
#include <math.h>
#include <stdio.h>

#include <chainrules/tape_inline.h>

#include "test_util.h"

#define FD_RTOL 1e-8

/* ---- Inputs made between operations ------------------------------------------------------ */

/*
 * f(x) = x0 x1 + sum_{j=2..4} x_j^2 + x5 x0, where the tape makes x0 and x1, records
 * x0 x1, then makes x2..x4 (cr_tape_inputs) and x5 (cr_tape_input): two input records,
 * of two and four inputs.
 */
static double mixed_c(const double *x)
{
    double s = x[0] * x[1];
    for (size_t j = 2; j < 5; j++)
        s = s + x[j] * x[j];
    return s + x[5] * x[0];
}

static cr_status mixed_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = mixed_c(x);
    return CR_OK;
}

/* Records f on t at x; the six inputs in xs. */
static cr_var mixed_t(cr_tape *t, const double *x, cr_var *xs)
{
    xs[0] = cr_tape_input(t, x[0]);
    xs[1] = cr_tape_input(t, x[1]);
    cr_var s = cr_mul(t, xs[0], xs[1]);
    cr_tape_inputs(t, x + 2, 3, xs + 2);
    xs[5] = cr_tape_input(t, x[5]);
    for (size_t j = 2; j < 5; j++)
        s = cr_add(t, s, cr_mul(t, xs[j], xs[j]));
    return cr_add(t, s, cr_mul(t, xs[5], xs[0]));
}

static const double k_mixed_x[6] = {0.7, -1.3, 2.1, 0.4, -0.9, 1.6};

static void test_inputs_between_operations(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var xs[6];
    cr_var y = mixed_t(t, k_mixed_x, xs);
    assert_ok(t, cr_tape_status(t));
    for (size_t j = 0; j < 6; j++) {
        assert_int_equal(xs[j].idx, j == 5 ? 6 : j < 2 ? j : j + 1); /* x0 x1 recorded first */
        ASSERT_DBL(xs[j].v, k_mixed_x[j]);
    }
    /* Words: inputs x0 x1 (1), x0 x1 (BINARY, 3), inputs x2..x5 (1), three squares and
     * additions (UNARY + ADD, 9), x5 x0 and the last addition (BINARY + ADD, 4). */
    cr_tape_stats st;
    assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
    assert_int_equal(st.ninputs, 6);
    assert_int_equal(st.nvars, 6 + 9);
    assert_int_equal(st.nrecords, 6 + 9); /* one operation per input */
    assert_int_equal(st.record_bytes, 18 * sizeof(double));

    double g[6], fd[6];
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, mixed_fd, NULL, k_mixed_x, 6, 1, f->arena, fd, NULL),
                     CR_OK);
    assert_ok(t, cr_tape_gradient(t, y, xs, 6, g));
    for (size_t j = 0; j < 6; j++)
        assert_close(g[j], fd[j], FD_RTOL);

    /* Outputs that are inputs inside an input record of several (the sweep stops inside
     * the record): one row of the identity each, and a Jacobian mixing them with y. */
    for (size_t k = 0; k < 6; k++) {
        assert_ok(t, cr_tape_gradient(t, xs[k], xs, 6, g));
        for (size_t j = 0; j < 6; j++)
            ASSERT_DBL(g[j], j == k ? 1.0 : 0.0);
    }
    cr_var ys[3] = {xs[3], y, xs[1]};
    double jac[3 * 6];
    assert_ok(t, cr_tape_jacobian(t, ys, 3, xs, 6, jac));
    for (size_t j = 0; j < 6; j++) {
        ASSERT_DBL(jac[j], j == 3 ? 1.0 : 0.0);
        assert_close(jac[6 + j], fd[j], FD_RTOL);
        ASSERT_DBL(jac[12 + j], j == 1 ? 1.0 : 0.0);
    }
    cr_tape_free(t);
}

/* ---- Input records across chunk boundaries ------------------------------------------------ */

/*
 * R rounds of K inputs and K - 1 operations folding them into the sum:
 * f(x) = sum_r [ x_{r,0} (x_{r,1} - x_{r,2} ... ) ], written as s += x_r0 * (x_r1 - x_r2 +
 * x_r3 - ...). The records of a round take 2 + 3 (K - 1) words or so, so the rounds cross
 * the chunk boundaries (1024, 2048, ... words) at every position of a round.
 */
enum { ROUNDS = 400, K = 5, NX = ROUNDS * K };

static double rounds_c(const double *x)
{
    double s = 0.0;
    for (size_t r = 0; r < ROUNDS; r++) {
        const double *xr = x + r * K;
        double d = xr[1];
        for (size_t j = 2; j < K; j++)
            d = (j & 1) ? d + xr[j] : d - xr[j];
        s = s + xr[0] * d;
    }
    return s;
}

static cr_status rounds_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = rounds_c(x);
    return CR_OK;
}

/* one_by_one: cr_tape_input for each input, else cr_tape_inputs per round. */
static cr_var rounds_t(cr_tape *t, const double *x, cr_var *xs, bool one_by_one)
{
    cr_var s = cr_const(0.0);
    for (size_t r = 0; r < ROUNDS; r++) {
        cr_var *xr = xs + r * K;
        if (one_by_one)
            for (size_t j = 0; j < K; j++)
                xr[j] = cr_tape_input(t, x[r * K + j]);
        else
            cr_tape_inputs(t, x + r * K, K, xr);
        cr_var d = xr[1];
        for (size_t j = 2; j < K; j++)
            d = (j & 1) ? cr_add(t, d, xr[j]) : cr_sub(t, d, xr[j]);
        s = cr_add(t, s, cr_mul(t, xr[0], d));
    }
    return s;
}

static void test_inputs_across_chunks(void **state)
{
    fixture *f = *state;
    static double x[NX], g[NX], fd[NX];
    static cr_var xs[NX];
    for (size_t i = 0; i < NX; i++)
        x[i] = 0.5 + sin(0.7 * (double)i);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, rounds_fd, NULL, x, NX, 1, f->arena, fd, NULL),
                     CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    for (int one_by_one = 0; one_by_one < 2; one_by_one++) {
        cr_tape_reset(t);
        cr_var y = rounds_t(t, x, xs, one_by_one);
        assert_ok(t, cr_tape_status(t));
        cr_tape_stats st;
        assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
        assert_int_equal(st.ninputs, NX);
        assert_true(st.record_bytes > 2048 * sizeof(double)); /* three chunks at least */
        ASSERT_DBL(y.v, rounds_c(x));
        assert_ok(t, cr_tape_gradient(t, y, xs, NX, g));
        for (size_t i = 0; i < NX; i++)
            assert_close(g[i], fd[i], FD_RTOL);
    }
    cr_tape_free(t);
}

/* ---- Forward and second-order tapes --------------------------------------------------------- */

/* The gradient of mixed_c at x, from a first-order tape (for finite differences of it). */
static cr_status mixed_grad(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    cr_tape *t = env;
    cr_var xs[6];
    cr_tape_reset(t);
    cr_var out = mixed_t(t, x, xs);
    return cr_tape_gradient(t, out, xs, 6, y);
}

static void test_inputs_forward_and_second_order(void **state)
{
    fixture *f = *state;
    const double v[6] = {0.3, -1.1, 0.8, 2.0, -0.4, 0.6};
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    double fd[6], fdh[6];
    /* d f(x + e v) / de, and d grad f(x + e v) / de from first-order gradients */
    assert_int_equal(cr_fd_jvp(&m, NULL, mixed_fd, NULL, k_mixed_x, 6, v, 1, f->arena, fd, NULL),
                     CR_OK);
    cr_tape *g1;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &g1), CR_OK);
    assert_int_equal(cr_fd_jvp(&m, NULL, mixed_grad, g1, k_mixed_x, 6, v, 6, f->arena, fdh, NULL),
                     CR_OK);
    cr_tape_free(g1);
    for (uint32_t flags = CR_TAPE_FORWARD; flags <= CR_TAPE_SECOND_ORDER; flags++) {
        cr_tape_params p = {.struct_size = sizeof p, .flags = flags};
        cr_tape *t;
        assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
        cr_var xs[6];
        cr_var y = mixed_t(t, k_mixed_x, xs);
        assert_ok(t, cr_tape_status(t));
        cr_tape_stats st;
        assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
        assert_int_equal(st.nrecords, 6 + 9);
        double jv;
        assert_ok(t, cr_tape_jvp(t, xs, v, 6, &y, 1, &jv));
        assert_close(jv, fd[0], FD_RTOL);
        if (flags == CR_TAPE_SECOND_ORDER) {
            double hv[6], g[6];
            assert_ok(t, cr_tape_hvp(t, y, xs, 6, v, hv, g));
            for (size_t j = 0; j < 6; j++)
                assert_close(hv[j], fdh[j], 1e-7);
            /* H v with respect to x2..x4 only, from an output inside the input records */
            assert_ok(t, cr_tape_hvp(t, xs[3], xs, 6, v, hv, g));
            for (size_t j = 0; j < 6; j++) {
                ASSERT_DBL(hv[j], 0.0);
                ASSERT_DBL(g[j], j == 3 ? 1.0 : 0.0);
            }
            /* The Hessian of y, and of that output (zero: x4 and x5 come after it) */
            double H[36];
            assert_ok(t, cr_tape_hessian(t, y, xs, 6, H));
            for (size_t j = 0; j < 6; j++) {
                double hj[6];
                for (size_t l = 0; l < 6; l++)
                    hj[l] = H[j * 6 + l];
                double e[6] = {0}, col[6];
                e[j] = 1.0;
                assert_ok(t, cr_tape_hvp(t, y, xs, 6, e, col, NULL));
                for (size_t l = 0; l < 6; l++)
                    assert_close(hj[l], col[l], 1e-15);
            }
            assert_ok(t, cr_tape_hessian(t, xs[3], xs, 6, H));
            for (size_t j = 0; j < 36; j++)
                ASSERT_DBL(H[j], 0.0);
        }
        cr_tape_free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_inputs_between_operations, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inputs_across_chunks, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inputs_forward_and_second_order, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
