/*
 * The second-order forms of qr, lu and pinv (src/rulesets/linalg/, linalg/forms_factors.c: qr,
 * lu, pinv) on second-order tapes. Each H v (cr_tape_ahvp) is checked against central differences,
 * along the direction, of the gradient a first-order tape computes, at several points and
 * directions: qr of square and tall matrices with both Q and R feeding the loss, lu of 3 x 3 and 4
 * x 4 matrices (pivoting that permutes rows) with L and U feeding it, pinv of square, tall and wide
 * matrices, each composed with other functions so that the cotangents vary from element to element;
 * a full Hessian (cr_tape_hessian) of three scalars through all three; and the refusals: pinv at a
 * rank-deficient matrix and qr at a rank-deficient matrix in the sweep (structured matrices:
 * test_hvp_structured.c).
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"

static cr_var sum_mul(cr_tape *t, cr_avar a, cr_avar b)
{
    return cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(a), cr_targ_arr(b)));
}

/* f(a) with a tuple of n results (out). */
static void tuple_of(cr_tape *t, const cr_value *f, cr_targ a, cr_targ *out, size_t n)
{
    if (cr_tape_acall_n(t, f, &a, 1, out, n) != CR_OK)
        for (size_t k = 0; k < n; k++)
            out[k] = cr_targ_var(cr_const((double)NAN));
}

/* Weights of up to 4 x 4 elements, all different. */
static double k_w[16] = {1.0, -0.7, 2.0,  0.4, -1.3, 0.9,  0.25, -0.5,
                         1.7, 0.3,  -2.1, 0.8, 0.6,  -0.2, 1.1,  -0.9};

static cr_avar weights(size_t r, size_t c, cr_array *store)
{
    *store = cr_array_matrix(k_w, r, c);
    return cr_av_const(store);
}

/* Σ w ⊙ sin(M) + (Σ M²)² / 4 over an r x c M: a loss whose cotangent varies by element. */
static cr_var mix(cr_tape *t, cr_avar M, size_t r, size_t c, cr_array *store)
{
    cr_avar s = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(M));
    cr_var q = sum_sq(t, M);
    return cr_add(t, sum_mul(t, s, weights(r, c, store)),
                  cr_mul(t, cr_mul(t, q, q), cr_const(0.25)));
}

/* ---- qr ------------------------------------------------------------------------------------- */

/* A m x n (env: {m, n}): mix(R) + sum(Q .^ 3 .* W) + sum(R) sum(sin.(Q)) */
static cr_var qr_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const size_t *sh = env;
    static cr_array w1, w2;
    cr_targ qr[2];
    tuple_of(t, &cr_fn_qr, cr_targ_arr(X[0]), qr, 2);
    cr_avar Q = qr[0].u.a, R = qr[1].u.a;
    cr_avar q3 = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(Q),
                                  cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(Q))));
    cr_var a = cr_add(t, mix(t, R, sh[1], sh[1], &w1), sum_mul(t, q3, weights(sh[0], sh[1], &w2)));
    return cr_add(t, a, cr_mul(t, cr_av_sum(t, R), sum_sin(t, Q)));
}

static void test_qr(void **state)
{
    fixture *f = *state;
    static const size_t shapes[3][2] = {{3, 3}, {4, 3}, {5, 2}};
    for (int q = 0; q < 3; q++) {
        prob p = {.f = qr_p,
                  .env = shapes[q],
                  .na = 1,
                  .ndim = {2},
                  .shape = {{shapes[q][0], shapes[q][1]}}};
        for (unsigned seed = 0; seed < 3; seed++) {
            double z[16];
            point(16, seed + 4 * (unsigned)q, 1.0, z);
            z[0] += 1.5; /* well away from rank deficiency */
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        }
    }
}

/* ---- lu ------------------------------------------------------------------------------------- */

/* A n x n (env: {n}): mix(L) + sum(U .^ 2 .* W) + sum(sin.(L)) sum(U); p a constant */
static cr_var lu_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const size_t *n = env;
    static cr_array w1, w2;
    cr_targ lup[3];
    tuple_of(t, &cr_fn_lu, cr_targ_arr(X[0]), lup, 3);
    assert_int_equal(lup[2].kind, CR_TARG_VALUE);
    cr_avar L = lup[0].u.a, U = lup[1].u.a;
    cr_avar u2 = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(U));
    cr_var a = cr_add(t, mix(t, L, *n, *n, &w1), sum_mul(t, u2, weights(*n, *n, &w2)));
    return cr_add(t, a, cr_mul(t, sum_sin(t, L), cr_av_sum(t, U)));
}

/* Whether lu(A) of the n x n matrix z permutes rows. */
static bool permutes(cr_ctx *ctx, double *z, size_t n)
{
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    cr_array a = cr_array_matrix(z, n, n);
    cr_targ lup[3], A = cr_targ_arr(cr_tape_array_input(t, &a));
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_lu, &A, 1, lup, 3), CR_OK);
    const cr_array *p = lup[2].u.v.u.arr;
    bool moved = false;
    for (size_t i = 0; i < n; i++)
        moved = moved || cr_array_get_linear(p, i) != (double)i;
    cr_tape_free(t);
    return moved;
}

static void test_lu(void **state)
{
    fixture *f = *state;
    static const size_t sizes[2] = {3, 4};
    for (int q = 0; q < 2; q++) {
        size_t n = sizes[q];
        prob p = {.f = lu_p, .env = &sizes[q], .na = 1, .ndim = {2}, .shape = {{n, n}}};
        for (unsigned seed = 0; seed < 3; seed++) {
            double z[16];
            point(16, seed + 5 * (unsigned)q, 1.0, z);
            for (size_t r = 0; r < n; r++) /* point() alone is of rank 2 */
                z[r * n + (r + 1) % n] += 1.2;
            z[(n - 1) * n] += 2.0; /* the last row pivots first */
            assert_true(permutes(f->ctx, z, n));
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        }
    }
}

/* ---- pinv ----------------------------------------------------------------------------------- */

/* A m x n (env: {m, n}): mix(pinv(A)) + sum(pinv(A) .* W) sum(A .^ 2) */
static cr_var pinv_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const size_t *sh = env;
    static cr_array w1, w2;
    cr_avar Y = call_a(t, &cr_fn_pinv, cr_targ_arr(X[0]), i64(0), 1);
    cr_var a = mix(t, Y, sh[1], sh[0], &w1);
    return cr_add(t, a, cr_mul(t, sum_mul(t, Y, weights(sh[1], sh[0], &w2)), sum_sq(t, X[0])));
}

static void test_pinv(void **state)
{
    fixture *f = *state;
    static const size_t shapes[3][2] = {{3, 3}, {4, 2}, {2, 4}};
    for (int q = 0; q < 3; q++) {
        prob p = {.f = pinv_p,
                  .env = shapes[q],
                  .na = 1,
                  .ndim = {2},
                  .shape = {{shapes[q][0], shapes[q][1]}}};
        for (unsigned seed = 0; seed < 3; seed++) {
            double z[16];
            point(16, seed + 3 * (unsigned)q, 1.0, z);
            z[0] += 1.5; /* singular values apart from zero */
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        }
    }
}

/* ---- A full Hessian of scalars ------------------------------------------------------------ */

/* x, y, u: M = x E + y F + x u G + C (4 x 3), B = M[1:3, :] (square):
 *   sum(sin.(R)) + sum(Q .^ 3) + sum(sin.(L)) sum(U) + sum(sin.(pinv(M))) with (Q, R) = qr(M),
 *   (L, U, p) = lu(B), B = Mᵀ K (3 x 3) */
static double k_E[12] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0},
              k_F[12] = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1},
              k_G[12] = {0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1},
              k_C[12] = {0.3, 0, 2, 0, 0.5, 0, 1, 0, 0.2, 0.7, -1, 0.4},
              k_K[12] = {0.2, 1, 0, -1, 0.1, 0.5, 3, 0, 1, 0.4, -0.6, 0.3};

static cr_avar scaled(cr_tape *t, cr_var s, const cr_array *M)
{
    return cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(cr_av_const(M)));
}

static cr_avar plus(cr_tape *t, cr_avar a, cr_avar b)
{
    return cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(a), cr_targ_arr(b));
}

static cr_var three_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array E, F, G, C;
    E = cr_array_matrix(k_E, 4, 3);
    F = cr_array_matrix(k_F, 4, 3);
    G = cr_array_matrix(k_G, 4, 3);
    C = cr_array_matrix(k_C, 4, 3);
    cr_avar M = plus(t, plus(t, scaled(t, s[0], &E), scaled(t, s[1], &F)),
                     plus(t, scaled(t, cr_mul(t, s[0], s[2]), &G), cr_av_const(&C)));
    cr_targ qr[2], lup[3];
    tuple_of(t, &cr_fn_qr, cr_targ_arr(M), qr, 2);
    cr_avar q2 = cr_av_broadcast1(t, &cr_fn_square, qr[0]);
    cr_var a = cr_add(t, sum_sin(t, qr[1].u.a), sum_mul(t, q2, qr[0].u.a));
    static cr_array K;
    K = cr_array_matrix(k_K, 4, 3);
    cr_avar B =
        cr_av_matmul(t, call_a(t, &cr_fn_transpose, cr_targ_arr(M), i64(0), 1), cr_av_const(&K));
    tuple_of(t, &cr_fn_lu, cr_targ_arr(B), lup, 3);
    cr_var b = cr_mul(t, sum_sin(t, lup[0].u.a), cr_av_sum(t, lup[1].u.a));
    cr_var c = sum_sin(t, call_a(t, &cr_fn_pinv, cr_targ_arr(M), i64(0), 1));
    return cr_add(t, cr_add(t, a, b), c);
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = three_p, .ns = 3, .na = 0};
    double pts[3][3] = {{1.3, 0.4, -0.6}, {-0.7, 1.9, 0.8}, {2.6, -0.8, 1.2}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* ---- Points without a second derivative ------------------------------------------------ */

/* One H v of prob p at z on a second-order tape: its status (the tape's message in t). */
static cr_status hvp_status(cr_ctx *ctx, const prob *p, double *z, char *msg, size_t len)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    cr_array a[MAXA], va[MAXA], oa[MAXA];
    const cr_array *vp[MAXA];
    cr_array *op[MAXA];
    cr_var s[MAXS];
    cr_avar X[MAXA];
    double v[MAXZ], out[MAXZ];
    direction(flat_len(p), 0, v);
    cr_var y = record(t, p, z, a, s, X);
    assert_ok(t, cr_tape_status(t));
    views(p, v, va);
    views(p, out, oa);
    for (size_t j = 0; j < p->na; j++) {
        vp[j] = &va[j];
        op[j] = &oa[j];
    }
    cr_status st = cr_tape_ahvp(t, y, s, p->ns, v, out, X, p->na, vp, op);
    snprintf(msg, len, "%s", cr_tape_errmsg(t));
    cr_tape_free(t);
    return st;
}

/* pinv at a rank-deficient matrix: no second derivative (CR_EDOMAIN in the sweep); qr at
 * one: the rule's own refusal (its pullback needs R⁻¹). */
static void test_rank_deficient(void **state)
{
    fixture *f = *state;
    static const size_t sq[2] = {3, 3}, tall[2] = {4, 3};
    double z[12] = {1, 2, 3, 2, 4, 6, 0.5, -1, 2}; /* rows 0 and 1 proportional: rank 2 */
    char msg[512];
    prob p = {.f = pinv_p, .env = sq, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    assert_int_equal(hvp_status(f->ctx, &p, z, msg, sizeof msg), CR_EDOMAIN);
    assert_contains(msg, "pinv: no second derivative at a rank-deficient matrix (rank 2 < 3");
    /* a tall one: columns 0 and 2 equal */
    double w[12] = {1, 0.5, 1, -2, 3, -2, 0.7, 1, 0.7, 4, 2, 4};
    prob pt = {.f = pinv_p, .env = tall, .na = 1, .ndim = {2}, .shape = {{4, 3}}};
    assert_int_equal(hvp_status(f->ctx, &pt, w, msg, sizeof msg), CR_EDOMAIN);
    assert_contains(msg, "rank 2 < 3");
    prob q = {.f = qr_p, .env = tall, .na = 1, .ndim = {2}, .shape = {{4, 3}}};
    assert_int_equal(hvp_status(f->ctx, &q, w, msg, sizeof msg), CR_EDOMAIN);
    assert_contains(msg, "rank deficient");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_qr, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lu, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_pinv, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rank_deficient, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
