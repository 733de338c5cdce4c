/*
 * Sizes given to the testing utilities that overflow (docs/reliability.md, "Sizes"): the
 * output count of cr_fd_jvp and cr_fd_jacobian, whose scratch holds several vectors of it
 * (and the m x n Jacobian), and the order of cr_test_rand_matrix. Each is CR_EOVERFLOW with
 * a message naming the function once, before any callback runs or anything is allocated.
 */
#include <stdint.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/fd.h>
#include <chainrules/testing.h>

static size_t g_calls; /* calls of the function under differentiation */

static cr_status f_never(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)x;
    (void)n;
    (void)y;
    (void)m;
    (void)env;
    g_calls++;
    return CR_OK;
}

/* f(x) = (x0², 3 x0): a well-formed function for the checks that must pass. */
static cr_status f_small(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = x[0] * x[0];
    y[1] = 3 * x[0];
    return CR_OK;
}

static void expect_overflow(fixture *f, cr_status st, const char *who)
{
    const char *msg = cr_ctx_errmsg(f->ctx);
    if (st != CR_EOVERFLOW) {
        print_error("status %s, expected CR_EOVERFLOW (%s)\n", cr_status_name(st), msg);
        fail();
    }
    char head[64];
    snprintf(head, sizeof head, "%s:", who);
    assert_int_equal(strncmp(msg, head, strlen(head)), 0);
    assert_null(strstr(msg + strlen(head), head));
    assert_contains(msg, "overflows");
    cr_ctx_clear_error(f->ctx);
}

static void test_fd_output_counts(void **state)
{
    fixture *f = *state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    double x = 0.5, v = 1.0, out[4] = {0}, err;
    g_calls = 0;
    /* 5 m doubles of scratch: m = SIZE_MAX / 4 wraps */
    expect_overflow(
        f, cr_fd_jvp(&m, NULL, f_never, NULL, &x, 1, &v, SIZE_MAX / 4, f->arena, out, &err),
        "cr_fd_jvp");
    /* m n of the Jacobian: beyond PTRDIFF_MAX doubles, and 5 m of the scratch */
    expect_overflow(
        f, cr_fd_jacobian(&m, NULL, f_never, NULL, &x, 1, (size_t)1 << 62, f->arena, out, &err),
        "cr_fd_jacobian");
    expect_overflow(
        f, cr_fd_jacobian(&m, NULL, f_never, NULL, &x, 1, SIZE_MAX / 2, f->arena, out, &err),
        "cr_fd_jacobian");
    assert_int_equal(g_calls, 0);
    /* sizes that fit still work: d(x², 3x)/dx at 0.5 = (1, 3) */
    assert_int_equal(cr_fd_jacobian(&m, NULL, f_small, NULL, &x, 1, 2, f->arena, out, &err), CR_OK);
    assert_true(fabs(out[0] - 1.0) < 1e-9 && fabs(out[1] - 3.0) < 1e-9);
    assert_int_equal(cr_fd_jvp(&m, NULL, f_small, NULL, &x, 1, &v, 2, f->arena, out, &err), CR_OK);
    assert_true(fabs(out[0] - 1.0) < 1e-9 && fabs(out[1] - 3.0) < 1e-9);
}

static void test_rand_matrix_order(void **state)
{
    fixture *f = *state;
    uint64_t rng = 7;
    cr_array *a = NULL;
    expect_overflow(
        f, cr_test_rand_matrix(f->arena, &rng, (size_t)1 << 32, 10.0, CR_TEST_MATRIX_GENERAL, &a),
        "cr_test_rand_matrix");
    /* n² fits, 32 bytes an element do not */
    expect_overflow(
        f, cr_test_rand_matrix(f->arena, &rng, (size_t)1 << 30, 10.0, CR_TEST_MATRIX_SPD, &a),
        "cr_test_rand_matrix");
    assert_null(a);
    assert_int_equal(cr_test_rand_matrix(f->arena, &rng, 3, 10.0, CR_TEST_MATRIX_ORTHOGONAL, &a),
                     CR_OK);
    assert_int_equal(a->shape[0], 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fd_output_counts, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rand_matrix_order, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
