/*
 * Second order through rules kept as pullbacks: on a CR_TAPE_SECOND_ORDER tape a function
 * with an rrule only (a user rule, hypot of three arguments, evalpoly, a rule with a tuple
 * result) is recorded with the partials its pullback gives and second derivatives taken by
 * central differences of those partials. Checked against central second differences of
 * plain-C versions of the functions; the edges: a rule that fails on one side of the point,
 * on both sides, more variable arguments than a record holds. (Prepared H v of the same
 * programs: test_prepared_hvp_pullback.c.)
 */
#include "test_pullback_rules.h"

static void test_user_rule(void **state)
{
    const double x[3] = {0.7, -0.4, 0.9};
    check_hessian(*state, f1_t, f1_c, x, 3, 1e-6);
}

static void test_tuple_rule(void **state)
{
    const double x[2] = {0.8, 0.6};
    check_hessian(*state, f2_t, f2_c, x, 2, 1e-6);
}

static void test_builtin_rules(void **state)
{
    const double x[3] = {0.3, -1.1, 0.5};
    check_hessian(*state, f3_t, f3_c, x, 3, 1e-6);
}

/* capped(x0 x1) at the edge of its domain: the one-sided difference (error O(h)) */
static void test_domain_edge(void **state)
{
    const double x[2] = {1.0 - 1e-9, 1.0}; /* x0 x1 + h is outside */
    check_hessian(*state, f4_t, f4_c, x, 2, 1e-4);
}

/* pinned(x) is defined at 0.5 only: no second derivatives, a clear failure */
static void test_both_sides_fail(void **state)
{
    fixt *e = *state;
    cr_tape *t = so_tape(e);
    cr_value f;
    cr_var x = cr_tape_input(t, 0.5);
    cr_var y = cr_tape_call1(t, fv_of(&pinned_fn, &f), &x, 1);
    assert_true(isnan(y.v));
    assert_int_equal(cr_tape_status(t), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "pinned");
    assert_contains(cr_tape_errmsg(t), "no second derivatives");
    /* sticky: later operations give NaN and keep the status */
    assert_true(isnan(cr_sin(t, x).v));
    assert_int_equal(cr_tape_status(t), CR_EDOMAIN);
    /* a first-order tape records it */
    cr_tape *r;
    cr_tape_params p = {.struct_size = sizeof p, .engine = e->eng};
    assert_int_equal(cr_tape_new(e->ctx, &p, &r), CR_OK);
    x = cr_tape_input(r, 0.5);
    y = cr_tape_call1(r, fv_of(&pinned_fn, &f), &x, 1);
    double g;
    assert_int_equal(cr_tape_gradient(r, y, &x, 1, &g), CR_OK);
    assert_close(g, 3.0, 1e-15);
    cr_tape_free(r);
    cr_tape_free(t);
}

/* Five variable arguments are more than a record holds: refused; four variables and a
 * constant are recorded. */
static void test_argument_limit(void **state)
{
    fixt *e = *state;
    const double x[4] = {0.2, 0.9, -0.3, 1.7};
    check_hessian(e, f5_t, f5_c, x, 4, 1e-6);

    cr_tape *t = so_tape(e);
    cr_var xs[5];
    cr_value f;
    for (size_t j = 0; j < 5; j++)
        xs[j] = cr_tape_input(t, 0.1 * (double)(j + 1));
    assert_true(isnan(cr_tape_call1(t, fv_of(&sum5_fn, &f), xs, 5).v));
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "sum5");
    assert_contains(cr_tape_errmsg(t), "at most 4 variable arguments");
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_user_rule, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_tuple_rule, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_builtin_rules, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_domain_edge, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_both_sides_fail, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_argument_limit, env_setup, env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
