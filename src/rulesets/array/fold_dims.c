/*
 * Folds over dimensions: reduce(op, A[, dims[, init]]), Julia's reduce(op, A; dims, init),
 * and accumulate_ex(op, A, dim[, init]), Julia's accumulate(op, A; dims, init). Each slice
 * (the elements of A that one output reduces, in row-major order; a line along dim for
 * accumulate_ex) is gathered into a vector and folded by foldl's or accumulate's rules
 * (higher_order.c): a scalar-table op keeps its partials, any other op its steps' pullbacks.
 * The pullback runs each slice's pullback and scatters its cotangent back into Ā. reduce with
 * op +, *, max or min runs the reduction's rules instead, with or without init (below).
 */
#include "hof_impl.h"
#include "reduce_impl.h"

#include <chainrules/rules_math.h>

/* A parsed fold over dimensions. */
typedef struct fdims {
    const char *who;
    bool acc;          /* accumulate_ex: every intermediate value is an output */
    bool all;          /* reduce without dims: one slice, a number */
    const cr_array *A; /* the argument */
    size_t ndim;
    size_t oshape[CR_ARRAY_MAX_DIMS]; /* reduce: A's shape with the reduced dims of extent 1 */
    size_t count;                     /* elements of a slice */
    size_t nslices;
    size_t *lin;   /* nslices x count row-major linear indices into A */
    bool has_init; /* args[3] */
    cr_dtype dt;   /* A's dtype */
} fdims;

static cr_status fd_parse(cr_arena *arena, const char *who, bool acc, const cr_value *args,
                          size_t nargs, fdims *F)
{
    memset(F, 0, sizeof *F);
    F->who = who;
    F->acc = acc;
    cr_status st = cr__nargs(arena, who, nargs, acc ? 3 : 2, 4);
    if (st != CR_OK)
        return st;
    if (args[0].kind != CR_KIND_FUNC || args[0].u.func.fn == NULL)
        return CR__FAIL(arena, CR_EINVAL, "%s: takes a function first, not a %s", who,
                        cr_kind_name(args[0].kind));
    st = cr__array_arg(arena, who, args, nargs, 1, &F->A);
    if (st != CR_OK)
        return st;
    F->dt = (cr_dtype)F->A->dtype;
    if (!cr_dtype_is_float(F->dt))
        return CR__FAIL(arena, CR_EINVAL, "%s: takes an f64, f32 or c128 array, not %s", who,
                        cr_dtype_name(F->dt));
    F->ndim = F->A->ndim;
    bool mask[CR_ARRAY_MAX_DIMS] = {false};
    if (acc) {
        int64_t d;
        st = cr__int_arg(arena, who, &args[2], &d);
        if (st != CR_OK)
            return st;
        if (d < 0 || (uint64_t)d >= F->ndim)
            return CR__FAIL(arena, CR_EINVAL, "%s: dimension %lld out of range for %zu dimension%s",
                            who, (long long)d, F->ndim, CR__S(F->ndim));
        mask[d] = true;
    } else if (nargs >= 3 && args[2].kind != CR_KIND_NOTHING) {
        st = cr__dims_arg(arena, who, &args[2], F->ndim, mask);
        if (st != CR_OK)
            return st;
    } else {
        F->all = true;
        for (size_t d = 0; d < F->ndim; d++)
            mask[d] = true;
    }
    F->has_init = nargs == 4;
    if (F->has_init) {
        cr_kind k = (cr_kind)args[3].kind;
        if (k != CR_KIND_F64 && k != CR_KIND_F32 && k != CR_KIND_C128 && k != CR_KIND_I64 &&
            k != CR_KIND_I32 && k != CR_KIND_BOOL)
            return CR__FAIL(arena, CR_EINVAL, "%s: init is a %s, not a number", who,
                            cr_kind_name(k));
    }
    cr_ctx *ctx = cr_arena_ctx(arena);
    F->count = 1;
    F->nslices = 1;
    for (size_t d = 0; d < F->ndim && st == CR_OK; d++) {
        F->oshape[d] = mask[d] ? 1 : F->A->shape[d];
        st = mask[d] ? cr__ck_mul(ctx, who, F->count, F->A->shape[d], &F->count)
                     : cr__ck_mul(ctx, who, F->nslices, F->A->shape[d], &F->nslices);
    }
    size_t n = cr_array_numel(F->A);
    if (st != CR_OK)
        return st;
    F->lin = cr_arena_calloc(arena, n ? n : 1, sizeof *F->lin, _Alignof(size_t));
    if (F->lin == NULL)
        return CR__ALLOC_STATUS(arena);
    /* Element i of A (row-major, index idx) is element `in` of slice `out`, both counted
     * row-major over the reduced dimensions and over the others: it goes to position
     * out * count + in, which moves by w[d] when idx[d] grows by one. */
    size_t w[CR_ARRAY_MAX_DIMS], win = 1, wout = F->count;
    for (size_t d = F->ndim; d-- > 0;) {
        size_t *wk = mask[d] ? &win : &wout;
        w[d] = *wk;
        *wk *= F->A->shape[d]; /* <= n: the size invariant */
    }
    size_t idx[CR_ARRAY_MAX_DIMS] = {0}, pos = 0;
    for (size_t i = 0; i < n; i++) {
        F->lin[pos] = i;
        for (size_t d = F->ndim; d-- > 0;) {
            if (++idx[d] < F->A->shape[d]) {
                pos += w[d];
                break;
            }
            pos -= (F->A->shape[d] - 1) * w[d]; /* back to idx[d] = 0: within [0, n) */
            idx[d] = 0;
        }
    }
    return CR_OK;
}

/* Slice s of A as a new vector of A's dtype: copied element by element from a contiguous
 * row-major A (the row-major index is the offset), read logically from any other. */
static cr_status fd_gather(cr_arena *arena, const fdims *F, size_t s, cr_array **v)
{
    size_t c = F->count;
    cr_status st = cr__new(arena, F->dt, 1, &c, false, v);
    if (st != CR_OK)
        return st;
    const size_t *lin = F->lin + s * c;
    const cr_array *A = F->A;
    if (A->structure != CR_MAT_DENSE || !cr_array_is_contiguous(A)) {
        for (size_t i = 0; i < c; i++)
            cr__store(*v, (ptrdiff_t)i, cr_array_get_linear(A, lin[i]));
        return CR_OK;
    }
#define FD_COPY(T)                     \
    do {                               \
        const T *a = A->data;          \
        T *o = (*v)->data;             \
        for (size_t i = 0; i < c; i++) \
            o[i] = a[lin[i]];          \
    } while (0)
    if (F->dt == CR_DT_C128)
        FD_COPY(cr_complex);
    else if (F->dt == CR_DT_F32)
        FD_COPY(float);
    else
        FD_COPY(double);
#undef FD_COPY
    return CR_OK;
}

/* The arguments of slice s's fold: (op, v[, init]), kept in the arena (the fold's pullback
 * refers to them). */
static cr_status fd_slice_args(cr_arena *arena, const fdims *F, const cr_value *args, size_t s,
                               cr_value **sargs, size_t *ns)
{
    cr_array *v;
    cr_status st = fd_gather(arena, F, s, &v);
    if (st != CR_OK)
        return st;
    *ns = F->has_init ? 3 : 2;
    cr_value *a = cr_arena_alloc(arena, 3 * sizeof *a, _Alignof(cr_value));
    if (a == NULL)
        return CR__ALLOC_STATUS(arena);
    a[0] = args[0];
    a[1] = cr_value_array(v);
    a[2] = F->has_init ? args[3] : args[0];
    *sargs = a;
    return CR_OK;
}

/* The slices' results (numbers for reduce, vectors for accumulate_ex) into the output: a
 * number without dims, else an array (oshape, or A's shape for accumulate_ex) of the
 * promoted type of the results. vals holds one complex number per output element. */
static cr_status fd_output(cr_arena *arena, const fdims *F, const cr_complex *vals, cr_dtype odt,
                           cr_value *y)
{
    if (F->all) {
        *y = cr__scalar_value(odt, vals[0]);
        return CR_OK;
    }
    cr_array *o;
    cr_status st = cr__new(arena, odt, F->ndim, F->acc ? F->A->shape : F->oshape, false, &o);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(o);
    if (!F->acc) {
        for (size_t s = 0; s < n; s++)
            cr__store(o, (ptrdiff_t)s, vals[s]);
    } else {
        for (size_t k = 0; k < n; k++)
            cr__store(o, (ptrdiff_t)F->lin[k], vals[k]);
    }
    *y = cr_value_array(o);
    return CR_OK;
}

/* The numbers of a slice's result (or tangent) into vals[s * width ...]; *dt joins their
 * element type. */
static cr_status fd_take(cr_arena *arena, const fdims *F, const cr_value *r, cr_complex *vals,
                         cr_dtype *dt)
{
    *dt = cr__promote(*dt, cr__value_dtype(r));
    if (!F->acc) {
        vals[0] = cr__scalar_of(r);
        return CR_OK;
    }
    if (r->kind != CR_KIND_ARRAY || cr_array_numel(r->u.arr) != F->count)
        return CR__FAIL(arena, CR_EINVAL, "%s: a slice's accumulate did not return a vector",
                        F->who);
    for (size_t i = 0; i < F->count; i++)
        vals[i] = cr_array_get_linear(r->u.arr, i);
    return CR_OK;
}

static cr_status fd_values(cr_arena *arena, const fdims *F, cr_complex **vals)
{
    size_t n = F->acc ? cr_array_numel(F->A) : F->nslices;
    *vals = cr_arena_calloc(arena, n ? n : 1, sizeof **vals, _Alignof(cr_complex));
    return *vals == NULL ? CR__ALLOC_STATUS(arena) : CR_OK;
}

typedef struct fd_env {
    fdims F;
    cr_pullback *pbs; /* one per slice */
    cr_project *pA, *pinit;
    bool functor;
    bool dinit;   /* init is a float number */
    cr_dtype odt; /* the output's element type */
} fd_env;

/* Ā: each slice's pullback at its share of Ȳ, its vector cotangent scattered back into the
 * slice's elements; init gets the sum of the slices' cotangents of init, op (a functor) the
 * sum of theirs. */
static cr_status fd_pullback(CR__PULLBACK_PARAMS)
{
    fd_env *e = env;
    const fdims *F = &e->F;
    const char *who = F->acc ? "accumulate_ex_pullback" : "reduce_pullback";
    cr__dx_none(dx, nx);
    const cr_array *g = NULL;
    cr_complex g0 = 0;
    bool nz = true;
    cr_status st = F->all ? cr__tan_scalar(arena, who, *dy, &g0, &nz)
                          : cr__tan_array(arena, who, *dy, F->ndim,
                                          F->acc ? F->A->shape : F->oshape, CR_DT_C128, &g);
    if (st != CR_OK)
        return st;
    if (e->functor)
        dx[1] = cr_tangent_zero();
    if ((F->all && !nz) || (!F->all && g == NULL)) {
        dx[2] = cr_tangent_zero();
        if (e->dinit)
            dx[4] = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *acc, *seedv = NULL;
    size_t c = F->count;
    bool cplx = e->odt == CR_DT_C128;
    /* Ā accumulates in f64 when A and the output are real (no conversion of the slices'
     * cotangents), in c128 otherwise */
    cr_dtype adt = cplx || F->dt == CR_DT_C128 ? CR_DT_C128 : CR_DT_F64;
    st = cr__new(arena, adt, F->ndim, F->A->shape, true, &acc);
    if (st == CR_OK && F->acc)
        st = cr__new(arena, CR_DT_C128, 1, &c, false, &seedv);
    if (st != CR_OK)
        return st;
    cr_complex dinit = 0;
    for (size_t s = 0; s < F->nslices; s++) {
        cr_tangent seed, d[4];
        if (F->acc) {
            for (size_t i = 0; i < c; i++)
                ((cr_complex *)seedv->data)[i] = ((const cr_complex *)g->data)[F->lin[s * c + i]];
            seed = cr_tangent_array(seedv);
        } else {
            cr_complex v = F->all ? g0 : ((const cr_complex *)g->data)[s];
            seed = cplx ? cr_tangent_c128(v) : cr_tangent_f64(creal(v));
        }
        /* the slice's fold: d[1] op, d[2] the vector, d[3] init */
        size_t ns = F->has_init ? 3 : 2;
        st = cr_pullback_call(arena, &e->pbs[s], &seed, d, ns + 1);
        if (st == CR_OK && e->functor)
            st = cr_tangent_add(arena, dx[1], d[1], &dx[1]);
        const cr_array *gv = NULL;
        if (st == CR_OK)
            st = cr__tan_array(arena, who, d[2], 1, &c, adt, &gv);
        for (size_t i = 0; st == CR_OK && gv != NULL && i < c; i++) {
            if (adt == CR_DT_C128)
                ((cr_complex *)acc->data)[F->lin[s * c + i]] += ((const cr_complex *)gv->data)[i];
            else
                ((double *)acc->data)[F->lin[s * c + i]] += ((const double *)gv->data)[i];
        }
        if (st == CR_OK && e->dinit) {
            cr_complex v;
            st = cr__tan_scalar(arena, who, d[3], &v, &nz);
            dinit += v;
        }
        if (st != CR_OK)
            return st;
    }
    st = cr_project_apply(arena, e->pA, cr_tangent_array(acc), &dx[2]);
    if (st == CR_OK && e->dinit)
        st = cr_project_apply(arena, e->pinit, cr_tangent_c128(dinit), &dx[4]);
    return st;
}

/* reduce(op, A; dims, init) and accumulate_ex(op, A, dim, init): foldl / accumulate of
 * each slice. */
static cr_status fd_rrule(const cr_config *cfg, cr_arena *arena, bool acc, const cr_value *args,
                          size_t nargs, cr_value *y, cr_pullback *pb, const void *udata)
{
    bool primal = udata == CR__PRIMAL_ONLY;
    const char *who = acc ? "accumulate_ex" : "reduce";
    fd_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(fd_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    fdims *F = &e->F;
    cr_status st = fd_parse(arena, who, acc, args, nargs, F);
    cr_complex *vals = NULL;
    if (st == CR_OK)
        st = fd_values(arena, F, &vals);
    if (st == CR_OK && !primal) {
        e->pbs = cr_arena_calloc(arena, F->nslices ? F->nslices : 1, sizeof *e->pbs,
                                 _Alignof(cr_pullback));
        if (e->pbs == NULL)
            st = CR__ALLOC_STATUS(arena);
    }
    if (st != CR_OK)
        return st;
    cr_dtype odt = (cr_dtype)0;
    for (size_t s = 0; s < F->nslices; s++) {
        cr_value *sargs, r;
        size_t ns;
        st = fd_slice_args(arena, F, args, s, &sargs, &ns);
        if (st == CR_OK)
            st = cr__fold_rrule(cfg, arena, who, acc, sargs, ns, &r, primal ? NULL : &e->pbs[s],
                                udata);
        if (st == CR_OK)
            st = fd_take(arena, F, &r, vals + (acc ? s * F->count : s), &odt);
        if (st != CR_OK)
            return st;
    }
    if (odt == 0) /* no slices: the type of A and init */
        odt = cr__promote(F->dt, F->has_init ? cr__value_dtype(&args[3]) : (cr_dtype)0);
    st = fd_output(arena, F, vals, odt, y);
    if (st != CR_OK || primal)
        return st;
    e->odt = odt;
    e->functor = args[0].u.func.fn->self_type != NULL;
    e->dinit = F->has_init && cr__is_diff(&args[3]);
    st = cr_project_new(arena, &args[1], &e->pA);
    if (st == CR_OK && e->dinit)
        st = cr_project_new(arena, &args[3], &e->pinit);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){fd_pullback, e, acc ? "accumulate_ex_pullback" : "reduce_pullback",
                        nargs + 1};
    return CR_OK;
}

/* frule: each slice's fold frule, with the slice of Ȧ, init's tangent and op's (a
 * functor's). */
static cr_status fd_frule(const cr_config *cfg, cr_arena *arena, bool acc, const cr_tangent *dargs,
                          const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    const char *who = acc ? "accumulate_ex" : "reduce";
    fdims F;
    cr_status st = fd_parse(arena, who, acc, args, nargs, &F);
    cr_complex *vals = NULL, *tans = NULL;
    if (st == CR_OK)
        st = fd_values(arena, &F, &vals);
    if (st == CR_OK)
        st = fd_values(arena, &F, &tans);
    const cr_array *t = NULL;
    cr_dtype wdt = cr__work(F.dt);
    if (st == CR_OK)
        st = cr__dx_array(arena, who, dargs, args, 1, wdt, &t);
    if (st != CR_OK)
        return st;
    cr_tangent dinit = F.has_init && cr__is_diff(&args[3]) ? dargs[4] : cr_tangent_zero();
    cr_tangent dop = args[0].u.func.fn->self_type != NULL ? dargs[1] : cr_tangent_none();
    bool any = t != NULL || !cr_tangent_is_zero(dinit) || !cr_tangent_is_zero(dop);
    cr_dtype odt = (cr_dtype)0;
    size_t c = F.count;
    for (size_t s = 0; s < F.nslices; s++) {
        cr_value *sargs, r;
        size_t ns;
        cr_array *tv_arr = NULL;
        st = fd_slice_args(arena, &F, args, s, &sargs, &ns);
        if (st == CR_OK && t != NULL)
            st = cr__new(arena, wdt, 1, &c, false, &tv_arr);
        for (size_t i = 0; st == CR_OK && t != NULL && i < c; i++)
            cr__store(tv_arr, (ptrdiff_t)i, cr__load(t, (ptrdiff_t)F.lin[s * c + i]));
        cr_tangent sd[4] = {cr_tangent_none(), dop,
                            tv_arr != NULL ? cr_tangent_array(tv_arr) : cr_tangent_zero(), dinit};
        cr_tangent ds;
        if (st == CR_OK)
            st = cr__fold_frule(cfg, arena, who, acc, sd, sargs, ns, &r, &ds);
        if (st == CR_OK)
            st = fd_take(arena, &F, &r, vals + (acc ? s * c : s), &odt);
        if (st == CR_OK && any) {
            /* the tangent as a value: a number, or a vector for accumulate_ex */
            cr_tangent u;
            st = cr_tangent_unthunk(ds, &u);
            if (st == CR_OK && cr_tangent_is_zero(u)) {
                for (size_t i = 0; i < (acc ? c : 1); i++)
                    tans[(acc ? s * c : s) + i] = 0;
                continue;
            }
            if (st == CR_OK && acc) {
                const cr_array *ta;
                st = cr__tan_array(arena, who, u, 1, &c, CR_DT_C128, &ta);
                for (size_t i = 0; st == CR_OK && i < c; i++)
                    tans[s * c + i] = ta != NULL ? ((const cr_complex *)ta->data)[i] : 0;
            } else if (st == CR_OK) {
                cr_complex v;
                bool nz;
                st = cr__tan_scalar(arena, who, u, &v, &nz);
                tans[s] = v;
            }
        }
        if (st != CR_OK)
            return st;
    }
    if (odt == 0)
        odt = cr__promote(F.dt, F.has_init ? cr__value_dtype(&args[3]) : (cr_dtype)0);
    st = fd_output(arena, &F, vals, odt, y);
    if (st != CR_OK || !any) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_value tvv;
    st = fd_output(arena, &F, tans, odt, &tvv);
    if (st != CR_OK)
        return st;
    cr_tangent tt = tvv.kind == CR_KIND_ARRAY ? cr_tangent_array(tvv.u.arr)
                                              : cr__scalar_tangent(odt, cr__scalar_of(&tvv));
    return cr_project_tangent(arena, y, tt, dy);
}

/* ---- reduce by a reduction ---------------------------------------------------------------
 * reduce(op, A[, dims]) without init, for op +, *, max or min (max and min of a real A), of
 * an A with elements: the rules of sum, prod, maximum or minimum over (A[, dims]), which make
 * one strided pass over A where the slices cost a rule call, a gather and a scatter each.
 * Their values are the left fold's in row-major order over each slice (sum's differs only in
 * association when the reduced dimensions include the last and another one not next to it,
 * and by the sign of an all-(-0.0) sum); maximum's cotangent goes to the first of tied
 * elements, the fold's to the last. */

/* *op: the reduction of reduce(args) when it has one; *n: the reduction's arguments (A, or
 * A and dims). False when the slices' folds are needed. */
static bool fd_by_reduction(cr_arena *arena, const cr_value *args, size_t nargs, cr__red_op *op,
                            size_t *n, cr_status *st)
{
    *st = CR_OK;
    if (nargs < 2 || nargs > 3 || args[0].kind != CR_KIND_FUNC || args[1].kind != CR_KIND_ARRAY)
        return false;
    const cr_function *fn = args[0].u.func.fn;
    const cr_array *A = args[1].u.arr;
    bool real = A->dtype == CR_DT_F64 || A->dtype == CR_DT_F32;
    if (fn == cr_fn_add.u.func.fn)
        *op = CR__RED_OP_SUM;
    else if (fn == cr_fn_mul.u.func.fn)
        *op = CR__RED_OP_PROD;
    else if (fn == cr_fn_max.u.func.fn && real)
        *op = CR__RED_OP_MAX;
    else if (fn == cr_fn_min.u.func.fn && real)
        *op = CR__RED_OP_MIN;
    else
        return false;
    if (!cr_dtype_is_float((cr_dtype)A->dtype) || cr_array_numel(A) == 0)
        return false; /* refused, or empty slices: the folds say which */
    *n = nargs == 3 && args[2].kind != CR_KIND_NOTHING ? 2 : 1;
    if (*n == 2) {
        bool mask[CR_ARRAY_MAX_DIMS];
        *st = cr__dims_arg(arena, "reduce", &args[2], A->ndim, mask);
    }
    return true;
}

/* The pullback of reduce by a reduction: the reduction's, its cotangent of A moved to A's
 * place. */
static cr_status reduce_by_pullback(CR__PULLBACK_PARAMS)
{
    const cr_pullback *inner = env;
    cr_tangent d[3];
    cr_status st = cr_pullback_call(arena, inner, dy, d, inner->nx);
    cr__dx_none(dx, nx);
    if (st == CR_OK)
        dx[2] = d[1];
    return st;
}

/* ---- reduce with init by a reduction -----------------------------------------------------
 * reduce(op, A, dims, init) for op +, *, max or min (max and min of a real A and a real
 * init), of an A with elements: the rule of sum, prod, maximum or minimum over (A[, dims]),
 * then init combined with each of its values m by op(init, m), the fold's first step moved
 * last (one rule call for every slice). Values: init + Σ and init Π associate differently
 * from the fold (equal up to rounding); max and min are the fold's exactly. Ties: between
 * elements, the reduction's (the first element); between init and m, the scalar rows' (max:
 * to m, min: to init), where the fold gives them to the last tied element and to init
 * (max) or the first (min). */

/* A reduce with init that a reduction serves. */
typedef struct rinit_env {
    cr_pullback inner;         /* the reduction's pullback */
    const cr_scalar_rule *row; /* op's scalar row */
    cr_complex init;
    const cr_complex *m; /* the reduction's values (nout, row-major) */
    size_t nout;
    bool all;
    size_t ndim;
    size_t oshape[CR_ARRAY_MAX_DIMS];
    cr_dtype adt; /* A's work dtype: the reduction's cotangent */
    bool dinit;   /* init is a float number */
    cr_project *pinit;
} rinit_env;

/* Whether reduce(args) with init (four arguments) goes by a reduction: *op and *n as
 * fd_by_reduction's. */
static bool fd_init_by_reduction(cr_arena *arena, const cr_value *args, size_t nargs,
                                 cr__red_op *op, size_t *n, cr_status *st)
{
    *st = CR_OK;
    if (nargs != 4)
        return false;
    cr_kind k = (cr_kind)args[3].kind;
    bool real = k == CR_KIND_F64 || k == CR_KIND_F32 || k == CR_KIND_I64 || k == CR_KIND_I32 ||
                k == CR_KIND_BOOL;
    if (!real && k != CR_KIND_C128)
        return false; /* fd_parse refuses it */
    if (!fd_by_reduction(arena, args, 3, op, n, st))
        return false;
    if (*st == CR_OK && cr_scalar_rule_of(args[0].u.func.fn) == NULL)
        return false; /* no scalar row to combine init with: the fold */
    if (*st == CR_OK && !real && (*op == CR__RED_OP_MAX || *op == CR__RED_OP_MIN))
        return false; /* max of a complex init: the fold refuses it */
    return true;
}

/* op(init, m) and its partials *pi (∂/∂init) and *pm (∂/∂m), from op's scalar row: its
 * complex instantiation, or its real one (max and min, whose init and m are real). */
static cr_complex rinit_combine(const cr_scalar_rule *row, cr_complex init, cr_complex m,
                                cr_complex *pi, cr_complex *pm)
{
    if (row->c128 != NULL) {
        cr_complex x[2] = {init, m}, Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
        row->c128(x, Y, D);
        *pi = D[0];
        *pm = D[1];
        return Y[0];
    }
    double x[2] = {creal(init), creal(m)}, Y[CR_SCALAR_MAX_OUT],
           D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    row->f64(x, Y, D);
    *pi = D[0];
    *pm = D[1];
    return Y[0];
}

/* The reduction's values m of its output r, and y = op(init, m) of dtype odt. */
static cr_status rinit_output(cr_arena *arena, rinit_env *e, const cr_value *r, cr_dtype odt,
                              cr_value *y)
{
    cr_complex *m = cr_arena_calloc(arena, e->nout ? e->nout : 1, sizeof *m, _Alignof(cr_complex));
    if (m == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t s = 0; s < e->nout; s++)
        m[s] = e->all ? cr__scalar_of(r) : cr_array_get_linear(r->u.arr, s);
    e->m = m;
    cr_complex pi, pm;
    if (e->all) {
        *y = cr__scalar_value(odt, rinit_combine(e->row, e->init, m[0], &pi, &pm));
        return CR_OK;
    }
    cr_array *o;
    cr_status st = cr__new(arena, odt, e->ndim, e->oshape, false, &o);
    if (st != CR_OK)
        return st;
    for (size_t s = 0; s < e->nout; s++)
        cr__store(o, (ptrdiff_t)s, rinit_combine(e->row, e->init, m[s], &pi, &pm));
    *y = cr_value_array(o);
    return CR_OK;
}

/* The environment of reduce(args) by the reduction op over args[1..n] with init args[3]:
 * the reduction's value r, its output shape, and y. */
static cr_status rinit_start(cr_arena *arena, const cr_value *args, size_t n, const cr_value *r,
                             rinit_env *e, cr_value *y)
{
    const cr_array *A = args[1].u.arr;
    e->row = cr_scalar_rule_of(args[0].u.func.fn);
    e->init = cr__scalar_of(&args[3]);
    e->all = n == 1;
    e->ndim = A->ndim;
    e->adt = cr__work((cr_dtype)A->dtype);
    e->nout = 1;
    if (!e->all) {
        e->nout = cr_array_numel(r->u.arr);
        for (size_t d = 0; d < e->ndim; d++)
            e->oshape[d] = r->u.arr->shape[d];
    }
    cr_dtype odt = cr__promote((cr_dtype)A->dtype, cr__value_dtype(&args[3]));
    return rinit_output(arena, e, r, odt, y);
}

/* m̄ = conj(∂y/∂m) Ȳ into the reduction's pullback (its Ā is reduce's), init's cotangent
 * Σ conj(∂y/∂init) Ȳ. */
static cr_status rinit_pullback(CR__PULLBACK_PARAMS)
{
    const rinit_env *e = env;
    const char *who = "reduce_pullback";
    cr__dx_none(dx, nx);
    const cr_array *g = NULL;
    cr_complex g0 = 0;
    bool nz = true;
    cr_status st = e->all ? cr__tan_scalar(arena, who, *dy, &g0, &nz)
                          : cr__tan_array(arena, who, *dy, e->ndim, e->oshape, CR_DT_C128, &g);
    if (st != CR_OK)
        return st;
    if ((e->all && !nz) || (!e->all && g == NULL)) {
        dx[2] = cr_tangent_zero();
        if (e->dinit)
            dx[4] = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *gm = NULL;
    if (!e->all) {
        st = cr__new(arena, e->adt, e->ndim, e->oshape, false, &gm);
        if (st != CR_OK)
            return st;
    }
    cr_complex dinit = 0, v = 0;
    for (size_t s = 0; s < e->nout; s++) {
        cr_complex pi, pm, gs = e->all ? g0 : ((const cr_complex *)g->data)[s];
        rinit_combine(e->row, e->init, e->m[s], &pi, &pm);
        dinit += conj(pi) * gs;
        v = conj(pm) * gs;
        if (gm != NULL)
            cr__store(gm, (ptrdiff_t)s, e->adt == CR_DT_C128 ? v : creal(v));
    }
    cr_tangent t = gm != NULL             ? cr_tangent_array(gm)
                   : e->adt == CR_DT_C128 ? cr_tangent_c128(v)
                                          : cr_tangent_f64(creal(v));
    cr_tangent d[3];
    st = cr_pullback_call(arena, &e->inner, &t, d, e->inner.nx);
    if (st == CR_OK)
        dx[2] = d[1];
    if (st == CR_OK && e->dinit)
        st = cr_project_apply(arena, e->pinit, cr_tangent_c128(dinit), &dx[4]);
    return st;
}

static cr_status rinit_rrule(const cr_config *cfg, cr_arena *arena, cr__red_op op,
                             const cr_value *args, size_t nargs, size_t n, cr_value *y,
                             cr_pullback *pb, const void *udata)
{
    bool primal = udata == CR__PRIMAL_ONLY;
    rinit_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(rinit_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_value r;
    cr_status st =
        cr__red_op_rrule(op, cfg, arena, args + 1, n, &r, primal ? NULL : &e->inner, udata);
    if (st == CR_OK)
        st = rinit_start(arena, args, n, &r, e, y);
    if (st != CR_OK || primal)
        return st;
    e->dinit = cr__is_diff(&args[3]);
    if (e->dinit)
        st = cr_project_new(arena, &args[3], &e->pinit);
    if (st == CR_OK)
        *pb = (cr_pullback){rinit_pullback, e, "reduce_pullback", nargs + 1};
    return st;
}

/* frule: Ẏ = (∂y/∂m) ṁ + (∂y/∂init) init̊, ṁ the reduction's tangent. */
static cr_status rinit_frule(const cr_config *cfg, cr_arena *arena, cr__red_op op,
                             const cr_tangent *dargs, const cr_value *args, size_t n, cr_value *y,
                             cr_tangent *dy)
{
    const char *who = "reduce";
    rinit_env e;
    memset(&e, 0, sizeof e);
    cr_value r;
    cr_tangent dm;
    cr_status st = cr__red_op_frule(op, cfg, arena, dargs + 1, args + 1, n, &r, &dm);
    if (st == CR_OK)
        st = rinit_start(arena, args, n, &r, &e, y);
    cr_complex di = 0, m0 = 0;
    bool nzi = false, nzm = true;
    const cr_array *tm = NULL;
    if (st == CR_OK && cr__is_diff(&args[3]))
        st = cr__tan_scalar(arena, who, dargs[4], &di, &nzi);
    if (st == CR_OK)
        st = e.all ? cr__tan_scalar(arena, who, dm, &m0, &nzm)
                   : cr__tan_array(arena, who, dm, e.ndim, e.oshape, CR_DT_C128, &tm);
    if (st != CR_OK)
        return st;
    if (!nzi && (e.all ? !nzm : tm == NULL)) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_dtype odt = cr__value_dtype(y);
    cr_tangent tt;
    cr_complex pi, pm;
    if (e.all) {
        rinit_combine(e.row, e.init, e.m[0], &pi, &pm);
        tt = cr__scalar_tangent(odt, pm * m0 + pi * di);
    } else {
        cr_array *o;
        st = cr__new(arena, odt, e.ndim, e.oshape, false, &o);
        if (st != CR_OK)
            return st;
        for (size_t s = 0; s < e.nout; s++) {
            rinit_combine(e.row, e.init, e.m[s], &pi, &pm);
            cr_complex t = tm != NULL ? ((const cr_complex *)tm->data)[s] : 0;
            cr__store(o, (ptrdiff_t)s, pm * t + pi * di);
        }
        tt = cr_tangent_array(o);
    }
    return cr_project_tangent(arena, y, tt, dy);
}

static cr_status reduce_rrule(CR__RRULE_PARAMS)
{
    cr__red_op op;
    size_t n;
    cr_status st;
    if (fd_init_by_reduction(arena, args, nargs, &op, &n, &st))
        return st != CR_OK ? st : rinit_rrule(cfg, arena, op, args, nargs, n, y, pb, udata);
    if (!fd_by_reduction(arena, args, nargs, &op, &n, &st))
        return fd_rrule(cfg, arena, false, args, nargs, y, pb, udata);
    if (st != CR_OK)
        return st;
    if (udata == CR__PRIMAL_ONLY)
        return cr__red_op_rrule(op, cfg, arena, args + 1, n, y, NULL, udata);
    cr_pullback *inner = cr_arena_alloc(arena, sizeof *inner, _Alignof(cr_pullback));
    if (inner == NULL)
        return CR__ALLOC_STATUS(arena);
    st = cr__red_op_rrule(op, cfg, arena, args + 1, n, y, inner, udata);
    if (st == CR_OK)
        *pb = (cr_pullback){reduce_by_pullback, inner, "reduce_pullback", nargs + 1};
    return st;
}
CR__ARRAY_FN(reduce, "reduce", -1)
static cr_status reduce_frule(CR__FRULE_PARAMS)
{
    cr__red_op op;
    size_t n;
    cr_status st;
    if (fd_init_by_reduction(arena, args, nargs, &op, &n, &st))
        return st != CR_OK ? st : rinit_frule(cfg, arena, op, dargs, args, n, y, dy);
    if (!fd_by_reduction(arena, args, nargs, &op, &n, &st))
        return fd_frule(cfg, arena, false, dargs, args, nargs, y, dy);
    if (st != CR_OK)
        return st;
    /* the reduction's tangents: dargs[1] (op's) stands for its self */
    return cr__red_op_frule(op, cfg, arena, dargs + 1, args + 1, n, y, dy);
}

static cr_status accumulate_ex_rrule(CR__RRULE_PARAMS)
{
    return fd_rrule(cfg, arena, true, args, nargs, y, pb, udata);
}
CR__ARRAY_FN(accumulate_ex, "accumulate_ex", -1)
static cr_status accumulate_ex_frule(CR__FRULE_PARAMS)
{
    return fd_frule(cfg, arena, true, dargs, args, nargs, y, dy);
}

/* ---- Test registration ------------------------------------------------------------------ */

/* (op, A, dims[, init]): op = *, + (rows), hypot or atan2 (real rows); A of 1 to 3
 * dimensions with entries in [0.5, 1.5] (products of order one); dims one dimension, two, or
 * nothing (reduce: all elements); init a float, an integer or (for c128) a complex. A hard
 * point one time in six: slices of one element (an extent-1 dimension reduced), where the
 * fold is its init step or the element itself. */
static cr_status sample_fold_dims(CR__SAMPLE_PARAMS)
{
    bool acc = env != NULL;
    static const size_t shapes[4][3] = {{5, 0, 0}, {3, 4, 0}, {2, 3, 4}, {1, 3, 0}};
    size_t sk = cr__rng_below(rng, 6), nd;
    sk = sk >= 3 ? (sk == 5 ? 3 : cr__rng_below(rng, 3)) : sk;
    nd = sk == 3 ? 2 : sk + 1;
    cr_dtype dt = cr__rng_dtype(rng);
    size_t k = cr__rng_below(rng, 4);
    if (k < 2) {
        args[0] = k == 0 ? cr_fn_mul : cr_fn_add;
    } else {
        const cr_function *fn = cr_registry_find(cr_registry_builtin(), k == 2 ? "hypot" : "atan2");
        args[0] = fn != NULL ? cr_value_function(fn, NULL) : cr_fn_mul;
        if (dt == CR_DT_C128)
            dt = CR_DT_F64; /* real-only rows */
    }
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, dt, nd, shapes[sk], 0.5, 1.5, &A);
    if (st != CR_OK)
        return st;
    args[1] = cr_value_array(A);
    size_t dk = cr__rng_below(rng, acc ? 1 : 4);
    if (nargs < 3) {
        /* reduce(op, A): all elements */
    } else if (sk == 3 || dk == 0) {
        args[2] = cr_value_i64(sk == 3 ? 0 : (int64_t)cr__rng_below(rng, nd));
    } else if (dk == 1) {
        args[2] = (cr_value){.kind = CR_KIND_NOTHING};
    } else {
        int64_t dims[2] = {0, (int64_t)nd - 1};
        cr_array *D;
        st = cr__i64_array(arena, nd > 1 ? 2 : 1, dims, &D);
        if (st != CR_OK)
            return st;
        args[2] = cr_value_array(D);
    }
    if (nargs == 4) {
        size_t i = cr__rng_below(rng, 3);
        if (i == 0)
            args[3] = cr_value_i64(1);
        else if (dt == CR_DT_C128)
            args[3] = cr_value_c128(cr__c(cr__rng_unif(rng, 0.5, 1.5), 0.25));
        else if (dt == CR_DT_F32)
            args[3] = cr_value_f32((float)cr__rng_unif(rng, 0.5, 1.5));
        else
            args[3] = cr_value_f64(cr__rng_unif(rng, 0.5, 1.5));
    }
    return CR_OK;
}

static const int k_acc_tag = 1;
static const cr_rule_test k_test_reduce = {.sample = sample_fold_dims};
static const cr_rule_test k_test_accumulate_ex = {.sample = sample_fold_dims,
                                                  .env = (void *)&k_acc_tag};

cr_status cr__array_register_fold_dims(cr_registry *reg)
{
#define FN              \
    {                   \
        CR_M_FUNC, NULL \
    }
#define FA                 \
    {                      \
        CR__M_FARRAY, NULL \
    }
    static const cr_argspec a_red2[2] = {FN, FA};
    static const cr_argspec a_red4[4] = {
        FN, FA, {CR_M_INT | CR_M_A_INT | CR_M_NOTHING, NULL}, {CR__M_NUM, NULL}};
    static const cr_argspec a_acc4[4] = {FN, FA, {CR_M_INT, NULL}, {CR__M_NUM, NULL}};
#undef FN
#undef FA
    static const cr__array_rule k[] = {
        {&reduce_function, a_red2, 2, reduce_frule, reduce_rrule, &k_test_reduce, CR_NONLINEAR,
         NULL, false},
        {&reduce_function, a_red4, 3, reduce_frule, reduce_rrule, &k_test_reduce, CR_NONLINEAR,
         NULL, false},
        {&reduce_function, a_red4, 4, reduce_frule, reduce_rrule, &k_test_reduce, CR_NONLINEAR,
         NULL, false},
        {&accumulate_ex_function, a_acc4, 3, accumulate_ex_frule, accumulate_ex_rrule,
         &k_test_accumulate_ex, CR_NONLINEAR, NULL, false},
        {&accumulate_ex_function, a_acc4, 4, accumulate_ex_frule, accumulate_ex_rrule,
         &k_test_accumulate_ex, CR_NONLINEAR, NULL, false},
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
