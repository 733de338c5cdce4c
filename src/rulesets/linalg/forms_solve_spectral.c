/*
 * Second-order forms (cr_rule_form) of the linear-algebra functions of linalg_lapack.c: det,
 * logdet, logabsdet, inv (matinv), solve and rdiv. For a call y = f(A, ...) whose result has
 * the cotangent ȳ, a form gives, along each direction, S = d/dε [pullback at x + ε ẋ](ȳ); the
 * engine adds pullback(ȳ̇) separately. First derivatives come from the rules (the recorded
 * pullback, the result's tangent ẏ from the frule in the forward sweep, other frules); what is
 * written here is the second derivative, with its derivation.
 *
 * A structured matrix argument (Diagonal, Upper, Lower, Symmetric, Hermitian) is read by the
 * rules as its logical dense matrix, and its cotangent is projected onto its structure. The
 * forms work on that dense matrix and write S unprojected: the engine projects it as the rule
 * projects the cotangent. A form that needs a rule's cotangent unprojected takes it from the
 * rule at the dense matrix (pullback_dense).
 */
#include <complex.h>
#include <string.h>

#include <chainrules/rules_linalg.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

/* One variable matrix argument first (det, logdet, logabsdet). */
static const char *matrix_check(const cr_value *args, size_t nargs, const bool *var,
                                uint32_t *linearity)
{
    (void)linearity;
    return cr__form_check_leading(args, nargs, var, 1);
}

/* ---- det, logdet ------------------------------------------------------------------------------
 */

/*
 * det(A): the pullback is Ā = ȳ C(A), C the cofactor matrix. det is linear in each row of A
 * separately, and row i of C (∂det/∂(row i)) does not depend on row i and is linear in every
 * other row k. So, as for the multilinear functions, its derivative along Ȧ is
 *     S_i = ȳ Σ_{k≠i} C_i(A with row k replaced by row k of Ȧ),
 * each term a call of det's own rrule at that matrix, its pullback applied to ȳ (rows i ≠ k
 * kept). Nothing is written but calls of the rule, and a singular A is no exception (the rule
 * takes the adjugate from the SVD there); the cost is n rule calls, O(n^4), per direction.
 */
static cr_status det_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(cr__form), 0, NULL, state);
    const cr__form *F = *state;
    if (st != CR_OK)
        return st;
    size_t n = F->x->ndim == 2 ? F->x->shape[0] : 0;
    return n == 0 || F->x->shape[1] != n ? CR_NOTHING /* the rule refused it when recorded */
                                         : CR_OK;
}

static cr_status det_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                         cr_tangent ydot, cr_tangent *S)
{
    (void)ydot;
    const cr__form *F = state;
    size_t n = F->x->shape[0];
    const double *xd;
    cr_array *Sa, *Ak;
    cr_status st;
    if ((st = cr__form_like_x(F, xdot[0], &xd)) != CR_OK || xd == NULL)
        return st;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK || (st = cr__form_new_s(F, &Ak)) != CR_OK)
        return st;
    double *s = Sa->data, *ak = Ak->data;
    for (size_t r = 0; r < n; r++) {
        memcpy(ak, F->x->data, n * n * sizeof *ak);
        memcpy(ak + r * n, xd + r * n, n * sizeof *ak);
        cr_value av = cr_value_array(Ak), y;
        cr_pullback pb;
        cr_tangent dx[2];
        const double *C;
        st = cr_rrule(p->cfg, F->arena, &cr_fn_det, &av, 1, &y, &pb);
        if (st == CR_OK)
            st = cr_pullback_call(F->arena, &pb, &p->ybar, dx, 2);
        if (st == CR_OK)
            st = cr__form_like_x(F, dx[1], &C);
        if (st != CR_OK)
            return st;
        for (size_t q = 0; q < n && C != NULL; q++)
            if (q != r)
                for (size_t c = 0; c < n; c++)
                    s[q * n + c] += C[q * n + c];
    }
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_det = {matrix_check, det_init, det_dir};

typedef struct logdet_state {
    cr__form F;
    double yb; /* ȳ (of the first element for logabsdet) */
} logdet_state;

/*
 * logdet(A) of a matrix with positive determinant: the pullback is Ā = ȳ A⁻ᵀ, so
 *     S = ȳ Ẏᵀ,   Ẏ = -A⁻¹ Ȧ A⁻¹, matinv's frule tangent at A along Ȧ.
 * logabsdet(A) = (log|det A|, sign det A) of a real A, of either sign: its pullback is the
 * same, Ā = ȳ₁ A⁻ᵀ with ȳ₁ the cotangent of the first element (the sign is piecewise
 * constant: its cotangent adds nothing), so its S is the same with ȳ₁ for ȳ.
 */
static cr_status logdet_init(const cr_form_point *p, void **state)
{
    cr_tangent ybar = p->ybar;
    if (p->y->kind == CR_KIND_STRUCT && cr_tangent_is_zero(ybar = cr_tangent_field(ybar, 0)))
        return CR_NOTHING;
    cr_status st = cr__form_state(p, sizeof(logdet_state), 0, NULL, state);
    logdet_state *w = *state;
    if (st != CR_OK)
        return st;
    w->yb = cr__form_scalar(ybar);
    return CR_OK;
}

static cr_status logdet_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                            cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    (void)ydot;
    const logdet_state *w = state;
    const cr__form *F = &w->F;
    size_t n = F->x->ndim == 2 ? F->x->shape[0] : 0;
    const double *xd, *Yd;
    cr_array *Sa;
    cr_value inv;
    cr_tangent dinv;
    cr_status st;
    if ((st = cr__form_like_x(F, xdot[0], &xd)) != CR_OK || xd == NULL)
        return st;
    if ((st = cr__form_frule_along(F, &cr_fn_matinv, xdot[0], &inv, &dinv)) != CR_OK)
        return st;
    if ((st = cr__form_like_x(F, dinv, &Yd)) != CR_OK || (st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    double *s = Sa->data;
    for (size_t r = 0; r < n && Yd != NULL; r++)
        for (size_t c = 0; c < n; c++)
            s[r * n + c] = w->yb * Yd[c * n + r];
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_logdet = {matrix_check, logdet_init, logdet_dir};

/* ---- inv, solve, rdiv -------------------------------------------------------------------------
 */

/* solve(A, B), inv(A), rdiv(B, A) (a: A's position): A and B dense, Diagonal, Upper, Lower,
 * Symmetric or Hermitian (S projected by the engine as the rule projects the cotangent); real
 * arguments (complex variables are refused by the tape; a complex constant here too). */
static const char *real_a_b(const cr_value *args, size_t nargs, size_t a)
{
    for (size_t j = 0; j < nargs && j < 2; j++) {
        const cr_array *x = args[j].kind == CR_KIND_ARRAY ? args[j].u.arr : NULL;
        if (x != NULL && x->dtype == CR_DT_C128)
            return j == a ? "A is complex; the form covers real matrices"
                          : "B is complex; the form covers real B";
    }
    return NULL;
}

static const char *inv_check(const cr_value *args, size_t nargs, const bool *var,
                             uint32_t *linearity)
{
    (void)linearity;
    const char *why = cr__form_check_leading(args, nargs, var, 1);
    return why != NULL ? why : real_a_b(args, nargs, 0);
}

static const char *solve_check(const cr_value *args, size_t nargs, const bool *var,
                               uint32_t *linearity)
{
    (void)linearity;
    const char *why = cr__form_check_leading(args, nargs, var, 2);
    return why != NULL ? why : real_a_b(args, nargs, 0);
}

static const char *rdiv_check(const cr_value *args, size_t nargs, const bool *var,
                              uint32_t *linearity)
{
    (void)linearity;
    const char *why = cr__form_check_leading(args, nargs, var, 2);
    return why != NULL ? why : real_a_b(args, nargs, 1);
}

typedef struct inv_state {
    cr__form F;
    cr_array *P, *Q;
} inv_state;

/*
 * inv(A) = Y: the pullback is Ā = -Yᵀ Ȳ Yᵀ (projected onto A's structure). Its derivative
 * along Ȧ, with Ẏ = -Y Ȧ Y the result's tangent (matinv's frule, from the forward sweep), by
 * the product rule:
 *     S = -(Ẏᵀ Ȳ Yᵀ + Yᵀ Ȳ Ẏᵀ) = -(Ẏᵀ P + Q Ẏᵀ),   P = Ȳ Yᵀ, Q = Yᵀ Ȳ (once per record).
 */
static cr_status inv_init(const cr_form_point *p, void **state)
{
    const double *yb, *y;
    cr_status st = cr__form_state(p, sizeof(inv_state), 0, NULL, state);
    inv_state *w = *state;
    if (st == CR_OK && (st = cr__form_like_x(&w->F, p->ybar, &yb)) == CR_OK && yb == NULL)
        return CR_NOTHING;
    if (st == CR_OK)
        st = cr__form_y_array(&w->F, &y);
    if (st == CR_OK && (st = cr__form_new_s(&w->F, &w->P)) == CR_OK)
        st = cr__form_new_s(&w->F, &w->Q);
    if (st != CR_OK)
        return st;
    size_t n = w->F.x->shape[0];
    cr__form_mm(1.0, yb, n, n, 0, y, n, n, 1, 0.0, w->P->data);
    cr__form_mm(1.0, y, n, n, 1, yb, n, n, 0, 0.0, w->Q->data);
    return CR_OK;
}

static cr_status inv_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                         cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    const inv_state *w = state;
    const cr__form *F = &w->F;
    size_t n = F->x->shape[0];
    const double *xd, *yd;
    cr_array *Sa;
    cr_status st;
    if ((st = cr__form_like_x(F, xdot[0], &xd)) != CR_OK || xd == NULL)
        return st;
    if ((st = cr__form_y_dot_arr(F, ydot, &yd)) != CR_OK || yd == NULL)
        return st;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    cr__form_mm(-1.0, yd, n, n, 1, w->P->data, n, n, 0, 0.0, Sa->data);
    cr__form_mm(-1.0, w->Q->data, n, n, 0, yd, n, n, 1, 1.0, Sa->data);
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_inv = {inv_check, inv_init, inv_dir};

/* solve's and rdiv's state: B's position, the pullback with B̄ unprojected, and B̄ = G. */
typedef struct solve_state {
    cr__form F; /* over A */
    size_t jb;
    cr_pullback pb;
    const cr_array *Bv;
    const double *bb;
} solve_state;

/* Both: A at position a, B at 1 - a; S = 0 when A is a constant (linear in B). */
static cr_status solve_rdiv_init(const cr_form_point *p, void **state, size_t a)
{
    if (!p->var[a])
        return CR_NOTHING;
    cr_status st = cr__form_state(p, sizeof(solve_state), a, NULL, state);
    solve_state *w = *state;
    if (st != CR_OK)
        return st;
    if (w->F.x->ndim != 2 || w->F.x->shape[0] != w->F.x->shape[1])
        return CR_NOTHING; /* the rule refused it when recorded */
    size_t jb = 1 - a;
    const cr_array *Bv = p->args[jb].u.arr, *Bb;
    cr_tangent dx[3];
    if ((st = cr__form_pullback_dense(&w->F, jb, &w->pb)) != CR_OK ||
        (st = cr_pullback_call(p->arena, &w->pb, &p->ybar, dx, 3)) != CR_OK ||
        (st = cr__tan_array(p->arena, p->name, dx[jb + 1], Bv->ndim, Bv->shape, CR_DT_F64, &Bb)) !=
            CR_OK)
        return st;
    if (Bb == NULL)
        return CR_NOTHING; /* Ȳ = 0 */
    w->jb = jb;
    w->Bv = Bv;
    w->bb = Bb->data;
    return CR_OK;
}

/*
 * solve(A, B) = A \ B = Y (B a vector or a matrix): the pullback is B̄ = P_B(G), G = A⁻ᵀ Ȳ,
 * Ā = P(-G Yᵀ), P and P_B the projections onto A's and B's structures (the identity for a
 * dense matrix). Along (Ȧ, Ḃ), with Ẏ the result's tangent (solve's frule, from the forward
 * sweep) and d(A⁻ᵀ) = -A⁻ᵀ Ȧᵀ A⁻ᵀ:
 *     dG = -A⁻ᵀ Ȧᵀ G = G(W),   W = -Ȧᵀ G,   S_B = P_B(G(W)),
 *     S_A = P(-dG Yᵀ - G Ẏᵀ) = Ā(W) - P(G Ẏᵀ),
 * where G(W) and Ā(W) are the pullback applied to W (one call gives both; Ā(W) is projected
 * already, and P(P(X)) = P(X)), the recorded one for a dense B, else the rule's at B's dense
 * matrix (pullback_dense: G unprojected). solve is linear in B: with A a constant, S = 0.
 *
 * rdiv(B, A) = B / A = B A⁻¹ = Y (A n x n; B m x n, or a vector of n taken as one row): the
 * pullback is B̄ = P_B(G), G = Ȳ A⁻ᵀ, Ā = P(-Yᵀ G). Along (Ȧ, Ḃ):
 *     dG = -Ȳ A⁻ᵀ Ȧᵀ A⁻ᵀ = G(W),   W = -G Ȧᵀ (m x n),   S_B = P_B(G(W)),
 *     S_A = P(-Ẏᵀ G - Yᵀ dG) = Ā(W) - P(Ẏᵀ G).
 */
static cr_status solve_init(const cr_form_point *p, void **state)
{
    return solve_rdiv_init(p, state, 0);
}

static cr_status rdiv_init(const cr_form_point *p, void **state)
{
    return solve_rdiv_init(p, state, 1);
}

static cr_status solve_rdiv_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                                cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    const solve_state *w = state;
    const cr__form *F = &w->F;
    size_t a = F->xj, jb = w->jb, n = F->x->shape[0];
    bool rdiv = a == 1;
    const cr_array *Bv = w->Bv;
    size_t m = Bv->ndim == 1 ? 1 : Bv->shape[rdiv ? 0 : 1];
    const double *xd, *yd, *Sa;
    cr_array *SA, *W;
    cr_tangent dw[3];
    cr_status st;
    if ((st = cr__form_like_x(F, xdot[a], &xd)) != CR_OK ||
        (st = cr__form_y_dot_arr(F, ydot, &yd)) != CR_OK)
        return st;
    if (xd == NULL && yd == NULL)
        return CR_OK;
    if ((st = cr__form_new_s(F, &SA)) != CR_OK)
        return st;
    if (xd != NULL) {
        if ((st = cr__new(F->arena, CR_DT_F64, Bv->ndim, Bv->shape, false, &W)) != CR_OK)
            return st;
        if (rdiv)
            cr__form_mm(-1.0, w->bb, m, n, 0, xd, n, n, 1, 0.0, W->data); /* W = -B̄ Ȧᵀ */
        else
            cr__form_mm(-1.0, xd, n, n, 1, w->bb, n, m, 0, 0.0, W->data); /* W = -Ȧᵀ B̄ */
        cr_tangent wt = cr_tangent_array(W);
        if ((st = cr_pullback_call(F->arena, &w->pb, &wt, dw, 3)) != CR_OK ||
            (st = cr__form_like_x(F, dw[a + 1], &Sa)) != CR_OK)
            return st;
        if (Sa != NULL)
            memcpy(SA->data, Sa, n * n * sizeof *Sa);
        S[jb] = dw[jb + 1];
    }
    if (yd != NULL && rdiv)
        cr__form_mm(-1.0, yd, m, n, 1, w->bb, m, n, 0, 1.0, SA->data); /* - Ẏᵀ B̄ */
    else if (yd != NULL)
        cr__form_mm(-1.0, w->bb, n, m, 0, yd, n, m, 1, 1.0, SA->data); /* - B̄ Ẏᵀ */
    S[a] = cr_tangent_array(SA);
    return CR_OK;
}

const cr_rule_form cr__form_solve = {solve_check, solve_init, solve_rdiv_dir};
const cr_rule_form cr__form_rdiv = {rdiv_check, rdiv_init, solve_rdiv_dir};

/* ---- svdvals, opnorm(A, 2), eigvals -----------------------------------------------------------
 */

/* A spectral function's state: the factorization fact whose factors W, Z are elements wi and
 * zi of its tuple, the cotangent's coefficients c (nc of them), and whether to fold. */
typedef struct spectral_state {
    cr__form F;
    const cr_value *fact;
    size_t wi, zi, nc;
    const double *c;
    bool fold;
} spectral_state;

/*
 * A spectral function's pullback Ā = W diag(c) Zᵀ, with W, Z the factors of A's
 * factorization fact (element wi and zi of its tuple) and c the cotangent's coefficients
 * (nc of them): svdvals, W = U, Z = V, c = s̄; opnorm(A, 2), the same with c = (ȳ, 0, ...);
 * eigvals of a symmetric A, W = Z = V (the eigenvectors), c = λ̄. Along Ȧ, c fixed (it is the
 * cotangent), its derivative is
 *     S = Ẇ diag(c) Zᵀ + W diag(c) Żᵀ,
 * Ẇ and Ż the factors' tangents from the factorization's frule at A along Ȧ. A sign (or
 * basis) chosen differently by the two factorizations cancels in each product. Where two
 * singular values (eigenvalues) coincide, the frule's tangents follow its convention for
 * them (docs/rules-linalg.md), and the function has no second derivative there in general.
 * fold: A is a matrix of which the rule reads the upper triangle (eigvals of a dense,
 * Diagonal or triangular A: the symmetric matrix of its logical matrix's upper triangle), so
 * its cotangent lives there, S_ij + S_ji above the diagonal, as the rule gives it (the engine
 * then projects it onto A's structure).
 */
static cr_status spectral_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                              cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    (void)ydot;
    const spectral_state *z = state;
    const cr__form *F = &z->F;
    size_t m = F->x->shape[0], n = F->x->shape[1], nc = z->nc;
    const double *xd, *c = z->c;
    cr_status st = cr__form_like_x(F, xdot[0], &xd);
    if (st != CR_OK || xd == NULL)
        return st;
    cr_tangent dy;
    cr_value y;
    if ((st = cr__form_frule_along(F, z->fact, xdot[0], &y, &dy)) != CR_OK)
        return st;
    const cr_array *W, *Z, *Wd = NULL, *Zd = NULL;
    if ((st = cr__form_factor_of(F, &y, z->wi, 2, &W)) != CR_OK ||
        (st = cr__form_factor_of(F, &y, z->zi, 2, &Z)) != CR_OK)
        return st;
    if (W->shape[0] != m || Z->shape[0] != n || W->shape[1] < nc || Z->shape[1] < nc)
        return CR_EINVAL;
    if ((st = cr__tan_array(F->arena, F->who, cr_tangent_field(dy, z->wi), 2, W->shape, CR_DT_F64,
                            &Wd)) != CR_OK ||
        (st = cr__tan_array(F->arena, F->who, cr_tangent_field(dy, z->zi), 2, Z->shape, CR_DT_F64,
                            &Zd)) != CR_OK)
        return st;
    cr_array *Sa;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    const double *w = W->data, *zz = Z->data;
    const double *wd = Wd != NULL ? Wd->data : NULL, *zd = Zd != NULL ? Zd->data : NULL;
    size_t rw = W->shape[1], rz = Z->shape[1];
    double *sd = Sa->data;
    for (size_t a = 0; a < m; a++)
        for (size_t b = 0; b < n; b++) {
            double acc = 0.0;
            for (size_t i = 0; i < nc; i++) {
                double t = 0.0;
                if (wd != NULL)
                    t += wd[a * rw + i] * zz[b * rz + i];
                if (zd != NULL)
                    t += w[a * rw + i] * zd[b * rz + i];
                acc += c[i] * t;
            }
            sd[a * n + b] = acc;
        }
    if (z->fold)
        cr__form_fold_upper(sd, n);
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

/* svdvals(A) or eigvals(A) (fact: svd or eigen) with an array cotangent ȳ = c. */
static cr_status spectral_values_init(const cr_form_point *p, void **state, const cr_value *fact,
                                      size_t wi, size_t zi)
{
    cr_status st = cr__form_state(p, sizeof(spectral_state), 0, NULL, state);
    spectral_state *z = *state;
    if (st != CR_OK)
        return st;
    if (z->F.x->ndim != 2)
        return CR_NOTHING;
    const cr_array *yv = p->y->u.arr, *Yb;
    if ((st = cr__tan_array(p->arena, p->name, p->ybar, yv->ndim, yv->shape, CR_DT_F64, &Yb)) !=
        CR_OK)
        return st;
    if (Yb == NULL)
        return CR_NOTHING;
    const cr_array *A = p->args[0].u.arr;
    z->fact = fact;
    z->wi = wi;
    z->zi = zi;
    z->c = Yb->data;
    z->nc = cr_array_numel(Yb);
    z->fold = fact == &cr_fn_eigen && A->structure != CR_MAT_SYMMETRIC &&
              A->structure != CR_MAT_HERMITIAN;
    return CR_OK;
}

/* svdvals(A) = s: Ā = U diag(s̄) Vᵀ, S from svd's frule (U, V: elements 0 and 2). */
static cr_status svdvals_init(const cr_form_point *p, void **state)
{
    return spectral_values_init(p, state, &cr_fn_svd, 0, 2);
}

/* eigvals(A) of a symmetric A = λ: Ā = V diag(λ̄) Vᵀ, S from eigen's frule (V: element 1). */
static cr_status eigvals_init(const cr_form_point *p, void **state)
{
    return spectral_values_init(p, state, &cr_fn_eigen, 1, 1);
}

/* opnorm(A[, p]): for p = 2, Ā = ȳ u₁ v₁ᵀ, S from svd's frule with c = (ȳ); for p = 1 and
 * Inf, the cotangent ȳ sgn(a) on the largest column (row) does not depend on A as long as
 * that column (row) stays the largest and the signs hold: S = 0, as for maximum. */
static cr_status opnorm_init(const cr_form_point *p, void **state)
{
    if (p->nargs > 1) {
        const cr_value *pv = &p->args[1];
        double v = pv->kind == CR_KIND_F64   ? pv->u.f64
                   : pv->kind == CR_KIND_I64 ? (double)pv->u.i64
                                             : 2.0;
        if (v != 2.0)
            return CR_NOTHING;
    }
    cr_status st = cr__form_state(p, sizeof(spectral_state), 0, NULL, state);
    spectral_state *z = *state;
    if (st == CR_OK)
        st = cr__form_ybar_slices(&z->F, &z->c);
    if (st != CR_OK)
        return st;
    if (z->F.x->ndim != 2)
        return CR_NOTHING;
    z->fact = &cr_fn_svd;
    z->wi = 0;
    z->zi = 2;
    z->nc = 1;
    z->fold = false;
    return CR_OK;
}

const cr_rule_form cr__form_svdvals = {matrix_check, svdvals_init, spectral_dir};
const cr_rule_form cr__form_eigvals = {matrix_check, eigvals_init, spectral_dir};
const cr_rule_form cr__form_opnorm = {matrix_check, opnorm_init, spectral_dir};

/* ---- eigen (a tuple result) -------------------------------------------------------------------
 */

/* C = op(X) op(Y) of n x n row-major matrices, op transposing when tx (ty). */
static void mul_nn(size_t n, const double *X, bool tx, const double *Y, bool ty, double *C)
{
    cr__mat a = {X, n, n, n, tx}, b = {Y, n, n, n, ty};
    cr__gemm(CR_DT_F64, &a, &b, 1.0, 0.0, C, n);
}

typedef struct eigen_state {
    cr__form F;
    size_t n;
    bool fold;
    const double *lam, *v;
    const cr_array *Vb;
    double *K, *B, *Fm, *Bd, *Kd, *T, *Sd;
} eigen_state;

/*
 * eigen(A) = (λ, V) of a symmetric A. The rule's pullback of (λ̄, V̄) is
 *     Ā = sym(V K Vᵀ),  K = diag(λ̄) + F ∘ (Vᵀ V̄),  F_ij = 1/(λ_j − λ_i) (0 on the diagonal),
 * sym(X) = (X + Xᵀ)/2, folded onto the upper triangle for a dense, Diagonal or triangular A
 * (the rule reads the symmetric matrix of the logical matrix's upper triangle). Along Ȧ, with
 * λ̇ and V̇ from eigen's frule (λ̄, V̄ fixed: they are the cotangent), the product rule gives
 *     S = sym(V̇ K Vᵀ + V K̇ Vᵀ + V K V̇ᵀ),  K̇ = F ∘ (V̇ᵀ V̄) + Ḟ ∘ (Vᵀ V̄),
 *     Ḟ_ij = −(λ̇_j − λ̇_i) F_ij².
 * F takes the rule's gaps (cr__inv_gap): 0 between eigenvalues equal to working precision,
 * where no second derivative exists in general.
 */
static cr_status eigen_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(eigen_state), 0, NULL, state);
    eigen_state *z = *state;
    if (st != CR_OK)
        return st;
    const cr__form *F = &z->F;
    if (F->x->ndim != 2 || F->x->shape[0] != F->x->shape[1])
        return CR_NOTHING;
    size_t n = F->x->shape[0], nn = n * n, sh[2] = {n, n};
    const cr_array *lb, *L, *V;
    if ((st = cr__tan_array(F->arena, F->who, cr_tangent_field(p->ybar, 0), 1, sh, CR_DT_F64,
                            &lb)) != CR_OK ||
        (st = cr__tan_array(F->arena, F->who, cr_tangent_field(p->ybar, 1), 2, sh, CR_DT_F64,
                            &z->Vb)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 0, 1, &L)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 1, 2, &V)) != CR_OK)
        return st;
    const cr_array *A = p->args[0].u.arr;
    z->fold = A->structure != CR_MAT_SYMMETRIC && A->structure != CR_MAT_HERMITIAN;
    /* K, B = Vᵀ V̄ and F, once per record; then per direction K̇ and S. */
    double *w;
    if ((st = cr__form_work(F, 1, &(cr__form_term){7, n, n}, &w)) != CR_OK)
        return st;
    double *K = w, *B = K + nn, *Fm = B + nn;
    z->K = K;
    z->B = B;
    z->Fm = Fm;
    z->Bd = Fm + nn;
    z->Kd = z->Bd + nn;
    z->T = z->Kd + nn;
    z->Sd = z->T + nn;
    const double *lam = L->data, *v = V->data;
    double scale = cr__spectrum_scale(lam, n);
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            Fm[a * n + b] = a == b ? 0.0 : cr__inv_gap(lam[b], lam[a], scale);
    if (z->Vb != NULL)
        mul_nn(n, v, true, z->Vb->data, false, B);
    for (size_t q = 0; q < nn; q++)
        K[q] = z->Vb != NULL ? Fm[q] * B[q] : 0.0;
    for (size_t a = 0; a < n && lb != NULL; a++)
        K[a * n + a] = ((const double *)lb->data)[a];
    z->n = n;
    z->lam = lam;
    z->v = v;
    return CR_OK;
}

static cr_status eigen_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                           cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    (void)ydot;
    const eigen_state *z = state;
    const cr__form *F = &z->F;
    size_t n = z->n, nn = n * n, sh[2] = {n, n};
    const double *xd, *v = z->v, *K = z->K, *B = z->B, *Fm = z->Fm;
    double *Bd = z->Bd, *Kd = z->Kd, *T = z->T, *Sd = z->Sd;
    const cr_array *Vb = z->Vb;
    cr_tangent dy;
    cr_status st = cr__form_like_x(F, xdot[0], &xd);
    if (st != CR_OK || xd == NULL)
        return st;
    cr_value y;
    if ((st = cr__form_frule_along(F, &cr_fn_eigen, xdot[0], &y, &dy)) != CR_OK)
        return st;
    const cr_array *ld, *Vd;
    if ((st = cr__tan_array(F->arena, F->who, cr_tangent_field(dy, 0), 1, sh, CR_DT_F64, &ld)) !=
            CR_OK ||
        (st = cr__tan_array(F->arena, F->who, cr_tangent_field(dy, 1), 2, sh, CR_DT_F64, &Vd)) !=
            CR_OK)
        return st;
    /* K̇ = F ∘ (V̇ᵀ V̄) + Ḟ ∘ (Vᵀ V̄) */
    memset(Kd, 0, nn * sizeof *Kd);
    if (Vb != NULL && Vd != NULL)
        mul_nn(n, Vd->data, true, Vb->data, false, Bd);
    for (size_t a = 0; a < n && Vb != NULL; a++)
        for (size_t b = 0; b < n; b++) {
            size_t q = a * n + b;
            double dl =
                ld != NULL ? ((const double *)ld->data)[b] - ((const double *)ld->data)[a] : 0.0;
            Kd[q] = (Vd != NULL ? Fm[q] * Bd[q] : 0.0) - dl * Fm[q] * Fm[q] * B[q];
        }
    /* Ṡ0 = V̇ K Vᵀ + V K̇ Vᵀ + V K V̇ᵀ, in Sd */
    memset(Sd, 0, nn * sizeof *Sd);
    if (Vd != NULL) {
        mul_nn(n, Vd->data, false, K, false, T); /* V̇ K */
        mul_nn(n, T, false, v, true, Bd);        /* (V̇ K) Vᵀ */
        for (size_t q = 0; q < nn; q++)
            Sd[q] += Bd[q];
        mul_nn(n, v, false, K, false, T);        /* V K */
        mul_nn(n, T, false, Vd->data, true, Bd); /* (V K) V̇ᵀ */
        for (size_t q = 0; q < nn; q++)
            Sd[q] += Bd[q];
    }
    mul_nn(n, v, false, Kd, false, T); /* V K̇ */
    mul_nn(n, T, false, v, true, Bd);  /* (V K̇) Vᵀ */
    cr_array *Sa;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    double *s = Sa->data;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            s[a * n + b] = 0.5 * (Sd[a * n + b] + Bd[a * n + b] + Sd[b * n + a] + Bd[b * n + a]);
    if (z->fold)
        cr__form_fold_upper(s, n);
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_eigen = {matrix_check, eigen_init, eigen_dir};

/* ---- expm -------------------------------------------------------------------------------------
 */

typedef struct expm_state {
    cr__form F;
    const double *yb;
} expm_state;

/*
 * expm(A) = exp(A) of a real square A: the pullback is Ā = L(Aᵀ, Ȳ), the Fréchet derivative
 * of exp at Aᵀ in the direction Ȳ. Along Ȧ (Ȳ fixed: it is the cotangent) its derivative is
 * the second Fréchet derivative at Aᵀ in the directions Ȧᵀ and Ȳ:
 *     S = d/dε L(Aᵀ + ε Ȧᵀ, Ȳ) = L²(Aᵀ; Ȧᵀ, Ȳ).
 * It is one block of one exponential. For two scalars ε₁, ε₂ with ε₁² = ε₂² = 0 that commute
 * with everything, the power series of exp gives exactly
 *     exp(X + ε₁ E₁ + ε₂ E₂) = exp(X) + ε₁ L(X, E₁) + ε₂ L(X, E₂) + ε₁ ε₂ L²(X; E₁, E₂)
 * (the coefficient of ε₁ ε₂ is Σ_k 1/k! times the sum of the products of k factors X with
 * one E₁ and one E₂ among them, which is ∂²/∂s∂t exp(X + s E₁ + t E₂) at 0). The 4 x 4 block
 * matrices ε₁ = I₂ ⊗ N ⊗ I and ε₂ = N ⊗ I₂ ⊗ I, N = [0 1; 0 0], are such scalars: block j of
 * the four goes to block j + 1 (j = 0, 2) under ε₁, to j + 2 (j = 0, 1) under ε₂, and ε₁ ε₂ =
 * N ⊗ N ⊗ I takes block 0 to block 3 only. So with X = Aᵀ, E₁ = Ȧᵀ, E₂ = Ȳ:
 *         [Aᵀ Ȧᵀ Ȳ  0 ]
 *     M = [0  Aᵀ 0  Ȳ ],   exp(M) = [exp(Aᵀ) L(Aᵀ, Ȧᵀ) L(Aᵀ, Ȳ) S; ...],
 *         [0  0  Aᵀ Ȧᵀ]
 *         [0  0  0  Aᵀ]
 * S the top-right n x n block (Najfeld and Havel 1995; Higham and Relton, "Higher order
 * Fréchet derivatives of matrix functions", 2014). exp(M) is expm's own primal (scaling and
 * squaring): one 4n x 4n exponential per direction, nothing else written.
 */
static cr_status expm_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(expm_state), 0, NULL, state);
    expm_state *z = *state;
    if (st == CR_OK && (st = cr__form_like_x(&z->F, p->ybar, &z->yb)) == CR_OK && z->yb == NULL)
        return CR_NOTHING;
    if (st != CR_OK)
        return st;
    if (z->F.x->ndim != 2 || z->F.x->shape[0] != z->F.x->shape[1])
        return CR_NOTHING; /* a matrix that is not square: the rule refused it when recorded */
    return CR_OK;
}

static cr_status expm_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                          cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    (void)ydot;
    const expm_state *z = state;
    const cr__form *F = &z->F;
    size_t n = F->x->shape[0], w = 4 * n, shape[2] = {w, w};
    const double *a = F->x->data, *yb = z->yb, *xd;
    cr_status st = cr__form_like_x(F, xdot[0], &xd);
    if (st != CR_OK || xd == NULL)
        return st;
    cr_array *M, *Sa;
    const cr_array *E;
    if ((st = cr__new(F->arena, CR_DT_F64, 2, shape, true, &M)) != CR_OK)
        return st;
    double *m = M->data;
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < n; c++) {
            for (size_t b = 0; b < 4; b++) /* Aᵀ on the diagonal */
                m[(b * n + r) * w + b * n + c] = a[c * n + r];
            for (size_t b = 0; b < 4; b += 2) /* Ȧᵀ at (0, 1) and (2, 3) */
                m[(b * n + r) * w + (b + 1) * n + c] = xd[c * n + r];
            for (size_t b = 0; b < 2; b++) /* Ȳ at (0, 2) and (1, 3) */
                m[(b * n + r) * w + (b + 2) * n + c] = yb[r * n + c];
        }
    cr_value mv = cr_value_array(M), ev;
    if ((st = cr_function_call(F->arena, &cr_fn_expm, &mv, 1, &ev)) != CR_OK ||
        (st = cr__dense(F->arena, ev.u.arr, CR_DT_F64, &E)) != CR_OK ||
        (st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    const double *e = E->data;
    double *s = Sa->data;
    for (size_t r = 0; r < n; r++)
        memcpy(s + r * n, e + r * w + 3 * n, n * sizeof *s);
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_expm = {matrix_check, expm_init, expm_dir};

/* ---- svd (a tuple result) ---------------------------------------------------------------------
 */

/* Element e of a tuple cotangent or tangent (ndim dimensions, the given shape) in f64, zeros
 * for a zero one. */
static cr_status tuple_part(const cr__form *F, cr_tangent v, size_t e, size_t ndim,
                            const size_t *shape, const double **out)
{
    const cr_array *a;
    cr_status st =
        cr__tan_array(F->arena, F->who, cr_tangent_field(v, e), ndim, shape, CR_DT_F64, &a);
    if (st != CR_OK)
        return st;
    if (a != NULL) {
        *out = a->data;
        return CR_OK;
    }
    size_t N = ndim == 1 ? shape[0] : shape[0] * shape[1];
    double *z = cr_arena_calloc(F->arena, N ? N : 1, sizeof *z, _Alignof(double));
    if (z == NULL)
        return CR__ALLOC_STATUS(F->arena);
    *out = z;
    return CR_OK;
}

typedef struct svd_state {
    cr__form F;
    size_t m, n, r;
    bool pu, pv;
    const double *U, *s, *V, *Ub, *Vb;
    double *Fm, *Ku, *Kv, *C, *Ju, *Jv, *Jud, *Jvd, *Pu, *P2, *P1, *Pv, *PvS, *Rd, *si, *sid, *W;
} svd_state;

/*
 * svd(A) = (U, s, V), the thin SVD of a real m x n A, r = min(m, n): U m x r, V n x r. With
 * the cotangent (Ū, s̄, V̄), Ju = Uᵀ Ū, Jv = Vᵀ V̄ (r x r), Ku = Ju − Juᵀ, Kv = Jv − Jvᵀ,
 * F_ij = 1/(s_j² − s_i²) (0 for i = j) and Σ⁻¹ = diag(1/s), the rule's pullback is
 *     Ā = U C Vᵀ + Pu Σ⁻¹ Vᵀ + U Σ⁻¹ Pvᵀ,
 *     C_ij = (F ∘ Ku)_ij s_j + s_i (F ∘ Kv)_ij + δ_ij s̄_i,
 *     Pu = (I − U Uᵀ) Ū = Ū − U Ju (m > r only),  Pv = (I − V Vᵀ) V̄ = V̄ − V Jv (n > r only).
 * Along Ȧ, with U̇, ṡ, V̇ from svd's frule at A along Ȧ (the cotangent fixed), the product
 * rule gives, term by term,
 *     J̇u = U̇ᵀ Ū,  J̇v = V̇ᵀ V̄,  K̇u = J̇u − J̇uᵀ,  K̇v = J̇v − J̇vᵀ,
 *     Ḟ_ij = −2 (s_j ṡ_j − s_i ṡ_i) F_ij²,  (Σ⁻¹)˙ = −diag(ṡ / s²),
 *     Ċ_ij = (Ḟ ∘ Ku + F ∘ K̇u)_ij s_j + (F ∘ Ku)_ij ṡ_j + ṡ_i (F ∘ Kv)_ij
 *            + s_i (Ḟ ∘ Kv + F ∘ K̇v)_ij,
 *     Ṗu = −(U̇ Ju + U J̇u),  Ṗv = −(V̇ Jv + V J̇v),
 *     S = (U̇ C + U Ċ + Ṗu Σ⁻¹ + Pu (Σ⁻¹)˙) Vᵀ + (U C + Pu Σ⁻¹) V̇ᵀ
 *         + U̇ (Pv Σ⁻¹)ᵀ + U (Ṗv Σ⁻¹ + Pv (Σ⁻¹)˙)ᵀ.
 * For a square (m = r) U, U Uᵀ = I and Pu = 0, as its derivative: the rule and the form skip
 * the term (likewise Pv for n = r). The conventions are the rule's: F_ij = 0 where s_i and
 * s_j are equal to working precision (cr__inv_gap) and 1/s = 0 where s is zero
 * (cr__inv_sval); both are constant there, so Ḟ and (Σ⁻¹)˙ are 0 too, and the frule's U̇, V̇
 * drop the same terms. At such points the form is the derivative of that convention's
 * pullback, not a second derivative of the loss (the singular vectors are not
 * differentiable there, and the loss in general not twice). svd's frule recomputes the same
 * factorization (the same LAPACK call on the same A), so its U̇, V̇ belong to the recorded U,
 * V and signs chosen by the factorization agree.
 */
static cr_status svd_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(svd_state), 0, NULL, state);
    svd_state *z = *state;
    if (st != CR_OK)
        return st;
    const cr__form *F = &z->F;
    if (F->x->ndim != 2)
        return CR_NOTHING;
    size_t m = F->x->shape[0], n = F->x->shape[1], r = m < n ? m : n, rr = r * r;
    size_t su[2] = {m, r}, sv[2] = {n, r};
    const cr_array *Ua, *sa, *Va;
    const double *Ub, *sb, *Vb;
    if ((st = cr__form_factor_of(F, p->y, 0, 2, &Ua)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 1, 1, &sa)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 2, 2, &Va)) != CR_OK ||
        (st = tuple_part(F, p->ybar, 0, 2, su, &Ub)) != CR_OK ||
        (st = tuple_part(F, p->ybar, 1, 1, &r, &sb)) != CR_OK ||
        (st = tuple_part(F, p->ybar, 2, 2, sv, &Vb)) != CR_OK)
        return st;
    if (Ua->shape[1] != r || Va->shape[1] != r || sa->shape[0] != r)
        return CR_EINVAL;
    const double *U = Ua->data, *s = sa->data, *V = Va->data;
    bool pu = m > r, pv = n > r;
    /* Once per record: F, Ku, Kv, C, Ju, Jv, Σ⁻¹, Pu, Pv, Pv Σ⁻¹ (PvS) and U C + Pu Σ⁻¹ (P2).
     * Per direction: J̇u, J̇v, (Σ⁻¹)˙, Ċ, P1 (the factor of Vᵀ), Rd (that of U) and W. */
    size_t mx = m > n ? m : n;
    double *wk;
    if ((st = cr__form_work(
             F, 5, (const cr__form_term[]){{8, r, r}, {3, m, r}, {3, n, r}, {2, r, 1}, {mx, r, 1}},
             &wk)) != CR_OK)
        return st;
    double *Fm = wk, *Ku = Fm + rr, *Kv = Ku + rr, *C = Kv + rr, *Ju = C + rr, *Jv = Ju + rr,
           *Jud = Jv + rr, *Jvd = Jud + rr, *Pu = Jvd + rr, *P2 = Pu + m * r, *P1 = P2 + m * r,
           *Pv = P1 + m * r, *PvS = Pv + n * r, *Rd = PvS + n * r, *si = Rd + n * r, *sid = si + r,
           *W = sid + r;
    double smax = r > 0 ? s[0] : 0.0;
    for (size_t a = 0; a < r; a++) {
        si[a] = cr__inv_sval(s[a], smax);
        for (size_t b = 0; b < r; b++)
            Fm[a * r + b] = a == b ? 0.0 : cr__inv_gap(s[b] * s[b], s[a] * s[a], smax * smax);
    }
    cr__form_mm(1.0, U, m, r, 1, Ub, m, r, 0, 0.0, Ju);
    cr__form_mm(1.0, V, n, r, 1, Vb, n, r, 0, 0.0, Jv);
    for (size_t a = 0; a < r; a++)
        for (size_t b = 0; b < r; b++) {
            size_t q = a * r + b;
            Ku[q] = Ju[q] - Ju[b * r + a];
            Kv[q] = Jv[q] - Jv[b * r + a];
            C[q] = Fm[q] * Ku[q] * s[b] + s[a] * Fm[q] * Kv[q] + (a == b ? sb[a] : 0.0);
        }
    cr__form_mm(1.0, U, m, r, 0, C, r, r, 0, 0.0, P2); /* U C */
    if (pu) {                                          /* Pu = Ū − U Ju; P2 += Pu Σ⁻¹ */
        memcpy(Pu, Ub, m * r * sizeof *Pu);
        cr__form_mm(-1.0, U, m, r, 0, Ju, r, r, 0, 1.0, Pu);
        for (size_t e = 0; e < m * r; e++)
            P2[e] += Pu[e] * si[e % r];
    }
    if (pv) { /* Pv = V̄ − V Jv, PvS = Pv Σ⁻¹ */
        memcpy(Pv, Vb, n * r * sizeof *Pv);
        cr__form_mm(-1.0, V, n, r, 0, Jv, r, r, 0, 1.0, Pv);
        for (size_t e = 0; e < n * r; e++)
            PvS[e] = Pv[e] * si[e % r];
    }
    *z = (svd_state){z->F, m,  n,  r,   pu,  pv, U,  s,  V,  Ub,  Vb, Fm, Ku,  Kv,
                     C,    Ju, Jv, Jud, Jvd, Pu, P2, P1, Pv, PvS, Rd, si, sid, W};
    return CR_OK;
}

static cr_status svd_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                         cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    (void)ydot;
    const svd_state *z = state;
    const cr__form *F = &z->F;
    size_t m = z->m, n = z->n, r = z->r, su[2] = {m, r}, sv[2] = {n, r};
    const double *U = z->U, *s = z->s, *V = z->V, *Ub = z->Ub, *Vb = z->Vb;
    const double *Fm = z->Fm, *Ku = z->Ku, *Kv = z->Kv, *C = z->C, *Ju = z->Ju, *Jv = z->Jv;
    const double *Pu = z->Pu, *P2 = z->P2, *Pv = z->Pv, *PvS = z->PvS, *si = z->si;
    double *Jud = z->Jud, *Jvd = z->Jvd, *P1 = z->P1, *Rd = z->Rd, *sid = z->sid, *W = z->W;
    cr_tangent dy;
    const double *xd, *Ud, *sd, *Vd;
    cr_value y;
    cr_status st = cr__form_like_x(F, xdot[0], &xd);
    if (st != CR_OK || xd == NULL)
        return st;
    if ((st = cr__form_frule_along(F, &cr_fn_svd, xdot[0], &y, &dy)) != CR_OK ||
        (st = tuple_part(F, dy, 0, 2, su, &Ud)) != CR_OK ||
        (st = tuple_part(F, dy, 1, 1, &r, &sd)) != CR_OK ||
        (st = tuple_part(F, dy, 2, 2, sv, &Vd)) != CR_OK)
        return st;
    for (size_t a = 0; a < r; a++)
        sid[a] = -sd[a] * si[a] * si[a]; /* (Σ⁻¹)˙ */
    cr__form_mm(1.0, Ud, m, r, 1, Ub, m, r, 0, 0.0, Jud);
    cr__form_mm(1.0, Vd, n, r, 1, Vb, n, r, 0, 0.0, Jvd);
    double *Cd = W; /* Ċ (r x r; W holds max(m, n) x r) */
    for (size_t a = 0; a < r; a++)
        for (size_t b = 0; b < r; b++) {
            size_t q = a * r + b, pp = b * r + a;
            double Fd = -2.0 * (s[b] * sd[b] - s[a] * sd[a]) * Fm[q] * Fm[q];
            double Kud = Jud[q] - Jud[pp], Kvd = Jvd[q] - Jvd[pp];
            Cd[q] = (Fd * Ku[q] + Fm[q] * Kud) * s[b] + Fm[q] * Ku[q] * sd[b] +
                    sd[a] * Fm[q] * Kv[q] + s[a] * (Fd * Kv[q] + Fm[q] * Kvd);
        }
    /* P1 = U̇ C + U Ċ + Ṗu Σ⁻¹ + Pu (Σ⁻¹)˙ */
    cr__form_mm(1.0, Ud, m, r, 0, C, r, r, 0, 0.0, P1);
    cr__form_mm(1.0, U, m, r, 0, Cd, r, r, 0, 1.0, P1);
    if (z->pu) {
        cr__form_mm(1.0, Ud, m, r, 0, Ju, r, r, 0, 0.0, W); /* W = U̇ Ju + U J̇u = −Ṗu */
        cr__form_mm(1.0, U, m, r, 0, Jud, r, r, 0, 1.0, W);
        for (size_t e = 0; e < m * r; e++)
            P1[e] += -W[e] * si[e % r] + Pu[e] * sid[e % r];
    }
    cr_array *Sa;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    double *sm = Sa->data;
    cr__form_mm(1.0, P1, m, r, 0, V, n, r, 1, 0.0, sm);  /* P1 Vᵀ */
    cr__form_mm(1.0, P2, m, r, 0, Vd, n, r, 1, 1.0, sm); /* (U C + Pu Σ⁻¹) V̇ᵀ */
    if (z->pv) {
        cr__form_mm(1.0, Vd, n, r, 0, Jv, r, r, 0, 0.0, W); /* W = V̇ Jv + V J̇v = −Ṗv */
        cr__form_mm(1.0, V, n, r, 0, Jvd, r, r, 0, 1.0, W);
        for (size_t e = 0; e < n * r; e++)
            Rd[e] = -W[e] * si[e % r] + Pv[e] * sid[e % r];   /* Ṗv Σ⁻¹ + Pv (Σ⁻¹)˙ */
        cr__form_mm(1.0, Ud, m, r, 0, PvS, n, r, 1, 1.0, sm); /* U̇ (Pv Σ⁻¹)ᵀ */
        cr__form_mm(1.0, U, m, r, 0, Rd, n, r, 1, 1.0, sm); /* U (Ṗv Σ⁻¹ + Pv (Σ⁻¹)˙)ᵀ */
    }
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_svd = {matrix_check, svd_init, svd_dir};

/* ---- eigen_general, eigvals_general (complex results of a real matrix) ------------------------
 */

/* Element e of the tuple value y (a c128 array of ndim dimensions) as a work matrix. */
static cr_status geig_part(const cr__form *F, const cr_value *y, size_t e, size_t ndim, cr__cmat *m)
{
    cr_value v;
    if (y->kind != CR_KIND_STRUCT ||
        cr_type_field_value(y->u.obj.type, y->u.obj.ptr, e, &v) != CR_OK ||
        v.kind != CR_KIND_ARRAY || v.u.arr == NULL || v.u.arr->ndim != ndim)
        return CR_EINVAL;
    return cr__cmat_from(F->arena, v.u.arr, true, m);
}

/* A tangent of a c128 array of `shape` (ndim 1 or 2) as a complex work matrix, zeros when it
 * is zero. */
static cr_status geig_tan(const cr__form *F, cr_tangent v, size_t ndim, const size_t *shape,
                          cr__cmat *m)
{
    cr_status st = cr__cmat_tan(F->arena, F->who, v, ndim, shape, true, m);
    if (st != CR_OK || m->p != NULL)
        return st;
    return cr__cmat_new(F->arena, true, shape[0], ndim == 1 ? 1 : shape[1], true, m);
}

/* The gauge component k_j of column j of eigen_general's V (each column has unit 2-norm and
 * its component of largest modulus, the first on a tie, real and positive): the row of that
 * component, as the rule picks it (the phase the rule applied does not change the moduli). */
static size_t geig_gauge_row(const cr__cmat *V, size_t j)
{
    size_t k = 0;
    double big = -1;
    for (size_t i = 0; i < V->r; i++) {
        double a = cabs(cr__cmat_get(V, i, j));
        if (a > big) {
            big = a;
            k = i;
        }
    }
    return k;
}

/* eigen_general, eigvals_general: a real A, of any structure (the rule reads a structured A
 * as its logical dense matrix and projects its cotangent, as the engine projects S); a
 * complex A is not a real matrix. */
static const char *geig_check(const cr_value *args, size_t nargs, const bool *var,
                              uint32_t *linearity)
{
    (void)linearity;
    const char *why = cr__form_check_leading(args, nargs, var, 1);
    if (why != NULL)
        return why;
    const cr_array *A = args[0].u.arr;
    return A != NULL && A->dtype == CR_DT_C128 ? "A is complex; the form covers real matrices only"
                                               : NULL;
}

typedef struct geig_state {
    cr__form F;
    size_t n, *kr;
    cr__cmat V, Vi, Vb, Q, G, H, Fc;
    cr_complex *z, *g;
} geig_state;

/*
 * eigen_general(A) = (λ, V) of a real n x n A (complex λ and V; each column of V of unit
 * 2-norm with its component k_j of largest modulus real and positive), and eigvals_general(A)
 * = λ (the same with V̄ = 0). With the cotangent (λ̄, V̄), the rule's pullback is
 *     Ā = re(Ā_c),  Ā_c = W G Vᴴ,  W = V⁻ᴴ,  G = diag(λ̄) + Fc ∘ H (off the diagonal),
 *     Fc_ij = conj(F_ij), F_ij = 1/(λ_j − λ_i) (cr__inv_gap_c: 0 between equal eigenvalues),
 *     H_ij = K_ij − Q_ij re(g_j) + z_j conj(V_{k_j i}),  K = Vᴴ V̄,  Q = Vᴴ V,  g_j = K_jj,
 *     z_j = −i im(g_j) / V_{k_j j}
 * (re: the projection onto a real A; the Q term is the unit norm, the z term the phase
 * convention). Along Ȧ, with λ̇ and V̇ from eigen_general's frule at A along Ȧ (λ̄, V̄ fixed:
 * they are the cotangent; k_j fixed: the largest component stays the largest nearby), the
 * product rule over each factor, with dW = −W V̇ᴴ W and M = V⁻¹ V̇ (so that V̇ᴴ W = Mᴴ and
 * V̇ᴴ = Mᴴ Vᴴ), gives
 *     S = re(W Ġ Vᴴ − W V̇ᴴ W G Vᴴ + W G V̇ᴴ) = re(W (Ġ + G Mᴴ − Mᴴ G) Vᴴ),
 *     Ġ = Ḟc ∘ H + Fc ∘ Ḣ (off the diagonal; λ̄ fixed, so 0 on it),
 *     Ḟc_ij = −conj(λ̇_j − λ̇_i) Fc_ij²,
 *     Ḣ_ij = K̇_ij − Q̇_ij re(g_j) − Q_ij re(ġ_j) + ż_j conj(V_{k_j i}) + z_j conj(V̇_{k_j i}),
 *     K̇ = V̇ᴴ V̄,  Q̇ = V̇ᴴ V + Vᴴ V̇,  ġ_j = K̇_jj,
 *     ż_j = −i im(ġ_j) / V_{k_j j} + i im(g_j) V̇_{k_j j} / V_{k_j j}².
 * For eigvals_general (V̄ = 0) only S = re(W (G Mᴴ − Mᴴ G) Vᴴ) with G = diag(λ̄) remains: the
 * eigenvalues do not depend on V's normalisation, and neither does S (the diagonal of M, the
 * gauge's part of V̇, cancels in G Mᴴ − Mᴴ G). V⁻¹ is matinv's primal of V, once per record.
 * Where two eigenvalues are equal to working precision, F and Ḟ are 0 as in the rule (and
 * the frule's V̇ drops the same terms): S is then the derivative of that convention's
 * pullback, not a second derivative (none exists there in general). A defective A (V
 * singular) is refused by eigen_general's frule (CR_EDOMAIN).
 */
static cr_status geig_init(const cr_form_point *p, void **state, cr_tangent lbt, cr_tangent vbt)
{
    cr_status st = cr__form_state(p, sizeof(geig_state), 0, NULL, state);
    geig_state *w = *state;
    if (st != CR_OK)
        return st;
    const cr__form *F = &w->F;
    if (F->x->ndim != 2 || F->x->shape[0] != F->x->shape[1] || F->x->shape[0] == 0)
        return CR_NOTHING; /* the rule refused it when recorded, or nothing to add */
    size_t n = F->x->shape[0], sh[2] = {n, n};
    cr_value ev = *p->y, vv;
    if (p->y->kind != CR_KIND_STRUCT &&
        (st = cr_function_call(F->arena, &cr_fn_eigen_general, &p->args[0], 1, &ev)) != CR_OK)
        return st;
    cr__cmat L, K;
    cr__cmat *V = &w->V, *Vb = &w->Vb, *Q = &w->Q, *G = &w->G, *H = &w->H, *Fc = &w->Fc;
    cr__cmat Lb;
    if ((st = geig_part(F, &ev, 0, 1, &L)) != CR_OK || (st = geig_part(F, &ev, 1, 2, V)) != CR_OK ||
        (st = cr__cmat_tan(F->arena, F->who, lbt, 1, &n, true, &Lb)) != CR_OK ||
        (st = cr__cmat_tan(F->arena, F->who, vbt, 2, sh, true, Vb)) != CR_OK)
        return st;
    if (Lb.p == NULL && Vb->p == NULL)
        return CR_NOTHING;
    cr_array *Va;
    cr_value iv;
    if ((st = cr__cmat_to_array(F->arena, V, false, &Va)) != CR_OK)
        return st;
    vv = cr_value_array(Va);
    if ((st = cr_function_call(F->arena, &cr_fn_matinv, &vv, 1, &iv)) != CR_OK ||
        (st = cr__cmat_from(F->arena, iv.u.arr, true, &w->Vi)) != CR_OK)
        return st;
    /* Once per record: k_j, Fc, and with V̄: K, Q, g, z, H; then G. */
    size_t *kr = cr__arena_array(F->arena, F->who, n, sizeof *kr, _Alignof(size_t));
    cr_complex *z =
        cr__arena_array(F->arena, F->who, 2 * (n ? n : 1), sizeof *z, _Alignof(cr_complex));
    if (kr == NULL || z == NULL)
        return CR__ALLOC_STATUS(F->arena);
    cr_complex *lam = L.p, *g = z + n;
    double scale = cr__spectrum_scale_c(lam, n);
    if ((st = cr__cmat_new(F->arena, true, n, n, true, G)) != CR_OK ||
        (st = cr__cmat_new(F->arena, true, n, n, true, H)) != CR_OK ||
        (st = cr__cmat_new(F->arena, true, n, n, true, Fc)) != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++) {
        kr[j] = geig_gauge_row(V, j);
        for (size_t a = 0; a < n; a++)
            if (a != j)
                cr__cmat_set(Fc, a, j, conj(cr__inv_gap_c(lam[j], lam[a], scale)));
    }
    if (Vb->p != NULL) {
        if ((st = cr__cmat_mul(F->arena, 'C', 'N', 1.0, V, Vb, &K)) != CR_OK ||
            (st = cr__cmat_mul(F->arena, 'C', 'N', 1.0, V, V, Q)) != CR_OK)
            return st;
        for (size_t j = 0; j < n; j++) {
            g[j] = cr__cmat_get(&K, j, j);
            z[j] = cr__c(0, -cimag(g[j])) / cr__cmat_get(V, kr[j], j);
            for (size_t a = 0; a < n; a++)
                if (a != j) {
                    cr_complex h = cr__cmat_get(&K, a, j) - cr__cmat_get(Q, a, j) * creal(g[j]) +
                                   z[j] * conj(cr__cmat_get(V, kr[j], a));
                    cr__cmat_set(H, a, j, h);
                    cr__cmat_set(G, a, j, cr__cmat_get(Fc, a, j) * h);
                }
        }
    }
    for (size_t a = 0; a < n && Lb.p != NULL; a++)
        cr__cmat_set(G, a, a, cr__cmat_get(&Lb, a, 0));
    w->n = n;
    w->kr = kr;
    w->z = z;
    w->g = g;
    return CR_OK;
}

static cr_status geig_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                          cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    (void)ydot;
    const geig_state *w = state;
    const cr__form *F = &w->F;
    size_t n = w->n, sh[2] = {n, n};
    const size_t *kr = w->kr;
    const cr_complex *z = w->z, *g = w->g;
    const cr__cmat *V = &w->V, *Vb = &w->Vb;
    cr_tangent dy;
    const double *xd;
    cr_value y;
    cr_status st = cr__form_like_x(F, xdot[0], &xd);
    if (st != CR_OK || xd == NULL)
        return st;
    cr__cmat Ld, Vd, M, T, Kd, Qd, U, Sm;
    if ((st = cr__form_frule_along(F, &cr_fn_eigen_general, xdot[0], &y, &dy)) != CR_OK ||
        (st = geig_tan(F, cr_tangent_field(dy, 0), 1, &n, &Ld)) != CR_OK ||
        (st = geig_tan(F, cr_tangent_field(dy, 1), 2, sh, &Vd)) != CR_OK ||
        (st = cr__cmat_mul(F->arena, 'N', 'N', 1.0, &w->Vi, &Vd, &M)) != CR_OK ||
        (st = cr__cmat_new(F->arena, true, n, n, true, &T)) != CR_OK)
        return st;
    /* T = Ġ off the diagonal */
    if (Vb->p != NULL) {
        if ((st = cr__cmat_mul(F->arena, 'C', 'N', 1.0, &Vd, Vb, &Kd)) != CR_OK ||
            (st = cr__cmat_mul(F->arena, 'C', 'N', 1.0, &Vd, V, &Qd)) != CR_OK)
            return st;
        cr__cmat_gemm('C', 'N', 1.0, V, &Vd, 1.0, &Qd); /* Q̇ = V̇ᴴ V + Vᴴ V̇ */
        const cr_complex *ld = Ld.p;
        for (size_t j = 0; j < n; j++) {
            size_t kj = kr[j];
            cr_complex gd = cr__cmat_get(&Kd, j, j), vk = cr__cmat_get(V, kj, j);
            cr_complex zd = cr__c(0, -cimag(gd)) / vk +
                            cr__c(0, cimag(g[j])) * cr__cmat_get(&Vd, kj, j) / (vk * vk);
            for (size_t a = 0; a < n; a++) {
                if (a == j)
                    continue;
                cr_complex fc = cr__cmat_get(&w->Fc, a, j);
                cr_complex hd = cr__cmat_get(&Kd, a, j) - cr__cmat_get(&Qd, a, j) * creal(g[j]) -
                                cr__cmat_get(&w->Q, a, j) * creal(gd) +
                                zd * conj(cr__cmat_get(V, kj, a)) +
                                z[j] * conj(cr__cmat_get(&Vd, kj, a));
                cr_complex fcd = -conj(ld[j] - ld[a]) * fc * fc;
                cr__cmat_set(&T, a, j, fcd * cr__cmat_get(&w->H, a, j) + fc * hd);
            }
        }
    }
    /* T += G Mᴴ − Mᴴ G; S = re(W T Vᴴ), W = V⁻ᴴ */
    cr__cmat_gemm('N', 'C', 1.0, &w->G, &M, 1.0, &T);
    cr__cmat_gemm('C', 'N', -1.0, &M, &w->G, 1.0, &T);
    cr_array *Sa;
    if ((st = cr__cmat_mul(F->arena, 'C', 'N', 1.0, &w->Vi, &T, &U)) != CR_OK ||
        (st = cr__cmat_mul(F->arena, 'N', 'C', 1.0, &U, V, &Sm)) != CR_OK ||
        (st = cr__cmat_out(F->arena, &Sm, false, CR_DT_F64, &Sa)) != CR_OK)
        return st;
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

/* eigvals_general(A) = λ: its cotangent is ȳ = λ̄ (V̄ = 0). */
static cr_status eigvals_general_init(const cr_form_point *p, void **state)
{
    return geig_init(p, state, p->ybar, cr_tangent_zero());
}

/* eigen_general(A) = (λ, V): the tuple cotangent's elements λ̄ and V̄. */
static cr_status eigen_general_init(const cr_form_point *p, void **state)
{
    cr_tangent lb, vb;
    cr_status st = cr__tuple_field(p->arena, p->name, p->ybar, 0, &lb);
    if (st == CR_OK)
        st = cr__tuple_field(p->arena, p->name, p->ybar, 1, &vb);
    return st != CR_OK ? st : geig_init(p, state, lb, vb);
}

const cr_rule_form cr__form_eigen_general = {geig_check, eigen_general_init, geig_dir};
const cr_rule_form cr__form_eigvals_general = {geig_check, eigvals_general_init, geig_dir};

/* ---- matfun_herm ------------------------------------------------------------------------------
 */

/* f'' at x from the scalar row (as sum(f, A)'s form takes it). */
static double row_f2(const cr_scalar_rule *row, double x)
{
    double Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    double H[CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
    /* the partials at x (cr__row_hessian starts from them) */
    row->f64(&x, Y, D);
    cr__row_hessian(row, &x, D, H, 1u);
    return H[0];
}

/* The first divided difference f[a, b] as the rule takes it (cr__divdiff1). */
static double dd1(const cr_scalar_rule *row, double a, double b, double tol)
{
    double fa, fb, da, db;
    row->f64(&a, &fa, &da);
    row->f64(&b, &fb, &db);
    return cr__divdiff1(row, a, b, fa, fb, tol);
}

/* The second divided difference f[a, b, c] (symmetric in its arguments): f''(midpoint)/2
 * when all three are within tol, else (f[b, c] - f[a, b]) / (c - a) over the sorted values. */
static double dd2(const cr_scalar_rule *row, double a, double b, double c, double tol)
{
    double t;
    if (a > b)
        t = a, a = b, b = t;
    if (b > c)
        t = b, b = c, c = t;
    if (a > b)
        t = a, a = b, b = t;
    if (c - a <= tol)
        return 0.5 * row_f2(row, 0.5 * (a + c));
    return (dd1(row, b, c, tol) - dd1(row, a, b, tol)) / (c - a);
}

/* matfun_herm(f, A): f a scalar-table function of one argument; A real, of any structure
 * (the rule reads the symmetric matrix of the logical matrix's upper triangle and projects its
 * cotangent onto A's structure; the engine projects S the same way). */
static const char *matfun_check(const cr_value *args, size_t nargs, const bool *var,
                                uint32_t *linearity)
{
    (void)var;
    (void)linearity;
    const cr_scalar_rule *r = nargs < 2 || args[0].kind != CR_KIND_FUNC || args[0].u.func.fn == NULL
                                  ? NULL
                                  : cr_scalar_rule_of(args[0].u.func.fn);
    if (r == NULL || r->nin != 1 || r->nout != 1 || args[1].kind != CR_KIND_ARRAY)
        return "f is not a scalar-table function of one argument";
    const cr_array *A = args[1].u.arr;
    return A != NULL && A->dtype == CR_DT_C128 ? "A is complex; the form covers real matrices only"
                                               : NULL;
}

typedef struct matfun_state {
    cr__form F;
    size_t n;
    bool fold;
    const double *v;
    double *D2, *G, *Ad, *T, *At, *St;
} matfun_state;

/*
 * matfun_herm(f, A) = f(A) = V diag(f(λ)) Vᵀ of a symmetric A (its upper triangle read, or a
 * Symmetric view). The pullback is the Daleckii-Krein derivative applied to Ḡ = sym(Ȳ):
 * Ā = Df(A)[Ḡ] = V (F ∘ (Vᵀ Ḡ V)) Vᵀ, F_ij = f[λ_i, λ_j] (folded onto the upper triangle for
 * a dense A). Its derivative along Ȧ is the second derivative of the matrix function,
 * symmetric in its two directions; in the eigenbasis (Ã = Vᵀ Ȧ V, G̃ = Vᵀ Ḡ V) it is
 *     S = V S̃ Vᵀ,   S̃_ij = Σ_k f[λ_i, λ_k, λ_j] (Ã_ik G̃_kj + G̃_ik Ã_kj)
 * (Daleckii-Krein for the second derivative: differentiate F_ij(λ(A)) and V together, or
 * check on f = x², where f[., ., .] = 1 and D²f[E, G] = E G + G E). f[a, b, c] is the second
 * divided difference of f, from f, f' and f'' (the scalar row, f'' as for sum(f, A)), so S
 * has no 1/(λ_i − λ_j) of its own and exists at repeated eigenvalues too. λ, V: eigen at A
 * (its frule's primal); Ȧ is read on its upper triangle as the rule reads A. A Diagonal or
 * triangular A is read as its logical dense matrix, S folded as for a dense A (the engine then
 * projects it onto A's structure, as the rule gives its cotangent).
 */
static cr_status matfun_init(const cr_form_point *p, void **state)
{
    const double *yb;
    cr_status st = cr__form_state(p, sizeof(matfun_state), 1, NULL, state);
    matfun_state *w = *state;
    if (st != CR_OK)
        return st;
    const cr__form *F = &w->F;
    if (F->x->ndim != 2 || F->x->shape[0] != F->x->shape[1])
        return CR_NOTHING;
    if ((st = cr__form_like_x(F, p->ybar, &yb)) != CR_OK)
        return st;
    if (yb == NULL)
        return CR_NOTHING;
    size_t n = F->x->shape[0], nn = n * n;
    cr_value y;
    cr_tangent dy;
    const cr_array *L, *V;
    if ((st = cr__form_frule_along(F, &cr_fn_eigen, cr_tangent_zero(), &y, &dy)) != CR_OK ||
        (st = cr__form_factor_of(F, &y, 0, 1, &L)) != CR_OK ||
        (st = cr__form_factor_of(F, &y, 1, 2, &V)) != CR_OK)
        return st;
    const cr_scalar_rule *row = cr_scalar_rule_of(p->args[0].u.func.fn);
    const double *lam = L->data, *v = V->data;
    double tol = cr__matfun_tol(lam, n); /* the rule's */
    double *wk;                          /* n³ is not bounded by the argument's n² elements */
    if ((st = cr__form_work(F, 2, (const cr__form_term[]){{n, n, n}, {5, n, n}}, &wk)) != CR_OK)
        return st;
    double *D2 = wk, *G = D2 + n * nn, *Ad = G + nn, *T = Ad + nn, *At = T + nn, *St = At + nn;
    for (size_t a = 0; a < n; a++)
        for (size_t c = 0; c < n; c++)
            for (size_t b = 0; b < n; b++)
                D2[(a * n + c) * n + b] = dd2(row, lam[a], lam[b], lam[c], tol);
    /* G̃ = Vᵀ sym(Ȳ) V */
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            T[a * n + b] = 0.5 * (yb[a * n + b] + yb[b * n + a]);
    mul_nn(n, v, true, T, false, At);
    mul_nn(n, At, false, v, false, G);
    uint8_t as = p->args[1].u.arr->structure; /* F->x is A's logical dense matrix */
    w->fold = as != CR_MAT_SYMMETRIC && as != CR_MAT_HERMITIAN;
    w->n = n;
    w->v = v;
    w->D2 = D2;
    w->G = G;
    w->Ad = Ad;
    w->T = T;
    w->At = At;
    w->St = St;
    return CR_OK;
}

static cr_status matfun_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                            cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    (void)ydot;
    const matfun_state *w = state;
    const cr__form *F = &w->F;
    size_t n = w->n;
    const double *xd, *v = w->v, *D2 = w->D2, *G = w->G;
    double *Ad = w->Ad, *T = w->T, *At = w->At, *St = w->St;
    cr_status st = cr__form_like_x(F, xdot[1], &xd);
    if (st != CR_OK || xd == NULL)
        return st;
    /* Ã = Vᵀ Ȧ V, Ȧ mirrored from its upper triangle */
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            Ad[a * n + b] = a <= b ? xd[a * n + b] : xd[b * n + a];
    mul_nn(n, v, true, Ad, false, T);
    mul_nn(n, T, false, v, false, At);
    for (size_t a = 0; a < n; a++)
        for (size_t c = 0; c < n; c++) {
            double acc = 0.0;
            for (size_t b = 0; b < n; b++)
                acc += D2[(a * n + c) * n + b] *
                       (At[a * n + b] * G[b * n + c] + G[a * n + b] * At[b * n + c]);
            St[a * n + c] = acc;
        }
    cr_array *Sa;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    mul_nn(n, v, false, St, false, T);
    mul_nn(n, T, false, v, true, Sa->data);
    if (w->fold)
        cr__form_fold_upper(Sa->data, n);
    S[1] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_matfun_herm = {matfun_check, matfun_init, matfun_dir};

/* ---- pinv -------------------------------------------------------------------------------------
 */

typedef struct pinv_state {
    cr__form F;
    size_t m, n;
    const double *Y;
    double *P, *Q, *W1, *W2, *W3, *W4, *W5, *W6, *Pd, *Fd, *Qd, *Ed, *Yz, *Sd;
} pinv_state;

/*
 * pinv(A) = Y, A m x n of full rank (Y n x m). The rule's pullback (Golub and Pereyra) is
 *     Ā = -Yᵀ Ȳ Yᵀ + P Ȳᵀ Y Yᵀ + Yᵀ Y Ȳᵀ Q,   P = I - A Y (m x m), Q = I - Y A (n x n).
 * Along Ȧ, with Ẏ the result's tangent (pinv's frule, from the forward sweep), Ȳ fixed, the
 * product rule gives, with Ṗ = -(Ȧ Y + A Ẏ), Q̇ = -(Ẏ A + Y Ȧ), Ė = Ẏ Yᵀ + Y Ẏᵀ
 * (= d(Y Yᵀ)), Ḟ = Ẏᵀ Y + Yᵀ Ẏ (= d(Yᵀ Y)):
 *     S = -Ẏᵀ (Ȳ Yᵀ) - (Yᵀ Ȳ) Ẏᵀ + Ṗ (Ȳᵀ Y Yᵀ) + (P Ȳᵀ) Ė + Ḟ (Ȳᵀ Q) + (Yᵀ Y Ȳᵀ) Q̇,
 * the parenthesized products once per record. At a rank-deficient A (rank(A) = tr(A Y) <
 * min(m, n): pinv truncated singular values) the pseudo-inverse is not continuous (a small
 * change of A restores the rank, and any step above the truncation's tolerance does): no
 * second derivative exists there, and the form refuses it (CR_EDOMAIN).
 */
static cr_status pinv_init(const cr_form_point *p, void **state)
{
    const double *Yb, *Y;
    cr_status st = cr__form_state(p, sizeof(pinv_state), 0, NULL, state);
    pinv_state *z = *state;
    if (st != CR_OK)
        return st;
    const cr__form *F = &z->F;
    if (F->x->ndim != 2)
        return CR_NOTHING;
    size_t m = F->x->shape[0], n = F->x->shape[1], r = m < n ? m : n;
    if ((st = cr__form_y_array(F, &Y)) != CR_OK)
        return st;
    {
        size_t sh[2] = {n, m};
        const cr_array *a;
        if ((st = cr__tan_array(F->arena, F->who, p->ybar, 2, sh, CR_DT_F64, &a)) != CR_OK)
            return st;
        if (a == NULL)
            return CR_NOTHING;
        Yb = a->data;
    }
    const double *A = F->x->data;
    double rank = 0.0; /* tr(A Y): A Y projects onto A's (truncated) range */
    for (size_t a = 0; a < m; a++)
        for (size_t b = 0; b < n; b++)
            rank += A[a * n + b] * Y[b * m + a];
    if (rank < (double)r - 0.5)
        return cr__form_fail(F, CR_EDOMAIN,
                             "%s: no second derivative at a rank-deficient matrix (rank %.0f < "
                             "%zu: the pseudo-inverse is not continuous there)",
                             F->who, rank, r);
    double *w; /* m² and n² are not bounded by the argument's m n elements */
    if ((st = cr__form_work(F, 3, (const cr__form_term[]){{6, m, n}, {4, m, m}, {4, n, n}}, &w)) !=
        CR_OK)
        return st;
    size_t mm_ = m * m, nn = n * n, mn = m * n;
    double *P = w, *Q = P + mm_, *W5 = Q + nn, *W6 = W5 + nn, *W1 = W6 + mm_, *W2 = W1 + mn,
           *W3 = W2 + mn, *W4 = W3 + mn, *Pd = W4 + mn, *Fd = Pd + mm_, *Qd = Fd + mm_,
           *Ed = Qd + nn, *Yz = Ed + nn, *Sd = Yz + mn; /* Yz: a zero Ẏ */
    /* P = I - A Y, Q = I - Y A; W5 = Ȳ Yᵀ, W6 = Yᵀ Ȳ; W1 = Ȳᵀ (Y Yᵀ), W2 = Ȳᵀ Q,
     * W3 = (Yᵀ Y) Ȳᵀ, W4 = P Ȳᵀ */
    cr__form_mm(-1.0, A, m, n, 0, Y, n, m, 0, 0.0, P);
    cr__form_mm(-1.0, Y, n, m, 0, A, m, n, 0, 0.0, Q);
    for (size_t a = 0; a < m; a++)
        P[a * m + a] += 1.0;
    for (size_t a = 0; a < n; a++)
        Q[a * n + a] += 1.0;
    cr__form_mm(1.0, Yb, n, m, 0, Y, n, m, 1, 0.0, W5);
    cr__form_mm(1.0, Y, n, m, 1, Yb, n, m, 0, 0.0, W6);
    cr__form_mm(1.0, Y, n, m, 0, Y, n, m, 1, 0.0, Ed); /* Y Yᵀ, for now */
    cr__form_mm(1.0, Yb, n, m, 1, Ed, n, n, 0, 0.0, W1);
    cr__form_mm(1.0, Yb, n, m, 1, Q, n, n, 0, 0.0, W2);
    cr__form_mm(1.0, Y, n, m, 1, Y, n, m, 0, 0.0, Fd); /* Yᵀ Y, for now */
    cr__form_mm(1.0, Fd, m, m, 0, Yb, n, m, 1, 0.0, W3);
    cr__form_mm(1.0, P, m, m, 0, Yb, n, m, 1, 0.0, W4);
    *z = (pinv_state){z->F, m, n, Y, P, Q, W1, W2, W3, W4, W5, W6, Pd, Fd, Qd, Ed, Yz, Sd};
    return CR_OK;
}

static cr_status pinv_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                          cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    const pinv_state *z = state;
    const cr__form *F = &z->F;
    size_t m = z->m, n = z->n;
    const double *Ad, *Yd, *A = F->x->data, *Y = z->Y;
    double *Pd = z->Pd, *Qd = z->Qd, *Ed = z->Ed, *Fd = z->Fd, *Sd = z->Sd;
    cr_status st = cr__form_like_x(F, xdot[0], &Ad);
    if (st != CR_OK || Ad == NULL)
        return st;
    if ((st = cr__form_y_dot_arr(F, ydot, &Yd)) != CR_OK)
        return st;
    if (Yd == NULL)
        Yd = z->Yz;
    /* Ṗ, Q̇, Ė, Ḟ */
    cr__form_mm(-1.0, Ad, m, n, 0, Y, n, m, 0, 0.0, Pd);
    cr__form_mm(-1.0, A, m, n, 0, Yd, n, m, 0, 1.0, Pd);
    cr__form_mm(-1.0, Yd, n, m, 0, A, m, n, 0, 0.0, Qd);
    cr__form_mm(-1.0, Y, n, m, 0, Ad, m, n, 0, 1.0, Qd);
    cr__form_mm(1.0, Yd, n, m, 0, Y, n, m, 1, 0.0, Ed);
    cr__form_mm(1.0, Y, n, m, 0, Yd, n, m, 1, 1.0, Ed);
    cr__form_mm(1.0, Yd, n, m, 1, Y, n, m, 0, 0.0, Fd);
    cr__form_mm(1.0, Y, n, m, 1, Yd, n, m, 0, 1.0, Fd);
    /* the six terms of S */
    cr__form_mm(-1.0, Yd, n, m, 1, z->W5, n, n, 0, 0.0, Sd);
    cr__form_mm(-1.0, z->W6, m, m, 0, Yd, n, m, 1, 1.0, Sd);
    cr__form_mm(1.0, Pd, m, m, 0, z->W1, m, n, 0, 1.0, Sd);
    cr__form_mm(1.0, z->W4, m, n, 0, Ed, n, n, 0, 1.0, Sd);
    cr__form_mm(1.0, Fd, m, m, 0, z->W2, m, n, 0, 1.0, Sd);
    cr__form_mm(1.0, z->W3, m, n, 0, Qd, n, n, 0, 1.0, Sd);
    cr_array *Sa;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    memcpy(Sa->data, Sd, m * n * sizeof *Sd);
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_pinv = {matrix_check, pinv_init, pinv_dir};

/* ---- qr ---------------------------------------------------------------------------------------
 */

/* copyltu(M) of a real n x n M in place: its lower triangle mirrored onto the upper one. */
static void copyltu(double *M, size_t n)
{
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++)
            M[a * n + b] = M[b * n + a];
}

typedef struct qr_state {
    cr__form F;
    size_t m, n;
    const double *Q, *R, *Qb, *Rb, *G;
    double *C, *Md, *W;
} qr_state;

/*
 * qr(A) = (Q, R), A m x n with m >= n, of full rank. With the cotangent (Q̄, R̄), the pullback
 * is
 *     M = R R̄ᵀ - Q̄ᵀ Q,   B = Q̄ + Q copyltu(M),   Ā = B R⁻ᵀ = G.
 * Along Ȧ, with Q̇, Ṙ from qr's frule (Q̄, R̄ fixed: they are the cotangent), the product rule
 * and d(R⁻ᵀ) = -R⁻ᵀ Ṙᵀ R⁻ᵀ give
 *     Ṁ = Ṙ R̄ᵀ - Q̄ᵀ Q̇,   Ḃ = Q̇ copyltu(M) + Q copyltu(Ṁ)   (copyltu is linear),
 *     S = Ḃ R⁻ᵀ - B R⁻ᵀ Ṙᵀ R⁻ᵀ = (Ḃ - G Ṙᵀ) R⁻ᵀ,
 * with G the pullback applied to (Q̄, R̄), unprojected (pullback_dense). The rule reads R̄ on
 * its upper triangle; R and Ṙ being upper triangular, the lower triangles of R R̄ᵀ and Ṙ R̄ᵀ,
 * all copyltu reads, involve no other element of R̄, so R̄ is used as it comes. A
 * rank-deficient A is refused by the rule (its pullback and frule need R⁻¹). A structured A:
 * G unprojected (pullback_dense: a rule call at A's dense matrix).
 */
static cr_status qr_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(qr_state), 0, NULL, state);
    qr_state *z = *state;
    if (st != CR_OK)
        return st;
    const cr__form *F = &z->F;
    if (F->x->ndim != 2 || F->x->shape[0] < F->x->shape[1])
        return CR_NOTHING; /* the rule refused it when recorded */
    size_t m = F->x->shape[0], n = F->x->shape[1];
    const cr_array *Qa, *Ra;
    const double *Qb, *Rb;
    cr_tangent dx[2];
    cr_pullback pb;
    if ((st = cr__form_factor_of(F, p->y, 0, 2, &Qa)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 1, 2, &Ra)) != CR_OK ||
        (st = cr__form_field_mat(F, p->ybar, 0, m, n, &Qb)) != CR_OK ||
        (st = cr__form_field_mat(F, p->ybar, 1, n, n, &Rb)) != CR_OK ||
        (st = cr__form_pullback_dense(F, 0, &pb)) != CR_OK ||
        (st = cr_pullback_call(F->arena, &pb, &p->ybar, dx, 2)) != CR_OK ||
        (st = cr__form_like_x0(F, dx[1], &z->G)) != CR_OK)
        return st;
    const double *Q = Qa->data, *R = Ra->data;
    double *w;
    if ((st = cr__form_work(F, 2, (const cr__form_term[]){{2, n, n}, {1, m, n}}, &w)) != CR_OK)
        return st;
    double *C = w, *Md = C + n * n, *W = Md + n * n;
    /* C = copyltu(M), M = R R̄ᵀ - Q̄ᵀ Q, once per record */
    if (Rb != NULL)
        cr__form_mm(1.0, R, n, n, 0, Rb, n, n, 1, 0.0, C);
    if (Qb != NULL)
        cr__form_mm(-1.0, Qb, m, n, 1, Q, m, n, 0, 1.0, C);
    copyltu(C, n);
    z->m = m;
    z->n = n;
    z->Q = Q;
    z->R = R;
    z->Qb = Qb;
    z->Rb = Rb;
    z->C = C;
    z->Md = Md;
    z->W = W;
    return CR_OK;
}

static cr_status qr_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                        cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    (void)ydot;
    const qr_state *z = state;
    const cr__form *F = &z->F;
    size_t m = z->m, n = z->n;
    const double *xd, *Qd, *Rd, *Q = z->Q, *Qb = z->Qb, *Rb = z->Rb;
    double *Md = z->Md, *W = z->W;
    cr_tangent dy;
    cr_value y;
    cr_status st = cr__form_like_x(F, xdot[0], &xd);
    if (st != CR_OK || xd == NULL)
        return st;
    if ((st = cr__form_frule_along(F, &cr_fn_qr, xdot[0], &y, &dy)) != CR_OK ||
        (st = cr__form_field_mat(F, dy, 0, m, n, &Qd)) != CR_OK ||
        (st = cr__form_field_mat(F, dy, 1, n, n, &Rd)) != CR_OK)
        return st;
    /* Ṁ = Ṙ R̄ᵀ - Q̄ᵀ Q̇, then copyltu */
    memset(Md, 0, n * n * sizeof *Md);
    if (Rd != NULL && Rb != NULL)
        cr__form_mm(1.0, Rd, n, n, 0, Rb, n, n, 1, 0.0, Md);
    if (Qd != NULL && Qb != NULL)
        cr__form_mm(-1.0, Qb, m, n, 1, Qd, m, n, 0, 1.0, Md);
    copyltu(Md, n);
    /* W = Q̇ C + Q Ṁ - G Ṙᵀ, then S = W R⁻ᵀ */
    cr__form_mm(1.0, Q, m, n, 0, Md, n, n, 0, 0.0, W);
    if (Qd != NULL)
        cr__form_mm(1.0, Qd, m, n, 0, z->C, n, n, 0, 1.0, W);
    if (Rd != NULL)
        cr__form_mm(-1.0, z->G, m, n, 0, Rd, n, n, 1, 1.0, W);
    cr_array *Sa;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    memcpy(Sa->data, W, m * n * sizeof *W);
    cr__form_right_solve_upper_t(z->R, n, Sa->data, m);
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_qr = {matrix_check, qr_init, qr_dir};
