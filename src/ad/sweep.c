/*
 * The tape's sweeps: reverse (gradients, vector-Jacobian products, Jacobians), forward
 * (Jacobian-vector products) and second order (Hessian-vector products: a forward sweep of
 * tangents, then a reverse sweep of adjoints and their tangents), and their entry points.
 * The sweeps walk the chunks and hand each record to its node kind's step (cr__node_kind:
 * node_scalar.c, rule_call.c, node_array.c), which knows the record; this file knows none.
 * The record layout is described in tape_impl.h.
 */
#include <string.h>

#include "tape_impl.h"

/* The record kinds of the stream, each through its node kind's steps (tape_impl.h). */
static cr_status corrupt_reverse(cr_tape *t, cr__rev *s)
{
    return cr__tape_fail(t, CR_EINVAL, "tape: corrupt record (kind %u)", hdr_kind(s->p[-1].u));
}
static cr_status corrupt_forward(cr_tape *t, cr__fwd *s)
{
    return cr__tape_fail(t, CR_EINVAL, "tape: corrupt record (kind %u)", hdr_kind(s->p[0].u));
}
static cr_status corrupt_second(cr_tape *t, cr__sec *s)
{
    return cr__tape_fail(t, CR_EINVAL, "tape: corrupt record (kind %u)", hdr_kind(s->p[-1].u));
}
static const cr__node_kind k_corrupt = {
    corrupt_reverse, corrupt_forward, corrupt_second, NULL, NULL, NULL, NULL, NULL};

static const cr__node_kind *const k_kinds[16] = {
    [K_INPUT] = &cr__scalar_kind,  [K_UNARY] = &cr__scalar_kind,   [K_BINARY] = &cr__scalar_kind,
    [K_ADD] = &cr__scalar_kind,    [K_SUB] = &cr__scalar_kind,     [K_COPY] = &cr__scalar_kind,
    [K_NEG] = &cr__scalar_kind,    [K_NARY] = &cr__scalar_kind,    [K_GENERIC] = &cr__generic_kind,
    [K_UNARY2] = &cr__scalar_kind, [K_BINARY2] = &cr__scalar_kind, [K_MUL] = &cr__scalar_kind,
    [K_NARY2] = &cr__scalar_kind,  [K_GUARD] = &cr__scalar_kind,   [K_ARRAY] = &cr__array_kind,
    [K_STOP] = &k_corrupt};

/* The node kind of the record whose header is h. */
static inline const cr__node_kind *kind_of(uint64_t h)
{
    return k_kinds[hdr_kind(h)];
}

/* cr__sweep_reverse; with consume, the scalar loop leaves the adjoints it reads at zero
 * (*in_hi, 0 on entry, receives the end of the highest input record's variables) and
 * *general tells whether any record's adjoints were left as they are (cr__rev). */
static cr_status sweep_reverse(cr_tape *t, double *adj, size_t top, bool consume, size_t *in_hi,
                               bool *general)
{
    cr__rev s = {.adj = adj, .i = t->nvars, .pre = t->pre, .consume = consume, .in_hi = *in_hi};
    cr_status st = CR_OK;
    if (t->avars.n != 0 && !t->avars.seeded)
        cr__array_clear(t);
    for (cr__chunk *c = t->store.chunk; c != NULL && st == CR_OK; c = c->prev) {
        const cr__word *p = c == t->store.chunk ? t->cur : c->end;
        const cr__word *base = c->base;
        /* Records of variables at or above top cannot reach the seeds. */
        while (p > base && s.i > top) {
            uint64_t h = p[-1].u;
            if (s.i - rec_vars(h) < top)
                break;
            s.i -= rec_vars(h);
            p -= rec_words(h) + s.pre;
        }
        s.p = p;
        s.base = base;
        while (s.p > base && st == CR_OK)
            st = kind_of(s.p[-1].u)->reverse(t, &s);
    }
    *in_hi = s.in_hi;
    *general = s.general;
    return st;
}

cr_status cr__sweep_reverse(cr_tape *t, double *adj, size_t top)
{
    size_t in_hi = 0;
    bool general = false;
    return sweep_reverse(t, adj, top, false, &in_hi, &general);
}

cr_status cr__sweep_forward(cr_tape *t, double *tan, size_t k, size_t top, bool out_unread)
{
    cr__fwd s = {.tan = tan, .k = k, .i = 0, .top = top, .pre = t->pre, .out_unread = out_unread};
    cr_status st = CR_OK;
    for (cr__chunk *c = t->store.first; c != NULL && s.i < top && st == CR_OK; c = c->next) {
        s.p = c->base;
        s.end = c == t->store.chunk ? t->cur : c->end;
        while (s.p < s.end && s.i < top && st == CR_OK)
            st = kind_of(s.p[0].u)->forward(t, &s);
    }
    return st;
}

/*
 * The second-order reverse sweep (forward-over-reverse): with the tangents tan of every
 * variable along k directions (from cr__sweep_forward), propagate the adjoints adj and
 * their directional derivatives adjd, record by record through the node kinds' steps.
 */
cr_status cr__sweep_second(cr_tape *t, double *adj, double *adjd, const double *tan, size_t k,
                           size_t top)
{
    cr__sec s = {.adj = adj, .adjd = adjd, .tan = tan, .k = k, .i = t->nvars};
    cr_status st = CR_OK;
    for (cr__chunk *c = t->store.chunk; c != NULL && st == CR_OK; c = c->prev) {
        const cr__word *p = c == t->store.chunk ? t->cur : c->end;
        const cr__word *base = c->base;
        while (p > base && s.i > top) {
            uint64_t h = p[-1].u;
            s.i -= rec_vars(h);
            p -= rec_words(h) + 1;
        }
        s.p = p;
        s.base = base;
        while (s.p > base && st == CR_OK)
            st = kind_of(s.p[-1].u)->second(t, &s);
    }
    return st;
}

/* ---- Public sweeps ----------------------------------------------------------------------- */

/* The error of a sweep (who) asked for while a recording cursor is open on t. */
static cr_status cursor_open(cr_tape *t, const char *who)
{
    return cr_ctx_error(t->ctx, CR_EMISUSE,
                        "%s: a recording cursor is open on the tape (close it first: cr_rec_close)",
                        who);
}

cr_status cr__foreign_var(cr_tape *t, const char *who, const char *role, size_t j, uint32_t idx,
                          bool arr)
{
    if (t->rec.open) /* the variable may be the cursor's, made since it last left the library */
        return cursor_open(t, who);
    size_t have = arr ? t->avars.n : t->nvars;
    if (idx >= have)
        return cr_ctx_error(t->ctx, CR_ETAPE,
                            "%s: %s %zu (%svariable %u) is past this recording's %zu %svariables "
                            "(forged, of another tape, or of this tape before its last reset)",
                            who, role, j, arr ? "array " : "", (unsigned)idx, have,
                            arr ? "array " : "");
    if (arr)
        return cr_ctx_error(t->ctx, CR_ETAPE,
                            "%s: %s %zu belongs to another tape, or to this tape before its last "
                            "reset",
                            who, role, j);
    return cr_ctx_error(t->ctx, CR_ETAPE,
                        "%s: %s %zu (variable %u) belongs to another tape, or to this tape "
                        "before its last reset",
                        who, role, j, (unsigned)idx);
}

cr_status cr__check_finite(cr_tape *t, const char *who, const double *v, size_t n, const char *what)
{
    for (size_t j = 0; j < n; j++)
        if (!isfinite(v[j]))
            return cr_ctx_error(t->ctx, CR_EDOMAIN, "%s: %s %zu is %g, not a finite number", who,
                                what, j, v[j]);
    return CR_OK;
}

/* Recordings of up to this many variables sweep over a workspace on the stack. */
#define SMALL_WS 64

/* Workspace of n doubles (zeroed) from the tape's arena. */
double *cr__sweep_workspace(cr_tape *t, size_t n, cr_status *st)
{
    double *w = cr_arena_calloc(t->arena, n ? n : 1, sizeof(double), _Alignof(double));
    if (w == NULL)
        *st = cr__tape_fail(t, CR__ALLOC_STATUS(t->arena),
                            "tape: no room for a sweep workspace of %zu doubles", n);
    return w;
}

/*
 * The kept workspace of a first-order reverse sweep over top variables, all zero, or NULL
 * (the caller takes the arena's). Only first-order tapes with their own chunk keep one: not
 * a tape on a caller buffer (which allocates nothing after cr_tape_new), nor a tape in
 * another tape's arena. It grows to top when smaller (a failed allocation gives NULL and
 * leaves no error). The consuming sweep leaves zero every adjoint it reads, so that only
 * the inputs' need clearing after it (kept_ws_done); on Rosenbrock's scalar loop at n = 1e6
 * that saves clearing 72 bytes per term before each sweep (docs/engine.md, "The scalar
 * loop").
 */
static double *kept_ws(cr_tape *t, size_t top)
{
    if (t->store.own == NULL || t->pre != 0)
        return NULL;
    if (top > t->kept.cap) {
        double *w = cr__alloc_quiet(t->ctx, top * sizeof *w);
        if (w == NULL)
            return NULL;
        cr_ctx_dealloc(t->ctx, t->kept.ws, t->kept.cap * sizeof *t->kept.ws);
        t->kept.ws = w;
        t->kept.cap = top;
        t->kept.dirty = top;
    }
    memset(t->kept.ws, 0, t->kept.dirty * sizeof *t->kept.ws);
    /* Whatever happens next may leave it dirty; kept_ws_done says otherwise. */
    t->kept.dirty = top;
    return t->kept.ws;
}

/* After a consuming sweep over the kept workspace w (kept_ws) that succeeded and whose
 * adjoints were read: the sweep left only the inputs' adjoints nonzero, below in_hi, unless
 * a record went through the general loop (general), whose adjoints it leaves as they are. */
static void kept_ws_done(cr_tape *t, double *w, size_t in_hi, bool general)
{
    if (general)
        return;
    memset(w, 0, in_hi * sizeof *w);
    t->kept.dirty = 0;
}

/* Whether every variable of v[0..n) is a constant or one of the inputs of the recording's
 * first record: those are the adjoints a consuming sweep keeps. */
static bool first_inputs(const cr_tape *t, const cr_var *v, size_t n)
{
    const cr__chunk *c = t->store.first;
    if (c == NULL || t->pre != 0 || (c == t->store.chunk && t->cur == c->base) ||
        hdr_kind(c->base[0].u) != K_INPUT)
        return false;
    uint32_t nin = hdr_a(c->base[0].u);
    for (size_t j = 0; j < n; j++)
        if (v[j].idx != CR_VAR_CONST && v[j].idx >= nin)
            return false;
    return true;
}

static size_t top_of(const cr_var *v, size_t n)
{
    size_t top = 0;
    for (size_t j = 0; j < n; j++)
        if (v[j].idx != CR_VAR_CONST && (size_t)v[j].idx + 1 > top)
            top = (size_t)v[j].idx + 1;
    return top;
}

size_t cr__sweep_top_slow(const cr_tape *t, size_t top)
{
    size_t i = t->nvars;
    for (const cr__chunk *c = t->store.chunk; c != NULL && i > top; c = c->prev) {
        const cr__word *p = c == t->store.chunk ? t->cur : c->end;
        while (p > c->base && i > top) {
            uint64_t h = p[-1].u;
            size_t nv = rec_vars(h);
            if (i - nv < top) /* the record makes variables below top and at or above it */
                return i;
            i -= nv;
            p -= rec_words(h) + t->pre;
        }
    }
    return top;
}

static void gather(const double *w, size_t top, const cr_var *xs, size_t n, size_t stride, size_t d,
                   double *out)
{
    for (size_t j = 0; j < n; j++)
        out[j] =
            xs[j].idx == CR_VAR_CONST || xs[j].idx >= top ? 0.0 : w[(size_t)xs[j].idx * stride + d];
}

static cr_status sweep_entry(cr_tape *t, const char *who)
{
    cr_status st = cr__tape_entry_status(t);
    if (st != CR_OK)
        return st;
    if (t->rec.open)
        return cursor_open(t, who);
    return CR_OK;
}

/* cr_tape_vjp, for it and for cr_tape_gradient (who, and the name of its result). */
static cr_status vjp(cr_tape *t, const char *who, const char *xbar_name, const cr_var *ys,
                     const double *ybar, size_t m, const cr_var *xs, size_t n, double *xbar)
{
    cr_status st = sweep_entry(t, who);
    if (st != CR_OK)
        return st;
    if ((m > 0 && (ys == NULL || ybar == NULL)) || (n > 0 && (xs == NULL || xbar == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s is NULL", who,
                            m > 0 && ys == NULL     ? "ys"
                            : m > 0 && ybar == NULL ? "ybar"
                            : xs == NULL            ? "xs"
                                                    : xbar_name);
    if ((st = cr__check_vars(t, who, ys, m, "output")) != CR_OK ||
        (st = cr__check_vars(t, who, xs, n, "input")) != CR_OK ||
        (st = cr__check_finite(t, who, ybar, m, "seed")) != CR_OK)
        return st;
    size_t top = cr__sweep_top(t, top_of(ys, m));
    /* Small recordings sweep over a workspace on the stack; others over the tape's kept
     * workspace when the adjoints asked for are inputs (a consuming sweep keeps those). */
    double small[SMALL_WS];
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    double *adj = small, *kept = NULL;
    if (top <= SMALL_WS)
        memset(small, 0, top * sizeof *small);
    else if (!first_inputs(t, xs, n) || (adj = kept = kept_ws(t, top)) == NULL)
        if ((adj = cr__sweep_workspace(t, top, &st)) == NULL)
            return st;
    for (size_t i = 0; i < m; i++)
        if (ys[i].idx != CR_VAR_CONST)
            adj[ys[i].idx] += ybar[i];
    size_t in_hi = 0;
    bool general = false;
    st = sweep_reverse(t, adj, top, kept != NULL, &in_hi, &general);
    if (st == CR_OK)
        gather(adj, top, xs, n, 1, 0, xbar);
    if (kept != NULL && st == CR_OK)
        kept_ws_done(t, kept, in_hi, general);
    if (adj != small && kept == NULL)
        cr_arena_rewind(t->arena, mk);
    return st;
}

cr_status cr_tape_vjp(cr_tape *t, const cr_var *ys, const double *ybar, size_t m, const cr_var *xs,
                      size_t n, double *xbar)
{
    return vjp(t, "cr_tape_vjp", "xbar", ys, ybar, m, xs, n, xbar);
}

cr_status cr_tape_gradient(cr_tape *t, cr_var y, const cr_var *xs, size_t n, double *grad)
{
    static const double one = 1.0;
    return vjp(t, "cr_tape_gradient", "grad", &y, &one, 1, xs, n, grad);
}

cr_status cr_tape_jacobian(cr_tape *t, const cr_var *ys, size_t m, const cr_var *xs, size_t n,
                           double *jac)
{
    const char *who = "cr_tape_jacobian";
    cr_status st = sweep_entry(t, who);
    if (st != CR_OK)
        return st;
    size_t mn;
    if ((st = cr__ck_mul(t->ctx, who, m, n, &mn)) != CR_OK)
        return st;
    if ((m > 0 && ys == NULL) || (n > 0 && xs == NULL) || (mn > 0 && jac == NULL))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: NULL outputs, inputs or result", who);
    if ((st = cr__check_vars(t, who, ys, m, "output")) != CR_OK ||
        (st = cr__check_vars(t, who, xs, n, "input")) != CR_OK)
        return st;
    size_t top = cr__sweep_top(t, top_of(ys, m));
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    double *adj = cr__sweep_workspace(t, top, &st);
    if (adj == NULL)
        return st;
    for (size_t i = 0; i < m && st == CR_OK; i++) {
        if (ys[i].idx == CR_VAR_CONST) {
            memset(jac + i * n, 0, n * sizeof *jac);
            continue;
        }
        size_t ti = cr__sweep_top(t, (size_t)ys[i].idx + 1);
        memset(adj, 0, ti * sizeof *adj);
        adj[ys[i].idx] = 1.0;
        st = cr__sweep_reverse(t, adj, ti);
        if (st == CR_OK)
            gather(adj, ti, xs, n, 1, 0, jac + i * n);
    }
    cr_arena_rewind(t->arena, mk);
    return st;
}

cr_status cr_tape_jvp(cr_tape *t, const cr_var *xs, const double *xdot, size_t n, const cr_var *ys,
                      size_t m, double *ydot)
{
    const char *who = "cr_tape_jvp";
    cr_status st = sweep_entry(t, who);
    if (st != CR_OK)
        return st;
    if (!(t->flags & CR_TAPE_FORWARD))
        return cr_ctx_error(t->ctx, CR_EMISUSE, "%s: the tape was not created with CR_TAPE_FORWARD",
                            who);
    if ((n > 0 && (xs == NULL || xdot == NULL)) || (m > 0 && (ys == NULL || ydot == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: NULL inputs, tangents or outputs", who);
    if ((st = cr__check_vars(t, who, xs, n, "input")) != CR_OK ||
        (st = cr__check_vars(t, who, ys, m, "output")) != CR_OK ||
        (st = cr__check_finite(t, who, xdot, n, "tangent")) != CR_OK)
        return st;
    size_t top = cr__sweep_top(t, top_of(ys, m));
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    double *tan = cr__sweep_workspace(t, top, &st);
    if (tan == NULL)
        return st;
    for (size_t j = 0; j < n; j++)
        if (xs[j].idx != CR_VAR_CONST && xs[j].idx < top)
            tan[xs[j].idx] += xdot[j];
    if (t->avars.n != 0) /* array variables' tangents (array_slots.c) */
        st = cr__array_sweep_begin(t, 1, false);
    if (st == CR_OK)
        st = cr__sweep_forward(t, tan, 1, top, false);
    if (st == CR_OK)
        gather(tan, top, ys, m, 1, 0, ydot);
    cr__array_sweep_end(t);
    cr_arena_rewind(t->arena, mk);
    return st;
}

/* Directions per second-order sweep in cr_tape_hessian(). */
#define HESS_CHUNK 8

/* cr_tape_hvp (hess false: v, hv, grad) and cr_tape_hessian (hess true: H; it takes no
 * direction, and its messages name only what it takes). */
static cr_status second_order(cr_tape *t, const char *who, bool hess, cr_var y, const cr_var *xs,
                              size_t n, const double *v, double *hv, double *grad, double *H)
{
    cr_status st = sweep_entry(t, who);
    if (st != CR_OK)
        return st;
    if (!(t->flags & CR_TAPE_SECOND_ORDER))
        return cr_ctx_error(t->ctx, CR_EMISUSE,
                            "%s: the tape was not created with CR_TAPE_SECOND_ORDER", who);
    size_t nn;
    if (hess && (st = cr__ck_mul(t->ctx, who, n, n, &nn)) != CR_OK) /* before xs is read */
        return st;
    if (n > 0 && (xs == NULL || (hess ? H == NULL : v == NULL || hv == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s is NULL", who,
                            xs == NULL  ? "xs"
                            : hess      ? "H"
                            : v == NULL ? "v"
                                        : "hv");
    if ((st = cr__check_vars(t, who, &y, 1, "output")) != CR_OK ||
        (st = cr__check_vars(t, who, xs, n, "input")) != CR_OK ||
        (v != NULL && (st = cr__check_finite(t, who, v, n, "direction")) != CR_OK))
        return st;
    if (y.idx == CR_VAR_CONST) {
        for (size_t j = 0; j < n; j++) {
            if (hv != NULL)
                hv[j] = 0.0;
            if (grad != NULL)
                grad[j] = 0.0;
            for (size_t l = 0; l < n && H != NULL; l++)
                H[j * n + l] = 0.0;
        }
        return CR_OK;
    }
    size_t top = cr__sweep_top(t, (size_t)y.idx + 1);
    size_t k = H != NULL ? (n < HESS_CHUNK ? (n ? n : 1) : HESS_CHUNK) : 1;
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    double *adj = cr__sweep_workspace(t, top, &st), *tan = NULL, *adjd = NULL;
    if (adj != NULL)
        tan = cr__sweep_workspace(t, top * k, &st);
    if (tan != NULL)
        adjd = cr__sweep_workspace(t, top * k, &st);
    if (adjd == NULL) {
        cr_arena_rewind(t->arena, mk);
        return st;
    }
    if (H == NULL) {
        for (size_t j = 0; j < n; j++) /* variables at or above top do not reach y */
            if (xs[j].idx != CR_VAR_CONST && xs[j].idx < top)
                tan[xs[j].idx] += v[j];
        if (t->avars.n != 0) /* array variables (array_slots.c) */
            st = cr__array_sweep_begin(t, 1, true);
        if (st == CR_OK)
            st = cr__sweep_forward(t, tan, 1, top, true);
        adj[y.idx] = 1.0;
        if (st == CR_OK)
            st = cr__sweep_second(t, adj, adjd, tan, 1, top);
        if (st == CR_OK) {
            gather(adjd, top, xs, n, 1, 0, hv);
            if (grad != NULL)
                gather(adj, top, xs, n, 1, 0, grad);
        }
        cr__array_sweep_end(t);
    } else {
        for (size_t c0 = 0; c0 < n && st == CR_OK; c0 += k) {
            size_t kk = n - c0 < k ? n - c0 : k;
            cr_arena_mark mc = cr_arena_get_mark(t->arena); /* array tangents of the chunk */
            memset(tan, 0, top * k * sizeof *tan);
            memset(adjd, 0, top * k * sizeof *adjd);
            memset(adj, 0, top * sizeof *adj);
            for (size_t d = 0; d < kk; d++)
                if (xs[c0 + d].idx != CR_VAR_CONST && xs[c0 + d].idx < top)
                    tan[(size_t)xs[c0 + d].idx * k + d] += 1.0;
            if (t->avars.n != 0)
                st = cr__array_sweep_begin(t, k, true);
            if (st == CR_OK)
                st = cr__sweep_forward(t, tan, k, top, true);
            adj[y.idx] = 1.0;
            if (st == CR_OK)
                st = cr__sweep_second(t, adj, adjd, tan, k, top);
            for (size_t d = 0; d < kk && st == CR_OK; d++) {
                double col[1];
                for (size_t j = 0; j < n; j++) {
                    gather(adjd, top, &xs[j], 1, k, d, col);
                    H[j * n + c0 + d] = col[0];
                }
            }
            cr__array_sweep_end(t);
            cr_arena_rewind(t->arena, mc);
        }
    }
    cr_arena_rewind(t->arena, mk);
    return st;
}

cr_status cr_tape_hvp(cr_tape *t, cr_var y, const cr_var *xs, size_t n, const double *v, double *hv,
                      double *grad)
{
    return second_order(t, "cr_tape_hvp", false, y, xs, n, v, hv, grad, NULL);
}

cr_status cr_tape_hessian(cr_tape *t, cr_var y, const cr_var *xs, size_t n, double *H)
{
    return second_order(t, "cr_tape_hessian", true, y, xs, n, NULL, NULL, NULL, H);
}

/* The gradient of y with respect to the recording's first n variables, its inputs when
 * cr__tape_record made them (input j is variable j): cr_tape_gradient() without checking
 * and gathering n input variables one by one. */
static cr_status gradient_first(cr_tape *t, cr_var y, size_t n, double *grad)
{
    cr_status st = cr__check_vars(t, "cr_tape_value_and_gradient", &y, 1, "output");
    if (st != CR_OK)
        return st;
    size_t top = y.idx == CR_VAR_CONST ? 0 : cr__sweep_top(t, (size_t)y.idx + 1);
    double small[SMALL_WS];
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    double *adj = small, *kept = NULL;
    size_t in_hi = 0;
    bool general = false;
    /* The inputs are the first record's (cr__tape_record), so the kept workspace serves. */
    if (top <= SMALL_WS)
        memset(small, 0, top * sizeof *small);
    else if ((adj = kept = kept_ws(t, top)) == NULL &&
             (adj = cr__sweep_workspace(t, top, &st)) == NULL)
        return st;
    if (top > 0) {
        adj[y.idx] = 1.0;
        st = sweep_reverse(t, adj, top, kept != NULL, &in_hi, &general);
    }
    if (st == CR_OK) {
        size_t k = n < top ? n : top;
        memcpy(grad, adj, k * sizeof *grad);
        memset(grad + k, 0, (n - k) * sizeof *grad);
    }
    if (kept != NULL && st == CR_OK)
        kept_ws_done(t, kept, in_hi, general);
    if (adj != small && kept == NULL)
        cr_arena_rewind(t->arena, mk);
    return st;
}

cr_status cr_tape_value_and_gradient(cr_tape *t, cr_ad_fn f, void *env, const double *x, size_t n,
                                     double *y, double *grad)
{
    if (t == NULL)
        return CR_EINVAL;
    if (f == NULL || (n > 0 && (x == NULL || grad == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "cr_tape_value_and_gradient: %s is NULL",
                            f == NULL   ? "f"
                            : x == NULL ? "x"
                                        : "grad");
    cr_var out, small[16], *xs = n <= 16 ? small : NULL;
    cr_status st = cr__tape_record(t, f, env, x, n, &xs, &out, 1);
    if (st != CR_OK)
        return st;
    if (y != NULL)
        *y = out.v;
    /* Unless f reset the tape (then the inputs are foreign: CR_ETAPE), input j is variable j. */
    if (n > 0 && xs[0].tape == t->id && xs[n - 1].idx == n - 1)
        return gradient_first(t, out, n, grad);
    return cr_tape_gradient(t, out, xs, n, grad);
}
