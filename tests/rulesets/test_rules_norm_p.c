/*
 * norm(x, p) for Julia's exponents at or below zero: p = -Inf (the smallest |x|), p < 0
 * (the same sum, scaled by the smallest |x|; 0 with a zero element) and p = 0 (the count of
 * nonzero elements). Values against the definitions computed here directly; frule and rrule
 * through the testers (finite differences, the dot-product test).
 */
#include "test_util.h"

static double norm_ref(const double *x, size_t n, double p)
{
    if (p == 0) {
        double c = 0;
        for (size_t i = 0; i < n; i++)
            c += x[i] != 0;
        return c;
    }
    if (isinf(p) && p < 0) {
        double m = HUGE_VAL;
        for (size_t i = 0; i < n; i++)
            m = fmin(m, fabs(x[i]));
        return m;
    }
    long double s = 0;
    for (size_t i = 0; i < n; i++)
        s += powl(fabsl((long double)x[i]), (long double)p);
    return (double)powl(s, 1.0L / (long double)p);
}

static void test_values_and_rules(void **state)
{
    fixture *fx = *state;
    double x[5] = {0.7, -1.9, 0.35, 2.4, -1.1};
    cr_array X = cr_array_vector(x, 5);
    const double ps[] = {-INFINITY, -0.5, -1, -2.5, 0};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        /* p = 0 as an integer: a float p is perturbed too, and the norm is not continuous
         * in p at 0 */
        cr_value pv = ps[k] == 0 ? cr_value_i64(0) : cr_value_f64(ps[k]);
        cr_value args[2] = {cr_value_array(&X), pv}, y;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_norm, args, 2, &y), CR_OK);
        assert_close(y.u.f64, norm_ref(x, 5, ps[k]), 1e-14);
        cr_test_report rep;
        cr_status st_ = cr_test_rrule(fx->arena, NULL, &cr_fn_norm, args, 2, &rep);
        if (st_ != CR_OK)
            print_error("p = %g: %s: %s\n", ps[k], cr_status_name(st_), cr_ctx_errmsg(fx->ctx));
        assert_int_equal(st_, CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
        assert_int_equal(cr_test_frule(fx->arena, NULL, &cr_fn_norm, args, 2, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    }
    /* an integer exponent */
    cr_value iargs[2] = {cr_value_array(&X), cr_value_i64(-2)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_norm, iargs, 2, &y), CR_OK);
    assert_close(y.u.f64, norm_ref(x, 5, -2), 1e-14);
}

/* A zero element makes a negative-p norm 0, with a zero cotangent (the subgradient). */
static void test_zero_element(void **state)
{
    fixture *fx = *state;
    double x[3] = {0.5, 0, -2};
    cr_array X = cr_array_vector(x, 3);
    cr_value args[2] = {cr_value_array(&X), cr_value_f64(-1.5)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_norm, args, 2, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 0.0);
    cr_tangent dy = cr_tangent_f64(1), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    cr_tangent g;
    assert_int_equal(cr_tangent_unthunk(dx[1], &g), CR_OK);
    for (size_t i = 0; g.tag == CR_TAN_ARRAY && i < 3; i++)
        ASSERT_DBL(creal(cr_array_get_linear(g.u.arr, i)), 0.0);
    /* -Inf: the smallest is the zero */
    args[1] = cr_value_f64(-INFINITY);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_norm, args, 2, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 0.0);
    /* 0: two nonzeros */
    args[1] = cr_value_f64(0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_norm, args, 2, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 2.0);
    /* a NaN exponent */
    args[1] = cr_value_f64(NAN);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_norm, args, 2, &y), CR_EDOMAIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_values_and_rules, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_zero_element, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
