/*
 * Counts given to the tape's entry points that would overflow a size computation: each is
 * refused with CR_EOVERFLOW and a message naming the function, before the caller's arrays
 * are read (the arrays below are far shorter than the counts claim: under AddressSanitizer a
 * read past them would fail the test), and the tape stays usable.
 */
#include <stdint.h>

#include <chainrules/tape_inline.h>

#include "test_util.h"

static cr_status square(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, x[0], x[0]);
    return CR_OK;
}

/* The status, and the context's message names who first. */
static void expect_overflow(fixture *f, cr_status st, const char *who)
{
    assert_int_equal(st, CR_EOVERFLOW);
    const char *msg = cr_ctx_errmsg(f->ctx);
    size_t n = strlen(who);
    if (strncmp(msg, who, n) != 0 || msg[n] != ':') {
        print_error("message \"%s\" should start with \"%s:\"\n", msg, who);
        fail();
    }
    cr_ctx_clear_error(f->ctx);
}

/* A tape still records and differentiates after the refusal. */
static void assert_usable(cr_tape *t)
{
    cr_tape_reset(t);
    cr_var x = cr_tape_input(t, 3.0);
    double g = 0.0;
    assert_int_equal(cr_tape_gradient(t, cr_mul(t, x, x), &x, 1, &g), CR_OK);
    assert_true(g == 6.0);
}

/* cr_tape_hessian's result has n * n elements: n = 2^32 + 1 wraps a 64-bit size. */
static void test_hessian_count(void **state)
{
    fixture *f = *state;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_var x = cr_tape_input(t, 2.0);
    cr_var y = cr_mul(t, x, x);
    double H[1] = {-1.0};
    size_t n = sizeof(size_t) >= 8 ? ((size_t)1 << (4 * sizeof(size_t))) + 1 : SIZE_MAX / 2;
    expect_overflow(f, cr_tape_hessian(t, y, &x, n, H), "cr_tape_hessian");
    assert_true(H[0] == -1.0); /* nothing written */
    /* Within range the same call works. */
    assert_int_equal(cr_tape_hessian(t, y, &x, 1, H), CR_OK);
    assert_true(H[0] == 2.0);
    assert_usable(t);
    cr_tape_free(t);
}

/* cr_tape_record and cr_tape_value_and_gradient make one variable per input: a count past
 * CR_TAPE_MAX_VARS, or one whose variables' bytes wrap, is refused before x is read. */
static void test_record_count(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double x[2] = {1.0, 2.0}, g[2] = {0.0, 0.0}, y = 0.0;
    cr_var xs[2], ys[1];
    const size_t counts[] = {CR_TAPE_MAX_VARS, SIZE_MAX / 4, SIZE_MAX};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        expect_overflow(f, cr_tape_record(t, square, NULL, x, counts[i], xs, ys, 1),
                        "cr_tape_record");
        expect_overflow(f, cr_tape_value_and_gradient(t, square, NULL, x, counts[i], &y, g),
                        "cr_tape_record");
        assert_true(g[0] == 0.0 && y == 0.0);
        assert_usable(t);
    }
    /* The same calls with the true count. */
    assert_int_equal(cr_tape_value_and_gradient(t, square, NULL, x, 2, &y, g), CR_OK);
    assert_true(y == 1.0 && g[0] == 2.0 && g[1] == 0.0);
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hessian_count, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_record_count, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
