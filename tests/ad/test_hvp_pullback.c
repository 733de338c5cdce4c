/*
 * Second order through rules kept as pullbacks: on a CR_TAPE_SECOND_ORDER tape a function
 * with an rrule only (a user rule, hypot of three arguments, evalpoly, a rule with a tuple
 * result) is recorded with the partials its pullback gives and second derivatives taken by
 * central differences of those partials. Checked against central second differences of
 * plain-C versions of the functions; the edges: a rule that fails on one side of the point,
 * on both sides; more variable arguments than a row has, recorded again with no
 * allocation. (Prepared H v of the same programs: test_prepared_hvp_pullback.c.)
 */
#include "test_alloc.h"
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

/* More variable arguments than a row has: sum5 of five variables; wide of seven (two
 * results); wide of six distinct variables with one of them twice and a constant. */
static void test_many_arguments(void **state)
{
    const double x4[4] = {0.2, 0.9, -0.3, 1.7};
    check_hessian(*state, f5_t, f5_c, x4, 4, 1e-6);
    const double x5[5] = {0.4, -1.2, 0.8, 1.1, -0.6};
    check_hessian(*state, f5v_t, f5v_c, x5, 5, 1e-6);
    const double x7[WIDE_N] = {0.3, -0.7, 1.1, 0.5, -0.4, 0.9, -1.3};
    check_hessian(*state, f6_t, f6_c, x7, WIDE_N, 1e-6);
    check_hessian(*state, f7_t, f7_c, x7, 5, 1e-6);
}

/* A record of more than four variable arguments takes its scratch from the tape's arena and
 * gives it back: recording again allocates nothing, and the Hessian is the same. */
static void test_many_arguments_memory(void **state)
{
    fixt *e = *state;
    cr_ctx *ctx;
    counter c = {0};
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER, .engine = e->eng};
    assert_int_equal(cr_tape_new(ctx, &p, &t), CR_OK);
    const double x[WIDE_N] = {0.3, -0.7, 1.1, 0.5, -0.4, 0.9, -1.3};
    cr_var xs[WIDE_N], y;
    double H0[WIDE_N * WIDE_N], H1[WIDE_N * WIDE_N];
    assert_int_equal(cr_tape_record(t, f6_t, NULL, x, WIDE_N, xs, &y, 1), CR_OK);
    assert_int_equal(cr_tape_hessian(t, y, xs, WIDE_N, H0), CR_OK);
    size_t allocs = c.allocs;
    for (int round = 0; round < 3; round++) {
        assert_int_equal(cr_tape_record(t, f6_t, NULL, x, WIDE_N, xs, &y, 1), CR_OK);
        assert_int_equal(cr_tape_hessian(t, y, xs, WIDE_N, H1), CR_OK);
        assert_memory_equal(H0, H1, sizeof H0);
    }
    assert_int_equal(c.allocs, allocs);
    cr_tape_free(t);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_user_rule, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_tuple_rule, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_builtin_rules, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_domain_edge, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_both_sides_fail, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_many_arguments, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_many_arguments_memory, env_setup, env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
