/*
 * The tape's sweeps: reverse (gradients, vector-Jacobian products, Jacobians), forward
 * (Jacobian-vector products) and second order (Hessian-vector products: a forward sweep of
 * tangents, then a reverse sweep of adjoints and their tangents). The record layout is
 * described in tape_impl.h.
 */
#include <string.h>

#include "tape_impl.h"

/* Operand j of an n-ary record whose packed operands start at ops. */
static inline uint32_t nary_op(const cr__word *ops, size_t j)
{
    uint64_t w = ops[j / 2].u;
    return (uint32_t)((j & 1) ? (w >> 32) : (w & 0xFFFFFFFFu));
}

static cr_status generic_failed(cr_tape *t, const cr__gen_node *nd, cr_status st)
{
    const char *msg = cr_ctx_errmsg(t->ctx);
    return cr__tape_fail(t, st, "pullback %s (of %s) failed: %s", nd->pb.name, nd->fname,
                         msg[0] != '\0' ? cr__after_name(msg, nd->fname) : cr_status_str(st));
}

/* ---- First-order tapes: the scalar kinds in a tight loop --------------------------------- */

/*
 * Dispatch of the scalar loop. With GCC and Clang each step ends with its own indirect
 * jump through a table of label addresses (threaded code, as CPython's ceval and Lua's
 * lvm.c do): one taken branch per record instead of three (the switch's jump, the jump
 * back to the loop's test and the jump to its top), and one branch history per kind, so
 * that the jump to the next record's step is predicted from the step that precedes it.
 * Elsewhere the same steps are the cases of a switch. On Rosenbrock's scalar loop the
 * threaded form takes about a quarter less time per record.
 */
#if defined(__GNUC__) && !defined(CR_SWEEP_SWITCH)
#define SWEEP_THREADED 1
#else
#define SWEEP_THREADED 0
#endif

/* sweep_scalar, and sweep_scalar_consume which leaves the adjoints it reads at zero
 * (sweep_scalar.h). */
#define SWEEP_NAME    sweep_scalar
#define SWEEP_CONSUME 0
#include "sweep_scalar.h"
#undef SWEEP_NAME
#undef SWEEP_CONSUME
#define SWEEP_NAME    sweep_scalar_consume
#define SWEEP_CONSUME 1
#include "sweep_scalar.h"
#undef SWEEP_NAME
#undef SWEEP_CONSUME

/* cr__sweep_reverse; with consume, the scalar loop leaves the adjoints it reads at zero
 * (sweep_scalar_consume: *in_hi, 0 on entry, receives the end of the highest input record's
 * variables) and *general tells whether any record went through the general loop, whose
 * adjoints are left as they are. */
static cr_status sweep_reverse(cr_tape *t, double *adj, size_t top, bool consume, size_t *in_hi,
                               bool *general)
{
    size_t i = t->nvars;
    const size_t pre = t->pre;
    if (t->naslots != 0 && !t->aseeded)
        cr__array_clear(t);
    for (cr__chunk *c = t->chunk; c != NULL; c = c->prev) {
        const cr__word *p = c == t->chunk ? t->cur : c->end;
        const cr__word *base = c->base;
        /* Records of variables at or above top cannot reach the seeds. */
        while (p > base && i > top) {
            uint64_t h = p[-1].u;
            if (i - rec_vars(h) < top)
                break;
            i -= rec_vars(h);
            p -= rec_words(h) + pre;
        }
        while (p > base) {
            if (pre == 0 && (p = consume ? sweep_scalar_consume(p, base, adj, &i, in_hi)
                                         : sweep_scalar(p, base, adj, &i, in_hi)) == base)
                break;
            uint64_t h = p[-1].u;
            uint32_t a = hdr_a(h);
            if (hdr_kind(h) != K_INPUT && hdr_kind(h) != K_GUARD)
                *general = true;
            switch (hdr_kind(h)) {
            case K_INPUT:
                if (consume && *in_hi == 0)
                    *in_hi = i;
                i -= a;
                p -= 1 + pre;
                break;
            case K_GUARD:
                p -= 1 + pre;
                break;
            case K_UNARY: {
                double g = adj[--i];
                adj[a] += p[-2].d * g;
                p -= 2 + pre;
                break;
            }
            case K_UNARY2: {
                double g = adj[--i];
                adj[a] += p[-2].d * g;
                p -= 3 + pre;
                break;
            }
            case K_BINARY:
            case K_MUL: {
                double g = adj[--i];
                adj[a] += p[-3].d * g;
                adj[hdr_b(h)] += p[-2].d * g;
                p -= 3 + pre;
                break;
            }
            case K_BINARY2: {
                double g = adj[--i];
                adj[a] += p[-3].d * g;
                adj[hdr_b(h)] += p[-2].d * g;
                p -= 6 + pre;
                break;
            }
            case K_ADD: {
                double g = adj[--i];
                adj[a] += g;
                adj[hdr_b(h)] += g;
                p -= 1 + pre;
                break;
            }
            case K_SUB: {
                double g = adj[--i];
                adj[a] += g;
                adj[hdr_b(h)] -= g;
                p -= 1 + pre;
                break;
            }
            case K_COPY:
                adj[a] += adj[--i];
                p -= 1 + pre;
                break;
            case K_NEG:
                adj[a] -= adj[--i];
                p -= 1 + pre;
                break;
            case K_NARY:
            case K_NARY2: {
                double g = adj[--i];
                size_t k = a, nops = (k + 1) / 2;
                const cr__word *ops = p - 1 - nops, *pp = ops - k;
                for (size_t j = 0; j < k; j++)
                    adj[nary_op(ops, j)] += pp[j].d * g;
                p -= rec_words(h) + pre;
                break;
            }
            case K_GENERIC: {
                const cr__gen_node *nd = p[-2].p;
                i -= nd->nout;
                cr_status st = cr__generic_pull(t, nd, &adj[i], adj);
                if (st != CR_OK)
                    return generic_failed(t, nd, st);
                p -= 2 + pre;
                break;
            }
            case K_ARRAY: {
                const cr__anode *nd = p[-2].p;
                i -= a;
                /* a record with its own reverse step (a fused kernel) is called directly */
                const double *g = a ? &adj[i] : NULL;
                cr_status st = nd->ops->pull(t, nd, g, adj);
                if (st != CR_OK)
                    return st;
                p -= 2 + pre;
                break;
            }
            default:
                return cr__tape_fail(t, CR_EINVAL, "tape: corrupt record (kind %u)", hdr_kind(h));
            }
        }
    }
    return CR_OK;
}

cr_status cr__sweep_reverse(cr_tape *t, double *adj, size_t top)
{
    size_t in_hi = 0;
    bool general = false;
    return sweep_reverse(t, adj, top, false, &in_hi, &general);
}

static ALWAYS_INLINE cr_status forward_k(cr_tape *t, double *tan, size_t k, size_t top,
                                         bool out_unread)
{
    size_t i = 0;
    const size_t pre = t->pre;
    for (cr__chunk *c = t->first; c != NULL && i < top; c = c->next) {
        const cr__word *p = c->base;
        const cr__word *end = c == t->chunk ? t->cur : c->end;
        while (p < end && i < top) {
            uint64_t h = p[0].u;
            const cr__word *pl = p + pre; /* payload */
            size_t a = hdr_a(h), b = hdr_b(h);
            double *ti = tan + i * k;
            const double *ta = tan + a * k, *tb = tan + b * k;
            switch (hdr_kind(h)) {
            case K_INPUT:
            case K_GUARD:
                break;
            case K_UNARY:
                for (size_t d = 0; d < k; d++)
                    ti[d] += pl[0].d * ta[d];
                break;
            case K_UNARY2:
                for (size_t d = 0; d < k; d++)
                    ti[d] += pl[1].d * ta[d];
                break;
            case K_BINARY:
            case K_MUL:
                for (size_t d = 0; d < k; d++)
                    ti[d] += pl[0].d * ta[d] + pl[1].d * tb[d];
                break;
            case K_BINARY2:
                for (size_t d = 0; d < k; d++)
                    ti[d] += pl[3].d * ta[d] + pl[4].d * tb[d];
                break;
            case K_ADD:
                for (size_t d = 0; d < k; d++)
                    ti[d] += ta[d] + tb[d];
                break;
            case K_SUB:
                for (size_t d = 0; d < k; d++)
                    ti[d] += ta[d] - tb[d];
                break;
            case K_COPY:
                for (size_t d = 0; d < k; d++)
                    ti[d] += ta[d];
                break;
            case K_NEG:
                for (size_t d = 0; d < k; d++)
                    ti[d] -= ta[d];
                break;
            case K_NARY:
            case K_NARY2: {
                size_t n = a, ntri = hdr_kind(h) == K_NARY2 ? n * (n + 1) / 2 : 0;
                const cr__word *pp = pl + ntri, *ops = pp + n;
                for (size_t j = 0; j < n; j++) {
                    const double *tj = tan + (size_t)nary_op(ops, j) * k;
                    for (size_t d = 0; d < k; d++)
                        ti[d] += pp[j].d * tj[d];
                }
                break;
            }
            case K_GENERIC: {
                const cr__gen_node *nd = pl[0].p;
                cr_arena_mark mk = cr_arena_get_mark(t->arena);
                double *J = cr_arena_alloc(
                    t->arena, (size_t)nd->nout * (nd->nargs ? nd->nargs : 1) * sizeof *J,
                    _Alignof(double));
                cr_status st =
                    J == NULL ? CR__ALLOC_STATUS(t->arena) : cr__generic_jacobian(t, nd, J);
                if (st != CR_OK) {
                    cr_arena_rewind(t->arena, mk);
                    return generic_failed(t, nd, st);
                }
                for (size_t o = 0; o < nd->nout; o++)
                    for (size_t j = 0; j < nd->nargs; j++) {
                        if (nd->args[j] == CR_VAR_CONST)
                            continue;
                        const double *tj = tan + (size_t)nd->args[j] * k;
                        double Jo = J[o * nd->nargs + j];
                        for (size_t d = 0; d < k; d++)
                            ti[o * k + d] += Jo * tj[d];
                    }
                cr_arena_rewind(t->arena, mk);
                break;
            }
            case K_ARRAY: {
                /* The output's record, when its tangents go unread (out_unread), is left
                 * out if it is a fused kernel: its second-order step reads its arguments'
                 * tangents only, and the records that read its results come after top
                 * (it makes variables: i < top). */
                if (out_unread && i + rec_vars(h) == top &&
                    ((const cr__anode *)pl[0].p)->pull != NULL)
                    break;
                const cr__anode *nd = pl[0].p;
                cr_status st = nd->ops->forward(t, nd, tan, k, i);
                if (st != CR_OK)
                    return st;
                break;
            }
            default:
                return cr__tape_fail(t, CR_EINVAL, "tape: corrupt record (kind %u)", hdr_kind(h));
            }
            i += rec_vars(h);
            p += pre + rec_words(h);
        }
    }
    return CR_OK;
}

cr_status cr__sweep_forward(cr_tape *t, double *tan, size_t k, size_t top, bool out_unread)
{
    /* One direction (jvp, hvp) gets its own copy of the loop, without the inner loops. */
    if (k == 1)
        return forward_k(t, tan, 1, top, out_unread);
    return forward_k(t, tan, k, top, out_unread);
}

/*
 * The second-order reverse sweep (forward-over-reverse): with the tangents tan of every
 * variable along k directions (from cr__sweep_forward), propagate the adjoints adj and
 * their directional derivatives adjd. For a record r = f(x) with partials p and Hessian H:
 *     adj[x_j]  += p_j g
 *     adjd[x_j] += p_j gd + g * sum_l H_jl tan[x_l]
 * Second-order tapes hold no GENERIC records (refused when recording); K_ARRAY records
 * are handed to the record kind's steps (cr__anode_ops).
 */
static ALWAYS_INLINE cr_status sweep_second_k(cr_tape *t, double *adj, double *adjd,
                                              const double *tan, size_t k, size_t top)
{
    size_t i = t->nvars;
    for (cr__chunk *c = t->chunk; c != NULL; c = c->prev) {
        const cr__word *p = c == t->chunk ? t->cur : c->end;
        const cr__word *base = c->base;
        while (p > base && i > top) {
            uint64_t h = p[-1].u;
            i -= rec_vars(h);
            p -= rec_words(h) + 1;
        }
        while (p > base) {
            uint64_t h = p[-1].u;
            size_t a = hdr_a(h), b = hdr_b(h);
            unsigned kind = hdr_kind(h);
            if (kind == K_GENERIC)
                return cr__tape_fail(t, CR_EINVAL, "tape: pullback record on a second-order tape");
            if (kind == K_INPUT) { /* a inputs (one per record on these tapes) */
                i -= a;
                p -= 1 + 1;
                continue;
            }
            if (kind == K_ARRAY) {
                i -= a;
                const cr__anode *nd = p[-2].p;
                cr_status st = nd->ops->pull2(t, nd, i, adj, adjd, tan, k);
                if (st != CR_OK)
                    return st;
                p -= rec_words(h) + 1;
                continue;
            }
            i--;
            double g = adj[i];
            const double *gd = adjd + i * k;
            const double *ta = tan + a * k, *tb = tan + b * k;
            double *da = adjd + a * k, *db = adjd + b * k;
            switch (kind) {
            case K_UNARY: {
                double p0 = p[-2].d;
                adj[a] += p0 * g;
                for (size_t d = 0; d < k; d++)
                    da[d] += p0 * gd[d];
                break;
            }
            case K_UNARY2: {
                double p0 = p[-2].d, h00 = p[-3].d * g;
                adj[a] += p0 * g;
                for (size_t d = 0; d < k; d++)
                    da[d] += p0 * gd[d] + h00 * ta[d];
                break;
            }
            case K_BINARY: {
                double p0 = p[-3].d, p1 = p[-2].d;
                adj[a] += p0 * g;
                adj[b] += p1 * g;
                for (size_t d = 0; d < k; d++) {
                    da[d] += p0 * gd[d];
                    db[d] += p1 * gd[d];
                }
                break;
            }
            case K_MUL: {
                double p0 = p[-3].d, p1 = p[-2].d;
                adj[a] += p0 * g;
                adj[b] += p1 * g;
                for (size_t d = 0; d < k; d++) {
                    double ta_d = ta[d], tb_d = tb[d];
                    da[d] += p0 * gd[d] + g * tb_d;
                    db[d] += p1 * gd[d] + g * ta_d;
                }
                break;
            }
            case K_BINARY2: {
                double p0 = p[-3].d, p1 = p[-2].d;
                double h00 = p[-6].d * g, h01 = p[-5].d * g, h11 = p[-4].d * g;
                adj[a] += p0 * g;
                adj[b] += p1 * g;
                for (size_t d = 0; d < k; d++) {
                    double ta_d = ta[d], tb_d = tb[d];
                    da[d] += p0 * gd[d] + h00 * ta_d + h01 * tb_d;
                    db[d] += p1 * gd[d] + h01 * ta_d + h11 * tb_d;
                }
                break;
            }
            case K_ADD:
                adj[a] += g;
                adj[b] += g;
                for (size_t d = 0; d < k; d++) {
                    da[d] += gd[d];
                    db[d] += gd[d];
                }
                break;
            case K_SUB:
                adj[a] += g;
                adj[b] -= g;
                for (size_t d = 0; d < k; d++) {
                    da[d] += gd[d];
                    db[d] -= gd[d];
                }
                break;
            case K_COPY:
                adj[a] += g;
                for (size_t d = 0; d < k; d++)
                    da[d] += gd[d];
                break;
            case K_NEG:
                adj[a] -= g;
                for (size_t d = 0; d < k; d++)
                    da[d] -= gd[d];
                break;
            case K_NARY:
            case K_NARY2: {
                size_t n = a, nops = (n + 1) / 2;
                const cr__word *ops = p - 1 - nops, *pp = ops - n;
                for (size_t j = 0; j < n; j++) {
                    size_t xj = nary_op(ops, j);
                    adj[xj] += pp[j].d * g;
                    for (size_t d = 0; d < k; d++)
                        adjd[xj * k + d] += pp[j].d * gd[d];
                }
                if (kind == K_NARY2) {
                    /* the upper triangle, row by row */
                    const cr__word *tri = pp - n * (n + 1) / 2;
                    size_t q = 0;
                    for (size_t j = 0; j < n; j++)
                        for (size_t l = j; l < n; l++, q++) {
                            double hjl = tri[q].d * g;
                            size_t xj = nary_op(ops, j), xl = nary_op(ops, l);
                            for (size_t d = 0; d < k; d++) {
                                adjd[xj * k + d] += hjl * tan[xl * k + d];
                                if (l != j)
                                    adjd[xl * k + d] += hjl * tan[xj * k + d];
                            }
                        }
                }
                break;
            }
            default:
                return cr__tape_fail(t, CR_EINVAL, "tape: corrupt record (kind %u)", kind);
            }
            p -= rec_words(h) + 1;
        }
    }
    return CR_OK;
}

static cr_status sweep_second_1(cr_tape *t, double *adj, double *adjd, const double *tan,
                                size_t top)
{
    return sweep_second_k(t, adj, adjd, tan, 1, top);
}

static cr_status sweep_second_n(cr_tape *t, double *adj, double *adjd, const double *tan, size_t k,
                                size_t top)
{
    return sweep_second_k(t, adj, adjd, tan, k, top);
}

cr_status cr__sweep_second(cr_tape *t, double *adj, double *adjd, const double *tan, size_t k,
                           size_t top)
{
    return k == 1 ? sweep_second_1(t, adj, adjd, tan, top)
                  : sweep_second_n(t, adj, adjd, tan, k, top);
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
    if (t->rec_open) /* the variable may be the cursor's, made since it last left the library */
        return cursor_open(t, who);
    size_t have = arr ? t->naslots : t->nvars;
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
    if (t->own_chunk == NULL || t->pre != 0)
        return NULL;
    if (top > t->ws_cap) {
        double *w = cr__alloc_quiet(t->ctx, top * sizeof *w);
        if (w == NULL)
            return NULL;
        cr_ctx_dealloc(t->ctx, t->ws, t->ws_cap * sizeof *t->ws);
        t->ws = w;
        t->ws_cap = top;
        t->ws_dirty = top;
    }
    memset(t->ws, 0, t->ws_dirty * sizeof *t->ws);
    /* Whatever happens next may leave it dirty; kept_ws_done says otherwise. */
    t->ws_dirty = top;
    return t->ws;
}

/* After a consuming sweep over the kept workspace w (kept_ws) that succeeded and whose
 * adjoints were read: the sweep left only the inputs' adjoints nonzero, below in_hi, unless
 * a record went through the general loop (general), whose adjoints it leaves as they are. */
static void kept_ws_done(cr_tape *t, double *w, size_t in_hi, bool general)
{
    if (general)
        return;
    memset(w, 0, in_hi * sizeof *w);
    t->ws_dirty = 0;
}

/* Whether every variable of v[0..n) is a constant or one of the inputs of the recording's
 * first record: those are the adjoints a consuming sweep keeps. */
static bool first_inputs(const cr_tape *t, const cr_var *v, size_t n)
{
    const cr__chunk *c = t->first;
    if (c == NULL || t->pre != 0 || (c == t->chunk && t->cur == c->base) ||
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
    for (const cr__chunk *c = t->chunk; c != NULL && i > top; c = c->prev) {
        const cr__word *p = c == t->chunk ? t->cur : c->end;
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
    if (t == NULL)
        return CR_EINVAL;
    if (cr__tape_misused(t))
        return CR_EMISUSE;
    if (t->status != CR_OK)
        return t->status;
    if (t->rec_open)
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
    if (t->naslots != 0) /* array variables' tangents (array_slots.c) */
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
        if (t->naslots != 0) /* array variables (array_slots.c) */
            st = cr__array_sweep_begin(t, 1, true);
        if (st == CR_OK)
            st = cr__sweep_forward(t, tan, 1, top, true);
        adj[y.idx] = 1.0;
        if (st == CR_OK)
            st = sweep_second_1(t, adj, adjd, tan, top);
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
            if (t->naslots != 0)
                st = cr__array_sweep_begin(t, k, true);
            if (st == CR_OK)
                st = cr__sweep_forward(t, tan, k, top, true);
            adj[y.idx] = 1.0;
            if (st == CR_OK)
                st = sweep_second_n(t, adj, adjd, tan, k, top);
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
