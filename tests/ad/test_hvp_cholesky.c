/*
 * The second-order forms of cholesky and of the functions of a Cholesky factor
 * (src/rulesets/linalg/forms_factors.c): cholesky(A) of a dense matrix (its upper triangle read),
 * of a Symmetric and of a Hermitian view; cholesky_solve(U, B) with U and B variables (B a
 * vector or a matrix; U a dense matrix whose upper triangle is read, or cholesky's Upper
 * factor); cholesky_logdet(U) and cholesky_det(U) (with zeros on the diagonal). Each H v
 * (cr_tape_ahvp) is checked against central differences, along the direction, of the
 * gradient a first-order tape computes, at several points and directions, each function
 * composed with others so that its cotangent is not constant; full Hessians
 * (cr_tape_hessian) of a Gaussian log-likelihood through cholesky, cholesky_solve and
 * cholesky_logdet; and the structured arguments the forms do not cover, refused when
 * recorded.
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"

/* Σ w ⊙ sin(U) + (Σ U²)² / 8 over an n x n matrix, so that Ū varies from one element to the
 * next (and is nonzero below the diagonal, where the rules ignore it) */
static double k_w9[9] = {1.0, -0.7, 2.0, 0.4, -1.3, 0.8, 1.6, -0.5, 0.9};

static cr_var mix(cr_tape *t, cr_avar U)
{
    static cr_array w;
    w = cr_array_matrix(k_w9, 3, 3);
    cr_avar su = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(U));
    cr_var a = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(su), cr_targ_arr(cr_av_const(&w))));
    cr_var q = sum_sq(t, U);
    return cr_add(t, a, cr_mul(t, cr_mul(t, q, q), cr_const(0.125)));
}

/* A 3 x 3 positive definite matrix (not symmetric: only its upper triangle is read) near
 * 3 I, from a seed. */
static void pd_point(unsigned seed, double *z)
{
    point(9, seed, 0.6, z);
    for (int q = 0; q < 3; q++)
        z[4 * q] += 3.0 + q;
}

/* ---- cholesky ------------------------------------------------------------------------------- */

/* env: the view taken of A first (NULL: A dense) */
static cr_var chol_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    cr_avar A = X[0];
    if (env != NULL)
        A = call_a(t, env, cr_targ_arr(A), i64(0), 1);
    return mix(t, call_a(t, &cr_fn_cholesky, cr_targ_arr(A), i64(0), 1));
}

static void test_cholesky(void **state)
{
    fixture *f = *state;
    static const cr_value *const views[3] = {NULL, &cr_fn_symmetric, &cr_fn_hermitian};
    for (int q = 0; q < 3; q++) {
        prob p = {.f = chol_p, .env = views[q], .na = 1, .ndim = {2}, .shape = {{3, 3}}};
        for (unsigned seed = 0; seed < 3; seed++) {
            double z[9];
            pd_point(seed + 4 * (unsigned)q, z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
    }
}

/* cholesky of a matrix built from X: U = cholesky(X Xᵀ + 2 I), mix(U) + 0.3 U · U */
static double k_I3[9] = {2, 0, 0, 0, 2, 0, 0, 0, 2};

static cr_avar gram(cr_tape *t, cr_avar X)
{
    static cr_array Id;
    Id = cr_array_matrix(k_I3, 3, 3);
    cr_avar Xt = call_a(t, &cr_fn_transpose, cr_targ_arr(X), i64(0), 1);
    return cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(cr_av_matmul(t, X, Xt)),
                            cr_targ_arr(cr_av_const(&Id)));
}

static cr_var chol_gram_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar U = call_a(t, &cr_fn_cholesky, cr_targ_arr(gram(t, X[0])), i64(0), 1);
    return cr_add(t, mix(t, U), cr_mul(t, cr_av_dot(t, U, U), cr_const(0.3)));
}

static void test_cholesky_composed(void **state)
{
    fixture *f = *state;
    prob p = {.f = chol_gram_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[9];
        point(9, seed, 1.0, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

/* ---- cholesky_solve ------------------------------------------------------------------------- */

/* U (3 x 3, its upper triangle read; env non-NULL: U = cholesky(A) of a dense A) and B (a
 * vector, or a 3 x 2 matrix): sum(sin.(Y)) + (Σ Y²) / 4 + Σ B ⊙ Y, Y = cholesky_solve(U, B) */
static cr_var csolve_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    cr_avar U = X[0];
    if (env != NULL)
        U = call_a(t, &cr_fn_cholesky, cr_targ_arr(U), i64(0), 1);
    cr_avar Y = call_a(t, &cr_fn_cholesky_solve, cr_targ_arr(U), cr_targ_arr(X[1]), 2);
    cr_var a = cr_add(t, sum_sin(t, Y), cr_mul(t, sum_sq(t, Y), cr_const(0.25)));
    return cr_add(t, a, cr_av_dot(t, X[1], Y));
}

static void test_cholesky_solve(void **state)
{
    fixture *f = *state;
    static const int chol = 1;
    for (int q = 0; q < 4; q++) {
        bool vec = q % 2 == 0;
        prob p = {.f = csolve_p,
                  .env = q >= 2 ? &chol : NULL,
                  .na = 2,
                  .ndim = {2, vec ? 1 : 2},
                  .shape = {{3, 3}, {3, vec ? 0 : 2}}};
        if (vec)
            p.shape[1][0] = 3;
        for (unsigned seed = 0; seed < 3; seed++) {
            double z[15];
            pd_point(seed + 5 * (unsigned)q, z);
            if (q < 2) /* a factor: a diagonal well away from zero */
                for (int r = 0; r < 3; r++)
                    z[4 * r] -= 1.5;
            point(6, seed + 11, 1.3, z + 9);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
    }
}

/* The same at n = 6 (U 6 x 6, B a vector or a 6 x 2 matrix): room for every n x n product
 * of the form. */
static void test_cholesky_solve_n6(void **state)
{
    fixture *f = *state;
    static const int chol = 1;
    for (int q = 0; q < 4; q++) {
        bool vec = q % 2 == 0;
        prob p = {.f = csolve_p,
                  .env = q >= 2 ? &chol : NULL,
                  .na = 2,
                  .ndim = {2, vec ? 1 : 2},
                  .shape = {{6, 6}, {6, vec ? 1 : 2}}};
        if (vec)
            p.shape[1][0] = 6;
        double z[48];
        point(48, (unsigned)q, 0.5, z);
        for (int r = 0; r < 6; r++)
            z[7 * r] += q >= 2 ? 3.0 : 1.5;
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 2);
    }
}

/* U a variable, B a constant; and U a constant, B a variable (cholesky_solve is linear in
 * B: no S) */
static double k_B[6] = {0.3, -1.2, 0.8, 0.5, -0.4, 1.1},
              k_U[9] = {2, 0.5, -0.3, 0, 1.5, 0.7, 0, 0, 1.8};

static cr_var csolve_uconst_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    static cr_array B, U;
    B = cr_array_matrix(k_B, 3, 2);
    U = cr_array_matrix(k_U, 3, 3);
    cr_avar Ua = env != NULL ? X[0] : cr_av_const(&U), Ba = env != NULL ? cr_av_const(&B) : X[0];
    cr_avar Y = call_a(t, &cr_fn_cholesky_solve, cr_targ_arr(Ua), cr_targ_arr(Ba), 2);
    return cr_add(t, sum_sin(t, Y), cr_mul(t, sum_sq(t, Y), cr_const(0.25)));
}

static void test_cholesky_solve_consts(void **state)
{
    fixture *f = *state;
    static const int uvar = 1;
    prob pu = {.f = csolve_uconst_p, .env = &uvar, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    prob pb = {.f = csolve_uconst_p, .na = 1, .ndim = {2}, .shape = {{3, 2}}};
    for (unsigned seed = 0; seed < 2; seed++) {
        double z[9];
        pd_point(seed, z);
        check_hvp_dirs(f->ctx, &pu, z, 1e-6, 3);
        point(6, seed, 1.0, z);
        check_hvp_dirs(f->ctx, &pb, z, 1e-6, 3);
    }
}

/* ---- cholesky_logdet, cholesky_det ---------------------------------------------------------- */

/* U 3 x 3: sin(l) l + l² / 3 + d cos(d) + sum(U .* U) d / 10, l = cholesky_logdet(U),
 * d = cholesky_det(U) (env non-NULL: of cholesky(U)) */
static cr_var cdet_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    cr_avar U = X[0];
    if (env != NULL)
        U = call_a(t, &cr_fn_cholesky, cr_targ_arr(U), i64(0), 1);
    cr_var l = call_s(t, &cr_fn_cholesky_logdet, cr_targ_arr(U), i64(0), 1);
    cr_var d = call_s(t, &cr_fn_cholesky_det, cr_targ_arr(U), i64(0), 1);
    cr_var a = cr_add(t, cr_mul(t, cr_sin(t, l), l), cr_mul(t, cr_mul(t, l, l), cr_const(1.0 / 3)));
    cr_var b =
        cr_add(t, cr_mul(t, d, cr_cos(t, d)), cr_mul(t, cr_mul(t, sum_sq(t, U), d), cr_const(0.1)));
    return cr_add(t, a, b);
}

static void test_cholesky_logdet_det(void **state)
{
    fixture *f = *state;
    static const int chol = 1;
    prob p = {.f = cdet_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    prob pc = {.f = cdet_p, .env = &chol, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[9];
        pd_point(seed, z);
        for (int r = 0; r < 3; r++)
            z[4 * r] -= 2.4 + 0.3 * r; /* a factor's diagonal, of both signs */
        z[4] = -z[4];
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        pd_point(seed, z);
        check_hvp_dirs(f->ctx, &pc, z, 1e-6, 3);
    }
}

/* cholesky_det alone at factors with zeros on the diagonal (no division in the form) */
static cr_var det_only_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_var d = call_s(t, &cr_fn_cholesky_det, cr_targ_arr(X[0]), i64(0), 1);
    return cr_add(t, cr_sin(t, d), cr_mul(t, d, d));
}

static void test_cholesky_det_zeros(void **state)
{
    fixture *f = *state;
    prob p = {.f = det_only_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (int nz = 0; nz <= 3; nz++) {
        double z[9];
        point(9, (unsigned)nz, 1.0, z);
        for (int r = 0; r < 3; r++)
            z[4 * r] = r < nz ? 0.0 : 1.1 + 0.2 * r;
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

/* ---- A Gaussian log-likelihood and its full Hessian ----------------------------------------- */

/* θ (3 scalars): 0.5 yᵀ cholesky_solve(U, y) + 0.5 cholesky_logdet(U), U = cholesky(K),
 * K = θ₀² G + exp(θ₁) I + θ₂ E + C (env non-NULL: Symmetric(K)) */
static double k_G[9] = {2, 1, 0.5, 1, 2, 1, 0.5, 1, 2}, k_E[9] = {0, 1, 0, 1, 0, 0.5, 0, 0.5, 0},
              k_C[9] = {1, 0.2, 0, 0.2, 1, 0, 0, 0, 1}, k_Id[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1},
              k_y[3] = {0.7, -1.1, 0.4};

static cr_avar scaled(cr_tape *t, cr_var s, const cr_array *M)
{
    return cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(cr_av_const(M)));
}

static cr_avar add_a(cr_tape *t, cr_avar a, cr_avar b)
{
    return cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(a), cr_targ_arr(b));
}

static cr_var gauss_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    static cr_array G, E, C, Id, y;
    G = cr_array_matrix(k_G, 3, 3);
    E = cr_array_matrix(k_E, 3, 3);
    C = cr_array_matrix(k_C, 3, 3);
    Id = cr_array_matrix(k_Id, 3, 3);
    y = cr_array_vector(k_y, 3);
    cr_avar K = add_a(t, scaled(t, cr_mul(t, s[0], s[0]), &G), scaled(t, cr_exp(t, s[1]), &Id));
    K = add_a(t, add_a(t, K, scaled(t, s[2], &E)), cr_av_const(&C));
    if (env != NULL)
        K = call_a(t, &cr_fn_symmetric, cr_targ_arr(K), i64(0), 1);
    cr_avar U = call_a(t, &cr_fn_cholesky, cr_targ_arr(K), i64(0), 1);
    cr_avar a = call_a(t, &cr_fn_cholesky_solve, cr_targ_arr(U), cr_targ_arr(cr_av_const(&y)), 2);
    cr_var q = cr_av_dot(t, cr_av_const(&y), a);
    cr_var l = call_s(t, &cr_fn_cholesky_logdet, cr_targ_arr(U), i64(0), 1);
    return cr_mul(t, cr_add(t, q, l), cr_const(0.5));
}

static void test_gaussian_hessian(void **state)
{
    fixture *f = *state;
    static const int sym = 1;
    prob p = {.f = gauss_p, .ns = 3, .na = 0};
    prob ps = {.f = gauss_p, .env = &sym, .ns = 3, .na = 0};
    double pts[3][3] = {{1.1, 0.3, 0.4}, {0.6, -0.5, -0.2}, {1.7, 0.9, 0.8}};
    for (int q = 0; q < 3; q++) {
        check_hessian(f->ctx, &p, pts[q], 1e-6);
        check_hessian(f->ctx, &ps, pts[q], 1e-6);
    }
}

/* ---- Refusals ------------------------------------------------------------------------------- */

/* Structured arguments the forms do not cover: refused when recorded (CR_EUNIMPL). */
static void test_refusals(void **state)
{
    fixture *f = *state;
    double v[3] = {1.0, 2.0, 0.5}, m[9] = {2, 0.5, 0, 0.5, 2, 0.3, 0, 0.3, 2};
    cr_array va = cr_array_vector(v, 3), ma = cr_array_matrix(m, 3, 3);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_targ out;

    /* (cholesky of a Diagonal or triangular matrix has a form: test_hvp_structured.c) */

    /* cholesky_solve with a Symmetric or a Diagonal U, and with a Diagonal B */
    for (int q = 0; q < 3; q++) {
        cr_tape_reset(t);
        cr_targ M = cr_targ_arr(cr_tape_array_input(t, &ma));
        cr_targ W = cr_targ_arr(cr_tape_array_input(t, &va));
        cr_targ U = q == 0   ? cr_targ_arr(call_a(t, &cr_fn_symmetric, M, M, 1))
                    : q == 1 ? cr_targ_arr(call_a(t, &cr_fn_diagonal, W, W, 1))
                             : M;
        cr_targ B = q == 2 ? cr_targ_arr(call_a(t, &cr_fn_diagonal, W, W, 1)) : W;
        assert_ok(t, cr_tape_status(t));
        cr_targ args[2] = {U, B};
        assert_int_equal(cr_tape_acall(t, &cr_fn_cholesky_solve, args, 2, &out), CR_EUNIMPL);
        assert_contains(cr_tape_errmsg(t),
                        q < 2 ? "cholesky_solve: no second-order form on the tape: U is Diagonal, "
                                "Lower, Symmetric or Hermitian"
                              : "cholesky_solve: no second-order form on the tape: B has a "
                                "structure");
    }
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cholesky, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky_composed, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky_solve, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky_solve_n6, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky_solve_consts, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky_logdet_det, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky_det_zeros, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gaussian_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
