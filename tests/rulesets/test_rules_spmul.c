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
    assert_int_equal(found, 2); /* (A, B) and (A, B, ta, tb) */
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
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "sparse_spmul: op(A) is 3 x 2, op(B) 3 x 2"));
    /* with flags: A' is 2 x 3, B' 2 x 3 */
    cr_value a4[4] = {args[0], args[1], cr_value_i64('C'), cr_value_i64('t')};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_spmul, a4, 4, &y), CR_ESHAPE);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "op(A) is 2 x 3, op(B) 2 x 3"));
    /* A' B (3 x 2)' (3 x 2): conformant */
    a4[3] = cr_value_i64('N');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_spmul, a4, 4, &y), CR_OK);
    /* a bad flag, and one flag without the other */
    a4[2] = cr_value_i64('X');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_spmul, a4, 4, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "trans must be 'N', 'T' or 'C'"));
    a4[2] = cr_value_i64('T');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sparse_spmul, a4, 3, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "both trans flags or neither"));
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

/* ---- Transposed and adjoint operands ------------------------------------------------------ */

/* An r x c CSC matrix of dtype dt (f64 or c128) whose entry (i, j) is stored when
 * (3 i + 2 j + seed) % 4 != 0, with the value 0.3 + 0.2 i - 0.15 j (+ (0.1 (i - j) + 0.05) i
 * for c128), and its dense row-major value D (complex). */
typedef struct cscz {
    cr_sparse S;
    int64_t cp[8], rv[32];
    cr_complex val[32];
} cscz;

static cr_value make_pat(cscz *c, cr_dtype dt, size_t r, size_t cols, size_t seed, cr_complex *D)
{
    size_t nnz = 0;
    c->cp[0] = 0;
    for (size_t j = 0; j < cols; j++) {
        for (size_t i = 0; i < r; i++) {
            cr_complex v = 0;
            if ((3 * i + 2 * j + seed) % 4 != 0) {
                v = 0.35 + 0.2 * (double)i - 0.15 * (double)j; /* never 0 here */
                if (dt == CR_DT_C128)
                    v += (0.1 * ((double)i - (double)j) + 0.05) * (cr_complex)I;
                c->rv[nnz] = (int64_t)i;
                if (dt == CR_DT_C128)
                    c->val[nnz] = v;
                else
                    ((double *)c->val)[nnz] = creal(v);
                nnz++;
            }
            D[i * cols + j] = v;
        }
        c->cp[j + 1] = (int64_t)nnz;
    }
    size_t np1 = cols + 1;
    c->S.m = (int64_t)r;
    c->S.n = (int64_t)cols;
    assert_int_equal(cr_array_view_init(&c->S.colptr, c->cp, CR_DT_I64, 1, &np1, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&c->S.rowval, c->rv, CR_DT_I64, 1, &nnz, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&c->S.nzval, c->val, dt, 1, &nnz, NULL), CR_OK);
    return cr_value_struct(&cr_sparse_type, &c->S);
}

/* op(D) for the r x c row-major D: c x r for 'T' and 'C' */
static void dense_op(const cr_complex *D, size_t r, size_t c, char t, cr_complex *out)
{
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++) {
            if (t == 'N')
                out[i * c + j] = D[i * c + j];
            else
                out[j * r + i] = t == 'C' ? conj(D[i * c + j]) : D[i * c + j];
        }
}

/* Every pair of flags, f64 and c128: op(A) op(B) against the dense product of the densified
 * factors, the cotangents against the dense ones (C̄ op(B)ᴴ and op(A)ᴴ C̄ carried back through
 * op) read on A's and B's patterns, and the frule and rrule against finite differences. */
static void test_transposed(void **state)
{
    fixture *fx = *state;
    static const char k_flags[3] = {'N', 'T', 'C'};
    enum { M = 3, K = 4, N = 2 }; /* op(A) M x K, op(B) K x N */
    for (int c = 0; c < 2; c++)
        for (int fa = 0; fa < 3; fa++)
            for (int fb = 0; fb < 3; fb++) {
                cr_dtype dt = c ? CR_DT_C128 : CR_DT_F64;
                char ta = k_flags[fa], tb = k_flags[fb];
                size_t ar = ta == 'N' ? M : K, ac = ta == 'N' ? K : M;
                size_t br = tb == 'N' ? K : N, bc = tb == 'N' ? N : K;
                cscz a, b;
                cr_complex DA[M * K], DB[K * N], OA[M * K], OB[K * N];
                cr_value args[4] = {make_pat(&a, dt, ar, ac, 1, DA),
                                    make_pat(&b, dt, br, bc, 2, DB), cr_value_i64(ta),
                                    cr_value_i64(tb)},
                         y;
                dense_op(DA, ar, ac, ta, OA);
                dense_op(DB, br, bc, tb, OB);
                cr_pullback pb;
                assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sparse_spmul, args, 4, &y, &pb),
                                 CR_OK);
                const cr_sparse *C = y.u.obj.ptr;
                assert_int_equal(C->m, M);
                assert_int_equal(C->n, N);
                assert_int_equal(C->nzval.dtype, dt);
                /* the values, and the structural pattern: (i, j) stored iff some k has both */
                const int64_t *cp = C->colptr.data, *rv = C->rowval.data;
                for (size_t i = 0; i < M; i++)
                    for (size_t j = 0; j < N; j++) {
                        cr_complex w = 0;
                        bool structural = false;
                        for (size_t k = 0; k < K; k++) {
                            w += OA[i * K + k] * OB[k * N + j];
                            structural = structural || (OA[i * K + k] != 0 && OB[k * N + j] != 0);
                        }
                        cr_complex got = 0;
                        bool stored = false;
                        for (int64_t p = cp[j]; p < cp[j + 1]; p++)
                            if ((size_t)rv[p] == i) {
                                stored = true;
                                got = cr_array_get_linear(&C->nzval, (size_t)p);
                            }
                        assert_int_equal(stored, structural);
                        assert_true(cabs(got - w) <= 1e-14);
                    }
                /* a dense cotangent G: Ā = op⁻¹(G op(B)ᴴ) and B̄ = op⁻¹(op(A)ᴴ G) on the patterns */
                cr_complex G[M * N], GA[M * K], GB[K * N];
                for (size_t q = 0; q < M * N; q++)
                    G[q] = (0.5 - 0.25 * (double)q) + (c ? 0.125 * (double)q * (cr_complex)I : 0);
                cr_array *Ga;
                size_t gs[2] = {M, N};
                assert_int_equal(cr_array_new(fx->arena, dt, 2, gs, &Ga), CR_OK);
                for (size_t q = 0; q < M * N; q++) {
                    if (c)
                        ((cr_complex *)Ga->data)[q] = G[q];
                    else
                        ((double *)Ga->data)[q] = creal(G[q]);
                }
                /* G on C's pattern only: what the pullback reads */
                for (size_t j = 0; j < N; j++)
                    for (size_t i = 0; i < M; i++) {
                        bool stored = false;
                        for (int64_t p = cp[j]; p < cp[j + 1]; p++)
                            stored = stored || (size_t)rv[p] == i;
                        if (!stored)
                            G[i * N + j] = 0;
                    }
                for (size_t i = 0; i < M; i++)
                    for (size_t k = 0; k < K; k++) {
                        GA[i * K + k] = 0;
                        for (size_t j = 0; j < N; j++)
                            GA[i * K + k] += G[i * N + j] * conj(OB[k * N + j]);
                    }
                for (size_t k = 0; k < K; k++)
                    for (size_t j = 0; j < N; j++) {
                        GB[k * N + j] = 0;
                        for (size_t i = 0; i < M; i++)
                            GB[k * N + j] += conj(OA[i * K + k]) * G[i * N + j];
                    }
                cr_tangent dy = cr_tangent_array(Ga), dx[5], t;
                assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 5), CR_OK);
                /* back through op: the cotangent of X = op⁻¹ of the cotangent of op(X) */
                cr_complex BA[M * K], BB[K * N];
                dense_op(GA, M, K, ta, BA); /* op is its own inverse on the layout */
                dense_op(GB, K, N, tb, BB);
                const cscz *xs[2] = {&a, &b};
                const cr_complex *want[2] = {BA, BB};
                size_t cols[2] = {ac, bc};
                for (int w = 0; w < 2; w++) {
                    assert_int_equal(cr_tangent_unthunk(dx[1 + w], &t), CR_OK);
                    assert_int_equal(t.tag, CR_TAN_STRUCT);
                    cr_tangent nz = cr_tangent_field(t, 4);
                    const cr_sparse *S = &xs[w]->S;
                    const int64_t *scp = S->colptr.data, *srv = S->rowval.data;
                    for (size_t j = 0; j < cols[w]; j++)
                        for (int64_t p = scp[j]; p < scp[j + 1]; p++) {
                            cr_complex e = want[w][(size_t)srv[p] * cols[w] + j];
                            if (!c)
                                e = creal(e);
                            cr_complex g = cr_array_get_linear(nz.u.arr, (size_t)p);
                            assert_true(cabs(g - e) <= 1e-13);
                        }
                }
                assert_int_equal(dx[3].tag, CR_TAN_NONE);
                assert_int_equal(dx[4].tag, CR_TAN_NONE);
                /* the rule testers: frule and rrule against finite differences */
                cr_test_report rep;
                assert_int_equal(cr_test_rrule(fx->arena, NULL, &cr_fn_sparse_spmul, args, 4, &rep),
                                 CR_OK);
                if (rep.verdict != CR_VERDICT_PASS)
                    print_error("%c%c rrule: %s: %s\n", ta, tb, rep.where, rep.message);
                assert_int_equal(rep.verdict, CR_VERDICT_PASS);
                assert_int_equal(cr_test_frule(fx->arena, NULL, &cr_fn_sparse_spmul, args, 4, &rep),
                                 CR_OK);
                if (rep.verdict != CR_VERDICT_PASS)
                    print_error("%c%c frule: %s: %s\n", ta, tb, rep.where, rep.message);
                assert_int_equal(rep.verdict, CR_VERDICT_PASS);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cotangents, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_registration, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_transposed, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
