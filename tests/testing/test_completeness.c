/*
 * Completeness: every rule of the built-in registry has a test registration that the
 * rule tester can use (a sampling box for scalar signatures, a sampler otherwise), or is
 * a non-differentiable declaration or an opt-out. A missing one fails the test and is
 * named. The finite-difference checks themselves run in chainrules-check (ctest
 * chainrules-check).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

static void test_builtin_registry_indexes(void **state)
{
    (void)state;
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    assert_true(cr_registry_size(cr_registry_builtin()) > 0);
}

static void test_every_builtin_rule_has_a_test_registration(void **state)
{
    (void)state;
    const cr_registry *reg = cr_registry_builtin();
    size_t n = cr_registry_size(reg), missing = 0, tested = 0;
    for (size_t i = 0; i < n; i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        char sig[200];
        cr_signature_str(info.fn != NULL && info.fn->name ? info.fn->name : "?", info.args,
                         info.nargs, info.variadic, sig, sizeof sig);
        bool opt_out = !info.has_frule && !info.has_rrule && !info.non_differentiable;
        if (opt_out || info.non_differentiable)
            continue;
        /* A registration, and one the tester can draw arguments from. */
        if (info.test == NULL) {
            print_error("no test registration: %s (entry %zu)\n", sig, i);
            missing++;
        } else if (!cr_test_registration_usable(&info)) {
            print_error("test registration cannot generate arguments (needs a sample "
                        "function): %s (entry %zu)\n",
                        sig, i);
            missing++;
        } else {
            tested++;
        }
    }
    /* The library's own listing agrees. */
    char buf[4096];
    size_t listed = cr_test_untested_rules(reg, buf, sizeof buf);
    if (listed != 0)
        print_error("cr_test_untested_rules lists:\n%s", buf);
    assert_int_equal(listed, missing);
    print_message("%zu built-in rule entries with a usable test registration\n", tested);
    assert_int_equal(missing, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_registry_indexes),
        cmocka_unit_test(test_every_builtin_rule_has_a_test_registration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
