/*
 * The BLAS and LAPACK routines Mooncake has rules for and the rest of the library lacked,
 * in functional form like gemm and gemv (rules_linalg.h): scal (α x), the triangular
 * products trmv and trmm, the triangular solves trsv and trsm, and lacpy (a triangle
 * copied into another matrix). Plain C loops on column-major work matrices: no BLAS or
 * LAPACK needed, so they exist in every build.
 */
#include "../array/family.h"
#include "linalg_impl.h"

/* ---- Arguments ------------------------------------------------------------------------- */

/* A flag argument (an i64 character code, lower case accepted) among `allowed`. */
static cr_status flag_arg(cr_arena *arena, const char *who, const char *what, const cr_value *v,
                          const char *allowed, char *out)
{
    int64_t c;
    cr_status st = cr__int_arg(arena, who, v, &c);
    if (st != CR_OK)
        return st;
    if (c >= 'a' && c <= 'z')
        c -= 'a' - 'A';
    for (const char *p = allowed; *p; p++)
        if (c == *p) {
            *out = *p;
            return CR_OK;
        }
    return CR__FAIL(arena, CR_EINVAL, "%s: %s must be one of '%s' (as an i64 character code)", who,
                    what, allowed);
}

/* ---- scal(α, x) ------------------------------------------------------------------------- */

typedef struct scal_env {
    cr_complex a;
    const cr_array *x; /* work dtype */
    cr_dtype wdt;
    cr_project *px, *pa;
    const cr_value *av;
    uint32_t nd; /* nondiff_mask of the arguments */
} scal_env;

static cr_status scal_forward(cr_arena *arena, const cr_value *args, size_t nargs, scal_env *e,
                              cr_value *y)
{
    const cr_array *x;
    cr_status st = cr__nargs(arena, "scal", nargs, 2, 2);
    if (st == CR_OK)
        st = cr__array_arg(arena, "scal", args, nargs, 1, &x);
    if (st == CR_OK && !cr_dtype_is_float((cr_dtype)x->dtype))
        st = CR__FAIL(arena, CR_EINVAL, "scal: x must be an f64, f32 or c128 array");
    if (st != CR_OK)
        return st;
    e->av = &args[0];
    e->a = cr__scalar_of(&args[0]);
    cr_dtype dt = cr__promote((cr_dtype)x->dtype, cr__value_dtype(&args[0]));
    e->wdt = cr__work(dt);
    if ((st = cr__dense(arena, x, e->wdt, &e->x)) != CR_OK)
        return st;
    cr_array *Y, *o;
    if ((st = cr__new_like(arena, e->wdt, e->x, false, &Y)) != CR_OK)
        return st;
    size_t n = cr_array_numel(Y);
    for (size_t i = 0; i < n; i++)
        cr__wset(Y, i, e->a * cr__wget(e->x, i));
    if ((st = cr__cast(arena, Y, dt, &o)) != CR_OK)
        return st;
    *y = cr_value_array(o);
    return CR_OK;
}

/* x̄ = conj(α) ȳ, ᾱ = Σ conj(x) ȳ. */
static cr_status scal_pullback_body(CR__PULLBACK_PARAMS)
{
    const scal_env *e = env;
    const cr_array *G;
    cr_status st = cr__tan_array(arena, "scal", *dy, e->x->ndim, e->x->shape, e->wdt, &G);
    if (st != CR_OK || G == NULL)
        return st;
    cr_array *Xb;
    if ((st = cr__new_like(arena, e->wdt, e->x, false, &Xb)) != CR_OK)
        return st;
    size_t n = cr_array_numel(Xb);
    cr_complex ab = 0;
    for (size_t i = 0; i < n; i++) {
        cr__wset(Xb, i, conj(e->a) * cr__wget(G, i));
        ab += conj(cr__wget(e->x, i)) * cr__wget(G, i);
    }
    if ((st = cr__give(arena, e->px, Xb, &dx[2])) != CR_OK)
        return st;
    if (!cr__is_diff(e->av))
        return CR_OK;
    return cr_project_tangent(arena, e->av, cr__scalar_tangent(cr__value_dtype(e->av), ab), &dx[1]);
}

CR__MASKED_PULLBACK(scal, scal_env)

static cr_status scal_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, scal_env, e);
    cr_status st = scal_forward(arena, args, nargs, e, y);
    e->nd = cr__nondiff_mask(args, nargs, cr__arg_perturbable);
    return cr__rrule_end(arena, st, udata, &args[1], &e->px, scal_pullback, e, "scal_pullback",
                         nargs + 1, pb);
}
CR__ARRAY_FN(scal, "scal", 2)

/* ẏ = α̇ x + α ẋ. */
static cr_status scal_frule(CR__FRULE_PARAMS)
{
    scal_env e = {0};
    cr_status st = scal_forward(arena, args, nargs, &e, y);
    const cr_array *dx = NULL;
    cr_complex da = 0;
    bool nza = false;
    if (st == CR_OK)
        st = cr__dx_array(arena, "scal", dargs, args, 1, e.wdt, &dx);
    if (st == CR_OK && cr__is_diff(&args[0]))
        st = cr__tan_scalar(arena, "scal", dargs[1], &da, &nza);
    if (st != CR_OK)
        return st;
    cr_array *T, *o;
    if ((st = cr__new_like(arena, e.wdt, e.x, true, &T)) != CR_OK)
        return st;
    size_t n = cr_array_numel(T);
    for (size_t i = 0; i < n; i++)
        cr__wset(T, i,
                 (nza ? da * cr__wget(e.x, i) : 0) + (dx != NULL ? e.a * cr__wget(dx, i) : 0));
    if ((st = cr__cast(arena, T, (cr_dtype)y->u.arr->dtype, &o)) != CR_OK)
        return st;
    *dy = cr_tangent_array(o);
    return CR_OK;
}

/* ---- trmv, trsv, trmm, trsm -------------------------------------------------------------- */

/* Which routine: a product or a solve, with or without side and α. */
typedef enum tri_kind { TK_TRMV, TK_TRSV, TK_TRMM, TK_TRSM } tri_kind;

static const char *const k_tri_name[4] = {"trmv", "trsv", "trmm", "trsm"};

typedef struct tri_env {
    tri_kind kind;
    const char *who;
    char side, uplo, trans, diag;
    bool solve, vec, cplx;
    size_t ia, ib;      /* argument positions of A and B */
    const cr_value *av; /* α, or NULL */
    cr_complex alpha;
    cr__cmat M;    /* op(T) */
    bool lower;    /* M is lower triangular */
    cr__cmat B, Z; /* Z = op(T) B, B op(T), or their solves (α not applied) */
    cr_project *pA, *pB;
    cr_dtype dt;
    uint32_t nd; /* nondiff_mask of the arguments */
} tri_env;

/* Solve M X = B in place (B overwritten) for a triangular M (lower or upper); CR_EDOMAIN for
 * a zero diagonal entry. */
static cr_status tri_solve(cr_arena *arena, const char *who, const cr__cmat *M, bool lower,
                           cr__cmat *B)
{
    size_t n = M->r;
    for (size_t i = 0; i < n; i++)
        if (cr__cmat_get(M, i, i) == 0)
            return CR__FAIL(arena, CR_EDOMAIN, "%s: the triangle has a zero on its diagonal (%zu)",
                            who, i);
    for (size_t c = 0; c < B->c; c++)
        for (size_t s = 0; s < n; s++) {
            size_t i = lower ? s : n - 1 - s;
            cr_complex v = cr__cmat_get(B, i, c);
            if (lower)
                for (size_t k = 0; k < i; k++)
                    v -= cr__cmat_get(M, i, k) * cr__cmat_get(B, k, c);
            else
                for (size_t k = i + 1; k < n; k++)
                    v -= cr__cmat_get(M, i, k) * cr__cmat_get(B, k, c);
            cr__cmat_set(B, i, c, v / cr__cmat_get(M, i, i));
        }
    return CR_OK;
}

/* X = M⁻¹ B (left) or B M⁻¹ (right) as a new matrix, for M lower or upper. */
static cr_status tri_div(cr_arena *arena, const char *who, const cr__cmat *M, bool lower, bool left,
                         const cr__cmat *B, cr__cmat *X)
{
    cr_status st;
    if (left) {
        if ((st = cr__cmat_copy_as(arena, B, B->cplx || M->cplx, X)) != CR_OK)
            return st;
        return tri_solve(arena, who, M, lower, X);
    }
    /* X M = B  <=>  Mᵀ Xᵀ = Bᵀ, Mᵀ of the other orientation */
    cr__cmat Mt, Bt0, Bt;
    if ((st = cr__cmat_op(arena, 'T', M, &Mt)) != CR_OK ||
        (st = cr__cmat_op(arena, 'T', B, &Bt0)) != CR_OK ||
        (st = cr__cmat_copy_as(arena, &Bt0, Bt0.cplx || M->cplx, &Bt)) != CR_OK)
        return st;
    if ((st = tri_solve(arena, who, &Mt, !lower, &Bt)) != CR_OK)
        return st;
    return cr__cmat_op(arena, 'T', &Bt, X);
}

/* Z = M B (left) or B M (right). */
static cr_status tri_mul(cr_arena *arena, const cr__cmat *M, bool left, const cr__cmat *B,
                         cr__cmat *Z)
{
    return left ? cr__cmat_mul(arena, 'N', 'N', 1, M, B, Z)
                : cr__cmat_mul(arena, 'N', 'N', 1, B, M, Z);
}

/* T: the triangle uplo of A (unit diagonal for diag 'U'; with strict_unit the diagonal is
 * zero instead, for tangents) as a new n x n matrix, then op(T). */
static cr_status tri_op(cr_arena *arena, const tri_env *e, const cr__cmat *A, bool tangent,
                        cr__cmat *M)
{
    cr__cmat T;
    cr_status st = cr__cmat_copy_as(arena, A, e->cplx, &T);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(&T, e->uplo, e->diag == 'U');
    if (e->diag == 'U' && !tangent)
        for (size_t i = 0; i < T.r; i++)
            cr__cmat_set(&T, i, i, 1);
    return cr__cmat_op(arena, e->trans, &T, M);
}

static cr_status tri_forward(cr_arena *arena, tri_kind kind, const cr_value *args, size_t nargs,
                             tri_env *e, cr_value *y)
{
    e->kind = kind;
    e->who = k_tri_name[kind];
    e->solve = kind == TK_TRSV || kind == TK_TRSM;
    bool level3 = kind == TK_TRMM || kind == TK_TRSM;
    size_t na = level3 ? 7 : 5, f0 = 0;
    cr_status st = cr__nargs(arena, e->who, nargs, na, na);
    e->side = 'L';
    if (st == CR_OK && level3)
        st = flag_arg(arena, e->who, "side", &args[f0++], "LR", &e->side);
    if (st == CR_OK)
        st = flag_arg(arena, e->who, "uplo", &args[f0++], "UL", &e->uplo);
    if (st == CR_OK)
        st = flag_arg(arena, e->who, "trans", &args[f0++], "NTC", &e->trans);
    if (st == CR_OK)
        st = flag_arg(arena, e->who, "diag", &args[f0++], "NU", &e->diag);
    if (st != CR_OK)
        return st;
    e->av = level3 ? &args[f0++] : NULL;
    e->alpha = level3 ? cr__scalar_of(e->av) : 1;
    e->ia = f0;
    e->ib = f0 + 1;
    const cr_array *A, *B;
    if ((st = cr__array_arg(arena, e->who, args, nargs, e->ia, &A)) != CR_OK ||
        (st = cr__array_arg(arena, e->who, args, nargs, e->ib, &B)) != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)A->dtype) || !cr_dtype_is_float((cr_dtype)B->dtype))
        return CR__FAIL(arena, CR_EINVAL, "%s: A and B must be f64, f32 or c128 arrays", e->who);
    if (A->ndim != 2 || A->shape[0] != A->shape[1])
        return CR__FAIL(arena, CR_ESHAPE, "%s: A must be a square matrix", e->who);
    if (level3 ? B->ndim != 2 : B->ndim != 1)
        return CR__FAIL(arena, CR_EINVAL, "%s: %s must be a %s", e->who, level3 ? "B" : "x",
                        level3 ? "matrix" : "vector");
    size_t n = A->shape[0], k = e->side == 'L' ? B->shape[0] : B->shape[B->ndim - 1];
    if (k != n)
        return CR__FAIL(arena, CR_ESHAPE, "%s: a %zu x %zu triangle for a %s of %zu %s", e->who, n,
                        n, level3 ? "B" : "x", k, e->side == 'L' ? "rows" : "columns");
    e->dt = cr__promote((cr_dtype)A->dtype, (cr_dtype)B->dtype);
    if (e->av != NULL)
        e->dt = cr__promote(e->dt, cr__value_dtype(e->av));
    e->cplx = e->dt == CR_DT_C128;
    e->vec = B->ndim == 1;
    cr__cmat Aw;
    if ((st = cr__cmat_from(arena, A, e->cplx, &Aw)) != CR_OK ||
        (st = cr__cmat_from(arena, B, e->cplx, &e->B)) != CR_OK ||
        (st = tri_op(arena, e, &Aw, false, &e->M)) != CR_OK)
        return st;
    /* op(T) is lower when T is lower and not transposed, or upper and transposed */
    e->lower = (e->uplo == 'L') == (e->trans == 'N');
    st = e->solve ? tri_div(arena, e->who, &e->M, e->lower, e->side == 'L', &e->B, &e->Z)
                  : tri_mul(arena, &e->M, e->side == 'L', &e->B, &e->Z);
    if (st != CR_OK)
        return st;
    cr__cmat Y;
    if ((st = cr__cmat_copy(arena, &e->Z, &Y)) != CR_OK)
        return st;
    for (size_t c = 0; c < Y.c; c++)
        for (size_t i = 0; i < Y.r; i++)
            cr__cmat_set(&Y, i, c, e->alpha * cr__cmat_get(&Y, i, c));
    cr_array *o;
    if ((st = cr__cmat_out(arena, &Y, e->vec, e->dt, &o)) != CR_OK)
        return st;
    *y = cr_value_array(o);
    return CR_OK;
}

/* Ā from M̄: T̄ = op⁻¹(M̄), its triangle (strict for a unit diagonal). */
static cr_status tri_abar(cr_arena *arena, const tri_env *e, const cr__cmat *Mb, cr__cmat *Ab)
{
    char inv = e->trans; /* 'N' -> 'N', 'T' -> 'T', 'C' -> 'C' */
    cr_status st = cr__cmat_op(arena, inv, Mb, Ab);
    if (st == CR_OK)
        cr__cmat_tri(Ab, e->uplo, e->diag == 'U');
    return st;
}

/* G = conj(α) Ȳ; ᾱ = Σ conj(Z) Ȳ; then B̄ and M̄ (see docs/rules-linalg.md). */
static cr_status tri_pullback_body(CR__PULLBACK_PARAMS)
{
    const tri_env *e = env;
    size_t shape[2] = {e->Z.r, e->Z.c};
    cr__cmat G;
    cr_status st = cr__cmat_tan(arena, e->who, *dy, e->vec ? 1 : 2, shape, e->cplx, &G);
    if (st != CR_OK || G.p == NULL)
        return st;
    cr_complex ab = 0;
    for (size_t c = 0; c < G.c; c++)
        for (size_t i = 0; i < G.r; i++) {
            cr_complex g = cr__cmat_get(&G, i, c);
            ab += conj(cr__cmat_get(&e->Z, i, c)) * g;
            cr__cmat_set(&G, i, c, conj(e->alpha) * g);
        }
    bool left = e->side == 'L';
    cr__cmat Mh, Bb, Mb;
    if ((st = cr__cmat_adj(arena, &e->M, &Mh)) != CR_OK)
        return st;
    if (e->solve) {
        /* W = M⁻ᴴ G (left) or G M⁻ᴴ (right); B̄ = W; M̄ = -W Zᴴ or -Zᴴ W */
        if ((st = tri_div(arena, e->who, &Mh, !e->lower, left, &G, &Bb)) != CR_OK)
            return st;
        st = left ? cr__cmat_mul(arena, 'N', 'C', -1, &Bb, &e->Z, &Mb)
                  : cr__cmat_mul(arena, 'C', 'N', -1, &e->Z, &Bb, &Mb);
    } else {
        /* B̄ = Mᴴ G or G Mᴴ; M̄ = G Bᴴ or Bᴴ G */
        st = left ? cr__cmat_mul(arena, 'N', 'N', 1, &Mh, &G, &Bb)
                  : cr__cmat_mul(arena, 'N', 'N', 1, &G, &Mh, &Bb);
        if (st == CR_OK)
            st = left ? cr__cmat_mul(arena, 'N', 'C', 1, &G, &e->B, &Mb)
                      : cr__cmat_mul(arena, 'C', 'N', 1, &e->B, &G, &Mb);
    }
    if (st != CR_OK)
        return st;
    cr__cmat Ab;
    if ((st = tri_abar(arena, e, &Mb, &Ab)) != CR_OK)
        return st;
    if ((st = cr__cmat_give(arena, e->pA, &Ab, false, &dx[e->ia + 1])) != CR_OK ||
        (st = cr__cmat_give(arena, e->pB, &Bb, e->vec, &dx[e->ib + 1])) != CR_OK)
        return st;
    if (e->av == NULL || !cr__is_diff(e->av))
        return CR_OK;
    return cr_project_tangent(arena, e->av, cr__scalar_tangent(cr__value_dtype(e->av), ab),
                              &dx[e->ia]);
}

CR__MASKED_PULLBACK(tri, tri_env)

static cr_status tri_rrule(cr_arena *arena, tri_kind kind, const cr_value *args, size_t nargs,
                           cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__ARENA_ZNEW(arena, tri_env, e);
    cr_status st = tri_forward(arena, kind, args, nargs, e, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    if ((st = cr_project_new(arena, &args[e->ia], &e->pA)) != CR_OK ||
        (st = cr_project_new(arena, &args[e->ib], &e->pB)) != CR_OK)
        return st;
    static const char *const names[4] = {"trmv_pullback", "trsv_pullback", "trmm_pullback",
                                         "trsm_pullback"};
    e->nd = cr__nondiff_mask(args, nargs, cr__arg_perturbable);
    *pb = (cr_pullback){tri_pullback, e, names[kind], nargs + 1};
    return CR_OK;
}

/* Ẏ = α̇ Z + α Ż, Ż = Ṁ B + M Ḃ (or B Ṁ + Ḃ M), or for solves M⁻¹ (Ḃ - Ṁ Z) (or
 * (Ḃ - Z Ṁ) M⁻¹). */
static cr_status tri_frule(cr_arena *arena, tri_kind kind, const cr_tangent *dargs,
                           const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    tri_env e;
    memset(&e, 0, sizeof e);
    cr_status st = tri_forward(arena, kind, args, nargs, &e, y);
    cr__cmat dA, dB;
    cr_complex da = 0;
    bool nza = false;
    if (st == CR_OK)
        st = cr__cmat_dx(arena, e.who, dargs, args, e.ia, e.cplx, &dA);
    if (st == CR_OK)
        st = cr__cmat_dx(arena, e.who, dargs, args, e.ib, e.cplx, &dB);
    if (st == CR_OK && e.av != NULL && cr__is_diff(e.av))
        st = cr__tan_scalar(arena, e.who, dargs[e.ia], &da, &nza);
    if (st != CR_OK)
        return st;
    bool left = e.side == 'L';
    cr__cmat R; /* Ḃ - Ṁ Z (solves) or Ṁ B + M Ḃ (products), before M⁻¹ */
    if ((st = cr__cmat_new(arena, e.cplx, e.Z.r, e.Z.c, true, &R)) != CR_OK)
        return st;
    if (dA.p != NULL) {
        cr__cmat dM;
        if ((st = tri_op(arena, &e, &dA, true, &dM)) != CR_OK)
            return st;
        const cr__cmat *other = e.solve ? &e.Z : &e.B;
        cr_complex s = e.solve ? -1 : 1;
        if (left)
            cr__cmat_gemm('N', 'N', s, &dM, other, 1, &R);
        else
            cr__cmat_gemm('N', 'N', s, other, &dM, 1, &R);
    }
    if (dB.p != NULL) {
        if (e.solve) {
            for (size_t c = 0; c < R.c; c++)
                for (size_t i = 0; i < R.r; i++)
                    cr__cmat_set(&R, i, c, cr__cmat_get(&R, i, c) + cr__cmat_get(&dB, i, c));
        } else if (left) {
            cr__cmat_gemm('N', 'N', 1, &e.M, &dB, 1, &R);
        } else {
            cr__cmat_gemm('N', 'N', 1, &dB, &e.M, 1, &R);
        }
    }
    cr__cmat dZ = R;
    if (e.solve && (st = tri_div(arena, e.who, &e.M, e.lower, left, &R, &dZ)) != CR_OK)
        return st;
    for (size_t c = 0; c < dZ.c; c++)
        for (size_t i = 0; i < dZ.r; i++)
            cr__cmat_set(&dZ, i, c,
                         e.alpha * cr__cmat_get(&dZ, i, c) +
                             (nza ? da * cr__cmat_get(&e.Z, i, c) : 0));
    cr_array *o;
    if ((st = cr__cmat_out(arena, &dZ, e.vec, e.dt, &o)) != CR_OK)
        return st;
    *dy = cr_tangent_array(o);
    return CR_OK;
}

CR__PARAM_RULES(trmv, tri_rrule, tri_frule, TK_TRMV, 5)
CR__PARAM_RULES(trsv, tri_rrule, tri_frule, TK_TRSV, 5)
CR__PARAM_RULES(trmm, tri_rrule, tri_frule, TK_TRMM, 7)
CR__PARAM_RULES(trsm, tri_rrule, tri_frule, TK_TRSM, 7)

/* ---- lacpy(B, A, uplo) ------------------------------------------------------------------- */

typedef struct lacpy_env {
    char uplo; /* 'U', 'L' or 'A' (all) */
    const cr_array *B;
    cr_dtype wdt;
    cr_project *pA, *pB;
    uint32_t nd; /* nondiff_mask of the arguments */
} lacpy_env;

/* Whether LAPACK's lacpy copies (i, j) for uplo. */
static inline bool lacpy_in(char uplo, size_t i, size_t j)
{
    return uplo == 'U' ? i <= j : uplo == 'L' ? i >= j : true;
}

static cr_status lacpy_forward(cr_arena *arena, const cr_value *args, size_t nargs, lacpy_env *e,
                               cr_value *y)
{
    const cr_array *A, *B;
    cr_status st = cr__nargs(arena, "lacpy", nargs, 3, 3);
    if (st == CR_OK)
        st = cr__array_arg(arena, "lacpy", args, nargs, 0, &B);
    if (st == CR_OK)
        st = cr__array_arg(arena, "lacpy", args, nargs, 1, &A);
    int64_t u = 0;
    if (st == CR_OK)
        st = cr__int_arg(arena, "lacpy", &args[2], &u);
    if (st != CR_OK)
        return st;
    if (u >= 'a' && u <= 'z')
        u -= 'a' - 'A';
    /* LAPACK: any other character copies the whole matrix */
    e->uplo = u == 'U' ? 'U' : u == 'L' ? 'L' : 'A';
    if (!cr_dtype_is_float((cr_dtype)A->dtype) || !cr_dtype_is_float((cr_dtype)B->dtype) ||
        A->ndim != 2 || B->ndim != 2)
        return CR__FAIL(arena, CR_EINVAL, "lacpy: A and B must be f64, f32 or c128 matrices");
    if (A->shape[0] != B->shape[0] || A->shape[1] != B->shape[1])
        return CR__FAIL(arena, CR_ESHAPE, "lacpy: A is %zu x %zu, B %zu x %zu", A->shape[0],
                        A->shape[1], B->shape[0], B->shape[1]);
    if (A->dtype == CR_DT_C128 && B->dtype != CR_DT_C128)
        return CR__FAIL(arena, CR_EINVAL, "lacpy: a complex A for a real B");
    e->B = B;
    e->wdt = cr__work((cr_dtype)B->dtype);
    const cr_array *Aw, *Bw;
    cr_array *Y, *o;
    if ((st = cr__dense(arena, A, e->wdt, &Aw)) != CR_OK ||
        (st = cr__dense(arena, B, e->wdt, &Bw)) != CR_OK ||
        (st = cr_array_copy(arena, Bw, &Y)) != CR_OK)
        return st;
    size_t m = A->shape[0], n = A->shape[1];
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            if (lacpy_in(e->uplo, i, j))
                cr__wset(Y, i * n + j, cr__wget(Aw, i * n + j));
    if ((st = cr__cast(arena, Y, (cr_dtype)B->dtype, &o)) != CR_OK)
        return st;
    *y = cr_value_array(o);
    return CR_OK;
}

/* Ā = ȳ on the copied part, B̄ = ȳ elsewhere. */
static cr_status lacpy_pullback_body(CR__PULLBACK_PARAMS)
{
    const lacpy_env *e = env;
    const cr_array *G;
    cr_status st = cr__tan_array(arena, "lacpy", *dy, 2, e->B->shape, e->wdt, &G);
    if (st != CR_OK || G == NULL)
        return st;
    cr_array *Ab, *Bb;
    if ((st = cr__new(arena, e->wdt, 2, e->B->shape, true, &Ab)) != CR_OK ||
        (st = cr__new(arena, e->wdt, 2, e->B->shape, true, &Bb)) != CR_OK)
        return st;
    size_t m = e->B->shape[0], n = e->B->shape[1];
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            cr__wset(lacpy_in(e->uplo, i, j) ? Ab : Bb, i * n + j, cr__wget(G, i * n + j));
    if ((st = cr__give(arena, e->pB, Bb, &dx[1])) != CR_OK)
        return st;
    return cr__give(arena, e->pA, Ab, &dx[2]);
}

CR__MASKED_PULLBACK(lacpy, lacpy_env)

static cr_status lacpy_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, lacpy_env, e);
    cr_status st = lacpy_forward(arena, args, nargs, e, y);
    if (st == CR_OK && udata != CR__PRIMAL_ONLY)
        st = cr_project_new(arena, &args[0], &e->pB);
    e->nd = cr__nondiff_mask(args, nargs, cr__arg_perturbable);
    return cr__rrule_end(arena, st, udata, &args[1], &e->pA, lacpy_pullback, e, "lacpy_pullback",
                         nargs + 1, pb);
}

/* ẏ = Ȧ on the copied part, Ḃ elsewhere. */
static cr_status lacpy_frule(CR__FRULE_PARAMS)
{
    lacpy_env e = {0};
    const cr_array *dB = NULL, *dA = NULL;
    bool none; /* zero tangents still give a zero array */
    cr_status st = lacpy_forward(arena, args, nargs, &e, y);
    if (st == CR_OK)
        st = cr__frule_pair(arena, "lacpy", dargs, args, e.wdt, y->u.arr, y, &dB, &dA, dy, &none);
    if (st != CR_OK)
        return st;
    cr_array *T, *o;
    if ((st = cr__new(arena, e.wdt, 2, e.B->shape, true, &T)) != CR_OK)
        return st;
    size_t m = e.B->shape[0], n = e.B->shape[1];
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            const cr_array *src = lacpy_in(e.uplo, i, j) ? dA : dB;
            if (src != NULL)
                cr__wset(T, i * n + j, cr__wget(src, i * n + j));
        }
    if ((st = cr__cast(arena, T, (cr_dtype)e.B->dtype, &o)) != CR_OK)
        return st;
    *dy = cr_tangent_array(o);
    return CR_OK;
}
CR__ARRAY_FN(lacpy, "lacpy", 3)

/* ---- Test registrations ------------------------------------------------------------------- */

typedef enum bt_kind { BT_SCAL, BT_TRMV, BT_TRSV, BT_TRMM, BT_TRSM, BT_LACPY } bt_kind;

/* A random square triangle-bearing matrix, well conditioned for the solves (its diagonal
 * pushed away from zero). */
static cr_status rand_tri(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t n, cr_array **A)
{
    size_t shape[2] = {n, n};
    cr_status st = cr__rand_array(arena, rng, dt, 2, shape, -1, 1, A);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        ptrdiff_t off = (ptrdiff_t)(i * n + i);
        double s = cr__rng_below(rng, 2) ? 1 : -1;
        cr__store(*A, off, cr__load(*A, off) + s * 2.0);
    }
    return CR_OK;
}

static cr_value rand_flag(uint64_t *rng, const char *opts)
{
    size_t n = strlen(opts);
    return cr_value_i64(opts[cr__rng_below(rng, n)]);
}

static cr_value rand_alpha(uint64_t *rng, cr_dtype dt)
{
    double a = cr__rng_unif(rng, 0.5, 2) * (cr__rng_below(rng, 2) ? 1 : -1);
    switch (cr__rng_below(rng, 4)) {
    case 0:
        return cr_value_i64(2);
    case 1:
        return dt == CR_DT_C128 ? cr_value_c128(cr__c(a, 0.5)) : cr_value_f64(a);
    default:
        return dt == CR_DT_F32 ? cr_value_f32((float)a) : cr_value_f64(a);
    }
}

static cr_status sample_blas(CR__SAMPLE_PARAMS)
{
    bt_kind k = *(const bt_kind *)env;
    cr_dtype dt = cr__rng_dtype(rng);
    size_t n = cr__rng_below(rng, 5); /* 0 .. 4: empty and 1 x 1 included */
    cr_array *A, *B;
    cr_status st;
    switch (k) {
    case BT_SCAL: {
        size_t shape[2] = {n, 1 + cr__rng_below(rng, 3)};
        st = cr__rand_array(arena, rng, dt, 1 + cr__rng_below(rng, 2), shape, -2, 2, &B);
        args[0] = rand_alpha(rng, dt);
        args[1] = cr_value_array(B);
        return st;
    }
    case BT_TRMV:
    case BT_TRSV:
        if ((st = rand_tri(arena, rng, dt, n, &A)) != CR_OK ||
            (st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 1, &n, -2, 2, &B)) != CR_OK)
            return st;
        args[0] = rand_flag(rng, "ULul");
        args[1] = rand_flag(rng, "NTC");
        args[2] = rand_flag(rng, "NU");
        args[3] = cr_value_array(A);
        args[4] = cr_value_array(B);
        return CR_OK;
    case BT_TRMM:
    case BT_TRSM: {
        cr_value side = rand_flag(rng, "LR");
        size_t other = 1 + cr__rng_below(rng, 3);
        size_t shape[2] = {side.u.i64 == 'L' ? n : other, side.u.i64 == 'L' ? other : n};
        if ((st = rand_tri(arena, rng, dt, n, &A)) != CR_OK ||
            (st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 2, shape, -2, 2, &B)) != CR_OK)
            return st;
        args[0] = side;
        args[1] = rand_flag(rng, "UL");
        args[2] = rand_flag(rng, "NTC");
        args[3] = rand_flag(rng, "NU");
        args[4] = rand_alpha(rng, dt);
        args[5] = cr_value_array(A);
        args[6] = cr_value_array(B);
        return CR_OK;
    }
    case BT_LACPY:
    default: {
        size_t shape[2] = {n, 1 + cr__rng_below(rng, 4)};
        cr_dtype adt = cr__rng_dtype(rng);
        if (adt == CR_DT_C128 && dt != CR_DT_C128)
            adt = CR_DT_F64;
        if ((st = cr__rand_array(arena, rng, dt, 2, shape, -2, 2, &B)) != CR_OK ||
            (st = cr__rand_array(arena, rng, adt, 2, shape, -2, 2, &A)) != CR_OK)
            return st;
        args[0] = cr_value_array(B);
        args[1] = cr_value_array(A);
        args[2] = rand_flag(rng, "ULA");
        return CR_OK;
    }
    }
}

static const bt_kind k_bt[6] = {BT_SCAL, BT_TRMV, BT_TRSV, BT_TRMM, BT_TRSM, BT_LACPY};
static const cr_rule_test k_t_blas[6] = {
    {.sample = sample_blas, .env = (void *)&k_bt[0]},
    {.sample = sample_blas, .env = (void *)&k_bt[1]},
    {.sample = sample_blas, .env = (void *)&k_bt[2]},
    {.sample = sample_blas, .env = (void *)&k_bt[3]},
    {.sample = sample_blas, .env = (void *)&k_bt[4]},
    {.sample = sample_blas, .env = (void *)&k_bt[5]},
};

cr_status cr__linalg_register_blas_tri(cr_registry *reg)
{
    static const cr_argspec a_scal[2] = {CR__SPEC(CR__M_NUM), CR__SPEC(CR__M_FARRAY)};
    static const cr_argspec a_l2[5] = {CR__SPEC(CR_M_INT), CR__SPEC(CR_M_INT), CR__SPEC(CR_M_INT),
                                       CR__SPEC(CR__M_FARRAY), CR__SPEC(CR__M_FARRAY)};
    static const cr_argspec a_l3[7] = {
        CR__SPEC(CR_M_INT),  CR__SPEC(CR_M_INT),     CR__SPEC(CR_M_INT),    CR__SPEC(CR_M_INT),
        CR__SPEC(CR__M_NUM), CR__SPEC(CR__M_FARRAY), CR__SPEC(CR__M_FARRAY)};
    static const cr_argspec a_lacpy[3] = {CR__SPEC(CR__M_FARRAY), CR__SPEC(CR__M_FARRAY),
                                          CR__SPEC(CR_M_INT)};
    static const cr__array_rule k[] = {
        CR__LA_ROW(scal, a_scal, 2, &k_t_blas[0], CR_NONLINEAR),
        CR__LA_ROW(trmv, a_l2, 5, &k_t_blas[1], CR_NONLINEAR),
        CR__LA_ROW(trsv, a_l2, 5, &k_t_blas[2], CR_NONLINEAR),
        CR__LA_ROW(trmm, a_l3, 7, &k_t_blas[3], CR_NONLINEAR),
        CR__LA_ROW(trsm, a_l3, 7, &k_t_blas[4], CR_NONLINEAR),
        CR__LA_ROW(lacpy, a_lacpy, 3, &k_t_blas[5], CR_LINEAR),
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
