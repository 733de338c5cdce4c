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

#include "forms_impl.h"

/* C = alpha op(A) op(B) + beta C for dense row-major f64 matrices (A ar x ac, B br x bc as
 * stored; ta, tb: transposed). */
static void mm(double alpha, const double *A, size_t ar, size_t ac, int ta, const double *B,
               size_t br, size_t bc, int tb, double beta, double *C)
{
    cr__mat a = {A, ar, ac, ac, ta}, b = {B, br, bc, bc, tb};
    cr__gemm(CR_DT_F64, &a, &b, alpha, beta, C, cr__mat_cols(&b));
}

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
    mm(1.0, yb, n, n, 0, y, n, n, 1, 0.0, w->P->data);
    mm(1.0, y, n, n, 1, yb, n, n, 0, 0.0, w->Q->data);
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
    mm(-1.0, yd, n, n, 1, w->P->data, n, n, 0, 0.0, Sa->data);
    mm(-1.0, w->Q->data, n, n, 0, yd, n, n, 1, 1.0, Sa->data);
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_inv = {inv_check, inv_init, inv_dir};

/* The rule's pullback with argument j's cotangent unprojected, for a form that needs the
 * unprojected B̄ (solve's and rdiv's, at ȳ and at W): a rule projects the cotangent of a
 * structured matrix onto its structure. A dense argument j: the recorded pullback. A
 * structured one: the rule's pullback at the call's arguments with argument j replaced by its
 * logical dense matrix, as the rule reads it. */
static cr_status pullback_dense(const cr__form *F, size_t j, cr_pullback *pb)
{
    const cr_form_point *p = F->p;
    if (p->args[j].u.arr->structure == CR_MAT_DENSE) {
        *pb = *p->pb;
        return CR_OK;
    }
    cr_value vals[CR__FORM_MAX_ARGS], y;
    const cr_array *D;
    if (p->nargs > CR__FORM_MAX_ARGS)
        return CR_EINVAL;
    memcpy(vals, p->args, p->nargs * sizeof *vals);
    cr_status st = cr__dense(F->arena, p->args[j].u.arr, CR_DT_F64, &D);
    if (st != CR_OK)
        return st;
    vals[j] = cr_value_array((cr_array *)(uintptr_t)D); /* only read */
    return cr_rrule(p->cfg, F->arena, p->f, vals, p->nargs, &y, pb);
}

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
    if ((st = pullback_dense(&w->F, jb, &w->pb)) != CR_OK ||
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
            mm(-1.0, w->bb, m, n, 0, xd, n, n, 1, 0.0, W->data); /* W = -B̄ Ȧᵀ */
        else
            mm(-1.0, xd, n, n, 1, w->bb, n, m, 0, 0.0, W->data); /* W = -Ȧᵀ B̄ */
        cr_tangent wt = cr_tangent_array(W);
        if ((st = cr_pullback_call(F->arena, &w->pb, &wt, dw, 3)) != CR_OK ||
            (st = cr__form_like_x(F, dw[a + 1], &Sa)) != CR_OK)
            return st;
        if (Sa != NULL)
            memcpy(SA->data, Sa, n * n * sizeof *Sa);
        S[jb] = dw[jb + 1];
    }
    if (yd != NULL && rdiv)
        mm(-1.0, yd, m, n, 1, w->bb, m, n, 0, 1.0, SA->data); /* - Ẏᵀ B̄ */
    else if (yd != NULL)
        mm(-1.0, w->bb, n, m, 0, yd, n, m, 1, 1.0, SA->data); /* - B̄ Ẏᵀ */
    S[a] = cr_tangent_array(SA);
    return CR_OK;
}

const cr_rule_form cr__form_solve = {solve_check, solve_init, solve_rdiv_dir};
const cr_rule_form cr__form_rdiv = {rdiv_check, rdiv_init, solve_rdiv_dir};
