/*
 * Broadcasting: broadcast(f, x...) applies a scalar function elementwise over arrays and
 * scalars of broadcasting shapes (NumPy's trailing alignment). Scalar-table functions are
 * evaluated through their row: the rrule keeps one array of partial derivatives per
 * perturbable argument (never a per-element pullback), and the pullback multiplies by the
 * cotangent and sums over the broadcast dimensions (unbroadcast) in one pass. + - * / and
 * ^2 are fused (no partials stored). Other functions fall back to one scalar rrule per
 * element: the function's own rule, or the configuration's AD (rrule_via_ad /
 * frule_via_ad) for user functions. map(f, x...) is this rule for arrays of one shape.
 */
#include <math.h>

#include "hof_impl.h"

#include <chainrules/rules_complex.h>
#include <chainrules/rules_math.h>

/* The most arguments of a scalar row (the row path); other functions take any number. */
#define BC_MAX_IN CR_SCALAR_MAX_IN

/* Fused operations (no partials stored). */
typedef enum { FU_NONE, FU_ADD, FU_SUB, FU_MUL, FU_DIV, FU_SQUARE, FU_TANH } fused_op;

/* A parsed broadcast. */
typedef struct bc {
    const char *who; /* the function called: broadcast, map, sum */
    const cr_function *fn;
    const cr_scalar_rule *row; /* NULL: no row (fallback) */
    size_t n;                  /* number of arguments after f */
    const cr_value *args;      /* args + 1 */
    const cr_array **in;       /* the n arguments in the work dtype (0-d for scalars) */
    bool *diff;                /* perturbable (n) */
    cr_dtype dt;               /* output dtype */
    cr_dtype wdt;
    size_t ndim;
    size_t shape[CR_ARRAY_MAX_DIMS];
    fused_op fused;
} bc;

/* An array of n zeroed T in the arena (NULL on failure, with *st set). */
#define BC_ALLOC(T, N, ST) ((T *)bc_alloc(arena, (N), sizeof(T), _Alignof(T), (ST)))
static void *bc_alloc(cr_arena *arena, size_t n, size_t size, size_t align, cr_status *st)
{
    void *p = cr_arena_calloc(arena, n ? n : 1, size, align);
    if (p == NULL)
        *st = CR__ALLOC_STATUS(arena);
    return p;
}

static bool same_fn(const cr_function *fn, const cr_value *v)
{
    return v->kind == CR_KIND_FUNC && v->u.func.fn == fn;
}

static cr_status bc_parse(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                          bool want_fused, bc *b)
{
    memset(b, 0, sizeof *b);
    b->who = who;
    if (nargs < 2 || args[0].kind != CR_KIND_FUNC || args[0].u.func.fn == NULL)
        return CR__FAIL(arena, CR_EINVAL, "%s: takes a function and at least one argument", who);
    b->fn = args[0].u.func.fn;
    b->row = cr_scalar_rule_of(b->fn);
    b->n = nargs - 1;
    b->args = args + 1;
    /* A variadic function whose row covers one arity (hypot(x, y) of hypot(x...)): other
     * arities go element by element, through the function's own rules. */
    if (b->row != NULL && b->row->nin != b->n && b->fn->arity < 0)
        b->row = NULL;
    if (b->row != NULL && b->row->nin != b->n)
        return CR__FAIL(arena, CR_EINVAL, "%s: %s takes %u argument%s, %zu given", who, b->fn->name,
                        (unsigned)b->row->nin, CR__S((unsigned)b->row->nin), b->n);
    /* A row of several outputs (sincos) goes element by element too, through its own rules:
     * the result is a tuple of arrays. */
    if (b->row != NULL && b->row->nout != 1)
        b->row = NULL;
    cr_status st = CR_OK;
    b->in = BC_ALLOC(const cr_array *, b->n, &st);
    b->diff = BC_ALLOC(bool, b->n, &st);
    const cr_array **shapes = BC_ALLOC(const cr_array *, b->n, &st);
    if (st != CR_OK)
        return st;
    cr_dtype dt = (cr_dtype)0;
    for (size_t j = 0; j < b->n; j++) {
        const cr_value *v = &b->args[j];
        bool num = v->kind == CR_KIND_F64 || v->kind == CR_KIND_F32 || v->kind == CR_KIND_C128 ||
                   v->kind == CR_KIND_I64 || v->kind == CR_KIND_I32 || v->kind == CR_KIND_BOOL;
        if (!num && (v->kind != CR_KIND_ARRAY || v->u.arr == NULL))
            return CR__FAIL(arena, CR_EINVAL, "%s: argument %zu is a %s, not a number or an array",
                            who, j + 2, cr_kind_name(v->kind));
        dt = cr__promote(dt, cr__value_dtype(v));
        b->diff[j] = cr__is_diff(v);
        if (v->kind == CR_KIND_ARRAY)
            shapes[j] = v->u.arr;
    }
    b->dt = dt == 0 ? CR_DT_F64 : dt;
    b->wdt = cr__work(b->dt);
    if (b->row != NULL && b->wdt == CR_DT_C128 && b->row->c128 == NULL)
        return CR__FAIL(arena, CR_EDOMAIN, "%s: %s is defined for real arguments only", who,
                        b->fn->name);
    st = cr__bc_shape(arena, who, shapes, b->n, &b->ndim, b->shape);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < b->n; j++) {
        const cr_value *v = &b->args[j];
        if (v->kind == CR_KIND_ARRAY) {
            st = cr__strided(arena, v->u.arr, b->wdt, &b->in[j]);
        } else {
            cr_array *s;
            st = cr__scalar_array(arena, b->wdt, cr__scalar_of(v), &s);
            b->in[j] = s;
        }
        if (st != CR_OK)
            return st;
    }
    if (want_fused && b->row != NULL) {
        if (b->n == 2 && same_fn(b->fn, &cr_fn_add))
            b->fused = FU_ADD;
        else if (b->n == 2 && same_fn(b->fn, &cr_fn_sub))
            b->fused = FU_SUB;
        else if (b->n == 2 && same_fn(b->fn, &cr_fn_mul))
            b->fused = FU_MUL;
        else if (b->n == 2 && same_fn(b->fn, &cr_fn_div))
            b->fused = FU_DIV;
        else if (b->n == 1 && same_fn(b->fn, &cr_fn_square))
            b->fused = FU_SQUARE;
        else if (b->n == 2 && same_fn(b->fn, &cr_fn_pow) &&
                 (b->args[1].kind == CR_KIND_I64 || b->args[1].kind == CR_KIND_I32) &&
                 b->args[1].u.i64 == 2)
            b->fused = FU_SQUARE;
        else if (b->n == 1 && b->wdt == CR_DT_F64 && same_fn(b->fn, &cr_fn_tanh))
            b->fused = FU_TANH;
    }
    return CR_OK;
}

/* ---- Row evaluation ------------------------------------------------------------------ */

/* Arrays of the loop: 0 y, 1..n inputs, then n partials (rrule) or n tangents and the
 * output tangent (frule). */
typedef struct row_ctx {
    const bc *b;
    void *y;
    const void *x[BC_MAX_IN];
    void *D[BC_MAX_IN];        /* NULL: not stored */
    const void *dx[BC_MAX_IN]; /* frule tangents, NULL for zero */
    void *dy;
    size_t idx_D, idx_dx, idx_dy;
} row_ctx;

/* Element i of row_inner for the work type T, evaluating the row through its member EVAL. */
#define ROW_ELEM(T, EVAL)                                                 \
    do {                                                                  \
        T x[BC_MAX_IN], Y[1], D[BC_MAX_IN];                               \
        for (size_t j = 0; j < nin; j++)                                  \
            x[j] = ((const T *)c->x[j])[CR__AT(1 + j)];                   \
        b->row->EVAL(x, Y, D);                                            \
        ((T *)c->y)[oy] = Y[0];                                           \
        T t = 0;                                                          \
        for (size_t j = 0; j < nin; j++) {                                \
            if (c->D[j] != NULL)                                          \
                ((T *)c->D[j])[oy] = D[j];                                \
            if (c->dx[j] != NULL)                                         \
                t += D[j] * ((const T *)c->dx[j])[CR__AT(c->idx_dx + j)]; \
        }                                                                 \
        if (c->dy != NULL)                                                \
            ((T *)c->dy)[oy] = t;                                         \
    } while (0)

static void row_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    row_ctx *c = vctx;
    const bc *b = c->b;
    size_t nin = b->n;
    for (size_t i = 0; i < n; i++) {
        ptrdiff_t oy = CR__AT(0);
        if (b->wdt == CR_DT_C128)
            ROW_ELEM(cr_complex, c128);
        else
            ROW_ELEM(double, f64);
    }
}
#undef ROW_ELEM

/* Evaluate the row over the broadcast shape: y, the partials D[j] for perturbable
 * arguments when store_D, and the frule's dy when dxs is given. */
static cr_status row_eval(cr_arena *arena, const bc *b, bool store_D, const cr_array *const *dxs,
                          cr_array **y, cr_array **D, cr_array **dy)
{
    cr_status st = cr__new(arena, b->wdt, b->ndim, b->shape, false, y);
    if (st != CR_OK)
        return st;
    row_ctx c;
    memset(&c, 0, sizeof c);
    c.b = b;
    c.y = (*y)->data;
    cr__nd nd;
    cr__nd_init(&nd, b->ndim, b->shape);
    cr__nd_add(&nd, *y);
    for (size_t j = 0; j < b->n; j++) {
        cr__nd_add(&nd, b->in[j]);
        c.x[j] = b->in[j]->data;
        D[j] = NULL;
        if (store_D && b->diff[j]) {
            st = cr__new(arena, b->wdt, b->ndim, b->shape, false, &D[j]);
            if (st != CR_OK)
                return st;
            c.D[j] = D[j]->data;
        }
    }
    if (dxs != NULL) {
        c.idx_dx = nd.narr;
        bool any = false;
        for (size_t j = 0; j < b->n; j++) {
            const cr_array *t = dxs[j] != NULL ? dxs[j] : b->in[j];
            cr__nd_add(&nd, t);
            c.dx[j] = dxs[j] != NULL ? dxs[j]->data : NULL;
            any = any || dxs[j] != NULL;
        }
        if (any) {
            st = cr__new(arena, b->wdt, b->ndim, b->shape, false, dy);
            if (st != CR_OK)
                return st;
            c.dy = (*dy)->data;
        } else {
            *dy = NULL;
        }
    }
    cr__nd_run(&nd, row_inner, &c);
    return CR_OK;
}

/* ---- Fused forward ---------------------------------------------------------------------- */

typedef struct fused_ctx {
    fused_op op;
    bool cplx;
    void *y;
    const void *a, *b;
} fused_ctx;

static void fused_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    fused_ctx *c = vctx;
    if (c->cplx) {
        cr_complex *y = (cr_complex *)c->y + off[0];
        const cr_complex *a = (const cr_complex *)c->a + off[1];
        const cr_complex *b = c->b != NULL ? (const cr_complex *)c->b + off[2] : NULL;
        for (size_t i = 0; i < n; i++) {
            cr_complex x = a[(ptrdiff_t)i * step[1]];
            cr_complex z = b != NULL ? b[(ptrdiff_t)i * step[2]] : 0;
            cr_complex r = c->op == FU_ADD   ? x + z
                           : c->op == FU_SUB ? x - z
                           : c->op == FU_MUL ? x * z
                           : c->op == FU_DIV ? x / z
                                             : x * x;
            y[(ptrdiff_t)i * step[0]] = r;
        }
        return;
    }
    double *y = (double *)c->y + off[0];
    const double *a = (const double *)c->a + off[1];
    const double *b = c->b != NULL ? (const double *)c->b + off[2] : NULL;
    ptrdiff_t sy = step[0], sa = step[1], sb = c->b != NULL ? step[2] : 0;
    switch (c->op) {
    case FU_ADD:
        for (size_t i = 0; i < n; i++)
            y[(ptrdiff_t)i * sy] = a[(ptrdiff_t)i * sa] + b[(ptrdiff_t)i * sb];
        break;
    case FU_SUB:
        for (size_t i = 0; i < n; i++)
            y[(ptrdiff_t)i * sy] = a[(ptrdiff_t)i * sa] - b[(ptrdiff_t)i * sb];
        break;
    case FU_MUL:
        for (size_t i = 0; i < n; i++)
            y[(ptrdiff_t)i * sy] = a[(ptrdiff_t)i * sa] * b[(ptrdiff_t)i * sb];
        break;
    case FU_DIV:
        for (size_t i = 0; i < n; i++)
            y[(ptrdiff_t)i * sy] = a[(ptrdiff_t)i * sa] / b[(ptrdiff_t)i * sb];
        break;
    default:
        for (size_t i = 0; i < n; i++)
            y[(ptrdiff_t)i * sy] = a[(ptrdiff_t)i * sa] * a[(ptrdiff_t)i * sa];
        break;
    }
}

/* A loop over b's shape of the output y (array 0) and the first input (array 1). */
static void bc_nd_y_x(const bc *b, const cr_array *y, cr__nd *nd)
{
    cr__nd_init(nd, b->ndim, b->shape);
    cr__nd_add(nd, y);
    cr__nd_add(nd, b->in[0]);
}

static cr_status fused_eval(cr_arena *arena, const bc *b, cr_array **y)
{
    cr_status st = cr__new(arena, b->wdt, b->ndim, b->shape, false, y);
    if (st != CR_OK)
        return st;
    cr__nd nd;
    bc_nd_y_x(b, *y, &nd);
    bool two = b->fused != FU_SQUARE;
    if (two)
        cr__nd_add(&nd, b->in[1]);
    fused_ctx c = {b->fused, b->wdt == CR_DT_C128, (*y)->data, b->in[0]->data,
                   two ? b->in[1]->data : NULL};
    cr__nd_run(&nd, fused_inner, &c);
    return CR_OK;
}

/* ---- Fused tanh ----------------------------------------------------------------------- */

typedef struct tanh_ctx {
    double *y, *D;
    const double *x;
} tanh_ctx;

/* y = tanh(x) (the C library's, as the scalar rule computes it) and its derivative
 * sech²(x) without the scalar row's second transcendental call where it is not needed:
 * (1 - y)(1 + y) is accurate to a few ulps while |x| < 0.97 (|y| < 0.75), beyond that
 * 4e/(1 + e)² with e = exp(-2|x|), which neither cancels nor underflows early (the row's
 * 1/cosh² has the same accuracy at the cost of a cosh for every element). */
static void tanh_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    tanh_ctx *c = vctx;
    double *y = c->y + off[0], *D = c->D != NULL ? c->D + off[0] : NULL;
    const double *x = c->x + off[1];
    ptrdiff_t sy = step[0], sx = step[1];
    for (size_t i = 0; i < n; i++) {
        double xi = x[(ptrdiff_t)i * sx], yi = tanh(xi);
        y[(ptrdiff_t)i * sy] = yi;
        if (D == NULL)
            continue;
        double ax = fabs(xi), d;
        if (ax < 0.97) {
            d = (1 - yi) * (1 + yi);
        } else {
            double e = exp(-2 * ax), q = 1 + e;
            d = 4 * e / (q * q);
        }
        D[(ptrdiff_t)i * sy] = d;
    }
}

static cr_status tanh_eval(cr_arena *arena, const bc *b, bool store_D, cr_array **y, cr_array **D)
{
    cr_status st = cr__new(arena, CR_DT_F64, b->ndim, b->shape, false, y);
    if (st == CR_OK && store_D)
        st = cr__new(arena, CR_DT_F64, b->ndim, b->shape, false, D);
    if (st != CR_OK)
        return st;
    cr__nd nd;
    bc_nd_y_x(b, *y, &nd);
    tanh_ctx c = {(*y)->data, store_D ? (*D)->data : NULL, b->in[0]->data};
    cr__nd_run(&nd, tanh_inner, &c);
    return CR_OK;
}

/* ---- Pullback ------------------------------------------------------------------------- */

/* How the cotangent of argument j is formed from ȳ, elementwise, before unbroadcasting. */
typedef enum {
    CO_ONE,  /* ȳ */
    CO_NEG,  /* -ȳ */
    CO_D,    /* conj(D) ȳ (a stored partial) */
    CO_MUL,  /* conj(other) ȳ */
    CO_DIV1, /* ȳ / conj(b) */
    CO_DIV2, /* -conj(y / b) ȳ */
    CO_SQ    /* 2 conj(x) ȳ */
} co_kind;

typedef struct co_ctx {
    co_kind kind;
    bool cplx;
    bool set; /* the accumulator has the output's shape: write instead of add */
    void *acc;
    const void *g, *p, *q;
} co_ctx;

/* The real loops: acc (=|+=) EXPR, with a register sum when acc does not move (a reduction
 * over a broadcast dimension). */
#define CO_LOOP(EXPR)                             \
    do {                                          \
        if (c->set) {                             \
            for (size_t i = 0; i < n; i++)        \
                acc[(ptrdiff_t)i * sa] = (EXPR);  \
        } else if (sa == 0) {                     \
            double s_ = 0;                        \
            for (size_t i = 0; i < n; i++)        \
                s_ += (EXPR);                     \
            acc[0] += s_;                         \
        } else {                                  \
            for (size_t i = 0; i < n; i++)        \
                acc[(ptrdiff_t)i * sa] += (EXPR); \
        }                                         \
    } while (0)

/* Arrays: 0 acc (argument-shaped, stride 0 on broadcast dimensions), 1 ȳ, 2 p, 3 q. */
static void co_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    co_ctx *c = vctx;
    if (c->cplx) {
        for (size_t i = 0; i < n; i++) {
            ptrdiff_t oa = CR__AT(0), og = CR__AT(1), op = CR__AT(2), oq = CR__AT(3);
            cr_complex g = ((const cr_complex *)c->g)[og], r;
            const cr_complex *p = c->p, *q = c->q;
            switch (c->kind) {
            case CO_ONE:
                r = g;
                break;
            case CO_NEG:
                r = -g;
                break;
            case CO_D:
            case CO_MUL:
                r = conj(p[op]) * g;
                break;
            case CO_DIV1:
                r = g / conj(p[op]);
                break;
            case CO_DIV2:
                r = -conj(q[oq] / p[op]) * g;
                break;
            default:
                r = 2 * conj(p[op]) * g;
                break;
            }
            cr_complex *a = (cr_complex *)c->acc + oa;
            *a = c->set ? r : *a + r;
        }
        return;
    }
    double *acc = (double *)c->acc + off[0];
    const double *g = (const double *)c->g + off[1];
    const double *p = c->p != NULL ? (const double *)c->p + off[2] : NULL;
    const double *q = c->q != NULL ? (const double *)c->q + off[3] : NULL;
    ptrdiff_t sa = step[0], sg = step[1], sp = step[2], sq = step[3];
    switch (c->kind) {
    case CO_ONE:
        CO_LOOP(g[(ptrdiff_t)i * sg]);
        break;
    case CO_NEG:
        CO_LOOP(-g[(ptrdiff_t)i * sg]);
        break;
    case CO_D:
    case CO_MUL:
        CO_LOOP(p[(ptrdiff_t)i * sp] * g[(ptrdiff_t)i * sg]);
        break;
    case CO_DIV1:
        CO_LOOP(g[(ptrdiff_t)i * sg] / p[(ptrdiff_t)i * sp]);
        break;
    case CO_DIV2:
        CO_LOOP(-(q[(ptrdiff_t)i * sq] / p[(ptrdiff_t)i * sp]) * g[(ptrdiff_t)i * sg]);
        break;
    case CO_SQ:
        CO_LOOP(2 * p[(ptrdiff_t)i * sp] * g[(ptrdiff_t)i * sg]);
        break;
    }
}

typedef struct bc_env {
    bc b;
    cr_project *proj[BC_MAX_IN];
    const cr_array *D[BC_MAX_IN]; /* stored partials */
    const cr_array *y;            /* work output (division) */
} bc_env;

typedef struct bc_thunk {
    const bc_env *e;
    const cr_array *g;
    size_t j;
} bc_thunk;

/* The unprojected cotangent of argument j (work dtype, the argument's shape; 0-d for a
 * scalar). When it would be ȳ itself (an argument of the output's shape through + or -),
 * *alias is set and ȳ is returned without a copy. */
static cr_status bc_cotangent(cr_arena *arena, const bc_env *e, const cr_array *g, size_t j,
                              cr_array **out, bool *alias)
{
    const bc *b = &e->b;
    const cr_array *in = b->in[j];
    co_kind kind = CO_D;
    const cr_array *p = e->D[j], *q = NULL;
    switch (b->fused) {
    case FU_ADD:
        kind = CO_ONE;
        break;
    case FU_SUB:
        kind = j == 0 ? CO_ONE : CO_NEG;
        break;
    case FU_MUL:
        kind = CO_MUL;
        p = b->in[1 - j];
        break;
    case FU_DIV:
        kind = j == 0 ? CO_DIV1 : CO_DIV2;
        p = b->in[1];
        q = e->y;
        break;
    case FU_SQUARE:
        kind = CO_SQ;
        p = b->in[0];
        break;
    case FU_TANH:
    case FU_NONE:
        break;
    }
    *alias = false;
    bool full = in->ndim == b->ndim && cr_array_same_shape(in, g);
    if (kind == CO_ONE && full) {
        *alias = true;
        *out = (cr_array *)g;
        return CR_OK;
    }
    cr_array *acc;
    cr_status st = cr__new(arena, b->wdt, in->ndim, in->shape, !full, &acc);
    if (st != CR_OK)
        return st;
    cr__nd nd;
    cr__nd_init(&nd, b->ndim, b->shape);
    cr__nd_add(&nd, acc);
    cr__nd_add(&nd, g);
    cr__nd_add(&nd, p != NULL ? p : g);
    cr__nd_add(&nd, q != NULL ? q : g);
    co_ctx c = {kind,
                b->wdt == CR_DT_C128,
                full,
                acc->data,
                g->data,
                p != NULL ? p->data : NULL,
                q != NULL ? q->data : NULL};
    cr__nd_run(&nd, co_inner, &c);
    *out = acc;
    return CR_OK;
}

/* The projected cotangent of argument j: an array, or a scalar for a scalar argument. */
static cr_status bc_give(cr_arena *arena, const bc_env *e, const cr_array *g, size_t j,
                         cr_tangent *out)
{
    cr_array *raw;
    bool alias;
    cr_status st = bc_cotangent(arena, e, g, j, &raw, &alias);
    if (st != CR_OK)
        return st;
    const cr_value *v = &e->b.args[j];
    if (v->kind != CR_KIND_ARRAY) {
        cr_tangent t = cr__scalar_tangent(e->b.wdt, cr__load(raw, 0));
        return cr_project_apply(arena, e->proj[j], t, out);
    }
    return alias ? cr__give_alias(arena, e->proj[j], raw, out)
                 : cr__give(arena, e->proj[j], raw, out);
}

static cr_status bc_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    bc_thunk *t = env;
    return bc_give(arena, t->e, t->g, t->j, out);
}

static cr_status bc_pullback(CR__PULLBACK_PARAMS)
{
    bc_env *e = env;
    const bc *b = &e->b;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "broadcast_pullback", *dy, b->ndim, b->shape, b->wdt, &g);
    if (st != CR_OK)
        return st;
    size_t ndiff = 0;
    for (size_t j = 0; j < b->n; j++)
        ndiff += b->diff[j];
    for (size_t j = 0; j < b->n; j++) {
        if (!b->diff[j])
            continue;
        if (g == NULL) {
            dx[j + 2] = cr_tangent_zero();
            continue;
        }
        if (ndiff == 1) {
            st = bc_give(arena, e, g, j, &dx[j + 2]);
        } else {
            /* Several cotangents: each is a thunk (a loss may need only some of them). */
            CR__ARENA_NEW(arena, bc_thunk, t);
            *t = (bc_thunk){e, g, j};
            st = cr__thunk(arena, bc_thunk_fn, NULL, t, "broadcast_pullback_thunk", &dx[j + 2]);
        }
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

/* ---- Fallback: functions without a scalar row --------------------------------------- */

/* The scalar value of element k (row-major over the broadcast shape) of argument j. */
static cr_value elem_value(const bc *b, size_t j, const size_t *idx)
{
    const cr_value *v = &b->args[j];
    if (v->kind != CR_KIND_ARRAY)
        return *v;
    const cr_array *a = v->u.arr;
    size_t lead = b->ndim - a->ndim, lin = 0;
    for (size_t d = 0; d < a->ndim; d++)
        lin = lin * a->shape[d] + (a->shape[d] == 1 ? 0 : idx[lead + d]);
    cr_complex z = cr_array_get_linear(a, lin);
    switch ((cr_dtype)a->dtype) {
    case CR_DT_F32:
        return cr_value_f32((float)creal(z));
    case CR_DT_C128:
        return cr_value_c128(z);
    case CR_DT_I64: {
        /* Read exactly: through a double, integers beyond 2^53 would change and INT64_MAX
         * would convert back out of range. */
        if (a->structure == CR_MAT_DENSE || a->ndim != 2) {
            ptrdiff_t off = 0;
            for (size_t d = a->ndim, k = lin; d-- > 0; k /= a->shape[d])
                off += (ptrdiff_t)(k % a->shape[d]) * a->strides[d];
            return cr_value_i64(((const int64_t *)a->data)[off]);
        }
        double x = creal(z); /* a structured integer matrix: 0 or a stored element */
        return cr_value_i64(x >= 0x1p63 ? INT64_MAX : x < -0x1p63 ? INT64_MIN : (int64_t)x);
    }
    case CR_DT_BOOL:
        return cr_value_bool(creal(z) != 0);
    default:
        return cr_value_f64(creal(z));
    }
}

static void next_index(const bc *b, size_t *idx)
{
    for (size_t d = b->ndim; d-- > 0;) {
        if (++idx[d] < b->shape[d])
            return;
        idx[d] = 0;
    }
}

/* The tuple types of the result of a function of k outputs (k = 1..BC_MAX_OUT): k arrays
 * (static, as the tangent algebra identifies struct types by address). */
#define BC_MAX_OUT 8
#define BC_F1(b)                                                  \
    {                                                             \
        NULL, (size_t)(b) * sizeof(cr_array), CR_KIND_ARRAY, NULL \
    }
static const cr_field k_bc_fields[BC_MAX_OUT] = {BC_F1(0), BC_F1(1), BC_F1(2), BC_F1(3),
                                                 BC_F1(4), BC_F1(5), BC_F1(6), BC_F1(7)};
#define BC_T1(b)                                                                    \
    {                                                                               \
        "broadcast_tuple", (size_t)(b) * sizeof(cr_array), (size_t)(b), k_bc_fields \
    }
static const cr_type k_bc_types[BC_MAX_OUT + 1] = {BC_T1(0), BC_T1(1), BC_T1(2), BC_T1(3), BC_T1(4),
                                                   BC_T1(5), BC_T1(6), BC_T1(7), BC_T1(8)};

/* What the elements returned: numbers (k = 0), or tuples of k numbers of one type. */
typedef struct fb_res {
    size_t k;
    const cr_type *etype; /* the elements' tuple type */
    size_t nres;          /* k, or 1 for numbers */
    cr_array **y;         /* nres work arrays of the broadcast shape */
    cr_array **dy;        /* the frule's tangents (nres) */
    cr_dtype *odt;        /* nres element types of the result */
} fb_res;

typedef struct fb_env {
    bc b;
    cr_project **proj; /* n */
    cr_pullback *pbs;  /* one per element */
    size_t m;
    fb_res r; /* the outputs (the elements' seeds are of their kinds) */
} fb_env;

/* The numbers element k returned: yv itself, or the k fields of a tuple (whose type every
 * element shares). */
static cr_status fb_take(cr_arena *arena, const bc *b, size_t k, cr_value yv, fb_res *r,
                         cr_complex *out)
{
    bool tuple = yv.kind == CR_KIND_STRUCT && yv.u.obj.type != NULL;
    if (k == 0 && tuple) {
        size_t nf = yv.u.obj.type->nfields;
        if (nf == 0 || nf > BC_MAX_OUT)
            return CR__FAIL(arena, CR_EINVAL,
                            "%s: %s returned a tuple of %zu values (1 to %d are supported)", b->who,
                            b->fn->name, nf, BC_MAX_OUT);
        r->k = nf;
        r->etype = yv.u.obj.type;
    }
    if (r->k == 0) {
        cr_dtype vd = cr__value_dtype(&yv);
        if (vd == 0 || yv.kind == CR_KIND_ARRAY)
            return CR__FAIL(arena, CR_EINVAL, "%s: %s returned a %s, not a number", b->who,
                            b->fn->name, cr_kind_name(yv.kind));
        r->odt[0] = cr__promote(r->odt[0], vd);
        out[0] = cr__scalar_of(&yv);
        return CR_OK;
    }
    if (!tuple || yv.u.obj.type != r->etype)
        return CR__FAIL(arena, CR_EINVAL,
                        "%s: %s returned a %s at element %zu, a tuple %s at element 0 (every "
                        "element must return the same type)",
                        b->who, b->fn->name, tuple ? yv.u.obj.type->name : cr_kind_name(yv.kind), k,
                        r->etype->name != NULL ? r->etype->name : "");
    for (size_t i = 0; i < r->k; i++) {
        cr_value f;
        cr_status st = cr_type_field_value(r->etype, yv.u.obj.ptr, i, &f);
        if (st != CR_OK)
            return st;
        cr_dtype vd = cr__value_dtype(&f);
        if (vd == 0 || f.kind == CR_KIND_ARRAY)
            return CR__FAIL(arena, CR_EINVAL,
                            "%s: %s returned a tuple whose field %zu is a %s, not a number", b->who,
                            b->fn->name, i, cr_kind_name(f.kind));
        r->odt[i] = cr__promote(r->odt[i], vd);
        out[i] = cr__scalar_of(&f);
    }
    return CR_OK;
}

/* The numbers of an element's output tangent: the tangent itself, or the fields of a tuple
 * tangent (zeros for a zero tangent or an absent field). */
static cr_status fb_take_tangent(cr_arena *arena, const bc *b, const fb_res *r, cr_tangent t,
                                 cr_complex *out)
{
    bool nz;
    if (r->k == 0)
        return cr__tan_scalar(arena, b->who, t, &out[0], &nz);
    cr_status st = cr_tangent_unthunk(t, &t);
    for (size_t i = 0; i < r->k && st == CR_OK; i++) {
        out[i] = 0;
        if (cr_tangent_is_zero(t))
            continue;
        if (t.tag != CR_TAN_STRUCT)
            return CR__FAIL(arena, CR_ETANGENT,
                            "%s: %s returned a tuple, its tangent must be a structural tangent "
                            "(got %s)",
                            b->who, b->fn->name, cr_tag_name((cr_tag)t.tag));
        st = cr__tan_scalar(arena, b->who, cr_tangent_field(t, i), &out[i], &nz);
    }
    return st;
}

/* Run f elementwise (rrule, frule, or plain call), gathering the outputs into work arrays. */
static cr_status fb_eval(const cr_config *cfg, cr_arena *arena, const cr_value *f, const bc *b,
                         cr_pullback *pbs, const cr_array *const *dxs, cr_tangent dself, fb_res *r)
{
    size_t m = 1, idx[CR_ARRAY_MAX_DIMS] = {0}, mk = 0, w = 1;
    for (size_t d = 0; d < b->ndim; d++)
        m *= b->shape[d]; /* checked by cr__bc_shape */
    memset(r, 0, sizeof *r);
    cr_status st = CR_OK;
    /* the numbers of element 0, which tells how many each element returns (w); the arrays
     * of all (m x w) are made then */
    cr_complex first[BC_MAX_OUT], dfirst[BC_MAX_OUT], *ys = NULL, *dys = NULL;
    cr_value *sargs = BC_ALLOC(cr_value, b->n, &st);
    cr_tangent *td = BC_ALLOC(cr_tangent, b->n + 1, &st);
    r->odt = BC_ALLOC(cr_dtype, BC_MAX_OUT, &st);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < m; k++, next_index(b, idx)) {
        cr_value yv;
        for (size_t j = 0; j < b->n; j++)
            sargs[j] = elem_value(b, j, idx);
        cr_tangent tdy = cr_tangent_zero();
        if (dxs != NULL) {
            td[0] = dself;
            for (size_t j = 0; j < b->n; j++) {
                td[j + 1] = cr_tangent_zero();
                if (dxs[j] != NULL) {
                    size_t lead = b->ndim - dxs[j]->ndim, lin = 0;
                    for (size_t d = 0; d < dxs[j]->ndim; d++)
                        lin = lin * dxs[j]->shape[d] + (dxs[j]->shape[d] == 1 ? 0 : idx[lead + d]);
                    td[j + 1] = cr__scalar_tangent(cr__value_dtype(&sargs[j]),
                                                   cr__load(dxs[j], (ptrdiff_t)lin));
                }
            }
            /* f's own frule, or the configuration's forward mode (frule_via_ad). */
            st = cr__elem_frule(cfg, arena, b->who, k, td, f, sargs, b->n, &yv, &tdy);
        } else if (pbs != NULL) {
            /* f's own rrule, or the configuration's reverse mode (rrule_via_ad). */
            st = cr__elem_rrule(cfg, arena, b->who, k, f, sargs, b->n, &yv, &pbs[k]);
        } else {
            st = cr__elem_call(arena, b->who, k, f, sargs, b->n, &yv);
        }
        if (st == CR_OK)
            st = fb_take(arena, b, k, yv, r, k == 0 ? first : ys + k * w);
        if (st == CR_OK && dxs != NULL)
            st = fb_take_tangent(arena, b, r, tdy, k == 0 ? dfirst : dys + k * w);
        if (st == CR_OK && k == 0) {
            w = r->k ? r->k : 1;
            st = cr__ck_mul(cr_arena_ctx(arena), b->who, m, w, &mk);
            ys = BC_ALLOC(cr_complex, mk, &st);
            dys = dxs != NULL ? BC_ALLOC(cr_complex, mk, &st) : NULL;
            if (st == CR_OK) {
                memcpy(ys, first, w * sizeof *ys);
                if (dys != NULL)
                    memcpy(dys, dfirst, w * sizeof *dys);
            }
        }
        if (st != CR_OK)
            return st;
    }
    r->nres = r->k ? r->k : 1;
    r->y = BC_ALLOC(cr_array *, r->nres, &st);
    r->dy = BC_ALLOC(cr_array *, r->nres, &st);
    for (size_t i = 0; i < r->nres && st == CR_OK; i++) {
        r->odt[i] = cr__hof_dtype(b->dt, r->odt[i]);
        cr_dtype wdt = cr__work(r->odt[i]);
        st = cr__new(arena, wdt, b->ndim, b->shape, false, &r->y[i]);
        for (size_t k = 0; k < m && st == CR_OK; k++)
            cr__store(r->y[i], (ptrdiff_t)k, ys[k * w + i]);
        if (st == CR_OK)
            r->y[i]->flags = CR_ARRAY_WRITABLE;
        if (st == CR_OK && dxs != NULL)
            st = cr__new(arena, wdt, b->ndim, b->shape, false, &r->dy[i]);
        for (size_t k = 0; k < m && st == CR_OK && dxs != NULL; k++)
            cr__store(r->dy[i], (ptrdiff_t)k, dys[k * w + i]);
    }
    return st;
}

/* The seed of element k's pullback: its share of the output's cotangent g (nres arrays of
 * the broadcast shape, NULL where zero), a number or a tuple of r->etype. */
static cr_status fb_seed(cr_arena *arena, const fb_res *r, const cr_array *const *g, size_t k,
                         cr_tangent *seed)
{
    cr_tangent f[BC_MAX_OUT];
    for (size_t i = 0; i < r->nres; i++) {
        cr_complex v = g[i] != NULL ? ((const cr_complex *)g[i]->data)[k] : 0;
        f[i] = r->odt[i] == CR_DT_C128 ? cr_tangent_c128(v) : cr_tangent_f64(creal(v));
    }
    if (r->k == 0) {
        *seed = f[0];
        return CR_OK;
    }
    return cr_tangent_struct(arena, r->etype, NULL, f, r->k, seed);
}

/* The output's cotangent as nres work arrays (c128) of the broadcast shape, NULL where zero;
 * *any false when all are. */
static cr_status fb_cotangents(cr_arena *arena, const fb_env *e, const cr_tangent *dy,
                               const cr_array **g, bool *any)
{
    const bc *b = &e->b;
    *any = false;
    if (e->r.k == 0) {
        cr_status st =
            cr__tan_array(arena, "broadcast_pullback", *dy, b->ndim, b->shape, CR_DT_C128, &g[0]);
        *any = st == CR_OK && g[0] != NULL;
        return st;
    }
    cr_tangent t;
    cr_status st = cr__tuple_cotangent(arena, "broadcast_pullback", "a tuple of arrays", *dy, &t);
    if (st != CR_OK || cr_tangent_is_zero(t))
        return st;
    if (t.u.s.type->nfields != e->r.k)
        return CR__FAIL(arena, CR_ETANGENT,
                        "broadcast_pullback: the output is a tuple of %zu arrays, its cotangent "
                        "has %zu fields",
                        e->r.k, t.u.s.type->nfields);
    for (size_t i = 0; i < e->r.k && st == CR_OK; i++) {
        g[i] = NULL;
        st = cr__tan_array(arena, "broadcast_pullback", cr_tangent_field(t, i), b->ndim, b->shape,
                           CR_DT_C128, &g[i]);
        *any = *any || g[i] != NULL;
    }
    return st;
}

/* Pullback of the fallback: each element's pullback, summed into argument-shaped
 * accumulators. */
static cr_status fb_pullback(CR__PULLBACK_PARAMS)
{
    fb_env *e = env;
    const bc *b = &e->b;
    cr__dx_none(dx, nx);
    const cr_array *g[BC_MAX_OUT] = {NULL};
    bool any;
    cr_status st = fb_cotangents(arena, e, dy, g, &any);
    cr_array **acc = BC_ALLOC(cr_array *, b->n, &st);
    cr_tangent *d = BC_ALLOC(cr_tangent, b->n + 1, &st);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < b->n; j++) {
        if (!b->diff[j])
            continue;
        const cr_array *in = b->in[j];
        st = cr__new(arena, CR_DT_C128, in->ndim, in->shape, true, &acc[j]);
        if (st != CR_OK)
            return st;
    }
    /* ∂f: NoTangent for a plain function; for a functor, the sum of the elements' ∂self
     * (NotImplemented when the AD cannot differentiate the fields). */
    bool functor = b->fn->self_type != NULL;
    cr_tangent dself = functor ? cr_tangent_zero() : cr_tangent_none();
    if (any) {
        size_t idx[CR_ARRAY_MAX_DIMS] = {0};
        for (size_t k = 0; k < e->m; k++, next_index(b, idx)) {
            cr_tangent gk;
            st = fb_seed(arena, &e->r, g, k, &gk);
            if (st == CR_OK)
                st = cr_pullback_call(arena, &e->pbs[k], &gk, d, b->n + 1);
            if (st == CR_OK && functor)
                st = cr_tangent_add(arena, dself, d[0], &dself);
            if (st != CR_OK)
                return st;
            for (size_t j = 0; j < b->n; j++) {
                if (acc[j] == NULL)
                    continue;
                cr_complex v;
                bool nz;
                st = cr__tan_scalar(arena, "broadcast_pullback", d[j + 1], &v, &nz);
                if (st != CR_OK)
                    return st;
                const cr_array *a = acc[j];
                size_t lead = b->ndim - a->ndim, lin = 0;
                for (size_t dd = 0; dd < a->ndim; dd++)
                    lin = lin * a->shape[dd] + (a->shape[dd] == 1 ? 0 : idx[lead + dd]);
                ((cr_complex *)acc[j]->data)[lin] += v;
            }
        }
    }
    dx[1] = dself;
    for (size_t j = 0; j < b->n; j++) {
        if (acc[j] == NULL)
            continue;
        if (!any) {
            dx[j + 2] = cr_tangent_zero();
            continue;
        }
        cr_tangent t = b->args[j].kind == CR_KIND_ARRAY
                           ? cr_tangent_array(acc[j])
                           : cr_tangent_c128(((cr_complex *)acc[j]->data)[0]);
        st = cr_project_apply(arena, e->proj[j], t, &dx[j + 2]);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

/* ---- The rules ------------------------------------------------------------------------ */

static cr_status bc_output(cr_arena *arena, const bc *b, const cr_array *w, cr_dtype dt,
                           cr_value *y)
{
    cr_array *o;
    cr_status st = cr__cast(arena, w, dt, &o);
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
    (void)b;
}

/* The fallback's result: one array, or for a function of k outputs a tuple of k arrays. */
static cr_status fb_output(cr_arena *arena, const bc *b, const fb_res *r, cr_value *y)
{
    if (r->k == 0)
        return bc_output(arena, b, r->y[0], r->odt[0], y);
    cr_status st = CR_OK;
    cr_array *vals = BC_ALLOC(cr_array, r->k, &st);
    for (size_t i = 0; i < r->k && st == CR_OK; i++) {
        cr_value v;
        st = bc_output(arena, b, r->y[i], r->odt[i], &v);
        if (st == CR_OK)
            vals[i] = *v.u.arr;
    }
    if (st == CR_OK)
        *y = cr_value_struct(&k_bc_types[r->k], vals);
    return st;
}

/* The fallback frule's output tangent: r's tangents projected onto y (a tuple for k
 * outputs). */
static cr_status fb_tangent(cr_arena *arena, const fb_res *r, const cr_value *y, cr_tangent *dy)
{
    if (r->k == 0)
        return cr_project_tangent(arena, y, cr_tangent_array(r->dy[0]), dy);
    cr_tangent f[BC_MAX_OUT];
    cr_array *vals = y->u.obj.ptr;
    cr_status st = CR_OK;
    for (size_t i = 0; i < r->k && st == CR_OK; i++) {
        cr_value yi = cr_value_array(&vals[i]);
        st = cr_project_tangent(arena, &yi, cr_tangent_array(r->dy[i]), &f[i]);
    }
    return st != CR_OK ? st : cr_tangent_struct(arena, &k_bc_types[r->k], NULL, f, r->k, dy);
}

/* broadcast(f, x...): y_i = f(x_i...); x̄_j = unbroadcast(conj(∂f/∂x_j) ⊙ ȳ). Also the
 * rrule of map (who names the function in messages). */
cr_status cr__bc_rrule(const cr_config *cfg, cr_arena *arena, const char *who, const cr_value *args,
                       size_t nargs, cr_value *y, cr_pullback *pb, const void *udata)
{
    bool primal = udata == CR__PRIMAL_ONLY;
    if (!primal && nargs > 0 && args != NULL) {
        /* The pullback reads the arguments (b.args) after the caller's array of them is
         * gone: keep a copy with it. */
        cr_value *copy = cr_arena_alloc(arena, nargs * sizeof *copy, _Alignof(cr_value));
        if (copy == NULL)
            return CR__ALLOC_STATUS(arena);
        memcpy(copy, args, nargs * sizeof *copy);
        args = copy;
    }
    bc b;
    cr_status st = bc_parse(arena, who, args, nargs, true, &b);
    if (st != CR_OK)
        return st;
    if (b.row == NULL) {
        fb_env *e = NULL;
        cr_pullback *pbs = NULL;
        size_t m = 1;
        for (size_t d = 0; d < b.ndim; d++)
            m *= b.shape[d];
        if (!primal) {
            e = BC_ALLOC(fb_env, 1, &st);
            pbs = BC_ALLOC(cr_pullback, m, &st);
            if (st != CR_OK)
                return st;
        }
        fb_res r;
        st = fb_eval(cfg, arena, &args[0], &b, pbs, NULL, cr_tangent_none(), &r);
        if (st == CR_OK)
            st = fb_output(arena, &b, &r, y);
        if (st != CR_OK || primal)
            return st;
        e->b = b;
        e->pbs = pbs;
        e->m = m;
        e->r = r;
        e->proj = BC_ALLOC(cr_project *, b.n, &st);
        for (size_t j = 0; j < b.n && st == CR_OK; j++)
            st = cr_project_new(arena, &b.args[j], &e->proj[j]);
        if (st != CR_OK)
            return st;
        *pb = (cr_pullback){fb_pullback, e, "broadcast_pullback", nargs + 1};
        return CR_OK;
    }
    cr_array *w = NULL, *D[BC_MAX_IN] = {NULL};
    if (b.fused == FU_TANH)
        st = tanh_eval(arena, &b, !primal, &w, &D[0]);
    else if (b.fused != FU_NONE)
        st = fused_eval(arena, &b, &w);
    else
        st = row_eval(arena, &b, !primal, NULL, &w, D, NULL);
    if (st == CR_OK)
        st = bc_output(arena, &b, w, b.dt, y);
    if (st != CR_OK || primal)
        return st;
    CR__ARENA_ZNEW(arena, bc_env, e);
    e->b = b;
    e->y = w;
    for (size_t j = 0; j < b.n; j++) {
        e->D[j] = D[j];
        st = cr_project_new(arena, &b.args[j], &e->proj[j]);
        if (st != CR_OK)
            return st;
    }
    *pb = (cr_pullback){bc_pullback, e, "broadcast_pullback", nargs + 1};
    return CR_OK;
}

static cr_status broadcast_rrule(CR__RRULE_PARAMS)
{
    return cr__bc_rrule(cfg, arena, "broadcast", args, nargs, y, pb, udata);
}
CR__ARRAY_FN(broadcast, "broadcast", -1)

/* frule: ẏ_i = Σ_j ∂f/∂x_j ẋ_j (broadcast), from the row's partials; other functions one
 * frule per element (Δf passed on to each). Also the frule of map. */
cr_status cr__bc_frule(const cr_config *cfg, cr_arena *arena, const char *who,
                       const cr_tangent *dargs, const cr_value *args, size_t nargs, cr_value *y,
                       cr_tangent *dy)
{
    bc b;
    cr_status st = bc_parse(arena, who, args, nargs, false, &b);
    if (st != CR_OK)
        return st;
    const cr_array **dxs = BC_ALLOC(const cr_array *, b.n, &st);
    if (st != CR_OK)
        return st;
    bool any = false;
    for (size_t j = 0; j < b.n; j++) {
        if (!b.diff[j])
            continue;
        const cr_value *v = &b.args[j];
        if (v->kind == CR_KIND_ARRAY) {
            st = cr__tan_array(arena, who, dargs[j + 2], v->u.arr->ndim, v->u.arr->shape, b.wdt,
                               &dxs[j]);
        } else {
            cr_complex t;
            bool nz;
            st = cr__tan_scalar(arena, who, dargs[j + 2], &t, &nz);
            if (st == CR_OK && nz) {
                cr_array *s;
                st = cr__scalar_array(arena, b.wdt, t, &s);
                dxs[j] = s;
            }
        }
        if (st != CR_OK)
            return st;
        any = any || dxs[j] != NULL;
    }
    /* A functor's Δf (the tangent of its fields) goes to every element's frule. */
    cr_tangent dself = b.fn->self_type != NULL ? dargs[1] : cr_tangent_none();
    any = any || !cr_tangent_is_zero(dself);
    if (b.row == NULL) {
        fb_res r;
        st = fb_eval(cfg, arena, &args[0], &b, NULL, dxs, dself, &r);
        if (st == CR_OK)
            st = fb_output(arena, &b, &r, y);
        if (st != CR_OK || !any) {
            *dy = cr_tangent_zero();
            return st;
        }
        return fb_tangent(arena, &r, y, dy);
    }
    cr_array *w, *D[BC_MAX_IN], *t = NULL;
    st = row_eval(arena, &b, false, dxs, &w, D, &t);
    if (st == CR_OK)
        st = bc_output(arena, &b, w, b.dt, y);
    if (st != CR_OK)
        return st;
    if (!any || t == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    return cr_project_tangent(arena, y, cr_tangent_array(t), dy);
}

static cr_status broadcast_frule(CR__FRULE_PARAMS)
{
    return cr__bc_frule(cfg, arena, "broadcast", dargs, args, nargs, y, dy);
}

/* ---- Test registration --------------------------------------------------------------- */

/* f(x_1, ..., x_n) for n = nargs - 1 > 2 arguments: the variadic hypot (no row of that
 * arity: one rule per element) or evalpoly(x, c_0, ..., c_{n-2}); arrays of one shape for
 * map (same), arrays of shapes that broadcast and numbers otherwise. */
cr_status cr__sample_bc_many(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                             bool same)
{
    static const size_t s34[2] = {3, 4}, s4[1] = {4}, s31[2] = {3, 1};
    const cr_function *hyp = cr_registry_find(cr_registry_builtin(), "hypot");
    const cr_function *ev = cr_registry_find(cr_registry_builtin(), "evalpoly");
    bool poly = ev != NULL && (hyp == NULL || cr__rng_below(rng, 2) == 0);
    if (hyp == NULL && ev == NULL)
        return CR_EDOMAIN;
    args[0] = cr_value_function(poly ? ev : hyp, NULL);
    cr_dtype dt = cr__rng_dtype(rng);
    if (dt == CR_DT_C128 && !poly)
        dt = CR_DT_F64; /* hypot is real */
    for (size_t j = 1; j < nargs; j++) {
        size_t k = same ? 0 : cr__rng_below(rng, 4);
        if (k == 3) {
            args[j] = cr__scalar_value(dt, cr__rng_unif(rng, 0.5, 1.5));
            continue;
        }
        const size_t *sh = k == 0 ? s34 : k == 1 ? s4 : s31;
        cr_array *A;
        cr_status st = cr__rand_array(arena, rng, dt, k == 1 ? 1 : 2, sh, 0.5, 1.5, &A);
        if (st != CR_OK)
            return st;
        args[j] = cr_value_array(A);
    }
    return CR_OK;
}

/* f.(x) with a one-argument function, or f.(x, y) with shapes that broadcast. */
static cr_status sample_broadcast(CR__SAMPLE_PARAMS)
{
    static const size_t s34[2] = {3, 4}, s4[1] = {4}, s31[2] = {3, 1};
    cr_dtype dt = cr__rng_dtype(rng);
    cr_array *A, *B;
    cr_status st;
    if (nargs > 3)
        return cr__sample_bc_many(arena, rng, args, nargs, false);
    if (nargs == 2) {
        /* sin, exp, and tanh or square when their families provide them; sincos (two
         * outputs: a tuple of two arrays). */
        static const char *const names[5] = {"sin", "exp", "tanh", "square", "sincos"};
        const cr_function *fn =
            cr_registry_find(cr_registry_builtin(), names[cr__rng_below(rng, 5)]);
        args[0] = fn != NULL ? cr_value_function(fn, NULL) : cr_fn_sin;
        st = cr__rand_array(arena, rng, dt, 2, s34, -1.5, 1.5, &A);
        if (st == CR_OK)
            args[1] = cr_value_array(A);
        return st;
    }
    static const cr_value *const f2[4] = {&cr_fn_add, &cr_fn_sub, &cr_fn_mul, &cr_fn_div};
    size_t k = cr__rng_below(rng, 5);
    const cr_function *hypot_fn = cr_registry_find(cr_registry_builtin(), "hypot");
    if (k == 4 && hypot_fn != NULL) {
        /* A row that is not fused: its partials are stored. */
        if (dt == CR_DT_C128)
            dt = CR_DT_F64;
        args[0] = cr_value_function(hypot_fn, NULL);
    } else {
        args[0] = *f2[k % 4];
    }
    size_t shape_k = cr__rng_below(rng, 3);
    st = cr__rand_array(arena, rng, dt, 2, s34, 0.5, 2.0, &A);
    if (st != CR_OK)
        return st;
    args[1] = cr_value_array(A);
    if (shape_k == 2) {
        args[2] = dt == CR_DT_C128 ? cr_value_c128(cr__c(1.25, -0.5)) : cr_value_f64(1.25);
        return CR_OK;
    }
    st =
        cr__rand_array(arena, rng, dt, shape_k == 0 ? 1 : 2, shape_k == 0 ? s4 : s31, 0.5, 2.0, &B);
    if (st == CR_OK)
        args[2] = cr_value_array(B);
    return st;
}

/* ---- Second order ---------------------------------------------------------------------------- */

/* The real-linear maps of a complex number (not scalar-table rows): their broadcasts take a
 * complex array (eigvals_general's, eigen_general's results) to real ones. */
static bool linear_cplx(const cr_function *g)
{
    return g == cr_fn_creal.u.func.fn || g == cr_fn_cimag.u.func.fn || g == cr_fn_conj.u.func.fn;
}

/* The scalar rows whose broadcasts are linear. */
static bool linear_row(const cr_function *g)
{
    return g == cr_fn_add.u.func.fn || g == cr_fn_sub.u.func.fn || g == cr_fn_neg.u.func.fn ||
           g == cr_fn_identity.u.func.fn;
}

/*
 * The class of broadcast(f, x_1, ..., x_n) (and map, a broadcast over arrays of one shape)
 * at its arguments: linear for the linear rows and the real-linear maps of a complex number,
 * multilinear for mul; otherwise the form below, for f a scalar-table row of n arguments and
 * one result. Anything else is refused.
 */
static const char *bc_check(CR__FORM_CHECK_PARAMS)
{
    if (nargs < 2 || args[0].kind != CR_KIND_FUNC || args[0].u.func.fn == NULL)
        return "the function applied is not a function";
    const cr_function *g = args[0].u.func.fn;
    if (nargs == 2 && linear_cplx(g)) {
        *linearity = CR_LINEAR;
        return NULL;
    }
    const cr_scalar_rule *r = cr_scalar_rule_of(g);
    if (r == NULL || r->nout != 1 || r->nin != nargs - 1)
        return "the function applied is not a scalar-table function of as many arguments "
               "with one result";
    if (linear_row(g))
        *linearity = CR_LINEAR;
    else if (g == cr_fn_mul.u.func.fn)
        *linearity = CR_MULTILINEAR;
    return NULL;
}

/* An operand of the elementwise loop: p[e * step] for e < N (step 0: one value). */
typedef struct bc_stream {
    const double *p;
    size_t step;
} bc_stream;

/* The array a (any float dtype and strides, or a tangent already in f64) broadcast to the
 * result's shape (ndim, shape; N elements), in f64. */
static cr_status stream_of(cr_arena *arena, const cr_array *a, size_t ndim, const size_t *shape,
                           size_t N, bc_stream *s)
{
    const cr_array *w;
    cr_status st = cr__strided(arena, a, CR_DT_F64, &w);
    if (st != CR_OK)
        return st;
    bool same = w->ndim == ndim && cr__is_contig_dense(w);
    for (size_t q = 0; q < ndim && same; q++)
        same = w->shape[q] == shape[q];
    if (same) {
        s->p = w->data;
        s->step = 1;
        return CR_OK;
    }
    cr_array *full;
    if ((st = cr__new(arena, CR_DT_F64, ndim, shape, false, &full)) != CR_OK)
        return st;
    cr__broadcast_into(full, w, 1.0);
    s->p = full->data;
    s->step = N > 0 ? 1 : 0;
    return CR_OK;
}

/* A scalar operand. */
static cr_status stream_scalar(cr_arena *arena, double v, bc_stream *s)
{
    CR__ARENA_NEW(arena, double, p);
    *p = v;
    s->p = p;
    s->step = 0;
    return CR_OK;
}

/* The state of a broadcast's form: the result's shape, the operands, and per element the
 * cotangent g and the row's second derivatives H there (NULL where g = 0). */
typedef struct bc_state {
    size_t n, ndim, N;
    const size_t *shape;
    bc_stream X[CR_SCALAR_MAX_IN];
    bool var[CR_SCALAR_MAX_IN], arr[CR_SCALAR_MAX_IN];
    const double *g; /* ȳ per element */
    double *H;       /* n x n per element */
} bc_state;

/*
 * S of a broadcast f.(x_1, ..., x_n) of a scalar row: per element e of the result,
 *     S_j(e) = ȳ(e) Σ_l ∂²f/∂x_j∂x_l (x(e)) ẋ_l(e)
 * with the row's second derivatives taken as the scalar second-order tape takes them
 * (cr__row_hessian: complex step, or central differences for real-only rows), once per
 * element for all directions; then summed over the dimensions argument j was broadcast along
 * (unbroadcast), all of them for a scalar argument.
 */
static cr_status bc_init(const cr_form_point *p, void **state)
{
    cr_arena *arena = p->arena;
    const cr_scalar_rule *row = cr_scalar_rule_of(p->args[0].u.func.fn);
    /* A broadcast over scalars only has a scalar result: one element of no dimension. */
    static const size_t k_no_shape[1] = {1};
    CR__ARENA_ZNEW(arena, bc_state, w);
    const cr_array *yv = p->y->kind == CR_KIND_ARRAY ? p->y->u.arr : NULL;
    size_t n = row->nin, ndim = yv != NULL ? yv->ndim : 0, N = yv != NULL ? cr_array_numel(yv) : 1;
    const size_t *shape = yv != NULL ? yv->shape : k_no_shape;
    *w = (bc_state){.n = n, .ndim = ndim, .N = N, .shape = shape};
    unsigned cols = 0;
    const cr_array *Yb;
    cr_status st = cr__tan_array(arena, p->name, p->ybar, ndim, shape, CR_DT_F64, &Yb);
    if (st != CR_OK)
        return st;
    if (Yb == NULL)
        return CR_NOTHING;
    for (size_t j = 0; j < n && st == CR_OK; j++) {
        const cr_value *v = &p->args[j + 1];
        w->var[j] = p->var[j + 1];
        w->arr[j] = v->kind == CR_KIND_ARRAY;
        cols |= w->var[j] ? 1u << j : 0u;
        st = w->arr[j] ? stream_of(arena, v->u.arr, ndim, shape, N, &w->X[j])
                       : stream_scalar(arena, creal(cr__scalar_of(v)), &w->X[j]);
    }
    /* N x n x n second derivatives (n <= CR_SCALAR_MAX_IN) */
    size_t nh = 0, hbytes = 0;
    if (st == CR_OK)
        st = cr__ck_mul(cr_arena_ctx(arena), p->name, N ? N : 1, n * n, &nh);
    if (st == CR_OK)
        st = cr__ck_mul(cr_arena_ctx(arena), p->name, nh, sizeof(double), &hbytes);
    double *H = st == CR_OK ? cr_arena_alloc(arena, hbytes, _Alignof(double)) : NULL;
    if (st == CR_OK && H == NULL)
        st = CR__ALLOC_STATUS(arena);
    if (st != CR_OK)
        return st;
    const double *yb = Yb->data;
    for (size_t el = 0; el < N; el++) {
        if (yb[el] == 0.0)
            continue;
        double x[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
        for (size_t j = 0; j < n; j++)
            x[j] = w->X[j].p[el * w->X[j].step];
        /* the partials at x (cr__row_hessian starts from them) */
        row->f64(x, Y, D);
        cr__row_hessian(row, x, D, H + el * n * n, cols);
    }
    w->g = yb;
    w->H = H;
    *state = w;
    return CR_OK;
}

static cr_status bc_dir(CR__FORM_DIR_PARAMS)
{
    const bc_state *w = state;
    cr_arena *arena = p->arena;
    size_t n = w->n, ndim = w->ndim, N = w->N;
    bc_stream XD[CR_SCALAR_MAX_IN];
    double *Sa[CR_SCALAR_MAX_IN], Ssc[CR_SCALAR_MAX_IN];
    bool nzd[CR_SCALAR_MAX_IN];
    cr_status st = CR_OK;
    for (size_t j = 0; j < n && st == CR_OK; j++) {
        const cr_value *v = &p->args[j + 1];
        nzd[j] = w->var[j] && !cr_tangent_is_zero(xdot[j + 1]);
        Ssc[j] = 0.0;
        Sa[j] = NULL;
        if (!w->var[j])
            continue;
        if (w->arr[j]) {
            cr_array *buf;
            if ((st = cr__new(arena, CR_DT_F64, ndim, w->shape, true, &buf)) != CR_OK)
                break;
            Sa[j] = buf->data;
        }
        if (!nzd[j])
            continue;
        if (w->arr[j]) {
            const cr_array *ta;
            st = cr__tan_array(arena, p->name, xdot[j + 1], v->u.arr->ndim, v->u.arr->shape,
                               CR_DT_F64, &ta);
            if (st == CR_OK && ta == NULL)
                nzd[j] = false;
            else if (st == CR_OK)
                st = stream_of(arena, ta, ndim, w->shape, N, &XD[j]);
        } else {
            st = stream_scalar(arena, cr__form_scalar(xdot[j + 1]), &XD[j]);
        }
    }
    if (st != CR_OK)
        return st;
    for (size_t el = 0; el < N; el++) {
        double g = w->g[el];
        if (g == 0.0)
            continue;
        const double *H = w->H + el * n * n;
        for (size_t j = 0; j < n; j++) {
            if (!w->var[j])
                continue;
            double s = 0.0;
            for (size_t l = 0; l < n; l++)
                if (w->var[l] && nzd[l])
                    s += H[j * n + l] * XD[l].p[el * XD[l].step];
            if (w->arr[j])
                Sa[j][el] += g * s;
            else
                Ssc[j] += g * s;
        }
    }
    /* Each argument's S, reduced to its shape. */
    for (size_t j = 0; j < n && st == CR_OK; j++) {
        if (!w->var[j])
            continue;
        const cr_value *v = &p->args[j + 1];
        if (!w->arr[j]) {
            S[j + 1] = cr_tangent_f64(Ssc[j]);
            continue;
        }
        cr_array full, *red;
        size_t sh[CR_ARRAY_MAX_DIMS];
        memcpy(sh, w->shape, ndim * sizeof *sh);
        if ((st = cr_array_view_init(&full, Sa[j], CR_DT_F64, ndim, sh, NULL)) == CR_OK &&
            (st = cr__unbroadcast(arena, &full, v->u.arr->ndim, v->u.arr->shape, &red)) == CR_OK)
            S[j + 1] = cr_tangent_array(red);
    }
    return st;
}

const cr_rule_form cr__form_broadcast = {bc_check, bc_init, bc_dir};

static const cr_rule_test k_test_broadcast = {.sample = sample_broadcast};

cr_status cr__array_register_broadcast(cr_registry *reg)
{
    static const cr_argspec a[3] = {
        {CR_M_FUNC, NULL},
        {CR__M_FARRAY | CR_M_A_INT | CR_M_A_BOOL | CR__M_NUM, NULL},
        {CR__M_FARRAY | CR_M_A_INT | CR_M_A_BOOL | CR__M_NUM, NULL},
    };
    cr_status st =
        cr__add_rule_so(reg, &broadcast_function, a, 2, false, broadcast_frule, broadcast_rrule,
                        &k_test_broadcast, CR_NONLINEAR, &cr__form_broadcast);
    if (st == CR_OK)
        st = cr__add_rule_so(reg, &broadcast_function, a, 3, true, broadcast_frule, broadcast_rrule,
                             &k_test_broadcast, CR_NONLINEAR, &cr__form_broadcast);
    /* Six arguments of float arrays and numbers: a signature of the variadic one (more
     * specific), for its test registration's samples of more arguments than a row has. */
    static const cr_argspec a7[7] = {
        {CR_M_FUNC, NULL},
        {CR__M_FARRAY | CR__M_NUM, NULL},
        {CR__M_FARRAY | CR__M_NUM, NULL},
        {CR__M_FARRAY | CR__M_NUM, NULL},
        {CR__M_FARRAY | CR__M_NUM, NULL},
        {CR__M_FARRAY | CR__M_NUM, NULL},
        {CR__M_FARRAY | CR__M_NUM, NULL},
    };
    if (st == CR_OK)
        st = cr__add_rule_so(reg, &broadcast_function, a7, 7, false, broadcast_frule,
                             broadcast_rrule, &k_test_broadcast, CR_NONLINEAR, &cr__form_broadcast);
    return st;
}
