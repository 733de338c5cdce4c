/*
 * The LAPACK-level rules in functional form (ChainRules' lapack.jl): getrf, getrs, getri,
 * potrf, potrs, trtrs and trsyl. Arguments are never mutated and results are new arrays, like
 * Julia's non-bang wrappers. Flags are i64 character codes as LAPACK spells them ('N', 'T',
 * 'C', 'U', 'L'); pivots are LAPACK's 1-based row interchanges. The functions work on
 * column-major copies through the LAPACKE `_work` routines (as solve.c); without LAPACKE
 * their values exist and report CR_EUNIMPL. Their arguments are read as blas_calls.c reads
 * gemv's.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

#if defined(CR_HAVE_LAPACKE)
#include <lapacke.h>

static cr_status singular(cr_arena *arena, const char *who)
{
    return CR__FAIL(arena, CR_EDOMAIN, "%s: the matrix is singular (a zero diagonal entry)", who);
}

/* Whether a diagonal entry of the square m is zero. */
static bool zero_diag(const cr__cmat *m)
{
    for (size_t i = 0; i < m->r; i++)
        if (cr__cmat_get(m, i, i) == 0)
            return true;
    return false;
}

/* The op of the adjoint: op(A)ᴴ = adj_op(op)(A), where 'J' is the conjugate (no transpose). */
static char adj_op(char op, bool cplx)
{
    if (!cplx)
        return op == 'N' ? 'T' : 'N';
    return op == 'N' ? 'C' : op == 'C' ? 'N' : 'J';
}

/* X := op(T)⁻¹ X for the triangle uplo of T (unit diagonal when diag is 'U'); op 'N', 'T',
 * 'C' or 'J' (conj(T), solved as conj(T⁻¹ conj(X))). */
static cr_status tri_solve(cr_arena *arena, const char *who, const cr__cmat *T, char uplo, char op,
                           char diag, cr__cmat *X)
{
    size_t n = T->r;
    if (n == 0 || X->c == 0)
        return CR_OK;
    bool conj_trick = op == 'J' && X->cplx;
    char t = op == 'J' ? 'N' : (op == 'C' && !X->cplx) ? 'T' : op;
    if (conj_trick)
        cr__cmat_conj(X);
    lapack_int info =
        X->cplx ? LAPACKE_ztrtrs_work(LAPACK_COL_MAJOR, uplo, t, diag, (lapack_int)n,
                                      (lapack_int)X->c, T->p, (lapack_int)n, X->p, (lapack_int)n)
                : LAPACKE_dtrtrs_work(LAPACK_COL_MAJOR, uplo, t, diag, (lapack_int)n,
                                      (lapack_int)X->c, T->p, (lapack_int)n, X->p, (lapack_int)n);
    if (conj_trick)
        cr__cmat_conj(X);
    if (info > 0)
        return singular(arena, who);
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

/* ---- Tuples ------------------------------------------------------------------------------ */

typedef struct tup2 {
    cr_array a, b;
} tup2;
static const cr_field k_tup2_fields[2] = {{NULL, offsetof(tup2, a), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(tup2, b), CR_KIND_ARRAY, NULL}};
static const cr_type k_tup2 = {"tuple(array,array)", sizeof(tup2), 2, k_tup2_fields};

/* ---- LU factors: A = P L U packed as LAPACK's getrf leaves them --------------------------- */

typedef struct lu_f {
    cr__cmat F;       /* L strictly below the diagonal (unit diagonal implied), U on and above */
    lapack_int *ipiv; /* 1-based row interchanges */
    size_t n;
} lu_f;

/* The rows of X permuted: fwd gives Pᵀ X (the interchanges in order), else P X. */
static void lu_perm(const lu_f *f, cr__cmat *X, bool fwd)
{
    size_t n = f->n;
    for (size_t t = 0; t < n; t++) {
        size_t i = fwd ? t : n - 1 - t, k = (size_t)f->ipiv[i] - 1;
        if (k == i)
            continue;
        for (size_t j = 0; j < X->c; j++) {
            cr_complex a = cr__cmat_get(X, i, j);
            cr__cmat_set(X, i, j, cr__cmat_get(X, k, j));
            cr__cmat_set(X, k, j, a);
        }
    }
}

/* The explicit unit lower L and upper U of the packed factors. */
static cr_status lu_split(cr_arena *arena, const lu_f *f, cr__cmat *L, cr__cmat *U)
{
    cr_status st = cr__cmat_copy(arena, &f->F, L);
    if (st == CR_OK)
        st = cr__cmat_copy(arena, &f->F, U);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(L, 'L', true);
    for (size_t i = 0; i < f->n; i++)
        cr__cmat_set(L, i, i, 1.0);
    cr__cmat_tri(U, 'U', false);
    return CR_OK;
}

/* X := op(A)⁻¹ X with A = P L U; op 'N', 'T', 'C' or 'J' (conj(A)). */
static cr_status lu_solve(cr_arena *arena, const char *who, const lu_f *f, char op, cr__cmat *X)
{
    size_t n = f->n;
    if (n == 0 || X->c == 0)
        return CR_OK;
    bool conj_trick = op == 'J' && X->cplx;
    char t = op == 'J' ? 'N' : (op == 'C' && !X->cplx) ? 'T' : op;
    if (conj_trick)
        cr__cmat_conj(X);
    lapack_int info =
        X->cplx ? LAPACKE_zgetrs_work(LAPACK_COL_MAJOR, t, (lapack_int)n, (lapack_int)X->c, f->F.p,
                                      (lapack_int)n, f->ipiv, X->p, (lapack_int)n)
                : LAPACKE_dgetrs_work(LAPACK_COL_MAJOR, t, (lapack_int)n, (lapack_int)X->c, f->F.p,
                                      (lapack_int)n, f->ipiv, X->p, (lapack_int)n);
    if (conj_trick)
        cr__cmat_conj(X);
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

/* The cotangent of the packed factors from that of A = P L U:
 * F̄ = strictly-lower(Pᵀ Ā Uᴴ) + upper(Lᴴ Pᵀ Ā). */
static cr_status lu_grad(cr_arena *arena, const lu_f *f, const cr__cmat *Abar, cr__cmat *Fbar)
{
    cr__cmat W, L, U, G;
    cr_status st = cr__cmat_copy(arena, Abar, &W);
    if (st == CR_OK)
        st = lu_split(arena, f, &L, &U);
    if (st != CR_OK)
        return st;
    lu_perm(f, &W, true);
    st = cr__cmat_mul(arena, 'N', 'C', 1.0, &W, &U, Fbar);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &L, &W, &G);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < f->n; j++)
        for (size_t i = 0; i <= j; i++)
            cr__cmat_set(Fbar, i, j, cr__cmat_get(&G, i, j));
    return CR_OK;
}

/* The tangent of A = P L U from that of the packed factors: Ȧ = P (L̇ U + L U̇). */
static cr_status lu_dA(cr_arena *arena, const lu_f *f, const cr__cmat *dF, cr__cmat *dA)
{
    cr__cmat L, U, dL, dU;
    cr_status st = lu_split(arena, f, &L, &U);
    if (st == CR_OK)
        st = cr__cmat_copy(arena, dF, &dL);
    if (st == CR_OK)
        st = cr__cmat_copy(arena, dF, &dU);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(&dL, 'L', true);
    cr__cmat_tri(&dU, 'U', false);
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &dL, &U, dA);
    if (st != CR_OK)
        return st;
    cr__cmat_gemm('N', 'N', 1.0, &L, &dU, 1.0, dA);
    lu_perm(f, dA, false);
    return CR_OK;
}

/* The arguments F (a square float matrix) and ipiv (n valid 1-based row indices). */
static cr_status lu_args(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                         bool cplx, lu_f *f, const cr_array **Farg)
{
    cr_status st = cr__matrix32_arg(arena, who, args, nargs, 0, true, Farg);
    int64_t *piv = NULL;
    size_t np = 0;
    if (st == CR_OK)
        st = cr__int_list(arena, who, &args[1], &piv, &np);
    if (st != CR_OK)
        return st;
    size_t n = (*Farg)->shape[0];
    if (np != n)
        return CR__FAIL(arena, CR_ESHAPE, "%s: ipiv has %zu entries, the matrix %zu row%s", who, np,
                        n, CR__S(n));
    f->n = n;
    f->ipiv = cr__arena_array(arena, who, n, sizeof *f->ipiv, _Alignof(lapack_int));
    if (f->ipiv == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < n; i++) {
        if (piv[i] < 1 || piv[i] > (int64_t)n)
            return CR__FAIL(arena, CR_EINVAL, "%s: ipiv[%zu] = %lld is not a row index in 1..%zu",
                            who, i, (long long)piv[i], n);
        f->ipiv[i] = (lapack_int)piv[i];
    }
    st = cr__cmat_from(arena, *Farg, cplx, &f->F);
    if (st == CR_OK && zero_diag(&f->F))
        st = singular(arena, who);
    return st;
}

/* ---- getrf -------------------------------------------------------------------------------- */

typedef struct getrf_env {
    lu_f f; /* F m x n, f.n = k = min(m, n) interchanges */
    bool singular;
    cr_project *pA;
} getrf_env;

static cr_status getrf_forward(cr_arena *arena, const cr_value *args, size_t nargs, getrf_env *e,
                               cr_value *y)
{
    const cr_array *A;
    cr_status st = cr__nargs_matrix32(arena, "getrf", args, nargs, 1, false, &A);
    bool cplx = st == CR_OK && A->dtype == CR_DT_C128;
    if (st == CR_OK)
        st = cr__cmat_from(arena, A, cplx, &e->f.F);
    if (st != CR_OK)
        return st;
    size_t m = A->shape[0], n = A->shape[1], k = m < n ? m : n;
    e->f.n = k;
    e->f.ipiv = cr__arena_array(arena, "getrf", k, sizeof *e->f.ipiv, _Alignof(lapack_int));
    int64_t *p64 = cr__arena_array(arena, "getrf", k, sizeof *p64, _Alignof(int64_t));
    tup2 *t = cr_arena_alloc(arena, sizeof *t, _Alignof(tup2));
    if ((k > 0 && (e->f.ipiv == NULL || p64 == NULL)) || t == NULL)
        return CR__ALLOC_STATUS(arena);
    lapack_int lm = (lapack_int)m, ln = (lapack_int)n;
    lapack_int info = k == 0 ? 0
                      : cplx
                          ? LAPACKE_zgetrf_work(LAPACK_COL_MAJOR, lm, ln, e->f.F.p, lm, e->f.ipiv)
                          : LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, lm, ln, e->f.F.p, lm, e->f.ipiv);
    if (info < 0)
        return cr__lapack_fail(arena, "getrf", info);
    e->singular = info > 0;
    for (size_t i = 0; i < k; i++)
        p64[i] = e->f.ipiv[i];
    cr_array *Fo, *Po;
    st = cr__cmat_out(arena, &e->f.F, false, (cr_dtype)A->dtype, &Fo);
    if (st == CR_OK)
        st = cr__i64_array(arena, k, p64, &Po);
    if (st != CR_OK)
        return st;
    t->a = *Fo;
    t->b = *Po;
    *y = cr_value_struct(&k_tup2, t);
    return CR_OK;
}

static cr_status lu_not_diff(cr_arena *arena)
{
    return CR__FAIL(arena, CR_EDOMAIN,
                    "getrf: the matrix is singular (a zero pivot): its LU factors are computed "
                    "but their derivative, which needs U⁻¹, is not");
}

/* The m x k unit lower L and k x n upper U packed in an m x n F (a part of F when used for
 * a cotangent or a tangent: unit is false, L strictly lower). */
static cr_status getrf_split(cr_arena *arena, const cr__cmat *F, size_t k, bool unit, cr__cmat *L,
                             cr__cmat *U)
{
    cr_status st = cr__cmat_block(arena, F, 0, F->r, 0, k, L);
    if (st == CR_OK)
        st = cr__cmat_block(arena, F, 0, k, 0, F->c, U);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(L, 'L', true);
    cr__cmat_tri(U, 'U', false);
    for (size_t i = 0; unit && i < k; i++)
        cr__cmat_set(L, i, i, 1.0);
    return CR_OK;
}

/* With L̄ = strictly-lower(F̄), Ū = upper(F̄) (ChainRules' lu rule):
 * Ā = P L⁻ᴴ (strictly-lower(Lᴴ L̄) + upper(Ū Uᴴ)) U⁻ᴴ, for rectangular A through
 * cr__lu_pullback. */
static cr_status getrf_pullback(CR__PULLBACK_PARAMS)
{
    getrf_env *e = env;
    const char *who = "getrf_pullback";
    size_t shape[2] = {e->f.F.r, e->f.F.c}, k = e->f.n;
    dx[0] = cr_tangent_none();
    cr_tangent tF;
    cr__cmat Fb, L, U, Lb, Ub, G;
    cr_status st = cr__tuple_field(arena, who, *dy, 0, &tF);
    if (st == CR_OK)
        st = cr__cmat_tan(arena, who, tF, 2, shape, e->f.F.cplx, &Fb);
    if (st != CR_OK || Fb.p == NULL) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    st = getrf_split(arena, &e->f.F, k, true, &L, &U);
    if (st == CR_OK)
        st = getrf_split(arena, &Fb, k, false, &Lb, &Ub);
    if (st == CR_OK)
        st = cr__lu_pullback(arena, who, &L, &U, &Lb, &Ub, &G);
    if (st != CR_OK)
        return st;
    lu_perm(&e->f, &G, false);
    return cr__cmat_give(arena, e->pA, &G, false, &dx[1]);
}

/* getrf(A): the tuple (F, ipiv) of the LU factorization with partial pivoting A = P L U of
 * an m x n A, L and U packed in F, ipiv the min(m, n) 1-based interchanges (LAPACK's
 * getrf). */
static cr_status getrf_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, getrf_env, e);
    cr_status st = getrf_forward(arena, args, nargs, e, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    if (e->singular)
        return lu_not_diff(arena);
    return cr__rrule_tail1(arena, &args[0], udata, &e->pA, pb,
                           (cr_pullback){getrf_pullback, e, "getrf_pullback", nargs + 1});
}
CR__ARRAY_FN(getrf, "getrf", 1)

/* frule: with Pᵀ Ȧ, cr__lu_tangent (square: X = L⁻¹ Pᵀ Ȧ U⁻¹, L̇ = L strictly-lower(X),
 * U̇ = upper(X) U), Ḟ = L̇ + U̇ packed. */
static cr_status getrf_frule(CR__FRULE_PARAMS)
{
    getrf_env e;
    memset(&e, 0, sizeof e);
    cr_status st = getrf_forward(arena, args, nargs, &e, y);
    if (st != CR_OK)
        return st;
    if (e.singular)
        return lu_not_diff(arena);
    cr__cmat dA, L, U, dL, dU;
    st = cr__cmat_dx(arena, "getrf", dargs, args, 0, e.f.F.cplx, &dA);
    if (st != CR_OK || dA.p == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    lu_perm(&e.f, &dA, true);
    st = getrf_split(arena, &e.f.F, e.f.n, true, &L, &U);
    if (st == CR_OK)
        st = cr__lu_tangent(arena, "getrf", &L, &U, &dA, &dL, &dU);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < dA.c; j++) /* dA := Ḟ, L̇'s strictly lower part and U̇ */
        for (size_t i = 0; i < dA.r; i++)
            cr__cmat_set(&dA, i, j, i > j ? cr__cmat_get(&dL, i, j) : cr__cmat_get(&dU, i, j));
    cr_array *o;
    st = cr__cmat_out(arena, &dA, false, dA.cplx ? CR_DT_C128 : CR_DT_F64, &o);
    if (st != CR_OK)
        return st;
    cr_tangent fl[2] = {cr_tangent_zero(), cr_tangent_none()};
    tup2 *t = y->u.obj.ptr;
    st = cr_project_tangent(arena, &(cr_value){.kind = CR_KIND_ARRAY, .u.arr = &t->a},
                            cr_tangent_array(o), &fl[0]);
    return st != CR_OK ? st : cr_tangent_struct(arena, &k_tup2, NULL, fl, 2, dy);
}

/* ---- The solves: getrs, potrs, trtrs ------------------------------------------------------
 *
 * Each solves M X = B for a matrix M given by factor-like argument ifac (op(P L U), Tᴴ T or
 * T Tᴴ, op(T)) and a right-hand side B (argument ib). Their rules share one skeleton: the
 * pullback B̄ = M⁻ᴴ X̄ and a thunk for the factor's cotangent from M̄ = -B̄ Xᴴ; the frule
 * Ẋ = M⁻¹ (Ḃ - Ṁ X). A rule gives its steps in a solve_ops; its env starts with a
 * solve_core. */

typedef struct solve_ops solve_ops;

typedef struct solve_core {
    const solve_ops *ops;
    cr__cmat X; /* the solution */
    bool vec;   /* B (and X) a vector */
    bool diff[5];
    cr_project **p;
} solve_core;

struct solve_ops {
    const char *name, *pb_name;
    size_t size, align; /* of the env */
    size_t ifac, ib;
    /* The arguments, X and *dt (the output's dtype); diff and vec set. */
    cr_status (*forward)(cr_arena *arena, const cr_value *args, size_t nargs, void *env,
                         cr_dtype *dt);
    /* R := M⁻¹ R (adj: M⁻ᴴ R). */
    cr_status (*solve)(cr_arena *arena, const char *who, const void *env, bool adj, cr__cmat *R);
    /* R := R - Ṁ X from the factor's tangent dF (which may be overwritten). */
    cr_status (*minus_dMX)(cr_arena *arena, const void *env, cr__cmat *dF, cr__cmat *R);
    /* The factor's cotangent from B̄: the function of a thunk of a cr__pb_thunk (the env, B̄ its
     * g), and its name. */
    cr_thunk_fn factor_bar;
    const char *factor_name;
};

static cr_status solve_pullback(CR__PULLBACK_PARAMS)
{
    solve_core *c = env;
    const solve_ops *ops = c->ops;
    size_t shape[2] = {c->X.r, c->X.c};
    cr__cmat G;
    cr_status st = cr__cmat_tan(arena, ops->pb_name, *dy, c->vec ? 1 : 2, shape, c->X.cplx, &G);
    cr__zero_cotangents(c->diff, dx, nx);
    if (st != CR_OK || G.p == NULL)
        return st;
    st = ops->solve(arena, ops->pb_name, env, true, &G);
    if (st == CR_OK && c->diff[ops->ib])
        st = cr__cmat_give(arena, c->p[ops->ib], &G, c->vec, &dx[ops->ib + 1]);
    if (st != CR_OK || !c->diff[ops->ifac])
        return st;
    return cr__pb_thunk_new(arena, ops->factor_bar, NULL, env, &G, 0, ops->factor_name,
                            &dx[ops->ifac + 1]);
}

/* The common part of a solve's forward pass once its arguments F (the factor) and B are read:
 * *dt, c's vec, diff (of the nargs arguments) and X = B (not yet solved). */
static cr_status solve_setup(cr_arena *arena, solve_core *c, const cr_value *args, size_t nargs,
                             const cr_array *F, const cr_array *B, cr_dtype *dt)
{
    *dt = cr__promote((cr_dtype)F->dtype, (cr_dtype)B->dtype);
    c->vec = B->ndim == 1;
    for (size_t i = 0; i < nargs; i++)
        c->diff[i] = cr__is_diff(&args[i]);
    return cr__cmat_from(arena, B, *dt == CR_DT_C128, &c->X);
}

/* The env with X solved and the output array o. */
static cr_status solve_run(cr_arena *arena, const solve_ops *ops, const cr_value *args,
                           size_t nargs, solve_core **env, cr_array **o)
{
    solve_core *c = cr_arena_calloc(arena, 1, ops->size, ops->align);
    if (c == NULL)
        return CR__ALLOC_STATUS(arena);
    c->ops = ops;
    *env = c;
    cr_dtype dt = CR_DT_F64;
    cr_status st = ops->forward(arena, args, nargs, c, &dt);
    return st != CR_OK ? st : cr__cmat_out(arena, &c->X, c->vec, dt, o);
}

static cr_status solve_rrule(cr_arena *arena, const solve_ops *ops, const cr_value *args,
                             size_t nargs, cr_value *y, cr_pullback *pb, const void *udata)
{
    solve_core *c = NULL;
    cr_array *o;
    cr_status st = solve_run(arena, ops, args, nargs, &c, &o);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail(arena, args, nargs, udata, &c->p, o, y, pb,
                          (cr_pullback){solve_pullback, c, ops->pb_name, nargs + 1});
}

static cr_status solve_frule(cr_arena *arena, const solve_ops *ops, const cr_tangent *dargs,
                             const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    solve_core *c = NULL;
    cr_array *o;
    cr_status st = solve_run(arena, ops, args, nargs, &c, &o);
    if (st != CR_OK)
        return st;
    bool cplx = c->X.cplx, none = false;
    cr__cmat dF, dB, R;
    st = cr__frule_pair_cmat(arena, ops->name, dargs, args, ops->ifac, ops->ib, cplx, o, y, &dF,
                             &dB, dy, &none);
    if (st != CR_OK || none)
        return st;
    st = dB.p != NULL ? cr__cmat_copy(arena, &dB, &R)
                      : cr__cmat_new(arena, cplx, c->X.r, c->X.c, true, &R);
    if (st == CR_OK && dF.p != NULL)
        st = ops->minus_dMX(arena, c, &dF, &R);
    if (st == CR_OK)
        st = ops->solve(arena, ops->name, c, false, &R);
    cr_array *r;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &R, c->vec, cplx ? CR_DT_C128 : CR_DT_F64, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

/* The frule and rrule of NAME from its solve_ops NAME##_ops. */
#define SOLVE_RULES(NAME, ARITY) CR__PARAM_RULES(NAME, solve_rrule, solve_frule, &NAME##_ops, ARITY)

/* ---- getrs -------------------------------------------------------------------------------- */

typedef struct getrs_env {
    solve_core c;
    lu_f f;
    char op;
} getrs_env;

static cr_status getrs_forward(cr_arena *arena, const cr_value *args, size_t nargs, void *env,
                               cr_dtype *dt)
{
    getrs_env *e = env;
    const char *who = "getrs";
    const cr_array *F, *B;
    cr_status st = cr__nargs_matrix32(arena, who, args, nargs, 4, true, &F);
    if (st == CR_OK)
        st = cr__rhs_arg(arena, who, args, nargs, 2, F->shape[0], &B);
    if (st == CR_OK)
        st = cr__flag_arg(arena, who, args, 3, "NTC", &e->op);
    if (st != CR_OK)
        return st;
    st = solve_setup(arena, &e->c, args, nargs, F, B, dt);
    if (st == CR_OK)
        st = lu_args(arena, who, args, nargs, *dt == CR_DT_C128, &e->f, &F);
    return st != CR_OK ? st : lu_solve(arena, who, &e->f, e->op, &e->c.X);
}

static cr_status getrs_solve(cr_arena *arena, const char *who, const void *env, bool adj,
                             cr__cmat *R)
{
    const getrs_env *e = env;
    return lu_solve(arena, who, &e->f, adj ? adj_op(e->op, R->cplx) : e->op, R);
}

/* M = op(A): M̄ = -B̄ Xᴴ, Ā = op⁻¹(M̄), F̄ from Ā (lu_grad), projected. */
static cr_status getrs_factor_bar(cr_arena *arena, cr_tangent *out, void *env)
{
    const cr__pb_thunk *t = env;
    const getrs_env *e = t->e;
    cr__cmat Mb, Ab, Fb;
    cr_status st = cr__cmat_mul(arena, 'N', 'C', -1.0, &t->g, &e->c.X, &Mb);
    if (st == CR_OK)
        st = cr__cmat_op(arena, e->op == 'N' ? 'N' : e->op == 'T' ? 'T' : 'C', &Mb, &Ab);
    if (st == CR_OK)
        st = lu_grad(arena, &e->f, &Ab, &Fb);
    return st != CR_OK ? st : cr__cmat_give(arena, e->c.p[0], &Fb, false, out);
}

/* R -= op(Ȧ) X, Ȧ = P (L̇ U + L U̇) from Ḟ. */
static cr_status getrs_minus_dMX(cr_arena *arena, const void *env, cr__cmat *dF, cr__cmat *R)
{
    const getrs_env *e = env;
    cr__cmat dA;
    cr_status st = lu_dA(arena, &e->f, dF, &dA);
    if (st == CR_OK)
        cr__cmat_gemm(e->op, 'N', -1.0, &dA, &e->c.X, 1.0, R);
    return st;
}

/* getrs(F, ipiv, B, trans): op(A)⁻¹ B with A = P L U given by getrf's (F, ipiv); trans
 * 'N', 'T' or 'C' (LAPACK's getrs). Pullback: B̄ = M⁻ᴴ X̄, M̄ = -B̄ Xᴴ, Ā = op⁻¹(M̄), F̄ from
 * Ā; frule: Ẋ = op(A)⁻¹ (Ḃ - op(Ȧ) X). */
static const solve_ops getrs_ops = {
    "getrs",     "getrs_pullback", sizeof(getrs_env), _Alignof(getrs_env), 0, 2, getrs_forward,
    getrs_solve, getrs_minus_dMX,  getrs_factor_bar,  "getrs_pullback_F"};
SOLVE_RULES(getrs, 4)

/* ---- getri -------------------------------------------------------------------------------- */

typedef struct getri_env {
    lu_f f;
    cr__cmat Y;
    cr_project *pF;
} getri_env;

static cr_status getri_forward(cr_arena *arena, const cr_value *args, size_t nargs, getri_env *e,
                               cr_array **o)
{
    const cr_array *F;
    cr_status st = cr__nargs_matrix32(arena, "getri", args, nargs, 2, true, &F);
    if (st == CR_OK)
        st = lu_args(arena, "getri", args, nargs, F->dtype == CR_DT_C128, &e->f, &F);
    if (st == CR_OK)
        st = cr__cmat_new(arena, e->f.F.cplx, e->f.n, e->f.n, true, &e->Y);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < e->f.n; i++)
        cr__cmat_set(&e->Y, i, i, 1.0);
    st = lu_solve(arena, "getri", &e->f, 'N', &e->Y);
    return st != CR_OK ? st : cr__cmat_out(arena, &e->Y, false, (cr_dtype)F->dtype, o);
}

/* Ā = -Yᴴ Ȳ Yᴴ (inv's rule), then F̄ from Ā. */
static cr_status getri_pullback(CR__PULLBACK_PARAMS)
{
    getri_env *e = env;
    size_t shape[2] = {e->f.n, e->f.n};
    dx[0] = cr_tangent_none();
    dx[2] = cr_tangent_none();
    cr__cmat G, T, Ab, Fb;
    cr_status st = cr__cmat_tan(arena, "getri_pullback", *dy, 2, shape, e->Y.cplx, &G);
    if (st != CR_OK || G.p == NULL) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->Y, &G, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', -1.0, &T, &e->Y, &Ab);
    if (st == CR_OK)
        st = lu_grad(arena, &e->f, &Ab, &Fb);
    return st != CR_OK ? st : cr__cmat_give(arena, e->pF, &Fb, false, &dx[1]);
}

/* getri(F, ipiv): A⁻¹ for A = P L U given by getrf's (F, ipiv). */
static cr_status getri_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, getri_env, e);
    cr_array *o;
    cr_status st = getri_forward(arena, args, nargs, e, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    return cr__rrule_tail1(arena, &args[0], udata, &e->pF, pb,
                           (cr_pullback){getri_pullback, e, "getri_pullback", nargs + 1});
}
CR__ARRAY_FN(getri, "getri", 2)

/* frule: Ẏ = -Y Ȧ Y. */
static cr_status getri_frule(CR__FRULE_PARAMS)
{
    getri_env e;
    memset(&e, 0, sizeof e);
    cr_array *o;
    cr_status st = getri_forward(arena, args, nargs, &e, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    cr__cmat dF, dA, T, R;
    st = cr__cmat_dx(arena, "getri", dargs, args, 0, e.Y.cplx, &dF);
    if (st != CR_OK || dF.p == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    st = lu_dA(arena, &e.f, &dF, &dA);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e.Y, &dA, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', -1.0, &T, &e.Y, &R);
    cr_array *r;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &R, false, R.cplx ? CR_DT_C128 : CR_DT_F64, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

/* ---- potrf -------------------------------------------------------------------------------- */

/* The Hermitian matrix whose triangle uplo is that of m (the diagonal's real part), in
 * place: what potrf reads. */
static void herm_from(cr__cmat *m, char uplo)
{
    size_t n = m->r;
    for (size_t j = 0; j < n; j++) {
        cr__cmat_set(m, j, j, creal(cr__cmat_get(m, j, j)));
        for (size_t i = j + 1; i < n; i++) {
            if (uplo == 'U')
                cr__cmat_set(m, i, j, conj(cr__cmat_get(m, j, i)));
            else
                cr__cmat_set(m, j, i, conj(cr__cmat_get(m, i, j)));
        }
    }
}

/* The gradient S with respect to herm_from(A, uplo) folded onto the triangle it was read
 * from: S_ij + conj(S_ji) off the diagonal, re S_ii on it, 0 in the other triangle. */
static void herm_fold(cr__cmat *S, char uplo)
{
    size_t n = S->r;
    for (size_t j = 0; j < n; j++) {
        cr__cmat_set(S, j, j, creal(cr__cmat_get(S, j, j)));
        for (size_t i = j + 1; i < n; i++) {
            cr_complex lo = cr__cmat_get(S, i, j), up = cr__cmat_get(S, j, i);
            cr__cmat_set(S, i, j, uplo == 'L' ? lo + conj(up) : 0.0);
            cr__cmat_set(S, j, i, uplo == 'U' ? up + conj(lo) : 0.0);
        }
    }
}

typedef struct potrf_env {
    cr__cmat U; /* the upper factor: H = Uᴴ U */
    char uplo;
    cr_project *pA;
} potrf_env;

static cr_status potrf_forward(cr_arena *arena, const cr_value *args, size_t nargs, potrf_env *e,
                               cr_value *y)
{
    const cr_array *A;
    cr_status st = cr__nargs_matrix32(arena, "potrf", args, nargs, 2, true, &A);
    if (st == CR_OK)
        st = cr__flag_arg(arena, "potrf", args, 1, "UL", &e->uplo);
    if (st == CR_OK)
        st = cr__cmat_from(arena, A, A->dtype == CR_DT_C128, &e->U);
    if (st != CR_OK)
        return st;
    herm_from(&e->U, e->uplo);
    size_t n = e->U.r;
    lapack_int info =
        n == 0 ? 0
        : e->U.cplx
            ? LAPACKE_zpotrf_work(LAPACK_COL_MAJOR, 'U', (lapack_int)n, e->U.p, (lapack_int)n)
            : LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', (lapack_int)n, e->U.p, (lapack_int)n);
    if (info > 0)
        return CR__FAIL(arena, CR_EDOMAIN,
                        "potrf: the matrix is not positive definite (leading minor %d)", (int)info);
    if (info < 0)
        return cr__lapack_fail(arena, "potrf", info);
    cr__cmat_tri(&e->U, 'U', false);
    cr__cmat Fo;
    st = cr__cmat_op(arena, e->uplo == 'U' ? 'N' : 'C', &e->U, &Fo);
    cr_array *o;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &Fo, false, (cr_dtype)A->dtype, &o);
    if (st != CR_OK)
        return st;
    o->structure = e->uplo == 'U' ? CR_MAT_UPPER : CR_MAT_LOWER;
    *y = cr_value_array(o);
    return CR_OK;
}

/* With Ū = F̄ ('U') or F̄ᴴ ('L'), upper: Φ = the Hermitian matrix of the upper triangle of
 * Ū Uᴴ (diagonal real), S = U⁻¹ Φ U⁻ᴴ / 2 (Seeger et al.), folded onto the read triangle. */
static cr_status potrf_pullback(CR__PULLBACK_PARAMS)
{
    potrf_env *e = env;
    const char *who = "potrf_pullback";
    size_t n = e->U.r, shape[2] = {n, n};
    dx[0] = cr_tangent_none();
    dx[2] = cr_tangent_none();
    cr__cmat G, Ub, P, X;
    cr_status st = cr__cmat_tan(arena, who, *dy, 2, shape, e->U.cplx, &G);
    if (st != CR_OK || G.p == NULL) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    st = cr__cmat_op(arena, e->uplo == 'U' ? 'N' : 'C', &G, &Ub);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(&Ub, 'U', false);
    st = cr__cmat_mul(arena, 'N', 'C', 1.0, &Ub, &e->U, &P);
    if (st != CR_OK)
        return st;
    herm_from(&P, 'U');
    st = tri_solve(arena, who, &e->U, 'U', 'N', 'N', &P); /* U⁻¹ Φ */
    if (st == CR_OK)
        st = cr__cmat_op(arena, 'C', &P, &X); /* Φ U⁻ᴴ */
    if (st == CR_OK)
        st = tri_solve(arena, who, &e->U, 'U', 'N', 'N', &X); /* U⁻¹ Φ U⁻ᴴ */
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&X, i, j, 0.5 * cr__cmat_get(&X, i, j));
    herm_fold(&X, e->uplo);
    return cr__cmat_give(arena, e->pA, &X, false, &dx[1]);
}

/* potrf(A, uplo): the Cholesky factor of the Hermitian positive definite matrix whose
 * triangle uplo is A's: U with A = Uᴴ U ('U') or L with A = L Lᴴ ('L'), tagged Upper or
 * Lower, the other triangle zero. */
static cr_status potrf_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, potrf_env, e);
    cr_status st = potrf_forward(arena, args, nargs, e, y);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail1(arena, &args[0], udata, &e->pA, pb,
                           (cr_pullback){potrf_pullback, e, "potrf_pullback", nargs + 1});
}
CR__ARRAY_FN(potrf, "potrf", 2)

/* frule: Ḣ read from Ȧ's triangle, S = U⁻ᴴ Ḣ U⁻¹, U̇ = Φ(S) U with Φ keeping the upper
 * triangle and halving the diagonal; L̇ = U̇ᴴ. */
static cr_status potrf_frule(CR__FRULE_PARAMS)
{
    potrf_env e;
    memset(&e, 0, sizeof e);
    cr_status st = potrf_forward(arena, args, nargs, &e, y);
    if (st != CR_OK)
        return st;
    size_t n = e.U.r;
    cr__cmat dH, W, R, D;
    st = cr__cmat_dx(arena, "potrf", dargs, args, 0, e.U.cplx, &dH);
    if (st != CR_OK || dH.p == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    herm_from(&dH, e.uplo);
    st = tri_solve(arena, "potrf", &e.U, 'U', 'C', 'N', &dH); /* U⁻ᴴ Ḣ */
    if (st == CR_OK)
        st = cr__cmat_op(arena, 'C', &dH, &W);
    if (st == CR_OK)
        st = tri_solve(arena, "potrf", &e.U, 'U', 'C', 'N', &W); /* U⁻ᴴ Ḣ U⁻¹ */
    if (st != CR_OK)
        return st;
    cr__cmat_tri(&W, 'U', false);
    for (size_t i = 0; i < n; i++)
        cr__cmat_set(&W, i, i, 0.5 * creal(cr__cmat_get(&W, i, i)));
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &W, &e.U, &R);
    if (st == CR_OK)
        st = cr__cmat_op(arena, e.uplo == 'U' ? 'N' : 'C', &R, &D);
    cr_array *r;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &D, false, D.cplx ? CR_DT_C128 : CR_DT_F64, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

/* ---- potrs -------------------------------------------------------------------------------- */

typedef struct potrs_env {
    solve_core c;
    cr__cmat T; /* the factor's triangle (the other zero) */
    char uplo;
} potrs_env;

/* X := A⁻¹ X with A = Tᴴ T ('U') or T Tᴴ ('L'); A is Hermitian, its own adjoint. */
static cr_status potrs_solve(cr_arena *arena, const char *who, const void *env, bool adj,
                             cr__cmat *X)
{
    (void)adj;
    const potrs_env *e = env;
    size_t n = e->T.r;
    if (n == 0 || X->c == 0)
        return CR_OK;
    lapack_int info =
        X->cplx ? LAPACKE_zpotrs_work(LAPACK_COL_MAJOR, e->uplo, (lapack_int)n, (lapack_int)X->c,
                                      e->T.p, (lapack_int)n, X->p, (lapack_int)n)
                : LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, e->uplo, (lapack_int)n, (lapack_int)X->c,
                                      e->T.p, (lapack_int)n, X->p, (lapack_int)n);
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

static cr_status potrs_forward(cr_arena *arena, const cr_value *args, size_t nargs, void *env,
                               cr_dtype *dt)
{
    potrs_env *e = env;
    const char *who = "potrs";
    const cr_array *F, *B;
    cr_status st = cr__nargs_matrix32(arena, who, args, nargs, 3, true, &F);
    if (st == CR_OK)
        st = cr__flag_arg(arena, who, args, 1, "UL", &e->uplo);
    if (st == CR_OK)
        st = cr__rhs_arg(arena, who, args, nargs, 2, F->shape[0], &B);
    if (st != CR_OK)
        return st;
    st = solve_setup(arena, &e->c, args, nargs, F, B, dt);
    if (st == CR_OK)
        st = cr__cmat_from(arena, F, *dt == CR_DT_C128, &e->T);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(&e->T, e->uplo, false);
    return zero_diag(&e->T) ? singular(arena, who) : potrs_solve(arena, who, e, false, &e->c.X);
}

/* Ā = -B̄ Xᴴ; F̄ = upper(U (Ā + Āᴴ)) or lower((Ā + Āᴴ) L). */
static cr_status potrs_factor_bar(cr_arena *arena, cr_tangent *out, void *env)
{
    const cr__pb_thunk *t = env;
    const potrs_env *e = t->e;
    cr__cmat Ab, Fb;
    cr_status st = cr__cmat_mul(arena, 'N', 'C', -1.0, &t->g, &e->c.X, &Ab);
    if (st != CR_OK)
        return st;
    size_t n = Ab.r;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i <= j; i++) {
            cr_complex s = cr__cmat_get(&Ab, i, j) + conj(cr__cmat_get(&Ab, j, i));
            cr__cmat_set(&Ab, i, j, s);
            cr__cmat_set(&Ab, j, i, conj(s));
        }
    st = e->uplo == 'U' ? cr__cmat_mul(arena, 'N', 'N', 1.0, &e->T, &Ab, &Fb)
                        : cr__cmat_mul(arena, 'N', 'N', 1.0, &Ab, &e->T, &Fb);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(&Fb, e->uplo, false);
    return cr__cmat_give(arena, e->c.p[0], &Fb, false, out);
}

/* R -= Ȧ X with Ȧ = U̇ᴴ U + Uᴴ U̇ (or L̇ Lᴴ + L L̇ᴴ). */
static cr_status potrs_minus_dMX(cr_arena *arena, const void *env, cr__cmat *dT, cr__cmat *R)
{
    const potrs_env *e = env;
    cr__cmat dA;
    cr_status st;
    cr__cmat_tri(dT, e->uplo, false);
    if (e->uplo == 'U') {
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, dT, &e->T, &dA);
        if (st == CR_OK)
            cr__cmat_gemm('C', 'N', 1.0, &e->T, dT, 1.0, &dA);
    } else {
        st = cr__cmat_mul(arena, 'N', 'C', 1.0, dT, &e->T, &dA);
        if (st == CR_OK)
            cr__cmat_gemm('N', 'C', 1.0, &e->T, dT, 1.0, &dA);
    }
    if (st == CR_OK)
        cr__cmat_gemm('N', 'N', -1.0, &dA, &e->c.X, 1.0, R);
    return st;
}

/* potrs(F, uplo, B): A⁻¹ B for A = Uᴴ U (uplo 'U', U the upper triangle of F) or L Lᴴ
 * ('L', the lower triangle), as potrf returns the factor (LAPACK's potrs). Pullback:
 * B̄ = A⁻¹ X̄ (A Hermitian), F̄ through A; frule: Ẋ = A⁻¹ (Ḃ - Ȧ X). */
static const solve_ops potrs_ops = {
    "potrs",     "potrs_pullback", sizeof(potrs_env), _Alignof(potrs_env), 0, 2, potrs_forward,
    potrs_solve, potrs_minus_dMX,  potrs_factor_bar,  "potrs_pullback_F"};
SOLVE_RULES(potrs, 3)

/* ---- trtrs -------------------------------------------------------------------------------- */

typedef struct trtrs_env {
    solve_core c;
    cr__cmat T; /* the triangle (unit diagonal stored as 1 when diag is 'U') */
    char uplo, op, diag;
} trtrs_env;

static cr_status trtrs_forward(cr_arena *arena, const cr_value *args, size_t nargs, void *env,
                               cr_dtype *dt)
{
    trtrs_env *e = env;
    const char *who = "trtrs";
    const cr_array *A, *B;
    cr_status st = cr__nargs_matrix32(arena, who, args, nargs, 5, true, &A);
    if (st == CR_OK)
        st = cr__flag_arg(arena, who, args, 1, "UL", &e->uplo);
    if (st == CR_OK)
        st = cr__flag_arg(arena, who, args, 2, "NTC", &e->op);
    if (st == CR_OK)
        st = cr__flag_arg(arena, who, args, 3, "NU", &e->diag);
    if (st == CR_OK)
        st = cr__rhs_arg(arena, who, args, nargs, 4, A->shape[0], &B);
    if (st != CR_OK)
        return st;
    st = solve_setup(arena, &e->c, args, nargs, A, B, dt);
    if (st == CR_OK)
        st = cr__cmat_from(arena, A, *dt == CR_DT_C128, &e->T);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(&e->T, e->uplo, false);
    for (size_t i = 0; i < e->T.r && e->diag == 'U'; i++)
        cr__cmat_set(&e->T, i, i, 1.0);
    return tri_solve(arena, who, &e->T, e->uplo, e->op, e->diag, &e->c.X);
}

static cr_status trtrs_solve(cr_arena *arena, const char *who, const void *env, bool adj,
                             cr__cmat *R)
{
    const trtrs_env *e = env;
    return tri_solve(arena, who, &e->T, e->uplo, adj ? adj_op(e->op, R->cplx) : e->op, e->diag, R);
}

/* M̄ = -B̄ Xᴴ for M = op(T); Ā = the triangle of op⁻¹(M̄) (strict for a unit diagonal). */
static cr_status trtrs_factor_bar(cr_arena *arena, cr_tangent *out, void *env)
{
    const cr__pb_thunk *t = env;
    const trtrs_env *e = t->e;
    cr__cmat Mb, Ab;
    cr_status st = cr__cmat_mul(arena, 'N', 'C', -1.0, &t->g, &e->c.X, &Mb);
    if (st == CR_OK)
        st = cr__cmat_op(arena, e->op, &Mb, &Ab);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(&Ab, e->uplo, e->diag == 'U');
    return cr__cmat_give(arena, e->c.p[0], &Ab, false, out);
}

/* R -= op(Ṫ) X, Ṫ the triangle of Ȧ. */
static cr_status trtrs_minus_dMX(cr_arena *arena, const void *env, cr__cmat *dT, cr__cmat *R)
{
    (void)arena;
    const trtrs_env *e = env;
    cr__cmat_tri(dT, e->uplo, e->diag == 'U');
    cr__cmat_gemm(e->op, 'N', -1.0, dT, &e->c.X, 1.0, R);
    return CR_OK;
}

/* trtrs(A, uplo, trans, diag, B): op(T)⁻¹ B for the triangle uplo of A (unit diagonal when
 * diag is 'U'), op by trans 'N', 'T' or 'C' (LAPACK's trtrs). Pullback: B̄ = op(T)⁻ᴴ X̄, Ā
 * from -B̄ Xᴴ (a thunk); frule: Ẋ = op(T)⁻¹ (Ḃ - op(Ṫ) X). */
static const solve_ops trtrs_ops = {
    "trtrs",     "trtrs_pullback", sizeof(trtrs_env), _Alignof(trtrs_env), 0, 4, trtrs_forward,
    trtrs_solve, trtrs_minus_dMX,  trtrs_factor_bar,  "trtrs_pullback_A"};
SOLVE_RULES(trtrs, 5)

/* ---- trsyl -------------------------------------------------------------------------------- */

/* Zero what trsyl does not read: below the diagonal except the 2 x 2 blocks' entries. */
static void schur_mask(cr__cmat *M, const bool *blk)
{
    for (size_t j = 0; j < M->c; j++)
        for (size_t i = j + 1; i < M->r; i++)
            if (!(i == j + 1 && blk[j]))
                cr__cmat_set(M, i, j, 0.0);
}

/* The part of a Schur-form matrix trsyl reads, in place: the upper triangle and, for a real
 * matrix, the subdiagonal entries of its 2 x 2 diagonal blocks. Blocks are found from the
 * top: a nonzero (i + 1, i) starts one unless row i already ends one; a subdiagonal entry
 * that is not part of a block is not read (so LAPACK always sees a valid Schur form).
 * blk[i] records whether (i + 1, i) is a block's entry. */
static cr_status schur_part(cr_arena *arena, cr__cmat *M, bool **blk)
{
    size_t n = M->r;
    *blk = cr_arena_calloc(arena, n ? n : 1, sizeof **blk, _Alignof(bool));
    if (*blk == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i + 1 < n && !M->cplx; i++)
        if (cr__cmat_get(M, i + 1, i) != 0) {
            (*blk)[i] = true;
            i++;
        }
    schur_mask(M, *blk);
    return CR_OK;
}

typedef struct trsyl_env {
    cr__cmat A, B, X;
    bool *blkA, *blkB;
    char ta, tb; /* LAPACK's: 'N' or 'T' (real), 'N' or 'C' (complex) */
    double sgn;
    bool diff[6];
    cr_project **p;
} trsyl_env;

/* X := the solution of op(A) X + sgn X op(B) = X; the scaling LAPACK applies to avoid
 * overflow, or a (nearly) singular equation, is a domain error. */
static cr_status trsyl_solve(cr_arena *arena, const char *who, const trsyl_env *e, char ta, char tb,
                             cr__cmat *X)
{
    size_t m = X->r, n = X->c;
    if (m == 0 || n == 0)
        return CR_OK;
    double scale = 1;
    lapack_int isgn = e->sgn > 0 ? 1 : -1;
    lapack_int info = X->cplx ? LAPACKE_ztrsyl_work(LAPACK_COL_MAJOR, ta, tb, isgn, (lapack_int)m,
                                                    (lapack_int)n, e->A.p, (lapack_int)m, e->B.p,
                                                    (lapack_int)n, X->p, (lapack_int)m, &scale)
                              : LAPACKE_dtrsyl_work(LAPACK_COL_MAJOR, ta, tb, isgn, (lapack_int)m,
                                                    (lapack_int)n, e->A.p, (lapack_int)m, e->B.p,
                                                    (lapack_int)n, X->p, (lapack_int)m, &scale);
    if (info != 0)
        return info < 0 ? cr__lapack_fail(arena, who, info)
                        : CR__FAIL(arena, CR_EDOMAIN,
                                   "%s: op(A) and -isgn op(B) have (nearly) common eigenvalues: "
                                   "the Sylvester equation is singular",
                                   who);
    if (scale != 1)
        return CR__FAIL(arena, CR_EDOMAIN,
                        "%s: LAPACK scaled the solution by %g to avoid overflow; this function "
                        "returns only unscaled solutions",
                        who, scale);
    return CR_OK;
}

static cr_status trsyl_forward(cr_arena *arena, const cr_value *args, size_t nargs, trsyl_env *e,
                               cr_dtype *dt)
{
    const char *who = "trsyl";
    const cr_array *A, *B, *C;
    int64_t isgn = 0;
    cr_status st = cr__nargs(arena, who, nargs, 6, 6);
    if (st == CR_OK)
        st = cr__flag_arg(arena, who, args, 0, "NTC", &e->ta);
    if (st == CR_OK)
        st = cr__flag_arg(arena, who, args, 1, "NTC", &e->tb);
    if (st == CR_OK)
        st = cr__int_arg(arena, who, &args[2], &isgn);
    if (st == CR_OK && isgn != 1 && isgn != -1)
        st = CR__FAIL(arena, CR_EINVAL, "trsyl: isgn must be 1 or -1 (got %lld)", (long long)isgn);
    if (st == CR_OK)
        st = cr__matrix32_arg(arena, who, args, nargs, 3, true, &A);
    if (st == CR_OK)
        st = cr__matrix32_arg(arena, who, args, nargs, 4, true, &B);
    if (st == CR_OK)
        st = cr__matrix32_arg(arena, who, args, nargs, 5, false, &C);
    if (st != CR_OK)
        return st;
    if (C->shape[0] != A->shape[0] || C->shape[1] != B->shape[0])
        return CR__FAIL(arena, CR_ESHAPE, "trsyl: C must be %zu x %zu (A's rows by B's)",
                        A->shape[0], B->shape[0]);
    *dt = cr__promote(cr__promote((cr_dtype)A->dtype, (cr_dtype)B->dtype), (cr_dtype)C->dtype);
    bool cplx = *dt == CR_DT_C128;
    if (cplx && (e->ta == 'T' || e->tb == 'T'))
        return CR__FAIL(arena, CR_EINVAL,
                        "trsyl: complex matrices take trans 'N' or 'C' (LAPACK's ztrsyl)");
    if (!cplx) {
        e->ta = e->ta == 'C' ? 'T' : e->ta;
        e->tb = e->tb == 'C' ? 'T' : e->tb;
    }
    e->sgn = (double)isgn;
    for (size_t i = 0; i < 6; i++)
        e->diff[i] = cr__is_diff(&args[i]);
    st = cr__cmat_from(arena, A, cplx, &e->A);
    if (st == CR_OK)
        st = cr__cmat_from(arena, B, cplx, &e->B);
    if (st == CR_OK)
        st = schur_part(arena, &e->A, &e->blkA);
    if (st == CR_OK)
        st = schur_part(arena, &e->B, &e->blkB);
    if (st == CR_OK)
        st = cr__cmat_from(arena, C, cplx, &e->X);
    return st != CR_OK ? st : trsyl_solve(arena, who, e, e->ta, e->tb, &e->X);
}

typedef struct trsyl_thunk {
    const trsyl_env *e;
    cr__cmat Y;
    bool b; /* B̄ (else Ā) */
} trsyl_thunk;

/* Ā = op⁻¹(-Y Xᴴ), B̄ = op⁻¹(-sgn Xᴴ Y), each restricted to what trsyl reads. */
static cr_status trsyl_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    trsyl_thunk *t = env;
    const trsyl_env *e = t->e;
    cr__cmat M, G;
    cr_status st = t->b ? cr__cmat_mul(arena, 'C', 'N', -e->sgn, &e->X, &t->Y, &M)
                        : cr__cmat_mul(arena, 'N', 'C', -1.0, &t->Y, &e->X, &M);
    char op = t->b ? e->tb : e->ta;
    if (st == CR_OK)
        st = cr__cmat_op(arena, op == 'N' ? 'N' : 'C', &M, &G);
    if (st != CR_OK)
        return st;
    schur_mask(&G, t->b ? e->blkB : e->blkA);
    return cr__cmat_give(arena, e->p[t->b ? 4 : 3], &G, false, out);
}

/* With Y solving the adjoint equation op(A)ᴴ Y + sgn Y op(B)ᴴ = X̄: C̄ = Y, Ā and B̄ from
 * Y (thunks). */
static cr_status trsyl_pullback(CR__PULLBACK_PARAMS)
{
    trsyl_env *e = env;
    const char *who = "trsyl_pullback";
    size_t shape[2] = {e->X.r, e->X.c};
    bool cplx = e->X.cplx;
    cr__cmat Y;
    cr_status st = cr__cmat_tan(arena, who, *dy, 2, shape, cplx, &Y);
    cr__zero_cotangents(e->diff, dx, nx);
    if (st != CR_OK || Y.p == NULL)
        return st;
    char fa = e->ta == 'N' ? (cplx ? 'C' : 'T') : 'N', fb = e->tb == 'N' ? (cplx ? 'C' : 'T') : 'N';
    st = trsyl_solve(arena, who, e, fa, fb, &Y);
    if (st == CR_OK && e->diff[5])
        st = cr__cmat_give(arena, e->p[5], &Y, false, &dx[6]);
    for (int b = 0; b < 2 && st == CR_OK; b++) {
        if (!e->diff[3 + b])
            continue;
        CR__ARENA_NEW(arena, trsyl_thunk, t);
        *t = (trsyl_thunk){e, Y, b == 1};
        st = cr__thunk(arena, trsyl_thunk_fn, NULL, t, b ? "trsyl_pullback_B" : "trsyl_pullback_A",
                       &dx[4 + b]);
    }
    return st;
}

/* trsyl(transa, transb, isgn, A, B, C): X with op(A) X + isgn X op(B) = C for A and B in
 * Schur form (upper quasi-triangular when real, upper triangular when complex), LAPACK's
 * trsyl with scale = 1. */
static cr_status trsyl_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, trsyl_env, e);
    cr_dtype dt = CR_DT_F64;
    cr_array *o;
    cr_status st = trsyl_forward(arena, args, nargs, e, &dt);
    if (st == CR_OK)
        st = cr__cmat_out(arena, &e->X, false, dt, &o);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail(arena, args, nargs, udata, &e->p, o, y, pb,
                          (cr_pullback){trsyl_pullback, e, "trsyl_pullback", nargs + 1});
}
CR__ARRAY_FN(trsyl, "trsyl", 6)

/* frule: op(A) Ẋ + sgn Ẋ op(B) = Ċ - op(Ȧ) X - sgn X op(Ḃ), Ȧ and Ḃ restricted to what
 * trsyl reads. */
static cr_status trsyl_frule(CR__FRULE_PARAMS)
{
    trsyl_env e;
    memset(&e, 0, sizeof e);
    cr_dtype dt = CR_DT_F64;
    cr_array *o;
    cr_status st = trsyl_forward(arena, args, nargs, &e, &dt);
    if (st == CR_OK)
        st = cr__cmat_out(arena, &e.X, false, dt, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    bool cplx = e.X.cplx;
    cr__cmat dA, dB, dC, R;
    st = cr__cmat_dx(arena, "trsyl", dargs, args, 3, cplx, &dA);
    if (st == CR_OK)
        st = cr__cmat_dx(arena, "trsyl", dargs, args, 4, cplx, &dB);
    if (st == CR_OK)
        st = cr__cmat_dx(arena, "trsyl", dargs, args, 5, cplx, &dC);
    if (st != CR_OK)
        return st;
    if (dA.p == NULL && dB.p == NULL && dC.p == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    st = dC.p != NULL ? cr__cmat_copy(arena, &dC, &R)
                      : cr__cmat_new(arena, cplx, e.X.r, e.X.c, true, &R);
    if (st != CR_OK)
        return st;
    if (dA.p != NULL) {
        schur_mask(&dA, e.blkA);
        cr__cmat_gemm(e.ta, 'N', -1.0, &dA, &e.X, 1.0, &R);
    }
    if (dB.p != NULL) {
        schur_mask(&dB, e.blkB);
        cr__cmat_gemm('N', e.tb, -e.sgn, &e.X, &dB, 1.0, &R);
    }
    st = trsyl_solve(arena, "trsyl", &e, e.ta, e.tb, &R);
    cr_array *r;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &R, false, cplx ? CR_DT_C128 : CR_DT_F64, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

#endif /* CR_HAVE_LAPACKE */

/* ---- Test registrations ------------------------------------------------------------------- */

#if defined(CR_HAVE_LAPACKE)

/* An n x n matrix of entries in [-1, 1) whose diagonal has magnitude in [lo, hi) and a
 * random sign (well conditioned). */
static cr_status rand_dominant(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t n, double lo,
                               double hi, cr_array **out)
{
    cr_status st = cr__rand_array(arena, rng, dt, 2, (size_t[2]){n, n}, -1, 1, out);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        double d = cr__rng_unif(rng, lo, hi) * (cr__rng_below(rng, 2) ? 1 : -1);
        cr__store(*out, (ptrdiff_t)(i * n + i), d);
    }
    return CR_OK;
}

/* A right-hand side with n rows: a vector or an n x 2 matrix, of A's type or another. */
static cr_status rand_rhs(cr_arena *arena, uint64_t *rng, cr_dtype adt, size_t n, cr_value *out)
{
    size_t shape[2] = {n, 2};
    cr_dtype dt = cr__rng_below(rng, 2) ? adt : cr__rng_dtype(rng);
    cr_array *B;
    cr_status st = cr__rand_array(arena, rng, dt, 1 + cr__rng_below(rng, 2), shape, -1, 1, &B);
    if (st == CR_OK)
        *out = cr_value_array(B);
    return st;
}

/* getrf: the leading n x c block of a diagonally dominant matrix (square half of the time,
 * else c in 1..4, so tall or wide) with its rows shuffled, so that partial pivoting
 * interchanges rows and its choices are clear (stable under perturbation). */
static cr_status sample_getrf(CR__SAMPLE_PARAMS)
{
    size_t n = 2 + cr__rng_below(rng, 3), c = cr__rng_below(rng, 2) ? n : 1 + cr__rng_below(rng, 4);
    size_t big = n > c ? n : c, shape[2] = {n, c};
    cr_array *A, *P;
    cr_status st = rand_dominant(arena, rng, cr__rng_dtype(rng), big, 3, 4, &A);
    if (st == CR_OK)
        st = cr__new(arena, (cr_dtype)A->dtype, 2, shape, false, &P);
    if (st != CR_OK)
        return st;
    size_t perm[4] = {0, 1, 2, 3};
    for (size_t i = n - 1; i > 0; i--) {
        size_t k = cr__rng_below(rng, i + 1), t = perm[i];
        perm[i] = perm[k];
        perm[k] = t;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < c; j++)
            cr__store(P, (ptrdiff_t)(i * c + j), cr__load(A, (ptrdiff_t)(perm[i] * big + j)));
    args[0] = cr_value_array(P);
    return CR_OK;
}

/* getrs / getri: packed factors with a well-conditioned U (unit L), valid pivots; getrs a
 * right-hand side and a trans flag. */
static cr_status sample_lu(CR__SAMPLE_PARAMS)
{
    size_t n = 2 + cr__rng_below(rng, 3);
    cr_array *F = NULL, *ip = NULL;
    int64_t piv[4];
    for (size_t i = 0; i < n; i++)
        piv[i] = (int64_t)(i + 1 + cr__rng_below(rng, n - i));
    cr_status st = rand_dominant(arena, rng, cr__rng_dtype(rng), n, 1.5, 2.5, &F);
    if (st == CR_OK)
        st = cr__i64_array(arena, n, piv, &ip);
    st = cr__sampled(st, args, 2, (cr_array *[]){F, ip});
    if (st == CR_OK && nargs == 4) {
        st = rand_rhs(arena, rng, (cr_dtype)F->dtype, n, &args[2]);
        args[3] = cr__rand_flag(rng, "NTC");
    }
    return st;
}

/* potrf: a Hermitian positive definite matrix (B Bᴴ + n I), junk in the triangle that is
 * not read, sometimes tagged Symmetric / Hermitian; uplo either. */
static cr_status sample_potrf(CR__SAMPLE_PARAMS)
{
    size_t n = 2 + cr__rng_below(rng, 3), shape[2] = {n, n};
    cr_dtype dt = cr__rng_dtype(rng);
    char uplo = cr__rng_below(rng, 2) ? 'U' : 'L';
    bool tagged = cr__rng_below(rng, 3) == 0;
    cr_array *B, *A;
    cr_status st = cr__rand_array(arena, rng, dt, 2, shape, -1, 1, &B);
    if (st == CR_OK)
        st = cr__new(arena, dt, 2, shape, false, &A);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            cr_complex acc = i == j ? (double)n : 0.0;
            for (size_t l = 0; l < n; l++)
                acc +=
                    cr__load(B, (ptrdiff_t)(i * n + l)) * conj(cr__load(B, (ptrdiff_t)(j * n + l)));
            bool unread = uplo == 'U' ? i > j : i < j;
            cr__store(A, (ptrdiff_t)(i * n + j), unread && !tagged ? 7.0 : acc);
        }
    if (tagged)
        A->structure = (uint8_t)(dt == CR_DT_C128 ? CR_MAT_HERMITIAN : CR_MAT_SYMMETRIC);
    args[0] = cr_value_array(A);
    args[1] = cr_value_i64(uplo);
    return CR_OK;
}

/* potrs (F, uplo, B) and trtrs (A, uplo, trans, diag, B): a well-conditioned triangle with
 * junk in the other one. */
static cr_status sample_tri(CR__SAMPLE_PARAMS)
{
    size_t n = 2 + cr__rng_below(rng, 3);
    cr_array *F;
    cr_status st = rand_dominant(arena, rng, cr__rng_dtype(rng), n, 1.5, 2.5, &F);
    if (st != CR_OK)
        return st;
    args[0] = cr_value_array(F);
    args[1] = cr__rand_flag(rng, "UL");
    if (nargs == 3)
        return rand_rhs(arena, rng, (cr_dtype)F->dtype, n, &args[2]);
    args[2] = cr__rand_flag(rng, "NTC");
    args[3] = cr__rand_flag(rng, "NU");
    return rand_rhs(arena, rng, (cr_dtype)F->dtype, n, &args[4]);
}

/* A Schur form of order n with eigenvalues of real part about c: upper triangular (tagged
 * Upper, so that only the triangle is perturbed), or for a real n of 2 or 4 dense with
 * 2 x 2 blocks (complex eigenvalues) and junk below the subdiagonal. */
static cr_status rand_schur(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t n, double c,
                            cr_array **out)
{
    bool blocks = dt != CR_DT_C128 && (n == 2 || n == 4) && cr__rng_below(rng, 2);
    size_t shape[2] = {n, n};
    cr_status st = cr__rand_array(arena, rng, dt, 2, shape, -1, 1, out);
    if (st != CR_OK)
        return st;
    cr_array *A = *out;
    for (size_t i = 0; i < n; i++)
        cr__store(A, (ptrdiff_t)(i * n + i), c + cr__rng_unif(rng, -0.5, 0.5));
    if (!blocks) {
        A->structure = CR_MAT_UPPER;
        return CR_OK;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        bool blk = i % 2 == 0;
        cr__store(A, (ptrdiff_t)((i + 1) * n + i), blk ? cr__rng_unif(rng, -1, -0.5) : 0.0);
        if (blk) {
            cr__store(A, (ptrdiff_t)(i * n + i + 1), cr__rng_unif(rng, 0.5, 1));
            cr__store(A, (ptrdiff_t)((i + 1) * n + i + 1), cr__load(A, (ptrdiff_t)(i * n + i)));
        }
    }
    return CR_OK;
}

/* trsyl: A and B Schur forms whose spectra keep op(A) X + isgn X op(B) well conditioned. */
static cr_status sample_trsyl(CR__SAMPLE_PARAMS)
{
    cr_dtype dt = cr__rng_dtype(rng);
    bool cplx = dt == CR_DT_C128;
    args[0] = cr__rand_flag(rng, cplx ? "NC" : "NTC");
    args[1] = cr__rand_flag(rng, cplx ? "NC" : "NTC");
    int64_t isgn = cr__rng_below(rng, 2) ? 1 : -1;
    args[2] = cr_value_i64(isgn);
    static const size_t sizes[4] = {1, 2, 3, 4};
    size_t m = sizes[cr__rng_below(rng, 4)], n = sizes[cr__rng_below(rng, 4)], shape[2] = {m, n};
    cr_array *A, *B, *C;
    cr_status st = rand_schur(arena, rng, dt, m, 2.0, &A);
    if (st == CR_OK)
        st = rand_schur(arena, rng, dt, n, 2.0 * (double)isgn, &B);
    if (st == CR_OK)
        st = cr__rand_array(arena, rng, cr__rng_below(rng, 3) ? dt : cr__rng_dtype(rng), 2, shape,
                            -1, 1, &C);
    if (st != CR_OK)
        return st;
    if (!cplx && C->dtype == CR_DT_C128) {
        /* The complex solver reads triangles only: no 2 x 2 blocks then; and it takes 'N'
         * or 'C' only ('C' is 'T' for the real A and B). */
        A->structure = CR_MAT_UPPER;
        B->structure = CR_MAT_UPPER;
        args[0] = cr__rand_flag(rng, "NC");
        args[1] = cr__rand_flag(rng, "NC");
    }
    return cr__sampled(CR_OK, args + 3, 3, (cr_array *[]){A, B, C});
}

static const cr_rule_test k_t_getrf = {.sample = sample_getrf};
static const cr_rule_test k_t_lu = {.sample = sample_lu};
static const cr_rule_test k_t_potrf = {.sample = sample_potrf};
static const cr_rule_test k_t_tri = {.sample = sample_tri};
static const cr_rule_test k_t_trsyl = {.sample = sample_trsyl};

#endif /* CR_HAVE_LAPACKE */

cr_status cr__linalg_register_level(cr_registry *reg)
{
    cr_status st = CR_OK;
#if defined(CR_HAVE_LAPACKE)
#define CR__LV_F           \
    {                      \
        CR__M_FARRAY, NULL \
    }
#define CR__LV_I       \
    {                  \
        CR_M_INT, NULL \
    }
#define CR__LV_P         \
    {                    \
        CR_M_A_INT, NULL \
    }
    static const cr_argspec s_getrf[1] = {CR__LV_F},
                            s_getrs[4] = {CR__LV_F, CR__LV_P, CR__LV_F, CR__LV_I},
                            s_getri[2] = {CR__LV_F, CR__LV_P}, s_potrf[2] = {CR__LV_F, CR__LV_I},
                            s_potrs[3] = {CR__LV_F, CR__LV_I, CR__LV_F},
                            s_trtrs[5] = {CR__LV_F, CR__LV_I, CR__LV_I, CR__LV_I, CR__LV_F},
                            s_trsyl[6] = {CR__LV_I, CR__LV_I, CR__LV_I,
                                          CR__LV_F, CR__LV_F, CR__LV_F};
#undef CR__LV_F
#undef CR__LV_I
#undef CR__LV_P
    static const cr__linalg_rule k[] = {
        {&getrf_function, s_getrf, 1, getrf_frule, getrf_rrule, &k_t_getrf, &cr__form_getrf},
        {&getrs_function, s_getrs, 4, getrs_frule, getrs_rrule, &k_t_lu, &cr__form_getrs},
        {&getri_function, s_getri, 2, getri_frule, getri_rrule, &k_t_lu, &cr__form_getri},
        {&potrf_function, s_potrf, 2, potrf_frule, potrf_rrule, &k_t_potrf, &cr__form_potrf},
        {&potrs_function, s_potrs, 3, potrs_frule, potrs_rrule, &k_t_tri, &cr__form_potrs},
        {&trtrs_function, s_trtrs, 5, trtrs_frule, trtrs_rrule, &k_t_tri, &cr__form_trtrs},
        {&trsyl_function, s_trsyl, 6, trsyl_frule, trsyl_rrule, &k_t_trsyl, &cr__form_trsyl},
    };
    st = cr__linalg_add_rules(reg, k, sizeof k / sizeof k[0]);
#else
    (void)reg;
#endif
    return st;
}

#if !defined(CR_HAVE_LAPACKE)

/* Without LAPACKE: the function values exist; calling them reports CR_EUNIMPL. */
CR__NO_LAPACK_FN(getrf, "getrf")
CR__NO_LAPACK_FN(getrs, "getrs")
CR__NO_LAPACK_FN(getri, "getri")
CR__NO_LAPACK_FN(potrf, "potrf")
CR__NO_LAPACK_FN(potrs, "potrs")
CR__NO_LAPACK_FN(trtrs, "trtrs")
CR__NO_LAPACK_FN(trsyl, "trsyl")

#endif /* !CR_HAVE_LAPACKE */
