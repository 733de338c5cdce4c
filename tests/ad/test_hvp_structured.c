/*
 * Second-order forms of logabsdet, logdet, det, svdvals, opnorm, expm, svd, qr, lu and pinv
 * with a structured A (Diagonal, Upper, Lower, Symmetric, Hermitian, and dense), of the other
 * forms of a matrix argument (logsumexp, prod, norm, var, std, softmax, logsoftmax, cumprod,
 * normalize, sum(f, A), cholesky_logdet, cholesky_det) with one, and of solve(A, B) and
 * rdiv(B, A) with a structured B, on second-order tapes (src/ad/tape_array2.c: the projection of S;
 * cr__form_pullback_dense). The rules read a
 * structured matrix as its logical dense matrix and project its cotangent onto its
 * structure; so must each S be. Each H v (cr_tape_ahvp) is checked against central
 * differences, along the direction, of the gradient a first-order tape computes, at several
 * points and directions:
 *   - A (or B) recorded as a structured array input (the gradient of such an input is the
 *     projected cotangent itself, so an S left unprojected shows in H v), the direction
 *     tagged like it; each function composed with other operations so that its cotangent
 *     varies;
 *   - B a structured constant (the forms need B̄ unprojected for A's S);
 * the view functions Symmetric(X), Hermitian(X), Diagonal(u) of dense variables composed with
 * them; a full Hessian (cr_tape_hessian) of a composite of three scalars through the view functions
 * Symmetric(M) and Diagonal(d) into all of them; and the refusal that remains (a complex B).
 */
#include <math.h>
#include <stdio.h>

#include "test_sprob.h"
#include "test_util.h"
#include <complex.h>

/* A point of L components whose n x n block at off has the diagonal dg[i] + noise (noise of
 * amplitude scale elsewhere too). */
static void spoint(size_t L, unsigned seed, double scale, size_t off, size_t n, const double *dg,
                   double *z)
{
    point(L, seed, scale, z);
    for (size_t i = 0; i < n && dg != NULL; i++)
        z[off + i * n + i] += dg[i];
}

/* Diagonals: singular values (and |determinant|) well apart; a positive determinant. */
static const double k_dg[3] = {3.2, -2.1, 1.1}, k_dpos[3] = {3.2, 2.1, 1.1};

/* H v of the program f of one 3 x 3 input A, tagged with each structure in turn, at npts
 * points (diagonal dg, noise scale) along 3 directions each. */
static void each_structure(cr_ctx *ctx, prog_fn f, const void *env, const double *dg, double scale,
                           unsigned npts, double tol)
{
    for (int q = 0; q < 6; q++) {
        sprob p = {.p = {.f = f, .env = env, .na = 1, .ndim = {2}, .shape = {{3, 3}}},
                   .st = {k_structs[q]}};
        for (unsigned seed = 0; seed < npts; seed++) {
            double z[9];
            spoint(9, seed + 3 * (unsigned)q, scale, 0, 3, dg, z);
            scheck(ctx, &p, z, tol, 3);
        }
    }
}

static cr_var sum_mul(cr_tape *t, cr_avar a, cr_avar b)
{
    return cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(a), cr_targ_arr(b)));
}

/* Weights of 3 x 3 elements, all different. */
static double k_w[9] = {1.0, -0.7, 2.0, 0.4, -1.3, 0.9, 0.25, -0.5, 1.7};
static double k_w2[9] = {0.3, 1.1, -0.6, -0.9, 0.5, 1.4, -1.2, 0.8, 0.2};

static cr_avar weights(double *w, cr_array *store)
{
    *store = cr_array_matrix(w, 3, 3);
    return cr_av_const(store);
}

/* sin(y) + y² of a scalar: a cotangent that varies with y */
static cr_var sin_sq(cr_tape *t, cr_var y)
{
    return cr_add(t, cr_sin(t, y), cr_mul(t, y, y));
}

/* ---- logabsdet, logdet, det ------------------------------------------------------------- */

/* (l, sign) = logabsdet(A): sin(l) + l² + sign l */
static cr_var lad_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ a = cr_targ_arr(X[0]), r[2];
    if (cr_tape_acall_n(t, &cr_fn_logabsdet, &a, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var l = r[0].u.s;
    return cr_add(t, sin_sq(t, l), cr_mul(t, r[1].u.s, l));
}

/* env: the function (logdet or det): sin(y) + y² (det scaled by 1/10) */
static cr_var det_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const cr_value *f = env;
    cr_var y = call_s(t, f, cr_targ_arr(X[0]), i64(0), 1);
    if (f == &cr_fn_det)
        y = cr_mul(t, y, cr_const(0.1));
    return sin_sq(t, y);
}

static void test_logabsdet(void **state)
{
    fixture *f = *state;
    each_structure(f->ctx, lad_p, NULL, k_dg, 0.8, 2, 1e-6);
    each_structure(f->ctx, det_p, &cr_fn_logdet, k_dpos, 0.8, 2, 1e-6);
    each_structure(f->ctx, det_p, &cr_fn_det, k_dg, 0.8, 2, 1e-6);
}

/* ---- svdvals, opnorm ---------------------------------------------------------------------- */

/* s = svdvals(A): Σ w_i sin(s_i) + (Σ s_i²)² / 100 */
static cr_var svdvals_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static cr_array w;
    w = cr_array_vector(k_w, 3);
    cr_avar sv = call_a(t, &cr_fn_svdvals, cr_targ_arr(X[0]), i64(0), 1);
    cr_var q = sum_sq(t, sv);
    return cr_add(t, sum_mul(t, sv, cr_av_const(&w)), cr_mul(t, cr_mul(t, q, q), cr_const(0.01)));
}

/* y = opnorm(A[, p]) (env: NULL for the default p = 2, else p): sin(y) + y² */
static cr_var opnorm_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const double *p = env;
    cr_var y = p == NULL ? call_s(t, &cr_fn_opnorm, cr_targ_arr(X[0]), i64(0), 1)
                         : call_s(t, &cr_fn_opnorm, cr_targ_arr(X[0]), f64(*p), 2);
    return sin_sq(t, y);
}

static void test_svdvals_opnorm(void **state)
{
    fixture *f = *state;
    static const double p2 = 2.0, p1 = 1.0, pinf = INFINITY;
    each_structure(f->ctx, svdvals_p, NULL, k_dg, 0.6, 2, 1e-6);
    each_structure(f->ctx, opnorm_p, NULL, k_dg, 0.6, 2, 1e-6);
    each_structure(f->ctx, opnorm_p, &p2, k_dg, 0.6, 1, 1e-6);
    each_structure(f->ctx, opnorm_p, &p1, k_dg, 0.6, 1, 1e-6);
    each_structure(f->ctx, opnorm_p, &pinf, k_dg, 0.6, 1, 1e-6);
}

/* ---- expm --------------------------------------------------------------------------------- */

/* E = expm(A): sum(W .* sin.(E)) + sum(E)² / 10 */
static cr_var expm_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static cr_array W;
    cr_avar E = call_a(t, &cr_fn_expm, cr_targ_arr(X[0]), i64(0), 1);
    cr_var a = sum_mul(t, weights(k_w, &W), cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(E)));
    cr_var b = cr_av_sum(t, E);
    return cr_add(t, a, cr_mul(t, cr_mul(t, b, b), cr_const(0.1)));
}

static void test_expm(void **state)
{
    fixture *f = *state;
    each_structure(f->ctx, expm_p, NULL, NULL, 0.9, 2, 1e-6);
}

/* ---- svd ---------------------------------------------------------------------------------- */

/* (U, s, V) = svd(A): sum(W1 .* U.²) + sum(W2 .* V.²) + Σ w_i sin(s_i) + (Σ s_i²)² / 100
 * + sum(sin.(U Vᵀ)) (sign-free) */
static cr_var svd_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static cr_array W1, W2, w;
    cr_targ usv[3], a = cr_targ_arr(X[0]);
    if (cr_tape_acall_n(t, &cr_fn_svd, &a, 1, usv, 3) != CR_OK)
        return cr_const((double)NAN);
    cr_avar U = usv[0].u.a, S = usv[1].u.a, V = usv[2].u.a;
    cr_var lu = sum_mul(t, weights(k_w, &W1), cr_av_broadcast1(t, &cr_fn_square, usv[0]));
    cr_var lv = sum_mul(t, weights(k_w2, &W2), cr_av_broadcast1(t, &cr_fn_square, usv[2]));
    w = cr_array_vector(k_w2 + 3, 3);
    cr_var ls = sum_mul(t, cr_av_const(&w), cr_av_broadcast1(t, &cr_fn_sin, usv[1]));
    cr_var q = sum_sq(t, S);
    cr_avar Vt = call_a(t, &cr_fn_transpose, cr_targ_arr(V), i64(0), 1);
    cr_var luv = sum_sin(t, cr_av_matmul(t, U, Vt));
    cr_var b = cr_add(t, ls, cr_mul(t, cr_mul(t, q, q), cr_const(0.01)));
    return cr_add(t, cr_add(t, cr_add(t, lu, lv), b), luv);
}

static void test_svd(void **state)
{
    fixture *f = *state;
    each_structure(f->ctx, svd_p, NULL, k_dg, 0.6, 2, 1e-6);
}

/* ---- qr, lu, pinv ------------------------------------------------------------------------- */

/* Σ w ⊙ sin(M) + (Σ M²)² / 40 over a 3 x 3 M: a loss whose cotangent varies by element. */
static cr_var mix(cr_tape *t, cr_avar M)
{
    static cr_array W;
    cr_avar s = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(M));
    cr_var q = sum_sq(t, M);
    return cr_add(t, sum_mul(t, s, weights(k_w, &W)), cr_mul(t, cr_mul(t, q, q), cr_const(0.025)));
}

/* (Q, R) = qr(A): mix(R) + sum(Q .^ 3 .* W) + sum(R) sum(sin.(Q)) */
static cr_var qr_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static cr_array W;
    cr_targ qr[2], a = cr_targ_arr(X[0]);
    if (cr_tape_acall_n(t, &cr_fn_qr, &a, 1, qr, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_avar Q = qr[0].u.a, R = qr[1].u.a;
    cr_avar q3 = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(Q),
                                  cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(Q))));
    cr_var b = cr_add(t, mix(t, R), sum_mul(t, q3, weights(k_w2, &W)));
    return cr_add(t, b, cr_mul(t, cr_av_sum(t, R), sum_sin(t, Q)));
}

/* (L, U, p) = lu(A): mix(L) + sum(U .^ 2 .* W) + sum(sin.(L)) sum(U) */
static cr_var lu_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static cr_array W;
    cr_targ lup[3], a = cr_targ_arr(X[0]);
    if (cr_tape_acall_n(t, &cr_fn_lu, &a, 1, lup, 3) != CR_OK)
        return cr_const((double)NAN);
    cr_avar L = lup[0].u.a, U = lup[1].u.a;
    cr_avar u2 = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(U));
    cr_var b = cr_add(t, mix(t, L), sum_mul(t, u2, weights(k_w2, &W)));
    return cr_add(t, b, cr_mul(t, sum_sin(t, L), cr_av_sum(t, U)));
}

/* Y = pinv(A): sum(sin.(Y W)) + (Σ Y²)² */
static cr_var pinv_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static cr_array W;
    cr_avar Y = call_a(t, &cr_fn_pinv, cr_targ_arr(X[0]), i64(0), 1);
    cr_var q = sum_sq(t, Y);
    return cr_add(t, sum_sin(t, cr_av_matmul(t, Y, weights(k_w, &W))), cr_mul(t, q, q));
}

static void test_qr_lu_pinv(void **state)
{
    fixture *f = *state;
    each_structure(f->ctx, qr_p, NULL, k_dg, 0.8, 2, 1e-6);
    each_structure(f->ctx, lu_p, NULL, k_dg, 0.8, 2, 1e-6);
    each_structure(f->ctx, pinv_p, NULL, k_dg, 0.8, 2, 1e-6);
}

/* ---- The other forms of a matrix argument -------------------------------------------------- */

/* f(A[, dims]) with a scalar result (sin(y) + y², cholesky_det's y scaled by 1/100) or an array
 * result (sum(sin.(Y))); sum(sin, A) for f = sum. */
typedef struct ofn {
    const cr_value *f;
    bool array;  /* an array result */
    int64_t dim; /* the dims argument, or -1 for none */
} ofn;

static cr_var other_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const ofn *o = env;
    cr_targ A = cr_targ_arr(X[0]), dm = i64(o->dim);
    size_t n = o->dim < 0 ? 1 : 2;
    if (o->array)
        return sum_sin(t, call_a(t, o->f, A, dm, n));
    if (o->f == &cr_fn_sum)
        return sin_sq(t, call_s(t, o->f, cr_targ_value(cr_fn_sin), A, 2));
    if (o->dim >= 0) {
        cr_avar y = call_a(t, o->f, A, dm, 2);
        cr_var q = sum_sq(t, y);
        return cr_add(t, sum_sin(t, y), cr_mul(t, q, q));
    }
    cr_var y = call_s(t, o->f, A, dm, 1);
    if (o->f == &cr_fn_cholesky_det)
        y = cr_mul(t, y, cr_const(0.01));
    return sin_sq(t, y);
}

/* The forms written for dense arrays, whose rules project a structured matrix's cotangent
 * too: their S goes through the same projection (put). */
static void test_other_forms(void **state)
{
    fixture *f = *state;
    static const ofn fns[] = {{&cr_fn_logsumexp, false, -1},
                              {&cr_fn_logsumexp, false, 0},
                              {&cr_fn_prod, false, -1},
                              {&cr_fn_norm, false, -1},
                              {&cr_fn_var, false, -1},
                              {&cr_fn_var, false, 1},
                              {&cr_fn_std, false, -1},
                              {&cr_fn_softmax, true, -1},
                              {&cr_fn_logsoftmax, true, 1},
                              {&cr_fn_cumprod, true, 0},
                              {&cr_fn_normalize, true, -1},
                              {&cr_fn_sum, false, -1},
                              {&cr_fn_cholesky_logdet, false, -1},
                              {&cr_fn_cholesky_det, false, -1}};
    for (size_t q = 0; q < sizeof fns / sizeof fns[0]; q++)
        each_structure(f->ctx, other_p, &fns[q], k_dpos, 0.5, 1, 1e-6);
}

/* ---- solve and rdiv with a structured B ------------------------------------------------- */

/* A = X[0], B = X[1] (3 x 3 both; env non-NULL: B the constant *env instead), Y = A \ B or
 * (rdiv) Y = B / A: sum(sin.(Y)) + (Σ Y²)² / 10 */
typedef struct benv {
    bool rdiv;
    const cr_array *B; /* a constant B, or NULL */
} benv;

static cr_var solve_b_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const benv *e = env;
    cr_targ A = cr_targ_arr(X[0]), B = cr_targ_arr(e->B != NULL ? cr_av_const(e->B) : X[1]);
    cr_avar Y = e->rdiv ? call_a(t, &cr_fn_rdiv, B, A, 2) : call_a(t, &cr_fn_solve, A, B, 2);
    cr_var q = sum_sq(t, Y);
    return cr_add(t, sum_sin(t, Y), cr_mul(t, cr_mul(t, q, q), cr_const(0.1)));
}

static void test_solve_rdiv_b(void **state)
{
    fixture *f = *state;
    static const uint8_t a_structs[3] = {CR_MAT_DENSE, CR_MAT_SYMMETRIC, CR_MAT_UPPER};
    for (int r = 0; r < 2; r++)
        for (int qa = 0; qa < 3; qa++)
            for (int qb = 0; qb < 6; qb++) {
                benv e = {r == 1, NULL};
                sprob p = {.p = {.f = solve_b_p,
                                 .env = &e,
                                 .na = 2,
                                 .ndim = {2, 2},
                                 .shape = {{3, 3}, {3, 3}}},
                           .st = {a_structs[qa], k_structs[qb]}};
                double z[18];
                spoint(18, (unsigned)(qb + 6 * qa + 18 * r), 0.8, 0, 3, k_dg, z);
                scheck(f->ctx, &p, z, 1e-6, 3);
            }
    /* B a structured constant: A's S needs B̄ unprojected */
    double b9[9] = {0.7, -1.2, 0.4, 1.5, 0.3, -0.8, -0.6, 0.9, 1.1};
    cr_array B = cr_array_matrix(b9, 3, 3);
    for (int r = 0; r < 2; r++)
        for (int qb = 1; qb < 6; qb++) {
            B.structure = k_structs[qb];
            if (B.structure == CR_MAT_DIAGONAL) {
                B.strides[0] = 4;
                B.strides[1] = 0;
            } else {
                B.strides[0] = 3;
                B.strides[1] = 1;
            }
            benv e = {r == 1, &B};
            sprob p = {.p = {.f = solve_b_p, .env = &e, .na = 1, .ndim = {2}, .shape = {{3, 3}}},
                       .st = {CR_MAT_DENSE}};
            double z[9];
            spoint(9, (unsigned)(qb + 7 * r), 0.8, 0, 3, k_dg, z);
            scheck(f->ctx, &p, z, 1e-6, 3);
        }
}

/* ---- A full Hessian of scalars through the view functions ----------------------------------
 */

/* x, y, w: M = x E + y F + C (3 x 3), d = (x, w, 2 + y), S = Symmetric(M), D = Diagonal(d):
 *   sin(logabsdet(S).l) + sum(sin.(svdvals(S))) + opnorm(D)² + sum(sin.(expm(S) / 8))
 *   + sum(sin.(pinv(D))) + sum(sin.(qr(S).R)) + sum(sin.(lu(S).U)) + sum((M \ D).²)
 *   + sum(sin.(S / M)) + sum(svd(S).s .^ 2) + sin(det(S) / 10) */
static double k_E9[9] = {1, 0, 0, 0, 0, 1, 0, 0, 1}, k_F9[9] = {0, 1, 0, 0, 1, 0, 1, 0, 0},
              k_C9[9] = {3, 0.2, 0.1, 0, -2.5, 0.3, 0, 0, 2}, k_e1[3] = {1, 0, 0},
              k_e3[3] = {0, 0, 1}, k_e2[3] = {0, 1, 0}, k_d0[3] = {0, 0, 2}, k_eighth = 0.125;

static cr_avar lin3(cr_tape *t, cr_var a, cr_array *A, cr_var b, cr_array *B, cr_array *C)
{
    cr_avar M = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(a), cr_targ_arr(cr_av_const(A)));
    M = cr_av_broadcast2(
        t, &cr_fn_add, cr_targ_arr(M),
        cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(b), cr_targ_arr(cr_av_const(B)))));
    return cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(M), cr_targ_arr(cr_av_const(C)));
}

static cr_var hess_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array E, F, C, e1, e2, e3, d0;
    E = cr_array_matrix(k_E9, 3, 3);
    F = cr_array_matrix(k_F9, 3, 3);
    C = cr_array_matrix(k_C9, 3, 3);
    e1 = cr_array_vector(k_e1, 3);
    e2 = cr_array_vector(k_e2, 3);
    e3 = cr_array_vector(k_e3, 3);
    d0 = cr_array_vector(k_d0, 3);
    cr_avar M = lin3(t, s[0], &E, s[1], &F, &C);
    cr_avar dv = lin3(t, s[0], &e1, s[2], &e2, &d0);
    dv = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(dv),
                          cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[1]),
                                                       cr_targ_arr(cr_av_const(&e3)))));
    cr_targ Sy = cr_targ_arr(call_a(t, &cr_fn_symmetric, cr_targ_arr(M), i64(0), 1));
    cr_targ Dg = cr_targ_arr(call_a(t, &cr_fn_diagonal, cr_targ_arr(dv), i64(0), 1));
    cr_targ r[3];
    if (cr_tape_acall_n(t, &cr_fn_logabsdet, &Sy, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var a = cr_sin(t, r[0].u.s);
    cr_var b = sum_sin(t, call_a(t, &cr_fn_svdvals, Sy, i64(0), 1));
    cr_var on = call_s(t, &cr_fn_opnorm, Dg, i64(0), 1);
    cr_var c = cr_mul(t, on, on);
    cr_avar Ex = call_a(t, &cr_fn_expm, Sy, i64(0), 1);
    cr_var d = sum_sin(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(Ex), f64(k_eighth)));
    cr_var e = sum_sin(t, call_a(t, &cr_fn_pinv, Dg, i64(0), 1));
    if (cr_tape_acall_n(t, &cr_fn_qr, &Sy, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var g = sum_sin(t, r[1].u.a);
    if (cr_tape_acall_n(t, &cr_fn_lu, &Sy, 1, r, 3) != CR_OK)
        return cr_const((double)NAN);
    cr_var h = sum_sin(t, r[1].u.a);
    cr_var i = sum_sq(t, call_a(t, &cr_fn_solve, cr_targ_arr(M), Dg, 2));
    cr_var j = sum_sin(t, call_a(t, &cr_fn_rdiv, Sy, cr_targ_arr(M), 2));
    if (cr_tape_acall_n(t, &cr_fn_svd, &Sy, 1, r, 3) != CR_OK)
        return cr_const((double)NAN);
    cr_var k = sum_sq(t, r[1].u.a);
    cr_var l = cr_sin(t, cr_mul(t, call_s(t, &cr_fn_det, Sy, i64(0), 1), cr_const(0.1)));
    cr_var sum = cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_add(t, e, g));
    return cr_add(t, cr_add(t, sum, cr_add(t, h, i)), cr_add(t, cr_add(t, j, k), l));
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

/* X 3 x 3, u of 3 (dense variables; the directions dense too):
 *   logabsdet(Hermitian(X)).l² + sum(sin.(svdvals(Diagonal(u)))) + sum(sin.(pinv(Symmetric(X))))
 *   + sum(sin.(qr(Symmetric(X)).Q)) + sum((X \ Diagonal(u)).²) + sum(sin.(Hermitian(X) / X)) */
static cr_var views_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ x = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]), r[2];
    cr_targ Sy = cr_targ_arr(call_a(t, &cr_fn_symmetric, x, x, 1));
    cr_targ He = cr_targ_arr(call_a(t, &cr_fn_hermitian, x, x, 1));
    cr_targ Dg = cr_targ_arr(call_a(t, &cr_fn_diagonal, u, u, 1));
    if (cr_tape_acall_n(t, &cr_fn_logabsdet, &He, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var a = cr_mul(t, r[0].u.s, r[0].u.s);
    cr_var b = sum_sin(t, call_a(t, &cr_fn_svdvals, Dg, i64(0), 1));
    cr_var c = sum_sin(t, call_a(t, &cr_fn_pinv, Sy, i64(0), 1));
    if (cr_tape_acall_n(t, &cr_fn_qr, &Sy, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var d = sum_sin(t, r[0].u.a);
    cr_var e = sum_sq(t, call_a(t, &cr_fn_solve, x, Dg, 2));
    cr_var g = sum_sin(t, call_a(t, &cr_fn_rdiv, He, x, 2));
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_add(t, e, g));
}

static void test_views(void **state)
{
    fixture *f = *state;
    prob p = {.f = views_p, .na = 2, .ndim = {2, 1}, .shape = {{3, 3}, {3, 1}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[12];
        spoint(12, seed, 0.8, 0, 3, k_dg, z);
        for (int i = 0; i < 3; i++)
            z[9 + i] += k_dg[i]; /* u away from zero, |u_i| apart */
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

/* ---- Refusals ------------------------------------------------------------------------------- */

/* A structured B is accepted now; a complex one (a constant: complex variables are refused by
 * the tape) still is refused when recording, structured or not. */
static void test_refusals(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double m9[9] = {2, 1, 0, 1, 3, 1, 0, 1, 4};
    cr_complex c9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array ma = cr_array_matrix(m9, 3, 3), ca;
    size_t sh[2] = {3, 3};
    assert_int_equal(cr_array_view_init(&ca, c9, CR_DT_C128, 2, sh, NULL), CR_OK);
    ca.structure = CR_MAT_UPPER;
    static const char *const msgs[2] = {
        "solve: no second-order form on the tape: B is complex; the form covers real B",
        "rdiv: no second-order form on the tape: B is complex; the form covers real B"};
    for (int q = 0; q < 2; q++) {
        cr_tape_reset(t);
        cr_avar A = cr_tape_array_input(t, &ma);
        cr_targ B = cr_targ_arr(cr_av_const(&ca));
        if (q == 0)
            call_a(t, &cr_fn_solve, cr_targ_arr(A), B, 2);
        else
            call_a(t, &cr_fn_rdiv, B, cr_targ_arr(A), 2);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
        assert_contains(cr_tape_errmsg(t), msgs[q]);
    }
    cr_tape_free(t);
}

static int run_structured_forms(void)
{
    const struct CMUnitTest structured_forms[] = {
        cmocka_unit_test_setup_teardown(test_logabsdet, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_svdvals_opnorm, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_expm, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_svd, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_qr_lu_pinv, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_other_forms, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_solve_rdiv_b, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_views, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(structured_forms, NULL, NULL);
}

/*
 * Second-order forms of solve(A, B), inv(A) (matinv) and rdiv(B, A) = B / A with a
 * structured A (Diagonal, Upper, Lower, Symmetric, Hermitian, and dense), on second-order
 * tapes (src/ad/tape_array2.c and rdiv's form). The rules project A's
 * cotangent onto A's structure; so must each S be. Each H v (cr_tape_ahvp) is checked
 * against central differences, along the direction, of the gradient a first-order tape
 * computes, at several points and directions:
 *   - A recorded as a structured array input (the gradient of such an input is the projected
 *     cotangent itself, so an S left unprojected shows in H v), the direction tagged like A;
 *   - A made by the view functions Symmetric(X), Hermitian(X), Diagonal(v) from dense
 *     variables, composed with other operations;
 * a full Hessian (cr_tape_hessian) of a composite of scalars through them; and the refusals
 * (a complex B or A: CR_EUNIMPL when recording; a structured B: test_hvp_structured.c).
 */

/* A point of L components whose n x n block at off has a dominant diagonal. */
static void spoint_structured_solve(size_t L, unsigned seed, size_t off, size_t n, double *z)
{
    point(L, seed, 0.8, z);
    for (size_t i = 0; i < n; i++)
        z[off + i * n + i] += i % 2 ? -2.5 : 2.5;
}

static double k_m9[9] = {0.5, -1.0, 0.3, 1.2, 0.4, -0.6, -0.2, 0.9, 1.1};

/* ---- inv ------------------------------------------------------------------------------------ */

/* A 3 x 3: sum(sin.(inv(A) M)) + sum(inv(A).^2)² */
static cr_var inv_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static cr_array M;
    M = cr_array_matrix(k_m9, 3, 3);
    cr_avar Y = call_a(t, &cr_fn_matinv, cr_targ_arr(X[0]), i64(0), 1);
    cr_var q = sum_sq(t, Y);
    return cr_add(t, sum_sin(t, cr_av_matmul(t, Y, cr_av_const(&M))), cr_mul(t, q, q));
}

static void test_inv(void **state)
{
    fixture *f = *state;
    for (int q = 0; q < 6; q++) {
        sprob p = {.p = {.f = inv_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}},
                   .st = {k_structs[q]}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[9];
            spoint_structured_solve(9, seed + 2 * (unsigned)q, 0, 3, z);
            scheck(f->ctx, &p, z, 1e-6, 3);
        }
    }
}

/* ---- solve ---------------------------------------------------------------------------------- */

/* A 3 x 3, B 3 x 2 (or a vector of 3, env != NULL): sum(sin.(A \ B)) + sum((A \ B).^2)
 * sum(B .* B) */
static cr_var solve_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar Y = call_a(t, &cr_fn_solve, cr_targ_arr(X[0]), cr_targ_arr(X[1]), 2);
    return cr_add(t, sum_sin(t, Y), cr_mul(t, sum_sq(t, Y), sum_sq(t, X[1])));
}

static void test_solve(void **state)
{
    fixture *f = *state;
    for (int q = 0; q < 6; q++)
        for (int vec = 0; vec < 2; vec++) {
            sprob p = {.p = {.f = solve_p,
                             .na = 2,
                             .ndim = {2, vec ? 1 : 2},
                             .shape = {{3, 3}, {3, vec ? 1 : 2}}},
                       .st = {k_structs[q], CR_MAT_DENSE}};
            for (unsigned seed = 0; seed < 2; seed++) {
                double z[15];
                spoint_structured_solve(15, seed + 3 * (unsigned)q, 0, 3, z);
                scheck(f->ctx, &p, z, 1e-6, 3);
            }
        }
}

/* ---- rdiv ----------------------------------------------------------------------------------- */

/* B 2 x 3 (or a vector of 3), A 3 x 3: sum(sin.(B / A)) + sum((B / A).^2) sum(B .* B) */
static cr_var rdiv_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar Y = call_a(t, &cr_fn_rdiv, cr_targ_arr(X[1]), cr_targ_arr(X[0]), 2);
    return cr_add(t, sum_sin(t, Y), cr_mul(t, sum_sq(t, Y), sum_sq(t, X[1])));
}

/* B / A with A a constant (linear in B), and with B a constant */
static double k_a9[9] = {2.0, 0.3, -0.4, 0.1, -1.8, 0.5, 0.7, 0.2, 2.2};

static cr_var rdiv_const_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    static cr_array A, B;
    A = cr_array_matrix(k_a9, 3, 3);
    B = cr_array_matrix(k_m9, 3, 3);
    bool a_const = env != NULL;
    cr_avar Y = call_a(t, &cr_fn_rdiv, cr_targ_arr(a_const ? X[1] : cr_av_const(&B)),
                       cr_targ_arr(a_const ? cr_av_const(&A) : X[0]), 2);
    return cr_add(t, sum_sin(t, Y), cr_mul(t, sum_sq(t, Y), sum_sq(t, X[1])));
}

static void test_rdiv(void **state)
{
    fixture *f = *state;
    for (int q = 0; q < 6; q++)
        for (int vec = 0; vec < 2; vec++) {
            sprob p = {.p = {.f = rdiv_p,
                             .na = 2,
                             .ndim = {2, vec ? 1 : 2},
                             .shape = {{3, 3}, {vec ? 3 : 2, 3}}},
                       .st = {k_structs[q], CR_MAT_DENSE}};
            for (unsigned seed = 0; seed < 2; seed++) {
                double z[15];
                spoint_structured_solve(15, seed + 5 * (unsigned)q, 0, 3, z);
                scheck(f->ctx, &p, z, 1e-6, 3);
            }
        }
    static const int one = 1;
    for (int c = 0; c < 2; c++) {
        prob p = {.f = rdiv_const_p,
                  .env = c ? &one : NULL,
                  .na = 2,
                  .ndim = {2, 2},
                  .shape = {{3, 3}, {3, 3}}};
        double z[18];
        spoint_structured_solve(18, 7 + (unsigned)c, 0, 3, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

/* ---- The view functions, composed ------------------------------------------------------------
 */

/* X 3 x 3, u of 3, B 3 x 2:
 *   sum(sin.(inv(Symmetric(X)) B)) + sum((Hermitian(X) \ B).^2)
 *   + sum(cos.(Bᵀ / Diagonal(u))) sum(u .^ 2) + sum(sin.(solve(Diagonal(u), B)))
 *   + sum((uᵀ / Symmetric(X)).^2) */
static cr_var views_p_structured_solve(cr_tape *t, const cr_var *s, const cr_avar *X,
                                       const void *env)
{
    (void)s;
    (void)env;
    cr_targ x = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]), B = cr_targ_arr(X[2]);
    cr_avar Sy = call_a(t, &cr_fn_symmetric, x, x, 1);
    cr_avar He = call_a(t, &cr_fn_hermitian, x, x, 1);
    cr_avar Dg = call_a(t, &cr_fn_diagonal, u, u, 1);
    cr_avar Bt = call_a(t, &cr_fn_transpose, B, B, 1);
    cr_var a = sum_sin(t, cr_av_matmul(t, call_a(t, &cr_fn_matinv, cr_targ_arr(Sy), x, 1), X[2]));
    cr_var b = sum_sq(t, call_a(t, &cr_fn_solve, cr_targ_arr(He), B, 2));
    cr_avar c0 = call_a(t, &cr_fn_rdiv, cr_targ_arr(Bt), cr_targ_arr(Dg), 2);
    cr_var c =
        cr_mul(t, cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_cos, cr_targ_arr(c0))), sum_sq(t, X[1]));
    cr_var d = sum_sin(t, call_a(t, &cr_fn_solve, cr_targ_arr(Dg), B, 2));
    cr_var e = sum_sq(t, call_a(t, &cr_fn_rdiv, u, cr_targ_arr(Sy), 2));
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), e);
}

static void test_views_structured_solve(void **state)
{
    fixture *f = *state;
    prob p = {.f = views_p_structured_solve,
              .na = 3,
              .ndim = {2, 1, 2},
              .shape = {{3, 3}, {3, 1}, {3, 2}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[18];
        spoint_structured_solve(18, seed, 0, 3, z);
        for (int i = 0; i < 3; i++)
            z[9 + i] += i == 1 ? -2.0 : 2.0; /* u away from zero */
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

/* ---- A full Hessian of scalars ------------------------------------------------------------ */

/* x, y, w: M = x E + y F + C (3 x 3), d = (x, w, 2 + y):
 *   sum(sin.(inv(Symmetric(M)))) + sum((c / Symmetric(M)).^2) + sum(sin.(Diagonal(d) \ c))
 *   + sum((c / Diagonal(d)) .* c) */
static double k_E9_structured_solve[9] = {1, 0, 0, 0, 0, 1, 0, 0, 1},
              k_F9_structured_solve[9] = {0, 1, 0, 0, 1, 0, 1, 0, 0},
              k_C9_structured_solve[9] = {3, 0.2, 0.1, 0, -2.5, 0.3, 0, 0, 2},
              k_c3[3] = {1.0, -0.5, 0.8}, k_e1_structured_solve[3] = {1, 0, 0},
              k_e3_structured_solve[3] = {0, 0, 1}, k_e2_structured_solve[3] = {0, 1, 0},
              k_d0_structured_solve[3] = {0, 0, 2};

static cr_var hess_p_structured_solve(cr_tape *t, const cr_var *s, const cr_avar *X,
                                      const void *env)
{
    (void)X;
    (void)env;
    static cr_array E, F, C, c, e1, e2, e3, d0;
    E = cr_array_matrix(k_E9_structured_solve, 3, 3);
    F = cr_array_matrix(k_F9_structured_solve, 3, 3);
    C = cr_array_matrix(k_C9_structured_solve, 3, 3);
    c = cr_array_vector(k_c3, 3);
    e1 = cr_array_vector(k_e1_structured_solve, 3);
    e2 = cr_array_vector(k_e2_structured_solve, 3);
    e3 = cr_array_vector(k_e3_structured_solve, 3);
    d0 = cr_array_vector(k_d0_structured_solve, 3);
    cr_avar M = lin3(t, s[0], &E, s[1], &F, &C);
    cr_avar dv = lin3(t, s[0], &e1, s[2], &e2, &d0);
    dv = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(dv),
                          cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[1]),
                                                       cr_targ_arr(cr_av_const(&e3)))));
    cr_targ Sy = cr_targ_arr(call_a(t, &cr_fn_symmetric, cr_targ_arr(M), i64(0), 1));
    cr_targ Dg = cr_targ_arr(call_a(t, &cr_fn_diagonal, cr_targ_arr(dv), i64(0), 1));
    cr_targ cc = cr_targ_arr(cr_av_const(&c));
    cr_var a = sum_sin(t, call_a(t, &cr_fn_matinv, Sy, Sy, 1));
    cr_var b = sum_sq(t, call_a(t, &cr_fn_rdiv, cc, Sy, 2));
    cr_var d = sum_sin(t, call_a(t, &cr_fn_solve, Dg, cc, 2));
    cr_avar r = call_a(t, &cr_fn_rdiv, cc, Dg, 2);
    cr_var e = cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(r), cc));
    return cr_add(t, cr_add(t, a, b), cr_add(t, d, e));
}

static void test_hessian_structured_solve(void **state)
{
    fixture *f = *state;
    prob p = {.f = hess_p_structured_solve, .ns = 3, .na = 0};
    double pts[3][3] = {{1.3, 0.4, -1.1}, {-0.7, 0.9, 1.5}, {0.6, -0.8, 2.1}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* ---- Refusals ------------------------------------------------------------------------------- */

/* Complex constants: refused when recording (CR_EUNIMPL, naming the function and the reason).
 * (A structured B has a form: test_hvp_structured.c.) */
static void test_refusals_structured_solve(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double b9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array ba = cr_array_matrix(b9, 3, 3);

    /* a complex constant A with a real variable B */
    cr_complex c9[9] = {2, 1, 0, 1, 3, 1, 0, 1, 4};
    cr_array ca;
    size_t sh[2] = {3, 3};
    assert_int_equal(cr_array_view_init(&ca, c9, CR_DT_C128, 2, sh, NULL), CR_OK);
    static const char *const cmsgs[3] = {
        "solve: no second-order form on the tape: A is complex; the form covers real matrices",
        "rdiv: no second-order form on the tape: A is complex; the form covers real matrices",
        "rdiv: no second-order form on the tape: B is complex; the form covers real B"};
    for (int q = 0; q < 3; q++) {
        cr_tape_reset(t);
        cr_avar B = cr_tape_array_input(t, &ba);
        cr_targ args[2];
        if (q == 0) {
            args[0] = cr_targ_arr(cr_av_const(&ca));
            args[1] = cr_targ_arr(B);
        } else if (q == 1) {
            args[0] = cr_targ_arr(B);
            args[1] = cr_targ_arr(cr_av_const(&ca));
        } else {
            args[0] = cr_targ_arr(cr_av_const(&ca));
            args[1] = cr_targ_arr(B);
        }
        cr_tape_acall_a(t, q == 0 ? &cr_fn_solve : &cr_fn_rdiv, args, 2);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
        assert_contains(cr_tape_errmsg(t), cmsgs[q]);
    }

    cr_tape_free(t);
}

static int run_structured_solve(void)
{
    const struct CMUnitTest structured_solve[] = {
        cmocka_unit_test_setup_teardown(test_inv, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_solve, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rdiv, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_views_structured_solve, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_structured_solve, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals_structured_solve, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(structured_solve, NULL, NULL);
}

/*
 * Second-order forms of eigvals, eigen, cholesky and matfun_herm of a Diagonal, Upper or Lower
 * matrix, and of eigen_general and eigvals_general of a structured real matrix, on
 * second-order tapes (src/rulesets/linalg/, linalg/forms_factors.c). The rules read a
 * structured matrix as its logical dense matrix: eigvals, eigen, cholesky and matfun_herm then take
 * the symmetric matrix of its upper triangle (a Lower matrix's is its diagonal), and fold the
 * cotangent onto that triangle as for a dense matrix before projecting it onto the structure;
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

/* H v of the program f of one 3 x 3 input A, tagged with each structure in turn, at npts
 * points (diagonal dg plus noise of amplitude scale everywhere) along 3 directions each. */
static void each_structure_structured_spectral(cr_ctx *ctx, prog_fn f, const void *env,
                                               const double *dg, double scale, unsigned npts,
                                               double tol)
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

static cr_avar weights_structured_spectral(double *w, size_t r, size_t c, cr_array *store)
{
    *store = c == 1 ? cr_array_vector(w, r) : cr_array_matrix(w, r, c); /* r = 1: a row */
    return cr_av_const(store);
}

/* Σ w_i sin(x_i) + (Σ x_i²)² / 100 over a vector of 3: a cotangent that varies. */
static cr_var vec_loss(cr_tape *t, cr_avar x)
{
    static cr_array w;
    cr_var q = sum_sq(t, x);
    cr_avar s = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(x));
    return cr_add(t, sum_mul(t, s, weights_structured_spectral(k_w, 3, 1, &w)),
                  cr_mul(t, cr_mul(t, q, q), cr_const(0.01)));
}

/* Σ W ∘ sin(M) + (Σ M²)² / 40 over a 3 x 3 M. */
static cr_var mat_loss(cr_tape *t, cr_avar M)
{
    static cr_array W;
    cr_avar s = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(M));
    cr_var q = sum_sq(t, M);
    return cr_add(t, sum_mul(t, s, weights_structured_spectral(k_w, 3, 3, &W)),
                  cr_mul(t, cr_mul(t, q, q), cr_const(0.025)));
}

/* Sign-free in V's columns: Σ W2 ∘ V² + (Σ W ∘ V²)² + sum(λ) Σ W ∘ V² + Σ W ∘ sin(V diag(c) Vᵀ)
 * (the last makes Vᵀ V̄ full where V is a signed permutation, as for a Diagonal or Lower A) */
static cr_var vecs_loss(cr_tape *t, cr_avar lam, cr_avar V)
{
    static cr_array W, W2, c;
    cr_avar v2 = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(V));
    cr_var a = sum_mul(t, v2, weights_structured_spectral(k_w2, 3, 3, &W2));
    cr_var b = sum_mul(t, v2, weights_structured_spectral(k_w, 3, 3, &W));
    cr_avar Vc = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(V),
                                  cr_targ_arr(weights_structured_spectral(k_w2 + 3, 1, 3, &c)));
    cr_avar Vt = call_a(t, &cr_fn_transpose, cr_targ_arr(V), i64(0), 1);
    cr_avar M = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(cr_av_matmul(t, Vc, Vt)));
    cr_var e = sum_mul(t, M, cr_av_const(&W));
    return cr_add(t, cr_add(t, cr_add(t, a, cr_mul(t, b, b)), cr_mul(t, cr_av_sum(t, lam), b)), e);
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
static const double k_dg_structured_spectral[3] = {3.2, -2.1, 1.1},
                    k_dpos_structured_spectral[3] = {4.0, 3.0, 2.0}, k_dmf[3] = {1.2, -0.8, 0.3};

static void test_eigvals_eigen(void **state)
{
    fixture *f = *state;
    each_structure_structured_spectral(f->ctx, eigvals_p, NULL, k_dg_structured_spectral, 0.5, 2,
                                       1e-6);
    each_structure_structured_spectral(f->ctx, eigen_p, NULL, k_dg_structured_spectral, 0.5, 2,
                                       1e-6);
}

static void test_cholesky(void **state)
{
    fixture *f = *state;
    each_structure_structured_spectral(f->ctx, chol_p, NULL, k_dpos_structured_spectral, 0.5, 2,
                                       1e-6);
}

static void test_matfun(void **state)
{
    fixture *f = *state;
    each_structure_structured_spectral(f->ctx, matfun_p, &cr_fn_exp, k_dmf, 0.4, 2, 1e-6);
    each_structure_structured_spectral(f->ctx, matfun_p, &cr_fn_sin, k_dmf, 0.4, 1, 1e-6);
    each_structure_structured_spectral(f->ctx, matfun_p, &cr_fn_tanh, k_dmf, 0.4, 1, 1e-6);
}

/* ---- eigen_general, eigvals_general ------------------------------------------------------- */

/* f.(a) of a complex array variable a, f = creal or cimag */
static cr_avar cpart(cr_tape *t, const cr_value *f, cr_avar a)
{
    return cr_av_broadcast1(t, f, cr_targ_arr(a));
}

/* vec_loss(re λ) + Σ w2 ∘ (im λ)² (the eigenvalues of these matrices are real: im λ = 0, with
 * a nonzero cotangent nonetheless) */
static cr_var clam_loss(cr_tape *t, cr_avar lam)
{
    static cr_array w2;
    cr_avar im2 = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(cpart(t, &cr_fn_cimag, lam)));
    return cr_add(t, vec_loss(t, cpart(t, &cr_fn_creal, lam)),
                  sum_mul(t, im2, weights_structured_spectral(k_w2, 3, 1, &w2)));
}

/* Through the gauge (unit columns, largest component real and positive): Σ W ∘ sin(re V) +
 * Σ W2 ∘ (im V)² + (Σ W2 ∘ |V|²)² */
static cr_var cvecs_loss(cr_tape *t, cr_avar V)
{
    static cr_array W, W2;
    cr_avar re = cpart(t, &cr_fn_creal, V), im = cpart(t, &cr_fn_cimag, V);
    cr_avar r2 = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(re));
    cr_avar i2 = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(im));
    cr_var a = sum_mul(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(re)),
                       weights_structured_spectral(k_w, 3, 3, &W));
    cr_var b = sum_mul(t, i2, weights_structured_spectral(k_w2, 3, 3, &W2));
    cr_var c = sum_mul(t, cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(r2), cr_targ_arr(i2)),
                       cr_av_const(&W2));
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
    cr_var c = cr_mul(t, cr_av_sum(t, cpart(t, &cr_fn_creal, lv[0].u.a)),
                      cr_av_sum(t, cpart(t, &cr_fn_creal, lv[1].u.a)));
    return cr_add(t, cr_add(t, clam_loss(t, lv[0].u.a), cvecs_loss(t, lv[1].u.a)), c);
}

/* Real eigenvalues well apart, and eigenvectors whose largest component is clearly the
 * largest (the diagonal dominates the noise), for every structure: a smooth gauge. */
static void test_eigen_general(void **state)
{
    fixture *f = *state;
    each_structure_structured_spectral(f->ctx, eigvals_general_p, NULL, k_dg_structured_spectral,
                                       0.5, 2, 1e-6);
    each_structure_structured_spectral(f->ctx, eigen_general_p, NULL, k_dg_structured_spectral, 0.5,
                                       2, 1e-6);
}

/* ---- A full Hessian of scalars -------------------------------------------------------------
 */

/* x, y, w: M = x E + y F + C (3 x 3, symmetric positive definite read on its upper triangle),
 * d = (3 + x, 2.5 + w, 6 + y), D = Diagonal(d), U = cholesky(Symmetric(M)) (tagged Upper):
 *   sum(sin.(eigvals(D))) + eigen(D): sum(λ²) + Σ W ∘ V² + sum(sin.(cholesky(D)))
 *   + sum(sin.(matfun_herm(sin, D))) + sum(re(eigvals_general(D)).²)
 *   + sum(sin.(eigvals(U))) + sum(sin.(matfun_herm(tanh, U))) + sum(sin.(re eigen_general(U).λ))
 *   + Σ W ∘ re(eigen_general(U).V)  */
static double k_E9_structured_spectral[9] = {1, 0, 0, 0, 0, 1, 0, 0, 1},
              k_F9_structured_spectral[9] = {0, 1, 0, 0, 1, 0, 1, 0, 0},
              k_C9_structured_spectral[9] = {9, 0.2, 0.1, 0, 4, 0.3, 0, 0, 2.5},
              k_e1_structured_spectral[3] = {1, 0, 0}, k_e2_structured_spectral[3] = {0, 1, 0},
              k_e3_structured_spectral[3] = {0, 0, 1}, k_d0_structured_spectral[3] = {3, 2.5, 6};

static cr_var hess_p_structured_spectral(cr_tape *t, const cr_var *s, const cr_avar *X,
                                         const void *env)
{
    (void)X;
    (void)env;
    static cr_array E, F, C, e1, e2, e3, d0, W;
    E = cr_array_matrix(k_E9_structured_spectral, 3, 3);
    F = cr_array_matrix(k_F9_structured_spectral, 3, 3);
    C = cr_array_matrix(k_C9_structured_spectral, 3, 3);
    e1 = cr_array_vector(k_e1_structured_spectral, 3);
    e2 = cr_array_vector(k_e2_structured_spectral, 3);
    e3 = cr_array_vector(k_e3_structured_spectral, 3);
    d0 = cr_array_vector(k_d0_structured_spectral, 3);
    cr_avar M = lin3(t, s[0], &E, s[1], &F, &C);
    cr_avar dv = lin3(t, s[0], &e1, s[2], &e2, &d0);
    dv = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(dv),
                          cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[1]),
                                                       cr_targ_arr(cr_av_const(&e3)))));
    cr_targ Dg = cr_targ_arr(call_a(t, &cr_fn_diagonal, cr_targ_arr(dv), i64(0), 1));
    cr_targ Sy = cr_targ_arr(call_a(t, &cr_fn_symmetric, cr_targ_arr(M), i64(0), 1));
    cr_targ U = cr_targ_arr(call_a(t, &cr_fn_cholesky, Sy, i64(0), 1));
    cr_targ r[2];
    cr_var a = sum_sin(t, call_a(t, &cr_fn_eigvals, Dg, i64(0), 1));
    if (cr_tape_acall_n(t, &cr_fn_eigen, &Dg, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var b = cr_add(t, sum_sq(t, r[0].u.a),
                      sum_mul(t, cr_av_broadcast1(t, &cr_fn_square, r[1]),
                              weights_structured_spectral(k_w, 3, 3, &W)));
    cr_var c = sum_sin(t, call_a(t, &cr_fn_cholesky, Dg, i64(0), 1));
    cr_var d = sum_sin(t, call_a(t, &cr_fn_matfun_herm, cr_targ_value(cr_fn_sin), Dg, 2));
    cr_var e = sum_sq(t, cpart(t, &cr_fn_creal, call_a(t, &cr_fn_eigvals_general, Dg, i64(0), 1)));
    cr_var g = sum_sin(t, call_a(t, &cr_fn_eigvals, U, i64(0), 1));
    cr_var h = sum_sin(t, call_a(t, &cr_fn_matfun_herm, cr_targ_value(cr_fn_tanh), U, 2));
    if (cr_tape_acall_n(t, &cr_fn_eigen_general, &U, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var i = sum_sin(t, cpart(t, &cr_fn_creal, r[0].u.a));
    cr_var j = sum_mul(t, cpart(t, &cr_fn_creal, r[1].u.a), cr_av_const(&W));
    cr_var sum = cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_add(t, e, g));
    return cr_add(t, sum, cr_add(t, cr_add(t, h, i), j));
}

static void test_hessian_structured_spectral(void **state)
{
    fixture *f = *state;
    prob p = {.f = hess_p_structured_spectral, .ns = 3, .na = 0};
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
static cr_var views_p_structured_spectral(cr_tape *t, const cr_var *s, const cr_avar *X,
                                          const void *env)
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
    cr_var d = mat_loss(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(E), f64(0.25)));
    cr_var e = clam_loss(t, call_a(t, &cr_fn_eigvals_general, Dg, i64(0), 1));
    if (cr_tape_acall_n(t, &cr_fn_eigen_general, &He, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_var g = cr_add(t, clam_loss(t, r[0].u.a), cvecs_loss(t, r[1].u.a));
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_add(t, e, g));
}

static void test_views_structured_spectral(void **state)
{
    fixture *f = *state;
    prob p = {.f = views_p_structured_spectral, .na = 2, .ndim = {2, 1}, .shape = {{3, 3}, {3, 1}}};
    static const double u0[3] = {2.5, 1.2, 0.4};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[12];
        point(12, seed, 0.4, z);
        for (int i = 0; i < 3; i++) {
            z[4 * i] += k_dg_structured_spectral[i];
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
static void test_refusals_structured_spectral(void **state)
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

static int run_structured_spectral(void)
{
    const struct CMUnitTest structured_spectral[] = {
        cmocka_unit_test_setup_teardown(test_eigvals_eigen, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cholesky, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matfun, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eigen_general, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_views_structured_spectral, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_structured_spectral, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals_structured_spectral, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(structured_spectral, NULL, NULL);
}

/*
 * Directions of structured matrix inputs in forward and second-order sweeps: a direction V
 * of a Symmetric, Upper, Lower or Diagonal input is read through the input's structure, as
 * a change of the input's data by V is (the lower triangle of V does not move a Symmetric
 * input). cr_tape_ajvp against central differences of the same function in plain C along
 * the data, and cr_tape_ahvp against central differences of the tape's own gradient along
 * the data, with directions that are not in the structure's tangent space.
 */

#define N 3

static double k_a[N * N] = {1, 2, 0.5, -1, 0.3, 2, 0.7, -0.4, 1.1};

/* The matrix an input of structure s reads from data b (row-major N x N; a Diagonal's
 * N entries). */
static void logical(int s, const double *b, double *L)
{
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double v = 0.0;
            if (s == CR_MAT_SYMMETRIC)
                v = i <= j ? b[i * N + j] : b[j * N + i];
            else if (s == CR_MAT_UPPER)
                v = j >= i ? b[i * N + j] : 0.0;
            else if (s == CR_MAT_LOWER)
                v = j <= i ? b[i * N + j] : 0.0;
            else if (s == CR_MAT_DIAGONAL)
                v = i == j ? b[i] : 0.0;
            L[i * N + j] = v;
        }
}

/* y = sum((A L).^2) + sum(sin.(L)) in plain C */
static double f_c(int s, const double *b)
{
    double L[N * N], y = 0.0;
    logical(s, b, L);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double c = 0.0;
            for (size_t k = 0; k < N; k++)
                c += k_a[i * N + k] * L[k * N + j];
            y += c * c + sin(L[i * N + j]);
        }
    return y;
}

static cr_array input(int s, double *b)
{
    cr_array B = cr_array_matrix(b, N, N);
    B.structure = (uint8_t)s;
    if (s == CR_MAT_DIAGONAL)
        B.strides[0] = 1;
    return B;
}

static cr_var record_structured_directions(cr_tape *t, cr_avar X)
{
    static cr_array A;
    A = cr_array_matrix(k_a, N, N);
    cr_avar P = cr_av_matmul(t, cr_av_const(&A), X);
    cr_var q = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(P)));
    return cr_add(t, q, cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(X))));
}

/* The gradient (N x N) of the recorded function at data b. */
static void gradient(cr_tape *t, int s, double *b, double *g)
{
    cr_tape_reset(t);
    cr_array B = input(s, b), G = cr_array_matrix(g, N, N);
    cr_array *gp = &G;
    cr_avar X = cr_tape_array_input(t, &B);
    cr_var y = record_structured_directions(t, X);
    assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp), CR_OK);
}

static void test_directions(void **state)
{
    fixture *f = *state;
    const int structs[4] = {CR_MAT_SYMMETRIC, CR_MAT_UPPER, CR_MAT_LOWER, CR_MAT_DIAGONAL};
    const double h = 1e-5;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    for (size_t q = 0; q < 4; q++) {
        int s = structs[q];
        double b[N * N] = {1, 0.2, 0.3, 0.9, 2, 0.4, -0.8, 0.6, 3};
        double v[N * N] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}, hv[N * N];
        /* the data change along v: a Diagonal's entries move by v's diagonal */
        double dv[N * N], bp[N * N], bm[N * N];
        for (size_t e = 0; e < N * N; e++)
            dv[e] = s == CR_MAT_DIAGONAL ? (e < N ? v[e * (N + 1)] : 0.0) : v[e];
        for (size_t e = 0; e < N * N; e++) {
            bp[e] = b[e] + h * dv[e];
            bm[e] = b[e] - h * dv[e];
        }
        /* J v */
        cr_tape_reset(t);
        cr_array B = input(s, b), V = cr_array_matrix(v, N, N), HV = cr_array_matrix(hv, N, N);
        cr_avar X = cr_tape_array_input(t, &B);
        cr_var y = record_structured_directions(t, X);
        const cr_array *vp = &V;
        cr_array *hp = &HV;
        double jv;
        assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, &vp, 1, &y, 1, &jv, NULL, 0, NULL),
                         CR_OK);
        ASSERT_CLOSE(jv, (f_c(s, bp) - f_c(s, bm)) / (2 * h), 1e-7);
        if (s == CR_MAT_DIAGONAL)
            continue; /* (its gradient array is not N x N data) */
        /* H v against central differences of the gradient along the data */
        assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp), CR_OK);
        double gp[N * N], gm[N * N];
        gradient(t, s, bp, gp);
        gradient(t, s, bm, gm);
        for (size_t e = 0; e < N * N; e++)
            ASSERT_CLOSE(hv[e], (gp[e] - gm[e]) / (2 * h), 1e-6);
    }
    cr_tape_free(t);
}

static int run_structured_directions(void)
{
    const struct CMUnitTest structured_directions[] = {
        cmocka_unit_test_setup_teardown(test_directions, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(structured_directions, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_structured_forms();
    failed += run_structured_solve();
    failed += run_structured_spectral();
    failed += run_structured_directions();
    return failed;
}
