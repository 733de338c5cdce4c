/*
 * Tests of the linear-algebra rule family (rules_linalg.h): every registered rule through
 * the rule tester at the points its sampler draws (random, transposed, structured and,
 * for the LAPACK rules, ill-conditioned and degenerate inputs), then the conventions:
 * InplaceableThunks accumulating with gemm, projections (Diagonal, real, f32), and the
 * factorizations' special cases.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include "test_linalg_fns.h"
#include <chainrules/testing_cmocka.h>

static cr_tangent unthunked(cr_tangent t)
{
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(t, &v), CR_OK);
    return v;
}

static const char *const k_linalg_fns[] = {
    "matmul",    "gemm",     "dot",       "tr",   "kron",        "cross",    "Symmetric",
    "Hermitian", "Diagonal", "asum",
#if defined(CR_HAVE_LAPACKE)
    "det",       "logdet",   "logabsdet", "inv",  "solve",       "cholesky", "eigen",
    "eigvals",   "svd",      "svdvals",   "expm", "matfun_herm", "rdiv",
#endif
};

static bool in_family(const char *name)
{
    for (size_t i = 0; i < sizeof k_linalg_fns / sizeof k_linalg_fns[0]; i++)
        if (strcmp(name, k_linalg_fns[i]) == 0)
            return true;
    return false;
}

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    bool seen[sizeof k_linalg_fns / sizeof k_linalg_fns[0]] = {false};
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        if (!in_family(info.fn->name))
            continue;
        for (size_t k = 0; k < sizeof k_linalg_fns / sizeof k_linalg_fns[0]; k++)
            if (strcmp(info.fn->name, k_linalg_fns[k]) == 0)
                seen[k] = true;
        assert_true(cr_test_registration_usable(&info));
        cr_test_opts opts = {0};
        opts.npoints = 16;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        if (st != CR_OK || r.verdict == CR_VERDICT_FAIL) {
            char buf[1200], sig[160];
            cr_signature_str(info.fn->name, info.args, info.nargs, info.variadic, sig, sizeof sig);
            cr_test_report_format(&r, buf, sizeof buf);
            print_error("%s: %s (%s; %s)\n", sig, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
            fail();
        }
    }
    for (size_t k = 0; k < sizeof k_linalg_fns / sizeof k_linalg_fns[0]; k++)
        if (!seen[k]) {
            print_error("no rule registered for %s\n", k_linalg_fns[k]);
            fail();
        }
}

/* matmul's cotangents are InplaceableThunks: add!! runs gemm with beta = 1 into the
 * accumulator, leaves the thunk unevaluated, and equals the evaluated value. */
static void test_matmul_inplace(void **state)
{
    fixture *fx = *state;
    double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0.5, -1, 2, 0.25, 1, 3}, g[4] = {1, -2, 0.5, 3};
    cr_array A = cr_array_matrix(a, 2, 3), B = cr_array_matrix(b, 3, 2),
             G = cr_array_matrix(g, 2, 2);
    cr_value args[2] = {cr_value_array(&A), cr_value_array(&B)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, args, 2, &y, &pb), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 0)), 0.5 + 2 * 2 + 3 * 1);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_true(cr_tangent_is_inplaceable_thunk(dx[1]));
    assert_true(cr_tangent_is_inplaceable_thunk(dx[2]));
    cr_array *acc;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 2, A.shape, &acc), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ((double *)acc->data)[i] = (double)i;
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), dx[1], &out), CR_OK);
    assert_ptr_equal(out.u.arr, acc);
    assert_int_equal(dx[1].u.thunk->state, 0);
    cr_tangent v = unthunked(dx[1]);
    /* Ā = Ȳ Bᵀ */
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++) {
            double want = g[i * 2] * b[j * 2] + g[i * 2 + 1] * b[j * 2 + 1];
            ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, i * 3 + j)), want);
            ASSERT_DBL(((double *)acc->data)[i * 3 + j], want + (double)(i * 3 + j));
        }
}

static void test_projections(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    /* Diagonal A: a Diagonal cotangent. */
    double d[3] = {1, 2, 3}, b[6] = {1, 2, 3, 4, 5, 6};
    cr_array D = cr_array_matrix(d, 3, 3), B = cr_array_matrix(b, 3, 2);
    D.structure = CR_MAT_DIAGONAL;
    D.strides[0] = 1;
    D.strides[1] = 0;
    cr_value args[2] = {cr_value_array(&D), cr_value_array(&B)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, args, 2, &y, &pb), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 5)), 18);
    double g[6] = {1, 1, 1, 1, 1, 1};
    cr_array G = cr_array_matrix(g, 3, 2);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    cr_tangent v = unthunked(dx[1]);
    assert_int_equal(v.u.arr->structure, CR_MAT_DIAGONAL);
    ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, 4)), 7);
    ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, 1)), 0);
    /* A Diagonal accumulator takes the projected value (add! writes dense storage). */
    cr_tangent acc;
    assert_int_equal(cr_tangent_copy(fx->arena, v, &acc), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(cr_tangent_accum(fx->arena, acc, dx[1], &acc), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(acc.u.arr, 4)), 14);
    /* f32 operands: f32 output, f32 cotangents. */
    float af[4] = {1, 2, 3, 4};
    size_t s22[2] = {2, 2};
    cr_array AF;
    cr_array_view_init(&AF, af, CR_DT_F32, 2, s22, NULL);
    cr_value fargs[2] = {cr_value_array(&AF), cr_value_array(&AF)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, fargs, 2, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 0)), 7);
    cr_tangent dyf = cr_tangent_array(y.u.arr);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dyf, dx, 3), CR_OK);
    assert_int_equal(unthunked(dx[1]).u.arr->dtype, CR_DT_F32);
    assert_int_equal(unthunked(dx[2]).u.arr->dtype, CR_DT_F32);
    /* gemm with a complex alpha and real A: A's cotangent stays real, alpha's is complex. */
    double a2[4] = {1, 2, 3, 4}, c2[4] = {0};
    cr_array A2 = cr_array_matrix(a2, 2, 2), C2 = cr_array_matrix(c2, 2, 2);
    cr_value gargs[5] = {cr_value_c128(CMPLX(0.5, 1)), cr_value_array(&A2), cr_value_array(&A2),
                         cr_value_f64(2), cr_value_array(&C2)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gemm, gargs, 5, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_C128);
    cr_tangent dyc = cr_tangent_array(y.u.arr), d5[6];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dyc, d5, 6), CR_OK);
    assert_int_equal(d5[1].tag, CR_TAN_C128);
    assert_int_equal(unthunked(d5[2]).u.arr->dtype, CR_DT_F64);
    assert_int_equal(d5[4].tag, CR_TAN_F64);
    assert_int_equal(unthunked(d5[5]).u.arr->dtype, CR_DT_F64);
}

static void test_dot_tr_values(void **state)
{
    fixture *fx = *state;
    cr_complex x[2] = {CMPLX(1, 2), CMPLX(0, 1)}, yv[2] = {CMPLX(3, 0), CMPLX(1, 1)};
    size_t n2 = 2;
    cr_array X, Y;
    cr_array_view_init(&X, x, CR_DT_C128, 1, &n2, NULL);
    cr_array_view_init(&Y, yv, CR_DT_C128, 1, &n2, NULL);
    cr_value args[2] = {cr_value_array(&X), cr_value_array(&Y)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_dot, args, 2, &y), CR_OK);
    /* conj(1+2i)*3 + conj(i)*(1+i) = 3 - 6i + 1 - i */
    ASSERT_CPLX(y.u.c128, 4, -7);
    double a[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array A = cr_array_matrix(a, 3, 3);
    A.structure = CR_MAT_UPPER;
    cr_value av = cr_value_array(&A);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_tr, &av, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 15);
    cr_tangent dy = cr_tangent_f64(2), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    cr_tangent v = unthunked(dx[1]);
    ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, 4)), 2);
    ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, 1)), 0);
    ASSERT_CLOSE(creal(cr_array_get_linear(v.u.arr, 8)), 2, 0);
}

#if defined(CR_HAVE_LAPACKE)
/* ---- LAPACK: special inputs ----------------------------------------------------------------- */

/* Element (i, j) of a 2-d array tangent or value. */
static cr_complex at2(const cr_array *a, size_t i, size_t j)
{
    return cr_array_get_linear(a, i * a->shape[1] + j);
}

static bool all_finite(cr_tangent t)
{
    cr_tangent v = unthunked(t);
    if (v.tag != CR_TAN_ARRAY)
        return true;
    size_t n = cr_array_numel(v.u.arr);
    for (size_t i = 0; i < n; i++) {
        cr_complex z = cr_array_get_linear(v.u.arr, i);
        if (!isfinite(creal(z)) || !isfinite(cimag(z)))
            return false;
    }
    return true;
}

/* det at singular matrices: the adjugate (through the SVD), never NaN; finite differences
 * of the polynomial det agree. */
static void test_det_singular(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double r1[9] = {1, 2, 3, 2, 4, 6.5, -1, 0.5, 2}; /* rank 3, then made rank 2 */
    r1[5] = 6;                                       /* row 1 = 2 row 0 */
    cr_array A = cr_array_matrix(r1, 3, 3);
    cr_value a = cr_value_array(&A), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_det, &a, 1, &y, &pb), CR_OK);
    ASSERT_CLOSE(y.u.f64, 0, 1e-15);
    cr_tangent dy = cr_tangent_f64(1), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_true(all_finite(dx[1]));
    /* adj(A)ᵀ: the cofactors; for this A, cofactor (2, 2) = 1*4 - 2*2 = 0, (2, 0) = 2*6 - 3*4 = 0,
     * (0, 0) = 4*2 - 6*0.5 = 5. */
    cr_tangent v = unthunked(dx[1]);
    ASSERT_CLOSE(creal(at2(v.u.arr, 0, 0)), 5, 1e-12);
    ASSERT_CLOSE(creal(at2(v.u.arr, 2, 2)), 0, 1e-12);
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, NULL, &cr_fn_det, &a, 1, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, NULL, &cr_fn_det, &a, 1, &r), r);
    /* Rank n - 2: the adjugate is zero. */
    double r2[9] = {1, 2, 3, 2, 4, 6, 3, 6, 9};
    cr_array A2 = cr_array_matrix(r2, 3, 3);
    a = cr_value_array(&A2);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_det, &a, 1, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    v = unthunked(dx[1]);
    for (size_t i = 0; i < 9; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(v.u.arr, i)), 0, 1e-12);
    /* logdet of a matrix with negative determinant, inv of a singular one: domain errors. */
    double neg[4] = {0, 1, 1, 0};
    cr_array N = cr_array_matrix(neg, 2, 2);
    a = cr_value_array(&N);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_logdet, &a, 1, &y), CR_EDOMAIN);
    a = cr_value_array(&A2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_matinv, &a, 1, &y), CR_EDOMAIN);
    cr_value sargs[2] = {a, a};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_solve, sargs, 2, &y), CR_EDOMAIN);
}

/* An ill-conditioned matrix (condition number ~1e5): the frule and rrule agree to rounding
 * (the dot-product test, no finite differences), and finite differences agree to the
 * accuracy the conditioning allows. */
static void test_ill_conditioned(void **state)
{
    fixture *fx = *state;
    double a[9] = {1, 1, 1, 1, 1 + 1e-2, 1, 1, 1, 1 + 3e-2};
    double b[3] = {1, 2, 3};
    cr_array A = cr_array_matrix(a, 3, 3), B = cr_array_vector(b, 3);
    cr_value args[2] = {cr_value_array(&A), cr_value_array(&B)};
    cr_test_opts opts = {0};
    opts.rtol = 1e-5;
    opts.atol = 1e-5;
    const cr_value *fns[4] = {&cr_fn_solve, &cr_fn_matinv, &cr_fn_det, &cr_fn_logabsdet};
    for (size_t k = 0; k < 4; k++) {
        size_t n = k == 0 ? 2 : 1;
        cr_test_report r;
        CR_ASSERT_RULE_TEST(cr_test_consistency(fx->arena, NULL, fns[k], args, n, &r), r);
        CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, &opts, fns[k], args, n, &r), r);
        CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, &opts, fns[k], args, n, &r), r);
    }
}

/* The seeds of the reconstruction loss L = <C, U diag(s) Vᵀ> = <C, A>: Ū = C V S,
 * s̄_i = u_iᵀ C v_i, V̄ = Cᵀ U S. */
static void svd_reconstruct_seeds(cr_arena *arena, const double *C, const cr_value *y,
                                  cr_tangent *dy)
{
    cr_value U, S, V;
    assert_int_equal(cr_type_field_value(y->u.obj.type, y->u.obj.ptr, 0, &U), CR_OK);
    assert_int_equal(cr_type_field_value(y->u.obj.type, y->u.obj.ptr, 1, &S), CR_OK);
    assert_int_equal(cr_type_field_value(y->u.obj.type, y->u.obj.ptr, 2, &V), CR_OK);
    size_t m = U.u.arr->shape[0], n = V.u.arr->shape[0], k = S.u.arr->shape[0];
    cr_array *Ub, *Sb, *Vb;
    size_t su[2] = {m, k}, sv[2] = {n, k};
    assert_int_equal(cr_array_new(arena, CR_DT_F64, 2, su, &Ub), CR_OK);
    assert_int_equal(cr_array_new(arena, CR_DT_F64, 1, &k, &Sb), CR_OK);
    assert_int_equal(cr_array_new(arena, CR_DT_F64, 2, sv, &Vb), CR_OK);
    for (size_t j = 0; j < k; j++) {
        double sj = creal(cr_array_get_linear(S.u.arr, j)), sb = 0;
        for (size_t i = 0; i < m; i++) {
            double cv = 0;
            for (size_t l = 0; l < n; l++)
                cv += C[i * n + l] * creal(at2(V.u.arr, l, j));
            ((double *)Ub->data)[i * k + j] = cv * sj;
            sb += creal(at2(U.u.arr, i, j)) * cv;
        }
        ((double *)Sb->data)[j] = sb;
        for (size_t l = 0; l < n; l++) {
            double cu = 0;
            for (size_t i = 0; i < m; i++)
                cu += C[i * n + l] * creal(at2(U.u.arr, i, j));
            ((double *)Vb->data)[l * k + j] = cu * sj;
        }
    }
    cr_tangent f3[3] = {cr_tangent_array(Ub), cr_tangent_array(Sb), cr_tangent_array(Vb)};
    assert_int_equal(cr_tangent_struct(arena, y->u.obj.type, NULL, f3, 3, dy), CR_OK);
}

/* Degenerate SVDs (ChainRules #664): repeated and zero singular values never give NaN or
 * Inf. The rule drops the terms that would divide by s_j² - s_i² = 0 or by s_j = 0, so the
 * cotangent is finite; it is exact only where the loss does not depend on the rotations
 * those terms describe (the reconstruction loss L = <C, A> used here does, so its value is
 * not checked: a nondegenerate matrix gets exactly C). */
static void test_svd_degenerate(void **state)
{
    fixture *fx = *state;
    double c = cos(0.3), s = sin(0.3);
    double m1[4] = {2 * c, -2 * s, 2 * s, 2 * c};         /* 2 x orthogonal: s = (2, 2) */
    double m2[6] = {1, 2, 2, 4, -1, -2};                  /* rank 1: s = (5.4..., 0) */
    double m3[6] = {1, 0, 0, 0, 1, 0};                    /* s = (1, 1), n > k */
    double m4[12] = {1, 2, 0, 0, 1, 1, 1, 3, 1, 2, 3, 1}; /* 4 x 3 of rank 2 */
    m4[9] = m4[0] + m4[3];
    m4[10] = m4[1] + m4[4];
    m4[11] = m4[2] + m4[5];
    {
        /* Nondegenerate: exactly C. */
        double m0[6] = {3, 1, 0.5, -1, 2, 0.25};
        cr_array A0 = cr_array_matrix(m0, 3, 2);
        cr_value a0 = cr_value_array(&A0), y0;
        cr_pullback pb0;
        cr_tangent dy0, dx0[2];
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_svd, &a0, 1, &y0, &pb0), CR_OK);
        double C0[6] = {0.5, -1, 0.25, 2, 1, -0.75};
        svd_reconstruct_seeds(fx->arena, C0, &y0, &dy0);
        assert_int_equal(cr_pullback_call(fx->arena, &pb0, &dy0, dx0, 2), CR_OK);
        cr_tangent v0 = unthunked(dx0[1]);
        for (size_t i = 0; i < 6; i++)
            ASSERT_CLOSE(creal(cr_array_get_linear(v0.u.arr, i)), C0[i], 1e-10);
    }
    const double *ms[4] = {m1, m2, m3, m4};
    size_t rows[4] = {2, 3, 2, 4}, cols[4] = {2, 2, 3, 3};
    double C[12];
    for (size_t i = 0; i < 12; i++)
        C[i] = 0.25 * (double)((i * 7) % 5) - 0.5;
    for (size_t t = 0; t < 4; t++) {
        cr_array A = cr_array_matrix((double *)ms[t], rows[t], cols[t]);
        cr_value a = cr_value_array(&A), y;
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_svd, &a, 1, &y, &pb), CR_OK);
        cr_tangent dy, dx[2];
        svd_reconstruct_seeds(fx->arena, C, &y, &dy);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
        assert_true(all_finite(dx[1]));
        /* #664's example: tr(U), a loss that is not even invariant. Finite. */
        cr_value U;
        assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 0, &U), CR_OK);
        cr_array *Ub;
        assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 2, U.u.arr->shape, &Ub), CR_OK);
        for (size_t i = 0; i < U.u.arr->shape[0] && i < U.u.arr->shape[1]; i++)
            ((double *)Ub->data)[i * U.u.arr->shape[1] + i] = 1;
        cr_tangent f3[3] = {cr_tangent_array(Ub), cr_tangent_zero(), cr_tangent_zero()};
        assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, f3, 3, &dy), CR_OK);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
        assert_true(all_finite(dx[1]));
        /* svdvals: finite at the degenerate points too; the frule as well. */
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_svdvals, &a, 1, &y, &pb), CR_OK);
        cr_array *ones;
        size_t k = y.u.arr->shape[0];
        assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 1, &k, &ones), CR_OK);
        for (size_t i = 0; i < k; i++)
            ((double *)ones->data)[i] = 1;
        cr_tangent ds = cr_tangent_array(ones);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &ds, dx, 2), CR_OK);
        assert_true(all_finite(dx[1]));
        cr_tangent din[2] = {cr_tangent_none(), cr_tangent_array(&A)}, dout;
        assert_int_equal(cr_frule(NULL, fx->arena, din, &cr_fn_svd, &a, 1, &y, &dout), CR_OK);
        for (size_t f = 0; f < 3; f++)
            assert_true(all_finite(cr_tangent_field(dout, f)));
    }
}

/* eigen with a repeated eigenvalue (real symmetric) and of a complex Hermitian matrix:
 * the reconstruction loss L = re<C, V diag(λ) Vᴴ> has gradient Herm(C) with respect to
 * the Hermitian matrix, independent of the eigenvectors' phases. At the repeated
 * eigenvalue the rule drops the terms coupling its eigenvectors; Herm(C) has no entry
 * inside that eigenspace here (H[0][1] = 0), so the loss does not rotate it and the
 * cotangent is exact; with such an entry it is finite (checked below). */
static void test_eigen_degenerate(void **state)
{
    fixture *fx = *state;
    double rs[9] = {2, 0, 0, 0, 2, 0, 0, 0, 5}; /* eigenvalue 2 twice */
    cr_complex hs[4] = {CMPLX(1, 0), CMPLX(0.5, 0.25), CMPLX(0.5, -0.25), CMPLX(-1, 0)};
    for (size_t t = 0; t < 2; t++) {
        size_t n = t == 0 ? 3 : 2, shape[2] = {n, n};
        cr_array A;
        if (t == 0)
            A = cr_array_matrix(rs, 3, 3);
        else
            cr_array_view_init(&A, hs, CR_DT_C128, 2, shape, NULL);
        A.structure = t == 0 ? CR_MAT_SYMMETRIC : CR_MAT_HERMITIAN;
        cr_value a = cr_value_array(&A), y;
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_eigen, &a, 1, &y, &pb), CR_OK);
        cr_value L, V;
        assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 0, &L), CR_OK);
        assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 1, &V), CR_OK);
        cr_complex C[9], H[9];
        for (size_t i = 0; i < n * n; i++)
            C[i] = CMPLX(0.25 * (double)((i * 5) % 7) - 0.75, t == 0 ? 0 : 0.125 * (double)i);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                H[i * n + j] = 0.5 * (C[i * n + j] + conj(C[j * n + i]));
        /* Seeds: V̄ = 2 Herm(C) V diag(λ), λ̄_i = re(v_iᴴ C v_i). */
        cr_array *Lb, *Vb;
        assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 1, &n, &Lb), CR_OK);
        assert_int_equal(cr_array_new(fx->arena, (cr_dtype)A.dtype, 2, shape, &Vb), CR_OK);
        for (size_t j = 0; j < n; j++) {
            double lj = creal(cr_array_get_linear(L.u.arr, j));
            cr_complex q = 0;
            for (size_t i = 0; i < n; i++) {
                cr_complex hv = 0;
                for (size_t l = 0; l < n; l++)
                    hv += H[i * n + l] * at2(V.u.arr, l, j);
                if (t == 0)
                    ((double *)Vb->data)[i * n + j] = creal(2 * hv * lj);
                else
                    ((cr_complex *)Vb->data)[i * n + j] = 2 * hv * lj;
                q += conj(at2(V.u.arr, i, j)) * hv;
            }
            ((double *)Lb->data)[j] = creal(q);
        }
        cr_tangent f2[2] = {cr_tangent_array(Lb), cr_tangent_array(Vb)}, dy, dx[2];
        assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, f2, 2, &dy), CR_OK);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
        cr_tangent v = unthunked(dx[1]);
        for (size_t i = 0; i < n * n; i++) {
            cr_complex g = cr_array_get_linear(v.u.arr, i);
            ASSERT_CLOSE(creal(g), creal(H[i]), 1e-10);
            ASSERT_CLOSE(cimag(g), cimag(H[i]), 1e-10);
        }
        if (t == 0) {
            /* A loss that rotates the repeated eigenspace: finite, no NaN. */
            ((double *)Vb->data)[0] += 1;
            ((double *)Vb->data)[n] -= 0.5;
            assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, f2, 2, &dy), CR_OK);
            assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
            assert_true(all_finite(dx[1]));
        }
        /* eigvals at the repeated eigenvalue: the sum of eigenvalues (the trace) has
         * gradient I. */
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_eigvals, &a, 1, &y, &pb), CR_OK);
        cr_array *ones;
        assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 1, &n, &ones), CR_OK);
        for (size_t i = 0; i < n; i++)
            ((double *)ones->data)[i] = 1;
        cr_tangent d1 = cr_tangent_array(ones);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &d1, dx, 2), CR_OK);
        v = unthunked(dx[1]);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                ASSERT_CLOSE(creal(at2(v.u.arr, i, j)), i == j ? 1 : 0, 1e-12);
    }
}

static void test_cholesky_cases(void **state)
{
    fixture *fx = *state;
    /* The lower triangle of a dense argument is not read. */
    double a[4] = {4, 2, 1e300, 5};
    cr_array A = cr_array_matrix(a, 2, 2);
    cr_value v = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky, &v, 1, &y), CR_OK);
    assert_int_equal(y.u.arr->structure, CR_MAT_UPPER);
    ASSERT_CLOSE(creal(at2(y.u.arr, 0, 0)), 2, 1e-15);
    ASSERT_CLOSE(creal(at2(y.u.arr, 0, 1)), 1, 1e-15);
    ASSERT_CLOSE(creal(at2(y.u.arr, 1, 1)), 2, 1e-15);
    ASSERT_CLOSE(creal(at2(y.u.arr, 1, 0)), 0, 0);
    /* Not positive definite. */
    a[3] = -5;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky, &v, 1, &y), CR_EDOMAIN);
}

/* expm: exact cases, scaling and squaring, and agreement with the Hermitian matrix
 * function; matfun_herm at a repeated eigenvalue. */
static void test_matrix_functions(void **state)
{
    fixture *fx = *state;
    double nil[4] = {0, 1, 0, 0};
    cr_array N = cr_array_matrix(nil, 2, 2);
    cr_value a = cr_value_array(&N), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_expm, &a, 1, &y), CR_OK);
    ASSERT_CLOSE(creal(at2(y.u.arr, 0, 0)), 1, 1e-15);
    ASSERT_CLOSE(creal(at2(y.u.arr, 0, 1)), 1, 1e-15);
    ASSERT_CLOSE(creal(at2(y.u.arr, 1, 0)), 0, 1e-15);
    /* A large norm (scaling and squaring): exp of diag(10, -3) and of a rotation. */
    double d[4] = {10, 0, 0, -3};
    cr_array D = cr_array_matrix(d, 2, 2);
    a = cr_value_array(&D);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_expm, &a, 1, &y), CR_OK);
    ASSERT_CLOSE(creal(at2(y.u.arr, 0, 0)), exp(10.0), 1e-13);
    ASSERT_CLOSE(creal(at2(y.u.arr, 1, 1)), exp(-3.0), 1e-13);
    double r[4] = {0, -6, 6, 0};
    cr_array R = cr_array_matrix(r, 2, 2);
    a = cr_value_array(&R);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_expm, &a, 1, &y), CR_OK);
    ASSERT_CLOSE(creal(at2(y.u.arr, 0, 0)), cos(6.0), 1e-12);
    ASSERT_CLOSE(creal(at2(y.u.arr, 1, 0)), sin(6.0), 1e-12);
    /* exp of a symmetric matrix: expm and matfun_herm agree, and so do their pullbacks. */
    double s[9] = {1, 0.5, -0.25, 0.5, -0.5, 0.75, -0.25, 0.75, 0.3};
    cr_array S = cr_array_matrix(s, 3, 3);
    S.structure = CR_MAT_SYMMETRIC;
    const cr_function *expf = cr_registry_find(cr_registry_builtin(), "exp");
    assert_non_null(expf);
    cr_value fa[2] = {cr_value_function(expf, NULL), cr_value_array(&S)}, y2;
    cr_pullback p1, p2;
    a = cr_value_array(&S);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_expm, &a, 1, &y, &p1), CR_OK);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matfun_herm, fa, 2, &y2, &p2), CR_OK);
    for (size_t i = 0; i < 9; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, i)),
                     creal(cr_array_get_linear(y2.u.arr, i)), 1e-13);
    double g[9] = {1, 0.5, 0, 0.5, -1, 0.25, 0, 0.25, 2}; /* symmetric */
    cr_array G = cr_array_matrix(g, 3, 3);
    cr_tangent dy = cr_tangent_array(&G), d1[2], d2[3];
    assert_int_equal(cr_pullback_call(fx->arena, &p1, &dy, d1, 2), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &p2, &dy, d2, 3), CR_OK);
    cr_tangent v1 = unthunked(d1[1]), v2 = unthunked(d2[2]);
    for (size_t i = 0; i < 9; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(v1.u.arr, i)),
                     creal(cr_array_get_linear(v2.u.arr, i)), 1e-12);
    /* A repeated eigenvalue: f(2 I) = f(2) I, cotangent f'(2) Herm(Ȳ), finite. */
    double two[9] = {2, 0, 0, 0, 2, 0, 0, 0, 2};
    cr_array T = cr_array_matrix(two, 3, 3);
    T.structure = CR_MAT_SYMMETRIC;
    fa[1] = cr_value_array(&T);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matfun_herm, fa, 2, &y2, &p2), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &p2, &dy, d2, 3), CR_OK);
    v2 = unthunked(d2[2]);
    for (size_t i = 0; i < 9; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(v2.u.arr, i)), exp(2.0) * g[i], 1e-12);
    /* log of a matrix that is not positive definite: a domain error. */
    const cr_function *logf = cr_registry_find(cr_registry_builtin(), "log");
    double neg[4] = {1, 2, 2, 1};
    cr_array Ng = cr_array_matrix(neg, 2, 2);
    cr_value la[2] = {cr_value_function(logf, NULL), cr_value_array(&Ng)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_matfun_herm, la, 2, &y2), CR_EDOMAIN);
}

#else
/* Without LAPACKE the functions exist and report CR_EUNIMPL. */
static void test_no_lapack(void **state)
{
    fixture *fx = *state;
    double a[4] = {1, 2, 3, 4};
    cr_array A = cr_array_matrix(a, 2, 2);
    cr_value v = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_det, &v, 1, &y), CR_EUNIMPL);
}
#endif /* CR_HAVE_LAPACKE */

static int run_rules_linalg(void)
{
    const struct CMUnitTest rules_linalg[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_inplace, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_projections, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dot_tr_values, fixture_setup, fixture_teardown),
#if defined(CR_HAVE_LAPACKE)
        cmocka_unit_test_setup_teardown(test_det_singular, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_ill_conditioned, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_svd_degenerate, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eigen_degenerate, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky_cases, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matrix_functions, fixture_setup, fixture_teardown),
#else
        cmocka_unit_test_setup_teardown(test_no_lapack, fixture_setup, fixture_teardown),
#endif
    };
    return cmocka_run_group_tests(rules_linalg, NULL, NULL);
}

/*
 * Rare paths of the linear-algebra rules (src/rulesets/linalg*.c): zero seeds and zero
 * input tangents for every function, arguments that are not differentiable (integer
 * arrays and numbers), structured arguments of the structure wrappers, det at a singular
 * complex matrix, a complex SVD seed whose U part is absent, empty matrices, and the
 * errors for bad input (status, a message naming the function, the context usable after).
 * Derivatives are checked by the rule tester against finite differences.
 */

/* A tangent that is NoTangent, ZeroTangent, or made of zeros (arrays, numbers, tuples). */
static bool zeroish(cr_tangent t)
{
    cr_tangent v = unthunked(t);
    switch (v.tag) {
    case CR_TAN_NONE:
    case CR_TAN_ZERO:
        return true;
    case CR_TAN_F64:
        return v.u.f64 == 0;
    case CR_TAN_F32:
        return v.u.f32 == 0;
    case CR_TAN_C128:
        return v.u.c128 == 0;
    case CR_TAN_ARRAY:
        for (size_t i = 0; i < cr_array_numel(v.u.arr); i++)
            if (cr_array_get_linear(v.u.arr, i) != 0)
                return false;
        return true;
    default:
        return cr_tangent_is_zero(v);
    }
}

/* A complex row-major r x c matrix over interleaved (re, im) doubles. */
static cr_array cmatrix(double *ri, size_t r, size_t c)
{
    cr_array A = cr_array_matrix(ri, r, c);
    A.dtype = CR_DT_C128;
    return A;
}

/* The rule tester's checks (rrule, frule, dot-product consistency) at explicit arguments. */
static void check_rules(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs)
{
    cr_test_report r;
    cr_status st = cr_test_rrule(fx->arena, NULL, f, args, nargs, &r);
    if (st != CR_OK)
        print_error("%s: %s\n", f->u.func.fn->name, cr_ctx_errmsg(fx->ctx));
    CR_ASSERT_RULE_TEST(st, r);
    CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, NULL, f, args, nargs, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_consistency(fx->arena, NULL, f, args, nargs, &r), r);
}

/* A call that must fail with `status` and a message containing `sub`; the context then
 * forgets the error and stays usable. The rrule is asked too, through dispatch, unless
 * `primal_only` (an argument of a kind no rule matches, such as an integer array: dispatch answers
 * CR_NOTHING). */
static void expect_error_(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                          cr_status status, const char *sub, bool primal_only)
{
    cr_value y;
    cr_ctx_clear_error(fx->ctx);
    cr_status st = cr_function_call(fx->arena, f, args, nargs, &y);
    if (st != status)
        print_error("%s: got %s (%s)\n", sub, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
    assert_int_equal(st, status);
    assert_contains(cr_ctx_errmsg(fx->ctx), sub);
    cr_ctx_clear_error(fx->ctx);
    if (!primal_only) { /* the rrule reports the same */
        cr_pullback pb;
        st = cr_rrule(NULL, fx->arena, f, args, nargs, &y, &pb);
        if (st != status)
            print_error("%s: rrule gave %s\n", sub, cr_status_name(st));
        assert_int_equal(st, status);
        assert_contains(cr_ctx_errmsg(fx->ctx), sub);
        cr_ctx_clear_error(fx->ctx);
    } else {
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, f, args, nargs, &y, &pb), CR_NOTHING);
    }
    assert_string_equal(cr_ctx_errmsg(fx->ctx), "");
}

#define expect_error(fx, f, args, n, st, sub)        expect_error_(fx, f, args, n, st, sub, false)
#define expect_error_primal(fx, f, args, n, st, sub) expect_error_(fx, f, args, n, st, sub, true)

/* ---- Zero seeds and zero input tangents ----------------------------------------------------- */

/* A thunk whose value is ZeroTangent. cr_pullback_call answers a plain ZeroTangent seed
 * itself; a thunk seed reaches the pullback, which finds the zero when it unthunks it. */
static cr_status zero_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    (void)env;
    *out = cr_tangent_zero();
    return CR_OK;
}

/* Every linear-algebra rule at points of its sampler: a seed that is zero once unthunked
 * gives zero (or NoTangent) cotangents, and zero or absent input tangents give a zero output
 * tangent. */
static void test_zero_seeds(void **state)
{
    fixture *fx = *state;
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    bool seen[NFNS] = {false};
    for (size_t r = 0; r < cr_registry_size(reg); r++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, r, &info), CR_OK);
        size_t k = 0;
        while (k < NFNS && k_fns[k]->u.func.fn != info.fn)
            k++;
        if (k == NFNS || info.test == NULL || info.test->sample == NULL)
            continue;
        seen[k] = true;
        size_t n = info.nargs;
        uint64_t rng = 12345u + r;
        for (int pt = 0; pt < 6; pt++) {
            cr_arena_mark mark = cr_arena_get_mark(fx->arena);
            cr_value args[8], y;
            assert_true(n <= 7);
            assert_int_equal(info.test->sample(fx->arena, &rng, args, n, info.test->env), CR_OK);
            cr_value fv = cr_value_function(info.fn, NULL);
            if (info.has_rrule) {
                cr_pullback pb;
                cr_status st = cr_rrule(NULL, fx->arena, &fv, args, n, &y, &pb);
                if (st != CR_OK)
                    print_error("%s: %s\n", info.fn->name, cr_ctx_errmsg(fx->ctx));
                assert_int_equal(st, CR_OK);
                cr_tangent zero, dx[8];
                assert_int_equal(
                    cr_tangent_thunk(fx->arena, zero_thunk_fn, NULL, "zero_seed", &zero), CR_OK);
                st = cr_pullback_call(fx->arena, &pb, &zero, dx, n + 1);
                if (st != CR_OK)
                    print_error("%s: %s\n", info.fn->name, cr_ctx_errmsg(fx->ctx));
                assert_int_equal(st, CR_OK);
                for (size_t i = 0; i <= n; i++)
                    if (!zeroish(dx[i])) {
                        print_error("%s: cotangent %zu of a zero seed is not zero\n", info.fn->name,
                                    i);
                        fail();
                    }
            }
            if (info.has_frule) {
                for (int none = 0; none < 2; none++) {
                    cr_tangent din[8], dy;
                    din[0] = cr_tangent_none();
                    for (size_t i = 0; i < n; i++)
                        din[i + 1] = none ? cr_tangent_none() : cr_tangent_zero();
                    cr_status st = cr_frule(NULL, fx->arena, din, &fv, args, n, &y, &dy);
                    if (st != CR_OK)
                        print_error("%s: %s\n", info.fn->name, cr_ctx_errmsg(fx->ctx));
                    assert_int_equal(st, CR_OK);
                    if (!zeroish(dy)) {
                        print_error("%s: the frule of zero tangents is not zero\n", info.fn->name);
                        fail();
                    }
                }
            }
            cr_arena_rewind(fx->arena, mark);
        }
    }
    for (size_t k = 0; k < NFNS; k++)
        if (!seen[k] && k_fns[k] != &cr_fn_symmetric && k_fns[k] != &cr_fn_hermitian &&
            k_fns[k] != &cr_fn_diagonal) {
            print_error("%s: no sampled registration\n", k_fns[k]->u.func.fn->name);
            fail();
        }
}

/* ---- Arguments that are not differentiable --------------------------------------------------- */

/* Integer and boolean numbers among the arguments (alpha, beta of gemm and gemv) get
 * NoTangent; the others' cotangents are checked against finite differences. (Integer
 * arrays match no rule: dispatch gives CR_NOTHING for them.) */
static void test_nondiff_args(void **state)
{
    fixture *fx = *state;
    double x[3] = {0.5, -1.25, 2}, y[2] = {0.75, -0.5}, A[6] = {1, -0.5, 0.25, 2, 1.5, -1};
    double B[6] = {0.3, -1, 2, 0.5, -0.7, 1.1}, C[4] = {0.1, 0.2, -0.3, 0.4};
    cr_array X, Y, Am, Bm, Cm;
    X = cr_array_vector(x, 3);
    Y = cr_array_vector(y, 2);
    Am = cr_array_matrix(A, 2, 3);
    Bm = cr_array_matrix(B, 3, 2);
    Cm = cr_array_matrix(C, 2, 2);
    /* gemm(2, A, B, 0.5, C), gemm(0.5, A, B, 3, C), gemm(true, A, B, 0, C) */
    cr_value g1[5] = {cr_value_i64(2), cr_value_array(&Am), cr_value_array(&Bm), cr_value_f64(0.5),
                      cr_value_array(&Cm)};
    check_rules(fx, &cr_fn_gemm, g1, 5);
    cr_value g2[5] = {cr_value_f64(0.5), cr_value_array(&Am), cr_value_array(&Bm), cr_value_i64(3),
                      cr_value_array(&Cm)};
    check_rules(fx, &cr_fn_gemm, g2, 5);
    cr_value g3[5] = {cr_value_bool(true), cr_value_array(&Am), cr_value_array(&Bm),
                      cr_value_i64(0), cr_value_array(&Cm)};
    check_rules(fx, &cr_fn_gemm, g3, 5);
    /* the integer alpha and beta get NoTangent, alpha = 2 scales the product */
    cr_value out;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gemm, g1, 5, &out, &pb), CR_OK);
    ASSERT_CLOSE(creal(cr_array_get_linear(out.u.arr, 0)), 2 * (0.3 - 1 - 0.7 * 0.25) + 0.5 * 0.1,
                 1e-14);
    cr_tangent seed = cr_tangent_array(&Cm), dx[6];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 6), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    assert_int_equal(dx[4].tag, CR_TAN_F64);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gemm, g2, 5, &out, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 6), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_F64);
    assert_int_equal(dx[4].tag, CR_TAN_NONE);
    /* gemv('N', 2, A, x) and gemv('T', 1.5, A, y, 2, x): integer alpha and beta */
    cr_value v1[4] = {cr_value_i64('N'), cr_value_i64(2), cr_value_array(&Am), cr_value_array(&X)};
    check_rules(fx, &cr_fn_gemv, v1, 4);
    cr_value v2[6] = {cr_value_i64('T'),  cr_value_f64(1.5), cr_value_array(&Am),
                      cr_value_array(&Y), cr_value_i64(2),   cr_value_array(&X)};
    check_rules(fx, &cr_fn_gemv, v2, 6);
}

/* ---- Structured arguments of the structure wrappers --------------------------------------------
 */

/* Symmetric, Hermitian and Diagonal of an argument that is itself structured read it
 * through its structure (densified first). */
static void test_wrap_structured(void **state)
{
    fixture *fx = *state;
    double a[9] = {1.5, -0.5, 0.25, 0.7, 2, 1.1, -0.3, 0.9, -1.2};
    double c[18] = {1,    0.5, -0.5, 0.25, 0.3, -1,  0.7,  0.2,  2,
                    -0.4, 1.1, 0.6,  -0.3, 0.8, 0.9, -0.1, -1.2, 0.4};
    cr_array U = cr_array_matrix(a, 3, 3), L = cmatrix(c, 3, 3), S = cr_array_matrix(a, 3, 3);
    U.structure = CR_MAT_UPPER;
    L.structure = CR_MAT_LOWER;
    S.structure = CR_MAT_SYMMETRIC;
    cr_value u = cr_value_array(&U), l = cr_value_array(&L), s = cr_value_array(&S);
    check_rules(fx, &cr_fn_symmetric, &u, 1);
    check_rules(fx, &cr_fn_hermitian, &l, 1);
    check_rules(fx, &cr_fn_diagonal, &s, 1);
    check_rules(fx, &cr_fn_symmetric, &l, 1);
    /* Symmetric of a Lower matrix reads its (zero) upper triangle: only the diagonal. */
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_symmetric, &l, 1, &y), CR_OK);
    assert_true(cr_array_get_linear(y.u.arr, 3) == 0 && cr_array_get_linear(y.u.arr, 1) == 0);
    ASSERT_CPLX(cr_array_get_linear(y.u.arr, 4), 2, -0.4);
}

#if defined(CR_HAVE_LAPACKE)

/* ---- det at a singular complex matrix -------------------------------------------------------- */

/* An exactly singular complex matrix (LU meets an exact zero pivot): det's cotangent is
 * the adjugate from the SVD, checked against finite differences (det is a polynomial);
 * at rank one the adjugate is zero. */
static void test_det_singular_complex(void **state)
{
    fixture *fx = *state;
    /* rows r1 = (1, 2i, 0), r2 = (0, 1, 1 + i), r3 = r1 + r2 */
    double r2[18] = {1, 0, 0, 2, 0, 0, 0, 0, 1, 0, 1, 1, 1, 0, 1, 2, 1, 1};
    cr_array A = cmatrix(r2, 3, 3);
    cr_value a = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_det, &a, 1, &y), CR_OK);
    assert_true(cabs(y.u.c128) == 0);
    check_rules(fx, &cr_fn_det, &a, 1);
    /* rank one: (1, i, 2) times (1, 1 - i, i) */
    double r1[18];
    cr_complex u[3] = {1, I, 2}, v[3] = {1, 1 - I, I};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            r1[2 * (3 * i + j)] = creal(u[i] * v[j]);
            r1[2 * (3 * i + j) + 1] = cimag(u[i] * v[j]);
        }
    cr_array B = cmatrix(r1, 3, 3);
    cr_value b = cr_value_array(&B);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_det, &b, 1, &y, &pb), CR_OK);
    cr_tangent seed = cr_tangent_c128(CMPLX(0.5, -2)), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 2), CR_OK);
    cr_tangent v1 = unthunked(dx[1]);
    for (size_t i = 0; i < 9; i++)
        assert_true(cabs(cr_array_get_linear(v1.u.arr, i)) < 1e-12);
    check_rules(fx, &cr_fn_det, &b, 1);
}

/* ---- complex SVD with an absent Ū --------------------------------------------------------------
 */

/* The seed (Zero, S̄, V̄) with a phase-dependent V̄: the gauge's share needs Ū, which the
 * pullback makes from nothing. Checked against finite differences of the gauge-fixed svd. */
static void test_svd_complex_no_ubar(void **state)
{
    fixture *fx = *state;
    double a[12] = {1, 0.5, -0.3, 1.2, 0.8, -0.7, 0.4, 0.1, -1, 0.6, 0.2, -0.9};
    cr_array A = cmatrix(a, 3, 2);
    cr_value arg = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_svd, &arg, 1, &y), CR_OK);
    double sb[2] = {0.3, -0.8}, vb[8] = {0.5, 1, -0.25, 0.75, 1.5, -0.5, 0.2, 0.9};
    cr_array Sb = cr_array_vector(sb, 2), Vb = cmatrix(vb, 2, 2);
    for (int withs = 0; withs < 2; withs++) {
        cr_tangent f[3] = {cr_tangent_zero(), withs ? cr_tangent_array(&Sb) : cr_tangent_zero(),
                           cr_tangent_array(&Vb)};
        cr_tangent seed;
        assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, f, 3, &seed), CR_OK);
        cr_test_opts opts = {0};
        opts.output_tangent = &seed;
        opts.rtol = opts.atol = 1e-7;
        cr_test_report r;
        CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, &opts, &cr_fn_svd, &arg, 1, &r), r);
    }
}

/* ---- Empty matrices ---------------------------------------------------------------------------
 */

/* 0 x 0 (and 0-row) arguments: the results of the empty products and factorizations. */
static void test_empty(void **state)
{
    fixture *fx = *state;
    double dummy[1] = {0};
    cr_array E = cr_array_matrix(dummy, 0, 0), e0 = cr_array_vector(dummy, 0);
    cr_array E2 = cr_array_matrix(dummy, 2, 0);
    cr_value e = cr_value_array(&E), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_det, &e, 1, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 1.0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_logdet, &e, 1, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 0.0);
    const cr_value *one[] = {&cr_fn_matinv,          &cr_fn_cholesky, &cr_fn_eigvals, &cr_fn_eigen,
                             &cr_fn_svdvals,         &cr_fn_svd,      &cr_fn_expm,    &cr_fn_lu,
                             &cr_fn_eigvals_general, &cr_fn_pinv,     &cr_fn_getrf};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        cr_status st = cr_function_call(fx->arena, one[i], &e, 1, &y);
        if (st != CR_OK)
            print_error("%s: %s\n", one[i]->u.func.fn->name, cr_ctx_errmsg(fx->ctx));
        assert_int_equal(st, CR_OK);
    }
    /* A \ b with A 0 x 0 (dense, Upper, Diagonal) */
    cr_array U = E;
    U.structure = CR_MAT_UPPER;
    cr_value sargs[2] = {e, cr_value_array(&e0)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_solve, sargs, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 0);
    sargs[0] = cr_value_array(&U);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_solve, sargs, 2, &y), CR_OK);
    /* A 2 x 0 times 0 x 0: a 2 x 0 product; its pullback */
    cr_value m[2] = {cr_value_array(&E2), e};
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, m, 2, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 2);
    assert_int_equal(y.u.arr->shape[1], 0);
    /* svd of 2 x 0: no singular values */
    cr_value e2 = cr_value_array(&E2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_svdvals, &e2, 1, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 0);
}

#endif /* CR_HAVE_LAPACKE */

/* ---- Errors for bad input ------------------------------------------------------------------- */

static void test_errors_blas(void **state)
{
    fixture *fx = *state;
    double d[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    int64_t di[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array v3 = cr_array_vector(d, 3), v2 = cr_array_vector(d, 2), M23 = cr_array_matrix(d, 2, 3);
    cr_array M22 = cr_array_matrix(d, 2, 2), M33 = cr_array_matrix(d, 3, 3), Mi, vi;
    size_t s33[2] = {3, 3}, s3 = 3;
    assert_int_equal(cr_array_view_init(&Mi, di, CR_DT_I64, 2, s33, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&vi, di, CR_DT_I64, 1, &s3, NULL), CR_OK);
    cr_value a[6];

    a[0] = cr_value_array(&v3);
    a[1] = cr_value_array(&v3);
    expect_error(fx, &cr_fn_matmul, a, 2, CR_ESHAPE, "matmul: expected matrix-matrix");
    a[0] = cr_value_array(&M23);
    a[1] = cr_value_array(&M23);
    expect_error(fx, &cr_fn_matmul, a, 2, CR_ESHAPE, "matmul: shapes");
    /* gemm: alpha and beta must be numbers; C must have A B's shape */
    cr_value g[5] = {cr_value_array(&v2), cr_value_array(&M23), cr_value_array(&M33),
                     cr_value_f64(1), cr_value_array(&M23)};
    expect_error_primal(fx, &cr_fn_gemm, g, 5, CR_EINVAL,
                        "gemm: argument 1 (alpha) must be a number");
    g[0] = cr_value_f64(1);
    g[3] = cr_value_array(&v2);
    expect_error_primal(fx, &cr_fn_gemm, g, 5, CR_EINVAL,
                        "gemm: argument 4 (beta) must be a number");
    g[3] = cr_value_f64(1);
    g[4] = cr_value_array(&M22);
    expect_error(fx, &cr_fn_gemm, g, 5, CR_ESHAPE, "gemm: C has shape");
    /* dot */
    a[0] = cr_value_array(&v3);
    a[1] = cr_value_array(&v2);
    expect_error(fx, &cr_fn_dot, a, 2, CR_ESHAPE, "dot: 3 and 2 elements");
    a[0] = cr_value_array(&v3);
    a[1] = cr_value_array(&M23);
    a[2] = cr_value_array(&v3);
    expect_error(fx, &cr_fn_dot, a, 3, CR_ESHAPE, "dot(x, A, y)");
    /* tr, kron, cross, asum, the structure wrappers */
    a[0] = cr_value_array(&M23);
    expect_error(fx, &cr_fn_tr, a, 1, CR_ESHAPE, "tr: expected a square float matrix");
    a[0] = cr_value_array(&Mi);
    expect_error_primal(fx, &cr_fn_tr, a, 1, CR_ESHAPE, "tr: expected a square float matrix");
    a[0] = cr_value_array(&Mi);
    a[1] = cr_value_array(&M22);
    expect_error_primal(fx, &cr_fn_kron, a, 2, CR_EINVAL, "kron: expected float arrays");
    a[0] = cr_value_array(&v3);
    expect_error(fx, &cr_fn_kron, a, 2, CR_ESHAPE, "kron: expected two vectors or two matrices");
    a[1] = cr_value_array(&v2);
    expect_error(fx, &cr_fn_cross, a, 2, CR_ESHAPE, "cross: expected two vectors of length 3");
    a[0] = cr_value_array(&vi);
    expect_error_primal(fx, &cr_fn_asum, a, 1, CR_EINVAL, "asum: expected a float array");
    expect_error_primal(fx, &cr_fn_symmetric, a, 1, CR_EINVAL, "Symmetric: expected a float array");
    a[0] = cr_value_array(&M23);
    expect_error(fx, &cr_fn_hermitian, a, 1, CR_ESHAPE, "Hermitian: expected a square matrix");
    expect_error(fx, &cr_fn_diagonal, a, 1, CR_ESHAPE,
                 "Diagonal: expected a square matrix or a vector");
    /* gemv: arity 5, x and y vectors, alpha and beta numbers */
    cr_value gv[6] = {cr_value_i64('N'),   cr_value_f64(1), cr_value_array(&M23),
                      cr_value_array(&v3), cr_value_f64(1), cr_value_array(&v2)};
    expect_error_primal(fx, &cr_fn_gemv, gv, 5, CR_EINVAL,
                        "gemv: expected 4 or 6 arguments, got 5");
    gv[3] = cr_value_array(&M33);
    expect_error(fx, &cr_fn_gemv, gv, 4, CR_ESHAPE, "gemv: x must be a vector");
    gv[3] = cr_value_array(&v3);
    cr_array M21 = cr_array_matrix(d, 2, 1);
    gv[5] = cr_value_array(&M21);
    expect_error(fx, &cr_fn_gemv, gv, 6, CR_ESHAPE, "gemv: y must be a vector");
    gv[5] = cr_value_array(&v2);
    gv[1] = cr_value_array(&v2);
    expect_error_primal(fx, &cr_fn_gemv, gv, 6, CR_EINVAL,
                        "gemv: argument 2 (alpha) must be a number");
    gv[1] = cr_value_f64(1);
    gv[4] = cr_value_array(&v2);
    expect_error_primal(fx, &cr_fn_gemv, gv, 6, CR_EINVAL,
                        "gemv: argument 5 (beta) must be a number");
    /* The same calls succeed with good arguments afterwards. */
    gv[4] = cr_value_f64(0.5);
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_gemv, gv, 6, &y), CR_OK);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 0)), 14 + 0.5, 1e-15);
    assert_string_equal(cr_ctx_errmsg(fx->ctx), "");
}

#if defined(CR_HAVE_LAPACKE)

static void test_errors_lapack(void **state)
{
    fixture *fx = *state;
    double sing[9] = {1, 2, 3, 2, 4, 6, 1, 0, 1}, d[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    cr_array S = cr_array_matrix(sing, 3, 3), v3 = cr_array_vector(d, 3),
             v2 = cr_array_vector(d, 2);
    cr_array M23 = cr_array_matrix(d, 2, 3), M22 = cr_array_matrix(d, 2, 2);
    cr_value a[6];
    a[0] = cr_value_array(&S);
    expect_error(fx, &cr_fn_logdet, a, 1, CR_EDOMAIN, "logdet: the matrix is singular");
    expect_error(fx, &cr_fn_logabsdet, a, 1, CR_EDOMAIN, "logabsdet: the matrix is singular");
    /* solve with a Diagonal or a triangular A with a zero on its diagonal */
    double dg[9] = {1, 0, 0, 0, 0, 0, 0, 0, 2};
    cr_array D = cr_array_matrix(dg, 3, 3), T = cr_array_matrix(sing, 3, 3);
    D.structure = CR_MAT_DIAGONAL;
    D.strides[0] = 4;
    D.strides[1] = 0;
    double tu[9] = {1, 2, 3, 0, 0, 1, 0, 0, 2};
    T = cr_array_matrix(tu, 3, 3);
    T.structure = CR_MAT_UPPER;
    a[0] = cr_value_array(&D);
    a[1] = cr_value_array(&v3);
    expect_error(fx, &cr_fn_solve, a, 2, CR_EDOMAIN, "solve: the matrix is singular");
    a[0] = cr_value_array(&T);
    expect_error(fx, &cr_fn_solve, a, 2, CR_EDOMAIN, "solve: the matrix is singular");
    cr_value ra[2] = {cr_value_array(&v3), cr_value_array(&T)};
    expect_error(fx, &cr_fn_rdiv, ra, 2, CR_EDOMAIN, "rdiv: the matrix is singular");
    /* right-hand sides of the wrong size */
    double good[9] = {4, 1, 0, 1, 3, 1, 0, 1, 2};
    cr_array G = cr_array_matrix(good, 3, 3);
    a[0] = cr_value_array(&G);
    a[1] = cr_value_array(&v2);
    expect_error(fx, &cr_fn_solve, a, 2, CR_ESHAPE, "solve: B must be");
    ra[0] = cr_value_array(&M22);
    ra[1] = cr_value_array(&G);
    expect_error(fx, &cr_fn_rdiv, ra, 2, CR_ESHAPE, "rdiv: B must be");
    a[0] = cr_value_array(&G);
    a[1] = cr_value_array(&v2);
    expect_error(fx, &cr_fn_cholesky_solve, a, 2, CR_ESHAPE, "cholesky_solve: B must be");
    /* svd, qr, lu and getrf of a vector */
    a[0] = cr_value_array(&v3);
    expect_error(fx, &cr_fn_svd, a, 1, CR_ESHAPE, "svd: expected a float matrix");
    expect_error(fx, &cr_fn_qr, a, 1, CR_ESHAPE, "qr: expected an f64, f32 or c128 matrix");
    expect_error(fx, &cr_fn_lu, a, 1, CR_ESHAPE,
                 "lu: argument 1 must be a f64, f32 or c128 matrix");
    expect_error(fx, &cr_fn_getrf, a, 1, CR_ESHAPE,
                 "getrf: argument 1 must be a f64, f32 or c128 matrix");
    /* matfun_herm of a function that is not a scalar-table one; expm of a non-finite matrix */
    cr_value mf[2] = {cr_fn_matmul, cr_value_array(&G)};
    expect_error(fx, &cr_fn_matfun_herm, mf, 2, CR_EINVAL, "matfun_herm: f must be");
    double inf[4] = {1, INFINITY, 0, 1};
    cr_array Inf = cr_array_matrix(inf, 2, 2);
    a[0] = cr_value_array(&Inf);
    expect_error(fx, &cr_fn_expm, a, 1, CR_EDOMAIN, "expm: the matrix is not finite");
    /* trsyl and sylvester with a C of the wrong shape */
    cr_value ts[6] = {cr_value_i64('N'),  cr_value_i64('N'),    cr_value_i64(1),
                      cr_value_array(&G), cr_value_array(&M22), cr_value_array(&G)};
    expect_error(fx, &cr_fn_trsyl, ts, 6, CR_ESHAPE, "trsyl: C must be 3 x 2");
    cr_value sy[3] = {cr_value_array(&G), cr_value_array(&M22), cr_value_array(&M23)};
    expect_error(fx, &cr_fn_sylvester, sy, 3, CR_ESHAPE, "sylvester: C must be 3 x 2");
    cr_value ly[2] = {cr_value_array(&G), cr_value_array(&M23)};
    expect_error(fx, &cr_fn_lyap, ly, 2, CR_ESHAPE, "lyap: C must be 3 x 3");
    /* getrf of a singular matrix: the factors, but no derivative (frule nor rrule) */
    a[0] = cr_value_array(&S);
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getrf, a, 1, &y), CR_OK);
    cr_tangent din[2] = {cr_tangent_none(), cr_tangent_array(&G)}, dy;
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_frule(NULL, fx->arena, din, &cr_fn_getrf, a, 1, &y, &dy), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(fx->ctx), "getrf");
    cr_ctx_clear_error(fx->ctx);
    /* A pullback of a tuple-valued function given an array seed */
    a[0] = cr_value_array(&G);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_svd, a, 1, &y, &pb), CR_OK);
    cr_tangent seed = cr_tangent_array(&G), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 2), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "svd");
    assert_contains(cr_ctx_errmsg(fx->ctx), "must be a structural tangent");
    cr_ctx_clear_error(fx->ctx);
    /* and then works with a tuple seed */
    cr_tangent f3[3] = {cr_tangent_zero(), cr_tangent_array(&v3), cr_tangent_zero()};
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, f3, 3, &seed), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 2), CR_OK);
}

#endif /* CR_HAVE_LAPACKE */

static int run_linalg_edges(void)
{
    const struct CMUnitTest linalg_edges[] = {
        cmocka_unit_test_setup_teardown(test_zero_seeds, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nondiff_args, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_wrap_structured, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors_blas, fixture_setup, fixture_teardown),
#if defined(CR_HAVE_LAPACKE)
        cmocka_unit_test_setup_teardown(test_det_singular_complex, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_svd_complex_no_ubar, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_empty, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors_lapack, fixture_setup, fixture_teardown),
#endif
    };
    return cmocka_run_group_tests(linalg_edges, NULL, NULL);
}

/*
 * Rare paths of the linear-algebra rules, continued: seeds and input tangents of the wrong
 * shape or NotImplemented (a clear status from every rule, never a crash or a silent
 * result), nrm2 when the registry has no rule for norm, and products over an empty inner
 * dimension.
 */

static bool is_linalg(const cr_function *fn)
{
    for (size_t k = 0; k < NFNS; k++)
        if (k_fns[k]->u.func.fn == fn)
            return true;
    return false;
}

static const cr_notimpl k_ni = {__FILE__, __LINE__, "a test's NotImplemented seed"};

/* A status that says the tangent was wrong. */
static bool tangent_status(cr_status st)
{
    return st == CR_ETANGENT || st == CR_EUNIMPL || st == CR_ESHAPE;
}

/* Every linear-algebra rule at a point of its sampler: a seed of the wrong shape (an array
 * of 7 elements, or a 2 x 1 matrix for a scalar output) and a NotImplemented seed make the
 * pullback (or the evaluation of its cotangents) fail with a tangent status and a message;
 * an input tangent of the wrong shape makes the frule fail likewise. */
static void test_bad_tangents(void **state)
{
    fixture *fx = *state;
    const cr_registry *reg = cr_registry_builtin();
    double junk[7] = {1, 2, 3, 4, 5, 6, 7};
    cr_array J7 = cr_array_vector(junk, 7), J21 = cr_array_matrix(junk, 2, 1);
    size_t nrules = 0;
    for (size_t r = 0; r < cr_registry_size(reg); r++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, r, &info), CR_OK);
        if (!is_linalg(info.fn) || info.test == NULL || info.test->sample == NULL)
            continue;
        nrules++;
        size_t n = info.nargs;
        uint64_t rng = 777u + r;
        cr_arena_mark mark = cr_arena_get_mark(fx->arena);
        cr_value args[8], y, fv = cr_value_function(info.fn, NULL);
        assert_int_equal(info.test->sample(fx->arena, &rng, args, n, info.test->env), CR_OK);
        if (info.has_rrule) {
            for (int kind = 0; kind < 2; kind++) {
                cr_pullback pb;
                assert_int_equal(cr_rrule(NULL, fx->arena, &fv, args, n, &y, &pb), CR_OK);
                bool scalar_out =
                    y.kind == CR_KIND_F64 || y.kind == CR_KIND_F32 || y.kind == CR_KIND_C128;
                cr_tangent seed = kind == 1    ? cr_tangent_notimpl(&k_ni)
                                  : scalar_out ? cr_tangent_array(&J21)
                                               : cr_tangent_array(&J7);
                cr_tangent dx[8];
                cr_ctx_clear_error(fx->ctx);
                cr_status st = cr_pullback_call(fx->arena, &pb, &seed, dx, n + 1);
                /* a thunked cotangent may meet the bad seed only when evaluated */
                for (size_t i = 0; st == CR_OK && i <= n; i++) {
                    cr_tangent v;
                    st = cr_tangent_unthunk(dx[i], &v);
                }
                if (!tangent_status(st)) {
                    print_error("%s (%d arguments), %s seed: %s (%s)\n", info.fn->name, (int)n,
                                kind ? "NotImplemented" : "misshapen", cr_status_name(st),
                                cr_ctx_errmsg(fx->ctx));
                    fail();
                }
                assert_true(strlen(cr_ctx_errmsg(fx->ctx)) > 0);
                cr_ctx_clear_error(fx->ctx);
            }
        }
        if (info.has_frule) {
            /* the first floating-point array argument gets a misshapen tangent (the first
             * argument when none is an array: cholesky of a number) */
            size_t i = 0;
            while (i < n && !(args[i].kind == CR_KIND_ARRAY &&
                              cr_dtype_is_float((cr_dtype)args[i].u.arr->dtype)))
                i++;
            if (i == n && (args[0].kind == CR_KIND_F64 || args[0].kind == CR_KIND_F32))
                i = 0;
            assert_true(i < n);
            cr_tangent din[8], dy;
            din[0] = cr_tangent_none();
            for (size_t j = 0; j < n; j++)
                din[j + 1] = cr_tangent_zero();
            din[i + 1] = cr_tangent_array(
                args[i].kind == CR_KIND_ARRAY && cr_array_numel(args[i].u.arr) == 7 ? &J21 : &J7);
            cr_ctx_clear_error(fx->ctx);
            cr_status st = cr_frule(NULL, fx->arena, din, &fv, args, n, &y, &dy);
            if (!tangent_status(st)) {
                print_error("%s (%d arguments), frule with a misshapen tangent of argument %zu: "
                            "%s (%s)\n",
                            info.fn->name, (int)n, i + 1, cr_status_name(st),
                            cr_ctx_errmsg(fx->ctx));
                fail();
            }
            assert_true(strlen(cr_ctx_errmsg(fx->ctx)) > 0);
            cr_ctx_clear_error(fx->ctx);
        }
        cr_arena_rewind(fx->arena, mark);
    }
    assert_true(nrules >= 12);
}

/* nrm2 is norm through dispatch: with a registry that opts norm out, nrm2 says so. */
static void test_nrm2_without_norm(void **state)
{
    fixture *fx = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, NULL, &reg), CR_OK);
    const cr_argspec a1[1] = {CR_ARG_ARRAY_F64};
    assert_int_equal(cr_registry_opt_out(reg, CR_MODE_RRULE, cr_fn_norm.u.func.fn, a1, 1, false, 0),
                     CR_OK);
    assert_int_equal(cr_registry_opt_out(reg, CR_MODE_FRULE, cr_fn_norm.u.func.fn, a1, 1, false, 0),
                     CR_OK);
    cr_config cfg = {.registry = reg};
    double x[3] = {3, 0, 4};
    cr_array X = cr_array_vector(x, 3);
    cr_value a = cr_value_array(&X), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_nrm2, &a, 1, &y, &pb), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "nrm2: no rrule for norm");
    cr_ctx_clear_error(fx->ctx);
    cr_tangent din[2] = {cr_tangent_none(), cr_tangent_array(&X)}, dy;
    assert_int_equal(cr_frule(&cfg, fx->arena, din, &cr_fn_nrm2, &a, 1, &y, &dy), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "nrm2: no frule for norm");
    cr_ctx_clear_error(fx->ctx);
    /* the built-in registry still differentiates it */
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_nrm2, &a, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 5.0);
    cr_registry_free(reg);
}

#if defined(CR_HAVE_LAPACKE)

/* pinv of a 2 x 0 matrix: a 0 x 2 result; A Y is the 2 x 2 zero matrix (a product over an
 * empty inner dimension), and the pullback and frule give empty tangents. */
static void test_empty_inner(void **state)
{
    fixture *fx = *state;
    double dummy[1] = {0};
    cr_array E = cr_array_matrix(dummy, 2, 0), G = cr_array_matrix(dummy, 0, 2);
    cr_value a = cr_value_array(&E), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_pinv, &a, 1, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 0);
    assert_int_equal(y.u.arr->shape[1], 2);
    cr_tangent seed = cr_tangent_array(&G), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 2), CR_OK);
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(dx[1], &v), CR_OK);
    assert_true(cr_tangent_is_zero(v) || cr_array_numel(v.u.arr) == 0);
    cr_tangent din[2] = {cr_tangent_none(), cr_tangent_array(&E)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, din, &cr_fn_pinv, &a, 1, &y, &dy), CR_OK);
}

#endif

static int run_linalg_bad_seeds(void)
{
    const struct CMUnitTest linalg_bad_seeds[] = {
        cmocka_unit_test_setup_teardown(test_bad_tangents, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nrm2_without_norm, fixture_setup, fixture_teardown),
#if defined(CR_HAVE_LAPACKE)
        cmocka_unit_test_setup_teardown(test_empty_inner, fixture_setup, fixture_teardown),
#endif
    };
    return cmocka_run_group_tests(linalg_bad_seeds, NULL, NULL);
}

/* ---- Arena exhaustion -------------------------------------------------------------------- */

/* Real and complex operands shared by the sweeps: A symmetric positive definite (3 x 3), B
 * 3 x 2, x a 3-vector, C 3 x 2 (for gemm), and their complex counterparts. */
typedef struct sweep_ops {
    double a[9], b[6], c[6], x[3], y[3], ca[18], cb[12];
    cr_array A, B, C, X, Y, CA, CB;
} sweep_ops;

static void sweep_ops_init(sweep_ops *o)
{
    const double a[9] = {4, 1, 0.5, 1, 3, 0.25, 0.5, 0.25, 2};
    const double b[6] = {1, -2, 0.5, 3, -1, 2}, c[6] = {0.5, 1, -1, 2, 0.25, -0.5};
    const double x[3] = {1, -0.5, 2}, y[3] = {0.25, 2, -1};
    memcpy(o->a, a, sizeof a);
    memcpy(o->b, b, sizeof b);
    memcpy(o->c, c, sizeof c);
    memcpy(o->x, x, sizeof x);
    memcpy(o->y, y, sizeof y);
    for (int i = 0; i < 9; i++) {
        o->ca[2 * i] = a[i];
        o->ca[2 * i + 1] = (i % 3 == i / 3) ? 0 : 0.125 * (i % 3 > i / 3 ? 1 : -1);
    }
    for (int i = 0; i < 6; i++) {
        o->cb[2 * i] = b[i];
        o->cb[2 * i + 1] = c[i];
    }
    o->A = cr_array_matrix(o->a, 3, 3);
    o->B = cr_array_matrix(o->b, 3, 2);
    o->C = cr_array_matrix(o->c, 3, 2);
    o->X = cr_array_vector(o->x, 3);
    o->Y = cr_array_vector(o->y, 3);
    o->CA = cmatrix(o->ca, 3, 3);
    o->CB = cmatrix(o->cb, 3, 2);
}

/* The products, the structured views and the reductions in arenas too small for them:
 * CR_EARENA at every size short of room, and the rule's results once it fits. */
static void test_arena_products(void **state)
{
    fixture *fx = *state;
    sweep_ops o;
    sweep_ops_init(&o);
    cr_value A = cr_value_array(&o.A), B = cr_value_array(&o.B), X = cr_value_array(&o.X),
             Y = cr_value_array(&o.Y), C = cr_value_array(&o.C), CA = cr_value_array(&o.CA),
             CB = cr_value_array(&o.CB);
    cr_value ab[2] = {A, B}, ax[2] = {A, X}, xa[2] = {X, A}, xy[2] = {X, Y}, cc[2] = {CA, CB};
    assert_arena_sweep_rules(fx, &cr_fn_matmul, ab, 2);
    assert_arena_sweep_rules(fx, &cr_fn_matmul, ax, 2);
    assert_arena_sweep_rules(fx, &cr_fn_matmul, xa, 2);
    assert_arena_sweep_rules(fx, &cr_fn_matmul, cc, 2);
    cr_value g[5] = {cr_value_f64(0.5), A, B, cr_value_f64(-2), C};
    assert_arena_sweep_rules(fx, &cr_fn_gemm, g, 5);
    cr_value gv[6] = {cr_value_i64('T'), cr_value_f64(1.5), A, X, cr_value_f64(0.5), Y};
    assert_arena_sweep_rules(fx, &cr_fn_gemv, gv, 6);
    assert_arena_sweep_rules(fx, &cr_fn_dot, xy, 2);
    cr_value xay[3] = {X, A, Y};
    assert_arena_sweep_rules(fx, &cr_fn_dot, xay, 3);
    assert_arena_sweep_rules(fx, &cr_fn_kron, ab, 2);
    assert_arena_sweep_rules(fx, &cr_fn_cross, xy, 2);
    assert_arena_sweep_rules(fx, &cr_fn_tr, &A, 1);
    assert_arena_sweep_rules(fx, &cr_fn_asum, &X, 1);
    assert_arena_sweep_rules(fx, &cr_fn_symmetric, &A, 1);
    assert_arena_sweep_rules(fx, &cr_fn_hermitian, &CA, 1);
    assert_arena_sweep_rules(fx, &cr_fn_diagonal, &A, 1);
    assert_arena_sweep_rules(fx, &cr_fn_norm, &B, 1);
    cr_value np[2] = {B, cr_value_f64(3)};
    assert_arena_sweep_rules(fx, &cr_fn_norm, np, 2);
}

#if defined(CR_HAVE_LAPACKE)
/* The factorizations and solves likewise, real and complex. */
static void test_arena_lapack(void **state)
{
    fixture *fx = *state;
    sweep_ops o;
    sweep_ops_init(&o);
    cr_value A = cr_value_array(&o.A), B = cr_value_array(&o.B), X = cr_value_array(&o.X),
             CA = cr_value_array(&o.CA), CB = cr_value_array(&o.CB);
    const cr_value *fns1[] = {&cr_fn_det,      &cr_fn_logdet, &cr_fn_logabsdet, &cr_fn_matinv,
                              &cr_fn_cholesky, &cr_fn_lu,     &cr_fn_qr,        &cr_fn_svdvals,
                              &cr_fn_expm,     &cr_fn_pinv};
    for (size_t k = 0; k < sizeof fns1 / sizeof fns1[0]; k++) {
        assert_arena_sweep_rules(fx, fns1[k], &A, 1);
        if (fns1[k] != &cr_fn_cholesky && fns1[k] != &cr_fn_logdet)
            assert_arena_sweep_rules(fx, fns1[k], &CA, 1);
    }
    cr_value ab[2] = {A, B}, ax[2] = {A, X}, cc[2] = {CA, CB};
    assert_arena_sweep_rules(fx, &cr_fn_solve, ab, 2);
    assert_arena_sweep_rules(fx, &cr_fn_solve, ax, 2);
    assert_arena_sweep_rules(fx, &cr_fn_solve, cc, 2);
    double bt[6] = {1, -2, 0.5, 3, -1, 2};
    cr_array Bt = cr_array_matrix(bt, 2, 3);
    cr_value ba[2] = {cr_value_array(&Bt), A};
    assert_arena_sweep_rules(fx, &cr_fn_rdiv, ba, 2);
    cr_value syl[3] = {A, A, cr_value_array(&o.A)};
    assert_arena_sweep_rules(fx, &cr_fn_sylvester, syl, 3);
    cr_value ly[2] = {A, A};
    assert_arena_sweep_rules(fx, &cr_fn_lyap, ly, 2);
}
#endif

static int run_linalg_arena(void)
{
    const struct CMUnitTest linalg_arena[] = {
        cmocka_unit_test_setup_teardown(test_arena_products, fixture_setup, fixture_teardown),
#if defined(CR_HAVE_LAPACKE)
        cmocka_unit_test_setup_teardown(test_arena_lapack, fixture_setup, fixture_teardown),
#endif
    };
    return cmocka_run_group_tests(linalg_arena, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_rules_linalg();
    failed += run_linalg_edges();
    failed += run_linalg_bad_seeds();
    failed += run_linalg_arena();
    return failed;
}
