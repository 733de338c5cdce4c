/*
 * unique: the first occurrence of each distinct value. The pullback scatters each output's
 * cotangent onto its first occurrence.
 */
#include "family.h"

/* ---- unique -------------------------------------------------------------------------------- */

/* Julia's isless on floats: -0.0 < 0.0, NaN after everything. */
static bool fl_isless(double a, double b)
{
    if (isnan(a))
        return false;
    if (isnan(b))
        return true;
    if (a < b)
        return true;
    return a == b && signbit(a) && !signbit(b);
}

typedef struct uq_env {
    const cr_array *x;
    cr_project *px;
    int64_t *first; /* m indices into x, ascending */
    size_t m;
} uq_env;

/* The first occurrences of x's distinct values (isequal: NaNs equal, -0.0 and 0.0 not),
 * in order of appearance: sort the indices stably, keep the first of each run of equal
 * values, then list the kept indices in ascending order. O(n log n). */
static cr_status uq_forward(cr_arena *arena, const cr_value *args, size_t nargs, uq_env *e,
                            cr_value *y)
{
    const cr_array *x;
    cr_status st = cr__nargs_array(arena, "unique", args, nargs, 1, 1, &x);
    if (st != CR_OK)
        return st;
    if (x->ndim != 1 || (x->dtype != CR_DT_F64 && x->dtype != CR_DT_F32))
        return CR__FAIL(arena, CR_EINVAL, "unique: expected a real (f64 or f32) vector");
    const cr_array *xw;
    st = cr__dense(arena, x, CR_DT_F64, &xw);
    if (st != CR_OK)
        return st;
    size_t n = x->shape[0], cnt = n ? n : 1;
    const double *v = xw->data;
    int64_t *ix = cr_arena_alloc(arena, cnt * sizeof *ix, _Alignof(int64_t));
    int64_t *tmp = cr_arena_alloc(arena, cnt * sizeof *tmp, _Alignof(int64_t));
    bool *keep = cr_arena_calloc(arena, cnt, sizeof *keep, _Alignof(bool));
    if (ix == NULL || tmp == NULL || keep == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < n; i++)
        ix[i] = (int64_t)i;
    cr__sort_index(ix, tmp, n, v, fl_isless);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        bool same = i > 0 && !fl_isless(v[ix[i - 1]], v[ix[i]]);
        if (!same) {
            keep[ix[i]] = true;
            m++;
        }
    }
    e->x = x;
    e->m = m;
    e->first = tmp; /* reused: the sort is done */
    for (size_t i = 0, o = 0; i < n; i++)
        if (keep[i])
            e->first[o++] = (int64_t)i;
    cr_array *yw, *yo;
    st = cr__new(arena, CR_DT_F64, 1, &m, false, &yw);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < m; k++)
        ((double *)yw->data)[k] = v[e->first[k]];
    st = cr__cast(arena, yw, (cr_dtype)x->dtype, &yo);
    if (st == CR_OK)
        *y = cr_value_array(yo);
    return st;
}

typedef struct uq_thunk {
    const uq_env *e;
    const cr_array *g; /* m elements, f64 */
} uq_thunk;
CR__EG_THUNK_NEW(uq_thunk_new, uq_thunk, uq_env)

static void uq_scatter(const uq_thunk *t, cr_array *dest)
{
    const double *g = t->g->data;
    double *d = dest->data;
    for (size_t k = 0; k < t->e->m; k++)
        d[t->e->first[k]] += g[k];
}

static cr_status uq_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    uq_thunk *t = env;
    cr_array *dx;
    cr_status st = cr__new_like(arena, CR_DT_F64, t->e->x, true, &dx);
    if (st != CR_OK)
        return st;
    uq_scatter(t, dx);
    return cr__give(arena, t->e->px, dx, out);
}

CR__THUNK_ADD(uq_add, uq_thunk, CR_DT_F64, t->e->x, uq_scatter(t, dest), uq_thunk_fn)

/* x̄[first[k]] += ȳ[k]: each output's cotangent goes to the first occurrence of its value
 * only (the derivative of "the value at the first index holding it"). */
static cr_status uq_pullback(CR__PULLBACK_PARAMS)
{
    uq_env *e = env;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_zero();
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "unique_pullback", *dy, 1, &e->m, CR_DT_F64, &g);
    return st != CR_OK
               ? st
               : uq_thunk_new(arena, e, g, uq_thunk_fn, uq_add, "unique_pullback_thunk", &dx[1]);
}

static cr_status unique_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, uq_env, e);
    cr_status st = uq_forward(arena, args, nargs, e, y);
    return cr__rrule_end(arena, st, udata, &args[0], &e->px, uq_pullback, e, "unique_pullback",
                         nargs + 1, pb);
}
CR__ARRAY_FN(unique, "unique", 1)

/* frule: ẏ[k] = ẋ[first[k]]. */
static cr_status unique_frule(CR__FRULE_PARAMS)
{
    uq_env e;
    memset(&e, 0, sizeof e);
    cr_status st = uq_forward(arena, args, nargs, &e, y);
    const cr_array *dx = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, "unique", dargs, args, 0, CR_DT_F64, &dx);
    if (st != CR_OK || dx == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_array *o, *oc;
    st = cr__new(arena, CR_DT_F64, 1, &e.m, false, &o);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < e.m; k++)
        ((double *)o->data)[k] = ((const double *)dx->data)[e.first[k]];
    st = cr__cast(arena, o, (cr_dtype)e.x->dtype, &oc);
    if (st == CR_OK)
        *dy = cr_tangent_array(oc);
    return st;
}

/* ---- Test registrations ---- */

/* unique: distinct values (a shuffled grid with jitter), so finite differences never
 * create or break a tie. */
static cr_status sample_unique(CR__SAMPLE_PARAMS)
{
    size_t n = 2 + cr__rng_below(rng, 6);
    cr_dtype dt = cr__rng_below(rng, 4) == 0 ? CR_DT_F32 : CR_DT_F64;
    cr_array *x;
    cr_status st = cr__new(arena, dt, 1, &n, false, &x);
    if (st != CR_OK)
        return st;
    cr__fill_distinct(rng, x, (double)n / 2);
    args[0] = cr_value_array(x);
    return CR_OK;
}

static const cr_rule_test k_t_unique = {.sample = sample_unique};

cr_status cr__array_register_unique(cr_registry *reg)
{
    static const cr_argspec r1[1] = {{CR__M_RARRAY, NULL}};
    static const cr__array_rule k[] = {
        {&unique_function, r1, 1, unique_frule, unique_rrule, &k_t_unique, CR_PIECEWISE_LINEAR,
         NULL, false},
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
