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

int main(void)
{
    const struct CMUnitTest tests[] = {
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
    return cmocka_run_group_tests(tests, NULL, NULL);
}
