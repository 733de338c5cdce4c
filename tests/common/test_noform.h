/*
 * User array functions with an rrule and nothing else, for the tests of the second-order
 * tapes' refusals (functions without a second-order form): halve(A) = A / 2, an array result,
 * and halves(A) = (A / 2, 2 A), a tuple of two arrays. A user rule is kept as its pullback, which
 * no second-order form will cover (the built-in functions may get forms).
 */
#ifndef TEST_NOFORM_H
#define TEST_NOFORM_H

#include "test_util.h"

/* A / 2 (c = 0.5) or 2 A (c = 2) of an f64 array, in the arena. */
static cr_status noform_scale(cr_arena *arena, const cr_array *a, double c, cr_array **out)
{
    cr_status st = cr_array_new(arena, CR_DT_F64, a->ndim, a->shape, out);
    for (size_t i = 0; st == CR_OK && i < cr_array_numel(a); i++)
        ((double *)(*out)->data)[i] = c * creal(cr_array_get_linear(a, i));
    return st;
}

static cr_status halve_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *y)
{
    (void)fv;
    (void)nargs;
    cr_array *o;
    cr_status st = noform_scale(arena, args[0].u.arr, 0.5, &o);
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

static const cr_function halve_fn = {.name = "halve", .arity = 1, .primal = halve_primal};

static cr_status halve_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    (void)env;
    cr_array *g;
    cr_status st = noform_scale(arena, dy->u.arr, 0.5, &g);
    dx[0] = cr_tangent_none();
    dx[1] = st == CR_OK ? cr_tangent_array(g) : cr_tangent_zero();
    return st;
}

static cr_status halve_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){halve_pullback, NULL, "halve_pullback", 2};
    return halve_primal(arena, fv, args, nargs, y);
}

typedef struct noform_pair {
    cr_array a, b;
} noform_pair;

static const cr_field k_noform_pair_fields[2] = {
    {NULL, offsetof(noform_pair, a), CR_KIND_ARRAY, NULL},
    {NULL, offsetof(noform_pair, b), CR_KIND_ARRAY, NULL}};
static const cr_type k_noform_pair = {"tuple(array,array)", sizeof(noform_pair), 2,
                                      k_noform_pair_fields};

static cr_status halves_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                               size_t nargs, cr_value *y)
{
    (void)fv;
    (void)nargs;
    noform_pair *p = cr_arena_alloc(arena, sizeof *p, _Alignof(noform_pair));
    cr_array *h, *d;
    if (p == NULL)
        return CR_ENOMEM;
    cr_status st = noform_scale(arena, args[0].u.arr, 0.5, &h);
    if (st == CR_OK)
        st = noform_scale(arena, args[0].u.arr, 2.0, &d);
    if (st != CR_OK)
        return st;
    p->a = *h;
    p->b = *d;
    *y = cr_value_struct(&k_noform_pair, p);
    return CR_OK;
}

static const cr_function halves_fn = {.name = "halves", .arity = 1, .primal = halves_primal};

/* The rrule of halves (its pullback is not called by these tests: they check refusals). */
static cr_status halves_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    (void)dy;
    (void)nx;
    (void)arena;
    (void)env;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_zero();
    return CR_EUNIMPL;
}

static cr_status halves_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){halves_pullback, NULL, "halves_pullback", 2};
    return halves_primal(arena, fv, args, nargs, y);
}

/* An engine with halve's and halves' rules (free it with cr_engine_free after its tapes). */
static cr_engine *noform_engine(cr_ctx *ctx)
{
    static const cr_argspec k_arg[1] = {{CR_M_A_F64, NULL}};
    cr_engine *eng;
    assert_int_equal(cr_engine_new(ctx, NULL, &eng), CR_OK);
    cr_rule_def d1 = {
        .struct_size = sizeof d1, .fn = &halve_fn, .nargs = 1, .args = k_arg, .rrule = halve_rrule};
    cr_rule_def d2 = {.struct_size = sizeof d2,
                      .fn = &halves_fn,
                      .nargs = 1,
                      .args = k_arg,
                      .rrule = halves_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &d1), CR_OK);
    assert_int_equal(cr_engine_from_rrule(eng, &d2), CR_OK);
    return eng;
}

#endif /* TEST_NOFORM_H */
