/*
 * Second-order forms of logabsdet, logdet, det, svdvals, opnorm, expm, svd, qr, lu and pinv
 * with a structured A (Diagonal, Upper, Lower, Symmetric, Hermitian, and dense), of the other
 * forms of a matrix argument (logsumexp, prod, norm, var, std, softmax, logsoftmax, cumprod,
 * normalize, sum(f, A), cholesky_logdet, cholesky_det) with one, and of solve(A, B) and
 * rdiv(B, A) with a structured B, on second-order tapes (src/ad/tape_array2_forms.c: put,
 * put_arg, pullback_dense). The rules read a
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
    return cr_asum(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(a), cr_targ_arr(b)));
}

/* Weights of 3 x 3 elements, all different. */
static double k_w[9] = {1.0, -0.7, 2.0, 0.4, -1.3, 0.9, 0.25, -0.5, 1.7};
static double k_w2[9] = {0.3, 1.1, -0.6, -0.9, 0.5, 1.4, -1.2, 0.8, 0.2};

static cr_avar weights(double *w, cr_array *store)
{
    *store = cr_array_matrix(w, 3, 3);
    return cr_aconst(store);
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
    return cr_add(t, sum_mul(t, sv, cr_aconst(&w)), cr_mul(t, cr_mul(t, q, q), cr_const(0.01)));
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
    cr_var a = sum_mul(t, weights(k_w, &W), cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(E)));
    cr_var b = cr_asum(t, E);
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
    cr_var lu = sum_mul(t, weights(k_w, &W1), cr_abroadcast1(t, &cr_fn_square, usv[0]));
    cr_var lv = sum_mul(t, weights(k_w2, &W2), cr_abroadcast1(t, &cr_fn_square, usv[2]));
    w = cr_array_vector(k_w2 + 3, 3);
    cr_var ls = sum_mul(t, cr_aconst(&w), cr_abroadcast1(t, &cr_fn_sin, usv[1]));
    cr_var q = sum_sq(t, S);
    cr_avar Vt = call_a(t, &cr_fn_transpose, cr_targ_arr(V), i64(0), 1);
    cr_var luv = sum_sin(t, cr_amatmul(t, U, Vt));
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
    cr_avar s = cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(M));
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
    cr_avar q3 = cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(Q),
                                cr_targ_arr(cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(Q))));
    cr_var b = cr_add(t, mix(t, R), sum_mul(t, q3, weights(k_w2, &W)));
    return cr_add(t, b, cr_mul(t, cr_asum(t, R), sum_sin(t, Q)));
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
    cr_avar u2 = cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(U));
    cr_var b = cr_add(t, mix(t, L), sum_mul(t, u2, weights(k_w2, &W)));
    return cr_add(t, b, cr_mul(t, sum_sin(t, L), cr_asum(t, U)));
}

/* Y = pinv(A): sum(sin.(Y W)) + (Σ Y²)² */
static cr_var pinv_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static cr_array W;
    cr_avar Y = call_a(t, &cr_fn_pinv, cr_targ_arr(X[0]), i64(0), 1);
    cr_var q = sum_sq(t, Y);
    return cr_add(t, sum_sin(t, cr_amatmul(t, Y, weights(k_w, &W))), cr_mul(t, q, q));
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
    cr_targ A = cr_targ_arr(X[0]), B = cr_targ_arr(e->B != NULL ? cr_aconst(e->B) : X[1]);
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
    dv = cr_abroadcast2(
        t, &cr_fn_add, cr_targ_arr(dv),
        cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s[1]), cr_targ_arr(cr_aconst(&e3)))));
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
    cr_var d = sum_sin(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(Ex), f64(k_eighth)));
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
        cr_targ B = cr_targ_arr(cr_aconst(&ca));
        if (q == 0)
            call_a(t, &cr_fn_solve, cr_targ_arr(A), B, 2);
        else
            call_a(t, &cr_fn_rdiv, B, cr_targ_arr(A), 2);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
        assert_contains(cr_tape_errmsg(t), msgs[q]);
    }
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
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
    return cmocka_run_group_tests(tests, NULL, NULL);
}
