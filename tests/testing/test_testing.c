/*
 * Tests of the rule testers (chainrules/testing.h): deliberately wrong rules are caught (a
 * wrong partial, a missing conj, ZeroTangent for an integer argument, a pullback or frule
 * that mutates its input, an frule that disagrees with its rrule, a wrong count of
 * cotangents, a thunk-unaware pullback, a wrong InplaceableThunk add!, an unprojected
 * cotangent of a Symmetric matrix), correct rules pass (scalars, complex, arrays,
 * structured matrices, structs, tuples, functors, f32), NotImplemented is BROKEN, small
 * errors are MARGINAL; plus flattening, rand_tangent, reports, registration tests,
 * completeness and the checker's exit status.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <tgmath.h> /* before scalar_rule.h: the row bodies below are type-generic */

#include <chainrules.h>
#include <chainrules/testing_cmocka.h>

#include "test_testing_util.h"
#include "testing/testing_impl.h"

#include "test_fault_hook.h"

/* The imaginary unit as a double complex (I alone is a float complex). */
#define CI ((cr_complex)I)

/* ---- Helpers (the fixture is in test_testing_util.h) ------------------------------------ */

static void assert_contains_(const char *s, const char *sub, const char *file, int line)
{
    if (s == NULL || strstr(s, sub) == NULL) {
        print_error("\"%s\" does not contain \"%s\"\n", s ? s : "(null)", sub);
        _fail(file, line);
    }
}
#define assert_contains(s, sub) assert_contains_((s), (sub), __FILE__, __LINE__)

static cr_complex val_c(const cr_value *v)
{
    switch (v->kind) {
    case CR_KIND_F64:
        return v->u.f64;
    case CR_KIND_F32:
        return (double)v->u.f32;
    case CR_KIND_C128:
        return v->u.c128;
    case CR_KIND_I64:
    case CR_KIND_I32:
        return (double)v->u.i64;
    default:
        return 0.0;
    }
}

/* ---- sq(z) = z^2: good, missing conj, frule disagreeing -------------------------------- */

typedef struct sq_variant {
    double fscale; /* the frule multiplies by this (1 is right) */
    bool conj;     /* the pullback conjugates f'(z) (right) */
} sq_variant;

static const sq_variant k_sq_good = {1.0, true}, k_sq_noconj = {1.0, false},
                        k_sq_disagree = {-1.0, true};

static cr_status sq_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                           cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    cr_complex z = val_c(&args[0]);
    *out = num_like(&args[0], z * z);
    return CR_OK;
}

static cr_status sq_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                          const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                          cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)f;
    (void)nargs;
    const sq_variant *v = udata;
    cr_complex z = val_c(&args[0]), dz;
    cr_status st = tan_c(dargs[1], &dz);
    if (st != CR_OK)
        return st;
    *y = num_like(&args[0], z * z);
    *dy = tan_like(&args[0], v->fscale * 2 * z * dz);
    return CR_OK;
}

typedef struct sq_env {
    cr_complex z;
    bool real, conj;
} sq_env;

static cr_status sq_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *env)
{
    (void)nx;
    (void)arena;
    const sq_env *e = env;
    cr_complex g;
    cr_status st = tan_c(*dy, &g);
    if (st != CR_OK)
        return st;
    cr_complex d = 2 * e->z;
    cr_complex r = (e->conj ? conj(d) : d) * g;
    dx[0] = cr_tangent_none();
    dx[1] = e->real ? cr_tangent_f64(creal(r)) : cr_tangent_c128(r);
    return CR_OK;
}

static cr_status sq_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                          const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                          const void *udata)
{
    (void)cfg;
    (void)f;
    const sq_variant *v = udata;
    sq_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(sq_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->z = val_c(&args[0]);
    e->real = args[0].kind != CR_KIND_C128;
    e->conj = v->conj;
    *y = num_like(&args[0], e->z * e->z);
    pb->fn = sq_pullback;
    pb->env = e;
    pb->name = "sq_pullback";
    pb->nx = nargs + 1;
    return CR_OK;
}

static const cr_function k_sq_good_fn = {.name = "sq", .arity = 1, .primal = sq_primal};
static const cr_function k_sq_noconj_fn = {.name = "sq_noconj", .arity = 1, .primal = sq_primal};
static const cr_function k_sq_disagree_fn = {
    .name = "sq_disagree", .arity = 1, .primal = sq_primal};
static const cr_argspec k_number1[1] = {{CR_M_F64 | CR_M_C128, NULL}};

static void add_sq(fixture *f, const cr_function *fn, const sq_variant *v)
{
    add_rule(f, fn, k_number1, 1, sq_frule, sq_rrule, v);
}

static void test_sq_good_passes(void **state)
{
    fixture *f = *state;
    add_sq(f, &k_sq_good_fn, &k_sq_good);
    cr_value fv = cr_value_function(&k_sq_good_fn, NULL);
    cr_value xs[2] = {cr_value_f64(1.25), cr_value_c128(0.5 - 1.5 * CI)};
    for (int i = 0; i < 2; i++) {
        cr_test_report r;
        CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &f->opts, &fv, &xs[i], 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &fv, &xs[i], 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        assert_true(r.nchecks >= 6);
        CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, &f->opts, &fv, &xs[i], 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        CR_ASSERT_RULE_TEST(cr_test_consistency(f->arena, &f->opts, &fv, &xs[i], 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        assert_true(r.max_abs_err < 1e-9);
    }
    assert_int_equal(cr_arena_used(f->arena), 0); /* the scratch is rewound */
}

static void test_missing_conj_is_caught(void **state)
{
    fixture *f = *state;
    add_sq(f, &k_sq_noconj_fn, &k_sq_noconj);
    cr_value fv = cr_value_function(&k_sq_noconj_fn, NULL);
    cr_test_report r;
    /* Real arguments cannot tell... */
    cr_value x = cr_value_f64(1.25);
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &fv, &x, 1, &r), r);
    /* ...complex ones do, in test_rrule and in test_scalar's unit seeds. */
    cr_value z = cr_value_c128(0.5 - 1.5 * CI);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &fv, &z, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "rrule: cotangent of argument 1 (c128)");
    assert_contains(r.where, "component");
    assert_true(r.max_abs_err > 0.1);
    assert_int_equal(cr_test_scalar(f->arena, &f->opts, &fv, &z, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    /* The frule is right, and agrees with finite differences. */
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &f->opts, &fv, &z, 1, &r), r);
    /* But not with the rrule. */
    assert_int_equal(cr_test_consistency(f->arena, &f->opts, &fv, &z, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
}

static void test_frule_disagreeing_with_rrule_is_caught(void **state)
{
    fixture *f = *state;
    add_sq(f, &k_sq_disagree_fn, &k_sq_disagree);
    cr_value fv = cr_value_function(&k_sq_disagree_fn, NULL);
    cr_value z = cr_value_c128(0.5 - 1.5 * CI);
    cr_test_report r;
    assert_int_equal(cr_test_consistency(f->arena, &f->opts, &fv, &z, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "frule/rrule agreement");
    assert_contains(r.message, "disagree");
    assert_int_equal(cr_test_frule(f->arena, &f->opts, &fv, &z, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "frule: tangent of the output");
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &fv, &z, 1, &r), r);
}

/* ---- A wrong partial (scalar rows) and the MARGINAL band ------------------------------- */

/* x * y with ∂/∂y written as y instead of x. */
CR_SCALAR_EVALS(badmul, 2, 1, Y[0] = x[0] * x[1], D[0] = x[1]; D[1] = x[1])
static const cr_scalar_rule badmul_row = CR_SCALAR_ROW(badmul);
static const cr_function badmul_fn = CR_SCALAR_FUNCTION("badmul", badmul_row, 2);

/* sin with a relative error of 3e-9 in its derivative: beyond rtol, within 10 rtol. */
CR_SCALAR_EVALS(nearsin, 1, 1, Y[0] = sin(x[0]), D[0] = cos(x[0]) * (1 + 3e-9))
static const cr_scalar_rule nearsin_row = CR_SCALAR_ROW(nearsin);
static const cr_function nearsin_fn = CR_SCALAR_FUNCTION("nearsin", nearsin_row, 1);

/* sin with a relative error of 1e-6: a failure. */
CR_SCALAR_EVALS(farsin, 1, 1, Y[0] = sin(x[0]), D[0] = cos(x[0]) * (1 + 1e-6))
static const cr_scalar_rule farsin_row = CR_SCALAR_ROW(farsin);
static const cr_function farsin_fn = CR_SCALAR_FUNCTION("farsin", farsin_row, 1);

static void test_wrong_partial_is_caught(void **state)
{
    fixture *f = *state;
    assert_int_equal(cr_scalar_rule_register(f->reg, &badmul_fn, &badmul_row), CR_OK);
    cr_value fv = cr_value_function(&badmul_fn, NULL);
    cr_value xs[2] = {cr_value_f64(1.5), cr_value_f64(-0.75)};
    cr_test_report r;
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &fv, xs, 2, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "rrule: cotangent of argument 2 (f64)");
    assert_true(r.nfailed >= 1);
    assert_true(r.npassed >= 1); /* argument 1 is right */
    assert_int_equal(cr_test_frule(f->arena, &f->opts, &fv, xs, 2, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_int_equal(cr_test_scalar(f->arena, &f->opts, &fv, xs, 2, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    /* The formatted report names the check and the numbers. */
    char line[1200];
    cr_test_report_format(&r, line, sizeof line);
    assert_contains(line, "FAIL");
    assert_contains(line, "expected");
}

static void test_marginal_band(void **state)
{
    fixture *f = *state;
    assert_int_equal(cr_scalar_rule_register(f->reg, &nearsin_fn, &nearsin_row), CR_OK);
    assert_int_equal(cr_scalar_rule_register(f->reg, &farsin_fn, &farsin_row), CR_OK);
    cr_value x = cr_value_f64(0.5);
    cr_test_report r;
    cr_value near = cr_value_function(&nearsin_fn, NULL), far = cr_value_function(&farsin_fn, NULL);
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &near, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_MARGINAL);
    assert_true(r.worst_ratio > 1 && r.worst_ratio <= 10);
    assert_true(r.nmarginal >= 1);
    assert_int_equal(r.nfailed, 0);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &far, &x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    /* Looser tolerances make both pass. */
    f->opts.rtol = 1e-5;
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &far, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    /* A wider band makes the near one marginal, never failing. */
    f->opts.rtol = 0;
    f->opts.marginal = 1000;
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &far, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_MARGINAL);
}

/* ---- scale(x, n) = n x with an integer n: ZeroTangent instead of NoTangent -------------- */

static cr_status scale_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_f64(args[0].u.f64 * (double)args[1].u.i64);
    return CR_OK;
}

static cr_status scale_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                             const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                             cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_complex dx;
    cr_status st = tan_c(dargs[1], &dx);
    if (st != CR_OK)
        return st;
    *dy = cr_tangent_f64(creal(dx) * (double)args[1].u.i64);
    return scale_primal(arena, f, args, nargs, y);
}

typedef struct scale_env {
    double n;
    bool zero_for_int;
} scale_env;

static cr_status scale_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    (void)arena;
    const scale_env *e = env;
    cr_complex g;
    cr_status st = tan_c(*dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(creal(g) * e->n);
    dx[2] = e->zero_for_int ? cr_tangent_zero() : cr_tangent_none();
    return CR_OK;
}

static cr_status scale_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    scale_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(scale_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->n = (double)args[1].u.i64;
    e->zero_for_int = udata != NULL;
    pb->fn = scale_pullback;
    pb->env = e;
    pb->name = "scale_pullback";
    pb->nx = nargs + 1;
    return scale_primal(arena, f, args, nargs, y);
}

static const cr_function k_scale_fn = {.name = "scale", .arity = 2, .primal = scale_primal};
static const cr_function k_scalez_fn = {.name = "scale_zero", .arity = 2, .primal = scale_primal};
static const cr_argspec k_f64_int[2] = {{CR_M_F64, NULL}, {CR_M_INT, NULL}};
static const int k_yes = 1;

static void test_zero_tangent_for_integer_is_caught(void **state)
{
    fixture *f = *state;
    add_rule(f, &k_scale_fn, k_f64_int, 2, scale_frule, scale_rrule, NULL);
    add_rule(f, &k_scalez_fn, k_f64_int, 2, scale_frule, scale_rrule, &k_yes);
    cr_value xs[2] = {cr_value_f64(0.75), cr_value_i64(3)};
    cr_test_report r;
    cr_value good = cr_value_function(&k_scale_fn, NULL);
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &good, xs, 2, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, &f->opts, &good, xs, 2, &r), r);
    cr_value bad = cr_value_function(&k_scalez_fn, NULL);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &bad, xs, 2, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "argument 2 (i64)");
    assert_contains(r.message, "NoTangent rather than ZeroTangent");
}

/* ---- twice(A) = 2A for arrays: mutation, InplaceableThunk ------------------------------ */

enum { TW_GOOD, TW_MUTATE_SEED, TW_MUTATE_ARG, TW_BAD_ADD, TW_FRULE_MUTATES, TW_COUNT };
static const int k_tw[TW_COUNT] = {TW_GOOD, TW_MUTATE_SEED, TW_MUTATE_ARG, TW_BAD_ADD,
                                   TW_FRULE_MUTATES};

static cr_status twice_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)f;
    (void)n;
    cr_tangent t;
    cr_status st = cr_tangent_scale(arena, 2.0, cr_tangent_array(args[0].u.arr), &t);
    if (st != CR_OK)
        return st;
    *out = cr_value_array(t.u.arr);
    return CR_OK;
}

static void double_in_place(cr_array *a)
{
    double *d = a->data;
    size_t n = cr_array_nstored(a);
    for (size_t k = 0; k < n; k++)
        d[k] *= 2;
}

static cr_status twice_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                             const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                             cr_tangent *dy, const void *udata)
{
    (void)cfg;
    if (*(const int *)udata == TW_FRULE_MUTATES && dargs[1].tag == CR_TAN_ARRAY) {
        double_in_place(dargs[1].u.arr);
        *dy = dargs[1];
    } else {
        cr_status st = cr_tangent_scale(arena, 2.0, dargs[1], dy);
        if (st != CR_OK)
            return st;
    }
    return twice_primal(arena, f, args, nargs, y);
}

typedef struct twice_env {
    int variant;
    cr_array *a;
    cr_tangent seed;
} twice_env;

static cr_status twice_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    return cr_tangent_scale(arena, 2.0, ((twice_env *)env)->seed, out);
}

/* add! that adds 3ȳ instead of 2ȳ. */
static cr_status twice_bad_add(cr_arena *arena, cr_array *dest, void *env)
{
    (void)arena;
    twice_env *e = env;
    cr_tangent s;
    cr_status st = cr_tangent_unthunk(e->seed, &s);
    if (st != CR_OK)
        return st;
    double *d = dest->data;
    size_t n = cr_array_numel(dest);
    for (size_t k = 0; k < n; k++)
        d[k] += 3 * creal(cr_array_get_linear(s.u.arr, k));
    return CR_OK;
}

static cr_status twice_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    twice_env *e = env;
    cr_tangent g;
    cr_status st = cr_tangent_unthunk(*dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    switch (e->variant) {
    case TW_MUTATE_SEED:
        double_in_place(g.u.arr);
        dx[1] = g;
        return CR_OK;
    case TW_MUTATE_ARG:
        double_in_place(e->a);
        return cr_tangent_scale(arena, 2.0, g, &dx[1]);
    case TW_BAD_ADD: {
        twice_env *te = cr_arena_alloc(arena, sizeof *te, _Alignof(twice_env));
        if (te == NULL)
            return CR_ENOMEM;
        *te = *e;
        te->seed = g;
        return cr_tangent_inplaceable_thunk(arena, twice_thunk, twice_bad_add, te, "twice_thunk",
                                            &dx[1]);
    }
    default:
        return cr_tangent_scale(arena, 2.0, g, &dx[1]);
    }
}

static cr_status twice_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    twice_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(twice_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->variant = *(const int *)udata;
    e->a = args[0].u.arr;
    pb->fn = twice_pullback;
    pb->env = e;
    pb->name = "twice_pullback";
    pb->nx = nargs + 1;
    return twice_primal(arena, f, args, nargs, y);
}

static const cr_function k_twice_fns[TW_COUNT] = {
    {.name = "twice", .arity = 1, .primal = twice_primal},
    {.name = "twice_mutseed", .arity = 1, .primal = twice_primal},
    {.name = "twice_mutarg", .arity = 1, .primal = twice_primal},
    {.name = "twice_badadd", .arity = 1, .primal = twice_primal},
    {.name = "twice_frulemut", .arity = 1, .primal = twice_primal},
};
static const cr_argspec k_arr1[1] = {{CR_M_A_F64, NULL}};

static void add_twice(fixture *f)
{
    for (int v = 0; v < TW_COUNT; v++)
        add_rule(f, &k_twice_fns[v], k_arr1, 1, twice_frule, twice_rrule, &k_tw[v]);
}

static void test_array_rule_and_mutation(void **state)
{
    fixture *f = *state;
    add_twice(f);
    double a[6] = {1, -2, 0.5, 4, 3, -1.5};
    cr_array A = cr_array_matrix(a, 2, 3);
    cr_value x = cr_value_array(&A);
    cr_test_report r;
    cr_value good = cr_value_function(&k_twice_fns[TW_GOOD], NULL);
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &f->opts, &good, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &good, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    CR_ASSERT_RULE_TEST(cr_test_consistency(f->arena, &f->opts, &good, &x, 1, &r), r);

    cr_value ms = cr_value_function(&k_twice_fns[TW_MUTATE_SEED], NULL);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &ms, &x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "mutated its input seed");

    cr_value ma = cr_value_function(&k_twice_fns[TW_MUTATE_ARG], NULL);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &ma, &x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "mutated its input argument 1");
    memcpy(a, (double[6]){1, -2, 0.5, 4, 3, -1.5}, sizeof a);

    cr_value fm = cr_value_function(&k_twice_fns[TW_FRULE_MUTATES], NULL);
    assert_int_equal(cr_test_frule(f->arena, &f->opts, &fm, &x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "the frule mutated its input tangent of argument 1");
}

static void test_inplaceable_thunk_add_is_checked(void **state)
{
    fixture *f = *state;
    add_twice(f);
    double a[4] = {1, -2, 0.5, 4};
    cr_array A = cr_array_vector(a, 4);
    cr_value x = cr_value_array(&A);
    cr_test_report r;
    cr_value bad = cr_value_function(&k_twice_fns[TW_BAD_ADD], NULL);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &bad, &x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "add!!");
}

/* ---- NotImplemented, wrong count, thunk-unaware pullback ------------------------------ */

static const cr_notimpl k_ni = {__FILE__, __LINE__, "∂y is not implemented (issue #1)"};

static cr_status mul2_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_f64(args[0].u.f64 * args[1].u.f64);
    return CR_OK;
}

static cr_status mul2_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_complex a, b;
    if (tan_c(dargs[1], &a) != CR_OK || tan_c(dargs[2], &b) != CR_OK)
        return CR_ETANGENT;
    *dy = cr_tangent_f64(creal(a) * args[1].u.f64 + args[0].u.f64 * creal(b));
    return mul2_primal(arena, f, args, nargs, y);
}

static cr_status mul2_ni_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                  void *env)
{
    (void)nx;
    (void)arena;
    const double *y = env;
    cr_complex g;
    cr_status st = tan_c(*dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(creal(g) * *y);
    dx[2] = cr_tangent_notimpl(&k_ni);
    return CR_OK;
}

static cr_status mul2_ni_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                               const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                               const void *udata)
{
    (void)cfg;
    (void)udata;
    double *e = cr_arena_alloc(arena, sizeof *e, _Alignof(double));
    if (e == NULL)
        return CR_ENOMEM;
    *e = args[1].u.f64;
    pb->fn = mul2_ni_pullback;
    pb->env = e;
    pb->name = "mul2_ni_pullback";
    pb->nx = nargs + 1;
    return mul2_primal(arena, f, args, nargs, y);
}

static const cr_function k_mul2_fn = {.name = "mul2", .arity = 2, .primal = mul2_primal};
static const cr_argspec k_f64_f64[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};

static void test_not_implemented_is_broken(void **state)
{
    fixture *f = *state;
    add_rule(f, &k_mul2_fn, k_f64_f64, 2, mul2_frule, mul2_ni_rrule, NULL);
    cr_value fv = cr_value_function(&k_mul2_fn, NULL);
    cr_value xs[2] = {cr_value_f64(1.5), cr_value_f64(-2.25)};
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &fv, xs, 2, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_BROKEN);
    assert_int_equal(r.nfailed, 0);
    assert_true(r.nbroken >= 1);
    assert_true(r.npassed >= 1);
    assert_contains(r.where, "argument 2");
    CR_ASSERT_RULE_TEST(cr_test_consistency(f->arena, &f->opts, &fv, xs, 2, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_BROKEN);
}

/* triple(x) = 3x whose rrule variants get the count or thunks wrong. */
static cr_status triple_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                               cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_f64(3 * args[0].u.f64);
    return CR_OK;
}

static cr_status triple_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    (void)arena;
    (void)env;
    /* Ignores anything but a plain f64 seed, e.g. a thunk: wrong. */
    if (nx >= 2)
        dx[nx - 1] = dy->tag == CR_TAN_F64 ? cr_tangent_f64(3 * dy->u.f64) : cr_tangent_zero();
    dx[0] = cr_tangent_none();
    return CR_OK;
}

static cr_status triple_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    pb->fn = triple_pullback;
    pb->env = NULL;
    pb->name = "triple_pullback";
    pb->nx = udata != NULL ? nargs : nargs + 1; /* the first variant forgets ∂self */
    return triple_primal(arena, f, args, nargs, y);
}

static const cr_function k_triple_fn = {.name = "triple", .arity = 1, .primal = triple_primal};
static const cr_function k_triple1_fn = {.name = "triple1", .arity = 1, .primal = triple_primal};
static const cr_argspec k_f64_1[1] = {{CR_M_F64, NULL}};

static void test_count_and_thunked_seed(void **state)
{
    fixture *f = *state;
    add_rule(f, &k_triple_fn, k_f64_1, 1, NULL, triple_rrule, NULL);
    add_rule(f, &k_triple1_fn, k_f64_1, 1, NULL, triple_rrule, &k_yes);
    cr_value x = cr_value_f64(0.5);
    cr_test_report r;
    cr_value one = cr_value_function(&k_triple1_fn, NULL);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &one, &x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "one for self and one per argument");
    cr_value th = cr_value_function(&k_triple_fn, NULL);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &th, &x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "thunked seed");
    /* Without the thunk check it passes. */
    f->opts.flags = CR_TEST_NO_THUNK_CHECK;
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &th, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    /* No frule: test_frule says so. */
    assert_int_equal(cr_test_frule(f->arena, &f->opts, &th, &x, 1, &r), CR_ENORULE);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "no frule");
}

/* ---- Symmetric matrices: projection of the cotangent ---------------------------------- */

static const double k_w[9] = {1, 2, -1, 0.5, 3, 4, -2, 1.5, 0.25};

static cr_status wsum_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    double s = 0;
    for (size_t k = 0; k < 9; k++)
        s += k_w[k] * creal(cr_array_get_linear(args[0].u.arr, k));
    *out = cr_value_f64(s);
    return CR_OK;
}

static cr_status wsum_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_tangent d;
    cr_status st = cr_tangent_unthunk(dargs[1], &d);
    if (st != CR_OK)
        return st;
    double s = 0;
    if (d.tag == CR_TAN_ARRAY)
        for (size_t k = 0; k < 9; k++)
            s += k_w[k] * creal(cr_array_get_linear(d.u.arr, k));
    *dy = cr_tangent_f64(s);
    return wsum_primal(arena, f, args, nargs, y);
}

typedef struct wsum_env {
    cr_value a;
    bool project;
} wsum_env;

static cr_status wsum_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    const wsum_env *e = env;
    cr_complex g;
    cr_status st = tan_c(*dy, &g);
    if (st != CR_OK)
        return st;
    cr_array *G;
    size_t shape[2] = {3, 3};
    st = cr_array_new(arena, CR_DT_F64, 2, shape, &G);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < 9; k++)
        ((double *)G->data)[k] = k_w[k] * creal(g);
    dx[0] = cr_tangent_none();
    if (!e->project) {
        dx[1] = cr_tangent_array(G);
        return CR_OK;
    }
    return cr_project_tangent(arena, &e->a, cr_tangent_array(G), &dx[1]);
}

static cr_status wsum_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    wsum_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(wsum_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->a = args[0];
    e->project = udata == NULL;
    pb->fn = wsum_pullback;
    pb->env = e;
    pb->name = "wsum_pullback";
    pb->nx = nargs + 1;
    return wsum_primal(arena, f, args, nargs, y);
}

static const cr_function k_wsum_fn = {.name = "wsum", .arity = 1, .primal = wsum_primal};
static const cr_function k_wsum_np_fn = {.name = "wsum_noproj", .arity = 1, .primal = wsum_primal};

static void test_structured_matrices(void **state)
{
    fixture *f = *state;
    add_rule(f, &k_wsum_fn, k_arr1, 1, wsum_frule, wsum_rrule, NULL);
    add_rule(f, &k_wsum_np_fn, k_arr1, 1, wsum_frule, wsum_rrule, &k_yes);
    double a[9] = {1, 2, 3, 99, 5, 6, 99, 99, 9}; /* the lower triangle is never read */
    cr_array A = cr_array_matrix(a, 3, 3);
    cr_value x = cr_value_array(&A);
    cr_value good = cr_value_function(&k_wsum_fn, NULL),
             bad = cr_value_function(&k_wsum_np_fn, NULL);
    cr_test_report r;
    static const cr_matstruct kinds[] = {CR_MAT_DENSE, CR_MAT_SYMMETRIC, CR_MAT_DIAGONAL,
                                         CR_MAT_UPPER, CR_MAT_LOWER};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        A = cr_array_matrix(a, 3, 3);
        A.structure = (uint8_t)kinds[k];
        if (kinds[k] == CR_MAT_DIAGONAL)
            A.strides[0] = 4; /* the diagonal of the 3x3 storage */
        CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &good, &x, 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &f->opts, &good, &x, 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        CR_ASSERT_RULE_TEST(cr_test_consistency(f->arena, &f->opts, &good, &x, 1, &r), r);
        /* An unprojected (dense) cotangent is wrong for every structure but dense. */
        assert_int_equal(cr_test_rrule(f->arena, &f->opts, &bad, &x, 1, &r), CR_OK);
        if (kinds[k] == CR_MAT_DENSE)
            assert_int_equal(r.verdict, CR_VERDICT_PASS);
        else
            CR_ASSERT_RULE_FAILS(r);
    }
}

/* ---- Structs, tuples and functors ------------------------------------------------------ */

typedef struct polar {
    double r;
    double theta;
    int64_t id;
} polar;
static const cr_field k_polar_fields[] = {
    {"r", offsetof(polar, r), CR_KIND_F64, NULL},
    {"theta", offsetof(polar, theta), CR_KIND_F64, NULL},
    {"id", offsetof(polar, id), CR_KIND_I64, NULL},
};
static const cr_type k_polar_type = {"polar", sizeof(polar), 3, k_polar_fields};

typedef struct xy {
    double x, y;
} xy;
static const cr_field k_xy_fields[] = {
    {NULL, offsetof(xy, x), CR_KIND_F64, NULL},
    {NULL, offsetof(xy, y), CR_KIND_F64, NULL},
};
static const cr_type k_xy_type = {"tuple(f64,f64)", sizeof(xy), 2, k_xy_fields};

static cr_status topoint_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                                cr_value *out)
{
    (void)f;
    (void)n;
    const polar *p = args[0].u.obj.ptr;
    xy *q = cr_arena_alloc(arena, sizeof *q, _Alignof(xy));
    if (q == NULL)
        return CR_ENOMEM;
    q->x = p->r * cos(p->theta);
    q->y = p->r * sin(p->theta);
    *out = cr_value_struct(&k_xy_type, q);
    return CR_OK;
}

static cr_status topoint_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                               const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                               cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    const polar *p = args[0].u.obj.ptr;
    cr_complex dr, dt;
    if (tan_c(cr_tangent_field(dargs[1], 0), &dr) != CR_OK ||
        tan_c(cr_tangent_field(dargs[1], 1), &dt) != CR_OK)
        return CR_ETANGENT;
    double c = cos(p->theta), s = sin(p->theta);
    cr_tangent v[2] = {cr_tangent_f64(c * creal(dr) - p->r * s * creal(dt)),
                       cr_tangent_f64(s * creal(dr) + p->r * c * creal(dt))};
    cr_status st = cr_tangent_struct(arena, &k_xy_type, NULL, v, 2, dy);
    if (st != CR_OK)
        return st;
    return topoint_primal(arena, f, args, nargs, y);
}

static cr_status topoint_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                  void *env)
{
    (void)nx;
    const polar *p = env;
    cr_tangent d;
    cr_status st = cr_tangent_unthunk(*dy, &d);
    if (st != CR_OK)
        return st;
    cr_complex gx, gy;
    if (tan_c(cr_tangent_field(d, 0), &gx) != CR_OK || tan_c(cr_tangent_field(d, 1), &gy) != CR_OK)
        return CR_ETANGENT;
    double c = cos(p->theta), s = sin(p->theta);
    static const char *const names[2] = {"r", "theta"};
    cr_tangent v[2] = {cr_tangent_f64(c * creal(gx) + s * creal(gy)),
                       cr_tangent_f64(-p->r * s * creal(gx) + p->r * c * creal(gy))};
    dx[0] = cr_tangent_none();
    return cr_tangent_struct(arena, &k_polar_type, names, v, 2, &dx[1]);
}

static cr_status topoint_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                               const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                               const void *udata)
{
    (void)cfg;
    (void)udata;
    pb->fn = topoint_pullback;
    pb->env = args[0].u.obj.ptr;
    pb->name = "topoint_pullback";
    pb->nx = nargs + 1;
    return topoint_primal(arena, f, args, nargs, y);
}

static const cr_function k_topoint_fn = {.name = "topoint", .arity = 1, .primal = topoint_primal};
static const cr_argspec k_polar1[1] = {{CR_M_STRUCT, &k_polar_type}};

static void test_struct_and_tuple(void **state)
{
    fixture *f = *state;
    add_rule(f, &k_topoint_fn, k_polar1, 1, topoint_frule, topoint_rrule, NULL);
    polar p = {1.5, 0.75, 42};
    cr_value x = cr_value_struct(&k_polar_type, &p);
    cr_value fv = cr_value_function(&k_topoint_fn, NULL);
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &f->opts, &fv, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &fv, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    CR_ASSERT_RULE_TEST(cr_test_consistency(f->arena, &f->opts, &fv, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(p.id, 42);
}

/* A functor scaler{a}(x) = a x, whose ∂self is Tangent{a = x ȳ}. */
typedef struct scaler {
    double a;
} scaler;
static const cr_field k_scaler_fields[] = {{"a", offsetof(scaler, a), CR_KIND_F64, NULL}};
static const cr_type k_scaler_type = {"scaler", sizeof(scaler), 1, k_scaler_fields};

static cr_status scaler_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                               cr_value *out)
{
    (void)arena;
    (void)n;
    const scaler *s = f->u.func.self;
    *out = cr_value_f64(s->a * args[0].u.f64);
    return CR_OK;
}

static cr_status scaler_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    const scaler *s = f->u.func.self;
    cr_complex da, dx;
    if (tan_c(cr_tangent_field(dargs[0], 0), &da) != CR_OK || tan_c(dargs[1], &dx) != CR_OK)
        return CR_ETANGENT;
    *dy = cr_tangent_f64(s->a * creal(dx) + args[0].u.f64 * creal(da));
    return scaler_primal(arena, f, args, nargs, y);
}

typedef struct scaler_env {
    double a, x, wrong;
} scaler_env;

static cr_status scaler_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    (void)nx;
    const scaler_env *e = env;
    cr_complex g;
    cr_status st = tan_c(*dy, &g);
    if (st != CR_OK)
        return st;
    cr_tangent da = cr_tangent_f64(e->wrong * e->x * creal(g));
    st = cr_tangent_struct(arena, &k_scaler_type, NULL, &da, 1, &dx[0]);
    dx[1] = cr_tangent_f64(e->a * creal(g));
    return st;
}

static cr_status scaler_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    scaler_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(scaler_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->a = ((const scaler *)f->u.func.self)->a;
    e->x = args[0].u.f64;
    e->wrong = udata != NULL ? 2.0 : 1.0;
    pb->fn = scaler_pullback;
    pb->env = e;
    pb->name = "scaler_pullback";
    pb->nx = nargs + 1;
    return scaler_primal(arena, f, args, nargs, y);
}

static const cr_function k_scaler_fn = {
    .name = "scaler", .arity = 1, .primal = scaler_primal, .self_type = &k_scaler_type};
static const cr_function k_scaler_bad_fn = {
    .name = "scaler_bad", .arity = 1, .primal = scaler_primal, .self_type = &k_scaler_type};

static void test_functor_self(void **state)
{
    fixture *f = *state;
    add_rule(f, &k_scaler_fn, k_f64_1, 1, scaler_frule, scaler_rrule, NULL);
    add_rule(f, &k_scaler_bad_fn, k_f64_1, 1, scaler_frule, scaler_rrule, &k_yes);
    scaler s = {2.5};
    cr_value x = cr_value_f64(-1.25);
    cr_test_report r;
    cr_value good = cr_value_function(&k_scaler_fn, &s);
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &f->opts, &good, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &good, &x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, &f->opts, &good, &x, 1, &r), r);
    cr_value bad = cr_value_function(&k_scaler_bad_fn, &s);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &bad, &x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "self (scaler_bad)");
    assert_contains(r.where, ".a");
    assert_true(s.a == 2.5);
}

/* ---- Built-in rules, f32, explicit tangents, errors ------------------------------------ */

static void test_builtins_pass(void **state)
{
    fixture *f = *state;
    cr_test_report r;
    cr_value x = cr_value_f64(0.625), z = cr_value_c128(0.625 + 0.25 * CI);
    const cr_value *fns[] = {&cr_fn_sin, &cr_fn_exp, &cr_fn_log, &cr_fn_sqrt, &cr_fn_sincos};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, NULL, fns[i], &x, 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, NULL, fns[i], &z, 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
    }
    /* f32 arguments: tolerances follow float precision. */
    cr_value xf[2] = {cr_value_f32(1.5f), cr_value_f32(-0.75f)};
    CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, NULL, &cr_fn_div, xf, 2, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    cr_value s = cr_value_f32(0.5f);
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, NULL, &cr_fn_sin, &s, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
}

static void test_explicit_tangents_and_errors(void **state)
{
    fixture *f = *state;
    cr_test_report r;
    cr_value xs[2] = {cr_value_f64(1.5), cr_value_f64(2.0)};
    /* Given tangents: the second argument is not perturbed. */
    cr_tangent d[3] = {cr_tangent_none(), cr_tangent_f64(0.5), cr_tangent_none()};
    cr_test_opts o = {0};
    o.input_tangents = d;
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &o, &cr_fn_mul, xs, 2, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    cr_tangent seed = cr_tangent_f64(-0.25);
    o.output_tangent = &seed;
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &o, &cr_fn_mul, xs, 2, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    /* A tangent of the wrong kind cannot be used. */
    cr_tangent bad[3] = {cr_tangent_none(), cr_tangent_c128(1.0), cr_tangent_f64(1.0)};
    double buf[2] = {1, 2};
    cr_array arr = cr_array_vector(buf, 2);
    bad[1] = cr_tangent_array(&arr);
    o.input_tangents = bad;
    o.output_tangent = NULL;
    assert_int_equal(cr_test_frule(f->arena, &o, &cr_fn_mul, xs, 2, &r), CR_EINVAL);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    /* Outside the domain: could not run. */
    cr_value neg = cr_value_f64(-1.0);
    assert_int_equal(cr_test_rrule(f->arena, NULL, &cr_fn_log, &neg, 1, &r), CR_EDOMAIN);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    /* Misuse. */
    assert_int_equal(cr_test_rrule(f->arena, NULL, &xs[0], xs, 1, &r), CR_EINVAL);
    assert_int_equal(cr_test_rrule(NULL, NULL, &cr_fn_sin, xs, 1, &r), CR_EINVAL);
    assert_int_equal(cr_test_scalar(f->arena, NULL, &cr_fn_sin,
                                    &(cr_value){.kind = CR_KIND_ARRAY, .u.arr = &arr}, 1, &r),
                     CR_EINVAL);
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* ---- Points finite differences cannot test -------------------------------------------- */

/* tan, with a pole at pi/2. */
CR_SCALAR_EVALS(mytan, 1, 1, Y[0] = tan(x[0]), D[0] = 1 + Y[0] * Y[0])
static const double k_tan_pts[] = {1e300, 1.5707963267948966, 0.5};
static const cr_scalar_rule mytan_row =
    CR_SCALAR_ROW_EX(mytan, .test = {.npoints = 3, .points = k_tan_pts});
static const cr_function mytan_fn = CR_SCALAR_FUNCTION("mytan", mytan_row, 1);

/* |x|, with a kink at 0. */
CR_SCALAR_EVALS_REAL(myabs, 1, 1, Y[0] = fabs(x[0]), D[0] = x[0] < 0 ? -1 : 1)
static const cr_scalar_rule myabs_row = CR_SCALAR_ROW_REAL(myabs);
static const cr_function myabs_fn = CR_SCALAR_FUNCTION("myabs", myabs_row, 1);

static void test_untestable_points_are_skipped(void **state)
{
    fixture *f = *state;
    assert_int_equal(cr_scalar_rule_register(f->reg, &mytan_fn, &mytan_row), CR_OK);
    assert_int_equal(cr_scalar_rule_register(f->reg, &myabs_fn, &myabs_row), CR_OK);
    cr_value tanv = cr_value_function(&mytan_fn, NULL), absv = cr_value_function(&myabs_fn, NULL);
    cr_test_report r;
    /* No step can be resolved at 1e300: not testable (neither passed nor failed). */
    cr_value big = cr_value_f64(1e300);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &tanv, &big, 1, &r), CR_EDOMAIN);
    assert_contains(r.message, "magnitude");
    /* A pole inside the stencil: not testable either. */
    cr_value pole = cr_value_f64(1.5707963267948966);
    assert_int_equal(cr_test_frule(f->arena, &f->opts, &tanv, &pole, 1, &r), CR_EDOMAIN);
    assert_contains(r.message, "pole");
    /* Finite differences never cross zero in a non-zero coordinate: |x| at ±1e-300. */
    cr_value tiny[2] = {cr_value_f64(1e-300), cr_value_f64(-1e-300)};
    for (int i = 0; i < 2; i++) {
        CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, &f->opts, &absv, &tiny[i], 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
    }
    /* Nor at a subnormal, where no step stays on one side. */
    cr_value sub = cr_value_f64(4.9406564584124654e-324);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &absv, &sub, 1, &r), CR_EDOMAIN);
    assert_contains(r.message, "side of zero");
    /* A registration: the hard points are skipped and said why, the rest is tested. */
    size_t n = cr_registry_size(f->reg);
    cr_rule_info info;
    assert_int_equal(cr_registry_get(f->reg, n - 2, &info), CR_OK);
    assert_ptr_equal(info.fn, &mytan_fn);
    cr_test_opts o = {0};
    o.flags = CR_TEST_F64_ONLY;
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, &o, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(r.nskipped, 2);
    assert_contains(r.skip_note, "at (1.0000000000000001e+300)");
    assert_true(r.npoints >= 3);
}

/* ---- Flattening ------------------------------------------------------------------------- */

static void test_flatten_sizes_and_round_trip(void **state)
{
    fixture *f = *state;
    double m[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_complex c[9];
    for (int k = 0; k < 9; k++)
        c[k] = (double)(k + 1) + (double)(k - 4) * CI;
    cr_array dense = cr_array_matrix(m, 2, 3), sq = cr_array_matrix(m, 3, 3);
    cr_array diag = sq, up = sq, lo = sq, sym = sq, herm, cz;
    diag.structure = CR_MAT_DIAGONAL;
    diag.strides[0] = 4;
    up.structure = CR_MAT_UPPER;
    lo.structure = CR_MAT_LOWER;
    sym.structure = CR_MAT_SYMMETRIC;
    size_t shape[2] = {3, 3};
    assert_int_equal(cr_array_view_init(&herm, c, CR_DT_C128, 2, shape, NULL), CR_OK);
    herm.structure = CR_MAT_HERMITIAN;
    assert_int_equal(cr_array_view_init(&cz, c, CR_DT_C128, 2, shape, NULL), CR_OK);
    /* A transposed (strided) view of the 2x3 matrix. */
    cr_array tr;
    size_t tshape[2] = {3, 2};
    ptrdiff_t tstrides[2] = {1, 3};
    assert_int_equal(cr_array_view_init(&tr, m, CR_DT_F64, 2, tshape, tstrides), CR_OK);
    int64_t iv[3] = {1, 2, 3};
    cr_array ints;
    size_t ishape[1] = {3};
    assert_int_equal(cr_array_view_init(&ints, iv, CR_DT_I64, 1, ishape, NULL), CR_OK);
    polar p = {2, 0.5, 7};
    scaler s = {3};
    struct {
        cr_value v;
        size_t n;
    } cases[] = {
        {cr_value_f64(1.5), 1},
        {cr_value_f32(1.5f), 1},
        {cr_value_c128(1 + 2 * CI), 2},
        {cr_value_i64(4), 0},
        {cr_value_bool(true), 0},
        {cr_value_array(&dense), 6},
        {cr_value_array(&diag), 3},
        {cr_value_array(&up), 6},
        {cr_value_array(&lo), 6},
        {cr_value_array(&sym), 6},
        {cr_value_array(&herm), 9},
        {cr_value_array(&cz), 18},
        {cr_value_array(&tr), 6},
        {cr_value_array(&ints), 0},
        {cr_value_struct(&k_polar_type, &p), 2},
        {cr_value_function(&k_sq_good_fn, NULL), 0},
        {cr_value_function(&k_scaler_fn, &s), 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const cr_value *v = &cases[i].v;
        size_t n = cr_test_flat_size(v);
        assert_int_equal(n, cases[i].n);
        double x[18], y[18], t[18];
        assert_int_equal(cr_test_flatten(v, x, n), CR_OK);
        for (size_t k = 0; k < n; k++)
            x[k] += 0.5 * (double)(k + 1); /* exact */
        cr_value u;
        assert_int_equal(cr_test_unflatten(f->keep, v, x, n, &u), CR_OK);
        assert_int_equal(u.kind, v->kind);
        assert_int_equal(cr_test_flatten(&u, y, n), CR_OK);
        for (size_t k = 0; k < n; k++)
            assert_true(y[k] == x[k]);
        /* Tangents: unflatten then flatten; cotangent = weights * coordinates. */
        cr_tangent tg;
        assert_int_equal(cr_test_tangent_unflatten(f->keep, v, x, n, &tg), CR_OK);
        if (n == 0) {
            assert_int_equal(tg.tag, CR_TAN_NONE);
            continue;
        }
        assert_int_equal(cr_test_tangent_flatten(v, tg, t, n), CR_OK);
        for (size_t k = 0; k < n; k++)
            assert_true(t[k] == x[k]);
        double w[18], g[18];
        cr__test_weights(v, w, n);
        assert_int_equal(cr_test_cotangent_flatten(v, tg, g, n), CR_OK);
        for (size_t k = 0; k < n; k++)
            assert_true(g[k] == w[k] * x[k]);
        assert_int_equal(cr_test_flatten(v, x, n - 1 + (n == 0)), n == 1 ? CR_EINVAL : CR_EINVAL);
    }
    /* The template is untouched (unflatten copies). */
    assert_true(m[0] == 1 && p.r == 2 && s.a == 3);
    /* Strided views flatten in logical (row-major) order. */
    double x[6];
    assert_int_equal(cr_test_flatten(&cases[12].v, x, 6), CR_OK);
    assert_true(x[0] == 1 && x[1] == 4 && x[2] == 2 && x[3] == 5 && x[4] == 3 && x[5] == 6);
    /* Symmetric: the upper triangle (1 2 3 5 6 9); the unflattened value mirrors it. */
    double sx[6] = {1, 2, 3, 5, 6, 9};
    assert_int_equal(cr_test_flatten(&cases[9].v, x, 6), CR_OK);
    for (int k = 0; k < 6; k++)
        assert_true(x[k] == sx[k]);
    double nx[6] = {10, 20, 30, 40, 50, 60};
    cr_value u;
    assert_int_equal(cr_test_unflatten(f->keep, &cases[9].v, nx, 6, &u), CR_OK);
    assert_int_equal(u.u.arr->structure, CR_MAT_SYMMETRIC);
    assert_true(creal(cr_array_get_linear(u.u.arr, 3)) == 20); /* (1,0) mirrors (0,1) */
    assert_true(creal(cr_array_get_linear(u.u.arr, 7)) == 50); /* (2,1) mirrors (1,2) */
    /* Hermitian: real diagonal, conjugate mirror. */
    double hx[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    assert_int_equal(cr_test_unflatten(f->keep, &cases[10].v, hx, 9, &u), CR_OK);
    cr_complex e01 = cr_array_get_linear(u.u.arr, 1), e10 = cr_array_get_linear(u.u.arr, 3);
    assert_true(creal(e01) == 2 && cimag(e01) == 3 && creal(e10) == 2 && cimag(e10) == -3);
    assert_true(cimag(cr_array_get_linear(u.u.arr, 0)) == 0);
    /* A dense cotangent of a Symmetric matrix: dual coordinates sum the mirrored pair. */
    double tm[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array T = cr_array_matrix(tm, 3, 3);
    double g[6];
    assert_int_equal(cr_test_cotangent_flatten(&cases[9].v, cr_tangent_array(&T), g, 6), CR_OK);
    double expect[6] = {1, 2 + 4, 3 + 7, 5, 6 + 8, 9};
    for (int k = 0; k < 6; k++)
        assert_true(g[k] == expect[k]);
    /* Wrong tangent kinds are reported. */
    assert_int_equal(cr_test_tangent_flatten(&cases[0].v, cr_tangent_array(&T), g, 1), CR_ETANGENT);
    assert_int_equal(cr_test_tangent_flatten(&cases[0].v, cr_tangent_notimpl(&k_ni), g, 1),
                     CR_EUNIMPL);
    /* Component names. */
    char name[64];
    cr__test_comp_name(&cases[11].v, 3, name, sizeof name);
    assert_string_equal(name, "[0,1].im");
    cr__test_comp_name(&cases[14].v, 1, name, sizeof name);
    assert_string_equal(name, ".theta");
    cr__test_comp_name(&cases[2].v, 0, name, sizeof name);
    assert_string_equal(name, "re");
}

/* ---- rand_tangent ----------------------------------------------------------------------- */

static void assert_nice(const double *x, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        assert_true(x[k] >= -9 && x[k] <= 9);
        assert_true(x[k] * 8 == round(x[k] * 8));
    }
}

static void test_rand_tangent(void **state)
{
    fixture *f = *state;
    uint64_t rng = 1;
    cr_tangent t;
    for (int i = 0; i < 200; i++) {
        assert_int_equal(cr_rand_tangent(f->keep, &rng, &(cr_value){.kind = CR_KIND_F64}, &t),
                         CR_OK);
        assert_int_equal(t.tag, CR_TAN_F64);
        assert_true(t.u.f64 != 0);
        assert_nice(&t.u.f64, 1);
    }
    cr_value f32 = cr_value_f32(1.0f), c = cr_value_c128(1.0), i64 = cr_value_i64(3);
    assert_int_equal(cr_rand_tangent(f->keep, &rng, &f32, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_F32);
    assert_int_equal(cr_rand_tangent(f->keep, &rng, &c, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_C128);
    assert_int_equal(cr_rand_tangent(f->keep, &rng, &i64, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_NONE);
    cr_value fn = cr_value_function(&k_sq_good_fn, NULL);
    assert_int_equal(cr_rand_tangent(f->keep, &rng, &fn, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_NONE);

    /* Arrays keep shape and structure; a Hermitian tangent has a real diagonal. */
    cr_complex buf[9] = {0};
    size_t shape[2] = {3, 3};
    cr_array h;
    assert_int_equal(cr_array_view_init(&h, buf, CR_DT_C128, 2, shape, NULL), CR_OK);
    h.structure = CR_MAT_HERMITIAN;
    cr_value hv = cr_value_array(&h);
    assert_int_equal(cr_rand_tangent(f->keep, &rng, &hv, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_ARRAY);
    assert_int_equal(t.u.arr->structure, CR_MAT_HERMITIAN);
    assert_int_equal(t.u.arr->dtype, CR_DT_C128);
    assert_true(t.u.arr->flags & CR_ARRAY_WRITABLE);
    for (size_t k = 0; k < 3; k++)
        assert_true(cimag(cr_array_get_linear(t.u.arr, k * 4)) == 0);
    double x[9];
    assert_int_equal(cr_test_tangent_flatten(&hv, t, x, 9), CR_OK);
    assert_nice(x, 9);

    /* A struct whose fields cannot be perturbed has NoTangent. */
    typedef struct ids {
        int64_t a;
        bool b;
    } ids;
    static const cr_field idf[] = {{"a", offsetof(ids, a), CR_KIND_I64, NULL},
                                   {"b", offsetof(ids, b), CR_KIND_BOOL, NULL}};
    static const cr_type idt = {"ids", sizeof(ids), 2, idf};
    ids v = {1, true};
    cr_value iv = cr_value_struct(&idt, &v);
    assert_int_equal(cr_rand_tangent(f->keep, &rng, &iv, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_NONE);
    polar p = {1, 2, 3};
    cr_value pv = cr_value_struct(&k_polar_type, &p);
    assert_int_equal(cr_rand_tangent(f->keep, &rng, &pv, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_STRUCT);
    assert_int_equal(cr_tangent_field(t, 2).tag, CR_TAN_NONE);

    /* Reproducible from the seed. */
    uint64_t r1 = 99, r2 = 99;
    cr_tangent a, b;
    assert_int_equal(cr_rand_tangent(f->keep, &r1, &hv, &a), CR_OK);
    assert_int_equal(cr_rand_tangent(f->keep, &r2, &hv, &b), CR_OK);
    assert_true(cr_tangent_isapprox(a, b, 0, 0));
    assert_int_equal(cr_rand_tangent(NULL, &r1, &hv, &a), CR_EINVAL);
}

/* ---- Reports ------------------------------------------------------------------------- */

static void test_reports(void **state)
{
    (void)state;
    assert_string_equal(cr_verdict_name(CR_VERDICT_PASS), "PASS");
    assert_string_equal(cr_verdict_name(CR_VERDICT_MARGINAL), "MARGINAL");
    assert_string_equal(cr_verdict_name(CR_VERDICT_FAIL), "FAIL");
    assert_string_equal(cr_verdict_name(CR_VERDICT_BROKEN), "BROKEN");
    assert_string_equal(cr_verdict_name((cr_verdict)9), "?");
    assert_true(cr_verdict_rank(CR_VERDICT_PASS) < cr_verdict_rank(CR_VERDICT_MARGINAL));
    assert_true(cr_verdict_rank(CR_VERDICT_MARGINAL) < cr_verdict_rank(CR_VERDICT_BROKEN));
    assert_true(cr_verdict_rank(CR_VERDICT_BROKEN) < cr_verdict_rank(CR_VERDICT_FAIL));

    cr_test_report a, b;
    cr_test_report_init(&a);
    cr_test_report_init(&b);
    cr__test_note(&a, CR_VERDICT_PASS, 0.5, "x", "%s", "");
    cr__test_note(&a, CR_VERDICT_MARGINAL, 3, "marginal here", "m %d", 1);
    cr__test_note(&a, CR_VERDICT_PASS, 0.1, "y", "%s", "");
    assert_int_equal(a.verdict, CR_VERDICT_MARGINAL);
    assert_string_equal(a.where, "marginal here");
    assert_string_equal(a.message, "m 1");
    cr__test_note(&b, CR_VERDICT_BROKEN, 0, "broken here", "%s", "NotImplemented");
    cr__test_note(&b, CR_VERDICT_FAIL, 50, "first failure", "%s", "f1");
    cr__test_note(&b, CR_VERDICT_FAIL, 500, "worse failure", "%s", "f2");
    cr__test_note(&b, CR_VERDICT_FAIL, 5, "milder failure", "%s", "f3");
    cr__test_errors(&b, 0.25, 0.5);
    assert_string_equal(b.where, "worse failure");
    cr_test_report_merge(&a, &b);
    assert_int_equal(a.verdict, CR_VERDICT_FAIL);
    assert_string_equal(a.where, "worse failure");
    assert_int_equal(a.nchecks, 7);
    assert_int_equal(a.npassed, 2);
    assert_int_equal(a.nmarginal, 1);
    assert_int_equal(a.nbroken, 1);
    assert_int_equal(a.nfailed, 3);
    assert_true(a.max_abs_err == 0.25 && a.max_rel_err == 0.5 && a.worst_ratio == 500);
    char line[300];
    size_t need = cr_test_report_format(&a, line, sizeof line);
    assert_true(need == strlen(line));
    assert_contains(line, "FAIL: 7 checks (2 passed, 1 marginal, 1 broken, 3 failed)");
    assert_contains(line, "worse failure: f2");
    char tiny[8];
    cr_test_report_format(&a, tiny, sizeof tiny);
    assert_int_equal(strlen(tiny), 7);
}

/* ---- Registrations and completeness ----------------------------------------------------- */

static cr_status sample_vec(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs, void *env)
{
    (void)env;
    (void)nargs;
    cr_array *a;
    size_t shape[1] = {4};
    cr_status st = cr_array_new(arena, CR_DT_F64, 1, shape, &a);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < 4; k++)
        ((double *)a->data)[k] = (double)(cr_test_rand_u64(rng) % 64) / 8 - 4;
    args[0] = cr_value_array(a);
    return CR_OK;
}

static const cr_rule_test k_vec_test = {.sample = sample_vec};
static const double k_pts[] = {0.5, 1.0, 2.0, -1.0};
static const cr_rule_test k_mul_test = {.npoints = 2, .points = k_pts};

static void test_registrations_and_completeness(void **state)
{
    fixture *f = *state;
    /* An array rule without a test registration is reported, by name. */
    cr_rule_def d;
    memset(&d, 0, sizeof d);
    d.fn = &k_twice_fns[TW_GOOD];
    d.nargs = 1;
    d.args = k_arr1;
    d.frule = twice_frule;
    d.rrule = twice_rrule;
    d.udata = &k_tw[TW_GOOD];
    assert_int_equal(cr_registry_add(f->reg, &d), CR_OK);
    char buf[512];
    assert_int_equal(cr_test_untested_rules(f->reg, buf, sizeof buf), 1);
    assert_contains(buf, "twice(array{f64})");
    assert_contains(buf, "no test registration");
    cr_rule_info info;
    assert_int_equal(cr_registry_get(f->reg, 0, &info), CR_OK);
    assert_false(cr_test_registration_usable(&info));
    cr_test_report r;
    assert_int_equal(cr_test_rule_registration(f->arena, NULL, &info, &r), CR_EINVAL);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "sample function");

    /* With a sampler it is usable and tested. */
    d.fn = &k_twice_fns[TW_MUTATE_SEED];
    d.udata = &k_tw[TW_MUTATE_SEED];
    d.test = &k_vec_test;
    assert_int_equal(cr_registry_add(f->reg, &d), CR_OK);
    d.fn = &k_twice_fns[TW_FRULE_MUTATES];
    d.udata = &k_tw[TW_GOOD];
    assert_int_equal(cr_registry_add(f->reg, &d), CR_OK);
    assert_int_equal(cr_test_untested_rules(f->reg, NULL, 0), 1);
    assert_int_equal(cr_registry_get(f->reg, 2, &info), CR_OK);
    assert_true(cr_test_registration_usable(&info));
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, NULL, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(r.npoints, CR_TEST_DEFAULT_NPOINTS);
    assert_int_equal(cr_registry_get(f->reg, 1, &info), CR_OK);
    assert_int_equal(cr_test_rule_registration(f->arena, NULL, &info, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "at (f64 array 4)");

    /* Scalar rows: box, hard points, variants. The wrong partial is caught there too. */
    assert_int_equal(cr_scalar_rule_register(f->reg, &badmul_fn, &badmul_row), CR_OK);
    size_t n = cr_registry_size(f->reg);
    assert_int_equal(cr_registry_get(f->reg, n - 1, &info), CR_OK);
    cr_test_opts o = {0};
    o.npoints = 2;
    assert_int_equal(cr_test_rule_registration(f->arena, &o, &info, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "at (");
    assert_true(r.npoints >= 6); /* corners + f64, c128, mixed, int, f32 ... */

    /* A hand-written rule with hard points, frule only: the rrule is not asked for. */
    static const cr_function mulf = {.name = "mulf", .arity = 2, .primal = mul2_primal};
    memset(&d, 0, sizeof d);
    d.fn = &mulf;
    d.nargs = 2;
    d.args = k_f64_f64;
    d.frule = mul2_frule;
    d.test = &k_mul_test;
    assert_int_equal(cr_registry_add(f->reg, &d), CR_OK);
    assert_int_equal(cr_registry_get(f->reg, n, &info), CR_OK);
    o.flags = CR_TEST_NO_EDGES;
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, &o, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(r.npoints, 2 + 2);

    /* The built-in non-differentiable declaration. */
    const cr_registry *bi = cr_registry_builtin();
    bool found = false;
    for (size_t i = 0; i < cr_registry_size(bi); i++) {
        assert_int_equal(cr_registry_get(bi, i, &info), CR_OK);
        if (!info.non_differentiable)
            continue;
        found = true;
        CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, NULL, &info, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        assert_true(r.nchecks > 0);
    }
    assert_true(found);
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* ---- The checker's exit status ------------------------------------------------------------ */

static void test_check_main(void **state)
{
    fixture *f = *state;
    char prog[] = "chainrules-check", quiet[] = "-q", points[] = "--points", one[] = "1",
         help[] = "--help", bogus[] = "--bogus", filter[] = "--filter", sq[] = "sq",
         list[] = "--list";
    char *argv_ok[] = {prog, quiet, points, one, NULL};
    /* Listing the built-ins succeeds (checking them is the chainrules-check test). */
    char *argv_list_builtin[] = {prog, list, NULL};
    assert_int_equal(cr_check_main(2, argv_list_builtin, NULL), 0);
    /* A user registry's own rules: good ones pass; a wrong one fails the run. */
    add_sq(f, &k_sq_good_fn, &k_sq_good);
    assert_int_equal(cr_check_main(4, argv_ok, f->reg), 0);
    assert_int_equal(cr_scalar_rule_register(f->reg, &badmul_fn, &badmul_row), CR_OK);
    assert_int_equal(cr_check_main(4, argv_ok, f->reg), 1);
    char *argv_filter[] = {prog, quiet, filter, sq, NULL};
    assert_int_equal(cr_check_main(4, argv_filter, f->reg), 0);
    char *argv_list[] = {prog, list, NULL};
    assert_int_equal(cr_check_main(2, argv_list, f->reg), 0);
    char *argv_help[] = {prog, help, NULL};
    assert_int_equal(cr_check_main(2, argv_help, NULL), 0);
    char *argv_bad[] = {prog, bogus, NULL};
    assert_int_equal(cr_check_main(2, argv_bad, NULL), 2);
    char *argv_badpts[] = {prog, points, NULL};
    assert_int_equal(cr_check_main(2, argv_badpts, NULL), 2);
}

/* The testers short of memory (builtin rules over numbers, arrays and a tuple output): in
 * scratch arenas of growing size every run short of room reports CR_EARENA with a message;
 * under a context whose allocator fails the n-th allocation, for n = 1, 2, ..., every failing
 * run reports CR_ENOMEM with a message and leaks nothing. The first run that fits gives the
 * verdict and the number of points of a run with memory to spare. */
typedef cr_status (*tester_fn)(cr_arena *scratch, const cr_test_opts *opts, const cr_value *f,
                               const cr_value *args, size_t nargs, cr_test_report *r);

static void sweep_tester(fixture *f, tester_fn test, const char *name, const cr_value *fn,
                         const cr_value *args, size_t nargs)
{
    cr_test_report want, got;
    assert_int_equal(test(f->arena, NULL, fn, args, nargs, &want), CR_OK);
    assert_int_equal(want.verdict, CR_VERDICT_PASS);
    /* the testers' scratch arena too small: CR_EARENA */
    size_t failed = 0, size;
    for (size = 32;; size += 64) {
        void *buf = malloc(size);
        assert_non_null(buf);
        cr_arena_params ap = {.struct_size = sizeof ap, .buffer = buf, .buffer_size = size};
        cr_arena *a;
        assert_int_equal(cr_arena_new(f->ctx, &ap, &a), CR_OK);
        cr_ctx_clear_error(f->ctx);
        cr_status st = test(a, NULL, fn, args, nargs, &got);
        cr_arena_free(a);
        free(buf);
        if (st == CR_OK) {
            assert_int_equal(got.verdict, want.verdict);
            assert_int_equal(got.npoints, want.npoints);
            break;
        }
        if (st != CR_EARENA || cr_ctx_errmsg(f->ctx)[0] == '\0') {
            print_error("%s of %s in a %zu-byte scratch: %s (%s)\n", name, fn->u.func.fn->name,
                        size, cr_status_name(st), cr_ctx_errmsg(f->ctx));
            fail();
        }
        failed++;
    }
    assert_true(failed > 0);
    cr_ctx_clear_error(f->ctx);
    /* the context's allocator failing */
    fault *fl = new_tracker();
    size_t n;
    failed = 0;
    for (n = 1; n < 100000; n++) {
        arm(fl, n);
        cr_ctx_params p = {.realloc_fn = fault_realloc, .alloc_env = fl};
        cr_ctx *ctx = NULL;
        cr_arena *a = NULL;
        cr_status st = cr_ctx_new(&p, &ctx);
        if (st == CR_OK && (st = cr_arena_new(ctx, NULL, &a)) == CR_OK)
            st = test(a, NULL, fn, args, nargs, &got);
        bool msg = ctx != NULL && cr_ctx_errmsg(ctx)[0] != '\0';
        cr_arena_free(a);
        cr_ctx_free(ctx);
        if (fl->live_blocks != 0 || fl->bad_frees != 0) {
            print_error("%s of %s, allocation %zu failing: %zu blocks leaked, %zu bad frees\n",
                        name, fn->u.func.fn->name, n, fl->live_blocks, fl->bad_frees);
            fail();
        }
        if (st == CR_OK && fl->failures == 0) {
            assert_int_equal(got.verdict, want.verdict);
            assert_int_equal(got.npoints, want.npoints);
            break;
        }
        if (st != CR_ENOMEM || (ctx != NULL && !msg)) {
            print_error("%s of %s, allocation %zu failing: %s\n", name, fn->u.func.fn->name, n,
                        cr_status_name(st));
            fail();
        }
        failed++;
    }
    assert_true(failed > 0);
}

static void test_testers_out_of_memory(void **state)
{
    fixture *f = *state;
    double a[4] = {1.5, -0.5, 0.25, 2}, b[4] = {0.5, 1, -1, 0.75};
    cr_array A = cr_array_matrix(a, 2, 2), B = cr_array_matrix(b, 2, 2);
    cr_value ab[2] = {cr_value_array(&A), cr_value_array(&B)}, x = cr_value_f64(0.7);
    const tester_fn testers[] = {cr_test_rrule, cr_test_frule, cr_test_consistency};
    const char *const names[] = {"cr_test_rrule", "cr_test_frule", "cr_test_consistency"};
    for (size_t k = 0; k < 3; k++) {
        sweep_tester(f, testers[k], names[k], &cr_fn_matmul, ab, 2);
        sweep_tester(f, testers[k], names[k], &cr_fn_sum, ab, 1);
        sweep_tester(f, testers[k], names[k], &cr_fn_sin, &x, 1);
        sweep_tester(f, testers[k], names[k], &cr_fn_findmax, ab, 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sq_good_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_conj_is_caught, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frule_disagreeing_with_rrule_is_caught, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wrong_partial_is_caught, setup, teardown),
        cmocka_unit_test_setup_teardown(test_marginal_band, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_tangent_for_integer_is_caught, setup, teardown),
        cmocka_unit_test_setup_teardown(test_array_rule_and_mutation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inplaceable_thunk_add_is_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_implemented_is_broken, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_and_thunked_seed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_structured_matrices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_struct_and_tuple, setup, teardown),
        cmocka_unit_test_setup_teardown(test_functor_self, setup, teardown),
        cmocka_unit_test_setup_teardown(test_builtins_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_explicit_tangents_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_untestable_points_are_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flatten_sizes_and_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rand_tangent, setup, teardown),
        cmocka_unit_test(test_reports),
        cmocka_unit_test_setup_teardown(test_registrations_and_completeness, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_main, setup, teardown),
        cmocka_unit_test_setup_teardown(test_testers_out_of_memory, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
