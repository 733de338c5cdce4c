/*
 * Second-order forms (cr_rule_form) of the factorizations and the functions of their factors:
 * cholesky, cholesky_solve, cholesky_det, cholesky_logdet, lu, sylvester and lyap, and the
 * LAPACK-level potrf, potrs, getrf, getri, getrs, trtrs and trsyl, which share their helpers
 * (cholesky's and potrf's chol_mdot, cholesky_solve's and potrs's chol_solve, lu's and
 * getrf's lu_s, sylvester's, lyap's and trsyl's sylv). For a call y = f(A, ...) whose result
 * has the cotangent ȳ, a form gives, along each direction, S = d/dε [pullback at x + ε ẋ](ȳ);
 * the engine adds pullback(ȳ̇) separately. First derivatives come from the rules (the recorded
 * pullback, the result's tangent ẏ from the frule in the forward sweep, other frules); what is
 * written here is the second derivative, with its derivation.
 *
 * A structured matrix argument (Diagonal, Upper, Lower, Symmetric, Hermitian) is read by the
 * rules as its logical dense matrix, and its cotangent is projected onto its structure. The
 * forms work on that dense matrix and write S unprojected: the engine projects it as the rule
 * projects the cotangent.
 */
#include <ctype.h>
#include <string.h>

#include <chainrules/rules_linalg.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

/* ---- Helpers ----------------------------------------------------------------------------------
 */

/* The upper triangle of the n x n row-major matrix a (zero below), a new array; NULL a: zero. */
static cr_status triu_copy(cr_arena *arena, const double *a, size_t n, cr_array **out)
{
    size_t sh[2] = {n, n};
    cr_status st = cr__new(arena, CR_DT_F64, 2, sh, true, out);
    if (st != CR_OK || a == NULL)
        return st;
    double *o = (*out)->data;
    for (size_t r = 0; r < n; r++)
        memcpy(o + r * n + r, a + r * n + r, (n - r) * sizeof *o);
    return CR_OK;
}

/* U⁻¹ of an upper triangular U (n x n, zero below), through matinv's primal. */
static cr_status tri_inverse(const cr__form *F, cr_array *U, const double **Ui)
{
    cr_value uv = cr_value_array(U), inv;
    const cr_array *a;
    cr_status st = cr_function_call(F->arena, &cr_fn_matinv, &uv, 1, &inv);
    if (st != CR_OK) {
        char buf[400];
        const char *msg = cr_ctx_errmsg(cr_arena_ctx(F->arena));
        strncpy(buf, msg != NULL ? msg : "", sizeof buf - 1);
        buf[sizeof buf - 1] = '\0';
        return cr__form_fail(F, st, "%s: the second-order form needs the factor's inverse: %s",
                             F->who, buf);
    }
    if ((st = cr__dense(F->arena, inv.u.arr, CR_DT_F64, &a)) == CR_OK)
        *Ui = a->data;
    return st;
}

/* A real r x c matrix tangent (or cotangent) as f64 (NULL when zero). */
static cr_status mat_of(const cr__form *F, cr_tangent v, size_t r, size_t c, const double **out)
{
    size_t sh[2] = {r, c};
    const cr_array *a;
    cr_status st = cr__tan_array(F->arena, F->who, v, 2, sh, CR_DT_F64, &a);
    *out = st == CR_OK && a != NULL ? a->data : NULL;
    return st;
}

/* A new r x c f64 matrix in the arena (zeros). */
static cr_status new_mat(const cr__form *F, size_t r, size_t c, double **out)
{
    return cr__form_work(F, 1, &(cr__form_term){1, r, c}, out);
}

/* An f64 r x c matrix holding v (zeros when v is NULL), for the cotangent of an argument. */
static cr_status mat_array(const cr__form *F, const double *v, size_t r, size_t c, cr_array **out)
{
    size_t sh[2] = {r, c};
    cr_status st = cr__new(F->arena, CR_DT_F64, 2, sh, v == NULL, out);
    if (st == CR_OK && v != NULL)
        memcpy((*out)->data, v, r * c * sizeof *v);
    return st;
}

/* A character flag argument ('U', 'N', ...), upper case; 'C' read as 'T' for real matrices. */
static char flag_of(const cr__form *F, const cr_value *v)
{
    int64_t c = 0;
    if (cr__int_arg(F->arena, F->who, v, &c) != CR_OK || c <= 0 || c >= 128)
        return 0;
    c = toupper((int)c);
    return c == 'C' ? 'T' : (char)c;
}

/* The form's square matrix argument: its order, or CR_NOTHING when it is not square (the rule
 * refused it when recorded). */
static cr_status square(const cr__form *F, size_t *n)
{
    if (F->x->ndim != 2 || F->x->shape[0] != F->x->shape[1])
        return CR_NOTHING;
    *n = F->x->shape[0];
    return CR_OK;
}

/* Whether the form's call is one of fn (forms shared by several functions). */
static bool calls(const cr_form_point *p, const cr_value *fn)
{
    return p->f->kind == CR_KIND_FUNC && p->f->u.func.fn == fn->u.func.fn;
}

/* C <- C + Cᵀ for the n x n C. */
static void sym_add(double *C, size_t n)
{
    for (size_t a = 0; a < n; a++)
        for (size_t b = a; b < n; b++)
            C[a * n + b] = C[b * n + a] = C[a * n + b] + C[b * n + a];
}

/* out = op⁻¹(T) for the n x n T: T for op 'N', else Tᵀ. */
static void op_inv(const double *T, size_t n, char op, double *out)
{
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            out[a * n + b] = op == 'N' ? T[a * n + b] : T[b * n + a];
}

/* The rule's pullback with argument j's cotangent unprojected (cr__form_pullback_dense, kept in
 * *pb) applied to ȳ: argument j's cotangent in *gj. */
static cr_status pull_dense(const cr__form *F, size_t j, cr_pullback *pb, cr_tangent *gj)
{
    cr_tangent dx[CR__FORM_MAX_ARGS + 1];
    size_t nx = F->p->nargs + 1;
    if (nx > sizeof dx / sizeof dx[0])
        return CR_EINVAL;
    cr_status st = cr__form_pullback_dense(F, j, pb);
    if (st == CR_OK)
        st = cr_pullback_call(F->arena, pb, &F->p->ybar, dx, nx);
    if (st == CR_OK)
        *gj = dx[j + 1];
    return st;
}

/* G, argument 0's cotangent from the pullback unprojected (pull_dense) at ȳ, zeros when it is
 * zero. */
static cr_status pulled_x0(const cr__form *F, const double **G)
{
    cr_pullback pb;
    cr_tangent g;
    cr_status st = pull_dense(F, 0, &pb, &g);
    return st != CR_OK ? st : cr__form_like_x0(F, g, G);
}

/* The pullback pb applied to W: argument 0's cotangent (x's shape, over which F is) copied into
 * s, which is left as it is when that is zero; argument j's cotangent in *sj (j > 0). */
static cr_status pull_into(const cr__form *F, const cr_pullback *pb, cr_array *W, double *s,
                           size_t j, cr_tangent *sj)
{
    cr_tangent dw[CR__FORM_MAX_ARGS + 1], wt = cr_tangent_array(W);
    const double *s0;
    size_t nx = F->p->nargs + 1;
    if (nx > sizeof dw / sizeof dw[0])
        return CR_EINVAL;
    cr_status st = cr_pullback_call(F->arena, pb, &wt, dw, nx);
    if (st == CR_OK)
        st = cr__form_like_x(F, dw[1], &s0);
    if (st != CR_OK)
        return st;
    if (s0 != NULL)
        memcpy(s, s0, F->N * sizeof *s);
    if (j > 0)
        *sj = dw[j + 1];
    return CR_OK;
}

typedef struct lapack_state lapack_state;

/* A solve with a factored (or triangular) matrix, X = M⁻¹ B: B's position jb, the setup of the
 * state from the result X, and the steps along a direction (solve_like_dir): W = −Ṁᵀ G from ẋ,
 * what the pullback at W leaves out of S along ẋ (or NULL), and the term of Ẋ, both added
 * into s. */
typedef struct solve_kind {
    size_t jb;
    cr_status (*setup)(lapack_state *w, const double *X);
    cr_status (*w_of)(lapack_state *w, const double *xd, double *W);
    void (*curv)(const lapack_state *w, double *s);
    void (*xdot)(const lapack_state *w, const double *yd, double *s);
} solve_kind;

/* The state of the forms of the solves (cholesky_solve, potrs, getrs, trtrs) and of getri. */
struct lapack_state {
    cr__form F; /* over the factors (cholesky_solve, potrs, getri, getrs) or A (trtrs) */
    size_t n, m, jb;
    char op, uplo;
    bool unit;
    cr_pullback pb; /* with B̄ unprojected */
    const cr_array *Bv;
    const double *G, *Q, *Pm, *Ab; /* G = B̄; getri: Yᵀ Ȳ, Ȳ Yᵀ; Ā */
    const size_t *p;
    double *L, *U, *C, *Ad, *E, *T, *ws; /* C: cholesky_solve's Ā + Āᵀ; ws: 2 n² */
    double *Ld, *Ud;                     /* along the direction: the factors' tangents */
    const solve_kind *k;
};

/* The start of a solve's form: the factor (argument 0) square and a variable, B at k->jb,
 * G = B̄ unprojected (CR_NOTHING when zero); then k's setup with the result X. */
static cr_status solve_like_init(const cr_form_point *p, void **state, const solve_kind *k)
{
    if (!p->var[0])
        return CR_NOTHING;
    cr_status st = cr__form_state(p, sizeof(lapack_state), 0, NULL, state);
    lapack_state *w = *state;
    if (st != CR_OK || (st = square(&w->F, &w->n)) != CR_OK)
        return st;
    cr__form *F = &w->F;
    const cr_array *Gb;
    const double *X;
    cr_tangent gb;
    size_t jb = k->jb;
    w->k = k;
    w->jb = jb;
    w->Bv = p->args[jb].u.arr;
    w->m = w->Bv->ndim == 1 ? 1 : w->Bv->shape[1];
    if ((st = pull_dense(F, jb, &w->pb, &gb)) != CR_OK ||
        (st = cr__tan_array(F->arena, F->who, gb, w->Bv->ndim, w->Bv->shape, CR_DT_F64, &Gb)) !=
            CR_OK)
        return st;
    if (Gb == NULL)
        return CR_NOTHING; /* X̄ = 0 */
    w->G = Gb->data;
    return (st = cr__form_y_array(F, &X)) != CR_OK ? st : k->setup(w, X);
}

/* A solve's S along one direction (the derivations of cholesky_solve, getrs and trtrs below):
 * W = −Ṁᵀ G and the pullback at W give S_B and most of S over the factor; w's steps add the
 * rest. */
static cr_status solve_like_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                                cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    lapack_state *w = state;
    cr_tangent SB = cr_tangent_zero();
    const double *xd, *yd;
    cr_array *Sa, *W;
    cr_status st = cr__form_dir_xy(&w->F, xdot[0], ydot, &xd, &yd, &Sa);
    if (st != CR_OK || Sa == NULL)
        return st;
    if (xd != NULL) {
        if ((st = cr__new(w->F.arena, CR_DT_F64, w->Bv->ndim, w->Bv->shape, false, &W)) != CR_OK ||
            (st = w->k->w_of(w, xd, W->data)) != CR_OK ||
            (st = pull_into(&w->F, &w->pb, W, Sa->data, w->jb, &SB)) != CR_OK)
            return st;
        if (w->k->curv != NULL)
            w->k->curv(w, Sa->data);
    }
    if (yd != NULL)
        w->k->xdot(w, yd, Sa->data);
    S[0] = cr_tangent_array(Sa);
    S[w->jb] = SB;
    return CR_OK;
}

/* ---- cholesky -------------------------------------------------------------------------------
 */

/* Upper triangle of P made symmetric, in place (n x n): P_ji := P_ij for i < j. */
static void sym_from_upper(double *P, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            P[j * n + i] = P[i * n + j];
}

/* Ṁ/2 of cholesky's pullback along U̇ (cholesky's derivation, below), into s (n x n):
 * s = (X + Xᵀ + U⁻¹ Φ̇ U⁻ᵀ)/2, X = −U⁻¹ U̇ M, Φ̇ = sym(triu(Ū) U̇ᵀ); Ui = U⁻¹, Ub = triu(Ū),
 * w: 3 n² of workspace. Shared by cholesky and potrf. */
static void chol_mdot(size_t n, const double *Ui, const double *Ub, const double *M,
                      const double *Ud, double *w, double *s)
{
    double *Z = w, *X = Z + n * n, *P = X + n * n;
    cr__form_mm(1.0, Ui, n, n, 0, Ud, n, n, 0, 0.0, Z); /* U⁻¹ U̇ */
    cr__form_mm(-1.0, Z, n, n, 0, M, n, n, 0, 0.0, X);  /* X = −U⁻¹ U̇ M */
    cr__form_mm(1.0, Ub, n, n, 0, Ud, n, n, 1, 0.0, P); /* triu(Ū) U̇ᵀ */
    sym_from_upper(P, n);                               /* Φ̇ */
    cr__form_mm(1.0, Ui, n, n, 0, P, n, n, 0, 0.0, Z);  /* U⁻¹ Φ̇ */
    cr__form_mm(1.0, Z, n, n, 0, Ui, n, n, 1, 0.0, s);  /* U⁻¹ Φ̇ U⁻ᵀ */
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            s[a * n + b] = 0.5 * (s[a * n + b] + X[a * n + b] + X[b * n + a]);
}

/* The upper factor U of a Cholesky factor argument x (n x n): its upper triangle (uplo 'U') or
 * the transpose of its lower one ('L'); NULL x: zeros. */
static cr_status chol_factor(cr_arena *arena, const double *x, size_t n, char uplo, cr_array **out)
{
    cr_status st = triu_copy(arena, uplo == 'U' ? x : NULL, n, out);
    if (st != CR_OK || uplo == 'U' || x == NULL)
        return st;
    double *o = (*out)->data;
    for (size_t a = 0; a < n; a++)
        for (size_t b = a; b < n; b++)
            o[a * n + b] = x[b * n + a];
    return CR_OK;
}

/* cholesky's and potrf's state: U⁻¹, triu(Ū), M, workspace; how S is folded. */
typedef struct chol_state {
    cr__form F;
    size_t n;
    char uplo; /* potrf: the triangle read and returned; cholesky: 'U' */
    bool fold; /* fold S onto the upper triangle (then, for 'L', onto the lower one) */
    const double *Ui, *Ub;
    double *M, *w; /* w: chol_mdot's 3 n² */
} chol_state;

/* Set up w for a factor U (the result Y, read through uplo) and the cotangent of Y. */
static cr_status chol_state_init(chol_state *w, char uplo)
{
    cr__form *F = &w->F;
    const cr_array *Yb;
    const double *Y;
    size_t n = w->n;
    cr_array *Uc, *Ub;
    cr_status st = cr__tan_array(F->arena, F->who, F->p->ybar, 2, F->x->shape, CR_DT_F64, &Yb);
    if (st != CR_OK)
        return st;
    if (Yb == NULL)
        return CR_NOTHING;
    w->uplo = uplo;
    if ((st = cr__form_y_array(F, &Y)) != CR_OK ||
        (st = chol_factor(F->arena, Y, n, uplo, &Uc)) != CR_OK ||
        (st = chol_factor(F->arena, Yb->data, n, uplo, &Ub)) != CR_OK ||
        (st = tri_inverse(F, Uc, &w->Ui)) != CR_OK || (st = new_mat(F, n, n, &w->M)) != CR_OK ||
        (st = new_mat(F, 3, n * n, &w->w)) != CR_OK)
        return st;
    w->Ub = Ub->data;
    return CR_OK;
}

/*
 * cholesky(A) = U, A = Uᵀ U with A's upper triangle read. The rule's pullback (Seeger et al.)
 *     Ā = give(M / 2),   M = U⁻¹ Φ U⁻ᵀ,   Φ = sym(triu(Ū) Uᵀ),
 * sym(P) the symmetric matrix of P's upper triangle; give leaves a Symmetric (Hermitian) A's
 * cotangent as it is and folds a dense A's onto the upper triangle it was read from. Along
 * Ȧ, with U̇ the result's tangent (cholesky's frule, from the forward sweep), Ū fixed,
 * d(U⁻¹) = −U⁻¹ U̇ U⁻¹ and Φ linear in U:
 *     Ṁ = X + Xᵀ + U⁻¹ Φ̇ U⁻ᵀ,   X = −U⁻¹ U̇ M,   Φ̇ = sym(triu(Ū) U̇ᵀ),
 *     S = give(Ṁ / 2)   (cr__form_fold_upper for a dense A, as the rule folds).
 * M is taken from the recorded pullback's G = give(M / 2) (M symmetric): M = 2G for a
 * Symmetric A; for a dense A, G_ij = M_ij above the diagonal and G_ii = M_ii / 2. A Diagonal,
 * Upper or Lower A is read as its logical dense matrix (so the rule factors the symmetric
 * matrix of that matrix's upper triangle: a Lower A's is its diagonal), its cotangent folded
 * as a dense A's and then projected onto its structure, and so is S (by the engine). The
 * projected G still gives what S needs: all of an Upper A's fold; for a Diagonal or Lower A,
 * U and U̇ are diagonal, and the diagonal of S involves M's diagonal only.
 */
static cr_status cholesky_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(chol_state), 0, NULL, state);
    chol_state *w = *state;
    const double *G;
    if (st != CR_OK || (st = square(&w->F, &w->n)) != CR_OK ||
        (st = chol_state_init(w, 'U')) != CR_OK || (st = cr__form_pulled(&w->F, &G)) != CR_OK)
        return st;
    uint8_t s = w->F.p->args[0].u.arr->structure;
    w->fold = s != CR_MAT_SYMMETRIC && s != CR_MAT_HERMITIAN;
    size_t n = w->n;
    for (size_t a = 0; a < n; a++)
        for (size_t b = a; b < n; b++) {
            double g = G[a * n + b];
            w->M[a * n + b] = w->M[b * n + a] = w->fold ? (a == b ? 2.0 * g : g) : 2.0 * g;
        }
    return CR_OK;
}

/* cholesky and potrf along one direction: S = fold(Ṁ / 2), U̇ from ẏ through uplo. */
static cr_status chol_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                          cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    chol_state *w = state;
    size_t n = w->n;
    const double *xd, *Yd;
    cr_array *Sa, *Udc;
    cr_status st;
    if ((st = cr__form_like_x(&w->F, xdot[0], &xd)) != CR_OK || xd == NULL ||
        (st = cr__form_y_dot_arr(&w->F, ydot, &Yd)) != CR_OK || Yd == NULL)
        return st;
    if ((st = chol_factor(w->F.arena, Yd, n, w->uplo, &Udc)) != CR_OK ||
        (st = cr__form_new_s(&w->F, &Sa)) != CR_OK)
        return st;
    double *s = Sa->data;
    chol_mdot(n, w->Ui, w->Ub, w->M, Udc->data, w->w, s);
    if (w->fold)
        cr__form_fold_upper(s, n);
    for (size_t a = 0; a < n && w->uplo == 'L'; a++) /* onto the lower triangle */
        for (size_t b = a + 1; b < n; b++) {
            s[b * n + a] = s[a * n + b];
            s[a * n + b] = 0.0;
        }
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

/* One variable matrix argument first. */
CR__LA_FORM_CHECK(one_check, 1, NULL)

const cr_rule_form cr__form_cholesky = {one_check, cholesky_init, chol_dir};

/* ---- cholesky_solve ---------------------------------------------------------------------------
 */

/*
 * cholesky_solve(U, B) = Y = A⁻¹ B with A = Uᵀ U (U's upper triangle read; B a vector or a
 * matrix): the pullback is
 *     B̄ = A⁻¹ Ȳ,   Ū = triu(U C),   C = Ā + Āᵀ,   Ā = −B̄ Yᵀ.
 * Along (U̇, Ḃ) (U̇ on the upper triangle), with Ȧ = U̇ᵀ U + Uᵀ U̇, Ẏ the result's tangent
 * (cholesky_solve's frule, from the forward sweep) and d(A⁻¹) = −A⁻¹ Ȧ A⁻¹:
 *     S_B = −A⁻¹ Ȧ B̄ = B̄(W),   W = −Ȧ B̄,
 *     S_U = triu(U̇ C + U (Ċ)),  Ċ = Ā̇ + Ā̇ᵀ,  Ā̇ = −S_B Yᵀ − B̄ Ẏᵀ,
 *         = Ū(W) + triu(U̇ C + U (E + Eᵀ)),   E = −B̄ Ẏᵀ,
 * where B̄(W) and Ū(W) are the recorded pullback applied to W (one call gives both: Ū(W) is
 * triu(U (Ā_W + Ā_Wᵀ)) with Ā_W = −B̄(W) Yᵀ). cholesky_solve is linear in B: with U a
 * constant, S = 0.
 *
 * potrs(F, uplo, B) = H⁻¹ B, H = Uᵀ U with U = triu(F) ('U') or U = tril(F)ᵀ ('L', H = L Lᵀ):
 * the rule's pullback is cholesky_solve's, B̄ = H⁻¹ Ȳ, F̄ = triu(U C) ('U') or tril(C L) =
 * triu(U C)ᵀ ('L'), C = Ā + Āᵀ, Ā = −B̄ Yᵀ, each projected onto its argument's structure. So S
 * is cholesky_solve's with the factor read from uplo's triangle and the triu term transposed
 * for 'L'; B̄ is taken unprojected (cr__form_pullback_dense: B of any structure). potrs is
 * linear in B: with F a constant, S = 0.
 */

/* s += T on the factor's triangle (T upper: transposed for 'L'). */
static void chol_add_triu(const lapack_state *w, const double *T, double *s)
{
    size_t n = w->n;
    for (size_t a = 0; a < n; a++)
        for (size_t b = a; b < n; b++)
            s[w->uplo == 'U' ? a * n + b : b * n + a] += T[a * n + b];
}

/* W = −Ȧ B̄, Ȧ = U̇ᵀ U + Uᵀ U̇ (symmetric: Ṁᵀ = Ȧ). */
static cr_status chol_solve_w(lapack_state *w, const double *xd, double *W)
{
    size_t n = w->n;
    cr_array *Udc;
    cr_status st = chol_factor(w->F.arena, xd, n, w->uplo, &Udc);
    if (st != CR_OK)
        return st;
    w->Ud = Udc->data;
    cr__form_mm(1.0, w->Ud, n, n, 1, w->U, n, n, 0, 0.0, w->Ad);
    cr__form_mm(1.0, w->U, n, n, 1, w->Ud, n, n, 0, 1.0, w->Ad);
    cr__form_mm(-1.0, w->Ad, n, n, 0, w->G, n, w->m, 0, 0.0, W);
    return CR_OK;
}

/* + triu(U̇ C). */
static void chol_solve_curv(const lapack_state *w, double *s)
{
    size_t n = w->n;
    cr__form_mm(1.0, w->Ud, n, n, 0, w->C, n, n, 0, 0.0, w->T);
    chol_add_triu(w, w->T, s);
}

/* + triu(U (E + Eᵀ)), E = −B̄ Ẏᵀ. */
static void chol_solve_xdot(const lapack_state *w, const double *yd, double *s)
{
    size_t n = w->n, m = w->m;
    cr__form_mm(-1.0, w->G, n, m, 0, yd, n, m, 1, 0.0, w->E);
    sym_add(w->E, n);
    cr__form_mm(1.0, w->U, n, n, 0, w->E, n, n, 0, 0.0, w->T);
    chol_add_triu(w, w->T, s);
}

/* C = Ā + Āᵀ, Ā = −B̄ Yᵀ, and the upper factor U read through uplo ('U' for
 * cholesky_solve). */
static cr_status chol_solve_setup(lapack_state *w, const double *y)
{
    cr__form *F = &w->F;
    size_t n = w->n, nn = n * n;
    cr_array *Uc;
    double *ws;
    w->uplo = w->jb == 2 ? flag_of(F, &F->p->args[1]) : 'U'; /* potrs(F, uplo, B) */
    cr_status st = new_mat(F, 4, nn, &ws);
    if (st != CR_OK || (st = chol_factor(F->arena, F->x->data, n, w->uplo, &Uc)) != CR_OK)
        return st;
    w->U = Uc->data;
    w->C = ws;
    w->Ad = ws + nn;
    w->E = ws + 2 * nn;
    w->T = ws + 3 * nn;
    cr__form_mm(-1.0, w->G, n, w->m, 0, y, n, w->m, 1, 0.0, w->C); /* Ā = −B̄ Yᵀ */
    sym_add(w->C, n);
    return CR_OK;
}

/* cholesky_solve(U, B): U dense or Upper (its upper triangle read; the rule's cotangent of
 * U lives there), B dense; the form covers those. */
static const char *cholesky_solve_covers(const cr_value *args, size_t nargs)
{
    uint8_t s = args[0].u.arr != NULL ? args[0].u.arr->structure : CR_MAT_DENSE;
    if (s != CR_MAT_DENSE && s != CR_MAT_UPPER)
        return "U is Diagonal, Lower, Symmetric or Hermitian; the form covers a dense or Upper "
               "factor (as cholesky returns it)";
    if (nargs > 1 && args[1].kind == CR_KIND_ARRAY && args[1].u.arr != NULL &&
        args[1].u.arr->structure != CR_MAT_DENSE)
        return "B has a structure; the form covers dense B only";
    return NULL;
}
CR__LA_FORM_CHECK(cholesky_solve_check, 2, cholesky_solve_covers(args, nargs))

/* ---- cholesky_det, cholesky_logdet ------------------------------------------------------------
 */

/*
 * cholesky_logdet(U) = 2 Σ log u_ii: the pullback is G_ii = 2 ȳ / u_ii (zero off the
 * diagonal), so
 *     S_ii = −2 ȳ u̇_ii / u_ii² = −G_ii u̇_ii / u_ii.
 * cholesky_det(U) = Π u_jj²: the pullback is G_ii = 2 ȳ u_ii Q_i, Q_i = Π_{j≠i} u_jj², so
 *     S_ii = 2 ȳ (u̇_ii Q_i + u_ii Q̇_i),   Q̇_i = Σ_{k≠i} 2 u_kk u̇_kk Π_{j∉{i,k}} u_jj²,
 * with Q_i and Q̇_i the value and derivative parts of the product of the dual numbers
 * u_jj² + ε 2 u_jj u̇_jj over j ≠ i, taken by prefix and suffix products: nothing divides,
 * so zeros on the diagonal are exact, as in the rule.
 */
typedef struct chol_det_state {
    cr__form F;
    size_t n;
    bool lg;
    const double *yb, *G;
    double *pv; /* 4 n + 1: prefix and suffix duals */
} chol_det_state;

static cr_status chol_det_init(const cr_form_point *p, void **state)
{
    bool lg = calls(p, &cr_fn_cholesky_logdet);
    cr_status st = cr__form_state(p, sizeof(chol_det_state), 0, NULL, state);
    chol_det_state *w = *state;
    if (st != CR_OK || (st = cr__form_ybar_slices(&w->F, &w->yb)) != CR_OK ||
        (lg && (st = cr__form_pulled(&w->F, &w->G)) != CR_OK) ||
        (st = square(&w->F, &w->n)) != CR_OK)
        return st;
    w->lg = lg;
    return new_mat(&w->F, 4 * w->n + 1, 1, &w->pv);
}

static cr_status chol_det_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                              cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    (void)ydot;
    chol_det_state *w = state;
    size_t n = w->n;
    const double *x = w->F.x->data, *xd, *G = w->G;
    cr_array *Sa;
    cr_status st;
    if ((st = cr__form_like_x(&w->F, xdot[0], &xd)) != CR_OK || xd == NULL ||
        (st = cr__form_new_s(&w->F, &Sa)) != CR_OK)
        return st;
    double *s = Sa->data, *pv = w->pv, *pd = pv + n, *qv = pd + n, *qd = qv + n;
    if (w->lg) {
        for (size_t q = 0; q < n; q++)
            s[q * n + q] = -G[q * n + q] * xd[q * n + q] / x[q * n + q];
    } else {
        double av = 1.0, ad = 0.0; /* Π over j < q (prefix), then over j > q (suffix) */
        for (size_t q = 0; q < n; q++) {
            pv[q] = av;
            pd[q] = ad;
            double u = x[q * n + q], du = xd[q * n + q];
            ad = ad * u * u + av * 2.0 * u * du;
            av *= u * u;
        }
        av = 1.0;
        ad = 0.0;
        for (size_t q = n; q-- > 0;) {
            qv[q] = av;
            qd[q] = ad;
            double u = x[q * n + q], du = xd[q * n + q];
            ad = ad * u * u + av * 2.0 * u * du;
            av *= u * u;
        }
        for (size_t q = 0; q < n; q++) {
            double Qv = pv[q] * qv[q], Qd = pd[q] * qv[q] + pv[q] * qd[q];
            s[q * n + q] = 2.0 * w->yb[0] * (xd[q * n + q] * Qv + x[q * n + q] * Qd);
        }
    }
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_cholesky_logdet = {one_check, chol_det_init, chol_det_dir};
const cr_rule_form cr__form_cholesky_det = {one_check, chol_det_init, chol_det_dir};

/* ---- lu, getrf ------------------------------------------------------------------------------
 */

/* X <- L⁻ᵀ X for X (n x c) and L (n x n, unit lower triangular): Lᵀ Z = X, Lᵀ unit upper. */
static void left_solve_unit_lower_t(const double *L, size_t n, double *X, size_t c)
{
    for (size_t i = n; i-- > 0;)
        for (size_t j = i + 1; j < n; j++) {
            double l = L[j * n + i];
            for (size_t q = 0; q < c; q++)
                X[i * c + q] -= l * X[j * c + q];
        }
}

/*
 * lu(A) = (L, U, p), P A = L U with the row permutation p (A[p[i], :] = (L U)[i, :]). With
 * the cotangent (L̄, Ū) (p has none) the pullback is
 *     N = tril(Lᵀ L̄, -1) + triu(Ū Uᵀ),   X = L⁻ᵀ N U⁻ᵀ,   Ā = Pᵀ X (row i of X is row p[i]).
 * Along Ȧ, with L̇, U̇ from lu's frule and p fixed (the recorded pivoting: the derivative is
 * that of this branch), the product rule with d(L⁻ᵀ) = -L⁻ᵀ L̇ᵀ L⁻ᵀ, d(U⁻ᵀ) = -U⁻ᵀ U̇ᵀ U⁻ᵀ:
 *     Ẋ = L⁻ᵀ Ṅ U⁻ᵀ - L⁻ᵀ L̇ᵀ X - X U̇ᵀ U⁻ᵀ = L⁻ᵀ (Ṅ - L̇ᵀ (X Uᵀ) - (Lᵀ X) U̇ᵀ) U⁻ᵀ,
 *     Ṅ = tril(L̇ᵀ L̄, -1) + triu(Ū U̇ᵀ),   S = Pᵀ Ẋ,
 * with X = P G from G, the pullback applied to (L̄, Ū), unprojected
 * (cr__form_pullback_dense). The rule reads L̄ on its strictly lower triangle and Ū on its
 * upper one; with L̇ᵀ strictly upper and U, U̇ upper triangular, tril(L̇ᵀ L̄, -1) and
 * triu(Ū U̇ᵀ) involve no other elements, so both are used as they come.
 *
 * getrf(A) = (F, ipiv), A = P L U with F = tril₋(L) + U: the rule's pullback is lu's with
 * L̄ = tril₋(F̄) and Ū = triu(F̄) (ipiv has no cotangent), the fixed packing of lu's (L, U) into
 * F. lu's S reads L̄ only on its strictly lower triangle and Ū on its upper one, so F̄ serves as
 * both; L̇ = tril₋(Ḟ), U̇ = triu(Ḟ) with Ḟ from getrf's frule along Ȧ, p from ipiv.
 */
/* What lu's S needs once per record: the factors L (unit lower) and U, the row permutation p
 * (A[p[a], :] = (L U)[a, :]), the cotangents L̄, Ū (NULL: zero), X = P G with G the
 * unprojected cotangent of A, X Uᵀ and Lᵀ X, and workspace. Shared by lu and getrf. */
typedef struct lu_state {
    cr__form F;
    size_t n;
    bool packed; /* getrf: one packed factor */
    const double *L, *U, *Lb, *Ub;
    const size_t *p;
    double *X, *XUt, *LtX, *W, *T;
} lu_state;

/* lu's S along (L̇, U̇) (L̇ strictly lower, U̇ upper; NULL: zero) into s (n x n). */
static void lu_s_dir(const lu_state *z, const double *Ld, const double *Ud, double *s)
{
    size_t n = z->n, nn = n * n;
    double *W = z->W, *T = z->T;
    /* W = Ṅ - L̇ᵀ (X Uᵀ) - (Lᵀ X) U̇ᵀ */
    memset(W, 0, nn * sizeof *W);
    if (Ld != NULL && z->Lb != NULL) {
        cr__form_mm(1.0, Ld, n, n, 1, z->Lb, n, n, 0, 0.0, T); /* L̇ᵀ L̄, strictly lower kept */
        for (size_t a = 0; a < n; a++)
            for (size_t b = 0; b < a; b++)
                W[a * n + b] = T[a * n + b];
    }
    if (Ud != NULL && z->Ub != NULL) {
        cr__form_mm(1.0, z->Ub, n, n, 0, Ud, n, n, 1, 0.0, T); /* Ū U̇ᵀ, upper part kept */
        for (size_t a = 0; a < n; a++)
            for (size_t b = a; b < n; b++)
                W[a * n + b] += T[a * n + b];
    }
    if (Ld != NULL)
        cr__form_mm(-1.0, Ld, n, n, 1, z->XUt, n, n, 0, 1.0, W);
    if (Ud != NULL)
        cr__form_mm(-1.0, z->LtX, n, n, 0, Ud, n, n, 1, 1.0, W);
    left_solve_unit_lower_t(z->L, n, W, n);
    cr__form_right_solve_upper_t(z->U, n, W, n);
    for (size_t a = 0; a < n; a++) /* S = Pᵀ Ẋ */
        memcpy(s + z->p[a] * n, W + a * n, n * sizeof *s);
}

/* The row permutation of LAPACK's 1-based interchanges ipiv (n of them, from a value or a list
 * of integers): A = P L U with A[p[a], :] = (L U)[a, :], i.e. (Pᵀ Z)[a, :] = Z[p[a], :]. */
static cr_status perm_of(const cr__form *F, const cr_value *ipiv, size_t n, size_t **out)
{
    int64_t *piv;
    size_t np;
    cr_status st = cr__int_list(F->arena, F->who, ipiv, &piv, &np);
    if (st != CR_OK)
        return st;
    size_t *p = cr__arena_array(F->arena, F->who, n, sizeof *p, _Alignof(size_t));
    if (p == NULL)
        return CR__ALLOC_STATUS(F->arena);
    if (np != n)
        return CR_EINVAL; /* the rule refused it when recorded */
    for (size_t a = 0; a < n; a++)
        p[a] = a;
    for (size_t a = 0; a < n; a++) {
        if (piv[a] < 1 || piv[a] > (int64_t)n)
            return CR_EINVAL;
        size_t b = (size_t)piv[a] - 1, q = p[a];
        p[a] = p[b];
        p[b] = q;
    }
    *out = p;
    return CR_OK;
}

/* The packed factors f (n x n) split: *L strictly lower (plus the unit diagonal when unit),
 * *U upper; new matrices. NULL f: NULL. */
static cr_status lu_unpack(const cr__form *F, const double *f, size_t n, bool unit, double **L,
                           double **U)
{
    *L = *U = NULL;
    if (f == NULL)
        return CR_OK;
    cr_status st = new_mat(F, n, n, L);
    if (st == CR_OK)
        st = new_mat(F, n, n, U);
    if (st != CR_OK)
        return st;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            (b < a ? *L : *U)[a * n + b] = f[a * n + b];
    for (size_t a = 0; a < n && unit; a++)
        (*L)[a * n + a] = 1.0;
    return CR_OK;
}

/* lu's factors L, U, p and cotangents L̄, Ū from its tuple (L, U, p). */
static cr_status lu_factors(lu_state *z)
{
    cr__form *F = &z->F;
    const cr_form_point *p = F->p;
    size_t n = z->n;
    const cr_array *La, *Ua, *pa;
    cr_status st;
    if ((st = cr__form_factor_of(F, p->y, 0, 2, &La)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 1, 2, &Ua)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 2, 1, &pa)) != CR_OK ||
        (st = cr__form_field_mat(F, p->ybar, 0, n, n, &z->Lb)) != CR_OK ||
        (st = cr__form_field_mat(F, p->ybar, 1, n, n, &z->Ub)) != CR_OK)
        return st;
    const double *pv = pa->data;
    size_t *pp = cr__arena_array(F->arena, F->who, n, sizeof *pp, _Alignof(size_t));
    if (pp == NULL)
        return CR__ALLOC_STATUS(F->arena);
    for (size_t a = 0; a < n; a++) {
        pp[a] = (size_t)pv[a];
        if (pp[a] >= n)
            return CR_EINVAL;
    }
    z->L = La->data;
    z->U = Ua->data;
    z->p = pp;
    return CR_OK;
}

/* getrf's: L, U unpacked from F, p from ipiv, and F̄ as both L̄ and Ū (CR_NOTHING when zero). */
static cr_status getrf_factors(lu_state *z)
{
    const cr_form_point *p = z->F.p;
    const cr_array *Fa;
    size_t *pp;
    double *L, *U;
    cr_value ipiv;
    cr_status st;
    if ((st = cr__form_factor_of(&z->F, p->y, 0, 2, &Fa)) != CR_OK ||
        (st = cr_type_field_value(p->y->u.obj.type, p->y->u.obj.ptr, 1, &ipiv)) != CR_OK ||
        (st = perm_of(&z->F, &ipiv, z->n, &pp)) != CR_OK ||
        (st = cr__form_field_mat(&z->F, p->ybar, 0, z->n, z->n, &z->Lb)) != CR_OK)
        return st;
    if (z->Lb == NULL)
        return CR_NOTHING; /* F̄ = 0 */
    if ((st = lu_unpack(&z->F, Fa->data, z->n, true, &L, &U)) != CR_OK)
        return st;
    z->Ub = z->Lb;
    z->L = L;
    z->U = U;
    z->p = pp;
    return CR_OK;
}

/* lu and getrf along one direction: (L̇, U̇) from the function's frule (cr__form_frule_dir). */
static cr_status lu_step(const void *state, const cr__form_along *d, double *s)
{
    const lu_state *z = state;
    const cr__form *F = &z->F;
    size_t n = z->n;
    const double *Ld, *Ud;
    cr_status st;
    if (z->packed) {
        const double *Fd;
        double *Lm, *Um;
        if ((st = cr__form_field_mat(F, d->dy, 0, n, n, &Fd)) != CR_OK ||
            (st = lu_unpack(F, Fd, n, false, &Lm, &Um)) != CR_OK)
            return st;
        Ld = Lm;
        Ud = Um;
    } else if ((st = cr__form_field_mat(F, d->dy, 0, n, n, &Ld)) != CR_OK ||
               (st = cr__form_field_mat(F, d->dy, 1, n, n, &Ud)) != CR_OK) {
        return st;
    }
    lu_s_dir(z, Ld, Ud, s);
    return CR_OK;
}

/* lu's and getrf's init: the factors (getrf's packed), then X = P G from G, the pullback
 * applied to the cotangent, unprojected, X Uᵀ and Lᵀ X. */
static cr_status lu_like_init(const cr_form_point *p, void **state)
{
    bool packed = calls(p, &cr_fn_getrf);
    cr_status st = cr__form_state(p, sizeof(lu_state), 0, NULL, state);
    lu_state *z = *state;
    if (st != CR_OK || (st = square(&z->F, &z->n)) != CR_OK)
        return st;
    size_t n = z->n, nn = n * n;
    const double *G;
    double *w;
    z->packed = packed;
    z->F.fact = p->f;
    z->F.step = lu_step;
    if ((st = packed ? getrf_factors(z) : lu_factors(z)) != CR_OK ||
        (st = pulled_x0(&z->F, &G)) != CR_OK || (st = new_mat(&z->F, 5, nn, &w)) != CR_OK)
        return st;
    z->X = w;
    z->XUt = w + nn;
    z->LtX = w + 2 * nn;
    z->W = w + 3 * nn;
    z->T = w + 4 * nn;
    for (size_t a = 0; a < n; a++) /* X = P G */
        memcpy(z->X + a * n, G + z->p[a] * n, n * sizeof *z->X);
    cr__form_mm(1.0, z->X, n, n, 0, z->U, n, n, 1, 0.0, z->XUt);
    cr__form_mm(1.0, z->L, n, n, 1, z->X, n, n, 0, 0.0, z->LtX);
    return CR_OK;
}

/* lu's and getrf's forms are those of a square A (a rectangular one has none). */
static const char *square_check(const char *why, const cr_value *args)
{
    if (why == NULL &&
        (args[0].u.arr->ndim != 2 || args[0].u.arr->shape[0] != args[0].u.arr->shape[1]))
        why = "the LU factorization of a rectangular matrix has no second-order form";
    return why;
}

static const char *lu_check(const cr_value *args, size_t nargs, const bool *var,
                            uint32_t *linearity)
{
    return square_check(one_check(args, nargs, var, linearity), args);
}

const cr_rule_form cr__form_lu = {lu_check, lu_like_init, cr__form_frule_dir};

/* ---- sylvester, lyap, trsyl -------------------------------------------------------------------
 */

/*
 * sylvester(A, B, C) = X, A X + X B + C = 0 (A n x n, B m x m, C and X n x m). The pullback
 * solves the adjoint equation Aᵀ Λ + Λ Bᵀ + X̄ = 0 and gives C̄ = Λ, Ā = Λ Xᵀ, B̄ = Xᵀ Λ.
 * Along (Ȧ, Ḃ, Ċ), X̄ fixed (it is the cotangent), the adjoint equation differentiates to
 *     Aᵀ Λ̇ + Λ̇ Bᵀ + (Ȧᵀ Λ + Λ Ḃᵀ) = 0,
 * so Λ̇ is the recorded pullback's Λ for the cotangent W = Ȧᵀ Λ + Λ Ḃᵀ, and the same call
 * gives Λ̇ Xᵀ and Xᵀ Λ̇. With Ẋ the result's tangent (the frule, from the forward sweep):
 *     S_C = Λ̇,   S_A = Λ̇ Xᵀ + Λ Ẋᵀ = Ā(W) + Λ Ẋᵀ,   S_B = Xᵀ Λ̇ + Ẋᵀ Λ = B̄(W) + Ẋᵀ Λ.
 * lyap(A, C) = X, A X + X Aᵀ + C = 0, is the case B = Aᵀ: its pullback solves
 * Aᵀ Λ + Λ A + X̄ = 0 and gives C̄ = Λ, Ā = Λ Xᵀ + Λᵀ X, so
 *     W = Ȧᵀ Λ + Λ Ȧ,   S_C = Λ̇,   S_A = Ā(W) + Λ Ẋᵀ + Λᵀ Ẋ.
 * X is linear in C: with A (and B) constant, S = 0.
 *
 * trsyl(transa, transb, isgn, A, B, C) = X, op(A) X + isgn X op(B) = C (A m x m, B n x n in
 * real Schur form; only their upper triangles and the subdiagonal entries of their 2 x 2
 * blocks are read). The pullback solves op(A)ᵀ Y + isgn Y op(B)ᵀ = X̄ and gives C̄ = Y,
 * Ā = op⁻¹(−Y Xᵀ), B̄ = op⁻¹(−isgn Xᵀ Y), restricted to what is read. With Λ = −Y it is
 * sylvester's (A X + X B + C = 0: Λ = C̄, Ā = Λ Xᵀ, B̄ = Xᵀ Λ) with ops and a sign: along
 * (Ȧ, Ḃ, Ċ) the adjoint equation differentiates to the same equation for Ẏ with X̄ replaced
 * by W = op(Ȧ)ᵀ Λ + isgn Λ op(Ḃ)ᵀ (Ȧ, Ḃ restricted to what is read), so the recorded pullback
 * at W gives S_C = Ẏ, Ā(W) and B̄(W), and
 *     S_A = Ā(W) + op⁻¹(Λ Ẋᵀ),   S_B = B̄(W) + op⁻¹(isgn Ẋᵀ Λ)   (restricted likewise),
 * Ẋ from the forward sweep. The blocks are the recorded ones (the rule holds them fixed). X is
 * linear in C: with A and B constant, S = 0.
 */
/* Zero what a Schur-form matrix's reader ignores (n x n): below the diagonal, except the
 * subdiagonal entries (a + 1, a) with blk[a] (trsyl's 2 x 2 blocks); blk NULL: nothing. */
static void schur_mask_f(double *M, size_t n, const bool *blk)
{
    for (size_t a = 0; blk != NULL && a < n; a++)
        for (size_t b = 0; b < a; b++)
            if (!(a == b + 1 && blk[b]))
                M[a * n + b] = 0.0;
}

/* trsyl's 2 x 2 diagonal blocks of the real Schur-form matrix M (n x n), found as the rule
 * finds them: from the top, a nonzero (a + 1, a) starts one unless row a ends one. */
static cr_status schur_blocks(const cr__form *F, const double *M, size_t n, bool **blk)
{
    *blk = cr_arena_calloc(F->arena, n ? n : 1, sizeof **blk, _Alignof(bool));
    if (*blk == NULL)
        return CR__ALLOC_STATUS(F->arena);
    for (size_t a = 0; a + 1 < n; a++)
        if (M[(a + 1) * n + a] != 0.0) {
            (*blk)[a] = true;
            a++;
        }
    return CR_OK;
}

/* A Sylvester-type call: op(A) X + sgn X op(B) = ±C, A, B, C at positions ia, ib, ic (lyap:
 * B = Aᵀ, ly), op by ta, tb ('N' or 'T'), the pullback's adjoint variable Λ = lam C̄, the parts
 * of A and B read (trsyl's blkA, blkB; NULL: all); Λ and workspace. */
typedef struct sylv_state {
    cr__form F; /* over A */
    size_t ia, ib, ic, n, m;
    char ta, tb;
    double sgn, lam;
    const bool *blkA, *blkB;
    bool ly;
    double *L, *W, *Am, *Bm, *T;
} sylv_state;

/* Λ = lam C̄ from the recorded pullback at ȳ, and the workspace; CR_NOTHING when Λ = 0. */
static cr_status sylv_init(sylv_state *g)
{
    cr__form *F = &g->F;
    const cr_form_point *p = F->p;
    size_t nx = p->nargs + 1;
    const cr_array *Cv = p->args[g->ic].u.arr;
    size_t n = Cv->shape[0], m = Cv->shape[1];
    cr_tangent dx[CR__FORM_MAX_ARGS + 1];
    const double *Cb;
    cr_status st;
    if (nx > sizeof dx / sizeof dx[0])
        return CR_EINVAL;
    if ((st = cr_pullback_call(F->arena, p->pb, &p->ybar, dx, nx)) != CR_OK ||
        (st = mat_of(F, dx[g->ic + 1], n, m, &Cb)) != CR_OK)
        return st;
    if (Cb == NULL)
        return CR_NOTHING; /* Λ = 0: S = 0 */
    g->n = n;
    g->m = m;
    if ((st = new_mat(F, n, m, &g->L)) != CR_OK || (st = new_mat(F, n, m, &g->W)) != CR_OK ||
        (st = new_mat(F, n, n, &g->Am)) != CR_OK || (st = new_mat(F, m, m, &g->Bm)) != CR_OK ||
        (st = new_mat(F, n > m ? n : m, n > m ? n : m, &g->T)) != CR_OK)
        return st;
    for (size_t q = 0; q < n * m; q++)
        g->L[q] = g->lam * Cb[q];
    return CR_OK;
}

/* sylvester(A, B, C) and lyap(A, C). */
static cr_status sylvester_init(const cr_form_point *p, void **state)
{
    bool ly = p->nargs == 2; /* lyap(A, C) */
    if (!p->var[0] && (ly || !p->var[1]))
        return CR_NOTHING;
    CR__LA_FORM_STATE(p, state, sylv_state, 0, g);
    g->ia = 0;
    g->ib = 1;
    g->ic = ly ? 1 : 2;
    g->ta = g->tb = 'N';
    g->sgn = g->lam = 1.0;
    g->ly = ly;
    return sylv_init(g);
}

static cr_status trsyl_init(const cr_form_point *p, void **state)
{
    if (!p->var[3] && !p->var[4])
        return CR_NOTHING;
    cr_status st = cr__form_state(p, sizeof(sylv_state), 3, NULL, state);
    sylv_state *g = *state;
    const cr_array *Bd;
    if (st != CR_OK || (st = cr__dense(g->F.arena, p->args[4].u.arr, CR_DT_F64, &Bd)) != CR_OK)
        return st;
    if (g->F.x->ndim != 2 || Bd->ndim != 2)
        return CR_NOTHING;
    int64_t isgn = 1;
    bool *ba, *bb;
    if ((st = cr__int_arg(g->F.arena, g->F.who, &p->args[2], &isgn)) != CR_OK ||
        (st = schur_blocks(&g->F, g->F.x->data, g->F.x->shape[0], &ba)) != CR_OK ||
        (st = schur_blocks(&g->F, Bd->data, Bd->shape[0], &bb)) != CR_OK)
        return st;
    g->ia = 3;
    g->ib = 4;
    g->ic = 5;
    g->ta = flag_of(&g->F, &p->args[0]);
    g->tb = flag_of(&g->F, &p->args[1]);
    g->sgn = (double)isgn;
    g->lam = -1.0;
    g->blkA = ba;
    g->blkB = bb;
    return sylv_init(g);
}

/* S of a Sylvester-type call along one direction (the derivation above, with ops and signs):
 * W = op(Ȧ)ᵀ Λ + sgn Λ op(Ḃ)ᵀ (lyap: + Λ Ȧ), Ȧ, Ḃ restricted to what is read; the recorded
 * pullback at W gives S_C and Ā(W), B̄(W); S_A += op⁻¹(Λ Ẋᵀ) (lyap: + Λᵀ Ẋ), S_B +=
 * op⁻¹(sgn Ẋᵀ Λ), restricted likewise. */
static cr_status sylv_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                          cr_tangent ydot, cr_tangent *S)
{
    sylv_state *g = state;
    cr__form *F = &g->F;
    size_t nx = p->nargs + 1, ia = g->ia, ib = g->ib, ic = g->ic, n = g->n, m = g->m;
    double *L = g->L, *W = g->W, *Am = g->Am, *Bm = g->Bm, *T = g->T;
    cr_tangent dw[CR__FORM_MAX_ARGS + 1];
    const double *Ad, *Bd = NULL, *Xd, *Sa = NULL, *Sb = NULL;
    cr_status st;
    if ((st = mat_of(F, xdot[ia], n, n, &Ad)) != CR_OK ||
        (!g->ly && (st = mat_of(F, xdot[ib], m, m, &Bd)) != CR_OK) ||
        (st = cr__form_y_dot_arr(F, ydot, &Xd)) != CR_OK)
        return st;
    cr_tangent SC = cr_tangent_zero();
    if (Ad != NULL || Bd != NULL) {
        /* W = op(Ȧ)ᵀ Λ + sgn Λ op(Ḃ)ᵀ (lyap: Ȧᵀ Λ + Λ Ȧ); Ā(W), B̄(W), Λ̇ from the pullback */
        memset(W, 0, n * m * sizeof *W);
        if (Ad != NULL) {
            memcpy(Am, Ad, n * n * sizeof *Am);
            schur_mask_f(Am, n, g->blkA);
            cr__form_mm(1.0, Am, n, n, g->ta == 'N', L, n, m, 0, 1.0, W);
            if (g->ly)
                cr__form_mm(1.0, L, n, n, 0, Am, n, n, 0, 1.0, W);
        }
        if (Bd != NULL) {
            memcpy(Bm, Bd, m * m * sizeof *Bm);
            schur_mask_f(Bm, m, g->blkB);
            cr__form_mm(g->sgn, L, n, m, 0, Bm, m, m, g->tb == 'N', 1.0, W);
        }
        cr_array *Wa;
        if ((st = mat_array(F, W, n, m, &Wa)) != CR_OK)
            return st;
        cr_tangent wt = cr_tangent_array(Wa);
        if ((st = cr_pullback_call(F->arena, p->pb, &wt, dw, nx)) != CR_OK)
            return st;
        SC = dw[ic + 1];
        if (p->var[ia] && (st = mat_of(F, dw[ia + 1], n, n, &Sa)) != CR_OK)
            return st;
        if (!g->ly && p->var[ib] && (st = mat_of(F, dw[ib + 1], m, m, &Sb)) != CR_OK)
            return st;
    }
    cr_array *SA, *SB;
    if ((st = mat_array(F, Sa, n, n, &SA)) != CR_OK || (st = mat_array(F, Sb, m, m, &SB)) != CR_OK)
        return st;
    double *sa = SA->data, *sb = SB->data;
    if (Xd != NULL) {
        cr__form_mm(1.0, L, n, m, 0, Xd, n, m, 1, 0.0, T); /* Λ Ẋᵀ, op⁻¹ */
        for (size_t a = 0; a < n; a++)
            for (size_t b = 0; b < n; b++)
                sa[a * n + b] += g->ta == 'N' ? T[a * n + b] : T[b * n + a];
        schur_mask_f(sa, n, g->blkA);
        if (g->ly) {
            cr__form_mm(1.0, L, n, n, 1, Xd, n, n, 0, 1.0, sa); /* + Λᵀ Ẋ */
        } else {
            cr__form_mm(g->sgn, Xd, n, m, 1, L, n, m, 0, 0.0, T); /* sgn Ẋᵀ Λ, op⁻¹ */
            for (size_t a = 0; a < m; a++)
                for (size_t b = 0; b < m; b++)
                    sb[a * m + b] += g->tb == 'N' ? T[a * m + b] : T[b * m + a];
            schur_mask_f(sb, m, g->blkB);
        }
    }
    S[ia] = cr_tangent_array(SA);
    if (!g->ly)
        S[ib] = cr_tangent_array(SB);
    S[ic] = SC;
    return CR_OK;
}

/* sylvester, lyap: real dense matrices only (the rules project the cotangent of a structured
 * matrix onto its structure, and a complex argument makes a complex result, which these forms
 * do not cover). */
static const char *real_dense(const cr_value *vals, size_t nargs)
{
    /* the arguments' names: sylvester(A, B, C), lyap(A, C) */
    static const char *const k_cplx[3] = {"A is complex; the form covers real matrices only",
                                          "B is complex; the form covers real matrices only",
                                          "C is complex; the form covers real matrices only"};
    static const char *const k_struct[3] = {
        "A has a structure; the form covers dense matrices only",
        "B has a structure; the form covers dense matrices only",
        "C has a structure; the form covers dense matrices only"};
    for (size_t a = 0; a < nargs && a < 3; a++) {
        const cr_value *v = &vals[a];
        if (v->kind != CR_KIND_ARRAY || v->u.arr == NULL)
            continue;
        size_t nm = nargs == 3 ? a : a == 0 ? 0 : 2;
        if (v->u.arr->dtype == CR_DT_C128)
            return k_cplx[nm];
        if (v->u.arr->structure != CR_MAT_DENSE)
            return k_struct[nm];
    }
    return NULL;
}

CR__LA_FORM_CHECK(sylvester_check, 3, real_dense(args, nargs))

CR__LA_FORM_CHECK(lyap_check, 2, real_dense(args, nargs))

const cr_rule_form cr__form_sylvester = {sylvester_check, sylvester_init, sylv_dir};
const cr_rule_form cr__form_lyap = {lyap_check, sylvester_init, sylv_dir};

/* ---- LAPACK-level functions: potrf, potrs, getrf, getri, getrs, trtrs, trsyl -----------------
 *
 * Each is a higher-level function (cholesky, cholesky_solve, lu, inv, solve, sylvester) with
 * its matrices packed or read as LAPACK does: a triangle, an op (transpose), packed LU factors
 * with row interchanges, Schur-form blocks. Where the packing is fixed (a linear map that does
 * not depend on the point), the rule's pullback is the higher-level one composed with it, and
 * the form is the higher-level one's helper with the same packing (potrs, getrf and trsyl are
 * above). getri and getrs read A = P L U from the packed factors F: that map is a product, so
 * their S has one more term, the derivative of the packing's adjoint along Ḟ (lu_adj_add).
 */

/*
 * potrf(A, uplo): U with H = Uᵀ U ('U'), or L = Uᵀ ('L'), H the symmetric matrix of A's
 * triangle uplo. The rule's pullback is cholesky's with Ū = triu(F̄) ('U') or triu(F̄ᵀ) ('L'),
 * folded onto the triangle uplo (whatever A's structure), then projected onto A's structure:
 *     Ā = P(fold_uplo(M / 2)),   M = U⁻¹ Φ U⁻ᵀ,   Φ = sym(triu(Ū) Uᵀ).
 * The fold, the transposes and P are fixed linear maps, so along Ȧ (U̇ = ẏ or ẏᵀ, the result's
 * tangent from potrf's frule) S = P(fold_uplo(Ṁ / 2)), Ṁ / 2 as for cholesky (chol_mdot). M is
 * unfolded from the pullback's Ā before projection (cr__form_pullback_dense): M_ab = Ā_ab above
 * the diagonal ('U'; Ā_ba for 'L'), M_aa = 2 Ā_aa.
 */
static cr_status potrf_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(chol_state), 0, NULL, state);
    chol_state *w = *state;
    if (st != CR_OK || (st = square(&w->F, &w->n)) != CR_OK)
        return st;
    size_t n = w->n;
    char uplo = flag_of(&w->F, &p->args[1]);
    const double *G;
    if ((st = chol_state_init(w, uplo)) != CR_OK || (st = pulled_x0(&w->F, &G)) != CR_OK)
        return st;
    w->fold = true;
    for (size_t a = 0; a < n; a++)
        for (size_t b = a; b < n; b++) {
            double g = uplo == 'U' ? G[a * n + b] : G[b * n + a];
            w->M[a * n + b] = w->M[b * n + a] = a == b ? 2.0 * g : g;
        }
    return CR_OK;
}

/* The tangent of A = P L U along (L̇, U̇) (the product rule): Ȧ = P (L̇ U + L U̇), into out
 * (n x n); w: n² of workspace. */
static void lu_tan(size_t n, const size_t *p, const double *L, const double *U, const double *Ld,
                   const double *Ud, double *w, double *out)
{
    cr__form_mm(1.0, Ld, n, n, 0, U, n, n, 0, 0.0, w);
    cr__form_mm(1.0, L, n, n, 0, Ud, n, n, 0, 1.0, w);
    for (size_t a = 0; a < n; a++)
        memcpy(out + p[a] * n, w + a * n, n * sizeof *out);
}

/* out += tril₋(Pᵀ Z Uxᵀ) + triu(Lxᵀ Pᵀ Z) (n x n): the adjoint of (L̇, U̇) -> P (L̇ Ux + Lx U̇)
 * (L̇ strictly lower, U̇ upper) applied to Z; w: 2 n² of workspace. */
static void lu_adj_add(size_t n, const size_t *p, const double *Lx, const double *Ux,
                       const double *Z, double *w, double *out)
{
    double *PZ = w, *T = w + n * n;
    for (size_t a = 0; a < n; a++)
        memcpy(PZ + a * n, Z + p[a] * n, n * sizeof *PZ);
    cr__form_mm(1.0, PZ, n, n, 0, Ux, n, n, 1, 0.0, T);
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < a; b++)
            out[a * n + b] += T[a * n + b];
    cr__form_mm(1.0, Lx, n, n, 1, PZ, n, n, 0, 0.0, T);
    for (size_t a = 0; a < n; a++)
        for (size_t b = a; b < n; b++)
            out[a * n + b] += T[a * n + b];
}

/*
 * getri(F, ipiv) = Y = A⁻¹, A = P L U from the packed factors (L = I + tril₋(F), U = triu(F)).
 * The rule's pullback is inv's composed with the packing's adjoint:
 *     F̄ = T_F(Ā),   Ā = −Yᵀ Ȳ Yᵀ,   T_F(Z) = tril₋(Pᵀ Z Uᵀ) + triu(Lᵀ Pᵀ Z),
 * T_F the adjoint of (L̇, U̇) -> P (L̇ U + L U̇), which depends on F. Along Ḟ (L̇ = tril₋(Ḟ),
 * U̇ = triu(Ḟ), Ȧ = P (L̇ U + L U̇)), Ȳ fixed, the product rule gives
 *     S = T_F(dĀ) + T_Ḟ(Ā),   dĀ = −(Ẏᵀ Ȳ Yᵀ + Yᵀ Ȳ Ẏᵀ),   Ẏ = −Y Ȧ Y,
 * T_Ḟ the same bilinear map with (L̇, U̇) for (L, U) (the curvature of the packing; lu_adj_add).
 * T_F(dĀ) is the recorded pullback applied to W with −Yᵀ W Yᵀ = dĀ:
 *     W = −(Ȧᵀ (Yᵀ Ȳ) + (Ȳ Yᵀ) Ȧᵀ)
 * (Yᵀ Ȧᵀ Yᵀ Ȳ Yᵀ + Yᵀ Ȳ Yᵀ Ȧᵀ Yᵀ = dĀ). The pullback's F̄ is projected onto F's structure, and
 * so is the rest (by the engine).
 */
static cr_status getri_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(lapack_state), 0, NULL, state);
    lapack_state *w = *state;
    if (st != CR_OK || (st = square(&w->F, &w->n)) != CR_OK)
        return st;
    cr__form *F = &w->F;
    const double *Yb, *Y;
    if ((st = cr__form_like_x(F, p->ybar, &Yb)) != CR_OK)
        return st;
    if (Yb == NULL)
        return CR_NOTHING;
    size_t n = w->n, nn = n * n;
    size_t *pp;
    double *ws;
    if ((st = cr__form_y_array(F, &Y)) != CR_OK ||
        (st = perm_of(F, &p->args[1], n, &pp)) != CR_OK ||
        (st = lu_unpack(F, F->x->data, n, true, &w->L, &w->U)) != CR_OK ||
        (st = new_mat(F, 6, nn, &ws)) != CR_OK)
        return st;
    double *Q = ws, *Pm = Q + nn, *Ab = Pm + nn;
    cr__form_mm(1.0, Y, n, n, 1, Yb, n, n, 0, 0.0, Q);  /* Yᵀ Ȳ */
    cr__form_mm(1.0, Yb, n, n, 0, Y, n, n, 1, 0.0, Pm); /* Ȳ Yᵀ */
    cr__form_mm(-1.0, Q, n, n, 0, Y, n, n, 1, 0.0, Ab); /* Ā = −Yᵀ Ȳ Yᵀ */
    w->p = pp;
    w->Q = Q;
    w->Pm = Pm;
    w->Ab = Ab;
    w->Ad = Ab + nn;
    w->ws = w->Ad + nn;
    return CR_OK;
}

static cr_status getri_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                           cr_tangent ydot, cr_tangent *S)
{
    (void)ydot;
    lapack_state *w = state;
    cr__form *F = &w->F;
    size_t n = w->n;
    const double *xd;
    double *Ld, *Ud;
    cr_array *Sa, *W;
    cr_status st;
    if ((st = cr__form_like_x(F, xdot[0], &xd)) != CR_OK || xd == NULL)
        return st;
    if ((st = lu_unpack(F, xd, n, false, &Ld, &Ud)) != CR_OK ||
        (st = cr__form_new_s(F, &Sa)) != CR_OK || (st = cr__form_new_s(F, &W)) != CR_OK)
        return st;
    lu_tan(n, w->p, w->L, w->U, Ld, Ud, w->ws, w->Ad);
    cr__form_mm(-1.0, w->Ad, n, n, 1, w->Q, n, n, 0, 0.0, W->data); /* W = −(Ȧᵀ Q + P Ȧᵀ) */
    cr__form_mm(-1.0, w->Pm, n, n, 0, w->Ad, n, n, 1, 1.0, W->data);
    if ((st = pull_into(F, p->pb, W, Sa->data, 0, NULL)) != CR_OK)
        return st;
    lu_adj_add(n, w->p, Ld, Ud, w->Ab, w->ws, Sa->data); /* + T_Ḟ(Ā) */
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

/*
 * getrs(F, ipiv, B, trans) = X = M⁻¹ B, M = op(A), A = P L U from the packed factors (op: A or
 * Aᵀ). The rule's pullback is solve's for M, mapped back through op and the packing:
 *     B̄ = P_B(G),  G = M⁻ᵀ X̄,   F̄ = T_F(Ā),   Ā = op⁻¹(−G Xᵀ)
 * (T_F as for getri). Along (Ḟ, Ḃ), with Ṁ = op(Ȧ), Ȧ = P (L̇ U + L U̇), Ẋ the result's tangent
 * (getrs's frule, from the forward sweep), as for solve dG = −M⁻ᵀ Ṁᵀ G = G(W), W = −Ṁᵀ G, and
 *     S_B = P_B(G(W)),
 *     S_F = T_F(op⁻¹(−G(W) Xᵀ)) + T_F(op⁻¹(−G Ẋᵀ)) + T_Ḟ(Ā)
 *         = F̄(W) + T_F(op⁻¹(−G Ẋᵀ)) + T_Ḟ(Ā),
 * G(W) and F̄(W) from one call of the pullback at W (the recorded one for a dense B, else the
 * rule's at B's dense matrix: cr__form_pullback_dense, G unprojected). getrs is linear in B:
 * with F a constant, S = 0.
 */
/* W = −Ṁᵀ G, Ṁ = op(Ȧ), Ȧ = P (L̇ U + L U̇) with (L̇, U̇) from Ḟ. */
static cr_status getrs_w(lapack_state *w, const double *xd, double *W)
{
    size_t n = w->n;
    cr_status st = lu_unpack(&w->F, xd, n, false, &w->Ld, &w->Ud);
    if (st != CR_OK)
        return st;
    lu_tan(n, w->p, w->L, w->U, w->Ld, w->Ud, w->ws, w->Ad);
    cr__form_mm(-1.0, w->Ad, n, n, w->op == 'N', w->G, n, w->m, 0, 0.0, W);
    return CR_OK;
}

/* + T_Ḟ(Ā), the packing's curvature. */
static void getrs_curv(const lapack_state *w, double *s)
{
    lu_adj_add(w->n, w->p, w->Ld, w->Ud, w->Ab, w->ws, s);
}

/* + T_F(op⁻¹(−G Ẋᵀ)). */
static void getrs_xdot(const lapack_state *w, const double *yd, double *s)
{
    size_t n = w->n, m = w->m;
    cr__form_mm(-1.0, w->G, n, m, 0, yd, n, m, 1, 0.0, w->T);
    op_inv(w->T, n, w->op, w->E);
    lu_adj_add(n, w->p, w->L, w->U, w->E, w->ws, s);
}

static cr_status getrs_setup(lapack_state *w, const double *X)
{
    cr__form *F = &w->F;
    size_t n = w->n, m = w->m, nn = n * n;
    size_t *pp;
    double *ws;
    cr_status st;
    w->op = flag_of(F, &F->p->args[3]);
    if ((st = perm_of(F, &F->p->args[1], n, &pp)) != CR_OK ||
        (st = lu_unpack(F, F->x->data, n, true, &w->L, &w->U)) != CR_OK ||
        (st = new_mat(F, 6, nn, &ws)) != CR_OK)
        return st;
    double *Ab = ws, *T = ws + 3 * nn;
    w->p = pp;
    w->Ab = Ab;
    w->Ad = ws + nn;
    w->E = ws + 2 * nn;
    w->T = T;
    w->ws = ws + 4 * nn;
    cr__form_mm(-1.0, w->G, n, m, 0, X, n, m, 1, 0.0, T); /* Ā = op⁻¹(−G Xᵀ) */
    op_inv(T, n, w->op, Ab);
    return CR_OK;
}

/* The triangle uplo of a (n x n) in place, strict (the diagonal zeroed) when strict. */
static void tri_keep(double *a, size_t n, char uplo, bool strict)
{
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < n; c++)
            if ((uplo == 'U' ? c < r : c > r) || (strict && c == r))
                a[r * n + c] = 0.0;
}

/*
 * trtrs(A, uplo, trans, diag, B) = X = M⁻¹ B, M = op(T), T the triangle uplo of A (a unit
 * diagonal, not read, when diag is 'U'): solve's pullback for M mapped back through the fixed
 * packing A -> T -> M:
 *     B̄ = P_B(G),  G = M⁻ᵀ X̄,   Ā = P(tri(op⁻¹(−G Xᵀ)))   (tri: the triangle, strict for a
 *                                                          unit diagonal).
 * Along (Ȧ, Ḃ), with Ṫ = tri(Ȧ), Ṁ = op(Ṫ) and Ẋ from the forward sweep, as for solve:
 *     S_B = P_B(G(W)),   S_A = Ā(W) + P(tri(op⁻¹(−G Ẋᵀ))),   W = −Ṁᵀ G,
 * G(W) and Ā(W) from one call of the pullback at W (cr__form_pullback_dense for a structured
 * B). trtrs is linear in B: with A a constant, S = 0.
 */
/* W = −Ṁᵀ G, Ṁ = op(Ṫ), Ṫ = tri(Ȧ). */
static cr_status trtrs_w(lapack_state *w, const double *xd, double *W)
{
    size_t n = w->n;
    memcpy(w->Ad, xd, n * n * sizeof *w->Ad);
    tri_keep(w->Ad, n, w->uplo, w->unit);
    cr__form_mm(-1.0, w->Ad, n, n, w->op == 'N', w->G, n, w->m, 0, 0.0, W);
    return CR_OK;
}

/* + tri(op⁻¹(−G Ẋᵀ)). */
static void trtrs_xdot(const lapack_state *w, const double *yd, double *s)
{
    size_t n = w->n, m = w->m;
    cr__form_mm(-1.0, w->G, n, m, 0, yd, n, m, 1, 0.0, w->T);
    op_inv(w->T, n, w->op, w->E);
    tri_keep(w->E, n, w->uplo, w->unit);
    for (size_t q = 0; q < n * n; q++)
        s[q] += w->E[q];
}

static cr_status trtrs_setup(lapack_state *w, const double *X)
{
    (void)X;
    const cr_value *args = w->F.p->args;
    double *ws;
    w->uplo = flag_of(&w->F, &args[1]);
    w->op = flag_of(&w->F, &args[2]);
    w->unit = flag_of(&w->F, &args[3]) == 'U';
    cr_status st = new_mat(&w->F, 3, w->n * w->n, &ws);
    if (st == CR_OK) {
        w->Ad = ws;
        w->T = ws + w->n * w->n;
        w->E = ws + 2 * w->n * w->n;
    }
    return st;
}

/* The LAPACK-level functions: real matrices (a complex constant would make the result
 * complex; complex variables are refused by the tape). Any structure: the rules read a
 * structured matrix as its logical dense one and S is projected as the rules project their
 * cotangents. */
static const char *lapack_real(const cr_value *vals, size_t nargs)
{
    static const char *const k_msg[6] = {
        "argument 0 is complex; the form covers real matrices only",
        "argument 1 is complex; the form covers real matrices only",
        "argument 2 is complex; the form covers real matrices only",
        "argument 3 is complex; the form covers real matrices only",
        "argument 4 is complex; the form covers real matrices only",
        "argument 5 is complex; the form covers real matrices only"};
    for (size_t a = 0; a < nargs && a < 6; a++)
        if (vals[a].kind == CR_KIND_ARRAY && vals[a].u.arr != NULL &&
            vals[a].u.arr->dtype == CR_DT_C128)
            return k_msg[a];
    return NULL;
}

CR__LA_FORM_CHECK(lapack1_check, 1, lapack_real(args, nargs))
CR__LA_FORM_CHECK(lapack3_check, 3, lapack_real(args, nargs))
CR__LA_FORM_CHECK(trtrs_check, 5, lapack_real(args, nargs))

/* trsyl(transa, transb, isgn, A, B, C): the flags and the sign are constants. */
static const char *trsyl_check(const cr_value *args, size_t nargs, const bool *var,
                               uint32_t *linearity)
{
    (void)linearity;
    for (size_t a = 0; a < 3 && a < nargs; a++)
        if (var[a])
            return "an argument before A is a variable";
    return lapack_real(args, nargs);
}

const cr_rule_form cr__form_potrf = {lapack1_check, potrf_init, chol_dir};
/* The solves, by function: B's position and the steps (their derivations above). */
static const solve_kind k_cholesky_solve = {1, chol_solve_setup, chol_solve_w, chol_solve_curv,
                                            chol_solve_xdot};
static const solve_kind k_potrs = {2, chol_solve_setup, chol_solve_w, chol_solve_curv,
                                   chol_solve_xdot};
static const solve_kind k_getrs = {2, getrs_setup, getrs_w, getrs_curv, getrs_xdot};
static const solve_kind k_trtrs = {4, trtrs_setup, trtrs_w, NULL, trtrs_xdot};

/* cholesky_solve(U, B), potrs(F, uplo, B), getrs(F, ipiv, B, trans), trtrs(A, uplo, trans,
 * diag, B). */
static cr_status solve_init(const cr_form_point *p, void **state)
{
    const solve_kind *k = calls(p, &cr_fn_cholesky_solve) ? &k_cholesky_solve
                          : calls(p, &cr_fn_potrs)        ? &k_potrs
                          : calls(p, &cr_fn_getrs)        ? &k_getrs
                                                          : &k_trtrs;
    return solve_like_init(p, state, k);
}

const cr_rule_form cr__form_cholesky_solve = {cholesky_solve_check, solve_init, solve_like_dir};
const cr_rule_form cr__form_potrs = {lapack3_check, solve_init, solve_like_dir};
static const char *getrf_check(const cr_value *args, size_t nargs, const bool *var,
                               uint32_t *linearity)
{
    return square_check(lapack1_check(args, nargs, var, linearity), args);
}

const cr_rule_form cr__form_getrf = {getrf_check, lu_like_init, cr__form_frule_dir};
const cr_rule_form cr__form_getri = {lapack1_check, getri_init, getri_dir};
const cr_rule_form cr__form_getrs = {lapack3_check, solve_init, solve_like_dir};
const cr_rule_form cr__form_trtrs = {trtrs_check, solve_init, solve_like_dir};
const cr_rule_form cr__form_trsyl = {trsyl_check, trsyl_init, sylv_dir};
