/*
 * Tests of the higher-order array rules (map, sum(f, A), foldl, accumulate) without an AD
 * engine: every registration through the rule tester (frule and rrule against finite
 * differences of the primal, the dot-product test, thunked seeds, add!!) at the points its
 * sampler draws, then what the samplers cannot pin down: the order of a fold, f32 kept,
 * complex arguments, structured and strided arrays, zeros and a wide dynamic range in a product
 * fold, every kind of init, empty and one-element vectors, InplaceableThunks accumulating without
 * being evaluated, a functor with hand-written rules (∂f summed over the elements), and the errors
 * (shapes, arities, real-only rows, a function without rules and no AD, a failing function).
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/testing_cmocka.h>

static cr_tangent unthunked(cr_tangent t)
{
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(t, &v), CR_OK);
    return v;
}

static const cr_value *fn_named(const char *name, cr_value *store)
{
    const cr_function *fn = cr_registry_find(cr_registry_builtin(), name);
    assert_non_null(fn);
    *store = cr_value_function(fn, NULL);
    return store;
}

/* rrule, frule and the dot-product test of f at args, with debug checks on. */
static void check_rules_dbg(fixture *fx, const cr_config *cfg, const cr_value *f,
                            const cr_value *args, size_t nargs, bool debug)
{
    cr_ctx_set_debug(fx->ctx, debug);
    cr_test_opts opts = {0};
    opts.cfg = cfg;
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, &opts, f, args, nargs, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, &opts, f, args, nargs, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_consistency(fx->arena, &opts, f, args, nargs, &r), r);
}

static void check_rules(fixture *fx, const cr_config *cfg, const cr_value *f, const cr_value *args,
                        size_t nargs)
{
    check_rules_dbg(fx, cfg, f, args, nargs, true);
}

/* ---- Every registration through the rule tester ------------------------------------------ */

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    size_t tested = 0, seen_sum_f = 0;
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        const char *name = info.fn->name;
        bool sum_f = strcmp(name, "sum") == 0 && info.nargs > 0 && info.args[0].mask == CR_M_FUNC;
        if (strcmp(name, "map") != 0 && strcmp(name, "foldl") != 0 &&
            strcmp(name, "accumulate") != 0 && !sum_f)
            continue;
        seen_sum_f += sum_f;
        assert_true(cr_test_registration_usable(&info));
        cr_test_opts opts = {0};
        opts.npoints = 24;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        char sig[160], buf[1200];
        cr_signature_str(name, info.args, info.nargs, info.variadic, sig, sizeof sig);
        cr_test_report_format(&r, buf, sizeof buf);
        if (st != CR_OK || r.verdict == CR_VERDICT_FAIL || r.npoints < 20) {
            print_error("%s: %s (%s; %s)\n", sig, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
            fail();
        }
        tested++;
    }
    assert_int_equal(seen_sum_f, 2);
    assert_int_equal(tested, 9); /* map x3, sum(f) x2, foldl x2, accumulate x2 */
}

/* ---- Values and the order of a fold -------------------------------------------------------- */

static void test_values(void **state)
{
    fixture *fx = *state;
    double v[4] = {1, 2, 3, 4};
    cr_array V = cr_array_vector(v, 4);
    cr_value y, sinv, args[3] = {cr_fn_sub, cr_value_array(&V), cr_value_f64(10)};
    /* foldl is a left fold: ((((10 - 1) - 2) - 3) - 4) */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_foldl, args, 3, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    ASSERT_DBL(y.u.f64, 0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_foldl, args, 2, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 1 - 2 - 3 - 4);
    /* accumulate(-, v) = (1, -1, -4, -8); with an integer init 1: (0, -2, -5, -9) */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_accumulate, args, 2, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_ARRAY);
    assert_int_equal(y.u.arr->dtype, CR_DT_F64);
    const double acc2[4] = {1, -1, -4, -8}, acc3[4] = {0, -2, -5, -9};
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), acc2[i]);
    args[2] = cr_value_i64(1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_accumulate, args, 3, &y), CR_OK);
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), acc3[i]);
    /* The same through the rrules. */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_accumulate, args, 3, &y, &pb), CR_OK);
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), acc3[i]);
    /* map and sum(f, A; dims) agree with the scalar function. */
    double a[6] = {0.5, -1, 2, 1.5, 0.25, -0.75};
    cr_array A = cr_array_matrix(a, 2, 3);
    cr_value margs[2] = {*fn_named("sin", &sinv), cr_value_array(&A)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_map, margs, 2, &y), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), sin(a[i]));
    cr_value sargs[3] = {margs[0], margs[1], cr_value_i64(1)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum, sargs, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->ndim, 2);
    assert_int_equal(y.u.arr->shape[0], 2);
    assert_int_equal(y.u.arr->shape[1], 1);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 1)), sin(1.5) + sin(0.25) + sin(-0.75), 1e-15);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sum, sargs, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    double s = 0;
    for (size_t i = 0; i < 6; i++)
        s += sin(a[i]);
    ASSERT_CLOSE(y.u.f64, s, 1e-15);
}

/* ---- Element types ---------------------------------------------------------------------- */

static void test_element_types(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    float af[6] = {0.5f, -1, 2, 1.5f, 0.25f, -0.75f};
    size_t sh[2] = {2, 3}, n4 = 4;
    cr_array Af, Vf;
    cr_array_view_init(&Af, af, CR_DT_F32, 2, sh, NULL);
    cr_array_view_init(&Vf, af, CR_DT_F32, 1, &n4, NULL);
    cr_value sinv, y;
    fn_named("sin", &sinv);
    /* f32 stays f32: results and cotangents. */
    cr_value args[3] = {sinv, cr_value_array(&Af)};
    cr_pullback pb;
    cr_tangent dx[4];
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_map, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    cr_tangent dy = cr_tangent_array(y.u.arr);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(unthunked(dx[2]).u.arr->dtype, CR_DT_F32);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sum, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    dy = cr_tangent_f32(1.5f);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(unthunked(dx[2]).u.arr->dtype, CR_DT_F32);
    check_rules(fx, NULL, &cr_fn_map, args, 2);
    check_rules(fx, NULL, &cr_fn_sum, args, 2);
    cr_value fargs[3] = {cr_fn_mul, cr_value_array(&Vf), cr_value_f32(1.25f)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_foldl, fargs, 3, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    dy = cr_tangent_f32(1.0f);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(unthunked(dx[2]).u.arr->dtype, CR_DT_F32);
    assert_int_equal(dx[3].tag, CR_TAN_F32);
    check_rules(fx, NULL, &cr_fn_foldl, fargs, 3);
    check_rules(fx, NULL, &cr_fn_accumulate, fargs, 2);
    /* An f64 init promotes an f32 vector. */
    fargs[2] = cr_value_f64(1.25);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_accumulate, fargs, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F64);

    /* Complex: holomorphic rows (the pullback conjugates), a complex init of a real vector,
     * and cabs, a hand-written rule with a real result (one rrule per element). */
    cr_complex z[4] = {CMPLX(0.5, 1), CMPLX(-1, 0.25), CMPLX(1.5, -0.5), CMPLX(0.75, 0.5)};
    cr_array Z, Z22;
    size_t sh22[2] = {2, 2};
    cr_array_view_init(&Z, z, CR_DT_C128, 1, &n4, NULL);
    cr_array_view_init(&Z22, z, CR_DT_C128, 2, sh22, NULL);
    cr_value expv, cargs[3] = {sinv, cr_value_array(&Z22)};
    check_rules(fx, NULL, &cr_fn_map, cargs, 2);
    cargs[0] = *fn_named("exp", &expv);
    check_rules(fx, NULL, &cr_fn_sum, cargs, 2);
    cargs[2] = cr_value_i64(0);
    check_rules(fx, NULL, &cr_fn_sum, cargs, 3);
    cargs[0] = cr_fn_cabs;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum, cargs, 2, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    ASSERT_CLOSE(y.u.f64, hypot(0.5, 1) + hypot(-1, 0.25) + hypot(1.5, -0.5) + hypot(0.75, 0.5),
                 1e-15);
    check_rules(fx, NULL, &cr_fn_sum, cargs, 2);
    check_rules(fx, NULL, &cr_fn_map, cargs, 2);
    cr_value zargs[3] = {cr_fn_mul, cr_value_array(&Z), cr_value_c128(CMPLX(0.5, -0.25))};
    check_rules(fx, NULL, &cr_fn_foldl, zargs, 3);
    check_rules(fx, NULL, &cr_fn_accumulate, zargs, 2);
    double r[4] = {0.5, 1.5, -0.75, 1.25};
    cr_array R = cr_array_vector(r, 4);
    zargs[1] = cr_value_array(&R);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_accumulate, zargs, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_C128);
    check_rules(fx, NULL, &cr_fn_accumulate, zargs, 3);
}

/* ---- Structured and strided arguments ------------------------------------------------ */

static void test_structured(void **state)
{
    fixture *fx = *state;
    double m[9] = {0.5, -1, 2, 1.5, 0.25, -0.75, 1.25, 0.3, -0.4};
    cr_array U = cr_array_matrix(m, 3, 3), D = cr_array_matrix(m, 3, 3), T = U;
    U.structure = CR_MAT_UPPER;
    D.structure = CR_MAT_DIAGONAL;
    D.strides[0] = 4; /* the diagonal of the 3x3 buffer */
    D.strides[1] = 0;
    T.strides[0] = 1; /* a transposed view */
    T.strides[1] = 3;
    cr_value expv, sinv;
    fn_named("exp", &expv);
    fn_named("sin", &sinv);
    const cr_array *mats[3] = {&U, &D, &T};
    for (size_t i = 0; i < 3; i++) {
        cr_value args[3] = {expv, cr_value_array((cr_array *)mats[i]), cr_value_i64(1)};
        check_rules(fx, NULL, &cr_fn_sum, args, 2);
        check_rules(fx, NULL, &cr_fn_sum, args, 3);
        args[0] = sinv;
        check_rules(fx, NULL, &cr_fn_map, args, 2);
    }
    /* The cotangent of a Diagonal argument is Diagonal. */
    cr_value args[2] = {expv, cr_value_array(&D)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sum, args, 2, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_f64(1), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(unthunked(dx[2]).u.arr->structure, CR_MAT_DIAGONAL);
    /* A vector with a negative stride (reversed) and one with a stride of 3. */
    cr_array R = cr_array_vector(m + 8, 9), S = cr_array_vector(m, 3);
    R.strides[0] = -1;
    S.strides[0] = 3;
    cr_value fargs[3] = {cr_fn_mul, cr_value_array(&R), cr_value_f64(0.5)};
    check_rules(fx, NULL, &cr_fn_foldl, fargs, 3);
    fargs[1] = cr_value_array(&S);
    check_rules(fx, NULL, &cr_fn_accumulate, fargs, 2);
}

/* ---- Folds: zeros, a wide range, init of every kind, short vectors ---------------------- */

static void test_fold_edges(void **state)
{
    fixture *fx = *state;
    /* Zeros in a product: the row's partials need no division. */
    double v[5] = {2, 0, 3, 0, 0.5};
    cr_array V = cr_array_vector(v, 5);
    cr_value args[3] = {cr_fn_mul, cr_value_array(&V), cr_value_f64(1.5)}, y;
    check_rules(fx, NULL, &cr_fn_foldl, args, 3);
    check_rules(fx, NULL, &cr_fn_accumulate, args, 3);
    v[3] = 4; /* one zero */
    check_rules(fx, NULL, &cr_fn_foldl, args, 2);
    /* A dynamic range of 1e8 in a product, and a sum that cancels. */
    double w[4] = {1e4, 3e-4, -2, 0.5};
    cr_array W = cr_array_vector(w, 4);
    args[1] = cr_value_array(&W);
    check_rules(fx, NULL, &cr_fn_foldl, args, 3);
    args[0] = cr_fn_add;
    double c[4] = {1e8, 1, -1e8, 0.25};
    cr_array C = cr_array_vector(c, 4);
    args[1] = cr_value_array(&C);
    check_rules(fx, NULL, &cr_fn_accumulate, args, 2);
    /* An integer or bool init: NoTangent. */
    args[0] = cr_fn_mul;
    args[1] = cr_value_array(&V);
    args[2] = cr_value_i64(3);
    check_rules(fx, NULL, &cr_fn_foldl, args, 3);
    args[2] = cr_value_bool(true);
    check_rules(fx, NULL, &cr_fn_accumulate, args, 3);
    cr_pullback pb;
    cr_tangent dy = cr_tangent_f64(1), dx[4];
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_foldl, args, 3, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_NONE);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    assert_int_equal(dx[3].tag, CR_TAN_NONE);
    /* One element without init: the fold is v[0]. */
    cr_array V1 = cr_array_vector(v, 1);
    args[1] = cr_value_array(&V1);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_foldl, args, 2, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 2);
    dy = cr_tangent_f64(0.75);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(unthunked(dx[2]).u.arr, 0)), 0.75);
    check_rules(fx, NULL, &cr_fn_accumulate, args, 2);
    /* Empty: foldl gives init (whose cotangent is the seed), accumulate an empty vector;
     * foldl without init has nothing to fold. */
    cr_array V0 = cr_array_vector(v, 0);
    args[1] = cr_value_array(&V0);
    args[2] = cr_value_f64(2.5);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_foldl, args, 3, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 2.5);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    ASSERT_DBL(dx[3].u.f64, 0.75);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_accumulate, args, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_foldl, args, 2, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "foldl");
}

/* ---- InplaceableThunks ------------------------------------------------------------------ */

/* The cotangent t of an f64 argument of n elements, added into a writable zero array with
 * add!! (the thunk must stay unevaluated), equals its value. */
static void check_inplace(fixture *fx, cr_tangent t, size_t n)
{
    assert_true(cr_tangent_is_inplaceable_thunk(t));
    cr_array *acc;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 1, &n, &acc), CR_OK);
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), t, &out), CR_OK);
    assert_int_equal(t.u.thunk->state, 0);
    cr_tangent v = unthunked(t);
    for (size_t i = 0; i < n; i++)
        ASSERT_DBL(((double *)acc->data)[i], creal(cr_array_get_linear(v.u.arr, i)));
}

static void test_inplace(void **state)
{
    fixture *fx = *state;
    double a[5] = {0.5, -1, 2, 1.5, 0.25};
    cr_array A = cr_array_vector(a, 5);
    cr_value sinv, y, args[3] = {*fn_named("sin", &sinv), cr_value_array(&A), cr_value_f64(2)};
    cr_pullback pb;
    cr_tangent dy = cr_tangent_f64(3), dx[4];
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sum, args, 2, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    check_inplace(fx, dx[2], 5);
    args[0] = cr_fn_mul;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_foldl, args, 3, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(dx[3].tag, CR_TAN_F64); /* init: a number, not a thunk */
    check_inplace(fx, dx[2], 5);
    double g[5] = {1, -2, 0.5, 0.25, 3};
    cr_array G = cr_array_vector(g, 5);
    dy = cr_tangent_array(&G);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_accumulate, args, 2, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    check_inplace(fx, dx[2], 5);
}

/* ---- A functor with hand-written rules: ∂f sums the elements' ∂self ----------------------- */

typedef struct affine {
    double a, b;
} affine;
static const cr_field affine_fields[2] = {
    {"a", offsetof(affine, a), CR_KIND_F64, NULL},
    {"b", offsetof(affine, b), CR_KIND_F64, NULL},
};
static const cr_type affine_type = {"affine", sizeof(affine), 2, affine_fields};

static cr_status affine_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    (void)arena;
    (void)nargs;
    const affine *s = f->u.func.self;
    *out = cr_value_f64(s->a * args[0].u.f64 + s->b);
    return CR_OK;
}
static const cr_function affine_fn = {
    .name = "affine", .arity = 1, .primal = affine_primal, .self_type = &affine_type};

typedef struct affine_env {
    double a, x;
} affine_env;

static cr_status affine_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    (void)nx;
    const affine_env *e = env;
    cr_tangent g;
    cr_status st = cr_tangent_unthunk(*dy, &g);
    if (st != CR_OK)
        return st;
    static const char *const names[2] = {"a", "b"};
    const cr_tangent parts[2] = {cr_tangent_f64(e->x * g.u.f64), g};
    dx[1] = cr_tangent_f64(e->a * g.u.f64);
    return cr_tangent_struct(arena, &affine_type, names, parts, 2, &dx[0]);
}

static cr_status affine_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    affine_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(affine_env));
    if (st != CR_OK || e == NULL)
        return st != CR_OK ? st : CR_ENOMEM;
    e->a = ((const affine *)f->u.func.self)->a;
    e->x = args[0].u.f64;
    *pb = (cr_pullback){affine_pullback, e, "affine_pullback", nargs + 1};
    return CR_OK;
}

/* ẏ = a ẋ + ȧ x + ḃ */
static cr_status affine_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    const affine *s = f->u.func.self;
    cr_tangent da, db, dxx;
    if (cr_tangent_unthunk(dargs[1], &dxx) != CR_OK ||
        cr_tangent_getfield(dargs[0], "a", &da) != CR_OK ||
        cr_tangent_getfield(dargs[0], "b", &db) != CR_OK)
        return CR_ETANGENT;
    double t = (dxx.tag == CR_TAN_F64 ? s->a * dxx.u.f64 : 0) +
               (da.tag == CR_TAN_F64 ? da.u.f64 * args[0].u.f64 : 0) +
               (db.tag == CR_TAN_F64 ? db.u.f64 : 0);
    *dy = cr_tangent_f64(t);
    return CR_OK;
}

static void test_functor(void **state)
{
    fixture *fx = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, NULL, &reg), CR_OK);
    static const cr_argspec sig[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &affine_fn,
                       .nargs = 1,
                       .args = sig,
                       .frule = affine_frule,
                       .rrule = affine_rrule};
    assert_int_equal(cr_registry_add(reg, &def), CR_OK);
    const cr_config cfg = {.struct_size = sizeof cfg, .registry = reg};
    affine self = {1.5, -0.25};
    double a[6] = {0.5, -1, 2, 1.5, 0.25, -0.75};
    cr_array A = cr_array_matrix(a, 2, 3);
    cr_value args[3] = {cr_value_function(&affine_fn, &self), cr_value_array(&A), cr_value_i64(0)};
    /* The tester perturbs the functor's fields: ∂f is checked against finite differences. */
    check_rules_dbg(fx, &cfg, &cr_fn_map, args, 2, false);
    check_rules_dbg(fx, &cfg, &cr_fn_sum, args, 2, false);
    check_rules_dbg(fx, &cfg, &cr_fn_sum, args, 3, false);
    cr_value y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_map, args, 2, &y, &pb), CR_OK);
    assert_string_equal(pb.name, "map_pullback");
    cr_tangent dy = cr_tangent_array(y.u.arr), dx[3], db;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_STRUCT);
    /* ∂b = Σ ȳ = Σ y */
    double s = 0;
    for (size_t i = 0; i < 6; i++)
        s += 1.5 * a[i] - 0.25;
    assert_int_equal(cr_tangent_getfield(dx[1], "b", &db), CR_OK);
    ASSERT_CLOSE(db.u.f64, s, 1e-15);
    cr_registry_free(reg);
}

/* ---- Errors ------------------------------------------------------------------------------- */

/* A function with a primal and no rules; its primal fails for negative arguments. */
static cr_status bare_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                             cr_value *out)
{
    (void)f;
    (void)nargs;
    double x = args[0].kind == CR_KIND_F32 ? (double)args[0].u.f32 : args[0].u.f64;
    if (x < 0)
        return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "bare: negative argument %g", x);
    *out = cr_value_f64(sqrt(x));
    return CR_OK;
}
static const cr_function bare_fn = {.name = "bare", .arity = 1, .primal = bare_primal};

static cr_status bare2_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)f;
    (void)nargs;
    (void)arena;
    *out = cr_value_f64(args[0].u.f64 * args[1].u.f64);
    return CR_OK;
}
static const cr_function bare2_fn = {.name = "bare2", .arity = 2, .primal = bare2_primal};

static void test_errors(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.5, 1, 2, 1.5, 0.25, 0.75}, b[4] = {1, 2, 3, 4};
    cr_array A = cr_array_matrix(a, 2, 3), B = cr_array_matrix(b, 2, 2), V = cr_array_vector(b, 4);
    cr_value hyp, sinv, y;
    fn_named("hypot", &hyp);
    fn_named("sin", &sinv);
    /* map: arrays of one shape, arrays only. */
    cr_value args[3] = {cr_fn_mul, cr_value_array(&A), cr_value_array(&B)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_map, args, 3, &y), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "map: arrays of shapes (2,3) and (2,2)");
    args[2] = cr_value_f64(2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_map, args, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "map: argument 3 is a f64");
    /* A row of the wrong arity. */
    args[0] = hyp;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum, args, 2, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "sum: hypot takes 2 arguments");
    args[0] = sinv;
    args[1] = cr_value_array(&V);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_foldl, args, 2, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "foldl: sin takes 1 argument");
    /* foldl takes a vector; sum's dims must exist; a real-only row, complex data. */
    args[0] = cr_fn_mul;
    args[1] = cr_value_array(&A);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_foldl, args, 2, &y), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "foldl: takes a vector");
    args[0] = sinv;
    args[2] = cr_value_i64(2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum, args, 3, &y), CR_EINVAL);
    cr_complex z[2] = {CMPLX(1, 1), CMPLX(2, -1)};
    size_t n2 = 2;
    cr_array Z;
    cr_array_view_init(&Z, z, CR_DT_C128, 1, &n2, NULL);
    args[0] = hyp;
    args[1] = cr_value_array(&Z);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_accumulate, args, 2, &y), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(fx->ctx), "accumulate: hypot is defined for real arguments");
    args[2] = cr_value_array(&V);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_foldl, args, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "init is a array");

    /* A function without rules: its primal runs, but differentiating it needs an AD. */
    cr_value bare = cr_value_function(&bare_fn, NULL), bare2 = cr_value_function(&bare2_fn, NULL);
    cr_value bargs[3] = {bare, cr_value_array(&A), cr_value_i64(1)};
    cr_pullback pb;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_map, bargs, 2, &y), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 2)), sqrt(2));
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_map, bargs, 2, &y, &pb), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(fx->ctx), "map: no rrule for bare(f64)");
    assert_contains(cr_ctx_errmsg(fx->ctx), "CR_CAP_REVERSE");
    cr_tangent dargs[4] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_array(&A)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_map, bargs, 2, &y, &dy), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(fx->ctx), "map: no frule for bare(f64)");
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sum, bargs, 3, &y, &pb), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(fx->ctx), "sum: no rrule for bare(f64)");
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_broadcast, bargs, 2, &y, &pb), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(fx->ctx), "broadcast: no rrule for bare(f64)");
    cr_value fargs[2] = {bare2, cr_value_array(&V)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_foldl, fargs, 2, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 24);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_foldl, fargs, 2, &y, &pb), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(fx->ctx), "foldl: no rrule for bare2(f64, f64)");
    dargs[2] = cr_tangent_array(&V);
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_accumulate, fargs, 2, &y, &dy),
                     CR_ENOCAP);
    /* A failure inside f keeps its status; the message says where. */
    a[4] = -0.25;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_map, bargs, 2, &y), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(fx->ctx), "map: bare failed at element 4: negative");
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum, bargs, 3, &y), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(fx->ctx), "sum: bare failed at element 4");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_element_types, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_structured, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_fold_edges, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inplace, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_functor, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
