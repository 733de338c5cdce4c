/*
 * Hostile shapes given to the linear-algebra rules (docs/reliability.md, "Sizes"): arrays
 * with no elements whose extents multiply past what an array may hold. matmul's m x n and
 * kron's m p x n q combine extents of two arguments, pinv's n x n work matrix that of one
 * argument with itself; each is CR_EOVERFLOW with a message that names the function once and
 * gives the operands, through the primal, the rrule and the frule alike.
 */
#include <stdio.h>

#include "test_util.h"

/* Occurrences of s in text. */
static size_t count_of(const char *text, const char *s)
{
    size_t n = 0, len = strlen(s);
    for (const char *p = strstr(text, s); p != NULL; p = strstr(p + len, s))
        n++;
    return n;
}

/* The call's status is want; the context's message starts with "who:", names it once and
 * contains part. */
static void expect(fixture *f, cr_status got, cr_status want, const char *who, const char *part)
{
    const char *msg = cr_ctx_errmsg(f->ctx);
    if (got != want) {
        print_error("status %s, expected %s (%s)\n", cr_status_name(got), cr_status_name(want),
                    msg);
        fail();
    }
    char head[64];
    snprintf(head, sizeof head, "%s:", who);
    if (strncmp(msg, head, strlen(head)) != 0 || count_of(msg, head) != 1) {
        print_error("message \"%s\" should start with \"%s\" and name it once\n", msg, head);
        fail();
    }
    assert_contains(msg, part);
    cr_ctx_clear_error(f->ctx);
}

/* An f64 array of shape r x c with no elements (r or c is 0). */
static cr_value empty(fixture *f, size_t r, size_t c)
{
    size_t shape[2] = {r, c};
    cr_array *a;
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 2, shape, &a), CR_OK);
    assert_int_equal(cr_array_numel(a), 0);
    return cr_value_array(a);
}

/* The primal, the rrule and the frule of fn at args all give CR_EOVERFLOW naming who. */
static void expect_all(fixture *f, const cr_value *fn, const cr_value *args, size_t nargs,
                       const char *who, const char *part)
{
    cr_value y;
    cr_pullback pb;
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_zero()}, dy;
    expect(f, cr_function_call(f->arena, fn, args, nargs, &y), CR_EOVERFLOW, who, part);
    expect(f, cr_rrule(NULL, f->arena, fn, args, nargs, &y, &pb), CR_EOVERFLOW, who, part);
    expect(f, cr_frule(NULL, f->arena, dargs, fn, args, nargs, &y, &dy), CR_EOVERFLOW, who, part);
}

/* matmul of (m x 0) and (0 x n): the m x n result has no bound from its arguments. */
static void test_matmul_shape(void **state)
{
    fixture *f = *state;
    cr_value a[2] = {empty(f, 4294967296u, 0), empty(f, 0, 4294967296u)};
    expect_all(f, &cr_fn_matmul, a, 2, "matmul", "4294967296 x 4294967296");
    /* 2^62 elements fit a count, not 8-byte elements */
    a[0] = empty(f, 2147483648u, 0);
    a[1] = empty(f, 0, 2147483648u);
    expect_all(f, &cr_fn_matmul, a, 2, "matmul", "8-byte elements");
    /* within the limit: an empty product of a valid shape */
    a[0] = empty(f, 3, 0);
    a[1] = empty(f, 0, 5);
    cr_value y;
    assert_int_equal(cr_function_call(f->arena, &cr_fn_matmul, a, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 3);
    assert_int_equal(y.u.arr->shape[1], 5);
}

/* kron of two (2^32 x 0) matrices: 2^32 * 2^32 rows wrapped to 0 and gave a 0 x 0 result. */
static void test_kron_shape(void **state)
{
    fixture *f = *state;
    cr_value a[2] = {empty(f, 4294967296u, 0), empty(f, 4294967296u, 0)};
    expect_all(f, &cr_fn_kron, a, 2, "kron", "4294967296 * 4294967296");
    a[0] = empty(f, 0, 4294967296u);
    a[1] = empty(f, 0, 4294967296u);
    expect_all(f, &cr_fn_kron, a, 2, "kron", "4294967296 * 4294967296");
    cr_value y;
    a[0] = empty(f, 3, 0);
    a[1] = empty(f, 5, 0);
    assert_int_equal(cr_function_call(f->arena, &cr_fn_kron, a, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 15);
    assert_int_equal(y.u.arr->shape[1], 0);
}

#if defined(CR_HAVE_LAPACKE)
/* pinv of a 0 x n matrix: its n x n projector was allocated with a wrapped byte count. */
static void test_pinv_shape(void **state)
{
    fixture *f = *state;
    cr_value a = empty(f, 0, 2147483647u);
    expect_all(f, &cr_fn_pinv, &a, 1, "pinv", "2147483647 x 2147483647");
    a = empty(f, 2147483647u, 0);
    expect_all(f, &cr_fn_pinv, &a, 1, "pinv", "2147483647 x 2147483647");
    /* an empty matrix of a valid shape: its pseudo-inverse is n x m and empty */
    a = empty(f, 0, 3);
    cr_value y;
    assert_int_equal(cr_function_call(f->arena, &cr_fn_pinv, &a, 1, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 3);
    assert_int_equal(y.u.arr->shape[1], 0);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_matmul_shape, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_kron_shape, fixture_setup, fixture_teardown),
#if defined(CR_HAVE_LAPACKE)
        cmocka_unit_test_setup_teardown(test_pinv_shape, fixture_setup, fixture_teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
