/*
 * Second-order forms of the linear-algebra functions whose forms have not moved into their
 * rulesets yet (the reductions', softmax's, norm's and the broadcasts' forms are beside their
 * rules: cr_rule_form, docs/second-order-forms.md): det, logdet, the factorizations, solves
 * and matrix functions of the table at the end. For a record y = f(x, ...)
 * whose result has the cotangent ȳ, a form gives, along each direction ẋ,
 *
 *     S = d/dε [pullback at x + ε ẋ](ȳ),
 *
 * the derivative of the pullback itself (the sweep adds pullback(ȳ̇) separately). The first
 * derivatives in S come from the rules: the recorded pullback (called with ȳ), the result's
 * tangent ẏ that the forward sweep got from the function's frule, and the frules of softmax
 * and matinv. What is written here is only what the rules cannot give: the second
 * derivative, each with its formula and derivation next to it.
 *
 * Reductions over dimensions (dims) work slice by slice: a slice is the set of elements of x
 * reduced into one element of the result; ȳ, and the sums the forms take, are per slice.
 *
 * A structured matrix argument (Diagonal, Upper, Lower, Symmetric, Hermitian) is read by the
 * rules as its logical dense matrix, and its cotangent is projected onto its structure. The
 * forms work on that dense matrix (form_init's x, x_dot's ẋ) and every S goes through put /
 * put_arg, which apply the same projection: the derivative of the projected cotangent. A form
 * that needs a rule's cotangent unprojected takes it from the rule at the dense matrix
 * (pullback_dense).
 */
#include <complex.h>
#include <ctype.h>
#include <math.h>
#include <string.h>

#include <chainrules/project.h>
#include <chainrules/rules_array.h>
#include <chainrules/rules_linalg.h>
#include <chainrules/rules_math.h>

#include "../rulesets/array_impl.h"
#include "../rulesets/linalg_impl.h"
#include "tape_array2_forms.h"

#define MAX_ARGS 16 /* as tape_array.c */
#define MAX_DIRS 8  /* as tape_array2.c */

/* ---- Common parts --------------------------------------------------------------------------- */

/* A record's array argument xj as the forms read it. */
typedef struct form {
    cr_tape *t;
    const cr__anode *nd;
    cr_arena *arena;
    const char *who;
    size_t xj;         /* the array argument's position */
    const cr_array *x; /* its value, f64, contiguous row-major */
    size_t N;          /* its elements */
    size_t ns;         /* slices (1 without dims) */
    size_t *sl;        /* the slice of each element; NULL when ns == 1 */
} form;

/* Set up F for argument xj; dims (or NULL) are the reduced dimensions. */
static cr_status form_init(form *F, cr_tape *t, const cr__anode *nd, size_t xj,
                           const cr_value *dims)
{
    F->t = t;
    F->nd = nd;
    F->arena = t->arena;
    F->who = nd->fname;
    F->xj = xj;
    F->ns = 1;
    F->sl = NULL;
    cr_status st = cr__dense(t->arena, nd->vals[xj].u.arr, CR_DT_F64, &F->x);
    if (st != CR_OK)
        return st;
    const cr_array *x = F->x;
    F->N = cr_array_numel(x);
    if (dims == NULL)
        return CR_OK;
    bool mask[CR_ARRAY_MAX_DIMS] = {false};
    if ((st = cr__dims_arg(t->arena, F->who, dims, x->ndim, mask)) != CR_OK)
        return st;
    /* The slice of element (i_0, ..., i_{n-1}) is its index in the result, whose reduced
     * dimensions have extent 1: Σ over the kept dimensions q of i_q times q's stride. */
    size_t ostride[CR_ARRAY_MAX_DIMS], ns = 1;
    for (size_t q = x->ndim; q-- > 0;) {
        ostride[q] = mask[q] ? 0 : ns;
        ns *= mask[q] ? 1 : x->shape[q];
    }
    F->ns = ns;
    if (ns == 1 || F->N == 0)
        return CR_OK;
    size_t *sl = cr_arena_alloc(t->arena, F->N * sizeof *sl, _Alignof(size_t));
    if (sl == NULL)
        return CR__ALLOC_STATUS(t->arena);
    size_t idx[CR_ARRAY_MAX_DIMS] = {0}, s = 0;
    for (size_t e = 0; e < F->N; e++) {
        sl[e] = s;
        for (size_t q = x->ndim; q-- > 0;) { /* the next index, row-major */
            s += ostride[q];
            if (++idx[q] < x->shape[q])
                break;
            s -= ostride[q] * idx[q];
            idx[q] = 0;
        }
    }
    F->sl = sl;
    return CR_OK;
}

/* The cotangent of a reduction's result (ns values, in slice order). */
static cr_status ybar_slices(const form *F, cr_tangent ybar, const double **yb)
{
    const cr__anode *nd = F->nd;
    const cr_array *yv = nd->out == CR_VAR_CONST ? NULL : F->t->aslots[nd->out].val;
    static const size_t k_one[1] = {1};
    const cr_array *Yb;
    cr_status st = cr__tan_array(F->arena, F->who, ybar, yv != NULL ? yv->ndim : 0,
                                 yv != NULL ? yv->shape : k_one, CR_DT_F64, &Yb);
    if (st == CR_OK && Yb == NULL)
        return CR_EINVAL; /* the sweep calls a form with a nonzero cotangent only */
    if (st == CR_OK)
        *yb = Yb->data;
    return st;
}

/* A tangent or cotangent of x's shape, in f64 (NULL for a zero one). */
static cr_status like_x(const form *F, cr_tangent v, const double **out)
{
    const cr_array *a;
    cr_status st = cr__tan_array(F->arena, F->who, v, F->x->ndim, F->x->shape, CR_DT_F64, &a);
    *out = st == CR_OK && a != NULL ? a->data : NULL;
    return st;
}

/* The tangent ẋ of x along direction d (NULL when zero; *raw: as the sweep holds it). */
static cr_status x_dot(const form *F, const double *tan, size_t k, size_t d, cr_tangent *raw,
                       const double **xd)
{
    *raw = cr__a2_arg_tangent(F->t, F->nd->args[F->xj], tan, k, d);
    *xd = NULL;
    return cr_tangent_is_zero(*raw) ? CR_OK : like_x(F, *raw, xd);
}

/* The frule of fn (a function of the record's one array argument) at x along ẋ = raw, which
 * a form needs for a first derivative; a failure is recorded on the tape, naming both. */
static cr_status frule_along(const form *F, const cr_value *fn, cr_tangent raw, cr_value *y,
                             cr_tangent *dy)
{
    cr_tangent dargs[2] = {cr_tangent_none(), raw};
    cr_status st = cr_frule(F->t->config, F->arena, dargs, fn, &F->nd->vals[F->xj], 1, y, dy);
    if (st == CR_OK)
        return CR_OK;
    const char *msg = cr_ctx_errmsg(F->t->ctx);
    return cr__tape_fail(F->t, st == CR_NOTHING ? CR_EUNIMPL : st,
                         "%s: the second-order form needs %s's frule: %s", F->who,
                         fn->u.func.fn->name, msg[0] != '\0' ? msg : cr_status_str(st));
}

/* A new f64 array of x's shape (zeros). */
static cr_status new_s(const form *F, cr_array **S)
{
    return cr__new(F->arena, CR_DT_F64, F->x->ndim, F->x->shape, true, S);
}

/* S, a tangent of argument j's logical shape, added into the derivative of j's cotangent along
 * d after the projection the rule applies to that cotangent (cr_project from j's value: a
 * Symmetric or Hermitian matrix's S symmetrised, a triangular one's restricted to its
 * triangle, a Diagonal one's to its diagonal). The rules read a structured matrix as its
 * logical dense matrix (as form_init's x and x_dot's ẋ are) and give its cotangent P(Ā), P
 * linear and fixed (it depends on the structure only), so the derivative along ẋ is P(S), S
 * the derivative of the unprojected cotangent, which is what the forms compute. A dense
 * argument's projection is the identity. */
static cr_status put_arg(const form *F, size_t j, cr_tangent S, double *adjd, size_t k, size_t d)
{
    const cr_value *v = &F->nd->vals[j];
    if (v->kind == CR_KIND_ARRAY && v->u.arr != NULL && v->u.arr->structure != CR_MAT_DENSE &&
        !cr_tangent_is_zero(S)) {
        cr_status st = cr_project_tangent(F->arena, v, S, &S);
        if (st != CR_OK)
            return st;
    }
    return cr__a2_add_d(F->t, F->nd, j, S, adjd, k, d);
}

/* S (x's logical shape) added into the derivative of x's cotangent along d (put_arg). */
static cr_status put(const form *F, cr_array *S, double *adjd, size_t k, size_t d)
{
    return put_arg(F, F->xj, cr_tangent_array(S), adjd, k, d);
}

/* The recorded pullback applied to ȳ: x's cotangent G = pullback(ȳ)_x, in f64. */
static cr_status pulled(const form *F, cr_tangent ybar, const double **G)
{
    cr_tangent dx[MAX_ARGS + 1];
    size_t nx = (size_t)F->nd->nargs + 1;
    if (nx > sizeof dx / sizeof dx[0])
        return CR_EINVAL;
    cr_status st = cr_pullback_call(F->arena, &F->nd->pb, &ybar, dx, nx);
    if (st != CR_OK)
        return st;
    if ((st = like_x(F, dx[F->xj + 1], G)) == CR_OK && *G == NULL) {
        cr_array *z; /* a zero cotangent */
        if ((st = new_s(F, &z)) == CR_OK)
            *G = z->data;
    }
    return st;
}

/* Element e of a tuple value (a float array of ndim dimensions), as a dense f64 array. */
static cr_status factor_of(const form *F, const cr_value *y, size_t e, size_t ndim,
                           const cr_array **out)
{
    cr_value v;
    if (y->kind != CR_KIND_STRUCT ||
        cr_type_field_value(y->u.obj.type, y->u.obj.ptr, e, &v) != CR_OK ||
        v.kind != CR_KIND_ARRAY || v.u.arr == NULL || v.u.arr->ndim != ndim)
        return CR_EINVAL;
    return cr__dense(F->arena, v.u.arr, CR_DT_F64, out);
}

/* The cotangent of a dense square matrix of which a rule reads the upper triangle (n x n,
 * row-major): s_ij + s_ji above the diagonal, 0 below, as the rule folds its own. */
static void fold_upper(double *s, size_t n)
{
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++) {
            s[a * n + b] += s[b * n + a];
            s[b * n + a] = 0.0;
        }
}

/* ---- Helpers of the forms below ------------------------------------------------------------- */

/* The record's result value as a dense f64 array (an array result only). */
static cr_status y_array(const form *F, const double **y)
{
    const cr_array *ya;
    cr_status st = cr__dense(F->arena, F->nd->y.u.arr, CR_DT_F64, &ya);
    if (st == CR_OK)
        *y = ya->data;
    return st;
}

/* The tangent ẏ of the record's array result along d (the forward sweep got it from the
 * function's frule), as f64 of the result's shape; NULL when zero. */
static cr_status y_dot_arr(const form *F, const double *tan, size_t k, size_t d, const double **yd)
{
    const cr_array *yv = F->t->aslots[F->nd->out].val, *a;
    cr_tangent raw = cr__a2_arg_tangent(F->t, F->nd->out | CR__ASLOT_BIT, tan, k, d);
    *yd = NULL;
    cr_status st = cr__tan_array(F->arena, F->who, raw, yv->ndim, yv->shape, CR_DT_F64, &a);
    if (st == CR_OK && a != NULL)
        *yd = a->data;
    return st;
}

/* C = alpha op(A) op(B) + beta C for dense row-major f64 matrices (A ar x ac, B br x bc as
 * stored; ta, tb: transposed). */
static void mm(double alpha, const double *A, size_t ar, size_t ac, int ta, const double *B,
               size_t br, size_t bc, int tb, double beta, double *C)
{
    cr__mat a = {A, ar, ac, ac, ta}, b = {B, br, bc, bc, tb};
    cr__gemm(CR_DT_F64, &a, &b, alpha, beta, C, cr__mat_cols(&b));
}

/* The rule's pullback with x's cotangent unprojected, for a form that needs the unprojected
 * cotangent Ā(ȳ) (qr's and lu's G) or B̄ (solve's and rdiv's, at ȳ and at W), argument j being
 * the matrix: a rule projects the cotangent of a structured matrix onto its structure. A dense
 * argument j: the recorded pullback. A structured one: the rule's pullback at the record's
 * arguments with argument j replaced by its logical dense matrix, as the rule reads it (the
 * same primal and factorization; the other arguments' cotangents the same, projected onto
 * their structures; argument j's unprojected). */
static cr_status pullback_dense(const form *F, size_t j, cr_pullback *pb)
{
    const cr__anode *nd = F->nd;
    if (nd->vals[j].u.arr->structure == CR_MAT_DENSE) {
        *pb = nd->pb;
        return CR_OK;
    }
    cr_value vals[MAX_ARGS], y;
    const cr_array *D;
    if (nd->nargs > MAX_ARGS)
        return CR_EINVAL;
    memcpy(vals, nd->vals, nd->nargs * sizeof *vals);
    cr_status st = cr__dense(F->arena, nd->vals[j].u.arr, CR_DT_F64, &D);
    if (st != CR_OK)
        return st;
    vals[j] = cr_value_array((cr_array *)(uintptr_t)D); /* only read */
    return cr_rrule(F->t->config, F->arena, &nd->fv, vals, nd->nargs, &y, pb);
}

/* As pulled (x's cotangent G = pullback(ȳ)_x, f64), unprojected (pullback_dense). */
static cr_status pulled_dense(const form *F, cr_tangent ybar, const double **G)
{
    cr_tangent dx[MAX_ARGS + 1];
    cr_pullback pb;
    cr_status st = pullback_dense(F, F->xj, &pb);
    if (st == CR_OK)
        st = cr_pullback_call(F->arena, &pb, &ybar, dx, (size_t)F->nd->nargs + 1);
    if (st == CR_OK && (st = like_x(F, dx[F->xj + 1], G)) == CR_OK && *G == NULL) {
        cr_array *z; /* a zero cotangent */
        if ((st = new_s(F, &z)) == CR_OK)
            *G = z->data;
    }
    return st;
}

/* ---- cholesky and the functions of a Cholesky factor ---------------------------------------- */

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
static cr_status tri_inverse(const form *F, cr_array *U, const double **Ui)
{
    cr_value uv = cr_value_array(U), inv;
    const cr_array *a;
    cr_status st = cr_function_call(F->arena, &cr_fn_matinv, &uv, 1, &inv);
    if (st != CR_OK)
        return cr__tape_fail(F->t, st, "%s: the second-order form needs the factor's inverse: %s",
                             F->who, cr_ctx_errmsg(F->t->ctx));
    if ((st = cr__dense(F->arena, inv.u.arr, CR_DT_F64, &a)) == CR_OK)
        *Ui = a->data;
    return st;
}

/* Upper triangle of P made symmetric, in place (n x n): P_ji := P_ij for i < j. */
static void sym_from_upper(double *P, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            P[j * n + i] = P[i * n + j];
}

/* Ṁ/2 of cholesky's pullback along U̇ (form_cholesky's derivation, below), into s (n x n):
 * s = (X + Xᵀ + U⁻¹ Φ̇ U⁻ᵀ)/2, X = −U⁻¹ U̇ M, Φ̇ = sym(triu(Ū) U̇ᵀ); Ui = U⁻¹, Ub = triu(Ū),
 * w: 3 n² of workspace. Shared by cholesky and potrf. */
static void chol_mdot(size_t n, const double *Ui, const double *Ub, const double *M,
                      const double *Ud, double *w, double *s)
{
    double *Z = w, *X = Z + n * n, *P = X + n * n;
    mm(1.0, Ui, n, n, 0, Ud, n, n, 0, 0.0, Z); /* U⁻¹ U̇ */
    mm(-1.0, Z, n, n, 0, M, n, n, 0, 0.0, X);  /* X = −U⁻¹ U̇ M */
    mm(1.0, Ub, n, n, 0, Ud, n, n, 1, 0.0, P); /* triu(Ū) U̇ᵀ */
    sym_from_upper(P, n);                      /* Φ̇ */
    mm(1.0, Ui, n, n, 0, P, n, n, 0, 0.0, Z);  /* U⁻¹ Φ̇ */
    mm(1.0, Z, n, n, 0, Ui, n, n, 1, 0.0, s);  /* U⁻¹ Φ̇ U⁻ᵀ */
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            s[a * n + b] = 0.5 * (s[a * n + b] + X[a * n + b] + X[b * n + a]);
}

/*
 * cholesky(A) = U, A = Uᵀ U with A's upper triangle read. The rule's pullback (Seeger et al.)
 *     Ā = give(M / 2),   M = U⁻¹ Φ U⁻ᵀ,   Φ = sym(triu(Ū) Uᵀ),
 * sym(P) the symmetric matrix of P's upper triangle; give leaves a Symmetric (Hermitian) A's
 * cotangent as it is and folds a dense A's onto the upper triangle it was read from. Along
 * Ȧ, with U̇ the result's tangent (cholesky's frule, from the forward sweep), Ū fixed,
 * d(U⁻¹) = −U⁻¹ U̇ U⁻¹ and Φ linear in U:
 *     Ṁ = X + Xᵀ + U⁻¹ Φ̇ U⁻ᵀ,   X = −U⁻¹ U̇ M,   Φ̇ = sym(triu(Ū) U̇ᵀ),
 *     S = give(Ṁ / 2)   (fold_upper for a dense A, as the rule folds).
 * M is taken from the recorded pullback's G = give(M / 2) (M symmetric): M = 2G for a
 * Symmetric A; for a dense A, G_ij = M_ij above the diagonal and G_ii = M_ii / 2. A Diagonal,
 * Upper or Lower A is read as its logical dense matrix (so the rule factors the symmetric
 * matrix of that matrix's upper triangle: a Lower A's is its diagonal), its cotangent folded
 * as a dense A's and then projected onto its structure, and so is S (put). The projected G
 * still gives what S needs: all of an Upper A's fold; for a Diagonal or Lower A, U and U̇ are
 * diagonal, and the diagonal of S involves M's diagonal only.
 */
static cr_status form_cholesky(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                               double *adjd, const double *tan, size_t k)
{
    (void)i;
    form F;
    const double *G, *U, *Ui = NULL;
    const cr_array *Yb;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    if (st != CR_OK || F.x->ndim != 2 || F.x->shape[0] != F.x->shape[1])
        return st;
    size_t n = F.x->shape[0], nn = n * n;
    if ((st = cr__tan_array(F.arena, F.who, ybar, 2, F.x->shape, CR_DT_F64, &Yb)) != CR_OK ||
        Yb == NULL || (st = pulled(&F, ybar, &G)) != CR_OK || (st = y_array(&F, &U)) != CR_OK)
        return st;
    cr_array *Uc, *Ub;
    if ((st = triu_copy(F.arena, U, n, &Uc)) != CR_OK ||
        (st = triu_copy(F.arena, Yb->data, n, &Ub)) != CR_OK ||
        (st = tri_inverse(&F, Uc, &Ui)) != CR_OK)
        return st;
    const cr_array *A = nd->vals[0].u.arr;
    bool fold = A->structure != CR_MAT_SYMMETRIC && A->structure != CR_MAT_HERMITIAN;
    double *w = cr_arena_alloc(F.arena, 4 * nn * sizeof *w, _Alignof(double));
    if (w == NULL)
        return CR__ALLOC_STATUS(F.arena);
    double *M = w, *Z = M + nn; /* Z: chol_mdot's 3 n² of workspace */
    for (size_t a = 0; a < n; a++)
        for (size_t b = a; b < n; b++) {
            double g = G[a * n + b];
            M[a * n + b] = M[b * n + a] = fold ? (a == b ? 2.0 * g : g) : 2.0 * g;
        }
    for (size_t d = 0; d < k; d++) {
        cr_tangent raw;
        const double *xd, *Ud;
        cr_array *S;
        if ((st = x_dot(&F, tan, k, d, &raw, &xd)) != CR_OK)
            return st;
        if (xd == NULL)
            continue;
        if ((st = y_dot_arr(&F, tan, k, d, &Ud)) != CR_OK)
            return st;
        if (Ud == NULL)
            continue;
        if ((st = new_s(&F, &S)) != CR_OK)
            return st;
        double *s = S->data;
        chol_mdot(n, Ui, Ub->data, M, Ud, Z, s);
        if (fold)
            fold_upper(s, n);
        if ((st = put(&F, S, adjd, k, d)) != CR_OK)
            return st;
    }
    return CR_OK;
}

/* The upper factor U of a Cholesky solve from the record's factor argument x (n x n): its
 * upper triangle (uplo 'U') or the transpose of its lower one ('L'); NULL x: zeros. */
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
 */
/* S of a Cholesky solve Y = (Uᵀ U)⁻¹ B (form_cholesky_solve's derivation), the factor being the
 * form's argument (U from it by chol_factor) and B argument jb; pb: the pullback whose B̄ is
 * unprojected. For uplo 'L' (potrs), F̄ = tril(C L) = triu(U C)ᵀ with U = Lᵀ, so the triu term
 * is added transposed. Shared by cholesky_solve and potrs. */
static cr_status chol_solve_s(form *F, size_t jb, char uplo, const cr_pullback *pb, cr_tangent ybar,
                              double *adjd, const double *tan, size_t k)
{
    const cr__anode *nd = F->nd;
    const double *y;
    const cr_array *Bv = nd->vals[jb].u.arr, *Bb;
    size_t n = F->x->shape[0], m = Bv->ndim == 1 ? 1 : Bv->shape[1], nn = n * n;
    size_t nx = (size_t)nd->nargs + 1;
    cr_tangent dx[MAX_ARGS + 1];
    cr_status st;
    if (nx > sizeof dx / sizeof dx[0])
        return CR_EINVAL;
    if ((st = cr_pullback_call(F->arena, pb, &ybar, dx, nx)) != CR_OK ||
        (st = cr__tan_array(F->arena, F->who, dx[jb + 1], Bv->ndim, Bv->shape, CR_DT_F64, &Bb)) !=
            CR_OK)
        return st;
    if (Bb == NULL)
        return CR_OK; /* Ȳ = 0 */
    if ((st = y_array(F, &y)) != CR_OK)
        return st;
    const double *bb = Bb->data;
    cr_array *Uc;
    double *w = cr_arena_alloc(F->arena, 4 * nn * sizeof *w, _Alignof(double));
    if (w == NULL)
        return CR__ALLOC_STATUS(F->arena);
    if ((st = chol_factor(F->arena, F->x->data, n, uplo, &Uc)) != CR_OK)
        return st;
    const double *U = Uc->data;
    double *C = w, *Ad = C + nn, *E = Ad + nn, *T = E + nn;
    mm(-1.0, bb, n, m, 0, y, n, m, 1, 0.0, C); /* Ā = −B̄ Yᵀ */
    for (size_t a = 0; a < n; a++)
        for (size_t b = a; b < n; b++)
            C[a * n + b] = C[b * n + a] = C[a * n + b] + C[b * n + a];
    for (size_t d = 0; d < k; d++) {
        cr_tangent raw, SB = cr_tangent_zero(), dw[MAX_ARGS + 1];
        const double *xd, *yd, *Su;
        cr_array *SU, *Udc = NULL, *W;
        if ((st = x_dot(F, tan, k, d, &raw, &xd)) != CR_OK ||
            (st = y_dot_arr(F, tan, k, d, &yd)) != CR_OK)
            return st;
        if (xd == NULL && yd == NULL)
            continue;
        if ((st = new_s(F, &SU)) != CR_OK)
            return st;
        double *su = SU->data;
        if (xd != NULL) {
            if ((st = chol_factor(F->arena, xd, n, uplo, &Udc)) != CR_OK ||
                (st = cr__new(F->arena, CR_DT_F64, Bv->ndim, Bv->shape, false, &W)) != CR_OK)
                return st;
            const double *ud = Udc->data;
            mm(1.0, ud, n, n, 1, U, n, n, 0, 0.0, Ad); /* Ȧ = U̇ᵀ U + Uᵀ U̇ */
            mm(1.0, U, n, n, 1, ud, n, n, 0, 1.0, Ad);
            mm(-1.0, Ad, n, n, 0, bb, n, m, 0, 0.0, W->data); /* W = −Ȧ B̄ */
            cr_tangent wt = cr_tangent_array(W);
            if ((st = cr_pullback_call(F->arena, pb, &wt, dw, nx)) != CR_OK ||
                (st = like_x(F, dw[1], &Su)) != CR_OK)
                return st;
            if (Su != NULL)
                memcpy(su, Su, nn * sizeof *su);
            SB = dw[jb + 1];
            mm(1.0, ud, n, n, 0, C, n, n, 0, 0.0, T); /* U̇ C */
        } else {
            memset(T, 0, nn * sizeof *T);
        }
        if (yd != NULL) {
            mm(-1.0, bb, n, m, 0, yd, n, m, 1, 0.0, E); /* E = −B̄ Ẏᵀ */
            for (size_t a = 0; a < n; a++)
                for (size_t b = a; b < n; b++)
                    E[a * n + b] = E[b * n + a] = E[a * n + b] + E[b * n + a];
            mm(1.0, U, n, n, 0, E, n, n, 0, 1.0, T); /* + U (E + Eᵀ) */
        }
        for (size_t a = 0; a < n; a++)
            for (size_t b = a; b < n; b++)
                su[uplo == 'U' ? a * n + b : b * n + a] += T[a * n + b];
        if ((st = put(F, SU, adjd, k, d)) != CR_OK ||
            (st = put_arg(F, jb, SB, adjd, k, d)) != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_status form_cholesky_solve(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                                     double *adjd, const double *tan, size_t k)
{
    (void)i;
    if (nd->args[0] == CR_VAR_CONST)
        return CR_OK;
    form F;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    return st != CR_OK ? st : chol_solve_s(&F, 1, 'U', &nd->pb, ybar, adjd, tan, k);
}

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
static cr_status cholesky_det_s(cr_tape *t, const cr__anode *nd, bool lg, cr_tangent ybar,
                                double *adjd, const double *tan, size_t k)
{
    form F;
    const double *yb, *G = NULL;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    if (st == CR_OK)
        st = ybar_slices(&F, ybar, &yb);
    if (st == CR_OK && lg)
        st = pulled(&F, ybar, &G);
    if (st != CR_OK || F.x->ndim != 2 || F.x->shape[0] != F.x->shape[1])
        return st;
    size_t n = F.x->shape[0];
    const double *x = F.x->data;
    double *pv = cr_arena_alloc(F.arena, (4 * n + 1) * sizeof *pv, _Alignof(double));
    if (pv == NULL)
        return CR__ALLOC_STATUS(F.arena);
    double *pd = pv + n, *qv = pd + n, *qd = qv + n; /* prefix and suffix duals */
    for (size_t d = 0; d < k; d++) {
        cr_tangent raw;
        const double *xd;
        cr_array *S;
        if ((st = x_dot(&F, tan, k, d, &raw, &xd)) != CR_OK)
            return st;
        if (xd == NULL)
            continue;
        if ((st = new_s(&F, &S)) != CR_OK)
            return st;
        double *s = S->data;
        if (lg) {
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
                s[q * n + q] = 2.0 * yb[0] * (xd[q * n + q] * Qv + x[q * n + q] * Qd);
            }
        }
        if ((st = put(&F, S, adjd, k, d)) != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_status form_cholesky_logdet(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                                      double *adjd, const double *tan, size_t k)
{
    (void)i;
    return cholesky_det_s(t, nd, true, ybar, adjd, tan, k);
}

static cr_status form_cholesky_det(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                                   double *adjd, const double *tan, size_t k)
{
    (void)i;
    return cholesky_det_s(t, nd, false, ybar, adjd, tan, k);
}

/* ---- qr, lu, pinv ----------------------------------------------------------------------------
 */

/* X <- X T⁻ᵀ for X (r x n) and T (n x n, upper triangular, nonzero diagonal): the rows z of
 * the result solve T zᵀ = xᵀ, by back substitution. */
static void right_solve_upper_t(const double *T, size_t n, double *X, size_t r)
{
    for (size_t a = 0; a < r; a++) {
        double *x = X + a * n;
        for (size_t b = n; b-- > 0;) {
            double v = x[b];
            for (size_t j = b + 1; j < n; j++)
                v -= x[j] * T[b * n + j];
            x[b] = v / T[b * n + b];
        }
    }
}

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

/* A real r x c matrix tangent (or cotangent) as f64 (NULL when zero). */
static cr_status mat_of(const form *F, cr_tangent v, size_t r, size_t c, const double **out)
{
    size_t sh[2] = {r, c};
    const cr_array *a;
    cr_status st = cr__tan_array(F->arena, F->who, v, 2, sh, CR_DT_F64, &a);
    *out = st == CR_OK && a != NULL ? a->data : NULL;
    return st;
}

/* Element e (a matrix of shape r x c) of a tuple tangent, dense f64 (NULL when zero). */
static cr_status field_mat(const form *F, cr_tangent t, size_t e, size_t r, size_t c,
                           const double **out)
{
    return mat_of(F, cr_tangent_field(t, e), r, c, out);
}

/* A new r x c f64 matrix in the arena (zeros). */
static cr_status new_mat(const form *F, size_t r, size_t c, double **out)
{
    *out = cr_arena_calloc(F->arena, r * c > 0 ? r * c : 1, sizeof **out, _Alignof(double));
    return *out != NULL ? CR_OK : CR__ALLOC_STATUS(F->arena);
}

/*
 * lu(A) = (L, U, p), P A = L U with the row permutation p (A[p[i], :] = (L U)[i, :]). With
 * the cotangent (L̄, Ū) (p has none) the pullback is
 *     N = tril(Lᵀ L̄, -1) + triu(Ū Uᵀ),   X = L⁻ᵀ N U⁻ᵀ,   Ā = Pᵀ X (row i of X is row p[i]).
 * Along Ȧ, with L̇, U̇ from lu's frule and p fixed (the recorded pivoting: the derivative is
 * that of this branch), the product rule with d(L⁻ᵀ) = -L⁻ᵀ L̇ᵀ L⁻ᵀ, d(U⁻ᵀ) = -U⁻ᵀ U̇ᵀ U⁻ᵀ:
 *     Ẋ = L⁻ᵀ Ṅ U⁻ᵀ - L⁻ᵀ L̇ᵀ X - X U̇ᵀ U⁻ᵀ = L⁻ᵀ (Ṅ - L̇ᵀ (X Uᵀ) - (Lᵀ X) U̇ᵀ) U⁻ᵀ,
 *     Ṅ = tril(L̇ᵀ L̄, -1) + triu(Ū U̇ᵀ),   S = Pᵀ Ẋ,
 * with X = P G from G, the pullback applied to (L̄, Ū), unprojected (pulled_dense). A
 * structured A: S projected as the rule projects Ā (put). The rule reads L̄ on its
 * strictly lower triangle and Ū on its upper one; with L̇ᵀ strictly upper and U, U̇ upper
 * triangular, tril(L̇ᵀ L̄, -1) and triu(Ū U̇ᵀ) involve no other elements, so both are used as
 * they come.
 */
/* What lu's S needs once per record (form_lu's derivation, above): the factors L (unit
 * lower) and U, the row permutation p (A[p[a], :] = (L U)[a, :]), the cotangents L̄, Ū (NULL:
 * zero), X = P G with G the unprojected cotangent of A, X Uᵀ and Lᵀ X, and workspace. Shared by
 * lu and getrf (whose packed factors are L and U). */
typedef struct lu_s {
    size_t n;
    const double *L, *U, *Lb, *Ub;
    const size_t *p;
    double *X, *XUt, *LtX, *W, *T;
} lu_s;

static cr_status lu_s_init(const form *F, size_t n, const double *L, const double *U,
                           const size_t *p, const double *Lb, const double *Ub, const double *G,
                           lu_s *z)
{
    size_t nn = n * n;
    double *w;
    cr_status st = new_mat(F, 5, nn, &w);
    if (st != CR_OK)
        return st;
    *z = (lu_s){n, L, U, Lb, Ub, p, w, w + nn, w + 2 * nn, w + 3 * nn, w + 4 * nn};
    for (size_t a = 0; a < n; a++) /* X = P G */
        memcpy(z->X + a * n, G + p[a] * n, n * sizeof *z->X);
    mm(1.0, z->X, n, n, 0, U, n, n, 1, 0.0, z->XUt);
    mm(1.0, L, n, n, 1, z->X, n, n, 0, 0.0, z->LtX);
    return CR_OK;
}

/* lu's S along (L̇, U̇) (L̇ strictly lower, U̇ upper; NULL: zero) into s (n x n). */
static void lu_s_dir(const lu_s *z, const double *Ld, const double *Ud, double *s)
{
    size_t n = z->n, nn = n * n;
    double *W = z->W, *T = z->T;
    /* W = Ṅ - L̇ᵀ (X Uᵀ) - (Lᵀ X) U̇ᵀ */
    memset(W, 0, nn * sizeof *W);
    if (Ld != NULL && z->Lb != NULL) {
        mm(1.0, Ld, n, n, 1, z->Lb, n, n, 0, 0.0, T); /* L̇ᵀ L̄, strictly lower part kept */
        for (size_t a = 0; a < n; a++)
            for (size_t b = 0; b < a; b++)
                W[a * n + b] = T[a * n + b];
    }
    if (Ud != NULL && z->Ub != NULL) {
        mm(1.0, z->Ub, n, n, 0, Ud, n, n, 1, 0.0, T); /* Ū U̇ᵀ, upper part kept */
        for (size_t a = 0; a < n; a++)
            for (size_t b = a; b < n; b++)
                W[a * n + b] += T[a * n + b];
    }
    if (Ld != NULL)
        mm(-1.0, Ld, n, n, 1, z->XUt, n, n, 0, 1.0, W);
    if (Ud != NULL)
        mm(-1.0, z->LtX, n, n, 0, Ud, n, n, 1, 1.0, W);
    left_solve_unit_lower_t(z->L, n, W, n);
    right_solve_upper_t(z->U, n, W, n);
    for (size_t a = 0; a < n; a++) /* S = Pᵀ Ẋ */
        memcpy(s + z->p[a] * n, W + a * n, n * sizeof *s);
}

static cr_status form_lu(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar, double *adjd,
                         const double *tan, size_t k)
{
    (void)i;
    form F;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    if (st != CR_OK || F.x->ndim != 2 || F.x->shape[0] != F.x->shape[1])
        return st; /* the rule refused it when recorded */
    size_t n = F.x->shape[0];
    const cr_array *La, *Ua, *pa;
    const double *Lb, *Ub, *G;
    if ((st = factor_of(&F, &nd->y, 0, 2, &La)) != CR_OK ||
        (st = factor_of(&F, &nd->y, 1, 2, &Ua)) != CR_OK ||
        (st = factor_of(&F, &nd->y, 2, 1, &pa)) != CR_OK ||
        (st = field_mat(&F, ybar, 0, n, n, &Lb)) != CR_OK ||
        (st = field_mat(&F, ybar, 1, n, n, &Ub)) != CR_OK ||
        (st = pulled_dense(&F, ybar, &G)) != CR_OK)
        return st;
    const double *pv = pa->data;
    size_t *p = cr_arena_alloc(F.arena, (n ? n : 1) * sizeof *p, _Alignof(size_t));
    if (p == NULL)
        return CR__ALLOC_STATUS(F.arena);
    for (size_t a = 0; a < n; a++) {
        p[a] = (size_t)pv[a];
        if (p[a] >= n)
            return CR_EINVAL;
    }
    lu_s z;
    if ((st = lu_s_init(&F, n, La->data, Ua->data, p, Lb, Ub, G, &z)) != CR_OK)
        return st;
    for (size_t d = 0; d < k; d++) {
        cr_tangent raw, dy;
        const double *xd, *Ld, *Ud;
        cr_value y;
        if ((st = x_dot(&F, tan, k, d, &raw, &xd)) != CR_OK)
            return st;
        if (xd == NULL)
            continue;
        if ((st = frule_along(&F, &cr_fn_lu, raw, &y, &dy)) != CR_OK ||
            (st = field_mat(&F, dy, 0, n, n, &Ld)) != CR_OK ||
            (st = field_mat(&F, dy, 1, n, n, &Ud)) != CR_OK)
            return st;
        cr_array *S;
        if ((st = new_s(&F, &S)) != CR_OK)
            return st;
        lu_s_dir(&z, Ld, Ud, S->data);
        if ((st = put(&F, S, adjd, k, d)) != CR_OK)
            return st;
    }
    return CR_OK;
}

/* ---- sylvester, lyap, matfun_herm ------------------------------------------------------------ */

/* The tangent of the record's argument j (an r x c matrix) along d, as f64 (NULL when zero). */
static cr_status arg_dot(const form *F, size_t j, size_t r, size_t c, const double *tan, size_t k,
                         size_t d, const double **out)
{
    cr_tangent raw = cr__a2_arg_tangent(F->t, F->nd->args[j], tan, k, d);
    *out = NULL;
    return cr_tangent_is_zero(raw) ? CR_OK : mat_of(F, raw, r, c, out);
}

/* An f64 r x c matrix holding v (zeros when v is NULL), for the cotangent of an argument. */
static cr_status mat_array(const form *F, const double *v, size_t r, size_t c, cr_array **out)
{
    size_t sh[2] = {r, c};
    cr_status st = cr__new(F->arena, CR_DT_F64, 2, sh, v == NULL, out);
    if (st == CR_OK && v != NULL)
        memcpy((*out)->data, v, r * c * sizeof *v);
    return st;
}

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

/* A Sylvester-type record: op(A) X + sgn X op(B) = ±C, A, B, C at positions ia, ib, ic (lyap:
 * B = Aᵀ, ly), op by ta, tb ('N' or 'T'), the pullback's adjoint variable Λ = lam C̄, the parts
 * of A and B read (trsyl's blkA, blkB; NULL: all). */
typedef struct sylv_g {
    size_t ia, ib, ic;
    char ta, tb;
    double sgn, lam;
    const bool *blkA, *blkB;
    bool ly;
} sylv_g;

/* S of a Sylvester-type record (form_sylvester's derivation, above, with ops and signs):
 * W = op(Ȧ)ᵀ Λ + sgn Λ op(Ḃ)ᵀ (lyap: + Λ Ȧ), Ȧ, Ḃ restricted to what is read; the recorded
 * pullback at W gives S_C and Ā(W), B̄(W); S_A += op⁻¹(Λ Ẋᵀ) (lyap: + Λᵀ Ẋ), S_B +=
 * op⁻¹(sgn Ẋᵀ Λ), restricted likewise. Shared by sylvester, lyap and trsyl. */
static cr_status sylv_s(form *F, const sylv_g *g, cr_tangent ybar, double *adjd, const double *tan,
                        size_t k)
{
    const cr__anode *nd = F->nd;
    size_t nx = (size_t)nd->nargs + 1, ia = g->ia, ib = g->ib, ic = g->ic;
    const cr_array *Cv = nd->vals[ic].u.arr;
    size_t n = Cv->shape[0], m = Cv->shape[1];
    cr_tangent dx[MAX_ARGS + 1], dw[MAX_ARGS + 1];
    const double *Cb;
    cr_status st;
    if (nx > sizeof dx / sizeof dx[0])
        return CR_EINVAL;
    if ((st = cr_pullback_call(F->arena, &nd->pb, &ybar, dx, nx)) != CR_OK ||
        (st = mat_of(F, dx[ic + 1], n, m, &Cb)) != CR_OK || Cb == NULL)
        return st; /* Λ = 0: S = 0 */
    double *L, *W, *Am, *Bm, *T;
    if ((st = new_mat(F, n, m, &L)) != CR_OK || (st = new_mat(F, n, m, &W)) != CR_OK ||
        (st = new_mat(F, n, n, &Am)) != CR_OK || (st = new_mat(F, m, m, &Bm)) != CR_OK ||
        (st = new_mat(F, n > m ? n : m, n > m ? n : m, &T)) != CR_OK)
        return st;
    for (size_t q = 0; q < n * m; q++)
        L[q] = g->lam * Cb[q];
    bool bvar = !g->ly && nd->args[ib] != CR_VAR_CONST;
    for (size_t d = 0; d < k; d++) {
        const double *Ad, *Bd = NULL, *Xd, *Sa = NULL, *Sb = NULL;
        if ((st = arg_dot(F, ia, n, n, tan, k, d, &Ad)) != CR_OK ||
            (!g->ly && (st = arg_dot(F, ib, m, m, tan, k, d, &Bd)) != CR_OK) ||
            (st = y_dot_arr(F, tan, k, d, &Xd)) != CR_OK)
            return st;
        cr_tangent SC = cr_tangent_zero();
        if (Ad != NULL || Bd != NULL) {
            /* W = op(Ȧ)ᵀ Λ + sgn Λ op(Ḃ)ᵀ (lyap: Ȧᵀ Λ + Λ Ȧ); Ā(W), B̄(W), Λ̇ from the
             * pullback */
            memset(W, 0, n * m * sizeof *W);
            if (Ad != NULL) {
                memcpy(Am, Ad, n * n * sizeof *Am);
                schur_mask_f(Am, n, g->blkA);
                mm(1.0, Am, n, n, g->ta == 'N', L, n, m, 0, 1.0, W);
                if (g->ly)
                    mm(1.0, L, n, n, 0, Am, n, n, 0, 1.0, W);
            }
            if (Bd != NULL) {
                memcpy(Bm, Bd, m * m * sizeof *Bm);
                schur_mask_f(Bm, m, g->blkB);
                mm(g->sgn, L, n, m, 0, Bm, m, m, g->tb == 'N', 1.0, W);
            }
            cr_array *Wa;
            if ((st = mat_array(F, W, n, m, &Wa)) != CR_OK)
                return st;
            cr_tangent wt = cr_tangent_array(Wa);
            if ((st = cr_pullback_call(F->arena, &nd->pb, &wt, dw, nx)) != CR_OK)
                return st;
            SC = dw[ic + 1];
            if (nd->args[ia] != CR_VAR_CONST && (st = mat_of(F, dw[ia + 1], n, n, &Sa)) != CR_OK)
                return st;
            if (bvar && (st = mat_of(F, dw[ib + 1], m, m, &Sb)) != CR_OK)
                return st;
        }
        cr_array *SA, *SB;
        if ((st = mat_array(F, Sa, n, n, &SA)) != CR_OK ||
            (st = mat_array(F, Sb, m, m, &SB)) != CR_OK)
            return st;
        double *sa = SA->data, *sb = SB->data;
        if (Xd != NULL) {
            mm(1.0, L, n, m, 0, Xd, n, m, 1, 0.0, T); /* Λ Ẋᵀ, op⁻¹ */
            for (size_t a = 0; a < n; a++)
                for (size_t b = 0; b < n; b++)
                    sa[a * n + b] += g->ta == 'N' ? T[a * n + b] : T[b * n + a];
            schur_mask_f(sa, n, g->blkA);
            if (g->ly) {
                mm(1.0, L, n, n, 1, Xd, n, n, 0, 1.0, sa); /* + Λᵀ Ẋ */
            } else {
                mm(g->sgn, Xd, n, m, 1, L, n, m, 0, 0.0, T); /* sgn Ẋᵀ Λ, op⁻¹ */
                for (size_t a = 0; a < m; a++)
                    for (size_t b = 0; b < m; b++)
                        sb[a * m + b] += g->tb == 'N' ? T[a * m + b] : T[b * m + a];
                schur_mask_f(sb, m, g->blkB);
            }
        }
        if ((st = put_arg(F, ia, cr_tangent_array(SA), adjd, k, d)) != CR_OK ||
            (!g->ly && (st = put_arg(F, ib, cr_tangent_array(SB), adjd, k, d)) != CR_OK) ||
            (st = put_arg(F, ic, SC, adjd, k, d)) != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_status form_sylvester(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                                double *adjd, const double *tan, size_t k)
{
    (void)i;
    bool ly = nd->nargs == 2; /* lyap(A, C) */
    if (nd->args[0] == CR_VAR_CONST && (ly || nd->args[1] == CR_VAR_CONST))
        return CR_OK;
    form F;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    sylv_g g = {0, 1, ly ? 1 : 2, 'N', 'N', 1.0, 1.0, NULL, NULL, ly};
    return st != CR_OK ? st : sylv_s(&F, &g, ybar, adjd, tan, k);
}

/* ---- LAPACK-level functions: potrf, potrs, getrf, getri, getrs, trtrs, trsyl -----------------
 *
 * Each is a higher-level function (cholesky, cholesky_solve, lu, inv, solve, sylvester) with
 * its matrices packed or read as LAPACK does: a triangle, an op (transpose), packed LU factors
 * with row interchanges, Schur-form blocks. Where the packing is fixed (a linear map that does
 * not depend on the point), the rule's pullback is the higher-level one composed with it, and
 * the form is the higher-level one's helper with the same packing. getri and getrs read A =
 * P L U from the packed factors F: that map is a product, so their S has one more term, the
 * derivative of the packing's adjoint along Ḟ (lu_adj_add).
 */

/* A character flag argument ('U', 'N', ...), upper case; 'C' read as 'T' for real matrices. */
static char flag_of(const form *F, const cr_value *v)
{
    int64_t c = 0;
    if (cr__int_arg(F->arena, F->who, v, &c) != CR_OK || c <= 0 || c >= 128)
        return 0;
    c = toupper((int)c);
    return c == 'C' ? 'T' : (char)c;
}

/* The row permutation of LAPACK's 1-based interchanges ipiv (n of them, from a value or a list
 * of integers): A = P L U with A[p[a], :] = (L U)[a, :], i.e. (Pᵀ Z)[a, :] = Z[p[a], :]. */
static cr_status perm_of(const form *F, const cr_value *ipiv, size_t n, size_t **out)
{
    int64_t *piv;
    size_t np;
    cr_status st = cr__int_list(F->arena, F->who, ipiv, &piv, &np);
    if (st != CR_OK)
        return st;
    size_t *p = cr_arena_alloc(F->arena, (n ? n : 1) * sizeof *p, _Alignof(size_t));
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
static cr_status lu_unpack(const form *F, const double *f, size_t n, bool unit, double **L,
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

/* The tangent of A = P L U along (L̇, U̇) (the product rule): Ȧ = P (L̇ U + L U̇), into out
 * (n x n); w: n² of workspace. */
static void lu_tan(size_t n, const size_t *p, const double *L, const double *U, const double *Ld,
                   const double *Ud, double *w, double *out)
{
    mm(1.0, Ld, n, n, 0, U, n, n, 0, 0.0, w);
    mm(1.0, L, n, n, 0, Ud, n, n, 0, 1.0, w);
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
    mm(1.0, PZ, n, n, 0, Ux, n, n, 1, 0.0, T);
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < a; b++)
            out[a * n + b] += T[a * n + b];
    mm(1.0, Lx, n, n, 1, PZ, n, n, 0, 0.0, T);
    for (size_t a = 0; a < n; a++)
        for (size_t b = a; b < n; b++)
            out[a * n + b] += T[a * n + b];
}

/* The record's pullback applied to v, argument j's cotangent (its logical shape, f64, NULL
 * when zero) and, in *dx, all of them. */
static cr_status pull_at(const form *F, const cr_pullback *pb, cr_tangent v, cr_tangent *dx,
                         size_t j, size_t r, size_t c, const double **out)
{
    *out = NULL;
    cr_status st = cr_pullback_call(F->arena, pb, &v, dx, (size_t)F->nd->nargs + 1);
    return st == CR_OK && j < F->nd->nargs ? mat_of(F, dx[j + 1], r, c, out) : st;
}

/*
 * potrf(A, uplo): U with H = Uᵀ U ('U'), or L = Uᵀ ('L'), H the symmetric matrix of A's
 * triangle uplo. The rule's pullback is cholesky's with Ū = triu(F̄) ('U') or triu(F̄ᵀ) ('L'),
 * folded onto the triangle uplo (whatever A's structure), then projected onto A's structure:
 *     Ā = P(fold_uplo(M / 2)),   M = U⁻¹ Φ U⁻ᵀ,   Φ = sym(triu(Ū) Uᵀ).
 * The fold, the transposes and P are fixed linear maps, so along Ȧ (U̇ = ẏ or ẏᵀ, the result's
 * tangent from potrf's frule) S = P(fold_uplo(Ṁ / 2)), Ṁ / 2 as for cholesky (chol_mdot). M is
 * unfolded from the pullback's Ā before projection (pulled_dense): M_ab = Ā_ab above the
 * diagonal ('U'; Ā_ba for 'L'), M_aa = 2 Ā_aa.
 */
static cr_status form_potrf(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                            double *adjd, const double *tan, size_t k)
{
    (void)i;
    form F;
    const double *G, *Y, *Ui;
    const cr_array *Yb;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    if (st != CR_OK || F.x->ndim != 2 || F.x->shape[0] != F.x->shape[1])
        return st;
    size_t n = F.x->shape[0], nn = n * n;
    char uplo = flag_of(&F, &nd->vals[1]);
    if ((st = cr__tan_array(F.arena, F.who, ybar, 2, F.x->shape, CR_DT_F64, &Yb)) != CR_OK ||
        Yb == NULL || (st = pulled_dense(&F, ybar, &G)) != CR_OK || (st = y_array(&F, &Y)) != CR_OK)
        return st;
    cr_array *Uc, *Ub, *Udc;
    double *M, *w;
    if ((st = chol_factor(F.arena, Y, n, uplo, &Uc)) != CR_OK ||
        (st = chol_factor(F.arena, Yb->data, n, uplo, &Ub)) != CR_OK ||
        (st = tri_inverse(&F, Uc, &Ui)) != CR_OK || (st = new_mat(&F, n, n, &M)) != CR_OK ||
        (st = new_mat(&F, 3, nn, &w)) != CR_OK)
        return st;
    for (size_t a = 0; a < n; a++)
        for (size_t b = a; b < n; b++) {
            double g = uplo == 'U' ? G[a * n + b] : G[b * n + a];
            M[a * n + b] = M[b * n + a] = a == b ? 2.0 * g : g;
        }
    for (size_t d = 0; d < k; d++) {
        cr_tangent raw;
        const double *xd, *Yd;
        cr_array *S;
        if ((st = x_dot(&F, tan, k, d, &raw, &xd)) != CR_OK ||
            (st = y_dot_arr(&F, tan, k, d, &Yd)) != CR_OK)
            return st;
        if (xd == NULL || Yd == NULL)
            continue;
        if ((st = chol_factor(F.arena, Yd, n, uplo, &Udc)) != CR_OK ||
            (st = new_s(&F, &S)) != CR_OK)
            return st;
        double *s = S->data;
        chol_mdot(n, Ui, Ub->data, M, Udc->data, w, s);
        fold_upper(s, n);
        for (size_t a = 0; a < n && uplo == 'L'; a++) /* onto the lower triangle */
            for (size_t b = a + 1; b < n; b++) {
                s[b * n + a] = s[a * n + b];
                s[a * n + b] = 0.0;
            }
        if ((st = put(&F, S, adjd, k, d)) != CR_OK)
            return st;
    }
    return CR_OK;
}

/*
 * potrs(F, uplo, B) = H⁻¹ B, H = Uᵀ U with U = triu(F) ('U') or U = tril(F)ᵀ ('L', H = L Lᵀ):
 * the rule's pullback is cholesky_solve's, B̄ = H⁻¹ Ȳ, F̄ = triu(U C) ('U') or tril(C L) =
 * triu(U C)ᵀ ('L'), C = Ā + Āᵀ, Ā = −B̄ Yᵀ, each projected onto its argument's structure. So S
 * is cholesky_solve's (chol_solve_s) with the factor read from uplo's triangle and the triu
 * term transposed for 'L'; B̄ is taken unprojected (pullback_dense: B of any structure). potrs
 * is linear in B: with F a constant, S = 0.
 */
static cr_status form_potrs(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                            double *adjd, const double *tan, size_t k)
{
    (void)i;
    if (nd->args[0] == CR_VAR_CONST)
        return CR_OK;
    form F;
    cr_pullback pb;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    if (st == CR_OK)
        st = pullback_dense(&F, 2, &pb);
    return st != CR_OK ? st
                       : chol_solve_s(&F, 2, flag_of(&F, &nd->vals[1]), &pb, ybar, adjd, tan, k);
}

/*
 * getrf(A) = (F, ipiv), A = P L U with F = tril₋(L) + U: the rule's pullback is lu's with
 * L̄ = tril₋(F̄) and Ū = triu(F̄) (ipiv has no cotangent), the fixed packing of lu's (L, U) into
 * F. lu's S (lu_s_init, lu_s_dir) reads L̄ only on its strictly lower triangle and Ū on its upper
 * one, so F̄ serves as both; L̇ = tril₋(Ḟ), U̇ = triu(Ḟ) with Ḟ from getrf's frule along Ȧ, p
 * from ipiv. G, the pullback's Ā, is taken unprojected (pulled_dense) and S projected (put).
 */
static cr_status form_getrf(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                            double *adjd, const double *tan, size_t k)
{
    (void)i;
    form F;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    if (st != CR_OK || F.x->ndim != 2 || F.x->shape[0] != F.x->shape[1])
        return st; /* the rule refused it when recorded */
    size_t n = F.x->shape[0];
    const cr_array *Fa;
    const double *Fb, *G;
    double *L, *U;
    size_t *p;
    cr_value ipiv;
    if ((st = factor_of(&F, &nd->y, 0, 2, &Fa)) != CR_OK ||
        (st = cr_type_field_value(nd->y.u.obj.type, nd->y.u.obj.ptr, 1, &ipiv)) != CR_OK ||
        (st = perm_of(&F, &ipiv, n, &p)) != CR_OK ||
        (st = field_mat(&F, ybar, 0, n, n, &Fb)) != CR_OK)
        return st;
    if (Fb == NULL)
        return CR_OK; /* F̄ = 0 */
    lu_s z;
    if ((st = pulled_dense(&F, ybar, &G)) != CR_OK ||
        (st = lu_unpack(&F, Fa->data, n, true, &L, &U)) != CR_OK ||
        (st = lu_s_init(&F, n, L, U, p, Fb, Fb, G, &z)) != CR_OK)
        return st;
    for (size_t d = 0; d < k; d++) {
        cr_tangent raw, dy;
        const double *xd, *Fd;
        double *Ld, *Ud;
        cr_value y;
        cr_array *S;
        if ((st = x_dot(&F, tan, k, d, &raw, &xd)) != CR_OK)
            return st;
        if (xd == NULL)
            continue;
        if ((st = frule_along(&F, &cr_fn_getrf, raw, &y, &dy)) != CR_OK ||
            (st = field_mat(&F, dy, 0, n, n, &Fd)) != CR_OK ||
            (st = lu_unpack(&F, Fd, n, false, &Ld, &Ud)) != CR_OK || (st = new_s(&F, &S)) != CR_OK)
            return st;
        lu_s_dir(&z, Ld, Ud, S->data);
        if ((st = put(&F, S, adjd, k, d)) != CR_OK)
            return st;
    }
    return CR_OK;
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
 * so is the rest (put).
 */
static cr_status form_getri(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                            double *adjd, const double *tan, size_t k)
{
    (void)i;
    form F;
    const double *Yb, *Y;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    if (st != CR_OK || F.x->ndim != 2 || F.x->shape[0] != F.x->shape[1])
        return st;
    if ((st = like_x(&F, ybar, &Yb)) != CR_OK || Yb == NULL || (st = y_array(&F, &Y)) != CR_OK)
        return st;
    size_t n = F.x->shape[0], nn = n * n;
    size_t *p;
    double *L, *U, *w, *Ld, *Ud;
    if ((st = perm_of(&F, &nd->vals[1], n, &p)) != CR_OK ||
        (st = lu_unpack(&F, F.x->data, n, true, &L, &U)) != CR_OK ||
        (st = new_mat(&F, 6, nn, &w)) != CR_OK)
        return st;
    double *Q = w, *Pm = Q + nn, *Ab = Pm + nn, *Ad = Ab + nn, *ws = Ad + nn; /* ws: 2 n² */
    mm(1.0, Y, n, n, 1, Yb, n, n, 0, 0.0, Q);                                 /* Yᵀ Ȳ */
    mm(1.0, Yb, n, n, 0, Y, n, n, 1, 0.0, Pm);                                /* Ȳ Yᵀ */
    mm(-1.0, Q, n, n, 0, Y, n, n, 1, 0.0, Ab); /* Ā = −Yᵀ Ȳ Yᵀ */
    for (size_t d = 0; d < k; d++) {
        cr_tangent raw, dw[MAX_ARGS + 1];
        const double *xd, *Sw;
        cr_array *S, *W;
        if ((st = x_dot(&F, tan, k, d, &raw, &xd)) != CR_OK)
            return st;
        if (xd == NULL)
            continue;
        if ((st = lu_unpack(&F, xd, n, false, &Ld, &Ud)) != CR_OK ||
            (st = new_s(&F, &S)) != CR_OK || (st = new_s(&F, &W)) != CR_OK)
            return st;
        lu_tan(n, p, L, U, Ld, Ud, ws, Ad);
        mm(-1.0, Ad, n, n, 1, Q, n, n, 0, 0.0, W->data); /* W = −(Ȧᵀ Q + P Ȧᵀ) */
        mm(-1.0, Pm, n, n, 0, Ad, n, n, 1, 1.0, W->data);
        if ((st = pull_at(&F, &nd->pb, cr_tangent_array(W), dw, 0, n, n, &Sw)) != CR_OK)
            return st;
        if (Sw != NULL)
            memcpy(S->data, Sw, nn * sizeof *Sw);
        lu_adj_add(n, p, Ld, Ud, Ab, ws, S->data); /* + T_Ḟ(Ā) */
        if ((st = put(&F, S, adjd, k, d)) != CR_OK)
            return st;
    }
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
 * rule's at B's dense matrix: pullback_dense, G unprojected). getrs is linear in B: with F a
 * constant, S = 0.
 */
static cr_status form_getrs(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                            double *adjd, const double *tan, size_t k)
{
    (void)i;
    if (nd->args[0] == CR_VAR_CONST)
        return CR_OK;
    form F;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    if (st != CR_OK || F.x->ndim != 2 || F.x->shape[0] != F.x->shape[1])
        return st;
    const cr_array *Bv = nd->vals[2].u.arr, *Gb;
    size_t n = F.x->shape[0], m = Bv->ndim == 1 ? 1 : Bv->shape[1], nn = n * n;
    char op = flag_of(&F, &nd->vals[3]);
    cr_tangent dx[MAX_ARGS + 1];
    cr_pullback pb;
    const double *X;
    if ((st = pullback_dense(&F, 2, &pb)) != CR_OK ||
        (st = cr_pullback_call(F.arena, &pb, &ybar, dx, (size_t)nd->nargs + 1)) != CR_OK ||
        (st = cr__tan_array(F.arena, F.who, dx[3], Bv->ndim, Bv->shape, CR_DT_F64, &Gb)) != CR_OK)
        return st;
    if (Gb == NULL)
        return CR_OK; /* X̄ = 0 */
    const double *G = Gb->data;
    size_t *p;
    double *L, *U, *w, *Ld, *Ud;
    if ((st = y_array(&F, &X)) != CR_OK || (st = perm_of(&F, &nd->vals[1], n, &p)) != CR_OK ||
        (st = lu_unpack(&F, F.x->data, n, true, &L, &U)) != CR_OK ||
        (st = new_mat(&F, 6, nn, &w)) != CR_OK)
        return st;
    double *Ab = w, *Ad = Ab + nn, *E = Ad + nn, *T = E + nn, *ws = T + nn; /* ws: 2 n² */
    mm(-1.0, G, n, m, 0, X, n, m, 1, 0.0, T); /* Ā = op⁻¹(−G Xᵀ) */
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            Ab[a * n + b] = op == 'N' ? T[a * n + b] : T[b * n + a];
    for (size_t d = 0; d < k; d++) {
        cr_tangent raw, SB = cr_tangent_zero(), dw[MAX_ARGS + 1];
        const double *xd, *yd, *Sw;
        cr_array *S, *W;
        if ((st = x_dot(&F, tan, k, d, &raw, &xd)) != CR_OK ||
            (st = y_dot_arr(&F, tan, k, d, &yd)) != CR_OK)
            return st;
        if (xd == NULL && yd == NULL)
            continue;
        if ((st = new_s(&F, &S)) != CR_OK)
            return st;
        double *s = S->data;
        if (xd != NULL) {
            if ((st = lu_unpack(&F, xd, n, false, &Ld, &Ud)) != CR_OK ||
                (st = cr__new(F.arena, CR_DT_F64, Bv->ndim, Bv->shape, false, &W)) != CR_OK)
                return st;
            lu_tan(n, p, L, U, Ld, Ud, ws, Ad);
            mm(-1.0, Ad, n, n, op == 'N', G, n, m, 0, 0.0, W->data); /* W = −Ṁᵀ G */
            if ((st = pull_at(&F, &pb, cr_tangent_array(W), dw, 0, n, n, &Sw)) != CR_OK)
                return st;
            if (Sw != NULL)
                memcpy(s, Sw, nn * sizeof *s);
            SB = dw[3];
            lu_adj_add(n, p, Ld, Ud, Ab, ws, s); /* + T_Ḟ(Ā) */
        }
        if (yd != NULL) {
            mm(-1.0, G, n, m, 0, yd, n, m, 1, 0.0, T); /* op⁻¹(−G Ẋᵀ) */
            for (size_t a = 0; a < n; a++)
                for (size_t b = 0; b < n; b++)
                    E[a * n + b] = op == 'N' ? T[a * n + b] : T[b * n + a];
            lu_adj_add(n, p, L, U, E, ws, s); /* + T_F(op⁻¹(−G Ẋᵀ)) */
        }
        if ((st = put(&F, S, adjd, k, d)) != CR_OK ||
            (st = put_arg(&F, 2, SB, adjd, k, d)) != CR_OK)
            return st;
    }
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
 * G(W) and Ā(W) from one call of the pullback at W (pullback_dense for a structured B). trtrs
 * is linear in B: with A a constant, S = 0.
 */
static cr_status form_trtrs(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                            double *adjd, const double *tan, size_t k)
{
    (void)i;
    if (nd->args[0] == CR_VAR_CONST)
        return CR_OK;
    form F;
    cr_status st = form_init(&F, t, nd, 0, NULL);
    if (st != CR_OK || F.x->ndim != 2 || F.x->shape[0] != F.x->shape[1])
        return st;
    const cr_array *Bv = nd->vals[4].u.arr, *Gb;
    size_t n = F.x->shape[0], m = Bv->ndim == 1 ? 1 : Bv->shape[1], nn = n * n;
    char uplo = flag_of(&F, &nd->vals[1]), op = flag_of(&F, &nd->vals[2]);
    bool unit = flag_of(&F, &nd->vals[3]) == 'U';
    cr_tangent dx[MAX_ARGS + 1];
    cr_pullback pb;
    const double *X;
    if ((st = pullback_dense(&F, 4, &pb)) != CR_OK ||
        (st = cr_pullback_call(F.arena, &pb, &ybar, dx, (size_t)nd->nargs + 1)) != CR_OK ||
        (st = cr__tan_array(F.arena, F.who, dx[5], Bv->ndim, Bv->shape, CR_DT_F64, &Gb)) != CR_OK)
        return st;
    if (Gb == NULL)
        return CR_OK; /* X̄ = 0 */
    const double *G = Gb->data;
    double *Td, *T;
    if ((st = y_array(&F, &X)) != CR_OK || (st = new_mat(&F, n, n, &Td)) != CR_OK ||
        (st = new_mat(&F, n, n, &T)) != CR_OK)
        return st;
    for (size_t d = 0; d < k; d++) {
        cr_tangent raw, SB = cr_tangent_zero(), dw[MAX_ARGS + 1];
        const double *xd, *yd, *Sw;
        cr_array *S, *W;
        if ((st = x_dot(&F, tan, k, d, &raw, &xd)) != CR_OK ||
            (st = y_dot_arr(&F, tan, k, d, &yd)) != CR_OK)
            return st;
        if (xd == NULL && yd == NULL)
            continue;
        if ((st = new_s(&F, &S)) != CR_OK)
            return st;
        double *s = S->data;
        if (xd != NULL) {
            if ((st = cr__new(F.arena, CR_DT_F64, Bv->ndim, Bv->shape, false, &W)) != CR_OK)
                return st;
            memcpy(Td, xd, nn * sizeof *Td);
            tri_keep(Td, n, uplo, unit);                             /* Ṫ */
            mm(-1.0, Td, n, n, op == 'N', G, n, m, 0, 0.0, W->data); /* W = −Ṁᵀ G */
            if ((st = pull_at(&F, &pb, cr_tangent_array(W), dw, 0, n, n, &Sw)) != CR_OK)
                return st;
            if (Sw != NULL)
                memcpy(s, Sw, nn * sizeof *s);
            SB = dw[5];
        }
        if (yd != NULL) {
            mm(-1.0, G, n, m, 0, yd, n, m, 1, 0.0, T); /* −G Ẋᵀ */
            if (op != 'N')
                for (size_t a = 0; a < n; a++) /* op⁻¹: transposed */
                    for (size_t b = a + 1; b < n; b++) {
                        double v = T[a * n + b];
                        T[a * n + b] = T[b * n + a];
                        T[b * n + a] = v;
                    }
            tri_keep(T, n, uplo, unit);
            for (size_t q = 0; q < nn; q++)
                s[q] += T[q];
        }
        if ((st = put(&F, S, adjd, k, d)) != CR_OK ||
            (st = put_arg(&F, 4, SB, adjd, k, d)) != CR_OK)
            return st;
    }
    return CR_OK;
}

/* trsyl's 2 x 2 diagonal blocks of the real Schur-form matrix M (n x n), found as the rule
 * finds them: from the top, a nonzero (a + 1, a) starts one unless row a ends one. */
static cr_status schur_blocks(const form *F, const double *M, size_t n, bool **blk)
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

/*
 * trsyl(transa, transb, isgn, A, B, C) = X, op(A) X + isgn X op(B) = C (A m x m, B n x n in
 * real Schur form; only their upper triangles and the subdiagonal entries of their 2 x 2
 * blocks are read). The pullback solves op(A)ᵀ Y + isgn Y op(B)ᵀ = X̄ and gives C̄ = Y,
 * Ā = op⁻¹(−Y Xᵀ), B̄ = op⁻¹(−isgn Xᵀ Y), restricted to what is read. With Λ = −Y it is
 * sylvester's (A X + X B + C = 0: Λ = C̄, Ā = Λ Xᵀ, B̄ = Xᵀ Λ) with ops and a sign: along
 * (Ȧ, Ḃ, Ċ) the adjoint equation differentiates to the same equation for Ẏ with X̄ replaced
 * by W = op(Ȧ)ᵀ Λ + isgn Λ op(Ḃ)ᵀ (Ȧ, Ḃ restricted to what is read), so the recorded pullback
 * at W gives S_C = Ẏ, Ā(W) and B̄(W), and
 *     S_A = Ā(W) + op⁻¹(Λ Ẋᵀ),   S_B = B̄(W) + op⁻¹(isgn Ẋᵀ Λ)   (restricted likewise),
 * Ẋ from the forward sweep (sylv_s). The blocks are the recorded ones (the rule holds them
 * fixed). X is linear in C: with A and B constant, S = 0.
 */
static cr_status form_trsyl(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                            double *adjd, const double *tan, size_t k)
{
    (void)i;
    if (nd->args[3] == CR_VAR_CONST && nd->args[4] == CR_VAR_CONST)
        return CR_OK;
    form F;
    const cr_array *Bd;
    cr_status st = form_init(&F, t, nd, 3, NULL);
    if (st == CR_OK)
        st = cr__dense(F.arena, nd->vals[4].u.arr, CR_DT_F64, &Bd);
    if (st != CR_OK || F.x->ndim != 2 || Bd->ndim != 2)
        return st;
    int64_t isgn = 1;
    sylv_g g = {3,    4,    5,    flag_of(&F, &nd->vals[0]), flag_of(&F, &nd->vals[1]), 1.0, -1.0,
                NULL, NULL, false};
    bool *ba, *bb;
    if ((st = cr__int_arg(F.arena, F.who, &nd->vals[2], &isgn)) != CR_OK ||
        (st = schur_blocks(&F, F.x->data, F.x->shape[0], &ba)) != CR_OK ||
        (st = schur_blocks(&F, Bd->data, Bd->shape[0], &bb)) != CR_OK)
        return st;
    g.sgn = (double)isgn;
    g.blkA = ba;
    g.blkB = bb;
    return sylv_s(&F, &g, ybar, adjd, tan, k);
}

/* The LAPACK-level functions: real matrices (a complex constant would make the result
 * complex; complex variables are refused by the tape). Any structure: the rules read a
 * structured matrix as its logical dense one and the forms project S as the rules project
 * their cotangents. */
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

/* ---- Refusals when recording ---------------------------------------------------------------- */

/* cholesky_solve(U, B): U dense or Upper (its upper triangle read; the rule's cotangent of
 * U lives there), B dense; the form covers those. */
static const char *factor_dense_or_upper(const cr_value *vals, size_t nargs)
{
    uint8_t s = vals[0].u.arr != NULL ? vals[0].u.arr->structure : CR_MAT_DENSE;
    if (s != CR_MAT_DENSE && s != CR_MAT_UPPER)
        return "U is Diagonal, Lower, Symmetric or Hermitian; the form covers a dense or Upper "
               "factor (as cholesky returns it)";
    if (nargs > 1 && vals[1].kind == CR_KIND_ARRAY && vals[1].u.arr != NULL &&
        vals[1].u.arr->structure != CR_MAT_DENSE)
        return "B has a structure; the form covers dense B only";
    return NULL;
}

/* sylvester, lyap, matfun_herm: real dense matrices only (the rules project the cotangent of a
 * structured matrix onto its structure, and a complex argument makes a complex result, which
 * these forms do not cover). */
static const char *real_dense(const cr_value *vals, size_t nargs)
{
    /* the arguments' names: sylvester(A, B, C), lyap(A, C), matfun_herm(f, A) */
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
        size_t nm = nargs == 3 ? a : vals[0].kind == CR_KIND_FUNC || a == 0 ? 0 : 2;
        if (v->u.arr->dtype == CR_DT_C128)
            return k_cplx[nm];
        if (v->u.arr->structure != CR_MAT_DENSE)
            return k_struct[nm];
    }
    return NULL;
}

/* ---- The table --------------------------------------------------------------------------------
 */

/* Each function's form; nvar: how many leading arguments may be variables (the others must be
 * constants: dims, p); check: a reason to refuse the arguments when recording, or NULL. */
static const struct {
    const cr_value *f;
    cr__so_form_fn form;
    size_t nvar;
    const char *(*check)(const cr_value *vals, size_t nargs);
} k_forms[] = {
    {&cr_fn_cholesky, form_cholesky, 1, NULL},
    {&cr_fn_cholesky_solve, form_cholesky_solve, 2, factor_dense_or_upper},
    {&cr_fn_cholesky_logdet, form_cholesky_logdet, 1, NULL},
    {&cr_fn_cholesky_det, form_cholesky_det, 1, NULL},
    {&cr_fn_lu, form_lu, 1, NULL},
    {&cr_fn_sylvester, form_sylvester, 3, real_dense},
    {&cr_fn_lyap, form_sylvester, 2, real_dense},
    {&cr_fn_potrf, form_potrf, 1, lapack_real},
    {&cr_fn_potrs, form_potrs, 3, lapack_real},
    {&cr_fn_getrf, form_getrf, 1, lapack_real},
    {&cr_fn_getri, form_getri, 1, lapack_real},
    {&cr_fn_getrs, form_getrs, 3, lapack_real},
    {&cr_fn_trtrs, form_trtrs, 5, lapack_real},
};

cr__so_form_fn cr__so_form_of(const cr_value *f, const cr_value *vals, const uint32_t *codes,
                              size_t nargs, const char **why)
{
    const cr_function *fn = f->u.func.fn;
    *why = NULL;
    if (fn == cr_fn_trsyl.u.func.fn) { /* trsyl(transa, transb, isgn, A, B, C) */
        for (size_t a = 0; a < 3 && a < nargs; a++)
            if (codes[a] != CR_VAR_CONST) {
                *why = "an argument before A is a variable";
                return NULL;
            }
        return (*why = lapack_real(vals, nargs)) != NULL ? NULL : form_trsyl;
    }
    for (size_t j = 0; j < sizeof k_forms / sizeof k_forms[0]; j++) {
        if (k_forms[j].f->u.func.fn != fn)
            continue;
        if (nargs < 1 || vals[0].kind != CR_KIND_ARRAY) {
            *why = "the first argument is not an array";
            return NULL;
        }
        for (size_t a = k_forms[j].nvar; a < nargs; a++)
            if (codes[a] != CR_VAR_CONST) {
                *why = "an argument after the array is a variable";
                return NULL;
            }
        if (k_forms[j].check != NULL && (*why = k_forms[j].check(vals, nargs)) != NULL)
            return NULL;
        return k_forms[j].form;
    }
    return NULL;
}
