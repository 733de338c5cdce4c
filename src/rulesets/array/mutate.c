/*
 * The mutating array functions of Julia's Base (copyto!, fill!, setindex!, sum!, cumsum!,
 * permutedims!, reverse!, circshift!) as rules. A rule never writes through its arguments
 * (rule.h), so each returns the new contents of its destination; cr_mutate_frule() and
 * cr_mutate_rrule() (rules_array.h) write them, and the frule's tangent, over the caller's
 * buffers. The destination's old contents reach the result only where they are not
 * overwritten, so the pullback gives the destination the cotangent with the overwritten
 * part zeroed. Most are the non-mutating function of the rest of the arguments, whose rules
 * they call.
 */
#include "family.h"

/* A mutating function: its primal's op (first, for cr__primal_via_rrule), the function it
 * wraps (NULL for the hand-written ones) and how the wrapped function's arguments are made. */
typedef struct bang_def {
    cr__op op;
    const cr_value *inner;
    const char *name;
    bool has_dest;   /* args[0] is a destination not read (else the destination is the input) */
    int prep;        /* PREP_* */
    size_t min, max; /* arguments */
} bang_def;

enum { PREP_REST, PREP_SUM, PREP_FILL, PREP_SELF };

static const bang_def *def_of(const cr_value *f)
{
    return f->u.func.fn->udata;
}

/* The wrapped function's arguments: args[1..] (PREP_REST), (A, dims where the destination
 * has extent 1) for sum!, (x, shape of A) for fill!, args for reverse!. */
static cr_status bang_inner_args(cr_arena *arena, const bang_def *d, const cr_value *args,
                                 size_t nargs, const cr_array *dest, cr_value *iargs, size_t *ni)
{
    cr_status st;
    switch (d->prep) {
    case PREP_SUM: {
        const cr_array *A;
        if ((st = cr__array_arg(arena, d->name, args, nargs, 1, &A)) != CR_OK)
            return st;
        if (A->ndim != dest->ndim)
            return CR__FAIL(arena, CR_ESHAPE,
                            "%s: a destination of %u dimension%s for an array of %u", d->name,
                            (unsigned)dest->ndim, CR__S((unsigned)dest->ndim), (unsigned)A->ndim);
        int64_t dims[CR_ARRAY_MAX_DIMS];
        size_t nd = 0;
        for (size_t k = 0; k < A->ndim; k++) {
            if (dest->shape[k] == A->shape[k])
                continue;
            if (dest->shape[k] != 1)
                return CR__FAIL(arena, CR_ESHAPE,
                                "%s: the destination's extent %zu in dimension %zu is neither 1 "
                                "nor the array's %zu",
                                d->name, dest->shape[k], k, A->shape[k]);
            dims[nd++] = (int64_t)k;
        }
        cr_array *D;
        if ((st = cr__i64_array(arena, nd, dims, &D)) != CR_OK)
            return st;
        iargs[0] = args[1];
        iargs[1] = cr_value_array(D);
        *ni = 2;
        return CR_OK;
    }
    case PREP_FILL: {
        if (cr__value_dtype(&args[1]) == CR_DT_C128 && dest->dtype != CR_DT_C128)
            return CR__FAIL(arena, CR_EINVAL, "%s: a complex value for a %s destination", d->name,
                            cr_dtype_name((cr_dtype)dest->dtype));
        int64_t shape[CR_ARRAY_MAX_DIMS];
        for (size_t k = 0; k < dest->ndim; k++)
            shape[k] = (int64_t)dest->shape[k];
        cr_array *S;
        if ((st = cr__i64_array(arena, dest->ndim, shape, &S)) != CR_OK)
            return st;
        /* an integer or bool is converted to the destination's type, as Julia does */
        iargs[0] = cr__is_diff(&args[1])
                       ? args[1]
                       : cr__scalar_value((cr_dtype)dest->dtype, cr__scalar_of(&args[1]));
        iargs[1] = cr_value_array(S);
        *ni = 2;
        return CR_OK;
    }
    case PREP_SELF:
        for (size_t k = 0; k < nargs; k++)
            iargs[k] = args[k];
        *ni = nargs;
        return CR_OK;
    case PREP_REST:
    default:
        for (size_t k = 1; k < nargs; k++)
            iargs[k - 1] = args[k];
        *ni = nargs - 1;
        return CR_OK;
    }
}

/* The destination (args[0]): a float array. */
static cr_status bang_dest(cr_arena *arena, const bang_def *d, const cr_value *args, size_t nargs,
                           const cr_array **dest)
{
    cr_status st = cr__nargs(arena, d->name, nargs, d->min, d->max);
    if (st == CR_OK)
        st = cr__array_arg(arena, d->name, args, nargs, 0, dest);
    if (st == CR_OK && !cr_dtype_is_float((cr_dtype)(*dest)->dtype))
        st = CR__FAIL(arena, CR_EINVAL, "%s: the destination must be an f64, f32 or c128 array",
                      d->name);
    return st;
}

/* The destination and the wrapped function's arguments iargs[0..*ni). */
static cr_status bang_prep(cr_arena *arena, const bang_def *d, const cr_value *args, size_t nargs,
                           const cr_array **dest, cr_value *iargs, size_t *ni)
{
    *ni = 0;
    cr_status st = bang_dest(arena, d, args, nargs, dest);
    return st == CR_OK ? bang_inner_args(arena, d, args, nargs, *dest, iargs, ni) : st;
}

/* The wrapped function's result stored as the destination would hold it: the same shape,
 * the destination's dtype (complex values into a real destination refused, as Julia's
 * InexactError). */
static cr_status bang_store(cr_arena *arena, const bang_def *d, const cr_array *dest,
                            const cr_value *yi, cr_value *y)
{
    if (yi->kind != CR_KIND_ARRAY || yi->u.arr->ndim != dest->ndim ||
        memcmp(yi->u.arr->shape, dest->shape, dest->ndim * sizeof(size_t)) != 0) {
        char a[64], b[64];
        return CR__FAIL(arena, CR_ESHAPE, "%s: a result of shape %s for a destination of shape %s",
                        d->name,
                        yi->kind == CR_KIND_ARRAY ? cr__shape_str(yi->u.arr, a, sizeof a) : "()",
                        cr__shape_str(dest, b, sizeof b));
    }
    if (yi->u.arr->dtype == CR_DT_C128 && dest->dtype != CR_DT_C128)
        return CR__FAIL(arena, CR_EINVAL, "%s: complex values for a %s destination", d->name,
                        cr_dtype_name((cr_dtype)dest->dtype));
    if (yi->u.arr->dtype == dest->dtype && yi->u.arr->structure == CR_MAT_DENSE) {
        *y = *yi;
        return CR_OK;
    }
    const cr_array *w;
    cr_array *o;
    cr_status st = cr__dense(arena, yi->u.arr, cr__work((cr_dtype)dest->dtype), &w);
    if (st == CR_OK)
        st = cr__cast(arena, w, (cr_dtype)dest->dtype, &o);
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

typedef struct bang_env {
    const bang_def *d;
    cr_pullback inner;
    size_t ni;    /* the wrapped function's arguments */
    size_t shift; /* dx[k + shift] = inner dx[k] */
    bool nodiff;  /* fill! of an integer: no cotangent for it */
    uint32_t nd;  /* nondiff_mask of the arguments */
} bang_env;

static cr_status bang_pullback_body(CR__PULLBACK_PARAMS)
{
    const bang_env *e = env;
    cr_tangent idx[CR_SIG_MAX_ARGS + 1];
    cr_status st = cr_pullback_call(arena, &e->inner, dy, idx, e->ni + 1);
    if (st != CR_OK)
        return st;
    /* the destination was overwritten entirely: its old contents get no cotangent (dx[1]
     * stays zero) unless it is also the input */
    size_t nmap = e->d->prep == PREP_REST || e->d->prep == PREP_SELF ? e->ni : 1;
    for (size_t k = 1; k <= nmap && k + e->shift < nx && !e->nodiff; k++)
        dx[k + e->shift] = idx[k];
    return CR_OK;
}

/* A call of a mutating function: its definition, the destination and the wrapped
 * function's ni arguments (bang_prep). */
typedef struct bang_call {
    const bang_def *d;
    const cr_array *dest;
    size_t ni;
    cr_value iargs[CR_SIG_MAX_ARGS];
} bang_call;

static cr_status bang_begin(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                            bang_call *c)
{
    c->d = def_of(f);
    return bang_prep(arena, c->d, args, nargs, &c->dest, c->iargs, &c->ni);
}

CR__MASKED_PULLBACK(bang, bang_env)

static cr_status bang_rrule(CR__RRULE_PARAMS)
{
    bang_call c;
    cr_value yi;
    cr_status st = bang_begin(arena, f, args, nargs, &c);
    if (st == CR_OK && udata == CR__PRIMAL_ONLY) {
        st = cr_function_call(arena, c.d->inner, c.iargs, c.ni, &yi);
        return st == CR_OK ? bang_store(arena, c.d, c.dest, &yi, y) : st;
    }
    if (st != CR_OK)
        return st;
    CR__ARENA_ZNEW(arena, bang_env, e);
    e->d = c.d;
    e->ni = c.ni;
    e->shift = c.d->prep == PREP_SELF ? 0 : 1;
    e->nodiff = c.d->prep == PREP_FILL && !cr__is_diff(&args[1]);
    st = cr_rrule(cfg, arena, c.d->inner, c.iargs, c.ni, &yi, &e->inner);
    if (st == CR_OK)
        st = bang_store(arena, c.d, c.dest, &yi, y);
    if (st != CR_OK)
        return st;
    e->nd = cr__nondiff_mask(args, nargs, cr__arg_perturbable);
    *pb = (cr_pullback){bang_pullback, e, c.d->name, nargs + 1};
    return CR_OK;
}

/* frule: the wrapped function's frule on the other arguments' tangents; the destination's
 * tangent is overwritten (not read) unless it is also the input. */
static cr_status bang_frule(CR__FRULE_PARAMS)
{
    bang_call c;
    cr_status st = bang_begin(arena, f, args, nargs, &c);
    if (st != CR_OK)
        return st;
    cr_tangent id[CR_SIG_MAX_ARGS + 1] = {cr_tangent_zero()};
    for (size_t k = 1; k <= c.ni; k++)
        id[k] = cr_tangent_none();
    if (c.d->prep == PREP_SELF)
        for (size_t k = 1; k <= c.ni; k++)
            id[k] = dargs[k];
    else if (c.d->prep == PREP_REST)
        for (size_t k = 1; k <= c.ni; k++)
            id[k] = dargs[k + 1];
    else
        id[1] = dargs[2];
    cr_value yi;
    cr_tangent dyi;
    st = cr_frule(cfg, arena, id, c.d->inner, c.iargs, c.ni, &yi, &dyi);
    if (st == CR_OK)
        st = bang_store(arena, c.d, c.dest, &yi, y);
    if (st != CR_OK)
        return st;
    return cr_project_tangent(arena, y, dyi, dy);
}

/* ---- copyto!(dest, src) and setindex!(A, x, inds...): part of the destination kept ------------
 */

/* Positions written, in order (positions[k] receives the k-th value), and the values. */
typedef struct part_env {
    const char *who;
    const cr_array *dest;
    const cr_value *src; /* copyto!: the array; setindex!: x */
    size_t nsrc;         /* number of values (1 for a scalar x broadcast) */
    size_t npos;
    size_t *pos;
    bool *last; /* write k is the last one to its position */
    cr_project *pd, *ps;
    cr_dtype wdt;
    uint32_t nd; /* nondiff_mask of the arguments */
} part_env;

static cr_status part_positions_copyto(cr_arena *arena, part_env *e, const cr_value *args,
                                       size_t nargs)
{
    const cr_array *src;
    cr_status st = cr__nargs(arena, e->who, nargs, 2, 2);
    if (st == CR_OK)
        st = cr__array_arg(arena, e->who, args, nargs, 1, &src);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)src->dtype))
        return CR__FAIL(arena, CR_EINVAL, "copyto!: the source must be an f64, f32 or c128 array");
    size_t n = cr_array_numel(src), nd = cr_array_numel(e->dest);
    if (n > nd)
        return CR__FAIL(arena, CR_ESHAPE, "copyto!: %zu elements into a destination of %zu", n, nd);
    e->src = &args[1];
    e->nsrc = e->npos = n;
    e->pos = cr_arena_calloc(arena, n ? n : 1, sizeof *e->pos, _Alignof(size_t));
    e->last = cr_arena_calloc(arena, n ? n : 1, sizeof *e->last, _Alignof(bool));
    if (e->pos == NULL || e->last == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t k = 0; k < n; k++) {
        e->pos[k] = k;
        e->last[k] = true;
    }
    return CR_OK;
}

/* setindex!'s positions: getindex of an array holding each element's linear position, with
 * the same indices (so every index form of getindex is accepted and checked the same way). */
static cr_status part_positions_setindex(cr_arena *arena, part_env *e, const cr_value *args,
                                         size_t nargs)
{
    cr_status st = cr__nargs(arena, e->who, nargs, 3, CR_SIG_MAX_ARGS);
    if (st != CR_OK)
        return st;
    size_t nd = cr_array_numel(e->dest);
    cr_array *P;
    if ((st = cr__new(arena, CR_DT_F64, e->dest->ndim, e->dest->shape, false, &P)) != CR_OK)
        return st;
    for (size_t k = 0; k < nd; k++)
        ((double *)P->data)[k] = (double)k;
    cr_value gargs[CR_SIG_MAX_ARGS], g;
    gargs[0] = cr_value_array(P);
    for (size_t k = 2; k < nargs; k++)
        gargs[k - 1] = args[k];
    if ((st = cr_function_call(arena, &cr_fn_getindex, gargs, nargs - 1, &g)) != CR_OK)
        return st;
    e->src = &args[1];
    const cr_value *x = &args[1];
    if (x->kind == CR_KIND_ARRAY) {
        if (!cr_dtype_is_float((cr_dtype)x->u.arr->dtype))
            return CR__FAIL(arena, CR_EINVAL, "setindex!: the values must be f64, f32 or c128");
        e->nsrc = cr_array_numel(x->u.arr);
    } else if (x->kind == CR_KIND_F64 || x->kind == CR_KIND_F32 || x->kind == CR_KIND_C128 ||
               x->kind == CR_KIND_I64 || x->kind == CR_KIND_BOOL) {
        e->nsrc = 1;
    } else {
        return CR__FAIL(arena, CR_EINVAL, "setindex!: the value must be a number or an array");
    }
    if (g.kind == CR_KIND_ARRAY) {
        e->npos = cr_array_numel(g.u.arr);
    } else {
        e->npos = 1;
    }
    if (x->kind == CR_KIND_ARRAY && e->nsrc != e->npos)
        return CR__FAIL(arena, CR_ESHAPE, "setindex!: %zu values for %zu positions", e->nsrc,
                        e->npos);
    e->pos = cr_arena_calloc(arena, e->npos ? e->npos : 1, sizeof *e->pos, _Alignof(size_t));
    e->last = cr_arena_calloc(arena, e->npos ? e->npos : 1, sizeof *e->last, _Alignof(bool));
    bool *seen = cr_arena_calloc(arena, nd ? nd : 1, sizeof *seen, _Alignof(bool));
    if (e->pos == NULL || e->last == NULL || seen == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t k = 0; k < e->npos; k++)
        e->pos[k] =
            (size_t)(g.kind == CR_KIND_ARRAY ? creal(cr_array_get_linear(g.u.arr, k)) : g.u.f64);
    /* later writes win: the last write of each position, found from the end */
    for (size_t k = e->npos; k-- > 0;) {
        e->last[k] = !seen[e->pos[k]];
        seen[e->pos[k]] = true;
    }
    return CR_OK;
}

static cr_status part_forward(cr_arena *arena, part_env *e, const cr_value *args, size_t nargs,
                              cr_value *y)
{
    cr_status st = cr__nargs(arena, e->who, nargs, 2, CR_SIG_MAX_ARGS);
    if (st == CR_OK)
        st = cr__array_arg(arena, e->who, args, nargs, 0, &e->dest);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)e->dest->dtype))
        return CR__FAIL(arena, CR_EINVAL, "%s: the destination must be an f64, f32 or c128 array",
                        e->who);
    st = e->who[0] == 'c' ? part_positions_copyto(arena, e, args, nargs)
                          : part_positions_setindex(arena, e, args, nargs);
    if (st != CR_OK)
        return st;
    cr_dtype sdt = cr__value_dtype(e->src);
    if (sdt == CR_DT_C128 && e->dest->dtype != CR_DT_C128)
        return CR__FAIL(arena, CR_EINVAL, "%s: complex values for a %s destination", e->who,
                        cr_dtype_name((cr_dtype)e->dest->dtype));
    e->wdt = cr__work((cr_dtype)e->dest->dtype);
    const cr_array *D;
    cr_array *Y, *o;
    if ((st = cr__dense(arena, e->dest, e->wdt, &D)) != CR_OK)
        return st;
    if ((st = cr_array_copy(arena, D, &Y)) != CR_OK)
        return st;
    if (e->src->kind == CR_KIND_ARRAY) {
        const cr_array *S;
        if ((st = cr__dense(arena, e->src->u.arr, e->wdt, &S)) != CR_OK)
            return st;
        for (size_t k = 0; k < e->npos; k++)
            cr__store(Y, (ptrdiff_t)e->pos[k], cr__load(S, (ptrdiff_t)k));
    } else {
        cr_complex v = cr__scalar_of(e->src);
        for (size_t k = 0; k < e->npos; k++)
            cr__store(Y, (ptrdiff_t)e->pos[k], v);
    }
    if ((st = cr__cast(arena, Y, (cr_dtype)e->dest->dtype, &o)) != CR_OK)
        return st;
    *y = cr_value_array(o);
    return CR_OK;
}

/* dest̄ = ȳ with the written positions zeroed; src̄[k] = ȳ[pos[k]] for the last write of
 * each position (a scalar x: the sum). */
static cr_status part_pullback_body(CR__PULLBACK_PARAMS)
{
    const part_env *e = env;
    const cr_array *G;
    cr_status st = cr__tan_array(arena, e->who, *dy, e->dest->ndim, e->dest->shape, e->wdt, &G);
    if (st != CR_OK || G == NULL)
        return st;
    cr_array *Db, *Sb = NULL;
    if ((st = cr_array_copy(arena, G, &Db)) != CR_OK)
        return st;
    cr_complex sum = 0;
    bool arr = e->src->kind == CR_KIND_ARRAY;
    if (arr && (st = cr__new_like(arena, e->wdt, e->src->u.arr, true, &Sb)) != CR_OK)
        return st;
    for (size_t k = 0; k < e->npos; k++) {
        if (!e->last[k])
            continue;
        cr_complex g = cr__load(G, (ptrdiff_t)e->pos[k]);
        if (arr)
            cr__store(Sb, (ptrdiff_t)k, g);
        else
            sum += g;
    }
    for (size_t k = 0; k < e->npos; k++)
        cr__store(Db, (ptrdiff_t)e->pos[k], 0);
    if ((st = cr__give(arena, e->pd, Db, &dx[1])) != CR_OK)
        return st;
    if (arr)
        return cr__give(arena, e->ps, Sb, &dx[2]);
    if (!cr__is_diff(e->src))
        return CR_OK;
    cr_tangent t = cr__scalar_tangent(cr__value_dtype(e->src), sum);
    return cr_project_tangent(arena, e->src, t, &dx[2]);
}

CR__MASKED_PULLBACK(part, part_env)

static cr_status part_rrule(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                            cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__ARENA_ZNEW(arena, part_env, e);
    e->who = who;
    cr_status st = part_forward(arena, e, args, nargs, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    st = cr_project_new(arena, &args[0], &e->pd);
    if (st == CR_OK && e->src->kind == CR_KIND_ARRAY)
        st = cr_project_new(arena, e->src, &e->ps);
    if (st != CR_OK)
        return st;
    e->nd = cr__nondiff_mask(args, nargs, cr__arg_perturbable);
    *pb = (cr_pullback){part_pullback, e, who[0] == 'c' ? "copyto!_pullback" : "setindex!_pullback",
                        nargs + 1};
    return CR_OK;
}

/* frule: ẏ = ḋest with the written positions replaced by the values' tangents. */
static cr_status part_frule(cr_arena *arena, const char *who, const cr_tangent *dargs,
                            const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    part_env e = {.who = who};
    cr_status st = part_forward(arena, &e, args, nargs, y);
    const cr_array *dd = NULL, *ds = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, who, dargs, args, 0, e.wdt, &dd);
    cr_complex dxs = 0;
    bool nzs = false;
    if (st == CR_OK && e.src->kind == CR_KIND_ARRAY)
        st = cr__dx_array(arena, who, dargs, args, 1, e.wdt, &ds);
    else if (st == CR_OK && cr__is_diff(e.src))
        st = cr__tan_scalar(arena, who, dargs[2], &dxs, &nzs);
    if (st != CR_OK)
        return st;
    cr_array *T, *o;
    if ((st = cr__new_like(arena, e.wdt, e.dest, true, &T)) != CR_OK)
        return st;
    if (dd != NULL)
        memcpy(T->data, dd->data, cr_array_numel(T) * cr_dtype_size(e.wdt));
    for (size_t k = 0; k < e.npos; k++)
        cr__store(T, (ptrdiff_t)e.pos[k],
                  ds != NULL ? cr__load(ds, (ptrdiff_t)k) : (nzs ? dxs : 0));
    if ((st = cr__cast(arena, T, (cr_dtype)e.dest->dtype, &o)) != CR_OK)
        return st;
    *dy = cr_tangent_array(o);
    return CR_OK;
}

CR__PARAM_RULE_FNS(copyto, part_rrule, part_frule, "copyto!")
CR__PARAM_RULE_FNS(setindex, part_rrule, part_frule, "setindex!")

static const cr__op copyto_op = {copyto_rrule};
static const cr__op setindex_op = {setindex_rrule};
static const cr_function copyto_bang_function = {
    .name = "copyto!", .arity = 2, .primal = cr__primal_via_rrule, .udata = &copyto_op};
static const cr_function setindex_bang_function = {
    .name = "setindex!", .arity = -1, .primal = cr__primal_via_rrule, .udata = &setindex_op};
const cr_value cr_fn_copyto_bang = {.kind = CR_KIND_FUNC, .u.func = {&copyto_bang_function, NULL}};
const cr_value cr_fn_setindex_bang = {.kind = CR_KIND_FUNC,
                                      .u.func = {&setindex_bang_function, NULL}};

/* ---- The wrappers ------------------------------------------------------------------------------
 */

#define BANG(NAME, STR, INNER, HAS_DEST, PREP, MIN, MAX, ARITY)                                 \
    static const bang_def NAME##_def = {{bang_rrule}, &(INNER), STR, HAS_DEST, PREP, MIN, MAX}; \
    static const cr_function NAME##_bang_function = {                                           \
        .name = STR, .arity = ARITY, .primal = cr__primal_via_rrule, .udata = &NAME##_def};     \
    const cr_value cr_fn_##NAME##_bang = {.kind = CR_KIND_FUNC,                                 \
                                          .u.func = {&NAME##_bang_function, NULL}};

BANG(fill, "fill!", cr_fn_fill, true, PREP_FILL, 2, 2, 2)
BANG(sum, "sum!", cr_fn_sum, true, PREP_SUM, 2, 2, 2)
BANG(cumsum, "cumsum!", cr_fn_cumsum, true, PREP_REST, 2, 3, -1)
BANG(permutedims, "permutedims!", cr_fn_permutedims, true, PREP_REST, 3, 3, 3)
BANG(reverse, "reverse!", cr_fn_reverse, false, PREP_SELF, 1, 2, -1)
BANG(circshift, "circshift!", cr_fn_circshift, true, PREP_REST, 3, 3, 3)
BANG(inv, "inv!", cr_fn_matinv, false, PREP_SELF, 1, 1, 1)
BANG(exp, "exp!", cr_fn_expm, false, PREP_SELF, 1, 1, 1)

/* ---- In place ----------------------------------------------------------------------------------
 */

/* dst's elements := src's (same numel; dst any strides, src contiguous of dst's dtype). */
static cr_status write_over(cr_arena *arena, const char *who, cr_array *dst, const cr_array *src)
{
    if (dst == NULL || src == NULL || cr_array_numel(dst) != cr_array_numel(src) ||
        dst->dtype != src->dtype || dst->structure != CR_MAT_DENSE)
        return CR__FAIL(arena, CR_EINVAL, "%s: cannot write the result over the destination", who);
    const cr_array *arrs[1] = {dst};
    size_t n = cr_array_numel(dst), k = 0, es = cr_dtype_size((cr_dtype)dst->dtype);
    if (n == 0)
        return CR_OK;
    /* offsets of dst's elements in row-major order */
    cr__iter it;
    cr__iter_init(&it, arrs, 1);
    do {
        memcpy((char *)dst->data + it.off[0] * (ptrdiff_t)es, (const char *)src->data + k * es, es);
        k++;
    } while (cr__iter_next(&it));
    return CR_OK;
}

/* The checks of cr_mutate_frule and cr_mutate_rrule: a mutating function, a dense destination
 * and the caller's out (the tangents or the pullback; CR_EINVAL "no <missing>" when NULL). */
static cr_status mutate_check(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, const void *out, const char *missing, const char **who)
{
    if (arena == NULL)
        return CR_EINVAL;
    if (f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL || args == NULL || nargs == 0)
        return CR__FAIL(arena, CR_EINVAL, "cr_mutate: not a function call");
    *who = f->u.func.fn->name;
    const cr_function *fn = f->u.func.fn;
    if (fn != &copyto_bang_function && fn != &setindex_bang_function && fn != &fill_bang_function &&
        fn != &sum_bang_function && fn != &cumsum_bang_function &&
        fn != &permutedims_bang_function && fn != &reverse_bang_function &&
        fn != &circshift_bang_function && fn != &inv_bang_function && fn != &exp_bang_function)
        return CR__FAIL(arena, CR_EINVAL, "cr_mutate: %s is not a mutating function", *who);
    if (args[0].kind != CR_KIND_ARRAY || args[0].u.arr == NULL ||
        args[0].u.arr->structure != CR_MAT_DENSE)
        return CR__FAIL(arena, CR_EINVAL,
                        "%s: the destination must be a dense array (a buffer to overwrite)", *who);
    if (out == NULL)
        return CR__FAIL(arena, CR_EINVAL, "%s: no %s", *who, missing);
    return CR_OK;
}

cr_status cr_mutate_frule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                          const cr_value *args, const cr_tangent *dargs, size_t nargs)
{
    const char *who = "mutate";
    cr_tangent dd;
    cr_status st = mutate_check(arena, f, args, nargs, dargs, "tangents", &who);
    if (st != CR_OK || (st = cr_tangent_unthunk(dargs[1], &dd)) != CR_OK)
        return st;
    if (dd.tag != CR_TAN_ARRAY || dd.u.arr == NULL ||
        cr_array_numel(dd.u.arr) != cr_array_numel(args[0].u.arr) ||
        dd.u.arr->dtype != args[0].u.arr->dtype || dd.u.arr->structure != CR_MAT_DENSE)
        return CR__FAIL(arena, CR_ETANGENT,
                        "%s: the destination's tangent must be a dense array of its dtype and "
                        "size (a buffer to overwrite)",
                        who);
    cr_value y;
    cr_tangent dy;
    if ((st = cr_frule(cfg, arena, dargs, f, args, nargs, &y, &dy)) != CR_OK)
        return st;
    const cr_array *dyw = NULL;
    cr_array *dyc = NULL;
    if ((st = cr__tan_array(arena, who, dy, args[0].u.arr->ndim, args[0].u.arr->shape,
                            cr__work((cr_dtype)args[0].u.arr->dtype), &dyw)) != CR_OK)
        return st;
    if (dyw == NULL)
        st = cr__new_like(arena, (cr_dtype)args[0].u.arr->dtype, args[0].u.arr, true, &dyc);
    else
        st = cr__cast(arena, dyw, (cr_dtype)args[0].u.arr->dtype, &dyc);
    /* the results may be views of the buffers about to be overwritten (reverse! gives a
     * reversed view of its input): contiguous copies first */
    cr_array *yc, *dc;
    if (st == CR_OK)
        st = cr_array_copy(arena, dyc, &dc);
    if (st == CR_OK)
        st = cr_array_copy(arena, y.u.arr, &yc);
    if (st != CR_OK)
        return st;
    if ((st = write_over(arena, who, dd.u.arr, dc)) != CR_OK)
        return st;
    return write_over(arena, who, args[0].u.arr, yc);
}

cr_status cr_mutate_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                          const cr_value *args, size_t nargs, cr_pullback *pb)
{
    const char *who = "mutate";
    cr_value y;
    cr_array *yc;
    cr_status st = mutate_check(arena, f, args, nargs, pb, "pullback given", &who);
    if (st != CR_OK || (st = cr_rrule(cfg, arena, f, args, nargs, &y, pb)) != CR_OK)
        return st;
    if ((st = cr_array_copy(arena, y.u.arr, &yc)) != CR_OK)
        return st;
    return write_over(arena, who, args[0].u.arr, yc);
}

/* ---- Test registrations ------------------------------------------------------------------------
 */

enum {
    MS_COPYTO,
    MS_SETINDEX,
    MS_FILL,
    MS_SUM,
    MS_CUMSUM,
    MS_PERMUTEDIMS,
    MS_REVERSE,
    MS_CIRCSHIFT,
    MS_INV,
    MS_EXP
};

/* args = (D, A, ints): random dtype-dt arrays of nd dimensions, D of dshape and A of ashape,
 * and the nd integers ints as an i64 array. */
static cr_status dest_src_ints(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t nd,
                               const size_t *dshape, const size_t *ashape, const int64_t *ints,
                               cr_value *args)
{
    cr_array *D, *A, *Ix;
    cr_status st = cr__rand_array(arena, rng, dt, nd, dshape, -2, 2, &D);
    if (st == CR_OK)
        st = cr__rand_array(arena, rng, dt, nd, ashape, -2, 2, &A);
    if (st == CR_OK)
        st = cr__i64_array(arena, nd, ints, &Ix);
    if (st == CR_OK) {
        args[0] = cr_value_array(D);
        args[1] = cr_value_array(A);
        args[2] = cr_value_array(Ix);
    }
    return st;
}

static cr_status sample_mutate(CR__SAMPLE_PARAMS)
{
    int what = *(const int *)env;
    cr_dtype dt = cr__rng_dtype(rng);
    size_t shape[3], nd = cr__rng_shape3(rng, 3, shape);
    cr_array *D = NULL, *A = NULL;
    cr_status st;
    switch (what) {
    case MS_COPYTO: {
        if ((st = cr__rand_array(arena, rng, dt, nd, shape, -2, 2, &D)) != CR_OK)
            return st;
        size_t m = cr__rng_below(rng, cr_array_numel(D) + 1);
        cr_dtype sdt = cr__rng_dtype(rng);
        if (sdt == CR_DT_C128 && dt != CR_DT_C128)
            sdt = CR_DT_F64;
        st = cr__rand_array(arena, rng, sdt, 1, &m, -2, 2, &A);
        args[0] = cr_value_array(D);
        args[1] = cr_value_array(A);
        return st;
    }
    case MS_SETINDEX: {
        if (nargs > 3)
            nd = nargs - 2;
        if ((st = cr__rand_array(arena, rng, dt, nd, shape, -2, 2, &D)) != CR_OK)
            return st;
        args[0] = cr_value_array(D);
        size_t n = cr_array_numel(D);
        if (nargs == 3) {
            /* linear index list with a repeat now and then, and as many values */
            size_t m = 1 + cr__rng_below(rng, 3);
            int64_t idx[3];
            for (size_t k = 0; k < m; k++)
                idx[k] = (int64_t)cr__rng_below(rng, n);
            cr_array *Ix = NULL, *X = NULL;
            if (nd == 1 && cr__rng_below(rng, 2) == 0) {
                args[1] = cr_value_f64(cr__rng_unif(rng, -2, 2));
                args[2] = cr_value_i64(idx[0]);
                return CR_OK;
            }
            st = cr__i64_array(arena, m, idx, &Ix);
            if (st == CR_OK)
                st = cr__rand_array(arena, rng, dt, 1, &m, -2, 2, &X);
            args[1] = cr_value_array(X);
            args[2] = cr_value_array(Ix);
            return st;
        }
        /* one integer per dimension: a scalar value */
        args[1] = dt == CR_DT_C128 ? cr_value_c128(cr__c(cr__rng_unif(rng, -2, 2), 1))
                                   : cr_value_f64(cr__rng_unif(rng, -2, 2));
        for (size_t k = 0; k < nd; k++)
            args[k + 2] = cr_value_i64((int64_t)cr__rng_below(rng, shape[k]));
        return CR_OK;
    }
    case MS_FILL:
        st = cr__rand_array(arena, rng, dt, nd, shape, -2, 2, &D);
        args[0] = cr_value_array(D);
        args[1] = dt == CR_DT_C128 ? cr_value_c128(cr__c(0.5, -1)) : cr_value_f64(0.75);
        if (cr__rng_below(rng, 3) == 0)
            args[1] = cr_value_i64(3);
        return st;
    case MS_SUM: {
        size_t rs[3];
        for (size_t k = 0; k < nd; k++)
            rs[k] = cr__rng_below(rng, 2) ? 1 : shape[k];
        st = cr__rand_array(arena, rng, dt, nd, rs, -2, 2, &D);
        if (st == CR_OK)
            st = cr__rand_array(arena, rng, dt, nd, shape, -2, 2, &A);
        args[0] = cr_value_array(D);
        args[1] = cr_value_array(A);
        return st;
    }
    case MS_CUMSUM: {
        if (nargs == 2)
            nd = 1;
        st = cr__rand_array(arena, rng, dt, nd, shape, -2, 2, &D);
        if (st == CR_OK)
            st = cr__rand_array(arena, rng, dt, nd, shape, -2, 2, &A);
        args[0] = cr_value_array(D);
        args[1] = cr_value_array(A);
        if (nargs == 3)
            args[2] = cr_value_i64((int64_t)cr__rng_below(rng, nd));
        return st;
    }
    case MS_PERMUTEDIMS: {
        int64_t perm[3] = {0, 1, 2};
        for (size_t k = nd; k-- > 1;) {
            size_t j = cr__rng_below(rng, k + 1);
            int64_t t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
        size_t ps[3];
        for (size_t k = 0; k < nd; k++)
            ps[k] = shape[perm[k]];
        return dest_src_ints(arena, rng, dt, nd, ps, shape, perm, args);
    }
    case MS_REVERSE:
        st = cr__rand_array(arena, rng, dt, nd, shape, -2, 2, &A);
        args[0] = cr_value_array(A);
        if (nargs == 2)
            args[1] = cr_value_i64((int64_t)cr__rng_below(rng, nd));
        return st;
    case MS_INV:
    case MS_EXP: {
        /* square, small entries; for inv! a dominant diagonal (well conditioned) */
        size_t n = 1 + cr__rng_below(rng, 4), sq[2] = {n, n};
        if ((st = cr__rand_array(arena, rng, dt, 2, sq, -0.5, 0.5, &A)) != CR_OK)
            return st;
        for (size_t k = 0; what == MS_INV && k < n; k++) {
            ptrdiff_t off = (ptrdiff_t)(k * n + k);
            cr__store(A, off, cr__load(A, off) + (cr__rng_below(rng, 2) ? 2.0 : -2.0));
        }
        args[0] = cr_value_array(A);
        return CR_OK;
    }
    case MS_CIRCSHIFT:
    default: {
        int64_t sh[3];
        for (size_t k = 0; k < nd; k++)
            sh[k] = (int64_t)cr__rng_below(rng, 7) - 3;
        return dest_src_ints(arena, rng, dt, nd, shape, shape, sh, args);
    }
    }
}

#define MT(NAME, E)                   \
    static const int k_ms_##NAME = E; \
    static const cr_rule_test k_t_##NAME = {.sample = sample_mutate, .env = (void *)&k_ms_##NAME};
MT(copyto, MS_COPYTO)
MT(setindex, MS_SETINDEX)
MT(fill, MS_FILL)
MT(sum, MS_SUM)
MT(cumsum, MS_CUMSUM)
MT(permutedims, MS_PERMUTEDIMS)
MT(reverse, MS_REVERSE)
MT(circshift, MS_CIRCSHIFT)
MT(inv, MS_INV)
MT(exp, MS_EXP)

cr_status cr__array_register_mutate(cr_registry *reg)
{
#define FA                 \
    {                      \
        CR__M_FARRAY, NULL \
    }
#define IN             \
    {                  \
        CR_M_INT, NULL \
    }
#define DIMS                        \
    {                               \
        CR_M_INT | CR_M_A_INT, NULL \
    }
#define NUM             \
    {                   \
        CR__M_NUM, NULL \
    }
#define IA               \
    {                    \
        CR_M_A_INT, NULL \
    }
    static const cr_argspec a_ff[2] = {FA, FA};
    static const cr_argspec a_fn[2] = {FA, NUM};
    static const cr_argspec a_ffd[3] = {FA, FA, DIMS};
    static const cr_argspec a_ffi[3] = {FA, FA, IN};
    static const cr_argspec a_ffia[3] = {FA, FA, IA};
    static const cr_argspec a_f[1] = {FA};
    static const cr_argspec a_fd[2] = {FA, DIMS};
    static const cr_argspec a_set_lin[3] = {FA, {CR__M_NUM | CR__M_FARRAY, NULL}, DIMS};
    static const cr_argspec a_set2[4] = {FA, NUM, IN, IN};
    static const cr_argspec a_set3[5] = {FA, NUM, IN, IN, IN};
#undef FA
#undef IN
#undef DIMS
#undef NUM
#undef IA
    /* NAME! for the signature S of N arguments: its own rules (PART, copyto! and setindex!)
     * or those of the function it wraps (WRAPPED). */
#define PART(NAME, S, N)                                                                       \
    {                                                                                          \
        &NAME##_bang_function, S, N, NAME##_frule, NAME##_rrule, &k_t_##NAME, CR_LINEAR, NULL, \
            false                                                                              \
    }
#define WRAPPED(NAME, S, N, LIN, LAPACK)                                                    \
    {                                                                                       \
        &NAME##_bang_function, S, N, bang_frule, bang_rrule, &k_t_##NAME, LIN, NULL, LAPACK \
    }
    static const cr__array_rule k[] = {
        PART(copyto, a_ff, 2), PART(setindex, a_set_lin, 3), PART(setindex, a_set2, 4),
        PART(setindex, a_set3, 5), WRAPPED(fill, a_fn, 2, CR_LINEAR, false),
        WRAPPED(sum, a_ff, 2, CR_LINEAR, false), WRAPPED(cumsum, a_ff, 2, CR_LINEAR, false),
        WRAPPED(cumsum, a_ffi, 3, CR_LINEAR, false),
        WRAPPED(permutedims, a_ffia, 3, CR_LINEAR, false),
        WRAPPED(reverse, a_f, 1, CR_LINEAR, false), WRAPPED(reverse, a_fd, 2, CR_LINEAR, false),
        WRAPPED(circshift, a_ffd, 3, CR_LINEAR, false),
        /* inv! and exp!: the LAPACK functions, nonlinear (no second-order form here) */
        WRAPPED(inv, a_f, 1, CR_NONLINEAR, true), WRAPPED(exp, a_f, 1, CR_NONLINEAR, true)};
#undef PART
#undef WRAPPED
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
