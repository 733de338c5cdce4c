/*
 * Rare paths of the rule testers (src/testing/testers.c): each deliberately wrong rule
 * below is one that only a particular check can catch, and the tests assert that the
 * tester reports it (and that the right rule passes). Covered: rules and pullbacks that
 * fail (FAIL) or are unimplemented (BROKEN) in every tester, including the dot-product
 * test alone; outputs of the wrong kind; tangents and cotangents that do not fit
 * (arrays for scalars, imaginary parts for real values, NaN, struct tangents of another
 * type, arrays of another length); thunks that fail; pullbacks that break on a thunked
 * seed or answer NoTangent for it; frules and pullbacks that mishandle a real tangent or
 * seed of a complex value (test_scalar's embedding checks); a non-zero tangent where
 * nothing was perturbed; values instead of NoTangent, and NotImplemented, for an integer
 * argument; functions without a primal; explicit tangents, seeds and accumulators
 * (thunks among them, which must not read as mutated); a custom finite-difference
 * method and options (invalid ones are refused); outputs that are not scalars for
 * test_scalar; primals that fail with CR_EDOMAIN; poles inside the stencil of the j'vp.
 */
#include <stdio.h>
#include <tgmath.h> /* the scalar rows below are type-generic */

#define CR_TEST_OWN_FIXTURE
#include "test_util.h"

#include <chainrules/testing_cmocka.h>

#include "test_testing_util.h"
#include "testing/testing_impl.h"

#define CI ((cr_complex)I)

/* ---- Helpers (the fixture is in test_testing_util.h) ------------------------------------ */

static cr_complex val_c(const cr_value *v)
{
    return v->kind == CR_KIND_C128 ? v->u.c128 : v->u.f64;
}

/* A fresh 2-element array tangent (the wrong shape for any scalar). */
static cr_status two_elements(cr_arena *arena, cr_tangent *out)
{
    cr_array *a;
    size_t shape[1] = {2};
    cr_status st = cr_array_new(arena, CR_DT_F64, 1, shape, &a);
    if (st != CR_OK)
        return st;
    ((double *)a->data)[0] = 1;
    ((double *)a->data)[1] = 2;
    *out = cr_tangent_array(a);
    return CR_OK;
}

static cr_status failing_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)env;
    (void)out;
    return cr_ctx_error(cr_arena_ctx(arena), CR_ETANGENT, "failing_thunk: cannot evaluate");
}

/* ---- cube(z) = z^3, right and wrong in many ways ---------------------------------------- */

typedef enum {
    V_OK,
    /* frules */
    F_ERR,         /* fails with CR_ETANGENT */
    F_UNIMPL,      /* CR_EUNIMPL */
    F_NOMEM,       /* CR_ENOMEM */
    F_KIND,        /* a complex output for a real argument */
    F_IMAG,        /* an imaginary part in the tangent of a real output */
    F_ARRAY,       /* an array tangent for a scalar output */
    F_NAN,         /* a NaN tangent */
    F_REALTAN,     /* a real tangent of a complex argument is ignored */
    F_REALTAN_ERR, /* ... or refused */
    F_ZERO_BAD,    /* a non-zero tangent for zero input tangents */
    F_THUNK_FAIL,  /* a thunk that cannot be evaluated */
    /* rrules and pullbacks */
    R_ERR,           /* the rrule fails */
    R_UNIMPL,        /* the rrule is not implemented */
    R_NX_WRONG,      /* the pullback forgets ∂self */
    PB_ERR,          /* the pullback fails */
    PB_UNIMPL,       /* ... with CR_EUNIMPL */
    PB_THUNK_ERR,    /* the pullback fails on a thunked seed */
    PB_THUNK_NONE,   /* the pullback answers NoTangent for a thunked seed */
    PB_IMAG,         /* a complex cotangent for a real argument */
    PB_ARRAY,        /* an array cotangent for a scalar argument */
    PB_REALSEED,     /* a real seed of a complex output is ignored */
    PB_REALSEED_ERR, /* ... or refused */
    PB_NI_CSEED,     /* NotImplemented for complex seeds */
    PB_ANY_SEED,     /* reads any seed it cannot use as zero */
    PB_THUNK_FAIL,   /* a cotangent thunk that cannot be evaluated */
    NVARIANTS
} variant;

static const int k_var[NVARIANTS] = {
    V_OK,        F_ERR,           F_UNIMPL,      F_NOMEM,      F_KIND,        F_IMAG,  F_ARRAY,
    F_NAN,       F_REALTAN,       F_REALTAN_ERR, F_ZERO_BAD,   F_THUNK_FAIL,  R_ERR,   R_UNIMPL,
    R_NX_WRONG,  PB_ERR,          PB_UNIMPL,     PB_THUNK_ERR, PB_THUNK_NONE, PB_IMAG, PB_ARRAY,
    PB_REALSEED, PB_REALSEED_ERR, PB_NI_CSEED,   PB_ANY_SEED,  PB_THUNK_FAIL};

static cr_status cube_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    cr_complex z = val_c(&args[0]);
    *out = num_like(&args[0], z * z * z);
    return CR_OK;
}

static cr_status cube_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)f;
    (void)nargs;
    int v = *(const int *)udata;
    bool cplx = args[0].kind == CR_KIND_C128;
    cr_complex z = val_c(&args[0]), dz;
    switch (v) {
    case F_ERR:
        return cr_ctx_error(cr_arena_ctx(arena), CR_ETANGENT, "cube_frule: refuses");
    case F_UNIMPL:
        return CR_EUNIMPL;
    case F_NOMEM:
        return CR_ENOMEM;
    case F_REALTAN_ERR:
        if (cplx && dargs[1].tag == CR_TAN_F64)
            return CR_ETANGENT;
        break;
    default:
        break;
    }
    cr_status st = tan_c(dargs[1], &dz);
    if (st != CR_OK)
        return st;
    *y = num_like(&args[0], z * z * z);
    *dy = tan_like(&args[0], 3 * z * z * dz);
    switch (v) {
    case F_KIND:
        *y = cr_value_c128(z * z * z);
        break;
    case F_IMAG:
        if (!cplx)
            *dy = cr_tangent_c128(3 * z * z * dz + 0.5 * CI);
        break;
    case F_ARRAY:
        return two_elements(arena, dy);
    case F_NAN:
        *dy = tan_like(&args[0], NAN);
        break;
    case F_REALTAN:
        if (cplx && dargs[1].tag == CR_TAN_F64)
            *dy = cr_tangent_c128(0.0);
        break;
    case F_ZERO_BAD:
        if (dargs[1].tag == CR_TAN_ZERO || dargs[1].tag == CR_TAN_NONE)
            *dy = tan_like(&args[0], 1.0);
        break;
    case F_THUNK_FAIL:
        return cr_tangent_thunk(arena, failing_thunk, NULL, "failing_thunk", dy);
    default:
        break;
    }
    return CR_OK;
}

typedef struct cube_env {
    cr_complex z;
    bool cplx;
    int v;
} cube_env;

static cr_status cube_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    const cube_env *e = env;
    switch (e->v) {
    case PB_ERR:
        return cr_ctx_error(cr_arena_ctx(arena), CR_ETANGENT, "cube_pullback: refuses");
    case PB_UNIMPL:
        return CR_EUNIMPL;
    case PB_THUNK_ERR:
        if (dy->tag == CR_TAN_THUNK)
            return CR_ETANGENT;
        break;
    case PB_REALSEED_ERR:
        if (e->cplx && dy->tag == CR_TAN_F64)
            return CR_ETANGENT;
        break;
    default:
        break;
    }
    cr_complex g;
    cr_status st = tan_c(*dy, &g);
    if (st != CR_OK && e->v == PB_ANY_SEED)
        g = 0, st = CR_OK;
    if (st != CR_OK)
        return st;
    cr_complex d = 3 * e->z * e->z, r = conj(d) * g;
    dx[0] = cr_tangent_none();
    dx[1] = e->cplx ? cr_tangent_c128(r) : cr_tangent_f64(creal(r));
    switch (e->v) {
    case PB_THUNK_NONE:
        if (dy->tag == CR_TAN_THUNK)
            dx[1] = cr_tangent_none();
        break;
    case PB_IMAG:
        if (!e->cplx)
            dx[1] = cr_tangent_c128(r + 0.5 * CI);
        break;
    case PB_ARRAY:
        return two_elements(arena, &dx[1]);
    case PB_REALSEED:
        if (e->cplx && dy->tag == CR_TAN_F64)
            dx[1] = cr_tangent_c128(0.0);
        break;
    case PB_NI_CSEED: {
        static const cr_notimpl ni = {__FILE__, __LINE__, "complex seeds"};
        cr_tangent s;
        if (cr_tangent_unthunk(*dy, &s) == CR_OK && s.tag == CR_TAN_C128)
            dx[1] = cr_tangent_notimpl(&ni);
        break;
    }
    case PB_THUNK_FAIL:
        return cr_tangent_thunk(arena, failing_thunk, NULL, "failing_thunk", &dx[1]);
    default:
        break;
    }
    return CR_OK;
}

static cr_status cube_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)f;
    int v = *(const int *)udata;
    if (v == R_ERR)
        return cr_ctx_error(cr_arena_ctx(arena), CR_ETANGENT, "cube_rrule: refuses");
    if (v == R_UNIMPL)
        return CR_EUNIMPL;
    cube_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(cube_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->z = val_c(&args[0]);
    e->cplx = args[0].kind == CR_KIND_C128;
    e->v = v;
    *y = num_like(&args[0], e->z * e->z * e->z);
    pb->fn = cube_pullback;
    pb->env = e;
    pb->name = "cube_pullback";
    pb->nx = v == R_NX_WRONG ? nargs : nargs + 1;
    return CR_OK;
}

static const cr_argspec k_number1[1] = {{CR_M_F64 | CR_M_C128, NULL}};

/* One function per variant (each with its own registered rule). */
static cr_function k_cube_fns[NVARIANTS];

static cr_value add_cube(fixture *f, int v)
{
    cr_function *fn = &k_cube_fns[v];
    static char names[NVARIANTS][16];
    snprintf(names[v], sizeof names[v], "cube%d", v);
    fn->name = names[v];
    fn->arity = 1;
    fn->primal = cube_primal;
    add_rule(f, fn, k_number1, 1, cube_frule, cube_rrule, &k_var[v]);
    return cr_value_function(fn, NULL);
}

static const cr_value k_x = {.kind = CR_KIND_F64, .u.f64 = 0.75};

static cr_value zval(void)
{
    return cr_value_c128(0.5 - 1.25 * CI);
}

/* The right rule passes every tester, real and complex. */
static void test_cube_good_passes(void **state)
{
    fixture *f = *state;
    cr_value fv = add_cube(f, V_OK), xs[2] = {k_x, zval()};
    cr_test_report r;
    for (int i = 0; i < 2; i++) {
        CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &f->opts, &fv, &xs[i], 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &fv, &xs[i], 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, &f->opts, &fv, &xs[i], 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        CR_ASSERT_RULE_TEST(cr_test_consistency(f->arena, &f->opts, &fv, &xs[i], 1, &r), r);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
    }
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* Runs tester `which` (0 frule, 1 rrule, 2 consistency, 3 scalar) on variant v at x and
 * checks status, verdict and a substring of where or message. */
static void expect(fixture *f, int v, int which, const cr_value *x, cr_status want_st,
                   cr_verdict want, const char *sub)
{
    cr_value fv = cr_value_function(&k_cube_fns[v], NULL);
    cr_test_report r;
    cr_status st;
    switch (which) {
    case 0:
        st = cr_test_frule(f->arena, &f->opts, &fv, x, 1, &r);
        break;
    case 1:
        st = cr_test_rrule(f->arena, &f->opts, &fv, x, 1, &r);
        break;
    case 2:
        st = cr_test_consistency(f->arena, &f->opts, &fv, x, 1, &r);
        break;
    default:
        st = cr_test_scalar(f->arena, &f->opts, &fv, x, 1, &r);
        break;
    }
    char line[1200];
    cr_test_report_format(&r, line, sizeof line);
    if (st != want_st || r.verdict != want) {
        print_error("variant %d, tester %d: %s (want %s, %s): %s\n", v, which, cr_status_name(st),
                    cr_status_name(want_st), cr_verdict_name(want), line);
        fail();
    }
    if (sub != NULL)
        assert_contains(line, sub);
    assert_int_equal(cr_arena_used(f->arena), 0);
}

static void test_failing_rules(void **state)
{
    fixture *f = *state;
    for (int v = 0; v < NVARIANTS; v++)
        add_cube(f, v);
    cr_value z = zval();
    /* An frule that fails is a FAIL naming the status and the rule's message; CR_EUNIMPL is
     * BROKEN; an allocation failure ends the test with its status. */
    expect(f, F_ERR, 0, &k_x, CR_OK, CR_VERDICT_FAIL, "the frule failed with CR_ETANGENT");
    expect(f, F_ERR, 0, &k_x, CR_OK, CR_VERDICT_FAIL, "cube_frule: refuses");
    expect(f, F_UNIMPL, 0, &k_x, CR_OK, CR_VERDICT_BROKEN, "not implemented (CR_EUNIMPL)");
    expect(f, F_NOMEM, 0, &k_x, CR_ENOMEM, CR_VERDICT_PASS, NULL);
    /* The dot-product test alone sees a failing frule, rrule or pullback. */
    expect(f, F_ERR, 2, &k_x, CR_OK, CR_VERDICT_FAIL, "the frule failed");
    expect(f, F_UNIMPL, 2, &k_x, CR_OK, CR_VERDICT_BROKEN, "frule/rrule agreement");
    expect(f, R_ERR, 2, &k_x, CR_OK, CR_VERDICT_FAIL, "the rrule failed");
    expect(f, PB_ERR, 2, &k_x, CR_OK, CR_VERDICT_FAIL, "the pullback failed");
    /* rrule and pullback failures in test_rrule. */
    expect(f, R_ERR, 1, &k_x, CR_OK, CR_VERDICT_FAIL, "cube_rrule: refuses");
    expect(f, R_UNIMPL, 1, &k_x, CR_OK, CR_VERDICT_BROKEN, "the rrule is not implemented");
    expect(f, PB_ERR, 1, &k_x, CR_OK, CR_VERDICT_FAIL, "rrule: pullback");
    expect(f, PB_UNIMPL, 1, &k_x, CR_OK, CR_VERDICT_BROKEN, "the pullback is not implemented");
    /* A pullback that works with a plain seed but fails on a thunked one. */
    expect(f, PB_THUNK_ERR, 1, &k_x, CR_OK, CR_VERDICT_FAIL, "pulling back a thunked seed");
    expect(f, PB_THUNK_NONE, 1, &k_x, CR_OK, CR_VERDICT_FAIL, "NoTangent with the thunked seed");
    expect(f, PB_THUNK_ERR, 1, &z, CR_OK, CR_VERDICT_FAIL, "thunked seed");
    /* Thunks that cannot be evaluated: add!! fails. */
    expect(f, F_THUNK_FAIL, 0, &k_x, CR_OK, CR_VERDICT_FAIL, "add!! or + failed");
    expect(f, PB_THUNK_FAIL, 1, &k_x, CR_OK, CR_VERDICT_FAIL, "add!! or + failed");
}

static void test_tangents_that_do_not_fit(void **state)
{
    fixture *f = *state;
    for (int v = 0; v < NVARIANTS; v++)
        add_cube(f, v);
    cr_value z = zval();
    /* The primal check: a complex output for a real argument. */
    expect(f, F_KIND, 0, &k_x, CR_OK, CR_VERDICT_FAIL, "differs in kind");
    /* An imaginary part in the tangent of a real value: caught for the frule's tangent and
     * the pullback's cotangent, though the real parts are right. */
    expect(f, F_IMAG, 0, &k_x, CR_OK, CR_VERDICT_FAIL, "an imaginary part of 0.5");
    expect(f, PB_IMAG, 1, &k_x, CR_OK, CR_VERDICT_FAIL, "an imaginary part of 0.5");
    expect(f, PB_IMAG, 3, &k_x, CR_OK, CR_VERDICT_FAIL, "imaginary part");
    /* ...which complex arguments legitimately have. */
    expect(f, F_IMAG, 0, &z, CR_OK, CR_VERDICT_PASS, NULL);
    expect(f, PB_IMAG, 1, &z, CR_OK, CR_VERDICT_PASS, NULL);
    /* An array for a scalar. */
    expect(f, F_ARRAY, 0, &k_x, CR_OK, CR_VERDICT_FAIL, "cannot combine f64 with array");
    expect(f, PB_ARRAY, 1, &k_x, CR_OK, CR_VERDICT_FAIL, "cannot combine f64 with array");
    /* With ZeroTangent accumulators add!! passes the array on; the comparisons see it. */
    cr_tangent zacc[2] = {cr_tangent_none(), cr_tangent_zero()};
    f->opts.input_tangents = zacc;
    expect(f, PB_ARRAY, 1, &k_x, CR_OK, CR_VERDICT_FAIL,
           "the rule's tangent does not fit the value: a array tangent for a f64");
    f->opts.input_tangents = NULL;
    expect(f, F_ARRAY, 2, &k_x, CR_OK, CR_VERDICT_FAIL, "does not fit its value (CR_ETANGENT)");
    /* NaN is no derivative. */
    expect(f, F_NAN, 0, &k_x, CR_OK, CR_VERDICT_FAIL, "rule gives nan");
    expect(f, F_NAN, 2, &k_x, CR_OK, CR_VERDICT_FAIL, "a tangent or cotangent is NaN");
}

/* test_scalar's embedding checks: the frule with the real tangent 1.0 and the pullback of
 * the real seed 1.0 must agree with 1 + 0i. Only those checks see these rules. */
static void test_real_embedding_checks(void **state)
{
    fixture *f = *state;
    for (int v = 0; v < NVARIANTS; v++)
        add_cube(f, v);
    cr_value z = zval();
    for (int v = F_REALTAN; v <= PB_REALSEED_ERR; v++) {
        if (v != F_REALTAN && v != F_REALTAN_ERR && v != PB_REALSEED && v != PB_REALSEED_ERR)
            continue;
        /* The ordinary testers (complex tangents and seeds) pass. */
        expect(f, v, 0, &z, CR_OK, CR_VERDICT_PASS, NULL);
        expect(f, v, 1, &z, CR_OK, CR_VERDICT_PASS, NULL);
        expect(f, v, 2, &z, CR_OK, CR_VERDICT_PASS, NULL);
    }
    expect(f, F_REALTAN, 3, &z, CR_OK, CR_VERDICT_FAIL, "real tangent 1 vs complex 1+0i");
    expect(f, F_REALTAN_ERR, 3, &z, CR_OK, CR_VERDICT_FAIL, "the frule failed with CR_ETANGENT");
    expect(f, PB_REALSEED, 3, &z, CR_OK, CR_VERDICT_FAIL, "real seed 1 vs complex 1+0i");
    expect(f, PB_REALSEED_ERR, 3, &z, CR_OK, CR_VERDICT_FAIL, "the pullback failed");
    /* NotImplemented for complex seeds only: BROKEN, also as the reference of the
     * embedding check. */
    expect(f, PB_NI_CSEED, 3, &z, CR_OK, CR_VERDICT_BROKEN, NULL);
    expect(f, V_OK, 3, &z, CR_OK, CR_VERDICT_PASS, NULL);
}

/* ---- Explicit tangents, seeds and accumulators ------------------------------------------ */

typedef struct seed_env {
    cr_tangent t;
} seed_env;

static cr_status seed_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    *out = ((seed_env *)env)->t;
    return CR_OK;
}

static void test_explicit_tangents(void **state)
{
    fixture *f = *state;
    for (int v = 0; v < NVARIANTS; v++)
        add_cube(f, v);
    cr_value good = cr_value_function(&k_cube_fns[V_OK], NULL);
    cr_value zbad = cr_value_function(&k_cube_fns[F_ZERO_BAD], NULL);
    cr_test_report r;
    cr_test_opts o = f->opts;

    /* Zero input tangents: finite differences have no direction, the tangent must be 0. */
    cr_tangent zero[2] = {cr_tangent_none(), cr_tangent_zero()};
    o.input_tangents = zero;
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(cr_test_frule(f->arena, &o, &zbad, &k_x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "frule: tangent of the output");
    /* Nothing perturbed at all: the same. */
    cr_tangent none[2] = {cr_tangent_none(), cr_tangent_none()};
    o.input_tangents = none;
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(cr_test_frule(f->arena, &o, &zbad, &k_x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);

    /* A complex input tangent for a real argument cannot be used. */
    cr_tangent cplx[2] = {cr_tangent_none(), cr_tangent_c128(1 + CI)};
    o.input_tangents = cplx;
    assert_int_equal(cr_test_frule(f->arena, &o, &good, &k_x, 1, &r), CR_EINVAL);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "a complex tangent for a real value");

    /* The frule's accumulator, given: NoTangent skips the add!! check; a value is used. */
    cr_tangent acc = cr_tangent_none();
    o.input_tangents = NULL;
    o.output_tangent = &acc;
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &o, &good, &k_x, 1, &r), r);
    size_t without = r.nchecks;
    acc = cr_tangent_f64(0.25);
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(r.nchecks, without + 1);

    /* Thunked input tangents and seeds are the caller's; evaluating them is no mutation. */
    seed_env se = {cr_tangent_f64(-0.5)}, de = {cr_tangent_f64(1.5)};
    cr_tangent th, dth;
    assert_int_equal(cr_tangent_thunk(f->keep, seed_fn, &se, "seed", &th), CR_OK);
    assert_int_equal(cr_tangent_thunk(f->keep, seed_fn, &de, "dx", &dth), CR_OK);
    cr_tangent d[2] = {cr_tangent_none(), dth};
    o.input_tangents = d;
    o.output_tangent = NULL;
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    o.input_tangents = NULL;
    o.output_tangent = &th;
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);

    /* The dot-product test with given tangents and seed: right and wrong rules. */
    cr_tangent dd[2] = {cr_tangent_none(), cr_tangent_f64(0.5)}, yb = cr_tangent_f64(2.0);
    o.input_tangents = dd;
    o.output_tangent = &yb;
    CR_ASSERT_RULE_TEST(cr_test_consistency(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    cr_value noconj = cr_value_function(&k_cube_fns[PB_REALSEED], NULL);
    cr_tangent dz[2] = {cr_tangent_none(), cr_tangent_c128(0.5 + CI)};
    cr_value z = zval();
    o.input_tangents = dz;
    CR_ASSERT_RULE_TEST(cr_test_consistency(f->arena, &o, &good, &z, 1, &r), r);
    /* The real seed 2.0 is what this pullback ignores. */
    assert_int_equal(cr_test_consistency(f->arena, &o, &noconj, &z, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "the frule and the rrule disagree");

    /* A seed that does not fit the output is refused (by a pullback that ignores it). */
    double buf[3] = {1, 2, 3};
    cr_array A = cr_array_vector(buf, 3);
    cr_tangent bad = cr_tangent_array(&A);
    cr_value any = cr_value_function(&k_cube_fns[PB_ANY_SEED], NULL);
    o.input_tangents = NULL;
    o.output_tangent = &bad;
    assert_int_equal(cr_test_rrule(f->arena, &o, &any, &k_x, 1, &r), CR_EINVAL);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "the seed (output cotangent) does not fit the output");
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* ---- The dot-product test and functions without rules or primal ------------------------- */

static const cr_function k_cube_np_fn = {.name = "cube_noprimal", .arity = 1};
static const cr_function k_cube_fo_fn = {.name = "cube_frule_only", .arity = 1};
static const cr_function k_cube_ro_fn = {
    .name = "cube_rrule_only", .arity = 1, .primal = cube_primal};
static const cr_function k_cube_none_fn = {.name = "cube_norules", .arity = 1};

static void test_missing_rules_and_primal(void **state)
{
    fixture *f = *state;
    add_rule(f, &k_cube_np_fn, k_number1, 1, cube_frule, cube_rrule, &k_var[V_OK]);
    add_rule(f, &k_cube_fo_fn, k_number1, 1, cube_frule, NULL, &k_var[V_OK]);
    add_rule(f, &k_cube_ro_fn, k_number1, 1, NULL, cube_rrule, &k_var[V_OK]);
    cr_test_report r;
    /* No primal: the rules' values stand for it (the rrule's, else the frule's). */
    cr_value np = cr_value_function(&k_cube_np_fn, NULL);
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &np, &k_x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, &f->opts, &np, &k_x, 1, &r), r);
    cr_value fo = cr_value_function(&k_cube_fo_fn, NULL);
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &f->opts, &fo, &k_x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    /* No rrule: test_rrule and the dot-product test say so, with a failure. */
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &fo, &k_x, 1, &r), CR_ENORULE);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "no rrule applies to cube_frule_only(f64)");
    assert_int_equal(cr_test_consistency(f->arena, &f->opts, &fo, &k_x, 1, &r), CR_ENORULE);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "no rrule applies");
    /* test_scalar stops at the missing rrule. */
    assert_int_equal(cr_test_scalar(f->arena, &f->opts, &fo, &k_x, 1, &r), CR_ENORULE);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    cr_value ro = cr_value_function(&k_cube_ro_fn, NULL);
    assert_int_equal(cr_test_consistency(f->arena, &f->opts, &ro, &k_x, 1, &r), CR_ENORULE);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "no frule applies");
    /* Neither a primal nor a rule: nothing can be tested, and the report says FAIL. */
    cr_value none = cr_value_function(&k_cube_none_fn, NULL);
    assert_int_equal(cr_test_frule(f->arena, &f->opts, &none, &k_x, 1, &r), CR_ENORULE);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "cube_norules");
    /* A pullback with the wrong number of cotangents: the dot-product test alone fails. */
    add_cube(f, R_NX_WRONG);
    cr_value nx = cr_value_function(&k_cube_fns[R_NX_WRONG], NULL);
    assert_int_equal(cr_test_consistency(f->arena, &f->opts, &nx, &k_x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "1 cotangents, expected 2");
    cr_value z = zval();
    assert_int_equal(cr_test_scalar(f->arena, &f->opts, &nx, &z, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "one for self and one per argument");
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* ---- Integer arguments: NoTangent, not a value or NotImplemented ------------------------ */

typedef enum { SC_NONE, SC_VALUE, SC_NI } scale_int;

static cr_status scale_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_f64(args[0].u.f64 * (double)args[1].u.i64);
    return CR_OK;
}

typedef struct scale_env {
    double n;
    int mode;
} scale_env;

static cr_status scale_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    (void)arena;
    static const cr_notimpl ni = {__FILE__, __LINE__, "∂n"};
    const scale_env *e = env;
    cr_complex g;
    cr_status st = tan_c(*dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(creal(g) * e->n);
    dx[2] = e->mode == SC_VALUE ? cr_tangent_f64(1.0)
            : e->mode == SC_NI  ? cr_tangent_notimpl(&ni)
                                : cr_tangent_none();
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
    e->mode = *(const int *)udata;
    pb->fn = scale_pullback;
    pb->env = e;
    pb->name = "scale_pullback";
    pb->nx = nargs + 1;
    return scale_primal(arena, f, args, nargs, y);
}

static const cr_function k_scale_fns[3] = {
    {.name = "scale_ok", .arity = 2, .primal = scale_primal},
    {.name = "scale_value", .arity = 2, .primal = scale_primal},
    {.name = "scale_ni", .arity = 2, .primal = scale_primal},
};
static const int k_scale_modes[3] = {SC_NONE, SC_VALUE, SC_NI};
static const cr_argspec k_f64_int[2] = {{CR_M_F64, NULL}, {CR_M_INT, NULL}};

/* half(n) = n / 2 of an integer, whose frule or rrule may give a wrong value: test_scalar
 * has no unit tangent to give it, and still calls both rules. */
static cr_status half_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_f64((double)args[0].u.i64 / 2);
    return CR_OK;
}

static cr_status half_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)dargs;
    *dy = cr_tangent_zero();
    cr_status st = half_primal(arena, f, args, nargs, y);
    if (*(const int *)udata == SC_VALUE)
        y->u.f64 += 1; /* wrong */
    return st;
}

static cr_status half_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)dy;
    (void)arena;
    (void)env;
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
    return CR_OK;
}

static cr_status half_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    pb->fn = half_pullback;
    pb->env = NULL;
    pb->name = "half_pullback";
    pb->nx = nargs + 1;
    cr_status st = half_primal(arena, f, args, nargs, y);
    if (*(const int *)udata == SC_NI)
        y->u.f64 -= 1; /* wrong */
    return st;
}

static const cr_function k_half_fns[3] = {
    {.name = "half_ok", .arity = 1, .primal = half_primal},
    {.name = "half_fvalue", .arity = 1, .primal = half_primal},
    {.name = "half_rvalue", .arity = 1, .primal = half_primal},
};
static const cr_argspec k_int1[1] = {{CR_M_INT, NULL}};

/* dbl(n) = 2n, integer to integer: no float anywhere, the rules' values are still checked. */
static cr_status dbl_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                            cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_i64(2 * args[0].u.i64);
    return CR_OK;
}

static cr_status dbl_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    pb->fn = half_pullback;
    pb->env = NULL;
    pb->name = "dbl_pullback";
    pb->nx = nargs + 1;
    cr_status st = dbl_primal(arena, f, args, nargs, y);
    if (*(const int *)udata == SC_NI)
        y->u.i64 += 1; /* wrong */
    return st;
}

static cr_status dbl_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                           const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                           cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)dargs;
    (void)udata;
    *dy = cr_tangent_none();
    return dbl_primal(arena, f, args, nargs, y);
}

static const cr_function k_dbl_fns[2] = {
    {.name = "dbl_ok", .arity = 1, .primal = dbl_primal},
    {.name = "dbl_rvalue", .arity = 1, .primal = dbl_primal},
};

static void test_integer_only_arguments(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < 3; i++)
        add_rule(f, &k_half_fns[i], k_int1, 1, half_frule, half_rrule, &k_scale_modes[i]);
    cr_value n = cr_value_i64(5);
    cr_test_report r;
    cr_value ok = cr_value_function(&k_half_fns[0], NULL);
    CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, &f->opts, &ok, &n, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_true(r.nchecks >= 4);
    cr_value fv = cr_value_function(&k_half_fns[1], NULL);
    assert_int_equal(cr_test_scalar(f->arena, &f->opts, &fv, &n, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "frule: primal value");
    cr_value rv = cr_value_function(&k_half_fns[2], NULL);
    assert_int_equal(cr_test_scalar(f->arena, &f->opts, &rv, &n, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "rrule: primal value");
    /* A missing rule is reported there too. */
    static const cr_function fonly = {.name = "half_fonly", .arity = 1, .primal = half_primal};
    static const cr_function ronly = {.name = "half_ronly", .arity = 1, .primal = half_primal};
    add_rule(f, &fonly, k_int1, 1, half_frule, NULL, &k_scale_modes[SC_NONE]);
    add_rule(f, &ronly, k_int1, 1, NULL, half_rrule, &k_scale_modes[SC_NONE]);
    cr_value fo = cr_value_function(&fonly, NULL), ro = cr_value_function(&ronly, NULL);
    assert_int_equal(cr_test_scalar(f->arena, &f->opts, &fo, &n, 1, &r), CR_ENORULE);
    assert_contains(r.message, "no rrule applies to half_fonly(int)");
    assert_int_equal(cr_test_scalar(f->arena, &f->opts, &ro, &n, 1, &r), CR_ENORULE);
    assert_contains(r.message, "no frule applies to half_ronly(int)");
    /* An integer output too. */
    add_rule(f, &k_dbl_fns[0], k_int1, 1, dbl_frule, dbl_rrule, &k_scale_modes[SC_NONE]);
    add_rule(f, &k_dbl_fns[1], k_int1, 1, dbl_frule, dbl_rrule, &k_scale_modes[SC_NI]);
    cr_value d0 = cr_value_function(&k_dbl_fns[0], NULL);
    CR_ASSERT_RULE_TEST(cr_test_scalar(f->arena, &f->opts, &d0, &n, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    cr_value d1 = cr_value_function(&k_dbl_fns[1], NULL);
    assert_int_equal(cr_test_scalar(f->arena, &f->opts, &d1, &n, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "rrule: primal value");
}

static void test_integer_argument_cotangents(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < 3; i++)
        add_rule(f, &k_scale_fns[i], k_f64_int, 2, NULL, scale_rrule, &k_scale_modes[i]);
    cr_value xs[2] = {cr_value_f64(0.75), cr_value_i64(3)};
    cr_test_report r;
    cr_value ok = cr_value_function(&k_scale_fns[0], NULL);
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &ok, xs, 2, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    cr_value val = cr_value_function(&k_scale_fns[1], NULL);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &val, xs, 2, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "argument 2 (i64) (not perturbable)");
    assert_contains(r.message, "a f64 cotangent for an argument that cannot be perturbed");
    cr_value ni = cr_value_function(&k_scale_fns[2], NULL);
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &f->opts, &ni, xs, 2, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_BROKEN);
    assert_contains(r.message, "NoTangent would be right");
}

/* ---- Finite-difference method and options ------------------------------------------------ */

CR_SCALAR_EVALS(cov_farsin, 1, 1, Y[0] = sin(x[0]), D[0] = cos(x[0]) * (1 + 1e-6))
static const cr_scalar_rule cov_farsin_row = CR_SCALAR_ROW(cov_farsin);
static const cr_function cov_farsin_fn = CR_SCALAR_FUNCTION("cov_farsin", cov_farsin_row, 1);

static void test_fd_method_and_options(void **state)
{
    fixture *f = *state;
    cr_value good = add_cube(f, V_OK);
    assert_int_equal(cr_scalar_rule_register(f->reg, &cov_farsin_fn, &cov_farsin_row), CR_OK);
    cr_value far = cr_value_function(&cov_farsin_fn, NULL);
    cr_test_report r;
    cr_test_opts o = f->opts;
    /* A method of the caller's: right rules pass, a relative error of 1e-6 fails. */
    cr_fdm m;
    assert_int_equal(cr_fdm_forward(4, 1, &m), CR_OK);
    o.fdm = &m;
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(cr_test_rrule(f->arena, &o, &far, &k_x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    /* A custom grid (its confirmation uses a central grid). */
    static const double grid[] = {-2, -1, 1, 2, 3};
    assert_int_equal(cr_fdm_from_grid(grid, 5, 1, &m), CR_OK);
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(cr_test_frule(f->arena, &o, &far, &k_x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    o.fdm = NULL;
    /* Options: a fixed step, also one longer than the tester's guard (a tenth of |x|),
     * which then gives way to the adaptive step; an old struct_size. */
    cr_fd_opts fo = {0};
    fo.step = 1e-3;
    o.fd_opts = &fo;
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    fo.step = 0.5;
    CR_ASSERT_RULE_TEST(cr_test_frule(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(cr_test_frule(f->arena, &o, &far, &k_x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    fo.step = 0;
    fo.struct_size = (uint32_t)offsetof(cr_fd_opts, condition);
    fo.adapt = 2;
    CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &o, &good, &k_x, 1, &r), r);
    assert_int_equal(cr_test_rrule(f->arena, &o, &far, &k_x, 1, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    /* Invalid options or methods are refused as such, not taken for points outside the
     * domain. */
    cr_fd_opts bad = {0};
    bad.condition = -1;
    o.fd_opts = &bad;
    assert_int_equal(cr_test_rrule(f->arena, &o, &good, &k_x, 1, &r), CR_EINVAL);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "finite-difference");
    bad.condition = 0;
    bad.adapt = 100;
    assert_int_equal(cr_test_frule(f->arena, &o, &good, &k_x, 1, &r), CR_EINVAL);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    o.fd_opts = NULL;
    cr_fdm broken;
    memset(&broken, 0, sizeof broken);
    o.fdm = &broken;
    assert_int_equal(cr_test_scalar(f->arena, &o, &good, &k_x, 1, &r), CR_EINVAL);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* ---- test_scalar's outputs, the primal's domain, poles ----------------------------------- */

/* vec2(x) = [x, 2x]: scalar argument, array output. */
static cr_status vec2_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)f;
    (void)n;
    cr_array *a;
    size_t shape[1] = {2};
    cr_status st = cr_array_new(arena, CR_DT_F64, 1, shape, &a);
    if (st != CR_OK)
        return st;
    ((double *)a->data)[0] = args[0].u.f64;
    ((double *)a->data)[1] = 2 * args[0].u.f64;
    *out = cr_value_array(a);
    return CR_OK;
}

static const cr_function k_vec2_fn = {.name = "vec2", .arity = 1, .primal = vec2_primal};

/* A tuple output with a non-scalar field, and one with too many fields. */
typedef struct mixed_out {
    double a;
    cr_array arr;
} mixed_out;
static const cr_field k_mixed_fields[] = {
    {"a", offsetof(mixed_out, a), CR_KIND_F64, NULL},
    {"arr", offsetof(mixed_out, arr), CR_KIND_ARRAY, NULL},
};
static const cr_type k_mixed_type = {"mixed_out", sizeof(mixed_out), 2, k_mixed_fields};

typedef struct nine {
    double v[9];
} nine;
#define NF(i)                                                             \
    {                                                                     \
        NULL, offsetof(nine, v) + (i) * sizeof(double), CR_KIND_F64, NULL \
    }
static const cr_field k_nine_fields[9] = {NF(0), NF(1), NF(2), NF(3), NF(4),
                                          NF(5), NF(6), NF(7), NF(8)};
static const cr_type k_nine_type = {"nine", sizeof(nine), 9, k_nine_fields};

static cr_status mixed_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)f;
    (void)n;
    mixed_out *m = cr_arena_calloc(arena, 1, sizeof *m, _Alignof(mixed_out));
    if (m == NULL)
        return CR_ENOMEM;
    m->a = args[0].u.f64;
    *out = cr_value_struct(&k_mixed_type, m);
    return CR_OK;
}

static cr_status nine_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)f;
    (void)n;
    nine *m = cr_arena_calloc(arena, 1, sizeof *m, _Alignof(nine));
    if (m == NULL)
        return CR_ENOMEM;
    for (int i = 0; i < 9; i++)
        m->v[i] = i * args[0].u.f64;
    *out = cr_value_struct(&k_nine_type, m);
    return CR_OK;
}

static const cr_function k_mixed_fn = {.name = "mixed", .arity = 1, .primal = mixed_primal};
static const cr_function k_nine_fn = {.name = "nine", .arity = 1, .primal = nine_primal};

/* sqrt whose primal refuses negative arguments with CR_EDOMAIN. */
static cr_status dsqrt_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)f;
    (void)n;
    if (args[0].u.f64 < 0)
        return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "dsqrt: negative argument");
    *out = cr_value_f64(sqrt(args[0].u.f64));
    return CR_OK;
}

static const cr_function k_dsqrt_fn = {.name = "dsqrt", .arity = 1, .primal = dsqrt_primal};

CR_SCALAR_EVALS(cov_tan, 1, 1, Y[0] = tan(x[0]), D[0] = 1 + Y[0] * Y[0])
static const cr_scalar_rule cov_tan_row = CR_SCALAR_ROW(cov_tan);
static const cr_function cov_tan_fn = CR_SCALAR_FUNCTION("cov_tan", cov_tan_row, 1);

static void test_outputs_domains_poles(void **state)
{
    fixture *f = *state;
    cr_test_report r;
    const cr_function *fns[] = {&k_vec2_fn, &k_mixed_fn, &k_nine_fn};
    for (size_t i = 0; i < 3; i++) {
        cr_value fv = cr_value_function(fns[i], NULL);
        assert_int_equal(cr_test_scalar(f->arena, &f->opts, &fv, &k_x, 1, &r), CR_EINVAL);
        assert_int_equal(r.verdict, CR_VERDICT_FAIL);
        assert_contains(r.message, "the output is not a scalar or a tuple of scalars");
    }
    /* A primal that refuses the point: not testable there, and said so. */
    cr_value ds = cr_value_function(&k_dsqrt_fn, NULL), neg = cr_value_f64(-1);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &ds, &neg, 1, &r), CR_EDOMAIN);
    assert_contains(r.message, "the primal fails with CR_EDOMAIN here");
    /* A pole inside the stencil of the j'vp (the frule's is tested in test_testing). */
    assert_int_equal(cr_scalar_rule_register(f->reg, &cov_tan_fn, &cov_tan_row), CR_OK);
    cr_value tv = cr_value_function(&cov_tan_fn, NULL), pole = cr_value_f64(1.5707963267948966);
    assert_int_equal(cr_test_rrule(f->arena, &f->opts, &tv, &pole, 1, &r), CR_EDOMAIN);
    assert_contains(r.message, "pole");
    /* The scalar tester stops at the first point it cannot test, and says why. */
    assert_int_equal(cr_test_scalar(f->arena, &f->opts, &tv, &pole, 1, &r), CR_EDOMAIN);
    assert_contains(r.message, "could not test at this point");
    assert_int_equal(cr_arena_used(f->arena), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cube_good_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failing_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tangents_that_do_not_fit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_embedding_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_explicit_tangents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_rules_and_primal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integer_argument_cotangents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integer_only_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fd_method_and_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outputs_domains_poles, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
