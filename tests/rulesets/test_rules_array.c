/*
 * Tests of the array rule family (rules_array.h): every registered rule through the rule
 * tester (frule and rrule against finite differences of the primal, the dot-product test,
 * thunked seeds, add!!) at the points its sampler draws, then the conventions the
 * samplers cannot pin down: ties, zeros in prod, repeated indices, overflow in softmax,
 * precision and structure of cotangents, InplaceableThunks, the broadcast fallback.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/testing_cmocka.h>

/* ---- Helpers ------------------------------------------------------------------------------ */

/* Element i of an array tangent (thunks unthunked), read through the structure. */
static cr_complex tan_at(cr_tangent t, size_t i)
{
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(t, &v), CR_OK);
    if (v.tag == CR_TAN_ZERO)
        return 0;
    assert_int_equal(v.tag, CR_TAN_ARRAY);
    return cr_array_get_linear(v.u.arr, i);
}

static cr_tangent unthunked(cr_tangent t)
{
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(t, &v), CR_OK);
    return v;
}

static const char *const k_array_fns[] = {
    "reshape",    "transpose", "adjoint", "permutedims", "sum",      "mean", "prod",      "cumsum",
    "maximum",    "minimum",   "findmax", "findmin",     "getindex", "view", "broadcast", "softmax",
    "logsoftmax", "logsumexp", "reverse", "circshift",   "repeat",   "cat",  "stack",     "fill",
    "dropdims",   "diag",      "diagm",   "triu",        "tril",     "var",  "std",       "extrema",
    "cumprod",    "norm",      "sort",    "partialsort", "vcat",     "hcat",
};

static bool in_family(const char *name)
{
    for (size_t i = 0; i < sizeof k_array_fns / sizeof k_array_fns[0]; i++)
        if (strcmp(name, k_array_fns[i]) == 0)
            return true;
    return false;
}

/* ---- Every rule through the rule tester ------------------------------------------------------ */

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    size_t tested = 0;
    bool seen[sizeof k_array_fns / sizeof k_array_fns[0]] = {false};
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        if (!in_family(info.fn->name))
            continue;
        assert_non_null(info.test);
        assert_true(cr_test_registration_usable(&info));
        for (size_t k = 0; k < sizeof k_array_fns / sizeof k_array_fns[0]; k++)
            if (strcmp(info.fn->name, k_array_fns[k]) == 0)
                seen[k] = true;
        cr_test_opts opts = {0};
        opts.npoints = 12;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        char sig[160];
        cr_signature_str(info.fn->name, info.args, info.nargs, info.variadic, sig, sizeof sig);
        if (st != CR_OK || r.verdict == CR_VERDICT_FAIL) {
            char buf[1200];
            cr_test_report_format(&r, buf, sizeof buf);
            print_error("%s: %s (%s; %s)\n", sig, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
            fail();
        }
        assert_true(r.npoints >= 6);
        tested++;
    }
    for (size_t k = 0; k < sizeof k_array_fns / sizeof k_array_fns[0]; k++)
        if (!seen[k]) {
            print_error("no rule registered for %s\n", k_array_fns[k]);
            fail();
        }
    assert_true(tested >= 30);
}

/* ---- Values and conventions ------------------------------------------------------------ */

static void test_sum_mean_values(void **state)
{
    fixture *fx = *state;
    double w[6] = {1, 2, 3, 4, 5, 6};
    cr_array W = cr_array_matrix(w, 2, 3);
    cr_value args[2] = {cr_value_array(&W), cr_value_i64(1)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sum, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_ARRAY);
    assert_int_equal(y.u.arr->ndim, 2);
    assert_int_equal(y.u.arr->shape[0], 2);
    assert_int_equal(y.u.arr->shape[1], 1);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 0)), 6);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 1)), 15);
    double g[2] = {10, 20};
    size_t gs[2] = {2, 1};
    cr_array G;
    cr_array_view_init(&G, g, CR_DT_F64, 2, gs, NULL);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), i < 3 ? 10 : 20);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_mean, args, 1, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 3.5);
}

static void test_prod_zeros(void **state)
{
    fixture *fx = *state;
    /* One zero: only its cotangent is nonzero (the product of the others), no NaN. */
    double x1[4] = {2, 0, 3, -1};
    cr_array X1 = cr_array_vector(x1, 4);
    cr_value a = cr_value_array(&X1), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_prod, &a, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 0);
    cr_tangent dy = cr_tangent_f64(2), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    double want1[4] = {0, -12, 0, 0};
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), want1[i]);
    /* Two zeros: every cotangent is zero. */
    double x2[4] = {2, 0, 0, -1};
    cr_array X2 = cr_array_vector(x2, 4);
    a = cr_value_array(&X2);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_prod, &a, 1, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), 0);
    /* Along dims: one slice with a zero, one without. */
    double x3[6] = {1, 0, 4, 2, 3, 5};
    cr_array X3 = cr_array_matrix(x3, 2, 3);
    cr_value a3[2] = {cr_value_array(&X3), cr_value_i64(1)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_prod, a3, 2, &y, &pb), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 0)), 0);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 1)), 30);
    double g[2] = {1, 1};
    size_t gs[2] = {2, 1};
    cr_array G;
    cr_array_view_init(&G, g, CR_DT_F64, 2, gs, NULL);
    cr_tangent dg = cr_tangent_array(&G), d3[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dg, d3, 3), CR_OK);
    double want3[6] = {0, 4, 0, 15, 10, 6};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(tan_at(d3[1], i)), want3[i]);
}

static void test_extrema_ties(void **state)
{
    fixture *fx = *state;
    double x[5] = {1, 3, 3, 2, 3};
    cr_array X = cr_array_vector(x, 5);
    cr_value a = cr_value_array(&X), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_maximum, &a, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 3);
    cr_tangent dy = cr_tangent_f64(1), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    /* The first maximal element gets the whole cotangent. */
    for (size_t i = 0; i < 5; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), i == 1 ? 1 : 0);
    /* findmax returns (value, index); the index has no tangent. */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_findmax, &a, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_STRUCT);
    cr_value f0, f1;
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 0, &f0), CR_OK);
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 1, &f1), CR_OK);
    ASSERT_DBL(f0.u.f64, 3);
    assert_int_equal(f1.u.i64, 1);
    /* minimum: the first minimal element; a NaN propagates. */
    x[3] = 1;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_minimum, &a, 1, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    for (size_t i = 0; i < 5; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), i == 0 ? 1 : 0);
    x[2] = nan("");
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_maximum, &a, 1, &y), CR_OK);
    assert_true(isnan(y.u.f64));
}

static void test_getindex_repeats(void **state)
{
    fixture *fx = *state;
    double x[5] = {10, 11, 12, 13, 14};
    cr_array X = cr_array_vector(x, 5);
    int64_t idx[4] = {1, 3, 1, 1};
    cr_array Ix;
    size_t n4 = 4;
    cr_array_view_init(&Ix, idx, CR_DT_I64, 1, &n4, NULL);
    cr_value args[2] = {cr_value_array(&X), cr_value_array(&Ix)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_getindex, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 4);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 2)), 11);
    double g[4] = {1, 2, 4, 8};
    cr_array G = cr_array_vector(g, 4);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    assert_true(cr_tangent_is_inplaceable_thunk(dx[1]));
    double want[5] = {0, 13, 0, 2, 0};
    for (size_t i = 0; i < 5; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), want[i]);
    /* add! scatters straight into a writable accumulator, without evaluating the thunk. */
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    cr_array *acc;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 1, X.shape, &acc), CR_OK);
    ((double *)acc->data)[0] = 5;
    cr_tangent sum;
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), dx[1], &sum), CR_OK);
    assert_ptr_equal(sum.u.arr, acc);
    assert_int_equal(dx[1].u.thunk->state, 0);
    double want2[5] = {5, 13, 0, 2, 0};
    for (size_t i = 0; i < 5; i++)
        ASSERT_DBL(((double *)acc->data)[i], want2[i]);
    /* A mask and a Cartesian index of a matrix. */
    double m[6] = {1, 2, 3, 4, 5, 6};
    cr_array M = cr_array_matrix(m, 2, 3);
    bool mk[3] = {true, false, true};
    size_t n3 = 3;
    cr_array Mk;
    cr_array_view_init(&Mk, mk, CR_DT_BOOL, 1, &n3, NULL);
    cr_value a3[3] = {cr_value_array(&M), cr_value_i64(1), cr_value_array(&Mk)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getindex, a3, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->ndim, 1);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 0)), 4);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 1)), 6);
    /* Out of bounds is an error, not a crash. */
    a3[1] = cr_value_i64(2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getindex, a3, 3, &y), CR_EINVAL);
    /* view of a range is a view: no copy. */
    cr_range r = {2, 0, -1};
    cr_value a4[3] = {cr_value_array(&M), cr_colon, cr_value_struct(&cr_range_type, &r)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_view, a4, 3, &y), CR_OK);
    assert_ptr_equal(y.u.arr->data, &m[2]);
    assert_int_equal(y.u.arr->flags, 0);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 2)), 6);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 3)), 5);
}

static void test_softmax_large(void **state)
{
    fixture *fx = *state;
    double x[3] = {1000, 1001, 999};
    cr_array X = cr_array_vector(x, 3);
    cr_value a = cr_value_array(&X), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_logsumexp, &a, 1, &y), CR_OK);
    ASSERT_CLOSE(y.u.f64, 1001 + log(1 + exp(-1.0) + exp(-2.0)), 1e-15);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_softmax, &a, 1, &y), CR_OK);
    double s = 0;
    for (size_t i = 0; i < 3; i++) {
        double v = creal(cr_array_get_linear(y.u.arr, i));
        assert_true(isfinite(v));
        s += v;
    }
    ASSERT_CLOSE(s, 1, 1e-15);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_logsoftmax, &a, 1, &y, &pb), CR_OK);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 1)), -log(1 + exp(-1.0) + exp(-2.0)), 1e-15);
    double g[3] = {1, 0, 0};
    cr_array G = cr_array_vector(g, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    for (size_t i = 0; i < 3; i++)
        assert_true(isfinite(creal(tan_at(dx[1], i))));
    /* Every slice of -inf: logsumexp is -inf, no NaN. */
    double z[2] = {-HUGE_VAL, -HUGE_VAL};
    cr_array Z = cr_array_vector(z, 2);
    a = cr_value_array(&Z);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_logsumexp, &a, 1, &y), CR_OK);
    assert_true(isinf(y.u.f64) && y.u.f64 < 0);
}

static void test_precision_and_structure(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    /* f32 stays f32: output and cotangent. */
    float xf[4] = {1, 2, 3, 4};
    size_t n4 = 4;
    cr_array XF;
    cr_array_view_init(&XF, xf, CR_DT_F32, 1, &n4, NULL);
    cr_value a = cr_value_array(&XF), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cumsum, &a, 1, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    float g[4] = {1, 1, 1, 1};
    cr_array G;
    cr_array_view_init(&G, g, CR_DT_F32, 1, &n4, NULL);
    cr_tangent dy = cr_tangent_array(&G), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    cr_tangent v = unthunked(dx[1]);
    assert_int_equal(v.u.arr->dtype, CR_DT_F32);
    ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, 0)), 4);
    /* A real argument never gets a complex cotangent: sum of a real array, complex seed. */
    double xd[4] = {1, 2, 3, 4};
    cr_array XD = cr_array_vector(xd, 4);
    a = cr_value_array(&XD);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sum, &a, 1, &y, &pb), CR_OK);
    dy = cr_tangent_c128(CMPLX(1, 2));
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    v = unthunked(dx[1]);
    assert_int_equal(v.u.arr->dtype, CR_DT_F64);
    ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, 2)), 1);
    /* A Diagonal argument gets a Diagonal cotangent. */
    double d[3] = {1, 2, 3};
    cr_array D = cr_array_matrix(d, 3, 3);
    D.structure = CR_MAT_DIAGONAL;
    D.strides[0] = 1;
    D.strides[1] = 0;
    a = cr_value_array(&D);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sum, &a, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 6);
    dy = cr_tangent_f64(1);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    v = unthunked(dx[1]);
    assert_int_equal(v.u.arr->structure, CR_MAT_DIAGONAL);
    /* transpose of Upper is Lower, a view. */
    double u[4] = {1, 2, 99, 4};
    cr_array U = cr_array_matrix(u, 2, 2);
    U.structure = CR_MAT_UPPER;
    a = cr_value_array(&U);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_transpose, &a, 1, &y), CR_OK);
    assert_int_equal(y.u.arr->structure, CR_MAT_LOWER);
    assert_ptr_equal(y.u.arr->data, u);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 1)), 0);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 2)), 2);
}

/* A user row (not fused): its partials are stored and the rule tester checks them. */
CR_SCALAR_EVALS(my_cubic, 2, 1, Y[0] = x[0] * x[0] * x[1] + x[1], D[0] = 2 * x[0] * x[1];
                D[1] = x[0] * x[0] + 1)
static const cr_scalar_rule my_cubic_row = CR_SCALAR_ROW(my_cubic);
static const cr_function my_cubic_fn = CR_SCALAR_FUNCTION("my_cubic", my_cubic_row, 2);

static void test_broadcast_paths(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double a[6] = {0.5, -1, 2, 1.5, 0.25, -0.75}, b[3] = {1, 2, -3};
    cr_array A = cr_array_matrix(a, 2, 3), B = cr_array_vector(b, 3);
    cr_value f = cr_value_function(&my_cubic_fn, NULL);
    cr_value args[3] = {f, cr_value_array(&A), cr_value_array(&B)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, args, 3, &y), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 4)), 0.25 * 0.25 * 2 + 2);
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, NULL, &cr_fn_broadcast, args, 3, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, NULL, &cr_fn_broadcast, args, 3, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_consistency(fx->arena, NULL, &cr_fn_broadcast, args, 3, &r), r);
    /* A scalar argument and an integer argument (NoTangent). */
    cr_value args2[3] = {cr_fn_mul, cr_value_f64(1.5), cr_value_array(&A)};
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, NULL, &cr_fn_broadcast, args2, 3, &r), r);
    cr_value args3[3] = {cr_fn_div, cr_value_array(&A), cr_value_i64(3)};
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, NULL, &cr_fn_broadcast, args3, 3, &r), r);
    /* A function without a scalar row: one rrule per element (cabs of complex numbers). */
    cr_complex z[3] = {CMPLX(3, 4), CMPLX(-1, 2), CMPLX(0.5, -0.25)};
    size_t n3 = 3;
    cr_array Zc;
    cr_array_view_init(&Zc, z, CR_DT_C128, 1, &n3, NULL);
    cr_value args4[2] = {cr_fn_cabs, cr_value_array(&Zc)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, args4, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F64);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 0)), 5);
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, NULL, &cr_fn_broadcast, args4, 2, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, NULL, &cr_fn_broadcast, args4, 2, &r), r);
    /* tanh is fused: its derivative (1 - y)(1 + y) or 4e/(1 + e)² agrees with the scalar
     * rule's 1/cosh², on both sides of the switch at |x| = 0.97 and far out. */
    const cr_function *tanh_fn = cr_registry_find(cr_registry_builtin(), "tanh");
    if (tanh_fn != NULL) {
        double xt[8] = {0, 0.5, -0.969, 0.971, -3, 20, -300, 1e-300};
        cr_array XT = cr_array_vector(xt, 8);
        cr_value vt = cr_value_function(tanh_fn, NULL);
        cr_value bargs[2] = {vt, cr_value_array(&XT)};
        cr_pullback pbb;
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_broadcast, bargs, 2, &y, &pbb), CR_OK);
        double ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        cr_array O = cr_array_vector(ones, 8);
        cr_tangent dyo = cr_tangent_array(&O), dxb[3];
        assert_int_equal(cr_pullback_call(fx->arena, &pbb, &dyo, dxb, 3), CR_OK);
        for (size_t i = 0; i < 8; i++) {
            cr_value xi = cr_value_f64(xt[i]), yi;
            cr_pullback pbi;
            cr_tangent one = cr_tangent_f64(1), di[2];
            assert_int_equal(cr_rrule(NULL, fx->arena, &vt, &xi, 1, &yi, &pbi), CR_OK);
            assert_int_equal(cr_pullback_call(fx->arena, &pbi, &one, di, 2), CR_OK);
            ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), yi.u.f64);
            double got = creal(tan_at(dxb[2], i)), want = di[1].u.f64;
            if (!(fabs(got - want) <= 4e-16 * fabs(want))) {
                print_error("tanh' at %g: fused %.17g, row %.17g\n", xt[i], got, want);
                fail();
            }
        }
    }
    /* Shapes that do not broadcast. */
    double c[2] = {1, 2};
    cr_array C = cr_array_vector(c, 2);
    cr_value bad[3] = {cr_fn_add, cr_value_array(&A), cr_value_array(&C)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, bad, 3, &y), CR_ESHAPE);
}

/* sum's cotangent accumulates in place with its add!, never materialising. */
static void test_inplace_sum(void **state)
{
    fixture *fx = *state;
    double x[4] = {1, 2, 3, 4};
    cr_array X = cr_array_vector(x, 4);
    cr_value a = cr_value_array(&X), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sum, &a, 1, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_f64(3), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_true(cr_tangent_is_inplaceable_thunk(dx[1]));
    cr_array *acc;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 1, X.shape, &acc), CR_OK);
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), dx[1], &out), CR_OK);
    assert_int_equal(dx[1].u.thunk->state, 0);
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(((double *)acc->data)[i], 3);
}

static void test_errors(void **state)
{
    fixture *fx = *state;
    double x[6] = {1, 2, 3, 4, 5, 6};
    cr_array X = cr_array_matrix(x, 2, 3);
    int64_t sh[2] = {4, 2};
    size_t n2 = 2;
    cr_array S;
    cr_array_view_init(&S, sh, CR_DT_I64, 1, &n2, NULL);
    cr_value args[2] = {cr_value_array(&X), cr_value_array(&S)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reshape, args, 2, &y), CR_ESHAPE);
    args[1] = cr_value_i64(2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum, args, 2, &y), CR_EINVAL);
    args[1] = cr_value_f64(1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum, args, 2, &y), CR_EINVAL);
    /* A wrong cotangent shape. */
    cr_pullback pb;
    cr_value a = cr_value_array(&X);
    assert_int_equal(
        cr_rrule(NULL, fx->arena, &cr_fn_cumsum, (cr_value[]){a, cr_value_i64(1)}, 2, &y, &pb),
        CR_OK);
    double g[5] = {0};
    cr_array G = cr_array_vector(g, 5);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_ESHAPE);
}

/* Rearrangements: values and the accumulation of elements used more than once. */
static void test_gather_values(void **state)
{
    fixture *fx = *state;
    double x[4] = {1, 2, 3, 4};
    cr_array X = cr_array_vector(x, 4);
    cr_value args[3] = {cr_value_array(&X), cr_value_i64(1)}, y;
    /* circshift by 1: elements move toward higher indices. */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_circshift, args, 2, &y), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 0)), 4);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 1)), 1);
    /* repeat 3 times: the pullback sums the three tiles. */
    int64_t three = 3;
    size_t one = 1;
    cr_array C;
    cr_array_view_init(&C, &three, CR_DT_I64, 1, &one, NULL);
    args[1] = cr_value_array(&C);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_repeat, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 12);
    double g[12];
    for (size_t i = 0; i < 12; i++)
        g[i] = (double)i;
    cr_array G = cr_array_vector(g, 12);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    ASSERT_DBL(creal(tan_at(dx[1], 1)), 1 + 5 + 9);
    /* cat(0, x, [5, 6]) and fill's scalar cotangent. */
    double z[2] = {5, 6};
    cr_array Z = cr_array_vector(z, 2);
    cr_value c3[3] = {cr_value_i64(0), cr_value_array(&X), cr_value_array(&Z)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cat, c3, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 6);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 4)), 5);
    cr_value f2[2] = {cr_value_f64(2.5), cr_value_i64(3)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_fill, f2, 2, &y, &pb), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 2)), 2.5);
    double g3[3] = {1, 2, 4};
    cr_array G3 = cr_array_vector(g3, 3);
    dy = cr_tangent_array(&G3);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_F64);
    ASSERT_DBL(dx[1].u.f64, 7);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
}

/* Statistics at their edge cases: cumprod with zeros, std of a constant, norm of zero. */
static void test_stats_edges(void **state)
{
    fixture *fx = *state;
    /* cumprod([2, 0, 3, 0.5]) = [2, 0, 0, 0]; with ȳ = 1: x̄_0 = 1 (only y_0 survives),
     * x̄_1 = 2 + 2·3 + 2·3·0.5 = 11, x̄_2 = x̄_3 = 0. No NaN. */
    double x[4] = {2, 0, 3, 0.5}, ones[4] = {1, 1, 1, 1};
    cr_array X = cr_array_vector(x, 4), O = cr_array_vector(ones, 4);
    cr_value a = cr_value_array(&X), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cumprod, &a, 1, &y, &pb), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 3)), 0);
    cr_tangent dy = cr_tangent_array(&O), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    double want[4] = {1, 11, 0, 0};
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), want[i]);
    /* std of a constant: 0, and a zero cotangent. */
    double c[3] = {2, 2, 2};
    cr_array C = cr_array_vector(c, 3);
    a = cr_value_array(&C);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_std, &a, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 0);
    cr_tangent one = cr_tangent_f64(1);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &one, dx, 2), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), 0);
    /* var of [1, 2, 3, 4] = 5/3. */
    a = cr_value_array(&O);
    double v4[4] = {1, 2, 3, 4};
    cr_array V4 = cr_array_vector(v4, 4);
    a = cr_value_array(&V4);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_var, &a, 1, &y), CR_OK);
    ASSERT_CLOSE(y.u.f64, 5.0 / 3, 1e-15);
    /* norm: of zero, a zero cotangent; no overflow for huge entries; p = Inf. */
    double z[3] = {0, 0, 0}, big[2] = {3e200, 4e200};
    cr_array Z = cr_array_vector(z, 3), Bg = cr_array_vector(big, 2);
    a = cr_value_array(&Z);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_norm, &a, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 0);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &one, dx, 2), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), 0);
    a = cr_value_array(&Bg);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_norm, &a, 1, &y), CR_OK);
    ASSERT_CLOSE(y.u.f64, 5e200, 1e-15);
    cr_value ap[2] = {cr_value_array(&V4), cr_value_f64(HUGE_VAL)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_norm, ap, 2, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 4);
    cr_tangent d3[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &one, d3, 3), CR_OK);
    ASSERT_DBL(creal(tan_at(d3[1], 3)), 1);
    ASSERT_DBL(creal(tan_at(d3[1], 2)), 0);
    /* extrema: (min, max). */
    a = cr_value_array(&V4);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_extrema, &a, 1, &y), CR_OK);
    cr_value lo, hi;
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 0, &lo), CR_OK);
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 1, &hi), CR_OK);
    ASSERT_DBL(lo.u.f64, 1);
    ASSERT_DBL(hi.u.f64, 4);
}

static int run_rules_array(void)
{
    const struct CMUnitTest rules_array[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sum_mean_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prod_zeros, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_extrema_ties, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_getindex_repeats, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_softmax_large, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_precision_and_structure, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_paths, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inplace_sum, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_stats_edges, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(rules_array, NULL, NULL);
}

/*
 * Coverage tests of the array rules' rare paths (the files of src/rulesets/array/): derivatives on
 * layouts and element types the registration samplers rarely draw (the adjoint of a complex
 * vector, the transpose of a Lower matrix, reshape of a strided view, complex broadcasts of
 * + - / with stretched dimensions, x.^2 with an integer 2, integer and bool arrays through the
 * per-element broadcast, an empty range, matmul with an empty inner dimension accumulated
 * into a buffer, a foldl of a functor), ZeroTangent seeds and input tangents (no work, zero
 * cotangents), tangents of other layouts and element types than the work type, and the
 * errors for bad input (status, a message naming the function, the context usable after).
 * Derivatives are checked with the library's rule testers (finite differences).
 */

/* ---- Helpers ------------------------------------------------------------------------------ */

static cr_value fn_named(const char *name)
{
    const cr_function *fn = cr_registry_find(cr_registry_builtin(), name);
    assert_non_null(fn);
    return cr_value_function(fn, NULL);
}

/* rrule and frule against finite differences, and the dot-product test, in debug mode. */
static void check_rules(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs)
{
    cr_ctx_set_debug(fx->ctx, true);
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, NULL, f, args, nargs, &r), r);
    assert_true(r.nchecks > 0);
    CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, NULL, f, args, nargs, &r), r);
    assert_true(r.nchecks > 0);
    CR_ASSERT_RULE_TEST(cr_test_consistency(fx->arena, NULL, f, args, nargs, &r), r);
}

/* f(args) fails with status `want` and a message containing `msg`; the context is usable
 * afterwards (the error cleared, a good call succeeds). */
static void expect_err_(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                        cr_status want, const char *msg, const char *file, int line)
{
    cr_value y;
    cr_status st = cr_function_call(fx->arena, f, args, nargs, &y);
    if (st != want || strstr(cr_ctx_errmsg(fx->ctx), msg) == NULL) {
        print_error("%s:%d: got %s \"%s\", want %s \"...%s...\"\n", file, line, cr_status_name(st),
                    cr_ctx_errmsg(fx->ctx), cr_status_name(want), msg);
        fail();
    }
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_OK);
    double x[2] = {1, 2};
    cr_array X = cr_array_vector(x, 2);
    cr_value a = cr_value_array(&X);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum, &a, 1, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 3);
}
#define expect_err(fx, f, args, nargs, want, msg) \
    expect_err_((fx), (f), (args), (nargs), (want), (msg), __FILE__, __LINE__)

/* Whether a tangent is ZeroTangent, NoTangent or an all-zero array. */
static bool is_zeroish(cr_tangent t)
{
    t = unthunked(t);
    if (t.tag == CR_TAN_ZERO || t.tag == CR_TAN_NONE)
        return true;
    if (t.tag == CR_TAN_STRUCT) {
        for (size_t i = 0; i < t.u.s.type->nfields; i++)
            if (cr_tangent_field_present(t, i) && !is_zeroish(cr_tangent_field(t, i)))
                return false;
        return true;
    }
    if (t.tag != CR_TAN_ARRAY)
        return false;
    for (size_t i = 0; i < cr_array_numel(t.u.arr); i++)
        if (cr_array_get_linear(t.u.arr, i) != 0)
            return false;
    return true;
}

static cr_status zero_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    (void)env;
    *out = cr_tangent_zero();
    return CR_OK;
}

/* A ZeroTangent seed gives zero cotangents, also as a thunk (which the pullback itself sees,
 * cr_pullback_call short-cuts only a plain ZeroTangent); ZeroTangent input tangents a zero
 * output tangent. */
static void check_zero_seed(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs)
{
    cr_value y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, f, args, nargs, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_zero(), dx[8];
    assert_true(nargs + 1 <= 8);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, nargs + 1), CR_OK);
    for (size_t i = 0; i <= nargs; i++)
        assert_true(is_zeroish(dx[i]));
    assert_int_equal(cr_tangent_thunk(fx->arena, zero_thunk, NULL, "zero_thunk", &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, nargs + 1), CR_OK);
    for (size_t i = 0; i <= nargs; i++)
        assert_true(is_zeroish(dx[i]));
    cr_tangent din[8], dout;
    for (size_t i = 0; i <= nargs; i++)
        din[i] = cr_tangent_zero();
    cr_value y2;
    assert_int_equal(cr_frule(NULL, fx->arena, din, f, args, nargs, &y2, &dout), CR_OK);
    assert_true(is_zeroish(dout));
}

static cr_value i64s(cr_array *store, int64_t *v, size_t n)
{
    assert_int_equal(cr_array_view_init(store, v, CR_DT_I64, 1, &n, NULL), CR_OK);
    return cr_value_array(store);
}

/* ---- Shapes: adjoint, transpose, reshape ----------------------------------------------------- */

static void test_shape_layouts(void **state)
{
    fixture *fx = *state;
    /* adjoint of a complex vector: a conjugated 1 x n copy; its pullback conjugates back. */
    cr_complex z[3] = {CMPLX(1, 2), CMPLX(-0.5, 0.25), CMPLX(3, -1)};
    size_t n3 = 3;
    cr_array Z;
    cr_array_view_init(&Z, z, CR_DT_C128, 1, &n3, NULL);
    cr_value a = cr_value_array(&Z), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_adjoint, &a, 1, &y), CR_OK);
    assert_int_equal(y.u.arr->ndim, 2);
    ASSERT_CPLX(cr_array_get_linear(y.u.arr, 0), 1, -2);
    check_rules(fx, &cr_fn_adjoint, &a, 1);
    /* transpose of a Lower matrix is Upper, and its derivative is the transposed tangent. */
    double l[9] = {1, 0, 0, 2, 3, 0, 4, 5, 6};
    cr_array L = cr_array_matrix(l, 3, 3);
    L.structure = CR_MAT_LOWER;
    a = cr_value_array(&L);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_transpose, &a, 1, &y), CR_OK);
    assert_int_equal(y.u.arr->structure, CR_MAT_UPPER);
    check_rules(fx, &cr_fn_transpose, &a, 1);
    /* reshape of a transposed (strided) view copies, in the view's row-major order. */
    double m[6] = {1, 2, 3, 4, 5, 6};
    size_t sh[2] = {3, 2};
    ptrdiff_t st[2] = {1, 3};
    cr_array T;
    cr_array_view_init(&T, m, CR_DT_F64, 2, sh, st); /* the transpose of [1 2 3; 4 5 6] */
    int64_t ns[1] = {6};
    cr_array NS;
    cr_value ra[2] = {cr_value_array(&T), i64s(&NS, ns, 1)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reshape, ra, 2, &y), CR_OK);
    const double want[6] = {1, 4, 2, 5, 3, 6};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), want[i]);
    check_rules(fx, &cr_fn_reshape, ra, 2);
}

/* ---- Broadcasting -------------------------------------------------------------------------- */

static void test_broadcast_complex_fused(void **state)
{
    fixture *fx = *state;
    /* A 2 x 3 complex matrix with a complex row vector stretched along the rows, through the
     * fused + - * / (each argument's cotangent summed over the stretched dimension). */
    cr_complex zm[6] = {CMPLX(1, 2),   CMPLX(-0.5, 0.25), CMPLX(3, -1),
                        CMPLX(0.5, 1), CMPLX(2, -2),      CMPLX(-1, -0.75)};
    cr_complex zv[3] = {CMPLX(1.5, -0.5), CMPLX(-2, 1), CMPLX(0.75, 0.5)};
    size_t s23[2] = {2, 3}, s3 = 3;
    cr_array ZM, ZV;
    cr_array_view_init(&ZM, zm, CR_DT_C128, 2, s23, NULL);
    cr_array_view_init(&ZV, zv, CR_DT_C128, 1, &s3, NULL);
    const cr_value *ops[4] = {&cr_fn_add, &cr_fn_sub, &cr_fn_mul, &cr_fn_div};
    for (size_t k = 0; k < 4; k++) {
        cr_value args[3] = {*ops[k], cr_value_array(&ZM), cr_value_array(&ZV)};
        check_rules(fx, &cr_fn_broadcast, args, 3);
        cr_value swapped[3] = {*ops[k], cr_value_array(&ZV), cr_value_array(&ZM)};
        check_rules(fx, &cr_fn_broadcast, swapped, 3);
        check_zero_seed(fx, &cr_fn_broadcast, args, 3);
    }
    /* Real arrays with a real scalar stretched everywhere. */
    double xm[6] = {1, -2, 0.5, 3, -0.25, 2};
    cr_array XM = cr_array_matrix(xm, 2, 3);
    for (size_t k = 0; k < 4; k++) {
        cr_value args[3] = {*ops[k], cr_value_f64(1.75), cr_value_array(&XM)};
        check_rules(fx, &cr_fn_broadcast, args, 3);
    }
}

static void test_broadcast_pow_int2(void **state)
{
    fixture *fx = *state;
    /* x.^2 with an integer 2 is fused as a square: values and derivatives. */
    double x[4] = {1.5, -2, 0.25, 3};
    cr_array X = cr_array_vector(x, 4);
    cr_value args[3] = {cr_fn_pow, cr_value_array(&X), cr_value_i64(2)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, args, 3, &y), CR_OK);
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), x[i] * x[i]);
    check_rules(fx, &cr_fn_broadcast, args, 3);
    /* An integer 3 is not fused, and still right. */
    args[2] = cr_value_i64(3);
    check_rules(fx, &cr_fn_broadcast, args, 3);
}

static void test_broadcast_int_arrays_per_element(void **state)
{
    fixture *fx = *state;
    /* hypot has a hand-written rule (not a row): broadcast goes element by element, reading
     * integer and bool arrays' elements as integers and bools. */
    double x[3] = {3, -1.5, 0.5};
    int64_t iv[3] = {4, 2, -3};
    bool bv[3] = {true, false, true};
    size_t n3 = 3;
    cr_array X = cr_array_vector(x, 3), IV, BV;
    cr_array_view_init(&IV, iv, CR_DT_I64, 1, &n3, NULL);
    cr_array_view_init(&BV, bv, CR_DT_BOOL, 1, &n3, NULL);
    cr_value hyp = fn_named("hypot");
    cr_value args[3] = {hyp, cr_value_array(&X), cr_value_array(&IV)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, args, 3, &y), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, i)), hypot(x[i], (double)iv[i]), 1e-15);
    check_rules(fx, &cr_fn_broadcast, args, 3);
    args[2] = cr_value_array(&BV);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, args, 3, &y), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, i)), hypot(x[i], bv[i] ? 1.0 : 0.0), 1e-15);
    check_rules(fx, &cr_fn_broadcast, args, 3);
    /* The pullback gives the integer and bool arrays NoTangent. */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_broadcast, args, 3, &y, &pb), CR_OK);
    double g[3] = {1, 1, 1};
    cr_array G = cr_array_vector(g, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[4];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(unthunked(dx[3]).tag, CR_TAN_NONE);
    check_zero_seed(fx, &cr_fn_broadcast, args, 3);
}

/* ---- Tangents of other layouts and element types --------------------------------------------- */

static void test_tangent_layouts(void **state)
{
    fixture *fx = *state;
    /* sum's frule with an f32 input tangent, a transposed-view tangent and a one-element
     * array tangent for a scalar argument of broadcast. */
    double x[6] = {1, 2, 3, 4, 5, 6};
    cr_array X = cr_array_matrix(x, 2, 3);
    float tf[6] = {1, 1, 1, 2, 2, 2};
    size_t s23[2] = {2, 3};
    cr_array TF;
    cr_array_view_init(&TF, tf, CR_DT_F32, 2, s23, NULL);
    cr_value a = cr_value_array(&X), y;
    cr_tangent din[2] = {cr_tangent_none(), cr_tangent_array(&TF)}, dout;
    assert_int_equal(cr_frule(NULL, fx->arena, din, &cr_fn_sum, &a, 1, &y, &dout), CR_OK);
    ASSERT_DBL(unthunked(dout).u.f64, 9);
    double tt[6] = {1, 2, 3, 4, 5, 6}; /* viewed as the transpose of a 3 x 2 matrix */
    size_t s32[2] = {3, 2};
    (void)s32;
    ptrdiff_t str[2] = {1, 3};
    cr_array TT;
    cr_array_view_init(&TT, tt, CR_DT_F64, 2, s23, (ptrdiff_t[]){1, 2});
    (void)str;
    din[1] = cr_tangent_array(&TT);
    cr_value cs[2] = {cr_value_array(&X), cr_value_i64(1)};
    cr_tangent din3[3] = {cr_tangent_none(), cr_tangent_array(&TT), cr_tangent_none()};
    assert_int_equal(cr_frule(NULL, fx->arena, din3, &cr_fn_cumsum, cs, 2, &y, &dout), CR_OK);
    /* TT's rows are {1, 3, 5} and {2, 4, 6}: running sums {1, 4, 9}, {2, 6, 12}. */
    const double want[6] = {1, 4, 9, 2, 6, 12};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(cr_array_get_linear(unthunked(dout).u.arr, i)), want[i]);
    /* broadcast(*, s, X) with a one-element array as the scalar's tangent. */
    double one = 2;
    cr_array ONE = cr_array_vector(&one, 1);
    cr_value bargs[3] = {cr_fn_mul, cr_value_f64(3), cr_value_array(&X)};
    cr_tangent db[4] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_array(&ONE),
                        cr_tangent_zero()};
    assert_int_equal(cr_frule(NULL, fx->arena, db, &cr_fn_broadcast, bargs, 3, &y, &dout), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(cr_array_get_linear(unthunked(dout).u.arr, i)), 2 * x[i]);
    /* A tangent of the wrong kind and a NotImplemented one are refused. */
    cr_tangent bad[2] = {cr_tangent_none(), cr_tangent_c128(CMPLX(1, 1))};
    (void)bad;
    db[2] = cr_tangent_array(&X); /* six elements for a scalar */
    assert_int_equal(cr_frule(NULL, fx->arena, db, &cr_fn_broadcast, bargs, 3, &y, &dout),
                     CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "expected a scalar tangent");
    cr_ctx_clear_error(fx->ctx);
    cr_tangent ni;
    assert_int_equal(cr_tangent_not_implemented(fx->arena, __FILE__, __LINE__, "test", &ni), CR_OK);
    db[2] = ni;
    assert_int_equal(cr_frule(NULL, fx->arena, db, &cr_fn_broadcast, bargs, 3, &y, &dout),
                     CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "NotImplemented");
    cr_ctx_clear_error(fx->ctx);
    din[1] = ni;
    assert_int_equal(cr_frule(NULL, fx->arena, din, &cr_fn_sum, &a, 1, &y, &dout), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "sum");
    cr_ctx_clear_error(fx->ctx);
    din[1] = cr_tangent_f64(1); /* a scalar for six elements */
    assert_int_equal(cr_frule(NULL, fx->arena, din, &cr_fn_sum, &a, 1, &y, &dout), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "a scalar tangent for an array of 6 elements");
    cr_ctx_clear_error(fx->ctx);
    din[1] = cr_tangent_struct_empty(&cr_range_type);
    assert_int_equal(cr_frule(NULL, fx->arena, din, &cr_fn_sum, &a, 1, &y, &dout), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "expected an array tangent");
    cr_ctx_clear_error(fx->ctx);
}

/* ---- Zero seeds and zero input tangents -------------------------------------------------------
 */

static void test_zero_seeds(void **state)
{
    fixture *fx = *state;
    double x[6] = {1.5, -2, 0.5, 3, -0.25, 2};
    cr_array X = cr_array_matrix(x, 2, 3);
    cr_value A = cr_value_array(&X), d1 = cr_value_i64(1);
    const char *one_arg[] = {"transpose", "adjoint",   "sum",     "mean",      "prod",
                             "maximum",   "minimum",   "findmax", "findmin",   "extrema",
                             "softmax",   "logsumexp", "var",     "std",       "norm",
                             "reverse",   "triu",      "diag",    "normalize", "opnorm"};
    for (size_t k = 0; k < sizeof one_arg / sizeof one_arg[0]; k++) {
        cr_value f = fn_named(one_arg[k]);
        check_zero_seed(fx, &f, &A, 1);
    }
    const char *with_dim[] = {"sum",        "mean",    "prod", "cumsum", "maximum", "findmax",
                              "logsoftmax", "cumprod", "var",  "std",    "extrema", "norm"};
    for (size_t k = 0; k < sizeof with_dim / sizeof with_dim[0]; k++) {
        cr_value f = fn_named(with_dim[k]);
        cr_value args[2] = {A, d1};
        check_zero_seed(fx, &f, args, 2);
    }
    /* Indexing, slices, a permutation, sort, a higher-order function. */
    cr_value gi[3] = {A, cr_value_i64(1), cr_colon};
    check_zero_seed(fx, &cr_fn_getindex, gi, 3);
    check_zero_seed(fx, &cr_fn_view, gi, 3);
    int64_t p[2] = {1, 0};
    cr_array P;
    cr_value pa[2] = {A, i64s(&P, p, 2)};
    check_zero_seed(fx, &cr_fn_permutedims, pa, 2);
    cr_value v = cr_value_array(&(cr_array){0});
    double xv[4] = {3, 1, 2, 4};
    cr_array XV = cr_array_vector(xv, 4);
    v = cr_value_array(&XV);
    check_zero_seed(fx, &cr_fn_sort, &v, 1);
    check_zero_seed(fx, &cr_fn_cumsum, &v, 1);
    check_zero_seed(fx, &cr_fn_cumprod, &v, 1);
    cr_value ps[2] = {v, cr_value_i64(2)};
    check_zero_seed(fx, &cr_fn_partialsort, ps, 2);
    check_zero_seed(fx, &cr_fn_eachrow, &A, 1);
    cr_value sn = fn_named("sin");
    cr_value hof[2] = {sn, v};
    check_zero_seed(fx, &cr_fn_map, hof, 2);
    check_zero_seed(fx, &cr_fn_sum, hof, 2);
    check_zero_seed(fx, &cr_fn_foldl, (cr_value[]){cr_fn_mul, v}, 2);
    check_zero_seed(fx, &cr_fn_foldl, (cr_value[]){cr_fn_mul, v, cr_value_f64(2)}, 3);
    check_zero_seed(fx, &cr_fn_accumulate, (cr_value[]){cr_fn_mul, v}, 2);
    cr_value hyp = fn_named("hypot");
    check_zero_seed(fx, &cr_fn_foldl, (cr_value[]){hyp, v, cr_value_f64(2)}, 3);
    check_zero_seed(fx, &cr_fn_broadcast, (cr_value[]){hyp, A, cr_value_f64(2)}, 3);
    check_zero_seed(fx, &cr_fn_fill, (cr_value[]){cr_value_f64(2), cr_value_i64(3)}, 2);
    check_zero_seed(fx, &cr_fn_vcat, (cr_value[]){A, A}, 2);
    /* UniformScaling: A + λI. */
    double sq[4] = {1, 2, 3, 4};
    cr_array SQ = cr_array_matrix(sq, 2, 2);
    cr_value addu = fn_named("add_uniform");
    (void)addu;
    check_zero_seed(fx, &cr_fn_add_uniform, (cr_value[]){cr_value_array(&SQ), cr_value_f64(2)}, 2);
}

/* ---- Indexing: ranges -------------------------------------------------------------------------
 */

static void test_index_ranges(void **state)
{
    fixture *fx = *state;
    double x[6] = {1, 2, 3, 4, 5, 6};
    cr_array X = cr_array_matrix(x, 2, 3);
    /* An empty range (stop before start with a positive step) selects nothing. */
    cr_range empty = {2, 0, 1};
    cr_value args[3] = {cr_value_array(&X), cr_colon, cr_value_struct(&cr_range_type, &empty)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getindex, args, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->ndim, 2);
    assert_int_equal(y.u.arr->shape[0], 2);
    assert_int_equal(y.u.arr->shape[1], 0);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_getindex, args, 3, &y, &pb), CR_OK);
    cr_array *G;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 2, y.u.arr->shape, &G), CR_OK);
    cr_tangent dy = cr_tangent_array(G), dx[4];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_true(is_zeroish(dx[1]));
    /* A negative step, backwards through a row. */
    cr_range back = {2, -1, -1};
    args[2] = cr_value_struct(&cr_range_type, &back);
    check_rules(fx, &cr_fn_getindex, args, 3);
    check_rules(fx, &cr_fn_view, args, 3);
    /* A linear bool mask of A's shape. */
    bool mk[6] = {true, false, true, false, false, true};
    size_t s23[2] = {2, 3};
    cr_array M;
    cr_array_view_init(&M, mk, CR_DT_BOOL, 2, s23, NULL);
    cr_value la[2] = {cr_value_array(&X), cr_value_array(&M)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getindex, la, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 3);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 2)), 6);
    check_rules(fx, &cr_fn_getindex, la, 2);
}

/* ---- matmul with an empty inner dimension ------------------------------------------------------
 */

static void test_matmul_empty_inner(void **state)
{
    fixture *fx = *state;
    /* A (2 x 3) B (3 x 0): the cotangent of A is Ȳ Bᵀ with an inner dimension of 0, a zero
     * array; its add! into an existing buffer must leave the buffer as it was. */
    double a[6] = {1, 2, 3, 4, 5, 6}, b[1] = {0};
    cr_array A = cr_array_matrix(a, 2, 3), B;
    size_t s30[2] = {3, 0}, s20[2] = {2, 0};
    cr_array_view_init(&B, b, CR_DT_F64, 2, s30, NULL);
    cr_value args[2] = {cr_value_array(&A), cr_value_array(&B)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 2);
    assert_int_equal(y.u.arr->shape[1], 0);
    cr_array G;
    cr_array_view_init(&G, b, CR_DT_F64, 2, s20, NULL);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    double acc[6] = {1, -1, 2, -2, 3, -3};
    cr_array *ACC;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 2, A.shape, &ACC), CR_OK);
    memcpy(ACC->data, acc, sizeof acc);
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(ACC), dx[1], &out), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(cr_array_get_linear(unthunked(out).u.arr, i)), acc[i]);
    assert_true(is_zeroish(dx[1]));
    /* (2 x 0) (0 x 3): a zero 2 x 3 product, real and complex. */
    size_t s03[2] = {0, 3};
    cr_array E1, E2;
    cr_array_view_init(&E1, b, CR_DT_F64, 2, s20, NULL);
    cr_array_view_init(&E2, b, CR_DT_F64, 2, s03, NULL);
    cr_value ee[2] = {cr_value_array(&E1), cr_value_array(&E2)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_matmul, ee, 2, &y), CR_OK);
    assert_int_equal(cr_array_numel(y.u.arr), 6);
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), 0);
    cr_complex zb[1] = {0};
    cr_array_view_init(&E1, zb, CR_DT_C128, 2, s20, NULL);
    cr_array_view_init(&E2, zb, CR_DT_C128, 2, s03, NULL);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_matmul, ee, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_C128);
    for (size_t i = 0; i < 6; i++)
        ASSERT_CPLX(cr_array_get_linear(y.u.arr, i), 0, 0);
    /* Complex A (2 x 3) B (3 x 0): add! of the empty product into a complex buffer. */
    cr_complex za[6] = {CMPLX(1, 1), 2, 3, 4, 5, CMPLX(6, -1)};
    cr_array ZA, ZB, ZG;
    size_t s23[2] = {2, 3};
    cr_array_view_init(&ZA, za, CR_DT_C128, 2, s23, NULL);
    cr_array_view_init(&ZB, zb, CR_DT_C128, 2, s30, NULL);
    cr_array_view_init(&ZG, zb, CR_DT_C128, 2, s20, NULL);
    cr_value zargs[2] = {cr_value_array(&ZA), cr_value_array(&ZB)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, zargs, 2, &y, &pb), CR_OK);
    dy = cr_tangent_array(&ZG);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    cr_array *ZACC;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_C128, 2, s23, &ZACC), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ((cr_complex *)ZACC->data)[i] = CMPLX((double)i, -(double)i);
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(ZACC), dx[1], &out), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ASSERT_CPLX(cr_array_get_linear(unthunked(out).u.arr, i), (double)i, -(double)i);
}

/* ---- A functor folded (per-step rules): its field's cotangent summed over the steps ------------
 */

typedef struct scaler {
    double k;
} scaler;

static const cr_field k_scaler_fields[1] = {{"k", offsetof(scaler, k), CR_KIND_F64, NULL}};
static const cr_type scaler_type = {"scaler", sizeof(scaler), 1, k_scaler_fields};

/* op(a, b) = a + k b. */
static cr_status scaler_call(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                             cr_value *y)
{
    (void)arena;
    (void)nargs;
    const scaler *s = f->u.func.self;
    *y = cr_value_f64(args[0].u.f64 + s->k * args[1].u.f64);
    return CR_OK;
}

static const cr_function scaler_fn = {
    .name = "scaler_op", .arity = 2, .primal = scaler_call, .self_type = &scaler_type};

typedef struct scaler_pb_env {
    double k, b;
} scaler_pb_env;

static cr_status scaler_pb(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                           void *env)
{
    (void)nx;
    scaler_pb_env *e = env;
    cr_tangent g = unthunked(*dy);
    double gv = g.tag == CR_TAN_F64 ? g.u.f64 : 0;
    cr_tangent fk = cr_tangent_f64(gv * e->b);
    static const char *const names[] = {"k"};
    cr_status st = cr_tangent_struct(arena, &scaler_type, names, &fk, 1, &dx[0]);
    dx[1] = cr_tangent_f64(gv);
    dx[2] = cr_tangent_f64(gv * e->k);
    return st;
}

static cr_status scaler_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = scaler_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    scaler_pb_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(scaler_pb_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->k = ((const scaler *)f->u.func.self)->k;
    e->b = args[1].u.f64;
    *pb = (cr_pullback){scaler_pb, e, "scaler_pb", 3};
    return CR_OK;
}

static cr_status scaler_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = scaler_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    double k = ((const scaler *)f->u.func.self)->k, dk = 0, da = 0, db = 0;
    cr_tangent t = unthunked(dargs[0]);
    if (t.tag == CR_TAN_STRUCT) {
        cr_tangent fk = unthunked(cr_tangent_field(t, 0));
        if (fk.tag == CR_TAN_F64)
            dk = fk.u.f64;
    }
    if (dargs[1].tag == CR_TAN_F64)
        da = dargs[1].u.f64;
    if (dargs[2].tag == CR_TAN_F64)
        db = dargs[2].u.f64;
    *dy = cr_tangent_f64(da + dk * args[1].u.f64 + k * db);
    return CR_OK;
}

static void test_foldl_functor(void **state)
{
    fixture *fx = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, cr_registry_builtin(), &reg), CR_OK);
    static const cr_argspec sig[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &scaler_fn,
                       .nargs = 2,
                       .args = sig,
                       .frule = scaler_frule,
                       .rrule = scaler_rrule};
    assert_int_equal(cr_registry_add(reg, &def), CR_OK);
    const cr_config cfg = {.struct_size = sizeof cfg, .registry = reg};
    scaler s = {1.5};
    cr_value op = cr_value_function(&scaler_fn, &s);
    double v[4] = {1, -2, 0.5, 3};
    cr_array V = cr_array_vector(v, 4);
    cr_value args[3] = {op, cr_value_array(&V), cr_value_f64(0.25)}, y;
    /* Value: 0.25 + 1.5 (1 - 2 + 0.5 + 3). */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_foldl, args, 3, &y), CR_OK);
    ASSERT_CLOSE(y.u.f64, 0.25 + 1.5 * 2.5, 1e-15);
    /* Against finite differences, the functor's k included (debug mode off: ProjectTo of a
     * function value is NoTangent, see docs/rules-arrays.md). */
    cr_ctx_set_debug(fx->ctx, false);
    cr_test_opts opts = {0};
    opts.cfg = &cfg;
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, &opts, &cr_fn_foldl, args, 3, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, &opts, &cr_fn_accumulate, args, 3, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, &opts, &cr_fn_foldl, args, 2, &r), r);
    /* ∂k = Σ v (the sum of the elements' cotangents of the field). */
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_foldl, args, 3, &y, &pb), CR_OK);
    cr_tangent one = cr_tangent_f64(1), dx[4];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &one, dx, 4), CR_OK);
    cr_tangent dk = unthunked(cr_tangent_field(unthunked(dx[1]), 0));
    assert_int_equal(dk.tag, CR_TAN_F64);
    ASSERT_CLOSE(dk.u.f64, 2.5, 1e-15);
    /* A seed that is a thunk of ZeroTangent: zero cotangents, none of the steps' pullbacks
     * run. */
    cr_tangent zt;
    assert_int_equal(cr_tangent_thunk(fx->arena, zero_thunk, NULL, "zero_thunk", &zt), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &zt, dx, 4), CR_OK);
    for (size_t i = 1; i < 4; i++)
        assert_true(is_zeroish(dx[i]));
    cr_registry_free(reg);
}

/* ---- More rare paths: complex reductions over dims, the per-element broadcast with constant
 * arguments, empty arrays, functions returning non-numbers, an AD without the rule ---------- */

static void test_complex_reduce_dims(void **state)
{
    fixture *fx = *state;
    /* sum, mean and var of a complex matrix over one dimension (the complex accumulation
     * into a reduced array), and over a transposed view. */
    cr_complex z[6] = {CMPLX(1, 2),   CMPLX(-0.5, 0.25), CMPLX(3, -1),
                       CMPLX(0.5, 1), CMPLX(2, -2),      CMPLX(-1, -0.75)};
    size_t s23[2] = {2, 3}, s32[2] = {3, 2};
    ptrdiff_t tr[2] = {1, 3};
    cr_array Z, ZT;
    cr_array_view_init(&Z, z, CR_DT_C128, 2, s23, NULL);
    cr_array_view_init(&ZT, z, CR_DT_C128, 2, s32, tr);
    const cr_value *fns[3] = {&cr_fn_sum, &cr_fn_mean, &cr_fn_var};
    for (size_t k = 0; k < 3; k++)
        for (int64_t d = 0; d < 2; d++) {
            cr_value args[2] = {cr_value_array(&Z), cr_value_i64(d)};
            check_rules(fx, fns[k], args, 2);
            args[0] = cr_value_array(&ZT);
            check_rules(fx, fns[k], args, 2);
        }
    /* The value: column sums of Z. */
    cr_value args[2] = {cr_value_array(&Z), cr_value_i64(0)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum, args, 2, &y), CR_OK);
    ASSERT_CPLX(cr_array_get_linear(y.u.arr, 0), 1.5, 3);
    ASSERT_CPLX(cr_array_get_linear(y.u.arr, 2), 2, -1.75);
}

static void test_broadcast_per_element_constants(void **state)
{
    fixture *fx = *state;
    /* hypot of three arguments has no row (its row is hypot(x, y)): broadcast and map call
     * its n-argument rule per element. Integer and bool arrays are read element by element
     * and get NoTangent. */
    double x[3] = {3, -1.5, 0.5};
    int64_t iv[3] = {4, 2, -3};
    bool bv[3] = {true, false, true};
    size_t n3 = 3;
    cr_array X = cr_array_vector(x, 3), IV, BV;
    cr_array_view_init(&IV, iv, CR_DT_I64, 1, &n3, NULL);
    cr_array_view_init(&BV, bv, CR_DT_BOOL, 1, &n3, NULL);
    cr_value hyp = fn_named("hypot");
    cr_value args[4] = {hyp, cr_value_array(&X), cr_value_array(&IV), cr_value_array(&BV)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, args, 4, &y), CR_OK);
    for (size_t i = 0; i < 3; i++) {
        double b = bv[i] ? 1.0 : 0.0, want = sqrt(x[i] * x[i] + (double)(iv[i] * iv[i]) + b * b);
        ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, i)), want, 1e-15);
    }
    check_rules(fx, &cr_fn_broadcast, args, 4);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_broadcast, args, 4, &y, &pb), CR_OK);
    double g[3] = {1, 1, 1};
    cr_array G = cr_array_vector(g, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[5];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 5), CR_OK);
    assert_int_equal(unthunked(dx[3]).tag, CR_TAN_NONE);
    assert_int_equal(unthunked(dx[4]).tag, CR_TAN_NONE);
    check_zero_seed(fx, &cr_fn_broadcast, args, 4);
    double z[3] = {0.25, -2, 1};
    cr_array Zv = cr_array_vector(z, 3);
    cr_value margs[4] = {hyp, cr_value_array(&X), cr_value_array(&Zv), cr_value_array(&X)};
    check_rules(fx, &cr_fn_map, margs, 4);
    check_rules(fx, &cr_fn_broadcast, margs, 4);
    /* A fixed-arity row with the wrong number of arguments is still refused. */
    expect_err(fx, &cr_fn_broadcast,
               ((cr_value[]){fn_named("atan2"), margs[1], margs[1], margs[1]}), 4, CR_EINVAL,
               "broadcast: atan2 takes 2 arguments");
    /* Over empty arrays: an empty f64 result. */
    size_t n0 = 0;
    cr_array E;
    cr_array_view_init(&E, x, CR_DT_F64, 1, &n0, NULL);
    cr_value ea[4] = {hyp, cr_value_array(&E), cr_value_array(&E), cr_value_array(&E)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, ea, 4, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F64);
    assert_int_equal(cr_array_numel(y.u.arr), 0);
}

static void test_empty_accumulation(void **state)
{
    fixture *fx = *state;
    /* sum of an empty vector is 0; its cotangent, an InplaceableThunk, adds nothing into an
     * empty accumulator. */
    double x[1] = {0};
    size_t n0 = 0;
    cr_array E;
    cr_array_view_init(&E, x, CR_DT_F64, 1, &n0, NULL);
    cr_value a = cr_value_array(&E), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sum, &a, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 0);
    cr_tangent one = cr_tangent_f64(1), dx[2], out;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &one, dx, 2), CR_OK);
    cr_array *acc;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 1, &n0, &acc), CR_OK);
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), dx[1], &out), CR_OK);
    assert_int_equal(cr_array_numel(unthunked(out).u.arr), 0);
    /* A complex accumulator takes the generic add! (evaluate, then add element by element). */
    assert_int_equal(cr_array_new(fx->arena, CR_DT_C128, 1, &n0, &acc), CR_OK);
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), dx[1], &out), CR_OK);
    assert_int_equal(cr_array_numel(unthunked(out).u.arr), 0);
}

/* A function whose primal returns a struct, not a number; and one with no rule at all. */
static cr_status pair_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)args;
    (void)nargs;
    static cr_range r = {0, 1, 1};
    *out = cr_value_struct(&cr_range_type, &r);
    return CR_OK;
}
static const cr_function pair_fn = {.name = "pair", .arity = -1, .primal = pair_primal};

static cr_status plain_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)f;
    double s = 0;
    for (size_t i = 0; i < nargs; i++)
        s += args[i].u.f64;
    *out = cr_value_f64(s);
    return CR_OK;
}
static const cr_function plain_fn = {.name = "plain", .arity = -1, .primal = plain_primal};

static cr_status no_rrule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                 const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                 void *env)
{
    (void)cfg, (void)arena, (void)f, (void)args, (void)nargs, (void)y, (void)pb, (void)env;
    return CR_NOTHING;
}

static cr_status no_frule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                 const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                                 cr_tangent *dy, void *env)
{
    (void)cfg, (void)arena, (void)dargs, (void)f, (void)args, (void)nargs, (void)y, (void)dy,
        (void)env;
    return CR_NOTHING;
}

static void test_hof_function_failures(void **state)
{
    fixture *fx = *state;
    double x[3] = {1, 2, 3};
    cr_array X = cr_array_vector(x, 3);
    cr_value pair = cr_value_function(&pair_fn, NULL), plain = cr_value_function(&plain_fn, NULL);
    expect_err(fx, &cr_fn_broadcast, ((cr_value[]){pair, cr_value_array(&X)}), 2, CR_EINVAL,
               "broadcast: pair returned a tuple whose field 0 is a i64, not a number");
    expect_err(fx, &cr_fn_foldl, ((cr_value[]){pair, cr_value_array(&X)}), 2, CR_EINVAL,
               "foldl: pair returned a struct, not a number");
    /* A configuration with an AD whose rrule_via_ad / frule_via_ad find no rule. */
    cr_config cfg = {.struct_size = sizeof cfg,
                     .caps = CR_CAP_REVERSE | CR_CAP_FORWARD,
                     .rrule_via_ad = no_rrule_via_ad,
                     .frule_via_ad = no_frule_via_ad};
    cr_value args[2] = {plain, cr_value_array(&X)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_map, args, 2, &y, &pb), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "map: plain failed at element 0");
    assert_contains(cr_ctx_errmsg(fx->ctx), "rrule_via_ad gave no rule");
    cr_ctx_clear_error(fx->ctx);
    cr_tangent d[3] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_zero()}, dy;
    double t[3] = {1, 1, 1};
    cr_array T = cr_array_vector(t, 3);
    d[2] = cr_tangent_array(&T);
    assert_int_equal(cr_frule(&cfg, fx->arena, d, &cr_fn_map, args, 2, &y, &dy), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "frule_via_ad gave no rule");
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_map, args, 2, &y), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 2)), 3);
}

static void test_more_errors(void **state)
{
    fixture *fx = *state;
    double x[6] = {1, 2, 3, 4, 5, 6};
    cr_array X = cr_array_matrix(x, 2, 3);
    cr_value A = cr_value_array(&X);
    double fs[2] = {3, 2};
    cr_array FS = cr_array_vector(fs, 2);
    expect_err(fx, &cr_fn_reshape, ((cr_value[]){A, cr_value_array(&FS)}), 2, CR_EINVAL,
               "reshape: expected an i64 array, got a f64 array");
    expect_err(fx, &cr_fn_permutedims, ((cr_value[]){A, cr_value_f64(6)}), 2, CR_EINVAL,
               "permutedims: expected an i64 array, got a f64");
    int64_t twice[2] = {1, 1};
    cr_array TW;
    cr_value tw = i64s(&TW, twice, 2);
    expect_err(fx, &cr_fn_sum, ((cr_value[]){A, tw}), 2, CR_EINVAL,
               "sum: dimension 1 listed twice");
    /* A struct tangent for a scalar argument of broadcast. */
    cr_value bargs[3] = {cr_fn_mul, cr_value_f64(3), A}, y;
    cr_tangent db[4] = {cr_tangent_none(), cr_tangent_none(),
                        cr_tangent_struct_empty(&cr_range_type), cr_tangent_zero()},
               dout;
    assert_int_equal(cr_frule(NULL, fx->arena, db, &cr_fn_broadcast, bargs, 3, &y, &dout),
                     CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "expected a scalar tangent, got");
    cr_ctx_clear_error(fx->ctx);
}

/* ---- Errors for bad input ----------------------------------------------------------------------
 */

static void test_errors_shapes_gather(void **state)
{
    fixture *fx = *state;
    double x[6] = {1, 2, 3, 4, 5, 6};
    cr_array X = cr_array_matrix(x, 2, 3), V = cr_array_vector(x, 6);
    cr_value A = cr_value_array(&X), v = cr_value_array(&V);
    int64_t iv[9] = {1, 1, 1, 1, 1, 1, 1, 1, 6};
    cr_array I9, I2, I1;
    /* reshape */
    expect_err(fx, &cr_fn_reshape, ((cr_value[]){A, i64s(&I9, iv, 9)}), 2, CR_EINVAL,
               "reshape: 9 dimensions");
    int64_t neg[2] = {-2, -3};
    expect_err(fx, &cr_fn_reshape, ((cr_value[]){A, i64s(&I2, neg, 2)}), 2, CR_EINVAL,
               "reshape: negative extent");
    /* transpose of a 3-d array */
    size_t s3[3] = {1, 2, 3};
    cr_array X3;
    cr_array_view_init(&X3, x, CR_DT_F64, 3, s3, NULL);
    cr_value A3 = cr_value_array(&X3);
    expect_err(fx, &cr_fn_transpose, &A3, 1, CR_ESHAPE, "transpose: expected a vector or a matrix");
    /* permutedims */
    int64_t p1[1] = {0}, p00[2] = {0, 0};
    expect_err(fx, &cr_fn_permutedims, ((cr_value[]){A, i64s(&I1, p1, 1)}), 2, CR_EINVAL,
               "permutedims: 1 entries in perm for 2 dimensions");
    expect_err(fx, &cr_fn_permutedims, ((cr_value[]){A, i64s(&I2, p00, 2)}), 2, CR_EINVAL,
               "permutedims: perm is not a permutation");
    /* gathers */
    int64_t ints[3] = {1, 2, 3};
    cr_array IA;
    cr_value iarr = i64s(&IA, ints, 3);
    expect_err(fx, &cr_fn_reverse, &iarr, 1, CR_EINVAL, "reverse: argument 1 must be an f64");
    int64_t two[2] = {1, 1};
    expect_err(fx, &cr_fn_circshift, ((cr_value[]){v, i64s(&I2, two, 2)}), 2, CR_EINVAL,
               "circshift: 2 shifts for 1 dimension");
    expect_err(fx, &cr_fn_repeat, ((cr_value[]){v, i64s(&I2, two, 2)}), 2, CR_EINVAL,
               "repeat: 2 counts for 1 dimension");
    int64_t m1[1] = {-1};
    expect_err(fx, &cr_fn_repeat, ((cr_value[]){v, i64s(&I1, m1, 1)}), 2, CR_EINVAL,
               "repeat: negative count");
    expect_err(fx, &cr_fn_cat, ((cr_value[]){cr_value_i64(0)}), 1, CR_EINVAL,
               "cat: takes a dimension and 1 to");
    expect_err(fx, &cr_fn_cat, ((cr_value[]){cr_value_i64(2), A}), 2, CR_EINVAL,
               "cat: dimension 2 out of range");
    expect_err(fx, &cr_fn_cat, ((cr_value[]){cr_value_i64(0), A, v}), 3, CR_ESHAPE,
               "cat: arrays of 2 and 1 dimensions");
    double y4[4] = {0};
    cr_array Y22 = cr_array_matrix(y4, 2, 2);
    expect_err(fx, &cr_fn_cat, ((cr_value[]){cr_value_i64(0), A, cr_value_array(&Y22)}), 3,
               CR_ESHAPE, "cat: argument 3 differs in extent along dimension 1");
    expect_err(fx, &cr_fn_stack, NULL, 0, CR_EINVAL, "stack: takes 1 to");
    size_t s8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    cr_array X8;
    cr_array_view_init(&X8, x, CR_DT_F64, 8, s8, NULL);
    expect_err(fx, &cr_fn_stack, ((cr_value[]){cr_value_array(&X8)}), 1, CR_EINVAL,
               "stack: too many dimensions");
    expect_err(fx, &cr_fn_stack, ((cr_value[]){A, cr_value_array(&Y22)}), 2, CR_ESHAPE,
               "stack: arrays of different shapes");
    expect_err(fx, &cr_fn_fill, ((cr_value[]){A, cr_value_i64(3)}), 2, CR_EINVAL,
               "fill: the value must be a number");
    expect_err(fx, &cr_fn_fill, ((cr_value[]){cr_value_f64(1), i64s(&I9, iv, 9)}), 2, CR_EINVAL,
               "fill: too many dimensions");
    expect_err(fx, &cr_fn_fill, ((cr_value[]){cr_value_f64(1), i64s(&I1, m1, 1)}), 2, CR_EINVAL,
               "fill: negative extent");
    expect_err(fx, &cr_fn_dropdims, ((cr_value[]){A, cr_value_i64(1)}), 2, CR_EINVAL,
               "dropdims: dimension 1 has extent 3, not 1");
    expect_err(fx, &cr_fn_diag, &v, 1, CR_ESHAPE, "diag: expected a matrix");
    expect_err(fx, &cr_fn_triu, &v, 1, CR_ESHAPE, "triu: expected a matrix");
    expect_err(fx, &cr_fn_diagm, &A, 1, CR_ESHAPE, "diagm: expected a vector");
    expect_err(fx, &cr_fn_partialsort, ((cr_value[]){v, cr_value_i64(6)}), 2, CR_EINVAL,
               "partialsort: k = 6 out of range for 6 elements");
    expect_err(fx, &cr_fn_vcat, NULL, 0, CR_EINVAL, "vcat: takes 1 to");
    expect_err(fx, &cr_fn_hcat, NULL, 0, CR_EINVAL, "hcat: takes 1 to");
    cr_array V4 = cr_array_vector(x, 4);
    expect_err(fx, &cr_fn_hcat, ((cr_value[]){v, cr_value_array(&V4)}), 2, CR_ESHAPE,
               "hcat: vectors of different lengths");
}

static void test_errors_index(void **state)
{
    fixture *fx = *state;
    double x[6] = {1, 2, 3, 4, 5, 6};
    cr_array X = cr_array_matrix(x, 2, 3);
    cr_value A = cr_value_array(&X);
    cr_value nul = cr_value_struct(&cr_range_type, NULL);
    expect_err(fx, &cr_fn_getindex, ((cr_value[]){A, cr_colon, nul}), 3, CR_EINVAL,
               "getindex: index 2 is a struct, not a cr_range");
    cr_range r0 = {0, 2, 0}, rs = {3, 4, 1}, rl = {0, 5, 2};
    expect_err(fx, &cr_fn_getindex,
               ((cr_value[]){A, cr_colon, cr_value_struct(&cr_range_type, &r0)}), 3, CR_EINVAL,
               "getindex: range with step 0");
    expect_err(fx, &cr_fn_view, ((cr_value[]){A, cr_colon, cr_value_struct(&cr_range_type, &rs)}),
               3, CR_EINVAL, "view: index 3 out of bounds");
    expect_err(fx, &cr_fn_view, ((cr_value[]){A, cr_colon, cr_value_struct(&cr_range_type, &rl)}),
               3, CR_EINVAL, "view: index 4 out of bounds");
    int64_t bad[2] = {0, 7};
    cr_array BI;
    size_t n2 = 2;
    cr_array_view_init(&BI, bad, CR_DT_I64, 1, &n2, NULL);
    expect_err(fx, &cr_fn_getindex, ((cr_value[]){A, cr_value_array(&BI)}), 2, CR_EINVAL,
               "getindex: index 7 out of bounds");
    bool mk[4] = {true, false, true, true};
    size_t n4 = 4;
    cr_array MK;
    cr_array_view_init(&MK, mk, CR_DT_BOOL, 1, &n4, NULL);
    expect_err(fx, &cr_fn_getindex, ((cr_value[]){A, cr_value_array(&MK), cr_colon}), 3, CR_ESHAPE,
               "getindex: a mask of 4 elements for an extent of 2 (index 1)");
    expect_err(fx, &cr_fn_getindex, ((cr_value[]){A, cr_value_f64(1), cr_colon}), 3, CR_EINVAL,
               "getindex: index 1 must be an integer, a cr_range");
    expect_err(fx, &cr_fn_getindex, ((cr_value[]){A, cr_value_array(NULL), cr_colon}), 3, CR_EINVAL,
               "getindex: NULL index array");
    int64_t ints[3] = {1, 2, 3};
    size_t n3 = 3;
    cr_array IA;
    cr_array_view_init(&IA, ints, CR_DT_I64, 1, &n3, NULL);
    expect_err(fx, &cr_fn_getindex, ((cr_value[]){cr_value_array(&IA), cr_value_i64(0)}), 2,
               CR_EINVAL, "getindex: expected an f64, f32 or c128 array");
    expect_err(fx, &cr_fn_getindex, &A, 1, CR_EINVAL, "getindex: no index given");
    expect_err(fx, &cr_fn_view, ((cr_value[]){A, cr_colon, cr_colon, cr_colon}), 4, CR_EINVAL,
               "view: 3 indices for an array of 2 dimensions");
}

static void test_errors_reduce(void **state)
{
    fixture *fx = *state;
    double x[6] = {1, 2, 3, 4, 5, 6};
    cr_array X = cr_array_matrix(x, 2, 3);
    cr_value A = cr_value_array(&X);
    int64_t ints[3] = {1, 2, 3};
    size_t n3 = 3, n0 = 0;
    cr_array IA, E;
    cr_array_view_init(&IA, ints, CR_DT_I64, 1, &n3, NULL);
    cr_value iarr = cr_value_array(&IA);
    expect_err(fx, &cr_fn_cumsum, &iarr, 1, CR_EINVAL,
               "cumsum: expected an array of f64, f32 or c128, got i64");
    cr_complex z[3] = {1, 2, 3};
    cr_array Z;
    cr_array_view_init(&Z, z, CR_DT_C128, 1, &n3, NULL);
    cr_value za = cr_value_array(&Z);
    expect_err(fx, &cr_fn_maximum, &za, 1, CR_EINVAL,
               "maximum: expected an array of f64 or f32, got c128");
    expect_err(fx, &cr_fn_cumsum, &A, 1, CR_EINVAL,
               "cumsum: give the dimension for an array of 2 dimensions");
    expect_err(fx, &cr_fn_cumsum, ((cr_value[]){A, cr_value_i64(2)}), 2, CR_EINVAL,
               "cumsum: dimension 2 out of range");
    expect_err(fx, &cr_fn_cumprod, &A, 1, CR_EINVAL,
               "cumprod: give the dimension for an array of 2 dimensions");
    expect_err(fx, &cr_fn_cumprod, ((cr_value[]){A, cr_value_i64(-1)}), 2, CR_EINVAL,
               "cumprod: dimension -1 out of range");
    cr_array_view_init(&E, x, CR_DT_F64, 1, &n0, NULL);
    cr_value ea = cr_value_array(&E);
    expect_err(fx, &cr_fn_maximum, &ea, 1, CR_EINVAL, "maximum: reducing over an empty dimension");
    expect_err(fx, &cr_fn_minimum, &ea, 1, CR_EINVAL, "minimum: reducing over an empty dimension");
    expect_err(fx, &cr_fn_norm, &iarr, 1, CR_EINVAL, "norm: expected an f64, f32 or c128 array");
    expect_err(fx, &cr_fn_norm, ((cr_value[]){A, A}), 2, CR_EINVAL,
               "norm: p must be a real number");
    expect_err(fx, &cr_fn_norm, ((cr_value[]){A, cr_value_f64(NAN)}), 2, CR_EDOMAIN,
               "norm: p is NaN");
    /* A tuple output needs a structural cotangent. */
    const cr_value *tup[3] = {&cr_fn_findmax, &cr_fn_extrema, &cr_fn_findmin};
    const char *msg[3] = {"findmax", "extrema_pullback", "findmin"};
    for (size_t k = 0; k < 3; k++) {
        cr_value y;
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, tup[k], &A, 1, &y, &pb), CR_OK);
        cr_tangent dy = cr_tangent_f64(1), dx[2];
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_ETANGENT);
        assert_contains(cr_ctx_errmsg(fx->ctx), msg[k]);
        assert_contains(cr_ctx_errmsg(fx->ctx), "structural tangent");
        cr_ctx_clear_error(fx->ctx);
    }
}

static void test_errors_hof_broadcast_extra(void **state)
{
    fixture *fx = *state;
    double x[4] = {1, 2, 3, 4};
    cr_array X = cr_array_matrix(x, 2, 2);
    cr_value A = cr_value_array(&X), sn = fn_named("sin");
    int64_t ints[3] = {1, 2, 3};
    size_t n3 = 3;
    cr_array IA;
    cr_array_view_init(&IA, ints, CR_DT_I64, 1, &n3, NULL);
    cr_value iarr = cr_value_array(&IA);
    /* broadcast */
    expect_err(fx, &cr_fn_broadcast, &sn, 1, CR_EINVAL,
               "broadcast: takes a function and at least one argument");
    expect_err(fx, &cr_fn_broadcast, ((cr_value[]){sn, A, A}), 3, CR_EINVAL,
               "broadcast: sin takes 1 argument, 2 given");
    cr_range r = {0, 1, 1};
    expect_err(fx, &cr_fn_broadcast, ((cr_value[]){sn, cr_value_struct(&cr_range_type, &r)}), 2,
               CR_EINVAL, "broadcast: argument 2 is a struct, not a number or an array");
    cr_complex z[4] = {1, 2, 3, 4};
    size_t s22[2] = {2, 2};
    cr_array Z;
    cr_array_view_init(&Z, z, CR_DT_C128, 2, s22, NULL);
    cr_value za = cr_value_array(&Z);
    expect_err(fx, &cr_fn_broadcast, ((cr_value[]){fn_named("erf"), za}), 2, CR_EDOMAIN,
               "broadcast: erf is defined for real arguments only");
    /* map, sum(f, A), foldl */
    expect_err(fx, &cr_fn_map, &sn, 1, CR_EINVAL, "map: takes a function and at least one array");
    expect_err(fx, &cr_fn_sum, ((cr_value[]){sn, iarr}), 2, CR_EINVAL,
               "sum: sum(f, A) takes an f64, f32 or c128 array, not i64");
    expect_err(fx, &cr_fn_sum, ((cr_value[]){fn_named("erf"), za}), 2, CR_EDOMAIN,
               "sum: erf is defined for real arguments only");
    expect_err(fx, &cr_fn_sum, ((cr_value[]){fn_named("hypot"), A}), 2, CR_EINVAL, "sum: hypot");
    expect_err(fx, &cr_fn_foldl, ((cr_value[]){cr_value_f64(1), A}), 2, CR_EINVAL,
               "foldl: takes a function first, not a f64");
    expect_err(fx, &cr_fn_accumulate, ((cr_value[]){cr_fn_add, iarr}), 2, CR_EINVAL,
               "accumulate: takes an f64, f32 or c128 vector, not i64");
    /* opnorm, normalize, UniformScaling */
    expect_err(fx, &cr_fn_opnorm, ((cr_value[]){A, A}), 2, CR_EINVAL,
               "opnorm: p must be a real number (1, 2 or Inf)");
    expect_err(fx, &cr_fn_normalize, &iarr, 1, CR_EINVAL,
               "normalize: expected an f64, f32 or c128 array");
    expect_err(fx, &cr_fn_add_uniform, ((cr_value[]){A, A}), 2, CR_EINVAL,
               "expected an array and a number");
    int64_t i4[4] = {1, 2, 3, 4};
    cr_array I22;
    cr_array_view_init(&I22, i4, CR_DT_I64, 2, s22, NULL);
    expect_err(fx, &cr_fn_mul_uniform, ((cr_value[]){cr_value_array(&I22), cr_value_f64(2)}), 2,
               CR_EINVAL, "expected an f64, f32 or c128 array");
}

/* The array rules in arenas too small for them (f64 and c128, whole arrays and along dims):
 * CR_EARENA at every size short of room, and the rule's results once it fits. */
static void test_arena_sweeps(void **state)
{
    fixture *fx = *state;
    double a[12], ca[24], v[5] = {0.5, -1.25, 2, 0.75, -3};
    for (int i = 0; i < 12; i++) {
        a[i] = 0.25 + 0.5 * i * (i % 2 ? -1 : 1) / (1 + i % 5);
        ca[2 * i] = a[i];
        ca[2 * i + 1] = 0.125 * (i % 4) - 0.2;
    }
    cr_array A = cr_array_matrix(a, 3, 4), CA = cr_array_matrix(ca, 3, 4),
             V = cr_array_vector(v, 5);
    CA.dtype = CR_DT_C128;
    int64_t dd[2] = {0, 1}, sh[2] = {4, 3}, perm[2] = {1, 0}, rep[2] = {2, 1}, sft[2] = {1, -1};
    size_t two = 2;
    cr_array Dims, Sh, Perm, Rep, Sft;
    cr_array_view_init(&Dims, dd, CR_DT_I64, 1, &two, NULL);
    cr_array_view_init(&Sh, sh, CR_DT_I64, 1, &two, NULL);
    cr_array_view_init(&Perm, perm, CR_DT_I64, 1, &two, NULL);
    cr_array_view_init(&Rep, rep, CR_DT_I64, 1, &two, NULL);
    cr_array_view_init(&Sft, sft, CR_DT_I64, 1, &two, NULL);
    cr_value va = cr_value_array(&A), vc = cr_value_array(&CA), vv = cr_value_array(&V);
    const cr_value *whole[] = {
        &cr_fn_sum,       &cr_fn_prod,    &cr_fn_mean,       &cr_fn_var,       &cr_fn_std,
        &cr_fn_logsumexp, &cr_fn_softmax, &cr_fn_logsoftmax, &cr_fn_normalize, &cr_fn_reverse,
        &cr_fn_transpose, &cr_fn_adjoint, &cr_fn_tril,       &cr_fn_triu,      &cr_fn_maximum,
        &cr_fn_minimum,   &cr_fn_extrema, &cr_fn_findmax,    &cr_fn_findmin};
    const cr_value *along[] = {&cr_fn_sum,     &cr_fn_prod,       &cr_fn_mean,    &cr_fn_var,
                               &cr_fn_std,     &cr_fn_cumsum,     &cr_fn_cumprod, &cr_fn_logsumexp,
                               &cr_fn_softmax, &cr_fn_logsoftmax, &cr_fn_reverse, &cr_fn_maximum,
                               &cr_fn_minimum, &cr_fn_findmax,    &cr_fn_extrema};
    for (size_t k = 0; k < sizeof whole / sizeof whole[0]; k++) {
        assert_arena_sweep_rules(fx, whole[k], &va, 1);
    }
    const cr_value *cplx[] = {&cr_fn_sum,     &cr_fn_prod,      &cr_fn_mean,    &cr_fn_var,
                              &cr_fn_std,     &cr_fn_normalize, &cr_fn_reverse, &cr_fn_transpose,
                              &cr_fn_adjoint, &cr_fn_tril,      &cr_fn_triu};
    for (size_t k = 0; k < sizeof cplx / sizeof cplx[0]; k++)
        assert_arena_sweep_rules(fx, cplx[k], &vc, 1);
    for (size_t k = 0; k < sizeof along / sizeof along[0]; k++) {
        cr_value args[2] = {va, cr_value_i64(1)};
        assert_arena_sweep_rules(fx, along[k], args, 2);
        args[1] = cr_value_array(&Dims);
        if (along[k] != &cr_fn_cumsum && along[k] != &cr_fn_cumprod)
            assert_arena_sweep_rules(fx, along[k], args, 2);
    }
    assert_arena_sweep_rules(fx, &cr_fn_cumsum, &vv, 1);
    assert_arena_sweep_rules(fx, &cr_fn_cumprod, &vv, 1);
    assert_arena_sweep_rules(fx, &cr_fn_sort, &vv, 1);
    assert_arena_sweep_rules(fx, &cr_fn_diagm, &vv, 1);
    cr_value rs[2] = {va, cr_value_array(&Sh)}, pd[2] = {va, cr_value_array(&Perm)},
             rp[2] = {va, cr_value_array(&Rep)}, cs[2] = {va, cr_value_array(&Sft)},
             aa[2] = {va, va};
    assert_arena_sweep_rules(fx, &cr_fn_reshape, rs, 2);
    assert_arena_sweep_rules(fx, &cr_fn_permutedims, pd, 2);
    assert_arena_sweep_rules(fx, &cr_fn_repeat, rp, 2);
    assert_arena_sweep_rules(fx, &cr_fn_circshift, cs, 2);
    assert_arena_sweep_rules(fx, &cr_fn_hcat, aa, 2);
    assert_arena_sweep_rules(fx, &cr_fn_vcat, aa, 2);
    assert_arena_sweep_rules(fx, &cr_fn_stack, aa, 2);
    /* indexing: linear indices with a repeat, a range and an index list per dimension */
    int64_t lin[4] = {1, 7, 1, 11}, cols[2] = {3, 0};
    size_t four = 4;
    cr_array Lin, Cols;
    cr_array_view_init(&Lin, lin, CR_DT_I64, 1, &four, NULL);
    cr_array_view_init(&Cols, cols, CR_DT_I64, 1, &two, NULL);
    cr_range rows = {0, 2, 2};
    cr_value gl[2] = {va, cr_value_array(&Lin)},
             gd[3] = {va, cr_value_struct(&cr_range_type, &rows), cr_value_array(&Cols)};
    assert_arena_sweep_rules(fx, &cr_fn_getindex, gl, 2);
    assert_arena_sweep_rules(fx, &cr_fn_getindex, gd, 3);
    assert_arena_sweep_rules(fx, &cr_fn_view, gd, 3);
    gd[0] = vc;
    assert_arena_sweep_rules(fx, &cr_fn_getindex, gd, 3);
    /* var_ex and std_ex, uncorrected, along a dimension; opnorm and norm with p */
    cr_value ve[4] = {va, cr_value_bool(false), (cr_value){.kind = CR_KIND_NOTHING},
                      cr_value_i64(0)};
    assert_arena_sweep_rules(fx, &cr_fn_var_ex, ve, 4);
    assert_arena_sweep_rules(fx, &cr_fn_std_ex, ve, 4);
    cr_value on[2] = {va, cr_value_f64(1)};
    assert_arena_sweep_rules(fx, &cr_fn_opnorm, on, 2);
    on[1] = cr_value_f64(3);
    assert_arena_sweep_rules(fx, &cr_fn_norm, on, 2);
    on[0] = vc;
    assert_arena_sweep_rules(fx, &cr_fn_norm, on, 2);
}

static int run_array_layouts(void)
{
    const struct CMUnitTest array_layouts[] = {
        cmocka_unit_test_setup_teardown(test_shape_layouts, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_complex_fused, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_pow_int2, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_int_arrays_per_element, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tangent_layouts, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_zero_seeds, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_index_ranges, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_empty_inner, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_foldl_functor, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_complex_reduce_dims, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_per_element_constants, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_empty_accumulation, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hof_function_failures, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_more_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors_shapes_gather, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors_index, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors_reduce, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors_hof_broadcast_extra, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_sweeps, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(array_layouts, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_rules_array();
    failed += run_array_layouts();
    return failed;
}
