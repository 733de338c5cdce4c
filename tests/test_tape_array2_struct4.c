/*
 * Second-order forms of eigvals, eigen, cholesky and matfun_herm of a Diagonal, Upper or Lower
 * matrix, and of eigen_general and eigvals_general of a structured real matrix, on
 * second-order tapes (src/ad/tape_array2_forms.c). The rules read a structured matrix as its
 * logical dense matrix: eigvals, eigen, cholesky and matfun_herm then take the symmetric
 * matrix of its upper triangle (a Lower matrix's is its diagonal), and fold the cotangent onto
 * that triangle as for a dense matrix before projecting it onto the structure;
 * eigen_general and eigvals_general take the logical matrix itself. Each H v (cr_tape_ahvp)
 * is checked against central differences, along the direction, of the gradient a first-order
 * tape computes (the gradient of a structured input is the projected cotangent, so an S left
 * unprojected, or a cotangent read projected where the form needs it whole, shows), with A
 * recorded as an array input of each structure (dense, Diagonal, Upper, Lower, Symmetric,
 * Hermitian), the direction tagged like A, at several points and directions, each function
 * composed so that its cotangent varies (for eigen and eigen_general, both elements of the
 * tuple in the loss); the view functions Diagonal(u) and Hermitian(X) of dense variables
 * composed with them; a full Hessian (cr_tape_hessian) of three scalars through Diagonal(d)
 * and an Upper factor (cholesky's result) into all of them; and the refusals that remain (a
 * complex A; an f that is not a scalar-table function).
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>

#include "test_sprob.h"

/* H v of the program f of one 3 x 3 input A, tagged with each structure in turn, at npts
 * points (diagonal dg plus noise of amplitude scale everywhere) along 3 directions each. */
static void each_structure(cr_ctx *ctx, prog_fn f, const void *env, const double *dg, double scale,
                           unsigned npts, double tol)
{
    for (int q = 0; q < 6; q++) {
        sprob p = {.p = {.f = f, .env = env, .na = 1, .ndim = {2}, .shape = {{3, 3}}},
                   .st = {k_structs[q]}};
        for (unsigned seed = 0; seed < npts; seed++) {
            double z[9];
            point(9, seed + 3 * (unsigned)q, scale, z);
            for (size_t i = 0; i < 3; i++)
                z[4 * i] += dg[i];
            scheck(ctx, &p, z, tol, 3);
        }
    }
}

/* Weights, all different. */
static double k_w[9] = {1.0, -0.7, 2.0, 0.4, -1.3, 0.9, 0.25, -0.5, 1.7};
static double k_w2[9] = {0.3, 1.1, -0.6, -0.9, 0.5, 1.4, -1.2, 0.8, 0.2};

static cr_var sum_mul(cr_tape *t, cr_avar a, cr_avar b)
{
    return cr_asum(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(a), cr_targ_arr(b)));
}

static cr_avar weights(double *w, size_t r, size_t c, cr_array *store)
{
    *store = c == 1 ? cr_array_vector(w, r) : cr_array_matrix(w, r, c); /* r = 1: a row */
    return cr_aconst(store);
}

/* Σ w_i sin(x_i) + (Σ x_i²)² / 100 over a vector of 3: a cotangent that varies. */
static cr_var vec_loss(cr_tape *t, cr_avar x)
{
    static cr_array w;
    cr_var q = sum_sq(t, x);
    cr_avar s = cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(x));
    return cr_add(t, sum_mul(t, s, weights(k_w, 3, 1, &w)),
                  cr_mul(t, cr_mul(t, q, q), cr_const(0.01)));
}

/* Σ W ∘ sin(M) + (Σ M²)² / 40 over a 3 x 3 M. */
static cr_var mat_loss(cr_tape *t, cr_avar M)
{
    static cr_array W;
    cr_avar s = cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(M));
    cr_var q = sum_sq(t, M);
    return cr_add(t, sum_mul(t, s, weights(k_w, 3, 3, &W)),
                  cr_mul(t, cr_mul(t, q, q), cr_const(0.025)));
}

/* Sign-free in V's columns: Σ W2 ∘ V² + (Σ W ∘ V²)² + sum(λ) Σ W ∘ V² + Σ W ∘ sin(V diag(c) Vᵀ)
 * (the last makes Vᵀ V̄ full where V is a signed permutation, as for a Diagonal or Lower A) */
static cr_var vecs_loss(cr_tape *t, cr_avar lam, cr_avar V)
{
    static cr_array W, W2, c;
    cr_avar v2 = cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(V));
    cr_var a = sum_mul(t, v2, weights(k_w2, 3, 3, &W2));
    cr_var b = sum_mul(t, v2, weights(k_w, 3, 3, &W));
    cr_avar Vc =
        cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(V), cr_targ_arr(weights(k_w2 + 3, 1, 3, &c)));
    cr_avar Vt = call_a(t, &cr_fn_transpose, cr_targ_arr(V), i64(0), 1);
    cr_avar M = cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(cr_amatmul(t, Vc, Vt)));
    cr_var e = sum_mul(t, M, cr_aconst(&W));
    return cr_add(t, cr_add(t, cr_add(t, a, cr_mul(t, b, b)), cr_mul(t, cr_asum(t, lam), b)), e);
}

/* ---- eigvals, eigen, cholesky, matfun_herm ------------------------------------------------ */

/* λ = eigvals(A): vec_loss(λ) */
static cr_var eigvals_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    return vec_loss(t, call_a(t, &cr_fn_eigvals, cr_targ_arr(X[0]), i64(0), 1));
}

/* (λ, V) = eigen(A): vec_loss(λ) + vecs_loss(λ, V) */
static cr_var eigen_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ a = cr_targ_arr(X[0]), lv[2];
    if (cr_tape_acall_n(t, &cr_fn_eigen, &a, 1, lv, 2) != CR_OK)
        return cr_const((double)NAN);
    return cr_add(t, vec_loss(t, lv[0].u.a), vecs_loss(t, lv[0].u.a, lv[1].u.a));
}

/* U = cholesky(A): mat_loss(U) */
static cr_var chol_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    return mat_loss(t, call_a(t, &cr_fn_cholesky, cr_targ_arr(X[0]), i64(0), 1));
}

/* Y = matfun_herm(f, A) (env: f): mat_loss(Y) */
static cr_var matfun_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const cr_value *f = env;
    return mat_loss(t, call_a(t, &cr_fn_matfun_herm, cr_targ_value(*f), cr_targ_arr(X[0]), 2));
}

/* Diagonals: eigenvalues well apart (the noise is 0.5 at most); positive for cholesky; small
 * for matfun_herm (exp of the spectrum stays moderate). */
static const double k_dg[3] = {3.2, -2.1, 1.1}, k_dpos[3] = {4.0, 3.0, 2.0},
                    k_dmf[3] = {1.2, -0.8, 0.3};

static void test_eigvals_eigen(void **state)
{
    fixture *f = *state;
    each_structure(f->ctx, eigvals_p, NULL, k_dg, 0.5, 2, 1e-6);
    each_structure(f->ctx, eigen_p, NULL, k_dg, 0.5, 2, 1e-6);
}

static void test_cholesky(void **state)
{
    fixture *f = *state;
    each_structure(f->ctx, chol_p, NULL, k_dpos, 0.5, 2, 1e-6);
}

static void test_matfun(void **state)
{
    fixture *f = *state;
    each_structure(f->ctx, matfun_p, &cr_fn_exp, k_dmf, 0.4, 2, 1e-6);
    each_structure(f->ctx, matfun_p, &cr_fn_sin, k_dmf, 0.4, 1, 1e-6);
    each_structure(f->ctx, matfun_p, &cr_fn_tanh, k_dmf, 0.4, 1, 1e-6);
}

/* ---- eigen_general, eigvals_general ------------------------------------------------------- */

/* f.(a) of a complex array variable a, f = creal or cimag */
static cr_avar cpart(cr_tape *t, const cr_value *f, cr_avar a)
{
    return cr_abroadcast1(t, f, cr_targ_arr(a));
}

/* vec_loss(re λ) + Σ w2 ∘ (im λ)² (the eigenvalues of these matrices are real: im λ = 0, with
 * a nonzero cotangent nonetheless) */
static cr_var clam_loss(cr_tape *t, cr_avar lam)
{
    static cr_array w2;
    cr_avar im2 = cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(cpart(t, &cr_fn_cimag, lam)));
    return cr_add(t, vec_loss(t, cpart(t, &cr_fn_creal, lam)),
                  sum_mul(t, im2, weights(k_w2, 3, 1, &w2)));
}

/* Through the gauge (unit columns, largest component real and positive): Σ W ∘ sin(re V) +
 * Σ W2 ∘ (im V)² + (Σ W2 ∘ |V|²)² */
static cr_var cvecs_loss(cr_tape *t, cr_avar V)
{
    static cr_array W, W2;
    cr_avar re = cpart(t, &cr_fn_creal, V), im = cpart(t, &cr_fn_cimag, V);
    cr_avar r2 = cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(re));
    cr_avar i2 = cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(im));
    cr_var a = sum_mul(t, cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(re)), weights(k_w, 3, 3, &W));
    cr_var b = sum_mul(t, i2, weights(k_w2, 3, 3, &W2));
    cr_var c =
        sum_mul(t, cr_abroadcast2(t, &cr_fn_add, cr_targ_arr(r2), cr_targ_arr(i2)), cr_aconst(&W2));
    return cr_add(t, cr_add(t, a, b), cr_mul(t, c, c));
}

static cr_var eigvals_general_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    return clam_loss(t, call_a(t, &cr_fn_eigvals_general, cr_targ_arr(X[0]), i64(0), 1));
}

/* (λ, V) = eigen_general(A): clam_loss(λ) + cvecs_loss(V) + sum(re λ) Σ re V */
static cr_var eigen_general_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ a = cr_targ_arr(X[0]), lv[2];
    if (cr_tape_acall_n(t, &cr_fn_eigen_general, &a, 1, lv, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var c = cr_mul(t, cr_asum(t, cpart(t, &cr_fn_creal, lv[0].u.a)),
                      cr_asum(t, cpart(t, &cr_fn_creal, lv[1].u.a)));
    return cr_add(t, cr_add(t, clam_loss(t, lv[0].u.a), cvecs_loss(t, lv[1].u.a)), c);
}

/* Real eigenvalues well apart, and eigenvectors whose largest component is clearly the
 * largest (the diagonal dominates the noise), for every structure: a smooth gauge. */
static void test_eigen_general(void **state)
{
    fixture *f = *state;
    each_structure(f->ctx, eigvals_general_p, NULL, k_dg, 0.5, 2, 1e-6);
    each_structure(f->ctx, eigen_general_p, NULL, k_dg, 0.5, 2, 1e-6);
}

/* ---- A full Hessian of scalars -------------------------------------------------------------
 */

/* x, y, w: M = x E + y F + C (3 x 3, symmetric positive definite read on its upper triangle),
 * d = (3 + x, 2.5 + w, 6 + y), D = Diagonal(d), U = cholesky(Symmetric(M)) (tagged Upper):
 *   sum(sin.(eigvals(D))) + eigen(D): sum(λ²) + Σ W ∘ V² + sum(sin.(cholesky(D)))
 *   + sum(sin.(matfun_herm(sin, D))) + sum(re(eigvals_general(D)).²)
 *   + sum(sin.(eigvals(U))) + sum(sin.(matfun_herm(tanh, U))) + sum(sin.(re eigen_general(U).λ))
 *   + Σ W ∘ re(eigen_general(U).V)  */
static double k_E9[9] = {1, 0, 0, 0, 0, 1, 0, 0, 1}, k_F9[9] = {0, 1, 0, 0, 1, 0, 1, 0, 0},
              k_C9[9] = {9, 0.2, 0.1, 0, 4, 0.3, 0, 0, 2.5}, k_e1[3] = {1, 0, 0},
              k_e2[3] = {0, 1, 0}, k_e3[3] = {0, 0, 1}, k_d0[3] = {3, 2.5, 6};

static cr_avar lin3(cr_tape *t, cr_var a, cr_array *A, cr_var b, cr_array *B, cr_array *C)
{
    cr_avar M = cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(a), cr_targ_arr(cr_aconst(A)));
    M = cr_abroadcast2(
        t, &cr_fn_add, cr_targ_arr(M),
        cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(b), cr_targ_arr(cr_aconst(B)))));
    return cr_abroadcast2(t, &cr_fn_add, cr_targ_arr(M), cr_targ_arr(cr_aconst(C)));
}

static cr_var hess_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array E, F, C, e1, e2, e3, d0, W;
    E = cr_array_matrix(k_E9, 3, 3);
    F = cr_array_matrix(k_F9, 3, 3);
    C = cr_array_matrix(k_C9, 3, 3);
    e1 = cr_array_vector(k_e1, 3);
    e2 = cr_array_vector(k_e2, 3);
    e3 = cr_array_vector(k_e3, 3);
    d0 = cr_array_vector(k_d0, 3);
    cr_avar M = lin3(t, s[0], &E, s[1], &F, &C);
    cr_avar dv = lin3(t, s[0], &e1, s[2], &e2, &d0);
    dv = cr_abroadcast2(
        t, &cr_fn_add, cr_targ_arr(dv),
        cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s[1]), cr_targ_arr(cr_aconst(&e3)))));
    cr_targ Dg = cr_targ_arr(call_a(t, &cr_fn_diagonal, cr_targ_arr(dv), i64(0), 1));
    cr_targ Sy = cr_targ_arr(call_a(t, &cr_fn_symmetric, cr_targ_arr(M), i64(0), 1));
    cr_targ U = cr_targ_arr(call_a(t, &cr_fn_cholesky, Sy, i64(0), 1));
    cr_targ r[2];
    cr_var a = sum_sin(t, call_a(t, &cr_fn_eigvals, Dg, i64(0), 1));
    if (cr_tape_acall_n(t, &cr_fn_eigen, &Dg, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var b = cr_add(t, sum_sq(t, r[0].u.a),
                      sum_mul(t, cr_abroadcast1(t, &cr_fn_square, r[1]), weights(k_w, 3, 3, &W)));
    cr_var c = sum_sin(t, call_a(t, &cr_fn_cholesky, Dg, i64(0), 1));
    cr_var d = sum_sin(t, call_a(t, &cr_fn_matfun_herm, cr_targ_value(cr_fn_sin), Dg, 2));
    cr_var e = sum_sq(t, cpart(t, &cr_fn_creal, call_a(t, &cr_fn_eigvals_general, Dg, i64(0), 1)));
    cr_var g = sum_sin(t, call_a(t, &cr_fn_eigvals, U, i64(0), 1));
    cr_var h = sum_sin(t, call_a(t, &cr_fn_matfun_herm, cr_targ_value(cr_fn_tanh), U, 2));
    if (cr_tape_acall_n(t, &cr_fn_eigen_general, &U, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var i = sum_sin(t, cpart(t, &cr_fn_creal, r[0].u.a));
    cr_var j = sum_mul(t, cpart(t, &cr_fn_creal, r[1].u.a), cr_aconst(&W));
    cr_var sum = cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_add(t, e, g));
    return cr_add(t, sum, cr_add(t, cr_add(t, h, i), j));
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = hess_p, .ns = 3, .na = 0};
    double pts[3][3] = {{1.3, 0.4, -1.1}, {-0.7, 0.9, 1.5}, {0.6, -0.8, 2.1}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* ---- The view functions, composed ------------------------------------------------------------
 */

/* X 3 x 3, u of 3 (dense variables; the directions dense too), D = Diagonal(u):
 *   vec_loss(eigvals(D)) + eigen(D): vecs_loss + mat_loss(cholesky(D))
 *   + mat_loss(matfun_herm(exp, D) / 4) + clam_loss(eigvals_general(D))
 *   + eigen_general(Hermitian(X)): clam_loss(λ) + cvecs_loss(V) */
static cr_var views_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ x = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]), r[2];
    cr_targ Dg = cr_targ_arr(call_a(t, &cr_fn_diagonal, u, u, 1));
    cr_targ He = cr_targ_arr(call_a(t, &cr_fn_hermitian, x, x, 1));
    cr_var a = vec_loss(t, call_a(t, &cr_fn_eigvals, Dg, i64(0), 1));
    if (cr_tape_acall_n(t, &cr_fn_eigen, &Dg, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var b = vecs_loss(t, r[0].u.a, r[1].u.a);
    cr_var c = mat_loss(t, call_a(t, &cr_fn_cholesky, Dg, i64(0), 1));
    cr_avar E = call_a(t, &cr_fn_matfun_herm, cr_targ_value(cr_fn_exp), Dg, 2);
    cr_var d = mat_loss(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(E), f64(0.25)));
    cr_var e = clam_loss(t, call_a(t, &cr_fn_eigvals_general, Dg, i64(0), 1));
    if (cr_tape_acall_n(t, &cr_fn_eigen_general, &He, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var g = cr_add(t, clam_loss(t, r[0].u.a), cvecs_loss(t, r[1].u.a));
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_add(t, e, g));
}

static void test_views(void **state)
{
    fixture *f = *state;
    prob p = {.f = views_p, .na = 2, .ndim = {2, 1}, .shape = {{3, 3}, {3, 1}}};
    static const double u0[3] = {2.5, 1.2, 0.4};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[12];
        point(12, seed, 0.4, z);
        for (int i = 0; i < 3; i++) {
            z[4 * i] += k_dg[i];
            z[9 + i] += u0[i]; /* u positive (cholesky), its elements apart */
        }
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

/* ---- Refusals ------------------------------------------------------------------------------- */

/* Structured real matrices are accepted now (the tests above); what remains refused when
 * recording (CR_EUNIMPL, sticky): a complex A for eigen_general, eigvals_general and
 * matfun_herm, structured or not, and an f that is not a scalar-table function of one
 * argument for matfun_herm, whatever A's structure. */
static void test_refusals(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double m9[9] = {2, 1, 0, 1, 3, 1, 0, 1, 4};
    cr_complex c9[9] = {2, 1, 0, 1, 3, 1, 0, 1, 4};
    cr_array ma = cr_array_matrix(m9, 3, 3), ca;
    size_t sh[2] = {3, 3};
    assert_int_equal(cr_array_view_init(&ca, c9, CR_DT_C128, 2, sh, NULL), CR_OK);
    static const char *const names[3] = {"eigen_general", "eigvals_general", "matfun_herm"};
    for (int q = 0; q < 6; q++) {
        int fn = q % 3;
        ca.structure = q < 3 ? CR_MAT_DENSE : CR_MAT_UPPER;
        cr_tape_reset(t);
        cr_targ A = cr_targ_arr(cr_tape_array_input(t, &ca)), out[2];
        assert_ok(t, cr_tape_status(t));
        cr_targ args[2] = {cr_targ_value(cr_fn_exp), A};
        cr_status st = fn == 0   ? cr_tape_acall_n(t, &cr_fn_eigen_general, &A, 1, out, 2)
                       : fn == 1 ? cr_tape_acall(t, &cr_fn_eigvals_general, &A, 1, out)
                                 : cr_tape_acall(t, &cr_fn_matfun_herm, args, 2, out);
        assert_int_equal(st, CR_EUNIMPL);
        char msg[160];
        snprintf(msg, sizeof msg,
                 "%s: no second-order form on the tape: A is complex; the form covers real "
                 "matrices only",
                 names[fn]);
        assert_contains(cr_tape_errmsg(t), msg);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL); /* sticky */
    }
    /* matfun_herm of an f that is not a scalar-table function of one argument, A Lower */
    ma.structure = CR_MAT_LOWER;
    cr_tape_reset(t);
    cr_targ args[2] = {cr_targ_value(cr_fn_hypot), cr_targ_arr(cr_tape_array_input(t, &ma))}, out;
    assert_int_equal(cr_tape_acall(t, &cr_fn_matfun_herm, args, 2, &out), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "matfun_herm: no second-order form on the tape: f is not a "
                                       "scalar-table function of one argument");
    /* the same programs are accepted with a real A of each structure */
    for (int q = 0; q < 6; q++) {
        ma.structure = k_structs[q];
        bool dg = ma.structure == CR_MAT_DIAGONAL;
        ma.strides[0] = dg ? 4 : 3;
        ma.strides[1] = dg ? 0 : 1;
        cr_tape_reset(t);
        cr_targ A = cr_targ_arr(cr_tape_array_input(t, &ma)), lv[2], y;
        cr_targ margs[2] = {cr_targ_value(cr_fn_exp), A};
        assert_ok(t, cr_tape_acall_n(t, &cr_fn_eigen_general, &A, 1, lv, 2));
        assert_ok(t, cr_tape_acall(t, &cr_fn_eigvals_general, &A, 1, &y));
        assert_ok(t, cr_tape_acall(t, &cr_fn_matfun_herm, margs, 2, &y));
        assert_ok(t, cr_tape_acall_n(t, &cr_fn_eigen, &A, 1, lv, 2));
        assert_ok(t, cr_tape_acall(t, &cr_fn_eigvals, &A, 1, &y));
        assert_ok(t, cr_tape_acall(t, &cr_fn_cholesky, &A, 1, &y));
    }
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_eigvals_eigen, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matfun, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eigen_general, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_views, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
