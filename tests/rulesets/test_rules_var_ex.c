/*
 * var_ex and std_ex, Julia's var(x; corrected, mean, dims) and std: values against the sums
 * computed here; frules and rrules against finite differences (the rule testers, which
 * perturb the given mean as well as x) for real, complex and f32 arrays, a complex mean of a
 * real array, every combination of corrected, mean and dims; the hard points (slices of one
 * element uncorrected, σ = 0) and the refusals.
 */
#include "test_util.h"

static const cr_value k_nothing = {.kind = CR_KIND_NOTHING};

/* Σ |x_i - m|² / (n - corrected) over the n values x[0], x[step], ... */
static double var_of(const double *x, size_t n, size_t step, bool corrected, const double *m)
{
    double mean = 0;
    for (size_t i = 0; i < n; i++)
        mean += x[i * step] / (double)n;
    if (m != NULL)
        mean = *m;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (x[i * step] - mean) * (x[i * step] - mean);
    return s / ((double)n - (corrected ? 1 : 0));
}

static void test_values(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.3, -1.2, 0.8, 2.0, -0.5, 1.1};
    cr_array A = cr_array_matrix(a, 2, 3);
    double mu = 0.25;
    for (int c = 0; c < 2; c++) {
        cr_value args[3] = {cr_value_array(&A), cr_value_bool(c != 0), cr_value_f64(mu)}, y;
        /* all elements, the mean computed */
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, args, 2, &y), CR_OK);
        assert_close(y.u.f64, var_of(a, 6, 1, c, NULL), 1e-15);
        /* a given mean */
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, args, 3, &y), CR_OK);
        assert_close(y.u.f64, var_of(a, 6, 1, c, &mu), 1e-15);
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_std_ex, args, 3, &y), CR_OK);
        assert_close(y.u.f64, sqrt(var_of(a, 6, 1, c, &mu)), 1e-15);
        /* nothing: the mean computed */
        args[2] = k_nothing;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_std_ex, args, 3, &y), CR_OK);
        assert_close(y.u.f64, sqrt(var_of(a, 6, 1, c, NULL)), 1e-15);
        /* along dims 1 (one value per row), with a given mean per row */
        double m2[2] = {0.1, 0.4};
        cr_array M = cr_array_matrix(m2, 2, 1);
        cr_value dargs[4] = {cr_value_array(&A), cr_value_bool(c != 0), cr_value_array(&M),
                             cr_value_i64(1)};
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, dargs, 4, &y), CR_OK);
        assert_int_equal(y.kind, CR_KIND_ARRAY);
        assert_int_equal(y.u.arr->shape[0], 2);
        assert_int_equal(y.u.arr->shape[1], 1);
        for (size_t i = 0; i < 2; i++)
            assert_close(creal(cr_array_get_linear(y.u.arr, i)), var_of(a + 3 * i, 3, 1, c, &m2[i]),
                         1e-15);
        dargs[2] = k_nothing;
        dargs[3] = cr_value_i64(0);
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_std_ex, dargs, 4, &y), CR_OK);
        for (size_t j = 0; j < 3; j++)
            assert_close(creal(cr_array_get_linear(y.u.arr, j)), sqrt(var_of(a + j, 2, 3, c, NULL)),
                         1e-15);
    }
    /* corrected = true with the mean computed is var */
    cr_value vargs[2] = {cr_value_array(&A), cr_value_bool(true)}, y1, y2;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, vargs, 2, &y1), CR_OK);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var, vargs, 1, &y2), CR_OK);
    assert_close(y1.u.f64, y2.u.f64, 1e-15);
}

/* The rule testers over each signature, for f64, f32 and c128 x, real and complex means. */
static void test_rules(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.3, -1.2, 0.8, 2.0, -0.5, 1.1}, m2[2] = {0.1, 0.4};
    float af[6] = {0.3f, -1.2f, 0.8f, 2.0f, -0.5f, 1.1f};
    cr_complex az[6] = {0.3 + 0.1 * (cr_complex)I,  -1.2, 0.8 - 0.7 * (cr_complex)I, 2.0,
                        -0.5 + 0.2 * (cr_complex)I, 1.1};
    size_t s23[2] = {2, 3}, s21[2] = {2, 1};
    cr_array A = cr_array_matrix(a, 2, 3), Af, Az, M = cr_array_matrix(m2, 2, 1);
    assert_int_equal(cr_array_view_init(&Af, af, CR_DT_F32, 2, s23, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&Az, az, CR_DT_C128, 2, s23, NULL), CR_OK);
    cr_complex mz[2] = {0.1 - 0.3 * (cr_complex)I, 0.4};
    cr_array Mz;
    assert_int_equal(cr_array_view_init(&Mz, mz, CR_DT_C128, 2, s21, NULL), CR_OK);
    const cr_array *xs[3] = {&A, &Af, &Az};
    const cr_value *fns[2] = {&cr_fn_var_ex, &cr_fn_std_ex};
    cr_test_report rep;
    for (size_t f = 0; f < 2; f++)
        for (size_t k = 0; k < 3; k++)
            for (int c = 0; c < 2; c++)
                for (size_t form = 0; form < 6; form++) {
                    cr_value args[4] = {cr_value_array((cr_array *)xs[k]), cr_value_bool(c != 0),
                                        k_nothing, cr_value_i64(1)};
                    size_t n = 2;
                    switch (form) {
                    case 1: /* a real mean */
                        args[2] = cr_value_f64(0.2);
                        n = 3;
                        break;
                    case 2: /* a complex mean */
                        args[2] = cr_value_c128(0.2 + 0.5 * (cr_complex)I);
                        n = 3;
                        break;
                    case 3: /* dims, mean computed */
                        n = 4;
                        break;
                    case 4: /* dims and a real mean per row */
                        args[2] = cr_value_array(&M);
                        n = 4;
                        break;
                    case 5: /* dims and a complex mean per row */
                        args[2] = cr_value_array(&Mz);
                        n = 4;
                        break;
                    default:
                        break;
                    }
                    assert_int_equal(cr_test_rrule(fx->arena, NULL, fns[f], args, n, &rep), CR_OK);
                    if (rep.verdict != CR_VERDICT_PASS)
                        print_error("rrule %zu %zu %d %zu: %s: %s\n", f, k, c, form, rep.where,
                                    rep.message);
                    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
                    assert_int_equal(cr_test_frule(fx->arena, NULL, fns[f], args, n, &rep), CR_OK);
                    if (rep.verdict != CR_VERDICT_PASS)
                        print_error("frule %zu %zu %d %zu: %s: %s\n", f, k, c, form, rep.where,
                                    rep.message);
                    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
                }
}

/* The mean's cotangent against central differences computed here: var_ex(x, false, m) =
 * Σ (x - m)² / n, d/dm = -2 Σ (x - m) / n. */
static void test_mean_cotangent(void **state)
{
    fixture *fx = *state;
    double a[4] = {0.3, -1.2, 0.8, 2.0}, m = 0.7, h = 1e-6;
    cr_array A = cr_array_vector(a, 4);
    cr_value args[3] = {cr_value_array(&A), cr_value_bool(false), cr_value_f64(m)}, y, yp, ym;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_var_ex, args, 3, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_f64(1), dx[4];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    args[2] = cr_value_f64(m + h);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, args, 3, &yp), CR_OK);
    args[2] = cr_value_f64(m - h);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, args, 3, &ym), CR_OK);
    assert_int_equal(dx[3].tag, CR_TAN_F64);
    ASSERT_CLOSE(dx[3].u.f64, (yp.u.f64 - ym.u.f64) / (2 * h), 1e-8);
    /* corrected has no tangent */
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
}

/* Hard points: slices of one element, uncorrected (the divisor 1), and σ = 0. */
static void test_hard_points(void **state)
{
    fixture *fx = *state;
    double a[3] = {0.5, 0.5, 0.5}, one[1] = {1.5};
    cr_array A = cr_array_vector(a, 3), O = cr_array_vector(one, 1);
    cr_test_report rep;
    /* one element, a given mean: var = (x - m)², std = |x - m| */
    cr_value args[3] = {cr_value_array(&O), cr_value_bool(false), cr_value_f64(0.25)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, args, 3, &y), CR_OK);
    assert_close(y.u.f64, 1.5625, 1e-15);
    for (int f = 0; f < 2; f++) {
        const cr_value *fn = f ? &cr_fn_std_ex : &cr_fn_var_ex;
        assert_int_equal(cr_test_rrule(fx->arena, NULL, fn, args, 3, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
        assert_int_equal(cr_test_frule(fx->arena, NULL, fn, args, 3, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    }
    /* one element, corrected: 0 / 0 (Julia's NaN) */
    args[1] = cr_value_bool(true);
    args[2] = k_nothing;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, args, 2, &y), CR_OK);
    assert_true(isnan(y.u.f64));
    /* σ = 0 (every element at the given mean): the cotangents are 0, not NaN */
    cr_value zargs[3] = {cr_value_array(&A), cr_value_bool(false), cr_value_f64(0.5)};
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_std_ex, zargs, 3, &y, &pb), CR_OK);
    assert_close(y.u.f64, 0.0, 0);
    cr_tangent dy = cr_tangent_f64(1), dx[4], g;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[1], &g), CR_OK);
    for (size_t i = 0; i < 3; i++)
        assert_true(creal(cr_array_get_linear(g.u.arr, i)) == 0.0);
    assert_true(dx[3].tag == CR_TAN_F64 && dx[3].u.f64 == 0.0);
}

static void test_refusals(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.3, -1.2, 0.8, 2.0, -0.5, 1.1}, m3[3] = {0, 0, 0};
    cr_array A = cr_array_matrix(a, 2, 3), M3 = cr_array_matrix(m3, 3, 1);
    cr_value y;
    cr_value args[4] = {cr_value_array(&A), cr_value_i64(2), k_nothing, cr_value_i64(1)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, args, 2, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "corrected is 2"));
    args[1] = cr_value_bool(true);
    /* without dims the mean is a number */
    args[2] = cr_value_array(&M3);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, args, 3, &y), CR_EINVAL);
    /* with dims an array of the reduced shape (2 x 1 here, not 3 x 1) */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_std_ex, args, 4, &y), CR_ESHAPE);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "std_ex: the mean"));
    args[2] = cr_value_f64(0.5);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, args, 4, &y), CR_EINVAL);
    /* a dimension out of range */
    args[2] = k_nothing;
    args[3] = cr_value_i64(2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var_ex, args, 4, &y), CR_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rules, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mean_cotangent, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hard_points, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
