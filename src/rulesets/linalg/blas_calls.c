/*
 * The BLAS-level rules in functional form (ChainRules' blas.jl): nrm2 (a name for norm) and
 * gemv (alpha op(A) x + beta y), and the arguments they share with the LAPACK-level rules of
 * lapack_calls.c (linalg_impl.h): flags as i64 character codes as LAPACK spells them ('N',
 * 'T', 'C', 'U', 'L'), matrices of LAPACK's int sizes, right-hand sides. Arguments are never
 * mutated and results are new arrays, like Julia's non-bang wrappers.
 */
#include <ctype.h>
#include <string.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

/* ---- Arguments -------------------------------------------------------------------------- */

/* A flag argument: an integer character code among `allowed` (lower case accepted). */
cr_status cr__flag_arg(cr_arena *arena, const char *who, const cr_value *args, size_t i,
                       const char *allowed, char *out)
{
    int64_t v = 0;
    cr_status st = cr__int_arg(arena, who, &args[i], &v);
    if (st != CR_OK)
        return st;
    int c = v > 0 && v < 128 ? toupper((int)v) : 0;
    if (c == 0 || strchr(allowed, c) == NULL)
        return CR__FAIL(arena, CR_EINVAL,
                        "%s: argument %zu must be one of the character codes \"%s\" (got %lld)",
                        who, i + 1, allowed, (long long)v);
    *out = (char)c;
    return CR_OK;
}

/* A float matrix argument (square when `square`); LAPACK's int sizes. */
cr_status cr__matrix32_arg(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                           size_t i, bool square, const cr_array **A)
{
    cr_status st = cr__array_arg(arena, who, args, nargs, i, A);
    if (st != CR_OK)
        return st;
    const cr_array *a = *A;
    if (a->ndim != 2 || !cr_dtype_is_float((cr_dtype)a->dtype) || a->shape[0] > INT32_MAX ||
        a->shape[1] > INT32_MAX || (square && a->shape[0] != a->shape[1]))
        return CR__FAIL(arena, CR_ESHAPE, "%s: argument %zu must be a %sf64, f32 or c128 matrix",
                        who, i + 1, square ? "square " : "");
    return CR_OK;
}

cr_status cr__nargs_matrix32(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                             size_t n, bool square, const cr_array **A)
{
    cr_status st = cr__nargs(arena, who, nargs, n, n);
    return st != CR_OK ? st : cr__matrix32_arg(arena, who, args, nargs, 0, square, A);
}

/* A right-hand side: a float vector or matrix with n rows. */
cr_status cr__rhs_arg(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                      size_t i, size_t n, const cr_array **B)
{
    cr_status st = cr__array_arg(arena, who, args, nargs, i, B);
    const cr_array *b = st == CR_OK ? *B : NULL;
    if (b != NULL &&
        ((b->ndim != 1 && b->ndim != 2) || b->shape[0] != n ||
         !cr_dtype_is_float((cr_dtype)b->dtype) || (b->ndim == 2 && b->shape[1] > INT32_MAX)))
        st = CR__FAIL(arena, CR_ESHAPE,
                      "%s: argument %zu must be a float vector or matrix with %zu row%s", who,
                      i + 1, n, CR__S(n));
    return st;
}

/* NoTangent for every cotangent, then ZeroTangent for the perturbable arguments: what a
 * pullback returns for a zero seed. */
void cr__zero_cotangents(const bool *diff, cr_tangent *dx, size_t nx)
{
    dx[0] = cr_tangent_none();
    for (size_t i = 1; i < nx; i++)
        dx[i] = diff[i - 1] ? cr_tangent_zero() : cr_tangent_none();
}

/* ---- nrm2 -------------------------------------------------------------------------------- */

/* nrm2(x) is norm(x) (p = 2): the same rules, reached through dispatch. */
static cr_status nrm2_rrule(CR__RRULE_PARAMS)
{
    cr_status st = cr__nargs(arena, "nrm2", nargs, 1, 1);
    if (st != CR_OK)
        return st;
    if (udata == CR__PRIMAL_ONLY)
        return cr_function_call(arena, &cr_fn_norm, args, 1, y);
    st = cr_rrule(cfg, arena, &cr_fn_norm, args, 1, y, pb);
    if (st == CR_NOTHING)
        return CR__FAIL(arena, CR_ENORULE, "nrm2: no rrule for norm of this argument");
    if (st == CR_OK)
        pb->name = "nrm2_pullback";
    return st;
}
CR__ARRAY_FN(nrm2, "nrm2", 1)

static cr_status nrm2_frule(CR__FRULE_PARAMS)
{
    cr_status st = cr__nargs(arena, "nrm2", nargs, 1, 1);
    if (st != CR_OK)
        return st;
    const cr_tangent d[2] = {cr_tangent_none(), dargs[1]};
    st = cr_frule(cfg, arena, d, &cr_fn_norm, args, 1, y, dy);
    if (st == CR_NOTHING)
        return CR__FAIL(arena, CR_ENORULE, "nrm2: no frule for norm of this argument");
    return st;
}

/* ---- gemv: alpha op(A) x + beta y ---------------------------------------------------------- */

typedef struct gemv_env {
    char op;
    cr_complex alpha, beta;
    cr__cmat A, x, y, Ax; /* Ax = op(A) x */
    size_t m, n;          /* A's shape */
    bool with_y, cplx;
    bool diff[6]; /* which arguments are perturbable */
    cr_dtype dt;
    const cr_array *Aarg;
    cr_project **p;
} gemv_env;

static cr_status gemv_forward(cr_arena *arena, const cr_value *args, size_t nargs, gemv_env *e,
                              cr__cmat *Y)
{
    const char *who = "gemv";
    cr_status st = cr__nargs(arena, who, nargs, 4, 6);
    if (st == CR_OK && nargs == 5)
        st = CR__FAIL(arena, CR_EINVAL, "gemv: expected 4 or 6 arguments, got 5");
    if (st == CR_OK)
        st = cr__flag_arg(arena, who, args, 0, "NTC", &e->op);
    const cr_array *A, *x, *y = NULL;
    if (st == CR_OK)
        st = cr__matrix32_arg(arena, who, args, nargs, 2, false, &A);
    if (st != CR_OK)
        return st;
    e->with_y = nargs == 6;
    e->m = A->shape[0];
    e->n = A->shape[1];
    size_t rows = e->op == 'N' ? e->m : e->n, cols = e->op == 'N' ? e->n : e->m;
    st = cr__rhs_arg(arena, who, args, nargs, 3, cols, &x);
    if (st == CR_OK && x->ndim != 1)
        st = CR__FAIL(arena, CR_ESHAPE, "gemv: x must be a vector");
    if (st == CR_OK && e->with_y) {
        st = cr__rhs_arg(arena, who, args, nargs, 5, rows, &y);
        if (st == CR_OK && y->ndim != 1)
            st = CR__FAIL(arena, CR_ESHAPE, "gemv: y must be a vector");
    }
    if (st != CR_OK)
        return st;
    for (size_t i = 1; i < nargs; i += 3) {
        cr_kind k = args[i].kind;
        if (k != CR_KIND_F64 && k != CR_KIND_F32 && k != CR_KIND_C128 && k != CR_KIND_I64 &&
            k != CR_KIND_I32 && k != CR_KIND_BOOL)
            return CR__FAIL(arena, CR_EINVAL, "gemv: argument %zu (%s) must be a number", i + 1,
                            i == 1 ? "alpha" : "beta");
    }
    cr_dtype d =
        cr__promote(cr__value_dtype(&args[1]), cr__promote((cr_dtype)A->dtype, (cr_dtype)x->dtype));
    if (e->with_y)
        d = cr__promote(d, cr__promote(cr__value_dtype(&args[4]), (cr_dtype)y->dtype));
    e->dt = d;
    e->cplx = d == CR_DT_C128;
    e->alpha = cr__scalar_of(&args[1]);
    e->beta = e->with_y ? cr__scalar_of(&args[4]) : 0;
    e->Aarg = A;
    st = cr__cmat_from(arena, A, e->cplx, &e->A);
    if (st == CR_OK)
        st = cr__cmat_from(arena, x, e->cplx, &e->x);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, e->op, 'N', 1.0, &e->A, &e->x, &e->Ax);
    if (st == CR_OK)
        st = cr__cmat_new(arena, e->cplx, rows, 1, true, Y);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < nargs; i++)
        e->diff[i] = cr__is_diff(&args[i]);
    if (e->with_y) {
        st = cr__cmat_from(arena, y, e->cplx, &e->y);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < rows; i++)
            cr__cmat_set(Y, i, 0, e->beta == 0 ? 0 : e->beta * cr__cmat_get(&e->y, i, 0));
    }
    for (size_t i = 0; i < rows; i++)
        cr__cmat_set(Y, i, 0, cr__cmat_get(Y, i, 0) + e->alpha * cr__cmat_get(&e->Ax, i, 0));
    return CR_OK;
}

/* Ā as a rank-one matrix s p qᵀ (m x n): 'N' conj(α) ȳ xᴴ, 'T' conj(α) conj(x) ȳᵀ,
 * 'C' α x ȳᴴ. */
typedef struct gemv_rank1 {
    const gemv_env *e;
    cr__cmat p, q;
    cr_complex s;
} gemv_rank1;

static void rank1_into(const gemv_rank1 *t, cr_dtype wdt, void *dest, cr_complex beta)
{
    size_t m = t->e->m, n = t->e->n;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            cr_complex v = t->s * cr__cmat_get(&t->p, i, 0) * cr__cmat_get(&t->q, j, 0);
            if (wdt == CR_DT_C128) {
                cr_complex *d = dest;
                d[i * n + j] = (beta == 0 ? 0 : d[i * n + j]) + v;
            } else {
                double *d = dest;
                d[i * n + j] = (beta == 0 ? 0 : d[i * n + j]) + creal(v);
            }
        }
}

static cr_status gemv_A_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    gemv_rank1 *t = env;
    cr_dtype wdt = t->e->cplx ? CR_DT_C128 : CR_DT_F64;
    cr_array *r;
    cr_status st = cr__new_like(arena, wdt, t->e->Aarg, false, &r);
    if (st != CR_OK)
        return st;
    rank1_into(t, wdt, r->data, 0.0);
    return cr__give(arena, t->e->p[2], r, out);
}

/* add!: dest += s p qᵀ without a temporary when dest fits. */
static cr_status gemv_A_add(cr_arena *arena, cr_array *dest, void *env)
{
    gemv_rank1 *t = env;
    cr_dtype wdt = t->e->cplx ? CR_DT_C128 : CR_DT_F64;
    if (cr__dest_ok(dest, wdt, t->e->Aarg)) {
        rank1_into(t, wdt, dest->data, 1.0);
        return CR_OK;
    }
    cr_tangent v;
    cr_status st = gemv_A_fn(arena, &v, env);
    return st != CR_OK ? st : cr__add_into(arena, dest, v);
}

/* x̄ = conj(α) op(A)ᴴ ȳ; op(A)ᴴ is Aᴴ ('N'), conj(A) ('T') or A ('C'). */
static cr_status gemv_x_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    const cr__pb_thunk *t = env;
    const gemv_env *e = t->e;
    cr__cmat r, g;
    cr_status st;
    if (e->op == 'T') {
        /* conj(A) ȳ = conj(A conj(ȳ)) */
        st = cr__cmat_copy(arena, &t->g, &g);
        if (st != CR_OK)
            return st;
        cr__cmat_conj(&g);
        st = cr__cmat_mul(arena, 'N', 'N', e->alpha, &e->A, &g, &r);
        if (st == CR_OK)
            cr__cmat_conj(&r);
    } else {
        st = cr__cmat_mul(arena, e->op == 'N' ? 'C' : 'N', 'N', conj(e->alpha), &e->A, &t->g, &r);
    }
    return st != CR_OK ? st : cr__cmat_give(arena, e->p[3], &r, true, out);
}

/* The cotangent of a scalar factor s of the term s v of the output (v and ȳ = g columns):
 * ⟨v, g⟩, projected by p. */
static cr_status factor_cot(cr_arena *arena, const cr_project *p, cr_dtype wdt, const cr__cmat *v,
                            const cr__cmat *g, cr_tangent *out)
{
    cr_complex a = 0;
    for (size_t i = 0; i < v->r; i++)
        a += conj(cr__cmat_get(v, i, 0)) * cr__cmat_get(g, i, 0);
    return cr_project_apply(arena, p, cr__scalar_tangent(wdt, a), out);
}

/* ᾱ = <op(A) x, ȳ>, Ā (InplaceableThunk), x̄ (thunk), β̄ = <y, ȳ>, ȳ_y = conj(β) ȳ. */
static cr_status gemv_pullback(CR__PULLBACK_PARAMS)
{
    gemv_env *e = env;
    size_t rows = e->Ax.r;
    cr_dtype wdt = e->cplx ? CR_DT_C128 : CR_DT_F64;
    cr__cmat g;
    cr_status st = cr__cmat_tan(arena, "gemv_pullback", *dy, 1, &rows, e->cplx, &g);
    if (st != CR_OK)
        return st;
    cr__zero_cotangents(e->diff, dx, nx);
    if (g.p == NULL)
        return CR_OK;
    if (e->diff[1] && (st = factor_cot(arena, e->p[1], wdt, &e->Ax, &g, &dx[2])) != CR_OK)
        return st;
    if (e->diff[2]) {
        CR__ARENA_NEW(arena, gemv_rank1, ta);
        ta->e = e;
        if (e->op == 'N') {
            ta->s = conj(e->alpha);
            ta->p = g;
            st = cr__cmat_copy(arena, &e->x, &ta->q);
            if (st == CR_OK)
                cr__cmat_conj(&ta->q);
        } else if (e->op == 'T') {
            ta->s = conj(e->alpha);
            ta->q = g;
            st = cr__cmat_copy(arena, &e->x, &ta->p);
            if (st == CR_OK)
                cr__cmat_conj(&ta->p);
        } else {
            ta->s = e->alpha;
            ta->p = e->x;
            st = cr__cmat_copy(arena, &g, &ta->q);
            if (st == CR_OK)
                cr__cmat_conj(&ta->q);
        }
        if (st == CR_OK)
            st = cr__thunk(arena, gemv_A_fn, gemv_A_add, ta, "gemv_pullback_A", &dx[3]);
        if (st != CR_OK)
            return st;
    }
    if (e->diff[3]) {
        st = cr__pb_thunk_new(arena, gemv_x_fn, NULL, e, &g, 0, "gemv_pullback_x", &dx[4]);
        if (st != CR_OK)
            return st;
    }
    if (!e->with_y)
        return CR_OK;
    if (e->diff[4] && (st = factor_cot(arena, e->p[4], wdt, &e->y, &g, &dx[5])) != CR_OK)
        return st;
    if (e->diff[5]) {
        /* g is shared with the thunks: scale a copy. */
        cr__cmat r;
        st = cr__cmat_new(arena, e->cplx, rows, 1, false, &r);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < rows; i++)
            cr__cmat_set(&r, i, 0, conj(e->beta) * cr__cmat_get(&g, i, 0));
        st = cr__cmat_give(arena, e->p[5], &r, true, &dx[6]);
    }
    return st;
}

/* gemv(trans, alpha, A, x) = alpha op(A) x and gemv(trans, alpha, A, x, beta, y) =
 * alpha op(A) x + beta y (the out-of-place gemv!). Pullback: ᾱ = <op(A) x, ȳ>,
 * Ā = conj(α) ȳ xᴴ mapped through op (an InplaceableThunk adding a rank-one matrix),
 * x̄ = conj(α) op(A)ᴴ ȳ (a thunk), β̄ = <y, ȳ>, ȳ_y = conj(β) ȳ. */
static cr_status gemv_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, gemv_env, e);
    cr__cmat Y;
    cr_array *o;
    cr_status st = gemv_forward(arena, args, nargs, e, &Y);
    if (st == CR_OK)
        st = cr__cmat_out(arena, &Y, true, e->dt, &o);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail(arena, args, nargs, udata, &e->p, o, y, pb,
                          (cr_pullback){gemv_pullback, e, "gemv_pullback", nargs + 1});
}
CR__ARRAY_FN(gemv, "gemv", -1)

/* frule: Ẏ = α̇ op(A) x + α (op(Ȧ) x + op(A) ẋ) + β̇ y + β ẏ. */
static cr_status gemv_frule(CR__FRULE_PARAMS)
{
    gemv_env e;
    memset(&e, 0, sizeof e);
    cr__cmat Y, dA, dx, dyv, R;
    cr_array *o;
    cr_status st = gemv_forward(arena, args, nargs, &e, &Y);
    if (st == CR_OK)
        st = cr__cmat_out(arena, &Y, true, e.dt, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    cr_complex da = 0, db = 0;
    bool nza = false, nzb = false;
    if (cr__is_diff(&args[1]))
        st = cr__tan_scalar(arena, "gemv", dargs[2], &da, &nza);
    if (st == CR_OK && e.with_y && cr__is_diff(&args[4]))
        st = cr__tan_scalar(arena, "gemv", dargs[5], &db, &nzb);
    if (st == CR_OK)
        st = cr__cmat_dx(arena, "gemv", dargs, args, 2, e.cplx, &dA);
    if (st == CR_OK)
        st = cr__cmat_dx(arena, "gemv", dargs, args, 3, e.cplx, &dx);
    dyv.p = NULL;
    if (st == CR_OK && e.with_y)
        st = cr__cmat_dx(arena, "gemv", dargs, args, 5, e.cplx, &dyv);
    if (st == CR_OK)
        st = cr__cmat_new(arena, e.cplx, Y.r, 1, true, &R);
    if (st != CR_OK)
        return st;
    if (dA.p != NULL)
        cr__cmat_gemm(e.op, 'N', e.alpha, &dA, &e.x, 1.0, &R);
    if (dx.p != NULL)
        cr__cmat_gemm(e.op, 'N', e.alpha, &e.A, &dx, 1.0, &R);
    if (nzb)
        for (size_t i = 0; i < R.r; i++)
            cr__cmat_set(&R, i, 0, cr__cmat_get(&R, i, 0) + db * cr__cmat_get(&e.y, i, 0));
    for (size_t i = 0; i < R.r; i++) {
        cr_complex v = cr__cmat_get(&R, i, 0);
        if (nza)
            v += da * cr__cmat_get(&e.Ax, i, 0);
        if (dyv.p != NULL)
            v += e.beta * cr__cmat_get(&dyv, i, 0);
        cr__cmat_set(&R, i, 0, v);
    }
    cr_array *r;
    st = cr__cmat_out(arena, &R, true, e.cplx ? CR_DT_C128 : CR_DT_F64, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}
/* ---- Test registrations ------------------------------------------------------------------- */

static cr_value rand_number(uint64_t *rng)
{
    cr_dtype dt = cr__rng_dtype(rng);
    return cr__scalar_value(dt, cr__c(cr__rng_unif(rng, -2, 2), cr__rng_unif(rng, -2, 2)));
}

cr_value cr__rand_flag(uint64_t *rng, const char *flags)
{
    return cr_value_i64(flags[cr__rng_below(rng, strlen(flags))]);
}

/* nrm2: a vector or a matrix of any float type. */
static cr_status sample_nrm2(CR__SAMPLE_PARAMS)
{
    size_t shape[2] = {2 + cr__rng_below(rng, 4), 3};
    cr_array *x;
    cr_status st =
        cr__rand_array(arena, rng, cr__rng_dtype(rng), 1 + cr__rng_below(rng, 2), shape, -2, 2, &x);
    if (st == CR_OK)
        args[0] = cr_value_array(x);
    return st;
}

/* gemv: trans among 'N', 'T', 'C'; A 3 x 2 or 2 x 3; mixed element types. */
static cr_status sample_gemv(CR__SAMPLE_PARAMS)
{
    args[0] = cr__rand_flag(rng, "NTC");
    args[1] = rand_number(rng);
    size_t shape[2] = {2 + cr__rng_below(rng, 2), 2 + cr__rng_below(rng, 2)};
    size_t nx = args[0].u.i64 == 'N' ? shape[1] : shape[0];
    size_t ny = args[0].u.i64 == 'N' ? shape[0] : shape[1];
    cr_array *A, *x, *y;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 2, shape, -1.5, 1.5, &A);
    if (st == CR_OK)
        st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 1, &nx, -1.5, 1.5, &x);
    if (st != CR_OK)
        return st;
    args[2] = cr_value_array(A);
    args[3] = cr_value_array(x);
    if (nargs == 6) {
        args[4] = rand_number(rng);
        st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 1, &ny, -1.5, 1.5, &y);
        if (st == CR_OK)
            args[5] = cr_value_array(y);
    }
    return st;
}

static const cr_rule_test k_t_nrm2 = {.sample = sample_nrm2};
static const cr_rule_test k_t_gemv = {.sample = sample_gemv};

cr_status cr__linalg_register_blas_calls(cr_registry *reg)
{
    static const cr_argspec s_nrm2[1] = {{CR__M_FARRAY, NULL}};
    static const cr_argspec s_gemv[6] = {{CR_M_INT, NULL},     {CR__M_NUM, NULL},
                                         {CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL},
                                         {CR__M_NUM, NULL},    {CR__M_FARRAY, NULL}};
    cr_status st = cr__add_rule_so(reg, &nrm2_function, s_nrm2, 1, false, nrm2_frule, nrm2_rrule,
                                   &k_t_nrm2, CR_NONLINEAR, &cr__form_norm);
    if (st == CR_OK)
        st = cr__add_rule(reg, &gemv_function, s_gemv, 4, false, gemv_frule, gemv_rrule, &k_t_gemv);
    if (st == CR_OK)
        st = cr__add_rule(reg, &gemv_function, s_gemv, 6, false, gemv_frule, gemv_rrule, &k_t_gemv);
    return st;
}
