/*
 * Rare paths of the linear-algebra rules (src/rulesets/linalg*.c): zero seeds and zero
 * input tangents for every function, arguments that are not differentiable (integer
 * arrays and numbers), structured arguments of the structure wrappers, det at a singular
 * complex matrix, a complex SVD seed whose U part is absent, empty matrices, and the
 * errors for bad input (status, a message naming the function, the context usable after).
 * Derivatives are checked by the rule tester against finite differences.
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

#include "test_linalg_fns.h"

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
    /* svd of a vector, qr of a vector, lu of a rectangle, getrf of a rectangle */
    a[0] = cr_value_array(&v3);
    expect_error(fx, &cr_fn_svd, a, 1, CR_ESHAPE, "svd: expected a float matrix");
    expect_error(fx, &cr_fn_qr, a, 1, CR_ESHAPE, "qr: expected an f64, f32 or c128 matrix");
    a[0] = cr_value_array(&M23);
    expect_error(fx, &cr_fn_lu, a, 1, CR_ESHAPE, "lu: expected a square f64, f32 or c128 matrix");
    expect_error(fx, &cr_fn_getrf, a, 1, CR_ESHAPE,
                 "getrf: argument 1 must be a square f64, f32 or c128 matrix");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
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
    return cmocka_run_group_tests(tests, NULL, NULL);
}
