/*
 * prod(A[, dims]) and reduce(*, A[, dims]) at the points where partials by division break
 * down: one zero in a slice, two zeros, negative entries, complex entries (with zeros
 * too), reduced dimensions that are not next to each other, and a strided (transposed)
 * argument. The frule, the rrule, add!! into an accumulator and the dot-product test are
 * checked by the rule testers against finite differences of the primal (exact up to
 * rounding: the product is linear in each element); the cotangents of an all-elements
 * product are also compared with the products of the other elements, multiplied out here
 * one by one.
 */
#include "test_rule_points.h"

/* prod(A), prod(A, d) for every d and for dims (0, nd-1), reduce(*, A) and reduce(*, A, d). */
static void check_all_dims(fixture *fx, cr_array *A, const char *what)
{
    cr_value a = cr_value_array(A);
    check_point_strict(fx, NULL, &cr_fn_prod, &a, 1, true, what);
    cr_value r2[2] = {cr_fn_mul, a};
    check_point_strict(fx, NULL, &cr_fn_reduce, r2, 2, true, what);
    for (size_t d = 0; d < A->ndim; d++) {
        cr_value args[2] = {a, cr_value_i64((int64_t)d)};
        check_point_strict(fx, NULL, &cr_fn_prod, args, 2, true, what);
        cr_value r3[3] = {cr_fn_mul, a, cr_value_i64((int64_t)d)};
        check_point_strict(fx, NULL, &cr_fn_reduce, r3, 3, true, what);
    }
    if (A->ndim > 1) {
        int64_t ends[2] = {0, (int64_t)A->ndim - 1};
        size_t two = 2;
        cr_array D;
        assert_int_equal(cr_array_view_init(&D, ends, CR_DT_I64, 1, &two, NULL), CR_OK);
        cr_value args[2] = {a, cr_value_array(&D)};
        check_point_strict(fx, NULL, &cr_fn_prod, args, 2, true, what);
        cr_value r3[3] = {cr_fn_mul, a, cr_value_array(&D)};
        check_point_strict(fx, NULL, &cr_fn_reduce, r3, 3, true, what);
    }
}

/* Real 3 x 4 and 2 x 3 x 4 arrays: no zero, one zero per slice, two zeros in a slice,
 * negative entries; every placement of the zeros across dims. */
static void test_real_zeros(void **state)
{
    fixture *fx = *state;
    double base[24];
    for (size_t k = 0; k < 24; k++)
        base[k] = (k % 3 == 1 ? -1.0 : 1.0) * (0.6 + 0.05 * (double)k);
    /* the zero patterns: none; one zero; two zeros in a row and in a column; three */
    static const int zeros[5][3] = {{-1, -1, -1}, {5, -1, -1}, {4, 6, -1}, {1, 5, -1}, {0, 5, 11}};
    for (size_t p = 0; p < 5; p++) {
        double a[24], b[24];
        memcpy(a, base, sizeof a);
        memcpy(b, base, sizeof b);
        for (size_t z = 0; z < 3; z++)
            if (zeros[p][z] >= 0) {
                a[zeros[p][z]] = 0;
                b[zeros[p][z] * 2] = 0;
            }
        cr_array A = cr_array_matrix(a, 3, 4), B;
        size_t s3[3] = {2, 3, 4};
        assert_int_equal(cr_array_view_init(&B, b, CR_DT_F64, 3, s3, NULL), CR_OK);
        check_all_dims(fx, &A, "prod 3 x 4");
        check_all_dims(fx, &B, "prod 2 x 3 x 4");
        /* the transpose of A as a strided view: the walk follows its strides */
        size_t st[2] = {4, 3};
        ptrdiff_t sd[2] = {1, 4};
        cr_array T;
        assert_int_equal(cr_array_view_init(&T, a, CR_DT_F64, 2, st, sd), CR_OK);
        check_all_dims(fx, &T, "prod of a strided view");
    }
}

/* Complex 3 x 4 arrays with no zero, one zero and two zeros in a slice. */
static void test_complex_zeros(void **state)
{
    fixture *fx = *state;
    static const int zeros[3][2] = {{-1, -1}, {6, -1}, {4, 7}};
    for (size_t p = 0; p < 3; p++) {
        cr_complex z[12];
        for (size_t k = 0; k < 12; k++)
            z[k] = CMPLX((k % 2 ? -0.7 : 0.8) + 0.03 * (double)k, 0.4 - 0.1 * (double)k);
        for (size_t q = 0; q < 2; q++)
            if (zeros[p][q] >= 0)
                z[zeros[p][q]] = 0;
        size_t s[2] = {3, 4};
        cr_array Z;
        assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 2, s, NULL), CR_OK);
        check_all_dims(fx, &Z, "prod c128");
    }
}

/* The cotangents of prod(x) for a vector, against the products of the other elements
 * multiplied out here, with zeros anywhere; ȳ complex for a complex x. */
static void test_values(void **state)
{
    fixture *fx = *state;
    static const double xs[4][5] = {
        {2, -3, 0.5, 4, -1}, {2, 0, 0.5, 4, -1}, {0, -3, 0.5, 0, -1}, {0, 0, 0, 0, 0}};
    for (size_t p = 0; p < 4; p++) {
        cr_complex z[5];
        for (size_t i = 0; i < 5; i++)
            z[i] = CMPLX(xs[p][i], p == 2 ? 0 : 0.25 * (double)i);
        size_t five = 5;
        cr_array Z;
        assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 1, &five, NULL), CR_OK);
        cr_value a = cr_value_array(&Z), y;
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_prod, &a, 1, &y, &pb), CR_OK);
        cr_complex g = CMPLX(1.5, -0.5);
        cr_tangent dy = cr_tangent_c128(g), dx[2], u;
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
        assert_int_equal(cr_tangent_unthunk(dx[1], &u), CR_OK);
        for (size_t i = 0; i < 5; i++) {
            cr_complex others = 1;
            for (size_t j = 0; j < 5; j++)
                if (j != i)
                    others *= z[j];
            cr_complex want = conj(others) * g, got = cr_array_get_linear(u.u.arr, i);
            assert_false(isnan(creal(got)) || isnan(cimag(got)));
            ASSERT_CLOSE(creal(got), creal(want), 1e-14);
            ASSERT_CLOSE(cimag(got), cimag(want), 1e-14);
        }
    }
}

/* An empty slice's product is 1 and has no partials; an empty A gives an empty Ā. */
static void test_empty(void **state)
{
    fixture *fx = *state;
    double d = 0;
    size_t s[2] = {0, 3};
    cr_array E;
    assert_int_equal(cr_array_view_init(&E, &d, CR_DT_F64, 2, s, NULL), CR_OK);
    cr_value args[2] = {cr_value_array(&E), cr_value_i64(0)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_prod, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_ARRAY);
    for (size_t j = 0; j < 3; j++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, j)), 1);
    double g[3] = {1, 2, 3};
    cr_array G = cr_array_matrix(g, 1, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[3], u;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[1], &u), CR_OK);
    assert_int_equal(u.tag, CR_TAN_ARRAY);
    assert_int_equal(cr_array_numel(u.u.arr), 0);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_prod, args, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_real_zeros, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_complex_zeros, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_empty, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
