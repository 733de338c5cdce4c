/*
 * diagm of several diagonals: diagm(k1, v1, k2, v2, ...) and diagm(m, n, k1, v1, ...), Julia's
 * diagm(k1 => v1, ...) and diagm(m, n, k1 => v1, ...). Values against matrices written out
 * here by hand from Julia's definition (each v_i on its diagonal k_i, a repeated diagonal
 * summed, square of order max(length(v_i) + |k_i|) without a size); frule and rrule through
 * the testers (finite differences, the dot-product test); the pullback against the
 * cotangent's diagonals read directly; the errors.
 */
#include "test_util.h"

static cr_array vec(double *x, size_t n)
{
    return cr_array_vector(x, n);
}

/* y must be an r x c f64 matrix equal to want (row-major). */
static void expect_matrix(const cr_value *y, size_t r, size_t c, const double *want)
{
    assert_int_equal(y->kind, CR_KIND_ARRAY);
    const cr_array *a = y->u.arr;
    assert_int_equal(a->ndim, 2);
    assert_int_equal(a->shape[0], r);
    assert_int_equal(a->shape[1], c);
    for (size_t i = 0; i < r * c; i++)
        ASSERT_DBL(creal(cr_array_get_linear(a, i)), want[i]);
}

static void test_values(void **state)
{
    fixture *fx = *state;
    double a[2] = {1, 2}, b[2] = {3, 4}, c[1] = {5};
    cr_array A = vec(a, 2), B = vec(b, 2), C = vec(c, 1);
    cr_value y;
    /* diagm(1 => [1, 2], -1 => [3, 4]): order 3 */
    cr_value p1[4] = {cr_value_i64(1), cr_value_array(&A), cr_value_i64(-1), cr_value_array(&B)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_diagm, p1, 4, &y), CR_OK);
    const double w1[9] = {0, 1, 0, 3, 0, 2, 0, 4, 0};
    expect_matrix(&y, 3, 3, w1);
    /* diagm(0 => [1, 2], 0 => [3, 4], 2 => [5]): the main diagonal summed, order 3 */
    cr_value p2[6] = {cr_value_i64(0),    cr_value_array(&A), cr_value_i64(0),
                      cr_value_array(&B), cr_value_i64(2),    cr_value_array(&C)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_diagm, p2, 6, &y), CR_OK);
    const double w2[9] = {4, 0, 5, 0, 6, 0, 0, 0, 0};
    expect_matrix(&y, 3, 3, w2);
    /* diagm(2, 4, 1 => [1, 2]): a 2 x 4 matrix */
    cr_value p3[4] = {cr_value_i64(2), cr_value_i64(4), cr_value_i64(1), cr_value_array(&A)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_diagm, p3, 4, &y), CR_OK);
    const double w3[8] = {0, 1, 0, 0, 0, 0, 2, 0};
    expect_matrix(&y, 2, 4, w3);
    /* diagm(3, 2, -1 => [1, 2]) */
    cr_value p4[4] = {cr_value_i64(3), cr_value_i64(2), cr_value_i64(-1), cr_value_array(&A)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_diagm, p4, 4, &y), CR_OK);
    const double w4[6] = {0, 0, 1, 0, 0, 2};
    expect_matrix(&y, 3, 2, w4);
    /* one pair is diagm(v, k) */
    cr_value p5[2] = {cr_value_i64(-1), cr_value_array(&A)},
             q5[2] = {cr_value_array(&A), cr_value_i64(-1)};
    cr_value y5;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_diagm, p5, 2, &y), CR_OK);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_diagm, q5, 2, &y5), CR_OK);
    const double w5[9] = {0, 0, 0, 1, 0, 0, 0, 2, 0};
    expect_matrix(&y, 3, 3, w5);
    expect_matrix(&y5, 3, 3, w5);
}

/* The element type: f32 when every vector is f32, c128 when one is complex. */
static void test_dtypes(void **state)
{
    fixture *fx = *state;
    float af[2] = {1, 2};
    cr_complex bc[1] = {CMPLX(0.5, -1)};
    size_t n2 = 2, n1 = 1;
    cr_array Af, Bc;
    assert_int_equal(cr_array_view_init(&Af, af, CR_DT_F32, 1, &n2, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&Bc, bc, CR_DT_C128, 1, &n1, NULL), CR_OK);
    cr_value y;
    cr_value p1[2] = {cr_value_i64(0), cr_value_array(&Af)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_diagm, p1, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    cr_value p2[4] = {cr_value_i64(0), cr_value_array(&Af), cr_value_i64(1), cr_value_array(&Bc)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_diagm, p2, 4, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_C128);
    ASSERT_CPLX(cr_array_get_linear(y.u.arr, 1), 0.5, -1);
    ASSERT_CPLX(cr_array_get_linear(y.u.arr, 3), 2, 0);
}

static void check_rules(fixture *fx, const cr_value *args, size_t nargs, const char *what)
{
    cr_test_report rep;
    cr_status st = cr_test_rrule(fx->arena, NULL, &cr_fn_diagm, args, nargs, &rep);
    if (st != CR_OK || rep.verdict != CR_VERDICT_PASS)
        print_error("%s: rrule %s: %s\n", what, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
    assert_int_equal(st, CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    st = cr_test_frule(fx->arena, NULL, &cr_fn_diagm, args, nargs, &rep);
    if (st != CR_OK || rep.verdict != CR_VERDICT_PASS)
        print_error("%s: frule %s: %s\n", what, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
    assert_int_equal(st, CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
}

static void test_rules_by_differences(void **state)
{
    fixture *fx = *state;
    double a[3] = {0.3, -1.2, 2.5}, b[2] = {1.7, -0.4}, c[1] = {0.9};
    cr_complex z[2] = {CMPLX(0.5, -1), CMPLX(-2, 0.25)};
    size_t n2 = 2;
    cr_array A = vec(a, 3), B = vec(b, 2), C = vec(c, 1), Z;
    assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 1, &n2, NULL), CR_OK);
    cr_value p1[6] = {cr_value_i64(0),    cr_value_array(&A), cr_value_i64(-1),
                      cr_value_array(&B), cr_value_i64(0),    cr_value_array(&C)};
    check_rules(fx, p1, 6, "diagm(0 => a, -1 => b, 0 => c)");
    cr_value p2[4] = {cr_value_i64(2), cr_value_array(&Z), cr_value_i64(-2), cr_value_array(&B)};
    check_rules(fx, p2, 4, "diagm(2 => z, -2 => b)");
    cr_value p3[6] = {cr_value_i64(4),    cr_value_i64(5),  cr_value_i64(1),
                      cr_value_array(&A), cr_value_i64(-2), cr_value_array(&B)};
    check_rules(fx, p3, 6, "diagm(4, 5, 1 => a, -2 => b)");
}

/* v̄_i = ȳ's diagonal k_i (first length(v_i) entries), read here from ȳ directly. */
static void test_pullback(void **state)
{
    fixture *fx = *state;
    double a[2] = {1, 2}, b[1] = {3};
    cr_array A = vec(a, 2), B = vec(b, 1);
    cr_value args[6] = {cr_value_i64(3),    cr_value_i64(3),  cr_value_i64(1),
                        cr_value_array(&A), cr_value_i64(-2), cr_value_array(&B)};
    cr_value y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_diagm, args, 6, &y, &pb), CR_OK);
    double g[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    size_t s33[2] = {3, 3};
    cr_array G;
    assert_int_equal(cr_array_view_init(&G, g, CR_DT_F64, 2, s33, NULL), CR_OK);
    cr_tangent dy = cr_tangent_array(&G), dx[7];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 7), CR_OK);
    for (size_t i = 0; i < 7; i++)
        if (i != 4 && i != 6)
            assert_int_equal(dx[i].tag, CR_TAN_NONE);
    cr_tangent da, db;
    assert_int_equal(cr_tangent_unthunk(dx[4], &da), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[6], &db), CR_OK);
    assert_int_equal(da.tag, CR_TAN_ARRAY);
    ASSERT_DBL(creal(cr_array_get_linear(da.u.arr, 0)), 2); /* ȳ[0, 1] */
    ASSERT_DBL(creal(cr_array_get_linear(da.u.arr, 1)), 6); /* ȳ[1, 2] */
    assert_int_equal(db.tag, CR_TAN_ARRAY);
    ASSERT_DBL(creal(cr_array_get_linear(db.u.arr, 0)), 7); /* ȳ[2, 0] */
    /* a zero cotangent gives zeros */
    dy = cr_tangent_zero();
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 7), CR_OK);
    assert_int_equal(dx[4].tag, CR_TAN_ZERO);
    assert_int_equal(dx[6].tag, CR_TAN_ZERO);
}

static void expect_err(fixture *fx, const cr_value *args, size_t nargs, cr_status want,
                       const char *msg)
{
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_diagm, args, nargs, &y), want);
    assert_contains(cr_ctx_errmsg(fx->ctx), msg);
}

static void test_errors(void **state)
{
    fixture *fx = *state;
    double a[2] = {1, 2};
    size_t s11[2] = {1, 2};
    cr_array A = vec(a, 2), M;
    assert_int_equal(cr_array_view_init(&M, a, CR_DT_F64, 2, s11, NULL), CR_OK);
    /* a diagonal that does not fit the size */
    cr_value e1[4] = {cr_value_i64(2), cr_value_i64(2), cr_value_i64(1), cr_value_array(&A)};
    expect_err(fx, e1, 4, CR_ESHAPE, "diagm: the diagonals need a 2 x 3 matrix");
    /* a matrix instead of a vector */
    cr_value e2[2] = {cr_value_i64(0), cr_value_array(&M)};
    expect_err(fx, e2, 2, CR_ESHAPE, "diagm: argument 2 must be a vector");
    /* a pair without its vector */
    cr_value e3[3] = {cr_value_i64(0), cr_value_array(&A), cr_value_i64(1)};
    expect_err(fx, e3, 3, CR_EINVAL, "diagm: expected pairs");
    /* a negative size */
    cr_value e4[4] = {cr_value_i64(-1), cr_value_i64(2), cr_value_i64(0), cr_value_array(&A)};
    expect_err(fx, e4, 4, CR_EINVAL, "diagm: negative row count -1");
    /* a diagonal beyond any size */
    cr_value e5[2] = {cr_value_i64(INT64_MIN), cr_value_array(&A)};
    expect_err(fx, e5, 2, CR_EOVERFLOW, "diagm: diagonal");
    /* an integer vector */
    int64_t iv[2] = {1, 2};
    cr_array Iv;
    assert_int_equal(cr_array_view_init(&Iv, iv, CR_DT_I64, 1, &s11[1], NULL), CR_OK);
    cr_value e6[2] = {cr_value_i64(0), cr_value_array(&Iv)};
    expect_err(fx, e6, 2, CR_EINVAL, "must be an f64, f32 or c128 array");
}

/* The largest signature (four pairs) is registered for both rules. */
static void test_registration(void **state)
{
    fixture *fx = *state;
    double a[2] = {1, 2};
    cr_array A = vec(a, 2);
    cr_value four[8], y;
    for (size_t i = 0; i < 8; i += 2) {
        four[i] = cr_value_i64((int64_t)i / 2 - 1);
        four[i + 1] = cr_value_array(&A);
    }
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_diagm, four, 8, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 4); /* max(2 + |k|) over k = -1, 0, 1, 2 */
    /* zero tangents: a zero tangent out */
    cr_tangent dargs[9], dy;
    for (size_t i = 0; i < 9; i++)
        dargs[i] = cr_tangent_zero();
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_diagm, four, 8, &y, &dy), CR_OK);
    assert_int_equal(dy.tag, CR_TAN_ZERO);
    assert_int_equal(y.u.arr->shape[1], 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dtypes, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rules_by_differences, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_pullback, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_registration, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
