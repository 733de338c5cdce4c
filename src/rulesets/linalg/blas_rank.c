/*
 * The BLAS routines of an unconjugated dot product and of symmetric and Hermitian rank-k
 * updates, in functional form like gemv and trmm (rules_linalg.h): dotu (Σ x_i y_i), syrk
 * (α op(A) op(A)ᵀ + β C on a triangle) and herk (α op(A) op(A)ᴴ + β C, α and β real).
 * Arguments are never mutated and results are new arrays; plain loops and the work-matrix
 * products, so they are registered in every build.
 */

#include "linalg_impl.h"

/* ---- dotu(x, y) = Σ x_i y_i ------------------------------------------------------------- */

typedef struct dotu_env {
    cr__cmat x, y; /* columns */
    bool cplx;
    cr_project **p;
} dotu_env;

static cr_status dotu_forward(cr_arena *arena, const cr_value *args, size_t nargs, dotu_env *e,
                              cr_complex *s, cr_dtype *dt)
{
    const cr_array *v[2] = {NULL, NULL};
    cr_status st = cr__nargs(arena, "dotu", nargs, 2, 2);
    for (size_t i = 0; i < 2 && st == CR_OK; i++)
        st = cr__array_arg(arena, "dotu", args, nargs, i, &v[i]);
    if (st != CR_OK)
        return st;
    const cr_array *x = v[0], *y = v[1];
    if (x->ndim != 1 || y->ndim != 1 || x->shape[0] != y->shape[0] ||
        !cr_dtype_is_float((cr_dtype)x->dtype) || !cr_dtype_is_float((cr_dtype)y->dtype))
        return CR__FAIL(arena, CR_ESHAPE, "dotu: x and y must be float vectors of one length");
    *dt = cr__promote((cr_dtype)x->dtype, (cr_dtype)y->dtype);
    e->cplx = *dt == CR_DT_C128;
    st = cr__cmat_from(arena, x, e->cplx, &e->x);
    if (st == CR_OK)
        st = cr__cmat_from(arena, y, e->cplx, &e->y);
    if (st != CR_OK)
        return st;
    *s = 0;
    for (size_t i = 0; i < e->x.r; i++)
        *s += cr__cmat_get(&e->x, i, 0) * cr__cmat_get(&e->y, i, 0);
    return CR_OK;
}

/* x̄ = s̄ conj(y), ȳ = s̄ conj(x). */
static cr_status dotu_pullback(CR__PULLBACK_PARAMS)
{
    const dotu_env *e = env;
    cr_complex g = 0;
    bool nz = false;
    dx[0] = cr_tangent_none();
    cr_status st = cr__tan_scalar(arena, "dotu_pullback", *dy, &g, &nz);
    if (st != CR_OK || !nz) {
        dx[1] = dx[2] = cr_tangent_zero();
        return st;
    }
    for (size_t k = 0; k < 2; k++) {
        const cr__cmat *other = k == 0 ? &e->y : &e->x;
        cr__cmat r;
        st = cr__cmat_new(arena, e->cplx, other->r, 1, false, &r);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < r.r; i++)
            cr__cmat_set(&r, i, 0, g * conj(cr__cmat_get(other, i, 0)));
        st = cr__cmat_give(arena, e->p[k], &r, true, &dx[k + 1]);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

/* The env (in the arena), *y and the output's dtype. */
static cr_status dotu_run(cr_arena *arena, const cr_value *args, size_t nargs, dotu_env **env,
                          cr_value *y, cr_dtype *dt)
{
    dotu_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(dotu_env));
    cr_complex s = 0;
    cr_status st =
        e == NULL ? CR__ALLOC_STATUS(arena) : dotu_forward(arena, args, nargs, e, &s, dt);
    *env = e;
    if (st == CR_OK)
        *y = cr__scalar_value(*dt, s);
    return st;
}

static cr_status dotu_rrule_impl(cr_arena *arena, int unused, const cr_value *args, size_t nargs,
                                 cr_value *y, cr_pullback *pb, const void *udata)
{
    (void)unused;
    dotu_env *e;
    cr_dtype dt;
    cr_status st = dotu_run(arena, args, nargs, &e, y, &dt);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    st = cr__projectors(arena, args, nargs, &e->p);
    if (st == CR_OK)
        *pb = (cr_pullback){dotu_pullback, e, "dotu_pullback", nargs + 1};
    return st;
}

/* ṡ = Σ ẋ_i y_i + x_i ẏ_i. */
static cr_status dotu_frule_impl(cr_arena *arena, int unused, const cr_tangent *dargs,
                                 const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    (void)unused;
    dotu_env *e;
    cr_complex ds = 0;
    cr_dtype dt;
    cr__cmat d[2];
    cr_status st = dotu_run(arena, args, nargs, &e, y, &dt);
    for (size_t k = 0; k < 2 && st == CR_OK; k++)
        st = cr__cmat_dx(arena, "dotu", dargs, args, k, e->cplx, &d[k]);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < e->x.r; i++) {
        if (d[0].p != NULL)
            ds += cr__cmat_get(&d[0], i, 0) * cr__cmat_get(&e->y, i, 0);
        if (d[1].p != NULL)
            ds += cr__cmat_get(&e->x, i, 0) * cr__cmat_get(&d[1], i, 0);
    }
    *dy = d[0].p == NULL && d[1].p == NULL ? cr_tangent_zero() : cr__scalar_tangent(dt, ds);
    return CR_OK;
}

CR__PARAM_RULES(dotu, dotu_rrule_impl, dotu_frule_impl, 0, 2)

/* ---- syrk and herk ------------------------------------------------------------------------
 *
 * Y = C (or zeros without β and C) with its triangle uplo replaced by α M Mᵀ + β C (syrk) or
 * α M Mᴴ + β C (herk, whose diagonal is real), M = op(A) of trans 'N' (A), 'T' (Aᵀ, syrk)
 * or 'C' (Aᴴ, herk; for real A 'T' and 'C' are the same). With K = M M^op the product and
 * G the cotangent kept on the triangle (Gt): M̄ = conj(α) (Gt + Gtᵀ) conj(M) for syrk,
 * α (Gt + Gtᴴ) M for herk; Ā = op⁻¹(M̄) = op(M̄); ᾱ = <K, Gt>, β̄ = <C, Gt> (real parts for
 * herk); C̄ = conj(β) Gt on the triangle and G off it. */

typedef struct rk_env {
    bool herm, with_c, cplx;
    char uplo, op;
    cr_complex alpha, beta;
    cr__cmat M, K, C; /* op(A) (n x k), M M^op (n x n), C (n x n, or p NULL) */
    cr_dtype dt;
    bool diff[6];
    cr_project **p;
} rk_env;

static bool rk_in(const rk_env *e, size_t i, size_t j)
{
    return e->uplo == 'U' ? i <= j : i >= j;
}

static cr_status rk_forward(cr_arena *arena, bool herm, const cr_value *args, size_t nargs,
                            rk_env *e, cr__cmat *Y)
{
    const char *who = herm ? "herk" : "syrk";
    const cr_array *A, *C = NULL;
    cr_status st = cr__nargs(arena, who, nargs, 4, 6);
    if (st == CR_OK && nargs == 5)
        st = CR__FAIL(arena, CR_EINVAL, "%s: expected 4 or 6 arguments, got 5", who);
    if (st == CR_OK)
        st = cr__flag_arg(arena, who, args, 0, "UL", &e->uplo);
    if (st == CR_OK)
        st = cr__flag_arg(arena, who, args, 1, "NTC", &e->op);
    if (st == CR_OK)
        st = cr__matrix32_arg(arena, who, args, nargs, 3, false, &A);
    if (st != CR_OK)
        return st;
    e->herm = herm;
    e->with_c = nargs == 6;
    size_t n = e->op == 'N' ? A->shape[0] : A->shape[1];
    if (e->with_c) {
        st = cr__matrix32_arg(arena, who, args, nargs, 5, true, &C);
        if (st == CR_OK && C->shape[0] != n)
            st = CR__FAIL(arena, CR_ESHAPE, "%s: C must be %zu x %zu", who, n, n);
        if (st != CR_OK)
            return st;
    }
    for (size_t i = 2; i < nargs; i += 2) {
        cr_kind k = args[i].kind;
        if (k != CR_KIND_F64 && k != CR_KIND_F32 && k != CR_KIND_I64 && k != CR_KIND_I32 &&
            k != CR_KIND_BOOL && (herm || k != CR_KIND_C128))
            return CR__FAIL(arena, CR_EINVAL, "%s: argument %zu (%s) must be a %snumber", who,
                            i + 1, i == 2 ? "alpha" : "beta", herm ? "real " : "");
    }
    cr_dtype d = cr__promote(cr__value_dtype(&args[2]), (cr_dtype)A->dtype);
    if (e->with_c)
        d = cr__promote(d, cr__promote(cr__value_dtype(&args[4]), (cr_dtype)C->dtype));
    e->dt = d;
    e->cplx = d == CR_DT_C128;
    if (e->cplx && e->op == (herm ? 'T' : 'C'))
        return CR__FAIL(arena, CR_EINVAL, "%s: trans must be 'N' or '%c' for complex matrices", who,
                        herm ? 'C' : 'T');
    if (!e->cplx && e->op != 'N')
        e->op = herm ? 'C' : 'T';
    e->alpha = cr__scalar_of(&args[2]);
    e->beta = e->with_c ? cr__scalar_of(&args[4]) : 0;
    for (size_t i = 0; i < nargs; i++)
        e->diff[i] = cr__is_diff(&args[i]);
    cr__cmat Am;
    st = cr__cmat_from(arena, A, e->cplx, &Am);
    if (st == CR_OK)
        st = cr__cmat_op(arena, e->op, &Am, &e->M);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', herm ? 'C' : 'T', 1.0, &e->M, &e->M, &e->K);
    if (st == CR_OK && e->with_c)
        st = cr__cmat_from(arena, C, e->cplx, &e->C);
    if (st == CR_OK)
        st = e->with_c ? cr__cmat_copy(arena, &e->C, Y)
                       : cr__cmat_new(arena, e->cplx, n, n, true, Y);
    if (st != CR_OK)
        return st;
    if (herm)
        for (size_t i = 0; i < n; i++) {
            cr__cmat_set(&e->K, i, i, creal(cr__cmat_get(&e->K, i, i)));
            if (e->with_c)
                cr__cmat_set(&e->C, i, i, creal(cr__cmat_get(&e->C, i, i)));
        }
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            if (rk_in(e, i, j))
                cr__cmat_set(
                    Y, i, j,
                    e->alpha * cr__cmat_get(&e->K, i, j) +
                        (e->with_c && e->beta != 0 ? e->beta * cr__cmat_get(&e->C, i, j) : 0));
    return CR_OK;
}

static cr_status rk_pullback(CR__PULLBACK_PARAMS)
{
    const rk_env *e = env;
    size_t n = e->K.r, shape[2] = {n, n};
    cr__cmat G, Gs, Mb, Ab;
    cr_status st = cr__cmat_tan(arena, e->herm ? "herk_pullback" : "syrk_pullback", *dy, 2, shape,
                                e->cplx, &G);
    if (st != CR_OK)
        return st;
    cr__zero_cotangents(e->diff, dx, nx);
    if (G.p == NULL)
        return CR_OK;
    cr_complex ab = 0, bb = 0;
    st = cr__cmat_new(arena, e->cplx, n, n, true, &Gs); /* Gt + Gtᵀ or Gt + Gtᴴ */
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            if (!rk_in(e, i, j))
                continue;
            cr_complex g = cr__cmat_get(&G, i, j);
            ab += conj(cr__cmat_get(&e->K, i, j)) * g;
            if (e->with_c)
                bb += conj(cr__cmat_get(&e->C, i, j)) * g;
            cr__cmat_set(&Gs, i, j, cr__cmat_get(&Gs, i, j) + g);
            cr__cmat_set(&Gs, j, i, cr__cmat_get(&Gs, j, i) + (e->herm ? conj(g) : g));
        }
    if (e->diff[2] &&
        (st = cr_project_apply(arena, e->p[2], cr__scalar_tangent(e->dt, ab), &dx[3])) != CR_OK)
        return st;
    if (e->diff[3]) {
        if (e->herm) {
            st = cr__cmat_mul(arena, 'N', 'N', e->alpha, &Gs, &e->M, &Mb);
        } else { /* conj(α) Gs conj(M) = conj(α conj(Gs) M) */
            cr__cmat_conj(&Gs);
            st = cr__cmat_mul(arena, 'N', 'N', e->alpha, &Gs, &e->M, &Mb);
            cr__cmat_conj(&Mb);
        }
        if (st == CR_OK)
            st = cr__cmat_op(arena, e->op, &Mb, &Ab);
        if (st == CR_OK)
            st = cr__cmat_give(arena, e->p[3], &Ab, false, &dx[4]);
        if (st != CR_OK)
            return st;
    }
    if (!e->with_c)
        return CR_OK;
    if (e->diff[4] &&
        (st = cr_project_apply(arena, e->p[4], cr__scalar_tangent(e->dt, bb), &dx[5])) != CR_OK)
        return st;
    if (e->diff[5]) {
        cr__cmat Cb;
        st = cr__cmat_copy(arena, &G, &Cb);
        if (st != CR_OK)
            return st;
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++)
                if (rk_in(e, i, j)) {
                    cr_complex g = cr__cmat_get(&G, i, j);
                    cr__cmat_set(&Cb, i, j, conj(e->beta) * (e->herm && i == j ? creal(g) : g));
                }
        st = cr__cmat_give(arena, e->p[5], &Cb, false, &dx[6]);
    }
    return st;
}

/* The env (in the arena) and the output array o. */
static cr_status rk_run(cr_arena *arena, bool herm, const cr_value *args, size_t nargs,
                        rk_env **env, cr_array **o)
{
    rk_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(rk_env));
    cr__cmat Y;
    *env = e;
    cr_status st =
        e == NULL ? CR__ALLOC_STATUS(arena) : rk_forward(arena, herm, args, nargs, e, &Y);
    return st != CR_OK ? st : cr__cmat_out(arena, &Y, false, e->dt, o);
}

static cr_status rk_rrule(cr_arena *arena, bool herm, const cr_value *args, size_t nargs,
                          cr_value *y, cr_pullback *pb, const void *udata)
{
    rk_env *e;
    cr_array *o;
    cr_status st = rk_run(arena, herm, args, nargs, &e, &o);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail(
        arena, args, nargs, udata, &e->p, o, y, pb,
        (cr_pullback){rk_pullback, e, herm ? "herk_pullback" : "syrk_pullback", nargs + 1});
}

/* Ẏ on the triangle: α̇ K + α (Ṁ M^op + M Ṁ^op) + β̇ C + β Ċ; off it Ċ. */
static cr_status rk_frule(cr_arena *arena, bool herm, const cr_tangent *dargs, const cr_value *args,
                          size_t nargs, cr_value *y, cr_tangent *dy)
{
    rk_env *ep;
    cr__cmat dA, dM, dC, R;
    cr_array *o;
    cr_status st = rk_run(arena, herm, args, nargs, &ep, &o);
    if (st != CR_OK)
        return st;
    rk_env e = *ep;
    *y = cr_value_array(o);
    const char *who = herm ? "herk" : "syrk";
    cr_complex da = 0, db = 0;
    bool nza = false, nzb = false;
    size_t n = e.K.r;
    dC.p = NULL;
    if (e.diff[2])
        st = cr__tan_scalar(arena, who, dargs[3], &da, &nza);
    if (st == CR_OK && e.with_c && e.diff[4])
        st = cr__tan_scalar(arena, who, dargs[5], &db, &nzb);
    if (st == CR_OK)
        st = cr__cmat_dx(arena, who, dargs, args, 3, e.cplx, &dA);
    if (st == CR_OK && e.with_c)
        st = cr__cmat_dx(arena, who, dargs, args, 5, e.cplx, &dC);
    if (st == CR_OK)
        st = dC.p != NULL ? cr__cmat_copy(arena, &dC, &R)
                          : cr__cmat_new(arena, e.cplx, n, n, true, &R);
    if (st != CR_OK)
        return st;
    cr__cmat P = {.p = NULL};
    if (dA.p != NULL) {
        st = cr__cmat_op(arena, e.op, &dA, &dM);
        if (st == CR_OK)
            st = cr__cmat_mul(arena, 'N', herm ? 'C' : 'T', e.alpha, &dM, &e.M, &P);
        if (st != CR_OK)
            return st;
    }
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            if (!rk_in(&e, i, j))
                continue;
            cr_complex v = nza ? da * cr__cmat_get(&e.K, i, j) : 0;
            if (P.p != NULL) {
                cr_complex q = cr__cmat_get(&P, j, i);
                v += cr__cmat_get(&P, i, j) + (herm ? conj(q) : q);
            }
            if (nzb)
                v += db * cr__cmat_get(&e.C, i, j);
            if (dC.p != NULL)
                v += e.beta * cr__cmat_get(&dC, i, j);
            cr__cmat_set(&R, i, j, herm && i == j ? creal(v) : v);
        }
    return cr__tangent_like(arena, o, &R, false, dy);
}

#define RK_RULES(NAME, HERM) CR__PARAM_RULES(NAME, rk_rrule, rk_frule, HERM, -1)

RK_RULES(syrk, false)
RK_RULES(herk, true)

/* ---- Test registrations ------------------------------------------------------------------- */

/* dotu: two vectors of 1 to 4 elements, of random float dtypes. */
static cr_status sample_dotu(CR__SAMPLE_PARAMS)
{
    size_t n = 1 + cr__rng_below(rng, 4);
    for (size_t i = 0; i < nargs; i++) {
        cr_array *x;
        cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 1, &n, -2, 2, &x);
        if (st != CR_OK)
            return st;
        args[i] = cr_value_array(x);
    }
    return CR_OK;
}

/* syrk and herk (env: herk when non-NULL): both triangles and ops, A n x k or k x n for n, k
 * in 1..3, real α and β for herk (complex sometimes for syrk). */
static cr_status sample_rk(CR__SAMPLE_PARAMS)
{
    bool herm = env != NULL;
    cr_dtype dt = cr__rng_dtype(rng);
    args[0] = cr__rand_flag(rng, "UL");
    args[1] = cr__rand_flag(rng, dt != CR_DT_C128 ? "NTC" : herm ? "NC" : "NT");
    size_t n = 1 + cr__rng_below(rng, 3), k = 1 + cr__rng_below(rng, 3);
    size_t shape[2] = {args[1].u.i64 == 'N' ? n : k, args[1].u.i64 == 'N' ? k : n};
    size_t cs[2] = {n, n};
    cr_array *A, *C;
    for (size_t i = 2; i < nargs; i += 2) {
        double re = cr__rng_unif(rng, -2, 2), im = cr__rng_unif(rng, -2, 2);
        args[i] = !herm && dt == CR_DT_C128 ? cr_value_c128(cr__c(re, im)) : cr_value_f64(re);
    }
    cr_status st = cr__rand_array(arena, rng, dt, 2, shape, -1.5, 1.5, &A);
    if (st != CR_OK)
        return st;
    args[3] = cr_value_array(A);
    if (nargs == 6) {
        st = cr__rand_array(arena, rng, dt, 2, cs, -1.5, 1.5, &C);
        if (st == CR_OK)
            args[5] = cr_value_array(C);
    }
    return st;
}

static const cr_rule_test k_t_dotu = {.sample = sample_dotu};
static const cr_rule_test k_t_syrk = {.sample = sample_rk};
static const cr_rule_test k_t_herk = {.sample = sample_rk, .env = (void *)&k_t_herk};

cr_status cr__linalg_register_blas_rank(cr_registry *reg)
{
    enum { REAL = CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL };
    static const cr_argspec s_dotu[2] = {{CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL}};
    static const cr_argspec s_syrk[6] = {{CR_M_INT, NULL},  {CR_M_INT, NULL},
                                         {CR__M_NUM, NULL}, {CR__M_FARRAY, NULL},
                                         {CR__M_NUM, NULL}, {CR__M_FARRAY, NULL}};
    static const cr_argspec s_herk[6] = {{CR_M_INT, NULL}, {CR_M_INT, NULL},
                                         {REAL, NULL},     {CR__M_FARRAY, NULL},
                                         {REAL, NULL},     {CR__M_FARRAY, NULL}};
    static const cr__linalg_rule k[] = {
        {&dotu_function, s_dotu, 2, dotu_frule, dotu_rrule, &k_t_dotu, NULL},
        {&syrk_function, s_syrk, 4, syrk_frule, syrk_rrule, &k_t_syrk, NULL},
        {&syrk_function, s_syrk, 6, syrk_frule, syrk_rrule, &k_t_syrk, NULL},
        {&herk_function, s_herk, 4, herk_frule, herk_rrule, &k_t_herk, NULL},
        {&herk_function, s_herk, 6, herk_frule, herk_rrule, &k_t_herk, NULL},
    };
    return cr__linalg_add_rules(reg, k, sizeof k / sizeof k[0]);
}
