/*
 * Tests of the sparse-matrix rules (rules_sparse.h, src/rulesets/linalg/sparse.c): every
 * registered rule through the rule tester at its sampler's points (finite differences, the
 * dot-product test); values against matrices written out by hand (Julia's SparseArrays
 * semantics) and products against a dense loop; the pattern-keeping cotangents; det at
 * singular, 1 x 1 and empty matrices; and the errors for malformed matrices and arguments.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/rules_sparse.h>

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

static cr_array i64v(int64_t *p, size_t n)
{
    cr_array a;
    assert_int_equal(cr_array_view_init(&a, p, CR_DT_I64, 1, &n, NULL), CR_OK);
    return a;
}

/* A sparse matrix over caller storage. */
static cr_sparse make_sparse(int64_t m, int64_t n, int64_t *colptr, int64_t *rowval, double *val,
                             size_t nnz)
{
    cr_sparse S;
    S.m = m;
    S.n = n;
    S.colptr = i64v(colptr, (size_t)n + 1);
    S.rowval = i64v(rowval, nnz);
    S.nzval = cr_array_vector(val, nnz);
    return S;
}

static const cr_sparse *sparse_of(const cr_value *v)
{
    assert_int_equal(v->kind, CR_KIND_STRUCT);
    assert_ptr_equal(v->u.obj.type, &cr_sparse_type);
    return v->u.obj.ptr;
}

static int64_t i64_at(const cr_array *a, size_t i)
{
    return ((const int64_t *)a->data)[i * (size_t)a->strides[0]];
}

static const char *const k_fns[] = {"sparse",       "spdiagm",       "findnz",
                                    "sparse_dense", "sparse_mul",    "sparse_rmul",
                                    "sparse_det",   "sparse_logdet", "sparse_logabsdet"};
#define NFNS (sizeof k_fns / sizeof k_fns[0])

/* ---- Every rule through the rule tester ---------------------------------------------------- */

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
        if (k == NFNS)
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

/* ---- Construction ---------------------------------------------------------------------------- */

static void test_sparse_values(void **state)
{
    fixture *fx = *state;
    /* (0,0) twice, (2,1), (1,0), and a stored zero at (0,2) */
    int64_t Ix[5] = {0, 2, 1, 0, 0}, J[5] = {0, 1, 0, 0, 2};
    double V[5] = {1, 2, 3, 4, 0};
    cr_array Ia = i64v(Ix, 5), Ja = i64v(J, 5), Va = cr_array_vector(V, 5);
    cr_value args[5] = {cr_value_array(&Ia), cr_value_array(&Ja), cr_value_array(&Va),
                        cr_value_i64(4), cr_value_i64(3)},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse, args, 5, &y), CR_OK);
    const cr_sparse *S = sparse_of(&y);
    assert_int_equal(S->m, 4);
    assert_int_equal(S->n, 3);
    /* Julia: sparse(I .+ 1, J .+ 1, V, 4, 3) has colptr 1,3,4,5, rowval 1,2,3,1 */
    const int64_t cp[4] = {0, 2, 3, 4}, rv[4] = {0, 1, 2, 0};
    const double nz[4] = {5, 3, 2, 0};
    for (size_t j = 0; j < 4; j++)
        assert_int_equal(i64_at(&S->colptr, j), cp[j]);
    assert_int_equal(S->nzval.shape[0], 4);
    for (size_t p = 0; p < 4; p++) {
        assert_int_equal(i64_at(&S->rowval, p), rv[p]);
        ASSERT_DBL(creal(cr_array_get_linear(&S->nzval, p)), nz[p]);
    }
    /* the default size: max index + 1 */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse, args, 3, &y), CR_OK);
    assert_int_equal(sparse_of(&y)->m, 3);
    assert_int_equal(sparse_of(&y)->n, 3);
    /* V̄[k] reads the stored value of its position: the repeated (0,0) gets S̄(0,0) twice */
    check_point(fx, &cr_fn_sparse, args, 5, "sparse at a repeated position");
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sparse, args, 5, &y, &pb), CR_OK);
    double g[4] = {10, 20, 30, 40};
    cr_array ga = cr_array_vector(g, 4);
    cr_tangent nzt = cr_tangent_array(&ga), dy, dx[6];
    static const char *const names[1] = {"nzval"};
    assert_int_equal(cr_tangent_struct(fx->arena, &cr_sparse_type, names, &nzt, 1, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 6), CR_OK);
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(dx[3], &v), CR_OK);
    const double want[5] = {10, 30, 20, 10, 40};
    for (size_t k = 0; k < 5; k++)
        ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, k)), want[k]);
    /* a dense 4 x 3 cotangent is read at the stored positions (ProjectTo) */
    double gd[12] = {10, 0, 40, 20, 0, 0, 0, 30, 0, 0, 0, 0};
    cr_array GD = cr_array_matrix(gd, 4, 3);
    cr_tangent dyd = cr_tangent_array(&GD);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dyd, dx, 6), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[3], &v), CR_OK);
    for (size_t k = 0; k < 5; k++)
        ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, k)), want[k]);
    /* a cotangent of another size is refused */
    cr_array GW = cr_array_matrix(gd, 2, 3);
    dyd = cr_tangent_array(&GW);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dyd, dx, 6), CR_ESHAPE);
    /* an empty matrix */
    cr_array E = i64v(Ix, 0), Ev = cr_array_vector(V, 0);
    cr_value eargs[5] = {cr_value_array(&E), cr_value_array(&E), cr_value_array(&Ev),
                         cr_value_i64(0), cr_value_i64(0)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse, eargs, 5, &y), CR_OK);
    assert_int_equal(sparse_of(&y)->nzval.shape[0], 0);
    check_point(fx, &cr_fn_sparse, eargs, 5, "sparse of nothing");
}

/* sparse(A) of a dense matrix: its nonzeros stored in column order; the cotangent of a zero
 * (not stored) is zero, as ProjectTo of the sparse result makes it */
static void test_sparse_of_dense(void **state)
{
    fixture *fx = *state;
    double a[6] = {0, 2, 0, 3, 0, -1};
    cr_array A = cr_array_matrix(a, 2, 3);
    cr_value arg = cr_value_array(&A), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse, &arg, 1, &y), CR_OK);
    const cr_sparse *S = sparse_of(&y);
    assert_int_equal(S->m, 2);
    assert_int_equal(S->n, 3);
    /* columns: 0 holds (1,0) = 3; 1 holds (0,1) = 2; 2 holds (1,2) = -1 */
    const int64_t cp[4] = {0, 1, 2, 3}, rv[3] = {1, 0, 1};
    const double nz[3] = {3, 2, -1};
    for (size_t j = 0; j < 4; j++)
        assert_int_equal(i64_at(&S->colptr, j), cp[j]);
    for (size_t p = 0; p < 3; p++) {
        assert_int_equal(i64_at(&S->rowval, p), rv[p]);
        ASSERT_DBL(creal(cr_array_get_linear(&S->nzval, p)), nz[p]);
    }
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sparse, &arg, 1, &y, &pb), CR_OK);
    double g[3] = {10, 20, 30};
    cr_array G = cr_array_vector(g, 3);
    cr_tangent nzt = cr_tangent_array(&G), dy, dx[2], v;
    static const char *const names[1] = {"nzval"};
    assert_int_equal(cr_tangent_struct(fx->arena, &cr_sparse_type, names, &nzt, 1, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[1], &v), CR_OK);
    const double ga[6] = {0, 20, 0, 10, 0, 30};
    for (size_t k = 0; k < 6; k++)
        ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, k)), ga[k]);
    /* the rules at a matrix without zeros (a zero is a jump of the pattern) */
    double b[6] = {1, 2, -3, 0.5, 4, -1};
    cr_array B = cr_array_matrix(b, 2, 3);
    cr_value barg = cr_value_array(&B);
    check_point(fx, &cr_fn_sparse, &barg, 1, "sparse(A)");
    /* two arguments fit no form */
    cr_value two[2] = {barg, barg};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse, two, 2, &y), CR_EINVAL);
}

static void test_spdiagm_findnz(void **state)
{
    fixture *fx = *state;
    double v[2] = {1.5, -2};
    cr_array va = cr_array_vector(v, 2);
    cr_value args[2] = {cr_value_i64(-1), cr_value_array(&va)}, S, t;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_spdiagm, args, 2, &S), CR_OK);
    assert_int_equal(sparse_of(&S)->m, 3);
    assert_int_equal(sparse_of(&S)->n, 3);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_findnz, &S, 1, &t), CR_OK);
    cr_value Ix, J, V;
    assert_int_equal(cr_type_field_value(t.u.obj.type, t.u.obj.ptr, 0, &Ix), CR_OK);
    assert_int_equal(cr_type_field_value(t.u.obj.type, t.u.obj.ptr, 1, &J), CR_OK);
    assert_int_equal(cr_type_field_value(t.u.obj.type, t.u.obj.ptr, 2, &V), CR_OK);
    /* subdiagonal: (1,0) and (2,1) */
    assert_int_equal(i64_at(Ix.u.arr, 0), 1);
    assert_int_equal(i64_at(Ix.u.arr, 1), 2);
    assert_int_equal(i64_at(J.u.arr, 0), 0);
    assert_int_equal(i64_at(J.u.arr, 1), 1);
    ASSERT_DBL(creal(cr_array_get_linear(V.u.arr, 1)), -2);
    /* the dense matrix */
    cr_value D;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_dense, &S, 1, &D), CR_OK);
    const double dense[9] = {0, 0, 0, 1.5, 0, 0, 0, -2, 0};
    for (size_t i = 0; i < 9; i++)
        ASSERT_DBL(creal(cr_array_get_linear(D.u.arr, i)), dense[i]);
    check_point(fx, &cr_fn_spdiagm, args, 2, "spdiagm(-1, v)");
    check_point(fx, &cr_fn_spdiagm, &args[1], 1, "spdiagm(v)");
    check_point(fx, &cr_fn_findnz, &S, 1, "findnz");
    check_point(fx, &cr_fn_sparse_dense, &S, 1, "sparse_dense");
    /* sparse_dense's pullback keeps the pattern: only the two stored entries */
    cr_pullback pb;
    cr_value y;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sparse_dense, &S, 1, &y, &pb), CR_OK);
    double g[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array G = cr_array_matrix(g, 3, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[2], nz;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[1], &dx[1]), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_STRUCT);
    assert_int_equal(cr_tangent_getfield(dx[1], "nzval", &nz), CR_OK);
    assert_int_equal(nz.tag, CR_TAN_ARRAY);
    assert_int_equal(cr_array_numel(nz.u.arr), 2);
    ASSERT_DBL(creal(cr_array_get_linear(nz.u.arr, 0)), 4);
    ASSERT_DBL(creal(cr_array_get_linear(nz.u.arr, 1)), 8);
}

/* ---- Products ------------------------------------------------------------------------------ */

static void test_mul(void **state)
{
    fixture *fx = *state;
    /* S = [1 0 2; 0 3 0] (2 x 3) */
    int64_t cp[4] = {0, 1, 2, 3}, rv[3] = {0, 1, 0};
    double sv[3] = {1, 3, 2};
    cr_sparse S = make_sparse(2, 3, cp, rv, sv, 3);
    const double Sd[2][3] = {{1, 0, 2}, {0, 3, 0}};
    double b[6] = {0.5, -1, 2, 0.25, 1, 3}, b2[4] = {1, 2, -1, 0.5};
    cr_array B = cr_array_matrix(b, 3, 2), Bt = cr_array_matrix(b2, 2, 2);
    cr_value args[3] = {cr_value_struct(&cr_sparse_type, &S), cr_value_array(&B),
                        cr_value_i64('N')},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_mul, args, 2, &y), CR_OK);
    for (size_t i = 0; i < 2; i++)
        for (size_t c = 0; c < 2; c++) {
            double w = 0;
            for (size_t j = 0; j < 3; j++)
                w += Sd[i][j] * b[j * 2 + c];
            ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i * 2 + c)), w);
        }
    check_point(fx, &cr_fn_sparse_mul, args, 3, "sparse_mul 'N'");
    /* Sᵀ B for a 2 x 2 B */
    args[1] = cr_value_array(&Bt);
    args[2] = cr_value_i64('T');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_mul, args, 3, &y), CR_OK);
    for (size_t j = 0; j < 3; j++)
        for (size_t c = 0; c < 2; c++) {
            double w = 0;
            for (size_t i = 0; i < 2; i++)
                w += Sd[i][j] * b2[i * 2 + c];
            ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, j * 2 + c)), w);
        }
    check_point(fx, &cr_fn_sparse_mul, args, 3, "sparse_mul 'T'");
    /* complex S, 'C', times a vector */
    cr_complex zv[3] = {CMPLX(1, 1), CMPLX(0, -2), CMPLX(0.5, 0.25)};
    cr_sparse Z = S;
    size_t three = 3;
    assert_int_equal(cr_array_view_init(&Z.nzval, zv, CR_DT_C128, 1, &three, NULL), CR_OK);
    double x[2] = {1, -2};
    cr_array X = cr_array_vector(x, 2);
    cr_value zargs[3] = {cr_value_struct(&cr_sparse_type, &Z), cr_value_array(&X),
                         cr_value_i64('c')};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_mul, zargs, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->ndim, 1);
    /* Sᴴ x: column j of S conjugated, dotted with x */
    cr_complex want[3] = {conj(zv[0]) * x[0], conj(zv[1]) * x[1], conj(zv[2]) * x[0]};
    for (size_t j = 0; j < 3; j++) {
        cr_complex g = cr_array_get_linear(y.u.arr, j);
        ASSERT_CPLX(g, creal(want[j]), cimag(want[j]));
    }
    check_point(fx, &cr_fn_sparse_mul, zargs, 3, "sparse_mul 'C' complex");

    /* the cotangent of a real f32 S against a complex B: real f32 values on S's pattern */
    float fv[3] = {1, 3, 2};
    cr_sparse F = S;
    assert_int_equal(cr_array_view_init(&F.nzval, fv, CR_DT_F32, 1, &three, NULL), CR_OK);
    cr_complex cb[3] = {CMPLX(1, 2), CMPLX(0, 1), CMPLX(-1, 0)};
    cr_array CB;
    assert_int_equal(cr_array_view_init(&CB, cb, CR_DT_C128, 1, &three, NULL), CR_OK);
    cr_value fargs[2] = {cr_value_struct(&cr_sparse_type, &F), cr_value_array(&CB)};
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sparse_mul, fargs, 2, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_C128);
    cr_complex gy[2] = {CMPLX(1, -1), CMPLX(2, 0.5)};
    cr_array GY;
    size_t two = 2;
    assert_int_equal(cr_array_view_init(&GY, gy, CR_DT_C128, 1, &two, NULL), CR_OK);
    cr_tangent dy = cr_tangent_array(&GY), dx[3], nz;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[1], &dx[1]), CR_OK);
    assert_int_equal(cr_tangent_getfield(dx[1], "nzval", &nz), CR_OK);
    assert_int_equal(nz.u.arr->dtype, CR_DT_F32);
    assert_int_equal(cr_array_numel(nz.u.arr), 3);
    /* S̄(i,j) = Re(ȳ_i conj(b_j)): (0,0), (1,1), (0,2) */
    ASSERT_CLOSE(creal(cr_array_get_linear(nz.u.arr, 0)), creal(gy[0] * conj(cb[0])), 1e-6);
    ASSERT_CLOSE(creal(cr_array_get_linear(nz.u.arr, 1)), creal(gy[1] * conj(cb[1])), 1e-6);
    ASSERT_CLOSE(creal(cr_array_get_linear(nz.u.arr, 2)), creal(gy[0] * conj(cb[2])), 1e-6);
}

/* B op(S) against a dense loop, and the rules at each op */
static void test_rmul(void **state)
{
    fixture *fx = *state;
    /* S = [1 0 2; 0 3 0] (2 x 3) */
    int64_t cp[4] = {0, 1, 2, 3}, rv[3] = {0, 1, 0};
    double sv[3] = {1, 3, 2};
    cr_sparse S = make_sparse(2, 3, cp, rv, sv, 3);
    const double Sd[2][3] = {{1, 0, 2}, {0, 3, 0}};
    double b[4] = {1, 2, -1, 0.5};
    cr_array B = cr_array_matrix(b, 2, 2);
    cr_value args[3] = {cr_value_array(&B), cr_value_struct(&cr_sparse_type, &S),
                        cr_value_i64('N')},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_rmul, args, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 2);
    assert_int_equal(y.u.arr->shape[1], 3);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i * 3 + j)),
                       b[i * 2] * Sd[0][j] + b[i * 2 + 1] * Sd[1][j]);
    check_point(fx, &cr_fn_sparse_rmul, args, 3, "sparse_rmul 'N'");
    /* a row vector times Sᵀ */
    double x[3] = {1, -2, 0.5};
    cr_array X = cr_array_vector(x, 3);
    args[0] = cr_value_array(&X);
    args[2] = cr_value_i64('T');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_rmul, args, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->ndim, 1);
    for (size_t i = 0; i < 2; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, i)),
                   x[0] * Sd[i][0] + x[1] * Sd[i][1] + x[2] * Sd[i][2]);
    check_point(fx, &cr_fn_sparse_rmul, args, 3, "sparse_rmul 'T' vector");
    /* complex S, 'C' */
    cr_complex zv[3] = {CMPLX(1, 1), CMPLX(0, -2), CMPLX(0.5, 0.25)};
    cr_sparse Z = S;
    size_t three = 3;
    assert_int_equal(cr_array_view_init(&Z.nzval, zv, CR_DT_C128, 1, &three, NULL), CR_OK);
    args[1] = cr_value_struct(&cr_sparse_type, &Z);
    args[2] = cr_value_i64('C');
    check_point(fx, &cr_fn_sparse_rmul, args, 3, "sparse_rmul 'C' complex");
    /* B's columns must match op(S)'s rows */
    args[2] = cr_value_i64('N');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_rmul, args, 3, &y), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "B has 3 columns, op(S) has 2 rows");
}

/* ---- Determinants ---------------------------------------------------------------------------- */

static void test_det(void **state)
{
    fixture *fx = *state;
#if !defined(CR_HAVE_LAPACKE)
    (void)fx;
    skip();
#else
    /* [2 1 0; 0 3 0; 1 0 4]: det = 2 (12) - 1 (0 - 0) = 24 */
    int64_t cp[4] = {0, 2, 4, 5}, rv[5] = {0, 2, 0, 1, 2};
    double sv[5] = {2, 1, 1, 3, 4};
    cr_sparse S = make_sparse(3, 3, cp, rv, sv, 5);
    cr_value a = cr_value_struct(&cr_sparse_type, &S), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_det, &a, 1, &y), CR_OK);
    ASSERT_CLOSE(y.u.f64, 24, 1e-12);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_logdet, &a, 1, &y), CR_OK);
    ASSERT_CLOSE(y.u.f64, log(24), 1e-12);
    check_point(fx, &cr_fn_sparse_det, &a, 1, "sparse_det");
    check_point(fx, &cr_fn_sparse_logdet, &a, 1, "sparse_logdet");
    check_point(fx, &cr_fn_sparse_logabsdet, &a, 1, "sparse_logabsdet");
    /* det's gradient is the cofactor matrix, read on the pattern */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sparse_det, &a, 1, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_f64(1), dx[2], nz;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[1], &dx[1]), CR_OK);
    assert_int_equal(cr_tangent_getfield(dx[1], "nzval", &nz), CR_OK);
    /* cofactors of A = [2 1 0; 0 3 0; 1 0 4] at the stored (0,0), (2,0), (0,1), (1,1), (2,2):
     * 12, 0, 0, 8, 6 */
    const double cof[5] = {12, 0, 0, 8, 6};
    for (size_t p = 0; p < 5; p++)
        ASSERT_CLOSE(creal(cr_array_get_linear(nz.u.arr, p)), cof[p], 1e-12);

    /* singular: [1 2; 2 4] (all stored); det = 0, gradient = cofactors [4 -2; -2 1] */
    int64_t cp2[3] = {0, 2, 4}, rv2[4] = {0, 1, 0, 1};
    double sv2[4] = {1, 2, 2, 4};
    cr_sparse T = make_sparse(2, 2, cp2, rv2, sv2, 4);
    cr_value b = cr_value_struct(&cr_sparse_type, &T);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sparse_det, &b, 1, &y, &pb), CR_OK);
    ASSERT_CLOSE(y.u.f64, 0, 1e-14);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[1], &dx[1]), CR_OK);
    assert_int_equal(cr_tangent_getfield(dx[1], "nzval", &nz), CR_OK);
    const double cof2[4] = {4, -2, -2, 1};
    for (size_t p = 0; p < 4; p++)
        ASSERT_CLOSE(creal(cr_array_get_linear(nz.u.arr, p)), cof2[p], 1e-12);
    check_point(fx, &cr_fn_sparse_det, &b, 1, "sparse_det at a singular matrix");
    /* logdet of a singular matrix: a domain error, as for dense matrices */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_logdet, &b, 1, &y), CR_EDOMAIN);

    /* 1 x 1 and 0 x 0 */
    int64_t cp1[2] = {0, 1}, rv1[1] = {0};
    double sv1[1] = {-3};
    cr_sparse O = make_sparse(1, 1, cp1, rv1, sv1, 1);
    cr_value o = cr_value_struct(&cr_sparse_type, &O);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_det, &o, 1, &y), CR_OK);
    ASSERT_DBL(y.u.f64, -3);
    check_point(fx, &cr_fn_sparse_det, &o, 1, "sparse_det 1 x 1");
    check_point(fx, &cr_fn_sparse_logabsdet, &o, 1, "sparse_logabsdet 1 x 1");
    int64_t cp0[1] = {0};
    cr_sparse E = make_sparse(0, 0, cp0, rv1, sv1, 0);
    cr_value e = cr_value_struct(&cr_sparse_type, &E);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_det, &e, 1, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 1);
#endif
}

/* ---- Errors -------------------------------------------------------------------------------- */

static void expect_err(fixture *fx, const cr_value *f, const cr_value *args, size_t n,
                       cr_status want, const char *msg)
{
    cr_value y;
    cr_status st = cr_function_call(fx->arena, f, args, n, &y);
    if (st != want) {
        print_error("%s: %s instead of %s (%s)\n", msg, cr_status_name(st), cr_status_name(want),
                    cr_ctx_errmsg(fx->ctx));
        fail();
    }
    assert_contains(cr_ctx_errmsg(fx->ctx), msg);
}

static void test_errors(void **state)
{
    fixture *fx = *state;
    int64_t cp[3] = {0, 2, 3}, rv[3] = {1, 0, 0};
    double sv[3] = {1, 2, 3};
    cr_sparse S = make_sparse(2, 2, cp, rv, sv, 3);
    cr_value a = cr_value_struct(&cr_sparse_type, &S);
    /* rows 1, 0 in column 0: not increasing */
    expect_err(fx, &cr_fn_sparse_dense, &a, 1, CR_EINVAL, "not strictly increasing");
    rv[0] = 0;
    rv[1] = 2;
    expect_err(fx, &cr_fn_findnz, &a, 1, CR_EINVAL, "row index 2 outside");
    rv[1] = 1;
    cp[2] = 2;
    expect_err(fx, &cr_fn_findnz, &a, 1, CR_EINVAL, "colptr must start at 0");
    cp[2] = 3;
    cp[1] = 4;
    expect_err(fx, &cr_fn_findnz, &a, 1, CR_EINVAL, "colptr decreases");
    cp[1] = 2;
    S.m = -1;
    expect_err(fx, &cr_fn_findnz, &a, 1, CR_EINVAL, "a sparse matrix of size -1 x 2");
    S.m = 2;
    cr_value d = cr_value_f64(1);
    expect_err(fx, &cr_fn_findnz, &d, 1, CR_EINVAL, "expected a cr_sparse matrix");
    /* products */
    double b[3] = {1, 2, 3};
    cr_array B = cr_array_vector(b, 3);
    cr_value margs[3] = {a, cr_value_array(&B), cr_value_i64('X')};
    expect_err(fx, &cr_fn_sparse_mul, margs, 2, CR_ESHAPE, "op(S) has 2 columns, B has 3 rows");
    expect_err(fx, &cr_fn_sparse_mul, margs, 3, CR_EINVAL, "trans must be");
#if defined(CR_HAVE_LAPACKE)
    S.m = 3;
    rv[2] = 2;
    expect_err(fx, &cr_fn_sparse_det, &a, 1, CR_ESHAPE, "is not square");
#endif
    /* construction */
    int64_t Ix[2] = {0, 5}, J[2] = {0, 1};
    cr_array Ia = i64v(Ix, 2), Ja = i64v(J, 2), Va = cr_array_vector(sv, 2), V3 = B;
    cr_value sargs[5] = {cr_value_array(&Ia), cr_value_array(&Ja), cr_value_array(&Va),
                         cr_value_i64(3), cr_value_i64(3)};
    expect_err(fx, &cr_fn_sparse, sargs, 5, CR_EINVAL, "entry 1 at (5, 1) outside the 3 x 3");
    expect_err(fx, &cr_fn_sparse, sargs, 4, CR_EINVAL, "give both sizes");
    sargs[2] = cr_value_array(&V3);
    expect_err(fx, &cr_fn_sparse, sargs, 5, CR_ESHAPE, "2 row and 2 column indices for 3 values");
    double v[2] = {1, 2};
    cr_array va = cr_array_vector(v, 2);
    cr_value dargs[2] = {cr_value_i64(INT64_MAX), cr_value_array(&va)};
    expect_err(fx, &cr_fn_spdiagm, dargs, 2, CR_EOVERFLOW, "spdiagm: diagonal");
    dargs[0] = cr_value_i64(INT64_MIN);
    expect_err(fx, &cr_fn_spdiagm, dargs, 2, CR_EOVERFLOW, "spdiagm: diagonal");
}

/* f(args) fails with want; the message names who once and contains msg. */
static void expect_err_once(fixture *fx, const cr_value *f, const cr_value *args, size_t n,
                            cr_status want, const char *who, const char *msg)
{
    expect_err(fx, f, args, n, want, msg);
    assert_error_once(cr_ctx_errmsg(fx->ctx), who, msg);
}

static void test_more_errors(void **state)
{
    fixture *fx = *state;
    int64_t cp[3] = {0, 1, 2}, rv[2] = {0, 1};
    double sv[2] = {1, 2};
    cr_sparse S = make_sparse(2, 2, cp, rv, sv, 2);
    cr_value a = cr_value_struct(&cr_sparse_type, &S);
    /* colptr of n entries */
    S.colptr = i64v(cp, 2);
    expect_err_once(fx, &cr_fn_findnz, &a, 1, CR_EINVAL, "findnz",
                    "colptr has 2 entries, 3 expected (n + 1)");
    S.colptr = i64v(cp, 3);
    /* integer nzval; nzval shorter than rowval */
    int64_t iv[2] = {1, 2};
    S.nzval = i64v(iv, 2);
    expect_err_once(fx, &cr_fn_sparse_dense, &a, 1, CR_EINVAL, "sparse_dense",
                    "nzval must be a 1-d f64, f32 or c128 array");
    S.nzval = cr_array_vector(sv, 1);
    expect_err_once(fx, &cr_fn_sparse_dense, &a, 1, CR_EINVAL, "sparse_dense",
                    "1 values (nzval) for 2 row indices (rowval)");
    S.nzval = cr_array_vector(sv, 2);
    /* a dense form too large to allocate: 2^62 x 4 */
    int64_t cpz[5] = {0, 0, 0, 0, 0};
    cr_sparse H = make_sparse(INT64_C(1) << 62, 4, cpz, rv, sv, 0);
    cr_value h = cr_value_struct(&cr_sparse_type, &H);
    expect_err_once(fx, &cr_fn_sparse_dense, &h, 1, CR_EOVERFLOW, "sparse_dense",
                    "a dense 4611686018427387904 x 4 matrix");

    /* sparse(A) of an integer matrix and of a 3-d array */
    int64_t k4[4] = {1, 0, 0, 1};
    size_t sh2[2] = {2, 2}, sh3[3] = {1, 2, 1};
    cr_array K, T3;
    assert_int_equal(cr_array_view_init(&K, k4, CR_DT_I64, 2, sh2, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&T3, sv, CR_DT_F64, 3, sh3, NULL), CR_OK);
    cr_value da = cr_value_array(&K);
    expect_err_once(fx, &cr_fn_sparse, &da, 1, CR_EINVAL, "sparse",
                    "A must be an f64, f32 or c128 matrix or vector");
    da = cr_value_array(&T3);
    expect_err_once(fx, &cr_fn_sparse, &da, 1, CR_EINVAL, "sparse",
                    "A must be an f64, f32 or c128 matrix or vector");
    /* sparse(I, J, V[, m, n]): integer V, a negative size, a column index of INT64_MAX */
    int64_t Ix[2] = {0, 1}, J[2] = {0, INT64_MAX};
    cr_array Ia = i64v(Ix, 2), Ja = i64v(J, 2), Va = cr_array_vector(sv, 2), Vi = i64v(iv, 2);
    cr_value sargs[5] = {cr_value_array(&Ia), cr_value_array(&Ja), cr_value_array(&Vi),
                         cr_value_i64(-1), cr_value_i64(3)};
    expect_err_once(fx, &cr_fn_sparse, sargs, 5, CR_EINVAL, "sparse",
                    "V must be an f64, f32 or c128 array");
    sargs[2] = cr_value_array(&Va);
    expect_err_once(fx, &cr_fn_sparse, sargs, 5, CR_EINVAL, "sparse", "a size -1 x 3");
    expect_err_once(fx, &cr_fn_sparse, sargs, 3, CR_EINVAL, "sparse",
                    "a column index of INT64_MAX");
    /* spdiagm of a matrix */
    cr_array M = cr_array_matrix(sv, 1, 2);
    cr_value dm = cr_value_array(&M);
    expect_err_once(fx, &cr_fn_spdiagm, &dm, 1, CR_EINVAL, "spdiagm",
                    "v must be a 1-d f64, f32 or c128 array");
    /* products with an integer B; sparse_rmul's flags */
    cr_array Bi = i64v(iv, 2);
    cr_value margs[3] = {a, cr_value_array(&Bi), cr_value_i64('N')};
    expect_err_once(fx, &cr_fn_sparse_mul, margs, 3, CR_EINVAL, "sparse_mul",
                    "B must be a float vector or matrix");
    cr_value rargs[3] = {cr_value_array(&Bi), a, cr_value_i64('N')};
    expect_err_once(fx, &cr_fn_sparse_rmul, rargs, 3, CR_EINVAL, "sparse_rmul",
                    "B must be a float vector or matrix");
    rargs[2] = cr_value_i64('x');
    expect_err_once(fx, &cr_fn_sparse_rmul, rargs, 3, CR_EINVAL, "sparse_rmul",
                    "trans must be 'N', 'T' or 'C'");
}

/* tangents of other kinds: a zero and a thunk through findnz's pullback, a number refused */
static void test_tangent_kinds(void **state)
{
    fixture *fx = *state;
    int64_t cp[3] = {0, 1, 3}, rv[3] = {0, 0, 1};
    double sv[3] = {1, 2, 3};
    cr_sparse S = make_sparse(2, 2, cp, rv, sv, 3);
    cr_value a = cr_value_struct(&cr_sparse_type, &S), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_findnz, &a, 1, &y, &pb), CR_OK);
    cr_tangent dx[2];
    /* a zero cotangent: a zero for S */
    cr_tangent z = cr_tangent_zero();
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &z, dx, 2), CR_OK);
    assert_true(cr_tangent_is_zero(dx[1]));
    /* a number for the tuple: refused, naming findnz once */
    cr_tangent f = cr_tangent_f64(1);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &f, dx, 2), CR_ETANGENT);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "findnz", "a f64 cotangent for a tuple");
    /* sparse_dense's frule with a number as S's tangent: refused */
    cr_tangent da[2] = {cr_tangent_none(), cr_tangent_f64(1)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, da, &cr_fn_sparse_dense, &a, 1, &y, &dy),
                     CR_ETANGENT);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "sparse_dense",
                      "the tangent of a sparse matrix must be a structural tangent");
    /* a dense tangent (its entries on the pattern kept): the result's tangent is those
     * entries, zero off the pattern (row 1 of column 0) */
    double t[4] = {10, 20, 30, 40};
    cr_array Tn = cr_array_matrix(t, 2, 2);
    da[1] = cr_tangent_array(&Tn);
    assert_int_equal(cr_frule(NULL, fx->arena, da, &cr_fn_sparse_dense, &a, 1, &y, &dy), CR_OK);
    cr_tangent du;
    assert_int_equal(cr_tangent_unthunk(dy, &du), CR_OK);
    assert_int_equal(du.tag, CR_TAN_ARRAY);
    const double want[4] = {10, 20, 0, 40};
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(cr_array_get_linear(du.u.arr, i)), want[i]);
    /* a zero tangent of S: the dense result's tangent is zero */
    da[1] = cr_tangent_zero();
    assert_int_equal(cr_frule(NULL, fx->arena, da, &cr_fn_sparse_dense, &a, 1, &y, &dy), CR_OK);
    assert_true(cr_tangent_is_zero(dy));
}

/* f32 and lower-case flags: S x with f32 x against the dense product */
static void test_f32_flags(void **state)
{
    fixture *fx = *state;
    int64_t cp[3] = {0, 1, 3}, rv[3] = {0, 0, 1};
    double sv[3] = {1, 2, 3}; /* [1 2; 0 3] */
    cr_sparse S = make_sparse(2, 2, cp, rv, sv, 3);
    float x[2] = {1, -1};
    size_t two = 2;
    cr_array X;
    assert_int_equal(cr_array_view_init(&X, x, CR_DT_F32, 1, &two, NULL), CR_OK);
    cr_value args[3] = {cr_value_struct(&cr_sparse_type, &S), cr_value_array(&X),
                        cr_value_i64('t')},
             y;
    /* Sᵀ x = (1, 2 - 3) */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_mul, args, 3, &y), CR_OK);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 0)), 1, 1e-7);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 1)), -1, 1e-7);
    check_point(fx, &cr_fn_sparse_mul, args, 3, "sparse_mul 't' f32");
    /* xᵀ Sᴴ ('c', real: xᵀ Sᵀ) = (1 - 2, -3) */
    cr_value r[3] = {cr_value_array(&X), cr_value_struct(&cr_sparse_type, &S), cr_value_i64('c')};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_rmul, r, 3, &y), CR_OK);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 0)), -1, 1e-7);
    ASSERT_CLOSE(creal(cr_array_get_linear(y.u.arr, 1)), -3, 1e-7);
    check_point(fx, &cr_fn_sparse_rmul, r, 3, "sparse_rmul 'c' f32");
    /* a complex row vector times the real S: z S = (z0, 2 z0 + 3 z1) */
    cr_complex z[2] = {CMPLX(1, 2), CMPLX(-1, 0.5)};
    cr_array Z;
    assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 1, &two, NULL), CR_OK);
    r[0] = cr_value_array(&Z);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_rmul, r, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_C128);
    cr_complex w0 = cr_array_get_linear(y.u.arr, 0), w1 = cr_array_get_linear(y.u.arr, 1);
    ASSERT_CPLX(w0, 1, 2);
    ASSERT_CPLX(w1, 2 * 1 + 3 * -1, 2 * 2 + 3 * 0.5);
    check_point(fx, &cr_fn_sparse_rmul, r, 2, "sparse_rmul complex B, real S");
}

/* every allocation of the rules failing in turn: CR_EARENA, then the same output; the
 * same for the frules and the unthunked cotangents */
static void test_arena_full(void **state)
{
    fixture *fx = *state;
    int64_t cp[3] = {0, 1, 3}, rv[3] = {0, 0, 1};
    double sv[3] = {1, 2, 3}, b[4] = {1, -1, 2, 0.5};
    cr_sparse S = make_sparse(2, 2, cp, rv, sv, 3);
    cr_array B = cr_array_matrix(b, 2, 2), Bv = cr_array_vector(b, 2);
    cr_value a = cr_value_struct(&cr_sparse_type, &S);
    cr_value m[3] = {a, cr_value_array(&B), cr_value_i64('T')};
    assert_arena_sweep(fx, &cr_fn_sparse_mul, m, 3);
    assert_arena_sweep_rules(fx, &cr_fn_sparse_mul, m, 3);
    cr_value r[3] = {cr_value_array(&B), a, cr_value_i64('C')};
    assert_arena_sweep(fx, &cr_fn_sparse_rmul, r, 3);
    assert_arena_sweep_rules(fx, &cr_fn_sparse_rmul, r, 3);
    r[0] = cr_value_array(&Bv);
    assert_arena_sweep(fx, &cr_fn_sparse_rmul, r, 2);
    assert_arena_sweep_rules(fx, &cr_fn_sparse_rmul, r, 2);
    assert_arena_sweep(fx, &cr_fn_sparse_dense, &a, 1);
    assert_arena_sweep_rules(fx, &cr_fn_sparse_dense, &a, 1);
    assert_arena_sweep(fx, &cr_fn_findnz, &a, 1);
    assert_arena_sweep_rules(fx, &cr_fn_findnz, &a, 1);
    cr_value d = cr_value_array(&B);
    assert_arena_sweep(fx, &cr_fn_sparse, &d, 1);
    assert_arena_sweep_rules(fx, &cr_fn_sparse, &d, 1);
    cr_value v[2] = {cr_value_i64(1), cr_value_array(&Bv)};
    assert_arena_sweep(fx, &cr_fn_spdiagm, v, 2);
    assert_arena_sweep_rules(fx, &cr_fn_spdiagm, v, 2);
    int64_t Ix[3] = {0, 1, 0}, J[3] = {1, 0, 1};
    cr_array Ia = i64v(Ix, 3), Ja = i64v(J, 3), Va = cr_array_vector(b, 3);
    cr_value t[3] = {cr_value_array(&Ia), cr_value_array(&Ja), cr_value_array(&Va)};
    assert_arena_sweep(fx, &cr_fn_sparse, t, 3);
    assert_arena_sweep_rules(fx, &cr_fn_sparse, t, 3);
#if defined(CR_HAVE_LAPACKE)
    assert_arena_sweep(fx, &cr_fn_sparse_det, &a, 1);
    assert_arena_sweep_rules(fx, &cr_fn_sparse_det, &a, 1);
    assert_arena_sweep(fx, &cr_fn_sparse_logabsdet, &a, 1);
    assert_arena_sweep_rules(fx, &cr_fn_sparse_logabsdet, &a, 1);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sparse_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sparse_of_dense, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_spdiagm_findnz, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mul, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rmul, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_det, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_more_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tangent_kinds, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_f32_flags, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_full, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
