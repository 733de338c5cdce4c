/*
 * The checked arithmetic of the core layer (src/core/checked.h, checked.c): products and
 * sums of sizes bounded by PTRDIFF_MAX, int64 products, sums, differences and negations at
 * the edges of their range, and int64 extents as sizes. Every overflow gives CR_EOVERFLOW
 * with a message naming the caller and the operands; results that fit are exact.
 */
#include "test_util.h"

#include "core/core_impl.h"

/* The context's last error is st with a message containing each of the two strings. */
static void expect_error(cr_ctx *ctx, cr_status st, const char *a, const char *b)
{
    assert_int_equal(cr_ctx_errcode(ctx), st);
    assert_contains(cr_ctx_errmsg(ctx), a);
    assert_contains(cr_ctx_errmsg(ctx), b);
    cr_ctx_clear_error(ctx);
}

static void test_int64(void **state)
{
    fixture *fx = *state;
    cr_ctx *ctx = fx->ctx;
    int64_t r = 0;
    /* products: the exact value inside the range, an error one step outside */
    assert_int_equal(cr__ck_mul_i64(ctx, "mul", 3037000499, 3037000499, &r), CR_OK);
    assert_true(r == INT64_C(9223372030926249001));
    assert_int_equal(cr__ck_mul_i64(ctx, "mul", -4, INT64_MAX / 4, &r), CR_OK);
    assert_true(r == -(INT64_MAX / 4) * 4);
    assert_int_equal(cr__ck_mul_i64(ctx, "mul", 0, INT64_MIN, &r), CR_OK);
    assert_true(r == 0);
    assert_int_equal(cr__ck_mul_i64(ctx, "mul", 3037000500, 3037000500, &r), CR_EOVERFLOW);
    expect_error(ctx, CR_EOVERFLOW, "mul: 3037000500 * 3037000500", "overflows int64");
    assert_int_equal(cr__ck_mul_i64(ctx, NULL, -1, INT64_MIN, &r), CR_EOVERFLOW);
    expect_error(ctx, CR_EOVERFLOW, "chainrules: -1 * -9223372036854775808", "int64");
    /* sums and differences */
    assert_int_equal(cr__ck_add_i64(ctx, "add", INT64_MAX - 1, 1, &r), CR_OK);
    assert_true(r == INT64_MAX);
    assert_int_equal(cr__ck_add_i64(ctx, "add", INT64_MIN, -1, &r), CR_EOVERFLOW);
    expect_error(ctx, CR_EOVERFLOW, "add: -9223372036854775808 + -1", "overflows int64");
    assert_int_equal(cr__ck_sub_i64(ctx, "sub", INT64_MIN + 1, 1, &r), CR_OK);
    assert_true(r == INT64_MIN);
    assert_int_equal(cr__ck_sub_i64(ctx, "sub", 0, INT64_MIN, &r), CR_EOVERFLOW);
    expect_error(ctx, CR_EOVERFLOW, "sub: 0 - -9223372036854775808", "overflows int64");
    /* negation: every value but INT64_MIN */
    assert_int_equal(cr__ck_neg_i64(ctx, "neg", INT64_MAX, &r), CR_OK);
    assert_true(r == -INT64_MAX);
    assert_int_equal(cr__ck_neg_i64(ctx, "neg", INT64_MIN, &r), CR_EOVERFLOW);
    expect_error(ctx, CR_EOVERFLOW, "neg: -(-9223372036854775808)", "overflows int64");
}

static void test_sizes(void **state)
{
    fixture *fx = *state;
    cr_ctx *ctx = fx->ctx;
    size_t r = 0;
    const size_t max = (size_t)PTRDIFF_MAX;
    assert_int_equal(cr__ck_mul(ctx, "mul", max / 2, 2, &r), CR_OK);
    assert_true(r == max - 1);
    /* no wrap-around, but beyond PTRDIFF_MAX */
    assert_int_equal(cr__ck_mul(ctx, "mul", max / 2 + 1, 2, &r), CR_EOVERFLOW);
    expect_error(ctx, CR_EOVERFLOW, "mul: ", "overflows");
    assert_int_equal(cr__ck_add(ctx, "add", max - 1, 1, &r), CR_OK);
    assert_true(r == max);
    assert_int_equal(cr__ck_add(ctx, NULL, max, 1, &r), CR_EOVERFLOW);
    expect_error(ctx, CR_EOVERFLOW, "chainrules: ", " + 1 overflows");
    /* extents: negative ones are invalid, the largest int64 fits */
    assert_int_equal(cr__ck_extent(ctx, "fill", "dimension", INT64_MAX, &r), CR_OK);
    assert_true(r == (size_t)INT64_MAX);
    assert_int_equal(cr__ck_extent(ctx, "fill", "dimension", -3, &r), CR_EINVAL);
    expect_error(ctx, CR_EINVAL, "fill: negative dimension -3", "fill");
    /* element counts with and without an element size */
    size_t shape[2] = {(size_t)1 << 32, (size_t)1 << 32};
    assert_int_equal(cr__ck_numel(ctx, "zeros", 2, shape, 0, &r), CR_EOVERFLOW);
    expect_error(ctx, CR_EOVERFLOW, "zeros: shape 4294967296 x 4294967296 overflows", "element");
    shape[0] = 3;
    shape[1] = 5;
    assert_int_equal(cr__ck_numel(ctx, "zeros", 2, shape, 8, &r), CR_OK);
    assert_true(r == 15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_int64, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sizes, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
