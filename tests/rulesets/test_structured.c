/*
 * Tests of the structured matrices (array.h's band, unit and lower-triangle structures,
 * rules_structured.h, src/rulesets/linalg/structured.c): every constructor through the rule
 * tester at its sampler's points; the logical values of each structure against matrices
 * written out here from the storage convention; projection and tangent algebra; the generic
 * rules (matmul both sides, solve, det, logdet, tr, transpose, adjoint, + and -) with each
 * structure as an argument, against finite differences (the rule tester) and against the same
 * function of the dense equivalent built here; and H v through the constructors on a
 * second-order tape against differences of the gradient.
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"

#include <chainrules/rules_structured.h>

static void expect_pass(fixture *fx, cr_status st, const cr_test_report *r, const char *what)
{
    if (st != CR_OK || r->verdict == CR_VERDICT_FAIL) {
        char buf[1200];
        cr_test_report_format(r, buf, sizeof buf);
        print_error("%s: %s (%s; %s)\n", what, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
        fail();
    }
}

static void check_point(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                        const char *what)
{
    cr_test_report r;
    expect_pass(fx, cr_test_frule(fx->arena, NULL, f, args, nargs, &r), &r, what);
    expect_pass(fx, cr_test_rrule(fx->arena, NULL, f, args, nargs, &r), &r, what);
    expect_pass(fx, cr_test_consistency(fx->arena, NULL, f, args, nargs, &r), &r, what);
}

/* ---- Every constructor through the rule tester ---------------------------------------------- */

static const char *const k_fns[] = {"Tridiagonal",         "SymTridiagonal",
                                    "Bidiagonal",          "UpperTriangular",
                                    "LowerTriangular",     "UnitUpperTriangular",
                                    "UnitLowerTriangular", "Matrix",
                                    "Symmetric",           "Hermitian"};
#define NFNS (sizeof k_fns / sizeof k_fns[0])

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
        while (k < NFNS && strcmp(info.fn->name, k_fns[k]) != 0)
            k++;
        if (k == NFNS || (k >= 8 && info.nargs != 2)) /* Symmetric(A, uplo), Hermitian(A, uplo) */
            continue;
        seen[k] = true;
        assert_non_null(info.test);
        cr_test_opts opts = {0};
        opts.npoints = 40;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        char sig[160];
        cr_signature_str(info.fn->name, info.args, info.nargs, info.variadic, sig, sizeof sig);
        expect_pass(fx, st, &r, sig);
        assert_int_equal(r.nskipped, 0);
        assert_true(r.npoints >= 20);
    }
    for (size_t k = 0; k < NFNS; k++)
        if (!seen[k]) {
            print_error("no rule registered for %s\n", k_fns[k]);
            fail();
        }
}

/* ---- Values --------------------------------------------------------------------------------- */

static const cr_matstruct k_structs[] = {
    CR_MAT_TRIDIAGONAL, CR_MAT_SYMTRIDIAGONAL, CR_MAT_BIDIAG_UPPER,    CR_MAT_BIDIAG_LOWER,
    CR_MAT_UNIT_UPPER,  CR_MAT_UNIT_LOWER,     CR_MAT_SYMMETRIC_LOWER, CR_MAT_HERMITIAN_LOWER};
#define NSTRUCTS (sizeof k_structs / sizeof k_structs[0])

/* The logical value of an n x n storage s (row-major, complex) under structure t, written out
 * from array.h's convention case by case. */
static cr_complex logical(cr_matstruct t, const cr_complex *s, size_t n, size_t i, size_t j)
{
    cr_complex a = s[i * n + j], m = s[j * n + i];
    switch (t) {
    case CR_MAT_TRIDIAGONAL:
        return (i == j || i == j + 1 || j == i + 1) ? a : 0;
    case CR_MAT_SYMTRIDIAGONAL:
        return i == j || j == i + 1 ? a : i == j + 1 ? m : 0;
    case CR_MAT_BIDIAG_UPPER:
        return i == j || j == i + 1 ? a : 0;
    case CR_MAT_BIDIAG_LOWER:
        return i == j || i == j + 1 ? a : 0;
    case CR_MAT_UNIT_UPPER:
        return i == j ? 1 : i < j ? a : 0;
    case CR_MAT_UNIT_LOWER:
        return i == j ? 1 : i > j ? a : 0;
    case CR_MAT_SYMMETRIC_LOWER:
        return i >= j ? a : m;
    case CR_MAT_HERMITIAN_LOWER:
        return i == j ? creal(a) : i > j ? a : conj(m);
    default:
        return a;
    }
}

static void test_logical_values(void **state)
{
    (void)state;
    cr_complex s[16];
    for (size_t k = 0; k < 16; k++)
        s[k] = CMPLX(1.0 + (double)k, 0.5 - 0.25 * (double)k);
    for (size_t t = 0; t < NSTRUCTS; t++) {
        size_t shape[2] = {4, 4};
        cr_array A;
        assert_int_equal(cr_array_view_init(&A, s, CR_DT_C128, 2, shape, NULL), CR_OK);
        A.structure = (uint8_t)k_structs[t];
        for (size_t i = 0; i < 4; i++)
            for (size_t j = 0; j < 4; j++) {
                cr_complex got = cr_array_get_linear(&A, i * 4 + j);
                cr_complex want = logical(k_structs[t], s, 4, i, j);
                if (got != want) {
                    print_error("%s (%zu, %zu): %g%+gi, want %g%+gi\n",
                                cr_matstruct_name(k_structs[t]), i, j, creal(got), cimag(got),
                                creal(want), cimag(want));
                    fail();
                }
            }
        assert_string_not_equal(cr_matstruct_name(k_structs[t]), "?");
    }
}

static cr_value call1(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs)
{
    cr_value y;
    cr_status st = cr_function_call(fx->arena, f, args, nargs, &y);
    if (st != CR_OK) {
        print_error("%s: %s\n", cr_status_name(st), cr_ctx_errmsg(fx->ctx));
        fail();
    }
    return y;
}

static void expect_matrix(const cr_value *y, cr_matstruct s, const double *want, size_t n)
{
    assert_int_equal(y->kind, CR_KIND_ARRAY);
    assert_int_equal(y->u.arr->structure, s);
    assert_int_equal(y->u.arr->shape[0], n);
    assert_int_equal(y->u.arr->shape[1], n);
    for (size_t k = 0; k < n * n; k++)
        ASSERT_DBL(creal(cr_array_get_linear(y->u.arr, k)), want[k]);
}

static void test_constructors(void **state)
{
    fixture *fx = *state;
    double dl[2] = {1, 2}, d[3] = {4, 5, 6}, du[2] = {-1, -2};
    cr_array DL = cr_array_vector(dl, 2), D = cr_array_vector(d, 3), DU = cr_array_vector(du, 2);
    cr_value a3[3] = {cr_value_array(&DL), cr_value_array(&D), cr_value_array(&DU)};
    cr_value y = call1(fx, &cr_fn_tridiagonal, a3, 3);
    static const double tri[9] = {4, -1, 0, 1, 5, -2, 0, 2, 6};
    expect_matrix(&y, CR_MAT_TRIDIAGONAL, tri, 3);

    cr_value a2[2] = {cr_value_array(&D), cr_value_array(&DL)};
    y = call1(fx, &cr_fn_symtridiagonal, a2, 2);
    static const double sym[9] = {4, 1, 0, 1, 5, 2, 0, 2, 6};
    expect_matrix(&y, CR_MAT_SYMTRIDIAGONAL, sym, 3);

    cr_value b3[3] = {cr_value_array(&D), cr_value_array(&DU), cr_value_i64('l')};
    y = call1(fx, &cr_fn_bidiagonal, b3, 3);
    static const double bil[9] = {4, 0, 0, -1, 5, 0, 0, -2, 6};
    expect_matrix(&y, CR_MAT_BIDIAG_LOWER, bil, 3);
    b3[2] = cr_value_i64('U');
    y = call1(fx, &cr_fn_bidiagonal, b3, 3);
    static const double biu[9] = {4, -1, 0, 0, 5, -2, 0, 0, 6};
    expect_matrix(&y, CR_MAT_BIDIAG_UPPER, biu, 3);

    double a[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array A = cr_array_matrix(a, 3, 3);
    cr_value x = cr_value_array(&A);
    static const double uu[9] = {1, 2, 3, 0, 1, 6, 0, 0, 1}, ul[9] = {1, 0, 0, 4, 1, 0, 7, 8, 1};
    static const double up[9] = {1, 2, 3, 0, 5, 6, 0, 0, 9}, lo[9] = {1, 0, 0, 4, 5, 0, 7, 8, 9};
    y = call1(fx, &cr_fn_unit_upper_triangular, &x, 1);
    expect_matrix(&y, CR_MAT_UNIT_UPPER, uu, 3);
    y = call1(fx, &cr_fn_unit_lower_triangular, &x, 1);
    expect_matrix(&y, CR_MAT_UNIT_LOWER, ul, 3);
    y = call1(fx, &cr_fn_upper_triangular, &x, 1);
    expect_matrix(&y, CR_MAT_UPPER, up, 3);
    y = call1(fx, &cr_fn_lower_triangular, &x, 1);
    expect_matrix(&y, CR_MAT_LOWER, lo, 3);
    cr_value s2[2] = {x, cr_value_i64('L')};
    y = call1(fx, &cr_fn_symmetric, s2, 2);
    static const double sl[9] = {1, 4, 7, 4, 5, 8, 7, 8, 9};
    expect_matrix(&y, CR_MAT_SYMMETRIC_LOWER, sl, 3);
    s2[1] = cr_value_i64('U');
    y = call1(fx, &cr_fn_symmetric, s2, 2);
    static const double su[9] = {1, 2, 3, 2, 5, 6, 3, 6, 9};
    expect_matrix(&y, CR_MAT_SYMMETRIC, su, 3);

    /* Matrix of a structured matrix: an untagged dense copy. */
    A.structure = CR_MAT_UNIT_LOWER;
    y = call1(fx, &cr_fn_matrix, &x, 1);
    expect_matrix(&y, CR_MAT_DENSE, ul, 3);
    assert_ptr_not_equal(y.u.arr->data, a);
}

static void test_constructor_errors(void **state)
{
    fixture *fx = *state;
    double d[3] = {4, 5, 6}, e[3] = {1, 2, 3};
    cr_array D = cr_array_vector(d, 3), E = cr_array_vector(e, 3);
    cr_value a3[3] = {cr_value_array(&E), cr_value_array(&D), cr_value_array(&E)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_tridiagonal, a3, 3, &y), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "Tridiagonal");
    cr_value b3[3] = {cr_value_array(&D), cr_value_array(&D), cr_value_i64('X')};
    E.shape[0] = 2;
    b3[1] = cr_value_array(&E);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_bidiagonal, b3, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "UL");
    cr_array R = cr_array_matrix(d, 1, 3);
    cr_value r = cr_value_array(&R);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_unit_upper_triangular, &r, 1, &y),
                     CR_ESHAPE);
    cr_value s2[2] = {r, cr_value_i64('Q')};
    R = cr_array_matrix(d, 1, 1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_hermitian, s2, 2, &y), CR_EINVAL);
}

/* ---- Projection and tangent algebra --------------------------------------------------------- */

static void test_projection(void **state)
{
    fixture *fx = *state;
    double g[16];
    for (size_t k = 0; k < 16; k++)
        g[k] = 1.0 + (double)k * (k % 2 ? 1.5 : -0.5);
    double p[16] = {0};
    cr_array G = cr_array_matrix(g, 4, 4), P = cr_array_matrix(p, 4, 4);
    for (size_t t = 0; t < NSTRUCTS; t++) {
        cr_matstruct s = k_structs[t];
        P.structure = (uint8_t)s;
        cr_value pv = cr_value_array(&P);
        cr_tangent out;
        assert_int_equal(cr_project_tangent(fx->arena, &pv, cr_tangent_array(&G), &out), CR_OK);
        assert_int_equal(out.tag, CR_TAN_ARRAY);
        cr_matstruct want_tag = s == CR_MAT_UNIT_UPPER   ? CR_MAT_UPPER
                                : s == CR_MAT_UNIT_LOWER ? CR_MAT_LOWER
                                                         : s;
        assert_int_equal(out.u.arr->structure, want_tag);
        for (size_t i = 0; i < 4; i++)
            for (size_t j = 0; j < 4; j++) {
                double a = g[i * 4 + j], b = g[j * 4 + i], want;
                switch (s) {
                case CR_MAT_TRIDIAGONAL:
                    want = (i == j || i == j + 1 || j == i + 1) ? a : 0;
                    break;
                case CR_MAT_SYMTRIDIAGONAL:
                    want = i == j ? a : (i == j + 1 || j == i + 1) ? (a + b) / 2 : 0;
                    break;
                case CR_MAT_BIDIAG_UPPER:
                    want = i == j || j == i + 1 ? a : 0;
                    break;
                case CR_MAT_BIDIAG_LOWER:
                    want = i == j || i == j + 1 ? a : 0;
                    break;
                case CR_MAT_UNIT_UPPER:
                    want = i < j ? a : 0;
                    break;
                case CR_MAT_UNIT_LOWER:
                    want = i > j ? a : 0;
                    break;
                default: /* Symmetric, Hermitian (real): the symmetric part */
                    want = (a + b) / 2;
                    break;
                }
                ASSERT_DBL(creal(cr_array_get_linear(out.u.arr, i * 4 + j)), want);
            }
        /* The projection fits and projecting again returns it unchanged. */
        cr_project *pr;
        assert_int_equal(cr_project_new(fx->arena, &pv, &pr), CR_OK);
        assert_true(cr_project_fits(pr, out));
        cr_tangent again;
        assert_int_equal(cr_project_apply(fx->arena, pr, out, &again), CR_OK);
        assert_ptr_equal(again.u.arr, out.u.arr);
        /* A dense tangent does not fit a structured primal. */
        assert_false(cr_project_fits(pr, cr_tangent_array(&G)));
    }
    /* An Upper tangent with a nonzero diagonal does not fit a unit triangle. */
    P.structure = CR_MAT_UNIT_UPPER;
    G.structure = CR_MAT_UPPER;
    cr_value pv = cr_value_array(&P);
    cr_project *pr;
    assert_int_equal(cr_project_new(fx->arena, &pv, &pr), CR_OK);
    assert_false(cr_project_fits(pr, cr_tangent_array(&G)));
    cr_tangent out;
    assert_int_equal(cr_project_apply(fx->arena, pr, cr_tangent_array(&G), &out), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(out.u.arr, 0)), 0.0);
    ASSERT_DBL(creal(cr_array_get_linear(out.u.arr, 1)), g[1]);
    /* A unit-tagged tangent of a dense primal is projected to its dense value (diagonal 1). */
    double q[16] = {0};
    cr_array Q = cr_array_matrix(q, 4, 4);
    cr_value qv = cr_value_array(&Q);
    cr_project *pq;
    assert_int_equal(cr_project_new(fx->arena, &qv, &pq), CR_OK);
    G.structure = CR_MAT_UNIT_LOWER;
    assert_false(cr_project_fits(pq, cr_tangent_array(&G)));
    assert_int_equal(cr_project_apply(fx->arena, pq, cr_tangent_array(&G), &out), CR_OK);
    assert_int_equal(out.u.arr->structure, CR_MAT_DENSE);
    for (size_t k = 0; k < 16; k++)
        ASSERT_DBL(creal(cr_array_get_linear(out.u.arr, k)), k % 5 == 0      ? 1.0
                                                             : k / 4 > k % 4 ? g[k]
                                                                             : 0.0);
    G.structure = CR_MAT_TRIDIAGONAL; /* other structured tangents of a dense primal stay */
    assert_true(cr_project_fits(pq, cr_tangent_array(&G)));
    /* The zero tangent of a unit triangle is an Upper array. */
    cr_tangent z;
    assert_int_equal(cr_tangent_zero_of(fx->arena, &pv, &z), CR_OK);
    assert_int_equal(z.u.arr->structure, CR_MAT_UPPER);
    ASSERT_DBL(creal(cr_array_get_linear(z.u.arr, 0)), 0.0);
}

static void test_tangent_algebra(void **state)
{
    fixture *fx = *state;
    double a[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, b[9] = {9, 8, 7, 6, 5, 4, 3, 2, 1};
    for (size_t t = 0; t < NSTRUCTS; t++) {
        cr_array A = cr_array_matrix(a, 3, 3), B = cr_array_matrix(b, 3, 3);
        A.structure = B.structure = (uint8_t)k_structs[t];
        cr_tangent s, m, d;
        assert_int_equal(cr_tangent_add(fx->arena, cr_tangent_array(&A), cr_tangent_array(&B), &s),
                         CR_OK);
        assert_int_equal(cr_tangent_scale(fx->arena, 3.0, cr_tangent_array(&A), &m), CR_OK);
        assert_int_equal(cr_tangent_dot(fx->arena, cr_tangent_array(&A), cr_tangent_array(&B), &d),
                         CR_OK);
        double dot = 0;
        for (size_t k = 0; k < 9; k++) {
            double x = creal(cr_array_get_linear(&A, k)), y = creal(cr_array_get_linear(&B, k));
            ASSERT_DBL(creal(cr_array_get_linear(s.u.arr, k)), x + y);
            ASSERT_DBL(creal(cr_array_get_linear(m.u.arr, k)), 3.0 * x);
            dot += x * y;
        }
        ASSERT_DBL(d.u.f64, dot);
        /* add!! into a writable copy of the same structure */
        cr_array *acc;
        assert_int_equal(cr_array_copy(fx->arena, &A, &acc), CR_OK);
        cr_tangent r;
        assert_int_equal(
            cr_tangent_accum(fx->arena, cr_tangent_array(acc), cr_tangent_array(&B), &r), CR_OK);
        for (size_t k = 0; k < 9; k++)
            ASSERT_DBL(creal(cr_array_get_linear(r.u.arr, k)),
                       creal(cr_array_get_linear(&A, k)) + creal(cr_array_get_linear(&B, k)));
    }
}

/* ---- Generic rules with structured arguments --------------------------------------------------
 */

/* A well-conditioned 3 x 3 of structure s (diagonal 3 to 4, off-diagonal below 1 in modulus),
 * f64 or c128, and its dense value written out here. */
static cr_array *structured(fixture *fx, cr_matstruct s, bool cplx, unsigned seed, double *dense,
                            cr_complex *zdense)
{
    size_t shape[2] = {3, 3};
    cr_array *A;
    assert_int_equal(cr_array_new(fx->arena, cplx ? CR_DT_C128 : CR_DT_F64, 2, shape, &A), CR_OK);
    cr_complex st[9];
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            double u = sin(1.3 * (double)(i * 3 + j) + (double)seed);
            cr_complex v = i == j ? 3.0 + fabs(u) : 0.8 * u;
            if (cplx)
                v += CMPLX(0.0, 0.4) * cos(2.1 * (double)(i * 3 + j) + (double)seed);
            st[i * 3 + j] = v;
            if (cplx)
                ((cr_complex *)A->data)[i * 3 + j] = v;
            else
                ((double *)A->data)[i * 3 + j] = creal(v);
        }
    A->structure = (uint8_t)s;
    for (size_t k = 0; k < 9; k++) {
        cr_complex v = logical(s, st, 3, k / 3, k % 3);
        if (dense != NULL)
            dense[k] = creal(v);
        if (zdense != NULL)
            zdense[k] = cplx ? v : creal(v);
    }
    return A;
}

/* f(args) with args[ia] structured, and f with the dense equivalent there: equal values. */
static void same_as_dense(fixture *fx, const cr_value *f, cr_value *args, size_t nargs, size_t ia,
                          cr_array *D, const char *what)
{
    cr_value ys = call1(fx, f, args, nargs), keep = args[ia];
    args[ia] = cr_value_array(D);
    cr_value yd = call1(fx, f, args, nargs);
    args[ia] = keep;
    if (ys.kind == CR_KIND_ARRAY) {
        size_t n = cr_array_numel(ys.u.arr);
        assert_int_equal(n, cr_array_numel(yd.u.arr));
        for (size_t k = 0; k < n; k++) {
            cr_complex a = cr_array_get_linear(ys.u.arr, k), b = cr_array_get_linear(yd.u.arr, k);
            if (!(cabs(a - b) <= 1e-12 * (1 + cabs(b)))) {
                print_error("%s: element %zu differs from the dense equivalent\n", what, k);
                fail();
            }
        }
    } else {
        cr_complex a = ys.kind == CR_KIND_C128 ? ys.u.c128 : ys.u.f64;
        cr_complex b = yd.kind == CR_KIND_C128 ? yd.u.c128 : yd.u.f64;
        if (!(cabs(a - b) <= 1e-12 * (1 + cabs(b)))) {
            print_error("%s: %g differs from the dense equivalent %g\n", what, creal(a), creal(b));
            fail();
        }
    }
}

static void test_generic_rules(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    double bm[6] = {0.5, -1, 2, 0.25, -0.75, 1.5}, bv[3] = {1, -2, 0.5};
    cr_array B = cr_array_matrix(bm, 3, 2), Bt = cr_array_matrix(bm, 2, 3),
             v = cr_array_vector(bv, 3);
    for (size_t t = 0; t < NSTRUCTS; t++)
        for (int c = 0; c < 2; c++) {
            cr_matstruct s = k_structs[t];
            bool cplx = c == 1;
            if (s == CR_MAT_HERMITIAN_LOWER && !cplx)
                continue;
            cr_complex zd[9];
            cr_array *A = structured(fx, s, cplx, (unsigned)t, NULL, zd);
            size_t shape[2] = {3, 3};
            cr_array *D;
            assert_int_equal(cr_array_new(fx->arena, CR_DT_C128, 2, shape, &D), CR_OK);
            memcpy(D->data, zd, sizeof zd);
            if (!cplx) {
                cr_array *Dr;
                assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 2, shape, &Dr), CR_OK);
                for (size_t k = 0; k < 9; k++)
                    ((double *)Dr->data)[k] = creal(zd[k]);
                D = Dr;
            }
            char what[96];
            snprintf(what, sizeof what, "%s %s", cr_matstruct_name(s), cplx ? "c128" : "f64");
            cr_value a = cr_value_array(A);
            cr_value mm[2] = {a, cr_value_array(&B)}, mv[2] = {a, cr_value_array(&v)};
            cr_value lm[2] = {cr_value_array(&Bt), a}, vm[2] = {cr_value_array(&v), a};
            cr_value one[1] = {a};
            cr_value pm[3] = {cr_fn_add, a, cr_value_array(D)};
            cr_value sm[3] = {cr_fn_sub, cr_value_array(D), a};
            check_point(fx, &cr_fn_matmul, mm, 2, what);
            check_point(fx, &cr_fn_matmul, mv, 2, what);
            check_point(fx, &cr_fn_matmul, lm, 2, what);
            check_point(fx, &cr_fn_matmul, vm, 2, what);
            check_point(fx, &cr_fn_solve, mm, 2, what);
            check_point(fx, &cr_fn_solve, mv, 2, what);
            check_point(fx, &cr_fn_det, one, 1, what);
            check_point(fx, &cr_fn_logdet, one, 1, what);
            check_point(fx, &cr_fn_logabsdet, one, 1, what);
            check_point(fx, &cr_fn_matinv, one, 1, what);
            check_point(fx, &cr_fn_tr, one, 1, what);
            if (s == CR_MAT_SYMMETRIC_LOWER || s == CR_MAT_HERMITIAN_LOWER) {
                /* positive definite (diagonally dominant): the upper triangle read */
                check_point(fx, &cr_fn_cholesky, one, 1, what);
                check_point(fx, &cr_fn_eigvals, one, 1, what);
                same_as_dense(fx, &cr_fn_eigvals, one, 1, 0, D, what);
                same_as_dense(fx, &cr_fn_cholesky, one, 1, 0, D, what);
            }
            check_point(fx, &cr_fn_transpose, one, 1, what);
            check_point(fx, &cr_fn_adjoint, one, 1, what);
            check_point(fx, &cr_fn_broadcast, pm, 3, what);
            check_point(fx, &cr_fn_broadcast, sm, 3, what);
            same_as_dense(fx, &cr_fn_matmul, mm, 2, 0, D, what);
            same_as_dense(fx, &cr_fn_matmul, lm, 2, 1, D, what);
            same_as_dense(fx, &cr_fn_solve, mm, 2, 0, D, what);
            same_as_dense(fx, &cr_fn_solve, mv, 2, 0, D, what);
            same_as_dense(fx, &cr_fn_det, one, 1, 0, D, what);
            same_as_dense(fx, &cr_fn_logdet, one, 1, 0, D, what);
            same_as_dense(fx, &cr_fn_tr, one, 1, 0, D, what);
            same_as_dense(fx, &cr_fn_matinv, one, 1, 0, D, what);
            same_as_dense(fx, &cr_fn_transpose, one, 1, 0, D, what);
            same_as_dense(fx, &cr_fn_adjoint, one, 1, 0, D, what);
            same_as_dense(fx, &cr_fn_broadcast, pm, 3, 1, D, what);
        }
}

/* solve with a singular tridiagonal matrix: CR_EDOMAIN, never a wrong answer. */
static void test_singular_solve(void **state)
{
    fixture *fx = *state;
    double a[9] = {1, 1, 0, 1, 1, 0, 0, 0, 1}, b[3] = {1, 2, 3};
    cr_array A = cr_array_matrix(a, 3, 3), bv = cr_array_vector(b, 3);
    A.structure = CR_MAT_TRIDIAGONAL;
    cr_value args[2] = {cr_value_array(&A), cr_value_array(&bv)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_solve, args, 2, &y), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(fx->ctx), "singular");
    /* A 1 x 1 and a large, diagonally dominant tridiagonal system against its residual. */
    enum { N = 200 };
    double *m = calloc(N * N, sizeof *m), x[N];
    assert_non_null(m);
    for (size_t i = 0; i < N; i++) {
        m[i * N + i] = 4.0 + sin((double)i);
        if (i + 1 < N) {
            m[i * N + i + 1] = cos((double)i);
            m[(i + 1) * N + i] = -0.5;
        }
        x[i] = sin(0.1 * (double)i);
    }
    cr_array M = cr_array_matrix(m, N, N), X = cr_array_vector(x, N);
    M.structure = CR_MAT_TRIDIAGONAL;
    cr_value sa[2] = {cr_value_array(&M), cr_value_array(&X)};
    y = call1(fx, &cr_fn_solve, sa, 2);
    for (size_t i = 0; i < N; i++) {
        double r = -x[i];
        for (size_t j = i > 0 ? i - 1 : 0; j <= i + 1 && j < N; j++)
            r += m[i * N + j] * creal(cr_array_get_linear(y.u.arr, j));
        assert_true(fabs(r) < 1e-13);
    }
    free(m);
}

/* ---- Second order ------------------------------------------------------------------------------
 */

/* d of 4, dl and du of 3:
 *   sum(square.(Tridiagonal(dl, d, du) d)) + sum(sin.(Tridiagonal(dl, d, du) w))
 *   + sum(sin.(SymTridiagonal(d, dl) d)) + sum(square.(Bidiagonal(d, du, 'L') \ w)) */
static cr_var band_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static double w4[4] = {0.5, -1.0, 1.5, 0.25};
    static cr_array W4;
    W4 = cr_array_vector(w4, 4);
    cr_targ targs[3] = {cr_targ_arr(X[1]), cr_targ_arr(X[0]), cr_targ_arr(X[2])};
    cr_avar T = cr_tape_acall_a(t, &cr_fn_tridiagonal, targs, 3);
    cr_var a = sum_sq(t, cr_av_matmul(t, T, X[0]));
    cr_var b = sum_sin(t, cr_av_matmul(t, T, cr_av_const(&W4)));
    cr_avar S = call_a(t, &cr_fn_symtridiagonal, cr_targ_arr(X[0]), cr_targ_arr(X[1]), 2);
    cr_var c = sum_sin(t, cr_av_matmul(t, S, X[0]));
    cr_targ bargs[3] = {cr_targ_arr(X[0]), cr_targ_arr(X[2]), i64('L')};
    cr_avar L = cr_tape_acall_a(t, &cr_fn_bidiagonal, bargs, 3);
    cr_targ sargs[2] = {cr_targ_arr(L), cr_targ_arr(cr_av_const(&W4))};
    cr_var d = sum_sq(t, cr_tape_acall_a(t, &cr_fn_solve, sargs, 2));
    return cr_add(t, cr_add(t, a, b), cr_add(t, c, d));
}

/* A of 3 x 3, v of 3:
 *   sum(square.(UnitUpperTriangular(A) v)) + sum(sin.(Symmetric(A, 'L') v))
 *   + sum(square.(Matrix(UnitLowerTriangular(A)) A)) + sum(sin.(LowerTriangular(A) v)) */
static cr_var wrap_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ A = cr_targ_arr(X[0]);
    cr_avar U = call_a(t, &cr_fn_unit_upper_triangular, A, A, 1);
    cr_avar S = call_a(t, &cr_fn_symmetric, A, i64('L'), 2);
    cr_avar L = call_a(t, &cr_fn_unit_lower_triangular, A, A, 1);
    cr_avar M = call_a(t, &cr_fn_matrix, cr_targ_arr(L), A, 1);
    cr_avar W = call_a(t, &cr_fn_lower_triangular, A, A, 1);
    cr_var a = sum_sq(t, cr_av_matmul(t, U, X[1]));
    cr_var b = sum_sin(t, cr_av_matmul(t, S, X[1]));
    cr_var c = sum_sq(t, cr_av_matmul(t, M, X[0]));
    cr_var d = sum_sin(t, cr_av_matmul(t, W, X[1]));
    return cr_add(t, cr_add(t, a, b), cr_add(t, c, d));
}

static void test_hvp(void **state)
{
    fixture *f = *state;
    prob p = {.f = band_p, .ns = 0, .na = 3, .ndim = {1, 1, 1}, .shape = {{4}, {3}, {3}}};
    prob q = {.f = wrap_p, .ns = 0, .na = 2, .ndim = {2, 1}, .shape = {{3, 3}, {3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[12];
        point(10, seed, 0.8, z);
        for (size_t i = 0; i < 4; i++)
            z[i] += 2.5; /* a well-conditioned Bidiagonal solve */
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        check_jvp(f->ctx, &p, z, 1e-6, 2);
        point(12, seed, 1.1, z);
        check_hvp_dirs(f->ctx, &q, z, 1e-6, 4);
        check_jvp(f->ctx, &q, z, 1e-6, 2);
    }
}

/* The constructors, the views, Matrix and solves with a structured matrix, real and complex,
 * in arenas too small for them: CR_EARENA at every size short of room, and the rule's results
 * once it fits. */
static void test_arena_sweep(void **state)
{
    fixture *fx = *state;
    double d[4] = {4, 3.5, 5, 4.5}, e[3] = {0.5, -1, 0.25}, f3[3] = {1, 0.75, -0.5};
    double b[4] = {1, -2, 0.5, 3}, a[16], cd[8], ce[6], cf[6], cb[8];
    for (int i = 0; i < 16; i++)
        a[i] = i % 5 == 0 ? 4 + i / 5 : 0.125 * (i % 7) - 0.25;
    for (int i = 0; i < 4; i++) {
        cd[2 * i] = d[i], cd[2 * i + 1] = 0.25 * i;
        cb[2 * i] = b[i], cb[2 * i + 1] = -0.5;
    }
    for (int i = 0; i < 3; i++) {
        ce[2 * i] = e[i], ce[2 * i + 1] = 0.5;
        cf[2 * i] = f3[i], cf[2 * i + 1] = -0.25 * i;
    }
    cr_array D[2] = {cr_array_vector(d, 4), cr_array_vector(cd, 4)};
    cr_array E[2] = {cr_array_vector(e, 3), cr_array_vector(ce, 3)};
    cr_array F[2] = {cr_array_vector(f3, 3), cr_array_vector(cf, 3)};
    cr_array B[2] = {cr_array_vector(b, 4), cr_array_vector(cb, 4)};
    D[1].dtype = E[1].dtype = F[1].dtype = B[1].dtype = CR_DT_C128;
    cr_array A = cr_array_matrix(a, 4, 4);
    cr_value av = cr_value_array(&A);
    for (int c = 0; c < 2; c++) {
        cr_value tri[3] = {cr_value_array(&E[c]), cr_value_array(&D[c]), cr_value_array(&F[c])};
        cr_value st2[2] = {cr_value_array(&D[c]), cr_value_array(&E[c])};
        cr_value bi[3] = {st2[0], st2[1], cr_value_i64(c ? 'L' : 'U')};
        assert_arena_sweep_rules(fx, &cr_fn_tridiagonal, tri, 3);
        assert_arena_sweep_rules(fx, &cr_fn_symtridiagonal, st2, 2);
        assert_arena_sweep_rules(fx, &cr_fn_bidiagonal, bi, 3);
        cr_value T;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_tridiagonal, tri, 3, &T), CR_OK);
        assert_arena_sweep_rules(fx, &cr_fn_matrix, &T, 1);
        cr_value sv[2] = {T, cr_value_array(&B[c])};
        assert_arena_sweep_rules(fx, &cr_fn_solve, sv, 2);
    }
    const cr_value *views[] = {&cr_fn_upper_triangular, &cr_fn_lower_triangular,
                               &cr_fn_unit_upper_triangular, &cr_fn_unit_lower_triangular};
    for (size_t k = 0; k < sizeof views / sizeof views[0]; k++) {
        assert_arena_sweep_rules(fx, views[k], &av, 1);
        cr_value V;
        assert_int_equal(cr_function_call(fx->arena, views[k], &av, 1, &V), CR_OK);
        assert_arena_sweep_rules(fx, &cr_fn_matrix, &V, 1);
        cr_value sv[2] = {V, cr_value_array(&B[0])};
        assert_arena_sweep_rules(fx, &cr_fn_solve, sv, 2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_logical_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_constructors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_constructor_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_projection, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tangent_algebra, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_generic_rules, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_singular_solve, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hvp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_sweep, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
