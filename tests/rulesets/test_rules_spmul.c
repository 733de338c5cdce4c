/*
 * sparse_spmul(A, B): the product of two compressed-column matrices. Its values against the
 * dense product computed here, its pattern (the structural one: a cancellation stays
 * stored), the rules against finite differences (the rule testers, real, f32 and complex),
 * cotangents on the arguments' patterns, a dense cotangent read at the stored positions, and
 * the refusals.
 */
#include <chainrules/rules_sparse.h>

#include "test_util.h"

/* A CSC matrix over caller-owned arrays. */
typedef struct csc {
    cr_sparse S;
    int64_t cp[8], rv[16];
} csc;

static cr_value make_csc(csc *c, int64_t m, int64_t n, const int64_t *cp, const int64_t *rv,
                         double *val)
{
    size_t np1 = (size_t)n + 1, nnz = (size_t)cp[n];
    memcpy(c->cp, cp, np1 * sizeof *cp);
    memcpy(c->rv, rv, nnz * sizeof *rv);
    c->S.m = m;
    c->S.n = n;
    assert_int_equal(cr_array_view_init(&c->S.colptr, c->cp, CR_DT_I64, 1, &np1, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&c->S.rowval, c->rv, CR_DT_I64, 1, &nnz, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&c->S.nzval, val, CR_DT_F64, 1, &nnz, NULL), CR_OK);
    return cr_value_struct(&cr_sparse_type, &c->S);
}

/* The dense m x n matrix (row-major) of a cr_sparse of f64 values. */
static void dense_of(const cr_sparse *S, double *D)
{
    size_t m = (size_t)S->m, n = (size_t)S->n;
    memset(D, 0, m * n * sizeof *D);
    const int64_t *cp = S->colptr.data, *rv = S->rowval.data;
    for (size_t j = 0; j < n; j++)
        for (int64_t p = cp[j]; p < cp[j + 1]; p++)
            D[(size_t)rv[p] * n + j] = creal(cr_array_get_linear(&S->nzval, (size_t)p));
}

/* A (3 x 2) = [1 0; 2 -1; 0 3], B (2 x 3) = [1 0 2; 2 0 0]: C = A B = [1 0 2; 0 0 4; 6 0 0],
 * with C[1, 0] = 2·1 + (-1)·2 = 0 a stored cancellation and column 1 empty. */
static void test_values(void **state)
{
    fixture *fx = *state;
    static const int64_t acp[3] = {0, 2, 4}, arv[4] = {0, 1, 1, 2};
    static const int64_t bcp[4] = {0, 2, 2, 3}, brv[3] = {0, 1, 0};
    double av[4] = {1, 2, -1, 3}, bv[3] = {1, 2, 2};
    csc a, b;
    cr_value args[2] = {make_csc(&a, 3, 2, acp, arv, av), make_csc(&b, 2, 3, bcp, brv, bv)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_spmul, args, 2, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_STRUCT);
    const cr_sparse *C = y.u.obj.ptr;
    assert_int_equal(C->m, 3);
    assert_int_equal(C->n, 3);
    const int64_t *cp = C->colptr.data, *rv = C->rowval.data;
    /* column 0: rows 0, 1, 2 (row 1 stored though 0); column 1 empty; column 2: rows 0, 1 */
    static const int64_t want_cp[4] = {0, 3, 3, 5}, want_rv[5] = {0, 1, 2, 0, 1};
    for (size_t j = 0; j < 4; j++)
        assert_int_equal(cp[j], want_cp[j]);
    for (size_t p = 0; p < 5; p++)
        assert_int_equal(rv[p], want_rv[p]);
    double A[6], B[6], D[9], want[9] = {0};
    dense_of(&a.S, A);
    dense_of(&b.S, B);
    dense_of(C, D);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            for (size_t k = 0; k < 2; k++)
                want[3 * i + j] += A[2 * i + k] * B[3 * k + j];
            assert_close(D[3 * i + j], want[3 * i + j], 1e-15);
        }
    assert_close(creal(cr_array_get_linear(&C->nzval, 1)), 0.0, 0);
    /* the rule testers at this point, with its stored zero */
    cr_test_report rep;
    assert_int_equal(cr_test_rrule(fx->arena, NULL, &cr_fn_sparse_spmul, args, 2, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    assert_int_equal(cr_test_frule(fx->arena, NULL, &cr_fn_sparse_spmul, args, 2, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
}

/* The cotangents live on A's and B's patterns: against the dense C̄ Bᵀ and Aᵀ C̄ computed
 * here, with the dense cotangent C̄ (read on C's pattern) given as an array. */
static void test_cotangents(void **state)
{
    fixture *fx = *state;
    static const int64_t acp[3] = {0, 2, 4}, arv[4] = {0, 1, 1, 2};
    static const int64_t bcp[4] = {0, 2, 2, 3}, brv[3] = {0, 1, 0};
    double av[4] = {1, 2, -1, 3}, bv[3] = {1, 2, 2};
    csc a, b;
    cr_value args[2] = {make_csc(&a, 3, 2, acp, arv, av), make_csc(&b, 2, 3, bcp, brv, bv)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sparse_spmul, args, 2, &y, &pb), CR_OK);
    /* a dense cotangent: its entries off C's pattern (column 1, C[2, 2]) are dropped */
    double g[9] = {1, 7, 2, 3, 7, 4, 5, 7, 7};
    cr_array G = cr_array_matrix(g, 3, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    double gp[9] = {1, 0, 2, 3, 0, 4, 5, 0, 0}; /* G on C's pattern */
    double A[6], B[6];
    dense_of(&a.S, A);
    dense_of(&b.S, B);
    cr_tangent ta, tb;
    assert_int_equal(cr_tangent_unthunk(dx[1], &ta), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[2], &tb), CR_OK);
    assert_int_equal(ta.tag, CR_TAN_STRUCT);
    cr_tangent na = cr_tangent_field(ta, 4), nb = cr_tangent_field(tb, 4);
    assert_int_equal(na.tag, CR_TAN_ARRAY);
    /* Ā[i, k] = Σ_j gp[i, j] B[k, j] at A's entries, B̄[k, j] = Σ_i A[i, k] gp[i, j] at B's */
    for (size_t k = 0; k < 2; k++)
        for (int64_t p = acp[k]; p < acp[k + 1]; p++) {
            size_t i = (size_t)arv[p];
            double w = 0;
            for (size_t j = 0; j < 3; j++)
                w += gp[3 * i + j] * B[3 * k + j];
            assert_close(creal(cr_array_get_linear(na.u.arr, (size_t)p)), w, 1e-15);
        }
    for (size_t j = 0; j < 3; j++)
        for (int64_t p = bcp[j]; p < bcp[j + 1]; p++) {
            size_t k = (size_t)brv[p];
            double w = 0;
            for (size_t i = 0; i < 3; i++)
                w += A[2 * i + k] * gp[3 * i + j];
            assert_close(creal(cr_array_get_linear(nb.u.arr, (size_t)p)), w, 1e-15);
        }
    /* a zero cotangent */
    dy = cr_tangent_zero();
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_true(cr_tangent_is_zero(dx[1]) && cr_tangent_is_zero(dx[2]));
    /* a cotangent of another kind */
    dy = cr_tangent_f64(1);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_ETANGENT);
}

/* Random patterns of every element type: the test registration at 40 points. */
static void test_registration(void **state)
{
    fixture *fx = *state;
    const cr_registry *reg = cr_registry_builtin();
    size_t found = 0;
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        if (strcmp(info.fn->name, "sparse_spmul") != 0)
            continue;
        found++;
        cr_test_opts opts = {.npoints = 40};
        cr_test_report r;
        assert_int_equal(cr_test_rule_registration(fx->arena, &opts, &info, &r), CR_OK);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        assert_true(r.npoints >= 40);
    }
    assert_int_equal(found, 1);
}

static void test_refusals(void **state)
{
    fixture *fx = *state;
    static const int64_t acp[3] = {0, 2, 4}, arv[4] = {0, 1, 1, 2};
    double av[4] = {1, 2, -1, 3};
    csc a, b;
    cr_value args[2] = {make_csc(&a, 3, 2, acp, arv, av), make_csc(&b, 3, 2, acp, arv, av)}, y;
    /* 3 x 2 times 3 x 2 */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_spmul, args, 2, &y), CR_ESHAPE);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "sparse_spmul: A is 3 x 2, B 3 x 2"));
    /* a row index out of range */
    static const int64_t bad[4] = {0, 1, 1, 5}, bcp[4] = {0, 2, 2, 3}, brv[3] = {0, 1, 0};
    double bv[3] = {1, 2, 2};
    cr_value args2[2] = {make_csc(&a, 3, 2, acp, bad, av), make_csc(&b, 2, 3, bcp, brv, bv)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_spmul, args2, 2, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "row index 5 outside"));
    /* not a sparse matrix */
    args2[0] = cr_value_f64(1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_spmul, args2, 2, &y), CR_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cotangents, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_registration, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
