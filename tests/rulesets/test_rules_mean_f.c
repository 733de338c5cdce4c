/*
 * mean(f, A) and mean(f, A, dims) (Statistics' mean(f, itr)): values against the mean of
 * f computed here directly; frule and rrule through the testers (finite differences, the
 * dot-product test), with a scalar row (sin) and with a function that has no rule, which
 * the finite-difference configuration differentiates (testing.h).
 */
#include "test_util.h"

static cr_status cube_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    double x = args[0].u.f64;
    *out = cr_value_f64(x * x * x - x);
    return CR_OK;
}
static const cr_function cube_fn = {"cube", 1, cube_primal, NULL, NULL, 0};

static void test_values(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.3, -1.2, 0.8, 2.0, -0.5, 1.1};
    cr_array A = cr_array_matrix(a, 2, 3);
    cr_value args[3] = {cr_fn_sin, cr_value_array(&A), cr_value_i64(1)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_mean, args, 2, &y), CR_OK);
    double want = 0;
    for (int i = 0; i < 6; i++)
        want += sin(a[i]) / 6;
    assert_close(y.u.f64, want, 1e-15);
    /* over the second dimension: one mean per row */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_mean, args, 3, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_ARRAY);
    for (int i = 0; i < 2; i++) {
        double w = (sin(a[3 * i]) + sin(a[3 * i + 1]) + sin(a[3 * i + 2])) / 3;
        assert_close(creal(cr_array_get_linear(y.u.arr, (size_t)i)), w, 1e-15);
    }
    /* an empty array */
    cr_array E;
    size_t zero = 0;
    cr_array_view_init(&E, a, CR_DT_F64, 1, &zero, NULL);
    cr_value eargs[2] = {cr_fn_sin, cr_value_array(&E)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_mean, eargs, 2, &y), CR_EINVAL);
}

static void test_rules(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.3, -1.2, 0.8, 2.0, -0.5, 1.1};
    cr_array A = cr_array_matrix(a, 2, 3);
    cr_value args[3] = {cr_fn_sin, cr_value_array(&A), cr_value_i64(0)};
    cr_test_report rep;
    for (size_t n = 2; n <= 3; n++) {
        assert_int_equal(cr_test_rrule(fx->arena, NULL, &cr_fn_mean, args, n, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
        assert_int_equal(cr_test_frule(fx->arena, NULL, &cr_fn_mean, args, n, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    }
    /* a function with no rule, differentiated by finite differences through the configuration */
    cr_test_fd_env env;
    cr_config cfg;
    assert_int_equal(cr_test_fd_config(NULL, NULL, NULL, &env, &cfg), CR_OK);
    cr_test_opts opts = {.cfg = &cfg};
    args[0] = cr_value_function(&cube_fn, NULL);
    assert_int_equal(cr_test_rrule(fx->arena, &opts, &cr_fn_mean, args, 2, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    /* and the gradient against cube's known derivative: (3 a^2 - 1) / 6 */
    cr_value y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_mean, args, 2, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_f64(1), dx[3], g;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[2], &g), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(g.u.arr, i)), (3 * a[i] * a[i] - 1) / 6, 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rules, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
