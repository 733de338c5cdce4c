/*
 * Rules written by chainrules-ad --emit-rules (tests/tools/chainrules-ad/rules_input.c): the
 * library's own rule testers pass them (cr_test_scalar: frule and rrule against finite differences
 * and the dot-product test), a registry finds them by name, and the tape engine records them as
 * primitives, its gradient agreeing with central differences.
 */
#include "test_util.h"

extern const cr_value r_softclip_fn, r_blend_fn, r_wlse_fn;
cr_status rules_input_register_rules(cr_registry *reg);
double r_softclip(double x, double y);
double r_blend(double a, double b, double t);
double r_wlse(const double *x, const double *W, double t, int n);

/* The rules, registered, pass the library's testers (finite differences and the
 * dot-product test), and every registered rule passes its own registration's test. */
static void test_rule_testers(void **state)
{
    fixture *fx = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, NULL, &reg), CR_OK);
    assert_int_equal(rules_input_register_rules(reg), CR_OK);
    cr_config cfg = {.registry = reg};
    cr_test_opts opts = {.cfg = &cfg};
    static const double pts[][3] = {{0.5, 0.7, 0.1}, {2.0, 1.5, -0.4}, {-1.2, 0.3, 0.9}};
    for (int p = 0; p < 3; p++) {
        cr_value args[3] = {cr_value_f64(pts[p][0]), cr_value_f64(pts[p][1]),
                            cr_value_f64(pts[p][2])};
        cr_test_report rep;
        assert_int_equal(cr_test_scalar(fx->arena, &opts, &r_softclip_fn, args, 2, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
        assert_int_equal(cr_test_scalar(fx->arena, &opts, &r_blend_fn, args, 3, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
        assert_int_equal(cr_test_frule(fx->arena, &opts, &r_blend_fn, args, 3, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
        assert_int_equal(cr_test_rrule(fx->arena, &opts, &r_blend_fn, args, 3, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    }
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        if (info.fn == r_wlse_fn.u.func.fn)
            continue; /* a rule over arrays has no sampling registration (test_array_rule) */
        cr_test_report rep;
        assert_int_equal(cr_test_rule_registration(fx->arena, &opts, &info, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    }
    cr_registry_free(reg);
}

static void test_registry(void **state)
{
    fixture *fx = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, NULL, &reg), CR_OK);
    assert_int_equal(rules_input_register_rules(reg), CR_OK);
    const cr_function *fn = cr_registry_find(reg, "r_blend");
    assert_non_null(fn);
    assert_ptr_equal(fn, r_blend_fn.u.func.fn);
    assert_non_null(cr_registry_find(reg, "r_softclip"));
    cr_registry_free(reg);
}

/* f(x) = r_blend(x0, r_softclip(x1, x2), x0 * x2) on the tape, the two rules primitives. */
static cr_status taped(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var a[2] = {x[1], x[2]};
    cr_var sc = cr_tape_call1(t, &r_softclip_fn, a, 2);
    cr_var b[3] = {x[0], sc, cr_mul(t, x[0], x[2])};
    y[0] = cr_tape_call1(t, &r_blend_fn, b, 3);
    return cr_tape_status(t);
}

static double plain(const double *x)
{
    return r_blend(x[0], r_softclip(x[1], x[2]), x[0] * x[2]);
}

static void test_tape_primitives(void **state)
{
    fixture *fx = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(fx->ctx, NULL, &t), CR_OK);
    const double x[3] = {0.4, 1.3, 0.8};
    double y, g[3];
    assert_int_equal(cr_tape_value_and_gradient(t, taped, NULL, x, 3, &y, g), CR_OK);
    assert_close(y, plain(x), 1e-15);
    for (int i = 0; i < 3; i++) {
        double xp[3], xm[3], h = 1e-6;
        memcpy(xp, x, sizeof xp);
        memcpy(xm, x, sizeof xm);
        xp[i] += h;
        xm[i] -= h;
        ASSERT_CLOSE(g[i], (plain(xp) - plain(xm)) / (2 * h), 1e-7);
    }
    cr_tape_free(t);
}

/* The rule of a function of arrays: the library's testers (finite differences, the
 * dot-product test) pass its frule and rrule; the primal through the rule API is the
 * function's; arguments of the wrong size are refused. */
static void test_array_rule(void **state)
{
    fixture *fx = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, NULL, &reg), CR_OK);
    assert_int_equal(rules_input_register_rules(reg), CR_OK);
    cr_config cfg = {.registry = reg};
    cr_test_opts opts = {.cfg = &cfg};
    double x[3] = {0.3, -0.8, 1.1}, W[6] = {0.5, 1.2, -0.7, 0.1, -0.3, 0.2};
    cr_array X = cr_array_vector(x, 3), M = cr_array_matrix(W, 2, 3);
    cr_value args[4] = {cr_value_array(&X), cr_value_array(&M), cr_value_f64(0.9), cr_value_i64(3)};
    cr_test_report rep;
    assert_int_equal(cr_test_frule(fx->arena, &opts, &r_wlse_fn, args, 4, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    assert_int_equal(cr_test_rrule(fx->arena, &opts, &r_wlse_fn, args, 4, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, &r_wlse_fn, args, 4, &y), CR_OK);
    assert_close(y.u.f64, r_wlse(x, W, 0.9, 3), 1e-15);
    /* n = 4 does not match the arrays' sizes */
    args[3] = cr_value_i64(4);
    assert_int_equal(cr_function_call(fx->arena, &r_wlse_fn, args, 4, &y), CR_ESHAPE);
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, &r_wlse_fn, args, 4, &y, &pb), CR_ESHAPE);
    cr_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rule_testers, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_registry, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tape_primitives, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_array_rule, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
