/*
 * Reductions: sum, mean, prod, cumsum, maximum, minimum, findmax, findmin, extrema and
 * cumprod, over all elements or along dims (reduced dimensions kept with extent 1), and
 * the parsing, output and test samplers that the other reductions (softmax.c, var_std.c,
 * norm.c) share. Pullbacks that produce an array of the argument's size return
 * InplaceableThunks whose add! writes into the accumulator without materialising the
 * cotangent.
 */
#include <math.h>

#include "reduce_impl.h"

cr_status cr__red_parse(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                        size_t max_args, bool real_only, cr__red *r)
{
    memset(r, 0, sizeof *r);
    r->who = who;
    cr_status st = cr__nargs(arena, who, nargs, 1, max_args);
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, 0, &r->A);
    if (st != CR_OK)
        return st;
    const cr_array *A = r->A;
    if (!cr_dtype_is_float((cr_dtype)A->dtype) || (real_only && A->dtype == CR_DT_C128))
        return CR__FAIL(arena, CR_EINVAL, "%s: expected an array of %s, got %s", who,
                        real_only ? "f64 or f32" : "f64, f32 or c128",
                        cr_dtype_name((cr_dtype)A->dtype));
    r->ndim = A->ndim;
    r->wdt = cr__work((cr_dtype)A->dtype);
    r->all = nargs == 1;
    if (r->all) {
        for (size_t d = 0; d < r->ndim; d++)
            r->mask[d] = true;
    } else {
        st = cr__dims_arg(arena, who, &args[1], r->ndim, r->mask);
        if (st != CR_OK)
            return st;
    }
    r->count = 1;
    for (size_t d = 0; d < r->ndim; d++) {
        r->oshape[d] = r->mask[d] ? 1 : A->shape[d];
        if (r->mask[d])
            r->count *= A->shape[d];
    }
    return cr__strided(arena, A, r->wdt, &r->Aw);
}

/* The output value from the work array w of shape oshape. */
cr_status cr__red_output(cr_arena *arena, const cr__red *r, const cr_array *w, cr_value *y)
{
    if (r->all) {
        *y = cr__scalar_value((cr_dtype)r->A->dtype, cr__load(w, 0));
        return CR_OK;
    }
    cr_array *o;
    cr_status st = cr__cast(arena, w, (cr_dtype)r->A->dtype, &o);
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

/* The cotangent (or tangent) of the output, as a work array of shape oshape (0-d for a
 * scalar output); NULL when zero. */
cr_status cr__red_cot(cr_arena *arena, const char *who, const cr__red *r, cr_tangent dy,
                      const cr_array **g)
{
    if (!r->all)
        return cr__tan_array(arena, who, dy, r->ndim, r->oshape, r->wdt, g);
    cr_complex v;
    bool nz;
    *g = NULL;
    cr_status st = cr__tan_scalar(arena, who, dy, &v, &nz);
    if (st != CR_OK || !nz)
        return st;
    cr_array *a;
    st = cr__scalar_array(arena, r->wdt, v, &a);
    *g = a;
    return st;
}

/* The environment of the reduction pullbacks. */
typedef struct red_env {
    cr__red r;
    cr_project *pA;
    cr_complex scale;   /* sum, mean */
    const int64_t *idx; /* maximum...: linear indices into A (oshape) */
    size_t dim;         /* cumsum */
} red_env;

/* The end of a reduction's rrule whose forward pass returned st (cr__rrule_end): *out the
 * red_env of r, or NULL when st failed, only the primal was asked or the environment could
 * not be made. */
static cr_status red_rrule_end(cr_arena *arena, cr_status st, const void *udata, const cr__red *r,
                               const cr_value *args, size_t nargs, cr_pullback_fn fn,
                               const char *name, cr_pullback *pb, red_env **out)
{
    *out = NULL;
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    red_env *e = CR__PB_ENV(arena, red_env, pA, &args[0], &st);
    if (e == NULL)
        return st;
    e->r = *r;
    *pb = (cr_pullback){fn, e, name, nargs + 1};
    *out = e;
    return CR_OK;
}

/* The thunk of a reduction pullback: the environment and the canonical cotangent. */
typedef struct red_thunk {
    const red_env *e;
    const cr_array *g;
} red_thunk;

CR__EG_THUNK_NEW(red_thunk_new, red_thunk, red_env)

/* The pullback of a reduction whose cotangent of A is the InplaceableThunk (thunk, add) of
 * the output's cotangent (zero when that is zero); who names the pullback, thunk_name the
 * thunk. */
static inline cr_status red_thunk_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx,
                                           cr_arena *arena, red_env *e, const char *who,
                                           cr_thunk_fn thunk, cr_thunk_add_fn add,
                                           const char *thunk_name)
{
    const cr_array *g;
    cr_status st = cr__red_cot(arena, who, &e->r, *dy, &g);
    cr__dx_none(dx, nx);
    return st != CR_OK ? st : red_thunk_new(arena, e, g, thunk, add, thunk_name, &dx[1]);
}

/* ---- sum and mean ------------------------------------------------------------------------ */

/* Ā = scale * broadcast(Ȳ) */
static cr_status sum_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    red_thunk *t = env;
    const cr__red *r = &t->e->r;
    cr_array *dx;
    cr_status st = cr__new_like(arena, r->wdt, r->A, false, &dx);
    if (st != CR_OK)
        return st;
    cr__broadcast_into(dx, t->g, t->e->scale);
    return cr__give(arena, t->e->pA, dx, out);
}

CR__THUNK_ADD(sum_add, red_thunk, t->e->r.wdt, t->e->r.A,
              cr__broadcast_axpy(dest, t->g, t->e->scale), sum_thunk)

static cr_status sum_pullback(CR__PULLBACK_PARAMS)
{
    return red_thunk_pullback(dy, dx, nx, arena, env, "sum_pullback", sum_thunk, sum_add,
                              "sum_pullback_thunk");
}

static cr_status sum_mean_rrule(cr_arena *arena, const char *who, const cr_value *args,
                                size_t nargs, cr_value *y, cr_pullback *pb, const void *udata,
                                bool mean)
{
    cr__red r;
    cr_status st = cr__red_parse(arena, who, args, nargs, 2, false, &r);
    if (st != CR_OK)
        return st;
    cr_array *w;
    st = cr__unbroadcast(arena, r.Aw, r.ndim, r.oshape, &w);
    if (st != CR_OK)
        return st;
    double scale = mean ? 1.0 / (double)r.count : 1.0;
    if (mean)
        cr__scal(scale, w);
    red_env *e;
    st = red_rrule_end(arena, cr__red_output(arena, &r, w, y), udata, &r, args, nargs, sum_pullback,
                       mean ? "mean_pullback" : "sum_pullback", pb, &e);
    if (e != NULL)
        e->scale = scale;
    return st;
}

/* sum(A; dims): Ā = broadcast(Ȳ) to A's shape. */
static cr_status sum_rrule(CR__RRULE_PARAMS)
{
    if (nargs > 0 && args[0].kind == CR_KIND_FUNC) /* sum(f, A): array/higher_order.c */
        return cr__sum_f_rrule(cfg, arena, f, args, nargs, y, pb, udata);
    return sum_mean_rrule(arena, "sum", args, nargs, y, pb, udata, false);
}
CR__ARRAY_FN(sum, "sum", -1)

/* mean(A; dims) = sum(A; dims) / n: Ā = broadcast(Ȳ) / n. mean(f, A; dims): array/higher_order.c.
 */
static cr_status mean_rrule(CR__RRULE_PARAMS)
{
    if (nargs > 0 && args[0].kind == CR_KIND_FUNC) /* mean(f, A): array/higher_order.c */
        return cr__mean_f_rrule(cfg, arena, f, args, nargs, y, pb, udata);
    return sum_mean_rrule(arena, "mean", args, nargs, y, pb, udata, true);
}
CR__ARRAY_FN(mean, "mean", -1)

/* ---- prod ------------------------------------------------------------------------------ */

/* The walks of prod over A's shape. The partial ∂y/∂x_i = Π_{j≠i} x_j of a slice is the
 * product of the slice's elements before x_i times that of the elements after it, in one
 * walk order: a forward walk leaves each element's prefix product, the same walk reversed
 * multiplies in the suffix product. No division: exact with no, one or several zeros, and
 * O(n) with one running product per slice. */
typedef enum prod_mode {
    PROD_FWD,    /* 0 run, 1 x: run *= x */
    PROD_PREFIX, /* 0 run, 1 x, 2 p: p = run (the product before x); run *= x */
    PROD_SUFFIX, /* 0 run, 1 x, 2 p, 3 dst, 4 g, reversed: dst (+)= conj(p run) g; run *= x */
    PROD_DUAL    /* 0 run, 1 x, 2 ẋ, 3 ẏ: ẏ = ẏ x + run ẋ (dual numbers); run *= x */
} prod_mode;

#define PROD_NARR 5

typedef struct prod_ctx {
    prod_mode mode;
    bool add;           /* PROD_SUFFIX: accumulate into dst */
    void *a[PROD_NARR]; /* each array at the element its walk starts from */
} prod_ctx;

/* The inner loops of the walks in element type T (conj: CONJ). The o-mapped arrays (run,
 * g, ẏ) advance together: with step 0 (a line along a reduced dimension) the running
 * product stays in a register. */
#define PROD_INNER(NAME, T, CONJ, MUL)                                                  \
    static void NAME(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx) \
    {                                                                                   \
        const prod_ctx *c = vctx;                                                       \
        T *run = (T *)c->a[0] + off[0];                                                 \
        const T *x = (const T *)c->a[1] + off[1];                                       \
        ptrdiff_t so = step[0], sx = step[1];                                           \
        const bool add = c->add;                                                        \
        T acc = *run;                                                                   \
        switch (c->mode) {                                                              \
        case PROD_FWD:                                                                  \
            for (size_t i = 0; i < n && so == 0; i++, x += sx)                          \
                acc = MUL(acc, *x);                                                     \
            for (size_t i = 0; i < n && so != 0; i++, x += sx, run += so)               \
                *run = MUL(*run, *x);                                                   \
            break;                                                                      \
        case PROD_PREFIX: {                                                             \
            T *p = (T *)c->a[2] + off[2];                                               \
            ptrdiff_t sp = step[2];                                                     \
            for (size_t i = 0; i < n && so == 0; i++, x += sx, p += sp) {               \
                *p = acc;                                                               \
                acc = MUL(acc, *x);                                                     \
            }                                                                           \
            for (size_t i = 0; i < n && so != 0; i++, x += sx, p += sp, run += so) {    \
                *p = *run;                                                              \
                *run = MUL(*run, *x);                                                   \
            }                                                                           \
            break;                                                                      \
        }                                                                               \
        case PROD_SUFFIX: {                                                             \
            const T *p = (const T *)c->a[2] + off[2], *g = (const T *)c->a[4] + off[4]; \
            T *dst = (T *)c->a[3] + off[3];                                             \
            ptrdiff_t sp = step[2], sd = step[3], sg = step[4];                         \
            bool line = so == 0 && sg == 0;                                             \
            T gv = *g;                                                                  \
            for (size_t i = 0; i < n && line; i++, x += sx, p += sp, dst += sd) {       \
                T d = MUL(CONJ(MUL(*p, acc)), gv);                                      \
                *dst = add ? *dst + d : d;                                              \
                acc = MUL(acc, *x);                                                     \
            }                                                                           \
            for (size_t i = 0; i < n && !line; i++, x += sx, p += sp, dst += sd) {      \
                T d = MUL(CONJ(MUL(*p, *run)), *g);                                     \
                *dst = add ? *dst + d : d;                                              \
                *run = MUL(*run, *x);                                                   \
                run += so;                                                              \
                g += sg;                                                                \
            }                                                                           \
            if (!line)                                                                  \
                return;                                                                 \
            break;                                                                      \
        }                                                                               \
        case PROD_DUAL: {                                                               \
            const T *dx = (const T *)c->a[2] + off[2];                                  \
            T *dy = (T *)c->a[3] + off[3];                                              \
            ptrdiff_t sdx = step[2], sdy = step[3];                                     \
            for (size_t i = 0; i < n; i++, x += sx, dx += sdx, dy += sdy, run += so) {  \
                *dy = MUL(*dy, *x) + MUL(*run, *dx);                                    \
                *run = MUL(*run, *x);                                                   \
            }                                                                           \
            return;                                                                     \
        }                                                                               \
        }                                                                               \
        if (so == 0)                                                                    \
            *run = acc;                                                                 \
    }

/* The textbook complex product (no recovery of infinities from NaN parts, as Julia's). */
static inline cr_complex prod_cmul(cr_complex a, cr_complex b)
{
    double ar = creal(a), ai = cimag(a), br = creal(b), bi = cimag(b);
    return cr__c(ar * br - ai * bi, ar * bi + ai * br);
}

#define PROD_ID(v)      (v)
#define PROD_RMUL(a, b) ((a) * (b))
PROD_INNER(prod_inner_f64, double, PROD_ID, PROD_RMUL)
PROD_INNER(prod_inner_c128, cr_complex, conj, prod_cmul)

/* Walk A's shape with the arrays of c (in the order of prod_mode; NULL ends the list), in
 * row-major order or, with reverse, in exactly the opposite order (every stride negated,
 * every array entered at the element the forward walk ends on). */
static void prod_run(const cr__red *r, prod_ctx *c, const cr_array *const *arrs, bool reverse)
{
    cr__nd nd;
    cr__nd_init(&nd, r->ndim, r->A->shape);
    bool cplx = r->wdt == CR_DT_C128;
    for (size_t d = 0; d < r->ndim; d++)
        if (r->A->shape[d] == 0)
            return;
    for (size_t k = 0; k < PROD_NARR && arrs[k] != NULL; k++) {
        cr__nd_add(&nd, arrs[k]);
        ptrdiff_t last = 0; /* the offset of the walk's last element: within the array */
        for (size_t d = 0; reverse && d < r->ndim; d++) {
            for (size_t e = 1; e < r->A->shape[d]; e++)
                last += nd.strides[k][d];
            nd.strides[k][d] = -nd.strides[k][d];
        }
        c->a[k] = cplx ? (void *)((cr_complex *)arrs[k]->data + last)
                       : (void *)((double *)arrs[k]->data + last);
    }
    cr__nd_run(&nd, cplx ? prod_inner_c128 : prod_inner_f64, c);
}

/* A new array of shape oshape with every element 1. */
static cr_status fill_ones(cr_arena *arena, const cr__red *r, cr_array **out)
{
    cr_status st = cr__new(arena, r->wdt, r->ndim, r->oshape, false, out);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(*out);
    for (size_t i = 0; i < n; i++)
        cr__store(*out, (ptrdiff_t)i, 1.0);
    return CR_OK;
}

/* Ā (dx, or added into dx with add) = conj(∂y/∂x) Ȳ by a prefix and a suffix walk. Without
 * add, dx holds the prefix products; with add, they go to a scratch array. */
static cr_status prod_fill(cr_arena *arena, red_thunk *t, cr_array *dx, bool add)
{
    const cr__red *r = &t->e->r;
    cr_array *run, *p = dx;
    cr_status st = fill_ones(arena, r, &run);
    if (st == CR_OK && add)
        st = cr__new_like(arena, r->wdt, r->A, false, &p);
    if (st != CR_OK)
        return st;
    prod_ctx c = {PROD_PREFIX, add, {NULL}};
    prod_run(r, &c, (const cr_array *[]){run, r->Aw, p, NULL}, false);
    size_t n = cr_array_numel(run);
    for (size_t i = 0; i < n; i++)
        cr__store(run, (ptrdiff_t)i, 1.0);
    c.mode = PROD_SUFFIX;
    prod_run(r, &c, (const cr_array *[]){run, r->Aw, p, dx, t->g}, true);
    return CR_OK;
}

static cr_status prod_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    red_thunk *t = env;
    cr_array *dx;
    cr_status st = cr__new_like(arena, t->e->r.wdt, t->e->r.A, false, &dx);
    if (st == CR_OK)
        st = prod_fill(arena, t, dx, false);
    return st != CR_OK ? st : cr__give(arena, t->e->pA, dx, out);
}

CR__THUNK_ADD(prod_add, red_thunk, t->e->r.wdt, t->e->r.A, return prod_fill(arena, t, dest, true),
              prod_thunk)

static cr_status prod_pullback(CR__PULLBACK_PARAMS)
{
    return red_thunk_pullback(dy, dx, nx, arena, env, "prod_pullback", prod_thunk, prod_add,
                              "prod_pullback_thunk");
}

/* The reduction r, the work products w and the output y of prod(args). */
static cr_status prod_primal(cr_arena *arena, const cr_value *args, size_t nargs, cr__red *r,
                             cr_array **w, cr_value *y)
{
    cr_status st = cr__red_parse(arena, "prod", args, nargs, 2, false, r);
    if (st == CR_OK)
        st = fill_ones(arena, r, w);
    if (st != CR_OK)
        return st;
    prod_ctx c = {PROD_FWD, false, {NULL}};
    prod_run(r, &c, (const cr_array *[]){*w, r->Aw, NULL}, false);
    return cr__red_output(arena, r, *w, y);
}

/* prod(A; dims): ∂y/∂x_i = Π_{j≠i} x_j over the slice; Ā_i = conj(∂y/∂x_i) Ȳ. */
static cr_status prod_rrule(CR__RRULE_PARAMS)
{
    cr__red r;
    cr_array *w = NULL;
    cr_status st = prod_primal(arena, args, nargs, &r, &w, y);
    red_env *e;
    return red_rrule_end(arena, st, udata, &r, args, nargs, prod_pullback, "prod_pullback", pb, &e);
}
CR__ARRAY_FN(prod, "prod", -1)

/* frule of prod: Ẏ = Σ_i (∂y/∂x_i) Ẋ_i over each slice, as the product of the dual numbers
 * x_i + Ẋ_i ε (no division, exact with zeros). */
static cr_status prod_frule(CR__FRULE_PARAMS)
{
    cr__red r;
    cr_array *w = NULL;
    cr_status st = prod_primal(arena, args, nargs, &r, &w, y);
    const cr_array *dA = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, "prod", dargs, args, 0, r.wdt, &dA);
    if (st != CR_OK)
        return st;
    if (dA == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *o, *run;
    st = cr__new(arena, r.wdt, r.ndim, r.oshape, true, &o);
    if (st == CR_OK)
        st = fill_ones(arena, &r, &run);
    if (st != CR_OK)
        return st;
    prod_ctx c = {PROD_DUAL, false, {NULL}};
    prod_run(&r, &c, (const cr_array *[]){run, r.Aw, dA, o, NULL}, false);
    cr_value yo;
    st = cr__red_output(arena, &r, o, &yo);
    if (st != CR_OK)
        return st;
    *dy = yo.kind == CR_KIND_ARRAY ? cr_tangent_array(yo.u.arr)
                                   : cr__scalar_tangent(cr__value_dtype(&yo), cr__scalar_of(&yo));
    return CR_OK;
}

/* ---- cumsum ---------------------------------------------------------------------------- */

typedef struct line_ctx {
    bool cplx;
    bool reverse;
    size_t len;
    ptrdiff_t s_src, s_dst; /* strides along the line */
    const void *src;
    void *dst;
} line_ctx;

/* The running sum of one line of T, from src + os into dst + od. */
#define CUMSUM_LINE(T)                                   \
    do {                                                 \
        const T *s = (const T *)c->src + os;             \
        T *d = (T *)c->dst + od, acc = 0;                \
        for (size_t k = 0; k < c->len; k++) {            \
            size_t kk = c->reverse ? c->len - 1 - k : k; \
            acc += s[(ptrdiff_t)kk * c->s_src];          \
            d[(ptrdiff_t)kk * c->s_dst] = acc;           \
        }                                                \
    } while (0)

/* Running sums along a line: forward dst[k] = Σ_{j<=k} src[j]; reverse Σ_{j>=k}. */
static void cumsum_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    line_ctx *c = vctx;
    for (size_t i = 0; i < n; i++) {
        ptrdiff_t os = CR__AT(0), od = CR__AT(1);
        if (c->cplx)
            CUMSUM_LINE(cr_complex);
        else
            CUMSUM_LINE(double);
    }
}

/* dst = cumsum(src) along dim (src any strides, dst contiguous of the same shape). */
static void cumsum_run(const cr_array *src, cr_array *dst, size_t dim, bool reverse)
{
    size_t shape[CR_ARRAY_MAX_DIMS];
    for (size_t d = 0; d < src->ndim; d++)
        shape[d] = d == dim ? 1 : src->shape[d];
    cr__nd nd;
    cr__nd_init(&nd, src->ndim, shape);
    cr__nd_add_strides(&nd, src->strides);
    cr__nd_add_strides(&nd, dst->strides);
    line_ctx c = {src->dtype == CR_DT_C128, reverse,   src->shape[dim], src->strides[dim],
                  dst->strides[dim],        src->data, dst->data};
    cr__nd_run(&nd, cumsum_inner, &c);
}

static cr_status cumsum_pullback(CR__PULLBACK_PARAMS)
{
    red_env *e = env;
    const cr_array *A = e->r.A;
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "cumsum_pullback", *dy, A->ndim, A->shape, e->r.wdt, &g);
    cr__dx_none(dx, nx);
    if (st != CR_OK)
        return st;
    if (g == NULL) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *r = NULL;
    st = cr__new_like(arena, e->r.wdt, A, false, &r);
    if (st != CR_OK)
        return st;
    cumsum_run(g, r, e->dim, true);
    return cr__give(arena, e->pA, r, &dx[1]);
}

/* cumsum(A, dim): Y_k = Σ_{j<=k} A_j along dim; Ā_k = Σ_{j>=k} Ȳ_j. */
static cr_status cumsum_rrule(CR__RRULE_PARAMS)
{
    cr__red r;
    cr_status st = cr__red_parse(arena, "cumsum", args, nargs, 2, false, &r);
    if (st != CR_OK)
        return st;
    const cr_array *A = r.A;
    size_t dim = 0;
    if (nargs == 1) {
        if (A->ndim != 1)
            return CR__FAIL(arena, CR_EINVAL,
                            "cumsum: give the dimension for an array of %u dimension%s",
                            (unsigned)A->ndim, CR__S((unsigned)A->ndim));
    } else {
        int64_t d;
        st = cr__int_arg(arena, "cumsum", &args[1], &d);
        if (st != CR_OK)
            return st;
        if (d < 0 || (size_t)d >= A->ndim)
            return CR__FAIL(arena, CR_EINVAL, "cumsum: dimension %lld out of range", (long long)d);
        dim = (size_t)d;
    }
    cr_array *w, *o;
    st = cr__new_like(arena, r.wdt, A, false, &w);
    if (st != CR_OK)
        return st;
    if (cr_array_numel(A) > 0)
        cumsum_run(r.Aw, w, dim, false);
    st = cr__cast(arena, w, (cr_dtype)A->dtype, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    red_env *e;
    st = red_rrule_end(arena, CR_OK, udata, &r, args, nargs, cumsum_pullback, "cumsum_pullback", pb,
                       &e);
    if (e != NULL)
        e->dim = dim;
    return st;
}
CR__ARRAY_FN(cumsum, "cumsum", -1)

/* ---- maximum, minimum, findmax, findmin --------------------------------------------------- */

typedef struct ext_ctx {
    bool max;
    const double *x;
    double *best;
    int64_t *idx;
} ext_ctx;

/* Arrays: 0 x (work), 1 best/idx (o-mapped), 2 linear index (row-major strides of A). The
 * loop visits elements in row-major order and replaces only on strict improvement, so
 * ties go to the first index; a NaN beats any number (it propagates, as in Julia). */
static void ext_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    ext_ctx *c = vctx;
    for (size_t i = 0; i < n; i++) {
        double v = c->x[CR__AT(0)];
        ptrdiff_t o = CR__AT(1);
        int64_t lin = (int64_t)(CR__AT(2));
        double b = c->best[o];
        bool take =
            c->idx[o] < 0 || (isnan(v) && !isnan(b)) || (!isnan(b) && (c->max ? v > b : v < b));
        if (take) {
            c->best[o] = v;
            c->idx[o] = lin;
        }
    }
}

/* Tuples of findmax: (value, index) and (values, indices). */
typedef struct fm_f64 {
    double v;
    int64_t i;
} fm_f64;
typedef struct fm_f32 {
    float v;
    int64_t i;
} fm_f32;
typedef struct fm_arr {
    cr_array v;
    cr_array i;
} fm_arr;
CR__TUPLE2_TYPE(k_fm_f64, "tuple(f64,i64)", fm_f64, v, CR_KIND_F64, i, CR_KIND_I64);
CR__TUPLE2_TYPE(k_fm_f32, "tuple(f32,i64)", fm_f32, v, CR_KIND_F32, i, CR_KIND_I64);
CR__TUPLE2_TYPE(k_fm_arr, "tuple(array,array)", fm_arr, v, CR_KIND_ARRAY, i, CR_KIND_ARRAY);

typedef enum { EXT_MAXIMUM, EXT_MINIMUM, EXT_FINDMAX, EXT_FINDMIN } ext_kind;
static const char *const k_ext_names[4] = {"maximum", "minimum", "findmax", "findmin"};
static const char *const k_ext_pb_names[4] = {"maximum_pullback", "minimum_pullback",
                                              "findmax_pullback", "findmin_pullback"};

/* Forward: values (work, oshape) and linear indices. */
static cr_status ext_forward(cr_arena *arena, const cr__red *r, bool max, cr_array **best,
                             cr_array **idx)
{
    if (r->count == 0)
        return CR__FAIL(arena, CR_EINVAL, "%s: reducing over an empty dimension",
                        r->who != NULL ? r->who
                        : max          ? "maximum"
                                       : "minimum");
    cr_status st = cr__new(arena, CR_DT_F64, r->ndim, r->oshape, false, best);
    if (st == CR_OK)
        st = cr__new(arena, CR_DT_I64, r->ndim, r->oshape, false, idx);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(*idx);
    for (size_t i = 0; i < n; i++)
        ((int64_t *)(*idx)->data)[i] = -1;
    ptrdiff_t lin[CR_ARRAY_MAX_DIMS];
    cr__row_major(r->ndim, r->A->shape, lin);
    cr__nd nd;
    cr__nd_init(&nd, r->ndim, r->A->shape);
    cr__nd_add(&nd, r->Aw);
    cr__nd_add(&nd, *best);
    cr__nd_add_strides(&nd, lin);
    ext_ctx c = {max, r->Aw->data, (*best)->data, (*idx)->data};
    cr__nd_run(&nd, ext_inner, &c);
    return CR_OK;
}

static cr_status ext_output(cr_arena *arena, const cr__red *r, ext_kind k, cr_array *best,
                            cr_array *idx, cr_value *y)
{
    cr_value v = {0};
    cr_status st = cr__red_output(arena, r, best, &v);
    if (st != CR_OK || k == EXT_MAXIMUM || k == EXT_MINIMUM) {
        *y = v;
        return st;
    }
    if (r->all && r->A->dtype == CR_DT_F32)
        return CR__STRUCT_COPY(arena, &k_fm_f32, y, fm_f32, v.u.f32, ((int64_t *)idx->data)[0]);
    if (r->all)
        return CR__STRUCT_COPY(arena, &k_fm_f64, y, fm_f64, v.u.f64, ((int64_t *)idx->data)[0]);
    cr_array i = *idx;
    i.flags = 0;
    return CR__STRUCT_COPY(arena, &k_fm_arr, y, fm_arr, *v.u.arr, i);
}

/* Scatter: dx[idx[o]] (+)= g[o]. */
static void ext_scatter(const red_env *e, const cr_array *g, cr_array *dx)
{
    size_t n = 1;
    for (size_t d = 0; d < e->r.ndim; d++)
        n *= e->r.oshape[d];
    if (g->ndim == 0)
        n = 1;
    for (size_t o = 0; o < n; o++) {
        int64_t i = e->idx[o];
        if (dx->dtype == CR_DT_C128)
            ((cr_complex *)dx->data)[i] += ((const cr_complex *)g->data)[o];
        else
            ((double *)dx->data)[i] += ((const double *)g->data)[o];
    }
}

static cr_status ext_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    red_thunk *t = env;
    cr_array *dx;
    cr_status st = cr__new_like(arena, t->e->r.wdt, t->e->r.A, true, &dx);
    if (st != CR_OK)
        return st;
    ext_scatter(t->e, t->g, dx);
    return cr__give(arena, t->e->pA, dx, out);
}

CR__THUNK_ADD(ext_add, red_thunk, t->e->r.wdt, t->e->r.A, ext_scatter(t->e, t->g, dest), ext_thunk)

/* The value part of the output cotangent (field 0 of a findmax tuple). */
static cr_status ext_value_cot(cr_arena *arena, const char *who, bool tuple, cr_tangent dy,
                               cr_tangent *out)
{
    if (!tuple) {
        *out = dy;
        return CR_OK;
    }
    cr_status st = cr__tuple_cotangent(arena, who, "a tuple", dy, &dy);
    if (st == CR_OK)
        *out = cr_tangent_is_zero(dy) ? cr_tangent_zero() : cr_tangent_field(dy, 0);
    return st;
}

typedef struct ext_env {
    red_env base;
    ext_kind kind;
} ext_env;

/* Ā = zeros with Ȳ scattered at the extremal indices. */
static cr_status ext_pullback(CR__PULLBACK_PARAMS)
{
    ext_env *e = env;
    const char *who = k_ext_pb_names[e->kind];
    cr__dx_none(dx, nx);
    cr_tangent dv;
    cr_status st = ext_value_cot(arena, who, e->kind >= EXT_FINDMAX, *dy, &dv);
    const cr_array *g = NULL;
    if (st == CR_OK)
        st = cr__red_cot(arena, who, &e->base.r, dv, &g);
    return st != CR_OK ? st
                       : red_thunk_new(arena, &e->base, g, ext_thunk, ext_add,
                                       "extremum_pullback_thunk", &dx[1]);
}

/* The reduction r, the extremal indices idx and the output y of k(args). */
static cr_status ext_primal(cr_arena *arena, ext_kind k, const cr_value *args, size_t nargs,
                            cr__red *r, cr_array **idx, cr_value *y)
{
    cr_status st = cr__red_parse(arena, k_ext_names[k], args, nargs, 2, true, r);
    cr_array *best = NULL;
    if (st == CR_OK)
        st = ext_forward(arena, r, k == EXT_MAXIMUM || k == EXT_FINDMAX, &best, idx);
    return st == CR_OK ? ext_output(arena, r, k, best, *idx, y) : st;
}

static cr_status ext_rrule(cr_arena *arena, ext_kind k, const cr_value *args, size_t nargs,
                           cr_value *y, cr_pullback *pb, const void *udata)
{
    cr__red r;
    cr_array *idx = NULL;
    cr_status st = ext_primal(arena, k, args, nargs, &r, &idx, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    CR__PB_START(ext_env, base.pA, ext_pullback, k_ext_pb_names[k], e, st);
    e->base.r = r;
    e->base.idx = idx->data;
    e->kind = k;
    return CR_OK;
}

/* The frule's tangent of a selecting reduction: dA (real) at the linear indices idx, one per
 * output element, shaped like r's output (a number for a full reduction). */
static cr_status tangent_at(cr_arena *arena, const cr__red *r, const cr_array *dA,
                            const cr_array *idx, cr_tangent *out)
{
    cr_array *o;
    cr_value vo;
    cr_status st = cr__new(arena, r->wdt, r->ndim, r->oshape, false, &o);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(o);
    for (size_t i = 0; i < n; i++)
        ((double *)o->data)[i] = ((const double *)dA->data)[((const int64_t *)idx->data)[i]];
    if ((st = cr__red_output(arena, r, o, &vo)) != CR_OK)
        return st;
    *out = vo.kind == CR_KIND_ARRAY ? cr_tangent_array(vo.u.arr)
                                    : cr__scalar_tangent(cr__value_dtype(&vo), cr__scalar_of(&vo));
    return CR_OK;
}

/* frule: Ẏ = Ẋ at the extremal indices. */
static cr_status ext_frule(cr_arena *arena, ext_kind k, const cr_tangent *dargs,
                           const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    cr__red r;
    cr_array *idx = NULL;
    cr_status st = ext_primal(arena, k, args, nargs, &r, &idx, y);
    const cr_array *dA = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, k_ext_names[k], dargs, args, 0, r.wdt, &dA);
    if (st != CR_OK)
        return st;
    cr_tangent dv = cr_tangent_zero();
    if (dA != NULL && (st = tangent_at(arena, &r, dA, idx, &dv)) != CR_OK)
        return st;
    if (k == EXT_MAXIMUM || k == EXT_MINIMUM || cr_tangent_is_zero(dv)) {
        *dy = dv;
        return CR_OK;
    }
    cr_tangent fields[2] = {dv, cr_tangent_none()};
    return cr_tangent_struct(arena, y->u.obj.type, NULL, fields, 2, dy);
}

#define EXT_RULES(NAME, KIND) CR__PARAM_RULES(NAME, ext_rrule, ext_frule, KIND, -1)

EXT_RULES(maximum, EXT_MAXIMUM)
EXT_RULES(minimum, EXT_MINIMUM)
EXT_RULES(findmax, EXT_FINDMAX)
EXT_RULES(findmin, EXT_FINDMIN)

/* ---- The reductions as reduce's operators ----------------------------------------------- */

cr_status cr__red_op_rrule(cr__red_op op, const cr_config *cfg, cr_arena *arena,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    switch (op) {
    case CR__RED_OP_SUM:
        return sum_rrule(cfg, arena, &cr_fn_sum, args, nargs, y, pb, udata);
    case CR__RED_OP_PROD:
        return prod_rrule(cfg, arena, &cr_fn_prod, args, nargs, y, pb, udata);
    case CR__RED_OP_MAX:
        return ext_rrule(arena, EXT_MAXIMUM, args, nargs, y, pb, udata);
    case CR__RED_OP_MIN:
        return ext_rrule(arena, EXT_MINIMUM, args, nargs, y, pb, udata);
    }
    return CR__FAIL(arena, CR_EINVAL, "reduce: no reduction %d", (int)op);
}

cr_status cr__red_op_frule(cr__red_op op, const cr_config *cfg, cr_arena *arena,
                           const cr_tangent *dargs, const cr_value *args, size_t nargs, cr_value *y,
                           cr_tangent *dy)
{
    switch (op) {
    case CR__RED_OP_SUM:
        return cr__linear_frule(cfg, arena, dargs, &cr_fn_sum, args, nargs, y, dy, NULL);
    case CR__RED_OP_PROD:
        return prod_frule(cfg, arena, dargs, &cr_fn_prod, args, nargs, y, dy, NULL);
    case CR__RED_OP_MAX:
        return ext_frule(arena, EXT_MAXIMUM, dargs, args, nargs, y, dy);
    case CR__RED_OP_MIN:
        return ext_frule(arena, EXT_MINIMUM, dargs, args, nargs, y, dy);
    }
    return CR__FAIL(arena, CR_EINVAL, "reduce: no reduction %d", (int)op);
}

/* ---- extrema ------------------------------------------------------------------------------ */

typedef struct xt_f64 {
    double lo, hi;
} xt_f64;
typedef struct xt_f32 {
    float lo, hi;
} xt_f32;
CR__TUPLE2_TYPE(k_xt_f64, "tuple(f64,f64)", xt_f64, lo, CR_KIND_F64, hi, CR_KIND_F64);
CR__TUPLE2_TYPE(k_xt_f32, "tuple(f32,f32)", xt_f32, lo, CR_KIND_F32, hi, CR_KIND_F32);

typedef struct extrema_env {
    red_env lo, hi;
} extrema_env;

static cr_status extrema_forward(cr_arena *arena, const cr_value *args, size_t nargs, cr__red *r,
                                 cr_array **blo, cr_array **ilo, cr_array **bhi, cr_array **ihi,
                                 cr_value *y)
{
    cr_status st = cr__red_parse(arena, "extrema", args, nargs, 2, true, r);
    if (st == CR_OK)
        st = ext_forward(arena, r, false, blo, ilo);
    if (st == CR_OK)
        st = ext_forward(arena, r, true, bhi, ihi);
    cr_value vlo, vhi;
    if (st == CR_OK)
        st = cr__red_output(arena, r, *blo, &vlo);
    if (st == CR_OK)
        st = cr__red_output(arena, r, *bhi, &vhi);
    if (st != CR_OK)
        return st;
    if (!r->all)
        return CR__STRUCT_COPY(arena, &k_fm_arr, y, fm_arr, *vlo.u.arr, *vhi.u.arr);
    if (r->A->dtype == CR_DT_F32)
        return CR__STRUCT_COPY(arena, &k_xt_f32, y, xt_f32, vlo.u.f32, vhi.u.f32);
    return CR__STRUCT_COPY(arena, &k_xt_f64, y, xt_f64, vlo.u.f64, vhi.u.f64);
}

/* Ā = zeros with the minimum's cotangent at the (first) minimal element and the maximum's
 * at the (first) maximal one (the same element for a constant slice: both add). */
static cr_status extrema_pullback(CR__PULLBACK_PARAMS)
{
    extrema_env *e = env;
    const cr__red *r = &e->lo.r;
    cr__dx_none(dx, nx);
    cr_tangent d, f[2];
    const cr_array *g[2];
    cr_status st = cr__tuple_cotangent(arena, "extrema_pullback", "a tuple", *dy, &d);
    if (st != CR_OK)
        return st;
    f[0] = cr_tangent_field(d, 0);
    f[1] = cr_tangent_field(d, 1);
    for (size_t k = 0; k < 2 && st == CR_OK; k++)
        st = cr__red_cot(arena, "extrema_pullback", r, f[k], &g[k]);
    if (st != CR_OK)
        return st;
    if (g[0] == NULL && g[1] == NULL) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *out;
    st = cr__new_like(arena, r->wdt, r->A, true, &out);
    if (st != CR_OK)
        return st;
    if (g[0] != NULL)
        ext_scatter(&e->lo, g[0], out);
    if (g[1] != NULL)
        ext_scatter(&e->hi, g[1], out);
    return cr__give(arena, e->lo.pA, out, &dx[1]);
}

static cr_status extrema_rrule(CR__RRULE_PARAMS)
{
    cr__red r;
    cr_array *blo = NULL, *ilo = NULL, *bhi = NULL, *ihi = NULL;
    cr_status st = extrema_forward(arena, args, nargs, &r, &blo, &ilo, &bhi, &ihi, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    CR__PB_START(extrema_env, lo.pA, extrema_pullback, "extrema_pullback", e, st);
    e->lo.r = e->hi.r = r;
    e->lo.idx = ilo->data;
    e->hi.idx = ihi->data;
    return CR_OK;
}
CR__ARRAY_FN(extrema, "extrema", -1)

/* frule: (Ẋ at the minimal element, Ẋ at the maximal element). */
static cr_status extrema_frule(CR__FRULE_PARAMS)
{
    cr__red r;
    cr_array *blo = NULL, *ilo = NULL, *bhi = NULL, *ihi = NULL;
    cr_status st = extrema_forward(arena, args, nargs, &r, &blo, &ilo, &bhi, &ihi, y);
    const cr_array *dA = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, "extrema", dargs, args, 0, r.wdt, &dA);
    if (st != CR_OK || dA == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_tangent fl[2];
    for (size_t k = 0; k < 2; k++)
        if ((st = tangent_at(arena, &r, dA, k == 0 ? ilo : ihi, &fl[k])) != CR_OK)
            return st;
    return cr_tangent_struct(arena, y->u.obj.type, NULL, fl, 2, dy);
}

/* ---- cumprod -------------------------------------------------------------------------------- */

typedef enum { CP_FWD, CP_PB, CP_FR } cp_mode;

typedef struct cp_ctx {
    cp_mode mode;
    bool cplx;
    size_t len;
    ptrdiff_t sx, sy, sg, so; /* strides along the line */
    const void *x, *y, *g;    /* x (A's strides), y and g contiguous */
    void *out;                /* contiguous */
} cp_ctx;

/* Along a line, with y_k = y_{k-1} x_k (y_{-1} = 1):
 * forward: the running products;
 * frule: ẏ_k = ẏ_{k-1} x_k + y_{k-1} ẋ_k (g = ẋ);
 * pullback (the reverse of the recurrence, which divides by nothing, so zeros are exact):
 * a_k = ȳ_k + conj(x_{k+1}) a_{k+1}, x̄_k = conj(y_{k-1}) a_k. */
static void cp_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    cp_ctx *c = vctx;
    for (size_t i = 0; i < n; i++) {
        ptrdiff_t ox = CR__AT(0), oc = CR__AT(1);
#define CP_X(k)                                                      \
    (c->cplx ? ((const cr_complex *)c->x)[ox + (ptrdiff_t)(k)*c->sx] \
             : ((const double *)c->x)[ox + (ptrdiff_t)(k)*c->sx])
#define CP_Y(k)                                                      \
    (c->cplx ? ((const cr_complex *)c->y)[oc + (ptrdiff_t)(k)*c->sy] \
             : ((const double *)c->y)[oc + (ptrdiff_t)(k)*c->sy])
#define CP_G(k)                                                      \
    (c->cplx ? ((const cr_complex *)c->g)[oc + (ptrdiff_t)(k)*c->sg] \
             : ((const double *)c->g)[oc + (ptrdiff_t)(k)*c->sg])
#define CP_SET(k, v)                                                  \
    do {                                                              \
        if (c->cplx)                                                  \
            ((cr_complex *)c->out)[oc + (ptrdiff_t)(k)*c->so] = (v);  \
        else                                                          \
            ((double *)c->out)[oc + (ptrdiff_t)(k)*c->so] = creal(v); \
    } while (0)
        if (c->mode == CP_FWD) {
            cr_complex p = 1;
            for (size_t k = 0; k < c->len; k++) {
                p *= CP_X(k);
                CP_SET(k, p);
            }
        } else if (c->mode == CP_FR) {
            cr_complex d = 0;
            for (size_t k = 0; k < c->len; k++) {
                cr_complex yprev = k == 0 ? 1.0 : CP_Y(k - 1);
                d = d * CP_X(k) + yprev * CP_G(k);
                CP_SET(k, d);
            }
        } else {
            cr_complex a = 0;
            for (size_t k = c->len; k-- > 0;) {
                a = CP_G(k) + (k + 1 < c->len ? conj(CP_X(k + 1)) * a : 0);
                cr_complex yprev = k == 0 ? 1.0 : CP_Y(k - 1);
                CP_SET(k, conj(yprev) * a);
            }
        }
#undef CP_X
#undef CP_Y
#undef CP_G
#undef CP_SET
    }
}

static void cp_run(const cr__red *r, size_t dim, cp_ctx *c)
{
    size_t shape[CR_ARRAY_MAX_DIMS];
    ptrdiff_t contig[CR_ARRAY_MAX_DIMS];
    for (size_t d = 0; d < r->ndim; d++)
        shape[d] = d == dim ? 1 : r->A->shape[d];
    cr__row_major(r->ndim, r->A->shape, contig);
    cr__nd nd;
    cr__nd_init(&nd, r->ndim, shape);
    cr__nd_add_strides(&nd, r->Aw->strides);
    cr__nd_add_strides(&nd, contig);
    c->cplx = r->wdt == CR_DT_C128;
    c->len = r->A->shape[dim];
    c->sx = r->Aw->strides[dim];
    c->sy = c->sg = c->so = contig[dim];
    c->x = r->Aw->data;
    if (cr_array_numel(r->A) > 0)
        cr__nd_run(&nd, cp_inner, c);
}

typedef struct cp_env {
    cr__red r;
    cr_project *pA;
    size_t dim;
    const cr_array *y;
} cp_env;

static cr_status cumprod_forward(cr_arena *arena, const cr_value *args, size_t nargs, cr__red *r,
                                 size_t *dim, cr_array **w)
{
    cr_status st = cr__red_parse(arena, "cumprod", args, nargs, 2, false, r);
    if (st != CR_OK)
        return st;
    *dim = 0;
    if (nargs == 1) {
        if (r->A->ndim != 1)
            return CR__FAIL(arena, CR_EINVAL,
                            "cumprod: give the dimension for an array of %u dimension%s",
                            (unsigned)r->A->ndim, CR__S((unsigned)r->A->ndim));
    } else {
        int64_t d;
        st = cr__int_arg(arena, "cumprod", &args[1], &d);
        if (st != CR_OK)
            return st;
        if (d < 0 || (size_t)d >= r->A->ndim)
            return CR__FAIL(arena, CR_EINVAL, "cumprod: dimension %lld out of range", (long long)d);
        *dim = (size_t)d;
    }
    st = cr__new_like(arena, r->wdt, r->A, false, w);
    if (st != CR_OK)
        return st;
    cp_ctx c = {CP_FWD, false, 0, 0, 0, 0, 0, NULL, NULL, NULL, (*w)->data};
    cp_run(r, *dim, &c);
    return CR_OK;
}

static cr_status cumprod_pullback(CR__PULLBACK_PARAMS)
{
    cp_env *e = env;
    const cr_array *A = e->r.A;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "cumprod_pullback", *dy, A->ndim, A->shape, e->r.wdt, &g);
    if (st != CR_OK)
        return st;
    if (g == NULL) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *out;
    st = cr__new_like(arena, e->r.wdt, A, false, &out);
    if (st != CR_OK)
        return st;
    cp_ctx c = {CP_PB, false, 0, 0, 0, 0, 0, NULL, e->y->data, g->data, out->data};
    cp_run(&e->r, e->dim, &c);
    return cr__give(arena, e->pA, out, &dx[1]);
}

/* cumprod_forward, and y its result in A's dtype. */
static cr_status cumprod_primal(cr_arena *arena, const cr_value *args, size_t nargs, cr__red *r,
                                size_t *dim, cr_array **w, cr_value *y)
{
    cr_array *o;
    cr_status st = cumprod_forward(arena, args, nargs, r, dim, w);
    if (st == CR_OK)
        st = cr__cast(arena, *w, (cr_dtype)r->A->dtype, &o);
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

/* cumprod(A, dim): running products along dim, zero-safe in both directions. */
static cr_status cumprod_rrule(CR__RRULE_PARAMS)
{
    cr__red r;
    size_t dim;
    cr_array *w;
    cr_status st = cumprod_primal(arena, args, nargs, &r, &dim, &w, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    CR__PB_START(cp_env, pA, cumprod_pullback, "cumprod_pullback", e, st);
    e->r = r;
    e->dim = dim;
    e->y = w;
    return CR_OK;
}
CR__ARRAY_FN(cumprod, "cumprod", -1)

static cr_status cumprod_frule(CR__FRULE_PARAMS)
{
    cr__red r;
    size_t dim;
    cr_array *w;
    cr_status st = cumprod_primal(arena, args, nargs, &r, &dim, &w, y);
    if (st != CR_OK)
        return st;
    const cr_array *t;
    st = cr__dx_array(arena, "cumprod", dargs, args, 0, r.wdt, &t);
    if (st != CR_OK || t == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_array *out;
    st = cr__new_like(arena, r.wdt, r.A, false, &out);
    if (st != CR_OK)
        return st;
    cp_ctx c = {CP_FR, false, 0, 0, 0, 0, 0, NULL, w->data, t->data, out->data};
    cp_run(&r, dim, &c);
    return cr_project_tangent(arena, y, cr_tangent_array(out), dy);
}

/* ---- Test registrations ---------------------------------------------------------------- */

cr_status cr__sample_red(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs, void *env)
{
    (void)nargs;
    const cr__red_sample_opts *o = env;
    static const size_t shapes[3][3] = {{5, 0, 0}, {3, 4, 0}, {2, 3, 4}};
    size_t k = cr__rng_below(rng, 3), nd = k + 1;
    cr_dtype dt = cr__rng_dtype(rng);
    if (o->real_only && dt == CR_DT_C128)
        dt = CR_DT_F64;
    cr_array *A;
    double lo = o->zeros ? 0.5 : -2.0, hi = o->zeros ? 1.5 : 2.0;
    cr_status st = cr__rand_array(arena, rng, dt, nd, shapes[k], lo, hi, &A);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(A);
    if (o->real_only) {
        /* Distinct values at least 1/8 apart, so that finite differences never cross a
         * tie (where maximum and findmax have a kink). */
        cr__fill_distinct(rng, A, (double)n / 2);
    }
    if (o->zeros) {
        /* Random signs, and one or two zeros two times out of three. */
        for (size_t i = 0; i < n; i++)
            if (cr__rng_below(rng, 2))
                cr__store(A, (ptrdiff_t)i, -cr__load(A, (ptrdiff_t)i));
        size_t nz = cr__rng_below(rng, 3);
        for (size_t z = 0; z < nz; z++)
            cr__store(A, (ptrdiff_t)cr__rng_below(rng, n), 0.0);
    }
    args[0] = cr_value_array(A);
    if (!o->dims)
        return CR_OK;
    if (o->one_dim || cr__rng_below(rng, 2)) {
        args[1] = cr_value_i64((int64_t)cr__rng_below(rng, nd));
        return CR_OK;
    }
    int64_t dims[2] = {0, (int64_t)nd - 1};
    cr_array *D;
    st = cr__i64_array(arena, nd > 1 ? 2 : 1, dims, &D);
    if (st == CR_OK)
        args[1] = cr_value_array(D);
    return st;
}

static cr_status sample_vector(CR__SAMPLE_PARAMS)
{
    size_t n = 2 + cr__rng_below(rng, 5);
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 1, &n, -2, 2, &A);
    if (st == CR_OK)
        args[0] = cr_value_array(A);
    return st;
}

const cr__red_sample_opts cr__so_red_all = {false, false, false, false};
static const cr__red_sample_opts k_so_dims = {true, false, false, false};
static const cr__red_sample_opts k_so_real = {false, true, false, false};
static const cr__red_sample_opts k_so_real_dims = {true, true, false, false};
static const cr__red_sample_opts k_so_prod = {false, false, true, false};
static const cr__red_sample_opts k_so_prod_dims = {true, false, true, false};
static const cr__red_sample_opts k_so_one_dim = {true, false, false, true};

const cr_rule_test cr__t_red_all = {.sample = cr__sample_red, .env = (void *)&cr__so_red_all};
const cr_rule_test cr__t_red_dims = {.sample = cr__sample_red, .env = (void *)&k_so_dims};
const cr_rule_test cr__t_red_real = {.sample = cr__sample_red, .env = (void *)&k_so_real};
const cr_rule_test cr__t_red_real_dims = {.sample = cr__sample_red, .env = (void *)&k_so_real_dims};
static const cr_rule_test k_t_prod = {.sample = cr__sample_red, .env = (void *)&k_so_prod};
static const cr_rule_test k_t_prod_dims = {.sample = cr__sample_red,
                                           .env = (void *)&k_so_prod_dims};
static const cr_rule_test k_t_cumsum = {.sample = cr__sample_red, .env = (void *)&k_so_one_dim};
static const cr_rule_test k_t_vector = {.sample = sample_vector};
static const cr__red_sample_opts k_so_cumprod = {true, false, true, true};
static const cr_rule_test k_t_cumprod = {.sample = cr__sample_red, .env = (void *)&k_so_cumprod};

cr_status cr__array_register_reduce(cr_registry *reg)
{
    static const cr_argspec f1[1] = {{CR__M_FARRAY, NULL}};
    static const cr_argspec f2[2] = {{CR__M_FARRAY, NULL}, {CR_M_INT | CR_M_A_INT, NULL}};
    static const cr_argspec fi[2] = {{CR__M_FARRAY, NULL}, {CR_M_INT, NULL}};
    static const cr_argspec r1[1] = {{CR__M_RARRAY, NULL}};
    static const cr_argspec r2[2] = {{CR__M_RARRAY, NULL}, {CR_M_INT | CR_M_A_INT, NULL}};
    /* The linear reductions over all of A or dims; the piecewise linear ones of real A. */
#define LIN_RED(NAME) \
    CR__ROWS2(NAME, cr__linear_frule, f1, f2, &cr__t_red_all, &cr__t_red_dims, CR_LINEAR, NULL)
#define REAL_RED(NAME)                                                           \
    CR__ROWS2(NAME, NAME##_frule, r1, r2, &cr__t_red_real, &cr__t_red_real_dims, \
              CR_PIECEWISE_LINEAR, NULL)
    static const cr__array_rule k[] = {
        LIN_RED(sum),
        LIN_RED(mean),
        CR__ROWS2(prod, prod_frule, f1, f2, &k_t_prod, &k_t_prod_dims, CR_NONLINEAR,
                  &cr__form_prod),
        CR__ROWS2(cumsum, cr__linear_frule, f1, fi, &k_t_vector, &k_t_cumsum, CR_LINEAR, NULL),
        REAL_RED(maximum),
        REAL_RED(minimum),
        REAL_RED(findmax),
        REAL_RED(findmin)};
    static const cr__array_rule k2[] = {
        REAL_RED(extrema),
        CR__ROWS2(cumprod, cumprod_frule, f1, fi, &k_t_vector, &k_t_cumprod, CR_NONLINEAR,
                  &cr__form_cumprod),
    };
#undef LIN_RED
#undef REAL_RED
    /* The order of docs/rules-index.md: sum ... findmin, softmax, logsoftmax, logsumexp, var,
     * std, extrema, cumprod, norm. */
    cr_status st = cr__add_rules(reg, k, sizeof k / sizeof k[0]);
    if (st == CR_OK)
        st = cr__array_register_softmax(reg);
    if (st == CR_OK)
        st = cr__array_register_var(reg);
    if (st == CR_OK)
        st = cr__add_rules(reg, k2, sizeof k2 / sizeof k2[0]);
    if (st == CR_OK)
        st = cr__array_register_norm(reg);
    return st;
}
