/*
 * Paths of the second-order forms (src/ad/tape_array2_forms.c) that the other tests do not
 * reach:
 *   - a form's matrix argument without a tangent along the direction while the record's
 *     cotangent is not zero (the argument is s0 C, C a constant and the direction's s0
 *     component zero, so the forward sweep leaves its tangent zero): the single-argument
 *     forms skip that direction, and the solves (cholesky_solve, potrs, getrs, trtrs) then
 *     take S of the factor from the right-hand side's tangent alone, or skip it when B has
 *     none either;
 *   - sum(f, A) and matfun_herm(f, A) of a real-only scalar row (erf: no complex step, the
 *     second derivative by central differences of its partials);
 *   - reductions over dims that leave one slice (logsumexp, softmax, logsoftmax, prod,
 *     std of a 3 x 1 matrix over dims 1).
 * Each H v (cr_tape_ahvp) is checked against central differences of a first-order tape's
 * gradient (test_prob.h), along directions with and without the s0 component.
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"

static double k_w[9] = {1.0, -0.7, 2.0, 0.4, -1.3, 0.9, 0.25, -0.5, 1.7};

/* A symmetric positive definite 3 x 3 constant (also a valid upper factor, and packed LU
 * factors with nonzero pivots), and a second constant right-hand side. */
static double k_c[9] = {2.0, 0.3, 0.1, 0.3, 2.5, 0.2, 0.1, 0.2, 3.0};
static double k_d[9] = {0.5, -0.2, 0.7, 1.1, 0.3, -0.4, 0.2, 0.9, -0.6};
static const int64_t k_piv[3] = {1, 2, 3};

/* Σ w ⊙ sin(M) + (Σ M²)² / 8 over M (at most 9 elements): a cotangent varying by element. */
static cr_var mixl(cr_tape *t, cr_avar M)
{
    static cr_array w[8];
    static int next;
    if (M.a == NULL)
        return cr_const((double)NAN);
    cr_array *store = &w[next++ % 8];
    *store = M.a->ndim == 1 ? cr_array_vector(k_w, M.a->shape[0])
                            : cr_array_matrix(k_w, M.a->shape[0], M.a->shape[1]);
    cr_avar s = cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(M));
    cr_var a =
        cr_asum(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(s), cr_targ_arr(cr_aconst(store))));
    cr_var q = sum_sq(t, M);
    return cr_add(t, a, cr_mul(t, cr_mul(t, q, q), cr_const(0.125)));
}

/* s (a scalar variable) times the constant 3 x 3 matrix c: an array variable whose tangent
 * is zero along a direction without an s component. */
static cr_avar scaled(cr_tape *t, cr_var s, double *c)
{
    static cr_array pool[8];
    static int next;
    cr_array *a = &pool[next++ % 8];
    *a = cr_array_matrix(c, 3, 3);
    return cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(cr_aconst(a)));
}

static cr_targ ipiv(void)
{
    static cr_array ip;
    size_t n = 3;
    ip = (cr_array){0};
    cr_array_view_init(&ip, (void *)(uintptr_t)k_piv, CR_DT_I64, 1, &n, NULL);
    return cr_targ_value(cr_value_array(&ip));
}

enum {
    C_PROD,
    C_NORM,
    C_EIGEN,
    C_SUM_ERF,
    C_CHOL_DET,
    C_POTRF,
    C_GETRF,
    C_GETRI,
    C_MATFUN_ERF,
    C_CSOLVE,
    C_CSOLVE_CONST_B,
    C_POTRS_U,
    C_POTRS_L,
    C_POTRS_CONST_B,
    C_GETRS,
    C_GETRS_CONST_B,
    C_TRTRS,
    C_TRTRS_CONST_B,
    C_COUNT
};

static const char *const k_names[C_COUNT] = {
    "prod",    "norm",        "eigen",  "sum(erf)",       "cholesky_det", "potrf",
    "getrf",   "getri",       "matfun", "cholesky_solve", "csolve const", "potrs U",
    "potrs L", "potrs const", "getrs",  "getrs const",    "trtrs",        "trtrs const"};

/* The record of case c whose array argument M = s0 C (and B = X or s0 D). */
static cr_var form_of(cr_tape *t, int c, cr_var s0, cr_avar X)
{
    cr_avar M = scaled(t, s0, k_c), D = scaled(t, s0, k_d);
    cr_targ m = cr_targ_arr(M);
    switch (c) {
    case C_PROD:
        return call_s(t, &cr_fn_prod, m, m, 1);
    case C_NORM:
        return call_s(t, &cr_fn_norm, m, m, 1);
    case C_EIGEN: {
        cr_targ a[1] = {cr_targ_arr(call_a(t, &cr_fn_symmetric, m, m, 1))}, r[2];
        if (cr_tape_acall_n(t, &cr_fn_eigen, a, 1, r, 2) != CR_OK)
            return cr_const((double)NAN);
        cr_avar v2 = cr_abroadcast1(t, &cr_fn_square, r[1]); /* sign-free */
        return cr_add(t, mixl(t, r[0].u.a), mixl(t, v2));
    }
    case C_SUM_ERF:
        return call_s(t, &cr_fn_sum, cr_targ_value(cr_fn_erf), m, 2);
    case C_CHOL_DET:
        return call_s(t, &cr_fn_cholesky_det, m, m, 1);
    case C_POTRF:
        return mixl(t, call_a(t, &cr_fn_potrf, m, i64('U'), 2));
    case C_GETRF: {
        cr_targ r[2];
        if (cr_tape_acall_n(t, &cr_fn_getrf, &m, 1, r, 2) != CR_OK)
            return cr_const((double)NAN);
        return mixl(t, r[0].u.a);
    }
    case C_GETRI:
        return mixl(t, call_a(t, &cr_fn_getri, m, ipiv(), 2));
    case C_MATFUN_ERF:
        return mixl(t, call_a(t, &cr_fn_matfun_herm, cr_targ_value(cr_fn_erf), m, 2));
    case C_CSOLVE:
    case C_CSOLVE_CONST_B:
        return mixl(t, call_a(t, &cr_fn_cholesky_solve, m, cr_targ_arr(c == C_CSOLVE ? X : D), 2));
    case C_POTRS_U:
    case C_POTRS_L:
    case C_POTRS_CONST_B: {
        cr_targ a[3] = {m, i64(c == C_POTRS_L ? 'L' : 'U'),
                        cr_targ_arr(c == C_POTRS_CONST_B ? D : X)};
        return mixl(t, cr_tape_acall_a(t, &cr_fn_potrs, a, 3));
    }
    case C_GETRS:
    case C_GETRS_CONST_B: {
        cr_targ a[4] = {m, ipiv(), cr_targ_arr(c == C_GETRS ? X : D), i64('T')};
        return mixl(t, cr_tape_acall_a(t, &cr_fn_getrs, a, 4));
    }
    case C_TRTRS:
    case C_TRTRS_CONST_B: {
        cr_targ a[5] = {m, i64('U'), i64('N'), i64('N'), cr_targ_arr(c == C_TRTRS ? X : D)};
        return mixl(t, cr_tape_acall_a(t, &cr_fn_trtrs, a, 5));
    }
    default:
        return cr_const((double)NAN);
    }
}

/* s0, s1, X (3 x 3): g (1 + Σ sin(X)) + s1 Σ X², g the record of case *env: its cotangent is
 * 1 + Σ sin(X) (not constant), and its argument's tangent is zero along a direction with no
 * s0 component. */
static cr_var zdir_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    int c = *(const int *)env;
    cr_var g = form_of(t, c, s[0], X[0]);
    cr_var a = cr_mul(t, g, cr_add(t, cr_const(1.0), sum_sin(t, X[0])));
    return cr_add(t, a, cr_mul(t, s[1], sum_sq(t, X[0])));
}

/* H v along v against central differences of the gradient. */
static void check_v(cr_ctx *ctx, const prob *p, double *z, const double *v, double tol,
                    const char *what)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    size_t L = flat_len(p);
    double got[MAXZ], want[MAXZ];
    tape_hvp(t, p, z, v, got);
    fd_hvp(ctx, p, z, v, want);
    for (size_t i = 0; i < L; i++) {
        if (fabs(got[i] - want[i]) > tol * (1.0 + fabs(want[i])))
            printf("%s: component %zu: %.10g, differences %.10g\n", what, i, got[i], want[i]);
        ASSERT_CLOSE(got[i], want[i], tol);
    }
    cr_tape_free(t);
}

static void test_zero_tangent_argument(void **state)
{
    fixture *f = *state;
    for (int c = 0; c < C_COUNT; c++) {
        prob p = {.f = zdir_p, .env = &c, .ns = 2, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[11], v[11];
            point(11, seed, 0.8, z);
            z[0] = 0.6 + 0.15 * seed; /* s0: M = s0 C, well conditioned, erf not flat */
            direction(11, seed, v);
            check_v(f->ctx, &p, z, v, 1e-6, k_names[c]); /* every component nonzero */
            v[0] = 0.0;                                  /* M's tangent zero */
            check_v(f->ctx, &p, z, v, 1e-6, k_names[c]);
        }
    }
}

/* X (3 x 3), x = sum(X, dims 1) (3 x 1; dimensions count from 0): reductions of x over
 * dims 0, one slice: s0 logsumexp(x; 0) + mixl(softmax(x; 0)) + Σ sin(logsoftmax(x; 0)) s0
 *   + prod(x; 0) + std(x; 0) s0 */
static cr_var one_slice_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_avar x = call_a(t, &cr_fn_sum, cr_targ_arr(X[0]), i64(1), 2);
    cr_targ xa = cr_targ_arr(x);
    cr_var a = cr_mul(t, s[0], cr_asum(t, call_a(t, &cr_fn_logsumexp, xa, i64(0), 2)));
    cr_var b = mixl(t, call_a(t, &cr_fn_softmax, xa, i64(0), 2));
    cr_var c = cr_mul(t, sum_sin(t, call_a(t, &cr_fn_logsoftmax, xa, i64(0), 2)), s[0]);
    cr_var d = cr_asum(t, call_a(t, &cr_fn_prod, xa, i64(0), 2));
    cr_var e = cr_mul(t, cr_asum(t, call_a(t, &cr_fn_std, xa, i64(0), 2)), s[0]);
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), e);
}

static void test_one_slice(void **state)
{
    fixture *f = *state;
    prob p = {.f = one_slice_p, .ns = 1, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[10];
        point(10, seed, 0.9, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_zero_tangent_argument, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_one_slice, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
