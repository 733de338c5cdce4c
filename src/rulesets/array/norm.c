/*
 * Norms: norm(A, p) of the elements for any p (2 by default), opnorm(A, p) of a matrix for
 * p = 1, 2, Inf, and normalize(A, p) = A / norm(A, p). opnorm(A, 2) and normalize reuse the
 * rules of svdvals and norm through dispatch.
 */
#include <math.h>

#include "reduce_impl.h"

/* ---- norm --------------------------------------------------------------------------------- */

typedef struct norm_env {
    const cr_array *A, *Aw; /* Aw contiguous work */
    cr_project *pA, *pp;
    double p, y;
    size_t imax; /* p = Inf: the first maximal element */
    bool dp;     /* p is perturbable */
} norm_env;

/* y = (Σ |x|^p)^(1/p), computed as m (Σ (|x|/m)^p)^(1/p) with m = max |x| so that it
 * neither overflows nor underflows; p = Inf gives m. */
static cr_status norm_forward(cr_arena *arena, const cr_value *args, size_t nargs, norm_env *e)
{
    const cr_array *A;
    cr_status st = cr__nargs_float_array(arena, "norm", args, nargs, 1, 2, &A);
    if (st != CR_OK)
        return st;
    e->p = 2;
    if (nargs == 2) {
        cr_kind k = args[1].kind;
        if (k != CR_KIND_F64 && k != CR_KIND_F32 && k != CR_KIND_I64 && k != CR_KIND_I32)
            return CR__FAIL(arena, CR_EINVAL, "norm: p must be a real number");
        e->p = creal(cr__scalar_of(&args[1]));
        e->dp = cr__is_diff(&args[1]);
        if (isnan(e->p))
            return CR__FAIL(arena, CR_EDOMAIN, "norm: p is NaN");
    }
    e->A = A;
    st = cr__dense(arena, A, cr__work((cr_dtype)A->dtype), &e->Aw);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(A);
    if (e->p == 0) {
        /* Julia's norm(x, 0): the number of nonzero elements, a step function of x */
        double c = 0;
        for (size_t i = 0; i < n; i++)
            c += cr__load(e->Aw, (ptrdiff_t)i) != 0;
        e->y = c;
        return CR_OK;
    }
    if (e->p < 0) {
        /* the smallest |x| scales: (Σ (|x|/m)^p)^(1/p) m with every term <= 1; a zero
         * element makes the norm 0; p = -Inf is the smallest |x| itself */
        double m = HUGE_VAL;
        e->imax = 0;
        for (size_t i = 0; i < n; i++) {
            double a = cabs(cr__load(e->Aw, (ptrdiff_t)i));
            if (a < m || isnan(a)) {
                m = a;
                e->imax = i;
                if (isnan(a))
                    break;
            }
        }
        if (n == 0)
            m = isinf(e->p) ? HUGE_VAL : 0; /* Julia: norm([], -Inf) = Inf, other p 0 */
        if (isinf(e->p) || m == 0 || !isfinite(m) || n == 0) {
            e->y = m;
            return CR_OK;
        }
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += pow(cabs(cr__load(e->Aw, (ptrdiff_t)i)) / m, e->p);
        e->y = m * pow(s, 1 / e->p);
        return CR_OK;
    }
    double m = 0;
    e->imax = 0;
    for (size_t i = 0; i < n; i++) {
        double a = cabs(cr__load(e->Aw, (ptrdiff_t)i));
        if (a > m || isnan(a)) {
            m = a;
            e->imax = i;
            if (isnan(a))
                break;
        }
    }
    if (isinf(e->p) || m == 0 || !isfinite(m)) {
        e->y = m;
        return CR_OK;
    }
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double a = cabs(cr__load(e->Aw, (ptrdiff_t)i)) / m;
        s += e->p == 2 ? a * a : e->p == 1 ? a : pow(a, e->p);
    }
    e->y = m * (e->p == 2 ? sqrt(s) : e->p == 1 ? s : pow(s, 1 / e->p));
    return CR_OK;
}

/* ∂y/∂x_i = |x_i|^(p-2) x_i y^(1-p) (sign(x_i) for p = 1; the first maximal element's sign
 * for p = Inf, the first minimal one's for p = -Inf; 0 for p = 0, a count; 0 at y = 0, the
 * subgradient); the pullback multiplies by ȳ (conj convention: x̄ = ∂y/∂x · ȳ for the real
 * y). ∂y/∂p = y (Σ |x|^p log|x| / Σ|x|^p - log y) / p. */
static cr_complex norm_partial(const norm_env *e, size_t i)
{
    cr_complex x = cr__load(e->Aw, (ptrdiff_t)i);
    double a = cabs(x), p = e->p;
    if (e->y == 0 || a == 0 || p == 0 || !isfinite(e->y))
        return 0;
    if (isinf(p))
        return i == e->imax ? x / a : 0;
    if (p == 2)
        return x / e->y;
    if (p == 1)
        return x / a;
    return x * pow(a / e->y, p - 2) / e->y;
}

static double norm_dp(const norm_env *e)
{
    if (isinf(e->p) || e->p == 0 || e->y == 0 || !isfinite(e->y))
        return 0;
    size_t n = cr_array_numel(e->A);
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double a = cabs(cr__load(e->Aw, (ptrdiff_t)i)) / e->y;
        if (a == 0)
            continue;
        double ap = pow(a, e->p);
        num += ap * log(a);
        den += ap;
    }
    /* With a_i = |x_i| / y: Σ a^p = 1, so ∂y/∂p = y Σ a^p log a / p. */
    return e->y * (num / den) / e->p;
}

static cr_status norm_pullback(CR__PULLBACK_PARAMS)
{
    norm_env *e = env;
    cr__dx_none(dx, nx);
    cr_complex g;
    bool nz;
    cr_status st = cr__tan_scalar(arena, "norm_pullback", *dy, &g, &nz);
    if (st != CR_OK)
        return st;
    double gr = creal(g);
    if (e->dp)
        dx[2] = cr_tangent_zero();
    if (!nz) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    if (e->dp) {
        st = cr_project_apply(arena, e->pp, cr_tangent_f64(norm_dp(e) * gr), &dx[2]);
        if (st != CR_OK)
            return st;
    }
    cr_array *out;
    st = cr__new_like(arena, (cr_dtype)e->Aw->dtype, e->A, false, &out);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(e->A);
    for (size_t i = 0; i < n; i++)
        cr__store(out, (ptrdiff_t)i, norm_partial(e, i) * gr);
    return cr__give(arena, e->pA, out, &dx[1]);
}

static cr_status norm_value(const norm_env *e, cr_value *y)
{
    *y = cr__scalar_value(e->A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64, e->y);
    return CR_OK;
}

/* norm(A), norm(A, p): the p-norm of A's elements (p = 2 by default: Frobenius for a
 * matrix, as Julia's norm). */
static cr_status norm_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, norm_env, e);
    cr_status st = norm_forward(arena, args, nargs, e);
    if (st == CR_OK)
        st = norm_value(e, y);
    if (st == CR_OK && udata != CR__PRIMAL_ONLY && nargs == 2)
        st = cr_project_new(arena, &args[1], &e->pp);
    return cr__rrule_end(arena, st, udata, &args[0], &e->pA, norm_pullback, e, "norm_pullback",
                         nargs + 1, pb);
}
CR__ARRAY_FN(norm, "norm", -1)

/* frule: ẏ = Σ re(conj(∂y/∂x_i) ẋ_i) + ∂y/∂p ṗ. */
static cr_status norm_frule(CR__FRULE_PARAMS)
{
    norm_env e = {0};
    cr_status st = norm_forward(arena, args, nargs, &e);
    if (st == CR_OK)
        st = norm_value(&e, y);
    const cr_array *t = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, "norm", dargs, args, 0, (cr_dtype)e.Aw->dtype, &t);
    cr_complex pd = 0;
    bool nzp = false;
    if (st == CR_OK && e.dp)
        st = cr__tan_scalar(arena, "norm", dargs[2], &pd, &nzp);
    if (st != CR_OK)
        return st;
    if (t == NULL && !nzp) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    double s = nzp ? norm_dp(&e) * creal(pd) : 0;
    size_t n = cr_array_numel(e.A);
    for (size_t i = 0; t != NULL && i < n; i++)
        s += creal(conj(norm_partial(&e, i)) * cr__load(t, (ptrdiff_t)i));
    *dy = cr__scalar_tangent(e.A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64, s);
    return CR_OK;
}

/* norm(A, p) with p among 1, 2, 3, 0, -1 (integers: no tangent) and 1.5, 2.5, -0.5, -2.5,
 * -Inf (perturbed). For p <= 0 the entries get distinct moduli 0.5 + i/4 + [0, 1/8) in a
 * random order with random signs (phases for c128): finite differences then cross neither
 * a zero (where the count of p = 0 steps) nor a tie of the smallest modulus (p = -Inf). */
static cr_status sample_norm(CR__SAMPLE_PARAMS)
{
    cr_status st = cr__sample_red(arena, rng, args, 1, env);
    if (st != CR_OK || nargs < 2)
        return st;
    static const double ps[10] = {1, 2, 3, 0, -1, 1.5, 2.5, -0.5, -2.5, -HUGE_VAL};
    size_t k = cr__rng_below(rng, 10);
    args[1] = k < 5 ? cr_value_i64((int64_t)ps[k]) : cr_value_f64(ps[k]);
    if (ps[k] > 0)
        return CR_OK;
    cr_array *A = args[0].u.arr;
    cr__fill_distinct(rng, A, -2); /* moduli 0.5 + i/4 + [0, 1/8) */
    size_t n = cr_array_numel(A);
    for (size_t i = 0; i < n; i++) {
        cr_complex v = cr__load(A, (ptrdiff_t)i);
        cr__store(A, (ptrdiff_t)i,
                  A->dtype == CR_DT_C128 ? v * cexp(cr__c(0, cr__rng_unif(rng, -3, 3)))
                                         : (cr__rng_below(rng, 2) ? -v : v));
    }
    return CR_OK;
}
static const cr_rule_test k_t_norm = {.sample = sample_norm, .env = (void *)&cr__so_red_all};

/* The signatures of norm, opnorm and normalize: (A) and (A, p). */
static const cr_argspec k_sig_a[1] = {{CR__M_FARRAY, NULL}};
static const cr_argspec k_sig_ap[2] = {{CR__M_FARRAY, NULL},
                                       {CR_M_F64 | CR_M_F32 | CR_M_INT, NULL}};

cr_status cr__array_register_norm(cr_registry *reg)
{
    static const cr__array_rule k[] = {CR__ROWS2(norm, norm_frule, k_sig_a, k_sig_ap,
                                                 &cr__t_red_all, &k_t_norm, CR_NONLINEAR,
                                                 &cr__form_norm)};
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}

/* ---- opnorm -------------------------------------------------------------------------------- */

typedef struct opn_env {
    const cr_array *A;
    const cr_array *Aw; /* dense work copy (p = 1, Inf) */
    cr_project *pA;
    int p;       /* 1, 2, or 0 for Inf */
    size_t star; /* the maximal column (p = 1) or row (Inf); SIZE_MAX when A is empty */
    double y;
    cr_pullback sv; /* svdvals' pullback (p = 2) */
    size_t k;       /* number of singular values */
    cr_dtype sdt;   /* their dtype */
    cr_dtype odt;   /* the output's dtype (f32 or f64) */
    size_t nargs;
} opn_env;

static cr_status opn_parse(cr_arena *arena, const cr_value *args, size_t nargs, opn_env *e)
{
    const cr_array *A;
    cr_status st = cr__nargs_array(arena, "opnorm", args, nargs, 1, 2, &A);
    if (st != CR_OK)
        return st;
    if (A->ndim != 2 || !cr_dtype_is_float((cr_dtype)A->dtype))
        return CR__FAIL(arena, CR_ESHAPE, "opnorm: expected an f64, f32 or c128 matrix");
    e->A = A;
    e->nargs = nargs;
    e->odt = A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    e->p = 2;
    if (nargs == 2) {
        cr_kind k = args[1].kind;
        if (k != CR_KIND_F64 && k != CR_KIND_F32 && k != CR_KIND_I64 && k != CR_KIND_I32)
            return CR__FAIL(arena, CR_EINVAL, "opnorm: p must be a real number (1, 2 or Inf)");
        double p = creal(cr__scalar_of(&args[1]));
        if (p == 1 || p == 2)
            e->p = (int)p;
        else if (isinf(p) && p > 0)
            e->p = 0;
        else
            return CR__FAIL(arena, CR_EINVAL, "opnorm: p must be 1, 2 or Inf (got %g)", p);
    }
    return CR_OK;
}

/* sign(a) = a/|a|, 0 at 0: ∂|a|/∂a in the conj convention. */
static cr_complex sgn(cr_complex a)
{
    double m = cabs(a);
    return m == 0 ? 0 : a / m;
}

/* p = 1: the largest column sum of |a_ij|; p = Inf: the largest row sum. Ties go to the
 * first (lowest-index) column or row; a NaN sum counts as the largest. */
static cr_status opn_abs_sums(cr_arena *arena, opn_env *e)
{
    cr_status st = cr__dense(arena, e->A, cr__work((cr_dtype)e->A->dtype), &e->Aw);
    if (st != CR_OK)
        return st;
    size_t r = e->A->shape[0], c = e->A->shape[1];
    size_t outer = e->p == 1 ? c : r, inner = e->p == 1 ? r : c;
    e->star = SIZE_MAX;
    e->y = 0;
    if (r == 0 || c == 0)
        return CR_OK;
    for (size_t j = 0; j < outer; j++) {
        double s = 0;
        for (size_t i = 0; i < inner; i++) {
            size_t off = e->p == 1 ? i * c + j : j * c + i;
            s += cabs(cr__load(e->Aw, (ptrdiff_t)off));
        }
        if (e->star == SIZE_MAX || s > e->y || (isnan(s) && !isnan(e->y))) {
            e->y = s;
            e->star = j;
        }
    }
    return CR_OK;
}

/* Offset of element i of the selected column / row. */
static size_t opn_off(const opn_env *e, size_t i)
{
    size_t c = e->A->shape[1];
    return e->p == 1 ? i * c + e->star : e->star * c + i;
}

static size_t opn_len(const opn_env *e)
{
    return e->p == 1 ? e->A->shape[0] : e->A->shape[1];
}

static cr_status opn_forward(cr_arena *arena, const cr_value *args, size_t nargs, bool pullback,
                             opn_env *e, cr_value *y)
{
    cr_status st = opn_parse(arena, args, nargs, e);
    if (st != CR_OK)
        return st;
    if (e->p != 2) {
        st = opn_abs_sums(arena, e);
        if (st == CR_OK)
            *y = cr__scalar_value(e->odt, e->y);
        return st;
    }
    /* p = 2: the largest singular value, through svdvals' rules. */
    cr_value s;
    st = pullback ? cr_rrule(NULL, arena, &cr_fn_svdvals, &args[0], 1, &s, &e->sv)
                  : cr_function_call(arena, &cr_fn_svdvals, &args[0], 1, &s);
    if (st == CR_NOTHING)
        return CR__FAIL(arena, CR_EUNIMPL, "opnorm: p = 2 needs svdvals (built without LAPACKE)");
    if (st != CR_OK)
        return st;
    e->k = cr_array_numel(s.u.arr);
    e->sdt = (cr_dtype)s.u.arr->dtype;
    e->y = e->k > 0 ? creal(cr_array_get_linear(s.u.arr, 0)) : 0.0;
    *y = cr__scalar_value(e->odt, e->y);
    return CR_OK;
}

typedef struct opn_thunk {
    const opn_env *e;
    double g;
} opn_thunk;

static void opn_scatter(const opn_thunk *t, cr_array *dest)
{
    const opn_env *e = t->e;
    for (size_t i = 0; i < opn_len(e); i++) {
        size_t off = opn_off(e, i);
        cr_complex v = sgn(cr__load(e->Aw, (ptrdiff_t)off)) * t->g;
        cr__store(dest, (ptrdiff_t)off, cr__load(dest, (ptrdiff_t)off) + v);
    }
}

static cr_status opn_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    opn_thunk *t = env;
    cr_array *dx;
    cr_status st = cr__new_like(arena, (cr_dtype)t->e->Aw->dtype, t->e->A, true, &dx);
    if (st != CR_OK)
        return st;
    opn_scatter(t, dx);
    return cr__give(arena, t->e->pA, dx, out);
}

CR__THUNK_ADD(opn_add, opn_thunk, (cr_dtype)t->e->Aw->dtype, t->e->A, opn_scatter(t, dest),
              opn_thunk_fn)

/* p = 1, Inf: Ā = sign(A) ȳ on the maximal column / row, 0 elsewhere (an InplaceableThunk
 * that adds one column or row). p = 2: svdvals' pullback with s̄ = (ȳ, 0, ..., 0), which is
 * u₁ v₁ᴴ ȳ for the top singular pair LAPACK returned. */
static cr_status opn_pullback(CR__PULLBACK_PARAMS)
{
    opn_env *e = env;
    cr__dx_none(dx, nx);
    dx[1] = cr_tangent_zero();
    cr_complex g;
    bool nz;
    cr_status st = cr__tan_scalar(arena, "opnorm_pullback", *dy, &g, &nz);
    if (st != CR_OK || !nz)
        return st;
    if (e->p == 2) {
        if (e->k == 0)
            return CR_OK;
        cr_array *S;
        st = cr__new(arena, e->sdt, 1, &e->k, true, &S);
        if (st != CR_OK)
            return st;
        cr__store(S, 0, creal(g));
        cr_tangent seed = cr_tangent_array(S), d[2];
        st = cr_pullback_call(arena, &e->sv, &seed, d, 2);
        if (st == CR_OK)
            dx[1] = d[1];
        return st;
    }
    if (e->star == SIZE_MAX)
        return CR_OK;
    CR__ARENA_NEW(arena, opn_thunk, t);
    t->e = e;
    t->g = creal(g);
    return cr__thunk(arena, opn_thunk_fn, opn_add, t, "opnorm_pullback_thunk", &dx[1]);
}

static cr_status opnorm_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, opn_env, e);
    bool primal = udata == CR__PRIMAL_ONLY;
    cr_status st = opn_forward(arena, args, nargs, !primal, e, y);
    return cr__rrule_end(arena, st, udata, &args[0], &e->pA, opn_pullback, e, "opnorm_pullback",
                         nargs + 1, pb);
}
CR__ARRAY_FN(opnorm, "opnorm", -1)

/* frule: p = 1, Inf: ẏ = Σ re(conj(sign a) ȧ) over the maximal column / row; p = 2: the
 * first component of svdvals' frule, re(u₁ᴴ Ȧ v₁). p itself has no tangent. */
static cr_status opnorm_frule(CR__FRULE_PARAMS)
{
    opn_env e = {0};
    cr_status st = opn_parse(arena, args, nargs, &e);
    if (st != CR_OK)
        return st;
    *dy = cr_tangent_zero();
    if (e.p == 2) {
        cr_tangent d2[2] = {cr_tangent_none(), dargs[1]}, ds;
        cr_value s;
        st = cr_frule(NULL, arena, d2, &cr_fn_svdvals, &args[0], 1, &s, &ds);
        if (st == CR_NOTHING)
            return CR__FAIL(arena, CR_EUNIMPL,
                            "opnorm: p = 2 needs svdvals (built without LAPACKE)");
        if (st != CR_OK)
            return st;
        size_t k = cr_array_numel(s.u.arr);
        *y = cr__scalar_value(e.odt, k > 0 ? creal(cr_array_get_linear(s.u.arr, 0)) : 0.0);
        const cr_array *dsa;
        st = cr__tan_array(arena, "opnorm", ds, 1, &k, CR_DT_F64, &dsa);
        if (st == CR_OK && dsa != NULL && k > 0)
            *dy = cr__scalar_tangent(e.odt, ((const double *)dsa->data)[0]);
        return st;
    }
    st = opn_abs_sums(arena, &e);
    if (st != CR_OK)
        return st;
    *y = cr__scalar_value(e.odt, e.y);
    const cr_array *dA;
    st = cr__dx_array(arena, "opnorm", dargs, args, 0, (cr_dtype)e.Aw->dtype, &dA);
    if (st != CR_OK || dA == NULL || e.star == SIZE_MAX)
        return st;
    double s = 0;
    for (size_t i = 0; i < opn_len(&e); i++) {
        size_t off = opn_off(&e, i);
        s += creal(conj(sgn(cr__load(e.Aw, (ptrdiff_t)off))) * cr__load(dA, (ptrdiff_t)off));
    }
    *dy = cr__scalar_tangent(e.odt, s);
    return CR_OK;
}

/* ---- normalize ----------------------------------------------------------------------------- */

typedef struct nz_env {
    const cr_array *A;
    cr_project *pA;
    cr_array *Y; /* A / n, work dtype */
    double n;
    cr_pullback npb; /* norm's pullback */
    size_t nargs;
} nz_env;

/* y = A / n with n = norm(A, p) from norm's rules. A zero (or NaN) norm is CR_EDOMAIN:
 * the direction of a zero array is undefined (Julia returns NaNs). */
static cr_status nz_forward(cr_arena *arena, const cr_value *args, size_t nargs, double n,
                            nz_env *e, cr_value *y)
{
    if (!(n > 0))
        return CR__FAIL(arena, CR_EDOMAIN, "normalize: the norm of the array is %g", n);
    e->A = args[0].u.arr;
    e->n = n;
    e->nargs = nargs;
    const cr_array *Aw;
    cr_dtype wdt = cr__work((cr_dtype)e->A->dtype);
    cr_status st = cr__dense(arena, e->A, wdt, &Aw);
    if (st == CR_OK)
        st = cr__new_like(arena, wdt, e->A, false, &e->Y);
    if (st != CR_OK)
        return st;
    size_t m = cr_array_numel(e->A);
    for (size_t i = 0; i < m; i++)
        cr__store(e->Y, (ptrdiff_t)i, cr__load(Aw, (ptrdiff_t)i) / n);
    cr_array *o;
    st = cr__cast(arena, e->Y, (cr_dtype)e->A->dtype, &o);
    if (st != CR_OK)
        return st;
    if (o == e->Y) { /* the output is not the pullback's copy */
        st = cr_array_copy(arena, e->Y, &o);
        if (st != CR_OK)
            return st;
    }
    *y = cr_value_array(o);
    return CR_OK;
}

static cr_status nz_check(cr_arena *arena, const cr_value *args, size_t nargs)
{
    const cr_array *A;
    return cr__nargs_float_array(arena, "normalize", args, nargs, 1, 2, &A);
}

/* Ā = Ȳ / n + norm's pullback at n̄ = -re⟨y, Ȳ⟩ / n (which also gives p̄ for a float p). */
static cr_status nz_pullback(CR__PULLBACK_PARAMS)
{
    nz_env *e = env;
    const cr_array *g;
    cr_dtype wdt = (cr_dtype)e->Y->dtype;
    size_t m = cr_array_numel(e->A);
    cr_status st =
        cr__tan_array(arena, "normalize_pullback", *dy, e->A->ndim, e->A->shape, wdt, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_zero();
    if (e->nargs == 2)
        dx[2] = cr_tangent_zero();
    if (g == NULL)
        return CR_OK;
    double nbar = -creal(cr__dotc((cr_dtype)e->Y->dtype, m, e->Y->data, g->data)) / e->n;
    cr_tangent seed = cr_tangent_f64(nbar), d[3];
    st = cr_pullback_call(arena, &e->npb, &seed, d, e->nargs + 1);
    cr_array *raw;
    if (st == CR_OK)
        st = cr__new_like(arena, wdt, e->A, false, &raw);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < m; i++)
        cr__store(raw, (ptrdiff_t)i, cr__load(g, (ptrdiff_t)i) / e->n);
    st = cr__add_into(arena, raw, d[1]);
    if (st == CR_OK)
        st = cr__give(arena, e->pA, raw, &dx[1]);
    if (st == CR_OK && e->nargs == 2)
        dx[2] = d[2];
    return st;
}

static cr_status normalize_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, nz_env, e);
    bool primal = udata == CR__PRIMAL_ONLY;
    cr_value nv;
    cr_status st = nz_check(arena, args, nargs);
    if (st == CR_OK)
        st = primal ? cr_function_call(arena, &cr_fn_norm, args, nargs, &nv)
                    : cr_rrule(NULL, arena, &cr_fn_norm, args, nargs, &nv, &e->npb);
    if (st == CR_OK)
        st = nz_forward(arena, args, nargs, creal(cr__scalar_of(&nv)), e, y);
    return cr__rrule_end(arena, st, udata, &args[0], &e->pA, nz_pullback, e, "normalize_pullback",
                         nargs + 1, pb);
}
CR__ARRAY_FN(normalize, "normalize", -1)

/* frule: ẏ = (Ȧ - y ṅ) / n with ṅ from norm's frule (which includes ṗ for a float p). */
static cr_status normalize_frule(CR__FRULE_PARAMS)
{
    nz_env e = {0};
    cr_value nv;
    cr_tangent dn = cr_tangent_zero();
    cr_status st = nz_check(arena, args, nargs);
    if (st == CR_OK)
        st = cr_frule(NULL, arena, dargs, &cr_fn_norm, args, nargs, &nv, &dn);
    if (st == CR_OK)
        st = nz_forward(arena, args, nargs, creal(cr__scalar_of(&nv)), &e, y);
    cr_dtype wdt = cr__work((cr_dtype)args[0].u.arr->dtype);
    const cr_array *dA = NULL;
    cr_complex ndot = 0;
    bool nzn = false;
    if (st == CR_OK)
        st = cr__dx_array(arena, "normalize", dargs, args, 0, wdt, &dA);
    if (st == CR_OK)
        st = cr__tan_scalar(arena, "normalize", dn, &ndot, &nzn);
    if (st != CR_OK)
        return st;
    if (dA == NULL && !nzn) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    size_t m = cr_array_numel(e.A);
    cr_array *o, *oc;
    st = cr__new_like(arena, wdt, e.A, false, &o);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < m; i++) {
        cr_complex a = dA != NULL ? cr__load(dA, (ptrdiff_t)i) : 0;
        cr__store(o, (ptrdiff_t)i, (a - cr__load(e.Y, (ptrdiff_t)i) * creal(ndot)) / e.n);
    }
    st = cr__cast(arena, o, (cr_dtype)e.A->dtype, &oc);
    if (st == CR_OK)
        *dy = cr_tangent_array(oc);
    return st;
}

/* ---- Test registrations of opnorm and normalize ---- */

/* opnorm: matrices whose column (row) abs-sums are well separated and entries away from
 * zero, so that neither the maximal column nor a sign changes under finite differences;
 * for p = 2, random matrices (their top singular value is simple almost surely). */
static cr_status sample_opnorm(CR__SAMPLE_PARAMS)
{
    size_t shape[2] = {1 + cr__rng_below(rng, 4), 1 + cr__rng_below(rng, 4)};
    cr_dtype dt = cr__rng_dtype(rng);
#if defined(CR_HAVE_LAPACKE)
    int p = nargs < 2 ? 2 : (int)cr__rng_below(rng, 3); /* 0 (Inf), 1, 2 */
#else
    int p = (int)cr__rng_below(rng, 2); /* 0 (Inf), 1 */
#endif
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, dt, 2, shape, 0.5, 1.5, &A);
    if (st != CR_OK)
        return st;
    size_t r = shape[0], c = shape[1];
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++) {
            ptrdiff_t off = (ptrdiff_t)(i * c + j);
            cr_complex a = cr__load(A, off);
            /* Column j (p = 1) or row i (Inf) scaled by its index: sums well apart. */
            double scale = 1 + (double)(p == 1 ? j : i);
            if (cr__rng_below(rng, 2))
                a = -a;
            cr__store(A, off, a * scale);
        }
    args[0] = cr_value_array(A);
    if (nargs < 2)
        return CR_OK;
    args[1] = p == 0 ? cr_value_f64((double)INFINITY) : cr_value_i64(p);
    return CR_OK;
}

/* normalize: a random array and p among 1, 2, 3 (integers) and 1.5, 2.5 (perturbed). */
static cr_status sample_normalize(CR__SAMPLE_PARAMS)
{
    static const size_t shapes[2][2] = {{5, 0}, {2, 3}};
    size_t k = cr__rng_below(rng, 2);
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), k + 1, shapes[k], 0.25, 2, &A);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(A);
    for (size_t i = 0; i < n; i++)
        if (cr__rng_below(rng, 2))
            cr__store(A, (ptrdiff_t)i, -cr__load(A, (ptrdiff_t)i));
    args[0] = cr_value_array(A);
    if (nargs < 2)
        return CR_OK;
    static const double ps[5] = {1, 2, 3, 1.5, 2.5};
    size_t j = cr__rng_below(rng, 5);
    args[1] = j < 3 ? cr_value_i64((int64_t)ps[j]) : cr_value_f64(ps[j]);
    return CR_OK;
}

static const cr_rule_test k_t_opnorm = {.sample = sample_opnorm};
static const cr_rule_test k_t_normalize = {.sample = sample_normalize};

cr_status cr__array_register_opnorm(cr_registry *reg)
{
    static const cr__array_rule k[] = {
        CR__ROW(opnorm, opnorm_frule, k_sig_a, 1, &k_t_opnorm, CR_NONLINEAR, &cr__form_opnorm,
                true),
        CR__ROW(opnorm, opnorm_frule, k_sig_ap, 2, &k_t_opnorm, CR_NONLINEAR, &cr__form_opnorm,
                false),
        CR__ROWS2(normalize, normalize_frule, k_sig_a, k_sig_ap, &k_t_normalize, &k_t_normalize,
                  CR_NONLINEAR, &cr__form_normalize),
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
