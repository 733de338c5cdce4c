/*
 * A user rule for the fault tests (test_fault_ad.c, test_fault_random.c): cube(x) = x^3 with
 * an rrule whose pullback keeps x in the rule's arena, so that an allocation failure can hit
 * the environment as well as the records.
 */
#ifndef TEST_CUBE_H
#define TEST_CUBE_H

#include <chainrules.h>

static cr_status cube_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    double x = args[0].u.f64;
    *out = cr_value_f64(x * x * x);
    return CR_OK;
}
static const cr_function cube_fn = {.name = "cube", .arity = 1, .primal = cube_primal};

static cr_status cube_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    (void)arena;
    const double *x = env;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(3.0 * *x * *x * dy->u.f64);
    return CR_OK;
}

static cr_status cube_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    double *e = cr_arena_alloc(arena, sizeof *e, _Alignof(double));
    if (e == NULL)
        return cr_ctx_errcode(cr_arena_ctx(arena));
    *e = args[0].u.f64;
    *pb = (cr_pullback){cube_pullback, e, "cube_pullback", 2};
    return cube_primal(arena, fv, args, nargs, y);
}

#endif /* TEST_CUBE_H */
