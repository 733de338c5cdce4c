/*
 * Tests of the extra array rules (rules_array.h, array_extra.c): eachrow / eachcol /
 * eachslice, unique, opnorm, normalize and the UniformScaling operations. Every registered
 * rule runs through the rule tester (frule and rrule against finite differences, the
 * dot-product test, thunked seeds, add!!) at its sampler's points; then the conventions
 * finite differences cannot pin down: tuple cotangents with absent fields, in-place
 * accumulation, ties in unique and opnorm, degenerate singular values, zero norms,
 * projection of λ̄, errors.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/testing_cmocka.h>

/* ---- Helpers ------------------------------------------------------------------------------ */

static cr_tangent unthunked(cr_tangent t)
{
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(t, &v), CR_OK);
    return v;
}

/* Element i of an array tangent (thunks unthunked; zeros read as 0). */
static cr_complex tan_at(cr_tangent t, size_t i)
{
    cr_tangent v = unthunked(t);
    if (v.tag == CR_TAN_ZERO)
        return 0;
    assert_int_equal(v.tag, CR_TAN_ARRAY);
    return cr_array_get_linear(v.u.arr, i);
}

/* Run a test and fail on a FAIL verdict or a status other than CR_OK. */
static void expect_pass(fixture *fx, cr_status st, const cr_test_report *r, const char *what)
{
    if (st != CR_OK || r->verdict == CR_VERDICT_FAIL) {
        char buf[1200];
        cr_test_report_format(r, buf, sizeof buf);
        print_error("%s: %s (%s; %s)\n", what, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
        fail();
    }
}

/* frule, rrule and the dot-product test at one point, with the given input tangents. */
static void check_point(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                        const cr_tangent *dargs, const char *what)
{
    cr_test_opts opts = {0};
    opts.input_tangents = dargs;
    cr_test_report r;
    expect_pass(fx, cr_test_frule(fx->arena, &opts, f, args, nargs, &r), &r, what);
    expect_pass(fx, cr_test_rrule(fx->arena, &opts, f, args, nargs, &r), &r, what);
    expect_pass(fx, cr_test_consistency(fx->arena, &opts, f, args, nargs, &r), &r, what);
}

static const char *const k_fns[] = {
    "eachrow",     "eachcol",     "eachslice",   "unique",       "opnorm",       "normalize",
    "add_uniform", "sub_uniform", "mul_uniform", "ldiv_uniform", "rdiv_uniform",
};
#define NFNS (sizeof k_fns / sizeof k_fns[0])

/* ---- Every rule through the rule tester ---------------------------------------------------- */

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    bool seen[NFNS] = {false};
    size_t tested = 0;
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        size_t k = 0;
        while (k < NFNS && strcmp(info.fn->name, k_fns[k]) != 0)
            k++;
        if (k == NFNS)
            continue;
        seen[k] = true;
        assert_non_null(info.test);
        assert_true(cr_test_registration_usable(&info));
        cr_test_opts opts = {0};
        opts.npoints = 16;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        char sig[160];
        cr_signature_str(info.fn->name, info.args, info.nargs, info.variadic, sig, sizeof sig);
        expect_pass(fx, st, &r, sig);
        assert_true(r.npoints >= 8);
        assert_true(r.npassed > 0);
        tested++;
    }
    for (size_t k = 0; k < NFNS; k++)
        if (!seen[k]) {
            print_error("no rule registered for %s\n", k_fns[k]);
            fail();
        }
    assert_true(tested >= 14);
}

/* ---- eachrow, eachcol, eachslice ------------------------------------------------------------ */

static void test_eachslice_values(void **state)
{
    fixture *fx = *state;
    double w[6] = {1, 2, 3, 4, 5, 6};
    cr_array W = cr_array_matrix(w, 2, 3);
    cr_value a = cr_value_array(&W), y;
    /* eachrow: 2 views of 3 elements, not copies. */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eachrow, &a, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_STRUCT);
    assert_int_equal(y.u.obj.type->nfields, 2);
    cr_value s;
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 1, &s), CR_OK);
    assert_int_equal(s.u.arr->ndim, 1);
    assert_int_equal(s.u.arr->shape[0], 3);
    assert_ptr_equal(s.u.arr->data, &w[3]);
    assert_int_equal(s.u.arr->flags & CR_ARRAY_WRITABLE, 0);
    /* eachcol: 3 columns of 2, with stride 3. */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eachcol, &a, 1, &y), CR_OK);
    assert_int_equal(y.u.obj.type->nfields, 3);
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 2, &s), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(s.u.arr, 0)), 3);
    ASSERT_DBL(creal(cr_array_get_linear(s.u.arr, 1)), 6);
    /* eachcol of a vector: one slice, the vector. */
    cr_array V = cr_array_vector(w, 4);
    cr_value av = cr_value_array(&V);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eachcol, &av, 1, &y), CR_OK);
    assert_int_equal(y.u.obj.type->nfields, 1);
    /* eachrow of a vector: 0-d slices. */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eachrow, &av, 1, &y), CR_OK);
    assert_int_equal(y.u.obj.type->nfields, 4);
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 2, &s), CR_OK);
    assert_int_equal(s.u.arr->ndim, 0);
    ASSERT_DBL(creal(cr_array_get_linear(s.u.arr, 0)), 3);
    /* eachslice of a 2x3x2 array over dims (2, 0): slice k = (i2, i0) in row-major order,
     * each a vector along dimension 1. */
    double t[12];
    for (size_t i = 0; i < 12; i++)
        t[i] = (double)i;
    size_t sh3[3] = {2, 3, 2};
    cr_array T;
    cr_array_view_init(&T, t, CR_DT_F64, 3, sh3, NULL);
    int64_t dims[2] = {2, 0};
    size_t two = 2;
    cr_array D;
    cr_array_view_init(&D, dims, CR_DT_I64, 1, &two, NULL);
    cr_value args[2] = {cr_value_array(&T), cr_value_array(&D)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eachslice, args, 2, &y), CR_OK);
    assert_int_equal(y.u.obj.type->nfields, 4);
    /* slice 1 = (i2 = 0, i0 = 1): T[1, :, 0] = 6, 8, 10. */
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 1, &s), CR_OK);
    for (size_t j = 0; j < 3; j++)
        ASSERT_DBL(creal(cr_array_get_linear(s.u.arr, j)), 6 + 2 * (double)j);
    /* The same slicing gives the same tuple type (the algebra compares types by address). */
    cr_value y2;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eachslice, args, 2, &y2), CR_OK);
    assert_ptr_equal(y.u.obj.type, y2.u.obj.type);
    /* Errors. */
    args[1] = cr_value_i64(3);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eachslice, args, 2, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "eachslice"));
    int64_t rep[2] = {1, 1};
    cr_array R;
    cr_array_view_init(&R, rep, CR_DT_I64, 1, &two, NULL);
    args[1] = cr_value_array(&R);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eachslice, args, 2, &y), CR_EINVAL);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eachrow, args, 1, &y), CR_ESHAPE);
    /* Too many slices for the static tuple types. */
    double *big = calloc(2000, sizeof *big);
    assert_non_null(big);
    cr_array B = cr_array_vector(big, 2000);
    cr_value ab = cr_value_array(&B);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eachrow, &ab, 1, &y), CR_EUNIMPL);
    free(big);
}

/* The pullback takes a tuple cotangent with absent and zero fields; its result is an
 * InplaceableThunk that adds into an accumulator in place. */
static void test_eachslice_pullback(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double w[6] = {1, 2, 3, 4, 5, 6};
    cr_array W = cr_array_matrix(w, 2, 3);
    cr_value a = cr_value_array(&W), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_eachcol, &a, 1, &y, &pb), CR_OK);
    /* Only column 1 has a cotangent; columns 0 and 2 are absent. */
    double g1[2] = {10, 20};
    cr_array G1 = cr_array_vector(g1, 2);
    cr_tangent fields[3] = {cr_tangent_zero(), cr_tangent_array(&G1), cr_tangent_zero()};
    cr_tangent dy, dx[2];
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, fields, 3, &dy), CR_OK);
    dy.u.s.fields[0].tag = CR_TAN_ABSENT;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_NONE);
    assert_true(cr_tangent_is_inplaceable_thunk(dx[1]));
    cr_array *acc;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 2, W.shape, &acc), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ((double *)acc->data)[i] = 1;
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), dx[1], &out), CR_OK);
    assert_ptr_equal(out.u.arr, acc);
    assert_int_equal(dx[1].u.thunk->state, 0); /* added with add!, never evaluated */
    double want[6] = {1, 11, 1, 1, 21, 1};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(((double *)acc->data)[i], want[i]);
    /* Evaluated, it is the same array. */
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), want[i] - 1);
    /* An all-zero tuple cotangent gives ZeroTangent. */
    cr_tangent zf[3] = {cr_tangent_zero(), cr_tangent_zero(), cr_tangent_zero()};
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, zf, 3, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_ZERO);
    /* A cotangent that is not a tuple of as many fields is CR_ETANGENT. */
    cr_tangent bad = cr_tangent_array(&G1);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &bad, dx, 2), CR_ETANGENT);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "eachcol_pullback"));
    /* f32 and Diagonal arguments keep their precision and structure. */
    float wf[4] = {1, 2, 3, 4};
    size_t s22[2] = {2, 2};
    cr_array WF;
    cr_array_view_init(&WF, wf, CR_DT_F32, 2, s22, NULL);
    a = cr_value_array(&WF);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_eachrow, &a, 1, &y, &pb), CR_OK);
    cr_value r0;
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 0, &r0), CR_OK);
    assert_int_equal(r0.u.arr->dtype, CR_DT_F32);
    float gf[2] = {1, 2};
    cr_array GF;
    cr_array_view_init(&GF, gf, CR_DT_F32, 1, &s22[0], NULL);
    cr_tangent ff[2] = {cr_tangent_array(&GF), cr_tangent_zero()};
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, ff, 2, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(unthunked(dx[1]).u.arr->dtype, CR_DT_F32);
    double dg[2] = {5, 7};
    cr_array Dg;
    cr_array_view_init(&Dg, dg, CR_DT_F64, 2, s22, (ptrdiff_t[]){1, 0});
    Dg.structure = CR_MAT_DIAGONAL;
    a = cr_value_array(&Dg);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_eachrow, &a, 1, &y, &pb), CR_OK);
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 1, &r0), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(r0.u.arr, 0)), 0);
    ASSERT_DBL(creal(cr_array_get_linear(r0.u.arr, 1)), 7);
    double gd[2] = {3, 4};
    cr_array GD = cr_array_vector(gd, 2);
    cr_tangent fd[2] = {cr_tangent_array(&GD), cr_tangent_array(&GD)};
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, fd, 2, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    cr_tangent dd = unthunked(dx[1]);
    assert_int_equal(dd.u.arr->structure, CR_MAT_DIAGONAL);
    ASSERT_DBL(creal(cr_array_get_linear(dd.u.arr, 0)), 3);
    ASSERT_DBL(creal(cr_array_get_linear(dd.u.arr, 3)), 4);
    /* Finite differences on a complex 3-d array and a strided (transposed) view. */
    cr_complex z[12];
    for (size_t i = 0; i < 12; i++)
        z[i] = CMPLX(0.5 * (double)i - 2, 1 - 0.25 * (double)i);
    size_t sh3[3] = {3, 2, 2};
    cr_array Z;
    cr_array_view_init(&Z, z, CR_DT_C128, 3, sh3, NULL);
    cr_value za[2] = {cr_value_array(&Z), cr_value_i64(1)};
    check_point(fx, &cr_fn_eachslice, za, 2, NULL, "eachslice(c128 3-d, 1)");
    size_t s32[2] = {3, 2};
    ptrdiff_t tr[2] = {1, 3};
    cr_array Wt;
    cr_array_view_init(&Wt, w, CR_DT_F64, 2, s32, tr);
    a = cr_value_array(&Wt);
    check_point(fx, &cr_fn_eachrow, &a, 1, NULL, "eachrow(transposed view)");
}

/* ---- unique -------------------------------------------------------------------------------- */

static void test_unique(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    /* First-occurrence order; the cotangent goes to the first occurrence only. */
    double x[6] = {3, 1, 3, 2, 1, 3};
    cr_array X = cr_array_vector(x, 6);
    cr_value a = cr_value_array(&X), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_unique, &a, 1, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 3);
    double wy[3] = {3, 1, 2};
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), wy[i]);
    double g[3] = {10, 20, 30};
    cr_array G = cr_array_vector(g, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    double want[6] = {10, 20, 0, 30, 0, 0};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), want[i]);
    /* Its add! scatters into an accumulator without evaluating the thunk. */
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    cr_array *acc;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 1, X.shape, &acc), CR_OK);
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), dx[1], &out), CR_OK);
    assert_int_equal(dx[1].u.thunk->state, 0);
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(((double *)acc->data)[i], want[i]);
    /* frule: the tangent of the first occurrence. */
    double t[6] = {1, 2, 3, 4, 5, 6};
    cr_array Tn = cr_array_vector(t, 6);
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_array(&Tn)}, ty;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_unique, &a, 1, &y, &ty), CR_OK);
    double wt[3] = {1, 2, 4};
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(creal(cr_array_get_linear(ty.u.arr, i)), wt[i]);
    /* isequal: NaNs are equal to each other, -0.0 and 0.0 are distinct. */
    double s[5] = {NAN, 0.0, -0.0, NAN, 0.0};
    cr_array S = cr_array_vector(s, 5);
    a = cr_value_array(&S);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_unique, &a, 1, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 3);
    assert_true(isnan(creal(cr_array_get_linear(y.u.arr, 0))));
    assert_false(signbit(creal(cr_array_get_linear(y.u.arr, 1))));
    assert_true(signbit(creal(cr_array_get_linear(y.u.arr, 2))));
    /* f32 in, f32 out and f32 cotangent. */
    float xf[4] = {2, -1, 2, 5};
    size_t n4 = 4;
    cr_array XF;
    cr_array_view_init(&XF, xf, CR_DT_F32, 1, &n4, NULL);
    a = cr_value_array(&XF);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_unique, &a, 1, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    assert_int_equal(y.u.arr->shape[0], 3);
    dy = cr_tangent_array(y.u.arr);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(unthunked(dx[1]).u.arr->dtype, CR_DT_F32);
    ASSERT_DBL(creal(tan_at(dx[1], 2)), 0);
    ASSERT_DBL(creal(tan_at(dx[1], 3)), 5);
    /* Finite differences at a point without ties (in a strided view). */
    double d[8] = {0.5, 9, -1.25, 9, 3, 9, 2, 9};
    size_t n4b = 4;
    ptrdiff_t st2 = 2;
    cr_array Dv;
    cr_array_view_init(&Dv, d, CR_DT_F64, 1, &n4b, &st2);
    a = cr_value_array(&Dv);
    check_point(fx, &cr_fn_unique, &a, 1, NULL, "unique(strided, no ties)");
    /* Errors: matrices and complex vectors are not supported. */
    cr_array M = cr_array_matrix(x, 2, 3);
    a = cr_value_array(&M);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_unique, &a, 1, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "unique"));
}

/* ---- opnorm -------------------------------------------------------------------------------- */

static void test_opnorm(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    /* p = 1 with tied columns (sums 3 and 3): the first column gets the cotangent, its
     * zero entry gets 0. */
    double a1[6] = {1, -2, 0, 1, -2, 0};
    cr_array A1 = cr_array_matrix(a1, 3, 2); /* columns (1, 0, -2) and (-2, 1, 0) */
    cr_value args[2] = {cr_value_array(&A1), cr_value_i64(1)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_opnorm, args, 2, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 3);
    cr_tangent dy = cr_tangent_f64(2), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    double w1[6] = {2, 0, 0, 0, -2, 0};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), w1[i]);
    /* p = Inf: rows sums 3, 1, 2: the first row. */
    args[1] = cr_value_f64(INFINITY);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_opnorm, args, 2, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 3);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    double wi[6] = {2, -2, 0, 0, 0, 0};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(creal(tan_at(dx[1], i)), wi[i]);
#if defined(CR_HAVE_LAPACKE)
    /* p = 2 (the default) at a repeated top singular value (the identity) and at zero:
     * finite cotangents of unit Frobenius norm (u₁ v₁ᵀ), no NaN. */
    double id[4] = {1, 0, 0, 1}, zz[4] = {0, 0, 0, 0};
    for (int c = 0; c < 2; c++) {
        cr_array I2 = cr_array_matrix(c == 0 ? id : zz, 2, 2);
        cr_value ai = cr_value_array(&I2);
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_opnorm, &ai, 1, &y, &pb), CR_OK);
        ASSERT_CLOSE(y.u.f64, c == 0 ? 1 : 0, 1e-15);
        cr_tangent one = cr_tangent_f64(1);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &one, dx, 2), CR_OK);
        double fro = 0;
        for (size_t i = 0; i < 4; i++) {
            double v = creal(tan_at(dx[1], i));
            assert_true(isfinite(v));
            fro += v * v;
        }
        ASSERT_CLOSE(fro, 1, 1e-12);
    }
    /* Finite differences: complex and f32 matrices, p = 2 and Inf. */
    cr_complex zc[6] = {CMPLX(1, 2),      CMPLX(-0.5, 1), CMPLX(2, -1),
                        CMPLX(0.25, 0.5), CMPLX(-1, -1),  CMPLX(3, 0.5)};
    size_t s23[2] = {2, 3};
    cr_array Zc;
    cr_array_view_init(&Zc, zc, CR_DT_C128, 2, s23, NULL);
    cr_value az[1] = {cr_value_array(&Zc)};
    cr_test_report r;
    expect_pass(fx, cr_test_rrule(fx->arena, NULL, &cr_fn_opnorm, az, 1, &r), &r, "opnorm(c128)");
    expect_pass(fx, cr_test_frule(fx->arena, NULL, &cr_fn_opnorm, az, 1, &r), &r, "opnorm(c128)");
#endif
    cr_complex zi[4] = {CMPLX(1, 2), CMPLX(-0.5, 1), CMPLX(2, -1), CMPLX(0.25, 0.5)};
    size_t s22[2] = {2, 2};
    cr_array Zi;
    cr_array_view_init(&Zi, zi, CR_DT_C128, 2, s22, NULL);
    cr_value azi[2] = {cr_value_array(&Zi), cr_value_f64(INFINITY)};
    cr_array *dzi;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_C128, 2, s22, &dzi), CR_OK);
    for (size_t i = 0; i < 4; i++)
        ((cr_complex *)dzi->data)[i] = CMPLX(0.5 * (double)i, 1 - (double)i);
    cr_tangent dd[3] = {cr_tangent_none(), cr_tangent_array(dzi), cr_tangent_none()};
    check_point(fx, &cr_fn_opnorm, azi, 2, dd, "opnorm(c128, Inf)");
    float af[4] = {1, -3, 2, 0.5f};
    cr_array AF;
    cr_array_view_init(&AF, af, CR_DT_F32, 2, s22, NULL);
    cr_value aff[2] = {cr_value_array(&AF), cr_value_i64(1)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_opnorm, aff, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    cr_tangent onef = cr_tangent_f32(1);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &onef, dx, 3), CR_OK);
    assert_int_equal(unthunked(dx[1]).u.arr->dtype, CR_DT_F32);
    ASSERT_DBL(creal(tan_at(dx[1], 1)), -1); /* column 1: |-3| + |0.5| */
    /* Errors: p = 3, a vector. */
    args[1] = cr_value_i64(3);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_opnorm, args, 2, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "opnorm"));
    cr_array v = cr_array_vector(a1, 3);
    args[0] = cr_value_array(&v);
    args[1] = cr_value_i64(1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_opnorm, args, 2, &y), CR_ESHAPE);
}

/* ---- normalize ----------------------------------------------------------------------------- */

static void test_normalize(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double x[2] = {3, 4};
    cr_array X = cr_array_vector(x, 2);
    cr_value a = cr_value_array(&X), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_normalize, &a, 1, &y), CR_OK);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 0)), 0.6, 1e-15);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 1)), 0.8, 1e-15);
    /* The cotangent along y itself is 0 (the output has unit norm whatever the scale). */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_normalize, &a, 1, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_array(y.u.arr), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    ASSERT_CLOSE(creal(tan_at(dx[1], 0)), 0, 1e-15);
    ASSERT_CLOSE(creal(tan_at(dx[1], 1)), 0, 1e-15);
    /* p = 1 and Inf, by values; Inf with finite differences (p not perturbed). */
    double v[3] = {1, -2, 4};
    cr_array V = cr_array_vector(v, 3);
    cr_value ap[2] = {cr_value_array(&V), cr_value_i64(1)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_normalize, ap, 2, &y), CR_OK);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 1)), -2.0 / 7, 1e-15);
    ap[1] = cr_value_f64(INFINITY);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_normalize, ap, 2, &y), CR_OK);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 2)), 1, 1e-15);
    cr_array *dv;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 1, V.shape, &dv), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ((double *)dv->data)[i] = 0.5 + (double)i;
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_array(dv), cr_tangent_none()};
    check_point(fx, &cr_fn_normalize, ap, 2, dargs, "normalize(x, Inf)");
    /* Complex and f32 vectors with a float p (which gets its cotangent). */
    cr_complex z[3] = {CMPLX(1, -1), CMPLX(0.5, 2), CMPLX(-1.5, 0.25)};
    size_t n3 = 3;
    cr_array Z;
    cr_array_view_init(&Z, z, CR_DT_C128, 1, &n3, NULL);
    cr_value az[2] = {cr_value_array(&Z), cr_value_f64(1.5)};
    check_point(fx, &cr_fn_normalize, az, 2, NULL, "normalize(c128, 1.5)");
    float f[3] = {1, 2, -0.5f};
    cr_array F;
    cr_array_view_init(&F, f, CR_DT_F32, 1, &n3, NULL);
    a = cr_value_array(&F);
    check_point(fx, &cr_fn_normalize, &a, 1, NULL, "normalize(f32)");
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_normalize, &a, 1, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    dy = cr_tangent_array(y.u.arr);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(unthunked(dx[1]).u.arr->dtype, CR_DT_F32);
    /* A zero vector has no direction: CR_EDOMAIN. */
    double zero[3] = {0, 0, 0};
    cr_array Z0 = cr_array_vector(zero, 3);
    a = cr_value_array(&Z0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_normalize, &a, 1, &y), CR_EDOMAIN);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "normalize"));
}

/* ---- UniformScaling ------------------------------------------------------------------------ */

static void test_uniform(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double m[4] = {1, 2, 3, 4};
    cr_array M = cr_array_matrix(m, 2, 2);
    cr_value am = cr_value_array(&M), y;
    /* A + 2I, 2I - A, 2I * A, (2I) \ A, A / (2I). */
    cr_value args[2] = {am, cr_value_f64(2)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_add_uniform, args, 2, &y), CR_OK);
    double wadd[4] = {3, 2, 3, 6};
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), wadd[i]);
    cr_value rev[2] = {cr_value_f64(2), am};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sub_uniform, rev, 2, &y), CR_OK);
    double wsub[4] = {1, -2, -3, -2};
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), wsub[i]);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_mul_uniform, rev, 2, &y), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 3)), 8);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_ldiv_uniform, rev, 2, &y), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 3)), 2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_rdiv_uniform, args, 2, &y), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 1)), 1);
#if defined(CR_HAVE_LAPACKE)
    /* A \ (2I) = 2 A⁻¹: A Y = 2I. */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_ldiv_uniform, args, 2, &y), CR_OK);
    double Y[4];
    for (size_t i = 0; i < 4; i++)
        Y[i] = creal(cr_array_get_linear(y.u.arr, i));
    ASSERT_CLOSE(m[0] * Y[0] + m[1] * Y[2], 2, 1e-14);
    ASSERT_CLOSE(m[0] * Y[1] + m[1] * Y[3], 0, 1e-14);
    ASSERT_CLOSE(m[2] * Y[0] + m[3] * Y[2], 0, 1e-14);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_rdiv_uniform, rev, 2, &y), CR_OK);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 0)), Y[0], 1e-15);
    /* Finite differences with a complex λ and a real A (complex output). */
    cr_value ci[2] = {am, cr_value_c128(CMPLX(1.5, -0.5))};
    check_point(fx, &cr_fn_ldiv_uniform, ci, 2, NULL, "ldiv_uniform(A, c128)");
#endif
    /* λ̄ = tr Ȳ for A + λI; Ā = Ȳ itself (no copy, not writable). */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_add_uniform, args, 2, &y, &pb), CR_OK);
    double g[4] = {1, 5, 7, 2};
    cr_array G = cr_array_matrix(g, 2, 2);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[2].tag, CR_TAN_F64);
    ASSERT_DBL(dx[2].u.f64, 3);
    assert_int_equal(unthunked(dx[1]).u.arr->flags & CR_ARRAY_WRITABLE, 0);
    /* λI - A: Ā = -Ȳ, λ̄ = tr Ȳ. */
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sub_uniform, rev, 2, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    ASSERT_DBL(dx[1].u.f64, 3);
    ASSERT_DBL(creal(tan_at(dx[2], 1)), -5);
    /* Projection of λ̄: f32 for an f32 λ, real for a real λ with complex A, NoTangent for
     * an integer λ. */
    cr_value lf[2] = {cr_value_f32(2), am};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_mul_uniform, lf, 2, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_F32);
    ASSERT_DBL(dx[1].u.f32, 1 * 1 + 2 * 5 + 3 * 7 + 4 * 2);
    cr_value li[2] = {am, cr_value_i64(3)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sub_uniform, li, 2, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    cr_complex zc[4] = {CMPLX(1, 1), CMPLX(0, 2), CMPLX(-1, 0.5), CMPLX(2, -1)};
    size_t s22[2] = {2, 2};
    cr_array Zc;
    cr_array_view_init(&Zc, zc, CR_DT_C128, 2, s22, NULL);
    cr_value zl[2] = {cr_value_array(&Zc), cr_value_f64(0.5)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_rdiv_uniform, zl, 2, &y, &pb), CR_OK);
    cr_tangent dyc = cr_tangent_array(y.u.arr);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dyc, dx, 3), CR_OK);
    assert_int_equal(dx[2].tag, CR_TAN_F64);
    check_point(fx, &cr_fn_rdiv_uniform, zl, 2, NULL, "rdiv_uniform(c128 A, f64)");
    check_point(fx, &cr_fn_add_uniform, zl, 2, NULL, "add_uniform(c128 A, f64)");
    /* λA's cotangent accumulates in place with its add!. */
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_mul_uniform, args, 2, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_true(cr_tangent_is_inplaceable_thunk(dx[1]));
    cr_array *acc;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 2, s22, &acc), CR_OK);
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), dx[1], &out), CR_OK);
    assert_int_equal(dx[1].u.thunk->state, 0);
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(((double *)acc->data)[i], 2 * g[i]);
    /* A Symmetric argument gets a symmetric cotangent. */
    cr_array Ms = M;
    Ms.structure = CR_MAT_SYMMETRIC;
    cr_value as[2] = {cr_value_array(&Ms), cr_value_f64(1)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_add_uniform, as, 2, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    cr_tangent ds = unthunked(dx[1]);
    ASSERT_DBL(creal(cr_array_get_linear(ds.u.arr, 1)), creal(cr_array_get_linear(ds.u.arr, 2)));
    /* Errors: λI needs a square matrix; division by λ = 0. */
    double r6[6] = {1, 2, 3, 4, 5, 6};
    cr_array Rm = cr_array_matrix(r6, 2, 3);
    cr_value bad[2] = {cr_value_array(&Rm), cr_value_f64(1)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_add_uniform, bad, 2, &y), CR_ESHAPE);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "add_uniform"));
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_mul_uniform, bad, 2, &y), CR_OK);
    bad[1] = cr_value_f64(0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_rdiv_uniform, bad, 2, &y), CR_EDOMAIN);
}

/* ---- Arena exhaustion ---------------------------------------------------------------------- */

/* rrule, pullback (thunks evaluated) and frule in a fixed arena of every size in steps of 64
 * bytes up to the first size that succeeds: every smaller size must fail with CR_EARENA,
 * never crash or succeed partly (ASan builds check the memory). */
static void run_in_fixed_arena(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs)
{
    static unsigned char buf[1 << 16];
    bool done = false;
    for (size_t size = 64; size <= sizeof buf && !done; size += 64) {
        cr_arena_params ap = {0};
        ap.buffer = buf;
        ap.buffer_size = size;
        cr_arena *ar;
        assert_int_equal(cr_arena_new(fx->ctx, &ap, &ar), CR_OK);
        cr_value y;
        cr_pullback pb;
        cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_zero()}, dy;
        cr_status st = cr_rrule(NULL, ar, f, args, nargs, &y, &pb);
        cr_tangent seed, dx[3];
        if (st == CR_OK)
            st = cr_tangent_zero_of(ar, &y, &seed);
        if (st == CR_OK && seed.tag == CR_TAN_F64)
            seed.u.f64 = 1;
        if (st == CR_OK && seed.tag == CR_TAN_F32)
            seed.u.f32 = 1;
        if (st == CR_OK)
            st = cr_pullback_call(ar, &pb, &seed, dx, nargs + 1);
        for (size_t i = 1; st == CR_OK && i <= nargs; i++)
            st = cr_tangent_unthunk(dx[i], &dx[i]);
        for (size_t i = 0; st == CR_OK && i < nargs; i++)
            if (args[i].kind == CR_KIND_ARRAY)
                st = cr_tangent_zero_of(ar, &args[i], &dargs[i + 1]);
        if (st == CR_OK)
            st = cr_frule(NULL, ar, dargs, f, args, nargs, &y, &dy);
        if (st == CR_OK)
            done = true;
        else
            assert_int_equal(st, CR_EARENA);
        cr_arena_free(ar);
    }
    assert_true(done);
}

static void test_arena_exhaustion(void **state)
{
    fixture *fx = *state;
    double w[6] = {1, -2, 3, 4, 5, -6}, u[5] = {3, 1, 3, 2, 1};
    cr_array W = cr_array_matrix(w, 2, 3), S = cr_array_matrix(w, 2, 2), U = cr_array_vector(u, 5);
    cr_value a[2] = {cr_value_array(&W), cr_value_i64(1)};
    run_in_fixed_arena(fx, &cr_fn_eachrow, a, 1);
    run_in_fixed_arena(fx, &cr_fn_eachslice, a, 2);
    run_in_fixed_arena(fx, &cr_fn_opnorm, a, 2);
    run_in_fixed_arena(fx, &cr_fn_normalize, a, 1);
    cr_value au = cr_value_array(&U);
    run_in_fixed_arena(fx, &cr_fn_unique, &au, 1);
    cr_value sl[2] = {cr_value_array(&S), cr_value_c128(CMPLX(2, 1))};
    const cr_value *fns[3] = {&cr_fn_add_uniform, &cr_fn_mul_uniform, &cr_fn_rdiv_uniform};
    for (size_t i = 0; i < 3; i++)
        run_in_fixed_arena(fx, fns[i], sl, 2);
#if defined(CR_HAVE_LAPACKE)
    cr_value s2 = cr_value_array(&S);
    run_in_fixed_arena(fx, &cr_fn_opnorm, &s2, 1);
    run_in_fixed_arena(fx, &cr_fn_ldiv_uniform, sl, 2);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eachslice_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eachslice_pullback, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_unique, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_opnorm, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_normalize, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_uniform, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_exhaustion, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
