/*
 * Tests of the linear-algebra rules that complete ChainRules.jl's methods (rules_linalg.h):
 * dotu, syrk and herk; cholesky of a real number and cholesky_rdiv (B / cholesky(A));
 * pinv_ex (atol, rtol) and pinv of a vector; sincos_herm; qr of wide and lu and getrf of
 * rectangular matrices. Every registration through the
 * rule tester (finite differences at its sampler's points), then values against sums,
 * products, series and identities written out here, and the errors.
 */
#include <math.h>

#include "test_rule_points.h"

static cr_complex at(const cr_value *v, size_t i)
{
    assert_int_equal(v->kind, CR_KIND_ARRAY);
    return cr_array_get_linear(v->u.arr, i);
}

/* A row-major complex matrix view. */
static cr_array cmat(cr_complex *data, size_t r, size_t c)
{
    cr_array a;
    size_t shape[2] = {r, c};
    assert_int_equal(cr_array_view_init(&a, data, CR_DT_C128, 2, shape, NULL), CR_OK);
    return a;
}

static const char *const k_fns[] = {"dotu",          "syrk",    "herk", "cholesky",
                                    "cholesky_rdiv", "pinv_ex", "pinv", "sincos_herm"};
#define NFNS (sizeof k_fns / sizeof k_fns[0])

/* Every signature of the functions above through the rule tester. */
static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    size_t seen[NFNS];
    check_registrations(fx, k_fns, NFNS, 40, seen);
    /* dotu 1, syrk 2, herk 2, cholesky 2 (matrix, number), cholesky_rdiv 1, pinv_ex 2,
     * pinv 1, sincos_herm 1 */
    const size_t want[NFNS] = {1, 2, 2, 2, 1, 2, 1, 1};
    for (size_t k = 0; k < NFNS; k++)
        if (seen[k] != want[k]) {
            print_error("%s: %zu signatures registered, expected %zu\n", k_fns[k], seen[k],
                        want[k]);
            fail();
        }
}

/* dotu does not conjugate: Σ x_i y_i. */
static void test_dotu(void **state)
{
    fixture *fx = *state;
    cr_complex x[2] = {CMPLX(1, 2), CMPLX(3, 0)}, y[2] = {CMPLX(2, -1), CMPLX(0, 1)};
    cr_array X = cmat(x, 1, 2), Y = cmat(y, 1, 2);
    X.ndim = Y.ndim = 1;
    X.shape[0] = Y.shape[0] = 2;
    X.strides[0] = Y.strides[0] = 1;
    cr_value args[2] = {cr_value_array(&X), cr_value_array(&Y)}, s;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_dotu, args, 2, &s), CR_OK);
    assert_int_equal(s.kind, CR_KIND_C128);
    ASSERT_CPLX(s.u.c128, 4, 6); /* (1+2i)(2-i) + 3i = 4 + 3i + 3i */
    check_point(fx, &cr_fn_dotu, args, 2, "dotu complex");
    double a[3] = {1, -2, 0.5}, b[3] = {4, 1, -2};
    cr_array A = cr_array_vector(a, 3), B = cr_array_vector(b, 3);
    args[0] = cr_value_array(&A);
    args[1] = cr_value_array(&B);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_dotu, args, 2, &s), CR_OK);
    ASSERT_DBL(s.u.f64, 4 - 2 - 1);
    args[1] = cr_value_array(&X);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_dotu, args, 2, &s), CR_ESHAPE);
}

/* syrk and herk against the products written out, the other triangle of C kept. */
static void test_rank_k(void **state)
{
    fixture *fx = *state;
    double a[6] = {1, 2, 3, -1, 0.5, 2}, c[4] = {1, 2, 3, 4};
    cr_array A = cr_array_matrix(a, 2, 3), C = cr_array_matrix(c, 2, 2);
    cr_value args[6] = {cr_value_i64('U'),  cr_value_i64('N'), cr_value_f64(2),
                        cr_value_array(&A), cr_value_f64(-1),  cr_value_array(&C)},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_syrk, args, 6, &y), CR_OK);
    double aat[2][2] = {{0}};
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++)
            for (size_t k = 0; k < 3; k++)
                aat[i][j] += a[i * 3 + k] * a[j * 3 + k];
    ASSERT_CLOSE(creal(at(&y, 0)), 2 * aat[0][0] - c[0], 1e-15);
    ASSERT_CLOSE(creal(at(&y, 1)), 2 * aat[0][1] - c[1], 1e-15);
    ASSERT_DBL(creal(at(&y, 2)), c[2]); /* below the diagonal: C's */
    ASSERT_CLOSE(creal(at(&y, 3)), 2 * aat[1][1] - c[3], 1e-15);
    check_point(fx, &cr_fn_syrk, args, 6, "syrk U N");
    /* 'T': Aᵀ A (3 x 3) on the lower triangle, zeros above without C */
    args[0] = cr_value_i64('l');
    args[1] = cr_value_i64('T');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_syrk, args, 4, &y), CR_OK);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            double want = 0;
            for (size_t k = 0; k < 2; k++)
                want += a[k * 3 + i] * a[k * 3 + j];
            ASSERT_CLOSE(creal(at(&y, i * 3 + j)), i >= j ? 2 * want : 0.0, 1e-15);
        }
    check_point(fx, &cr_fn_syrk, args, 4, "syrk L T");

    /* herk: complex A, op 'C', real diagonal even with a complex diagonal in C */
    cr_complex z[4] = {CMPLX(1, 1), CMPLX(0, 2), CMPLX(-1, 0.5), CMPLX(2, -1)};
    cr_complex w[4] = {CMPLX(1, 5), CMPLX(2, 1), CMPLX(3, -1), CMPLX(4, 7)};
    cr_array Z = cmat(z, 2, 2), W = cmat(w, 2, 2);
    cr_value h[6] = {cr_value_i64('U'),  cr_value_i64('C'), cr_value_f64(0.5),
                     cr_value_array(&Z), cr_value_f64(2),   cr_value_array(&W)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_herk, h, 6, &y), CR_OK);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++) {
            cr_complex k = 0; /* (Zᴴ Z)_ij */
            for (size_t l = 0; l < 2; l++)
                k += conj(z[l * 2 + i]) * z[l * 2 + j];
            cr_complex want = i > j    ? w[i * 2 + j]
                              : i == j ? 0.5 * creal(k) + 2 * creal(w[i * 2 + j])
                                       : 0.5 * k + 2 * w[i * 2 + j];
            ASSERT_CLOSE(creal(at(&y, i * 2 + j)), creal(want), 1e-15);
            ASSERT_CLOSE(cimag(at(&y, i * 2 + j)), cimag(want), 1e-15);
        }
    check_point(fx, &cr_fn_herk, h, 6, "herk U C");
    h[1] = cr_value_i64('T');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_herk, h, 6, &y), CR_EINVAL);
    h[1] = cr_value_i64('N');
    h[2] = cr_value_c128(CMPLX(1, 1));
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_herk, h, 6, &y), CR_EINVAL);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_herk, h, 5, &y), CR_EINVAL);
    args[5] = cr_value_array(&A);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_syrk, args, 6, &y), CR_ESHAPE);
}

/* cholesky of a number; B / cholesky(A) against rdiv(B, A). */
static void test_cholesky_extras(void **state)
{
    fixture *fx = *state;
    cr_value x = cr_value_f64(6.25), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky, &x, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    ASSERT_DBL(y.u.f64, 2.5);
    check_point(fx, &cr_fn_cholesky, &x, 1, "cholesky(6.25)");
    x = cr_value_f32(4.0f);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky, &x, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    x = cr_value_f64(-1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky, &x, 1, &y), CR_EDOMAIN);
    x = cr_value_f64(0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky, &x, 1, &y), CR_EDOMAIN);

    double a[9] = {4, 1, 0.5, 1, 3, -0.25, 0.5, -0.25, 2}, b[6] = {1, -2, 0.5, 3, 1, -1};
    cr_array A = cr_array_matrix(a, 3, 3), B = cr_array_matrix(b, 2, 3);
    cr_value av = cr_value_array(&A), U, Y, R;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky, &av, 1, &U), CR_OK);
    cr_value args[2] = {cr_value_array(&B), U};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky_rdiv, args, 2, &Y), CR_OK);
    cr_value rargs[2] = {cr_value_array(&B), av};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_rdiv, rargs, 2, &R), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ASSERT_CLOSE(creal(at(&Y, i)), creal(at(&R, i)), 1e-14);
    check_point(fx, &cr_fn_cholesky_rdiv, args, 2, "cholesky_rdiv matrix");
    /* a vector is a row */
    cr_array b1 = cr_array_vector(b, 3);
    args[0] = cr_value_array(&b1);
    rargs[0] = args[0];
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky_rdiv, args, 2, &Y), CR_OK);
    assert_int_equal(Y.u.arr->ndim, 1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_rdiv, rargs, 2, &R), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ASSERT_CLOSE(creal(at(&Y, i)), creal(at(&R, i)), 1e-14);
    check_point(fx, &cr_fn_cholesky_rdiv, args, 2, "cholesky_rdiv vector");
    cr_array Bt = cr_array_matrix(b, 3, 2);
    args[0] = cr_value_array(&Bt);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky_rdiv, args, 2, &Y), CR_ESHAPE);
}

/* pinv_ex's truncation; pinv of a vector. */
static void test_pinv_extras(void **state)
{
    fixture *fx = *state;
    double a[4] = {3, 0, 0, 0.01};
    cr_array A = cr_array_matrix(a, 2, 2);
    cr_value args[3] = {cr_value_array(&A), cr_value_f64(0.1), cr_value_f64(0)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv_ex, args, 2, &y), CR_OK);
    ASSERT_CLOSE(creal(at(&y, 0)), 1.0 / 3, 1e-15);
    ASSERT_DBL(creal(at(&y, 3)), 0.0);
    args[1] = cr_value_f64(0);
    args[2] = cr_value_f64(0.01); /* tol = 0.03 */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv_ex, args, 3, &y), CR_OK);
    ASSERT_DBL(creal(at(&y, 3)), 0.0);
    args[2] = cr_value_f64(0.001); /* tol = 0.003: kept */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv_ex, args, 3, &y), CR_OK);
    ASSERT_CLOSE(creal(at(&y, 3)), 100.0, 1e-13);
    check_point(fx, &cr_fn_pinv_ex, args, 3, "pinv_ex full rank");
    /* truncating the nonzero 0.01 the rules are ChainRules' formula (exact along directions
     * that keep the truncated part zero): frule and rrule agree, A's direction along e₁e₁ᵀ
     * matches finite differences */
    args[1] = cr_value_f64(0.1);
    cr_test_report r;
    expect_pass(fx, cr_test_consistency(fx->arena, NULL, &cr_fn_pinv_ex, args, 2, &r), &r,
                "pinv_ex truncated");
    double d[4] = {1, 0, 0, 0}, ap[4], am[4];
    for (size_t i = 0; i < 4; i++) {
        ap[i] = a[i] + 1e-6 * d[i];
        am[i] = a[i] - 1e-6 * d[i];
    }
    cr_array D = cr_array_matrix(d, 2, 2), Ap = cr_array_matrix(ap, 2, 2),
             Am = cr_array_matrix(am, 2, 2);
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_array(&D), cr_tangent_zero()};
    cr_value yp, ym, y0;
    cr_tangent dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_pinv_ex, args, 2, &y0, &dy), CR_OK);
    args[0] = cr_value_array(&Ap);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv_ex, args, 2, &yp), CR_OK);
    args[0] = cr_value_array(&Am);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv_ex, args, 2, &ym), CR_OK);
    args[0] = cr_value_array(&A);
    assert_int_equal(dy.tag, CR_TAN_ARRAY);
    for (size_t i = 0; i < 4; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(dy.u.arr, i)),
                     (creal(at(&yp, i)) - creal(at(&ym, i))) / 2e-6, 1e-6);
    args[1] = cr_value_f64(-1); /* tol = max(-1, 0) = 0: nothing truncated */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv_ex, args, 3, &y), CR_OK);
    ASSERT_CLOSE(creal(at(&y, 3)), 100.0, 1e-13);
    args[1] = cr_value_f64(NAN);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv_ex, args, 2, &y), CR_EINVAL);

    double x[2] = {3, 4}, zero[2] = {0, 0};
    cr_array X = cr_array_vector(x, 2), Z = cr_array_vector(zero, 2);
    cr_value v = cr_value_array(&X);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv, &v, 1, &y), CR_OK);
    assert_int_equal(y.u.arr->ndim, 2);
    assert_int_equal(y.u.arr->shape[0], 1);
    assert_int_equal(y.u.arr->shape[1], 2);
    ASSERT_CLOSE(creal(at(&y, 0)), 3.0 / 25, 1e-15);
    ASSERT_CLOSE(creal(at(&y, 1)), 4.0 / 25, 1e-15);
    check_point(fx, &cr_fn_pinv, &v, 1, "pinv of a vector");
    v = cr_value_array(&Z);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv, &v, 1, &y), CR_OK);
    ASSERT_DBL(creal(at(&y, 0)), 0.0);
    ASSERT_DBL(creal(at(&y, 1)), 0.0);
}

/* sincos_herm against the Taylor series of sin and cos evaluated here, for a symmetric A
 * read from its upper triangle (junk below). */
static void test_sincos(void **state)
{
    fixture *fx = *state;
    double a[4] = {0.3, -0.2, 99, 0.5}, S[2][2] = {{0.3, -0.2}, {-0.2, 0.5}};
    cr_array A = cr_array_matrix(a, 2, 2);
    cr_value av = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sincos_herm, &av, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_STRUCT);
    const cr_array *sa = y.u.obj.ptr, *ca = sa + 1;
    /* Σ_k A^k / k! with the signs of sin (odd k) and cos (even k) */
    double P[2][2] = {{1, 0}, {0, 1}}, sn[2][2] = {{0}}, cs[2][2] = {{0}}, fact = 1;
    for (int k = 0; k < 30; k++) {
        if (k > 0)
            fact *= k;
        double sign = (k / 2) % 2 ? -1 : 1;
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 2; j++) {
                if (k % 2)
                    sn[i][j] += sign * P[i][j] / fact;
                else
                    cs[i][j] += sign * P[i][j] / fact;
            }
        double Q[2][2];
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 2; j++)
                Q[i][j] = P[i][0] * S[0][j] + P[i][1] * S[1][j];
        memcpy(P, Q, sizeof P);
    }
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++) {
            ASSERT_CLOSE(creal(cr_array_get_linear(sa, i * 2 + j)), sn[i][j], 1e-14);
            ASSERT_CLOSE(creal(cr_array_get_linear(ca, i * 2 + j)), cs[i][j], 1e-14);
        }
    check_point(fx, &cr_fn_sincos_herm, &av, 1, "sincos_herm");
    double r[6] = {1, 2, 3, 4, 5, 6};
    cr_array R = cr_array_matrix(r, 2, 3);
    av = cr_value_array(&R);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sincos_herm, &av, 1, &y), CR_ESHAPE);
}

/* Field k of a tuple value. */
static const cr_array *field(const cr_value *y, size_t k)
{
    assert_int_equal(y->kind, CR_KIND_STRUCT);
    return (const cr_array *)y->u.obj.ptr + k;
}

static cr_complex get2(const cr_array *a, size_t i, size_t j)
{
    return cr_array_get_linear(a, i * a->shape[1] + j);
}

/* Wide qr: Q R = A, Q unitary (m x m), R upper trapezoidal (m x n), untagged. */
static void test_wide_qr(void **state)
{
    fixture *fx = *state;
    double a[8] = {2, -1, 0.5, 3, 1, 4, -2, 0.25};
    cr_array A = cr_array_matrix(a, 2, 4);
    cr_value av = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_qr, &av, 1, &y), CR_OK);
    const cr_array *Q = field(&y, 0), *R = field(&y, 1);
    assert_int_equal(Q->shape[0], 2);
    assert_int_equal(Q->shape[1], 2);
    assert_int_equal(R->shape[0], 2);
    assert_int_equal(R->shape[1], 4);
    assert_int_equal(R->structure, CR_MAT_DENSE);
    ASSERT_DBL(creal(get2(R, 1, 0)), 0.0);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 4; j++) {
            double qr = 0;
            for (size_t l = 0; l < 2; l++)
                qr += creal(get2(Q, i, l)) * creal(get2(R, l, j));
            ASSERT_CLOSE(qr, a[i * 4 + j], 1e-14);
        }
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++) {
            double g = 0;
            for (size_t l = 0; l < 2; l++)
                g += creal(get2(Q, l, i)) * creal(get2(Q, l, j));
            ASSERT_CLOSE(g, i == j ? 1.0 : 0.0, 1e-14);
        }
    check_point(fx, &cr_fn_qr, &av, 1, "qr 2 x 4");
    cr_complex z[6] = {CMPLX(1, 1),  CMPLX(0, 2), CMPLX(-1, 0.5),
                       CMPLX(2, -1), CMPLX(3, 0), CMPLX(0.5, 0.5)};
    cr_array Z = cmat(z, 2, 3);
    av = cr_value_array(&Z);
    check_point(fx, &cr_fn_qr, &av, 1, "qr complex 2 x 3");
}

/* Rectangular lu and getrf: L U = A[p, :] with L m x k unit lower and U k x n upper. */
static void test_rect_lu(void **state)
{
    fixture *fx = *state;
    double tall[6] = {1, 2, 5, -1, 0.5, 3}, wide[6] = {1, 5, 0.5, 2, -1, 3};
    for (int w = 0; w < 2; w++) {
        size_t m = w ? 2 : 3, n = w ? 3 : 2, k = 2;
        double *a = w ? wide : tall;
        cr_array A = cr_array_matrix(a, m, n);
        cr_value av = cr_value_array(&A), y;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_lu, &av, 1, &y), CR_OK);
        const cr_array *L = field(&y, 0), *U = field(&y, 1), *p = field(&y, 2);
        assert_int_equal(L->shape[0], m);
        assert_int_equal(L->shape[1], k);
        assert_int_equal(U->shape[0], k);
        assert_int_equal(U->shape[1], n);
        assert_int_equal(p->shape[0], m);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double lu = 0;
                for (size_t l = 0; l < k; l++)
                    lu += creal(get2(L, i, l)) * creal(get2(U, l, j));
                size_t pi = (size_t)creal(cr_array_get_linear(p, i));
                ASSERT_CLOSE(lu, a[pi * n + j], 1e-14);
            }
        check_point(fx, &cr_fn_lu, &av, 1, w ? "lu wide" : "lu tall");
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_getrf, &av, 1, &y), CR_OK);
        const cr_array *F = field(&y, 0), *ip = field(&y, 1);
        assert_int_equal(F->shape[0], m);
        assert_int_equal(F->shape[1], n);
        assert_int_equal(ip->shape[0], k);
        /* the packed factors are lu's (the interchanges give the same permutation) */
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double want = i > j ? creal(get2(L, i, j)) : creal(get2(U, i, j));
                ASSERT_CLOSE(creal(get2(F, i, j)), want, 1e-15);
            }
        check_point(fx, &cr_fn_getrf, &av, 1, w ? "getrf wide" : "getrf tall");
    }
}

/* The rank-k updates, the Cholesky solves and determinants, pinv_ex, the functions of a
 * Hermitian matrix and the rectangular factorizations, real and complex, in arenas too
 * small for them: CR_EARENA at every size short of room, the results once it fits. */
static void test_arena_sweep(void **state)
{
    fixture *fx = *state;
    double a[9] = {4, 1, 0.5, 1, 3, 0.25, 0.5, 0.25, 2}, w[6] = {1, 2, 3, -1, 0.5, 2};
    double c[4] = {1, 2, 3, 4}, b[6] = {1, -2, 0.5, 3, -1, 2};
    cr_complex ca[9], cw[6];
    for (int i = 0; i < 9; i++)
        ca[i] = CMPLX(a[i], i % 3 == i / 3 ? 0 : (i % 3 > i / 3 ? 0.125 : -0.125));
    for (int i = 0; i < 6; i++)
        cw[i] = CMPLX(w[i], 0.25 * i - 0.5);
    cr_array A = cr_array_matrix(a, 3, 3), W = cr_array_matrix(w, 2, 3),
             C = cr_array_matrix(c, 2, 2), B = cr_array_matrix(b, 3, 2), CA = cmat(ca, 3, 3),
             CW = cmat(cw, 2, 3);
    cr_value av = cr_value_array(&A), wv = cr_value_array(&W), cav = cr_value_array(&CA),
             cwv = cr_value_array(&CW), bv = cr_value_array(&B);
    cr_value rk[6] = {cr_value_i64('U'), cr_value_i64('N'), cr_value_f64(2), wv,
                      cr_value_f64(-1),  cr_value_array(&C)};
    assert_arena_sweep_rules(fx, &cr_fn_syrk, rk, 6);
    assert_arena_sweep_rules(fx, &cr_fn_syrk, rk, 4);
    rk[1] = cr_value_i64('C');
    rk[3] = cwv;
    rk[5] = cav;
    assert_arena_sweep_rules(fx, &cr_fn_herk, rk, 6);
    assert_arena_sweep_rules(fx, &cr_fn_herk, rk, 4);
    cr_value U;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky, &av, 1, &U), CR_OK);
    cr_value ub[2] = {U, bv}, bt[2] = {cr_value_array(&W), U};
    assert_arena_sweep_rules(fx, &cr_fn_cholesky_solve, ub, 2);
    assert_arena_sweep_rules(fx, &cr_fn_cholesky_rdiv, bt, 2);
    assert_arena_sweep_rules(fx, &cr_fn_cholesky_det, &U, 1);
    assert_arena_sweep_rules(fx, &cr_fn_cholesky_logdet, &U, 1);
    cr_value pe[3] = {wv, cr_value_f64(1e-3), cr_value_f64(1e-8)};
    assert_arena_sweep_rules(fx, &cr_fn_pinv_ex, pe, 3);
    pe[0] = cwv;
    assert_arena_sweep_rules(fx, &cr_fn_pinv_ex, pe, 3);
    for (int k = 0; k < 2; k++) {
        cr_value h = k ? cav : av, S;
        assert_int_equal(
            cr_function_call(fx->arena, k ? &cr_fn_hermitian : &cr_fn_symmetric, &h, 1, &S), CR_OK);
        assert_arena_sweep_rules(fx, &cr_fn_sincos_herm, &S, 1);
        cr_value mf[2] = {cr_fn_exp, S};
        assert_arena_sweep_rules(fx, &cr_fn_matfun_herm, mf, 2);
        assert_arena_sweep_rules(fx, &cr_fn_qr, k ? &cwv : &wv, 1);
        assert_arena_sweep_rules(fx, &cr_fn_lu, k ? &cwv : &wv, 1);
        assert_arena_sweep_rules(fx, &cr_fn_getrf, k ? &cwv : &wv, 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dotu, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rank_k, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky_extras, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_pinv_extras, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sincos, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_wide_qr, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rect_lu, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_sweep, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
