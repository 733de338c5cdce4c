/*
 * A rule checked at one point by the testers of the testing layer: the frule, the rrule and
 * their consistency against finite differences, failing the test with the report otherwise;
 * the arena bytes a rule takes. For test files with the common fixture (test_util.h).
 */
#ifndef CR_TEST_RULE_POINTS_H
#define CR_TEST_RULE_POINTS_H

#include <stdio.h>

#include "test_util.h"

/* Fail with the report unless st is CR_OK and the verdict is not a failure. */
static inline void expect_pass(fixture *fx, cr_status st, const cr_test_report *r, const char *what)
{
    if (st != CR_OK || r->verdict == CR_VERDICT_FAIL) {
        char buf[1200];
        cr_test_report_format(r, buf, sizeof buf);
        print_error("%s: %s (%s; %s)\n", what, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
        fail();
    }
}

/* frule, rrule and their consistency against finite differences at one point. */
static inline void check_point(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                               const char *what)
{
    cr_test_report r;
    expect_pass(fx, cr_test_frule(fx->arena, NULL, f, args, nargs, &r), &r, what);
    expect_pass(fx, cr_test_rrule(fx->arena, NULL, f, args, nargs, &r), &r, what);
    expect_pass(fx, cr_test_consistency(fx->arena, NULL, f, args, nargs, &r), &r, what);
}

/* Fail with the report unless st is CR_OK and the verdict a pass (no point skipped). */
static inline void expect_strict_pass(fixture *fx, cr_status st, const cr_test_report *r,
                                      const char *what)
{
    if (st != CR_OK || r->verdict != CR_VERDICT_PASS) {
        char buf[1200];
        cr_test_report_format(r, buf, sizeof buf);
        print_error("%s: %s (%s; %s)\n", what, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
        fail();
    }
}

/* As check_point, stricter: the testers' options opts (NULL: their defaults), every verdict
 * a pass (no point skipped); the consistency of the two rules only when asked. */
static inline void check_point_strict(fixture *fx, const cr_test_opts *opts, const cr_value *f,
                                      const cr_value *args, size_t nargs, bool consistency,
                                      const char *what)
{
    cr_test_report r;
    expect_strict_pass(fx, cr_test_rrule(fx->arena, opts, f, args, nargs, &r), &r, what);
    expect_strict_pass(fx, cr_test_frule(fx->arena, opts, f, args, nargs, &r), &r, what);
    if (consistency)
        expect_strict_pass(fx, cr_test_consistency(fx->arena, opts, f, args, nargs, &r), &r, what);
}

/* Bytes of arena that the rrule of f(args) (n arguments, n < 8), its pullback of the
 * cotangent G and the unthunked cotangent of argument ia (0 the function) take, from an
 * emptied arena. */
static inline size_t rule_bytes(fixture *fx, const cr_value *f, const cr_value *args, size_t n,
                                const cr_array *G, size_t ia)
{
    assert_true(n < 8 && ia <= n);
    cr_arena_reset(fx->arena);
    size_t before = cr_arena_used(fx->arena);
    cr_value y;
    cr_pullback pb;
    cr_tangent dy = cr_tangent_array((cr_array *)G), dx[8], t;
    assert_int_equal(cr_rrule(NULL, fx->arena, f, args, n, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, n + 1), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[ia], &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_ARRAY);
    return cr_arena_used(fx->arena) - before;
}

/* Every built-in registration of the functions names[0..n) through the rule tester at
 * npoints points (none may be skipped); seen[k] counts the signatures of names[k]. */
static inline void check_registrations(fixture *fx, const char *const *names, size_t n,
                                       size_t npoints, size_t *seen)
{
    const cr_registry *reg = cr_registry_builtin();
    for (size_t k = 0; k < n; k++)
        seen[k] = 0;
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        size_t k = 0;
        for (; k < n && strcmp(info.fn->name, names[k]) != 0; k++) {
        }
        if (k == n)
            continue;
        seen[k]++;
        cr_test_opts opts = {0};
        opts.npoints = npoints;
        cr_test_report r;
        expect_pass(fx, cr_test_rule_registration(fx->arena, &opts, &info, &r), &r, info.fn->name);
        if (r.nskipped != 0)
            print_error("%s: %zu points skipped\n", info.fn->name, (size_t)r.nskipped);
        assert_int_equal(r.nskipped, 0);
    }
}

#endif /* CR_TEST_RULE_POINTS_H */
