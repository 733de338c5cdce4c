/*
 * Tests of the factorization rules (rules_linalg.h, "Factorizations"): lu, qr,
 * eigen_general, eigvals_general, cholesky_solve/det/logdet, pinv, sylvester and lyap.
 * Every rule through the rule tester at the points its sampler draws (f64, f32, c128,
 * mixed), then special inputs against finite differences: ill-conditioned and structured
 * matrices, rank deficiency, complex eigenvalues, repeated eigenvalues, singular and
 * defective matrices (clear errors, no crash).
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/testing_cmocka.h>

#if defined(CR_HAVE_LAPACKE)

static const char *const k_fact_fns[] = {
    "lu",
    "qr",
    "eigen_general",
    "eigvals_general",
    "cholesky_solve",
    "cholesky_det",
    "cholesky_logdet",
    "pinv",
    "sylvester",
    "lyap",
};
#define NFNS (sizeof k_fact_fns / sizeof k_fact_fns[0])

static cr_tangent unthunked(cr_tangent t)
{
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(t, &v), CR_OK);
    return v;
}

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

static cr_value field(const cr_value *y, size_t i)
{
    cr_value v;
    assert_int_equal(cr_type_field_value(y->u.obj.type, y->u.obj.ptr, i, &v), CR_OK);
    return v;
}

/* frule, rrule (finite differences) and their consistency at one point (tol 0: the
 * testers' defaults). A macro, so that a failure names the caller's line. */
#define check_point(fx, fn, args, n, tol)                                                        \
    do {                                                                                         \
        cr_test_opts o_ = {0};                                                                   \
        o_.rtol = o_.atol = (tol);                                                               \
        cr_test_report r_;                                                                       \
        CR_ASSERT_RULE_TEST(cr_test_rrule((fx)->arena, &o_, (fn), (args), (n), &r_), r_);        \
        CR_ASSERT_RULE_TEST(cr_test_frule((fx)->arena, &o_, (fn), (args), (n), &r_), r_);        \
        CR_ASSERT_RULE_TEST(cr_test_consistency((fx)->arena, NULL, (fn), (args), (n), &r_), r_); \
    } while (0)

/* ---- Registrations ------------------------------------------------------------------------- */

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    bool seen[NFNS] = {false};
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        size_t k = 0;
        while (k < NFNS && strcmp(info.fn->name, k_fact_fns[k]) != 0)
            k++;
        if (k == NFNS)
            continue;
        seen[k] = true;
        assert_true(cr_test_registration_usable(&info));
        cr_test_opts opts = {0};
        opts.npoints = 24;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        char buf[1200];
        cr_test_report_format(&r, buf, sizeof buf);
        if (st != CR_OK || r.verdict == CR_VERDICT_FAIL) {
            print_error("%s: %s (%s; %s)\n", info.fn->name, buf, cr_status_name(st),
                        cr_ctx_errmsg(fx->ctx));
            fail();
        }
        /* Every sampled point is tested (none skipped). */
        if (r.nskipped != 0)
            print_error("%s: %s\n", info.fn->name, buf);
        assert_int_equal(r.nskipped, 0);
    }
    for (size_t k = 0; k < NFNS; k++)
        if (!seen[k]) {
            print_error("no rule registered for %s\n", k_fact_fns[k]);
            fail();
        }
}

/* ---- lu ----------------------------------------------------------------------------------------
 */

/* Values (A[p[i], :] = (L U)[i, :], unit L, upper U, a real permutation), finite differences
 * at a matrix that needs pivoting, an ill-conditioned one, a complex and an f32 one; a
 * singular matrix is a domain error. */
static void test_lu_cases(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double a[9] = {0, 1, 2, 1, 1, 0, 3, 2, 1};
    cr_array A = cr_array_matrix(a, 3, 3);
    cr_value v = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lu, &v, 1, &y), CR_OK);
    cr_value L = field(&y, 0), U = field(&y, 1), P = field(&y, 2);
    assert_int_equal(L.u.arr->structure, CR_MAT_LOWER);
    assert_int_equal(U.u.arr->structure, CR_MAT_UPPER);
    assert_int_equal(P.u.arr->dtype, CR_DT_I64);
    const int64_t *p = P.u.arr->data;
    assert_int_equal(p[0], 2); /* the largest entry of column 0 is in row 2 */
    for (size_t i = 0; i < 3; i++) {
        ASSERT_CLOSE(creal(at2(L.u.arr, i, i)), 1, 0);
        for (size_t j = 0; j < 3; j++) {
            cr_complex lu = 0;
            for (size_t k = 0; k < 3; k++)
                lu += at2(L.u.arr, i, k) * at2(U.u.arr, k, j);
            ASSERT_CLOSE(creal(lu), a[(size_t)p[i] * 3 + j], 1e-14);
        }
    }
    check_point(fx, &cr_fn_lu, &v, 1, 0);
    /* Condition number ~1e5 with clear pivots: L U with L = [1 0 0; .5 1 0; .25 .5 1] and
     * U = [1 2 3; 0 1 -1; 0 0 1e-4]. */
    double ill[9] = {1, 2, 3, 0.5, 2, 0.5, 0.25, 1, 0.25 + 1e-4};
    cr_array I3 = cr_array_matrix(ill, 3, 3);
    v = cr_value_array(&I3);
    check_point(fx, &cr_fn_lu, &v, 1, 1e-5);
    /* Complex. */
    cr_complex c[4] = {CMPLX(0.5, 1), CMPLX(2, -1), CMPLX(3, 0.25), CMPLX(-1, 1)};
    size_t s2[2] = {2, 2};
    cr_array C;
    cr_array_view_init(&C, c, CR_DT_C128, 2, s2, NULL);
    v = cr_value_array(&C);
    check_point(fx, &cr_fn_lu, &v, 1, 0);
    /* f32: f32 factors and an f32 cotangent. */
    float af[4] = {1, 4, 2, 1};
    cr_array AF;
    cr_array_view_init(&AF, af, CR_DT_F32, 2, s2, NULL);
    v = cr_value_array(&AF);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_lu, &v, 1, &y, &pb), CR_OK);
    assert_int_equal(field(&y, 0).u.arr->dtype, CR_DT_F32);
    cr_tangent f3[3] = {cr_tangent_zero(), cr_tangent_array(field(&y, 1).u.arr), cr_tangent_zero()},
               dy, dx[2];
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, f3, 3, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(unthunked(dx[1]).u.arr->dtype, CR_DT_F32);
    /* Singular. */
    double sing[4] = {1, 2, 2, 4};
    cr_array S = cr_array_matrix(sing, 2, 2);
    v = cr_value_array(&S);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lu, &v, 1, &y), CR_EDOMAIN);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "lu"));
}

/* ---- qr ----------------------------------------------------------------------------------------
 */

static void test_qr_cases(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double a[8] = {1, 2, -1, 0.5, 0.25, 3, 2, -1};
    cr_array A = cr_array_matrix(a, 4, 2);
    cr_value v = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_qr, &v, 1, &y), CR_OK);
    cr_value Q = field(&y, 0), R = field(&y, 1);
    assert_int_equal(R.u.arr->structure, CR_MAT_UPPER);
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 2; j++) {
            cr_complex qr = 0;
            for (size_t k = 0; k < 2; k++)
                qr += at2(Q.u.arr, i, k) * at2(R.u.arr, k, j);
            ASSERT_CLOSE(creal(qr), a[i * 2 + j], 1e-14);
        }
    check_point(fx, &cr_fn_qr, &v, 1, 0);
    /* Nearly dependent columns (R[1][1] ~ 1e-3). */
    double ill[6] = {1, 1, 1, 1 + 1e-3, 1, 1 - 1e-3};
    cr_array IM = cr_array_matrix(ill, 3, 2);
    v = cr_value_array(&IM);
    check_point(fx, &cr_fn_qr, &v, 1, 1e-5);
    /* Complex, square. */
    cr_complex c[4] = {CMPLX(0.5, 1), CMPLX(2, -1), CMPLX(3, 0.25), CMPLX(-1, 1)};
    size_t s2[2] = {2, 2};
    cr_array C;
    cr_array_view_init(&C, c, CR_DT_C128, 2, s2, NULL);
    v = cr_value_array(&C);
    check_point(fx, &cr_fn_qr, &v, 1, 0);
    /* Rank deficient: the primal works, the derivative is a domain error. */
    double rd[4] = {1, 2, 2, 4};
    cr_array RD = cr_array_matrix(rd, 2, 2);
    v = cr_value_array(&RD);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_qr, &v, 1, &y, &pb), CR_OK);
    cr_tangent f2[2] = {cr_tangent_array(field(&y, 0).u.arr), cr_tangent_zero()}, dy, dx[2];
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, f2, 2, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_EDOMAIN);
    /* Wide: Q 2 x 2, R 2 x 4 (test_linalg_extras.c checks its values and rules). */
    cr_array W = cr_array_matrix(a, 2, 4);
    v = cr_value_array(&W);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_qr, &v, 1, &y), CR_OK);
    assert_int_equal(field(&y, 1).u.arr->shape[1], 4);
}

/* ---- eigen_general -----------------------------------------------------------------------------
 */

static void test_eigen_general_cases(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    /* Eigenvalues ±i√2 and 3: a complex pair of a real matrix. */
    double a[9] = {0, -2, 0, 1, 0, 0, 0.5, 0.25, 3};
    cr_array A = cr_array_matrix(a, 3, 3);
    cr_value v = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_eigen_general, &v, 1, &y), CR_OK);
    cr_value Lv = field(&y, 0), Vv = field(&y, 1);
    assert_int_equal(Lv.u.arr->dtype, CR_DT_C128);
    ASSERT_CLOSE(creal(cr_array_get_linear(Lv.u.arr, 0)), 0, 1e-14);
    ASSERT_CLOSE(cimag(cr_array_get_linear(Lv.u.arr, 0)), -sqrt(2.0), 1e-14);
    ASSERT_CLOSE(cimag(cr_array_get_linear(Lv.u.arr, 1)), sqrt(2.0), 1e-14);
    ASSERT_CLOSE(creal(cr_array_get_linear(Lv.u.arr, 2)), 3, 1e-14);
    for (size_t j = 0; j < 3; j++) {
        cr_complex lj = cr_array_get_linear(Lv.u.arr, j);
        double nrm = 0, big = 0;
        cr_complex vk = 0;
        for (size_t i = 0; i < 3; i++) {
            cr_complex av = 0, vij = at2(Vv.u.arr, i, j);
            for (size_t k = 0; k < 3; k++)
                av += a[i * 3 + k] * at2(Vv.u.arr, k, j);
            ASSERT_CLOSE(cabs(av - lj * vij), 0, 1e-14);
            nrm += cabs(vij) * cabs(vij);
            if (cabs(vij) > big) {
                big = cabs(vij);
                vk = vij;
            }
        }
        ASSERT_CLOSE(nrm, 1, 1e-14);
        /* The gauge: the largest component is real and positive. */
        ASSERT_CLOSE(cimag(vk), 0, 0);
        assert_true(creal(vk) > 0);
    }
    check_point(fx, &cr_fn_eigen_general, &v, 1, 0);
    check_point(fx, &cr_fn_eigvals_general, &v, 1, 0);
    /* A complex matrix. */
    cr_complex c[4] = {CMPLX(1, 1), CMPLX(2, -1), CMPLX(0.5, 0.25), CMPLX(-1, 2)};
    size_t s2[2] = {2, 2};
    cr_array C;
    cr_array_view_init(&C, c, CR_DT_C128, 2, s2, NULL);
    v = cr_value_array(&C);
    check_point(fx, &cr_fn_eigen_general, &v, 1, 0);
    /* Close eigenvalues (gap 0.022): eigenvectors with large derivatives. */
    double cl[4] = {1, 0.01, 0.01, 1.01};
    cr_array CL = cr_array_matrix(cl, 2, 2);
    v = cr_value_array(&CL);
    check_point(fx, &cr_fn_eigen_general, &v, 1, 1e-5);
    /* A repeated eigenvalue with a full set of eigenvectors: eigvals' pullback is exact
     * (the sum of the eigenvalues is the trace: gradient I), eigen's is finite. */
    double rep[9] = {2, 0, 0, 0, 2, 0, 1, 1, 5};
    cr_array RP = cr_array_matrix(rep, 3, 3);
    v = cr_value_array(&RP);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_eigvals_general, &v, 1, &y, &pb), CR_OK);
    cr_complex ones[3] = {1, 1, 1};
    size_t n3 = 3;
    cr_array O;
    cr_array_view_init(&O, ones, CR_DT_C128, 1, &n3, NULL);
    cr_tangent dy = cr_tangent_array(&O), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    cr_tangent g = unthunked(dx[1]);
    assert_int_equal(g.u.arr->dtype, CR_DT_F64);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++)
            ASSERT_CLOSE(creal(at2(g.u.arr, i, j)), i == j ? 1 : 0, 1e-12);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_eigen_general, &v, 1, &y, &pb), CR_OK);
    cr_tangent f2[2] = {cr_tangent_array(&O), cr_tangent_array(field(&y, 1).u.arr)};
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, f2, 2, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_true(all_finite(dx[1]));
    /* A defective matrix (a Jordan block): the values exist, the derivative is a domain
     * error, not a crash. */
    double jb[4] = {1, 1, 0, 1};
    cr_array J = cr_array_matrix(jb, 2, 2);
    v = cr_value_array(&J);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_eigvals_general, &v, 1, &y, &pb), CR_OK);
    cr_array_view_init(&O, ones, CR_DT_C128, 1, s2, NULL);
    dy = cr_tangent_array(&O);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_EDOMAIN);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "defective"));
}

/* ---- Cholesky factor ----------------------------------------------------------------------------
 */

/* A \ b through cholesky(A) agrees with solve(A, b), and so do the gradients with respect
 * to A (chained through cholesky's pullback) and b; det and logdet agree with det(A) and
 * logdet(A); a zero on the factor's diagonal. */
static void test_cholesky_factor_cases(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double a[9] = {4, 2, 0.5, 2, 5, 1, 0.5, 1, 3}, b[3] = {1, -2, 0.5};
    cr_array A = cr_array_matrix(a, 3, 3), B = cr_array_vector(b, 3);
    A.structure = CR_MAT_SYMMETRIC;
    cr_value av = cr_value_array(&A), bv = cr_value_array(&B), u, x1, x2;
    cr_pullback pc, ps, pd;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cholesky, &av, 1, &u, &pc), CR_OK);
    cr_value sargs[2] = {u, bv}, dargs[2] = {av, bv};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cholesky_solve, sargs, 2, &x1, &ps), CR_OK);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_solve, dargs, 2, &x2, &pd), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(x1.u.arr, i)),
                     creal(cr_array_get_linear(x2.u.arr, i)), 1e-14);
    double g[3] = {1, 0.5, -1};
    cr_array G = cr_array_vector(g, 3);
    cr_tangent dy = cr_tangent_array(&G), d1[3], d2[3], dA[2];
    assert_int_equal(cr_pullback_call(fx->arena, &ps, &dy, d1, 3), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pd, &dy, d2, 3), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pc, &d1[1], dA, 2), CR_OK);
    cr_tangent ga = unthunked(dA[1]), gs = unthunked(d2[1]), gb1 = unthunked(d1[2]),
               gb2 = unthunked(d2[2]);
    for (size_t i = 0; i < 3; i++) {
        ASSERT_CLOSE(creal(cr_array_get_linear(gb1.u.arr, i)),
                     creal(cr_array_get_linear(gb2.u.arr, i)), 1e-13);
        for (size_t j = 0; j < 3; j++)
            ASSERT_CLOSE(creal(at2(ga.u.arr, i, j)), creal(at2(gs.u.arr, i, j)), 1e-13);
    }
    check_point(fx, &cr_fn_cholesky_solve, sargs, 2, 0);
    /* det and logdet. */
    cr_value y1, y2;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky_det, &u, 1, &y1), CR_OK);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_det, &av, 1, &y2), CR_OK);
    ASSERT_CLOSE(y1.u.f64, y2.u.f64, 1e-14);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky_logdet, &u, 1, &y1), CR_OK);
    ASSERT_CLOSE(y1.u.f64, log(y2.u.f64), 1e-14);
    /* A complex factor: real det and logdet. */
    cr_complex uc[4] = {CMPLX(2, 0), CMPLX(0.5, -1), CMPLX(0, 0), CMPLX(1.5, 0)};
    size_t s2[2] = {2, 2};
    cr_array UC;
    cr_array_view_init(&UC, uc, CR_DT_C128, 2, s2, NULL);
    UC.structure = CR_MAT_UPPER;
    cr_value ucv = cr_value_array(&UC);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky_logdet, &ucv, 1, &y1), CR_OK);
    assert_int_equal(y1.kind, CR_KIND_F64);
    ASSERT_CLOSE(y1.u.f64, 2 * log(3.0), 1e-14);
    check_point(fx, &cr_fn_cholesky_logdet, &ucv, 1, 0);
    check_point(fx, &cr_fn_cholesky_det, &ucv, 1, 0);
    /* A zero on the diagonal: det and its gradient are fine (and exact: finite
     * differences of a polynomial), logdet and solve are domain errors. */
    double uz[9] = {2, 1, 0.5, 0, 0, 1, 0, 0, 3};
    cr_array UZ = cr_array_matrix(uz, 3, 3);
    cr_value uzv = cr_value_array(&UZ);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky_det, &uzv, 1, &y1), CR_OK);
    ASSERT_CLOSE(y1.u.f64, 0, 0);
    check_point(fx, &cr_fn_cholesky_det, &uzv, 1, 0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky_logdet, &uzv, 1, &y1), CR_EDOMAIN);
    cr_value zargs[2] = {uzv, bv};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cholesky_solve, zargs, 2, &y1), CR_EDOMAIN);
}

/* ---- pinv ------------------------------------------------------------------------------------ */

static void test_pinv_cases(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    /* Full rank: pinv(A) A = I for a tall A. */
    double a[6] = {1, 2, 0, 1, 1, -1};
    cr_array A = cr_array_matrix(a, 3, 2);
    cr_value v = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv, &v, 1, &y), CR_OK);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++) {
            double s = 0;
            for (size_t k = 0; k < 3; k++)
                s += creal(at2(y.u.arr, i, k)) * a[k * 2 + j];
            ASSERT_CLOSE(s, i == j ? 1 : 0, 1e-14);
        }
    /* Ill-conditioned (s_min ~ 1e-3). */
    double ill[6] = {1, 1, 1, 1 + 1e-3, 1, 1 - 1e-3};
    cr_array IM = cr_array_matrix(ill, 3, 2);
    v = cr_value_array(&IM);
    check_point(fx, &cr_fn_pinv, &v, 1, 1e-4);
    /* Rank deficient (rank 1, 3 x 3): pinv = A⁺ of the rank-1 part. Finite differences
     * along directions that keep the rank (u → u + t du, v → v + t dv; a perturbation
     * that raises the rank makes the truncated pinv jump), and the frule/rrule dot-product
     * test in every direction. */
    double u3[3] = {1, 2, -1}, v3[3] = {0.5, 1, 2};
    double r1[9];
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++)
            r1[i * 3 + j] = u3[i] * v3[j];
    cr_array R1 = cr_array_matrix(r1, 3, 3);
    v = cr_value_array(&R1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv, &v, 1, &y), CR_OK);
    /* A⁺ = v uᵀ / (|u|² |v|²) */
    double nu = 6, nv = 5.25;
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++)
            ASSERT_CLOSE(creal(at2(y.u.arr, i, j)), v3[i] * u3[j] / (nu * nv), 1e-14);
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_consistency(fx->arena, NULL, &cr_fn_pinv, &v, 1, &r), r);
    double du[3] = {0.3, -0.2, 0.7}, dv[3] = {-0.4, 0.1, 0.6};
    for (size_t t = 0; t < 2; t++) {
        double e[9];
        for (size_t i = 0; i < 3; i++)
            for (size_t j = 0; j < 3; j++)
                e[i * 3 + j] = t == 0 ? du[i] * v3[j] : u3[i] * dv[j];
        cr_array E = cr_array_matrix(e, 3, 3);
        cr_tangent tin[2] = {cr_tangent_none(), cr_tangent_array(&E)};
        cr_test_opts opts = {0};
        opts.input_tangents = tin;
        opts.rtol = opts.atol = 1e-7;
        CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, &opts, &cr_fn_pinv, &v, 1, &r), r);
    }
    /* Complex. */
    cr_complex c[6] = {CMPLX(1, 1),  CMPLX(2, -1), CMPLX(0.5, 0.25),
                       CMPLX(-1, 2), CMPLX(0, 1),  CMPLX(1, 0)};
    size_t s23[2] = {2, 3};
    cr_array C;
    cr_array_view_init(&C, c, CR_DT_C128, 2, s23, NULL);
    v = cr_value_array(&C);
    check_point(fx, &cr_fn_pinv, &v, 1, 0);
}

/* ---- sylvester and lyap ------------------------------------------------------------------------
 */

static void test_sylvester_lyap_cases(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double a[4] = {1, 2, 0, 3}, b[9] = {2, 0, 1, 1, -1, 0, 0, 0.5, 4}, c[6] = {1, 0, -1, 2, 3, 1};
    cr_array A = cr_array_matrix(a, 2, 2), B = cr_array_matrix(b, 3, 3),
             C = cr_array_matrix(c, 2, 3);
    cr_value args[3] = {cr_value_array(&A), cr_value_array(&B), cr_value_array(&C)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sylvester, args, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F64);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++) {
            double res = c[i * 3 + j];
            for (size_t k = 0; k < 2; k++)
                res += a[i * 2 + k] * creal(at2(y.u.arr, k, j));
            for (size_t k = 0; k < 3; k++)
                res += creal(at2(y.u.arr, i, k)) * b[k * 3 + j];
            ASSERT_CLOSE(res, 0, 1e-13);
        }
    check_point(fx, &cr_fn_sylvester, args, 3, 0);
    /* Nearly singular: λ(A) + λ(B) = 1 + (-0.999) = 0.001. */
    double bi[9] = {-0.999, 0, 1, 1, 5, 0, 0, 0.5, 4};
    cr_array BI = cr_array_matrix(bi, 3, 3);
    args[1] = cr_value_array(&BI);
    check_point(fx, &cr_fn_sylvester, args, 3, 1e-5);
    /* Singular: λ(A) + λ(B) = 1 + (-1) = 0 exactly. */
    double bs[9] = {-1, 0, 0, 0, 5, 0, 0, 0, 4};
    cr_array BS = cr_array_matrix(bs, 3, 3);
    args[1] = cr_value_array(&BS);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sylvester, args, 3, &y), CR_EDOMAIN);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "sylvester"));
    /* Mixed: complex B, real A and C (real cotangents for them). */
    cr_complex bc[4] = {CMPLX(1, 1), CMPLX(0, 0.5), CMPLX(-0.5, 0), CMPLX(2, -1)};
    size_t s2[2] = {2, 2};
    cr_array BC;
    cr_array_view_init(&BC, bc, CR_DT_C128, 2, s2, NULL);
    double c2[4] = {1, 2, 3, 4};
    cr_array C2 = cr_array_matrix(c2, 2, 2);
    cr_value margs[3] = {cr_value_array(&A), cr_value_array(&BC), cr_value_array(&C2)};
    check_point(fx, &cr_fn_sylvester, margs, 3, 0);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sylvester, margs, 3, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_C128);
    cr_tangent dy = cr_tangent_array(y.u.arr), dx[4];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(unthunked(dx[1]).u.arr->dtype, CR_DT_F64);
    assert_int_equal(unthunked(dx[2]).u.arr->dtype, CR_DT_C128);
    assert_int_equal(unthunked(dx[3]).u.arr->dtype, CR_DT_F64);
    /* lyap: a stable A and a symmetric C give the symmetric X with A X + X Aᵀ + C = 0. */
    double al[4] = {-1, 0.5, -0.25, -2}, cl[4] = {1, 0.5, 0.5, 2};
    cr_array AL = cr_array_matrix(al, 2, 2), CL = cr_array_matrix(cl, 2, 2);
    cr_value largs[2] = {cr_value_array(&AL), cr_value_array(&CL)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lyap, largs, 2, &y), CR_OK);
    ASSERT_CLOSE(creal(at2(y.u.arr, 0, 1)), creal(at2(y.u.arr, 1, 0)), 1e-14);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++) {
            double res = cl[i * 2 + j];
            for (size_t k = 0; k < 2; k++)
                res += al[i * 2 + k] * creal(at2(y.u.arr, k, j)) +
                       creal(at2(y.u.arr, i, k)) * al[j * 2 + k];
            ASSERT_CLOSE(res, 0, 1e-13);
        }
    check_point(fx, &cr_fn_lyap, largs, 2, 0);
    /* Complex lyap. */
    cr_complex ac[4] = {CMPLX(-1, 1), CMPLX(0.5, 0), CMPLX(0, -0.25), CMPLX(-2, 0.5)};
    cr_array AC;
    cr_array_view_init(&AC, ac, CR_DT_C128, 2, s2, NULL);
    largs[0] = cr_value_array(&AC);
    check_point(fx, &cr_fn_lyap, largs, 2, 0);
    /* Singular: eigenvalues 1 and -1 (λ_i + conj(λ_j) = 0). */
    double as[4] = {1, 0, 0, -1};
    cr_array AS = cr_array_matrix(as, 2, 2);
    largs[0] = cr_value_array(&AS);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lyap, largs, 2, &y), CR_EDOMAIN);
}

/* ---- Allocation failures --------------------------------------------------------------------- */

/* Every rule in fixed arenas of growing size: each allocation failure comes back as
 * CR_EARENA (never a crash or a wrong result), until the arena is large enough; then the
 * rrule, its pullback and the frule succeed. Run under the sanitizers, this also checks
 * that no failure path reads uninitialised memory. */
static void test_allocation_failures(void **state)
{
    fixture *fx = *state;
    double a[9] = {0, 1, 2, 1, 1, 0, 3, 2, 1.5}, b[6] = {1, 2, 0, -1, 0.5, 1};
    double u[9] = {2, 1, 0.5, 0, 1.5, 1, 0, 0, 3}, s[9] = {3, 1, 0, 0, 2, 1, 1, 0, 4};
    cr_array A = cr_array_matrix(a, 3, 3), B = cr_array_matrix(b, 3, 2),
             U = cr_array_matrix(u, 3, 3), S = cr_array_matrix(s, 3, 3);
    static const struct {
        const cr_value *fn;
        int args; /* 0: A; 1: B (3 x 2); 2: U; 3: U, B; 4: S, S, A; 5: S, A */
    } k[] = {{&cr_fn_lu, 0},
             {&cr_fn_qr, 1},
             {&cr_fn_eigen_general, 0},
             {&cr_fn_eigvals_general, 0},
             {&cr_fn_pinv, 1},
             {&cr_fn_cholesky_det, 2},
             {&cr_fn_cholesky_logdet, 2},
             {&cr_fn_cholesky_solve, 3},
             {&cr_fn_sylvester, 4},
             {&cr_fn_lyap, 5}};
    static char buf[1 << 17];
    for (size_t t = 0; t < sizeof k / sizeof k[0]; t++) {
        cr_value args[3];
        size_t n = 1;
        switch (k[t].args) {
        case 0:
            args[0] = cr_value_array(&A);
            break;
        case 1:
            args[0] = cr_value_array(&B);
            break;
        case 2:
            args[0] = cr_value_array(&U);
            break;
        case 3:
            args[0] = cr_value_array(&U);
            args[1] = cr_value_array(&B);
            n = 2;
            break;
        case 4:
            args[0] = cr_value_array(&S);
            args[1] = cr_value_array(&S);
            args[2] = cr_value_array(&A);
            n = 3;
            break;
        default:
            args[0] = cr_value_array(&S);
            args[1] = cr_value_array(&A);
            n = 2;
            break;
        }
        bool done = false;
        for (size_t size = 256; size <= sizeof buf && !done; size += 256) {
            cr_arena_params ap = {0};
            ap.buffer = buf;
            ap.buffer_size = size;
            cr_arena *ar;
            assert_int_equal(cr_arena_new(fx->ctx, &ap, &ar), CR_OK);
            cr_value y;
            cr_pullback pb;
            cr_status st = cr_rrule(NULL, ar, k[t].fn, args, n, &y, &pb);
            cr_tangent dx[4], dy, din[4] = {cr_tangent_none()};
            if (st == CR_OK) {
                /* The primal itself as the seed (a tuple's fields for a tuple). */
                if (y.kind == CR_KIND_F64) {
                    dy = cr_tangent_f64(1);
                } else if (y.kind == CR_KIND_ARRAY) {
                    dy = cr_tangent_array(y.u.arr);
                } else {
                    cr_tangent f[3] = {cr_tangent_array(field(&y, 0).u.arr),
                                       cr_tangent_array(field(&y, 1).u.arr), cr_tangent_zero()};
                    st = cr_tangent_struct(ar, y.u.obj.type, NULL, f, y.u.obj.type->nfields, &dy);
                }
            }
            if (st == CR_OK)
                st = cr_pullback_call(ar, &pb, &dy, dx, n + 1);
            for (size_t i = 0; st == CR_OK && i < n + 1; i++)
                st = cr_tangent_unthunk(dx[i], &dx[i]);
            for (size_t i = 0; i < n; i++)
                din[i + 1] = cr_tangent_array((cr_array *)args[i].u.arr);
            if (st == CR_OK)
                st = cr_frule(NULL, ar, din, k[t].fn, args, n, &y, &dy);
            if (st == CR_OK)
                done = true;
            else
                assert_int_equal(st, CR_EARENA);
            cr_arena_free(ar);
        }
        assert_true(done);
    }
}

#endif /* CR_HAVE_LAPACKE */

#if !defined(CR_HAVE_LAPACKE)
/* Without LAPACKE the functions exist and report CR_EUNIMPL. */
static void test_no_lapack(void **state)
{
    fixture *fx = *state;
    double a[4] = {1, 2, 3, 4};
    cr_array A = cr_array_matrix(a, 2, 2);
    cr_value v = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lu, &v, 1, &y), CR_EUNIMPL);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_pinv, &v, 1, &y), CR_EUNIMPL);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#if defined(CR_HAVE_LAPACKE)
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lu_cases, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_qr_cases, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eigen_general_cases, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky_factor_cases, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_pinv_cases, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sylvester_lyap_cases, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_allocation_failures, fixture_setup, fixture_teardown),
#else
        cmocka_unit_test_setup_teardown(test_no_lapack, fixture_setup, fixture_teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
