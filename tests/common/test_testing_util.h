/*
 * The fixture of the rule-testing tests (test_testing.c, test_testers_wrong_rules.c,
 * test_registration_reports.c): a context, the testers' scratch arena, an arena for the values a
 * test builds, a registry of the test's own rules with a configuration that dispatches to it, and
 * the testers' options over that configuration; and small helpers over scalar values and tangents.
 */
#ifndef TEST_TESTING_UTIL_H
#define TEST_TESTING_UTIL_H

#include <complex.h>
#include <stdlib.h>

#include <chainrules.h>
#include <chainrules/testing.h>

typedef struct fixture {
    cr_ctx *ctx;
    cr_arena *arena;   /* scratch of the testers */
    cr_arena *keep;    /* values the tests build */
    cr_registry *reg;  /* user rules for this test */
    cr_config cfg;     /* dispatches to reg */
    cr_test_opts opts; /* uses cfg */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || cr_ctx_new(NULL, &f->ctx) != CR_OK ||
        cr_arena_new(f->ctx, NULL, &f->arena) != CR_OK ||
        cr_arena_new(f->ctx, NULL, &f->keep) != CR_OK ||
        cr_registry_new(f->ctx, NULL, &f->reg) != CR_OK)
        return -1;
    f->cfg.registry = f->reg;
    f->opts.cfg = &f->cfg;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cr_registry_free(f->reg);
    cr_arena_free(f->keep);
    cr_arena_free(f->arena);
    cr_ctx_free(f->ctx);
    free(f);
    return 0;
}

static inline void add_rule(fixture *f, const cr_function *fn, const cr_argspec *args, size_t nargs,
                            cr_frule_fn fr, cr_rrule_fn rr, const void *udata)
{
    cr_rule_def d;
    memset(&d, 0, sizeof d);
    d.fn = fn;
    d.nargs = nargs;
    d.args = args;
    d.frule = fr;
    d.rrule = rr;
    d.udata = udata;
    assert_int_equal(cr_registry_add(f->reg, &d), CR_OK);
}

static inline cr_status tan_c(cr_tangent t, cr_complex *z)
{
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    switch ((cr_tag)t.tag) {
    case CR_TAN_ZERO:
    case CR_TAN_NONE:
        *z = 0.0;
        return CR_OK;
    case CR_TAN_F64:
        *z = t.u.f64;
        return CR_OK;
    case CR_TAN_F32:
        *z = (double)t.u.f32;
        return CR_OK;
    case CR_TAN_C128:
        *z = t.u.c128;
        return CR_OK;
    default:
        return CR_ETANGENT;
    }
}

/* A value and a tangent of the same kind as `like` holding w. */
static inline cr_value num_like(const cr_value *like, cr_complex w)
{
    return like->kind == CR_KIND_C128 ? cr_value_c128(w) : cr_value_f64(creal(w));
}

static inline cr_tangent tan_like(const cr_value *like, cr_complex w)
{
    return like->kind == CR_KIND_C128 ? cr_tangent_c128(w) : cr_tangent_f64(creal(w));
}

#endif /* TEST_TESTING_UTIL_H */
