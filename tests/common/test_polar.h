/*
 * A user rule for the tests: polar(x, y) = (r, theta), a function of two reals with a tuple
 * result (a struct of two f64 fields) and a structural cotangent, with its rrule written by
 * hand (the tests check it against finite differences).
 */
#ifndef TEST_POLAR_H
#define TEST_POLAR_H

#include <math.h>

#include "test_util.h"

/* polar(x, y) = (r, theta): a rule with a tuple result and a structural cotangent */
static cr_status polar_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *out);
static const cr_field polar_fields[2] = {{NULL, 0, CR_KIND_F64, NULL},
                                         {NULL, sizeof(double), CR_KIND_F64, NULL}};
static const cr_type polar_type = {"tuple(r,theta)", 2 * sizeof(double), 2, polar_fields};

static cr_status polar_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)fv;
    (void)nargs;
    double *rt = cr_arena_alloc(arena, 2 * sizeof *rt, _Alignof(double));
    if (rt == NULL)
        return CR_ENOMEM;
    double x = args[0].u.f64, y = args[1].u.f64;
    rt[0] = sqrt(x * x + y * y);
    rt[1] = atan2(y, x);
    *out = cr_value_struct(&polar_type, rt);
    return CR_OK;
}
static const cr_function polar_fn = {.name = "polar", .arity = 2, .primal = polar_primal};

typedef struct polar_env {
    double x, y;
} polar_env;

/* dr = (x dx + y dy)/r, dtheta = (x dy - y dx)/r^2 */
static cr_status polar_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    (void)arena;
    const polar_env *e = env;
    cr_tangent tr = cr_tangent_field(*dy, 0), tt = cr_tangent_field(*dy, 1);
    double gr = tr.tag == CR_TAN_F64 ? tr.u.f64 : 0.0, gt = tt.tag == CR_TAN_F64 ? tt.u.f64 : 0.0;
    double r2 = e->x * e->x + e->y * e->y, r = sqrt(r2);
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(gr * e->x / r - gt * e->y / r2);
    dx[2] = cr_tangent_f64(gr * e->y / r + gt * e->x / r2);
    return CR_OK;
}

static cr_status polar_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)udata;
    polar_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(polar_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->x = args[0].u.f64;
    e->y = args[1].u.f64;
    *pb = (cr_pullback){polar_pullback, e, "polar_pullback", 3};
    return polar_primal(arena, fv, args, nargs, y);
}

#endif /* TEST_POLAR_H */
