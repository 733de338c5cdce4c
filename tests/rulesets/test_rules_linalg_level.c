/*
 * Tests of the BLAS- and LAPACK-level functions (nrm2, gemv, getrf, getrs, getri, potrf,
 * potrs, trtrs, trsyl) and of the complex SVD: every rule through the rule tester at the
 * points its sampler draws (random, pivoted, structured, with junk in unread triangles,
 * f64/f32/c128), then explicit complex, ill-conditioned and degenerate cases, the domain
 * errors, and gauge-invariant losses of the complex SVD against finite differences.
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

static bool all_finite(cr_tangent t)
{
    cr_tangent v = unthunked(t);
    if (v.tag != CR_TAN_ARRAY)
        return v.tag != CR_TAN_F64 || isfinite(v.u.f64);
    for (size_t i = 0; i < cr_array_numel(v.u.arr); i++) {
        cr_complex z = cr_array_get_linear(v.u.arr, i);
        if (!isfinite(creal(z)) || !isfinite(cimag(z)))
            return false;
    }
    return true;
}

/* A complex row-major r x c matrix over interleaved (re, im) doubles. */
static cr_array cmatrix(double *ri, size_t r, size_t c)
{
    cr_array A = cr_array_matrix(ri, r, c);
    A.dtype = CR_DT_C128;
    return A;
}

/* The rule tester's checks (rrule, frule, dot-product consistency) at explicit arguments. */
static void check_rules(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                        double tol)
{
    cr_test_opts opts = {0};
    opts.rtol = tol;
    opts.atol = tol;
    cr_test_report r;
    cr_status st = cr_test_rrule(fx->arena, &opts, f, args, nargs, &r);
    if (st != CR_OK)
        print_error("%s: %s\n", f->u.func.fn->name, cr_ctx_errmsg(fx->ctx));
    CR_ASSERT_RULE_TEST(st, r);
    CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, &opts, f, args, nargs, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_consistency(fx->arena, NULL, f, args, nargs, &r), r);
}

static const char *const k_fns[] = {
    "nrm2",  "gemv",
#if defined(CR_HAVE_LAPACKE)
    "getrf", "getrs", "getri", "potrf", "potrs", "trtrs", "trsyl", "svd", "svdvals",
#endif
};

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    size_t nf = sizeof k_fns / sizeof k_fns[0];
    bool seen[sizeof k_fns / sizeof k_fns[0]] = {false};
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        size_t k = 0;
        while (k < nf && strcmp(info.fn->name, k_fns[k]) != 0)
            k++;
        if (k == nf)
            continue;
        seen[k] = true;
        assert_true(cr_test_registration_usable(&info));
        cr_test_opts opts = {0};
        opts.npoints = 40;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        /* trsyl's complex variants of 'T' samples are outside its domain (skipped). */
        if (st != CR_OK || r.verdict == CR_VERDICT_FAIL || 4 * r.nskipped > r.npoints) {
            char buf[1200], sig[160];
            cr_signature_str(info.fn->name, info.args, info.nargs, info.variadic, sig, sizeof sig);
            cr_test_report_format(&r, buf, sizeof buf);
            print_error("%s: %s (%s; %s; %zu skipped: %s)\n", sig, buf, cr_status_name(st),
                        cr_ctx_errmsg(fx->ctx), r.nskipped, r.skip_note);
            fail();
        }
    }
    for (size_t k = 0; k < nf; k++)
        if (!seen[k]) {
            print_error("no rule registered for %s\n", k_fns[k]);
            fail();
        }
}

/* nrm2 is norm: same value; at a zero vector the cotangent and the tangent are 0, not NaN;
 * an f32 argument keeps f32. */
static void test_nrm2(void **state)
{
    fixture *fx = *state;
    double x[3] = {3, 0, -4}, z[3] = {0, 0, 0};
    cr_array X = cr_array_vector(x, 3), Z = cr_array_vector(z, 3);
    cr_value a = cr_value_array(&X), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_nrm2, &a, 1, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 5.0);
    cr_value az = cr_value_array(&Z);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_nrm2, &az, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 0.0);
    cr_tangent dy = cr_tangent_f64(1.0), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_true(all_finite(dx[1]));
    cr_tangent g = unthunked(dx[1]);
    if (g.tag == CR_TAN_ARRAY)
        for (size_t i = 0; i < 3; i++)
            ASSERT_DBL(creal(cr_array_get_linear(g.u.arr, i)), 0.0);
    double d[3] = {1, 2, 3};
    cr_array D = cr_array_vector(d, 3);
    cr_tangent din[2] = {cr_tangent_none(), cr_tangent_array(&D)}, dout;
    assert_int_equal(cr_frule(NULL, fx->arena, din, &cr_fn_nrm2, &az, 1, &y, &dout), CR_OK);
    assert_true(all_finite(dout));
    float xf[2] = {3, 4};
    size_t two = 2;
    cr_array *Xf;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F32, 1, &two, &Xf), CR_OK);
    memcpy(Xf->data, xf, sizeof xf);
    cr_value af = cr_value_array(Xf);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_nrm2, &af, 1, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    cr_tangent dyf = cr_tangent_f32(1.0f);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dyf, dx, 2), CR_OK);
    assert_int_equal(unthunked(dx[1]).u.arr->dtype, CR_DT_F32);
}

/* gemv: the values of each trans; Ā is an InplaceableThunk whose add! accumulates the
 * rank-one matrix without evaluating the thunk; complex trans 'T' and 'C' against finite
 * differences. */
static void test_gemv(void **state)
{
    fixture *fx = *state;
    double a[6] = {1, 2, 3, 4, 5, 6}, x2[2] = {1, -1}, x3[3] = {0.5, 1, 2}, yv[3] = {1, 1, 1};
    cr_array A = cr_array_matrix(a, 3, 2), X2 = cr_array_vector(x2, 2), X3 = cr_array_vector(x3, 3),
             Y = cr_array_vector(yv, 3);
    cr_value args[6] = {cr_value_i64('N'),   cr_value_f64(2),  cr_value_array(&A),
                        cr_value_array(&X2), cr_value_f64(-1), cr_value_array(&Y)},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_gemv, args, 6, &y), CR_OK);
    /* 2 A x - y = 2 (-1, -1, -1) - 1 */
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), -3.0);
    args[0] = cr_value_i64('t');
    args[3] = cr_value_array(&X3);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_gemv, args, 4, &y), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 0)), 2 * (0.5 + 3 + 10));
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gemv, args, 4, &y, &pb), CR_OK);
    double g[2] = {1, -2};
    cr_array G = cr_array_vector(g, 2);
    cr_tangent dy = cr_tangent_array(&G), dx[5];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 5), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    assert_true(cr_tangent_is_inplaceable_thunk(dx[3]));
    cr_array *acc;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 2, A.shape, &acc), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ((double *)acc->data)[i] = (double)i;
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), dx[3], &out), CR_OK);
    assert_ptr_equal(out.u.arr, acc);
    assert_int_equal(dx[3].u.thunk->state, 0);
    /* y = 2 Aᵀ x: Ā = 2 x ȳᵀ */
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            ASSERT_DBL(((double *)acc->data)[i * 2 + j], 2 * x3[i] * g[j] + (double)(i * 2 + j));
    /* Complex, each trans, with and without y. */
    double ca[12] = {1, 0.5, -1, 2, 0.25, -1, 3, 1, -2, 0.5, 1, 1};
    double cx[6] = {1, -1, 0.5, 2, -1, 0.25}, cy[6] = {0.5, 0.5, -1, 0, 2, -1};
    cr_array CA = cmatrix(ca, 3, 2), CX = cmatrix(cx, 3, 1), CY = cmatrix(cy, 3, 1);
    CX.ndim = 1;
    CY.ndim = 1;
    cr_array CX2 = CX, CY2 = CY;
    CX2.shape[0] = 2;
    CY2.shape[0] = 2;
    const char ops[3] = {'N', 'T', 'C'};
    for (size_t k = 0; k < 3; k++) {
        cr_value ca6[6] = {cr_value_i64(ops[k]),
                           cr_value_c128(CMPLX(0.5, -1)),
                           cr_value_array(&CA),
                           cr_value_array(ops[k] == 'N' ? &CX2 : &CX),
                           cr_value_c128(CMPLX(-1, 0.25)),
                           cr_value_array(ops[k] == 'N' ? &CY : &CY2)};
        check_rules(fx, &cr_fn_gemv, ca6, 6, 1e-9);
        check_rules(fx, &cr_fn_gemv, ca6, 4, 1e-9);
    }
    /* Bad flags and shapes. */
    args[0] = cr_value_i64('X');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_gemv, args, 4, &y), CR_EINVAL);
    args[0] = cr_value_i64('N');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_gemv, args, 4, &y), CR_ESHAPE);
}

#if defined(CR_HAVE_LAPACKE)

/* getrf then getrs and getri reproduce solve and inv; a singular matrix is factored but
 * its rules report CR_EDOMAIN; complex trans 'T' and an ill-conditioned matrix against
 * finite differences. */
static void test_lu(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double a[9] = {1, 2, 0.5, 4, -1, 2, 0.25, 3, 1}, b[3] = {1, -2, 0.5};
    cr_array A = cr_array_matrix(a, 3, 3), B = cr_array_vector(b, 3);
    cr_value av = cr_value_array(&A), lu, x1, x2;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getrf, &av, 1, &lu), CR_OK);
    cr_value F, P;
    assert_int_equal(cr_type_field_value(lu.u.obj.type, lu.u.obj.ptr, 0, &F), CR_OK);
    assert_int_equal(cr_type_field_value(lu.u.obj.type, lu.u.obj.ptr, 1, &P), CR_OK);
    assert_int_equal(P.u.arr->dtype, CR_DT_I64);
    assert_int_equal(((int64_t *)P.u.arr->data)[0], 2); /* |4| is the largest of column 0 */
    cr_value sargs[4] = {F, P, cr_value_array(&B), cr_value_i64('N')};
    cr_value sv[2] = {av, cr_value_array(&B)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getrs, sargs, 4, &x1), CR_OK);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_solve, sv, 2, &x2), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(creal(cr_array_get_linear(x1.u.arr, i)) + 1,
                   creal(cr_array_get_linear(x2.u.arr, i)) + 1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getri, sargs, 2, &x1), CR_OK);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_matinv, &av, 1, &x2), CR_OK);
    for (size_t i = 0; i < 9; i++)
        ASSERT_DBL(creal(cr_array_get_linear(x1.u.arr, i)) + 1,
                   creal(cr_array_get_linear(x2.u.arr, i)) + 1);
    check_rules(fx, &cr_fn_getrf, &av, 1, 1e-9);
    for (size_t k = 0; k < 3; k++) {
        sargs[3] = cr_value_i64("NTC"[k]);
        check_rules(fx, &cr_fn_getrs, sargs, 4, 1e-9);
    }
    check_rules(fx, &cr_fn_getri, sargs, 2, 1e-9);
    /* Complex: trans 'T' (the adjoint solve is with conj(A)). */
    double ca[8] = {2, 1, -1, 0.5, 0.5, -0.25, 3, -1}, cb[4] = {1, 1, -0.5, 2};
    cr_array CA = cmatrix(ca, 2, 2), CB = cmatrix(cb, 2, 1);
    CB.ndim = 1;
    cr_value cav = cr_value_array(&CA), clu, CF, CP;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getrf, &cav, 1, &clu), CR_OK);
    assert_int_equal(cr_type_field_value(clu.u.obj.type, clu.u.obj.ptr, 0, &CF), CR_OK);
    assert_int_equal(cr_type_field_value(clu.u.obj.type, clu.u.obj.ptr, 1, &CP), CR_OK);
    check_rules(fx, &cr_fn_getrf, &cav, 1, 1e-9);
    for (size_t k = 0; k < 3; k++) {
        cr_value cs[4] = {CF, CP, cr_value_array(&CB), cr_value_i64("NTC"[k])};
        check_rules(fx, &cr_fn_getrs, cs, 4, 1e-9);
    }
    cr_value cs2[2] = {CF, CP};
    check_rules(fx, &cr_fn_getri, cs2, 2, 1e-9);
    /* Ill-conditioned (condition number about 3e4), the pivots still clear. */
    double ill[9] = {1, 30, 0, 0, 1, 30, 0, 0, 1};
    cr_array IA = cr_array_matrix(ill, 3, 3);
    cr_value iav = cr_value_array(&IA);
    check_rules(fx, &cr_fn_getrf, &iav, 1, 1e-5);
    /* Singular: the factors exist, the derivatives do not. */
    double sg[4] = {1, 2, 2, 4};
    cr_array SA = cr_array_matrix(sg, 2, 2);
    cr_value sav = cr_value_array(&SA), y;
    cr_pullback pb;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getrf, &sav, 1, &y), CR_OK);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_getrf, &sav, 1, &y, &pb), CR_EDOMAIN);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "getrf"));
    /* Singular factors and bad pivots. */
    double zf[4] = {1, 2, 3, 0};
    int64_t piv[2] = {1, 2}, bad[2] = {3, 2};
    cr_array ZF = cr_array_matrix(zf, 2, 2), *PV, *BP;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_I64, 1, (size_t[]){2}, &PV), CR_OK);
    assert_int_equal(cr_array_new(fx->arena, CR_DT_I64, 1, (size_t[]){2}, &BP), CR_OK);
    memcpy(PV->data, piv, sizeof piv);
    memcpy(BP->data, bad, sizeof bad);
    cr_value za[2] = {cr_value_array(&ZF), cr_value_array(PV)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getri, za, 2, &y), CR_EDOMAIN);
    za[0] = cr_value_array(&A);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getri, za, 2, &y), CR_ESHAPE);
    double f2[4] = {2, 1, 1, 2};
    cr_array F2 = cr_array_matrix(f2, 2, 2);
    za[0] = cr_value_array(&F2);
    za[1] = cr_value_array(BP);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getri, za, 2, &y), CR_EINVAL);
}

/* potrf: U and L agree (L = Uᴴ), the unread triangle is not read and gets no cotangent;
 * not positive definite is CR_EDOMAIN. potrs solves with potrf's factor. */
static void test_cholesky_level(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double h[9] = {4, 1, 0.5, 99, 3, -1, -99, 99, 2.5}; /* upper triangle read */
    double l[9] = {4, 99, -99, 1, 3, 99, 0.5, -1, 2.5}; /* the same in the lower triangle */
    cr_array HU = cr_array_matrix(h, 3, 3), HL = cr_array_matrix(l, 3, 3);
    cr_value au[2] = {cr_value_array(&HU), cr_value_i64('U')};
    cr_value al[2] = {cr_value_array(&HL), cr_value_i64('L')}, yu, yl;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_potrf, au, 2, &yu), CR_OK);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_potrf, al, 2, &yl), CR_OK);
    assert_int_equal(yu.u.arr->structure, CR_MAT_UPPER);
    assert_int_equal(yl.u.arr->structure, CR_MAT_LOWER);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            assert_true(fabs(creal(cr_array_get_linear(yu.u.arr, i * 3 + j)) -
                             creal(cr_array_get_linear(yl.u.arr, j * 3 + i))) < 1e-14);
            if (i > j)
                ASSERT_DBL(creal(cr_array_get_linear(yu.u.arr, i * 3 + j)), 0.0);
        }
    check_rules(fx, &cr_fn_potrf, au, 2, 1e-9);
    check_rules(fx, &cr_fn_potrf, al, 2, 1e-9);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_potrf, al, 2, &yl, &pb), CR_OK);
    double g[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array G = cr_array_matrix(g, 3, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    cr_tangent ga = unthunked(dx[1]);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = i + 1; j < 3; j++)
            ASSERT_DBL(creal(cr_array_get_linear(ga.u.arr, i * 3 + j)), 0.0);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    /* Complex Hermitian positive definite, both triangles. */
    double ch[8] = {3, 0, 1, -1, 1, 1, 2, 0}; /* [[3, 1-i], [1+i, 2]] */
    cr_array CH = cmatrix(ch, 2, 2);
    for (size_t k = 0; k < 2; k++) {
        cr_value ca[2] = {cr_value_array(&CH), cr_value_i64("UL"[k])};
        check_rules(fx, &cr_fn_potrf, ca, 2, 1e-9);
        double cb[4] = {1, 0.5, -2, 1};
        cr_array CB = cmatrix(cb, 2, 1);
        cr_value F;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_potrf, ca, 2, &F), CR_OK);
        F.u.arr->structure = CR_MAT_DENSE;
        cr_value pa[3] = {F, ca[1], cr_value_array(&CB)};
        check_rules(fx, &cr_fn_potrs, pa, 3, 1e-9);
    }
    /* potrs(potrf(A)) solves A x = b. */
    double b[3] = {1, 2, 3};
    cr_array B = cr_array_vector(b, 3);
    cr_value pa[3] = {yu, cr_value_i64('U'), cr_value_array(&B)}, x;
    yu.u.arr->structure = CR_MAT_DENSE;
    pa[0] = yu;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_potrs, pa, 3, &x), CR_OK);
    double full[9] = {4, 1, 0.5, 1, 3, -1, 0.5, -1, 2.5};
    for (size_t i = 0; i < 3; i++) {
        double r = 0;
        for (size_t j = 0; j < 3; j++)
            r += full[i * 3 + j] * creal(cr_array_get_linear(x.u.arr, j));
        assert_true(fabs(r - b[i]) < 1e-12);
    }
    /* Not positive definite; a zero diagonal factor; a bad uplo. */
    double np[4] = {1, 2, 2, 1};
    cr_array NP = cr_array_matrix(np, 2, 2);
    cr_value na[2] = {cr_value_array(&NP), cr_value_i64('U')}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_potrf, na, 2, &y), CR_EDOMAIN);
    double zd[4] = {0, 1, 0, 1}, b2[2] = {1, 1};
    cr_array ZD = cr_array_matrix(zd, 2, 2), B2 = cr_array_vector(b2, 2);
    cr_value za[3] = {cr_value_array(&ZD), cr_value_i64('U'), cr_value_array(&B2)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_potrs, za, 3, &y), CR_EDOMAIN);
    za[1] = cr_value_i64('Q');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_potrs, za, 3, &y), CR_EINVAL);
}

/* trtrs: the unit diagonal is not read (no cotangent on it), each trans for complex, a
 * singular triangle. */
static void test_trtrs(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double a[9] = {2, 1, -1, 99, 5, 0.5, 99, 99, 3}, b[6] = {1, 2, 3, 4, 5, 6};
    cr_array A = cr_array_matrix(a, 3, 3), B = cr_array_matrix(b, 3, 2);
    cr_value args[5] = {cr_value_array(&A), cr_value_i64('U'), cr_value_i64('N'), cr_value_i64('U'),
                        cr_value_array(&B)},
             y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_trtrs, args, 5, &y, &pb), CR_OK);
    /* Unit upper: x_2 = b_2, x_1 = b_1 - 0.5 x_2, ... */
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 4)), 5.0);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 2)), 3 - 0.5 * 5);
    cr_tangent dy = cr_tangent_array(&B), dx[6];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 6), CR_OK);
    cr_tangent ga = unthunked(dx[1]);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j <= i; j++)
            ASSERT_DBL(creal(cr_array_get_linear(ga.u.arr, i * 3 + j)), 0.0);
    for (size_t k = 2; k < 5; k++)
        assert_int_equal(dx[k].tag, CR_TAN_NONE);
    check_rules(fx, &cr_fn_trtrs, args, 5, 1e-9);
    double ca[8] = {2, 1, 0.5, -1, 7, 7, -1, 3}, cb[4] = {1, -1, 2, 0.5};
    cr_array CA = cmatrix(ca, 2, 2), CB = cmatrix(cb, 2, 1);
    CB.ndim = 1;
    for (size_t k = 0; k < 3; k++) {
        cr_value cargs[5] = {cr_value_array(&CA), cr_value_i64('U'), cr_value_i64("NTC"[k]),
                             cr_value_i64('N'), cr_value_array(&CB)};
        check_rules(fx, &cr_fn_trtrs, cargs, 5, 1e-9);
    }
    a[4] = 0;
    args[3] = cr_value_i64('N');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trtrs, args, 5, &y), CR_EDOMAIN);
}

/* trsyl: the residual of the Sylvester equation; 2 x 2 blocks (real Schur forms with
 * complex eigenvalues) and junk below them against finite differences; complex; errors. */
static void test_trsyl(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    /* A: blocks [[2, 0.8], [-0.6, 2]] and [[1.5, 1], [-0.5, 1.5]], junk below the
     * subdiagonal; B upper triangular 3 x 3 with junk below. */
    double a[16] = {2, 0.8, 0.3, -0.2, -0.6, 2, 0.1, 0.4, 9, 0, 1.5, 1, 9, 9, -0.5, 1.5};
    double b[9] = {1, 0.5, -0.3, 0, 2, 0.25, 9, 0, 1.5};
    double c[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    cr_array A = cr_array_matrix(a, 4, 4), B = cr_array_matrix(b, 3, 3),
             C = cr_array_matrix(c, 4, 3);
    /* B's zero subdiagonal entries would start blocks if perturbed (a change of structure
     * the derivative holds fixed): tag it Upper so that only its triangle is perturbed. */
    B.structure = CR_MAT_UPPER;
    for (int sgn = -1; sgn <= 1; sgn += 2)
        for (size_t ka = 0; ka < 2; ka++)
            for (size_t kb = 0; kb < 2; kb++) {
                cr_value args[6] = {cr_value_i64("NT"[ka]), cr_value_i64("NT"[kb]),
                                    cr_value_i64(sgn),      cr_value_array(&A),
                                    cr_value_array(&B),     cr_value_array(&C)},
                         x;
                if (sgn < 0) /* keep the spectra of A and B apart */
                    for (size_t i = 0; i < 3; i++)
                        b[i * 3 + i] = -fabs(b[i * 3 + i]);
                else
                    for (size_t i = 0; i < 3; i++)
                        b[i * 3 + i] = fabs(b[i * 3 + i]);
                assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsyl, args, 6, &x), CR_OK);
                /* Residual op(A) X + sgn X op(B) - C with the read parts of A and B. */
                for (size_t i = 0; i < 4; i++)
                    for (size_t j = 0; j < 3; j++) {
                        double r = -c[i * 3 + j];
                        for (size_t l = 0; l < 4; l++) {
                            size_t p = ka ? l : i, q = ka ? i : l; /* op(A)_il = A_pq */
                            bool read = q + 1 >= p && (q + 1 != p || a[p * 4 + q] != 0);
                            if (p > q + 1 || (p == q + 1 && p == 2))
                                read = false;
                            if (read)
                                r += a[p * 4 + q] * creal(cr_array_get_linear(x.u.arr, l * 3 + j));
                        }
                        for (size_t l = 0; l < 3; l++) {
                            size_t p = kb ? j : l, q = kb ? l : j; /* op(B)_lj = B_pq */
                            if (p <= q)
                                r += sgn * creal(cr_array_get_linear(x.u.arr, i * 3 + l)) *
                                     b[p * 3 + q];
                        }
                        assert_true(fabs(r) < 1e-12);
                    }
                check_rules(fx, &cr_fn_trsyl, args, 6, 1e-8);
            }
    /* Complex upper triangular, trans 'N' and 'C'. */
    double ca[8] = {2, 1, 0.5, -1, 9, 9, 1.5, -0.5}, cb[2] = {1, 2}, cc[4] = {1, 0, -1, 2};
    cr_array CA = cmatrix(ca, 2, 2), CB = cmatrix(cb, 1, 1), CC = cmatrix(cc, 2, 1);
    CA.structure = CR_MAT_UPPER;
    for (size_t k = 0; k < 2; k++) {
        cr_value cargs[6] = {cr_value_i64("NC"[k]), cr_value_i64("CN"[k]), cr_value_i64(1),
                             cr_value_array(&CA),   cr_value_array(&CB),   cr_value_array(&CC)};
        check_rules(fx, &cr_fn_trsyl, cargs, 6, 1e-9);
    }
    cr_value y;
    cr_value cargs[6] = {cr_value_i64('T'),   cr_value_i64('N'),   cr_value_i64(1),
                         cr_value_array(&CA), cr_value_array(&CB), cr_value_array(&CC)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsyl, cargs, 6, &y), CR_EINVAL);
    /* Adjacent nonzero subdiagonal entries: the first starts a block, the second (outside
     * any block) is not read. */
    double ns[9] = {1, 1, 0, -1, 1, 1, 0, -1, 1}, n0[9] = {1, 1, 0, -1, 1, 1, 0, 0, 1};
    double c33[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array NS = cr_array_matrix(ns, 3, 3), N0 = cr_array_matrix(n0, 3, 3),
             C33 = cr_array_matrix(c33, 3, 3);
    cr_value nargs6[6] = {cr_value_i64('N'),   cr_value_i64('N'),   cr_value_i64(1),
                          cr_value_array(&NS), cr_value_array(&NS), cr_value_array(&C33)},
             y0;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsyl, nargs6, 6, &y), CR_OK);
    nargs6[3] = cr_value_array(&N0);
    nargs6[4] = cr_value_array(&N0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsyl, nargs6, 6, &y0), CR_OK);
    for (size_t i = 0; i < 9; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)), creal(cr_array_get_linear(y0.u.arr, i)));
    /* Singular: A X - X A has the common spectrum of A and A. */
    double u2[4] = {1, 1, 0, 2}, c22[4] = {1, 1, 1, 1};
    cr_array U2 = cr_array_matrix(u2, 2, 2), C22 = cr_array_matrix(c22, 2, 2);
    cr_value sargs[6] = {cr_value_i64('N'),   cr_value_i64('N'),   cr_value_i64(-1),
                         cr_value_array(&U2), cr_value_array(&U2), cr_value_array(&C22)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsyl, sargs, 6, &y), CR_EDOMAIN);
    sargs[2] = cr_value_i64(2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsyl, sargs, 6, &y), CR_EINVAL);
}

/* ---- The complex SVD ----------------------------------------------------------------------- */

/* A gauge-invariant loss of the complex SVD, as a function of A:
 * L = Σ_k c_k |Σ_ij conj(W_ij) U_ik conj(V_jk)|² + Re <W2, U diag(S) Vᴴ>. Its rrule chains
 * svd's pullback with the loss's seeds; finite differences of the primal see only the
 * loss, whatever gauge svd fixes. */
typedef struct svd_loss_env {
    cr_pullback svd_pb;
    cr_value usv;
} svd_loss_env;

static const double k_w[12] = {0.5, -1, 0.25, 2, -0.75, 0.5, 1, 0.125, -1.5, 0.25, 0.75, -0.5};
static const double k_w2[12] = {1, 0.5, -0.5, 1, 0.25, -2, 1.5, 0.75, -1, -0.25, 0.5, 2};

static cr_complex wij(const double *w, size_t i, size_t j, size_t n)
{
    return CMPLX(w[(i * n + j) % 12], w[(i * n + j + 5) % 12]);
}

/* The loss and (when seeds != NULL) the cotangents of U, S, V for seed l̄. */
static double svd_loss_eval(cr_arena *arena, const cr_value *usv, double lbar, cr_tangent *seed)
{
    cr_value Uv, Sv, Vv;
    assert_int_equal(cr_type_field_value(usv->u.obj.type, usv->u.obj.ptr, 0, &Uv), CR_OK);
    assert_int_equal(cr_type_field_value(usv->u.obj.type, usv->u.obj.ptr, 1, &Sv), CR_OK);
    assert_int_equal(cr_type_field_value(usv->u.obj.type, usv->u.obj.ptr, 2, &Vv), CR_OK);
    const cr_array *U = Uv.u.arr, *S = Sv.u.arr, *V = Vv.u.arr;
    size_t m = U->shape[0], n = V->shape[0], k = S->shape[0];
    cr_array *Ub = NULL, *Sb = NULL, *Vb = NULL;
    if (seed != NULL) {
        assert_int_equal(cr_array_new(arena, CR_DT_C128, 2, U->shape, &Ub), CR_OK);
        assert_int_equal(cr_array_new(arena, CR_DT_F64, 1, S->shape, &Sb), CR_OK);
        assert_int_equal(cr_array_new(arena, CR_DT_C128, 2, V->shape, &Vb), CR_OK);
    }
    double L = 0;
    for (size_t q = 0; q < k; q++) {
        double cq = 1.0 + 0.5 * (double)q, s = creal(cr_array_get_linear(S, q));
        cr_complex z = 0;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++)
                z += conj(wij(k_w, i, j, n)) * cr_array_get_linear(U, i * k + q) *
                     conj(cr_array_get_linear(V, j * k + q));
        L += cq * creal(z * conj(z));
        cr_complex r = 0; /* u_qᴴ W2 v_q */
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++)
                r += conj(cr_array_get_linear(U, i * k + q)) * wij(k_w2, i, j, n) *
                     cr_array_get_linear(V, j * k + q);
        L += s * creal(r);
        if (seed == NULL)
            continue;
        ((double *)Sb->data)[q] = lbar * creal(r);
        cr_complex *ub = Ub->data, *vb = Vb->data;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                cr_complex vj = cr_array_get_linear(V, j * k + q),
                           ui = cr_array_get_linear(U, i * k + q);
                ub[i * k + q] +=
                    lbar * (2 * cq * z * wij(k_w, i, j, n) * vj + s * wij(k_w2, i, j, n) * vj);
                vb[j * k + q] += lbar * (2 * cq * conj(z) * conj(wij(k_w, i, j, n)) * ui +
                                         s * conj(wij(k_w2, i, j, n)) * ui);
            }
    }
    if (seed != NULL) {
        cr_tangent f3[3] = {cr_tangent_array(Ub), cr_tangent_array(Sb), cr_tangent_array(Vb)};
        assert_int_equal(cr_tangent_struct(arena, usv->u.obj.type, NULL, f3, 3, seed), CR_OK);
    }
    return L;
}

static cr_status svd_loss_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                 size_t nargs, cr_value *out)
{
    (void)f;
    cr_value usv;
    cr_status st = cr_function_call(arena, &cr_fn_svd, args, nargs, &usv);
    if (st == CR_OK)
        *out = cr_value_f64(svd_loss_eval(arena, &usv, 0, NULL));
    return st;
}

static const cr_function k_svd_loss = {.name = "svd_loss", .arity = 1, .primal = svd_loss_primal};

static cr_status svd_loss_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                   void *env)
{
    (void)nx;
    svd_loss_env *e = env;
    cr_complex l;
    cr_tangent v;
    cr_status st = cr_tangent_unthunk(*dy, &v);
    if (st != CR_OK)
        return st;
    l = v.tag == CR_TAN_F64 ? v.u.f64 : 0;
    cr_tangent seed, d[2];
    svd_loss_eval(arena, &e->usv, creal(l), &seed);
    st = cr_pullback_call(arena, &e->svd_pb, &seed, d, 2);
    dx[0] = cr_tangent_none();
    dx[1] = d[1];
    return st;
}

static cr_status svd_loss_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                const void *udata)
{
    (void)f;
    (void)udata;
    svd_loss_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(svd_loss_env));
    if (e == NULL)
        return cr_ctx_errcode(cr_arena_ctx(arena));
    cr_status st = cr_rrule(cfg, arena, &cr_fn_svd, args, nargs, &e->usv, &e->svd_pb);
    if (st != CR_OK)
        return st;
    *y = cr_value_f64(svd_loss_eval(arena, &e->usv, 0, NULL));
    *pb = (cr_pullback){svd_loss_pullback, e, "svd_loss_pullback", nargs + 1};
    return CR_OK;
}

/* The complex SVD: the gauge (each column of U has its largest entry real positive), the
 * reconstruction, the rules against finite differences directly (exact for the fixed
 * gauge) and through gauge-invariant losses, and finite cotangents at degenerate and
 * rank-deficient matrices. */
static void test_svd_complex(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double m1[12] = {1, 0.5, -0.25, 2, 0.75, -1, 1.5, 0.25, -0.5, 1, 2, -0.75}; /* 3 x 2 */
    double m2[12] = {0.5, 1, 2, -0.5, -1, 0.25, 0.75, 1.5, 1, -1, 0.25, 0.5};   /* 2 x 3 */
    double m3[8] = {1, 1, 0.5, -2, 0.25, 1, 2, 0.5};                            /* 2 x 2 */
    cr_array As[3] = {cmatrix(m1, 3, 2), cmatrix(m2, 2, 3), cmatrix(m3, 2, 2)};
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, NULL, &reg), CR_OK);
    const cr_argspec sig[1] = {{CR_M_A_C128 | CR_M_A_F64, NULL}};
    cr_rule_def def = {0};
    def.struct_size = sizeof def;
    def.fn = &k_svd_loss;
    def.nargs = 1;
    def.args = sig;
    def.rrule = svd_loss_rrule;
    assert_int_equal(cr_registry_add(reg, &def), CR_OK);
    const cr_config cfg = {.registry = reg};
    cr_value loss = cr_value_function(&k_svd_loss, NULL);
    for (size_t t = 0; t < 3; t++) {
        cr_value a = cr_value_array(&As[t]), y;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_svd, &a, 1, &y), CR_OK);
        cr_value U, S, V;
        assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 0, &U), CR_OK);
        assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 1, &S), CR_OK);
        assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 2, &V), CR_OK);
        size_t m = As[t].shape[0], n = As[t].shape[1], k = S.u.arr->shape[0];
        for (size_t q = 0; q < k; q++) {
            size_t best = 0;
            for (size_t i = 1; i < m; i++)
                if (cabs(cr_array_get_linear(U.u.arr, i * k + q)) >
                    cabs(cr_array_get_linear(U.u.arr, best * k + q)))
                    best = i;
            cr_complex u = cr_array_get_linear(U.u.arr, best * k + q);
            assert_true(creal(u) > 0);
            ASSERT_DBL(cimag(u), 0.0);
        }
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                cr_complex r = 0;
                for (size_t q = 0; q < k; q++)
                    r += cr_array_get_linear(U.u.arr, i * k + q) *
                         creal(cr_array_get_linear(S.u.arr, q)) *
                         conj(cr_array_get_linear(V.u.arr, j * k + q));
                cr_complex want = cr_array_get_linear(&As[t], i * n + j);
                assert_true(cabs(r - want) < 1e-12);
            }
        check_rules(fx, &cr_fn_svd, &a, 1, 1e-8);
        check_rules(fx, &cr_fn_svdvals, &a, 1, 1e-8);
        cr_test_opts opts = {0};
        opts.cfg = &cfg;
        cr_test_report r;
        CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, &opts, &loss, &a, 1, &r), r);
    }
    /* Degenerate: a unitary times 2 (equal singular values), rank one, a zero matrix. */
    double c = cos(0.3), s = sin(0.3);
    double d1[8] = {2 * c, 0, 0, -2 * s, 0, -2 * s, 2 * c, 0};    /* 2 [[c, -is], [-is, c]] */
    double d2[12] = {1, 1, 2, 2, -1, 0.5, -2, 1, 0.5, -1, 1, -2}; /* rank one 3 x 2 */
    double d3[8] = {0};
    cr_array Ds[3] = {cmatrix(d1, 2, 2), cmatrix(d2, 3, 2), cmatrix(d3, 2, 2)};
    for (size_t t = 0; t < 3; t++) {
        cr_value a = cr_value_array(&Ds[t]), y;
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_svd, &a, 1, &y, &pb), CR_OK);
        cr_tangent seed, dx[2];
        svd_loss_eval(fx->arena, &y, 1.0, &seed);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 2), CR_OK);
        assert_true(all_finite(dx[1]));
        cr_tangent din[2] = {cr_tangent_none(), cr_tangent_array(t == 1 ? &As[0] : &As[2])}, dout;
        assert_int_equal(cr_frule(NULL, fx->arena, din, &cr_fn_svd, &a, 1, &y, &dout), CR_OK);
        for (size_t i = 0; i < 3; i++)
            assert_true(all_finite(cr_tangent_field(unthunked(dout), i)));
    }
    cr_registry_free(reg);
}

/* The LAPACK-level rules in arenas too small for them, real and complex: CR_EARENA at every
 * size short of room, and the rule's results once it fits. */
static void test_arena_level(void **state)
{
    fixture *fx = *state;
    double a[9] = {4, 1, 0.5, 1, 3, 0.25, 0.5, 0.25, 2}, b[6] = {1, -2, 0.5, 3, -1, 2};
    double ca[18], cb[12];
    for (int i = 0; i < 9; i++) {
        ca[2 * i] = a[i];
        ca[2 * i + 1] = i % 3 == i / 3 ? 0 : (i % 3 > i / 3 ? 0.125 : -0.125);
    }
    for (int i = 0; i < 6; i++) {
        cb[2 * i] = b[i];
        cb[2 * i + 1] = 0.25 * i - 0.5;
    }
    cr_array R[2] = {cr_array_matrix(a, 3, 3), cmatrix(ca, 3, 3)};
    cr_array B[2] = {cr_array_matrix(b, 3, 2), cmatrix(cb, 3, 2)};
    for (int c = 0; c < 2; c++) {
        cr_value av = cr_value_array(&R[c]), bv = cr_value_array(&B[c]), lu, F, P, U;
        assert_arena_sweep_rules(fx, &cr_fn_getrf, &av, 1);
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_getrf, &av, 1, &lu), CR_OK);
        assert_int_equal(cr_type_field_value(lu.u.obj.type, lu.u.obj.ptr, 0, &F), CR_OK);
        assert_int_equal(cr_type_field_value(lu.u.obj.type, lu.u.obj.ptr, 1, &P), CR_OK);
        cr_value rs[4] = {F, P, bv, cr_value_i64(c ? 'C' : 'T')}, ri[2] = {F, P};
        assert_arena_sweep_rules(fx, &cr_fn_getrs, rs, 4);
        assert_arena_sweep_rules(fx, &cr_fn_getri, ri, 2);
        cr_value po[2] = {av, cr_value_i64(c ? 'L' : 'U')};
        assert_arena_sweep_rules(fx, &cr_fn_potrf, po, 2);
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_potrf, po, 2, &U), CR_OK);
        cr_value ps[3] = {U, po[1], bv};
        assert_arena_sweep_rules(fx, &cr_fn_potrs, ps, 3);
        cr_value tr[5] = {av, cr_value_i64(c ? 'L' : 'U'), cr_value_i64(c ? 'C' : 'N'),
                          cr_value_i64('N'), bv};
        assert_arena_sweep_rules(fx, &cr_fn_trtrs, tr, 5);
        cr_array T = R[c];
        T.structure = CR_MAT_UPPER;
        cr_value sy[6] = {cr_value_i64('N'),  cr_value_i64(c ? 'C' : 'N'), cr_value_i64(1),
                          cr_value_array(&T), cr_value_array(&T),          av};
        assert_arena_sweep_rules(fx, &cr_fn_trsyl, sy, 6);
    }
}
#endif /* CR_HAVE_LAPACKE */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nrm2, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gemv, fixture_setup, fixture_teardown),
#if defined(CR_HAVE_LAPACKE)
        cmocka_unit_test_setup_teardown(test_lu, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky_level, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_trtrs, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_trsyl, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_svd_complex, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_level, fixture_setup, fixture_teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
