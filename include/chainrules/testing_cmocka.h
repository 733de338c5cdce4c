/**
 * @file testing_cmocka.h
 * @brief cmocka assertions for rule-test reports (header-only; needs cmocka).
 *
 * The rule testers (testing.h) return a `cr_test_report` and never depend on a test
 * framework. With cmocka, these assertions print the report and fail the test when the
 * verdict is FAIL; MARGINAL and BROKEN reports are printed and do not fail (BROKEN is
 * ChainRulesTestUtils' `@test_broken` for NotImplemented tangents).
 *
 * This header includes `<cmocka.h>` (and the headers cmocka needs first). The umbrella
 * `chainrules.h` includes it only when `CR_WITH_CMOCKA` is defined.
 *
 * @code
 * #include <chainrules.h>
 * #include <chainrules/testing_cmocka.h>
 *
 * static void test_sin(void **state)
 * {
 *     cr_arena *scratch = *state;
 *     cr_value x = cr_value_f64(0.5);
 *     cr_test_report r;
 *     CR_ASSERT_RULE_TEST(cr_test_scalar(scratch, NULL, &cr_fn_sin, &x, 1, &r), r);
 * }
 * @endcode
 */
#ifndef CR_TESTING_CMOCKA_H
#define CR_TESTING_CMOCKA_H

/* Before cmocka.h, whose fail() macro breaks the C++ standard headers. */
#include "testing.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include <cmocka.h>
#ifdef __cplusplus
}
#endif

CR_BEGIN_DECLS

/**
 * Check a report under cmocka: print it, and fail the running test (at file:line) when
 * the test could not run (st is not CR_OK) or the verdict is FAIL. Used by the macros below.
 * @param[in] st     the status the tester returned (pass CR_OK when there is none).
 * @param[in] r      the report.
 * @param[in] expr   the expression, for the message.
 * @param[in] expect_fail true to require a FAIL verdict instead (tests of the testers).
 * @param[in] file   source file of the assertion.
 * @param[in] line   its line.
 */
static inline void cr_test_cmocka_check(cr_status st, const cr_test_report *r, const char *expr,
                                        bool expect_fail, const char *file, int line)
{
    char buf[1200];
    cr_test_report_format(r, buf, sizeof buf);
    if (expect_fail) {
        if (r->verdict != CR_VERDICT_FAIL) {
            print_error("%s:%d: %s was expected to FAIL: %s\n", file, line, expr, buf);
            _fail(file, line);
        }
        return;
    }
    if (st != CR_OK) {
        print_error("%s:%d: %s could not run (%s): %s\n", file, line, expr, cr_status_name(st),
                    buf);
        _fail(file, line);
    } else if (r->verdict == CR_VERDICT_FAIL) {
        print_error("%s:%d: %s: %s\n", file, line, expr, buf);
        _fail(file, line);
    } else if (r->verdict != CR_VERDICT_PASS) {
        print_message("%s: %s\n", expr, buf);
    }
}

/** Fail the cmocka test unless the report's verdict is PASS, MARGINAL or BROKEN. */
#define CR_ASSERT_RULE_PASSES(report) \
    cr_test_cmocka_check(CR_OK, &(report), #report, false, __FILE__, __LINE__)

/**
 * Run a tester call and fail the cmocka test when it could not run or its report
 * (the variable `report`, which the call fills) says FAIL.
 */
#define CR_ASSERT_RULE_TEST(call, report) \
    cr_test_cmocka_check((call), &(report), #call, false, __FILE__, __LINE__)

/** Fail the cmocka test unless the report's verdict is FAIL (for tests of the testers). */
#define CR_ASSERT_RULE_FAILS(report) \
    cr_test_cmocka_check(CR_OK, &(report), #report, true, __FILE__, __LINE__)

CR_END_DECLS

#endif /* CR_TESTING_CMOCKA_H */
