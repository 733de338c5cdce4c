/*
 * Higher-order array rules, which differentiate a function they are given: map(f, A...),
 * sum(f, A[, dims]), foldl(op, v[, init]) and accumulate(op, v[, init]). A scalar-table
 * function goes through its row: the partials are computed in the forward pass and kept as
 * arrays, never as per-element pullbacks. Any other function goes through its own rules
 * or, for user functions, the configuration's AD (rrule_via_ad / frule_via_ad), one call
 * per element or step, whose pullbacks are kept in the arena and run by the pullback.
 */
#include <stdio.h>

#include "hof_impl.h"

#include <chainrules/rules_complex.h>
#include <chainrules/rules_math.h>
#include <chainrules/scalar_rule.h>

/* ---- One element through f ---------------------------------------------------------------- */

/* Keep the status, and put who, f and the element before the message explaining it. */
static cr_status elem_fail(cr_arena *arena, cr_status st, const char *who, const cr_value *f,
                           size_t k)
{
    cr_ctx *ctx = cr_arena_ctx(arena);
    char msg[512];
    snprintf(msg, sizeof msg, "%s",
             cr_ctx_errcode(ctx) == st ? cr_ctx_errmsg(ctx) : cr_status_str(st));
    return cr_ctx_error(ctx, st, "%s: %s failed at element %zu: %s", who, cr__fname(f), k,
                        cr__after_name(msg, cr__fname(f)));
}

/* The status of an element's rule (forward: an frule, else an rrule) found through the
 * configuration's AD (via_ad) or the registry: CR_NOTHING becomes the error saying which is
 * missing, another failure gets elem_fail's prefix. */
static cr_status elem_end(cr_arena *arena, cr_status st, bool via_ad, bool forward, const char *who,
                          const cr_value *f, const cr_value *args, size_t nargs, size_t k)
{
    const char *rule = forward ? "frule" : "rrule";
    if (st == CR_NOTHING && via_ad)
        st = CR__FAIL(arena, CR_ENORULE, "%s_via_ad gave no rule", rule);
    else if (st == CR_NOTHING) {
        char sig[256];
        cr__call_str(f, args, nargs, sig, sizeof sig);
        return CR__FAIL(arena, CR_ENOCAP,
                        "%s: no %s for %s, and the rule configuration has no %s mode to "
                        "differentiate it (CR_CAP_%s and %s_via_ad are required)",
                        who, rule, sig, forward ? "forward" : "reverse",
                        forward ? "FORWARD" : "REVERSE", rule);
    }
    return st == CR_OK ? CR_OK : elem_fail(arena, st, who, f, k);
}

cr_status cr__elem_rrule(const cr_config *cfg, cr_arena *arena, const char *who, size_t k,
                         const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                         cr_pullback *pb)
{
    bool via_ad = cfg != NULL && (cfg->caps & CR_CAP_REVERSE) != 0;
    cr_status st = via_ad ? cr_rrule_via_ad(cfg, arena, f, args, nargs, y, pb)
                          : cr_rrule(cfg, arena, f, args, nargs, y, pb);
    return elem_end(arena, st, via_ad, false, who, f, args, nargs, k);
}

cr_status cr__elem_frule(const cr_config *cfg, cr_arena *arena, const char *who, size_t k,
                         const cr_tangent *dargs, const cr_value *f, const cr_value *args,
                         size_t nargs, cr_value *y, cr_tangent *dy)
{
    bool via_ad = cfg != NULL && (cfg->caps & CR_CAP_FORWARD) != 0;
    cr_status st = via_ad ? cr_frule_via_ad(cfg, arena, dargs, f, args, nargs, y, dy)
                          : cr_frule(cfg, arena, dargs, f, args, nargs, y, dy);
    return elem_end(arena, st, via_ad, true, who, f, args, nargs, k);
}

cr_status cr__elem_call(cr_arena *arena, const char *who, size_t k, const cr_value *f,
                        const cr_value *args, size_t nargs, cr_value *y)
{
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    return st == CR_OK ? CR_OK : elem_fail(arena, st, who, f, k);
}

cr_dtype cr__hof_dtype(cr_dtype in, cr_dtype res)
{
    if (res == CR_DT_C128)
        return CR_DT_C128;
    if (res == 0)
        return in != 0 ? in : CR_DT_F64;
    return in == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
}

/* An element of a work array (double or complex) as a complex number. */
static inline cr_complex wget(const cr_array *w, size_t i)
{
    return w->dtype == CR_DT_C128 ? ((const cr_complex *)w->data)[i]
                                  : (cr_complex)((const double *)w->data)[i];
}

static inline void wset(cr_array *w, size_t i, cr_complex v)
{
    if (w->dtype == CR_DT_C128)
        ((cr_complex *)w->data)[i] = v;
    else
        ((double *)w->data)[i] = creal(v);
}

/* ---- map ------------------------------------------------------------------------------- */

/* map(f, A1, ..., Ak): arrays of one shape (broadcast stretches, map does not). */
static cr_status map_check(cr_arena *arena, const cr_value *args, size_t nargs)
{
    if (nargs < 2 || args[0].kind != CR_KIND_FUNC || args[0].u.func.fn == NULL)
        return CR__FAIL(arena, CR_EINVAL, "map: takes a function and at least one array");
    for (size_t j = 1; j < nargs; j++) {
        if (args[j].kind != CR_KIND_ARRAY || args[j].u.arr == NULL)
            return CR__FAIL(arena, CR_EINVAL, "map: argument %zu is a %s, not an array", j + 1,
                            cr_kind_name(args[j].kind));
        const cr_array *A;
        cr_status st = cr__array_arg(arena, "map", args, nargs, j, &A); /* the size invariant */
        if (st != CR_OK)
            return st;
        if (!cr_array_same_shape(args[j].u.arr, args[1].u.arr)) {
            char a[96], b[96];
            return CR__FAIL(arena, CR_ESHAPE,
                            "map: arrays of shapes %s and %s (map takes arrays of one shape; "
                            "broadcast stretches them)",
                            cr__shape_str(args[1].u.arr, a, sizeof a),
                            cr__shape_str(args[j].u.arr, b, sizeof b));
        }
    }
    return CR_OK;
}

/* map(f, A...): y_i = f(A1_i, ...); Āj = conj(∂f/∂xj) ⊙ Ȳ (the partials of f's row, or
 * each element's pullback). broadcast's rule, for arrays of one shape. */
static cr_status map_rrule(CR__RRULE_PARAMS)
{
    cr_status st = map_check(arena, args, nargs);
    if (st == CR_OK)
        st = cr__bc_rrule(cfg, arena, "map", args, nargs, y, pb, udata);
    if (st == CR_OK && udata != CR__PRIMAL_ONLY)
        pb->name = "map_pullback";
    return st;
}
CR__ARRAY_FN(map, "map", -1)

/* frule: ẏ_i = Σj ∂f/∂xj ẋj_i. */
static cr_status map_frule(CR__FRULE_PARAMS)
{
    cr_status st = map_check(arena, args, nargs);
    return st != CR_OK ? st : cr__bc_frule(cfg, arena, "map", dargs, args, nargs, y, dy);
}

/* ---- sum(f, A[, dims]) ---------------------------------------------------------------- */

typedef struct sumf {
    const cr_scalar_rule *row; /* NULL: sum(map(f, A)) through the elements' rules */
    const cr_array *A;         /* the argument */
    const cr_array *Aw;        /* its value in the work dtype (any strides) */
    cr_dtype dt, wdt;          /* output (A's) and work dtypes */
    bool dims;                 /* dims given: the result is an array */
    size_t ndim;
    size_t oshape[CR_ARRAY_MAX_DIMS]; /* A's shape with the reduced dimensions of extent 1 */
} sumf;

static cr_status sumf_parse(cr_arena *arena, const cr_value *args, size_t nargs, sumf *s)
{
    memset(s, 0, sizeof *s);
    cr_status st = cr__nargs(arena, "sum", nargs, 2, 3);
    if (st != CR_OK)
        return st;
    if (args[0].kind != CR_KIND_FUNC || args[0].u.func.fn == NULL)
        return CR__FAIL(arena, CR_EINVAL, "sum: sum(f, A) takes a function first");
    st = cr__array_arg(arena, "sum", args, nargs, 1, &s->A);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)s->A->dtype))
        return CR__FAIL(arena, CR_EINVAL, "sum: sum(f, A) takes an f64, f32 or c128 array, not %s",
                        cr_dtype_name((cr_dtype)s->A->dtype));
    const cr_function *fn = args[0].u.func.fn;
    s->dt = (cr_dtype)s->A->dtype;
    s->wdt = cr__work(s->dt);
    s->row = cr_scalar_rule_of(fn);
    if (s->row != NULL && (s->row->nin != 1 || s->row->nout != 1))
        return CR__FAIL(arena, CR_EINVAL,
                        "sum: %s takes %u argument%s and has %u output%s (one of each needed)",
                        fn->name, (unsigned)s->row->nin, CR__S((unsigned)s->row->nin),
                        (unsigned)s->row->nout, CR__S((unsigned)s->row->nout));
    if (s->row != NULL && s->wdt == CR_DT_C128 && s->row->c128 == NULL)
        return CR__FAIL(arena, CR_EDOMAIN, "sum: %s is defined for real arguments only", fn->name);
    s->ndim = s->A->ndim;
    bool mask[CR_ARRAY_MAX_DIMS] = {false};
    if (nargs == 3) {
        st = cr__dims_arg(arena, "sum", &args[2], s->ndim, mask);
        if (st != CR_OK)
            return st;
        s->dims = true;
    }
    for (size_t d = 0; d < s->ndim; d++)
        s->oshape[d] = !s->dims || mask[d] ? 1 : s->A->shape[d];
    return s->row != NULL ? cr__strided(arena, s->A, s->wdt, &s->Aw) : CR_OK;
}

/* The row's loop. Arrays: 0 the sum (stride 0 over the reduced dimensions), 1 A, 2 the
 * partials D, 3 the frule's tangent of A, 4 the sum of D ⊙ Ȧ. */
typedef struct sumf_ctx {
    const cr_scalar_rule *row;
    bool cplx;
    void *acc;
    const void *x;
    void *D;        /* NULL: not kept */
    const void *dx; /* NULL: no tangent */
    void *dacc;
} sumf_ctx;

static void sumf_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    sumf_ctx *c = vctx;
    for (size_t i = 0; i < n; i++) {
        ptrdiff_t o[5];
        for (size_t k = 0; k < 5; k++)
            o[k] = CR__AT(k);
        if (c->cplx) {
            cr_complex x = ((const cr_complex *)c->x)[o[1]], Y, D;
            c->row->c128(&x, &Y, &D);
            ((cr_complex *)c->acc)[o[0]] += Y;
            if (c->D != NULL)
                ((cr_complex *)c->D)[o[2]] = D;
            if (c->dx != NULL)
                ((cr_complex *)c->dacc)[o[4]] += D * ((const cr_complex *)c->dx)[o[3]];
        } else {
            double x = ((const double *)c->x)[o[1]], Y, D;
            c->row->f64(&x, &Y, &D);
            ((double *)c->acc)[o[0]] += Y;
            if (c->D != NULL)
                ((double *)c->D)[o[2]] = D;
            if (c->dx != NULL)
                ((double *)c->dacc)[o[4]] += D * ((const double *)c->dx)[o[3]];
        }
    }
}

/* One pass of the row over A: the sums (work dtype, oshape), the partials when keep_D, the
 * frule's sums of D ⊙ Ȧ when dx is given. Nothing of A's size is allocated but D. */
static cr_status sumf_row_eval(cr_arena *arena, const sumf *s, bool keep_D, const cr_array *dx,
                               cr_array **acc, cr_array **D, cr_array **dacc)
{
    cr_status st = cr__new(arena, s->wdt, s->ndim, s->oshape, true, acc);
    if (st == CR_OK && keep_D)
        st = cr__new(arena, s->wdt, s->ndim, s->A->shape, false, D);
    if (st == CR_OK && dx != NULL)
        st = cr__new(arena, s->wdt, s->ndim, s->oshape, true, dacc);
    if (st != CR_OK)
        return st;
    cr__nd nd;
    cr__nd_init(&nd, s->ndim, s->A->shape);
    cr__nd_add(&nd, *acc);
    cr__nd_add(&nd, s->Aw);
    cr__nd_add(&nd, keep_D ? *D : s->Aw);
    cr__nd_add(&nd, dx != NULL ? dx : s->Aw);
    cr__nd_add(&nd, dx != NULL ? *dacc : *acc);
    sumf_ctx c = {s->row,
                  s->wdt == CR_DT_C128,
                  (*acc)->data,
                  s->Aw->data,
                  keep_D ? (*D)->data : NULL,
                  dx != NULL ? dx->data : NULL,
                  dx != NULL ? (*dacc)->data : NULL};
    cr__nd_run(&nd, sumf_inner, &c);
    return CR_OK;
}

/* The result: a scalar of A's element type without dims, an array with them. */
static cr_status sumf_output(cr_arena *arena, const sumf *s, const cr_array *acc, cr_value *y)
{
    if (!s->dims) {
        *y = cr__scalar_value(s->dt, cr__load(acc, 0));
        return CR_OK;
    }
    cr_array *o;
    cr_status st = cr__cast(arena, acc, s->dt, &o);
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

typedef struct sumf_env {
    sumf s;
    const cr_array *D; /* the row's partials */
    cr_project *pA;
    bool functor;       /* f has fields (∂f from the elements' pullbacks) */
    cr_pullback map_pb; /* without a row: map(f, A)'s pullback ... */
    cr_pullback sum_pb; /* ... and sum's */
} sumf_env;

typedef struct sumf_thunk {
    const sumf_env *e;
    const cr_array *g; /* Ȳ in the work dtype, of oshape */
} sumf_thunk;
CR__EG_THUNK_NEW(sumf_thunk_new, sumf_thunk, sumf_env)

/* out (=|+=) conj(D) ⊙ Ȳ broadcast over the reduced dimensions. Arrays: 0 out, 1 D, 2 Ȳ. */
typedef struct sumf_co {
    bool cplx, add;
    void *out;
    const void *D, *g;
} sumf_co;

static void sumf_co_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    sumf_co *c = vctx;
    for (size_t i = 0; i < n; i++) {
        ptrdiff_t oo = CR__AT(0), od = CR__AT(1), og = CR__AT(2);
        if (c->cplx) {
            cr_complex v = conj(((const cr_complex *)c->D)[od]) * ((const cr_complex *)c->g)[og];
            cr_complex *p = (cr_complex *)c->out + oo;
            *p = c->add ? *p + v : v;
        } else {
            double v = ((const double *)c->D)[od] * ((const double *)c->g)[og];
            double *p = (double *)c->out + oo;
            *p = c->add ? *p + v : v;
        }
    }
}

static void sumf_co_run(const sumf_thunk *t, cr_array *out, bool add)
{
    const sumf *s = &t->e->s;
    cr__nd nd;
    cr__nd_init(&nd, s->ndim, s->A->shape);
    cr__nd_add(&nd, out);
    cr__nd_add(&nd, t->e->D);
    cr__nd_add(&nd, t->g);
    sumf_co c = {s->wdt == CR_DT_C128, add, out->data, t->e->D->data, t->g->data};
    cr__nd_run(&nd, sumf_co_inner, &c);
}

static cr_status sumf_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    sumf_thunk *t = env;
    cr_array *raw;
    cr_status st = cr__new_like(arena, t->e->s.wdt, t->e->s.A, false, &raw);
    if (st != CR_OK)
        return st;
    sumf_co_run(t, raw, false);
    return cr__give(arena, t->e->pA, raw, out);
}

/* add!: straight into the accumulator when it is A-shaped, dense and of the work dtype. */
CR__THUNK_ADD(sumf_add, sumf_thunk, t->e->s.wdt, t->e->s.A, sumf_co_run(t, dest, true),
              sumf_thunk_fn)

/* Ā = conj(f'(A)) ⊙ Ȳ (Ȳ broadcast over the reduced dimensions): an InplaceableThunk. */
static cr_status sumf_pullback(CR__PULLBACK_PARAMS)
{
    sumf_env *e = env;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "sum_pullback", *dy, e->s.ndim, e->s.oshape, e->s.wdt, &g);
    return st != CR_OK
               ? st
               : sumf_thunk_new(arena, e, g, sumf_thunk_fn, sumf_add, "sum_pullback_thunk", &dx[2]);
}

/* Without a row: the pullback of sum, then that of map(f, A). */
static cr_status sumf_map_pullback(CR__PULLBACK_PARAMS)
{
    sumf_env *e = env;
    cr__dx_none(dx, nx);
    cr_tangent ds[3], dm[3];
    cr_status st = cr_pullback_call(arena, &e->sum_pb, dy, ds, e->sum_pb.nx);
    if (st == CR_OK)
        st = cr_pullback_call(arena, &e->map_pb, &ds[1], dm, 3);
    if (st != CR_OK)
        return st;
    if (e->functor)
        dx[1] = dm[1];
    dx[2] = dm[2];
    return CR_OK;
}

/* The arguments of sum for sum(map(f, A)[, dims]). */
static size_t sumf_sum_args(const cr_value *args, size_t nargs, const cr_value *mapped,
                            cr_value *sargs)
{
    sargs[0] = *mapped;
    if (nargs == 3)
        sargs[1] = args[2];
    return nargs - 1;
}

/* sum(f, A; dims) = Σ f(a) over the reduced dimensions. With a row: one pass computing the
 * sums and the partials D = f'(A), and Ā = conj(D) ⊙ Ȳ. Otherwise sum(map(f, A); dims),
 * with map's one rule per element. */
cr_status cr__sum_f_rrule(CR__RRULE_PARAMS)
{
    bool primal = udata == CR__PRIMAL_ONLY;
    sumf s;
    cr_status st = sumf_parse(arena, args, nargs, &s);
    if (st != CR_OK)
        return st;
    sumf_env *e = NULL;
    if (!primal) {
        e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(sumf_env));
        if (e == NULL)
            return CR__ALLOC_STATUS(arena);
        e->s = s;
        e->functor = args[0].u.func.fn->self_type != NULL;
        st = cr_project_new(arena, &args[1], &e->pA);
        if (st != CR_OK)
            return st;
    }
    if (s.row != NULL) {
        cr_array *acc, *D = NULL;
        st = sumf_row_eval(arena, &s, !primal, NULL, &acc, &D, NULL);
        if (st == CR_OK)
            st = sumf_output(arena, &s, acc, y);
        if (st != CR_OK || primal)
            return st;
        e->D = D;
        *pb = (cr_pullback){sumf_pullback, e, "sum_pullback", nargs + 1};
        return CR_OK;
    }
    cr_value mapped, sargs[2];
    st = cr__bc_rrule(cfg, arena, "sum", args, 2, &mapped, primal ? NULL : &e->map_pb, udata);
    if (st != CR_OK)
        return st;
    size_t ns = sumf_sum_args(args, nargs, &mapped, sargs);
    if (primal)
        return cr_function_call(arena, &cr_fn_sum, sargs, ns, y);
    st = cr_rrule(cfg, arena, &cr_fn_sum, sargs, ns, y, &e->sum_pb);
    if (st == CR_NOTHING)
        return CR__FAIL(arena, CR_ENORULE,
                        "sum: the configuration's registry has no rrule for "
                        "sum of an array");
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){sumf_map_pullback, e, "sum_pullback", nargs + 1};
    return CR_OK;
}

/* frule: ẏ = Σ f'(a) ȧ over the reduced dimensions (with a row, in the same pass as the
 * sums); otherwise the frules of map(f, A) and sum. */
static cr_status sumf_frule(CR__FRULE_PARAMS)
{
    sumf s;
    cr_status st = sumf_parse(arena, args, nargs, &s);
    if (st != CR_OK)
        return st;
    if (s.row != NULL) {
        const cr_array *dx;
        st = cr__dx_array(arena, "sum", dargs, args, 1, s.wdt, &dx);
        cr_array *acc, *dacc = NULL;
        if (st == CR_OK)
            st = sumf_row_eval(arena, &s, false, dx, &acc, NULL, &dacc);
        if (st == CR_OK)
            st = sumf_output(arena, &s, acc, y);
        if (st != CR_OK)
            return st;
        if (dx == NULL) {
            *dy = cr_tangent_zero();
            return CR_OK;
        }
        cr_value t;
        st = sumf_output(arena, &s, dacc, &t);
        if (st != CR_OK)
            return st;
        cr_tangent tt = t.kind == CR_KIND_ARRAY ? cr_tangent_array(t.u.arr)
                                                : cr__scalar_tangent(s.dt, cr__scalar_of(&t));
        return cr_project_tangent(arena, y, tt, dy);
    }
    cr_value mapped, sargs[2];
    cr_tangent dmapped;
    st = cr__bc_frule(cfg, arena, "sum", dargs, args, 2, &mapped, &dmapped);
    if (st != CR_OK)
        return st;
    size_t ns = sumf_sum_args(args, nargs, &mapped, sargs);
    cr_tangent sd[3] = {cr_tangent_none(), dmapped, cr_tangent_none()};
    st = cr_frule(cfg, arena, sd, &cr_fn_sum, sargs, ns, y, dy);
    if (st == CR_NOTHING)
        return CR__FAIL(arena, CR_ENORULE,
                        "sum: the configuration's registry has no frule for "
                        "sum of an array");
    return st;
}

/* ---- mean(f, A[, dims]) ------------------------------------------------------------------ */

/* mean(f, A; dims) = sum(f, A; dims) / n, n the number of reduced elements: sum(f, A)'s
 * rules, the output scaled by 1/n and the cotangent by 1/n before sum's pullback. */
typedef struct meanf_env {
    cr_pullback sum_pb;
    double scale;
} meanf_env;

/* 1 / the number of elements each output of sum(f, A[, dims]) reduces. */
static cr_status meanf_scale(cr_arena *arena, const cr_value *args, size_t nargs, double *scale)
{
    sumf s;
    cr_status st = sumf_parse(arena, args, nargs, &s);
    if (st != CR_OK)
        return st;
    size_t in = cr_array_numel(s.A), out = 1;
    for (size_t d = 0; d < s.ndim; d++)
        out *= s.oshape[d]; /* each oshape extent divides A's: no overflow */
    if (in == 0 || out == 0)
        return CR__FAIL(arena, CR_EINVAL, "mean: mean(f, A) of an empty array");
    *scale = (double)out / (double)in;
    return CR_OK;
}

/* y <- scale y, a number or a new contiguous array of the call's own (of any float
 * dtype: f32 too, which cr__scal does not take) */
static void meanf_scale_value(double scale, cr_value *y)
{
    if (y->kind == CR_KIND_ARRAY)
        for (size_t i = 0; i < cr_array_numel(y->u.arr); i++)
            cr__store(y->u.arr, (ptrdiff_t)i, cr__load(y->u.arr, (ptrdiff_t)i) * scale);
    else
        *y = cr__scalar_value(cr__value_dtype(y), cr__scalar_of(y) * scale);
}

static cr_status meanf_pullback(CR__PULLBACK_PARAMS)
{
    meanf_env *e = env;
    cr_tangent sdy;
    cr_status st = cr_tangent_scale(arena, e->scale, *dy, &sdy);
    return st != CR_OK ? st : cr_pullback_call(arena, &e->sum_pb, &sdy, dx, nx);
}

cr_status cr__mean_f_rrule(CR__RRULE_PARAMS)
{
    double scale;
    cr_status st = meanf_scale(arena, args, nargs, &scale);
    meanf_env *e = NULL;
    if (st == CR_OK && udata != CR__PRIMAL_ONLY &&
        !(e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(meanf_env))))
        st = CR__ALLOC_STATUS(arena);
    if (st == CR_OK)
        st = cr__sum_f_rrule(cfg, arena, f, args, nargs, y, e ? &e->sum_pb : NULL, udata);
    if (st != CR_OK)
        return st;
    meanf_scale_value(scale, y);
    if (e == NULL)
        return CR_OK;
    e->scale = scale;
    *pb = (cr_pullback){meanf_pullback, e, "mean_pullback", nargs + 1};
    return CR_OK;
}

static cr_status meanf_frule(CR__FRULE_PARAMS)
{
    double scale;
    cr_status st = meanf_scale(arena, args, nargs, &scale);
    if (st == CR_OK)
        st = sumf_frule(cfg, arena, dargs, f, args, nargs, y, dy, udata);
    if (st == CR_OK) {
        meanf_scale_value(scale, y);
        st = cr_tangent_scale(arena, scale, *dy, dy);
    }
    return st;
}

/* ---- foldl and accumulate ------------------------------------------------------------ */

typedef struct fold {
    const char *who;           /* "foldl" or "accumulate" */
    bool acc;                  /* accumulate: every intermediate value is an output */
    const cr_value *op;        /* the binary function */
    const cr_scalar_rule *row; /* NULL: op's rules per step */
    const cr_array *x;         /* the vector */
    const cr_array *xw;        /* its values, contiguous, in the work dtype */
    size_t n;
    bool has_init;
    cr_value init;
    size_t k0;        /* first step: 0 with init, 1 without (the fold starts at x[0]) */
    cr_dtype xdt;     /* x's element type */
    cr_dtype dt, wdt; /* promoted type of x and init, work dtype */
} fold;

static cr_status fold_parse(cr_arena *arena, const char *who, bool acc, const cr_value *args,
                            size_t nargs, fold *F)
{
    memset(F, 0, sizeof *F);
    F->who = who;
    F->acc = acc;
    cr_status st = cr__nargs(arena, who, nargs, 2, 3);
    if (st != CR_OK)
        return st;
    if (args[0].kind != CR_KIND_FUNC || args[0].u.func.fn == NULL)
        return CR__FAIL(arena, CR_EINVAL, "%s: takes a function first, not a %s", who,
                        cr_kind_name(args[0].kind));
    F->op = &args[0];
    st = cr__array_arg(arena, who, args, nargs, 1, &F->x);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)F->x->dtype))
        return CR__FAIL(arena, CR_EINVAL, "%s: takes an f64, f32 or c128 vector, not %s", who,
                        cr_dtype_name((cr_dtype)F->x->dtype));
    if (F->x->ndim != 1) {
        char buf[96];
        return CR__FAIL(arena, CR_ESHAPE, "%s: takes a vector (a 1-d array), not shape %s", who,
                        cr__shape_str(F->x, buf, sizeof buf));
    }
    F->n = F->x->shape[0];
    F->xdt = (cr_dtype)F->x->dtype;
    F->dt = F->xdt;
    if (nargs == 3) {
        cr_kind k = (cr_kind)args[2].kind;
        if (k != CR_KIND_F64 && k != CR_KIND_F32 && k != CR_KIND_C128 && k != CR_KIND_I64 &&
            k != CR_KIND_I32 && k != CR_KIND_BOOL)
            return CR__FAIL(arena, CR_EINVAL, "%s: init is a %s, not a number", who,
                            cr_kind_name(k));
        F->has_init = true;
        F->init = args[2];
        F->dt = cr__promote(F->dt, cr__value_dtype(&args[2]));
    }
    F->k0 = F->has_init ? 0 : 1;
    if (!acc && F->n == 0 && !F->has_init)
        return CR__FAIL(arena, CR_EINVAL, "foldl: an empty vector and no init (nothing to fold)");
    F->wdt = cr__work(F->dt);
    const cr_function *fn = F->op->u.func.fn;
    F->row = cr_scalar_rule_of(fn);
    if (F->row != NULL && (F->row->nin != 2 || F->row->nout != 1))
        return CR__FAIL(arena, CR_EINVAL,
                        "%s: %s takes %u argument%s and has %u output%s (two arguments and one "
                        "output needed)",
                        who, fn->name, (unsigned)F->row->nin, CR__S((unsigned)F->row->nin),
                        (unsigned)F->row->nout, CR__S((unsigned)F->row->nout));
    if (F->row != NULL && F->wdt == CR_DT_C128 && F->row->c128 == NULL)
        return CR__FAIL(arena, CR_EDOMAIN, "%s: %s is defined for real arguments only", who,
                        fn->name);
    return cr__dense(arena, F->x, F->wdt, &F->xw);
}

/* Element k of x as a value of x's element type (what op is called with). */
static cr_value fold_elem(const fold *F, size_t k)
{
    return cr__scalar_value(F->xdt, wget(F->xw, k));
}

/* op's row at (a, b): value and partials, in the work dtype. */
static void fold_row2(const fold *F, cr_complex a, cr_complex b, cr_complex *Y, cr_complex *D0,
                      cr_complex *D1)
{
    if (F->wdt == CR_DT_C128) {
        cr_complex x[2] = {a, b}, y, D[2];
        F->row->c128(x, &y, D);
        *Y = y;
        *D0 = D[0];
        *D1 = D[1];
    } else {
        double x[2] = {creal(a), creal(b)}, y, D[2];
        F->row->f64(x, &y, D);
        *Y = y;
        *D0 = D[0];
        *D1 = D[1];
    }
}

/* What a forward pass produces. */
typedef struct fold_fwd {
    cr_complex y;      /* the final value */
    cr_array *ys;      /* accumulate: every value (work dtype) */
    cr_array *D0, *D1; /* rrule with a row: ∂op/∂a and ∂op/∂b of every step */
    cr_pullback *pbs;  /* rrule without a row: every step's pullback */
    uint8_t *sdt;      /* ... and the element type of its result */
    cr_dtype rdt;      /* the promoted type of op's results (0: op never called) */
    bool tangent;      /* frule: some input tangent is nonzero */
    cr_complex ydot;   /* frule: the final tangent */
    cr_array *ydots;   /* frule of accumulate: every tangent */
} fold_fwd;

/* The input tangents of an frule: ẋ (NULL when zero) and the tangent of init. */
typedef struct fold_dot {
    const cr_array *dx;
    cr_tangent dinit;
    cr_tangent dop;
} fold_dot;

/* The forward pass. mode: 0 primal, 1 rrule (keep partials or pullbacks), 2 frule. */
static cr_status fold_forward(const cr_config *cfg, cr_arena *arena, const fold *F, int mode,
                              const fold_dot *dot, fold_fwd *o)
{
    memset(o, 0, sizeof *o);
    size_t n = F->n;
    cr_status st = CR_OK;
    if (F->acc)
        st = cr__new(arena, CR_DT_C128, 1, &n, false, &o->ys);
    if (st == CR_OK && F->acc && mode == 2)
        st = cr__new(arena, CR_DT_C128, 1, &n, true, &o->ydots);
    if (st == CR_OK && mode == 1 && F->row != NULL) {
        st = cr__new(arena, F->wdt, 1, &n, false, &o->D0);
        if (st == CR_OK)
            st = cr__new(arena, F->wdt, 1, &n, false, &o->D1);
    }
    if (st == CR_OK && mode == 1 && F->row == NULL && n > 0) {
        o->pbs = cr_arena_calloc(arena, n, sizeof *o->pbs, _Alignof(cr_pullback));
        o->sdt = cr_arena_calloc(arena, n, 1, 1);
        if (o->pbs == NULL || o->sdt == NULL)
            st = CR__ALLOC_STATUS(arena);
    }
    if (st != CR_OK)
        return st;
    /* The running value (as a number, and as the value op returned) and its tangent. */
    cr_value av = F->has_init ? F->init : (n > 0 ? fold_elem(F, 0) : cr_value_f64(0.0));
    cr_complex a = cr__scalar_of(&av), adot = 0;
    cr_tangent adot_t = cr_tangent_zero();
    if (mode == 2) {
        if (F->has_init) {
            adot_t = dot->dinit;
            bool nz;
            st = cr__tan_scalar(arena, F->who, dot->dinit, &adot, &nz);
            if (st != CR_OK)
                return st;
            o->tangent = nz;
        } else if (dot->dx != NULL && n > 0) {
            adot = wget(dot->dx, 0);
            adot_t = cr__scalar_tangent(F->xdt, adot);
        }
        o->tangent = o->tangent || dot->dx != NULL || !cr_tangent_is_zero(dot->dop);
    }
    if (F->acc && !F->has_init && n > 0) {
        ((cr_complex *)o->ys->data)[0] = a;
        if (o->ydots != NULL)
            ((cr_complex *)o->ydots->data)[0] = adot;
    }
    for (size_t k = F->k0; k < n; k++) {
        cr_complex b = wget(F->xw, k);
        if (F->row != NULL) {
            cr_complex Y, d0, d1;
            fold_row2(F, a, b, &Y, &d0, &d1);
            if (o->D0 != NULL) {
                wset(o->D0, k, d0);
                wset(o->D1, k, d1);
            }
            if (mode == 2)
                adot = d0 * adot + d1 * (dot->dx != NULL ? wget(dot->dx, k) : 0);
            a = Y;
        } else {
            cr_value sargs[2] = {av, fold_elem(F, k)}, yv;
            if (mode == 1) {
                st = cr__elem_rrule(cfg, arena, F->who, k, F->op, sargs, 2, &yv, &o->pbs[k]);
            } else if (mode == 2) {
                cr_tangent td[3] = {dot->dop, adot_t,
                                    dot->dx != NULL ? cr__scalar_tangent(F->xdt, wget(dot->dx, k))
                                                    : cr_tangent_zero()},
                           ty;
                st = cr__elem_frule(cfg, arena, F->who, k, td, F->op, sargs, 2, &yv, &ty);
                if (st == CR_OK) {
                    bool nz;
                    adot_t = ty;
                    st = cr__tan_scalar(arena, F->who, ty, &adot, &nz);
                }
            } else {
                st = cr__elem_call(arena, F->who, k, F->op, sargs, 2, &yv);
            }
            if (st != CR_OK)
                return st;
            cr_dtype vd = cr__value_dtype(&yv);
            if (vd == 0)
                return CR__FAIL(arena, CR_EINVAL, "%s: %s returned a %s, not a number", F->who,
                                F->op->u.func.fn->name, cr_kind_name(yv.kind));
            o->rdt = cr__promote(o->rdt, vd);
            if (o->sdt != NULL)
                o->sdt[k] = (uint8_t)vd;
            av = yv;
            a = cr__scalar_of(&yv);
        }
        if (F->acc) {
            ((cr_complex *)o->ys->data)[k] = a;
            if (o->ydots != NULL)
                ((cr_complex *)o->ydots->data)[k] = adot;
        }
    }
    o->y = a;
    o->ydot = adot;
    return CR_OK;
}

/* The result's element type: the promoted type of x and init with a row; with op's rules,
 * also complex when op returned complex values. */
static cr_dtype fold_out_dtype(const fold *F, const fold_fwd *o)
{
    return F->row != NULL ? F->dt : cr__hof_dtype(F->dt, o->rdt);
}

/* A complex work vector as a new array of element type dt. */
static cr_status fold_vector(cr_arena *arena, const cr_array *c, cr_dtype dt, cr_array **out)
{
    cr_status st = cr__new(arena, dt, 1, c->shape, false, out);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < c->shape[0]; k++)
        cr__store(*out, (ptrdiff_t)k, ((const cr_complex *)c->data)[k]);
    return CR_OK;
}

static cr_status fold_output(cr_arena *arena, const fold *F, const fold_fwd *o, cr_value *y)
{
    cr_dtype odt = fold_out_dtype(F, o);
    if (!F->acc) {
        *y = cr__scalar_value(odt, o->y);
        return CR_OK;
    }
    cr_array *r;
    cr_status st = fold_vector(arena, o->ys, odt, &r);
    if (st == CR_OK)
        *y = cr_value_array(r);
    return st;
}

typedef struct fold_env {
    fold F;
    fold_fwd o;
    cr_project *px, *pinit;
    bool functor;
} fold_env;

typedef struct fold_thunk {
    const fold_env *e;
    const cr_complex *g; /* the seeds: n for accumulate, one for foldl */
} fold_thunk;

/* The reverse sweep over the kept partials: x̄ (into xbar, set or added; NULL: not wanted)
 * and the cotangent reaching init. a carries the cotangent of the running value. */
static cr_complex fold_row_sweep(const fold_env *e, const cr_complex *g, cr_array *xbar, bool add)
{
    const fold *F = &e->F;
    cr_complex a = F->acc ? 0 : g[0];
    for (size_t i = F->n; i-- > 0;) {
        if (F->acc)
            a += g[i];
        cr_complex xb = a;
        if (i >= F->k0) {
            xb = conj(wget(e->o.D1, i)) * a;
            a = conj(wget(e->o.D0, i)) * a;
        }
        if (xbar != NULL)
            wset(xbar, i, add ? wget(xbar, i) + xb : xb);
    }
    return a;
}

static cr_status fold_x_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    fold_thunk *t = env;
    cr_array *raw;
    cr_status st = cr__new_like(arena, t->e->F.wdt, t->e->F.x, false, &raw);
    if (st != CR_OK)
        return st;
    fold_row_sweep(t->e, t->g, raw, false);
    return cr__give(arena, t->e->px, raw, out);
}

CR__THUNK_ADD(fold_x_add, fold_thunk, t->e->F.wdt, t->e->F.x,
              fold_row_sweep(t->e, t->g, dest, true), fold_x_thunk)

/* The seeds as complex numbers: Ȳ of foldl (one), or of accumulate (n). NULL when zero. */
static cr_status fold_seeds(cr_arena *arena, const fold_env *e, const cr_tangent *dy,
                            const cr_complex **g)
{
    const fold *F = &e->F;
    *g = NULL;
    if (F->acc) {
        const cr_array *ga;
        size_t n = F->n;
        cr_status st = cr__tan_array(arena, F->who, *dy, 1, &n, CR_DT_C128, &ga);
        if (st == CR_OK && ga != NULL)
            *g = ga->data;
        return st;
    }
    cr_complex v;
    bool nz;
    cr_status st = cr__tan_scalar(arena, F->who, *dy, &v, &nz);
    if (st != CR_OK || !nz)
        return st;
    CR__ARENA_NEW(arena, cr_complex, p);
    *p = v;
    *g = p;
    return CR_OK;
}

/* With a row: x̄ is an InplaceableThunk running the sweep; init's cotangent (a number) a
 * sweep of its own that stores nothing. */
static cr_status fold_row_pullback(CR__PULLBACK_PARAMS)
{
    fold_env *e = env;
    cr__dx_none(dx, nx);
    const cr_complex *g;
    cr_status st = fold_seeds(arena, e, dy, &g);
    if (st != CR_OK)
        return st;
    if (g == NULL) {
        dx[2] = cr_tangent_zero();
        if (e->F.has_init && cr__is_diff(&e->F.init))
            dx[3] = cr_tangent_zero();
        return CR_OK;
    }
    CR__ARENA_NEW(arena, fold_thunk, t);
    *t = (fold_thunk){e, g};
    st = cr__thunk(arena, fold_x_thunk, fold_x_add, t, "fold_pullback_thunk", &dx[2]);
    if (st != CR_OK || !e->F.has_init)
        return st;
    cr_complex a = fold_row_sweep(e, g, NULL, false);
    return cr_project_apply(arena, e->pinit, cr__scalar_tangent(e->F.wdt, a), &dx[3]);
}

/* Without a row: the steps' pullbacks in reverse order, each taking the running
 * cotangent (plus, for accumulate, the seed of its own output). One sweep gives every
 * cotangent, so none is a thunk (a thunk would run the steps' pullbacks again). */
static cr_status fold_pb_pullback(CR__PULLBACK_PARAMS)
{
    fold_env *e = env;
    const fold *F = &e->F;
    cr__dx_none(dx, nx);
    const cr_complex *g;
    cr_status st = fold_seeds(arena, e, dy, &g);
    if (st != CR_OK)
        return st;
    cr_tangent dself = e->functor ? cr_tangent_zero() : cr_tangent_none();
    cr_array *xbar;
    st = cr__new_like(arena, F->wdt, F->x, true, &xbar);
    if (st != CR_OK)
        return st;
    cr_complex a = g == NULL || F->acc ? 0 : g[0];
    for (size_t i = F->n; g != NULL && i-- > 0;) {
        if (F->acc)
            a += g[i];
        if (i < F->k0) {
            wset(xbar, i, a);
            continue;
        }
        cr_dtype sd = (cr_dtype)e->o.sdt[i];
        cr_tangent seed = cr__scalar_tangent(sd == CR_DT_C128 ? CR_DT_C128 : CR_DT_F64, a), d[3];
        st = cr_pullback_call(arena, &e->o.pbs[i], &seed, d, 3);
        if (st == CR_OK && e->functor)
            st = cr_tangent_add(arena, dself, d[0], &dself);
        cr_complex xb = 0;
        bool nz;
        if (st == CR_OK)
            st = cr__tan_scalar(arena, F->who, d[2], &xb, &nz);
        if (st == CR_OK)
            st = cr__tan_scalar(arena, F->who, d[1], &a, &nz);
        if (st != CR_OK)
            return elem_fail(arena, st, F->who, F->op, i);
        wset(xbar, i, xb);
    }
    dx[1] = dself;
    if (g == NULL)
        dx[2] = cr_tangent_zero();
    else
        st = cr__give(arena, e->px, xbar, &dx[2]);
    if (st == CR_OK && F->has_init)
        st = cr_project_apply(
            arena, e->pinit, g == NULL ? cr_tangent_zero() : cr__scalar_tangent(F->wdt, a), &dx[3]);
    return st;
}

/* foldl(op, v[, init]) = op(...op(op(init, v0), v1)..., v_{n-1}) (without init, the fold
 * starts at v0); accumulate gives every intermediate value. Pullback: the running
 * cotangent ā goes back through the steps, v̄k = conj(∂op/∂b) ā and ā ← conj(∂op/∂a) ā
 * (accumulate adds the seed of output k first). */
cr_status cr__fold_rrule(const cr_config *cfg, cr_arena *arena, const char *who, bool acc,
                         const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                         const void *udata)
{
    bool primal = udata == CR__PRIMAL_ONLY;
    fold F;
    cr_status st = fold_parse(arena, who, acc, args, nargs, &F);
    if (st != CR_OK)
        return st;
    fold_env *e = NULL;
    if (!primal) {
        e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(fold_env));
        if (e == NULL)
            return CR__ALLOC_STATUS(arena);
        e->F = F;
        e->functor = F.op->u.func.fn->self_type != NULL;
        st = cr_project_new(arena, &args[1], &e->px);
        if (st == CR_OK && F.has_init)
            st = cr_project_new(arena, &args[2], &e->pinit);
        if (st != CR_OK)
            return st;
    }
    fold_fwd o;
    st = fold_forward(cfg, arena, &F, primal ? 0 : 1, NULL, &o);
    if (st == CR_OK)
        st = fold_output(arena, &F, &o, y);
    if (st != CR_OK || primal)
        return st;
    e->o = o;
    *pb = (cr_pullback){F.row != NULL ? fold_row_pullback : fold_pb_pullback, e,
                        acc ? "accumulate_pullback" : "foldl_pullback", nargs + 1};
    return CR_OK;
}

/* frule: ȧ ← ∂op/∂a ȧ + ∂op/∂b v̇k along the steps (with a row, in the forward pass;
 * otherwise op's frule or frule_via_ad per step). */
cr_status cr__fold_frule(const cr_config *cfg, cr_arena *arena, const char *who, bool acc,
                         const cr_tangent *dargs, const cr_value *args, size_t nargs, cr_value *y,
                         cr_tangent *dy)
{
    fold F;
    cr_status st = fold_parse(arena, who, acc, args, nargs, &F);
    if (st != CR_OK)
        return st;
    fold_dot dot = {NULL, F.has_init ? dargs[3] : cr_tangent_zero(),
                    F.op->u.func.fn->self_type != NULL ? dargs[1] : cr_tangent_none()};
    if (!cr__is_diff(&F.init))
        dot.dinit = cr_tangent_zero();
    st = cr__dx_array(arena, who, dargs, args, 1, F.wdt, &dot.dx);
    fold_fwd o;
    if (st == CR_OK)
        st = fold_forward(cfg, arena, &F, 2, &dot, &o);
    if (st == CR_OK)
        st = fold_output(arena, &F, &o, y);
    if (st != CR_OK)
        return st;
    if (!o.tangent) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_dtype odt = fold_out_dtype(&F, &o);
    if (!acc)
        return cr_project_tangent(arena, y, cr__scalar_tangent(odt, o.ydot), dy);
    cr_array *t;
    st = fold_vector(arena, o.ydots, odt, &t);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(t), dy);
}

static cr_status foldl_rrule(CR__RRULE_PARAMS)
{
    return cr__fold_rrule(cfg, arena, "foldl", false, args, nargs, y, pb, udata);
}
CR__ARRAY_FN(foldl, "foldl", -1)

static cr_status foldl_frule(CR__FRULE_PARAMS)
{
    return cr__fold_frule(cfg, arena, "foldl", false, dargs, args, nargs, y, dy);
}

static cr_status accumulate_rrule(CR__RRULE_PARAMS)
{
    return cr__fold_rrule(cfg, arena, "accumulate", true, args, nargs, y, pb, udata);
}
CR__ARRAY_FN(accumulate, "accumulate", -1)

static cr_status accumulate_frule(CR__FRULE_PARAMS)
{
    return cr__fold_frule(cfg, arena, "accumulate", true, dargs, args, nargs, y, dy);
}

/* ---- Test registrations ----------------------------------------------------------------- */

/* A built-in function by name (its family may be left out of a build), or fallback. */
static cr_value builtin_or(const char *name, const cr_value *fallback)
{
    const cr_function *fn = cr_registry_find(cr_registry_builtin(), name);
    return fn != NULL ? cr_value_function(fn, NULL) : *fallback;
}

/* map(f, A) with f = sin, exp, tanh or cabs (no row: one rule per element); map(f, A, B)
 * with *, hypot (a row that is not fused) or atan2. */
static cr_status sample_map(CR__SAMPLE_PARAMS)
{
    static const size_t s34[2] = {3, 4}, s5[1] = {5};
    bool vec = cr__rng_below(rng, 2) == 0;
    cr_dtype dt = cr__rng_dtype(rng);
    cr_array *A, *B;
    size_t k = cr__rng_below(rng, 5);
    if (nargs > 3)
        return cr__sample_bc_many(arena, rng, args, nargs, true);
    if (nargs == 2) {
        /* sincos: two outputs, a tuple of two arrays */
        static const char *const names[5] = {"sin", "exp", "tanh", "", "sincos"};
        if (k == 3) {
            args[0] = cr_fn_cabs;
            dt = CR_DT_C128;
        } else {
            args[0] = builtin_or(names[k], &cr_fn_sin);
        }
    } else {
        static const char *const names[4] = {"hypot", "atan2", "hypot", "atan2"};
        args[0] = k == 0 ? cr_fn_mul : builtin_or(names[k - 1], &cr_fn_mul);
        if (k != 0 && dt == CR_DT_C128)
            dt = CR_DT_F64; /* real-only rows */
    }
    cr_status st = cr__rand_array(arena, rng, dt, vec ? 1 : 2, vec ? s5 : s34, 0.5, 2.0, &A);
    if (st != CR_OK)
        return st;
    args[1] = cr_value_array(A);
    if (nargs == 3) {
        st = cr__rand_array(arena, rng, dt, vec ? 1 : 2, vec ? s5 : s34, 0.5, 2.0, &B);
        if (st == CR_OK)
            args[2] = cr_value_array(B);
    }
    return st;
}

/* sum(f, A[, dims]) with f = sin, exp, tanh (rows) or cabs (one rule per element). */
static cr_status sample_sum_f(CR__SAMPLE_PARAMS)
{
    static const size_t s34[2] = {3, 4}, s234[3] = {2, 3, 4};
    static const char *const names[3] = {"sin", "exp", "tanh"};
    cr_dtype dt = cr__rng_dtype(rng);
    size_t k = cr__rng_below(rng, 4);
    if (k == 3) {
        args[0] = cr_fn_cabs;
        dt = CR_DT_C128;
    } else {
        args[0] = builtin_or(names[k], &cr_fn_sin);
    }
    bool three = cr__rng_below(rng, 3) == 0;
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, dt, three ? 3 : 2, three ? s234 : s34, -1.5, 1.5, &A);
    if (st != CR_OK)
        return st;
    args[1] = cr_value_array(A);
    if (nargs == 3) {
        static const int64_t both[2] = {0, 1};
        size_t d = cr__rng_below(rng, 3);
        cr_array *dims;
        if (d < 2) {
            args[2] = cr_value_i64((int64_t)d);
        } else {
            st = cr__i64_array(arena, 2, both, &dims);
            if (st == CR_OK)
                args[2] = cr_value_array(dims);
        }
    }
    return st;
}

/* foldl / accumulate (op, v[, init]) with op = *, +, hypot or atan2; entries in [0.5, 1.5]
 * so products stay of order one; init a float, an integer or (for c128) a complex. */
static cr_status sample_fold(CR__SAMPLE_PARAMS)
{
    static const size_t s6[1] = {6};
    cr_dtype dt = cr__rng_dtype(rng);
    size_t k = cr__rng_below(rng, 4);
    if (k < 2) {
        args[0] = k == 0 ? cr_fn_mul : cr_fn_add;
    } else {
        args[0] = builtin_or(k == 2 ? "hypot" : "atan2", &cr_fn_mul);
        if (dt == CR_DT_C128)
            dt = CR_DT_F64; /* real-only rows */
    }
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, dt, 1, s6, 0.5, 1.5, &A);
    if (st != CR_OK)
        return st;
    args[1] = cr_value_array(A);
    if (nargs == 3) {
        size_t i = cr__rng_below(rng, 3);
        if (i == 0)
            args[2] = cr_value_i64(1);
        else if (dt == CR_DT_C128)
            args[2] = cr_value_c128(cr__c(cr__rng_unif(rng, 0.5, 1.5), 0.25));
        else if (dt == CR_DT_F32)
            args[2] = cr_value_f32((float)cr__rng_unif(rng, 0.5, 1.5));
        else
            args[2] = cr_value_f64(cr__rng_unif(rng, 0.5, 1.5));
    }
    return CR_OK;
}

static const cr_rule_test k_test_map = {.sample = sample_map};
static const cr_rule_test k_test_sum_f = {.sample = sample_sum_f};
static const cr_rule_test k_test_fold = {.sample = sample_fold};

cr_status cr__array_register_hof(cr_registry *reg)
{
    static const cr_argspec a_map[3] = {
        {CR_M_FUNC, NULL},
        {CR__M_FARRAY | CR_M_A_INT | CR_M_A_BOOL, NULL},
        {CR__M_FARRAY | CR_M_A_INT | CR_M_A_BOOL, NULL},
    };
    static const cr_argspec a_sum[3] = {
        {CR_M_FUNC, NULL}, {CR__M_FARRAY, NULL}, {CR_M_INT | CR_M_A_INT, NULL}};
    static const cr_argspec a_fold[3] = {
        {CR_M_FUNC, NULL}, {CR__M_FARRAY, NULL}, {CR__M_NUM, NULL}};
    const cr_function *sum_fn = cr_fn_sum.u.func.fn;
    cr_status st = cr__add_rule_so(reg, &map_function, a_map, 2, false, map_frule, map_rrule,
                                   &k_test_map, CR_NONLINEAR, &cr__form_broadcast);
    if (st == CR_OK)
        st = cr__add_rule_so(reg, &map_function, a_map, 3, true, map_frule, map_rrule, &k_test_map,
                             CR_NONLINEAR, &cr__form_broadcast);
    /* Six float arrays: a signature of the variadic one (more specific), for its test
     * registration's samples of more arguments than a row has. */
    static const cr_argspec a_map7[7] = {
        {CR_M_FUNC, NULL},    {CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL},
        {CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL}};
    if (st == CR_OK)
        st = cr__add_rule_so(reg, &map_function, a_map7, 7, false, map_frule, map_rrule,
                             &k_test_map, CR_NONLINEAR, &cr__form_broadcast);
    for (size_t n = 2; n <= 3 && st == CR_OK; n++)
        st = cr__add_rule_so(reg, sum_fn, a_sum, n, false, sumf_frule, cr__sum_f_rrule,
                             &k_test_sum_f, CR_NONLINEAR, &cr__form_sum_f);
    for (size_t n = 2; n <= 3 && st == CR_OK; n++)
        st = cr__add_rule(reg, cr_fn_mean.u.func.fn, a_sum, n, false, meanf_frule, cr__mean_f_rrule,
                          &k_test_sum_f);
    for (size_t n = 2; n <= 3 && st == CR_OK; n++)
        st = cr__add_rule(reg, &foldl_function, a_fold, n, false, foldl_frule, foldl_rrule,
                          &k_test_fold);
    for (size_t n = 2; n <= 3 && st == CR_OK; n++)
        st = cr__add_rule(reg, &accumulate_function, a_fold, n, false, accumulate_frule,
                          accumulate_rrule, &k_test_fold);
    return st == CR_OK ? cr__array_register_fold_dims(reg) : st;
}
