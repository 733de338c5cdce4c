/*
 * Structured matrices (Julia's LinearAlgebra types, ChainRules' rules): the constructors
 * Tridiagonal(dl, d, du), SymTridiagonal(dv, ev), Bidiagonal(dv, ev, uplo), the triangular
 * wrappers as functions (UpperTriangular, LowerTriangular, UnitUpperTriangular,
 * UnitLowerTriangular), Symmetric(A, uplo) and Hermitian(A, uplo), and Matrix(A); the
 * tridiagonal factorization (gttrf/gttrs) that solve() uses for Tridiagonal and
 * SymTridiagonal matrices.
 *
 * The results are full n x n arrays tagged with a structure of array.h; the cotangents of
 * the arguments are the adjoints of the constructors (the diagonals of Ȳ), projected onto
 * the arguments. The constructors are linear (the unit triangles affine: their pullbacks do
 * not depend on the point either), so their second-order class is CR_LINEAR.
 */
#include <chainrules/rules_structured.h>

#include "../array/family.h"
#include "structured_impl.h"

/* ---- Band constructors --------------------------------------------------------------------- */

typedef enum { BAND_TRI, BAND_SYMTRI, BAND_BIDIAG } band_kind;

static const char *band_name(band_kind k)
{
    return k == BAND_TRI ? "Tridiagonal" : k == BAND_SYMTRI ? "SymTridiagonal" : "Bidiagonal";
}

/* The float vectors of a band constructor (3 for Tridiagonal: dl, d, du; 2 otherwise: the
 * diagonal and the off-diagonal) with their lengths checked; n the order, *upper Bidiagonal's
 * uplo. */
static cr_status band_args(cr_arena *arena, band_kind k, const cr_value *args, size_t nargs,
                           const cr_array **v, size_t *nv, size_t *n, bool *upper)
{
    const char *who = band_name(k);
    size_t want = k == BAND_SYMTRI ? 2 : 3;
    cr_status st = cr__nargs(arena, who, nargs, want, want);
    if (st != CR_OK)
        return st;
    *nv = k == BAND_TRI ? 3 : 2;
    for (size_t i = 0; i < *nv; i++) {
        st = cr__array_arg(arena, who, args, nargs, i, &v[i]);
        if (st != CR_OK)
            return st;
        if (v[i]->ndim != 1 || !cr_dtype_is_float((cr_dtype)v[i]->dtype))
            return CR__FAIL(arena, CR_EINVAL, "%s: argument %zu must be a float vector", who,
                            i + 1);
    }
    const cr_array *dv = k == BAND_TRI ? v[1] : v[0];
    *n = dv->shape[0];
    size_t off = *n > 0 ? *n - 1 : 0;
    for (size_t i = 0; i < *nv; i++)
        if (v[i] != dv && v[i]->shape[0] != off)
            return CR__FAIL(arena, CR_ESHAPE,
                            "%s: the off-diagonal argument %zu has %zu element%s; the diagonal "
                            "has %zu, so it needs %zu",
                            who, i + 1, v[i]->shape[0], CR__S(v[i]->shape[0]), *n, off);
    *upper = true;
    if (k == BAND_BIDIAG) {
        char c;
        st = cr__flag_arg(arena, who, args, 2, "UL", &c);
        if (st != CR_OK)
            return st;
        *upper = c == 'U';
    }
    return CR_OK;
}

/* The band matrix of the vectors v (work dtype wdt) into a new zero n x n array of dtype dt. */
static cr_status band_build(cr_arena *arena, band_kind k, bool upper, const cr_array *const *v,
                            size_t n, cr_dtype dt, cr_array **out)
{
    size_t shape[2] = {n, n};
    cr_array *r;
    cr_status st = cr__new(arena, dt, 2, shape, true, &r);
    if (st != CR_OK)
        return st;
    const cr_array *d = k == BAND_TRI ? v[1] : v[0];
    for (size_t i = 0; i < n; i++)
        cr__store(r, (ptrdiff_t)(i * n + i), cr_array_get_linear(d, i));
    for (size_t i = 0; i + 1 < n; i++) {
        ptrdiff_t up = (ptrdiff_t)(i * n + i + 1), lo = (ptrdiff_t)((i + 1) * n + i);
        switch (k) {
        case BAND_TRI:
            cr__store(r, lo, cr_array_get_linear(v[0], i));
            cr__store(r, up, cr_array_get_linear(v[2], i));
            break;
        case BAND_SYMTRI:
            cr__store(r, up, cr_array_get_linear(v[1], i));
            cr__store(r, lo, cr_array_get_linear(v[1], i));
            break;
        case BAND_BIDIAG:
            cr__store(r, upper ? up : lo, cr_array_get_linear(v[1], i));
            break;
        }
    }
    r->structure = (uint8_t)(k == BAND_TRI      ? CR_MAT_TRIDIAGONAL
                             : k == BAND_SYMTRI ? CR_MAT_SYMTRIDIAGONAL
                             : upper            ? CR_MAT_BIDIAG_UPPER
                                                : CR_MAT_BIDIAG_LOWER);
    *out = r;
    return CR_OK;
}

static cr_status band_forward(cr_arena *arena, band_kind k, const cr_value *args, size_t nargs,
                              cr_array **out)
{
    const cr_array *v[3];
    size_t nv = 0, n = 0;
    bool upper = true;
    cr_status st = band_args(arena, k, args, nargs, v, &nv, &n, &upper);
    if (st != CR_OK)
        return st;
    cr_dtype dt = (cr_dtype)v[0]->dtype;
    for (size_t i = 1; i < nv; i++)
        dt = cr__promote(dt, (cr_dtype)v[i]->dtype);
    return band_build(arena, k, upper, v, n, dt, out);
}

typedef struct band_env {
    uint32_t nd; /* the empty vectors (of a 1 x 1 matrix): NoTangent */
    band_kind k;
    bool upper;
    size_t n;
    cr_dtype wdt;
    cr_project **p;
} band_env;

/* The diagonal at offset `off` (0, 1 above, -1 below) of the n x n dense g, plus (sym) the
 * mirrored one: a new vector of dtype wdt. */
static cr_status band_diag(cr_arena *arena, const cr_array *g, size_t n, int off, bool sym,
                           cr_dtype wdt, cr_array **out)
{
    size_t m = off == 0 ? n : n > 0 ? n - 1 : 0;
    cr_status st = cr__new(arena, wdt, 1, &m, false, out);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < m; i++) {
        size_t r = off < 0 ? i + 1 : i, c = off > 0 ? i + 1 : i;
        cr_complex v = cr__load(g, (ptrdiff_t)(r * n + c));
        if (sym)
            v += cr__load(g, (ptrdiff_t)(c * n + r));
        cr__store(*out, (ptrdiff_t)i, v);
    }
    return CR_OK;
}

static cr_status band_pullback_body(CR__PULLBACK_PARAMS)
{
    band_env *e = env;
    cr__dx_none(dx, nx);
    size_t nv = e->k == BAND_TRI ? 3 : 2, shape[2] = {e->n, e->n};
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "band_pullback", *dy, 2, shape, e->wdt, &g);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < nv; i++) {
        if (g == NULL) {
            dx[i + 1] = cr_tangent_zero();
            continue;
        }
        int off = 0;
        bool sym = false;
        if (e->k == BAND_TRI)
            off = (int)i - 1;
        else if (i == 1) {
            off = e->upper ? 1 : -1;
            sym = e->k == BAND_SYMTRI;
        }
        cr_array *r;
        st = band_diag(arena, g, e->n, off, sym, e->wdt, &r);
        if (st == CR_OK)
            st = cr__give(arena, e->p[i], r, &dx[i + 1]);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

CR__MASKED_PULLBACK(band, band_env)

static cr_status band_rrule_common(cr_arena *arena, band_kind k, const cr_value *args, size_t nargs,
                                   cr_value *y, cr_pullback *pb, const void *udata)
{
    cr_array *r;
    cr_status st = band_forward(arena, k, args, nargs, &r);
    if (st == CR_OK)
        *y = cr_value_array(r);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    CR__ARENA_ZNEW(arena, band_env, e);
    e->nd = cr__nondiff_mask(args, nargs, cr__arg_perturbable);
    e->k = k;
    e->upper = r->structure != CR_MAT_BIDIAG_LOWER;
    e->n = r->shape[0];
    e->wdt = cr__work((cr_dtype)r->dtype);
    st = cr__projectors(arena, args, nargs, &e->p);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){band_pullback, e, "band_pullback", nargs + 1};
    return CR_OK;
}

/* frule: the constructors are linear in their vectors together, Ẏ = f(v̇...) (zero vectors for
 * zero tangents), projected onto Y. */
static cr_status band_frule_common(cr_arena *arena, band_kind k, const cr_tangent *dargs,
                                   const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    cr_array *r;
    cr_status st = band_forward(arena, k, args, nargs, &r);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(r);
    size_t nv = k == BAND_TRI ? 3 : 2;
    cr_value targs[3];
    bool any = false;
    for (size_t i = 0; i < nargs && i < 3; i++)
        targs[i] = args[i];
    for (size_t i = 0; i < nv; i++) {
        const cr_array *t;
        cr_dtype wdt = cr__work((cr_dtype)args[i].u.arr->dtype);
        st = cr__dx_array(arena, band_name(k), dargs, args, i, wdt, &t);
        if (st != CR_OK)
            return st;
        if (t == NULL) {
            cr_array *z;
            st = cr__new(arena, wdt, 1, args[i].u.arr->shape, true, &z);
            if (st != CR_OK)
                return st;
            t = z;
        } else {
            any = true;
        }
        targs[i] = cr_value_array((cr_array *)t);
    }
    if (!any) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *t;
    st = band_forward(arena, k, targs, nargs, &t);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(t), dy);
}

/* The rules of a band constructor (the name STR in messages) through band_*_common. */
#define BAND_RULE(NAME, STR, KIND, ARITY)                                \
    CR__PARAM_RULE_FNS(NAME, band_rrule_common, band_frule_common, KIND) \
    CR__ARRAY_FN(NAME, STR, ARITY)

BAND_RULE(tridiagonal, "Tridiagonal", BAND_TRI, 3)
BAND_RULE(symtridiagonal, "SymTridiagonal", BAND_SYMTRI, 2)
BAND_RULE(bidiagonal, "Bidiagonal", BAND_BIDIAG, 3)

/* ---- Wrappers of a square matrix ------------------------------------------------------------- */

/* A view of the float A tagged s: a square matrix (its dense value first when A is
 * structured); for Diagonal, the diagonal of a square matrix or a vector made the diagonal. */
static cr_status wrap_view(cr_arena *arena, const char *who, cr_matstruct s, const cr_array *A,
                           cr_array **out)
{
    if (!cr_dtype_is_float((cr_dtype)A->dtype))
        return CR__FAIL(arena, CR_EINVAL, "%s: expected a float array", who);
    bool vec = s == CR_MAT_DIAGONAL && A->ndim == 1;
    if (!vec && (A->ndim != 2 || A->shape[0] != A->shape[1]))
        return CR__FAIL(arena, CR_ESHAPE, "%s: expected a square matrix%s", who,
                        s == CR_MAT_DIAGONAL ? " or a vector" : "");
    const cr_array *D = A;
    if (A->structure != CR_MAT_DENSE) {
        cr_array *c;
        cr_status st = cr__densify(arena, A, 0, &c);
        if (st != CR_OK)
            return st;
        D = c;
    }
    cr_array *r = NULL;
    cr_status st = cr__view_of(arena, D, &r);
    if (st != CR_OK)
        return st;
    if (vec) {
        r->ndim = 2;
        r->shape[1] = r->shape[0];
        r->strides[1] = 0;
    } else if (s == CR_MAT_DIAGONAL) {
        r->strides[0] = D->strides[0] + D->strides[1];
        r->strides[1] = 0;
    }
    r->structure = (uint8_t)s;
    *out = r;
    return CR_OK;
}

typedef struct wrap_env {
    cr_matstruct s;
    size_t n;
    bool vec; /* Diagonal(v) of a vector */
    cr_dtype wdt;
    cr_project *pA;
} wrap_env;

/* Diagonal: Ā the diagonal of Ȳ (a vector for Diagonal(v), else a Diagonal-tagged matrix). */
static cr_status wrap_diag_cot(cr_arena *arena, const wrap_env *e, const cr_array *g,
                               cr_tangent *out)
{
    size_t n = e->n;
    cr_array *r = NULL;
    cr_status st = cr__new(arena, e->wdt, 1, &n, false, &r);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        cr__store(r, (ptrdiff_t)i, cr__load(g, (ptrdiff_t)(i * n + i)));
    if (!e->vec) {
        r->ndim = 2;
        r->shape[1] = n;
        r->strides[1] = 0;
        r->structure = CR_MAT_DIAGONAL;
    }
    return cr__give(arena, e->pA, r, out);
}

/* Symmetric and Hermitian (s, either triangle read): r (zero, n x n) := Ā, on the triangle read
 * Ā_ab = Ȳ_ab + Ȳ_ba off the diagonal (conj(Ȳ_ba) for Hermitian) and Ȳ_aa on it (its real part
 * for Hermitian). false (r untouched) for the other structures. */
static bool wrap_symherm_cot(cr_matstruct s, const cr_array *g, size_t n, cr_array *r)
{
    bool herm = s == CR_MAT_HERMITIAN || s == CR_MAT_HERMITIAN_LOWER;
    bool upper = s == CR_MAT_SYMMETRIC || s == CR_MAT_HERMITIAN;
    if (!herm && !upper && s != CR_MAT_SYMMETRIC_LOWER)
        return false;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++) {
            size_t a = upper ? i : j, b = upper ? j : i; /* the entry read, (b, a) its mirror */
            cr_complex u = cr__load(g, (ptrdiff_t)(a * n + b)),
                       w = cr__load(g, (ptrdiff_t)(b * n + a));
            cr_complex v = i == j ? (herm ? creal(u) : u) : u + (herm ? conj(w) : w);
            cr__store(r, (ptrdiff_t)(a * n + b), v);
        }
    return true;
}

/* Ā: the entries of Ȳ that Y reads from its own place, plus for the Symmetric/Hermitian
 * structures those read through the mirror (conjugated for Hermitian); the diagonal's real
 * part for Hermitian; nothing for a unit diagonal. */
static cr_status wrap_pullback(CR__PULLBACK_PARAMS)
{
    wrap_env *e = env;
    cr__dx_none(dx, nx);
    size_t n = e->n, shape[2] = {n, n};
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "structure_pullback", *dy, 2, shape, e->wdt, &g);
    if (st != CR_OK || g == NULL) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    if (e->s == CR_MAT_DIAGONAL)
        return wrap_diag_cot(arena, e, g, &dx[1]);
    cr_array *r;
    st = cr__new(arena, e->wdt, 2, shape, true, &r);
    if (st != CR_OK)
        return st;
    if (wrap_symherm_cot(e->s, g, n, r))
        return cr__give(arena, e->pA, r, &dx[1]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            size_t a, b;
            cr__rd how = cr__struct_read((uint8_t)e->s, i, j, &a, &b);
            if (how == CR__RD_ZERO || how == CR__RD_ONE)
                continue;
            cr_complex v = cr__load(g, (ptrdiff_t)(i * n + j));
            v = how == CR__RD_CONJ ? conj(v) : how == CR__RD_REAL ? creal(v) : v;
            ptrdiff_t o = (ptrdiff_t)(a * n + b);
            cr__store(r, o, cr__load(r, o) + v);
        }
    return cr__give(arena, e->pA, r, &dx[1]);
}

cr_status cr__wrap_rrule(cr_arena *arena, const char *who, cr_matstruct s, const cr_value *args,
                         size_t nargs, cr_value *y, cr_pullback *pb, const void *udata)
{
    bool symherm = s == CR_MAT_SYMMETRIC || s == CR_MAT_HERMITIAN;
    cr_status st = cr__nargs(arena, who, nargs, 1, symherm ? 2 : 1);
    char c = 'U';
    if (st == CR_OK && nargs == 2) /* Symmetric(A, uplo), Hermitian(A, uplo) */
        st = cr__flag_arg(arena, who, args, 1, "UL", &c);
    if (c == 'L')
        s = s == CR_MAT_HERMITIAN ? CR_MAT_HERMITIAN_LOWER : CR_MAT_SYMMETRIC_LOWER;
    const cr_array *A;
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, 0, &A);
    if (st == CR_OK)
        st = wrap_view(arena, who, s, A, &r);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(r);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    CR__PB_START(wrap_env, pA, wrap_pullback, "structure_pullback", e, st);
    e->s = s;
    e->n = A->shape[0];
    e->vec = A->ndim == 1;
    e->wdt = cr__work((cr_dtype)A->dtype);
    return CR_OK;
}

CR__WRAP_RULE(upper_triangular, "UpperTriangular", CR_MAT_UPPER, 1)
CR__WRAP_RULE(lower_triangular, "LowerTriangular", CR_MAT_LOWER, 1)
CR__WRAP_RULE(unit_upper_triangular, "UnitUpperTriangular", CR_MAT_UNIT_UPPER, 1)
CR__WRAP_RULE(unit_lower_triangular, "UnitLowerTriangular", CR_MAT_UNIT_LOWER, 1)

/* The two-argument signatures of Symmetric and Hermitian (cr_fn_symmetric and cr_fn_hermitian,
 * products.c): the same rrule, the structure told by the function. */
static cr_status symherm_uplo_rrule(CR__RRULE_PARAMS)
{
    bool herm = f->u.func.fn == cr_fn_hermitian.u.func.fn;
    return cr__wrap_rrule(arena, herm ? "Hermitian" : "Symmetric",
                          herm ? CR_MAT_HERMITIAN : CR_MAT_SYMMETRIC, args, nargs, y, pb, udata);
}

/* ---- Matrix(A) ---------------------------------------------------------------------------- */

typedef struct matrix_env {
    const cr_array *A;
    cr_project *pA;
} matrix_env;

/* Ā = Ȳ projected onto A's structure. */
static cr_status matrix_pullback(CR__PULLBACK_PARAMS)
{
    matrix_env *e = env;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "Matrix_pullback", *dy, 2, e->A->shape,
                                 cr__work((cr_dtype)e->A->dtype), &g);
    if (st != CR_OK || g == NULL) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    return cr_project_apply(arena, e->pA, cr_tangent_array((cr_array *)g), &dx[1]);
}

static cr_status matrix_rrule(CR__RRULE_PARAMS)
{
    const cr_array *A;
    cr_status st = cr__array_arg1(arena, "Matrix", args, nargs, &A);
    if (st != CR_OK)
        return st;
    if (A->ndim != 2 || !cr_dtype_is_float((cr_dtype)A->dtype))
        return CR__FAIL(arena, CR_EINVAL, "Matrix: expected a float matrix");
    cr_array *r;
    st = cr__densify(arena, A, 0, &r);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(r);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    CR__ARENA_ZNEW(arena, matrix_env, e);
    e->A = A;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){matrix_pullback, e, "Matrix_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(matrix, "Matrix", 1)

/* ---- The tridiagonal factorization (solve) ----------------------------------------------------
 */

#if defined(CR_HAVE_LAPACKE)

cr_status cr__gt_factor(cr_arena *arena, const char *who, const cr_array *A, bool cplx, cr__gtf *F)
{
    size_t n = A->shape[0];
    if (n > INT32_MAX)
        return CR__FAIL(arena, CR_ESHAPE, "%s: %zu rows exceed LAPACK's int", who, n);
    size_t es = cplx ? sizeof(cr_complex) : sizeof(double);
    F->n = n;
    F->cplx = cplx;
    size_t m = n > 0 ? n - 1 : 0, m2 = n > 1 ? n - 2 : 0;
    F->dl = cr__arena_array(arena, who, m, es, _Alignof(cr_complex));
    F->d = cr__arena_array(arena, who, n, es, _Alignof(cr_complex));
    F->du = cr__arena_array(arena, who, m, es, _Alignof(cr_complex));
    F->du2 = cr__arena_array(arena, who, m2, es, _Alignof(cr_complex));
    F->ipiv = cr__arena_array(arena, who, n, sizeof *F->ipiv, _Alignof(lapack_int));
    if (F->dl == NULL || F->d == NULL || F->du == NULL || F->du2 == NULL || F->ipiv == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < n; i++) {
        cr_complex d = cr_array_get_linear(A, i * n + i);
        cr_complex lo = i + 1 < n ? cr_array_get_linear(A, (i + 1) * n + i) : 0.0;
        cr_complex up = i + 1 < n ? cr_array_get_linear(A, i * n + i + 1) : 0.0;
        if (cplx) {
            ((cr_complex *)F->d)[i] = d;
            if (i + 1 < n) {
                ((cr_complex *)F->dl)[i] = lo;
                ((cr_complex *)F->du)[i] = up;
            }
        } else {
            ((double *)F->d)[i] = creal(d);
            if (i + 1 < n) {
                ((double *)F->dl)[i] = creal(lo);
                ((double *)F->du)[i] = creal(up);
            }
        }
    }
    if (n == 0)
        return CR_OK;
    lapack_int info = cplx ? LAPACKE_zgttrf((lapack_int)n, F->dl, F->d, F->du, F->du2, F->ipiv)
                           : LAPACKE_dgttrf((lapack_int)n, F->dl, F->d, F->du, F->du2, F->ipiv);
    if (info > 0)
        return cr__singular(arena, who);
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

cr_status cr__gt_solve(cr_arena *arena, const char *who, const cr__gtf *F, char op, cr__cmat *X)
{
    size_t n = F->n;
    if (n == 0 || X->c == 0)
        return CR_OK;
    if (X->c > INT32_MAX)
        return CR__FAIL(arena, CR_ESHAPE, "%s: %zu right-hand sides exceed LAPACK's int", who,
                        X->c);
    char t = op == 'N' ? 'N' : (F->cplx ? 'C' : 'T');
    lapack_int info =
        F->cplx ? LAPACKE_zgttrs_work(LAPACK_COL_MAJOR, t, (lapack_int)n, (lapack_int)X->c, F->dl,
                                      F->d, F->du, F->du2, F->ipiv, X->p, (lapack_int)n)
                : LAPACKE_dgttrs_work(LAPACK_COL_MAJOR, t, (lapack_int)n, (lapack_int)X->c, F->dl,
                                      F->d, F->du, F->du2, F->ipiv, X->p, (lapack_int)n);
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

#endif /* CR_HAVE_LAPACKE */

/* ---- Test registrations ------------------------------------------------------------------------
 */

/* A random vector of n entries in [lo, hi) of dtype dt. */
static cr_status rand_vec(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t n, double lo,
                          double hi, cr_value *out)
{
    cr_array *a;
    cr_status st = cr__rand_array(arena, rng, dt, 1, &n, lo, hi, &a);
    if (st == CR_OK)
        *out = cr_value_array(a);
    return st;
}

/* The band constructors' vectors (env: the band_kind): orders 1 to 4, mixed dtypes
 * sometimes; the diagonal in [2, 3) so that the matrices are well conditioned for the
 * generic rules' tests that reuse them. */
static cr_status sample_band(CR__SAMPLE_PARAMS)
{
    band_kind k = (band_kind)(uintptr_t)env;
    size_t n = 1 + cr__rng_below(rng, 4);
    cr_dtype dt = cr__rng_dtype(rng);
    size_t nv = k == BAND_TRI ? 3 : 2, diag = k == BAND_TRI ? 1 : 0;
    for (size_t i = 0; i < nv; i++) {
        cr_dtype di = cr__rng_below(rng, 4) == 0 ? cr__rng_dtype(rng) : dt;
        cr_status st = i == diag ? rand_vec(arena, rng, di, n, 2.0, 3.0, &args[i])
                                 : rand_vec(arena, rng, di, n - 1, -1.0, 1.0, &args[i]);
        if (st != CR_OK)
            return st;
    }
    if (k == BAND_BIDIAG)
        args[2] = cr__rand_flag(rng, cr__rng_below(rng, 2) ? "Uu" : "Ll");
    return CR_OK;
}

/* A square matrix of order 1 to 4, sometimes itself structured (its dense value is wrapped);
 * env 1: a uplo flag second (Symmetric(A, uplo), Hermitian(A, uplo)). */
static cr_status sample_wrap(CR__SAMPLE_PARAMS)
{
    size_t n = 1 + cr__rng_below(rng, 4), shape[2] = {n, n};
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 2, shape, -1.5, 1.5, &A);
    if (st != CR_OK)
        return st;
    static const cr_matstruct s[4] = {CR_MAT_DENSE, CR_MAT_DENSE, CR_MAT_TRIDIAGONAL, CR_MAT_LOWER};
    A->structure = (uint8_t)s[cr__rng_below(rng, 4)];
    args[0] = cr_value_array(A);
    if (env != NULL)
        args[1] = cr__rand_flag(rng, "UL");
    return CR_OK;
}

/* Matrix(A) of a matrix of any structure (rectangular when dense). */
static cr_status sample_matrix(CR__SAMPLE_PARAMS)
{
    static const cr_matstruct s[] = {
        CR_MAT_DENSE,       CR_MAT_SYMMETRIC,      CR_MAT_HERMITIAN,       CR_MAT_UPPER,
        CR_MAT_TRIDIAGONAL, CR_MAT_SYMTRIDIAGONAL, CR_MAT_BIDIAG_UPPER,    CR_MAT_BIDIAG_LOWER,
        CR_MAT_UNIT_UPPER,  CR_MAT_UNIT_LOWER,     CR_MAT_SYMMETRIC_LOWER, CR_MAT_HERMITIAN_LOWER,
        CR_MAT_DIAGONAL};
    cr_matstruct t = s[cr__rng_below(rng, sizeof s / sizeof s[0])];
    /* (a 1 x 1 unit triangle has no free entry, yet its cotangent is a zero array) */
    size_t n = (cr__struct_unit((uint8_t)t) ? 2 : 1) + cr__rng_below(rng, 4);
    size_t shape[2] = {n, t == CR_MAT_DENSE ? n + 1 : n};
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 2, shape, -1.5, 1.5, &A);
    if (st != CR_OK)
        return st;
    A->structure = (uint8_t)t;
    if (t == CR_MAT_DIAGONAL) {
        A->strides[0] = A->strides[0] + A->strides[1];
        A->strides[1] = 0;
    }
    args[0] = cr_value_array(A);
    return CR_OK;
}

static const cr_rule_test k_test_tri = {.sample = sample_band, .env = (void *)(uintptr_t)BAND_TRI};
static const cr_rule_test k_test_symtri = {.sample = sample_band,
                                           .env = (void *)(uintptr_t)BAND_SYMTRI};
static const cr_rule_test k_test_bidiag = {.sample = sample_band,
                                           .env = (void *)(uintptr_t)BAND_BIDIAG};
static const cr_rule_test k_test_wrap = {.sample = sample_wrap};
static const cr_rule_test k_test_wrap_uplo = {.sample = sample_wrap, .env = (void *)1};
static const cr_rule_test k_test_matrix = {.sample = sample_matrix};

cr_status cr__family_structured(cr_registry *reg)
{
    static const cr_argspec bd[3] = {{CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL}, {CR_M_INT, NULL}};
    static const cr_argspec au[2] = {{CR__M_FARRAY, NULL}, {CR_M_INT, NULL}};
    const cr_argspec *fa = cr__linalg_fa;
    /* The unit triangles are affine: Ẏ = f(Ȧ) projected onto Y drops the unit diagonal f
     * puts on the tangent. */
    const cr__array_rule k[] = {
        CR__LA_ROW(tridiagonal, fa, 3, &k_test_tri, CR_LINEAR),
        CR__LA_ROW(symtridiagonal, fa, 2, &k_test_symtri, CR_LINEAR),
        CR__LA_ROW(bidiagonal, bd, 3, &k_test_bidiag, CR_LINEAR),
        CR__LA_LINEAR_ROW(upper_triangular, fa, 1, &k_test_wrap),
        CR__LA_LINEAR_ROW(lower_triangular, fa, 1, &k_test_wrap),
        CR__LA_LINEAR_ROW(unit_upper_triangular, fa, 1, &k_test_wrap),
        CR__LA_LINEAR_ROW(unit_lower_triangular, fa, 1, &k_test_wrap),
        {cr_fn_symmetric.u.func.fn, au, 2, cr__linear_frule, symherm_uplo_rrule, &k_test_wrap_uplo,
         CR_LINEAR, NULL, false},
        {cr_fn_hermitian.u.func.fn, au, 2, cr__linear_frule, symherm_uplo_rrule, &k_test_wrap_uplo,
         CR_LINEAR, NULL, false},
        CR__LA_LINEAR_ROW(matrix, fa, 1, &k_test_matrix),
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
